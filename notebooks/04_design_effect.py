# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     notebook_metadata_filter: -jupytext.text_representation.jupytext_version
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # What does a whole-document batch cost?
#
# Filling each training sequence with one long document puts correlated chunks into the same batch, so a batch
# carries fewer independent samples than its token count suggests. This page measures how many fewer (the design
# effect R of a 16K-token window) for books, code and papers against a packed control of short texts (Debian
# package descriptions), beside the published Pythia-1.4B and OLMo-2-1B numbers ([Yang 2026](#References));
# it asks what drives each corpus's R and how robust it is, compares the two studies where they are comparable,
# and ends with the gates that say whether the measurement can be trusted.
#
# The design effect is the gradient-noise variance of one document-contiguous block of $m$ chunks, divided by
# that of $m$ independent chunks with the same token count,
#
# $$R(W{=}mC) = \frac{\overline{|\text{block mean}|^2} - S_\text{cross}}{\sigma^2/m}
#   = 1 + \frac{2}{m}\sum_{l=1}^{m-1}(m-l)\,\rho(l).$$
#
# $R(16\text{K})$ is Kish's design effect ([Kish 1965](#References)) of a 16K-token block (32 chunks of 512
# tokens): a batch of such blocks carries about $1/R$ as many effective independent samples as its token count
# suggests, and the gradient noise scale $B_\text{simple} = C\sigma^2/S_\text{cross}$ of
# [McCandlish et al. (2018)](#References) (in tokens, for shuffled chunks) grows by the factor $R$ for
# contiguous blocks. $R_\text{rel}$ divides by the control at the same model and checkpoint. Intervals: 95%
# document bootstrap ([Efron & Tibshirani 1993](#References)). The interval of a ratio or a difference of two
# corpora divides (subtracts) the i-th draws of the two cells; the cells are resampled independently, each by
# its own generator, so the draws are not paired: no document and no resample index is shared
# ([docs/methods.md](../docs/methods.md#document-bootstrap)).

# %% tags=["parameters"]
results_dir = "data/results"  # directory of result files (searched recursively)
models = ["smollm2-135m", "gemma3-270m"]  # offline model names or '<id>@<revision>'; the first is read in depth
corpora = ["BOOKS", "CODE", "PAPERS", "WEB"]  # corpora to show, in this order (WEB is the control)
chunk = 512  # chunk length C in tokens
resamples = 2000  # document-bootstrap resamples (0: no intervals)
seed = 20261007  # bootstrap seed
documents = "0:16"  # result files read: documents A:B (0:16 the published design; 0:48 the 48-document cells)
figures_dir = "figures"  # where figures and the numbers file are written

# %%
from docgrad.runtime.pages import save_chart, save_numbers, setup, versions

ROOT = setup()

import altair as alt
import numpy as np
import pandas as pd
from IPython.display import Markdown, display

from docgrad.presentation import comparison
from docgrad.core import decomposition
from docgrad.results import published
from docgrad.results.format import parse_docs
from docgrad.results.study import Study
from docgrad.presentation import tables
from docgrad import models as model_registry
from docgrad.presentation.charts import corpus_color, highlight, legend_pick
from docgrad.core.constants import CONTROL, GROUPS

# %%
page_models = model_registry.result_models(models)
study = Study(results_dir, resamples, seed, chunk, docs=parse_docs(documents))   # reads the result files once
pages = {m.label: study.page(m, corpora) for m in page_models}
reports = {lab: rep for lab, (rep, _) in pages.items()}
label = page_models[0].label                      # the model read in depth below
model, revision, manifest = page_models[0].model, page_models[0].revision, page_models[0].manifest
report, missing = pages[label]
synthetic = any(c.synthetic for r in reports.values() for c in r.cells)
order = list(corpora)
lines = [f"- results directory: `{results_dir}` (documents {documents}); C = {chunk} tokens, {resamples} bootstrap "
         "resamples"]
for m in page_models:
    rep_m, miss_m = pages[m.label]
    lines.append(f"- **{m.label}** (`{m.model}` at `{m.revision}`): cells present "
                 f"{', '.join(c.corpus for c in rep_m.cells) or 'none'}; missing {', '.join(miss_m) or 'none'}"
                 + ("; without its WEB control there is no R_rel and gate G2 cannot be evaluated"
                    if "WEB" in miss_m else ""))
if synthetic:
    lines.append("- **these result files are SYNTHETIC** (docgrad.results.synthetic): the numbers below illustrate the "
                 "pipeline, they are not measurements")
display(Markdown("\n".join(lines)))


man = study.manifest(page_models[0])             # each model's own (per-tokenizer) corpora
decomps = {m.label: study.decompositions(m, [c.corpus for c in reports[m.label].cells]) for m in page_models}
present = [c.corpus for c in report.cells]
cells_by = {c.corpus: c for c in report.cells}
decomp = decomps[label]
final = published.final_checkpoints()

# %% [markdown]
# ## R(W) against the window W
#
# $R(C) = 1$ by definition; it grows with $W$ as long as chunks further apart stay correlated. Ours (with
# 95% intervals), one panel per model, beside the published final Pythia-1.4B and OLMo-2-1B checkpoints. Hover for values; click a
# legend entry to highlight a corpus.

# %%
R = pd.concat([tables.R_frame(r) for r in reports.values()], ignore_index=True)
R_all = R[R["group"] == "all"]
both = published.beside_ours(R_all, published.R_by_window(), None, "W_tokens")
both = both[both["corpus"].isin(order)]
pick = legend_pick()
color = corpus_color(order)
xW = alt.X("W_tokens:Q", title="window W (tokens)", scale=alt.Scale(type="log", base=2),
           axis=alt.Axis(values=[512, 1024, 2048, 4096, 8192, 16384]))
tip = ["source:N", "corpus:N", "W_tokens:Q", alt.Tooltip("R:Q", format=".3f"),
       alt.Tooltip("lo:Q", format=".3f", title="95% lo"), alt.Tooltip("hi:Q", format=".3f", title="95% hi")]
