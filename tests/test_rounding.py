"""results.rounding: the rounding question with its noise draws (methods.md, Model regime, addendum 2026-12-07 §5)."""

import numpy as np
import pytest
from docgrad.results import rounding as rd
from docgrad.results import synthetic as syn
from docgrad.results.cells import load_cells


@pytest.fixture(scope="module")
def code_cell(tmp_path_factory):
    root = tmp_path_factory.mktemp("crn")
    syn.write_cell(root, model="o/m", revision="r", corpus="CODE", profile=syn.DEFAULT_PROFILES["CODE"], n_docs=16,
                   shard_size=16)
    cell = next(iter(load_cells(root, docs=(0, 16)).values()))
    for sh in cell.shards:                   # synthetic files record no spans: the same one for every document
        sh.meta["spans_sha256"] = {str(d): f"span{d}" for d in cell.doc_ids}
    return cell


def test_a_cell_over_more_documents_is_read_on_the_first_eight_with_zero_counts_elsewhere(code_cell):
    counts = np.arange(16, dtype=float).reshape(2, 8)
    out = rd.document_counts(code_cell, list(range(8)), counts)
    assert out.shape == (2, 16) and np.array_equal(out[:, :8], counts) and not out[:, 8:].any()
    with pytest.raises(ValueError, match="documents \\[20\\] are not in the cell"):
        rd.document_counts(code_cell, [20], counts[:, :1])


def test_the_extrapolant_averages_the_draws_and_its_interval_resamples_them():
    R0 = np.full(5, 2.0)
    R = np.zeros((5, 2, 3))
    R[:, 0] = [1.8, 1.9, 2.0]                 # lambda 1: theta 1.9
    R[:, 1] = [1.6, 1.7, 1.8]                 # lambda 2: theta 1.7
    point, draws, each = rd.crn_change(R0, R, np.random.default_rng(0))
    assert point == pytest.approx((3 * 2.0 - 3 * 1.9 + 1.7) / 2.0 - 1)
    assert each == pytest.approx([0.1, 0.0, -0.1])                      # (6 - 3 R1 + R2) / 2 - 1, draw by draw
    assert draws.shape == (4,) and draws.min() >= min(each) - 1e-12 and draws.max() <= max(each) + 1e-12
    same = np.repeat(R[:, :, :1], 3, axis=2)  # three identical draws: no spread from the draws
    assert np.allclose(rd.crn_change(R0, same, np.random.default_rng(0))[1], each[0])


def test_identical_cells_at_every_lambda_read_no_change_and_a_missing_cell_reads_nothing(code_cell):
    found = {(c, r): code_cell for c in ("CODE",) for _, _, r in rd.crn_regimes()}
    half = rd.read_crn_rounding(found, {"CODE": code_cell}, resamples=50, seed=1)
    assert half["complete"] is False and ("WEB", "simex1-s11") in half["missing"] and "changes" not in half
    web = {("WEB", r): code_cell for _, _, r in rd.crn_regimes()}
    full = rd.read_crn_rounding({**found, **web}, {"CODE": code_cell, "WEB": code_cell}, resamples=50, seed=1)
    assert full["complete"] and full["draws"] == 3 and full["n_docs"] == 8
    point, draws = full["changes"]["CODE"]
    assert point == pytest.approx(0.0, abs=1e-12) and np.allclose(draws, 0.0, atol=1e-12)
    assert full["each_draw"]["WEB"] == pytest.approx([0.0] * 3, abs=1e-12)


def test_the_page_says_how_many_draw_cells_are_in_then_each_corpus_with_its_draws():
    from docgrad.presentation.regime import crn_sentence

    half = {"complete": False, "present": [("CODE", "simex1-s11")],
            "missing": [("CODE", r) for _, _, r in rd.crn_regimes()][1:] + [("WEB", r) for _, _, r in rd.crn_regimes()]}
    assert crn_sentence(half).startswith("Rounding with its draws: 1 of 12 common-random-number cells committed")
    full = {"complete": True, "draws": 3, "n_docs": 8, "each_draw": {"WEB": [0.1, 0.0, -0.1]},
            "R": {"WEB": {"delta": -0.05, "ci": [-0.2, 0.12], "decision": "not resolved"}}}
    assert crn_sentence(full) == ("Rounding with its draws (3 per \u03bb, 8 documents, Holm-level intervals over "
                                  "documents and draws): WEB \u22125.0% [\u221220.0%, +12.0%] (not resolved; each draw "
                                  "alone +10.0%, +0.0%, \u221210.0%). With 3 draws the interval understates the "
                                  "draws' variance by about a third.")


def test_the_figure_rows_extrapolate_each_draw_and_their_mean_to_the_deltas_the_reading_decides_on():
    values = {"CODE": {"lambda0": 2.0, "lambda1": [1.8, 1.9, 2.0], "lambda2": [1.6, 1.7, 1.8]}}
    rows = rd.crn_curve_rows(values)
    unrounded = {r["draw"]: r["R"] for r in rows if r["kind"] == "unrounded"}
    assert sorted(unrounded) == ["mean", "seed 11", "seed 12", "seed 13"]
    each = [unrounded[f"seed {s}"] / 2.0 - 1 for s in rd.CRN_SEEDS]
    assert each == pytest.approx([0.1, 0.0, -0.1])                      # crn_change's own each-draw deltas
    assert unrounded["mean"] == pytest.approx(3 * 2.0 - 3 * 1.9 + 1.7)
    measured = [r for r in rows if r["draw"] == "seed 12" and r["kind"] == "measured"]
    assert [(r["lambda"], r["R"]) for r in measured] == [(0, 2.0), (1, 1.9), (2, 1.7)]
    curve = {r["lambda"]: r["R"] for r in rows if r["draw"] == "seed 12" and r["kind"] == "quadratic"}
    assert curve[-1.0] == pytest.approx(unrounded["seed 12"]) and curve[1.0] == pytest.approx(1.9)   # through them
