"""Gates G1-G3 and the verdict (DESIGN.md). A failing gate is a finding, reported as such.

G1 sketch fidelity (files written with --exact-ref): for the reference chunk r (row `exact_ref_row` of the
   file's json, default row 0) and every other chunk i, the cosine error
       e_i = (Khat_ri - <g_r, g_i>) / sqrt(|g_r|^2 |g_i|^2)
   with Khat the sketched Gram summed over groups and <g_r, g_i> = exact_ref_dot[i]; passes when
   |mean e| <= 0.003, sd e <= 0.03 and the mean sketched/exact squared-norm ratio diag(Khat)/|g|^2 is
   within 3% of 1 (the published study's form of "norm ratio").
G2 web control: at every (model, revision, chunk) with a WEB cell, R(16K) < 1.2 and rho_long < 0.01.
G3 S_cross > 0 resolved: the lower end of every cell's S_cross interval is > 0 (otherwise B_simple of
   that cell is not determined).
Verdict: INCOMPLETE when a gate cannot be evaluated (no --exact-ref file, no WEB cell, no bootstrap);
   INCONCLUSIVE when G1 or G2 fails (the instrument or the control does not behave as assumed);
   otherwise MEASURED. G3 failures qualify single cells and are listed, not a verdict by themselves.
   The detail also names every corpus whose R_rel interval lies above 1 (more design effect than the
   control) and those whose interval includes 1.
"""

from __future__ import annotations

import numpy as np

from docgrad.sketch import G1_MEAN, G1_NORM, G1_SD, cosine_errors, g1_passes

CONTROL = "WEB"  # the packed-web control corpus (G2, and the denominator of R_rel)
G2_R, G2_RHO = 1.2, 0.01


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


def gate_g1(cells: dict) -> dict:
    errs, ratios, files = [], [], []
    for cell in cells.values():
        for sh in cell.shards:
            e, q = g1_errors(sh)
            if e.size:
                errs.append(e)
                ratios.append(q)
                files.append(str(sh.path))
    if not errs:
        return {"status": "not evaluated", "pass": None,
                "summary": "no result file has exact_ref_dot (run one cell with --exact-ref)"}
    e, q = np.concatenate(errs), np.concatenate(ratios)
    mean, sd, nr = float(e.mean()), float(e.std()), float(q.mean())
    ok = g1_passes(mean, sd, nr)
    return {"status": "pass" if ok else "FAIL", "pass": bool(ok), "mean_cos_diff": mean, "sd_cos_diff": sd,
            "mean_norm_ratio": nr, "n_pairs": int(e.size), "files": files,
            "summary": f"cosine error mean {mean:+.2g} (|.| <= {G1_MEAN}), sd {sd:.2g} (<= {G1_SD}), "
                       f"squared-norm ratio {nr:.4f} (within {G1_NORM:.0%}) over {e.size} pairs"}


def gate_g2(rows: list[dict]) -> dict:
    webs = [r for r in rows if r["corpus"] == CONTROL]
    if not webs:
        return {"status": "not evaluated", "pass": None, "summary": f"no {CONTROL} (control) cell"}
    cells = [{"model": r["model"], "revision": r["revision"], "chunk": r["chunk"], "R_16K": r.get("R_16K"),
              "rho_long": r["rho_long"],
              "pass": bool(r.get("R_16K") is not None and r["R_16K"] < G2_R and r["rho_long"] < G2_RHO)}
             for r in webs]
    ok = all(c["pass"] for c in cells)
    desc = "; ".join(f"{c['model']} {c['revision']}: R(16K) {c['R_16K']:.3f}, rho_long {c['rho_long']:+.4f}"
                     if c["R_16K"] is not None else f"{c['model']}: R(16K) undefined" for c in cells)
    return {"status": "pass" if ok else "FAIL", "pass": ok, "cells": cells,
            "summary": f"control needs R(16K) < {G2_R} and rho_long < {G2_RHO}: {desc}"}


