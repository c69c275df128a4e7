"""Sentences of the model-regime page: each question's answer, no stronger than its interval, or what is still
missing. The rule they apply (margin, Holm, incomplete cells): docs/methods.md#model-regime; the numbers come from
docgrad.results.regime.read_question.
"""

from __future__ import annotations

from docgrad.core.simex_fit import MOVES, REGIME_MARGIN, ROBUST
from docgrad.results.regime import AS_LOADED, QUESTIONS, ROUNDING, START_TOKEN

WHAT_CHANGES = {START_TOKEN: "with <|endoftext|> ahead of every chunk",
                ROUNDING: "extrapolated to unrounded weights (SIMEX, quadratic)"}
STATISTIC_NAMES = {"R": "R(16K)", "rho_long": "rho_long", "mean_gradient_share": "mean-gradient share",
                   "B_simple_tokens": "B_simple"}


def signed_pct(x: float) -> str:
    """0.031 -> '+3.1%' (one decimal, a real minus sign)."""
    return f"{x * 100:+.1f}%".replace("-", "\u2212")


def interval_pct(ci) -> str:
    """[lo, hi] -> '[-2.0%, +8.4%]'."""
    return f"[{signed_pct(ci[0])}, {signed_pct(ci[1])}]"


def cell_name(key: tuple[str, str]) -> str:
    corpus, regime = key
    return f"{corpus} {regime or 'as loaded'}"


def corpus_sentence(corpus: str, r: dict, margin: float = REGIME_MARGIN) -> str:
    """One corpus's decided change of R(16K): its decision, point change and interval at its Holm level."""
    level = f"{(1 - r['level']) * 100:.2f}".rstrip("0").rstrip(".")
    change = f"{signed_pct(r['delta'])} {interval_pct(r['ci'])} ({level}% interval)"
    if r["decision"] == ROBUST:
        return f"{corpus}: robust, {change}, inside \u00b1{margin:.0%}"
    if r["decision"] == MOVES:
        way = "rises" if r["delta"] > 0 else "falls"
        return f"{corpus}: moves, R(16K) {way} by {change}"
    return f"{corpus}: not resolved, {change} (crosses 0 and reaches past \u00b1{margin:.0%})"


def question_lines(reading: dict) -> list[str]:
    """The answer lines of one question (read_question's output): the decided R(16K) per corpus, or the cells
    still missing and that nothing is read until they are committed."""
    q = reading["question"]
    if not reading["complete"]:
        n = len(reading["present"]) + len(reading["missing"])
        return [f"**{q.capitalize()}**: {len(reading['present'])} of {n} cells committed (missing: "
                f"{', '.join(cell_name(k) for k in reading['missing'])}); nothing of this question is read until "
                "every cell is committed."]
    head = f"**R(16K) {WHAT_CHANGES[q]}**, against the same {reading['n_docs']} documents as loaded (Holm over " \
           f"{len(reading['R'])} corpora):"
    return [head] + [f"- {corpus_sentence(c, r)}" for c, r in reading["R"].items()]


def described_rows(reading: dict) -> list[dict]:
    """Rows of the described (not decided) changes: statistic, corpus, change, 95% interval; for rounding also
    the linear extrapolant's change of R (sensitivity)."""
    rows = []
    for k, per_corpus in reading.get("described", {}).items():
        for corpus, d in per_corpus.items():
            row = {"statistic": STATISTIC_NAMES[k], "corpus": corpus, "change": signed_pct(d["delta"]),
                   "95% interval": interval_pct(d["ci"]) if d["ci"] else "not defined"}
            if reading["question"] == ROUNDING and k == "R":
                row["linear extrapolant"] = signed_pct(reading["linear"][corpus])
            rows.append(row)
    return rows


__all__ = ["AS_LOADED", "QUESTIONS", "question_lines", "described_rows", "corpus_sentence", "cell_name", "signed_pct"]
