"""Causal context in the analysis: per-position loss and squared norm with intervals, and standalone vs causal
gradients on the same tokens (docs/methods.md, "Causal context" and "Standalone vs causal").

    position_means(table, counts)             per-position means of a (documents x positions) table, any weights
    first_chunks(cell, m, doc_ids)            a cell restricted to chunks 0..m-1 of (some of) its documents
    position_pairs(cell)                      inner products by document pair and position pair (group 'all')
    centred_estimate(pairs, counts, sizes)    sigma2, rho(l), R(W') centred by the position means, and the
                                              position-mean term, for any document weights
    compare_modes(causal, standalone)         rho(lag), R(W) for W <= window (pooled and centred), sigma2, the
                                              noise of a window's mean gradient and the per-position loss, squared
                                              norm and position-mean squared norm in both modes, with paired
                                              document-bootstrap intervals of each and of the difference
    comparison_family(comparisons)            the comparisons page 06 states, one Holm family
    page_comparisons(...)                     what page 06 shows: one comparison per measured corpus, and a reason
                                              for every requested corpus that is not measured yet
    (their frames and the reading in words are docgrad.presentation.causal)

In the causal context chunk k has every earlier chunk of its window as context, so the chunk positions of a
window are not exchangeable; the pooled estimators (docgrad.core.bootstrap.estimate) average over positions as
docs/methods.md#causal-context says, and the per-position loss and squared norm are reported beside them.

Centring by position means. Write g_{d,k} for chunk k of document d, G_k = E g_{d,k} for the mean gradient at
position k (documents are independent draws; positions need not be exchangeable) and
C_{kk'} = E<g_{d,k} - G_k, g_{d,k'} - G_{k'}> for the within-document covariance of the noise around the
position means. From the Gram, for the D documents of a cell:

    within  W_{kk'} = (1/D) sum_d K_{(d,k),(d,k')}                  estimates E<g_{d,k}, g_{d,k'}>
    cross   M_{kk'} = (1/N) sum_{d != e} K_{(d,k),(e,k')}           estimates <G_k, G_{k'}>
    centred C^_{kk'} = W_{kk'} - M_{kk'}                             estimates C_{kk'} without bias

with the sum over the N ordered pairs of distinct documents in one file (as for S_cross). M is unbiased because
d and e are independent: E<g_{d,k}, g_{e,k'}> = <G_k, G_{k'}>. Subtracting the plug-in mean instead,
<g^_k, g^_{k'}> with g^_k = (1/D) sum_d g_{d,k}, includes the D own-document terms and has expectation
<G_k, G_{k'}> + C_{kk'}/D, so it shrinks every centred covariance by (1 - 1/D). With one file C^ is the
leave-one-document-out form (1/D) sum_d <g_{d,k}, g_{d,k'} - g^(-d)_{k'}>, g^(-d) the mean of the other documents,
i.e. D/(D-1) times the plug-in sample covariance. In a bootstrap draw with counts c, both sums are weighted by c
and the copies of one document never pair (cross = c^T Q c - sum_d c_d^2 Q_dd, as in bootstrap.estimate). Then

    sigma2_c   = (1/m) sum_k C^_kk                                   noise around the position means
    rho_c(l)   = (1/(m-l)) sum_{k<m-l} C^_{k,k+l} / sigma2_c
    R_c(m'C)   = mean over aligned blocks b of (1/m'^2) sum_{k,k' in b} C^_{kk'}  /  (sigma2_c / m')

and the pooled estimators split exactly into a centred part and a position-mean term (S_cross = mean of M):

    sigma2     = sigma2_c + sigma2_pos,   sigma2_pos = (1/m) sum_k M_kk - S_cross     (spread of the G_k)
    rho(l)     = (sigma2_c / sigma2) rho_c(l) + mu(l),   mu(l) = ((1/(m-l)) sum_{k<m-l} M_{k,k+l} - S_cross) / sigma2
    R(mC)      = (sigma2_c / sigma2) R_c(mC)      (the window's mean-gradient noise sigma2 R(mC)/m is the same)

R_c(C) = 1 and R_c(mC) = 1 + (2/m) sum_l (m-l) rho_c(l) exactly, as for the pooled estimators. Adding the same
vector a_k to every document's chunk k leaves C^ (hence sigma2_c, rho_c, R_c) unchanged when every document
pair is in one file; the pooled rho changes by the position-mean term. M_kk estimates |G_k|^2, the position
mean's squared norm, reported by position.

The comparison is paired: the standalone results for the tokens of a causal window of m = W/C chunks are
chunks 0..m-1 of the same documents in the standard cell, so every bootstrap draw resamples the documents once
and applies the same document counts to both modes. The interval of a difference (causal - standalone) is the
percentile interval of the draw-wise differences; because both modes share the documents of each draw, what
varies from document to document in the same way in both modes cancels from it.

The page's families (comparison_family): per compared corpus, the centred rho difference at every lag lC < W, the
centred R difference at every window C < W' <= W, the ratio of the window noise and, at the last chunk, the
differences of the mean squared gradient norm |g|^2 and of the squared norm of the position mean |G_k|^2 (the
latter estimated from pairs of different documents, so it can fall below 0: a difference, not a ratio;
GRADIENT_QUANTITIES);
all of them, over every corpus, are one family under Holm's step-down procedure at family-wise level 0.05. The
difference of the last chunk's loss, expected to fall with context, is a check kept in a family of its own
(CHECK_QUANTITIES), so an expected result never counts among the findings. Each family uses
docgrad.core.orderings.resolve_differences (two-sided bootstrap p-values of the paired draws, each comparison's
interval at the level Holm tests it at). A comparison is resolved when Holm rejects it and that
interval excludes 0 (the ratio: 1).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from docgrad.core import bootstrap as bs
from docgrad.core import gates
from docgrad.core.orderings import ALPHA, resolve_differences
from docgrad.core.constants import ALL, BOOTSTRAP_SEED, CAUSAL, CORPORA, FLOAT32, GROUPS, RESAMPLES, corpus_order
from docgrad.errors import AnalysisError
from docgrad.results.cells import Cell, load_cells, ordered_rows, pool_cell
from docgrad.results.format import ResultFileError, Shard, find_results, load_result, parse_stem
from docgrad.results.stats import (Analysis, Estimates, cell_rng, check_bootstrap_memory, check_resamples,
                                   estimate_cell, r_rel)

STANDALONE_MODE, CAUSAL_MODE, DIFFERENCE = "standalone", "causal", "causal − standalone"
MODES = (STANDALONE_MODE, CAUSAL_MODE)
NOT_APPLICABLE = "not applicable"     # the verdict of a causal analysis (gates are defined on the standalone 16K one)


class ComparisonError(AnalysisError):
    """Two cells cannot be compared as standalone vs causal (different model, corpus, chunk, documents or
    tokens); the message names both cells' files and what was expected."""


