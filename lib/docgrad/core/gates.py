"""Gates G1-G3 and the verdict (docs/methods.md, "Gates and verdict"). A failing gate is a finding, reported as such.

G1 sketch fidelity (files written with --exact-ref): for the reference chunk r (row `exact_ref_row` of the
   file's json, default row 0) and every other chunk i, the cosine error
       e_i = (Khat_ri - <g_r, g_i>) / sqrt(|g_r|^2 |g_i|^2)
   with Khat the sketched Gram summed over groups and <g_r, g_i> = exact_ref_dot[i]; passes when
   |mean e| <= 0.003, sd e (ddof=1) <= 0.03 and the mean sketched/exact squared-norm ratio diag(Khat)/|g|^2 is
   within 3% of 1 (the published study's form of "norm ratio").
G2 web control: at every (model, revision, chunk) with a WEB cell, R(16K) < 1.2 and rho_long < 0.01.
G3 S_cross > 0 resolved: the lower end of every cell's S_cross interval is > 0 (otherwise B_simple of
   that cell is not determined).
Verdict: INCOMPLETE when a gate cannot be evaluated (no --exact-ref file, no WEB cell, no bootstrap) or a
   cell's estimates are not numbers (`not_estimable`: sigma2 or S_cross <= 0, no R(16K), fewer than
   MIN_INTERVAL_DOCS documents, more than MAX_NONFINITE_DRAWS non-finite draws); INCONCLUSIVE when any of G1, G2,
   G3 fails; otherwise MEASURED (G1, G2 and G3 pass). The verdict names every gate.
   The detail also names every corpus whose R_rel interval lies above 1 (more design effect than the
   control) and those whose interval includes 1.
"""

from __future__ import annotations

import numpy as np

from docgrad.core.constants import (
    CONTROL,
    G1_MEAN,
    G1_NORM,
    G1_SD,
    G2_R,
    G2_RHO,
    HEADLINE_WINDOW,
    MAX_NONFINITE_DRAWS,
    MIN_INTERVAL_DOCS,
    STANDALONE,
)
from docgrad.core.sketch import cosine_errors, g1_statistics


def g1_errors(shard) -> tuple[np.ndarray, np.ndarray]:
    """(cosine errors of the reference chunk against every other chunk, sketched/exact squared-norm ratios)."""
    ex = np.asarray(shard.exact_ref_dot, dtype=float)
    if ex.size == 0:
        return np.zeros(0), np.zeros(0)
    r = shard.meta.get("exact_ref_row")
    r = 0 if r is None else int(r)                  # the probe's reference is the file's first row
    K = sum(np.asarray(shard.gram[g], dtype=float) for g in shard.gram)
    sq = sum(np.asarray(shard.sqnorm[g], dtype=float) for g in shard.sqnorm)
    return cosine_errors(ex, K[r], sq, r), np.diag(K) / sq


def gate_g1(cells: list) -> dict:
    """G1 over the G1 samples (CellEstimate.g1) of the given cells, pooled."""
    samples = [c.g1 for c in cells if c.g1 is not None]
    if not samples:
        return {"status": "not evaluated", "pass": None,
                "summary": "no result file has exact_ref_dot (run one cell with --exact-ref)"}
    e = np.concatenate([s.cosine_errors for s in samples])
    q = np.concatenate([s.sqnorm_ratios for s in samples])
    g1 = g1_statistics(e, q)
    mean, sd, nr = g1["mean_cosine_error"], g1["sd_cosine_error"], g1["mean_sqnorm_ratio"]
    return {"status": "pass" if g1["passes"] else "FAIL", "pass": g1["passes"], "mean_cos_diff": mean,
            "sd_cos_diff": sd, "mean_norm_ratio": nr, "n_pairs": g1["pairs"],
            "files": [f for s in samples for f in s.files],
            "summary": f"cosine error mean {mean:+.2g} (|.| <= {G1_MEAN}), sd {sd:.2g} (<= {G1_SD}), "
                       f"squared-norm ratio {nr:.4f} (within {G1_NORM:.0%}) over {e.size} pairs"}


def _straddles(ci, threshold: float) -> bool:
    return ci is not None and ci[0] is not None and ci[0] < threshold < ci[1]


def window_name(tokens: int) -> str:
    """'16K' for 16384 tokens, '64' for 64."""
    return f"{tokens // 1024}K" if tokens % 1024 == 0 else f"{tokens}"


