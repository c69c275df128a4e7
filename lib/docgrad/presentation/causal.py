"""Page 06 in frames and words: standalone vs causal context per corpus (docgrad.results.positions computes it).
Definitions: docs/methods.md#standalone-vs-causal.

Every sentence that states a conclusion is built here from docgrad.presentation.evidence, no stronger than its
interval: a causal − standalone comparison is *resolved* only when the page's Holm family
(docgrad.results.positions.comparison_family) resolves it, and one that is not is *not resolved*, never "no
difference" (no equivalence margin was set for these comparisons)."""

from __future__ import annotations

import re
from typing import Mapping

import numpy as np
import pandas as pd

from docgrad.models import offline_model
from docgrad.presentation import evidence as ev
from docgrad.presentation.evidence import Claim
from docgrad.results.positions import (CAUSAL_MODE, DIFFERENCE, MODES, RATIOS, STANDALONE_MODE, Family,
                                       ModeComparison, PageComparisons, cell_name)

CENTRED_DIFFERENCE, UNCENTRED_DIFFERENCE = f"{DIFFERENCE}, centred", f"{DIFFERENCE}, uncentred"
FIGURE_MODES = (STANDALONE_MODE, CAUSAL_MODE, CENTRED_DIFFERENCE, UNCENTRED_DIFFERENCE)
QUANTITY_LABELS = {"loss": "mean loss (nats/token)", "sqnorm": "mean |g|²", "mean_norm": "|G_k|² (position mean)"}


def _ci(ci: Mapping, key):
    lo, hi = (ci.get(key) or (None, None))
    return (np.nan if lo is None else lo), (np.nan if hi is None else hi)


def _mode_frame(comps: Mapping[str, ModeComparison], key: str, xname: str) -> pd.DataFrame:
    """Rows (corpus, mode, <xname>, <key>, lo, hi) of one curve (rho by lag or R by window): both modes centred by
    the position means, their centred difference (mode CENTRED_DIFFERENCE) and the uncentred difference
    (UNCENTRED_DIFFERENCE), each with its 95% paired interval."""
    rows = []
    for k, c in comps.items():
        for mode in MODES:
            e = c.centred[mode]
            for x, v in getattr(e, key).items():
                lo, hi = _ci(e.ci.get(key, {}), x)
                rows.append({"corpus": k, "mode": mode, xname: x, key: v, "lo": lo, "hi": hi})
        for mode, name in ((CENTRED_DIFFERENCE, f"{key}_centred"), (UNCENTRED_DIFFERENCE, key)):
            for x, v in c.difference[name].items():
                lo, hi = _ci(c.difference[f"{name}_ci"], x)
                rows.append({"corpus": k, "mode": mode, xname: x, key: v, "lo": lo, "hi": hi})
    return pd.DataFrame(rows, columns=["corpus", "mode", xname, key, "lo", "hi"])


def rho_by_mode_frame(comps: Mapping[str, ModeComparison]) -> pd.DataFrame:
    """Rows (corpus, mode, lag_tokens, rho, lo, hi): centred rho in both modes, the centred difference and the
    uncentred one."""
    return _mode_frame(comps, "rho", "lag_tokens")


def R_by_mode_frame(comps: Mapping[str, ModeComparison]) -> pd.DataFrame:
    """Rows (corpus, mode, W_tokens, R, lo, hi): centred R in both modes, the centred difference and the
    uncentred one."""
    return _mode_frame(comps, "R", "W_tokens")


def position_frame(comps: Mapping[str, ModeComparison]) -> pd.DataFrame:
    """Rows (corpus, mode, quantity, position, start_tokens, value, lo, hi) for the per-position mean loss
    ('loss'), mean squared gradient norm ('sqnorm') and squared norm of the position mean |G_k|^2 ('mean_norm'),
    both modes and their difference."""
    rows = []
    for k, c in comps.items():
        for mode, per in c.positions.items():
            for q, s in per.items():
                for pos, v in enumerate(s.value):
                    lo, hi = s.ci[pos] if s.ci else (None, None)
                    rows.append({"corpus": k, "mode": mode, "quantity": q, "position": pos,
                                 "start_tokens": pos * c.chunk, "value": v,
                                 "lo": np.nan if lo is None else lo, "hi": np.nan if hi is None else hi})
    return pd.DataFrame(rows, columns=["corpus", "mode", "quantity", "position", "start_tokens", "value", "lo", "hi"])


