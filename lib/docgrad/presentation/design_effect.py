"""The sentences of the design-effect pages (04 headline, 04b drivers, 04c beside the published study), each
built from computed numbers by the rules of docgrad.presentation.evidence (docs/methods.md#evidence-rules). The
pages print what these return; they do not branch on numbers.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from docgrad.core.constants import CONTROL, G2_R, G2_RHO, HEADLINE_WINDOW
from docgrad.core.bootstrap import percentile_ci
from docgrad.core.decomposition import difference_interval, same_source_pair_fraction
from docgrad.core.orderings import DIFFERS, NOT_COMPARED, SAME_DIRECTION
from docgrad.presentation import evidence as ev
from docgrad.presentation.evidence import Claim, interval, sig
from docgrad.results.cell_decomposition import CellDecomposition
from docgrad.results.stats import Analysis

LONG_DOCUMENT_CORPORA = ("BOOKS", "CODE", "PAPERS")
# The published order is of point values never tested against each other, on other corpora (repository dumps,
# arXiv) and other models (Pythia/OLMo base checkpoints): ours can run in its direction or differ from it, not
# "agree with" or "contradict" it (docs/methods.md#the-48-document-cells-what-is-read-and-how-it-is-decided).
AGAINST_PUBLISHED = {SAME_DIRECTION: "same direction in every resolved pair",
                     DIFFERS: "differs in a resolved pair (other corpora and models)",
                     NOT_COMPARED: "cannot be compared (no pair resolved)"}
FEW_DISTINCT = 50        # a bootstrap whose draws take fewer distinct values than this is coarse


CLUSTERED_PAIRS = 0.05   # a corpus is clustered by source when more than 5% of its cross-document pairs share one


def clustered(d: CellDecomposition | None) -> bool:
    """Whether a cell's documents cluster by source (more than CLUSTERED_PAIRS of its cross-document pairs are
    same-source pairs): its headline then carries the source-clustered interval."""
    return d is not None and same_source_pair_fraction(d.sources) > CLUSTERED_PAIRS


def _source_note(d: CellDecomposition | None) -> str:
    """A clustered corpus's note in the headline: its source-clustered interval, unless the source bootstrap takes
    fewer than FEW_DISTINCT distinct values (3 sources: at most 10): a percentile over so few clusters is not a 95%
    interval, so the note points to R by source instead."""
    ci = (d.intervals.get("source", {}).get("R") if d else None) or [None, None]
    if not clustered(d) or ci[0] is None:
        return ""
    if d.support.get("source", {}).get("distinct", FEW_DISTINCT) < FEW_DISTINCT:
        return f" ({d.n_sources} sources: R by source below, no interval over {d.n_sources} clusters)"
    return f" ({d.n_sources} sources resampled: [{sig(ci[0])}, {sig(ci[1])}])"


def result_box(reports: Mapping[str, Analysis], decomps: Mapping[str, Mapping[str, CellDecomposition]],
               window_chunks: int = 32, incomplete: Mapping[str, Mapping[str, tuple]] | None = None,
               models_note: str = "two small 4-bit-quantised models") -> str:
    """Page 04's answer: R(16K) per corpus and model with 95% intervals (the source-clustered one beside it where
    documents share sources), what a block is worth, what was measured and the caveat that matters.
    incomplete: {model: {corpus: (measured, held)}} (Study.incomplete): those cells are marked provisional.
    A corpus whose span is shorter than 16K (one's own) is read at its span, R(W) named with its window W, and
    no block worth is stated across windows; models_note says what was measured."""
    per_model, worth, windows, chunks = [], [], set(), set()
    for label, rep in reports.items():
        cells = [c for c in rep.cells if c.corpus != CONTROL]
        ctrl = rep.cell(CONTROL)

        def read(c):
            W = headline_window(c.all)
            windows.add(W)
            chunks.add(c.chunk)
            name = "" if W == HEADLINE_WINDOW else f" R({window_name(W)})"
            return f"{name} {interval(c.all.R.get(W), c.all.interval('R', W))}"

        parts = [f"{c.corpus}{read(c)}{_source_note(decomps.get(label, {}).get(c.corpus))}" for c in cells]
        per_model.append(f"{label}: " + ", ".join(parts) + (f"; control{read(ctrl)}" if ctrl else "") + ".")
        worth += [window_chunks / c.all.R_16K for c in cells if c.all.R_16K and c.all.R_16K > 0]
    if windows <= {HEADLINE_WINDOW}:
        answer = ["R(16K), a 16K-token block's gradient noise over 32 independent chunks':", *per_model]
    else:
        answer = ["R(W), a W-token block's gradient noise over W/C independent chunks' (W the span where it is "
                  "shorter than 16K):", *per_model]
    if worth and windows <= {HEADLINE_WINDOW}:
        answer.append(f"A block is worth about {min(worth):.0f}-{max(worth):.0f} independent chunks.")
    docs = ev.documents_per_corpus({lab: [c.n_docs for c in rep.cells] for lab, rep in reports.items()}, incomplete)
    chunk = "/".join(str(c) for c in sorted(chunks)) or "512"
    measured = f"{models_note}; {docs}; {chunk}-token chunks run alone; 95% document intervals."
    caveat = ("no chunk saw the text before it (page 06 adds that context); documents sharing a source "
              "are fewer independent draws than they look.")
    return ev.result_box(answer, measured, caveat)


def source_lines(decomps: Mapping[str, CellDecomposition]) -> list[str]:
    """What a corpus whose documents cluster by source is, and R(16K) of each source alone: 'BOOKS is 31
    documents from 3 sources: King James Bible (24 documents) R(16K) 3.10 [2.5, 3.7]; ...; Herman Melville (1
    document)'. Intervals resample documents within the source (core.decomposition.by_source); a source of one
    document has no R of its own. Corpora that do not cluster by source get no line."""
    out = []
    for k, d in decomps.items():
        if not clustered(d):
            continue
        rows = sorted((r for r in d.by_source if r["source"] != "all"), key=lambda r: (-r["n_docs"], r["source"]))
        parts = [f"{r['source']} ({r['n_docs']} document{'s' if r['n_docs'] > 1 else ''})"
                 + (f" R(16K) {interval(r['R'], r.get('R_ci'))}" if r["n_docs"] > 1 else "") for r in rows]
        out.append(f"{k} is {len(d.doc_ids)} documents from {d.n_sources} sources: " + "; ".join(parts) + ".")
    return out


def drivers_box(label: str, decomps: Mapping[str, CellDecomposition], shares: Mapping[str, float],
                without_norms: Mapping[str, dict], published: Sequence[float] = ()) -> str:
    """Page 04b's answer for one model: what R(16K) is made of where sources are shared (R without the source
    term), how far the most influential document moves R, and the mean-gradient share with and without the norm
    weights."""
    answer = []
    for k, d in decomps.items():
        if clustered(d):
            answer.append(f"{k}'s R(16K) {sig(d.R)} holds a source term: without it "
                          f"{interval(d.R_within, d.intervals.get('doc', {}).get('R_within'))}.")
    moves = {k: abs(d.loo["dR"][most_influential(d)]) / d.R for k, d in decomps.items() if d.R}
    if moves:
        k = max(moves, key=moves.get)
        answer.append(f"Leaving out one document moves R by at most {moves[k]:.0%} ({k}).")
    long = [shares[k] for k in shares if k in LONG_DOCUMENT_CORPORA]
    wo = [without_norms[k]["mean_gradient_share"] for k in without_norms if k in LONG_DOCUMENT_CORPORA]
    if long:
        answer.append(f"The mean gradient is {sig(min(long))}-{sig(max(long))} of a chunk gradient's squared norm"
                      + (f" ({sig(min(wo))}-{sig(max(wo))} without the norm weights)" if wo else "")
                      + (f", against {sig(min(published), 2)}-{sig(max(published), 2)} published" if published else "")
                      + ": B_simple is small here.")
    counts = ev.documents_per_corpus({label: [len(d.doc_ids) for d in decomps.values()]})
    measured = f"{counts}; leave-one-out, document and source bootstraps."
    caveat = ("what makes the mean gradient large (rounding, size, tuning, the start token) is not separated.")
    return ev.result_box(answer, measured, caveat)


def gate_claims(reports: Mapping[str, Analysis]) -> list[Claim]:
    """G2 of each model (the control has no long-range correlation), with the intervals of both of its numbers:
    a threshold the interval straddles is said to be passed on the point estimate only."""
    out = []
    for label, rep in reports.items():
        c = rep.cell(CONTROL)
        if c is None:
            out.append(Claim(ev.NOT_MEASURED, f"{label}: G2 not evaluated (no {CONTROL} control cell)."))
            continue
        for what, point, ci, t in (("R(16K)", c.all.R_16K, c.all.R_16K_ci, G2_R),
                                   ("ρ_long", c.all.rho_long, c.all.interval("rho_long"), G2_RHO)):
            cl = ev.threshold_gate(f"{label}: the control's {what}", point, ci, t)
            out.append(cl)
    return out


def decomposition_lines(decomps: Mapping[str, CellDecomposition]) -> list[str]:
    """Per corpus: where documents share sources, R about the cross-source mean split into source term,
    document term and short range, and R without the source term (intervals: document bootstrap); else the
    split of R itself."""
    out = []
    for k, d in decomps.items():
        iv = d.intervals.get("doc", {})
        t = d.terms
        src, doc = (d.m - 1) * t["rho_src"], (d.m - 1) * t["rho_doc"]
        if d.shared_sources:
            shared = ", ".join(f"{s} {n}" for s, n in d.shared_sources.items())
            out.append(f"**{k}**: documents from shared sources ({shared}). About the cross-source mean R is "
                       f"{interval(d.R_x, iv.get('R_x'))}: source term {sig(src)}, document term {sig(doc)}, "
                       f"short range {sig(t['short_range'])}. Without the source term R is "
                       f"{interval(d.R_within, iv.get('R_within'))}; the study's pooled estimate is {sig(d.R)}"
                       + (", between the two." if min(d.R_within, d.R_x) <= d.R <= max(d.R_within, d.R_x) else "."))
        else:
            out.append(f"**{k}**: one document per source: R = {sig(d.R)} = 1 + document term {sig(doc)} + short "
                       f"range {sig(t['short_range'])}.")
    return out


def most_influential(d: CellDecomposition) -> int:
    """Position (cell order) of the document whose removal changes R(16K) most (largest |dR|)."""
    return int(np.argmax(np.abs(np.asarray(d.loo["dR"], dtype=float))))


def robustness_lines(decomps: Mapping[str, CellDecomposition], titles: Mapping[str, Mapping[int, str]]) -> list[str]:
    """Per corpus: the most influential document (leave one out) and its effect, the jackknife standard error,
    and the document-bootstrap interval beside the source-clustered one (with how few distinct values the
    latter takes when sources are few). titles: {corpus: {document id: title}}."""
    out = []
    for k, d in decomps.items():
        i = most_influential(d)
        title = titles.get(k, {}).get(int(d.doc_ids[i]), f"document {d.doc_ids[i]}")
        line = (f"**{k}**: R(16K) {sig(d.R)}, jackknife standard error {sig(d.jackknife_se_R, 2)}; without "
                f"{title} (the most influential document) it is "
                f"{sig(d.loo['R'][i])} ({d.loo['dR'][i] / d.R:+.0%}).")
        doc, src = d.intervals.get("doc", {}).get("R"), d.intervals.get("source", {}).get("R")
        if doc and src and src[0] is not None and d.n_sources < len(d.doc_ids):
            sup = d.support.get("source", {})
            line += (f" Documents resampled: [{sig(doc[0])}, {sig(doc[1])}]; its {d.n_sources} sources resampled: "
                     f"[{sig(src[0])}, {sig(src[1])}]")
            if clustered(d):
                few = sup.get("distinct") is not None and sup["distinct"] < FEW_DISTINCT
                line += ((f", from only {sup['distinct']} distinct values" if few else "")
                         + ": R describes this mix of sources, not the kind of text")
            line += "."
        out.append(line)
    return out


def mean_gradient_lines(shares: Mapping[str, Mapping[str, float]],
                        without_norms: Mapping[str, Mapping[str, dict]],
                        published: Mapping[str, float], R: Mapping[str, Mapping[str, float]]) -> list[str]:
    """The mean-gradient share S_cross/(S_cross + σ²) per model (range over the long-document corpora), the same
    without the norm weights (the 'other' group) and the R(16K) that leaves, against the published range; and what
    is not separated (rounding, size, instruction tuning, the start token)."""
    def rng(v):
        v = [x for x in v if x is not None and np.isfinite(x)]
        return f"{sig(min(v))} to {sig(max(v))}" if v else "–"

    out = []
    for label, sh in shares.items():
        long = [k for k in sh if k in LONG_DOCUMENT_CORPORA]
        wo = without_norms.get(label, {})
        line = f"**{label}**: mean-gradient share {rng([sh[k] for k in long])} on BOOKS, CODE and PAPERS"
        if wo:
            line += (f"; without the norm weights {rng([wo[k]['mean_gradient_share'] for k in long if k in wo])}, "
                     "with R(16K) moving by at most "
                     f"{sig(max(abs(wo[k]['R'] - R[label][k]) for k in long if k in wo and k in R[label]), 2)}")
        out.append(line + ".")
    if published:
        out.append(f"**Published** (Pythia-1.4B, OLMo-2-1B, final checkpoints, same corpora): "
                   f"{rng(list(published.values()))}.")
    out.append("**Not separated here**: 4-bit rounding, model size, instruction tuning (SmolLM2) and the start "
               "token (SmolLM2's chunks start with none, Gemma's with `<bos>`; page 02 finds that one token ahead "
               "of a chunk can change its squared gradient norm up to 29.7-fold). B_simple here describes these "
               "models, not a batch size for training.")
    return out


def _scoped(claim: Claim, pair: Mapping, decomps: Mapping[str, CellDecomposition]) -> Claim:
    """A resolved pair that involves a corpus clustered by source holds for its documents, not for its kind of
    text (docs/methods.md: with a few sources the source-clustered interval cannot resolve it)."""
    few = [decomps[k] for k in (pair["a"], pair["b"]) if k in decomps and clustered(decomps[k])]
    if claim.status != ev.RESOLVED or not few:
        return claim
    d = few[0]
    return Claim(claim.status, claim.text[:-1] + f"; this holds for these {len(d.doc_ids)} {d.corpus} documents "
                 f"of {d.n_sources} sources, not for {d.corpus} text in general.")


def ordering_claims(pairs: Sequence[dict], decomps: Mapping[str, CellDecomposition],
                    leave_one_out: Mapping[str, dict] | None = None,
                    incomplete: Mapping[str, Sequence[int]] | None = None) -> list[Claim]:
    """The ordering of one model's corpora, pair by pair under Holm over `pairs` (the family;
    docgrad.core.orderings.resolve_pairs; a resolved pair with a corpus clustered by source is scoped to its
    documents),
    then two follow-ups outside the Holm family, each at 95%: a resolved pair's difference without the leading
    corpus's most influential document (`leave_one_out`: {corpus: {'title', 'R', 'draws'}}), and BOOKS against
    CODE with the source term removed. With `incomplete` cells ({corpus: (measured, held)}) every claim is
    provisional (evidence.provisional): the rule reads complete cells only."""
    out = [_scoped(c, p, decomps) for c, p in zip(ev.pair_claims("R(16K)", pairs), pairs)]
    for p in pairs:
        if not p["resolved"] or CONTROL in (p["a"], p["b"]):
            continue
        hi, lo = (p["a"], p["b"]) if p["diff"] > 0 else (p["b"], p["a"])
        loo = (leave_one_out or {}).get(hi)
        if loo is None or lo not in decomps:
            continue
        iv = difference_interval(loo["draws"], decomps[lo].draws["doc"]["R"])
        c = ev.difference(f"Without {loo['title']}, R(16K)", hi, lo, loo["R"] - decomps[lo].R, iv["ci"],
                          family="a follow-up outside the Holm family, 95%")
        out.append(c)
    if {"BOOKS", "CODE"} <= set(decomps) and "doc" in decomps["BOOKS"].draws and decomps["BOOKS"].shared_sources:
        b, c = decomps["BOOKS"], decomps["CODE"]
        iv = difference_interval(b.draws["doc"]["R_within"], c.draws["doc"]["R_within"])
        out.append(ev.difference("Without the source term, R(16K)", "BOOKS", "CODE", b.R_within - c.R_within,
                                 iv["ci"], family="outside the Holm family, 95%"))
    return [ev.provisional(c, incomplete) for c in out] if incomplete else out


def code_rho_claim(ours: float, ours_ci, published_cells) -> Claim:
    """Our CODE ρ_long against the published final checkpoints' (with their intervals)."""
    pub = published_cells[(published_cells.corpus == "CODE") & (published_cells.frac_training == 1.0)]
    values = {r.model_label: (float(r.rho_long), [float(r.rho_long_lo), float(r.rho_long_hi)])
              for r in pub.itertuples()}
    return ev.against_published("CODE's ρ_long", ours, ours_ci, values)


