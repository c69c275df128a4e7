"""SIMEX extrapolation and the model-regime decision. Definitions: docs/methods.md#model-regime.

A statistic theta measured at added-noise levels lambda = 0, 1, 2 (error variance (1 + lambda) times the rounded
model's) is extrapolated to lambda = -1, no rounding error:

  quadratic (the decision's extrapolant): the parabola through the three points at -1,
      theta(-1) = 3 theta_0 - 3 theta_1 + theta_2          (Lagrange weights at -1 for nodes 0, 1, 2);
  linear (sensitivity only): the least-squares line through the three points at -1,
      theta(-1) = (4 theta_0 + theta_1 - 2 theta_2) / 3.

Both are linear in the thetas, so they apply to paired bootstrap draws column by column. The decision compares a
relative change delta = theta_new / theta_0 - 1 against a margin X stated in advance: "robust" when its interval
lies inside [-X, X], "moves" when the interval excludes 0 and is not inside the margin, else "not resolved".
"""

from __future__ import annotations

import numpy as np

LAMBDAS = (0.0, 1.0, 2.0)
QUADRATIC_WEIGHTS = np.array([3.0, -3.0, 1.0])
LINEAR_WEIGHTS = np.array([4.0, 1.0, -2.0]) / 3.0
EXTRAPOLANTS = {"quadratic": QUADRATIC_WEIGHTS, "linear": LINEAR_WEIGHTS}
REGIME_MARGIN = 0.10          # X: |relative change of R(16K)| inside which R is called robust (stated 2026-12-03)

ROBUST, MOVES, NOT_RESOLVED = "robust", "moves", "not resolved"


def extrapolant_weights(lam, method: str = "quadratic") -> np.ndarray:
    """Weights (len(lam), 3) with theta_hat(lam) = weights @ (theta_0, theta_1, theta_2), the whole fitted curve:
    quadratic, the Lagrange basis of nodes 0, 1, 2: ((l-1)(l-2)/2, -l(l-2), l(l-1)/2);
    linear, the least-squares line's hat row: (1/3 - (l-1)/2, 1/3, 1/3 + (l-1)/2).
    At lam = -1 they are the weights `extrapolate` uses."""
    if method not in EXTRAPOLANTS:
        raise ValueError(f"extrapolant {method!r}: choose one of {', '.join(EXTRAPOLANTS)}")
    l = np.atleast_1d(np.asarray(lam, dtype=np.float64))
    if method == "quadratic":
        return np.stack([(l - 1) * (l - 2) / 2, -l * (l - 2), l * (l - 1) / 2], axis=1)
    return np.stack([1 / 3 - (l - 1) / 2, np.full_like(l, 1 / 3), 1 / 3 + (l - 1) / 2], axis=1)


def extrapolate(theta, method: str = "quadratic") -> np.ndarray:
    """theta at lambda = -1 from theta at lambda = 0, 1, 2 along the last axis (shape (..., 3) -> (...))."""
    if method not in EXTRAPOLANTS:
        raise ValueError(f"extrapolant {method!r}: choose one of {', '.join(EXTRAPOLANTS)}")
    t = np.asarray(theta, dtype=np.float64)
    if t.shape[-1] != len(LAMBDAS):
        raise ValueError(f"extrapolate needs theta at lambda = 0, 1, 2 on the last axis; got shape {t.shape}")
    return t @ EXTRAPOLANTS[method]


def regime_decision(lo: float, hi: float, margin: float = REGIME_MARGIN) -> str:
    """'robust', 'moves' or 'not resolved' for the interval [lo, hi] of a relative change (see the module)."""
    if not (np.isfinite(lo) and np.isfinite(hi)) or lo > hi:
        raise ValueError(f"regime_decision: need a finite interval lo <= hi, got [{lo}, {hi}]")
    if -margin <= lo and hi <= margin:
        return ROBUST
    if lo > 0 or hi < 0:
        return MOVES
    return NOT_RESOLVED
