"""The sentences of the design-effect pages (04 headline, 04b drivers, 04c beside the published study), each
built from computed numbers by the rules of docgrad.presentation.evidence (docs/methods.md#evidence-rules). The
pages print what these return; they do not branch on numbers.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from docgrad.core.constants import CONTROL, G2_R, G2_RHO, HEADLINE_WINDOW, MIN_INTERVAL_DOCS
from docgrad.core.bootstrap import percentile_ci
from docgrad.core.decomposition import difference_interval, same_source_pair_fraction
from docgrad.core.orderings import DIFFERS, NOT_COMPARED, SAME_DIRECTION
from docgrad.presentation import evidence as ev
from docgrad.presentation.evidence import Claim, interval, sig
from docgrad.results.cell_decomposition import CellDecomposition
from docgrad.core.gates import window_name
from docgrad.presentation.measurement import headline_window
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


def few_clusters(d: CellDecomposition | None) -> bool:
    """Whether the rule withholds a cell's 95% interval as one for its kind of text: its documents cluster by source
    (clustered) and the source bootstrap takes fewer than FEW_DISTINCT distinct values (3 sources: at most 10), so a
    percentile over so few clusters is not a 95% interval; R is then read by source."""
    return clustered(d) and d.support.get("source", {}).get("distinct", FEW_DISTINCT) < FEW_DISTINCT


def _source_note(d: CellDecomposition | None) -> str:
    """A clustered corpus's note in the headline: its source-clustered interval, unless few_clusters: then it
    points to R by source instead."""
    ci = (d.intervals.get("source", {}).get("R") if d else None) or [None, None]
    if not clustered(d) or ci[0] is None:
        return ""
    if few_clusters(d):
        return f" ({d.n_sources} sources: R by source below, no interval over {d.n_sources} clusters)"
    return f" ({d.n_sources} sources resampled: [{sig(ci[0])}, {sig(ci[1])}])"


def _worth_parts(rep: Analysis, decomps: Mapping[str, CellDecomposition],
                 incomplete: Mapping[str, tuple] | None = None) -> tuple[dict, list[str]]:
    """({(W, C): [('8.7 [7.5, 10]', 'CODE', ''), ...]}, [cells not read]) for one model's long-document cells:
    m / R(W) with its interval [m / hi, m / lo] (W the cell's headline window, m = W / C;
    evidence.effective_count), those with an interval first. A few_clusters corpus gets its point only and a note;
    a cell that lacks documents is not read."""
    groups, skipped, later = {}, [], []
    for c in rep.cells:
        if c.corpus == CONTROL:
            continue
        if c.corpus in (incomplete or {}):
            skipped.append(f"{ev.measured_of_held({c.corpus: incomplete[c.corpus]})} documents")
            continue
        W = headline_window(c.all)
        n, ci = ev.effective_count(W // c.chunk, c.all.R.get(W), c.all.interval("R", W)) if W else (None, None)
        if n is None:
            continue
        d = decomps.get(c.corpus)
        if few_clusters(d):
            later.append(((W, c.chunk), (sig(n, 2), c.corpus, f" ({d.n_sources} sources: no interval)")))
        else:
            groups.setdefault((W, c.chunk), []).append((interval(n, ci, 2), c.corpus, ""))
    for key, part in later:
        groups.setdefault(key, []).append(part)
    return groups, skipped


def block_worth(label: str, rep: Analysis, decomps: Mapping[str, CellDecomposition],
                incomplete: Mapping[str, tuple] | None = None) -> str:
    """Page 04's opening sentence for one model: how many independent C-token chunks a W-token block of one document
    is worth, m / R(W) with its 95% interval mapped through the same function ([m / hi, m / lo]), per long-document
    corpus, against the m its token count suggests ('A 16K-token block of one document is worth about 8.7 [7.5, 10]
    independent 512-token chunks of CODE, ... and 8.4 of BOOKS (3 sources: no interval), not 32
    (model).'). A corpus in few sources gets no interval (few_clusters); cells that lack documents are not read."""
    groups, skipped = _worth_parts(rep, decomps, incomplete)
    said = []
    for (W, C), parts in groups.items():
        named = [f"{n}{f' independent {C}-token chunks' if i == 0 else ''} of {k}{note}"
                 for i, (n, k, note) in enumerate(parts)]
        listed = named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]
        said.append(f"a {window_name(W)}-token block of one document is worth about {listed}, not {W // C}")
    out = "; ".join(said) or f"no long-document cell of {label} is read yet"
    out = out[0].upper() + out[1:] + (f" ({label})" if said else "")
    return out + (f"; not read yet: {', '.join(skipped)}." if skipped else ".")


