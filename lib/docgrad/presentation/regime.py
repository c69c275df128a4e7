"""Sentences of the model-regime page: each question's answer, no stronger than its interval, or what is still
missing. The rule they apply (margin, Holm, incomplete cells): docs/methods.md#model-regime; the numbers come from
docgrad.results.regime.read_question.
"""

from __future__ import annotations

from docgrad.core.constants import G2_R
from docgrad.core.simex_fit import MOVES, REGIME_MARGIN, ROBUST
from docgrad.presentation import evidence as ev
from docgrad.results.regime import AS_LOADED, AVERAGED, FIRST_SET, QUESTIONS, ROUNDING, SECOND_SET, START_TOKEN

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
        return f"{corpus}: moves, R(16K) {way}: {change}"
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
    crn = crn_draws({q: reading}) if q == ROUNDING else None
    draws = (f", {crn['draws']} common-random-number noise draws per \u03bb, intervals over documents and draws"
             if crn else "")
    head = f"**R(16K) {WHAT_CHANGES[q]}**, against the same {reading['n_docs']} documents as loaded{draws} (Holm " \
           f"over {len(reading['R'])} corpora):"
    if reading.get("withdrawn"):
        head = head[:-1] + f", described, not decided ({WITHDRAWN_WHY}):"
        return [head] + [f"- {c}: {signed_pct(r['delta'])} {interval_pct(r['ci'])} (one noise draw; the interval "
                         "covers documents, not draws)" for c, r in reading["R"].items()]
    denominator = denominator_corpora(reading)

    def line(c, r):
        if c not in denominator:
            return f"- {corpus_sentence(c, r)}"
        level = f"{(1 - r['level']) * 100:.2f}".rstrip("0").rstrip(".")
        p = reading["parts"][c]
        return (f"- {c}: R(16K) falls {signed_pct(r['delta'])} {interval_pct(r['ci'])} ({level}% interval) only "
                f"through its denominator: \u03c3\u00b2 {ratio_text(p['sigma2'])}, long-lag covariance "
                f"{ratio_text(p['long_cov'])}, a 16K block's noise {ratio_text(p['block_noise'])} (95%)")

    return [head] + [line(c, r) for c, r in reading["R"].items()]


QUESTION_NAMES = {START_TOKEN: "start token", ROUNDING: "rounding"}
NOTE_CHANGES = {START_TOKEN: "with <|endoftext|> ahead of every chunk", ROUNDING: "extrapolated to unrounded weights"}


def _committed(reading: dict) -> str:
    return f"{len(reading['present'])} of {len(reading['present']) + len(reading['missing'])} cells committed"


def change_text(reading: dict, corpus: str, linear_name: str = "linear extrapolant",
                again: dict | None = None) -> tuple[str, list[str]]:
    """A corpus's decided change of R(16K) with its Holm-level interval, and what to put beside it: for rounding
    the linear extrapolant's change (the sensitivity check) and, where `again` (draws_beside) holds the corpus,
    what the noise draws say: ('−27.2% [−55.9%, −0.4%]', ['linear extrapolant +7.7%', 'second draw +6.4%'])."""
    r = reading["R"][corpus]
    beside = [f"{linear_name} {signed_pct(reading['linear'][corpus])}"] if corpus in reading.get("linear", {}) else []
    if again and corpus in again:
        beside.append(again[corpus])
    return f"{signed_pct(r['delta'])} {interval_pct(r['ci'])}", beside


def crn_draws(readings: dict) -> dict | None:
    """The common-random-number rounding reading (results.regime.crn_reading) once complete, when it decides the
    rounding question (addendum 2026-12-07, section 5); None before."""
    crn = readings.get(ROUNDING, {}).get("crn") or {}
    return crn if crn.get("complete") else None


def each_draw_text(crn: dict, corpus: str) -> str:
    """'+3.1%, −2.0%, +8.4%': each common-random-number draw's own change of R(16K) for a corpus."""
    return ", ".join(signed_pct(x) for x in crn["each_draw"][corpus])


