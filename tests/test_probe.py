"""The probe on a tiny model: the numbers it writes, resume, refusals, non-finite stops, two-process runs, CLI.
(State, lock and argument refusals: test_probe_state.py.)"""

import hashlib
import os
import subprocess
import sys
from dataclasses import replace
from dataclasses import replace as dc_replace
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from docgrad.core.groups import named_parameter_groups
from docgrad.core.sketch import hash_of
from docgrad.measure import gradients as GR
from docgrad.measure import probe as P
from docgrad.measure import probe_config as PC
from docgrad.measure import resume as RS
from docgrad.measure import probe_bench
from docgrad.models import tiny_model
from docgrad.results.format import GROUPS, load_result

torch.set_num_threads(1)
CHUNK, M, B = 16, 3, 64
CONFIG = PC.ProbeConfig(model="tiny", revision="r0", corpus="T", chunk=CHUNK, buckets=B, seed=4, pin={"model": "tiny"})


def spans(n=3, seed=0, tail=0):
    rng = np.random.default_rng(seed)
    out = []
    for d in range(n):
        t = rng.integers(0, 256, size=CHUNK * M + tail)
        out.append((d, t, hashlib.sha256(t.astype("<i4").tobytes()).hexdigest()))
    return out


def run(tmp, model=None, config=CONFIG, exact_ref=False, **kw):
    model = model or tiny_model("llama", seed=1)
    kw.setdefault("progress", False)
    config = replace(config, exact_ref=exact_ref) if exact_ref else config
    return P.run_probe(model, kw.pop("spans", spans()), Path(tmp) / "T_c16_d0-3.npz", config, **kw)


def arrays(path):
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def test_result_equals_direct_gradients_sketched_by_the_explicit_hash(tmp_path):
    path = run(tmp_path, exact_ref=True)
    sh = load_result(path, groups=GROUPS)
    model = tiny_model("llama", seed=1)
    named = named_parameter_groups(model)
    assert "lm_head.weight" not in [n for n, _, _ in named]               # tied: counted once, as embed
    X = {g: [] for g in GROUPS}
    SQ = {g: [] for g in GROUPS}
    flat, losses = [], []
    for d, t, _ in spans():
        for k in range(M):
            ids = torch.as_tensor(t[k * CHUNK:(k + 1) * CHUNK])
            loss = F.cross_entropy(model(input_ids=ids[None]).logits[0, :-1], ids[1:])
            grads = torch.autograd.grad(loss, [p for _, p, _ in named])
            losses.append(float(loss.detach()))
            flat.append(torch.cat([gr.reshape(-1) for gr in grads]).double().numpy())
            for g in GROUPS:
                v = np.zeros(B)
                for (n, p, grp), gr in zip(named, grads):
                    if grp == g:
                        h, s = hash_of(4, n, tuple(p.shape), B)
                        v += np.bincount(h, weights=s * gr.reshape(-1).double().numpy(), minlength=B)
                X[g].append(v)
                SQ[g].append(sum(float((gr.double() ** 2).sum()) for (_, _, grp), gr in zip(named, grads) if grp == g))
    assert sh.index.tolist() == [[d, k] for d in range(3) for k in range(M)]
    np.testing.assert_allclose(sh.loss, losses, rtol=1e-6)
    for g in GROUPS:
        x = np.array(X[g])
        np.testing.assert_allclose(sh.gram[g], x @ x.T, rtol=2e-4, atol=1e-7 * np.abs(x @ x.T).max())
        np.testing.assert_allclose(sh.sqnorm[g], SQ[g], rtol=1e-5)
    flat = np.array(flat)
    total_sq = sum(sh.sqnorm[g] for g in GROUPS)
    np.testing.assert_allclose(total_sq, (flat ** 2).sum(1), rtol=1e-5)
    np.testing.assert_allclose(sh.exact_ref_dot, flat @ flat[0], rtol=1e-4, atol=1e-6 * (flat[0] @ flat[0]))
    assert sh.meta["exact_ref_row"] == 0 and sh.meta["args"]["corpus"] == "T"
    assert {k: sh.meta["args"][k] for k in ("model", "revision", "chunk", "docs", "buckets", "seed", "exact_ref",
                                            "dtype", "context")} == {
        "model": "tiny", "revision": "r0", "chunk": CHUNK, "docs": [0, 3], "buckets": B, "seed": 4, "exact_ref": True,
        "dtype": "float32", "context": "standalone"}
    assert sh.meta["pin"] == {"model": "tiny"} and sh.meta["chunks_per_document"] == M
    assert set(sh.meta["timings"]) >= {"load_s", "forward_backward_s", "sketch_s"}
    assert not RS.partial_dir(path).exists()


