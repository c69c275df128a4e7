"""What page 07 ("Does R predict learning?") says, from results.learning.read_page, in the words of its rule
(docs/methods.md, "Does R predict learning?"): one sentence per corpus, the answer box, and the rows its charts
draw. Nothing is decided before every run and every R is committed."""

from __future__ import annotations

from typing import Mapping

import numpy as np

from docgrad.presentation import evidence as ev
from docgrad.results.learning import CONSISTENT, NOT_RESOLVED, PREDICTS, REFUTED

DECISION_WORDS = {PREDICTS: "R predicts learning", REFUTED: "refuted, it trained like its shuffled batch",
                  NOT_RESOLVED: "not resolved", CONSISTENT: "consistent, as the control should be"}


def _ci(ci, fmt: str = ".1f") -> str:
    return "[–]" if ci is None or ci[0] is None else f"[{ci[0]:{fmt}}, {ci[1]:{fmt}}]"


def corpus_answer(corpus: str, r: Mapping, b: int = 32, window: int = 4096) -> str:
    """One sentence: what a contiguous batch of b chunks of one document trained like (b_eff with its interval),
    what R predicted (b / R), and the decision with the measured steps against both predictions."""
    if r["b_eff"] is None:
        like = "reached L* no slower than the fitted curve's largest batch (b_eff not defined)"
    else:
        like = f"trained like {r['b_eff']:.1f} {_ci(r['b_eff_ci'])} shuffled chunks"
    lvl = f"{r['level']:.1%}".replace(".0%", "%")
    return (f"**{corpus}**: a batch of {b} consecutive chunks of one document {like}; R({window // 1024}K) of the "
            f"trained model, {r['R']:.2f} {_ci(r['R_ci'], '.2f')}, predicted {b} / R = {r['b_over_R']:.1f} "
            f"{_ci(r['b_over_R_ci'])}: {DECISION_WORDS[r['decision']]} ({r['measured']:.0f} steps to L* against "
            f"{r['S_R']:.0f} {_ci(r['S_R_ci'], '.0f')} predicted with R and {r['S_1']:.0f} {_ci(r['S_1_ci'], '.0f')} "
            f"without, {lvl} intervals).")


def progress_line(page: Mapping) -> str:
    """What is committed while the test is not complete: runs per corpus and which corpora have R."""
    runs = ", ".join(f"{c} {n} of {page['expected']}" for c, n in page["present"].items())
    noR = [c for c in page["present"] if c not in page["R"]]
    return (f"Runs committed: {runs}; R of the trained model: "
            + (f"missing for {', '.join(noR)}" if noR else "every corpus") + ".")


def result_box(page: Mapping, b: int = 32) -> str:
    """Page 07's answer (evidence.result_box): per corpus the decision with b_eff against b / R; or, until every
    run and R is committed, that nothing is decided yet and what is there."""
    if not page["complete"]:
        answer = ["Not measured yet: nothing is read before every run and the trained model's R are committed "
                  "(`make learning`, then `make learning-probe`). " + progress_line(page)]
    else:
        answer = [f"{c}: {DECISION_WORDS[r['decision']]}; b_eff {r['b_eff']:.1f} against {b} / R = "
                  f"{r['b_over_R']:.1f}." if r["b_eff"] is not None else
                  f"{c}: {DECISION_WORDS[r['decision']]}; b_eff not defined, {b} / R = {r['b_over_R']:.1f}."
                  for c, r in page["readings"].items()]
    measured = (f"a 4-layer width-128 Llama trained from scratch on CPU, 128-token chunks, {page['expected']} runs "
                "per corpus (5 shuffled batch sizes and one contiguous, 3 seeds each), held-out documents 40-47; "
                "Holm over the corpora.")
    caveat = "a tiny model and standalone 4K blocks: a test of the mechanism, not a long-context training recipe."
    return ev.result_box(answer, measured, caveat)


def loss_rows(runs: Mapping[str, list]) -> list[dict]:
    """Held-out loss against tokens seen, one row per evaluation of every run: corpus, arm ('shuffled b=8'),
    seed, step, tokens (step x b x C), held_out."""
    rows = []
    for corpus, rs in runs.items():
        for r in rs:
            c = r["config"]
            for step, loss in zip(r["eval_steps"], r["held_out"]):
                rows.append({"corpus": corpus, "arm": f"{c['arm']} b={c['b']}", "seed": c["seed"], "step": step,
                             "tokens": step * c["b"] * c["chunk"], "held_out": loss})
    return rows


def arm_order(rows: list[dict]) -> list[str]:
    """The arms of loss_rows in reading order: shuffled by b ascending, then contiguous (a legend's order)."""
    key = lambda a: (a.startswith("contiguous"), int(a.split("b=")[1]))
    return sorted({r["arm"] for r in rows}, key=key)


def ladder_rows(page: Mapping, grid=(2, 3, 4, 6, 8, 12, 16, 24, 32)) -> list[dict]:
    """Steps to L* against b: every shuffled and contiguous run (kind 'shuffled' / 'contiguous') and the fitted
    curve S_min (1 + b_noise / b) on a grid of b (kind 'fit'). [] until the test is complete."""
    if not page["complete"]:
        return []
    rows = []
    for c, st in page["steps"].items():
        r = page["readings"][c]
        for b, xs in st["shuffled"].items():
            rows += [{"corpus": c, "b": int(b), "steps": x, "kind": "shuffled"} for x in xs]
        rows += [{"corpus": c, "b": 32, "steps": x, "kind": "contiguous"} for x in st["contiguous"]]
        rows += [{"corpus": c, "b": b, "steps": r["fit"]["S_min"] + r["fit"]["slope"] / b, "kind": "fit"}
                 for b in grid]
    return rows