def draws_beside(readings: dict) -> dict[str, str]:
    """What the rounding decision carries beside it about its noise draws, per corpus: each common-random-number
    draw alone once that reading decides ('each draw alone +3.1%, −2.0%, +8.4%'); before, the second set of draws
    where committed ('second draw +6.4%')."""
    crn = crn_draws(readings)
    if crn:
        return {c: f"each draw alone {each_draw_text(crn, c)}" for c in crn["each_draw"]}
    return {c: f"second draw {signed_pct(r['change'])}" for c, r in second_set(readings).items()}


WITHDRAWN_WHY = ("its first reading's interval left out the noise draw, and a second draw gives the other sign; "
                 "it is re-read with three draws per \u03bb")


def ratio_text(part: dict) -> str:
    """A part's ratio with its interval: '\u00d79.3 [6.3, 13.6]'."""
    lo, hi = part["ci"]
    return f"\u00d7{part['ratio']:.1f} [{lo:.1f}, {hi:.1f}]".replace("-", "\u2212")


def denominator_corpora(reading: dict) -> list[str]:
    """The corpora whose R(16K) *moves* under the start token only through its denominator (results.regime_parts
    .through_its_parts == 'denominator'; docs/methods.md, Model regime, addendum 2026-12-07, section 2)."""
    parts = reading.get("parts") or {}
    return [c for c, r in reading.get("R", {}).items()
            if r["decision"] == MOVES and (parts.get(c) or {}).get("side") == "denominator"]


def denominator_text(reading: dict, corpus: str) -> str:
    """'BOOKS (R(16K) \u221266.2%; \u03c3\u00b2 \u00d727.4 [19.2, 35.7], long-lag covariance \u00d72.3 [\u22125.2, 7.9],
    a 16K block's noise \u00d79.3 [6.3, 13.6])': the change of R beside its parts (95% paired intervals)."""
    p = reading["parts"][corpus]
    return (f"{corpus} (R(16K) {signed_pct(reading['R'][corpus]['delta'])}; \u03c3\u00b2 {ratio_text(p['sigma2'])}, "
            f"long-lag covariance {ratio_text(p['long_cov'])}, a 16K block's noise {ratio_text(p['block_noise'])})")


def parts_range(reading: dict, corpora: list[str]) -> str:
    """'(σ² ×5.9-27.4, a 16K block's noise ×2.9-9.3)' over the corpora's paired parts."""
    sigma = [reading["parts"][c]["sigma2"]["ratio"] for c in corpora]
    block = [reading["parts"][c]["block_noise"]["ratio"] for c in corpora]
    return (f"(\u03c3\u00b2 \u00d7{min(sigma):.1f}-{max(sigma):.1f}, block noise "
            f"\u00d7{min(block):.1f}-{max(block):.1f})")


def spike_clause(corpora: list[str]) -> str:
    return (f"a few chunks spike and R(16K) falls only through \u03c3\u00b2 for {', '.join(corpora)}, while the long-lag "
            "covariance holds")


def crn_sentence(crn: dict) -> str:
    """The rounding question by common random numbers (results.rounding; addendum 2026-12-07, section 5): how many
    of its cells are committed, or per corpus the change of R(16K) with its Holm-level interval over documents and
    draws, the decision, and each draw's own change (the interval understates the draws' variance with three)."""
    if not crn.get("complete"):
        cells = [k for k in crn["missing"] if k[1]]
        return (f"Rounding with its draws: {len(crn['present'])} of {len(crn['present']) + len(cells)} "
                "common-random-number cells committed (three noise draws per λ, CODE and WEB, documents 0-7); "
                "the rounding decision waits for all of them.")
    said = [f"{c} {signed_pct(r['delta'])} {interval_pct(r['ci'])} ({r['decision']}; each draw alone "
            f"{', '.join(signed_pct(x) for x in crn['each_draw'][c])})" for c, r in crn["R"].items()]
    return (f"Rounding with its draws ({crn['draws']} per λ, {crn['n_docs']} documents, Holm-level intervals "
            f"over documents and draws): {'; '.join(said)}. With {crn['draws']} draws the interval understates the "
            "draws' variance by about a third.")