# --- per-position means ------------------------------------------------------------------------------------

def position_means(table: np.ndarray, counts: np.ndarray | None = None, name: str = "table") -> np.ndarray:
    """(B, m) per-position means of a (D, m) table (documents x chunk positions) for document weights
    counts (B, D): row b is sum_d c_bd table[d, k] / sum_d c_bd. counts None: the plain means, shape (1, m).
    A draw with no document (all weights 0) gives NaN."""
    table = np.asarray(table, dtype=float)
    if table.ndim != 2 or table.shape[0] < 1 or table.shape[1] < 1:
        raise AnalysisError(f"position_means: {name} must be a (documents x positions) table, got shape "
                            f"{table.shape}")
    if not np.all(np.isfinite(table)):
        raise AnalysisError(f"position_means: {name} has {int(np.sum(~np.isfinite(table)))} non-finite entries")
    c = np.ones((1, table.shape[0])) if counts is None else np.atleast_2d(np.asarray(counts, dtype=float))
    if c.ndim != 2 or c.shape[1] != table.shape[0]:
        raise AnalysisError(f"position_means: counts must be (draws x {table.shape[0]} documents) to match "
                            f"{name}, got shape {np.shape(counts)}")
    if np.any(c < 0):
        raise AnalysisError("position_means: counts must be >= 0 (how often each document is drawn)")
    with np.errstate(divide="ignore", invalid="ignore"):
        n = c.sum(axis=1, keepdims=True)
        return np.where(n > 0, (c @ table) / np.where(n > 0, n, 1), np.nan)


# --- restricting a cell to its first chunks ------------------------------------------------------------------

def first_chunks(cell: Cell, m: int, doc_ids=None) -> Cell:
    """The cell restricted to chunks 0..m-1 of each document (and to the documents doc_ids, default all), with
    its block sums, losses and squared norms rebuilt from its files as if only those chunks had been measured.
    Cross-document pairs stay those within a file. Used for the standalone results of the tokens of a causal
    window of m chunks: chunks 0..m-1 of the standard cell."""
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or not 1 <= int(m) <= cell.m:
        raise AnalysisError(f"first_chunks: m must be an integer from 1 to the {cell.m} chunks per document of "
                            f"cell {cell.name} ({cell.file_list}), got {m!r}")
    m = int(m)
    if not cell.shards:
        raise AnalysisError(f"first_chunks: cell {cell.name} has no files to rebuild it from")
    want = list(cell.doc_ids) if doc_ids is None else [int(d) for d in doc_ids]
    if len(set(want)) != len(want):
        raise AnalysisError(f"first_chunks: doc_ids repeats a document: {want}")
    absent = sorted(set(want) - set(cell.doc_ids))
    if absent:
        raise AnalysisError(f"first_chunks: documents {absent} are not in cell {cell.name} ({cell.file_list}), "
                            f"which has documents {list(cell.doc_ids)}")
    keep_ids = set(want)
    groups = sorted(cell.shards[0].gram)
    parts, doc_order, losses, sqnorms, used = [], [], [], [], []
    for sh in cell.shards:
        docs, m_full, order = ordered_rows(sh)
        keep = np.array([d in keep_ids for d in docs])
        if not keep.any():
            continue
        rows = order.reshape(len(docs), m_full)[keep, :m].ravel()       # (document, chunk) order, chunks < m
        n = int(keep.sum())
        blocks = {}
        for g in groups:
            K = np.array(sh.gram[g], dtype=np.float64)
            K[np.diag_indices_from(K)] = sh.sqnorm[g]
            blocks[g] = bs.shard_block_sums(K[np.ix_(rows, rows)], n, m)
        parts.append(blocks)
        doc_order += [d for d, k in zip(docs, keep) if k]
        losses.append(sh.loss[rows].reshape(n, m))
        sqnorms.append(sum(np.asarray(sh.sqnorm[g], dtype=np.float64) for g in groups)[rows].reshape(n, m))
        used.append(sh)
    sums = {g: bs.assemble([p[g] for p in parts], m) for g in groups}
    total = sums[groups[0]]
    for g in groups[1:]:
        total = total + sums[g]
    sums[ALL] = total
    if not np.any(total.Np - np.diag(np.diag(total.Np))):
        raise AnalysisError(f"first_chunks: documents {want} of cell {cell.name} have no cross-document pairs "
                            f"(no file holds two of them: {cell.file_list}); S_cross is undefined")
    return replace(cell, doc_ids=doc_order, m=m, sums=sums, loss=np.concatenate(losses),
                   sqnorm=np.concatenate(sqnorms), shards=used)


# --- centring by position means ---------------------------------------------------------------------------

@dataclass(frozen=True)
class PositionPairs:
    """Inner products of group 'all' by document pair and position pair: Q[d, e, k, k'] = <g_{d,k}, g_{e,k'}>
    (exact squared norms on the diagonal), 0 where d and e are in different files; pairs[d, e] = 1 where they
    are in one file (d = e included). Documents in the order doc_ids."""

    Q: np.ndarray
    pairs: np.ndarray
    doc_ids: list[int]

    @property
    def m(self) -> int:
        return int(self.Q.shape[2])