def gate_g2(cells: list, control: str = CONTROL, window: int = HEADLINE_WINDOW) -> dict:
    """G2 on the control's point estimates; each row also carries the intervals and whether they straddle the
    thresholds (the gate then passes or fails on its point estimate only, and its summary says so). `control`
    and `window`: a control of your own, read at the window of a corpus whose span is shorter than 16K (its
    R(W) < G2_R; the row keys stay 'R_16K' for the study's files)."""
    webs = [c for c in cells if c.corpus == control]
    if not webs:
        return {"status": "not evaluated", "pass": None, "summary": f"no {control} (control) cell"}
    rows, W = [], window_name(window)
    for c in webs:
        R = c.all.R.get(window)
        R_ci, rho_ci = list(c.all.interval("R", window)), list(c.all.interval("rho_long"))
        undefined = R is None or not np.isfinite(R) or (c.resamples > 0 and R_ci[0] is None)
        no_long = not np.isfinite(c.all.rho_long)     # a span with no lag of 2,048 tokens: R(W) decides alone
        rows.append({"model": c.model, "revision": c.revision, "chunk": c.chunk, "R_16K": R,
                     "R_16K_ci": R_ci, "rho_long": c.all.rho_long, "rho_long_ci": rho_ci,
                     "straddles": _straddles(R_ci, G2_R) or _straddles(rho_ci, G2_RHO),
                     "pass": None if undefined else bool(R < G2_R and (no_long or c.all.rho_long < G2_RHO)),
                     "no_long_lags": no_long, "not_estimable": not_estimable(c, window)})
    ok = None if any(r["pass"] is None for r in rows) and all(r["pass"] is not False for r in rows) \
        else all(r["pass"] for r in rows)

    def one(r):
        if r["pass"] is None:
            return (f"{r['model']} {r['revision']}: R({W}) or its interval undefined ("
                    f"{'; '.join(r['not_estimable']) or 'not estimable'}), so the gate cannot pass on it")
        ci = (lambda v: f" [{v[0]:.3g}, {v[1]:.3g}]" if v[0] is not None else "")
        rho = ("no rho_long (the span has no lag of 2,048 tokens or more: R decides alone)" if r["no_long_lags"] else
               f"rho_long {r['rho_long']:+.4f}{ci(r['rho_long_ci'])}")
        return (f"{r['model']} {r['revision']}: R({W}) {r['R_16K']:.3f}{ci(r['R_16K_ci'])}, {rho}"
                + ("; an interval straddles its threshold: decided on the point estimate only" if r["straddles"]
                   else ""))
    return {"status": {True: "pass", False: "FAIL", None: "not evaluated"}[ok], "pass": ok, "cells": rows,
            "straddles": any(r["straddles"] for r in rows),
            "summary": f"control needs R({W}) < {G2_R} and rho_long < {G2_RHO}: " + "; ".join(map(one, rows))}


def gate_g3(cells: list) -> dict:
    """G3 on every cell's S_cross interval; not evaluated without a bootstrap or where a cell's interval is
    undefined (too few documents, too many non-finite draws: not_estimable)."""
    if not cells or all(c.resamples == 0 for c in cells):
        return {"status": "not evaluated", "pass": None, "summary": "no bootstrap intervals (--resamples 0)"}
    undefined = [f"{c.corpus} ({c.model} {c.revision})" for c in cells if c.all.interval("S_cross")[0] is None]
    if undefined:
        return {"status": "not evaluated", "pass": None,
                "summary": f"S_cross interval undefined for {', '.join(undefined)}, so the gate cannot pass on it"}
    rows = [{"model": c.model, "revision": c.revision, "corpus": c.corpus, "chunk": c.chunk,
             "S_cross_ci": list(c.all.interval("S_cross")), "pass": bool(c.all.interval("S_cross")[0] > 0)}
            for c in cells]
    fails = [f"{r['corpus']} ({r['model']} {r['revision']})" for r in rows if not r["pass"]]
    ok = not fails
    return {"status": "pass" if ok else "FAIL", "pass": ok, "cells": rows,
            "summary": "every S_cross interval is above 0" if ok else
            f"S_cross interval reaches 0 for {', '.join(fails)}: B_simple undetermined there"}


