"""Page 05 in words: every sentence that states a conclusion about batch composition, each no stronger than its
interval (docgrad.presentation.evidence; docs/methods.md#evidence-rules), and the page's tables.

The numbers come from docgrad.results.batching: `measure` rows, the Holm family of `rule_tests` and `summary`. A
comparison is *resolved* only when Holm over the page's family resolves it (its interval at Holm's level excludes
0); rules compared on one cell use the same resampled documents (paired). The batch-composition study's setting
was not measured, so what is said about it is scoped to the measured range (`study_claim`).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import pandas as pd

from docgrad.presentation import evidence
from docgrad.presentation.evidence import NOT_MEASURED, NOT_RESOLVED, RESOLVED, Claim, interval, sig
from docgrad.results.batching import WEAK_POWER, RuleRatio

DESCRIBED = "described"          # a point decomposition, stated with no interval and no test
NAMES = {"identity": "Document order", "balanced": "Balanced", "coherent": "Coherent"}
# What each rule is on this page's chunk lists. The study's *identity* kept its packed rows (many short documents
# each) in their original order; applied to a cell listed document by document it batches consecutive chunks of one
# document, page 04's blocks, so it is named for that: only the packed WEB control comes near the study's rows.
RULE_LABELS = {"identity": "document order", "random": "random", "balanced": "balanced", "coherent": "coherent"}
IDENTITY_NOTE = ("document order: the study's identity rule applied to chunks listed document by document, so a "
                 "batch is consecutive chunks of one document (page 04's blocks), not the study's packed rows of many "
                 "short documents in their original order")
STUDY = "the batch-composition study"


def _at(rec: Mapping) -> str:
    return f"{interval(rec['ratio'], rec['ci'])} ({rec['corpus']}, b = {rec['b']})"


def _family(k: int) -> str:
    return f"Holm over {k} comparisons"


def comparison_claims(tests: Sequence[Mapping]) -> list[Claim]:
    """One evidence.difference claim per record of batching.rule_tests: resolved only when Holm resolves it (an
    interval that excludes 0 after an earlier Holm step failed is not resolved). Against random the difference is
    the ratio to random minus 1; against coherent, the difference of the two ratios (paired halves)."""
    k = len(tests)
    out = []
    for t in tests:
        what = f"{t['corpus']}, b = {t['b']}: gradient noise (ratio to random)"
        family = f"{_family(k)}, interval at {1 - t['level']:.2%}" + ("; paired halves" if t["against"] != "random"
                                                                    else "")
        rule, against = RULE_LABELS[t["rule"]], RULE_LABELS[t["against"]]
        c = evidence.difference(what, rule, against, t["diff"], t["ci"], family=family)
        if c.status == RESOLVED and not t["resolved"]:
            c = Claim(NOT_RESOLVED, f"{what} does not separate {rule} from {against} after Holm's "
                                    f"step-down (difference {interval(t['diff'], t['ci'])}).")
        out.append(c)
    return out


def rule_claim(rule: str, rec: Mapping | None, family: int) -> Claim:
    """One rule against random over the cells (summary()['rules'][rule]): in how many cells Holm resolves its
    gradient noise below or above random's, and its range (lowest and highest cell, with their 95% intervals).
    RESOLVED when some cell is resolved, NOT_RESOLVED when none is, NOT_MEASURED without a tested cell."""
    name = NAMES.get(rule, rule)
    if not rec or not rec.get("tested"):
        return Claim(NOT_MEASURED, f"{name}: not measured against random (no bootstrap).")
    n, below, above = rec["tested"], rec["below"], rec["above"]
    span = f"{_at(rec['lowest'])} to {_at(rec['highest'])}"
    if not below and not above:
        return Claim(NOT_RESOLVED, f"{name}: gradient noise not resolved from random's in any of {n} cells "
                                   f"({_family(family)}); {span}.")
    sides = ([f"below random's in {below}"] if below else []) + ([f"above random's in {above}"] if above else [])
    return Claim(RESOLVED, f"{name}: gradient noise {' and '.join(sides)} of {n} cells, not resolved in "
                           f"{n - below - above} ({_family(family)}); {span}.")


def identity_claim(rec: Mapping | None, vc: Mapping | None, family: int, control: str) -> Claim:
    """Identity against random (as rule_claim) and against coherent on the same resamples
    (summary()['identity_vs_coherent']), with its range in the control corpus. RESOLVED when Holm resolves some
    comparison, NOT_RESOLVED when none, NOT_MEASURED without a tested cell."""
    base = rule_claim("identity", rec, family)
    if base.status == NOT_MEASURED:
        return base
    vc = vc or {}
    if vc.get("tested"):
        parts = ([f"above coherent in {vc['above']}"] if vc["above"] else []) + (
            [f"below coherent in {vc['below']}"] if vc["below"] else [])
        versus = (f"{' and '.join(parts)} of {vc['tested']} cells (paired halves)" if parts else
                  f"not resolved from coherent in any of {vc['tested']} cells (paired halves)")
        status = RESOLVED if parts or base.status == RESOLVED else NOT_RESOLVED
    else:
        versus, status = "not compared with coherent", base.status
    lo, hi = rec.get("control_range", (None, None))
    ctrl = f"; in the {control} control (short texts packed together) {sig(lo)}–{sig(hi)}" if lo is not None else ""
    return Claim(status, base.text[:-1] + f"; {versus}{ctrl}.")


def lexical_claim(rules: Mapping) -> Claim:
    """Does the lexical ratio predict the gradient noise in size? The gate: the median power p (gradient ratio =
    lexical ratio^p over the cells) below WEAK_POWER for balanced and for coherent, decided with its interval
    (evidence.threshold_gate). RESOLVED ('does not predict') when both intervals lie below, NOT_RESOLVED ('predicts
    at least as the square root') when some interval lies at or above, else NOT_RESOLVED saying the interval
    straddles; NOT_MEASURED without both powers."""
    bal, coh = rules.get("balanced") or {}, rules.get("coherent") or {}
    if bal.get("power") is None or coh.get("power") is None or not bal.get("lexical_range"):
        return Claim(NOT_MEASURED, "Lexical against gradient noise: not measured (no unigram surprise).")
    gates = {k: evidence.threshold_gate(f"median power ({k})", r["power"], r.get("power_ci"), WEAK_POWER)
             for k, r in (("balanced", bal), ("coherent", coh))}
    head = (f"The gradient noise follows the lexical ratio with a median power p (gradient ratio = lexical ratio^p) of "
            f"{interval(bal['power'], bal.get('power_ci'))} (balanced) and "
            f"{interval(coh['power'], coh.get('power_ci'))} (coherent)")
    statuses = {g.status for g in gates.values()}
    if statuses == {evidence.PASSES}:
        return Claim(RESOLVED, head + f", both intervals below {sig(WEAK_POWER, 1)}: the lexical ratio does not "
                                      "predict the gradient noise in size.")
    if evidence.STRADDLES in statuses or any(g.status == evidence.FAILS and "straddles" in g.text
                                             for g in gates.values()):
        return Claim(NOT_RESOLVED, head + f": an interval straddles {sig(WEAK_POWER, 1)}, so whether the lexical "
                                          "ratio predicts the gradient noise in size is not resolved.")
    return Claim(NOT_RESOLVED, head + f": at least {sig(WEAK_POWER, 1)} for " + " and ".join(
        k for k, g in gates.items() if g.status == evidence.FAILS) + ", the gradient noise moves at least as the "
        "square root of the lexical change there.")


def document_pairs_claim(coherent: Mapping | None, control: str) -> Claim:
    """Where coherent's extra noise comes from at the largest batch size: the share of V - E V_random carried by
    pairs of chunks of one document (batching.excess_by_pairs), per corpus, the control named apart. A point
    decomposition (DESCRIBED); NOT_MEASURED without it."""
    excess = (coherent or {}).get("same_document_excess_at_largest_b") or {}
    b = (coherent or {}).get("highest", {}).get("b")
    if not excess:
        return Claim(NOT_MEASURED, "Where coherent's extra noise comes from: not measured.")
    studied = {k: v for k, v in excess.items() if k != control}
    text = ("Pairs of chunks of one document carry " + ", ".join(f"{sig(100 * v)}% ({k})" for k, v in studied.items())
            + f" of coherent's noise above random's at b = {b}")
    if control in excess:
        text += f", {sig(100 * excess[control])}% in {control}"
    if any(v > 1 for v in excess.values()):
        text += " (over 100%: its other pairs are quieter than random's)"
    if studied and all(v > 0.5 for v in studied.values()):
        text += ": sorting by surprise groups chunks of one document, and outside the control that is most of " \
                "coherent's cost"
    return Claim(DESCRIBED, text + ".")


def study_claim(scope: Mapping, lexical: Claim | None = None) -> Claim:
    """What the numbers say about the batch-composition study (summary()['study']): its setting against the measured
    range (batch size, lexical ratios: inside or outside, each said); what the numbers do say (only when the
    lexical gate `lexical` is RESOLVED: its lexical ratios overstate the change in gradient noise); the per-corpus
    extrapolation at each corpus's median power (range over the corpora, the control named as the closest
    analogue of packed rows); and what they do not say. Always NOT_MEASURED: the study's setting was not
    measured; a shorter text when no coherent power is there."""
    rules = scope.get("rules", {})
    coh, bal = rules.get("coherent"), rules.get("balanced")
    study = scope["study"]
    closest = scope["closest"]
    if not coh or not coh["corpora"]:
        return Claim(NOT_MEASURED, f"For {STUDY}: not measured here (no coherent ratio with a lexical ratio).")
    blo, bhi = scope["measured_b"]
    where = [f"b = {study['b']} rows {'inside' if scope['b_inside'] else 'outside'} b = {blo}–{bhi}"]
    for rule, rec in (("coherent", coh), ("balanced", bal)):
        if rec:
            lo, hi = rec["measured_lexical"]
            where.append(f"{rule} lexical ratio {sig(rec['study_lexical'])} "
                         f"{'inside' if rec['lexical_inside'] else 'outside'} {sig(lo)}–{sig(hi)}")
    text = f"For {STUDY}, whose setting lies beyond what was measured ({'; '.join(where)})"
    if lexical is not None and lexical.status == RESOLVED:
        text += ", these numbers do say that on these chunks a lexical ratio overstates the change in gradient noise " \
                "(powers above)"
    per = coh["corpora"]
    ends = sorted(per, key=lambda k: per[k]["implied"])
    text += (f". Extrapolated at each corpus's median power, its coherent batches would carry "
             f"{interval(per[ends[0]]['implied'], per[ends[0]]['implied_ci'])} ({ends[0]}) to "
             f"{interval(per[ends[-1]]['implied'], per[ends[-1]]['implied_ci'])} ({ends[-1]}) times random's noise")
    if closest in per:
        text += f", {closest} (short texts packed like its 2,048-token rows) being the closest analogue"
    if bal and bal["corpora"]:
        vals = [v["implied"] for v in bal["corpora"].values()]
        text += f"; balanced {sig(min(vals))}–{sig(max(vals))}"
    return Claim(NOT_MEASURED, text + ". They do not say whether that noise changes a trained model's loss, nor "
                                      "why the study's one training seed showed the loss differences it did.")


def interval_note(resamples: int, documents: int | None = None) -> str:
    """How the intervals were made: the delete-half jackknife (batching.jackknife_se) over `resamples` random
    halves of each cell's `documents`, a normal interval on the log scale."""
    if not resamples:
        return "No intervals (resamples = 0): nothing is resolved."
    half = f" ({documents - documents // 2} of {documents})" if documents else ""
    return (f"Brackets: 95% intervals from the delete-half jackknife: the rule recomputed on {resamples} random halves "
            f"of each cell's documents{half}, no document twice, and the estimate × exp(±1.96 standard errors) "
            "(Shao & Wu 1989).")