# --- the family of comparisons, in words ------------------------------------------------------------------

LABELS = {"window_noise": "window noise", "sqnorm_last": "last-chunk |g|²", "mean_norm_last": "last-chunk |G_k|²",
          "loss_last": "last-chunk loss"}
RATIO_WHAT = {"window_noise": "The window noise σ²R(W)/m"}
DIFFERENCE_WHAT = {"sqnorm_last": "The last chunk's mean squared gradient norm |g|²",
                   "mean_norm_last": "The last chunk's squared position-mean norm |G_k|²"}


def comparison_label(quantity: str, at: int, chunk: int = 512) -> str:
    """'ρ(512)', 'R(2048)', 'window noise', 'last-chunk |g|²', 'last-chunk |G_k|²', 'last-chunk loss' for a family
    row's quantity and position."""
    if quantity == "rho":
        return f"ρ({at})"
    if quantity == "R":
        return f"R({at})"
    if quantity in LABELS:
        return LABELS[quantity]
    raise ValueError(f"unknown family quantity {quantity!r}: expected rho, R, {', '.join(LABELS)}")


def _family_note(row: Mapping, size: int) -> str:
    return f"Holm over {size} comparisons, interval at {1 - row['level']:.2%}"


def family_claim(row: Mapping, size: int) -> Claim:
    """The claim of one family row (docgrad.results.positions.Family): a difference through
    evidence.difference, a ratio (window noise) as causal / standalone against 1; RESOLVED only when Holm
    resolves the row, NOT_RESOLVED otherwise (also when its interval excludes the null but an earlier Holm step
    failed), NOT_MEASURED without an interval."""
    label = comparison_label(row["quantity"], row["at"])
    note = _family_note(row, size)
    if row["quantity"] in RATIOS:
        what = f"{RATIO_WHAT[row['quantity']]} (causal / standalone)"
        ci = row.get("ci") or (None, None)
        if ci[0] is None or ci[1] is None or row["value"] is None or not np.isfinite(row["value"]):
            return Claim(ev.NOT_MEASURED, f"{what}: not measured (no interval).")
        iv = ev.interval(row["value"], row["ci"])
        if row["resolved"]:
            side = "higher" if row["value"] > 1 else "lower"
            return Claim(ev.RESOLVED, f"{what} is {side} with context: {iv} excludes 1 ({note}).")
        return Claim(ev.NOT_RESOLVED, f"{what} is not resolved: {iv} ({note}; p = {p_value(row)}).")
    what = f"Centred {label}" if row["quantity"] in ("rho", "R") else DIFFERENCE_WHAT.get(row["quantity"],
                                                                                              f"The {label}")
    c = ev.difference(what, "causal context", "standalone chunks", row["value"], row["ci"], family=note)
    if c.status == ev.RESOLVED and not row["resolved"]:
        c = Claim(ev.NOT_RESOLVED, f"{what} does not separate causal context from standalone chunks after Holm's "
                                   f"step-down (difference {ev.interval(row['value'], row['ci'])}, "
                                   f"p = {p_value(row)}).")
    return c


def family_claims(family: Family) -> list[Claim]:
    """One claim per comparison of the family, in its order."""
    return [family_claim(r, family.size) for r in family.rows]


def _short(row: Mapping) -> str:
    """'ρ(512) −0.0284 [−0.0570, −0.000500]' or 'window noise ×0.788 [0.724, 0.848]' (Holm's level)."""
    iv = ev.interval(row["value"], row["ci"])
    label = comparison_label(row["quantity"], row["at"])
    if row["quantity"] in RATIOS:
        return f"{label} ×{iv}"
    unit = " nats" if row["quantity"] == "loss_last" else ""
    return f"{label} {'+' if row['value'] > 0 else ''}{iv}{unit}"


def _lags_text(rows) -> str:
    """'ρ at all 7 lags' or 'ρ(2560), ρ(3072)' for the family rows of ρ among `rows`."""
    return ", ".join(comparison_label(r["quantity"], r["at"]) for r in rows)