def position_pairs(cell: Cell) -> PositionPairs:
    """PositionPairs of chunks 0..cell.m-1 of the cell's documents (cell.doc_ids order), from its files; a cell
    restricted by first_chunks keeps the files of its full chunks and takes the first cell.m of them."""
    if not cell.shards:
        raise AnalysisError(f"position_pairs: cell {cell.name} has no files to read its Gram from")
    m, col = cell.m, {int(d): i for i, d in enumerate(cell.doc_ids)}
    D = len(col)
    Q, pairs = np.zeros((D, D, m, m)), np.zeros((D, D))
    for sh in cell.shards:
        docs, m_full, order = ordered_rows(sh)
        if m_full < m:
            raise AnalysisError(f"position_pairs: {sh.path} has {m_full} chunks per document, fewer than the "
                                f"{m} of cell {cell.name}")
        mine = [(i, col[d]) for i, d in enumerate(docs) if d in col]
        if not mine:
            continue
        K = sum(np.asarray(sh.gram[g], dtype=np.float64) for g in sorted(sh.gram))
        K[np.diag_indices_from(K)] = sum(np.asarray(sh.sqnorm[g], dtype=np.float64) for g in sorted(sh.sqnorm))
        rows = order.reshape(len(docs), m_full)[[i for i, _ in mine], :m]          # (n, m) rows of chunks < m
        at = [j for _, j in mine]
        Q[np.ix_(at, at)] = K[np.ix_(rows.ravel(), rows.ravel())].reshape(len(at), m, len(at), m).transpose(0, 2, 1, 3)
        pairs[np.ix_(at, at)] = 1.0
    missing = [d for d, i in col.items() if pairs[i, i] == 0]
    if missing:
        raise AnalysisError(f"position_pairs: documents {missing} of cell {cell.name} are in none of its files "
                            f"({cell.file_list})")
    return PositionPairs(Q, pairs, list(cell.doc_ids))


def _diagonal_means(A: np.ndarray) -> np.ndarray:
    """(B, m-1): for a (B, m, m) array, the mean of its l-th upper diagonal, l = 1..m-1."""
    m = A.shape[1]
    return np.stack([np.diagonal(A, offset=l, axis1=1, axis2=2).mean(axis=1) for l in range(1, m)], axis=1) \
        if m > 1 else np.zeros((A.shape[0], 0))


CENTRED_BATCH_ENTRIES = 2**22          # draws are processed in batches of about this many (draw, d, e, k, k') terms