def batching_lead(summary: Mapping) -> str:
    """Page 05's opening sentence: what to do with one's chunks before batching. From document order (the rule
    'identity': consecutive chunks of one document): when Holm resolves it above random in some cell, shuffle
    across documents, with its highest cell outside the control and its interval; when in none, that it is not
    resolved; without it, what sorting by surprise does (coherent's highest, balanced's lowest, with intervals)."""
    rules = summary["rules"]
    idn, coh, bal = rules.get("identity"), rules.get("coherent"), rules.get("balanced")
    if idn and idn.get("tested") and idn.get("highest_studied"):
        top = _at(idn["highest_studied"])
        if idn["above"]:
            return (f"Shuffle chunks across documents: consecutive chunks of one document carry up to "
                    f"{top} times random batches' gradient noise, above random in {idn['above']} of "
                    f"{idn['tested']} cells (Holm).")
        return (f"Whether batching consecutive chunks of one document adds gradient noise is not resolved: no cell of "
                f"{idn['tested']} separates it from random batches (Holm); up to {top} times random's.")
    if coh and coh.get("tested") and bal and bal.get("tested"):
        return (f"Sorting chunks by unigram surprise before batching: coherent batches carry up to "
                f"{_at(coh['highest'])} times random batches', balanced ones down to {_at(bal['lowest'])}.")
    return "No batching rule was measured, so nothing is said about composing batches."