def comparison_box(decisions: Mapping[str, dict], model_claims: Sequence[Claim], rho_claim: Claim,
                   published_order: Sequence[str], n_docs: Mapping[str, Mapping[str, int]] | None = None,
                   replicated: Mapping[str, Mapping[str, str]] | None = None, replication_docs: str = "") -> str:
    """Page 04c's answer: per model, whether the ordering of the long-document corpora is established under Holm
    and how it stands against the published order (docgrad.core.orderings.ordering_decision; a model whose cells
    lack documents is 'not read', with the counts); the model-vs-model differences that are resolved on the
    shared documents; our CODE ρ_long against the published. n_docs: {model: {corpus: documents}}. replicated:
    {model: replication_verdicts} of the pooled pairs on the documents `replication_docs` measured after the rule."""
    answer = []
    for label, dec in decisions.items():
        if dec.get("incomplete"):
            answer.append(f"{label}: the ordering is not read until every cell holds its documents "
                          f"({ev.measured_of_held(dec['incomplete'])} "
                          "measured so far).")
            continue
        res = f" (resolved: {', '.join(dec['resolved'])})" if dec["resolved"] else ""
        answer.append(f"{label}: the ordering of {', '.join(sorted(dec['point_order']))} is {dec['status']}"
                      f"{res}; against the published {' > '.join(published_order)}: "
                      f"{AGAINST_PUBLISHED[dec.get('against_published', NOT_COMPARED)]}.")
        verdicts = {k: v for k, v in (replicated or {}).get(label, {}).items() if v != "not resolved (pooled)"}
        if verdicts:
            answer.append(f"Replication ({label}, documents {replication_docs}, measured after the rule): "
                          + ", ".join(f"{k} {v}" for k, v in verdicts.items()) + ".")
    resolved = [c for c in model_claims if c.status == ev.RESOLVED]
    answer.append(f"Model against model (same documents): {len(resolved)} of {len(model_claims)} corpora "
                  "differ after Holm" + (" (" + "; ".join(c.text.split(":")[0] for c in resolved) + ")."
                                         if resolved else "."))
    answer.append(f"CODE's ρ_long against the published: {rho_claim.status}.")
    counts = ev.documents_per_corpus({lab: list(per.values()) for lab, per in (n_docs or {}).items()})
    measured = f"R(16K), {counts}; Holm over each model's pairs; paired draws across models."
    caveat = "the published models are 5-10 times larger, unquantised, and read other documents."
    return ev.result_box(answer, measured, caveat)


