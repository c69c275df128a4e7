"""What a weighting costs: Kish's effective sample size and the design effect (page 01a, section 3).

A weighted mean sum_i w_i x_i / sum_i w_i of n independent units with equal variance sigma^2 has variance
sigma^2 sum w^2 / (sum w)^2, that of an unweighted mean of

    n_eff = (sum w)^2 / sum w^2        units (Kish's effective sample size);

n / n_eff = n sum w^2 / (sum w)^2 is the design effect of the weighting (1 for equal weights). With correlated
units (correlation matrix C) the design effect is n w'Cw / (sum w)^2; equal weights and a correlation rho shared
by the m units of a block give 1 + (m - 1) rho, Kish's cluster design effect.
"""

from __future__ import annotations

import numpy as np

from docgrad.teaching.reduction import (OBJECTIVE_LABELS, OBJECTIVES, Batch, NoValidPositionsError, ReductionError,
                                        check_int_list, objective_weights)


def _weights(weights) -> np.ndarray:
    w = np.asarray(weights, dtype=np.float64).reshape(-1)
    if w.size == 0:
        raise ReductionError("no weights")
    if np.any(w < 0) or not np.all(np.isfinite(w)):
        raise ReductionError("weights must be finite and non-negative")
    if w.sum() == 0:
        raise NoValidPositionsError("all weights are zero")
    return w


def kish_n_eff(weights) -> float:
    """Kish's effective sample size (sum w)^2 / sum w^2 (zero weights contribute nothing)."""
    w = _weights(weights)
    return float(w.sum() ** 2 / (w ** 2).sum())


def kish_design_effect(weights) -> float:
    """n sum w^2 / (sum w)^2 = n / n_eff over the n units with a non-zero weight (1 for equal weights)."""
    w = _weights(weights)
    w = w[w > 0]
    return float(w.size * (w ** 2).sum() / w.sum() ** 2)


def design_effect(weights, corr) -> float:
    """Var(sum w x / sum w) / Var(mean of n independent units) for units of equal variance with correlation
    matrix `corr`: n w' C w / (sum w)^2. C = I gives Kish's weighting effect; equal weights and equal
    correlation rho within a block of m give 1 + (m - 1) rho."""
    w = _weights(weights)
    C = np.asarray(corr, dtype=np.float64)
    if C.shape != (w.size, w.size):
        raise ReductionError(f"corr must be {w.size} x {w.size}, got {C.shape}")
    if not np.allclose(C, C.T) or not np.allclose(np.diag(C), 1.0):
        raise ReductionError("corr must be a symmetric matrix with ones on the diagonal")
    return float(w.size * (w @ C @ w) / w.sum() ** 2)


def equicorrelated_design_effect(m: int, rho: float) -> float:
    """1 + (m - 1) rho: m units with pairwise correlation rho, averaged with equal weights (Kish)."""
    if m < 1:
        raise ReductionError(f"m must be >= 1, got {m}")
    return 1.0 + (m - 1) * float(rho)


def block_correlation(sizes, rho: float) -> np.ndarray:
    """Correlation matrix of units in blocks (documents) of the given sizes: rho within a block, 0 across."""
    sizes = check_int_list("sizes", sizes)
    n = sum(sizes)
    C = np.zeros((n, n))
    start = 0
    for s in sizes:
        C[start:start + s, start:start + s] = rho
        start += s
    np.fill_diagonal(C, 1.0)
    return C


def objective_effective_sizes(batch: Batch) -> list[dict]:
    """For each of page 01's objectives on `batch`: the positions with non-zero weight, Kish's n_eff and the
    weighting design effect n / n_eff."""
    rows = []
    for obj in OBJECTIVES:
        w = np.concatenate(objective_weights(batch, obj))
        rows.append({"objective": obj, "label": OBJECTIVE_LABELS[obj], "n": int((w > 0).sum()),
                     "n_eff": kish_n_eff(w), "design_effect": kish_design_effect(w)})
    return rows


def weighted_mean_variance(weights, corr=None, draws: int = 20000, seed: int = 0) -> dict:
    """Monte-Carlo check of the design effect: draw unit-variance units (independent, or with correlation
    `corr`), form the weighted mean, and compare its variance with that of an equal-weight mean of n
    independent units (1 / n). Returns the simulated and the exact design effect."""
    w = _weights(weights)
    n = w.size
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((draws, n))
    if corr is not None:
        z = z @ np.linalg.cholesky(np.asarray(corr, dtype=np.float64)).T
    est = z @ (w / w.sum())
    exact = design_effect(w, np.eye(n) if corr is None else corr)
    return {"n": n, "draws": draws, "simulated": float(est.var(ddof=1) * n), "exact": exact}