def test_resume_after_a_kill_writes_the_identical_file(tmp_path):
    full = run(tmp_path / "a")
    done = []

    def kill_after_first(doc):
        done.append(doc)
        if len(done) == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "b", on_document=kill_after_first)
    out_b = tmp_path / "b" / "T_c16_d0-3.npz"
    assert not out_b.exists() and (RS.partial_dir(out_b) / "doc_00000.npz").exists()
    resumed = run(tmp_path / "b", on_document=done.append)
    assert done == [0, 1, 2]                                     # document 0 was not recomputed
    a, b = arrays(full), arrays(resumed)
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    assert Path(full).read_bytes() == Path(resumed).read_bytes()


def test_other_arguments_against_partial_state_are_refused(tmp_path):
    def kill(doc):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, on_document=kill)
    with pytest.raises(PC.ProbeError, match="different arguments.*seed"):
        run(tmp_path, config=replace(CONFIG, seed=5))
    with pytest.raises(PC.ProbeError, match="different arguments.*spans"):
        run(tmp_path, spans=spans(seed=9))


def test_existing_result_is_not_overwritten_without_overwrite(tmp_path):
    path = run(tmp_path)
    before = path.read_bytes()
    with pytest.raises(FileExistsError, match="--overwrite"):
        run(tmp_path)
    assert path.read_bytes() == before
    run(tmp_path, overwrite=True)


def test_non_finite_loss_stops_naming_document_and_chunk_and_keeps_partial_state(tmp_path):
    model = tiny_model("llama", seed=1)

    def poison(doc):
        with torch.no_grad():
            model.model.norm.weight.fill_(float("nan"))

    with pytest.raises(P.NonFiniteError, match="document 1 chunk 0"):
        run(tmp_path, model=model, on_document=poison)
    assert (RS.partial_dir(tmp_path / "T_c16_d0-3.npz") / "doc_00000.npz").exists()


def test_gpt_neox_tiny_model_probes_with_all_groups(tmp_path):
    sh = load_result(run(tmp_path, model=tiny_model("gpt_neox", seed=0)), groups=GROUPS)
    assert all(sh.sqnorm[g].min() > 0 for g in GROUPS)


WORKER = """
import sys, torch
torch.set_num_threads(1)
import torch.distributed as dist
dist.init_process_group("gloo")
sys.path.insert(0, {tests!r})
from test_probe import run
from pathlib import Path
run(Path({out!r}), exact_ref=True)
dist.destroy_process_group()
"""