def like_for_like_lines(lfl, label: str, control_R: float, control_ci) -> list[str]:
    """Why R_rel is not comparable across the two studies: our control's R(16K) against the published
    controls', the factor that puts on R_rel, and the noise-variance ratios σ²/σ²_control to use instead.
    lfl: tables.like_for_like_frame (source, corpus, R_16K, control_R_16K, R_rel, sigma2_ratio)."""
    pub = lfl[lfl.source != label].drop_duplicates("source").set_index("source")["control_R_16K"]
    if not len(pub):
        return [f"Our control's R(16K) is {interval(control_R, control_ci)}; no published control to compare."]
    lo, hi = float(pub.min()), float(pub.max())
    sig2 = lfl[lfl.corpus != CONTROL].pivot(index="corpus", columns="source", values="sigma2_ratio")
    return [f"Our control's R(16K) is {interval(control_R, control_ci)}; the published controls' "
            + ", ".join(f"{sig(v)} ({s.replace(' (published)', '')})" for s, v in pub.items())
            + f". A corpus with the same R gets an R_rel {sig(lo / control_R)}-{sig(hi / control_R)} times larger "
              "here: compare R, not R_rel.",
            "For absolute noise, the noise-variance ratios σ²/σ²_control: "
            + "; ".join(f"{s.replace(' (published)', '')}: " + ", ".join(f"{k} {sig(v)}" for k, v in sig2[s].items()
                                                                         if np.isfinite(v))
                        for s in sig2.columns) + "."]