base = alt.Chart(both)
chart_R = alt.layer(   # the selection lives on the first layer that encodes colour (the line; its legend)
    base.mark_line(point=True).encode(x=xW, y=alt.Y("R:Q", title="R(W)"), color=color, tooltip=tip,
                                      opacity=highlight(pick)).add_params(pick),
    base.mark_errorbar(ticks=True).encode(x=xW, y=alt.Y("lo:Q", title="R(W)"), y2="hi:Q", color=color,
                                          opacity=highlight(pick, 0.8, 0.08)),
).properties(width=260, height=240).facet(
    column=alt.Column("source:N", title=None, sort=list(dict.fromkeys(both["source"]))))
display(save_chart(chart_R, "04_R_by_window", figures_dir))

# %% [markdown]
# ## Headline: R(16K) and R_rel
#
# Ours beside the published final checkpoints (published corpora renamed to ours:
# PG19 → BOOKS, REPOS → CODE, ARXIV → PAPERS). Brackets are 95% document-bootstrap intervals. The $R_\text{rel}$
# columns of the two studies divide by different controls and are not like for like (see below).

# %%
headline = tables.headline_table(list(reports.values()), published.cells(), published.r_rel())
headline

# %% tags=["hide-input"]
R_orders = {lab: {c.corpus: c.all.R_16K for c in r.cells} for lab, r in reports.items()}
for lab, g in final.groupby("model_label", sort=False):
    R_orders[f"{lab} (published)"] = {k: v for k, v in zip(g["corpus"], g["R_16K"]) if k in order}
display(Markdown("Ordered by R(16K):\n\n" + "\n".join(f"- {src}: {tables.ordering(v, 2)}"
                                                     for src, v in R_orders.items())))

# %% [markdown]
# ## Does the ordering depend on the model?
#
# The same corpora (each model's own tokenisation of the same documents where possible; substitutions are in
# each tokenizer's manifest) through two different small models: SmolLM2-135M-Instruct, an instruction-tuned
# Llama-style model, and Gemma-3-270M, a pretrained base model with a 262,144-token vocabulary whose embedding
# holds most of its parameters; both de-quantised from 4-bit GGUF files. For each model and each pair of
# corpora, the difference of R(16K) has a 95% interval over the two cells' document-bootstrap draws; a pair is
# *ordered* only when that interval excludes 0, and two models *disagree* only when both order a pair and in
# opposite directions ([docs/methods.md](../docs/methods.md#comparing-models)). The published models have
# point values only, so they are compared by point order.

# %%
model_order = [m.label for m in page_models]
by_model = pd.concat([tables.cells_frame(r).assign(model_label=lab) for lab, r in reports.items()],
                     ignore_index=True)
mbase = alt.Chart(by_model)
mcolor = alt.Color("model_label:N", title="model", sort=model_order)
chart_models = alt.layer(
    mbase.mark_point(filled=True, size=80).encode(
        x=alt.X("corpus:N", sort=order, title=None), xOffset=alt.XOffset("model_label:N", sort=model_order),
        y=alt.Y("R_16K:Q", title="R(16K)"), color=mcolor,
        tooltip=["model_label:N", "corpus:N", alt.Tooltip("R_16K:Q", format=".3f"),
                 alt.Tooltip("R_16K_lo:Q", format=".3f", title="95% lo"),
                 alt.Tooltip("R_16K_hi:Q", format=".3f", title="95% hi")]),
    mbase.mark_errorbar(ticks=True).encode(
        x=alt.X("corpus:N", sort=order), xOffset=alt.XOffset("model_label:N", sort=model_order),
        y=alt.Y("R_16K_lo:Q", title="R(16K)"), y2="R_16K_hi:Q", color=mcolor),
).properties(width=420, height=260, title="R(16K) per corpus and model, 95% document-bootstrap intervals")
display(save_chart(chart_models, "04_R_by_model", figures_dir))
model_cmp = comparison.compare(
    {lab: ({k: d.R for k, d in decomps[lab].items()},
           {k: d.draws["doc"]["R"] for k, d in decomps[lab].items() if "doc" in d.draws} or None)
     for lab in model_order},
    {src: v for src, v in R_orders.items() if src.endswith("(published)")}, corpora=order)
display(Markdown("\n".join(f"- {line}" for line in comparison.describe(model_cmp))))
pairs_table = pd.DataFrame([{"model": lab, "pair": f"{r['a']} − {r['b']}", "difference": r["diff"],
                             "95% lo": (r["ci"] or [None, None])[0], "95% hi": (r["ci"] or [None, None])[1],
                             "order": r["order"]}
                            for lab, recs in model_cmp["orders"].items() if lab in model_order for r in recs])
pairs_table.pivot(index="pair", columns="model", values="order") if len(pairs_table) else pairs_table

# %% [markdown]
# ### Per parameter group
#
# Each parameter group (attention, MLP, embedding with the tied output matrix, and the rest) has its own Gram
# and so its own $R(16\text{K})$. The models split their parameters very differently (Gemma-3-270M's
# embedding is most of its parameters), so a model's overall $R$ weights the groups by their share of its
# noise $\sigma^2$: the table gives both, per model.

# %%
group_sizes_by_model = {m.label: study.group_sizes(m) for m in page_models}
groups_by_model = pd.concat([tables.group_frame(r) for r in reports.values()], ignore_index=True)
gpick = legend_pick()
chart_groups_m = alt.Chart(groups_by_model).mark_point(filled=True, size=70).encode(
    x=alt.X("group:N", sort=list(GROUPS), title="parameter group"), y=alt.Y("R_16K:Q", title="R(16K) of the group"),
    color=color, opacity=highlight(gpick, 1.0, 0.15),
    tooltip=["model:N", "corpus:N", "group:N", alt.Tooltip("R_16K:Q", format=".3f"),
             alt.Tooltip("share of sigma2:Q", format=".3f", title="share of σ²")],
).add_params(gpick).properties(width=240, height=220).facet(column=alt.Column("model:N", title=None, sort=model_order))
display(save_chart(chart_groups_m, "04_R_by_group_and_model", figures_dir))
group_facts = {}
for lab, sizes in group_sizes_by_model.items():
    g = groups_by_model[groups_by_model.model == lab]
    if not len(g) or not sizes:
        continue
    emb = g[g.group == "embed"].set_index("corpus")
    group_facts[lab] = {"embed_param_share": sizes.get("embed", 0) / sum(sizes.values()),
                        "embed_sigma2_share": emb["share of sigma2"].to_dict(), "embed_R_16K": emb["R_16K"].to_dict(),
                        "R_16K_range_by_corpus": {k: [float(v.R_16K.min()), float(v.R_16K.max())]
                                                  for k, v in g.groupby("corpus", sort=False)}}