def gate_g3(rows: list[dict]) -> dict:
    if not rows or any(not r.get("S_cross_ci") or r["S_cross_ci"][0] is None for r in rows):
        return {"status": "not evaluated", "pass": None, "summary": "no bootstrap intervals (--resamples 0)"}
    cells = [{"model": r["model"], "revision": r["revision"], "corpus": r["corpus"], "chunk": r["chunk"],
              "S_cross_ci": r["S_cross_ci"], "pass": bool(r["S_cross_ci"][0] > 0)} for r in rows]
    fails = [f"{c['corpus']} ({c['model']} {c['revision']})" for c in cells if not c["pass"]]
    ok = not fails
    return {"status": "pass" if ok else "FAIL", "pass": ok, "cells": cells,
            "summary": "every S_cross interval is above 0" if ok else
            f"S_cross interval reaches 0 for {', '.join(fails)}: B_simple undetermined there"}


def verdict(gates: dict, r_rel: list[dict]) -> tuple[str, list[str]]:
    """(verdict, detail lines) from the gates and the R_rel rows; see the module docstring."""
    detail = []
    missing = [k for k, g in gates.items() if g["pass"] is None]
    failed = [k for k in ("G1", "G2") if gates[k]["pass"] is False]
    if missing:
        v = f"INCOMPLETE (gate(s) {', '.join(missing)} not evaluated)"
    elif failed:
        v = f"INCONCLUSIVE (instrument gate(s) {', '.join(failed)} failed)"
    else:
        v = "MEASURED (G1 and G2 pass)"
    if gates["G3"]["pass"] is False:
        detail.append(gates["G3"]["summary"])
    for r in r_rel:
        lo, hi = r["R_rel_ci"]
        if lo is None:
            detail.append(f"{r['corpus']} ({r['model']} {r['revision']}): R_rel {r['R_rel']} without interval")
        elif lo > 1:
            detail.append(f"{r['corpus']} ({r['model']} {r['revision']}): R_rel {r['R_rel']:.2f} "
                          f"[{lo:.2f}, {hi:.2f}] - more design effect than the control")
        else:
            detail.append(f"{r['corpus']} ({r['model']} {r['revision']}): R_rel {r['R_rel']:.2f} "
                          f"[{lo:.2f}, {hi:.2f}] - interval includes the control's level")
    return v, detail


def evaluate(cells: dict, rows: list[dict], r_rel: list[dict]) -> dict:
    gates = {"G1": gate_g1(cells), "G2": gate_g2(rows), "G3": gate_g3(rows)}
    v, detail = verdict(gates, r_rel)
    return {"gates": gates, "verdict": v, "detail": detail}


MEANING = {
    "G1": "Sketch fidelity: the count-sketched Gram reproduces exact gradient inner products, so every "
          "statistic computed from it measures the real gradients.",
    "G2": "Control behaves as assumed: packed short web documents should show (almost) no correlation "
          "between chunks; if they do, part of every corpus's R comes from chunk boundaries, not long documents.",
    "G3": "Mean gradient resolved: S_cross (|G|^2) is distinguishable from 0, so B_simple = C sigma2 / S_cross "
          "is finite and meaningful for that cell. R and rho do not need it.",
}


def gates_frame(report: dict):
    """One row per gate: status, what was measured, what the gate means; plus the verdict as the last row."""
    import pandas as pd

    rows = [{"gate": k, "status": g["status"], "measured": g["summary"], "meaning": MEANING[k]}
            for k, g in report["gates"].items()]
    rows.append({"gate": "verdict", "status": report["verdict"], "measured": "; ".join(report.get("verdict_detail", [])),
                 "meaning": "INCOMPLETE: a gate could not be evaluated; INCONCLUSIVE: G1 or G2 failed; "
                            "MEASURED: both instrument gates pass."})
    return pd.DataFrame(rows, columns=["gate", "status", "measured", "meaning"])