def through_training_lines(orders: Mapping[str, str]) -> list[str]:
    """The published orderings by R(16K) at each checkpoint ({'<model> <fraction>': 'A > B > ...'}), and, per
    model with several checkpoints, whether the corpora measured at all of them keep one ordering."""
    out = [f"{k}: {o}" for k, o in orders.items()]
    by_model: dict[str, list[list[str]]] = {}
    for k, o in orders.items():
        by_model.setdefault(k.rsplit(" ", 1)[0], []).append(o.split(" > "))
    for m, seqs in by_model.items():
        if len(seqs) < 2:
            continue
        common = set.intersection(*map(set, seqs))
        kept = {tuple(c for c in seq if c in common) for seq in seqs}
        names = ", ".join(sorted(common))
        out.append(f"{m}: {names} (measured at all {len(seqs)} checkpoints) keep one ordering." if len(kept) == 1
                   else f"{m}: the ordering of {names} changes across its {len(seqs)} checkpoints.")
    return out


def headline_window(e) -> int | None:
    """The window of a cell's headline R: 16K (HEADLINE_WINDOW) when its span reaches it, else the longest window
    its span allows (a corpus of your own with a shorter span); None without any."""
    if not e.R:
        return None
    return HEADLINE_WINDOW if HEADLINE_WINDOW in e.R else max(e.R)