display(Markdown("\n".join(
    f"- **{lab}**: the embedding is {f['embed_param_share']:.0%} of the parameters and carries "
    + ", ".join(f"{k} {v:.0%}" for k, v in f["embed_sigma2_share"].items()) + " of σ²; across the groups R(16K) "
    "ranges " + "; ".join(f"{k} {lo:.2f} to {hi:.2f}" for k, (lo, hi) in f["R_16K_range_by_corpus"].items()) + "."
    for lab, f in group_facts.items()) or "- no group data"))
groups_by_model.pivot_table(index=["model", "corpus"], columns="group", values=["R_16K", "share of sigma2"],
                            sort=False).round(3)

# %% [markdown]
# ## What drives each corpus's R
#
# From here to *B_simple*, the page reads the first model of `models` (by default SmolLM2-135M-Instruct) in
# depth, with its own corpus manifest for the documents' sources.
#
# A document's chunks share a part of their noise that does not decay within the span (the plateau of
# ρ(Δ), notebook 03), and where several documents come from one source (an author, a work, a project owner)
# they share a part of it with each other too. Measured about $A_\text{xs}$, the mean inner product of chunks
# of *different sources*, $R(16\text{K})$ splits exactly into
#
# $$R_\text{x}(mC) = \underbrace{1}_{\text{the chunk itself}} + \underbrace{(m-1)\,\rho_\text{src}}_{\text{source}}
#  + \underbrace{(m-1)\,\rho_\text{doc}}_{\text{document plateau}} + \text{short range},$$
#
# and $R$ **without the source term** is $R_\text{within} = R_\text{x} - (m-1)\rho_\text{src}$
# ([docs/methods.md](../docs/methods.md#decomposition)). Where every source has a single document
# (PAPERS, WEB) both equal the study's $R$. The study's estimator subtracts $S_\text{cross}$, the mean over
# *all* cross-document pairs, which mixes same-source and cross-source pairs, so with shared sources it
# neither keeps the source term whole nor removes it. Bars: the four parts of $R_\text{x}$; black tick: the
# study's $R$; white tick: $R_\text{within}$.

# %%
comp = tables.R_components_frame(decomp)
parts = tables.decomposition_frame(decomp)
pick2 = legend_pick("component")
ccolor = alt.Color("component:N", sort=list(tables.R_COMPONENTS), title="part of R_x(16K)",
                   scale=alt.Scale(domain=list(tables.R_COMPONENTS),
                                   range=["#bbbbbb", "#d62728", "#1f77b4", "#9ecae1"]))
bars = alt.Chart(comp).mark_bar().encode(
    y=alt.Y("corpus:N", sort=order, title=None), x=alt.X("value:Q", stack="zero", title="R(16K)"),
    color=ccolor, order=alt.Order("order:Q"), opacity=highlight(pick2, 1.0, 0.25),
    tooltip=["corpus:N", "component:N", alt.Tooltip("value:Q", format=".3f"), alt.Tooltip("R_x:Q", format=".3f"),
             alt.Tooltip("R:Q", format=".3f", title="study's R"), alt.Tooltip("R_within:Q", format=".3f")],
).add_params(pick2)
ticks = comp.drop_duplicates("corpus")
tick_R = alt.Chart(ticks).mark_tick(color="black", thickness=3, size=34, opacity=1).encode(
    y=alt.Y("corpus:N", sort=order), x="R:Q", tooltip=[alt.Tooltip("R:Q", format=".3f", title="study's R")])
tick_W = alt.Chart(ticks).mark_tick(color="white", thickness=3, size=34, opacity=1).encode(
    y=alt.Y("corpus:N", sort=order), x="R_within:Q",
    tooltip=[alt.Tooltip("R_within:Q", format=".3f", title="R without the source term")])
chart_parts = (bars + tick_R + tick_W).properties(width=520, height=200)
display(save_chart(chart_parts, "04_R_components", figures_dir))
parts[["corpus", "n_sources", "shared_sources", "R", "R_lo", "R_hi", "R_x", "R_x_lo", "R_x_hi", "R_within",
       "R_within_lo", "R_within_hi", "rho_src", "rho_doc", "plateau", "short_range"]]

# %% tags=["hide-input"]
drive = {}
for k, d in decomp.items():
    iv = d.intervals.get("doc", {})
    t = d.terms
    drive[k] = {"R": d.R, "R_x": d.R_x, "R_within": d.R_within, "R_x_ci": iv.get("R_x"),
                "R_within_ci": iv.get("R_within"), "source_term": (d.m - 1) * t["rho_src"],
                "plateau_term": (d.m - 1) * t["rho_doc"], "short_range": t["short_range"], "m": d.m,
                "rho_src": t["rho_src"], "shared_sources": d.shared_sources,
                "same_source_pair_fraction": decomposition.same_source_pair_fraction(d.sources)}


def ci_text(ci):
    return f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci and ci[0] is not None else ""


