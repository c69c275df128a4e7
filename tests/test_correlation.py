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

    class Rep:
        cells = [C("BOOKS"), C("WEB")]

        def cell(self, k):
            return next((c for c in self.cells if c.corpus == k), None)

    decays = {"m": co.band_claims({"BOOKS": _bands(0.15, 0.08, 0.01)})}
    box = co.correlation_box({"m": Rep()}, decays)
    assert "decays within the span for BOOKS" in box and "not one constant" in box
    assert "m 16 documents per corpus;" in box and "provisional" not in box
    assert "(provisional: m BOOKS 16 of 31)" in co.correlation_box({"m": Rep()}, decays, {"m": {"BOOKS": (16, 31)}})
    flat = {"m": co.band_claims({"BOOKS": _bands(0.10, 0.10, 0.02)})}
    assert "for no corpus" in co.correlation_box({"m": Rep()}, flat) and "is not resolved" in \
        co.correlation_box({"m": Rep()}, flat)


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
    box = co.documents_box("m", {}, {"BOOKS": split})
    assert "(A)" in box and "(P)" not in box                        # P's documents never met in one file
    loo = {"BOOKS": {"dR_frac": -0.1, "title": "Emma", "doc": 0}}
    box = co.documents_box("m", loo, {"BOOKS": d})
    assert "at most 10% (BOOKS: Emma)" in box and "8 documents are 3 sources" in box and "m 8 documents per corpus" in box