def withdrawn_lead(reading: dict) -> str:
    """The rounding question while its decision is withdrawn (addendum 2026-12-07, section 5): what its cells
    describe, and no decision."""
    if not reading.get("complete"):
        return f"{QUESTION_NAMES[reading['question']]}: not read yet, {_committed(reading)}"
    again = second_set({ROUNDING: reading})
    said = [f"{c} {signed_pct(r['delta'])}" + (f" (a second draw {signed_pct(again[c]['change'])})" if c in again
                                                 else "") for c, r in reading["R"].items()]
    crn = reading.get("crn", {"present": [], "missing": []})
    done = f"{len(crn['present'])} of {len(crn['present']) + len([k for k in crn['missing'] if k[1]])}"
    return (f"rounding: not decided (one noise draw per \u03bb describes {', '.join(said)}; {done} cells of three "
            "draws per \u03bb committed)")


def question_lead(reading: dict, margin: float = REGIME_MARGIN) -> str:
    """One question's part of the opening sentence: the corpora whose R(16K) is robust (the widest span of their
    Holm-level intervals, all inside ±margin), then each corpus where it moves and each not resolved, with its
    change and Holm-level interval; or, while a cell is missing, how many are committed."""
    q = reading["question"]
    if reading.get("withdrawn"):
        return withdrawn_lead(reading)
    if not reading["complete"]:
        return f"{QUESTION_NAMES[q]}: not read yet, {_committed(reading)}"
    denominator = denominator_corpora(reading)
    by = {d: [c for c, r in reading["R"].items() if r["decision"] == d and c not in denominator]
          for d in (ROBUST, MOVES)}
    rest = [c for c, r in reading["R"].items() if r["decision"] not in (ROBUST, MOVES)]
    parts = []
    if by[ROBUST]:
        lo = min(reading["R"][c]["ci"][0] for c in by[ROBUST])
        hi = max(reading["R"][c]["ci"][1] for c in by[ROBUST])
        parts.append(f"robust for {', '.join(by[ROBUST])} (every change inside {interval_pct([lo, hi])}, "
                     f"within \u00b1{margin:.0%})")
    def said(c):
        change, beside = change_text(reading, c, "linear")
        return f"{c} ({'; '.join([change] + beside)})"

    parts += [f"{way} for " + ", ".join(said(c) for c in cs)
              for way, cs in (("moves", by[MOVES]), ("not resolved", rest)) if cs]
    if denominator:
        parts.append(spike_clause(denominator) + " " + parts_range(reading, denominator))
    return f"R(16K) {WHAT_CHANGES[q]}: " + "; ".join(parts)


def second_set(readings: dict) -> dict[str, dict]:
    """{corpus: row} of the second set of SIMEX noise draws the rounding reading carries (results.regime
    .second_draw_rows via read_model_regime), {} when there is none."""
    rows = readings.get(ROUNDING, {}).get("second_draws", [])
    return {r["corpus"]: r for r in rows if r["draws"] == SECOND_SET}


def result_box(readings: dict, label: str, margin: float = REGIME_MARGIN) -> str:
    """Page 04d's answer (evidence.result_box), first what a practitioner does with it: read R(16K) as a property
    of the text only where it is robust to the model's start token and rounding, each question's decided change
    (question_lead), or, while every question lacks cells, that nothing is known yet; what was measured; the
    caveat, with what a second set of SIMEX noise draws gives where one is committed. readings: {question:
    results.regime.read_question} (read_model_regime's, whose rounding reading carries the second draws)."""
    done = [r for r in readings.values() if r["complete"]]
    leads = "; ".join(question_lead(r, margin) for r in readings.values())
    if done:
        answer = [f"Read R(16K) as a property of the text only where it is robust to this model's regime: {leads}."]
    else:
        counts = "; ".join(f"{QUESTION_NAMES[r['question']]} {_committed(r)}" for r in readings.values())
        answer = [f"Whether R(16K) is a property of the text or of this 4-bit model's start token and rounding is not "
                  f"known yet: nothing is read before every cell of a question is committed ({counts})."]
    n = next((f"{r['n_docs']} " for r in done), "")
    crn = crn_draws(readings)
    counts = ", ".join(f"{QUESTION_NAMES[r['question']]} {r['n_docs']}" for r in done)
    same = f"documents per corpus ({counts})" if crn else f"the same {n}documents per corpus in every regime"
    measured = (f"{label}, {same}; paired document bootstrap; Holm over each question's corpora; margin "
                f"\u00b1{margin:.0%}.")
    if readings.get(ROUNDING, {}).get("withdrawn"):     # its lead already gives the second draw
        caveat = "the rounding decision waits for three noise draws per \u03bb (docs/methods.md, addendum 2026-12-07)."
    elif crn:
        caveat = (f"with {crn['draws']} noise draws per \u03bb the rounding interval understates their variance by "
                  "about a third (each draw: page 04d).")
    else:
        caveat = "one noise draw per SIMEX level decides (the interval covers documents, not draws)"
        again = [f"{c} {signed_pct(r['change'])} {interval_pct(r['ci'])}" for c, r in second_set(readings).items()]
        caveat += f"; a second set gives {', '.join(again)} (95%, described)." if again else "."
    return ev.result_box(answer, measured, caveat)