def window_name(tokens: int) -> str:
    return f"{tokens // 1024}K" if tokens % 1024 == 0 else f"{tokens}"


def measurement_lines(a: Analysis, label: str, corpus: str, control: str) -> list[str]:
    """What `docgrad measure` prints: R at the headline window of the corpus and of the control, each with its
    95% document-bootstrap interval, and R_rel (corpus / control at 16K, paired per cell as on page 04) when both
    reach 16K. Numbers only; no ordering is stated (that needs page 04c's pre-stated decision)."""
    lines = []
    for name in (corpus, control):
        c = a.cell(name)
        if c is None:
            lines.append(f"{name} under {label}: no cell (nothing measured)")
            continue
        W = headline_window(c.all)
        if W is None:
            lines.append(f"{name} under {label}: no R (a span of one chunk has no window)")
            continue
        span = "" if W == HEADLINE_WINDOW else f" (R at the span: the corpus's span is {W} tokens, shorter than 16K)"
        lines.append(f"{name} under {label}: R({window_name(W)}) = {interval(c.all.R[W], c.all.interval('R', W))} "
                     f"over {c.n_docs} documents{span}: a batch of {window_name(W)}-token document blocks "
                     f"has the gradient noise of 1/R as many independently drawn chunks")
    rel = next((r for r in a.R_rel if r.corpus == corpus), None) if control == CONTROL else None
    if rel is not None and rel.R_rel is not None:
        lines.append(f"R_rel({corpus} / {control}) = {interval(rel.R_rel, rel.R_rel_ci)}")
    else:
        lines.append(f"R_rel({corpus} / {control}): not computed (R_rel divides R(16K) by the {CONTROL} control's; "
                     "both cells must reach 16K)")
    return lines