drive_lines = []
for k, f in drive.items():
    if f["shared_sources"]:
        drive_lines.append(
            f"- **{k}**: documents from shared sources ({', '.join(f'{s} {n}' for s, n in f['shared_sources'].items())}); "
            f"{f['same_source_pair_fraction']:.0%} of its cross-document pairs are same-source pairs. About the "
            f"cross-source mean R is {f['R_x']:.2f}{ci_text(f['R_x_ci'])}, of which the source term is "
            f"{f['m'] - 1} × {f['rho_src']:.3f} = {f['source_term']:.2f}, the document plateau "
            f"{f['plateau_term']:.2f} and the short range {f['short_range']:.2f}; without the source term R is "
            f"{f['R_within']:.2f}{ci_text(f['R_within_ci'])}; the study's pooled estimate is {f['R']:.2f}.")
    else:
        drive_lines.append(
            f"- **{k}**: every document is its own source, so R = {f['R']:.2f} is document plateau "
            f"{f['plateau_term']:.2f} + short range {f['short_range']:.2f} + 1.")
display(Markdown("\n".join(drive_lines) or "- no cells"))

# %% [markdown]
# ## How robust is it
#
# Two checks beyond the document bootstrap. **Leave one document out** (the estimators with one document's
# weight set to 0; notebook 03 has the chart): how far one document moves $R(16\text{K})$, and the jackknife
# standard error ([Efron & Tibshirani 1993](#References)). **Resample sources, not documents**: the document
# bootstrap treats the 16 documents as independent draws; where documents share a source they are not, and
# the unit of independence is the source. The source-clustered bootstrap draws the cell's sources with
# replacement and takes all documents of each drawn source ([Davison & Hinkley 1997](#References)); with one
# document per source it makes exactly the document bootstrap's draws.

# %%
boot = tables.bootstrap_frame(decomp, stats=("R", "R_within"))
influence = tables.influence_frame(decomp, None)
top_loo = tables.top_influences(influence, 1)
boot

# %% tags=["hide-input"]
robust = {}
for k, d in decomp.items():
    r = top_loo[top_loo.corpus == k].iloc[0]
    title = next((doc["title"] for doc in man.get("corpora", {}).get(k, {}).get("documents", [])
                  if doc["doc"] == r["doc"]), f"document {r['doc']}")
    robust[k] = {"top_doc": int(r["doc"]), "top_title": title, "R_without_top": r["R_without"],
                 "dR_frac_top": r["dR_frac"], "jackknife_se": d.jackknife_se_R,
                 "doc_ci": d.intervals.get("doc", {}).get("R"), "source_ci": d.intervals.get("source", {}).get("R"),
                 "n_sources": d.n_sources, "source_support": d.support.get("source"),
                 "source_nonfinite": d.nonfinite.get("source", {}).get("R")}
rob_lines = []
for k, f in robust.items():
    line = (f"- **{k}**: R(16K) = {decomp[k].R:.2f}, jackknife standard error {f['jackknife_se']:.2f}; the most "
            f"influential document is {f['top_title']} (without it {f['R_without_top']:.2f}, "
            f"{f['dR_frac_top']:+.0%}).")
    if f["doc_ci"] and f["source_ci"] and f["source_ci"][0] is not None:
        if f["n_sources"] == len(decomp[k].doc_ids):
            line += f" One document per source: both bootstraps give {ci_text(f['doc_ci']).strip()}."
        else:
            sup = f["source_support"]
            line += (f" Document bootstrap {ci_text(f['doc_ci']).strip()}; resampling its {f['n_sources']} sources "
                     f"instead: {ci_text(f['source_ci']).strip()}")
            if sup and sup["distinct"] < 50:
                line += (f". With {f['n_sources']} sources the {resamples} draws take only {sup['distinct']} "
                         f"distinct values, from {sup['min']:.2f} to {sup['max']:.2f}"
                         + (f" (the full mix of sources gives the largest)" if np.isclose(sup["max"], decomp[k].R)
                            else "")
                         + f", and {f['source_nonfinite']:.1%} are undefined (a draw of one single-document "
                           "source only has no cross-document pair). The percentile interval of so few "
                           "distinct values is coarse; what it says is that this R describes this mix of "
                           "sources, not books in general")
            line += "."
    rob_lines.append(line)
display(Markdown("\n".join(rob_lines) or "- no cells"))

# %% [markdown]
# ## The ordering, ours and published
#
# The orderings of the two studies by R(16K), and what the numbers here can and cannot say about where they
# differ:

# %% tags=["hide-input"]
def dr(a, b, stat="R"):
    """a - b of `stat` over the two cells' document-bootstrap draws (draw i of each; independent cells)."""
    return decomposition.difference_interval(decomp[a].draws["doc"][stat], decomp[b].draws["doc"][stat])


ordering_facts = {"ours": tables.ordering({k: d.R for k, d in decomp.items()}),
                  "published": {src: tables.ordering(v) for src, v in R_orders.items() if src.endswith("(published)")}}
olines = [f"- **The orderings.** {label}: {ordering_facts['ours']}. Published: "
          + "; ".join(f"{src.replace(' (published)', '')}: {o}" for src, o in ordering_facts["published"].items())
          + ". (The other models of this page: *Does the ordering depend on the model?* above.)"]
if {"BOOKS", "CODE"} <= set(decomp) and resamples:
    d_b = decomp["BOOKS"]
    by_src = {r["source"]: r for r in d_b.by_source if r["n_docs"] > 1 and r["source"] != "all"}
    pooled, within = dr("BOOKS", "CODE"), dr("BOOKS", "CODE", "R_within")
    within["frac_less"] = None if within["frac_greater"] is None else 1 - within["frac_greater"]
    ordering_facts["BOOKS_minus_CODE"] = {"pooled": pooled, "within": within,
                                          "by_source_R": {s: r["R"] for s, r in by_src.items()}}
    olines.append(
        f"- **BOOKS against CODE: the mixture of sources.** The study's R puts BOOKS above CODE in "
        f"{pooled['frac_greater']:.0%} of the draws (difference {ci_text(pooled['ci']).strip()}). "
        f"Without the source term BOOKS's R is {d_b.R_within:.2f}, below CODE's {decomp['CODE'].R_within:.2f} "
        f"(also without its source term) in {within['frac_less']:.0%} of the draws (difference "
        f"{ci_text(within['ci']).strip()})"
        + (", and each source alone is below CODE's R too (" if all(v["R"] < decomp["CODE"].R for v in by_src.values())
           else "; each source alone: (")
        + ", ".join(f"{s} {v['R']:.2f}" for s, v in by_src.items())
        + "). "
        + ("Without the source term our books come after code, as in the published ordering."
           if within["ci"][1] is not None and within["ci"][1] < 0 else
           "Without the source term the point estimates put our books after code, as in the published "
           "ordering, but the interval of the difference still includes 0: these 16 documents do not settle it."))
