"""A cell pooled from shards read as designed (results.shards; docs/methods.md#shards): per-shard R, the
within-shard bootstrap, and the cross-shard pairs filled to size their bias."""

import functools
import json
from pathlib import Path

import numpy as np
import pytest
from docgrad.core import bootstrap as bs
from docgrad.corpora.provenance import document_sources
from docgrad.results import shards as SH
from docgrad.results.cells import load_cells

ROOT = Path(__file__).resolve().parents[1]
SMOL = ROOT / "data" / "results" / "HuggingFaceTB__SmolLM2-135M-Instruct"


@functools.cache
def committed(docs):
    return {c.corpus: c for c in load_cells(SMOL, groups=None, docs=docs).values()}


def sources(cell):
    return document_sources(json.loads((ROOT / "data" / "corpora" / "manifest.json").read_text()), cell.corpus,
                            cell.doc_ids)


def test_within_shard_resamples_keep_every_shard_its_size_and_its_own_documents():
    shard = np.array([0, 0, 0, 1, 1, 2, 2, 2, 2])
    counts = SH.within_shard_counts(np.random.default_rng(3), shard, 500)
    for s in range(3):
        assert np.all(counts[:, shard == s].sum(axis=1) == (shard == s).sum())
    assert counts.shape == (500, 9) and counts.min() >= 0
    assert np.array_equal(counts, SH.within_shard_counts(np.random.default_rng(3), shard, 500))
    assert (counts[:, shard == 2] == 0).any()                  # with replacement: some document left out


def test_missing_cross_shard_pairs_are_filled_with_the_mean_of_their_source_pair():
    D, n = 4, np.array([2.0, 2.0, 3.0, 3.0])
    mean = np.array([[0, 5.0, 1.0, 0], [5.0, 0, 0, 2.0], [1.0, 0, 0, 7.0], [0, 2.0, 7.0, 0]])   # per chunk pair
    Np = np.outer(n, n) * (mean > 0)
    s = bs.BlockSums(P=mean * Np, Np=Np, diag=n, n=n, lag=np.ones((D, 2)), nlag=np.ones((D, 2)),
                     blk=np.ones((D, 1)), nblk=np.ones((D, 1)), sizes=[1])
    filled = SH.filled_cross_shard(s, ["a", "a", "b", "b"])   # missing (0,3) a-b and (1,2) a-b: mean of a-b pairs
    ab = (1.0 * 6 + 2.0 * 6) / 12
    assert filled.Np[0, 3] == 6 and filled.P[0, 3] == pytest.approx(ab * 6)
    assert filled.P[2, 1] == pytest.approx(ab * 6) and filled.P[0, 1] == s.P[0, 1]
    assert SH.filled_cross_shard(filled, ["a", "a", "b", "b"]) is filled     # nothing missing: unchanged


def test_per_shard_r_is_the_r_of_that_shard_read_alone_and_one_shard_needs_no_fill():
    code = committed((0, 48))["CODE"]
    r = SH.shard_reading(code, sources(code), resamples=0, seed=1)
    assert [p["documents"] for p in r["per_shard"]] == ["0-15", "16-31", "32-47"] and r["n_shards"] == 3
    for p, docs in zip(r["per_shard"], [(0, 16), (16, 32), (32, 48)]):
        alone = committed(docs)["CODE"]
        assert p["R"] == pytest.approx(bs.estimate(alone.sums["all"], np.ones(16), 512)["R"][0, -1], rel=1e-9)
    first = committed((0, 16))["CODE"]
    one = SH.shard_reading(first, sources(first), resamples=0, seed=1)
    assert one["fill_shift"] == 0 and one["n_shards"] == 1 and "ci_doc" not in one


def test_the_within_shard_interval_is_narrower_than_the_document_one_for_books_and_both_hold_the_estimate():
    books = committed((0, 48))["BOOKS"]
    r = SH.shard_reading(books, sources(books), resamples=400, seed=20261007)
    (dlo, dhi), (wlo, whi) = r["ci_doc"], r["ci_within_shard"]
    assert dlo < wlo < r["R"] < whi < dhi
    assert r["fill_shift"] > 0.1                                   # most BOOKS cross-shard pairs are same-source