def not_estimable(cell, window: int = HEADLINE_WINDOW) -> list[str]:
    """Why a cell's estimates are not numbers (empty: they are): sigma2 <= 0 or S_cross <= 0 (no noise, no mean
    gradient to divide by), no R(window) (documents shorter than the window; 16K by default), too few documents
    for an interval, or too many non-finite bootstrap draws."""
    e, why, W = cell.all, [], window_name(window)
    R = e.R.get(window)
    if not (e.sigma2 is not None and np.isfinite(e.sigma2) and e.sigma2 > 0):
        why.append(f"sigma2 = {e.sigma2:.4g} is not > 0" if e.sigma2 is not None else "sigma2 undefined")
    if not (e.S_cross is not None and np.isfinite(e.S_cross) and e.S_cross > 0):
        why.append(f"S_cross = {e.S_cross:.4g} is not > 0 (no cross-document signal)" if e.S_cross is not None
                   else "S_cross undefined")
    if getattr(cell, "context", STANDALONE) == STANDALONE and R is None:
        why.append(f"no R({W}): {cell.chunks_per_doc} chunks of {cell.chunk} tokens per document are shorter than "
                   f"the {window}-token window")
    elif getattr(cell, "context", STANDALONE) == STANDALONE and not np.isfinite(R) and not why[:1]:
        why.append(f"R({W}) is not finite")
    if cell.resamples and cell.n_docs < MIN_INTERVAL_DOCS:
        why.append(f"{cell.n_docs} documents: intervals need at least {MIN_INTERVAL_DOCS}")
    if cell.resamples and e.boot_nonfinite_frac is not None and e.boot_nonfinite_frac > MAX_NONFINITE_DRAWS:
        why.append(f"{e.boot_nonfinite_frac:.0%} of the R({W}) bootstrap draws are not finite "
                   f"(at most {MAX_NONFINITE_DRAWS:.0%})")
    return why


def verdict(gates: dict, r_rel: list[dict], cells: list = (), window: int = HEADLINE_WINDOW) -> tuple[str, list[str]]:
    """(verdict, detail lines) from the gates, the R_rel rows and the cells (estimable at `window`); see the
    module docstring. INCOMPLETE when a gate is not evaluated or a cell is not estimable; else INCONCLUSIVE when
    any gate fails; else MEASURED. The verdict names every gate."""
    detail = []
    missing = [k for k, g in gates.items() if g["pass"] is None]
    failed = [k for k in ("G1", "G2", "G3") if gates[k]["pass"] is False]
    blocked = {f"{c.corpus} ({c.model} {c.revision})": not_estimable(c, window) for c in cells}
    blocked = {k: v for k, v in blocked.items() if v}
    if missing or blocked:
        parts = ([f"gate(s) {', '.join(missing)} not evaluated"] if missing else []) + \
                [f"{k} not estimable: {'; '.join(v)}" for k, v in blocked.items()]
        v = f"INCOMPLETE ({'; '.join(parts)})"
    elif failed:
        passed = [k for k in ("G1", "G2", "G3") if k not in failed]
        v = f"INCONCLUSIVE (gate(s) {', '.join(failed)} failed" + (f"; {', '.join(passed)} pass)" if passed else ")")
    else:
        v = "MEASURED (G1, G2 and G3 pass)"
    if gates["G3"]["pass"] is False:
        detail.append(gates["G3"]["summary"])
    for r in r_rel:
        lo, hi = r.R_rel_ci
        who = f"{r.corpus} ({r.model} {r.revision})"
        if lo is None:
            detail.append(f"{who}: R_rel {r.R_rel} without interval")
        elif lo > 1:
            detail.append(f"{who}: R_rel {r.R_rel:.2f} [{lo:.2f}, {hi:.2f}] - more design effect than the control")
        else:
            detail.append(f"{who}: R_rel {r.R_rel:.2f} [{lo:.2f}, {hi:.2f}] - interval includes the control's level")
    return v, detail


def evaluate(cells: list, r_rel: list) -> dict:
    """Gates and verdict over exactly these cells (docgrad.results.stats.CellEstimate) and R_rel rows (stats.RRel)."""
    gates = {"G1": gate_g1(cells), "G2": gate_g2(cells), "G3": gate_g3(cells)}
    v, detail = verdict(gates, r_rel, cells)
    return {"gates": gates, "verdict": v, "detail": detail}


MEANING = {
    "G1": "Sketch fidelity: the count-sketched Gram reproduces exact gradient inner products, so every "
          "statistic computed from it measures the real gradients.",
    "G2": "Control behaves as assumed: the control packs many short, unrelated documents (here Debian package "
          "descriptions) back to back, so its chunks should show (almost) no correlation; if they do, part of "
          "every corpus's R comes from chunk boundaries, not long documents.",
    "G3": "Mean gradient resolved: S_cross (|G|^2) is distinguishable from 0, so B_simple = C sigma2 / S_cross "
          "is finite and meaningful for that cell. R and rho do not need it.",
}
