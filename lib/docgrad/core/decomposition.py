"""What drives a cell's R: sources, documents and chunks; robustness; what was measured.
Definitions: docs/methods.md#decomposition.

Every statistic here is, like those of docgrad.core.bootstrap, a ratio of sums of Gram entries K (chunk-gradient
inner products, exact squared norms on the diagonal) for document weights c (c = 1: the estimate; c = 0 leaves
a document out; resample counts give a bootstrap draw), computed from the cell's BlockSums.

Sources. Each document has a *source* (author, work, project or package: `source_label`). Chunk pairs fall
into four kinds, with means (for weights c; a document never pairs with its own copy):
  A_xs        over pairs of documents of different sources          (estimates |G|^2)
  A_ss(t)     over pairs of different documents of the same source t  (|G|^2 + tau_src^2 of source t)
  lag_l       over pairs of one document at lag l chunks           (bootstrap.BlockSums.lag)
  A_0         over the diagonal (exact squared norms)
Model: g_{d,k} = G + a_{s(d)} + b_d + e_{d,k}, components independent with mean 0 (sources, documents within a
source, chunks within a document). Then E K = |G|^2 + [same source] tau_src^2 + [same doc] tau_doc^2(l) +
[same chunk] tau_chunk^2, and with V = A_0 - A_xs (the chunk-noise variance about the cross-source mean):
  u_d         = A_ss(s(d)) - A_xs for a document whose source has another document in the sample, else 0
              (a source seen in one document only cannot be told apart from that document: it is counted in
              the document part)
  rho_src     = (sum_d c_d u_d / sum_d c_d) / V                                (source part)
  rho_x(l)    = (c.lag_l / c.nlag_l - A_xs) / V                                (correlation about A_xs)
  rho_x_long  = mean of rho_x(l) over the long lags (LONG_LAG_TOKENS)
  rho_doc     = rho_x_long - rho_src                                           (document-within-source part)
  rho_chunk   = 1 - rho_x_long                                                 (chunk part: not shared at long range)
  R_x(m'C)    = (c.blk_j / c.nblk_j - A_xs) / (V / m')                         (design effect about A_xs)
              = 1 + (m' - 1) rho_src + (m' - 1) rho_doc(m')   exactly, where rho_doc(m') is the mean over
                within-block pairs of (K - A_xs)/V - u_d/V (when m' divides m: every document then has m/m'
                blocks covering all its chunks, so the source term enters every window as (m' - 1) rho_src)
  R_within(W) = R_x(W) - (m' - 1) rho_src                                      (R without the source term)
  plateau     = 1 + (m - 1) rho_x_long  (Kish's 1 + (m-1) rho for a flat profile over the whole span);
                short-range part = R_x(mC) - plateau = (2/m) sum_l (m - l)(rho_x(l) - rho_x_long).
When every source has a single document (CODE projects of distinct owners, PAPERS, WEB), A_xs is S_cross,
V is sigma2, rho_src = 0 and R_x = R_within = the study's R (docs/methods.md#estimators). With shared sources
the study's pooled estimator subtracts S_cross, the mean over *all* cross-document pairs, which mixes A_xs
with the A_ss: it neither keeps the source term whole (R_x) nor removes it (R_within).

Robustness:
  leave_one_out       R(16K) and rho_long with each document's weight set to 0 (the cell's influence table)
  by_source           the estimators on the documents of one source alone (weights 1 on them, 0 elsewhere)
  cluster_counts      the source-clustered bootstrap: draw the cell's n_s sources with replacement and give
                      each document the count of its source (all documents of a drawn source come along);
                      with one document per source and the same generator it draws exactly the document
                      bootstrap's resamples
Also `mean_gradient_share` and `group_shares`. Sources come from docgrad.corpora.build.provenance; one pooled cell's
whole decomposition with both bootstraps is docgrad.results.format.decomposition.
"""

from __future__ import annotations

from collections import Counter
from typing import Sequence

import numpy as np

from docgrad.core import bootstrap as bs
from docgrad.core.constants import CI_LEVEL, HEADLINE_WINDOW, MAX_NONFINITE_DRAWS, MIN_INTERVAL_DOCS


def same_source_pair_fraction(sources: Sequence[str]) -> float:
    """Fraction of the ordered pairs of distinct documents that share a source: sum_t n_t (n_t - 1) / (D (D - 1)).
    That fraction of the pairs behind the study's S_cross are same-source pairs."""
    n = np.array(list(Counter(sources).values()), dtype=float)
    D = n.sum()
    return float((n * (n - 1)).sum() / (D * (D - 1))) if D > 1 else float("nan")