def prediction_rows(page: Mapping, b: int = 32) -> list[dict]:
    """Predicted against measured, per corpus, each a point with its interval (value, lo, hi): steps to L*
    (quantity 'steps to L*': the contiguous runs' mean with its t interval, S_R and S_1 at the decision's level)
    and shuffled chunks a contiguous batch is worth (quantity 'shuffled chunks': b_eff and b / R, 95%).
    [] until the test is complete."""
    if not page["complete"]:
        return []
    rows = []
    for c, r in page["readings"].items():
        for quantity, what, value, ci in (
                ("steps to L*", f"measured: contiguous b={b}", r["measured"], r["measured_ci"]),
                ("steps to L*", "predicted with R", r["S_R"], r["S_R_ci"]),
                ("steps to L*", "predicted with R = 1", r["S_1"], r["S_1_ci"]),
                ("shuffled chunks", "measured: b_eff", r["b_eff"], r["b_eff_ci"]),
                ("shuffled chunks", f"predicted: {b} / R", r["b_over_R"], r["b_over_R_ci"])):
            if value is not None:
                rows.append({"corpus": c, "quantity": quantity, "what": what, "value": value,
                             "lo": ci[0], "hi": ci[1]})
    return rows


def R_rows(R: Mapping[str, Mapping]) -> list[dict]:
    """R(W) of each probed checkpoint through training (corpus, step, R, lo, hi, B_simple_tokens)."""
    return [{"corpus": c, "step": step, "R": cp["R"], "lo": cp["ci"][0], "hi": cp["ci"][1],
             "B_simple_tokens": cp["B_simple_tokens"]}
            for c, rec in R.items() for step, cp in zip(rec["checkpoint_steps"], rec["checkpoints"])]


def _where_on_ladder(x: float, means: Mapping[int, float]) -> str:
    """Where a held-out loss falls among the shuffled arms' means (loss falls as b grows)."""
    bs = sorted(means)
    for lo, hi in zip(bs, bs[1:]):
        if means[hi] <= x <= means[lo]:
            return f"between the shuffled b = {lo} ({means[lo]:.3f}) and b = {hi} ({means[hi]:.3f}) arms"
    if x > means[bs[0]]:
        return f"above every shuffled arm (b = {bs[0]}: {means[bs[0]]:.3f})"
    return f"below every shuffled arm (b = {bs[-1]}: {means[bs[-1]]:.3f})"


def described_lines(page: Mapping, b: int = 32) -> list[str]:
    """The decision read through its parts, described and not decided, one line per corpus: b_eff = S_min b_noise /
    (S - S_min) as its numerator over the contiguous runs' steps beyond S_min, beside the shuffled b runs' steps
    beyond S_min and what the same curve reads them as (the fit's check at b); every contiguous seed's steps to L*
    and the widest spread of a shuffled arm; the b / R that each probed checkpoint alone gives beside the rule's
    mean; and where the contiguous runs' held-out loss at step T falls on the shuffled ladder. [] until the test
    is complete."""
    if not page["complete"]:
        return []
    lines = []
    for c, r in page["readings"].items():
        st, R, runs = page["steps"][c], page["R"][c], page["runs"][c]
        shuffled = {int(k): v for k, v in st["shuffled"].items()}
        S_min, slope, S = r["fit"]["S_min"], r["fit"]["slope"], r["measured"]
        parts = f"b_eff = S_min b_noise / (S − S_min) = {slope:.0f} / ({S:.1f} − {S_min:.1f})"
        if b in shuffled:
            beyond = float(np.mean(shuffled[b])) - S_min
            parts += (f": the contiguous runs reach L* {S - S_min:.0f} steps after S_min, the shuffled b = {b} runs "
                      f"{beyond:.0f}, which the same curve reads as {slope / beyond:.0f} shuffled chunks")
        gap = float(np.diff(runs[0]["eval_steps"])[0])
        widest = max(shuffled, key=lambda k: np.ptp(shuffled[k]))
        seeds = ", ".join(f"{x:.0f}" for x in st["contiguous"])
        alone = ", ".join(f"{b / cp['R']:.1f} [{b / cp['ci'][1]:.1f}, {b / cp['ci'][0]:.1f}] at step {s}"
                          for s, cp in zip(R["checkpoint_steps"], R["checkpoints"]))
        final = lambda arm, k: float(np.mean([x["held_out"][-1] for x in runs
                                              if x["config"]["arm"] == arm and x["config"]["b"] == k]))
        contig, ladder = final("contiguous", b), {k: final("shuffled", k) for k in shuffled}
        lines.append(
            f"**{c}**: {parts}. Steps to L* are interpolated between evaluations {gap:.0f} steps apart; the "
            f"contiguous seeds reach it at steps {seeds}, and the widest spread of a shuffled arm is "
            f"{np.ptp(shuffled[widest]):.0f} steps (b = {widest}). Each probed checkpoint alone gives {b} / R = "
            f"{alone}; the rule's R, their mean, gives {r['b_over_R']:.1f}. At step {page['T']} the contiguous runs' "
            f"held-out loss, {contig:.3f}, lies {_where_on_ladder(contig, ladder)}.")
    return lines
