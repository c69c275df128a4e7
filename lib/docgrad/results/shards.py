"""A cell pooled from shards, read as designed. Definitions: docs/methods.md#shards.

A cell of 48 documents is three files of 16 ("shards"); cross-document pairs were computed only inside each
shard, so the design fixes which documents pair and how many each shard holds. Three readings of R(16K):

  per shard:        R(16K) of each shard alone (its documents, every one once);
  within-shard bootstrap: each resample draws n_s documents with replacement from shard s, for every shard
                    (the shard sizes stay those of the design; the document bootstrap redraws across shards and
                    so varies them);
  cross-shard fill: the pairs never computed (documents in different shards) filled with the mean chunk inner
                    product of the computed pairs of the same pair of sources (cross-source pairs without a
                    computed one of theirs: the mean of every computed cross-source pair), then R(16K) on the
                    completed matrix. Its difference from the pooled R sizes the bias the missing pairs could
                    carry if they were like the computed ones of their sources; it is a size, not a correction.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import numpy as np

from docgrad.core import bootstrap as bs
from docgrad.core.constants import HEADLINE_WINDOW
from docgrad.core.decomposition import source_codes, span_window, window_column
from docgrad.results.cells import Cell
from docgrad.results.stats import cell_rng, check_resamples, defined_ci


def shard_of_documents(cell: Cell) -> np.ndarray:
    """For each document of the cell (cell.doc_ids order), the index of the shard (file) that holds it."""
    where = {}
    for i, sh in enumerate(cell.shards):
        for d in np.unique(sh.index[:, 0]):
            where[int(d)] = i
    return np.array([where[int(d)] for d in cell.doc_ids])


def within_shard_counts(rng: np.random.Generator, shard: np.ndarray, resamples: int) -> np.ndarray:
    """(resamples, D) document counts: every resample draws, within each shard, as many documents as the shard
    holds, uniformly with replacement from that shard."""
    shard = np.asarray(shard)
    counts = np.zeros((resamples, shard.size))
    for s in np.unique(shard):
        members = np.flatnonzero(shard == s)
        picks = rng.integers(0, members.size, size=(resamples, members.size))
        np.add.at(counts, (np.arange(resamples)[:, None], members[picks]), 1)
    return counts


def filled_cross_shard(s: bs.BlockSums, sources: Sequence[str]) -> bs.BlockSums:
    """The block sums with every pair never computed (Np = 0 off the diagonal) filled: Np = m_d m_e and P = Np
    times the mean chunk inner product of the computed pairs of the same source pair (else of every computed
    cross-source pair)."""
    code, _ = source_codes(sources)
    D = len(code)
    off = ~np.eye(D, dtype=bool)
    computed = (s.Np > 0) & off
    missing = (s.Np == 0) & off
    if not missing.any():
        return s
    cross = computed & (code[:, None] != code[None, :])
    fallback = s.P[cross].sum() / s.Np[cross].sum() if s.Np[cross].sum() else np.nan
    P, Np = s.P.copy(), s.Np.copy()
    for d, e in zip(*np.nonzero(missing)):
        same = computed & (code[:, None] == code[d]) & (code[None, :] == code[e])
        same |= computed & (code[:, None] == code[e]) & (code[None, :] == code[d])
        mean = s.P[same].sum() / s.Np[same].sum() if s.Np[same].sum() else fallback
        Np[d, e] = s.n[d] * s.n[e]
        P[d, e] = mean * Np[d, e]
    return replace(s, P=P, Np=Np)


def shard_reading(cell: Cell, sources: Sequence[str], resamples: int, seed: int,
                  window: int = HEADLINE_WINDOW) -> dict:
    """R(window) of the cell pooled, per shard, with the cross-shard pairs filled; the 95% intervals of the
    document bootstrap (the cell's generator, as every page) and of the within-shard bootstrap (same seed)."""
    s, C = cell.sums["all"], cell.chunk
    j = window_column(s, C, span_window(s, C, window))     # R at the span when it is shorter than `window`
    D = len(s.n)
    shard = shard_of_documents(cell)
    R = float(bs.estimate(s, np.ones(D), C)["R"][0, j])
    per_shard = []
    for k in np.unique(shard):
        w = (shard == k).astype(float)
        docs = [cell.doc_ids[i] for i in np.flatnonzero(shard == k)]
        per_shard.append({"documents": f"{min(docs)}-{max(docs)}", "n": int(w.sum()),
                          "R": float(bs.estimate(s, w, C)["R"][0, j])})
    filled = float(bs.estimate(filled_cross_shard(s, sources), np.ones(D), C)["R"][0, j])
    out = {"corpus": cell.corpus, "n_docs": D, "n_shards": len(per_shard), "R": R, "per_shard": per_shard,
           "R_filled": filled, "fill_shift": filled - R}
    resamples = check_resamples(resamples)
    if resamples:
        doc = bs.counts_from_indices(bs.resample_indices(cell_rng(seed, cell), D, resamples), D)
        within = within_shard_counts(cell_rng(seed, cell), shard, resamples)
        for name, counts in (("doc", doc), ("within_shard", within)):
            out[f"ci_{name}"] = defined_ci(bs.estimate(s, counts, C)["R"][:, j])
    return out