def source_codes(sources: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    """(integer code per document, the distinct labels in first-seen order)."""
    names = list(dict.fromkeys(sources))
    return np.array([names.index(s) for s in sources]), names


# --- the decomposition -----------------------------------------------------------------------------------

def decompose(s: bs.BlockSums, sources: Sequence[str], chunk: int, c: np.ndarray | None = None) -> dict:
    """Source / document / chunk decomposition for document weights c ((B, D) or (D,); default all 1).

    Returns arrays with a leading B axis: A_xs, A_0, V, rho_src, rho_x (B, m-1), rho_x_long, rho_doc,
    rho_chunk, R_x (B, J; columns = s.sizes), R_within (B, J), plateau, short_range, and
    docs_identified (B,: documents whose source has another document in the sample). Undefined values
    (no cross-source pair, V = 0) are NaN. Formulas: the module docstring."""
    D = len(s.n)
    if len(sources) != D:
        raise ValueError(f"decompose: {len(sources)} source labels for {D} documents")
    c = np.atleast_2d(np.ones(D) if c is None else np.asarray(c, dtype=float))
    code, names = source_codes(sources)
    same = code[:, None] == code[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        xs_sum = np.einsum("bd,de,be->b", c, np.where(same, 0.0, s.P), c)
        xs_cnt = np.einsum("bd,de,be->b", c, np.where(same, 0.0, s.Np), c)
        A_xs = np.where(xs_cnt > 0, xs_sum / np.where(xs_cnt > 0, xs_cnt, 1), np.nan)
        A_0 = (c @ s.diag) / (c @ s.n)
        V = A_0 - A_xs
        u = np.zeros_like(c)
        ident = np.zeros_like(c, dtype=bool)
        dP, dN = np.diag(s.P), np.diag(s.Np)
        for t in range(len(names)):
            mem = code == t
            if mem.sum() < 2:
                continue
            ct = c[:, mem]
            Pt, Nt = s.P[np.ix_(mem, mem)], s.Np[np.ix_(mem, mem)]
            ss_sum = np.einsum("bd,de,be->b", ct, Pt, ct) - (ct**2) @ dP[mem]
            ss_cnt = np.einsum("bd,de,be->b", ct, Nt, ct) - (ct**2) @ dN[mem]
            ok = ss_cnt > 0
            A_ss = np.where(ok, ss_sum / np.where(ok, ss_cnt, 1), np.nan)
            u[:, mem] = np.where(ok, A_ss - A_xs, 0.0)[:, None]
            ident[:, mem] = (ok[:, None] & (ct > 0))
        rho_src = ((c * u).sum(axis=1) / c.sum(axis=1)) / V
        rho_x = ((c @ s.lag) / (c @ s.nlag) - A_xs[:, None]) / V[:, None]
        long = bs.long_lags(s, chunk)
        rho_x_long = rho_x[:, long].mean(axis=1) if long.any() else np.full(len(V), np.nan)
        R_x = ((c @ s.blk) / (c @ s.nblk) - A_xs[:, None]) / (V[:, None] / s.sizes[None, :])
        R_within = R_x - (s.sizes[None, :] - 1) * rho_src[:, None]
        m = s.lag.shape[1] + 1
        plateau = 1 + (m - 1) * rho_x_long
        full = np.flatnonzero(s.sizes == m)
        short = (R_x[:, full[0]] if full.size else np.full(len(V), np.nan)) - plateau
    return {"A_xs": A_xs, "A_0": A_0, "V": V, "rho_src": rho_src, "rho_x": rho_x, "rho_x_long": rho_x_long,
            "rho_doc": rho_x_long - rho_src, "rho_chunk": 1 - rho_x_long, "R_x": R_x, "R_within": R_within,
            "plateau": plateau, "short_range": short, "docs_identified": ident.sum(axis=1)}


def source_pair_means(s: bs.BlockSums, sources: Sequence[str]) -> dict:
    """Mean chunk inner product of the cell (weights 1) by kind of pair: 'cross-source', one entry per source
    with at least two documents ('<source>', its different-document pairs), and 'within document' (all
    pairs of one document at lags >= 1) and 'diagonal' (exact squared norms)."""
    code, names = source_codes(sources)
    same = code[:, None] == code[None, :]
    off = ~np.eye(len(code), dtype=bool)
    out = {"cross-source": float(s.P[~same].sum() / s.Np[~same].sum()) if s.Np[~same].sum() else float("nan")}
    for t, name in enumerate(names):
        mem = np.outer(code == t, code == t) & off
        if s.Np[mem].sum():
            out[name] = float(s.P[mem].sum() / s.Np[mem].sum())
    out["within document"] = float(s.lag.sum() / s.nlag.sum())
    out["diagonal"] = float(s.diag.sum() / s.n.sum())
    return out


def document_pair_means(s: bs.BlockSums) -> np.ndarray:
    """(D, D) mean chunk inner product of each pair of documents (weights 1): off the diagonal P_de / Np_de
    (NaN for pairs never computed, across files); on the diagonal the mean over pairs of two *different*
    chunks of the document (its lag sums), so the exact squared norms are left out."""
    with np.errstate(divide="ignore", invalid="ignore"):
        M = np.where(s.Np > 0, s.P / np.where(s.Np > 0, s.Np, 1), np.nan)
    M[np.diag_indices_from(M)] = s.lag.sum(axis=1) / s.nlag.sum(axis=1)
    return M


# --- robustness: leave one out, by source, clustered bootstrap -------------------------------------------

def span_window(s: bs.BlockSums, chunk: int, window: int = HEADLINE_WINDOW) -> int:
    """The window a cell's headline R is read at: `window` (16K) when the cell's windows include it, else the
    longest window its span allows (a corpus of one's own with a span shorter than 16K)."""
    windows = [int(w) for w in s.sizes * chunk]
    shorter = [w for w in windows if w <= window]
    return window if window in windows or not shorter else max(shorter)


def window_column(s: bs.BlockSums, chunk: int, window: int = HEADLINE_WINDOW) -> int:
    j = np.flatnonzero(s.sizes * chunk == window)
    if not j.size:
        raise ValueError(f"no window of {window} tokens among {list(s.sizes * chunk)}")
    return int(j[0])


def leave_one_out(s: bs.BlockSums, chunk: int, window: int = HEADLINE_WINDOW) -> dict[str, np.ndarray]:
    """Each document's influence: the estimators with that document's weight set to 0.

    Returns arrays over documents (cell order): R (R(window) without the document), dR (R without it minus
    R with all), rho_long, drho_long, S_cross (without it), and cross_mean: the mean inner product of the
    document's chunks with the other documents' chunks (computed pairs). dR < 0: the document raises the
    cell's R. A document whose cross_mean is below S_cross has a mean gradient far from the others': it
    lowers S_cross, which raises every document's rho, so leaving it out lowers R."""
    D = len(s.n)
    c = np.ones((D, D)) - np.eye(D)
    j = window_column(s, chunk, window)
    full = bs.estimate(s, np.ones(D), chunk)
    loo = bs.estimate(s, c, chunk)
    off = ~np.eye(D, dtype=bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        cross = np.where(off, s.P, 0).sum(axis=1) / np.where(off, s.Np, 0).sum(axis=1)
    return {"R": loo["R"][:, j], "dR": loo["R"][:, j] - full["R"][0, j],
            "rho_long": loo["rho_long"], "drho_long": loo["rho_long"] - full["rho_long"][0],
            "S_cross": loo["S_cross"], "cross_mean": cross}


def jackknife_se(values: np.ndarray) -> float:
    """Jackknife standard error from leave-one-out values: sqrt((n-1)/n sum (v_i - mean v)^2)."""
    v = np.asarray(values, dtype=float)
    n = len(v)
    return float(np.sqrt((n - 1) / n * np.sum((v - v.mean()) ** 2)))


def by_source(s: bs.BlockSums, sources: Sequence[str], chunk: int, window: int = HEADLINE_WINDOW,
              rng: np.random.Generator | None = None, resamples: int = 0) -> list[dict]:
    """The study's estimators on the documents of each source alone (weights 1 on them, 0 elsewhere), and on
    all documents. A source with one document has no cross-document pair: S_cross and everything after it
    are NaN. Rows: source, n_docs, S_cross, sigma2, rho_long, R (at window), mean_gradient_share, and R_ci: the
    95% percentile interval of R over `resamples` document-bootstrap draws within the source (its n_s documents
    drawn with replacement from `rng`, sources in first-seen order), None for 'all' (the cell's own interval is
    the document bootstrap's), without draws, with fewer than MIN_INTERVAL_DOCS documents or more than
    MAX_NONFINITE_DRAWS of the draws not finite."""
    code, names = source_codes(sources)
    j = window_column(s, chunk, window)
    rows = []
    for name, c in [*((n, (code == t).astype(float)) for t, n in enumerate(names)), ("all", np.ones(len(code)))]:
        e = bs.estimate(s, c, chunk)
        S, s2 = float(e["S_cross"][0]), float(e["sigma2"][0])
        ci = None
        members = np.flatnonzero(c)
        if rng is not None and resamples and name != "all" and members.size >= MIN_INTERVAL_DOCS:
            w = np.zeros((resamples, len(code)))
            w[:, members] = bs.counts_from_indices(bs.resample_indices(rng, members.size, resamples), members.size)
            R = bs.estimate(s, w, chunk)["R"][:, j]
            if np.mean(~np.isfinite(R)) <= MAX_NONFINITE_DRAWS:
                ci = [float(x) for x in bs.percentile_ci(R, CI_LEVEL)]
        rows.append({"source": name, "n_docs": int(c.sum()), "S_cross": S, "sigma2": s2,
                     "rho_long": float(e["rho_long"][0]), "R": float(e["R"][0, j]), "R_ci": ci,
                     "mean_gradient_share": mean_gradient_share(S, s2)})
    return rows


def cluster_counts(rng: np.random.Generator, sources: Sequence[str], resamples: int) -> np.ndarray:
    """(resamples, D) document weights of the source-clustered bootstrap: draw the n_s distinct sources with
    replacement (rng.integers(0, n_s, (resamples, n_s)), sources numbered in first-seen order), each document
    gets its source's count. With one document per source this is bs.counts_from_indices of the same draws."""
    code, names = source_codes(sources)
    idx = rng.integers(0, len(names), size=(resamples, len(names)))
    per_source = bs.counts_from_indices(idx, len(names))
    return per_source[:, code]


def mean_gradient_share(S_cross, sigma2):
    """S_cross / (S_cross + sigma2): the share of a chunk gradient's expected squared norm that is the mean
    gradient |G|^2 (the rest is noise); C/B_simple_shuf in tokens: B_simple = C sigma2/S_cross."""
    S, s2 = np.asarray(S_cross, dtype=float), np.asarray(sigma2, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = S / (S + s2)
    return float(out) if out.ndim == 0 else out


def group_shares(sums: dict, chunk: int, groups: Sequence[str]) -> dict[str, dict[str, float]]:
    """Each parameter group's share of the cell's S_cross and of its sigma2 (weights 1). The groups' Grams add
    up to 'all', so both sets of shares sum to 1 over the groups."""
    D = len(sums["all"].n)
    tot = bs.estimate(sums["all"], np.ones(D), chunk)
    out = {}
    for g in groups:
        e = bs.estimate(sums[g], np.ones(D), chunk)
        out[g] = {"S_cross": float(e["S_cross"][0] / tot["S_cross"][0]),
                  "sigma2": float(e["sigma2"][0] / tot["sigma2"][0])}
    return out


# --- one cell, all of it ---------------------------------------------------------------------------------

DECOMP_KEYS = ("rho_src", "rho_doc", "rho_chunk", "rho_x_long", "plateau", "short_range")


def difference_interval(a: np.ndarray, b: np.ndarray, level: float = CI_LEVEL) -> dict:
    """a - b for two independently resampled cells (draw i of each, as for R_rel): the percentile interval of
    the differences and the fraction of draws with a > b (finite pairs only)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    ok = np.isfinite(a) & np.isfinite(b)
    diff = a[ok] - b[ok]
    return {"ci": bs.percentile_ci(diff, level), "frac_greater": float(np.mean(diff > 0)) if diff.size else None}


def without_groups(sums: dict, chunk: int, drop: Sequence[str], window: int = HEADLINE_WINDOW) -> dict[str, float]:
    """The estimators on the summed Gram of every parameter group but `drop` (the groups' Grams add up to
    'all'; weights 1): S_cross, sigma2, the mean-gradient share and R(window). Says how much of a cell's mean
    gradient, and of its R, the dropped groups carry."""
    keep = [g for g in sums if g != "all" and g not in drop]
    if not keep:
        raise ValueError(f"dropping {list(drop)} leaves no parameter group of {sorted(sums)}")
    s = keep[1:] and sum((sums[g] for g in keep[1:]), sums[keep[0]]) or sums[keep[0]]
    window = span_window(s, chunk, window)      # R at the span when the corpus's span is shorter than `window`
    e = bs.estimate(s, np.ones(len(s.n)), chunk)
    S, s2 = float(e["S_cross"][0]), float(e["sigma2"][0])
    return {"S_cross": S, "sigma2": s2, "mean_gradient_share": mean_gradient_share(S, s2),
            "R": float(e["R"][0, window_column(s, chunk, window)])}
