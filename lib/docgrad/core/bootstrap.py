"""Estimators of one cell from per-document block sums, and the vectorised document bootstrap.
Definitions: docs/methods.md#estimators and #document-bootstrap.

Every statistic of a cell is a ratio of sums of Gram entries K (chunk-gradient inner products, exact
squared norms on the diagonal). Each of those sums is a sum over documents (or pairs of documents) of a
per-document (per-pair) block sum. A bootstrap resample that draws document d c_d times is therefore
a weighted combination of the same block sums with weights c_d, so the 2000 resamples cost a few small
matrix products instead of 2000 Gram rebuilds.

Block sums of one cell (D documents, m chunks each, chunk rows ordered by chunk index):
  P[d, e]   = sum_{k, k'} K_{(d,k),(e,k')}     document-pair sums (0 where d, e are in different files:
              those pairs were never computed); Np[d, e] = m_d m_e or 0 the matching pair counts
  diag[d]   = sum_k K_{(d,k),(d,k)}             (exact squared norms)
  lag[d, l] = sum_k K_{(d,k),(d,k+l)},  l = 1..m-1,   nlag[d, l] = m - l
  blk[d, j] = sum over aligned blocks b of m_j chunks of |block mean|^2 = sum_{k,k' in b} K / m_j^2,
              nblk[d, j] = floor(m / m_j)

Statistics for document weights c (c = 1 for the estimate itself, counts for a resample):
  cross sum   = c^T P c - sum_d c_d^2 P[d, d]   (a document drawn twice never pairs with its own copy:
  cross count = c^T Np c - sum_d c_d^2 Np[d, d]  all c_d^2 copy-copy blocks are removed)
  S_cross     = cross sum / cross count                     (estimates |G|^2)
  sigma2      = (c . diag) / (c . m) - S_cross              (per-chunk noise variance)
  rho(l)      = ((c . lag_l) / (c . nlag_l) - S_cross) / sigma2
  R(m_j C)    = ((c . blk_j) / (c . nblk_j) - S_cross) / (sigma2 / m_j)
  rho_long    = mean of rho(l) over lags with long_lo <= l C < long_hi
  B_simple    = C sigma2 / S_cross tokens (shuffled chunks); contiguous at W: R(W) times that.
With full documents, R(mC) = 1 + (2/m) sum_{l=1}^{m-1} (m - l) rho(l) exactly (expand |block mean|^2).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from docgrad.core.constants import LONG_LAG_TOKENS  # rho_long averages lags with 2048 <= lag*C < 16384


def block_sizes(m: int) -> list[int]:
    """Block lengths in chunks for R(W): 1, 2, 4, ... up to m (m itself appended if not a power of 2)."""
    out, b = [], 1
    while b <= m:
        out.append(b)
        b *= 2
    if out[-1] != m:
        out.append(m)
    return out


@dataclass
class BlockSums:
    """Per-document and document-pair sums of one Gram (one group, or the summed 'all')."""

    P: np.ndarray        # (D, D) document-pair sums, 0 across files
    Np: np.ndarray       # (D, D) chunk-pair counts, 0 across files
    diag: np.ndarray     # (D,)
    n: np.ndarray        # (D,) chunks per document
    lag: np.ndarray      # (D, m-1)
    nlag: np.ndarray     # (D, m-1)
    blk: np.ndarray      # (D, J)
    nblk: np.ndarray     # (D, J)
    sizes: np.ndarray    # (J,) block lengths in chunks

    def __add__(self, other: "BlockSums") -> "BlockSums":
        """Sums are linear in K, so the sums of K_attn + K_mlp + ... are the sums of the parts."""
        return BlockSums(self.P + other.P, self.Np, self.diag + other.diag, self.n, self.lag + other.lag,
                         self.nlag, self.blk + other.blk, self.nblk, self.sizes)


def shard_block_sums(K: np.ndarray, n_docs: int, m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Sums for one file whose rows are ordered (document, chunk) with n_docs full documents of m chunks.

    Returns (P (n_docs x n_docs), diag (n_docs), lag (n_docs x m-1), blk (n_docs x J)).
    """
    if K.shape != (n_docs * m, n_docs * m):
        raise ValueError(f"Gram shape {K.shape} does not match {n_docs} documents x {m} chunks")
    K4 = K.reshape(n_docs, m, n_docs, m)
    P = K4.sum(axis=(1, 3))
    Kd = K4[np.arange(n_docs), :, np.arange(n_docs), :]          # (n_docs, m, m) within-document blocks
    diag = np.einsum("dkk->d", Kd)
    lag = np.stack([np.diagonal(Kd, offset=l, axis1=1, axis2=2).sum(axis=1) for l in range(1, m)], axis=1) \
        if m > 1 else np.zeros((n_docs, 0))
    blk = []
    for b in block_sizes(m):
        nb = m // b
        sub = Kd[:, : nb * b, : nb * b].reshape(n_docs, nb, b, nb, b)
        within = sub[:, np.arange(nb), :, np.arange(nb), :]          # (nb, n_docs, b, b)
        blk.append(within.sum(axis=(0, 2, 3)) / b**2)
    return P, diag, lag, np.stack(blk, axis=1)