def headline_note(readings: dict, label: str) -> str:
    """The clause a headline that states R(16K) carries beside it when a corpus *moves* under a complete question
    (docs/methods.md#model-regime, "The headline"): per question, the regime and each moved corpus's change with its
    Holm-level paired interval, and where it is read (page 04d); "" when no corpus moves (or no question is
    complete), for rounding with the linear extrapolant and a second set of noise draws (where committed) beside
    it. The headline's own values stay those of the model as loaded."""
    again = draws_beside(readings)

    def noted(r, corpus):
        change, beside = change_text(r, corpus, "linear", again if r["question"] == ROUNDING else None)
        return f"{change} ({'; '.join([corpus] + beside)})"

    parts, spikes = [], []          # spikes: (reading, corpus) whose R falls only through its denominator
    for r in readings.values():
        if r.get("withdrawn") or not r["complete"]:
            continue
        denominator = denominator_corpora(r)
        spikes += [(r, c) for c in denominator]
        moved = [c for c, v in r.get("R", {}).items() if v["decision"] == MOVES and c not in denominator]
        if moved:
            parts.append(f"{NOTE_CHANGES[r['question']]}: {', '.join(noted(r, c) for c in moved)}")
    notes = [f"{label}'s R(16K) moves " + "; ".join(parts) + " (Holm-level, page 04d)"] if parts else []
    if spikes:
        corpora = [c for _, c in spikes]
        notes.append(f"{label}: with <|endoftext|> ahead of every chunk {spike_clause(corpora)} "
                     f"{parts_range(spikes[0][0], corpora)[:-1]}; page 04d)")
    return "; ".join(notes)


def limitation_line(readings: dict) -> str:
    """The model-regime limitation of pages 03-05: each question's decided reading (question_lead), or how many of
    its cells are committed while it is incomplete; then what the noise draws give: each common-random-number
    draw alone once that reading decides, before it a second set of SIMEX noise draws where committed."""
    leads = "; ".join(question_lead(r) for r in readings.values())
    crn = crn_draws(readings)
    if crn:
        each = "; ".join(f"{c} {each_draw_text(crn, c)}" for c in crn["each_draw"])
        again = (f" Rounding is read with {crn['draws']} common-random-number noise draws per \u03bb on "
                 f"{crn['n_docs']} documents; each draw alone gives {each} (described).")
    else:
        again = "".join(f" A second set of SIMEX noise draws gives {c} {signed_pct(r['change'])} "
                        f"{interval_pct(r['ci'])} (95%, described, not decided)." for c, r in second_set(readings).items())
    return (f"**The model's regime** (page 04d, `04d_model_regime`): SmolLM2 is rounded to 4 bits and its chunks "
            f"start with no start token. {leads[0].upper() + leads[1:]}.{again}")


def reading_numbers(readings: dict) -> dict:
    """What a page's numbers file records of the model-regime readings it states: per question whether it is
    complete, the decided R(16K) per corpus, the described statistics, the linear extrapolant, the second set of
    noise draws, the missing cells, and each common-random-number draw's change once that reading decides."""
    crn = crn_draws(readings)
    return {q: {k: v for k, v in r.items() if k in ("complete", "R", "described", "linear", "n_docs", "second_draws")}
            | {"missing": [cell_name(m) for m in r["missing"]]}
            | ({"each_draw": crn["each_draw"]} if crn and q == ROUNDING else {}) for q, r in readings.items()}