def centred_estimate(pp: PositionPairs, c: np.ndarray, sizes) -> dict[str, np.ndarray]:
    """Statistics centred by the position means, for document weights c (B, D) (or (D,)); the maths is in this
    module's docstring. Keys (leading axis B): 'sigma2' (sigma2_c), 'rho' (B, m-1; lag l = column l-1), 'R'
    (B, J; blocks of `sizes` chunks), 'mean_norm' (B, m: |G_k|^2 estimated from cross-document pairs), 'S_cross',
    'sigma2_pos' (the spread of the position means, sigma2 - sigma2_c), 'sigma2_pooled' (sigma2),
    'position_term' (B, m-1: mu(l), the pooled rho(l) minus (sigma2_c / sigma2) rho_c(l)). Undefined values (no
    cross-document pair, sigma2_c = 0) are NaN."""
    c = np.atleast_2d(np.asarray(c, dtype=float))
    D, m = pp.Q.shape[0], pp.m
    if c.shape[1] != D:
        raise AnalysisError(f"centred_estimate: weights must be (draws x {D} documents), got shape {c.shape}")
    B = c.shape[0]
    step = max(1, int(CENTRED_BATCH_ENTRIES // max(D * D * m * m, 1)))      # bound the (draws x D x m^2) product
    if B > step:
        parts = [centred_estimate(pp, c[i:i + step], sizes) for i in range(0, B, step)]
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    own = pp.Q[np.arange(D), np.arange(D)].reshape(D, m * m)                   # (D, m*m) within-document blocks
    with np.errstate(divide="ignore", invalid="ignore"):
        cross = np.einsum("bex,be->bx", (c @ pp.Q.reshape(D, D * m * m)).reshape(B, D, m * m), c) - (c**2) @ own
        count = np.einsum("bd,de,be->b", c, pp.pairs, c) - (c**2) @ np.diag(pp.pairs)
        M = np.where(count[:, None] > 0, cross / np.where(count > 0, count, 1)[:, None], np.nan).reshape(B, m, m)
        within = ((c @ own) / c.sum(axis=1, keepdims=True)).reshape(B, m, m)
        Cv = within - M
        sigma2 = np.einsum("bkk->b", Cv) / m
        S = M.mean(axis=(1, 2))
        sigma2_pos = np.einsum("bkk->b", M) / m - S
        pooled = sigma2 + sigma2_pos
        rho = _diagonal_means(Cv) / sigma2[:, None]
        term = (_diagonal_means(M) - S[:, None]) / pooled[:, None]
        R = []
        for b in (int(x) for x in sizes):
            nb = m // b
            blocks = [Cv[:, i * b:(i + 1) * b, i * b:(i + 1) * b].sum(axis=(1, 2)) for i in range(nb)]
            R.append(np.mean(blocks, axis=0) / b**2 / (sigma2 / b))
    return {"sigma2": sigma2, "rho": rho, "R": np.stack(R, axis=1), "mean_norm": np.einsum("bkk->bk", M),
            "S_cross": S, "sigma2_pos": sigma2_pos, "sigma2_pooled": pooled, "position_term": term}


@dataclass(frozen=True)
class CentredStats:
    """One mode's statistics centred by the position means (centred_estimate), in tokens: sigma2 (sigma2_c),
    rho (lag -> rho_c), R (window -> R_c), sigma2_pos (the spread of the position means), position_term
    (lag -> mu), mean_norm (|G_k|^2 by position); `ci` holds 95% intervals under the same names."""

    sigma2: float
    rho: dict[int, float]
    R: dict[int, float]
    sigma2_pos: float
    position_term: dict[int, float]
    mean_norm: PositionStats
    ci: dict = field(default_factory=dict)

    def interval(self, name: str, at: int | None = None) -> tuple:
        c = self.ci.get(name)
        c = c if at is None else (c or {}).get(at)
        return tuple(c) if c else (None, None)

    @classmethod
    def from_draws(cls, pt: dict, dr: dict | None, chunk: int, sizes) -> "CentredStats":
        lags = [(l + 1) * chunk for l in range(pt["rho"].shape[1])]
        windows = [int(b) * chunk for b in sizes]
        ci = {}
        if dr is not None:
            ci = {"sigma2": tuple(bs.percentile_ci(dr["sigma2"])),
                  "sigma2_pos": tuple(bs.percentile_ci(dr["sigma2_pos"])),
                  "rho": dict(zip(lags, map(tuple, bs.percentile_ci(dr["rho"])))),
                  "R": dict(zip(windows, map(tuple, bs.percentile_ci(dr["R"])))),
                  "position_term": dict(zip(lags, map(tuple, bs.percentile_ci(dr["position_term"]))))}
        return cls(float(pt["sigma2"][0]), dict(zip(lags, map(float, pt["rho"][0]))),
                   dict(zip(windows, map(float, pt["R"][0]))), float(pt["sigma2_pos"][0]),
                   dict(zip(lags, map(float, pt["position_term"][0]))),
                   PositionStats.from_draws(pt["mean_norm"], None if dr is None else dr["mean_norm"]), ci)

    def to_json(self) -> dict:
        def keyed(d):
            return {str(k): (list(v) if isinstance(v, tuple) else v) for k, v in d.items()}

        out = {"sigma2": self.sigma2, "rho": keyed(self.rho), "R": keyed(self.R), "sigma2_pos": self.sigma2_pos,
               "position_term": keyed(self.position_term), "mean_norm": self.mean_norm.to_json()}
        for k, v in self.ci.items():
            out[f"{k}_ci"] = keyed(v) if isinstance(v, dict) else list(v)
        return out


# --- standalone vs causal ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PositionStats:
    """Per chunk position k = 0..m-1: the mean over documents and its 95% interval (empty without a bootstrap)."""

    value: list[float]
    ci: list = field(default_factory=list)

    def to_json(self) -> dict:
        return {"value": list(self.value), "ci": [list(x) for x in self.ci]}

    @classmethod
    def from_draws(cls, point: np.ndarray, draws: np.ndarray | None) -> "PositionStats":
        return cls([float(x) for x in np.ravel(point)],
                   [] if draws is None else [tuple(x) for x in bs.percentile_ci(draws)])


@dataclass(frozen=True)
class ModeComparison:
    """Standalone vs causal gradients of one corpus on the same tokens: the first `window` tokens (m chunks) of
    each of the same documents. `standalone` and `causal` hold the pooled estimators of group 'all' in each mode
    (rho at lags C..(m-1)C, R at W = C, 2C, 4C, .., window); `centred` the same centred by the position means
    (mode -> CentredStats); `difference` the causal − standalone differences of rho and R (pooled: 'rho', 'R';
    centred: 'rho_centred', 'R_centred'; the position-mean term: 'position_term') with paired intervals
    ('<key>_ci'); `ratio` causal / standalone of sigma2, of the centred sigma2 and of the window noise (sigma2
    R(W)/m, the noise variance of a window's mean chunk gradient, the same pooled or centred) with paired
    intervals; `positions` the per-position mean loss, squared norm and position-mean squared norm |G_k|^2 in
    each mode and their differences. `family_draws` holds, for comparison_family, (point, paired draws) of each
    comparison the page states."""

    model: str
    revision: str
    corpus: str
    chunk: int
    window: int
    doc_ids: list[int]
    resamples: int
    seed: int
    standalone: Estimates
    causal: Estimates
    difference: dict            # "rho": {lag: value}, "rho_ci": {lag: (lo, hi)}, "R": ..., "R_ci": ..., centred
    ratio: dict                 # "sigma2", "sigma2_centred", "window_noise" (each with "_ci"), "window_noise_modes"
    positions: dict             # mode (and DIFFERENCE) -> {"loss", "sqnorm", "mean_norm": PositionStats}
    files: dict                 # mode -> file paths
    standalone_context: str     # args.context of the standalone files ("standalone" or "standalone-bos")
    standalone_chunks: int      # chunks per document of the full standalone cell
    centred: dict = field(default_factory=dict)                                       # mode -> CentredStats
    family_draws: dict = field(default_factory=dict, repr=False, compare=False)       # (quantity, at) -> (pt, draws)

    @property
    def m(self) -> int:
        return self.window // self.chunk

    @property
    def n_docs(self) -> int:
        return len(self.doc_ids)

    def estimates(self, mode: str) -> Estimates:
        return {STANDALONE_MODE: self.standalone, CAUSAL_MODE: self.causal}[mode]

    def to_json(self) -> dict:
        def keyed(d):
            return {str(k): (list(v) if isinstance(v, (tuple, list)) else v) for k, v in d.items()}

        return {"model": self.model, "revision": self.revision, "corpus": self.corpus, "chunk": self.chunk,
                "window": self.window, "chunks_per_window": self.m, "n_docs": self.n_docs,
                "doc_ids": list(self.doc_ids), "resamples": self.resamples, "seed": self.seed,
                "standalone": self.standalone.to_json(), "causal": self.causal.to_json(),
                "centred": {mode: c.to_json() for mode, c in self.centred.items()},
                "difference": {k: keyed(v) for k, v in self.difference.items()},
                "ratio": {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.ratio.items()},
                "positions": {mode: {q: s.to_json() for q, s in p.items()} for mode, p in self.positions.items()},
                "files": {k: list(v) for k, v in self.files.items()},
                "standalone_context": self.standalone_context, "standalone_chunks": self.standalone_chunks}


def comparison_rng(seed: int, causal: Cell) -> np.random.Generator:
    """The comparison's generator: (seed, crc32 of '<causal cell name> vs standalone'), so its draws do not
    depend on which other cells are present and differ from the causal cell's own (docgrad.results.stats.cell_rng)."""
    return np.random.default_rng([int(seed), zlib.crc32(f"{causal.name} vs standalone".encode())])


def _check_pair(causal: Cell, standalone: Cell) -> None:
    """Refuse a pair that is not standalone vs causal on the same tokens."""
    both = (f"causal cell {causal.name} ({causal.file_list}) and standalone cell {standalone.name} "
            f"({standalone.file_list})")
    if causal.context != CAUSAL or causal.window is None:
        raise ComparisonError(f"compare_modes: the first cell must be causal (--context causal --window W), got "
                              f"context {causal.context!r} for {causal.name} ({causal.file_list})")
    if standalone.context == CAUSAL:
        raise ComparisonError(f"compare_modes: the second cell must be standalone, got a causal cell "
                              f"{standalone.name} ({standalone.file_list})")
    for what, a, b in (("model", causal.model, standalone.model), ("revision", causal.revision, standalone.revision),
                       ("corpus", causal.corpus, standalone.corpus), ("chunk", causal.chunk, standalone.chunk)):
        if a != b:
            raise ComparisonError(f"compare_modes: {both} differ in {what} (causal {a!r}, standalone {b!r}); "
                                  "the comparison needs the same model, revision, corpus and chunk")
    if causal.m * causal.chunk != causal.window:
        raise ComparisonError(f"compare_modes: causal cell {causal.name} has {causal.m} chunks of {causal.chunk} "
                              f"per document, expected window / chunk = {causal.window // causal.chunk}")
    if causal.m > standalone.m:
        raise ComparisonError(f"compare_modes: {both}: the window has {causal.m} chunks per document but the "
                              f"standalone cell only {standalone.m}; expected at least {causal.m}")
    absent = sorted(set(causal.doc_ids) - set(standalone.doc_ids))
    if absent:
        raise ComparisonError(f"compare_modes: {both}: documents {absent} of the causal cell have no standalone "
                              f"results (standalone documents {list(standalone.doc_ids)})")
    hashes = {}
    for mode, cell in ((CAUSAL_MODE, causal), (STANDALONE_MODE, standalone)):
        for sh in cell.shards:
            rec = sh.meta.get("spans_sha256")
            if isinstance(rec, dict):
                for d, h in rec.items():
                    hashes.setdefault(int(d), {})[mode] = (h, sh.path)
    for d in causal.doc_ids:
        h = hashes.get(int(d), {})
        if len(h) == 2 and h[CAUSAL_MODE][0] != h[STANDALONE_MODE][0]:
            raise ComparisonError(f"compare_modes: document {d} is not the same text in both modes: span sha256 "
                                  f"{h[CAUSAL_MODE][0][:12]}.. in {h[CAUSAL_MODE][1]}, {h[STANDALONE_MODE][0][:12]}.. "
                                  f"in {h[STANDALONE_MODE][1]} (different corpus manifests or tokenizers?)")


def _counts_for(doc_ids: list[int], ref_ids: list[int], counts: np.ndarray) -> np.ndarray:
    """Columns of counts (over ref_ids) rearranged to the order of doc_ids (the same documents)."""
    col = {d: i for i, d in enumerate(ref_ids)}
    return counts[:, [col[d] for d in doc_ids]]


def compare_modes(causal: Cell, standalone: Cell, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED,
                  indices: np.ndarray | None = None) -> ModeComparison:
    """Standalone vs causal on the same tokens: the causal cell (window W = mC) against chunks 0..m-1 of the
    same documents in the standalone cell (first_chunks). Every bootstrap draw resamples the causal cell's
    documents once (comparison_rng) and applies the same counts to both modes, so the intervals of the
    differences and ratios are paired; the centred statistics (centred_estimate) use the same draws.

    indices: explicit (B, D) resample indices into causal.doc_ids (overrides resamples/seed; tests)."""
    _check_pair(causal, standalone)
    m, C, D = causal.m, causal.chunk, len(causal.doc_ids)
    sub = first_chunks(standalone, m, causal.doc_ids)
    if indices is None and check_resamples(resamples) > 0:
        indices = bs.resample_indices(comparison_rng(seed, causal), D, resamples)
    counts = bs.counts_from_indices(np.asarray(indices), D) if indices is not None else None
    ones = np.ones((1, D))
    cells = {CAUSAL_MODE: causal, STANDALONE_MODE: sub}
    sizes = causal.sums[ALL].sizes
    est, draws, cen, cdraws, pos_pt, pos_dr = {}, {}, {}, {}, {}, {}
    quantities = ("loss", "sqnorm")
    for mode, cell in cells.items():
        w_pt = _counts_for(cell.doc_ids, causal.doc_ids, ones)
        w_dr = None if counts is None else _counts_for(cell.doc_ids, causal.doc_ids, counts)
        pt = bs.estimate(cell.sums[ALL], w_pt, C)
        dr = None if w_dr is None else bs.estimate(cell.sums[ALL], w_dr, C)
        est[mode] = Estimates.from_draws(pt, dr, cell.sums[ALL].sizes, C)
        draws[mode] = (pt, dr)
        pp = position_pairs(cell)
        cpt = centred_estimate(pp, w_pt, sizes)
        cdr = None if w_dr is None else centred_estimate(pp, w_dr, sizes)
        cen[mode] = CentredStats.from_draws(cpt, cdr, C, sizes)
        cdraws[mode] = (cpt, cdr)
        pos_pt[mode] = {q: position_means(getattr(cell, q), w_pt, q) for q in quantities}
        pos_pt[mode]["mean_norm"] = cpt["mean_norm"]
        pos_dr[mode] = None if w_dr is None else {q: position_means(getattr(cell, q), w_dr, q) for q in quantities}
        if pos_dr[mode] is not None:
            pos_dr[mode]["mean_norm"] = cdr["mean_norm"]
    lags = [(l + 1) * C for l in range(m - 1)]
    windows = [int(b) * C for b in sizes]

    def paired(source, key):
        """(point difference, draw-wise differences or None) of `key` between the modes."""
        pt = source[CAUSAL_MODE][0][key][0] - source[STANDALONE_MODE][0][key][0]
        dr = None if counts is None else source[CAUSAL_MODE][1][key] - source[STANDALONE_MODE][1][key]
        return pt, dr

    difference, diff_draws = {}, {}
    for name, source, key, xs in (("rho", draws, "rho", lags), ("R", draws, "R", windows),
                                  ("rho_centred", cdraws, "rho", lags), ("R_centred", cdraws, "R", windows),
                                  ("position_term", cdraws, "position_term", lags)):
        pt, dr = paired(source, key)
        difference[name] = dict(zip(xs, map(float, pt)))
        difference[f"{name}_ci"] = {} if dr is None else dict(zip(xs, map(tuple, bs.percentile_ci(dr))))
        diff_draws[name] = (pt, dr)

    def noise(d):        # sigma2 R(W) / m = the noise variance of a window's mean chunk gradient
        return d["sigma2"] * d["R"][:, -1] / m

    with np.errstate(divide="ignore", invalid="ignore"):
        pairs = {"sigma2": (draws, lambda d: d["sigma2"]), "sigma2_centred": (cdraws, lambda d: d["sigma2"]),
                 "window_noise": (draws, noise)}
        ratio, ratio_draws = {}, {}
        for name, (source, f) in pairs.items():
            ratio[name] = float(f(source[CAUSAL_MODE][0])[0] / f(source[STANDALONE_MODE][0])[0])
            if counts is not None:
                ratio_draws[name] = f(source[CAUSAL_MODE][1]) / f(source[STANDALONE_MODE][1])
                ratio[f"{name}_ci"] = tuple(bs.percentile_ci(ratio_draws[name]))
        ratio["window_noise_modes"] = {mode: float(noise(draws[mode][0])[0]) for mode in MODES}
    positions = {mode: {q: PositionStats.from_draws(pos_pt[mode][q], None if pos_dr[mode] is None
                                                    else pos_dr[mode][q]) for q in pos_pt[mode]}
                 for mode in MODES}
    positions[DIFFERENCE] = {q: PositionStats.from_draws(
        pos_pt[CAUSAL_MODE][q] - pos_pt[STANDALONE_MODE][q],
        None if counts is None else pos_dr[CAUSAL_MODE][q] - pos_dr[STANDALONE_MODE][q]) for q in pos_pt[CAUSAL_MODE]}
    family = {}
    if counts is not None:
        pt, dr = diff_draws["rho_centred"]
        family.update({("rho", l): (float(pt[j]), dr[:, j]) for j, l in enumerate(lags)})
        pt, dr = diff_draws["R_centred"]
        family.update({("R", W): (float(pt[j]), dr[:, j]) for j, W in enumerate(windows) if W > C})
        family[("window_noise", int(causal.window))] = (ratio["window_noise"], ratio_draws["window_noise"])
        last = m - 1
        for q, name in (("sqnorm", "sqnorm_last"), ("mean_norm", "mean_norm_last")):   # causal - standalone
            family[(name, last * C)] = (float(pos_pt[CAUSAL_MODE][q][0, last] - pos_pt[STANDALONE_MODE][q][0, last]),
                                        pos_dr[CAUSAL_MODE][q][:, last] - pos_dr[STANDALONE_MODE][q][:, last])
        loss_c, loss_s = pos_dr[CAUSAL_MODE]["loss"], pos_dr[STANDALONE_MODE]["loss"]
        family[("loss_last", last * C)] = (float(pos_pt[CAUSAL_MODE]["loss"][0, last]
                                                 - pos_pt[STANDALONE_MODE]["loss"][0, last]),
                                           loss_c[:, last] - loss_s[:, last])
    ctx = {str(sh.args.get("context") or "standalone") for sh in standalone.shards}
    return ModeComparison(causal.model, causal.revision, causal.corpus, C, int(causal.window), list(causal.doc_ids),
                          0 if counts is None else int(len(counts)), int(seed), est[STANDALONE_MODE], est[CAUSAL_MODE],
                          difference, ratio, positions,
                          {STANDALONE_MODE: [str(f) for f in sub.files], CAUSAL_MODE: [str(f) for f in causal.files]},
                          "/".join(sorted(ctx)), standalone.m, {mode: cen[mode] for mode in MODES}, family)


# --- the page's family of comparisons ---------------------------------------------------------------------

RATIOS = ("window_noise",)          # family quantities compared with 1 (causal / standalone), the others with 0
FAMILY_QUANTITIES = ("rho", "R", "window_noise", "sqnorm_last", "mean_norm_last", "loss_last")
GRADIENT_QUANTITIES = FAMILY_QUANTITIES[:-1]   # page 06's findings: the gradients' noise, norm and position means
CHECK_QUANTITIES = ("loss_last",)              # the expected fall of the loss with context: a check, a family apart


@dataclass(frozen=True)
class Family:
    """The comparisons page 06 states, over every compared corpus, under Holm at family-wise level `alpha`.
    rows: one dict per comparison, in page order (corpus, then FAMILY_QUANTITIES, then lag or window):
    corpus, quantity, at (tokens: lag, window, or the last chunk's start), value (difference, or ratio for
    RATIOS), null (0 or 1), ci95 (paired 95% interval), p (two-sided bootstrap p-value over `draws` finite
    paired draws: 0 when none is on the other side of the null, so p < 2 / draws), rank, level (Holm's
    level for it), ci (paired interval at 1 - level), resolved (Holm rejects and ci excludes null), sign."""

    rows: list
    alpha: float = ALPHA
    method: str = "Holm"

    @property
    def size(self) -> int:
        return len(self.rows)

    @property
    def n_resolved(self) -> int:
        return sum(bool(r["resolved"]) for r in self.rows)

    def for_corpus(self, corpus: str) -> list[dict]:
        return [r for r in self.rows if r["corpus"] == corpus]

    def to_json(self) -> dict:
        return {"method": self.method, "alpha": self.alpha, "size": self.size, "resolved": self.n_resolved,
                "rows": [dict(r) for r in self.rows]}


def comparison_family(comps: dict, alpha: float = ALPHA, quantities=FAMILY_QUANTITIES) -> Family:
    """Holm over the comparisons of `quantities` the page states (ModeComparison.family_draws of each corpus in
    comps, page order): p-values and intervals from the paired draws (docgrad.core.orderings.resolve_differences);
    a ratio is tested as ratio - 1 and reported as a ratio. Page 06 makes two families: its findings
    (GRADIENT_QUANTITIES) and the check that the context is used (CHECK_QUANTITIES: the last chunk's loss, expected
    to fall). Comparisons without draws (resamples = 0) are left out; no comparison gives an empty family."""
    unknown = [q for q in quantities if q not in FAMILY_QUANTITIES]
    if unknown:
        raise ValueError(f"comparison_family: unknown quantities {unknown}; expected some of {FAMILY_QUANTITIES}")
    named, meta = {}, {}
    for k, c in comps.items():
        keys = [q for q in c.family_draws if q[0] in quantities]
        for key in sorted(keys, key=lambda q: (FAMILY_QUANTITIES.index(q[0]), q[1])):
            pt, dr = c.family_draws[key]
            null = 1.0 if key[0] in RATIOS else 0.0
            named[(k, *key)] = (pt - null, np.asarray(dr, dtype=float) - null)
            meta[(k, *key)] = (null, bs.percentile_ci(np.asarray(dr, dtype=float)),
                               int(np.isfinite(np.asarray(dr, dtype=float)).sum()))
    held = resolve_differences(named, alpha) if named else {}
    rows = []
    for name, r in held.items():
        null, ci95, n_draws = meta[name]
        ci = [None if x is None else float(x) + null for x in r["ci"]]
        excl = ci[0] is not None and (ci[0] > null or ci[1] < null)
        resolved = bool(r["resolved"] and excl)
        rows.append({"corpus": name[0], "quantity": name[1], "at": int(name[2]), "value": r["diff"] + null,
                     "null": null, "ci95": list(ci95), "p": r["p"], "draws": n_draws, "rank": r["rank"],
                     "level": r["level"],
                     "ci": ci, "resolved": resolved, "sign": int(np.sign(r["diff"])) if resolved else 0})
    return Family(rows, alpha)


# --- what a page shows ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PageComparisons:
    """Page 06's input: one ModeComparison per measured corpus (requested order), and for every requested
    corpus without one the reason (`not_measured`); `causal_windows` lists the windows of every causal cell of
    the model found (corpus -> windows), so a page can say that another window exists."""

    comparisons: dict
    not_measured: dict
    causal_windows: dict
    window: int
    chunk: int
    model: str
    revision: str

    @property
    def measured(self) -> list[str]:
        return list(self.comparisons)

    def to_json(self) -> dict:
        return {"model": self.model, "revision": self.revision, "chunk": self.chunk, "window": self.window,
                "measured": self.measured, "not_measured": dict(self.not_measured),
                "causal_windows": {k: list(v) for k, v in self.causal_windows.items()},
                "comparisons": {k: c.to_json() for k, c in self.comparisons.items()}}


def _model_files(results_dir: Path, model: str, revision: str, corpora) -> list[Path]:
    """Result files that may belong to (model, revision) and one of corpora: the model's own folder when the
    directory has the standard layout, else every file; names that do not parse are kept (args decide)."""
    root = Path(results_dir)
    own = root / model.replace("/", "__") / revision
    files = find_results(own if own.is_dir() else root)
    keep = []
    for f in files:
        try:
            if parse_stem(f)["corpus"] not in corpora:
                continue
        except ResultFileError:
            pass
        keep.append(f)
    return keep


def _cells(results_dir: Path, model: str, revision: str, chunk: int, corpora, causal: bool) -> dict:
    """corpus -> pooled Cell of (model, revision, chunk) in one context (causal: corpus -> {window: Cell})."""
    by: dict[tuple, list[Shard]] = {}
    for f in _model_files(results_dir, model, revision, corpora):
        sh = load_result(f, groups=GROUPS)
        a = sh.args
        if (a["model"], str(a["revision"]), int(a["chunk"])) != (model, revision, chunk) or a["corpus"] not in corpora:
            continue
        if (sh.context == CAUSAL) != causal or sh.dtype != FLOAT32:
            continue                                   # page 06 compares float32 probes
        by.setdefault(sh.cell, []).append(sh)
    out: dict = {}
    for key, shards in sorted(by.items()):
        cell = pool_cell(shards)
        if causal:
            out.setdefault(cell.corpus, {})[cell.window] = cell
        else:
            out[cell.corpus] = cell
    return out


def check_page_parameters(corpora, chunk: int, window: int, resamples: int) -> list[str]:
    """The parameters page 06 cannot use, refused before it draws anything (AnalysisError naming the
    parameter, what it expects and what it got). Returns the corpora as a list."""
    corpora = list(corpora)
    if not corpora:
        raise AnalysisError("corpora is empty: name at least one corpus, e.g. ['BOOKS', 'WEB']")
    if len(set(corpora)) != len(corpora):
        raise AnalysisError(f"corpora repeats a name: {corpora}")
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 2:
        raise AnalysisError(f"chunk must be an integer >= 2 (tokens), got {chunk!r}")
    if isinstance(window, bool) or not isinstance(window, int) or window < chunk or window % chunk:
        raise AnalysisError(f"window must be a positive multiple of chunk ({chunk}) in tokens, e.g. {8 * chunk}, "
                            f"got {window!r}")
    check_resamples(resamples)
    return corpora


def page_comparisons(causal_dir: Path, standalone_dir: Path, model: str, revision: str, chunk: int, window: int,
                     corpora, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED) -> PageComparisons:
    """Standalone vs causal for every requested corpus measured in the causal context at `window`; the
    others with the reason they are not compared. A corpus name is refused when it is neither a study corpus
    nor a cell of the model in either directory; a missing directory is refused."""
    corpora = check_page_parameters(corpora, chunk, window, resamples)
    for name, d in (("causal_dir", causal_dir), ("standalone_dir", standalone_dir)):
        if not Path(d).is_dir():
            raise AnalysisError(f"{name}: results directory {d} does not exist")
    causal = _cells(Path(causal_dir), model, revision, chunk, corpora, causal=True)
    standalone = _cells(Path(standalone_dir), model, revision, chunk, corpora, causal=False)
    known = set(CORPORA) | set(causal) | set(standalone)
    unknown = [k for k in corpora if k not in known]
    if unknown:
        raise AnalysisError(f"unknown corpus {', '.join(map(repr, unknown))}: expected some of "
                            f"{', '.join(sorted(known))}")
    comps, reasons = {}, {}
    for k in sorted(corpora, key=lambda c: corpora.index(c)):
        wins = causal.get(k, {})
        if window not in wins:
            other = f" (causal results at W = {', '.join(map(str, sorted(wins)))} only)" if wins else ""
            reasons[k] = f"no causal result at W = {window} in {causal_dir} yet{other}"
        elif k not in standalone:
            reasons[k] = f"causal result at W = {window}, but no standalone cell in {standalone_dir} to compare"
        elif standalone[k].m < window // chunk:
            reasons[k] = (f"the standalone cell has {standalone[k].m} chunks per document, fewer than the "
                          f"{window // chunk} of the window")
        else:
            comps[k] = compare_modes(wins[window], standalone[k], resamples, seed)
    return PageComparisons(comps, reasons, {k: sorted(v) for k, v in sorted(causal.items(), key=lambda kv:
                                                                            corpus_order(kv[0]))},
                           window, chunk, model, revision)


def cell_positions(cell: Cell, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED,
                   indices: np.ndarray | None = None) -> dict:
    """Per-position mean loss and squared norm of one cell with 95% document-bootstrap intervals. The draws are
    the cell's own (docgrad.results.stats.cell_rng), the same documents as its other intervals in estimate_cell.
    indices: explicit (B, D) resample indices (tests)."""
    D = len(cell.doc_ids)
    if indices is None and check_resamples(resamples) > 0:
        indices = bs.resample_indices(cell_rng(seed, cell), D, resamples)
    counts = None if indices is None else bs.counts_from_indices(np.asarray(indices), D)
    if cell.sqnorm is None:
        raise AnalysisError(f"cell {cell.name} ({cell.file_list}) has no squared norms per chunk")
    return {q: PositionStats.from_draws(position_means(getattr(cell, q), None, q),
                                        None if counts is None else position_means(getattr(cell, q), counts, q))
            for q in ("loss", "sqnorm")}


def cell_name(c) -> str:
    """The name of an estimated cell (docgrad.results.stats.CellEstimate) as its pooled cell has it
    (docgrad.results.cells.Cell.name):
    '<model> <revision> <CORPUS> c<chunk>', followed by ' causal w<W>' for a causal cell."""
    name = f"{c.model} {c.revision} {c.corpus} c{c.chunk}"
    return f"{name} {CAUSAL} w{c.window}" if c.context == CAUSAL else name


def analyze_causal(results_dir: Path, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED,
                   groups=GROUPS, dtype: str = FLOAT32) -> tuple:
    """(Analysis of the causal cells of results_dir, {cell name: cell_positions}). The estimators and intervals
    are docgrad.results.stats.analyze's on the causal cells; of the gates, G1 (sketch fidelity of --exact-ref files) and
    G3 (S_cross resolved) apply to any cell, G2 and the verdict are defined on the standalone 16K measurement and
    are marked not applicable. dtype: which probes (float32 by default, as docgrad.results.cells.load_cells)."""
    import time

    t0 = time.perf_counter()
    resamples = check_resamples(resamples)
    cells = load_cells(Path(results_dir), groups=groups, context=CAUSAL, dtype=dtype)
    t_load = time.perf_counter() - t0
    check_bootstrap_memory(resamples, list(cells.values()))
    est, pos = [], {}
    for cell in cells.values():
        t1 = time.perf_counter()
        e = estimate_cell(cell, resamples, seed)
        pos[cell_name(e)] = cell_positions(cell, resamples, seed)
        est.append(replace(e, seconds=time.perf_counter() - t1))
    g = {"G1": gates.gate_g1(est), "G2": {"status": NOT_APPLICABLE, "pass": None,
                                           "summary": "G2 (the control's R(16K) and rho_long) is defined on the "
                                                      "standalone 16K measurement"},
         "G3": gates.gate_g3(est)}
    verdict = (f"{NOT_APPLICABLE} (causal context: the verdict is defined on the standalone 16K measurement; "
               f"G1 {g['G1']['status']}, G3 {g['G3']['status']})")
    a = Analysis(str(results_dir), int(resamples), int(seed), est, r_rel(est), g, verdict, [],
                 {"load": t_load, "total": time.perf_counter() - t0})
    return a, pos