def test_two_cpu_processes_write_the_single_process_result(tmp_path):
    single = run(tmp_path / "single", exact_ref=True)
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(29500 + os.getpid() % 1000), WORLD_SIZE="2",
               OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    code = WORKER.format(tests=str(Path(__file__).parent), out=str(tmp_path / "multi"))
    procs = [subprocess.Popen([sys.executable, "-c", code], env=dict(env, RANK=str(r), LOCAL_RANK=str(r)),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for r in range(2)]
    logs = [p.communicate(timeout=300)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), logs
    a, b = arrays(single), arrays(tmp_path / "multi" / "T_c16_d0-3.npz")
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    assert load_result(tmp_path / "multi" / "T_c16_d0-3.npz").meta["world_size"] == 2


def offline_cli(monkeypatch, n_docs=4):
    """Make the CLI load the tiny Llama (pinned as org/tiny@main) and n_docs synthetic spans for any corpus."""
    from docgrad import models
    from docgrad.corpora import build as corpora

    class S:
        def __init__(self, d, t, h):
            self.doc, self.tokens, self.sha256 = d, t, h

    monkeypatch.setattr(models, "load_model", lambda *a, **k: tiny_model("llama", seed=1))
    monkeypatch.setattr(models, "model_pin", lambda m, r, a=False: {"model": "org/tiny", "revision": "main", "commit": None})
    monkeypatch.setattr(corpora, "load_spans", lambda c, m, cache: [S(*s) for s in spans(n_docs)])


def test_cli_writes_the_standard_path_and_refuses_to_overwrite(tmp_path, monkeypatch, capsys):
    from docgrad.runtime import cli

    offline_cli(monkeypatch)
    argv = ["probe", "--corpus", "t", "--docs", "1:3", "--chunk", str(CHUNK), "--buckets", str(B), "--out", str(tmp_path)]
    assert cli.main(argv) == 0
    path = tmp_path / "org__tiny" / "main" / "T_c16_d1-3.npz"
    sh = load_result(path)
    assert sh.documents.tolist() == [1, 2] and sh.meta["args"]["docs"] == [1, 3]
    assert cli.main(argv) == 2
    assert "--overwrite" in capsys.readouterr().err
    argv[4] = "2:5"
    assert cli.main(argv) == 2                      # a ProbeError is a DocgradError: one line, status 2
    assert "documents 4 are not in the corpus" in capsys.readouterr().err


def test_measure_chunks_exact_and_sketched_agree_at_many_buckets():
    model = tiny_model("llama", seed=1)
    chunks = [t[:CHUNK] for _, t, _ in spans(4)]
    res = probe_bench.measure_chunks(model, chunks, buckets=(4096, 8), seed=0, seed_style_coords=500)
    # chunk 0 against itself: exact dot = squared norm
    np.testing.assert_allclose(res["exact_ref_dot"][0], res["sqnorm"][0], rtol=1e-5)
    f = probe_bench.chunk_fidelity(res, 4096)            # tiny model: ~12k params, 4096 buckets -> small errors
    assert f["pairs"] == 3 and abs(f["mean_cosine_error"]) < 0.05
    coarse = probe_bench.chunk_fidelity(res, 8, per_group=True)
    fine = probe_bench.chunk_fidelity(res, 4096, per_group=True)
    assert fine["rms_cosine_error"] < coarse["rms_cosine_error"]
    assert res["seed_style_per_chunk_s"] > 0 and np.all(res["plain_fb_s"] > 0) and np.all(res["sketch_s"] > 0)


def test_bucket_sweep_speed_summary_and_sample_chunks():
    model = tiny_model("llama", seed=1)
    chunks = probe_bench.sample_chunks(spans(3), 5, CHUNK, documents=2)
    assert len(chunks) == 5 and np.array_equal(chunks[3], spans(3)[1][1][:CHUNK])
    res = probe_bench.measure_chunks(model, chunks, buckets=(256, 16, 64), seed=0)
    rows = probe_bench.bucket_sweep(res)
    assert [r["buckets"] for r in rows] == [16, 64, 256]
    assert rows[0]["theory_sd"] == pytest.approx(4 * rows[2]["theory_sd"])   # sqrt(256 / 16)
    sp = probe_bench.speed_summary(res)
    assert sp["ratio_probe_over_plain"] > 0 and "seed_style_sketch_s" not in sp


def test_storage_of_exact_gradients_vs_sketches():
    from docgrad.core.sketch import storage_bytes

    s = storage_bytes(2048, 134_515_008)
    assert s["exact_gradients"] == 4 * 2048 * 134_515_008        # ~1.1 TB
    assert s["sketches"] == 4 * 2048 * 4 * 2**17                  # ~4.3 GB


# --- chunk context: standalone, or BOS + chunk (Gemma) -------------------------------------------------

def test_bos_context_conditions_on_bos_and_keeps_the_same_targets(tmp_path):
    model = tiny_model("gemma3", seed=1)
    ids = torch.as_tensor(spans(1)[0][1][:CHUNK])
    with torch.no_grad():
        seq = torch.cat([torch.tensor([2]), ids])
        expected = F.cross_entropy(model(input_ids=seq[None]).logits[0, 1:-1], ids[1:])
        assert float(GR.chunk_loss(model, ids, bos_id=2)) == pytest.approx(float(expected), rel=1e-6)
        assert float(GR.chunk_loss(model, ids)) != pytest.approx(float(expected), rel=1e-6)
    cfg = replace(CONFIG, context="standalone-bos")
    path = run(tmp_path / "bos", model=model, config=cfg)
    sh = load_result(path, groups=GROUPS)
    assert sh.meta["args"]["context"] == "standalone-bos"
    with torch.no_grad():
        first = float(GR.chunk_loss(model, torch.as_tensor(spans()[0][1][:CHUNK]), bos_id=2))
    assert sh.loss[0] == pytest.approx(first, rel=1e-6)
    plain = load_result(run(tmp_path / "plain", model=model), groups=GROUPS)
    assert not np.allclose(plain.loss, sh.loss)
    assert cfg.bind(PC.as_doc_spans(spans()), "cpu").fingerprint()["context"] == "standalone-bos"


def test_bos_context_needs_a_model_with_a_bos_token():
    model = tiny_model("llama", seed=1)
    model.config.bos_token_id = None
    with pytest.raises(PC.ProbeError, match="no bos_token_id"):
        GR.context_bos(model, "standalone-bos")
    assert GR.context_bos(model, "standalone") is None


def test_cli_probes_an_offline_model_on_its_own_manifest_with_its_context(tmp_path, monkeypatch):
    import json

    from docgrad import models
    from docgrad.corpora import build as corpora
    from docgrad.runtime import cli

    class S:
        def __init__(self, d, t, h):
            self.doc, self.tokens, self.sha256 = d, t, h

    seen = {}
    monkeypatch.setattr(models, "load_model", lambda *a, **k: tiny_model("gemma3", seed=1))
    monkeypatch.setattr(models, "model_pin", lambda m, r, a=False: {"model": "google/gemma-3-270m",
                                                                   "revision": models.GEMMA3_270M.revision})
    monkeypatch.setattr(corpora, "load_spans", lambda c, m, cache: seen.setdefault("manifest", m) and [S(*s) for s in spans(2)])
    root = tmp_path / "root"
    man = root / models.GEMMA3_270M.corpora
    man.parent.mkdir(parents=True)
    man.write_text(json.dumps({"tokenizer": {"model": "google/gemma-3-270m", "gguf_sha256": models.GEMMA3_270M.sha256}}))
    argv = ["--root", str(root), "probe", "--model", "gemma3-270m", "--corpus", "t", "--docs", "0:2", "--chunk",
            str(CHUNK), "--buckets", str(B)]
    assert cli.main(argv) == 0
    assert seen["manifest"] == str(man)
    meta = load_result(root / "data" / "results" / models.GEMMA3_270M.results_dir / "T_c16_d0-2.npz").meta
    assert meta["args"]["context"] == "standalone-bos" and meta["args"]["model"] == "google/gemma-3-270m"


def test_cli_refuses_spans_cut_by_another_models_tokenizer_before_loading(tmp_path, monkeypatch, capsys):
    import json

    from docgrad import models
    from docgrad.runtime import cli

    monkeypatch.setattr(models, "load_model", lambda *a, **k: pytest.fail("the model must not load"))
    monkeypatch.setattr(models, "model_pin", lambda m, r, a=False: {"model": "google/gemma-3-270m", "revision": "r"})
    man = tmp_path / "manifest.json"
    man.write_text(json.dumps({"tokenizer": {"model": models.DEFAULT_MODEL, "gguf_sha256": models.GGUF_SHA256}}))
    argv = ["probe", "--model", "gemma3-270m", "--corpus", "WEB", "--manifest", str(man), "--out", str(tmp_path)]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "spans were cut by the tokenizer of 'HuggingFaceTB/SmolLM2-135M-Instruct'" in err
    assert "docgrad corpora build --model gemma3-270m" in err


def test_what_the_model_cannot_read_is_refused_before_the_first_chunk(tmp_path):
    """A vocabulary smaller than the tokenizer's ids died in F.embedding with a traceback; a chunk longer than the
    model's context was accepted for standalone chunks."""
    model = tiny_model("llama", seed=1)                   # vocabulary 256, context 1024
    big = [(d, np.where(np.arange(len(t)) == 5, 300, t), h) for d, t, h in spans()]
    with pytest.raises(P.ProbeError, match="document 0 holds token id 300, but the model's vocabulary has 256 ids"):
        P.run_probe(model, big, tmp_path / "a.npz", CONFIG, progress=False)
    model.config.max_position_embeddings = CHUNK - 1
    with pytest.raises(P.ProbeError, match=f"--chunk {CHUNK}: a chunk of {CHUNK} tokens exceeds the model's context"):
        P.run_probe(model, spans(), tmp_path / "b.npz", CONFIG, progress=False)
    assert not list(tmp_path.iterdir())                   # refused before anything was written


def test_a_run_too_big_for_the_disk_or_the_memory_is_refused_with_its_sizes(tmp_path, monkeypatch):
    """measure at --chunk 16 probed the control's 16K span: 1,024 chunks and a 2 GB partial file per document."""
    from docgrad.runtime import probe_command as PCMD

    big = dc_replace(CONFIG, chunk=16, buckets=2**17).bind(PC.as_doc_spans(spans(16, tail=16384 - CHUNK * M)), "cpu")
    need = PCMD.resource_needs(big)
    assert need["chunks"] == 16 * 1024 and need["disk"] == 16 * 1024 * 4 * 2**17 * 4     # 34 GB of sketches
    monkeypatch.setattr(PCMD.shutil, "disk_usage", lambda p: type("U", (), {"free": 2**30})())
    with pytest.raises(PC.ProbeError, match=r"16 documents x 1024 chunks of 16 tokens = 16384 chunks need 32\.0 GiB "
                                            r"of partial state under .*, which has 1\.0 GiB free"):
        PCMD.check_resources(big, tmp_path / "x.npz")
    monkeypatch.setattr(PCMD.shutil, "disk_usage", lambda p: type("U", (), {"free": 2**50})())
    monkeypatch.setattr(PCMD, "available_memory", lambda: 2**33)
    with pytest.raises(PC.ProbeError, match=r"need 42\.0 GiB of memory for their Gram matrices, and 8\.0 GiB is"):
        PCMD.check_resources(big, tmp_path / "x.npz")
    PCMD.check_resources(CONFIG.bind(PC.as_doc_spans(spans()), "cpu"), tmp_path / "x.npz")    # a small run passes
