"""The sentences of the correlation pages (docgrad.presentation.correlation): ρ's decay across long lags is
stated only where Holm resolves it, and each builder has its resolved / not resolved / not measured case."""

import numpy as np
import pandas as pd
import pytest

from docgrad.presentation import correlation as co
from docgrad.presentation import evidence as ev
from docgrad.results.cell_decomposition import decompose_cell, rho_bands
from docgrad.results.cells import load_cells
from docgrad.results.synthetic import Profile, write_cell


def _bands(first, last, spread, n=400, seed=0):
    rng = np.random.default_rng(seed)
    a = first + spread * rng.standard_normal(n)
    b = last + spread * rng.standard_normal(n)
    return {"bands": [{"lags": [4, 11], "tokens": [2048, 5632], "rho": first, "draws": a},
                      {"lags": [20, 31], "tokens": [10240, 15872], "rho": last, "draws": b}],
            "first_minus_last": {"diff": first - last, "draws": a - b}}


def test_rho_decays_only_where_the_paired_difference_is_resolved_under_holm():
    claims = co.band_claims({"A": _bands(0.15, 0.08, 0.01), "B": _bands(0.10, 0.09, 0.02, seed=1),
                             "C": _bands(0.05, 0.10, 0.01, seed=2)})
    a, b, c = claims
    assert a.status == ev.RESOLVED and "decays within the span" in a.text and "Holm over 3 corpora" in a.text
    assert b.status == ev.NOT_RESOLVED and "a flat ρ and a decline are both consistent" in b.text
    assert c.status == ev.RESOLVED and "rises within the span" in c.text
    none = co.band_claims({"A": {"bands": _bands(0.1, 0.1, 0.01)["bands"][:1]}})
    assert none[0].status == ev.NOT_MEASURED


def test_rho_bands_pair_the_first_and_last_band_over_one_document_draw(tmp_path):
    write_cell(tmp_path, model="o/m", revision="r", corpus="BOOKS", profile=Profile(exch=0.2, ar=0.3, phi=0.5),
               n_docs=6, m=32, chunk=512, shard_size=6, dim=24)
    cell = next(iter(load_cells(tmp_path).values()))
    r = rho_bands(cell, resamples=100, seed=0)
    assert [b["lags"] for b in r["bands"]] == [[4, 11], [12, 19], [20, 31]]
    f, la = r["bands"][0], r["bands"][-1]
    assert r["first_minus_last"]["diff"] == pytest.approx(f["rho"] - la["rho"])
    assert np.allclose(r["first_minus_last"]["draws"], f["draws"] - la["draws"], equal_nan=True)
    assert rho_bands(cell, resamples=0)["first_minus_last"]["draws"].size == 0


def test_correlation_box_names_the_corpora_whose_rho_decays_and_its_caveat_follows():
    class E:
        rho_long = 0.1

        def interval(self, name):
            return (0.05, 0.15)

    class C:
        def __init__(self, corpus):
            self.corpus, self.all, self.n_docs = corpus, E(), 16
            self.chunk, self.chunks_per_doc, self.model, self.revision = 512, 32, "o/m", "r"

    class Rep:
        cells = [C("BOOKS"), C("WEB")]

        def cell(self, k):
            return next((c for c in self.cells if c.corpus == k), None)

    decays = {"m": co.band_claims({"BOOKS": _bands(0.15, 0.08, 0.01)})}
    box = co.correlation_box({"m": Rep()}, decays)
    assert "ρ decays within the span (Holm) for BOOKS (m)." in box and "R grows more slowly" in box
    assert "m 16 documents per corpus;" in box and "provisional" not in box
    assert "(provisional: m BOOKS 16 of 31)" in co.correlation_box({"m": Rep()}, decays, {"m": {"BOOKS": (16, 31)}})
    flat = {"m": co.band_claims({"BOOKS": _bands(0.10, 0.10, 0.02)})}
    assert "for no corpus (m)" in co.correlation_box({"m": Rep()}, flat) and "is not resolved" in \
        co.correlation_box({"m": Rep()}, flat)