def second_draw_sentence(rows: list[dict]) -> str:
    """What a second set of SIMEX noise draws says (results.regime.second_draw_rows), described and not decided:
    per corpus the quadratic extrapolant's change of R(16K) from each set and from their average with 95% paired
    intervals; "" while its cells are not committed."""
    by = {}
    for r in rows:
        by.setdefault(r["corpus"], {})[r["draws"]] = f"{signed_pct(r['change'])} {interval_pct(r['ci'])}"
    parts = [f"{c}'s R(16K) extrapolated to unrounded weights changes by {v[SECOND_SET]} with the second set of "
             f"noise draws and by {v[AVERAGED]} with both draws averaged at each λ (the first set: "
             f"{v[FIRST_SET]}, here at 95%)" for c, v in by.items()]
    return ("Described, not decided (a check added after the rounding was read): " + "; ".join(parts) + "."
            if parts else "")


def described_sentence(reading: dict, statistics=("mean_gradient_share", "B_simple_tokens")) -> str:
    """The described (not decided) changes of a complete question's other statistics in one sentence, each corpus
    with its 95% paired interval; "" for an incomplete question."""
    if not reading["complete"]:
        return ""
    parts = [f"{STATISTIC_NAMES[k]} changes by " + ", ".join(f"{signed_pct(d['delta'])} {interval_pct(d['ci'])} ({c})"
                                                        for c, d in reading["described"][k].items() if d["ci"])
             for k in statistics]
    return f"Described, not decided: {WHAT_CHANGES[reading['question']]}, " + "; ".join(parts) + \
        " (95% paired intervals)."


def described_rows(reading: dict) -> list[dict]:
    """Rows of the described (not decided) changes: statistic, corpus, change, 95% interval; for rounding also
    the linear extrapolant's change of R (sensitivity) of the reading the described statistics come from (the
    first draw's, "first_draw", once the common-random-number reading decides)."""
    rows, linear = [], reading.get("first_draw", reading).get("linear", {})
    for k, per_corpus in reading.get("described", {}).items():
        for corpus, d in per_corpus.items():
            row = {"statistic": STATISTIC_NAMES[k], "corpus": corpus, "change": signed_pct(d["delta"]),
                   "95% interval": interval_pct(d["ci"]) if d["ci"] else "not defined"}
            if reading["question"] == ROUNDING:
                row["linear extrapolant"] = signed_pct(linear[corpus]) if k == "R" else ""
            rows.append(row)
    return rows


__all__ = ["AS_LOADED", "QUESTIONS", "question_lines", "question_lead", "result_box", "described_rows",
           "corpus_sentence", "cell_name", "signed_pct", "interval_pct", "headline_note", "limitation_line",
           "reading_numbers", "second_draw_sentence", "described_sentence"]


PART_COLUMNS = {"R": "R(16K)", "sigma2": "\u03c3\u00b2", "long_cov": "long-lag covariance",
                "block_noise": "16K block's noise"}


def other_start_token_lines(others: dict, tokens: dict | None = None) -> list[str]:
    """One line per start token measured beside <|endoftext|> (results.regime.other_start_tokens): R(16K) as loaded
    and with it, and its parts' ratios with 95% paired intervals; tokens: {regime: the token's text}."""
    tokens = tokens or {}
    out = []
    for (corpus, regime), p in others.items():
        nd = p["norms"]["with_token"]
        out.append(f"- {corpus} with {tokens.get(regime, regime)} ahead of every chunk (described): R(16K) "
                   f"{p['R']['base']:.2f} \u2192 {p['R']['other']:.2f}; \u03c3\u00b2 {ratio_text(p['sigma2'])}, long-lag "
                   f"covariance {ratio_text(p['long_cov'])}, a 16K block's noise {ratio_text(p['block_noise'])}; "
                   f"{nd['n_spiking']} chunks above 10\u00d7 the median, the five largest carry {nd['top_share']:.0%} "
                   f"of the squared norm")
    return out