if {"PAPERS", "CODE"} <= set(decomp) and resamples:
    pc = dr("PAPERS", "CODE")
    rp = top_loo[top_loo.corpus == "PAPERS"].iloc[0]
    ordering_facts["PAPERS_minus_CODE"] = {"pooled": pc, "top_doc": robust["PAPERS"]["top_title"],
                                           "R_without_top": rp["R_without"]}
    resolved = pc["ci"][0] is not None and pc["ci"][0] > 0
    still = rp["R_without"] > decomp["CODE"].R
    olines.append(
        ("- **PAPERS above CODE is not one document.** " if resolved and still else "- **PAPERS against CODE.** ")
        + f"PAPERS's R exceeds CODE's in {pc['frac_greater']:.0%} of the draws (difference "
        f"{ci_text(pc['ci']).strip()}); without its most influential document "
        f"({robust['PAPERS']['top_title']}) PAPERS's R is {rp['R_without']:.2f}, "
        + ("still above" if still else "below") + f" CODE's {decomp['CODE'].R:.2f}."
        + (" This swap against the published ordering stands in our data." if resolved and still else ""))
if "CODE" in cells_by and len(final):
    pub_code = final[final.corpus == "CODE"].set_index("model_label")
    ordering_facts["CODE_rho_long"] = {"ours": cells_by["CODE"].all.rho_long,
                                       **{lab: float(v) for lab, v in pub_code["rho_long"].items()}}
    olines.append(
        f"- **Our code is less correlated than the published code.** CODE's ρ_long is "
        f"{cells_by['CODE'].all.rho_long:.3f} here against "
        + " and ".join(f"{v:.3f} ({lab})" for lab, v in pub_code["rho_long"].items())
        + ". What differs, and is not separated here: the material (one Python package per document, its "
          "`.py` files in path order with tests removed, against repositories concatenated by repository "
          "from The Stack), the model (an instruction-tuned 135M model with Q4_1-rounded weights against "
          "pretrained 410M-1.4B base models) and the tokenizer. Telling them apart needs the published corpora "
          "through this model (`docgrad corpora hub`) or these corpora through the published models.")
display(Markdown("\n".join(olines)))

# %% [markdown]
# ## What it means for a batch
#
# The same numbers in plain words ($N/R$ effective independent chunks in a block of $N$ chunks):

# %%
display(Markdown("\n".join(f"- {s}" for s in tables.reading(report)) or "- no cells to read"))
notes = tables.effective_chunks_notes(report)
if notes:
    display(Markdown("\n".join(f"- {s}" for s in notes)))
rel = tables.r_rel_frame(report)
rel

# %% [markdown]
# ## R_rel is not like for like
#
# $R_\text{rel}$ divides a corpus's $R$ by its control's. The two studies' controls are different material:
# packed FineWeb web documents there, short Debian package descriptions here (notebook 03, *What was
# measured*). Each $R$ is relative to shuffled chunks of its own corpus, so $R$ itself is the number to compare
# across the studies; and for the absolute noise of a 16K block of a corpus against one of the control,
# $R_\text{rel}$ needs the ratio of the per-chunk noise variances, $\sigma^2/\sigma^2_\text{control}$.

# %%
lfl = tables.like_for_like_frame(report, published.cells())
lfl = lfl[lfl["corpus"].isin(order)].reset_index(drop=True)
lfl_show = lfl.assign(block_noise_ratio=lfl["R_rel"] * lfl["sigma2_ratio"])
lfl_show

# %% tags=["hide-input"]
like = {}
if CONTROL in cells_by and len(lfl):
    ours_c = lfl[(lfl.source == label) & (lfl.corpus == CONTROL)]["R_16K"].iloc[0]
    pub_c = lfl[lfl.source != label].drop_duplicates("source").set_index("source")["control_R_16K"]
    sig = lfl[(lfl.corpus != CONTROL)].pivot(index="corpus", columns="source", values="sigma2_ratio")
    like = {"control_R_ours": ours_c, "control_R_ci_ours": list(cells_by[CONTROL].all.R_16K_ci),
            "control_R_published": pub_c.to_dict(), "sigma2_ratio": sig.to_dict()}
    lo_p, hi_p = float(pub_c.min()), float(pub_c.max())
    like["inflation"] = [lo_p / ours_c, hi_p / ours_c]
    display(Markdown(
        f"- Our control's R(16K) is {ours_c:.2f}{ci_text(like['control_R_ci_ours'])}; the published controls' "
        + ", ".join(f"{v:.2f} ({s.replace(' (published)', '')})" for s, v in pub_c.items())
        + f". So our R_rel divides by about {ours_c:.2f} and the published by {lo_p:.2f}-{hi_p:.2f}: a corpus with "
          f"the same R would get an R_rel {like['inflation'][0]:.2f}-{like['inflation'][1]:.2f} times larger "
          "here. Our R_rel is nearly our R, so beside a published R_rel it looks larger by that factor than "
          "the same R would there.\n"
        + f"- Compare R(16K) directly (table above) and, for absolute noise, the noise-variance ratios "
          f"σ²/σ²_control: ours "
        + ", ".join(f"{k} {v:.2f}" for k, v in sig[label].items() if np.isfinite(v))
        + "; published "
        + "; ".join(f"{s.replace(' (published)', '')}: " + ", ".join(f"{k} {v:.2f}" for k, v in sig[s].items())
                    for s in sig.columns if s != label)
        + ". R_rel × σ²/σ²_control (last column) is the noise of a 16K block of the corpus relative to one of "
          "the control at the same model."))

