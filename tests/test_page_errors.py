"""The smaller errors of the research pages (pages 02-06), each pinned twice where it can be: the library function
that now states the page's sentence or table, and the committed page (its executed notebook or JSON twin), so a
page published before the fix fails here.

02: G1's pair count per documents read, not '16 documents x 32 chunks'; 02-03b: tables at 3 significant figures, not
six decimals; 03b: a missing model said in a sentence, per-source R with an interval or marked as described only;
04: why the chart's R(W) and the explorer's differ; 04c: the models' document counts on the figure; 05: delete-half
jackknife intervals (coverage: tests/test_batching.py), 'document order' named for what it is, no empty 'listed
above'; 06: the loss a check apart from the findings, the last chunk's |g|^2 and |G_k|^2 in the family."""

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from docgrad import models
from docgrad.presentation import correlation as co
from docgrad.presentation import explorer, sketching, tables

ROOT = Path(__file__).resolve().parents[1]
FIG, NB = ROOT / "figures", ROOT / "notebooks"


def _twin(stem):
    path = FIG / f"{stem}.json"
    if not path.exists():
        pytest.skip(f"{path.name} is not committed")
    return json.loads(path.read_text())


def _outputs(stem, mime):
    """Every output of one MIME type in a committed executed notebook, as text."""
    nb = json.loads((NB / f"{stem}.ipynb").read_text())
    out = []
    for cell in nb["cells"]:
        for o in cell.get("outputs", []):
            if o.get("output_type") == "error":
                out.append("".join(o.get("traceback", [])))
            data = o.get("data", {}).get(mime) if mime else o.get("text")
            if data is not None:
                out.append(data if isinstance(data, (str, dict)) else "".join(data))
    return out


# --- tables: three significant figures, written at the helper ---------------------------------------------------

def test_three_significant_writes_each_float_at_three_figures_and_keeps_counts():
    df = pd.DataFrame({"rho": [0.128, 0.000033, np.nan], "n": [511, 1533, 7], "name": ["a", "b", "c"],
                       "mixed": [1101.946946, True, "x"], "empty": [np.nan] * 3})
    t = tables.three_significant(df)
    assert t["rho"].tolist() == ["0.128", "0.0000330", "–"]
    assert t["n"].tolist() == [511, 1533, 7] and t["name"].tolist() == ["a", "b", "c"]
    assert t["mixed"].tolist() == ["1,102", True, "x"] and "empty" not in t
    assert "0.128000" not in t.to_html() and "0.000033<" not in t.to_html()


def _significant_digits(token: str) -> str:
    return token.lstrip("-−").replace(",", "").replace(".", "").lstrip("0")


@pytest.mark.parametrize("stem", ["02_sketching", "03_correlation_by_lag", "03b_documents_and_sources"])
def test_committed_tables_of_pages_02_to_03b_show_three_significant_figures(stem):
    """Every decimal in a table cell has at most 3 significant figures ('0.128', not '0.128000' or '0.6920'); '1.000'
    is 0.9996 rounded up across a power of ten."""
    cells = re.findall(r"<td>(-?[\d,]*\.\d+)</td>", "".join(_outputs(stem, "text/html")))
    assert cells, f"{stem}: no table with decimals"
    wide = [t for t in cells if len(_significant_digits(t)) > 3 and _significant_digits(t) != "1000"]
    assert not wide, wide[:10]


# --- page 02: G1's pairs, and the design it states -------------------------------------------------------------

def test_g1_scope_says_why_g1_pools_more_pairs_where_more_documents_are_read():
    g = lambda n, k: {"n_pairs": n, "files": [f"f{i}" for i in range(k)]}          # noqa: E731
    lines = sketching.g1_scope_lines({"0:16": {"SmolLM2": g(511, 1), "gemma": g(511, 1)},
                                      "0:48": {"SmolLM2": g(1533, 3), "gemma": g(511, 1)}})
    assert lines[0].startswith("G1 pools the --exact-ref pairs of every result file a page reads")
    assert lines[1] == "SmolLM2: documents 0:16: 511 pairs from 1 file; documents 0:48: 1,533 pairs from 3 files."
    assert lines[2] == "gemma: the same pairs whichever documents are read (one --exact-ref file)."
    same = sketching.g1_scope_lines({"0:16": {"m": g(511, 1)}, "0:48": {"m": g(511, 1)}})
    assert len(same) == 1 and "the same pairs" in same[0]


def test_page_02_states_g1_for_each_document_range_and_no_stale_design():
    source = (NB / "02_sketching.py").read_text()
    assert "16 documents x 32 chunks per corpus" not in source and "all 511 others" not in source
    twin = _twin("02_sketching")
    by_docs = twin["g1_by_documents"]
    assert set(by_docs) >= {"0:16", "0:48"}
    text = " ".join(twin["g1_scope"])
    for per in by_docs.values():
        for lab, g in per.items():
            assert f"{g['n_pairs']:,} pairs" in text or lab in text


# --- page 03b: a missing model, and per-source R ------------------------------------------------------------------

def test_a_model_that_is_not_installed_is_a_sentence_not_an_exception():
    spec = models.offline_model("gemma3-270m")
    line = co.model_not_installed_line("gemma-3-270m", spec)
    assert line.startswith("**gemma-3-270m**: its model file") and "is not installed on this machine" in line
    assert spec.install_hint in line and "Error" not in line and "Traceback" not in line