def parts_rows(reading: dict) -> list[dict]:
    """Page 04d's table of the start-token question read through its parts (results.regime_parts
    .start_token_parts, on the reading's "parts"): per corpus and regime R(16K), sigma^2, S_cross, the long-lag
    covariance, the block noise and the norm distribution; then per corpus the ratio of each part with its 95%
    paired interval and which side of R moved. [] for a reading without parts."""
    rows = []
    for corpus, p in (reading.get("parts") or {}).items():
        for regime, side, norms in (("as loaded", "base", "as_loaded"), ("<|endoftext|> first", "other", "with_token")):
            nd = p["norms"][norms]
            rows.append({"corpus": corpus, "regime": regime, **{PART_COLUMNS[k]: p[k][side] for k in PART_COLUMNS},
                         "S_cross": p["S_cross"][side], "median |g|\u00b2": nd["median"], "largest |g|\u00b2": nd["largest"],
                         "chunks > 10\u00d7 median": nd["n_spiking"], "top-5 share": nd["top_share"]})
        rows.append({"corpus": corpus, "regime": f"ratio ({p['side']} moved)" if p["side"] != "neither resolved"
                     else "ratio (neither side resolved)",
                     **{PART_COLUMNS[k]: ratio_text(p[k]) for k in PART_COLUMNS}})
    return rows


def norm_rows(found: dict, regimes=(("as loaded", AS_LOADED), ("<|endoftext|> first", "bos0")),
              bins_per_decade: int = 10) -> list[dict]:
    """Every chunk's exact squared gradient norm of each start-token corpus, as loaded and with the start token,
    relative to its cell's median, counted in log bins (bins_per_decade per factor of 10; `times_median` is the
    bin's geometric centre): rows corpus, regime, times_median, chunks, largest (the largest chunk in the bin),
    for page 04d's chart. Every chunk is in exactly one row."""
    import numpy as np

    rows = []
    for corpus, _ in QUESTIONS[START_TOKEN].items():
        for name, regime in regimes:
            cell = found.get((corpus, regime))
            if cell is None:
                continue
            x = np.asarray(cell.sqnorm, dtype=float).ravel()
            x = x / np.median(x)
            b = np.floor(np.log10(x) * bins_per_decade).astype(int)
            for k in np.unique(b):
                rows.append({"corpus": corpus, "regime": name, "times_median": float(10 ** ((k + 0.5) / bins_per_decade)),
                             "chunks": int((b == k).sum()), "largest": float(x[b == k].max())})
    return rows


KIND_NAMES = {"causal": "causal", "causal_bos": "causal, <|endoftext|> at position 0",
              "standalone": "standalone chunks", "standalone_bos": "standalone, <|endoftext|> first"}


def training_lines(reading: dict) -> list[str]:
    """Pages 06 and 04d on the training regime (results.regime.read_training_regime): per corpus R(W) of the causal
    window with <|endoftext|> at position 0 against the window without it (the decision, Holm-level), read through
    its parts, with the window's standalone chunks beside; or which cells are still missing."""
    if not reading["complete"]:
        n = len(reading["present"]) + len(reading["missing"])
        missing = sorted({c for c, k in reading["missing"]})
        return [f"**The training regime** (causal windows with <|endoftext|> at position 0): {len(reading['present'])} "
                f"of {n} cells committed (missing: {', '.join(f'{c} {k}' for c, k in reading['missing'])}); nothing "
                f"is read until every cell is committed ({', '.join(missing)} to come: `make probe-regime-parts`)."]
    w = reading["window"] // 1024
    lines = [f"**R({w}K) of one-document causal windows with <|endoftext|> at position 0**, against the same windows "
             f"without it ({reading['n_docs']} documents, Holm over {len(reading['R'])} corpora, margin "
             f"\u00b1{REGIME_MARGIN:.0%}):"]
    for corpus, r in reading["R"].items():
        v, p = reading["values"][corpus], reading["parts"][corpus]
        sentence = corpus_sentence(corpus, r).replace("R(16K)", f"R({w}K)")
        beside = ", ".join(f"{KIND_NAMES[k]} {v[k]['R']:.2f}" for k in ("causal", "causal_bos", "standalone",
                                                                          "standalone_bos"))
        lines.append(f"- {sentence}; \u03c3\u00b2 {ratio_text(p['sigma2'])}, a {w}K block's noise "
                     f"{ratio_text(p['block_noise'])} ({p['side']} moved; R({w}K): {beside})"
                     .replace("(neither resolved moved;", "(neither side resolved;"))
    return lines


