"""Batch composition measured as gradient noise: identity, random, balanced and coherent batches of a cell's chunks.
Definitions: docs/methods.md#batch-composition.

A rule partitions a list of n chunks (gradients g_i, Gram K with the exact squared norms on its diagonal) into
batches B of b chunks, inside consecutive windows w of whole documents (default: one window, the cell). The
gradient noise of the partition is the mean squared deviation of the batch means from the mean of their window:

    V = mean_B |g_B - gbar_w(B)|^2 = mean_B 1_B' K 1_B / b^2  -  (1/n) sum_w 1_w' K 1_w / n_w

(a window's n_w/b batch means average to its mean gbar_w, so the cross term is -|gbar_w|^2 per batch). With one
window this is mean_B 1_B' K 1_B / b^2 - 1' K 1 / n^2. Under uniformly random batches (a uniform permutation of
each window, cut into batches) every batch is a sample of b of the window's n_w chunks without replacement, so

    E V_random = sum_w (n_w / n) (n_w - b) / (b (n_w - 1)) s2_w,    s2_w = (tr K_w - 1_w' K 1_w / n_w) / n_w,

s2_w being the window's population variance (1/n_w) sum_i |g_i - gbar_w|^2. The rule's design effect is
V / E V_random (1 for random batches on average). A scalar score s is the Gram s s': V is then the between-batch
variance of the batch-mean score, the lexical statistic of the batch-composition study (u/residual_cartographer,
"Completed batch composition study: structured grouping misses replication rule", 2026-10-14).

Rules (that study's definitions, applied inside each window of n_w chunks, positions in the list's order):
  identity  consecutive b chunks (within one document when b divides its chunk count)
  random    a uniform permutation, cut into batches of b
  balanced  sort by score ascending (ties: earlier position first), cut into b strata of n_w/b chunks, permute
            each stratum uniformly, batch j takes the j-th chunk of every stratum
  coherent  the same sorted order cut into consecutive batches of b
Batch order and order within a batch do not change V, so they are not drawn.

Balanced is taken in expectation over its within-stratum permutations (`Population.balanced_noise`, closed form,
as random's E V_random is): a batch holds one chunk of each of the b strata, so a pair of chunks of different strata
shares a batch with probability 1 / (n_w / b) and a pair of one stratum never does,

    E sum_{B in w} 1_B' K 1_B = tr K_w + (b / n_w) (1_w' K 1_w - sum_s 1_s' K 1_s).

Scores: per-chunk mean unigram surprise (add-one counts over every target token of the cell's chunks, FP64 mean of
-log p over the chunk's C-1 targets; `unigram_surprise`) and the per-chunk model loss from the result file; a
scalar score's V is computed from the score itself (`Scores`), which is the Gram s s' of `Population`.

Intervals: the delete-half jackknife (`measure`; Shao & Wu 1989, the delete-d jackknife with d = D // 2 of the
cell's D documents deleted). Each of `resamples` random halves keeps r = D - d documents, each at most once, in
ascending order, and repeats the whole procedure on them: the unigram surprise re-estimated from the half's own
counts (`resample_surprise`), the rule re-applied to the half's scores, V / E V_random recomputed. With theta_s the
statistic on half s (the log of a ratio) and N halves,

    v = r / (d N) sum_s (theta_s - mean_s theta_s)^2,      95% interval  exp(log estimate +- 1.96 sqrt(v))

(`jackknife_se`, `normal_interval`). No document appears twice in a half, so no chunk is ever batched with a copy
of itself: the bootstrap this replaced (documents drawn with replacement) tied a copy to its original on every
score, pulled the sorted rules' resampled ratios towards 1 and had to re-centre its draws on the estimate, which
covered the true ratio in only 77-83% of simulated cells (tests/test_batching.py runs the coverage check). Every
rule of one cell uses the same halves, so two rules compare on paired halves (`rule_tests`: Holm over the page's
comparisons, two-sided normal p-values).

Identity and R(bC) (`identity_to_R`): with b dividing the chunks per document m, identity's ratio is
    ratio = (n - 1)/(n - b) * b (A - Q)/(T - Q),   R(bC) = b (A - S)/(T - S)   (docgrad.core.bootstrap),
with A the mean |block mean|^2, T the mean squared norm, Q = 1'K1/n^2 (|gbar|^2 of the cell, diagonal and
within-document pairs included) and S = S_cross (cross-document pairs only): the two differ only in how |gbar|^2
is estimated and by the finite-population factor.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from statistics import NormalDist

import numpy as np


from docgrad.core import bootstrap as bs
from docgrad.core.constants import ALL, BOOTSTRAP_SEED, CI_LEVEL, CONTROL
from docgrad.core.orderings import ALPHA, holm
from docgrad.corpora import build as corpora
from docgrad.errors import AnalysisError
from docgrad.results.cells import Cell
from docgrad.results.stats import check_resamples

RULES = ("identity", "random", "balanced", "coherent")
MIN_HALF_DOCS = 4              # fewer documents: halves of 1-2 documents, too few to spread (= MIN_INTERVAL_DOCS)
SCORES = ("unigram", "loss")
DEFAULT_RESAMPLES = 500        # random halves of the documents for the page's intervals (delete-half jackknife)
_BLOCK_ENTRIES = 2**24         # Gram entries gathered per vectorised block (16.8 M float64: 134 MB)


# --- partitions ---------------------------------------------------------------------------------------------

def window_bounds(n: int, b: int, window: int = 0) -> list[tuple[int, int]]:
    """Consecutive windows [start, stop) of `window` chunks over a list of n (the last may be shorter); window 0
    (or >= n) is one window. Every window must hold whole batches, at least two of them."""
    if b < 1 or n % b:
        raise AnalysisError(f"batch size {b} does not divide the {n} chunks of the cell")
    w = n if window <= 0 or window >= n else int(window)
    if w % b or w < 2 * b:
        raise AnalysisError(f"window {window} must be a multiple of the batch size {b} holding at least two "
                            f"batches (or 0 for the whole cell)")
    return [(a, min(a + w, n)) for a in range(0, n, w)]


def sorted_order(scores: np.ndarray, b: int, window: int = 0) -> np.ndarray:
    """Positions into the chunk list sorted by score ascending inside each window, ties broken by position (a
    stable sort): scores (..., n) -> (..., n) int, the order balanced cuts into strata and coherent into batches."""
    scores = np.asarray(scores, dtype=float)
    return np.concatenate([a + np.argsort(scores[..., a:e], axis=-1, kind="stable")
                           for a, e in window_bounds(scores.shape[-1], b, window)], axis=-1)


def partition(rule: str, scores: np.ndarray, b: int, window: int = 0,
              rng: np.random.Generator | None = None) -> np.ndarray:
    """Batches of a rule as positions into the chunk list: scores (..., n) -> (..., n/b, b) int.

    Leading axes are independent lists (e.g. halves of the documents), each with its own random draws. identity and
    random ignore the scores' values; random and balanced need `rng`."""
    scores = np.asarray(scores, dtype=float)
    lead, n = scores.shape[:-1], scores.shape[-1]
    if rule not in RULES:
        raise AnalysisError(f"unknown batching rule {rule!r}: expected one of {', '.join(RULES)}")
    if rule in ("random", "balanced") and rng is None:
        raise AnalysisError(f"rule {rule!r} draws at random: pass a seeded numpy Generator")
    ordered = sorted_order(scores, b, window) if rule in ("balanced", "coherent") else None
    out = []
    for a, e in window_bounds(n, b, window):
        nw, nb = e - a, (e - a) // b
        pos = np.broadcast_to(np.arange(a, e), lead + (nw,))
        if rule == "identity":
            batches = pos.reshape(lead + (nb, b))
        elif rule == "random":
            batches = rng.permuted(pos, axis=-1).reshape(lead + (nb, b))
        elif rule == "coherent":
            batches = ordered[..., a:e].reshape(lead + (nb, b))
        else:                                                                    # b strata of nb chunks each
            strata = rng.permuted(ordered[..., a:e].reshape(lead + (b, nb)), axis=-1)
            batches = np.swapaxes(strata, -1, -2)
        out.append(np.asarray(batches))
    return np.concatenate(out, axis=-2)