def published_R_claims(R_16K: Mapping[str, tuple], final, alpha: float = 0.05) -> dict[str, list[Claim]]:
    """Our R(16K) of each corpus against each published final checkpoint's R(16K) of the same kind of corpus
    (docs/methods.md#evidence-rules: resolved only when the two intervals do not overlap). R_16K: {model label:
    ({corpus: R(16K)}, {corpus: document-bootstrap draws})} (Study.R_16K); final: the published final checkpoints
    (docgrad.results.published.final_checkpoints: R_16K, lo, hi). The k comparisons of one model are one family: our interval is
    the percentile interval at the Bonferroni level 1 - alpha/k; the published one is its own 95% interval."""
    out = {}
    for label, (points, draws) in R_16K.items():
        rows = [(k, r) for k in points for r in final[final["corpus"] == k].itertuples()]
        level = 1 - alpha / max(len(rows), 1)
        out[label] = [ev.against_published(f"{label} {corpus} R(16K)", points[corpus],
                                           percentile_ci(draws[corpus], level) if corpus in draws else None,
                                           {r.model_label: (float(r.R_16K), [float(r.lo), float(r.hi)])})
                      for corpus, r in rows]
    return out


def published_R_lines(claims: Mapping[str, Sequence[Claim]]) -> list[str]:
    """Page 04c's per-corpus comparison in words: per model, how many of its comparisons are resolved, then each
    claim (ours at the Bonferroni level of its family)."""
    lines = []
    for label, cs in claims.items():
        k = len(cs)
        n = sum(c.status == ev.RESOLVED for c in cs)
        lines.append(f"**{label}**: {n} of {k} comparisons resolved (ours at the Bonferroni level "
                     f"{100 * (1 - 0.05 / max(k, 1)):.2f}% over its {k}; the published at their 95%).")
        lines += [c.text for c in cs]
    return lines