def result_box(summary: Mapping, models: Sequence[str], documents: int, sizes: Sequence[int]) -> str:
    """The page's opening box (evidence.result_box): batching_lead first, then balanced's and coherent's
    gradient-noise ranges with the intervals of their ends and what Holm resolves, beside the lexical ranges; what
    was measured; the caveat (the study's setting lies outside the measured range)."""
    rules = summary["rules"]
    bal, coh = rules.get("balanced"), rules.get("coherent")
    answer = [batching_lead(summary)]
    if bal and coh and bal.get("lexical_range") and coh.get("lexical_range"):
        answer.append(
            f"Sorting by surprise moves gradient noise far less than its batch variance "
            f"(×{sig(coh['lexical_range'][0])}–{sig(coh['lexical_range'][1])} coherent, "
            f"×{sig(bal['lexical_range'][0])}–{sig(bal['lexical_range'][1])} balanced): coherent up to "
            f"{_at(coh['highest'])}, higher in {coh['above']} of {coh['tested']}; balanced down to "
            f"{_at(bal['lowest'])}, lower in {bal['below']} of {bal['tested']}.")
    names = ", ".join(m.split("/")[-1] for m in models)
    measured = (f"{names} (4-bit), {documents} documents per corpus, batches of b = {min(sizes)}–{max(sizes)} "
                f"chunks of 512 tokens; Holm over {summary['family']} comparisons.")
    caveat = ("the batch-composition study's 64-row batches and surprise-variance ratio 58.5 lie beyond this "
              "range; fixed-weight noise says nothing of training loss.")
    return evidence.result_box(answer, measured, caveat)