def _open_text(rows: list, n_lags: int) -> str:
    """The comparisons of `rows` (not resolved), with ρ at every lag said once."""
    rho = [r for r in rows if r["quantity"] == "rho"]
    other = [comparison_label(r["quantity"], r["at"]) for r in rows if r["quantity"] != "rho"]
    head = [f"ρ at all {n_lags} lags"] if rho and len(rho) == n_lags else ([_lags_text(rho)] if rho else [])
    return ", ".join(head + other)


def corpus_reading(corpus: str, family: Family, reason: str | None = None) -> Claim:
    """One corpus in one sentence: which of its family comparisons are resolved (with their intervals at Holm's
    level) and which are not. NOT_MEASURED when the corpus has no comparison (reason: why), RESOLVED when at
    least one is resolved, else NOT_RESOLVED."""
    rows = family.for_corpus(corpus)
    if not rows:
        why = f": {reason}" if reason else ""
        return Claim(ev.NOT_MEASURED, f"**{corpus}**: not measured{why}; nothing is said about it.")
    claims = [family_claim(r, family.size) for r in rows]
    hit = [r for r, c in zip(rows, claims) if c.status == ev.RESOLVED]
    rest = [r for r, c in zip(rows, claims) if c.status != ev.RESOLVED]
    n_lags = sum(r["quantity"] == "rho" for r in rows)
    head = f"**{corpus}**: {len(hit)} of {len(rows)} resolved"
    if not hit:
        return Claim(ev.NOT_RESOLVED, f"{head}; not resolved: {_open_text(rest, n_lags)}.")
    tail = f"; not resolved: {_open_text(rest, n_lags)}." if rest else "."
    return Claim(ev.RESOLVED, f"{head}: {'; '.join(_short(r) for r in hit)}{tail}")


def family_facts(family: Family) -> dict:
    """The family's numbers and every claim's status and text, for the page's JSON twin."""
    out = family.to_json()
    out["claims"] = [{"status": c.status, "text": c.text} for c in family_claims(family)]
    return out


def p_value(row: Mapping) -> str:
    """A family row's bootstrap p-value at 2 significant figures; '< 0.001' (2 / draws) when no draw is on the
    other side of the null."""
    if row["p"] == 0 and row.get("draws"):
        return f"< {ev.sig(2 / row['draws'], 2)}"
    return ev.sig(row["p"], 2)


def family_frame(family: Family, comps: Mapping[str, ModeComparison]) -> pd.DataFrame:
    """The family as a table, one row per comparison (index corpus, comparison): the uncentred difference with
    its 95% paired interval (ρ and R; the window noise and the loss do not depend on centring: 'same'), the
    centred one with its 95% paired interval, the centred one at Holm's level, the bootstrap p-value and whether
    it is resolved. Text at 3 significant figures."""
    rows = []
    for r in family.rows:
        c = comps[r["corpus"]]
        q, at = r["quantity"], r["at"]
        if q in ("rho", "R"):
            unc = ev.interval(c.difference[q][at], c.difference[f"{q}_ci"].get(at))
        else:
            unc = "same"
        rows.append({"corpus": r["corpus"], "comparison": comparison_label(q, at),
                     "uncentred, 95%": unc, "centred, 95%": ev.interval(r["value"], r["ci95"]),
                     "at Holm's level": f"{ev.interval(r['value'], r['ci'])} ({1 - r['level']:.2%})",
                     "p": p_value(r), "resolved": "yes" if r["resolved"] else "no"})
    cols = ["corpus", "comparison", "uncentred, 95%", "centred, 95%", "at Holm's level", "p", "resolved"]
    return pd.DataFrame(rows, columns=cols).set_index(["corpus", "comparison"])


