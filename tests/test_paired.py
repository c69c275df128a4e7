"""Paired comparisons of two measurements of the same documents (docgrad.results.paired)."""

import numpy as np

from docgrad.core import bootstrap as bs
from docgrad.results.cells import Cell
from docgrad.results.paired import MIN_SHARED, paired_difference, shared_documents

M, CHUNK = 32, 512


def _cell(grads: np.ndarray, doc_ids, corpus="BOOKS") -> Cell:
    """A one-file cell from per-chunk gradients (D, M, dim)."""
    D = grads.shape[0]
    G = grads.reshape(D * M, -1)
    sums = bs.assemble([bs.shard_block_sums(G @ G.T, D, M)], M)
    return Cell("m", "r", corpus, CHUNK, list(doc_ids), M, {"all": sums}, np.zeros((D, M)))


def _grads(rng, D=6, dim=24):
    doc = rng.normal(size=(D, 1, dim))                     # a per-document direction: correlated chunks
    return 0.3 + doc + rng.normal(size=(D, M, dim))


def _docs(ids, shas):
    return [{"doc": i, "text_sha256": s} for i, s in zip(ids, shas)]


def test_documents_are_matched_by_text_not_by_index():
    x = _docs([0, 1, 2], ["a", "b", "c"])
    y = _docs([0, 1, 2, 3], ["c", "x", "a", "b"])
    assert shared_documents(x, y, [0, 1, 2], [0, 1, 2, 3]) == [(0, 2), (1, 3), (2, 0)]


def test_the_same_documents_in_another_order_differ_by_zero_in_every_paired_draw():
    rng = np.random.default_rng(1)
    g = _grads(rng)
    perm = np.array([3, 0, 5, 1, 4, 2])                    # y's position j holds x's document perm[j]
    x, y = _cell(g, range(6)), _cell(g[perm], range(6))
    pairs = [(int(perm[j]), j) for j in range(6)]
    d = paired_difference(x, y, sorted(pairs), resamples=200, seed=7)
    assert d.n_shared == 6 and abs(d.diff) < 1e-9
    assert np.allclose(d.draws, 0, atol=1e-9)              # independent draws would spread around 0


def test_the_point_difference_is_over_the_shared_documents_only():
    rng = np.random.default_rng(2)
    g = _grads(rng)
    x, y = _cell(g, range(6)), _cell(g[:5], range(5))      # y lacks document 5
    d = paired_difference(x, y, [(j, j) for j in range(5)], resamples=200, seed=7)
    reduced = bs.estimate(y.sums["all"], np.ones(5), CHUNK)["R"][0, -1]
    assert np.isclose(d.x, reduced) and np.isclose(d.y, reduced) and abs(d.diff) < 1e-9


def test_a_real_difference_is_seen_with_draws_that_keep_the_pairing():
    rng = np.random.default_rng(3)
    g = _grads(rng)
    y_g = g + 1.5 * (g - 0.3).mean(axis=1, keepdims=True)      # y: each document's direction stronger
    x, y = _cell(g, range(6)), _cell(y_g, range(6))
    d = paired_difference(x, y, [(j, j) for j in range(6)], resamples=400, seed=7)
    assert d.diff > 0 and np.mean(d.draws > 0) > 0.95


def test_too_few_shared_documents_give_no_paired_comparison():
    rng = np.random.default_rng(4)
    x = _cell(_grads(rng), range(6))
    assert paired_difference(x, x, [(j, j) for j in range(MIN_SHARED - 1)], 100, 7) is None