def inputs_lines(results_dir: str, models: Sequence[str], sizes: Sequence[int], window: int, score: str, seed: int,
                 resamples: int, measured: Sequence[Mapping], corpora: Sequence[str], refused: Mapping[str, str],
                 notes: Mapping[str, str]) -> list[str]:
    """The page's inputs as Markdown bullets: what was read, which cells were measured, what is missing and why."""
    window_text = "the whole cell" if window == 0 else f"{window} chunks"
    score_text = "mean unigram surprise" if score == "unigram" else "the model loss"
    present = {c["corpus"] for c in measured}
    lines = [f"- `{results_dir}`, {', '.join(m.split('/')[-1] for m in models)}: "
             f"{', '.join(c['corpus'] for c in measured) or 'no cell'}; b = {', '.join(map(str, sizes))} chunks; "
             f"window {window_text}; sorted by {score_text}; seed {seed}; {resamples} random halves of the documents"]
    missing = [k for k in corpora if k not in present]
    if missing:
        lines.append(f"- corpora without a cell: {', '.join(missing)}")
    lines += [f"- refused: {name}: {why}" for name, why in refused.items()]
    lines += [f"- {corpus}: unigram surprise {note}" for corpus, note in notes.items()]
    if any(c.get("synthetic") for c in measured):
        lines.append("- **these result files are SYNTHETIC** (docgrad.results.synthetic): the numbers illustrate the "
                     "pipeline")
    return lines


def refused_line(refused: Mapping[str, str], measured: int) -> str:
    """Why a cell of several result files is refused, and which were: a batch mixing documents of two files needs
    Gram entries that were never computed, so such a cell is refused, not approximated; names the refused cells
    (their reasons are in the inputs list) or says that none of the `measured` cells was."""
    head = ("**One result file per cell.** A batch mixing documents of two files needs Gram entries that were never "
            "computed, so such a cell is refused, not approximated: ")
    if refused:
        return head + f"refused here: {', '.join(refused)} (reasons in the inputs above)."
    return head + f"none was refused here (each of the {measured} cells measured is one file)."