def _pair_text(p: Mapping) -> str:
    """'PAPERS − CODE +1.27 [0.167, 2.49] (Holm 98.3%): resolved' for one pair of core.orderings.resolve_pairs,
    written as the higher point minus the lower."""
    a, b, d, (lo, hi) = p["a"], p["b"], p["diff"], p["ci"]
    if d < 0:
        a, b, d, lo, hi = b, a, -d, -hi, -lo
    level = f"{(1 - p['level']) * 100:.1f}".rstrip("0").rstrip(".")
    state = "resolved" if p["order"] != "not resolved" else "not resolved"
    return f"{a} − {b} {sig(d)} [{sig(lo)}, {sig(hi)}] (Holm {level}%): {state}"


def _pair_key(p: Mapping) -> frozenset:
    return frozenset((p["a"], p["b"]))


def replication_verdicts(pooled: Mapping, replication: Mapping) -> dict[str, str]:
    """{pooled pair's order or 'A vs B': 'replicated' | 'not replicated' | 'not resolved (pooled)'}: a pooled pair
    is replicated only when resolved on the replication documents too, in the same direction."""
    rep = {_pair_key(p): p for p in replication["pairs"]}
    out = {}
    for p in pooled["pairs"]:
        r = rep.get(_pair_key(p))
        if p["order"] == "not resolved":
            out[f"{p['a']} vs {p['b']}"] = "not resolved (pooled)"
        else:
            out[p["order"]] = "replicated" if r is not None and r["order"] == p["order"] else "not replicated"
    return out


def replication_lines(pooled: Mapping, replication: Mapping, pooled_docs: str, replication_docs: str,
                      n_docs: Mapping[str, int]) -> list[str]:
    """The ordering's pairs on the pooled documents beside the same pairs on the documents that were not seen when
    the rule was written (docs/methods.md#the-48-document-cells-what-is-read-and-how-it-is-decided): pooled and
    replication are Study.ordering results; replication_verdicts decides each pooled pair. The pooled result is
    labelled partly exploratory."""
    rep = {_pair_key(p): p for p in replication["pairs"]}
    lines = [f"Pooled, documents {pooled_docs} (partly exploratory: documents 0-15 had been seen when the rule was "
             f"written, and they are in it): {', '.join(pooled['decision']['resolved']) or 'no pair'} resolved.",
             f"Replication, documents {replication_docs} alone (measured after the rule; "
             + ", ".join(f"{k} {n}" for k, n in n_docs.items()) + f" documents): "
             f"{', '.join(replication['decision']['resolved']) or 'no pair'} resolved."]
    for p, verdict in zip(pooled["pairs"], replication_verdicts(pooled, replication).values()):
        r = rep.get(_pair_key(p))
        lines.append(f"- pooled {_pair_text(p)}; replication {_pair_text(r) if r else 'not measured'} → {verdict}")
    for k, r in rep.items():
        if r["order"] != "not resolved" and all(_pair_key(p) != k or p["order"] == "not resolved"
                                                for p in pooled["pairs"]):
            lines.append(f"- resolved on the replication documents only: {r['order']} (a finding of those "
                         "documents, not of the pooled cells)")
    return lines