# %% [markdown]
# ## B_simple: shuffled chunks vs contiguous blocks
#
# The gradient noise scale $B_\text{simple} = C\sigma^2/S_\text{cross}$ ([McCandlish et al. 2018](#References))
# is the batch size (in tokens) beyond which larger batches give diminishing returns, for batches of
# independent (shuffled) chunks. With document-contiguous 16K blocks it is $R(16\text{K})$ times larger. It
# needs $S_\text{cross} > 0$ resolved (gate G3); where that fails, read these bars as undetermined. Error bars:
# 95% document-bootstrap intervals (for the contiguous value, of $R \cdot B_\text{simple}$ over the same draws).

# %%
cf = tables.cells_frame(report)
bsf = pd.concat([tables.b_simple_frame(r, decomps[lab], final[final["corpus"].isin(order)] if lab == label
                                       else final.iloc[0:0]) for lab, r in reports.items()], ignore_index=True)
ours_b = bsf[bsf.source == label]
bs = pd.concat([ours_b.assign(batching="shuffled 512-token chunks", tokens=ours_b["B_simple_shuf"],
                              lo=ours_b["shuf_lo"], hi=ours_b["shuf_hi"]),
                ours_b.assign(batching="contiguous 16K blocks", tokens=ours_b["B_simple_contig_16K"],
                              lo=ours_b["contig_lo"], hi=ours_b["contig_hi"])])[["corpus", "batching", "tokens", "lo", "hi"]]
bs = bs[bs["tokens"] > 0]
batching = ["shuffled 512-token chunks", "contiguous 16K blocks"]
bbase = alt.Chart(bs)
chart_B = alt.layer(
    bbase.mark_bar().encode(
        x=alt.X("corpus:N", sort=order, title=None), xOffset=alt.XOffset("batching:N", sort=batching),
        y=alt.Y("tokens:Q", stack=None, title="B_simple (tokens)"),
        color=alt.Color("batching:N", sort=batching, title=None),
        tooltip=["corpus:N", "batching:N", alt.Tooltip("tokens:Q", format=",.0f"),
                 alt.Tooltip("lo:Q", format=",.0f", title="95% lo"), alt.Tooltip("hi:Q", format=",.0f", title="95% hi")]),
    bbase.mark_errorbar(ticks=True, color="black").encode(
        x=alt.X("corpus:N", sort=order), xOffset=alt.XOffset("batching:N", sort=batching),
        y=alt.Y("lo:Q", title="B_simple (tokens)"), y2="hi:Q"),
).properties(width=380, height=260)
if len(bs):
    display(save_chart(chart_B, "04_B_simple", figures_dir))
else:
    display(Markdown("No B_simple to show: no cells, or S_cross is not positive in any."))
cf[["corpus", "S_cross", "S_cross_lo", "S_cross_hi", "sigma2", "B_simple_shuf_tokens", "B_simple_contig_16K_tokens"]]

# %% [markdown]
# ### Beside the published values, and why ours are so much smaller
#
# Log scale; ours with intervals, the published final checkpoints without (none were published for
# $B_\text{simple}$). $B_\text{simple} = C(1/s - 1)$ with $s = S_\text{cross}/(S_\text{cross} + \sigma^2)$,
# the share of a chunk gradient's expected squared norm that is the mean gradient: a larger mean-gradient
# share is a smaller $B_\text{simple}$.

# %%
pick3 = legend_pick()
bx = alt.X("source:N", title=None, sort=list(dict.fromkeys(bsf["source"])))
by = alt.Y("B_simple_shuf:Q", title="B_simple, shuffled chunks (tokens)", scale=alt.Scale(type="log"))
chart_Bp = alt.layer(   # points first: the layer that draws the colour legend holds the selection
    alt.Chart(bsf).mark_point(filled=True, size=70).encode(
        x=bx, y=by, xOffset="corpus:N", color=color, opacity=highlight(pick3, 1.0, 0.15),
        tooltip=["source:N", "corpus:N", alt.Tooltip("B_simple_shuf:Q", format=",.0f"),
                 alt.Tooltip("shuf_lo:Q", format=",.0f", title="95% lo"),
                 alt.Tooltip("shuf_hi:Q", format=",.0f", title="95% hi"),
                 alt.Tooltip("mean_gradient_share:Q", format=".4f", title="S/(S+σ²)")]).add_params(pick3),
    alt.Chart(bsf).mark_errorbar(ticks=True).encode(x=bx, y=alt.Y("shuf_lo:Q", title="B_simple, shuffled chunks (tokens)"), y2="shuf_hi:Q",
                                                      xOffset="corpus:N",
                                                      color=color, opacity=highlight(pick3, 0.9, 0.1)),
).properties(width=420, height=280)
display(save_chart(chart_Bp, "04_B_simple_vs_published", figures_dir))
bsf[["source", "corpus", "B_simple_shuf", "shuf_lo", "shuf_hi", "B_simple_contig_16K", "contig_lo", "contig_hi",
     "mean_gradient_share", "share_lo", "share_hi"]]