def reading(summary: Mapping) -> list[Claim]:
    """The page's reading, in order: balanced and coherent against random, identity against random and coherent,
    lexical against gradient noise, where coherent's cost comes from, and the study scoped to the measured range
    (only when the rules sort by unigram surprise, the study's score)."""
    rules, k = summary["rules"], summary["family"]
    out = [rule_claim(r, rules.get(r), k) for r in ("balanced", "coherent")]
    out.append(identity_claim(rules.get("identity"), summary.get("identity_vs_coherent"), k, summary["control"]))
    lexical = lexical_claim(rules)
    out += [lexical, document_pairs_claim(rules.get("coherent"), summary["control"])]
    if summary.get("score") == "unigram":
        out.append(study_claim(summary["study"], lexical))
    return out


def _resolved_marks(tests: Sequence[Mapping]) -> dict:
    return {(t["model"], t["corpus"], t["b"], t["rule"]): t["resolved"] for t in tests if t["against"] == "random"}


def table(rows: Sequence[RuleRatio], tests: Sequence[Mapping] = (), lexical_note: Mapping[str, str] | None = None):
    """Ratio to random per (corpus, b) and rule (named by RULE_LABELS), 'estimate [95% interval]' at 3 significant
    figures, for the
    gradient noise (* where Holm resolves it from random's) and the lexical statistic; the lexical columns only where
    some cell has one; lexical_note maps a corpus without surprise to the text shown instead."""
    lexical_note = lexical_note or {}
    marks = _resolved_marks(tests)
    models = {r.model for r in rows}
    has_lex = any(r.lexical is not None for r in rows)
    recs: dict = {}
    for r in rows:
        if r.rule == "random":
            continue
        key = ((r.model.split("/")[-1],) if len(models) > 1 else ()) + (r.corpus, r.b)
        rec = recs.setdefault(key, {})
        star = "*" if marks.get((r.model, r.corpus, r.b, r.rule)) else ""
        rec[(r.rule, "gradient noise")] = interval(r.gradient, r.gradient_ci) + star
        if has_lex:
            rec[(r.rule, "lexical")] = (interval(r.lexical, r.lexical_ci) if r.lexical is not None
                                        else lexical_note.get(r.corpus, "not available"))
    names = (["model"] if len(models) > 1 else []) + ["corpus", "b"]
    cols = [(rule, m) for rule in ("identity", "balanced", "coherent") for m in ("gradient noise", "lexical")]
    df = pd.DataFrame.from_dict(recs, orient="index")
    df = df.reindex(columns=[c for c in cols if c in df.columns]).fillna("not formed (no unigram surprise)")
    df.columns = [(RULE_LABELS[rule], m) for rule, m in df.columns]
    df.index = pd.MultiIndex.from_tuples(df.index, names=names)
    df.columns = pd.MultiIndex.from_tuples(df.columns, names=["rule", "ratio to random"])
    return df


def identity_table(comparisons: Sequence[Mapping]):
    """Document order's ratio (the rule 'identity') beside notebook 04's R(bC) (batching.compare_identity), at 3
    significant figures: the two, their relative difference and R(bC) recomputed from that ratio."""
    cols = ["corpus", "b", "document order", "R(bC)", "document order / R(bC) − 1", "R(bC) from document order"]
    return pd.DataFrame([dict(zip(cols, (c["corpus"], c["b"], sig(c["identity"]), sig(c["R_bC"]),
                                         f"{sig(100 * c['rel_diff'])}%", sig(c["R_from_identity"]))))
                         for c in comparisons], columns=cols)


def frame(rows: list[RuleRatio]):
    """One row per (cell, b, rule): ratios to random with their intervals (lo/hi), for tables and charts."""
    recs = []
    for r in rows:
        draws = r.gradient_draws or (None, None)
        recs.append({"model": r.model, "revision": r.revision, "corpus": r.corpus, "b": r.b, "rule": r.rule,
                     "gradient": r.gradient, "gradient_lo": r.gradient_ci[0], "gradient_hi": r.gradient_ci[1],
                     "lexical": r.lexical, "lexical_lo": r.lexical_ci[0], "lexical_hi": r.lexical_ci[1],
                     "loss": r.loss, "draws_lo": draws[0], "draws_hi": draws[1]})
    return pd.DataFrame(recs, columns=["model", "revision", "corpus", "b", "rule", "gradient", "gradient_lo",
                                       "gradient_hi", "lexical", "lexical_lo", "lexical_hi", "loss", "draws_lo",
                                       "draws_hi"]).astype({"gradient_lo": float, "gradient_hi": float,
                                                            "lexical": float, "lexical_lo": float,
                                                            "lexical_hi": float, "draws_lo": float,
                                                            "draws_hi": float})