def _stub_report(cells: list[tuple], model="o/m", revision="r"):
    """A stand-in Analysis: cells (corpus, lo, hi, chunk, chunks per document), each with rho_long at the middle of
    its interval (NaN, and no interval, when lo and hi are NaN, as stats.estimate_cell gives a span without a lag
    of 2,048 tokens)."""
    class E:
        def __init__(self, lo, hi):
            self.rho_long, self._ci = (lo + hi) / 2, (lo, hi)

        def interval(self, name):
            return self._ci

    class C:
        def __init__(self, corpus, lo, hi, chunk, m):
            self.corpus, self.all, self.n_docs, self.chunk, self.chunks_per_doc = corpus, E(lo, hi), 16, chunk, m
            self.model, self.revision = model, revision

    made = [C(*c) for c in cells]

    class Rep:
        cells = made

        def cell(self, k):
            return next((c for c in self.cells if c.corpus == k), None)

    return Rep()


def _rho_report(intervals: dict, control=-0.002):
    """The study's shape: one 16K cell per corpus with rho_long at the middle of its interval, and the control."""
    return _stub_report([(k, *ci, 512, 32) for k, ci in intervals.items()] + [("WEB", control, control, 512, 32)])


def test_page_03_box_opens_with_whether_chunks_far_apart_are_independent_with_the_intervals_of_its_ends():
    rep = _rho_report({"CODE": (0.04, 0.08), "PAPERS": (0.08, 0.12)})
    box = co.correlation_box({"m": rep}, {"m": []})
    assert ev.first_sentence(box) == (
        "Chunks of one document 2K-16K tokens apart are not independent samples: their gradient-noise correlation "
        "ρ_long lies above 0 in every cell read, from 0.0600 [0.0400, 0.0800] (CODE) to 0.100 [0.0800, 0.120] "
        "(PAPERS), against -0.0020 in the packed control.")
    open_ = co.correlation_lead({"m": _rho_report({"CODE": (-0.01, 0.05), "PAPERS": (0.08, 0.12)})})
    assert open_.startswith("Whether chunks of one document 2K-16K tokens apart are independent samples is not "
                            "resolved: the 95% interval of ρ_long does not lie above 0 for CODE,")
    assert "PAPERS" not in open_.split("for ")[1].split(",")[0]


def test_the_lead_of_page_03_leaves_out_cells_that_lack_documents_and_corpora_of_few_sources():
    class D:                                     # a CellDecomposition of 3 sources whose bootstrap is coarse
        corpus, n_sources, support = "BOOKS", 3, {"source": {"distinct": 10}}
        sources = ["a"] * 5 + ["b"] * 5 + ["c"] * 5

    rep = _rho_report({"BOOKS": (-0.01, 0.3), "CODE": (0.04, 0.08), "PAPERS": (-0.2, 0.1)})
    lead = co.correlation_lead({"m": rep}, {"m": {"PAPERS": (16, 48)}}, {"m": {"BOOKS": D()}})
    assert lead.startswith("Chunks of one document 2K-16K tokens apart are not independent samples")
    assert "lies above 0 in the one cell read, 0.0600 [0.0400, 0.0800] (CODE)" in lead
    assert lead.endswith("; BOOKS (3 sources) is left out: no interval over 3 clusters.")


def test_rho_long_order_lines_compare_first_places_by_point_only():
    lines = co.rho_long_order_lines({"ours": {"A": 0.1, "B": 0.2}, "P (published)": {"A": 0.3, "B": 0.1}}, ["ours"])
    assert lines[0] == "ours: B (0.200) > A (0.100)"
    assert lines[-1].startswith("Every published model puts A first; by point value ours puts B first")