def training_rows(reading: dict) -> list[dict]:
    """Page 04d's and 06's table of the training regime (results.regime.read_training_regime), one row per corpus
    and kind: R(W) and the W-token block's noise with their 95% intervals, sigma^2, the long-lag covariance, and
    the cell's per-chunk squared norms (median, largest, chunks above 10x the median, the five largest's share).
    [] until every cell is committed."""
    if not reading.get("complete"):
        return []
    w = reading["window"] // 1024
    rows = []
    for corpus, by_kind in reading["values"].items():
        for kind, v in by_kind.items():
            nd = reading["norms"][corpus][kind]
            rows.append({"corpus": corpus, "regime": KIND_NAMES[kind], f"R({w}K)": v["R"],
                         "95% interval": f"[{v['ci'][0]:.2f}, {v['ci'][1]:.2f}]", "\u03c3\u00b2": v["sigma2"],
                         "long-lag covariance": v["long_cov"], f"{w}K block's noise": v["block_noise"],
                         "its 95% interval": f"[{v['block_ci'][0]:.3g}, {v['block_ci'][1]:.3g}]",
                         "median |g|\u00b2": nd["median"], "largest |g|\u00b2": nd["largest"],
                         "chunks > 10\u00d7 median": nd["n_spiking"], "top-5 share": nd["top_share"]})
    return rows


def training_spike_sentence(reading: dict, first_token) -> str:
    """Where the causal windows with <|endoftext|> at position 0 spike (results.regime.read_training_regime,
    described): how many windows of each corpus have a spiking chunk, which chunk of the window it is, the token it
    begins with (first_token(corpus, doc, chunk) -> its text), and R(W) on the windows with none. "" until every
    cell is committed."""
    if not reading.get("complete"):
        return ""
    rows = [(c, r) for c in reading["norms"] for r in reading["norms"][c]["causal_bos"]["spiking"]]
    n = reading["n_docs"]
    per = ", ".join(f"{c} {len({r['doc'] for r in reading['norms'][c]['causal_bos']['spiking']})}"
                    for c in reading["norms"])
    text = (f"With <|endoftext|> at position 0, {len({(c, r['doc']) for c, r in rows})} of the "
            f"{n * len(reading['norms'])} causal windows have a spiking chunk ({per} of {n})")
    if rows:
        where = sorted({r["chunk"] for _, r in rows})
        tokens: dict[str, int] = {}
        for c, r in rows:
            t = first_token(c, r["doc"], r["chunk"])
            tokens[t] = tokens.get(t, 0) + 1
        top = max(sorted(tokens), key=tokens.get)
        text += ("; every one is the window's first chunk, right after the token" if where == [0] else
                 f"; they are chunks {', '.join(map(str, where))} of their windows")
        text += f", and {tokens[top]} of the {len(rows)} spiking chunks begin with {top!r}"
    free = [f"{c} {signed_pct(v['change'])} ({len(v['docs'])} documents)"
            for c, v in reading["spike_free"].items() if v["change"] is not None]
    if free:
        w = reading["window"] // 1024
        text += (f". On the windows with no spiking chunk, R({w}K) with the token against without changes by "
                 + ", ".join(free) + " (described: no interval)")
    return text + "."


def spike_free_sentence(reading: dict) -> str:
    """The spike-free sensitivity of the start-token question (regime_parts.spike_free_change, described): per
    corpus the change of R(16K) on the documents with no spiking chunk, and how many documents that is."""
    parts = reading.get("parts") or {}
    said = [f"{c} {signed_pct(p['spike_free']['change'])} ({len(p['spike_free']['docs'])} documents)"
            for c, p in parts.items() if p["spike_free"]["change"] is not None]
    if not said:
        return ""
    return ("On the documents with no spiking chunk, R(16K) with <|endoftext|> first changes by "
            + ", ".join(said) + " (described: few documents, no interval).")


# --- one answer per corpus across every regime (docs/methods.md, Model regime, addendum 2026-12-07, section 6) ---

PACKED_R = G2_R     # R(16K) up to gate G2's bound for the control reads as packed short documents