# %% tags=["hide-input"]
b_facts = {}
if len(ours_b):
    pub_b = bsf[~bsf.source.isin(model_order)]
    try:
        cell0 = study.cell(page_models[0], present[0])
        gshares = {k: decomposition.group_shares(study.cell(page_models[0], k).sums, chunk,
                                                 [g for g in GROUPS if g in cell0.sums])["other"]["S_cross"]
                   for k in present} if "other" in cell0.sums else {}
        gsize = cell0.shards[0].meta.get("group_sizes", {})
    except Exception as e:  # group data unavailable: leave the sentence out
        gshares, gsize = {}, {}
    b_facts = {"ours_shuf": [float(ours_b["B_simple_shuf"].min()), float(ours_b["B_simple_shuf"].max())],
               "published_shuf": [float(pub_b["B_simple_shuf"].min()), float(pub_b["B_simple_shuf"].max())]
               if len(pub_b) else None,
               "ours_share": [float(ours_b["mean_gradient_share"].min()), float(ours_b["mean_gradient_share"].max())],
               "published_share": [float(pub_b["mean_gradient_share"].min()), float(pub_b["mean_gradient_share"].max())]
               if len(pub_b) else None,
               "other_share_of_S_cross": gshares, "group_sizes": gsize,
               "share_by_model": {lab: [float(g["mean_gradient_share"].min()), float(g["mean_gradient_share"].max())]
                                  for lab, g in bsf[bsf.source.isin(model_order)].groupby("source", sort=False)}}
    text = (f"- **Ours is {b_facts['ours_shuf'][0]:,.0f} to {b_facts['ours_shuf'][1]:,.0f} tokens** for shuffled "
            f"chunks" + (f"; the published final checkpoints have {b_facts['published_shuf'][0]:,.0f} to "
                         f"{b_facts['published_shuf'][1]:,.0f}." if b_facts["published_shuf"] else ".")
            + f"\n- **The mean-gradient share** S_cross/(S_cross + σ²) is {b_facts['ours_share'][0]:.3f} to "
              f"{b_facts['ours_share'][1]:.3f} here"
            + (f" against {b_facts['published_share'][0]:.3f} to {b_facts['published_share'][1]:.3f} published"
               if b_facts["published_share"] else "")
            + ": the chunks of this model share a large mean gradient.")
    if gshares and "other" in gsize:
        text += (f"\n- **Much of it sits on the norm weights.** The *other* group ({gsize['other']:,} weights, "
                 f"{gsize['other'] / sum(gsize.values()):.3%} of the parameters; the only tensors the model file "
                 f"stores unrounded, notebook 03) carries "
                 + ", ".join(f"{k} {v:.0%}" for k, v in gshares.items()) + " of S_cross.")
    others = {lab: v for lab, v in b_facts["share_by_model"].items() if lab != label}
    if others:
        text += ("\n- **The other model.** " + "; ".join(
            f"{lab}'s mean-gradient share is {lo:.3f} to {hi:.3f}" for lab, (lo, hi) in others.items())
            + (f", against {label}'s {b_facts['ours_share'][0]:.3f} to {b_facts['ours_share'][1]:.3f}"
               + (f" and the published {b_facts['published_share'][0]:.3f} to {b_facts['published_share'][1]:.3f}"
                  if b_facts["published_share"] else "") + "."))
    text += ("\n- **Reading it.** A model whose matrices are 4-bit rounded is not at a minimum of the plain-text "
             "loss; a consistent mean gradient, much of it on the unrounded norm gains, is what that looks like. "
             "Gemma-3-270M is a base model, rounded too: where its share is also far above the published "
             "full-precision models', instruction tuning alone does not explain SmolLM2's, but rounding and "
             "model size are not separated here (that needs the unquantised files). B_simple here describes "
             "these rounded models, not a batch size for training; R uses S_cross only to centre the noise, and "
             "is less affected.")
    display(Markdown(text))

# %% [markdown]
# ## The published study through training
#
# The published study measured its models at several checkpoints (`docgrad.results.published.through_training`; some
# early 1B-class cells hold fewer documents, see the tooltips). Ours is one checkpoint of one model, so it has
# no such series.

# %%
tt = published.through_training()
tt = tt[tt["corpus"].isin(order)]
pick4 = legend_pick()
xt = alt.X("frac_training:Q", title="fraction of training", scale=alt.Scale(type="log", nice=False),
           axis=alt.Axis(values=sorted(tt["frac_training"].unique().tolist()), format=".1%"))
tbase = alt.Chart(tt)
chart_tt = alt.layer(   # the line first: the layer that draws the colour legend holds the selection
    tbase.mark_line(point=True).encode(
        x=xt, y=alt.Y("R_16K:Q", title="R(16K)"), color=color, opacity=highlight(pick4),
        tooltip=["model_label:N", "revision:N", "corpus:N", "n_docs:Q", alt.Tooltip("frac_training:Q", format=".4f"),
                 alt.Tooltip("R_16K:Q", format=".3f"), alt.Tooltip("lo:Q", format=".3f"),
                 alt.Tooltip("hi:Q", format=".3f")]).add_params(pick4),
    tbase.mark_errorbar(ticks=True).encode(x=xt, y=alt.Y("lo:Q", title="R(16K)"), y2="hi:Q", color=color,
                                           opacity=highlight(pick4, 0.7, 0.08)),
).properties(width=230, height=220).facet(column=alt.Column("model_label:N", title=None,
                                                            sort=["Pythia-410M", "Pythia-1.4B", "OLMo-2-1B"]))
display(save_chart(chart_tt, "04_published_through_training", figures_dir))

# %% tags=["hide-input"]
tt_orders = {f"{r.model_label} {r.frac_training:.1%}": tables.ordering(dict(zip(g["corpus"], g["R_16K"])))
             for r, g in ((g.iloc[0], g) for _, g in tt.groupby(["model", "frac_training"], sort=True))}
p410 = [o for k, o in tt_orders.items() if k.startswith("Pythia-410M")]
n_ckpt = tt.groupby("model_label")["revision"].nunique().to_dict()
display(Markdown(
    "Checkpoints: " + ", ".join(f"{k} {v}" for k, v in n_ckpt.items()) + ". Ordered by R(16K) at each "
    "checkpoint (fraction of training):\n\n" + "\n".join(f"- {k}: {o}" for k, o in tt_orders.items())
    + (f"\n\nPythia-410M has the same ordering at all {len(p410)} checkpoints." if p410 and len(set(p410)) == 1
       else "")))

# %% [markdown]
# ## Gates and verdict
#
# Each gate checks an assumption the headline depends on. A failing gate is reported as a finding, not
# tuned away: G1 (the count sketch is faithful), G2 (the control has no long-range correlation:
# R(16K) < 1.2 and ρ_long < 0.01), G3 (the mean gradient is resolved, so B_simple is defined). Gates are
# evaluated on the cells this page shows (definitions: [docs/methods.md](../docs/methods.md#gates-and-verdict)).

# %%
gates_table = pd.concat([tables.gates_frame(r).assign(model=lab) for lab, r in reports.items()],
                        ignore_index=True)[["model", "gate", "status", "measured", "meaning"]]