def test_documents_and_source_lines_for_a_corpus_of_few_sources(tmp_path):
    write_cell(tmp_path, model="o/m", revision="r", corpus="BOOKS", profile=Profile(exch=0.3), n_docs=8, m=8,
               chunk=2048, shard_size=8, dim=24)
    cell = next(iter(load_cells(tmp_path).values()))
    d = decompose_cell(cell, ["Austen"] * 4 + ["Bible"] * 3 + ["Melville"], 200, 0)
    per = pd.DataFrame([{"source": s, "n_docs": n, "n_negative": 0, "min": 0.1, "max": 0.2}
                        for s, n in [("Austen", 4), ("Bible", 3), ("Melville", 1)]])
    lines = co.source_lines(d, 1.0, per)
    assert lines[0].startswith("**BOOKS: 3 sources.** Austen (4), Bible (3), and Melville")
    assert "Melville (one document): 0.20" in lines[2]
    assert co.source_lines(decompose_cell(cell, [f"d{i}" for i in range(8)], 0, 0), 1.0, per) == []
    two = tmp_path / "two"
    write_cell(two, model="o/m", revision="r", corpus="BOOKS", profile=Profile(exch=0.3), n_docs=8, m=8,
               chunk=2048, shard_size=4, dim=24)
    split = decompose_cell(next(iter(load_cells(two).values())), ["A"] * 3 + ["P"] + ["P"] + ["B"] * 3, 0, 0)
    per2 = pd.DataFrame([{"source": s_, "n_docs": n, "n_negative": 0, "min": 0.1, "max": 0.2}
                         for s_, n in [("A", 3), ("P", 2), ("B", 3)]])
    lines = co.source_lines(split, 1.0, per2)       # P's two documents sit in different result files
    assert lines[0].startswith("**BOOKS: 3 sources.** A (3), B (3)") and "(P share a source across result" in lines[0]
    box = co.documents_box("m", {}, {"BOOKS": split})               # no source of 4 documents: none listed
    assert "8 documents are 3 sources, and all together give an R(16K) of " in box
    assert not any(f"{s_}, " in box for s_ in "APB")
    loo = {"BOOKS": {"dR_frac": -0.1, "title": "Emma", "doc": 0}}
    box = co.documents_box("m", loo, {"BOOKS": d})
    assert "at most 10% (BOOKS: Emma)" in box and "8 documents are 3 sources" in box and "m 8 documents per corpus" in box


def test_page_03b_box_opens_with_the_unit_of_independence_and_each_source_with_its_interval(tmp_path):
    write_cell(tmp_path, model="o/m", revision="r", corpus="BOOKS", profile=Profile(exch=0.3), n_docs=8, m=8,
               chunk=2048, shard_size=8, dim=24)
    d = decompose_cell(next(iter(load_cells(tmp_path).values())), ["Austen"] * 4 + ["Bible"] * 3 + ["Melville"], 200, 0)
    austen = next(r for r in d.by_source if r["source"] == "Austen")
    pooled = next(r for r in d.by_source if r["source"] == "all")["R"]
    first = ev.first_sentence(co.documents_box("m", {}, {"BOOKS": d}))
    assert first.startswith("Where documents share a few sources, count the sources, not the documents, as "
                            f"independent draws: BOOKS's 8 documents are 3 sources, and all together give an R(16K) "
                            f"of {ev.sig(pooled)}")
    assert f"Austen, 4 documents, {ev.interval(austen['R'], austen['R_ci'])}" in first
    assert ("above each source alone" in first) == (pooled > austen["R_ci"][1])
    assert "Bible" not in first and "Melville" not in first          # 3 and 1 documents: no interval of their own
    one = decompose_cell(next(iter(load_cells(tmp_path).values())), [f"d{i}" for i in range(8)], 0, 0)
    assert co.sources_lead({"CODE": one}).startswith("Count documents as the independent draws here")


# --- issue 35: page 03's box for a corpus, model or span of the user's own -------------------------------------------

def _cells_report(cells: dict, chunk=512):
    """A stand-in Analysis of a local model: {corpus: (lo, hi, chunks per document)}."""
    return _stub_report([(k, lo, hi, chunk, m) for k, (lo, hi, m) in cells.items()], "local/tiny",
                        "sha256-0123456789ab")


def test_the_committed_page_03_box_is_rebuilt_word_for_word_from_its_numbers_file():
    """figures/03_correlation_by_lag.json holds the box and every number it is built from: the cells (16K spans of
    512-token chunks), the band claims, the models; BOOKS (3 sources) is a corpus of few clusters."""
    from pathlib import Path
    from docgrad.models import ResultModel, models_note

    twin = __import__("json").loads((Path(__file__).resolve().parents[1] / "figures" /
                                     "03_correlation_by_lag.json").read_text())

    class D:
        corpus, n_sources, support, sources = "BOOKS", 3, {"source": {"distinct": 10}}, ["a"] * 5 + ["b"] * 5

    reports, claims = {}, {}
    for lab, by in twin["by_model"].items():
        m = max(int(lag) for lag in by["cells"][0]["rho"]) // twin["chunk"] + 1
        reports[lab] = _cells_report({c["corpus"]: (*c["rho_long_ci"], m) for c in by["cells"]}, twin["chunk"])
        for cell, c in zip(reports[lab].cells, by["cells"]):
            cell.all.rho_long, cell.n_docs = c["rho_long"], c["n_docs"]
        claims[lab] = [ev.Claim(ev.NOT_RESOLVED if "includes 0" in t else ev.RESOLVED, t)
                       for t in twin["band_claims"][lab]]
    note = models_note([ResultModel(**m) for m in twin["models"]])
    box = co.correlation_box(reports, claims, {lab: {} for lab in reports}, {lab: {"BOOKS": D()} for lab in reports},
                             note)
    assert box == twin["result_box"]
    assert "2K-16K tokens apart" in box and "two small 4-bit-quantised models" in box and "512-token chunks" in box