def result_box(reports: Mapping[str, Analysis], decomps: Mapping[str, Mapping[str, CellDecomposition]],
               incomplete: Mapping[str, Mapping[str, tuple]] | None = None,
               models_note: str = "two small 4-bit-quantised models", regime_note: str = "") -> str:
    """Page 04's answer, first: what a block of one document is worth in independent chunks (block_worth of the
    first model, with intervals), then R(W) = m / worth per corpus and model (points; their 95% intervals are in the
    forest plot below, the control's is given), what was measured and the caveat: where a corpus moves with the
    model's regime, the regime note (presentation.regime.headline_note) replaces the standard one. incomplete: {model: {corpus:
    (measured, held)}} (Study.incomplete): those cells are marked provisional. A corpus whose span is shorter than
    16K (one's own) is read at its span, R(W) named with its window W."""
    incomplete = incomplete or {}
    labels = list(reports)
    answer = [block_worth(labels[0], reports[labels[0]], decomps.get(labels[0], {}), incomplete.get(labels[0]))]
    chunks, blocks, per_model = set(), set(), []
    for label, rep in reports.items():
        def read(c, with_ci=False):
            W = headline_window(c.all)
            chunks.add(c.chunk)
            blocks.add((W, c.chunk))
            name = "" if W == HEADLINE_WINDOW else f" R({window_name(W)})"
            value = interval(c.all.R.get(W), c.all.interval("R", W)) if with_ci else sig(c.all.R.get(W))
            return f"{name} {value}"

        parts = [f"{c.corpus}{read(c)}" for c in rep.cells if c.corpus != CONTROL]
        ctrl = rep.cell(CONTROL)
        per_model.append(f"{label} " + ", ".join(parts) + (f", control{read(ctrl, True)}" if ctrl else ""))
    (W, C), = blocks if len(blocks) == 1 else [(None, None)]
    name = f"R({window_name(W)}) = {W // C}" if W else "R(W) = (W / C)"
    answer.append(f"{name} / worth: {'; '.join(per_model)} (intervals below).")
    who = (lambda lab: f"{lab} ") if len(labels) > 1 else (lambda lab: "")
    notes = [f"{who(lab)}{k}{_source_note(d)}" for lab in labels for k, d in decomps.get(lab, {}).items()
             if _source_note(d) and not few_clusters(d)]
    if notes:
        answer.append(f"Documents sharing sources: {', '.join(notes)}.")
    docs = ev.documents_per_corpus({lab: [c.n_docs for c in rep.cells] for lab, rep in reports.items()}, incomplete)
    chunk = "/".join(str(c) for c in sorted(chunks)) or "512"
    measured = f"{models_note}; {docs}; {chunk}-token chunks run alone; 95% document intervals."
    caveat = ("no chunk saw the text before it (page 06 adds that context); documents sharing a source "
              "are fewer independent draws than they look.")
    if regime_note:        # the model regime moves R: that is the caveat that matters (docs/methods.md#model-regime);
        caveat = f"{regime_note}."      # that chunks ran alone stays in `measured`
    return ev.result_box(answer, measured, caveat)


FOREST_COLUMNS = ["corpus", "row", "kind", "model", "n_docs", "W", "R", "lo", "hi", "note"]