def position_mean_frame(comps: Mapping[str, ModeComparison]) -> pd.DataFrame:
    """Per corpus and mode: |G_k|^2 at the window's first and last chunk, the share of sigma2 that is the spread
    of the position means (sigma2_pos / sigma2), and the position-mean term mu at the longest lag; the row
    'causal − standalone' holds the paired difference of that term with its 95% interval. 3 significant figures."""
    rows = []
    for k, c in comps.items():
        lag = (c.m - 1) * c.chunk
        for mode in MODES:
            s = c.centred[mode]
            norm = s.mean_norm
            rows.append({"corpus": k, "mode": mode,
                         "|G_k|², first chunk": ev.interval(norm.value[0], norm.ci[0] if norm.ci else None),
                         "|G_k|², last chunk": ev.interval(norm.value[-1], norm.ci[-1] if norm.ci else None),
                         "σ²_pos / σ²": f"{s.sigma2_pos / c.estimates(mode).sigma2:.1%}",
                         f"μ({lag})": ev.interval(s.position_term[lag], s.interval("position_term", lag))})
        rows.append({"corpus": k, "mode": DIFFERENCE, "|G_k|², first chunk": "–", "|G_k|², last chunk": "–",
                     "σ²_pos / σ²": "–",
                     f"μ({lag})": ev.interval(c.difference["position_term"][lag],
                                              c.difference["position_term_ci"].get(lag))})
    return pd.DataFrame(rows).set_index(["corpus", "mode"])


def position_reading(comps: Mapping[str, ModeComparison]) -> tuple[dict, str]:
    """The uncentred ρ difference at the longest lag split into its position-mean term and the rest, per corpus
    (descriptive: 95% paired intervals, not part of the Holm family). Returns (facts, sentence)."""
    if not comps:
        return {}, "No position means are measured."
    facts, parts = {}, []
    for k, c in comps.items():
        lag = (c.m - 1) * c.chunk
        total, term = c.difference["rho"][lag], c.difference["position_term"][lag]
        facts[k] = {"lag": lag, "uncentred": total, "uncentred_ci": list(c.difference["rho_ci"].get(lag) or []),
                    "position_term": term, "position_term_ci": list(c.difference["position_term_ci"].get(lag) or []),
                    "rest": total - term}
        parts.append(f"{k} {ev.interval(total, c.difference['rho_ci'].get(lag))}, μ "
                     f"{ev.interval(term, c.difference['position_term_ci'].get(lag))}")
    lags = sorted({f["lag"] for f in facts.values()})
    lag_txt = ", ".join(f"ρ({x})" for x in lags)
    return facts, (f"The uncentred causal − standalone difference of {lag_txt} and the part of it that is the "
                   f"position-mean term μ (95% paired intervals; descriptive, not in the family): "
                   f"{'; '.join(parts)}.")


def _sign(ci) -> int:
    """+1 when a 95% interval lies above 0, -1 below, 0 when it contains 0 or is missing."""
    lo, hi = ci if ci else (None, None)
    if lo is None or hi is None:
        return 0
    return 1 if lo > 0 else -1 if hi < 0 else 0


def window_facts(c: ModeComparison) -> dict:
    """The window-level numbers of one comparison under the names the README and its test read: the uncentred
    R(W) in each mode and their difference with 95% paired intervals (R_difference_sign: the side of 0 that
    interval is on, without multiplicity control), the centred ones, the ratios and the last chunk's loss. No
    sentence on page 06 reads R_difference_sign; its conclusions come from the family."""
    W, m, last = c.window, c.m, c.m - 1
    loss = c.positions[DIFFERENCE]["loss"]
    dR_ci = c.difference["R_ci"].get(W)
    return {"corpus": c.corpus, "window": W, "chunks_per_window": m, "n_docs": c.n_docs,
            "note": "uncentred R with 95% paired intervals, no multiplicity control; page 06 reads the family",
            "R_standalone": c.standalone.R[W], "R_standalone_ci": list(c.standalone.interval("R", W)),
            "R_causal": c.causal.R[W], "R_causal_ci": list(c.causal.interval("R", W)),
            "R_difference": c.difference["R"][W], "R_difference_ci": None if dR_ci is None else list(dR_ci),
            "R_difference_sign": _sign(dR_ci),
            "R_centred_standalone": c.centred[STANDALONE_MODE].R[W], "R_centred_causal": c.centred[CAUSAL_MODE].R[W],
            "R_centred_difference": c.difference["R_centred"][W],
            "sigma2_ratio": c.ratio["sigma2"], "sigma2_centred_ratio": c.ratio["sigma2_centred"],
            "window_noise_ratio": c.ratio["window_noise"],
            "window_noise_ratio_ci": list(c.ratio.get("window_noise_ci", (None, None))),
            "loss_first_standalone": c.positions[STANDALONE_MODE]["loss"].value[0],
            "loss_first_causal": c.positions[CAUSAL_MODE]["loss"].value[0],
            "loss_last_standalone": c.positions[STANDALONE_MODE]["loss"].value[last],
            "loss_last_causal": c.positions[CAUSAL_MODE]["loss"].value[last],
            "loss_last_difference": loss.value[last],
            "loss_last_difference_ci": list(loss.ci[last]) if loss.ci else None}