def test_the_lead_names_the_lags_of_its_cells_an_8k_span_its_own_and_mixed_spans_each():
    assert co.lags_apart(512, 32) == "2K-16K" and co.lags_apart(1024, 32) == "2K-16K"
    assert co.lags_apart(512, 16) == "2K-8K" and co.lags_apart(3000, 6) == "3,000-15,000"
    assert co.lags_apart(512, 5) == "2,048" and co.lags_apart(512, 4) is None
    short = co.correlation_lead({"m": _cells_report({"MINE": (0.04, 0.08, 16)})})
    assert short.startswith("Chunks of one document 2K-8K tokens apart are not independent samples")
    mixed = co.correlation_lead({"m": _cells_report({"MINE": (0.04, 0.08, 16), "CODE": (0.05, 0.09, 32)})})
    assert mixed.startswith("Chunks of one document far apart (2K-8K tokens in MINE; 2K-16K tokens in CODE) are not")


def test_a_cell_without_rho_long_is_said_to_have_none_never_counted_as_not_above_0():
    nan = float("nan")
    lead = co.correlation_lead({"m": _cells_report({"MINE": (0.04, 0.08, 16), "TINY": (nan, nan, 4)})})
    assert lead.startswith("Chunks of one document 2K-8K tokens apart are not independent samples")
    assert lead.endswith("; no ρ_long for TINY (a 2,048-token span): no lag reaches 2,048 tokens.")
    assert "does not lie above 0" not in lead
    alone = co.correlation_lead({"m": _cells_report({"TINY": (nan, nan, 4)})})
    assert alone == ("No long-document cell is read, so nothing is said of chunks of one document far apart; no "
                     "ρ_long for TINY (a 2,048-token span): no lag reaches 2,048 tokens.")
    box = co.correlation_box({"m": _cells_report({"MINE": (0.04, 0.08, 16), "TINY": (nan, nan, 4)})}, {"m": []})
    assert "ρ_long: m MINE 0.0600, TINY none." in box


def test_a_span_of_one_band_says_no_decay_is_tested_and_bands_without_draws_say_no_draws():
    one = co.band_claims({"MINE": {"bands": _bands(0.1, 0.1, 0.01)["bands"][:1]}})[0]
    assert one.status == ev.NOT_MEASURED and "(no draws)" not in one.text
    assert one.text.endswith("over lags 2,048-5,632 tokens; the span holds this one band only, so no decay across "
                             "bands is tested.")
    b = _bands(0.1, 0.1, 0.01)
    b["first_minus_last"]["draws"] = np.array([])
    assert co.band_claims({"A": b})[0].text.endswith("its decay is not measured (no draws).")


def test_the_box_of_a_user_model_and_short_span_names_the_model_the_chunk_and_what_was_not_tested():
    rep = _cells_report({"MINE": (0.04, 0.08, 8)}, chunk=1024)
    claims = {"tiny": co.band_claims({"MINE": {"bands": _bands(0.1, 0.1, 0.01)["bands"][:1]}})}
    box = co.correlation_box({"tiny": rep}, claims)
    assert "**Measured:** tiny at sha256-0123456789ab; tiny 16 documents per corpus; 1,024-token chunks run " \
           "alone." in box
    assert "ρ decays within the span (Holm) for no corpus (tiny; not tested: MINE)." in box
    assert box.endswith("**Caveat:** whether ρ decays across the long lags is not tested: no span here holds two "
                        "bands of long lags with bootstrap draws.")
    assert "two small 4-bit-quantised models" not in box and "512-token" not in box
    note = "one small 4-bit-quantised model"
    assert f"**Measured:** {note};" in co.correlation_box({"tiny": rep}, claims, models_note=note)