def forest_frame(designs: Sequence[tuple[Mapping[str, Analysis], Mapping[str, Mapping[str, CellDecomposition]]]],
                 published_final: pd.DataFrame | None = None) -> pd.DataFrame:
    """The rows of page 04's forest plot: R at each cell's headline window (16K, or the span) with its 95% interval.

    designs: (reports, decomps) of each design shown, the page's documents first (e.g. 48, then the published
    design's 16); a model's cell with as many documents as one already shown is the same documents and is not
    repeated. Then, for each model of the first design, every source of a corpus clustered by source alone
    (core.decomposition.by_source: documents resampled within the source); then the published final checkpoints
    (docgrad.results.published.final_checkpoints) of the corpora shown. No interval where the rule gives none, and
    `note` says why: a pooled corpus of few sources (few_clusters), a source of fewer than MIN_INTERVAL_DOCS
    documents, a published point value. kind: 'ours', 'by source' or 'published'."""
    rows, seen = [], set()
    for reports, decomps in designs:
        for label, rep in reports.items():
            for c in rep.cells:
                if (label, c.corpus, c.n_docs) in seen:
                    continue
                seen.add((label, c.corpus, c.n_docs))
                W = headline_window(c.all)
                if W is None:
                    continue
                d = decomps.get(label, {}).get(c.corpus)
                lo, hi = c.all.interval("R", W)
                note = f"{d.n_sources} sources: no interval over {d.n_sources} clusters" if few_clusters(d) else ""
                if note:
                    lo = hi = None
                rows.append({"corpus": c.corpus, "row": f"{label}, {c.n_docs} documents", "kind": "ours",
                             "model": label, "n_docs": c.n_docs, "W": W, "R": c.all.R[W], "lo": lo, "hi": hi,
                             "note": note})
    first_reports, first_decomps = designs[0] if designs else ({}, {})
    for label in first_reports:
        for k, d in first_decomps.get(label, {}).items():
            cell = first_reports[label].cell(k)
            if not clustered(d) or cell is None:
                continue
            for r in sorted((r for r in d.by_source if r["source"] != "all" and r["n_docs"] > 1),
                            key=lambda r: (-r["n_docs"], r["source"])):
                ci = r.get("R_ci") or [None, None]
                note = "" if ci[0] is not None else (f"fewer than {MIN_INTERVAL_DOCS} documents: no interval"
                                                     if r["n_docs"] < MIN_INTERVAL_DOCS else "no interval")
                rows.append({"corpus": k, "row": f"{label}: {r['source']} alone, {r['n_docs']} documents",
                             "kind": "by source", "model": label, "n_docs": r["n_docs"],
                             "W": headline_window(cell.all), "R": r["R"], "lo": ci[0], "hi": ci[1], "note": note})
    shown = {r["corpus"] for r in rows}
    if published_final is not None:
        for r in published_final[published_final["corpus"].isin(shown)].itertuples():
            has = np.isfinite([r.lo, r.hi]).all()
            rows.append({"corpus": r.corpus, "row": f"{r.model_label} (published, {r.corpus_published})",
                         "kind": "published", "model": r.model_label, "n_docs": int(r.n_docs),
                         "W": HEADLINE_WINDOW, "R": float(r.R_16K), "lo": float(r.lo) if has else None,
                         "hi": float(r.hi) if has else None, "note": "" if has else "a point value: no interval"})
    out = pd.DataFrame(rows, columns=FOREST_COLUMNS).astype({"lo": float, "hi": float})
    rank = {col: {v: i for i, v in enumerate(dict.fromkeys(out[col]))} for col in ("corpus", "kind", "model")}
    keys = out.assign(**{f"_{col}": out[col].map(r) for col, r in rank.items()}, _docs=-out["n_docs"])
    order = keys.sort_values(["_corpus", "_kind", "_model", "_docs"], kind="stable").index
    return out.loc[order].reset_index(drop=True)


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
    """Page 04b's answer for one model, first what a practitioner does with it: B_simple = C σ²/S_cross here
    describes this model, not a batch size for training: its mean-gradient share S_cross/(S_cross + σ²) on the
    long-document corpora (range, with and without the norm weights) beside the published range, and the largest
    relative change of R(16K) without the norm weights (point estimates, described, not decided). Then
    what R(16K) is made of where sources are shared (R without the source term) and how far the most influential
    document moves R."""
    long = {k: shares[k] for k in shares if k in LONG_DOCUMENT_CORPORA and np.isfinite(shares[k])}
    wo = {k: without_norms[k] for k in without_norms if k in long}
    answer = []
    if long:
        lo, hi = min(long.values()), max(long.values())
        pub = (f", against {sig(min(published), 2)}-{sig(max(published), 2)} in the published base checkpoints"
               if published else "")
        moved = [abs(wo[k]["R"] - decomps[k].R) / decomps[k].R for k in wo if k in decomps and decomps[k].R]
        answer.append(f"B_simple from {label} describes this model, not a batch size for training: its mean gradient "
                      f"is {sig(lo)}-{sig(hi)} of a chunk gradient's squared norm on {', '.join(long)}"
                      + (f" ({sig(min(v['mean_gradient_share'] for v in wo.values()))}-"
                         f"{sig(max(v['mean_gradient_share'] for v in wo.values()))} without the norm weights)"
                         if wo else "") + pub
                      + (f", while R(16K) moves by at most {max(moved):.1%} without them." if moved else "."))
    else:
        answer.append(f"{label} has no long-document cell: nothing is said of B_simple or the mean gradient.")
    for k, d in decomps.items():
        if clustered(d):
            answer.append(f"{k}'s R(16K) {sig(d.R)} holds a source term: without it "
                          f"{interval(d.R_within, d.intervals.get('doc', {}).get('R_within'))}.")
    moves = {k: abs(d.loo["dR"][most_influential(d)]) / d.R for k, d in decomps.items() if d.R}
    if moves:
        k = max(moves, key=moves.get)
        answer.append(f"Leaving out one document moves R by at most {moves[k]:.0%} ({k}).")
    counts = ev.documents_per_corpus({label: [len(d.doc_ids) for d in decomps.values()]})
    measured = f"{counts}; leave-one-out, document and source bootstraps."
    caveat = ("what makes the mean gradient large is measured for the start token and 4-bit rounding (page 04d), "
              "not for size or tuning.")
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
    is not separated here (size, instruction tuning; the start token and rounding are page 04d's)."""
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
    out.append("**Not separated here**: model size and instruction tuning (SmolLM2). The start token (SmolLM2's "
               "chunks start with none, Gemma's with `<bos>`; page 02 finds that one token ahead of a chunk can "
               "change its squared gradient norm up to 29.7-fold) and the 4-bit rounding are measured on page 04d: "
               "SmolLM2 with `<|endoftext|>` ahead of every chunk, and extrapolated to unrounded weights (SIMEX, "
               "CODE and WEB), each with its mean-gradient share and R(16K) beside the model as loaded. B_simple "
               "here describes these models, not a batch size for training.")
    return out


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