# --- what is measured, and the result box ----------------------------------------------------------------

def measured_lines(pc: PageComparisons, label: str, causal_dir, standalone_dir, resamples: int) -> list[str]:
    """The page's 'what is measured' list: model and parameters, the measured corpora with their documents, the
    reason for each corpus not measured, and a closing line when nothing or only part is measured."""
    comps, m = pc.comparisons, pc.window // pc.chunk
    lines = [f"- model **{label}** (`{pc.model}` at `{pc.revision}`); C = {pc.chunk} tokens, W = {pc.window} tokens "
             f"({m} chunks per window); causal results from `{causal_dir}`, standalone from `{standalone_dir}`; "
             f"{resamples} paired bootstrap resamples",
             f"- **measured**: {', '.join(f'{k} ({c.n_docs} documents)' for k, c in comps.items()) or 'none'}"]
    lines += [f"- **not measured yet: {k}**: {why}" for k, why in pc.not_measured.items()]
    if not comps:
        lines.append(f"\n**Nothing is measured yet.** There is no causal result of {label} at W = {pc.window}: every "
                     "section below is empty until the causal probe has run (`make probe-causal`, then "
                     "`docgrad run 06`).")
    elif pc.not_measured:
        lines.append(f"\nCompared below: {', '.join(comps)}; not measured yet: {', '.join(pc.not_measured)}.")
    return lines


def _docs(comps: Mapping[str, ModeComparison]) -> str:
    n = sorted({c.n_docs for c in comps.values()})
    return f"{n[0]}" if len(n) == 1 else f"{n[0]}–{n[-1]}"


def model_phrase(model: str, label: str) -> str:
    """'SmolLM2-135M-Instruct (4-bit quantised)' for an offline model whose GGUF file names its quantisation
    (Q4_1, q4_k_m, ...), else the label alone."""
    spec = offline_model(model)
    bits = re.search(r"[qQ](\d+)_", spec.file) if spec is not None else None
    return f"{label} ({bits.group(1)}-bit quantised)" if bits else label


def check_claim(check: Family, brief: bool = False) -> Claim:
    """The check that the context is used (positions.comparison_family over CHECK_QUANTITIES: the last chunk's
    loss, causal − standalone, Holm over the corpora): where it falls, with its interval at Holm's level (brief:
    the corpora only, for the result box), and where it is not resolved. Expected, so never counted among the
    page's findings. RESOLVED when it falls somewhere, NOT_RESOLVED when nowhere (or where it rises), NOT_MEASURED
    without rows."""
    if not check.rows:
        return Claim(ev.NOT_MEASURED, "The check that the context is used (the last chunk's loss) is not measured.")
    fell = [r for r in check.rows if r["resolved"] and r["value"] < 0]
    rose = [r for r in check.rows if r["resolved"] and r["value"] > 0]
    rest = [r["corpus"] for r in check.rows if not r["resolved"]]
    note = (f"Holm over {check.size} corpora, intervals at Holm's level" if check.size > 1 else
            "one corpus, its 95% interval")

    def where(rows):
        if brief:
            return ", ".join(r["corpus"] for r in rows)
        return ", ".join(f"{r['corpus']} {ev.interval(r['value'], r['ci'])}" for r in rows) + " nats"

    parts = [f"lower with context in {where(fell)}"] if fell else []
    parts += [f"higher with context in {where(rose)}"] if rose else []
    parts += [f"not resolved in {', '.join(rest)}"] if rest else []
    if brief:
        return Claim(ev.RESOLVED if fell else ev.NOT_RESOLVED,
                     f"Check, not a finding: the last chunk's loss is {'; '.join(parts)}.")
    text = (f"Check, not a finding: the model reads its context, so the last chunk's loss is expected to fall; it is "
            f"{'; '.join(parts)} ({note}).")
    return Claim(ev.RESOLVED if fell else ev.NOT_RESOLVED, text)