def test_committed_page_03b_shows_no_exception_for_a_missing_model():
    text = "\n".join(str(x) for x in _outputs("03b_documents_and_sources", "text/markdown") +
                     _outputs("03b_documents_and_sources", None))
    assert "ModelError" not in text and "Traceback" not in text and "Exception" not in text


def _src(source, n, R, ci=None):
    return {"source": source, "n_docs": n, "R": R, "R_ci": ci}


def test_source_R_has_an_interval_from_four_documents_and_is_described_only_below():
    rows = [_src("Austen", 6, 1.75, [1.49, 2.0]), _src("Bible", 24, 2.86, [2.41, 3.30]), _src("tox-dev", 2, 6.07)]
    text = co.source_R_line(rows, {"n_docs": 31, "R": 3.81}, [3.2, 4.4])
    assert text.startswith("Each source alone, documents resampled within the source: Austen (6 documents) R(16K) "
                           "1.75 [1.49, 2.00]; Bible (24 documents) R(16K) 2.86 [2.41, 3.30]; all 31 together 3.81 "
                           "[3.20, 4.40]: the pooled value lies above every source's interval")
    assert text.endswith("Described only, without an interval and not a finding (fewer than 4 documents): tox-dev (2) "
                         "6.07.")
    small = co.source_R_line([_src("jupyter", 2, 2.13), _src("ipython", 3, 1.43)], {"n_docs": 48, "R": 3.68})
    assert small.startswith("No source has the 4 documents an interval of its own R(16K) needs; all 48 together 3.68.")
    assert "above" not in small                                   # nothing compared with a value without interval
    inside = co.source_R_line([_src("Bible", 24, 2.86, [2.41, 3.30])], {"n_docs": 31, "R": 3.0})
    assert "above" not in inside


def test_committed_page_03b_states_no_source_R_without_interval_outside_described_only():
    for line in _twin("03b_documents_and_sources")["source_lines"]:
        if "R(16K)" not in line:
            continue
        stated, _, described = line.partition("Described only")
        for n in re.findall(r"\((\d+) documents\) R\(16K\) [0-9.]+ \[", stated):
            assert int(n) >= 4
        assert not re.search(r"\((2|3)\) R\(16K\)", stated) and "R(16K) 6.07" not in stated


# --- page 04: the chart's R(W) and the explorer's -----------------------------------------------------------------

def test_estimator_note_says_why_blocks_and_profile_differ_below_the_whole_span():
    key = dict(label="m", corpus="PAPERS")
    blocks = pd.DataFrame([{**key, "W_tokens": w, "R": r} for w, r in ((4096, 2.16), (8192, 3.167), (16384, 4.946))])
    profile = pd.DataFrame([{**key, "W_tokens": w, "R": r} for w, r in ((4096, 2.18), (8192, 3.211), (16384, 4.946))])
    text = explorer.estimator_note(blocks, profile, 16384)
    assert "aligned, disjoint W-token blocks" in text and "every pair of chunks l apart" in text
    assert "At the whole span (16,384 tokens) both use every pair and agree" in text
    assert text.endswith("m by at most 1.4% (PAPERS: R(8,192) 3.167 from blocks, 3.211 from the profile).")


def test_committed_page_04_explains_its_two_estimators():
    note = _twin("04_design_effect").get("estimator_note")
    assert note and "from blocks" in note and "from the profile" in note and "agree" in note


# --- page 04c: the models' documents on the figure ---------------------------------------------------------------

def test_committed_figure_of_04c_says_how_many_documents_each_model_has():
    specs = [s for s in _outputs("04c_beside_the_published_study", "application/vnd.vegalite.v6+json")
             if "R(16K) per corpus and model" in json.dumps(s)]
    assert specs, "the R(16K) by model figure is not in the committed page"
    title = specs[0].get("title", {})
    assert isinstance(title, dict) and "documents per corpus" in json.dumps(title.get("subtitle", ""))


# --- page 05: intervals, names, refusals -----------------------------------------------------------------------

def test_committed_page_05_uses_delete_half_jackknife_intervals_and_names_document_order():
    twin = _twin("05_batch_composition")
    reading = " ".join(twin["reading"])
    assert "delete-half jackknife" in reading and "centred" not in reading
    assert all("gradient_boot_median" not in r and r["documents"] >= 4 for r in twin["rows"])
    assert "Document order" in reading and "Identity:" not in reading
    for r in twin["rows"]:
        lo, hi = r["gradient_ci"]
        if lo is not None:
            assert lo < r["gradient"] < hi                    # a normal interval on the log scale holds its estimate
    text = "\n".join(str(x) for x in _outputs("05_batch_composition", "text/markdown"))
    assert "listed above" not in (NB / "05_batch_composition.py").read_text()
    assert "One result file per cell" in text and ("none was refused" in text or "refused here:" in text)


# --- page 06: findings and the check -----------------------------------------------------------------------------

def test_committed_page_06_keeps_the_loss_as_a_check_and_the_last_chunk_norms_in_its_family():
    twin = _twin("06_causal_context")
    family = {(r["corpus"], r["quantity"]) for r in twin["family"]["rows"]}
    assert not any(q == "loss_last" for _, q in family)
    assert {("WEB", "sqnorm_last"), ("WEB", "mean_norm_last")} <= family
    assert {r["quantity"] for r in twin["check"]["rows"]} == {"loss_last"}
    assert "Check, not a finding" in twin["result_box"]["check"]["text"]
