"""The training test read by its rule (docs/methods.md, "Does R predict learning?").

Steps to a target: the first evaluated step at which the held-out loss is at or below L*, interpolated linearly in
steps between the two evaluations around it (None when never reached). L*: the shuffled b = 2 arm's held-out loss
at step T/2, averaged over its seeds.

The ladder: steps to L* of the shuffled arms follow S(b) = S_min + S_min b_noise / b, linear in 1/b; least squares
gives the intercept S_min and the slope S_min b_noise. Its uncertainty: fits to resamples that draw, within every
arm, its seeds with replacement.

The predictions for a contiguous batch of b chunks: S_R = S_min (1 + R b_noise / b) and S_1 = S_min (1 + b_noise / b)
(no design effect), each with the interval of its paired draws (the i-th fit with the i-th R draw).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
from scipy import stats as sps

from docgrad.core.bootstrap import percentile_ci

PREDICTS, REFUTED, NOT_RESOLVED, CONSISTENT = "R predicts learning", "refuted", "not resolved", "consistent"


def steps_to_target(steps: Sequence[float], losses: Sequence[float], target: float) -> float | None:
    """The first step where the held-out loss reaches `target` (at or below), linear in steps between the two
    evaluations around it; None when it never does."""
    s, y = np.asarray(steps, dtype=float), np.asarray(losses, dtype=float)
    hit = np.flatnonzero(y <= target)
    if hit.size == 0:
        return None
    i = int(hit[0])
    if i == 0:
        return float(s[0])
    frac = (y[i - 1] - target) / (y[i - 1] - y[i])
    return float(s[i - 1] + frac * (s[i] - s[i - 1]))


def loss_at(steps: Sequence[float], losses: Sequence[float], step: float) -> float:
    """The held-out loss at `step`, linear between the evaluations around it."""
    return float(np.interp(step, np.asarray(steps, dtype=float), np.asarray(losses, dtype=float)))


def target_loss(runs: Sequence[Mapping], T: int) -> float:
    """L*: the mean over the given runs (the shuffled b = 2 arm's seeds) of their held-out loss at step T/2."""
    return float(np.mean([loss_at(r["eval_steps"], r["held_out"], T / 2) for r in runs]))


def fit_ladder(b: Sequence[float], S: Sequence[float]) -> tuple[float, float]:
    """(S_min, S_min b_noise): least squares of S on 1/b (intercept, slope)."""
    x = 1.0 / np.asarray(b, dtype=float)
    slope, intercept = np.polyfit(x, np.asarray(S, dtype=float), 1)
    return float(intercept), float(slope)


def fit_draws(ladder: Mapping[int, Sequence[float]], draws: int = 2000, seed: int = 0) -> np.ndarray:
    """[draws, 2] fits (S_min, S_min b_noise), each to a resample drawing every arm's seeds with replacement.
    ladder: {b: steps to L* of each seed}."""
    rng = np.random.default_rng(seed)
    bs = sorted(ladder)
    out = np.empty((draws, 2))
    for i in range(draws):
        b_all, s_all = [], []
        for b in bs:
            s = np.asarray(ladder[b], dtype=float)
            pick = s[rng.integers(0, len(s), len(s))]
            b_all += [b] * len(pick)
            s_all += list(pick)
        out[i] = fit_ladder(b_all, s_all)
    return out


def predictions(fit: tuple[float, float], fits: np.ndarray, R: float, R_draws: np.ndarray, b: int,
                level: float = 0.95) -> dict:
    """S_R and S_1 for a contiguous batch of b chunks (module docstring), points and intervals at `level` (0.975
    for the corpus Holm tests first) of the paired draws (fits[i] with R_draws[i])."""
    s_min, slope = fit
    S_R = s_min + R * slope / b
    S_1 = s_min + slope / b
    dr = fits[:, 0] + np.asarray(R_draws, dtype=float)[: len(fits)] * fits[:, 1] / b
    d1 = fits[:, 0] + fits[:, 1] / b
    return {"S_R": S_R, "S_R_ci": list(percentile_ci(dr, level)), "S_1": S_1, "S_1_ci": list(percentile_ci(d1, level))}


def measured(steps: Sequence[float], level: float = 0.95) -> tuple[float, list]:
    """The contiguous arm's mean steps over its seeds and its t interval."""
    s = np.asarray(steps, dtype=float)
    half = sps.t.ppf(0.5 + level / 2, len(s) - 1) * s.std(ddof=1) / np.sqrt(len(s))
    return float(s.mean()), [float(s.mean() - half), float(s.mean() + half)]


def decide(mean: float, pred: Mapping, control: bool = False) -> str:
    """The rule's reading of one corpus: inside S_R's interval and outside S_1's predicts; the reverse refutes;
    otherwise not resolved; for the control, inside both is consistent."""
    inside = lambda ci: ci[0] <= mean <= ci[1]
    r, one = inside(pred["S_R_ci"]), inside(pred["S_1_ci"])
    if control and r and one:
        return CONSISTENT
    if r and not one:
        return PREDICTS
    if one and not r:
        return REFUTED
    return NOT_RESOLVED


def effective_batch(fit: tuple[float, float], S_contig: float) -> float | None:
    """b_eff = S_min b_noise / (S_contig - S_min): the shuffled batch that reaches L* in the contiguous arm's
    steps on the fitted curve (None when S_contig is not above S_min)."""
    s_min, slope = fit
    return slope / (S_contig - s_min) if S_contig > s_min else None