def causal_lead(pc: PageComparisons, family: Family, brief: bool = False) -> str:
    """Page 06's opening sentence: does the standalone R of pages 03-04 hold when each chunk reads the text before
    it? Per corpus, the family's comparison of R at the page's window (causal − standalone, its interval at Holm's
    level): where Holm resolves it, lower or higher by how much (so the standalone R overstates or understates the
    design effect there); the corpora where it is not resolved are named, which is not evidence of no change.
    brief: each side's corpora named, and only its largest change with its interval."""
    W = pc.window
    rows = [r for r in family.rows if r["quantity"] == "R" and r["at"] == W]
    label = comparison_label("R", W)
    head = f"With each chunk's preceding text as context (first {W:,} tokens), {label} is "
    if not rows:
        return f"With each chunk's preceding text as context, {label} is not compared: no comparison of it was drawn."

    def by(r):
        lo, hi = r["ci"]
        return ev.interval(abs(r["value"]), [-hi, -lo] if r["value"] < 0 else [lo, hi])

    low = [r for r in rows if r["resolved"] and r["value"] < 0]
    high = [r for r in rows if r["resolved"] and r["value"] > 0]
    rest = [r["corpus"] for r in rows if not r["resolved"]]
    def side(name, rs):
        if not brief:
            return f"{name} than standalone for " + ", ".join(f"{r['corpus']} by {by(r)}" for r in rs)
        top = max(rs, key=lambda r: abs(r["value"]))
        return f"{name} than standalone for {', '.join(r['corpus'] for r in rs)} (at most by {by(top)}, {top['corpus']})"

    parts = [side(name, rs) for name, rs in (("lower", low), ("higher", high)) if rs]
    if not parts:
        return head + f"not resolved from standalone for any corpus ({', '.join(rest)}; Holm), which is not evidence " \
                      "that it is unchanged."
    effect = ("overstates" if not high else "understates" if not low else "misstates")
    return (head + " and ".join(parts) + f" (Holm), so pages 03–04's standalone R {effect} it there"
            + (f"; not resolved for {', '.join(rest)}." if rest else "."))


def result_box(pc: PageComparisons, family: Family, label: str, check: Family | None = None) -> tuple[dict, str]:
    """The page's opening answer (evidence.result_box): causal_lead first (R at the window, with context against
    standalone), then how many of the family's comparisons of the gradients are resolved and, per corpus with any,
    the resolved ones (window-level quantities with their intervals at Holm's level, ρ as a count of lags; counts
    only when the box would exceed its words); then the check that the context is used (check_claim, a family
    apart); what was measured; the caveat. Returns (facts, Markdown); facts['lead'] is the opening sentence."""
    comps = pc.comparisons
    measured = (f"{model_phrase(pc.model, label)}, chunk gradients with causal context over the first "
                f"{pc.window:,} tokens of {_docs(comps) if comps else 'no'} documents per corpus against standalone; "
                "paired document bootstrap.")
    if not comps:
        answer = [f"Nothing is measured yet: no causal result at W = {pc.window:,} for "
                  f"{', '.join(pc.not_measured) or 'any corpus'}."]
        return ({"status": ev.NOT_MEASURED, "resolved": 0, "size": 0, "lead": answer[0]},
                ev.result_box(answer, measured, "the standalone proxy of pages 03–04 stands unchecked."))
    count = (f"{family.n_resolved} of the page's {family.size} causal − standalone comparisons of the gradients are "
             f"resolved (Holm, {family.alpha:.0%}).")
    quiet = [k for k in comps if not any(r["resolved"] for r in family.for_corpus(k))]
    caveat = f"{_docs(comps)} documents per corpus resolve only large changes: unresolved is not unchanged."
    facts = {"status": ev.RESOLVED if family.n_resolved else ev.NOT_RESOLVED, "resolved": family.n_resolved,
             "size": family.size, "alpha": family.alpha, "unresolved_corpora": quiet}
    tail = [f"Nothing resolved for {', '.join(quiet)}."] if quiet else []
    if check is not None:
        c = check_claim(check, brief=True)
        tail.append(c.text)
        facts["check"] = {"status": c.status, "resolved": check.n_resolved, "size": check.size, "text": c.text}
    for lead_brief, detail in ((False, True), (False, False), (True, False)):   # shorter until within its words
        facts["lead"] = lead = causal_lead(pc, family, lead_brief)
        try:
            lines = _box_lines(comps, family, detail, pc.window)
            return facts, ev.result_box([lead, count, *lines, *tail], measured, caveat)
        except ValueError:
            if lead_brief:
                raise