def answer_facts(corpus: str, R16: dict, start: dict, training: dict, published: dict, chunk: int = 512) -> dict:
    """What corpus_answer needs of one corpus, from what page 04 reads: R16 {model label: {corpus: R(16K)}} (the
    first label is the model as loaded, the headline), the start-token reading (results.regime.read_question with
    its "parts"), the training-regime reading (results.regime.read_training_regime), published {corpus: [R(16K) of
    each published final checkpoint]}."""
    (label, first), *others = R16.items()
    facts = {"corpus": corpus, "model": label, "R": first.get(corpus), "chunk": chunk,
             "others": {lab: r[corpus] for lab, r in others if r.get(corpus) is not None},
             "published": sorted(published.get(corpus, []))}
    p = (start.get("parts") or {}).get(corpus)
    if start.get("complete") and p is not None:
        facts["start"] = {"R": p["R"]["other"], "base": p["R"]["base"], "side": p["side"],
                          "block": p["block_noise"]["ratio"], "decision": start["R"][corpus]["decision"],
                          "n_docs": start.get("n_docs")}
    if training.get("complete") and corpus in training["values"]:
        v = training["values"][corpus]
        p = (training.get("parts") or {}).get(corpus) or {}
        facts["training"] = {"window": training["window"], "causal": v["causal"]["R"], "bos": v["causal_bos"]["R"],
                             "standalone": v["standalone"]["R"], "decision": training["R"][corpus]["decision"],
                             "side": p.get("side"), "block": (p.get("block_noise") or {}).get("ratio")}
    elif any(c == corpus for c, _ in training.get("present", [])):
        facts["training"] = {"missing": sorted(k for c, k in training.get("missing", []) if c == corpus)}
    return facts


def corpus_answer(f: dict) -> str:
    """One plain sentence per corpus from every regime measured (answer_facts): what one 16K-token sequence of a
    single document is worth in independent chunks, the R(16K) behind it and beside it (other models, the
    published checkpoints), what a start token ahead of every chunk and a training-like causal window do, and what
    to do with a batch."""
    if f["R"] is None:                  # a span shorter than 16K (one's own corpus): no R(16K) to read
        return ""
    m = 16384 // f["chunk"]
    worth = m / f["R"]
    beside = [f"{lab} {r:.2f}" for lab, r in f["others"].items()]
    if f["published"]:
        beside.append(f"published {f['published'][0]:.1f}-{f['published'][-1]:.1f}")
    numbers = f"R(16K) {f['R']:.2f}, {f['model']}" + (f"; {', '.join(beside)}" if beside else "")
    packed = f["R"] <= PACKED_R
    if packed:
        text = (f"**{f['corpus']}** (short documents packed): a 16K-token sequence carries about the gradient noise "
                f"of {m} independent {f['chunk']}-token chunks ({numbers})")
    else:
        text = (f"**{f['corpus']}**: a 16K-token sequence of one document carries the gradient noise of about "
                f"{worth:.0f} independent {f['chunk']}-token chunks, not {m} ({numbers})")
    t = f.get("training")
    if t and "missing" not in t and t["decision"] == MOVES and t.get("side") == "denominator":
        w = t["window"] // 1024
        text += (f"; in {w}K causal windows, as training sees them, R({w}K) {t['causal']:.2f} without a start token, "
                 f"and <|endoftext|> at position 0 lowers it to {t['bos']:.2f} only through a few windows' first "
                 f"chunk's \u03c3\u00b2, while a {w}K block's noise rises \u00d7{t['block']:.1f} (chunks run alone "
                 f"{t['standalone']:.2f})")
    elif t and "missing" not in t:
        w = t["window"] // 1024
        text += (f"; in {w}K causal windows, as training sees them, R({w}K) {t['causal']:.2f} without a start token "
                 f"and {t['bos']:.2f} with <|endoftext|> at position 0 ({t['decision']}; chunks run alone "
                 f"{t['standalone']:.2f})")
    elif t:
        text += "; the causal windows with <|endoftext|> at position 0 are not all measured yet"
    s = f.get("start")
    docs = f" of its first {s['n_docs']} documents" if s and s.get("n_docs") else ""
    if s and s["side"] == "denominator" and s["decision"] == MOVES:
        text += (f"; with <|endoftext|> ahead of every chunk R(16K){docs} falls from {s['base']:.2f} to {s['R']:.2f} "
                 f"only through a few spiking chunks' \u03c3\u00b2, while a block's noise rises \u00d7{s['block']:.1f}")
    elif s:
        text += (f"; with <|endoftext|> ahead of every chunk R(16K){docs} goes from {s['base']:.2f} to {s['R']:.2f} "
                 f"({s['decision']})")
    return text + (". Packing its documents costs little." if packed else
                   f". Put more documents in each batch, or count such a sequence as {worth:.0f} chunks.")