def regime_line(regimes: Mapping[str, str], shares: Mapping[str, Mapping[str, float]],
                without_norms: Mapping[str, Mapping[str, dict]], published: Sequence[float],
                R: Mapping[str, Mapping[str, float]]) -> str:
    """What the measured models are, for the first screen of page 04: per model its tuning, rounding and start token
    (models.model_regimes); its mean-gradient share on the long-document corpora beside the published range; and,
    without the norm gains (the 'other' group), how far R(16K) and B_simple move (B_simple = C σ²/S_cross, so its
    factor is (σ²/S_cross without) / (σ²/S_cross with))."""
    def pct(v):
        return f"{100 * v:.2g}%" if v >= 0.01 else f"{100 * v:.1g}%"

    def rng(v):
        return f"{pct(min(v))} to {pct(max(v))}" if v else "–"

    models = "; ".join(f"{lab}: {reg}" for lab, reg in regimes.items())
    parts = []
    for lab, sh in shares.items():
        long = [k for k in sh if k in LONG_DOCUMENT_CORPORA and np.isfinite(sh[k])]
        part = f"{lab} {rng([sh[k] for k in long])}"
        wo = {k: without_norms.get(lab, {}).get(k) for k in long}
        wo = {k: v for k, v in wo.items() if v}
        ref = {k: R.get(lab, {}).get(k) for k in wo}
        ref = {k: r for k, r in ref.items() if r is not None and np.isfinite(r) and r > 0}
        if wo and ref:
            dR = max(abs(wo[k]["R"] - r) / r for k, r in ref.items())
            factor = [(v["sigma2"] / v["S_cross"]) / ((1 - sh[k]) / sh[k]) for k, v in wo.items()]
            part += (f" (without the norm gains R(16K) moves by at most {pct(dR)}, B_simple by a factor of "
                     f"{min(factor):.2f} to {max(factor):.2f})")
        parts.append(part)
    pub = f"; the published base checkpoints {rng(list(published))}" if published else ""
    return (f"**The models.** {models}. Mean gradient, as a share of a chunk's squared gradient norm on BOOKS, CODE "
            f"and PAPERS: {'; '.join(parts)}{pub}. B_simple here describes these models, not a batch size for "
            "training; whether R moves with the start token or the rounding: page 04d.")


def shard_lines(readings: Sequence[Mapping]) -> list[str]:
    """One line per cell read as designed (results.shards.shard_reading): R(16K) per shard, the headline's
    document-bootstrap interval beside the within-shard one, and how far filling the missing cross-shard pairs
    moves R (a size of their possible bias, not a correction). A cell of one shard gets a shorter line."""
    def ci(v):
        return f"[{sig(v[0])}, {sig(v[1])}]" if v and v[0] is not None else "no interval"

    out = []
    for r in readings:
        head = f"{r['corpus']} ({r['n_docs']} documents, {r['n_shards']} shard{'s' if r['n_shards'] != 1 else ''})"
        if r["n_shards"] == 1:
            out.append(f"- {head}: R(16K) {sig(r['R'])}; every pair of documents was computed.")
            continue
        shards = ", ".join(f"{sig(p['R'])} (documents {p['documents']})" for p in r["per_shard"])
        out.append(f"- {head}: R(16K) {sig(r['R'])}; per shard {shards}; 95% intervals: resampling documents "
                   f"{ci(r.get('ci_doc'))} (the headline's), within shards {ci(r.get('ci_within_shard'))}; "
                   f"the missing cross-shard pairs filled with their sources' means move it by "
                   f"{'0.00' if abs(r['fill_shift']) < 0.005 else format(r['fill_shift'], '+.2f')}.")
    return out
