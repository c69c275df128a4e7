"""The training test read by its rule (docs/methods.md, "Does R predict learning?").

Steps to a target: the first evaluated step at which the held-out loss is at or below L*, interpolated linearly in
steps between the two evaluations around it (None when never reached). L*: the shuffled b = 2 arm's held-out loss
at step T/2, averaged over its seeds.

The ladder: steps to L* of the shuffled arms follow S(b) = S_min + S_min b_noise / b, linear in 1/b; least squares
gives the intercept S_min and the slope S_min b_noise. Its uncertainty: fits to resamples that draw, within every
arm, its seeds with replacement.

The predictions for a contiguous batch of b chunks: S_R = S_min (1 + R b_noise / b) and S_1 = S_min (1 + b_noise / b)
(no design effect), each with the interval of its paired draws (the i-th fit with the i-th R draw).

R: the mean over the probed checkpoints of R(W), at every paired document draw (checkpoint_R). The decision per
corpus, Holm over the corpora (read_learning): the corpus with the smaller tail probability of its measured mean
in its prediction draws is read first, at 1 - alpha/2, the next at 1 - alpha once the first is resolved.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
from scipy import stats as sps

from docgrad.core import bootstrap as bs
from docgrad.core.bootstrap import percentile_ci
from docgrad.core.constants import ALL, CORPORA
from docgrad.core.decomposition import window_column
from docgrad.results.paired import paired_counts

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
    dr, d1 = prediction_draws(fits, R_draws, b)
    return {"S_R": S_R, "S_R_ci": list(percentile_ci(dr, level)), "S_1": S_1, "S_1_ci": list(percentile_ci(d1, level))}


def prediction_draws(fits: np.ndarray, R_draws: np.ndarray, b: int) -> tuple[np.ndarray, np.ndarray]:
    """The paired draws of S_R (fits[i] with R_draws[i]) and of S_1."""
    return (fits[:, 0] + np.asarray(R_draws, dtype=float)[: len(fits)] * fits[:, 1] / b,
            fits[:, 0] + fits[:, 1] / b)


def tail_probability(draws: np.ndarray, x: float) -> float:
    """Two-sided tail probability of x in the draws: 2 min(P(draw <= x), P(draw >= x)), at most 1."""
    d = np.asarray(draws, dtype=float)
    d = d[np.isfinite(d)]
    return float(min(1.0, 2 * min(np.mean(d <= x), np.mean(d >= x))))


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


def checkpoint_R(cells: Sequence, window: int = 4096, resamples: int = 2000, seed: int = 0,
                 alpha: float = 0.05) -> dict:
    """R(window) of the probed checkpoints (their cells: the same documents) and the R that enters the prediction,
    their mean, at every paired document draw (the same counts for every checkpoint): {"window", "R", "ci",
    "draws" (the mean's resamples), "checkpoints": [{"R", "ci", "B_simple_tokens", "B_simple_ci"}]}."""
    counts = paired_counts(list(cells), resamples, seed)
    Rs, rows = [], []
    for c in cells:
        s = c.sums[ALL]
        e = bs.estimate(s, counts, c.chunk)
        r, b = e["R"][:, window_column(s, c.chunk, window)], e["B_simple_shuf_tokens"]
        Rs.append(r)
        rows.append({"R": float(r[0]), "ci": percentile_ci(r[1:], 1 - alpha), "B_simple_tokens": float(b[0]),
                     "B_simple_ci": percentile_ci(b[1:], 1 - alpha)})
    mean = np.mean(Rs, axis=0)
    return {"window": window, "R": float(mean[0]), "ci": percentile_ci(mean[1:], 1 - alpha),
            "draws": mean[1:].tolist(), "checkpoints": rows}


def run_steps(runs: Sequence[Mapping], T: int, b2: int = 2, contiguous_b: int = 32) -> dict:
    """One corpus's runs read to steps: L* from the shuffled b2 arm, each run's steps to it. {"target", "shuffled":
    {b: [steps of each seed]}, "contiguous": [...], "unreached": [run names]} (a run that never reaches L* is
    left out of its arm and named)."""
    arm = lambda r: (r["config"]["arm"], r["config"]["b"])
    slowest = [r for r in runs if arm(r) == ("shuffled", b2)]
    if not slowest:
        raise ValueError(f"no shuffled b = {b2} run: L* cannot be set")
    target = target_loss(slowest, T)
    out = {"target": target, "shuffled": {}, "contiguous": [], "unreached": []}
    for r in sorted(runs, key=lambda r: (arm(r), r["config"]["seed"])):
        S = steps_to_target(r["eval_steps"], r["held_out"], target)
        name = f"{r['config']['corpus']}_{r['config']['arm']}_b{r['config']['b']}_s{r['config']['seed']}"
        if S is None:
            out["unreached"].append(name)
        elif arm(r) == ("contiguous", contiguous_b):
            out["contiguous"].append(S)
        elif r["config"]["arm"] == "shuffled":
            out["shuffled"].setdefault(r["config"]["b"], []).append(S)
    return out


def read_corpus(steps: Mapping, R: Mapping, level: float = 0.95, b: int = 32, control: bool = False,
                draws: int = 2000, seed: int = 0) -> dict:
    """The rule's reading of one corpus at interval level `level`: the ladder's fit and its seed draws, S_R and S_1
    with intervals, the contiguous arm's mean with its 95% t interval, the decision, b_eff (its interval over the
    fit draws with the contiguous seeds resampled alongside) against b / R (its interval over R's draws), and
    the smaller tail probability of the measured mean in the two predictions' draws (the Holm order)."""
    ladder = {int(k): v for k, v in steps["shuffled"].items()}
    fit = fit_ladder([k for k in ladder for _ in ladder[k]], [x for k in ladder for x in ladder[k]])
    fits = fit_draws(ladder, draws, seed)
    R_draws = np.asarray(R["draws"], dtype=float)[:draws]
    pred = predictions(fit, fits[: len(R_draws)], R["R"], R_draws, b, level)
    mean, ci = measured(steps["contiguous"])
    dr, d1 = prediction_draws(fits[: len(R_draws)], R_draws, b)
    rng = np.random.default_rng(seed + 1)
    contig = np.asarray(steps["contiguous"], dtype=float)
    resampled = contig[rng.integers(0, len(contig), (len(fits), len(contig)))].mean(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        b_eff_draws = np.where(resampled > fits[:, 0], fits[:, 1] / (resampled - fits[:, 0]), np.nan)
    return {"target": steps["target"], "fit": {"S_min": fit[0], "slope": fit[1],
                                               "b_noise": fit[1] / fit[0] if fit[0] else None},
            "level": level, **pred, "measured": mean, "measured_ci": ci, "seeds": len(contig),
            "decision": decide(mean, pred, control), "control": control,
            "b_eff": effective_batch(fit, mean), "b_eff_ci": percentile_ci(b_eff_draws, 0.95),
            "b_over_R": b / R["R"], "b_over_R_ci": percentile_ci(b / R_draws, 0.95), "R": R["R"], "R_ci": R["ci"],
            "tail": min(tail_probability(dr, mean), tail_probability(d1, mean)),
            "unreached": list(steps["unreached"])}


def read_learning(steps: Mapping[str, Mapping], R: Mapping[str, Mapping], alpha: float = 0.05, b: int = 32,
                  controls: Sequence[str] = ("WEB",), draws: int = 2000, seed: int = 0) -> dict:
    """Every corpus read by the rule with Holm over the corpora: each corpus is first read at 1 - alpha (for its
    tail probability), then in ascending tail probability the k-th (0-based) of n is read at 1 - alpha / (n - k),
    as long as every corpus before it was resolved (R predicts learning, or refuted); after one that was not, the
    rest stay at the level it had. {corpus: read_corpus(...)}, in the Holm order."""
    first = {c: read_corpus(steps[c], R[c], 1 - alpha, b, c in controls, draws, seed) for c in steps}
    order = sorted(first, key=lambda c: (first[c]["tail"], c))
    out, level, open_ = {}, None, True
    for k, c in enumerate(order):
        if open_:
            level = 1 - alpha / (len(order) - k)
        out[c] = read_corpus(steps[c], R[c], level, b, c in controls, draws, seed)
        open_ = open_ and out[c]["decision"] in (PREDICTS, REFUTED)
    return out


def load_runs(folder: str | Path) -> dict[str, list[dict]]:
    """Every finished run record under folder (<CORPUS>_<arm>_b<b>_s<seed>.json, what `docgrad learning` writes),
    by corpus; {} for a folder with none."""
    out: dict[str, list[dict]] = {}
    for path in sorted(Path(folder).glob("*_b*_s*.json")):
        rec = json.loads(path.read_text())
        if isinstance(rec, dict) and "config" in rec and "held_out" in rec:
            out.setdefault(rec["config"]["corpus"], []).append(rec)
    return out


def load_R(folder: str | Path) -> dict[str, dict]:
    """R of each corpus's trained model (R_<CORPUS>.json, `docgrad learning --probe`), by corpus."""
    return {p.stem[2:]: json.loads(p.read_text()) for p in sorted(Path(folder).glob("R_*.json"))}


def read_page(folder: str | Path, corpora: Sequence[str], seeds: int = 3, arms: int = 6,
              controls: Sequence[str] = ("WEB",)) -> dict:
    """What page 07 reads: the runs and R of each corpus, and the rule's reading (read_learning) only when every
    corpus has all its runs (seeds x arms, one T) and its R; until then {"complete": False} with what is there.
    A folder that is not there, or a corpus that is neither known nor among the folder's runs, is a ValueError.
    {"complete", "runs" (by corpus), "R", "expected", "present", "T", "readings", "steps"}."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"learning_dir {folder}: {'a file' if folder.exists() else 'no such folder'}; expected the "
                         "folder of run records that `docgrad learning` writes (data/learning)")
    runs, R = load_runs(folder), load_R(folder)
    unknown = [c for c in corpora if c not in CORPORA and c not in runs]
    if unknown:
        raise ValueError(f"corpora {list(corpora)}: {', '.join(unknown)} is neither one of {', '.join(CORPORA)} nor "
                         f"a corpus with runs in {folder}")
    runs = {c: runs.get(c, []) for c in corpora}
    present = {c: len(runs[c]) for c in corpora}
    Ts = {r["config"]["steps"] for rs in runs.values() for r in rs}
    out = {"runs": runs, "R": {c: R[c] for c in corpora if c in R}, "expected": seeds * arms, "present": present,
           "T": max(Ts) if Ts else None, "complete": False, "readings": None, "steps": None}
    if len(Ts) > 1:
        raise ValueError(f"{folder}: runs of different T ({sorted(Ts)}): one T per test")
    if all(present[c] == seeds * arms and c in R for c in corpora):
        steps = {c: run_steps(runs[c], out["T"]) for c in corpora}
        out.update(complete=True, steps=steps, readings=read_learning(steps, {c: R[c] for c in corpora},
                                                                       controls=controls))
    return out