def strata(ordered: np.ndarray, b: int, bounds: list[tuple[int, int]]) -> list[np.ndarray]:
    """Balanced's b strata in each window: the window's slice of the sorted order (sorted_order), (..., b, n_w / b)."""
    return [ordered[..., a:e].reshape(ordered.shape[:-1] + (b, (e - a) // b)) for a, e in bounds]


def same_document_share(batches: np.ndarray, m: int) -> float:
    """The share of a partition's within-batch pairs of chunks (rows (document, chunk), m per document) whose two
    chunks come from one document (random batches of one window of n chunks: (m - 1) / (n - 1))."""
    doc = np.asarray(batches) // m
    b = doc.shape[-1]
    same = (doc[..., :, None] == doc[..., None, :]).sum(axis=(-2, -1)) - b
    return float(same.sum() / (same.size * b * (b - 1)))


def excess_by_pairs(K: np.ndarray, m: int, batches: np.ndarray, window: int = 0) -> dict:
    """V - E V_random of one partition of a Gram K (rows (document, chunk), m per document), split exactly by the
    pairs it comes from: a pair i != j of one window shares a batch with probability (b - 1)/(n_w - 1) under random
    batches, so

        V - E V_random = (n/b)^-1 b^-2 sum_{i != j} (1[i, j share a batch] - (b - 1)/(n_w - 1)) K_ij,

    summed over the pairs of one document ('same_document') and of different documents ('cross_document')."""
    K = np.asarray(K, dtype=float)
    batches = np.asarray(batches)
    n, b = len(K), batches.shape[-1]
    together = np.zeros((n, n))
    for B in batches.reshape(-1, b):
        together[np.ix_(B, B)] = 1.0
    for a, e in window_bounds(n, b, window):
        together[a:e, a:e] -= (b - 1) / (e - a - 1)
    np.fill_diagonal(together, 0.0)
    part = together * K / ((n // b) * b**2)
    same = (np.arange(n) // m)[:, None] == (np.arange(n) // m)[None, :]
    return {"same_document": float(part[same].sum()), "cross_document": float(part[~same].sum())}


# --- gradient noise of a partition ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Population:
    """A list of whole documents (slots: document ids, repeats allowed; leading axes: independent lists) over a
    Gram K of D documents x m chunks (rows (document, chunk)), cut into windows of whole documents.

    The list's chunks are each slot's m chunks in order. Two copies of one document (a bootstrap draw) are
    distinct documents: a chunk pair across the copies gets the list's cross-document mean inner product S
    (pairs of different documents, as S_cross in docgrad.core.bootstrap), never the copy's own squared norm.
    `noise(batches)` is V and `random_noise(b)` is E V_random for that list's Gram."""

    K: np.ndarray
    m: int
    slots: np.ndarray                           # (..., S) document ids
    window: int
    independent_copies: bool
    S: np.ndarray = field(repr=False)           # (...,) cross-document mean inner product
    win_sum: np.ndarray = field(repr=False)     # (..., W) 1_w' K 1_w of each window
    win_trace: np.ndarray = field(repr=False)   # (..., W)
    sizes: np.ndarray = field(repr=False)       # (W,) chunks per window

    @classmethod
    def of(cls, K: np.ndarray, m: int, slots: np.ndarray | None = None, window: int = 0,
           independent_copies: bool = True) -> "Population":
        """The population of a list of documents (default: each of K's documents once, in order). window: chunks
        per window, a multiple of m (0: one window). independent_copies=False keeps K between copies (for a
        score: a copy's scores are the document's)."""
        K = np.asarray(K, dtype=float)
        D = len(K) // m
        if D * m != len(K):
            raise AnalysisError(f"a Gram of {len(K)} rows is not {m} chunks per document")
        slots = np.arange(D) if slots is None else np.asarray(slots)
        n = slots.shape[-1] * m
        w = n if window <= 0 or window >= n else int(window)
        if w % m:
            raise AnalysisError(f"window {window} is not a whole number of documents of {m} chunks")
        P = K.reshape(D, m, D, m).sum(axis=(1, 3))                          # document-pair sums
        same = slots[..., :, None] == slots[..., None, :]
        copies = same & ~np.eye(slots.shape[-1], dtype=bool)                 # pairs of copies of one document
        Pl = P[slots[..., :, None], slots[..., None, :]]                     # (..., S, S) slot-pair sums
        with np.errstate(invalid="ignore", divide="ignore"):
            S = np.where(same, 0, Pl).sum(axis=(-2, -1)) / (m * m * (~same).sum(axis=(-2, -1)))
        if independent_copies:
            Pl = np.where(copies, (m * m * S)[..., None, None], Pl)
        tr = np.diag(K).reshape(D, m).sum(axis=1)[slots]                    # (..., S)
        per = w // m
        bounds = range(0, slots.shape[-1], per)
        win_sum = np.stack([Pl[..., a:a + per, a:a + per].sum(axis=(-2, -1)) for a in bounds], axis=-1)
        win_trace = np.stack([tr[..., a:a + per].sum(axis=-1) for a in bounds], axis=-1)
        sizes = np.array([m * len(range(a, min(a + per, slots.shape[-1]))) for a in bounds], dtype=float)
        return cls(K, m, slots, w, independent_copies, S, win_sum, win_trace, sizes)

    @property
    def n(self) -> int:
        return self.slots.shape[-1] * self.m

    @property
    def chunks(self) -> np.ndarray:
        """(..., n) the list's chunks as rows of K."""
        return (self.slots[..., :, None] * self.m + np.arange(self.m)).reshape(self.slots.shape[:-1] + (self.n,))

    def group_sums(self, groups: np.ndarray) -> np.ndarray:
        """1_G' K 1_G of each group of list positions, copy pairs at S: groups (..., nG, g) -> (..., nG)."""
        nG, g = groups.shape[-2:]
        lead = np.broadcast_shapes(groups.shape[:-2], self.slots.shape[:-1])
        pos = np.broadcast_to(groups, lead + (nG, g)).reshape(-1, nG, g)
        chunks = np.broadcast_to(self.chunks, lead + (self.n,)).reshape(-1, self.n)
        S = np.broadcast_to(self.S, lead).reshape(-1)
        step = max(1, _BLOCK_ENTRIES // (nG * g * g))
        sums = [self._group_sums(pos[i:i + step], chunks[i:i + step], S[i:i + step]) for i in range(0, len(pos), step)]
        return np.concatenate(sums).reshape(lead + (nG,))

    def _group_sums(self, pos: np.ndarray, chunks: np.ndarray, S: np.ndarray) -> np.ndarray:
        """group_sums of one block: pos (L, nG, g), chunks (L, n), S (L,) -> (L, nG)."""
        ids = np.take_along_axis(chunks, pos.reshape(len(pos), -1), axis=1).reshape(pos.shape)
        Kb = self.K[ids[..., :, None], ids[..., None, :]]                       # (L, nG, g, g)
        slot, doc = pos // self.m, ids // self.m
        if self.independent_copies:
            copies = (doc[..., :, None] == doc[..., None, :]) & (slot[..., :, None] != slot[..., None, :])
            Kb = np.where(copies, S[:, None, None, None], Kb)
        return Kb.sum(axis=(-2, -1))

    def _mean_term(self) -> np.ndarray:
        """(1/n) sum_w 1_w'K1_w / n_w: the windows' mean |gbar_w|^2, subtracted from every V."""
        return (self.win_sum / self.sizes).sum(axis=-1) / self.n

    def noise(self, batches: np.ndarray) -> np.ndarray:
        """V = mean_B 1_B'K1_B / b^2 - (1/n) sum_w 1_w'K1_w / n_w for batches (..., n/b, b) of list positions."""
        b = batches.shape[-1]
        if batches.shape[-2] * b != self.n:
            raise AnalysisError(f"batches {batches.shape} do not partition the {self.n} chunks")
        window_bounds(self.n, b, self.window)
        return self.group_sums(batches).mean(axis=-1) / b**2 - self._mean_term()

    def balanced_noise(self, ordered: np.ndarray, b: int) -> np.ndarray:
        """E V over balanced's within-stratum permutations, for the sorted order (..., n) of sorted_order:
        (n/b)^-1 sum_w [tr K_w + (b/n_w)(1_w'K1_w - sum_s 1_s'K1_s)] / b^2 - (1/n) sum_w 1_w'K1_w / n_w."""
        bounds = window_bounds(self.n, b, self.window)
        total = 0.0
        for j, st in enumerate(strata(np.asarray(ordered), b, bounds)):
            ss = self.group_sums(st).sum(axis=-1)
            total = total + self.win_trace[..., j] + (self.win_sum[..., j] - ss) / st.shape[-1]
        return total / (self.n // b) / b**2 - self._mean_term()

    def random_noise(self, b: int) -> np.ndarray:
        """E V_random = sum_w (n_w/n) (n_w - b)/(b (n_w - 1)) s2_w, s2_w = (tr K_w - 1_w'K1_w/n_w)/n_w."""
        nw = self.sizes
        s2 = (self.win_trace - self.win_sum / nw) / nw
        return (nw / self.n * (nw - b) / (b * (nw - 1)) * s2).sum(axis=-1)

    def ratio(self, batches: np.ndarray) -> np.ndarray:
        """The partition's design effect V / E V_random (NaN where E V_random is 0)."""
        return _design_effect(self.noise(batches), self.random_noise(batches.shape[-1]))

    def balanced_ratio(self, ordered: np.ndarray, b: int) -> np.ndarray:
        """Balanced's design effect in expectation, E V_balanced / E V_random."""
        return _design_effect(self.balanced_noise(ordered, b), self.random_noise(b))


def _design_effect(v, e) -> np.ndarray:
    """V / E V_random, NaN where E V_random is 0."""
    v, e = np.asarray(v, dtype=float), np.asarray(e, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(e > 0, v / np.where(e > 0, e, 1), np.nan)


@dataclass(frozen=True)
class Scores:
    """A scalar score per chunk over lists of chunks (x: (..., n), leading axes independent lists, e.g. resamples
    with their own re-estimated scores), cut into windows of `window` chunks: V, E V_random and balanced's E V of
    the batch-mean score, the same numbers as Population with the Gram x x' (a copy keeps its own scores)."""

    x: np.ndarray
    window: int

    @classmethod
    def of(cls, x: np.ndarray, window: int = 0) -> "Scores":
        x = np.asarray(x, dtype=float)
        n = x.shape[-1]
        return cls(x, n if window <= 0 or window >= n else int(window))

    @property
    def n(self) -> int:
        return self.x.shape[-1]

    def _windows(self) -> list[np.ndarray]:
        return [self.x[..., a:a + self.window] for a in range(0, self.n, self.window)]

    def _mean_term(self) -> np.ndarray:
        return sum(w.sum(axis=-1) ** 2 / w.shape[-1] for w in self._windows()) / self.n

    def noise(self, batches: np.ndarray) -> np.ndarray:
        """V = mean_B (batch-mean score - its window's mean)^2 for batches (..., n/b, b) of list positions."""
        b = batches.shape[-1]
        if batches.shape[-2] * b != self.n:
            raise AnalysisError(f"batches {batches.shape} do not partition the {self.n} chunks")
        window_bounds(self.n, b, self.window)
        lead = np.broadcast_shapes(batches.shape[:-2], self.x.shape[:-1])
        flat = np.broadcast_to(batches, lead + batches.shape[-2:]).reshape(lead + (-1,))
        sums = np.take_along_axis(np.broadcast_to(self.x, lead + (self.n,)), flat, axis=-1).reshape(
            lead + batches.shape[-2:]).sum(axis=-1)
        return (sums**2).mean(axis=-1) / b**2 - self._mean_term()

    def balanced_noise(self, ordered: np.ndarray, b: int) -> np.ndarray:
        """E V over balanced's within-stratum permutations (Population.balanced_noise with K = x x')."""
        bounds = window_bounds(self.n, b, self.window)
        ordered = np.asarray(ordered)
        lead = np.broadcast_shapes(ordered.shape[:-1], self.x.shape[:-1])
        xs = np.take_along_axis(np.broadcast_to(self.x, lead + (self.n,)), np.broadcast_to(ordered, lead + (self.n,)),
                                axis=-1)
        total = 0.0
        for (a, e), st in zip(bounds, strata(xs, b, bounds)):
            w = xs[..., a:e]
            cross = w.sum(axis=-1) ** 2 - (st.sum(axis=-1) ** 2).sum(axis=-1)      # pairs of different strata
            total = total + (w**2).sum(axis=-1) + cross * b / (e - a)
        return total / (self.n // b) / b**2 - self._mean_term()

    def random_noise(self, b: int) -> np.ndarray:
        """E V_random = sum_w (n_w/n) (n_w - b)/(b (n_w - 1)) s2_w with s2_w the window's variance of the score."""
        out = 0.0
        for w in self._windows():
            nw = w.shape[-1]
            out = out + nw / self.n * (nw - b) / (b * (nw - 1)) * w.var(axis=-1)
        return out

    def ratio(self, batches: np.ndarray) -> np.ndarray:
        return _design_effect(self.noise(batches), self.random_noise(batches.shape[-1]))

    def balanced_ratio(self, ordered: np.ndarray, b: int) -> np.ndarray:
        return _design_effect(self.balanced_noise(ordered, b), self.random_noise(b))


# --- a cell's inputs ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CellInputs:
    """What batching needs of one cell: its full Gram (rows in (document, chunk) order, exact squared norms on
    the diagonal, summed over the parameter groups) and the per-chunk scores."""

    model: str
    revision: str
    corpus: str
    chunk: int
    doc_ids: list[int]
    m: int
    gram: np.ndarray = field(repr=False)
    loss: np.ndarray = field(repr=False)                     # (n,) per-chunk model loss
    surprise: np.ndarray | None = field(default=None, repr=False)   # (n,) unigram surprise, None if unavailable
    surprise_note: str = ""                                  # why the surprise is not available
    vocab_size: int | None = None
    targets: np.ndarray | None = field(default=None, repr=False)    # (D, m, C-1) target tokens (chunk_targets)

    @property
    def name(self) -> str:
        return f"{self.model} {self.revision} {self.corpus} c{self.chunk}"

    @property
    def n(self) -> int:
        return len(self.gram)

    def scores(self, score: str) -> np.ndarray | None:
        if score not in SCORES:
            raise AnalysisError(f"unknown score {score!r}: expected one of {', '.join(SCORES)}")
        return self.loss if score == "loss" else self.surprise


def cell_gram(cell: Cell, group: str = ALL) -> np.ndarray:
    """The cell's full Gram of `group` ('all': the sum of the groups) with rows in (document, chunk) order and the
    exact squared norms on the diagonal. Only a single-file cell has every pair: cross-file pairs were never
    computed, so a cell of several files is refused."""
    if len(cell.shards) != 1:
        raise AnalysisError(f"cell {cell.name} has {len(cell.shards)} result files: batches mixing documents of "
                            "different files need cross-file Gram entries, which were never computed; batching "
                            "needs a cell measured in one file (e.g. `docgrad probe --docs 0:16`)")
    sh = cell.shards[0]
    groups = [g for g in cell.sums if g != ALL] if group == ALL else [group]
    missing = [g for g in groups if g not in sh.gram]
    if missing:
        raise AnalysisError(f"{sh.path}: no Gram for group(s) {missing} (has {sorted(sh.gram)})")
    K = sum(np.asarray(sh.gram[g], dtype=np.float64) for g in groups)
    K[np.diag_indices_from(K)] = sum(np.asarray(sh.sqnorm[g], dtype=np.float64) for g in groups)
    order = np.lexsort((sh.index[:, 1], sh.index[:, 0]))
    return K[np.ix_(order, order)]


def chunk_targets(spans: np.ndarray, chunk: int) -> np.ndarray:
    """The target tokens of every chunk, (D, L) token spans -> (D, m, C-1), m = L // chunk: tokens 1..C-1 of each
    chunk (the tokens its loss scores)."""
    spans = np.asarray(spans)
    D, L = spans.shape
    m = L // chunk
    if m < 1 or chunk < 2:
        raise AnalysisError(f"spans of {L} tokens hold no chunk of {chunk} tokens with a target")
    return spans[:, :m * chunk].reshape(D, m, chunk)[:, :, 1:].astype(np.int64)


def unigram_surprise(spans: np.ndarray, chunk: int, vocab_size: int) -> np.ndarray:
    """Per-chunk mean unigram surprise, (D, L) token spans -> (D, m), m = L // chunk.

    Targets are tokens 1..C-1 of each chunk (the tokens its loss scores); counts c[v] run over every target of
    every chunk (N = D m (C-1) tokens), p[v] = (c[v] + 1) / (N + V), and a chunk's score is the FP64 mean of
    -log p[y] over its targets."""
    targets = chunk_targets(spans, chunk)
    if targets.min() < 0 or targets.max() >= vocab_size:
        raise AnalysisError(f"token ids span [{targets.min()}, {targets.max()}], outside a vocabulary of {vocab_size}")
    counts = np.bincount(targets.ravel(), minlength=vocab_size).astype(np.float64)
    logp = np.log(counts + 1.0) - np.log(targets.size + float(vocab_size))
    return -logp[targets].mean(axis=-1)


def resample_surprise(targets: np.ndarray, slots: np.ndarray, vocab_size: int) -> np.ndarray:
    """unigram_surprise of each resample's own documents: targets (D, m, C-1) of chunk_targets, slots (L, S)
    document ids (repeats allowed) -> (L, S m) scores, the counts c[v] over the resample's targets (a document
    drawn twice counted twice)."""
    targets = np.asarray(targets)
    slots = np.asarray(slots)
    D, m, T = targets.shape
    doc_counts = np.stack([np.bincount(t.ravel(), minlength=vocab_size) for t in targets]).astype(np.float64)
    flat = slots.reshape(-1, slots.shape[-1])
    out = np.empty(flat.shape + (m,))
    log_total = np.log(flat.shape[-1] * m * T + float(vocab_size))
    for i, row in enumerate(flat):
        logp = np.log(np.bincount(row, minlength=D) @ doc_counts + 1.0) - log_total
        out[i] = -logp[targets[row]].mean(axis=-1)
    return out.reshape(slots.shape[:-1] + (slots.shape[-1] * m,))


def cell_inputs(cell: Cell, manifest: str | Path = "data/corpora/manifest.json",
                cache: str | Path = "data/corpora/cache", vocab_size: int | None = None) -> CellInputs:
    """The Gram, losses and (when the span cache is there) unigram surprise of a single-file cell.

    The vocabulary size is the manifest's tokenizer record, else `vocab_size`. The cached spans must be the ones
    the result file records (spans_sha256 per document); a missing cache or manifest leaves surprise None with
    the reason in surprise_note, so a page can say so instead of failing."""
    K = cell_gram(cell)
    loss = np.asarray(cell.loss, dtype=float).reshape(-1)
    base = dict(model=cell.model, revision=cell.revision, corpus=cell.corpus, chunk=cell.chunk,
                doc_ids=list(cell.doc_ids), m=cell.m, gram=K, loss=loss)
    fix = f"docgrad corpora build --corpus {cell.corpus}"
    try:
        spans = {s.doc: s for s in corpora.load_spans(cell.corpus, manifest, cache)}
        tok = corpora.read_manifest(manifest).get("tokenizer", {})
    except corpora.CorpusError as e:
        note = "span cache missing" if "missing" in str(e) else f"span cache unusable: {e}"
        return CellInputs(**base, surprise_note=f"not available ({note}: {fix})", vocab_size=vocab_size)
    V = tok.get("vocab_size") or vocab_size
    if not V:
        raise AnalysisError(f"{manifest} records no tokenizer vocab_size: pass vocab_size")
    recorded = cell.shards[0].meta.get("spans_sha256")
    absent = [d for d in cell.doc_ids if d not in spans]
    if absent:
        return CellInputs(**base, surprise_note=f"not available (documents {absent} not in the span cache: {fix})",
                          vocab_size=int(V))
    if isinstance(recorded, dict):
        differ = [d for d in cell.doc_ids if recorded.get(str(d)) not in (None, spans[d].sha256)]
        if differ:
            return CellInputs(**base, vocab_size=int(V), surprise_note=(
                f"not available (cached spans of documents {differ} are not the ones the result file measured)"))
    tokens = np.stack([spans[d].tokens for d in cell.doc_ids])
    s = unigram_surprise(tokens, cell.chunk, int(V))
    if s.shape[1] != cell.m:
        raise AnalysisError(f"{cell.corpus}: spans give {s.shape[1]} chunks per document, the cell has {cell.m}")
    return CellInputs(**base, surprise=s.reshape(-1), vocab_size=int(V), targets=chunk_targets(tokens, cell.chunk))


# --- measurement with intervals ---------------------------------------------------------------------------

def rule_rng(seed: int, name: str, b: int, rule: str, stream: int) -> np.random.Generator:
    """Generator of one (cell, batch size, rule) and stream (2: the Monte-Carlo draws of random and balanced on
    the measured cell; 0 and 1, once the measured partition and the bootstrap, are no longer drawn: balanced is
    taken in expectation), independent of which other cells, sizes and rules are computed."""
    return np.random.default_rng([int(seed), zlib.crc32(name.encode()), int(b), RULES.index(rule), int(stream)])


def half_slots(D: int, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """(resamples, D - D // 2) random halves of D documents: each row a uniform draw without replacement (the
    delete-d jackknife's subsets, d = D // 2 deleted), ascending. Needs D >= MIN_HALF_DOCS."""
    if D < MIN_HALF_DOCS:
        raise AnalysisError(f"the delete-half jackknife needs at least {MIN_HALF_DOCS} documents, got {D}")
    return np.sort(np.argsort(rng.random((resamples, D)), axis=1)[:, :D - D // 2], axis=1)


def jackknife_se(values: np.ndarray, D: int, log: bool = True) -> float:
    """Delete-d jackknife standard error (Shao & Wu 1989) from a statistic on N random subsets of r = D - d of D
    documents, d = D // 2:  v = r / (d N) sum_s (theta_s - mean theta)^2, theta the log of the statistic (log=True,
    a ratio) or the statistic itself. NaN with fewer than two finite values (or a non-positive ratio)."""
    x = np.asarray(values, dtype=float)
    if log:
        with np.errstate(divide="ignore", invalid="ignore"):
            x = np.where(x > 0, np.log(np.where(x > 0, x, 1.0)), np.nan)
    x = x[np.isfinite(x)]
    if x.size < 2:
        return float("nan")
    d = D // 2
    return float(np.sqrt((D - d) / d * np.mean((x - x.mean()) ** 2)))


def normal_interval(point, se: float, level: float = CI_LEVEL, log: bool = True) -> tuple:
    """The two-sided normal interval at `level`: exp(log point +- z se) for a ratio (log=True), point +- z se for a
    difference; (None, None) without a finite point and standard error."""
    if point is None or not np.isfinite(point) or not np.isfinite(se) or (log and not point > 0):
        return (None, None)
    z = NormalDist().inv_cdf(0.5 + level / 2)
    if log:
        return (float(np.exp(np.log(point) - z * se)), float(np.exp(np.log(point) + z * se)))
    return (float(point - z * se), float(point + z * se))


def normal_p(point, se: float, null: float, log: bool = True) -> float:
    """Two-sided p-value of point against null with the standard error se (on the log scale for a ratio):
    2 (1 - Phi(|t|)), t = (log point - log null) / se or (point - null) / se; 1 when both are equal (se 0), NaN
    without a finite standard error."""
    if point is None or not np.isfinite(point) or not np.isfinite(se) or (log and not point > 0):
        return float("nan")
    diff = np.log(point) - np.log(null) if log else point - null
    if se == 0:
        return 1.0 if diff == 0 else 0.0
    return math.erfc(abs(diff) / se / math.sqrt(2))      # 2 (1 - Phi(t)), exact in the tails


@dataclass(frozen=True)
class RuleRatio:
    """One rule at one batch size on one cell: the design effect V / E V_random of its batches for the gradients,
    the unigram surprise (lexical; None without the span cache) and the per-chunk loss.

    random is the reference: its ratios are 1 (the closed form) and it has no interval; balanced is its
    expectation over the within-stratum permutations (closed form). *_ci: 95% delete-half jackknife interval
    (`jackknife_se`, `normal_interval`: on the log scale, over `resamples` random halves of the cell's `documents`).
    *_draws: 95% range over `resamples` repeated draws of the rule's randomness on the measured cell (random: the
    Monte-Carlo distribution of single random partitions; balanced: of single within-stratum permutations;
    identity and coherent draw nothing: None). same_document: share of within-batch chunk pairs from one document
    (identity, coherent; random: its expectation; balanced: None); same_document_excess: the share of the
    gradient noise above random's, V - E V_random, that pairs of one document carry (excess_by_pairs; identity,
    coherent). *_halves: the ratio on each half (not written to JSON), for paired comparisons (rule_tests)."""

    model: str
    revision: str
    corpus: str
    b: int
    rule: str
    window: int
    score: str
    gradient: float
    gradient_ci: tuple
    gradient_draws: tuple | None
    gradient_draws_mean: float | None
    lexical: float | None
    lexical_ci: tuple
    lexical_draws: tuple | None
    loss: float
    noise: float                 # V of the measured partition (balanced: E V; random: E V_random)
    random_noise: float          # E V_random
    resamples: int               # random halves of the documents
    documents: int               # D, the cell's documents (the jackknife's factor r / d)
    same_document: float | None = None
    same_document_excess: float | None = None
    gradient_halves: np.ndarray | None = field(default=None, repr=False, compare=False)
    lexical_halves: np.ndarray | None = field(default=None, repr=False, compare=False)

    def to_json(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()
                if not k.endswith("_halves")}


def measure(ci: CellInputs, sizes=(4, 8, 16, 32), rules=RULES, window: int = 0, score: str = "unigram",
            resamples: int = DEFAULT_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> list[RuleRatio]:
    """Every rule at every batch size on one cell (gradients, unigram surprise, loss), with delete-half jackknife
    intervals and the spread of the rules' random draws; `resamples` (0, or >= MIN_RESAMPLES) serves both.

    `score` ('unigram' or 'loss') orders balanced and coherent; without it (no span cache) they are left out.
    On each half of the documents the unigram surprise is re-estimated from the half's own counts when the cell's
    target tokens are known (ci.targets; else each document keeps its scores) and the rule is re-applied to the
    half's scores. Randomness: the halves come from default_rng([seed, crc32(cell name)]), the same for every rule
    and batch size (paired); each (b, rule) has its own generator for its draws (rule_rng)."""
    resamples = check_resamples(resamples)
    order = ci.scores(score)
    rules = [r for r in rules if order is not None or r in ("identity", "random")]
    pops = {"gradient": Population.of(ci.gram, ci.m, window=window), "loss": Scores.of(ci.loss, window)}
    if ci.surprise is not None:
        pops["lexical"] = Scores.of(ci.surprise, window)
    halves, half_order = {}, None
    if resamples:
        docs_rng = np.random.default_rng([int(seed), zlib.crc32(ci.name.encode())])
        slots = half_slots(len(ci.doc_ids), resamples, docs_rng)
        halves["gradient"] = Population.of(ci.gram, ci.m, slots, window)
        chunks = halves["gradient"].chunks
        if ci.surprise is not None:
            redo = ci.targets is not None and ci.vocab_size
            halves["lexical"] = Scores.of(resample_surprise(ci.targets, slots, ci.vocab_size) if redo
                                          else ci.surprise[chunks], window)
        if order is not None:
            half_order = halves["lexical"].x if score == "unigram" else ci.loss[chunks]
    order = np.zeros(ci.n) if order is None else order
    rows = []
    for b in sizes:
        for rule in rules:
            rows.append(_rule_row(ci, pops, halves, order, half_order, int(b), rule, window, score, resamples, seed))
    return rows


def _rule_ratios(pops: dict, rule: str, scores: np.ndarray, b: int, window: int,
                 rng: np.random.Generator | None) -> tuple[dict, np.ndarray | None]:
    """The rule's ratio for every population (balanced: in expectation) and its batches (balanced: None)."""
    if rule == "balanced":
        ordered = sorted_order(scores, b, window)
        return {k: p.balanced_ratio(ordered, b) for k, p in pops.items()}, None
    batches = partition(rule, scores, b, window, rng)
    return {k: p.ratio(batches) for k, p in pops.items()}, batches


def _rule_row(ci, pops, halves, order, half_order, b, rule, window, score, resamples, seed) -> RuleRatio:
    """measure() for one (b, rule)."""
    e = float(pops["gradient"].random_noise(b))
    D = len(ci.doc_ids)
    same = excess = None
    if rule == "random":
        point = {k: 1.0 for k in pops}
        same = (ci.m - 1) / (pops["gradient"].window - 1)
    else:
        ratios, batches = _rule_ratios(pops, rule, order, b, window, None)
        point = {k: float(v) for k, v in ratios.items()}
        if batches is not None:
            same = same_document_share(batches, ci.m)
            parts = excess_by_pairs(ci.gram, ci.m, batches, window)
            total = parts["same_document"] + parts["cross_document"]
            excess = parts["same_document"] / total if total != 0 else None
    ci_ = {"gradient": (None, None), "lexical": (None, None)}
    raw = {"gradient": None, "lexical": None}
    draws = {"gradient": None, "lexical": None}
    draws_mean = None
    if resamples and rule != "random":
        ratios, _ = _rule_ratios(halves, rule, half_order if half_order is not None else
                                 np.zeros(halves["gradient"].n), b, window, None)
        for k, r in ratios.items():
            raw[k] = r
            ci_[k] = normal_interval(point[k], jackknife_se(r, D))
    if resamples and rule in ("random", "balanced"):
        rd = partition(rule, np.broadcast_to(order, (resamples, ci.n)), b, window, rule_rng(seed, ci.name, b, rule, 2))
        for k in draws:
            if k in pops:
                r = pops[k].ratio(rd)
                draws[k] = tuple(bs.percentile_ci(r, CI_LEVEL))
                draws_mean = float(np.mean(r)) if k == "gradient" else draws_mean
    return RuleRatio(ci.model, ci.revision, ci.corpus, b, rule, int(window), score, point["gradient"],
                     ci_["gradient"], draws["gradient"], draws_mean, point.get("lexical"), ci_["lexical"],
                     draws["lexical"], point["loss"], point["gradient"] * e, e, resamples, D, same, excess,
                     raw["gradient"], raw["lexical"])


VERSUS = (("identity", "random"), ("balanced", "random"), ("coherent", "random"), ("identity", "coherent"))


def rule_tests(rows: list[RuleRatio], alpha: float = ALPHA) -> list[dict]:
    """The page's family of gradient-noise comparisons under Holm (docgrad.core.orderings.holm): on every (cell,
    b), identity, balanced and coherent against random (the ratio against 1, on the log scale: random's noise is
    E V_random of the same half) and identity against coherent (difference of the ratios, paired: both rules on the
    same halves of the documents). Each has the delete-half jackknife standard error (jackknife_se), a two-sided
    normal p-value (normal_p) and its normal interval at Holm's level; resolved when Holm rejects it. One record per
    comparison, in row order: model, revision, corpus, b, rule, against, diff (ratio - 1, or the difference), se,
    p, rank, level, resolved, sign, ci (at Holm's level) and ci95 (95%), both on the scale of diff."""
    by = {(r.model, r.revision, r.corpus, r.b, r.rule): r for r in rows}
    recs = []
    for r in rows:
        for rule, against in VERSUS:
            if r.rule != rule or r.gradient_halves is None:
                continue
            if against == "random":
                rec = {"point": r.gradient, "se": jackknife_se(r.gradient_halves, r.documents), "log": True,
                       "null": 1.0}
            else:
                o = by.get((r.model, r.revision, r.corpus, r.b, against))
                if o is None or o.gradient_halves is None:
                    continue
                rec = {"point": r.gradient - o.gradient, "log": False, "null": 0.0,
                       "se": jackknife_se(r.gradient_halves - o.gradient_halves, r.documents, log=False)}
            recs.append(({"model": r.model, "revision": r.revision, "corpus": r.corpus, "b": r.b, "rule": rule,
                          "against": against}, rec))
    pvals = [normal_p(x["point"], x["se"], x["null"], x["log"]) for _, x in recs]
    out = []
    for (meta, x), p, h in zip(recs, pvals, holm(pvals, alpha)):
        shift = x["null"] if x["log"] else 0.0              # a ratio's interval is reported as ratio - 1

        def at(level):
            lo, hi = normal_interval(x["point"], x["se"], level, x["log"])
            return [None, None] if lo is None else [lo - shift, hi - shift]

        diff = x["point"] - shift
        out.append({**meta, "diff": diff, "se": x["se"], "p": p, **h, "ci": at(1 - h["level"]), "ci95": at(CI_LEVEL),
                    "sign": int(np.sign(diff)) if h["resolved"] else 0})
    return out


# --- identity against R(bC) -----------------------------------------------------------------------------------

def identity_to_R(ratio: float, K: np.ndarray, b: int, S_cross: float) -> float:
    """R(bC) from identity's ratio on the Gram K (b dividing the chunks per document, one window): undo the
    finite-population factor and estimate |gbar|^2 by S_cross instead of Q = 1'K1/n^2,

        A = Q + ratio (n - b)(T - Q) / ((n - 1) b),   R(bC) = b (A - S_cross) / (T - S_cross),   T = tr K / n."""
    n = len(K)
    Q, T = K.sum() / n**2, np.trace(K) / n
    A = Q + ratio * (n - b) * (T - Q) / ((n - 1) * b)
    return float(b * (A - S_cross) / (T - S_cross))


def compare_identity(ci: CellInputs, rows: list[RuleRatio], estimates) -> list[dict]:
    """Identity's ratio beside R(bC) of docgrad.results.stats (`estimates`: the cell's Estimates of group 'all'), for
    every measured b that divides the chunks per document, with |gbar|^2 as each estimates it (Q, S_cross)."""
    n, K = ci.n, ci.gram
    out = []
    for r in rows:
        W = r.b * ci.chunk
        if r.rule != "identity" or r.window not in (0, n) or ci.m % r.b or W not in estimates.R:
            continue
        R = estimates.R[W]
        out.append({"model": ci.model, "revision": ci.revision, "corpus": ci.corpus, "b": r.b,
                    "identity": r.gradient, "R_bC": R, "rel_diff": r.gradient / R - 1,
                    "R_from_identity": identity_to_R(r.gradient, K, r.b, estimates.S_cross),
                    "fpc": (n - 1) / (n - r.b), "Q": float(K.sum() / n**2), "S_cross": estimates.S_cross,
                    "sigma2": estimates.sigma2})
    return out


# --- reading -----------------------------------------------------------------------------------------------

# The batch-composition study's lexical ratios to (one) random partition, 64-row batches of 2,048-token packed rows
# in windows of 32 batches (cited in the module docstring)
COMPOSITION_STUDY = {"balanced": 0.06704, "coherent": 58.4895, "b": 64, "window_batches": 32, "row_tokens": 2048}
WEAK_POWER = 0.5     # reading: below this median power the gradient noise moves less than the square root of the
                     # lexical change, and lexical balance "does not predict gradient-noise balance in size"


def elasticity(gradient: float, lexical: float) -> float:
    """ln(gradient ratio) / ln(lexical ratio): the power of the lexical change that the gradient noise follows
    (1: as large on a log scale, 0: unmoved); NaN where the lexical ratio is 1 or not positive."""
    if lexical is None or not lexical > 0 or lexical == 1 or not gradient > 0:
        return float("nan")
    return float(np.log(gradient) / np.log(lexical))


def power_halves(rows: list[RuleRatio]) -> np.ndarray | None:
    """The median over `rows` of elasticity(gradient, lexical) on each half of the documents: per half, each row's
    gradient and lexical ratio on that half (one half of its cell: paired) give its power, and the median is taken
    over the rows (half i of every cell is one joint draw; cells are halved independently). None without halves."""
    if not rows or any(r.gradient_halves is None or r.lexical_halves is None for r in rows):
        return None
    g = np.stack([r.gradient_halves for r in rows])
    lex = np.stack([r.lexical_halves for r in rows])
    with np.errstate(divide="ignore", invalid="ignore"):
        e = np.where((g > 0) & (lex > 0) & (lex != 1), np.log(np.abs(g)) / np.log(np.abs(lex)), np.nan)
    ok = np.isfinite(e).any(axis=0)
    out = np.full(e.shape[1], np.nan)
    out[ok] = np.nanmedian(e[:, ok], axis=0)
    return out


def _median_power(rows: list[RuleRatio]) -> tuple[float | None, list]:
    """The median power over the rows and its 95% delete-half jackknife interval (point +- 1.96 se)."""
    e = np.array([elasticity(r.gradient, r.lexical) for r in rows])
    halves = power_halves(rows)
    point = float(np.nanmedian(e)) if np.isfinite(e).any() else None
    if halves is None or point is None:
        return point, [None, None]
    return point, list(normal_interval(point, jackknife_se(halves, rows[0].documents, log=False), log=False))


def _at(r: RuleRatio) -> dict:
    return {"corpus": r.corpus, "b": r.b, "ratio": r.gradient, "ci": list(r.gradient_ci)}


def summary(rows: list[RuleRatio], tests: list[dict] = (), comparisons: list[dict] = (),
            control: str = CONTROL) -> dict:
    """The numbers the page's reading states, from measure() rows, rule_tests() records and compare_identity()
    rows: per rule its range of ratios (lowest and highest cell with their intervals), its lexical range, how many
    cells Holm resolves below / above random, the median power with its interval; identity against coherent; the
    random draws' spread; identity against R(bC); and the batch-composition study's setting against the measured
    range (`study`)."""
    out: dict = {"rules": {}, "control": control, "family": len(tests),
                 "score": next((r.score for r in rows if r.rule in ("balanced", "coherent")), None)}
    vs_random = {(t["model"], t["revision"], t["corpus"], t["b"], t["rule"]): t for t in tests
                 if t["against"] == "random"}
    for rule in ("identity", "balanced", "coherent"):
        rs = [r for r in rows if r.rule == rule]
        if not rs:
            continue
        ts = [vs_random[k] for k in ((r.model, r.revision, r.corpus, r.b, rule) for r in rs) if k in vs_random]
        lex = [r for r in rs if r.lexical is not None]
        rec = {"cells": len(rs), "lowest": _at(min(rs, key=lambda r: r.gradient)),
               "highest": _at(max(rs, key=lambda r: r.gradient)), "tested": len(ts),
               "below": sum(t["resolved"] and t["diff"] < 0 for t in ts),
               "above": sum(t["resolved"] and t["diff"] > 0 for t in ts),
               "lexical_range": [min(r.lexical for r in lex), max(r.lexical for r in lex)] if lex else None,
               "control_range": [min((r.gradient for r in rs if r.corpus == control), default=None),
                                 max((r.gradient for r in rs if r.corpus == control), default=None)]}
        studied = [r for r in rs if r.corpus != control]
        if studied:
            rec["highest_studied"] = _at(max(studied, key=lambda r: r.gradient))
        if rule != "identity" and lex:
            rec["power"], rec["power_ci"] = _median_power(lex)
        shares = [r.same_document for r in rs if r.same_document is not None]
        if shares:
            rec["same_document_range"] = [min(shares), max(shares)]
        excess = {r.corpus: r.same_document_excess for r in rs if r.same_document_excess is not None
                  and r.b == max(x.b for x in rs)}
        if excess:
            rec["same_document_excess_at_largest_b"] = excess
        out["rules"][rule] = rec
    vc = [t for t in tests if t["rule"] == "identity" and t["against"] == "coherent"]
    out["identity_vs_coherent"] = {"tested": len(vc), "above": sum(t["resolved"] and t["diff"] > 0 for t in vc),
                                   "below": sum(t["resolved"] and t["diff"] < 0 for t in vc)}
    rand = [r for r in rows if r.rule == "random"]
    if rand:
        out["random_same_document"] = rand[0].same_document
    rand = [r for r in rand if r.gradient_draws is not None]
    if rand:
        out["random_draws"] = {
            "gradient": [min(r.gradient_draws[0] for r in rand), max(r.gradient_draws[1] for r in rand)],
            "gradient_mean_range": [min(r.gradient_draws_mean for r in rand), max(r.gradient_draws_mean for r in rand)]}
    if comparisons:
        d = [c["rel_diff"] for c in comparisons]
        err = [abs(c["R_from_identity"] / c["R_bC"] - 1) for c in comparisons]
        out["identity_vs_R"] = {"rel_diff_range": [min(d), max(d)], "max_conversion_error": max(err),
                                "Q_over_S_cross": {c["corpus"]: c["Q"] / c["S_cross"] for c in comparisons}}
    out["study"] = study_scope(rows, control)
    return out


def study_scope(rows: list[RuleRatio], control: str = CONTROL) -> dict:
    """The batch-composition study's setting against what was measured: its lexical ratios and batch size beside
    the measured ranges (inside or outside), and per corpus the gradient-noise ratio its lexical ratio would give
    at that corpus's median power over the batch sizes (an extrapolation wherever the setting lies outside the
    measured range), with an interval from the power's delete-half jackknife interval. The control corpus is named
    as the closest analogue of the study's packed rows of short documents."""
    out: dict = {"study": COMPOSITION_STUDY, "closest": control,
                 "measured_b": [min((r.b for r in rows), default=None), max((r.b for r in rows), default=None)],
                 "rules": {}}
    out["b_inside"] = out["measured_b"][1] is not None and out["measured_b"][0] <= COMPOSITION_STUDY["b"] \
        <= out["measured_b"][1]
    for rule in ("balanced", "coherent"):
        rs = [r for r in rows if r.rule == rule and r.lexical is not None]
        if not rs:
            continue
        lo, hi = min(r.lexical for r in rs), max(r.lexical for r in rs)
        target = COMPOSITION_STUDY[rule]
        per = {}
        for corpus in dict.fromkeys(r.corpus for r in rs):
            power, ci = _median_power([r for r in rs if r.corpus == corpus])
            if power is None:
                continue
            per[corpus] = {"power": power, "implied": float(target ** power),
                           "implied_ci": [None, None] if ci[0] is None else
                           sorted([float(target ** ci[0]), float(target ** ci[1])])}
        out["rules"][rule] = {"study_lexical": target, "measured_lexical": [lo, hi],
                              "lexical_inside": bool(lo <= target <= hi), "corpora": per}
    return out