with pd.option_context("display.max_colwidth", 200):
    display(gates_table)
display(Markdown("\n\n".join(f"**{lab} — verdict: {r.verdict}**\n" + "".join(f"\n- {d}" for d in r.verdict_detail)
                             for lab, r in reports.items())))

# %% [markdown]
# ## Limitations
#
# - **Standalone chunks are a proxy.** Each 512-token chunk was run as its own sequence. In real 16K-context
#   training every chunk attends to the ones before it, which can change both the gradients and their
#   correlation. Page 06 (`06_causal_context`) measures those causal gradients over the first 4,096 tokens of
#   every document and compares ρ(Δ) and R(W′) with the standalone ones on the same tokens, with paired
#   intervals; the 16K windows of this page were measured standalone only.
# - **Training-data overlap.** The model may have seen some of these documents (public-domain books, popular
#   open-source code, package documentation) during training; memorised text has unusually small and
#   possibly more similar gradients.
# - **The models are rounded.** SmolLM2's weights are the Q4_1-rounded weights of an instruction-tuned
#   model, Gemma's the Q4_K_M-rounded weights of a base model; the large mean gradient and small
#   $B_\text{simple}$ above are properties of such models, and the published base models at full precision
#   may differ in $\rho$ too.
# - **Sixteen documents are fewer independent draws than they look.** Where documents share a source (most
#   BOOKS documents do) the source, not the document, is the unit of independence, and the
#   document-bootstrap interval is too narrow for a claim about the kind of text (see *How robust is it*).
#   A few documents move each corpus's R noticeably (notebook 03, leave one out).
# - **The control is not the published control.** Ours packs short, unrelated package descriptions with a
#   separator, several per chunk; the published one packs web documents. Ours has almost no correlation
#   at any lag (notebook 03), so its $R_\text{rel}$ is nearly its $R$ and is not comparable with the published
#   $R_\text{rel}$; compare $R$.
# - **Two small models, each at one checkpoint.** SmolLM2-135M-Instruct and Gemma-3-270M, both 4-bit rounded;
#   the published Pythia/OLMo rows show how the effect looked at 1B scale and through training. The sections
#   from *What drives each corpus's R* to *B_simple* read the first model of the page in depth; the other
#   model appears in the R(W) panels, the headline table, the ordering comparison, the per-group table,
#   the B_simple comparison and the gates.

# %%
numbers = {"results_dir": results_dir, "model": model, "revision": revision, "chunk": chunk,
           "resamples": resamples, "seed": seed, "synthetic": synthetic, "missing": missing,
           "cells": [{"corpus": c.corpus, "n_docs": c.n_docs,
                      **{k: c.all.to_json().get(k) for k in ("R", "R_ci", "R_16K", "R_16K_ci", "B_simple_shuf_tokens",
                                                             "B_simple_shuf_ci", "B_simple_contig_tokens", "S_cross",
                                                             "S_cross_ci", "sigma2")}}
                     for c in report.cells],
           "R_rel": report.R_rel, "reading": tables.reading(report),
           "gates": {k: {"status": g["status"], "summary": g["summary"]} for k, g in report.gates.items()},
           "verdict": report.verdict, "verdict_detail": report.verdict_detail,
           "models": [m.__dict__ for m in page_models],
           "by_model": {lab: {"cells": [{"corpus": c.corpus, "n_docs": c.n_docs, "R_16K": c.all.R_16K,
                                         "R_16K_ci": list(c.all.R_16K_ci), "rho_long": c.all.rho_long}
                                        for c in r.cells],
                              "R_rel": [x.to_json() for x in r.R_rel], "missing": pages[lab][1],
                              "gates": {k: {"status": g["status"], "summary": g["summary"]}
                                        for k, g in r.gates.items()},
                              "verdict": r.verdict, "verdict_detail": r.verdict_detail}
                        for lab, r in reports.items()},
           "model_comparison": {**model_cmp, "lines": comparison.describe(model_cmp)},
           "groups_by_model": groups_by_model.to_dict("records"), "group_facts": group_facts,
           "group_sizes_by_model": group_sizes_by_model,
           "R_orders": R_orders, "decomposition": {k: d.to_json() for k, d in decomp.items()}, "drivers": drive,
           "robustness": robust, "ordering": ordering_facts, "effective_chunks_notes": notes,
           "like_for_like": lfl_show.to_dict("records"), "like_for_like_summary": like,
           "B_simple": bsf.to_dict("records"), "B_simple_summary": b_facts,
           "published_through_training": tt.to_dict("records"), "published_orders_through_training": tt_orders,
           "published_checkpoints": n_ckpt}
_ = save_numbers("04_design_effect", numbers, figures_dir)

# %% [markdown]
# ## References
#
# - Yang, H. (2026). *Long documents make your batch smaller than it looks: measuring within-document gradient
#   correlation* (doc-batch-gradients). Zenodo. [doi:10.5281/zenodo.23268861](https://doi.org/10.5281/zenodo.23268861).
#   The study this page repeats; its numbers are in `data/published/`.
# - Kish, L. (1965). *Survey Sampling*. New York: Wiley. (Design effect.)
# - McCandlish, S., Kaplan, J., Amodei, D., & OpenAI Dota Team (2018). *An Empirical Model of Large-Batch
#   Training*. [arXiv:1812.06162](https://arxiv.org/abs/1812.06162). (Gradient noise scale $B_\text{simple}$.)
# - Efron, B., & Tibshirani, R. J. (1993). *An Introduction to the Bootstrap*. New York: Chapman & Hall.
#   (Bootstrap and jackknife.)
# - Davison, A. C., & Hinkley, D. V. (1997). *Bootstrap Methods and their Application*. Cambridge University
#   Press. (Resampling the top level of hierarchical data: the source-clustered bootstrap.)
# - Searle, S. R., Casella, G., & McCulloch, C. E. (1992). *Variance Components*. New York: Wiley. (Nested
#   random effects: the source / document / chunk parts of R.)

# %%
versions()