def _box_lines(comps, family: Family, detail: bool, lead_window: int | None = None) -> list[str]:
    """Per corpus with a resolved comparison: the resolved window-level ones with intervals and ρ as a count of
    lags (detail; R at `lead_window` left to the lead, which states it), or only how many are resolved."""
    out = []
    for k in comps:
        rows = family.for_corpus(k)
        hit = [r for r in rows if r["resolved"]]
        if not hit:
            continue
        if not detail:
            out.append(f"{k}: {len(hit)} of {len(rows)}.")
            continue
        rho = [r for r in hit if r["quantity"] == "rho"]
        named = [_short(r) for r in hit if r["quantity"] != "rho"
                 and not (r["quantity"] == "R" and r["at"] == lead_window)]
        if rho:
            signs = {r["sign"] for r in rho}
            side = "higher " if signs == {1} else "lower " if signs == {-1} else ""
            named.append(f"ρ {side}at {len(rho)} of {sum(r['quantity'] == 'rho' for r in rows)} lags")
        out.append(f"{k}: {'; '.join(named)}.")
    return out


def readings(pc: PageComparisons, family: Family, check: Family | None = None) -> tuple[dict, list[str]]:
    """The closing reading: one corpus_reading per requested corpus (page order: measured, then not measured),
    then the check that the context is used (check_claim) when given. Returns (facts: corpus (and 'check') ->
    status and text, Markdown bullet lines)."""
    out, lines = {}, []
    for k in [*pc.comparisons, *pc.not_measured]:
        c = corpus_reading(k, family, pc.not_measured.get(k))
        out[k] = {"status": c.status, "text": c.text}
        lines.append(f"- {c.text}")
    if check is not None and pc.comparisons:
        c = check_claim(check)
        out["check"] = {"status": c.status, "text": c.text}
        lines.append(f"- {c.text}")
    return out, lines


# --- `docgrad analyze --context causal` ------------------------------------------------------------------------

def causal_summary_table(a, positions: dict) -> str:
    """Fixed-width text for `docgrad analyze --context causal`: one line per causal cell (window, documents,
    S_cross, sigma2, R at the window with its interval), its loss and squared norm by position, the gates."""
    def f(x, fmt):
        return "-" if x is None or (isinstance(x, float) and not np.isfinite(x)) else format(x, fmt)

    lines = [f"{'model':34s} {'revision':24s} {'corpus':7s} {'C':>5s} {'W':>6s} {'docs':>4s} {'S_cross':>10s} "
             f"{'sigma2':>10s} {'R(W)':>7s} {'R(W) 95%':>16s}"]
    for c in a.cells:
        e, W = c.all, c.window
        lo, hi = e.interval("R", W)
        ci = "" if lo is None else f"[{lo:.3g}, {hi:.3g}]"
        lines.append(f"{c.model[:34]:34s} {c.revision[:24]:24s} {c.corpus:7s} {c.chunk:5d} {W:6d} {c.n_docs:4d} "
                     f"{f(e.S_cross, '10.4g')} {f(e.sigma2, '10.4g')} {f(e.R.get(W), '7.3f')} {ci:>16s}")
        p = positions.get(cell_name(c))
        if p is not None:
            for q, label in (("loss", "loss by position"), ("sqnorm", "|g|^2 by position")):
                lines.append(f"    {label:18s} " + " ".join(f(v, ".4g") for v in p[q].value))
    for name, gt in a.gates.items():
        lines.append(f"{name}: {gt['status']} - {gt['summary']}")
    lines.append(f"verdict: {a.verdict}")
    return "\n".join(lines)