def assemble(parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]], m: int) -> BlockSums:
    """Stack the per-file sums of one cell (files in document order) into cell-level BlockSums."""
    D = sum(p[1].shape[0] for p in parts)
    P = np.zeros((D, D))
    Np = np.zeros((D, D))
    o = 0
    for p in parts:
        k = p[1].shape[0]
        P[o:o + k, o:o + k] = p[0]
        Np[o:o + k, o:o + k] = m * m
        o += k
    sizes = np.array(block_sizes(m))
    return BlockSums(P=P, Np=Np, diag=np.concatenate([p[1] for p in parts]), n=np.full(D, float(m)),
                     lag=np.concatenate([p[2] for p in parts]), nlag=np.tile(m - np.arange(1, m, dtype=float), (D, 1)),
                     blk=np.concatenate([p[3] for p in parts]), nblk=np.tile((m // sizes).astype(float), (D, 1)),
                     sizes=sizes)


def estimate(s: BlockSums, c: np.ndarray, chunk: int) -> dict[str, np.ndarray]:
    """All statistics for document weights c (shape (B, D) or (D,)); returns arrays with a leading B axis.

    Keys: S_cross, sigma2, rho (B, m-1; lag l = column l-1), rho_long, R (B, J; columns = s.sizes),
    B_simple_shuf_tokens. Undefined values (no cross pairs, sigma2 = 0) come out as NaN.
    """
    c = np.atleast_2d(np.asarray(c, dtype=float))
    with np.errstate(divide="ignore", invalid="ignore"):
        dP, dN = np.diag(s.P), np.diag(s.Np)
        cross = np.einsum("bd,de,be->b", c, s.P, c) - (c**2) @ dP
        count = np.einsum("bd,de,be->b", c, s.Np, c) - (c**2) @ dN
        S = np.where(count > 0, cross / np.where(count > 0, count, 1), np.nan)
        sigma2 = (c @ s.diag) / (c @ s.n) - S
        rho = ((c @ s.lag) / (c @ s.nlag) - S[:, None]) / sigma2[:, None]
        R = ((c @ s.blk) / (c @ s.nblk) - S[:, None]) / (sigma2[:, None] / s.sizes[None, :])
        long = long_lags(s, chunk)
        rho_long = rho[:, long].mean(axis=1) if long.any() else np.full(len(S), np.nan)
        B = chunk * sigma2 / S
    return {"S_cross": S, "sigma2": sigma2, "rho": rho, "rho_long": rho_long, "R": R, "B_simple_shuf_tokens": B}


def long_lags(s: BlockSums, chunk: int) -> np.ndarray:
    """Mask over lags 1..m-1 (in chunks) of those averaged into rho_long: LONG_LAG_TOKENS[0] <= lag*C < [1]."""
    tokens = np.arange(1, s.lag.shape[1] + 1) * chunk
    return (tokens >= LONG_LAG_TOKENS[0]) & (tokens < LONG_LAG_TOKENS[1])


def per_document_rho_long(s: BlockSums, S_cross: float, sigma2: float, chunk: int) -> np.ndarray:
    """rho_long of each document alone, using the cell's S_cross and sigma2 (which documents dominate)."""
    long = long_lags(s, chunk)
    if not long.any():
        return np.full(len(s.n), np.nan)
    per_lag = s.lag[:, long] / s.nlag[:, long]
    return ((per_lag - S_cross) / sigma2).mean(axis=1)


def resample_indices(rng: np.random.Generator, n_docs: int, resamples: int) -> np.ndarray:
    """(resamples, n_docs) document indices drawn with replacement."""
    return rng.integers(0, n_docs, size=(resamples, n_docs))


def counts_from_indices(idx: np.ndarray, n_docs: int) -> np.ndarray:
    """How often each document is drawn in each resample: (B, n_docs) from (B, k) indices."""
    B = idx.shape[0]
    flat = (idx + n_docs * np.arange(B)[:, None]).ravel()
    return np.bincount(flat, minlength=B * n_docs).reshape(B, n_docs).astype(float)


def percentile_ci(draws: np.ndarray, level: float = 0.95) -> list:
    """Percentile interval over the finite draws along axis 0; [None, None] where no draw is finite."""
    draws = np.asarray(draws, dtype=float)
    lo_q, hi_q = 50 * (1 - level), 50 * (1 + level)
    if draws.ndim == 1:
        f = draws[np.isfinite(draws)]
        return [float(np.percentile(f, lo_q)), float(np.percentile(f, hi_q))] if f.size else [None, None]
    return [percentile_ci(draws[:, j], level) for j in range(draws.shape[1])]


def R_from_rho(rho: np.ndarray, m: int) -> np.ndarray:
    """The design effect of a block of m consecutive chunks from the correlation profile rho(l), l = 1..m-1 (last
    axis, lag l at column l-1):  R(mC) = 1 + (2/m) sum_{l=1}^{m-1} (m - l) rho(l).  It equals the block
    estimator (`estimate`'s R) at m = the whole document and differs from it at shorter blocks only by which
    chunk pairs are averaged (all pairs at each lag here, pairs inside disjoint blocks there)."""
    rho = np.asarray(rho, dtype=float)
    if not 1 <= m <= rho.shape[-1] + 1:
        raise ValueError(f"m must be between 1 and {rho.shape[-1] + 1} chunks, got {m}")
    lags = np.arange(1, m)
    return 1.0 + 2.0 / m * (rho[..., : m - 1] * (m - lags)).sum(axis=-1)
