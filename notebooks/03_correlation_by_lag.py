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
# # How far apart do a document's gradients stay correlated?
#
# Two 512-token chunks of the same document: how similar are their gradients, as a function of the distance
# between them? This page reads the Gram matrices the probe measured on two models (SmolLM2-135M-Instruct and
# Gemma-3-270M base, by default) for books, code, papers and a packed control of short texts, and shows the
# correlation of the gradient noise of two chunks of one document from 512 to 15,872 tokens apart, beside the
# published Pythia and OLMo curves ([Yang 2026](#References)), per parameter group, per document and per
# source (author, work, project), and what was measured: the models, the control and the documents.
#
# The probe (`docgrad probe`) writes one Gram file per cell; this page pools the shards of each cell and
# computes the same-document gradient-noise correlation
#
# $$\rho(\Delta) = \frac{\overline{K}_{\text{same doc, lag }\Delta} - S_\text{cross}}{\sigma^2},\qquad
# S_\text{cross} = \overline{K}_{\text{different docs}} \approx |G|^2,\quad \sigma^2 = \overline{K_{ii}} - S_\text{cross},$$
#
# where $K$ is the Gram matrix of per-chunk gradients (exact squared norms on its diagonal). Subtracting
# $S_\text{cross}$ removes what every chunk shares with the corpus mean gradient $G$, so $\rho$ is the
# correlation of the *noise* around it. Bands are 95% document-bootstrap intervals (documents are resampled;
# a document drawn twice never pairs with its own copy; [Efron & Tibshirani 1993](#References)).
# Definitions: [docs/methods.md](../docs/methods.md#estimators).

# %% tags=["parameters"]
results_dir = "data/results"  # directory of result files (searched recursively)
models = ["smollm2-135m", "gemma3-270m"]  # offline model names or '<id>@<revision>'; the first is read in depth
corpora = ["BOOKS", "CODE", "PAPERS", "WEB"]  # corpora to show, in this order
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

from docgrad.corpora import build as corpora_mod
from docgrad.core import decomposition
from docgrad.corpora import provenance
from docgrad.measure import model_facts
from docgrad.results import published
from docgrad.results.format import parse_docs
from docgrad.results.study import Study
from docgrad.presentation import tables
from docgrad import models as model_registry
from docgrad.presentation.charts import corpus_color, highlight, legend_pick
from docgrad.core.constants import CONTROL, GROUPS

# %% [markdown]
# ## The cells
#
# One cell is (model, revision, corpus, chunk). Which of the requested cells exist in the results directory,
# per model (the first model of `models` is read in depth from *Which documents carry the correlation* on):

# %%
page_models = model_registry.result_models(models)
study = Study(results_dir, resamples, seed, chunk, docs=parse_docs(documents))   # reads the result files once
pages = {m.label: study.page(m, corpora) for m in page_models}
reports = {lab: rep for lab, (rep, _) in pages.items()}
model_order = list(reports)
label = page_models[0].label
model, revision, manifest = page_models[0].model, page_models[0].revision, page_models[0].manifest
report, missing = pages[label]
present = [c.corpus for c in report.cells]
synthetic = any(c.synthetic for r in reports.values() for c in r.cells)
order = list(corpora)
lines = [f"- results directory: `{results_dir}` (documents {documents}); C = {chunk} tokens"]
for m in page_models:
    rep_m, miss_m = pages[m.label]
    lines.append(f"- **{m.label}** (`{m.model}` at `{m.revision}`): cells present "
                 f"{', '.join(c.corpus for c in rep_m.cells) or 'none'}; missing {', '.join(miss_m) or 'none'}"
                 + (" (no result files for them yet: `make probe MODEL=...`, see README)" if miss_m else ""))
if synthetic:
    lines.append("- **these result files are SYNTHETIC** (docgrad.results.synthetic): the numbers below illustrate the "
                 "pipeline, they are not measurements")
display(Markdown("\n".join(lines)))
cells = pd.concat([tables.cells_frame(r).assign(model_label=lab) for lab, r in reports.items()],
                  ignore_index=True)
cells[["model_label", "corpus", "n_docs", "S_cross", "sigma2", "rho_long", "rho_long_lo", "rho_long_hi", "loss_mean"]]

# %%
# the source/document/chunk decomposition, leave-one-out influence and source-clustered bootstrap of every cell
# (docgrad.core.decomposition; the document bootstrap draws are those behind the intervals above)
man = study.manifest(page_models[0])          # without a manifest every document is its own source
decomp = study.decompositions(page_models[0], present)

# %% [markdown]
# ## ρ(Δ) by distance, per corpus
#
# Hover a point for its value and interval; click a corpus in the legend to highlight it (shift-click for
# several). The grey span marks the lags averaged into $\rho_\text{long}$ (2,048 ≤ Δ < 16,384 tokens).

# %%
rho = pd.concat([tables.rho_frame(r) for r in reports.values()], ignore_index=True)
rho["model_label"] = rho["model"].map(model_registry.model_label)
rho_all = rho[rho["group"] == "all"]
pick = legend_pick()
color = corpus_color(order)
x = alt.X("lag_tokens:Q", title="distance Δ between chunks (tokens)", scale=alt.Scale(domainMin=0))
tip = [alt.Tooltip("corpus:N"), alt.Tooltip("lag_tokens:Q", title="lag (tokens)"),
       alt.Tooltip("rho:Q", format=".4f", title="ρ"), alt.Tooltip("lo:Q", format=".4f", title="95% lo"),
       alt.Tooltip("hi:Q", format=".4f", title="95% hi")]
long_span = alt.Chart(pd.DataFrame({"a": [2048], "b": [16384]})).mark_rect(color="#eee").encode(x="a:Q", x2="b:Q")
zero = alt.Chart(pd.DataFrame({"y": [0]})).mark_rule(color="grey").encode(y="y:Q")
band = alt.Chart().mark_area(opacity=0.2).encode(
    x=x, y="lo:Q", y2="hi:Q", color=color, opacity=highlight(pick, 0.25, 0.03)).add_params(pick)
line = alt.Chart().mark_line(point=True).encode(
    x=x, y=alt.Y("rho:Q", title="ρ(Δ)"), color=color, tooltip=tip,
    opacity=highlight(pick, 1.0, 0.15))
chart_rho = alt.layer(long_span, zero, band, line).properties(width=380, height=300).facet(   # data: each panel's rows
    column=alt.Column("model_label:N", title=None, sort=model_order), data=rho_all)
display(save_chart(chart_rho, "03_rho_by_lag", figures_dir))

# %% [markdown]
# ### What the plateau means
#
# Beyond the first few lags the curves flatten into a plateau or a slow decline. If $\rho(\Delta)$ were
# the same constant $\rho$ at every lag, the design effect of a block of $m$ chunks would be Kish's
# $R = 1 + (m-1)\rho$
# ([Kish 1965](#References)): each of the other $m-1$ chunks of the block repeats a fraction $\rho$ of a
# chunk's noise. So a plateau $\rho_\text{long}$ that does not decay within the span adds
# $(m-1)\rho_\text{long}$ to $R(16\text{K})$ ($m = 32$); the rest, $R - 1 - (m-1)\rho_\text{long}$, comes
# from the lags where $\rho$ differs from its plateau, mostly the first few, above it. A plateau is a part of the noise that a chunk shares with every other chunk of its document however
# far apart: a property of the document (its subject, style, vocabulary, or the source it comes from), not of
# local context.

# %% tags=["hide-input"]
plateau = tables.plateau_frame(report)
plateau_lines = []
for _, r in plateau.iterrows():
    if r["R"] is None or not np.isfinite(r["R"]):
        continue
    plateau_lines.append(
        f"- **{r['corpus']}**: ρ(512) = {r['rho_first']:+.3f}, ρ_long = {r['rho_long']:+.4f}; the plateau alone "
        f"gives 1 + {r['m'] - 1} × {r['rho_long']:.4f} = {r['plateau']:.2f}, the measured R(16K) is "
        f"{r['R']:.2f}, so the lags off the plateau add {r['short_range']:+.2f}"
        + (f" (the plateau is {r['plateau_share']:.0%} of R − 1)" if r["R"] > 1.2 else
           " (R is close to 1: there is almost nothing to split)"))
display(Markdown("\n".join(plateau_lines) or "- no cells"))
plateau

# %% [markdown]
# ## Beside the published Pythia-1.4B and OLMo-2-1B curves
#
# The published study measured the same quantity on Pythia and OLMo checkpoints (final checkpoints shown)
# with PG-19 books, code repositories, arXiv and packed FineWeb. Its corpora are matched to ours by kind:
# `docgrad.results.published.PUBLISHED_TO_OURS`. The material differs (see *What was measured* below), so compare
# shapes and orderings, not digits.

# %%
display(pd.DataFrame(list(published.PUBLISHED_TO_OURS.items()), columns=["published corpus", "ours"]))
both = published.beside_ours(rho_all, published.rho_by_lag(), None, "lag_tokens")
both = both[both["corpus"].isin(order)]
pick2 = legend_pick()
chart_cmp = alt.Chart(both).mark_line(point=alt.OverlayMarkDef(size=18)).encode(
    x=alt.X("lag_tokens:Q", title="Δ (tokens)"), y=alt.Y("rho:Q", title="ρ(Δ)"), color=color,
    opacity=highlight(pick2),
    tooltip=["source:N", "corpus:N", "lag_tokens:Q", alt.Tooltip("rho:Q", format=".4f")],
).add_params(pick2).properties(width=260, height=220).facet(
    column=alt.Column("source:N", title=None, sort=list(dict.fromkeys(both["source"]))))
display(save_chart(chart_cmp, "03_rho_vs_published", figures_dir))

# %% tags=["hide-input"]
final = published.final_checkpoints()
rho_long_orders = {lab: {c.corpus: c.all.rho_long for c in r.cells} for lab, r in reports.items()}
for lab, g in final.groupby("model_label", sort=False):
    rho_long_orders[f"{lab} (published)"] = {k: v for k, v in zip(g["corpus"], g["rho_long"]) if k in order}
display(Markdown(
    "Ordered by $\\rho_\\text{long}$:\n\n" + "\n".join(f"- {src}: {tables.ordering(v, 3)}"
                                                       for src, v in rho_long_orders.items())
    + "\n\n" + ("The published curves put code first for every model shown; "
                 + (", ".join(f"{lab} puts {max(rho_long_orders[lab], key=rho_long_orders[lab].get)} first"
                              for lab in model_order if rho_long_orders[lab]) + ". ")
                 if all(max(v, key=v.get) == "CODE" for s_, v in rho_long_orders.items() if s_.endswith("(published)"))
                 else "")
    + "Notebook 04 reads the ordering of R(16K) against the published one and says which of the reasons the "
      "data can support."))

# %% [markdown]
# ## Per parameter group
#
# The gradient splits into attention, MLP, embedding (with the tied LM head) and the rest: for both models
# *other* is exactly the norm weight vectors. Each group has its own Gram, so each gets its own
# $S_\text{cross}$, $\sigma^2$ and ρ(Δ); the curves above are for the sum ("all"), which weights each group by
# its share of the noise variance. One row of panels per model.

# %%
rho_groups = rho[rho["group"] != "all"]
row_model = alt.Row("model_label:N", title=None, sort=model_order)
pick3 = legend_pick()
chart_groups = alt.Chart(rho_groups).mark_line().encode(
    x=alt.X("lag_tokens:Q", title="Δ (tokens)"), y=alt.Y("rho:Q", title="ρ(Δ)"), color=color,
    opacity=highlight(pick3),
    tooltip=["group:N", "corpus:N", "lag_tokens:Q", alt.Tooltip("rho:Q", format=".4f"),
             alt.Tooltip("lo:Q", format=".4f"), alt.Tooltip("hi:Q", format=".4f")],
).add_params(pick3).properties(width=200, height=160).facet(column=alt.Column("group:N", title="parameter group"),
                                                           row=row_model)
display(save_chart(chart_groups, "03_rho_by_group", figures_dir))
group_long_all = pd.concat([tables.group_frame(r) for r in reports.values()], ignore_index=True)
group_long = group_long_all[group_long_all["model"] == label]
(group_long_all.pivot_table(index=["model", "corpus"], columns="group", values="rho_long", sort=False)
 if len(group_long_all) else group_long_all)

# %% tags=["hide-input"]
cells_by = {k: c for k, c in ((c.corpus, c) for c in report.cells)}
group_share_by_model, group_sizes_by_model = {}, {}
for m in page_models:
    shares = {}
    for c in reports[m.label].cells:
        cell = study.cell(m, c.corpus)
        group_sizes_by_model.setdefault(m.label, cell.shards[0].meta.get("group_sizes", {}))
        shares[c.corpus] = decomposition.group_shares(cell.sums, chunk, [g for g in GROUPS if g in cell.sums])
    group_share_by_model[m.label] = shares
group_share, group_sizes = group_share_by_model.get(label, {}), group_sizes_by_model.get(label, {})
share_lines = []
for lab, shares in group_share_by_model.items():
    sizes = group_sizes_by_model.get(lab, {})
    other = {k: d["other"]["S_cross"] for k, d in shares.items() if "other" in d}
    emb = {k: d["embed"]["sigma2"] for k, d in shares.items() if "embed" in d}
    g = group_long_all[group_long_all["model"] == lab]
    spread = {k: (float(v.rho_long.min()), float(v.rho_long.max())) for k, v in g.groupby("corpus", sort=False)}
    if not shares:
        continue
    share_lines.append(
        f"- **{lab}**: the *other* group (the norm weights"
        + (f", {sizes['other'] / sum(sizes.values()):.3%} of the parameters: {sizes['other']:,} of "
           f"{sum(sizes.values()):,}" if "other" in sizes else "")
        + ") carries " + ", ".join(f"{k} {v:.0%}" for k, v in other.items()) + " of $S_\\text{cross}$; the embedding"
        + (f" ({sizes['embed'] / sum(sizes.values()):.0%} of the parameters)" if "embed" in sizes else "")
        + " carries " + ", ".join(f"{k} {v:.0%}" for k, v in emb.items()) + " of $\\sigma^2$. ρ_long by group ranges "
        + "; ".join(f"{k} {lo:+.3f} to {hi:+.3f}" for k, (lo, hi) in spread.items()) + ".")
if share_lines:
    display(Markdown(
        "Each group's share of the mean-gradient term $S_\\text{cross}$ and of the noise $\\sigma^2$ (they add "
        "up to 1 over the groups); notebook 04 discusses what the norm weights' share says about the models.\n\n"
        + "\n".join(share_lines)))
    gs = pd.DataFrame([{"model": lab, "corpus": k, "group": g, "share of S_cross": v["S_cross"], "share of σ²": v["sigma2"]}
                       for lab, shares in group_share_by_model.items() for k, d in shares.items() for g, v in d.items()])
    display(gs.pivot_table(index=["model", "corpus"], columns="group", values=["share of S_cross", "share of σ²"],
                           sort=False).round(3))

# %% [markdown]
# ## Which documents carry the correlation
#
# $\rho_\text{long}$ of each document on its own (with its cell's $S_\text{cross}$ and $\sigma^2$). A corpus
# mean driven by a few documents shows as a long upper tail here; hover a point for the document.

# %%
doc_tables = []  # the measured documents of each corpus, from the manifest (titles here, the full table below)
for k in corpora:
    try:
        t = corpora_mod.corpus_table(manifest, corpora=[k])
        doc_tables.append(t[t["doc"].isin(cells_by[k].doc_ids)] if k in cells_by else t)   # the measured ones
    except Exception as e:  # not in this manifest (e.g. someone else's result files): document numbers only
        print(f"{k}: not in the corpus manifest ({type(e).__name__}: {e})")
corpus_docs = pd.concat(doc_tables, ignore_index=True) if doc_tables else pd.DataFrame(columns=["corpus", "doc", "title"])
per_doc = tables.per_doc_frame(report).merge(corpus_docs[["corpus", "doc", "title"]], on=["corpus", "doc"],
                                            how="left").fillna({"title": ""})
pick4 = legend_pick()
strip = alt.Chart(per_doc).mark_circle(size=60).encode(
    x=alt.X("corpus:N", sort=order, title=None), y=alt.Y("rho_long:Q", title="per-document ρ_long"),
    xOffset=alt.XOffset("doc:N", title="document"), color=color,
    opacity=highlight(pick4, 0.9, 0.1),
    tooltip=["corpus:N", "doc:Q", "title:N", alt.Tooltip("rho_long:Q", format=".4f")],
).add_params(pick4).properties(width=420, height=280)
display(save_chart(strip, "03_rho_long_per_document", figures_dir))
top = per_doc.sort_values("rho_long", ascending=False).groupby("corpus", sort=False).head(3)
top[["corpus", "doc", "title", "rho_long"]]

# %% [markdown]
# ### Leave one document out
#
# How much does each document move its corpus's $R(16\text{K})$? The bars are $R$ without the document minus
# $R$ with all 16 (the estimators with that document's weight set to 0;
# [docs/methods.md](../docs/methods.md#decomposition)): a bar below 0 is a document that raises $R$. The
# jackknife standard error ([Efron & Tibshirani 1993](#References)) summarises the spread.

# %%
influence = tables.influence_frame(decomp, corpus_docs)
pick5 = legend_pick()
chart_loo = alt.Chart(influence).mark_bar().encode(
    x=alt.X("doc:O", title="document"), y=alt.Y("dR:Q", title="R(16K) without it − R(16K)"), color=color,
    opacity=highlight(pick5, 0.9, 0.15),
    tooltip=["corpus:N", "doc:Q", "title:N", "source:N", alt.Tooltip("R_without:Q", format=".3f"),
             alt.Tooltip("dR:Q", format="+.3f"), alt.Tooltip("dR_frac:Q", format="+.1%")],
).add_params(pick5).properties(width=170, height=220).facet(
    column=alt.Column("corpus:N", sort=order, title=None))
display(save_chart(chart_loo, "03_leave_one_out", figures_dir))

# %% tags=["hide-input"]
top_loo = tables.top_influences(influence, 1)
loo_facts = {}
for _, r in top_loo.iterrows():
    k = r["corpus"]
    pd_k = cells_by[k].rho_long_per_doc
    others = {d_: v for d_, v in pd_k.items() if d_ != r["doc"] and np.isfinite(v)}
    hd = max(others, key=others.get) if others else None
    loo_facts[k] = {"doc": int(r["doc"]), "title": r["title"], "R": r["R"], "R_without": r["R_without"],
                    "dR": r["dR"], "dR_frac": r["dR_frac"], "rho_long_doc": pd_k.get(int(r["doc"])),
                    "highest_other_rho_long": others.get(hd), "highest_other_doc": hd,
                    "highest_other_title": influence.set_index(["corpus", "doc"]).loc[(k, hd), "title"] if hd is not None else None,
                    "cross_mean": r["cross_mean"], "S_cross": cells_by[k].all.S_cross,
                    "S_cross_without": r["S_cross_without"], "jackknife_se": decomp[k].jackknife_se_R}


def loo_line(k, f):
    line = (f"- **{k}**: {f['title'] or 'document ' + str(f['doc'])} moves R(16K) most: without it R is "
            f"{f['R_without']:.2f} instead of {f['R']:.2f} ({f['dR_frac']:+.0%}). ")
    if f["highest_other_rho_long"] is not None and f["rho_long_doc"] >= f["highest_other_rho_long"]:
        line += (f"Its own ρ_long, {f['rho_long_doc']:+.3f}, is the corpus's highest (next: "
                 f"{f['highest_other_rho_long']:+.3f}).")
    else:
        line += (f"Its own ρ_long ({f['rho_long_doc']:+.3f}) is not the highest (that is "
                 f"{f['highest_other_title']}, {f['highest_other_rho_long']:+.3f}).")
    if f["dR"] < 0 and f["cross_mean"] < f["S_cross"]:
        line += (f" Its chunks' mean inner product with the other documents' chunks is {f['cross_mean']:.2f}, "
                 f"below the cell's S_cross of {f['S_cross']:.2f}: its mean gradient lies away from the others', "
                 f"which lowers S_cross and so raises every document's ρ; without it S_cross is "
                 f"{f['S_cross_without']:.2f}.")
    return line + f" Jackknife standard error of R(16K): {f['jackknife_se']:.2f}."


display(Markdown("\n".join(loo_line(k, f) for k, f in loo_facts.items()) or "- no cells"))
top_loo[["corpus", "doc", "title", "R", "R_without", "dR", "dR_frac", "cross_mean", "S_cross_without"]]

# %% [markdown]
# ## Documents that share a source
#
# Sixteen documents are not always sixteen independent draws. Each document's *source* comes from the
# manifest (`docgrad.corpora.provenance.source_label`: the author for the novels, the work for the Bible books,
# the GitHub owner of a Python project, the R package of a vignette; every packed WEB pseudo-document is its
# own source). Documents of one source can share a mean gradient of their own, and then two chunks of
# *different* documents of that source are correlated too. The chart shows, for every pair of documents, the
# mean inner product of their chunk gradients relative to the cell's $S_\text{cross}$ (on the diagonal: two
# different chunks of one document).

# %%
src_rows = []
pair_frames = []
for k, d in decomp.items():
    for doc, s_ in zip(d.doc_ids, d.sources):
        src_rows.append({"corpus": k, "doc": doc, "source": s_})
    M = decomposition.document_pair_means(study.cell(page_models[0], k).sums["all"])
    S = cells_by[k].all.S_cross
    pair_frames.append(pd.DataFrame([{"corpus": k, "doc_a": a, "doc_b": b, "ratio": M[i, j] / S,
                                      "source_a": d.sources[i], "source_b": d.sources[j]}
                                     for i, a in enumerate(d.doc_ids) for j, b in enumerate(d.doc_ids)]))
sources_df = pd.DataFrame(src_rows, columns=["corpus", "doc", "source"])
pairs_df = pd.concat(pair_frames, ignore_index=True) if pair_frames else pd.DataFrame(
    columns=["corpus", "doc_a", "doc_b", "ratio", "source_a", "source_b"])
positive = len(pairs_df) and bool((pairs_df["ratio"] > 0).all())   # a log scale only for positive ratios
heat = alt.Chart(pairs_df).mark_rect().encode(
    x=alt.X("doc_a:O", title="document"), y=alt.Y("doc_b:O", title="document"),
    color=alt.Color("ratio:Q", title="mean K / S_cross",
                    scale=alt.Scale(scheme="viridis", type="log" if positive else "linear")),
    tooltip=["corpus:N", "doc_a:Q", "source_a:N", "doc_b:Q", "source_b:N", alt.Tooltip("ratio:Q", format=".2f")],
).properties(width=170, height=170).facet(column=alt.Column("corpus:N", sort=order, title=None))
display(save_chart(heat, "03_document_pairs", figures_dir))
sources_df.groupby(["corpus", "source"], sort=False).size().rename("documents").reset_index().query("documents > 1")

# %% tags=["hide-input"]
books_facts = None
if "BOOKS" in decomp:
    d = decomp["BOOKS"]
    shared = list(d.shared_sources)                       # sources with >= 2 documents, manifest order
    pm = d.pair_means
    by_src = {r["source"]: r for r in d.by_source}
    pds = tables.per_doc_by_source(cells_by["BOOKS"].rho_long_per_doc, d.doc_ids, d.sources).set_index("source")
    books_facts = {"shared_sources": d.shared_sources, "pair_means": pm, "S_cross": cells_by["BOOKS"].all.S_cross,
                   "per_doc_rho_long": pds.reset_index().to_dict("records"),
                   "by_source": {s_: by_src[s_] for s_ in shared + ["all"]}}
    if len(shared) >= 2:
        hi_s, lo_s = sorted(shared, key=lambda s_: -pm[s_])[:2]
        books_facts["pair_ratio"] = pm[hi_s] / pm[lo_s]
        singles = [s_ for s_ in dict.fromkeys(d.sources) if s_ not in d.shared_sources]
        lines = [
            f"**BOOKS is {len(shared)} populations"
            + (f" and {len(singles)} single book{'s' if len(singles) > 1 else ''}" if singles else "")
            + f".** Its {len(d.doc_ids)} documents come from {d.n_sources} sources: "
            + ", ".join(f"{s_} ({n})" for s_, n in d.shared_sources.items())
            + (", and " + ", ".join(singles) if singles else "") + ".",
            f"Two chunks of different books of {hi_s} have a mean gradient inner product of {pm[hi_s]:.2f}, "
            f"{books_facts['pair_ratio']:.1f} times the {pm[lo_s]:.2f} of two chunks of different books of {lo_s}; "
            f"between sources it is {pm['cross-source']:.2f}. The cell's $S_\\text{{cross}}$ "
            f"({books_facts['S_cross']:.2f}) averages all cross-document pairs, so it lies between them.",
            "Measured against that pooled $S_\\text{cross}$, the per-document ρ_long is: "
            + "; ".join((f"{s_}: {int(pds.loc[s_, 'n_negative'])} of {int(pds.loc[s_, 'n_docs'])} negative, "
                         f"{pds.loc[s_, 'min']:+.3f} to {pds.loc[s_, 'max']:+.3f}") if pds.loc[s_, "n_docs"] > 1
                        else f"{s_} (one book): {pds.loc[s_, 'max']:+.3f}" for s_ in pds.index) + ".",
            "Each source alone (the study's estimators on its documents only): "
            + "; ".join(f"{s_} R(16K) = {by_src[s_]['R']:.2f} (ρ_long {by_src[s_]['rho_long']:+.3f})" for s_ in shared)
            + f"; all {len(d.doc_ids)} together {by_src['all']['R']:.2f}. "
            + ("The pooled value is higher than any source's own because the sources have different mean "
               "gradients: a chunk's offset from the pooled mean is partly its source's offset, which every other "
               "chunk of its book repeats. " if by_src["all"]["R"] > max(by_src[s_]["R"] for s_ in shared) else "")
            + "The document bootstrap resamples the books as if they were independent draws from one "
              "population; notebook 04 shows R with and without this source term and a bootstrap that resamples "
              "sources."]
        display(Markdown("\n\n".join(lines)))

# %% [markdown]
# ### Source, document and chunk parts of the correlation
#
# With sources, the correlation of two chunks splits into three nested parts
# ([docs/methods.md](../docs/methods.md#decomposition); nested variance components as in
# [Searle, Casella & McCulloch 1992](#References)). Measured about $A_\text{xs}$, the mean inner product of
# chunks from *different sources* (the corpus mean gradient when sources are independent), with
# $V = \overline{K_{ii}} - A_\text{xs}$: the **source** part $\rho_\text{src}$ (two chunks of different
# documents of one source), the **document-within-source** part $\rho_\text{doc}$ (the long-lag plateau of
# one document beyond its source's), and the **chunk** part $1 - \rho_\text{src} - \rho_\text{doc}$ (not shared
# at long range). A source with one document cannot be told apart from that document, so its part is
# counted as document; where every source has one document, $\rho_\text{src} = 0$ and $\rho_\text{doc}$ is the
# study's $\rho_\text{long}$.

# %%
parts = tables.decomposition_frame(decomp)
parts_show = parts[["corpus", "n_sources", "shared_sources", "rho_src", "rho_doc", "rho_chunk"]]
display(Markdown("\n".join(
    f"- **{r['corpus']}** ({r['n_sources']} sources; shared: {r['shared_sources']}): source "
    f"{r['rho_src']:.3f}, document {r['rho_doc']:.3f}, chunk {r['rho_chunk']:.3f}"
    for _, r in parts_show.iterrows()) or "- no cells"))
parts_show

# %% [markdown]
# ## Mean loss by chunk position
#
# Each chunk is a standalone 512-token sequence, so the loss does not fall with position the way it would
# with the whole document as context; differences by position reflect the documents themselves. The two
# models have different tokenizers, so their losses per token are not on the same scale.

# %%
loss = pd.concat([tables.loss_frame(r) for r in reports.values()], ignore_index=True)
loss["model_label"] = loss["model"].map(model_registry.model_label)
pick6 = legend_pick()
chart_loss = alt.Chart(loss).mark_line(point=True).encode(
    x=alt.X("start_token:Q", title="chunk start within the span (tokens)"),
    y=alt.Y("loss:Q", title="mean next-token loss (nats)", scale=alt.Scale(zero=False)), color=color,
    opacity=highlight(pick6),
    tooltip=["model_label:N", "corpus:N", "position:Q", alt.Tooltip("loss:Q", format=".3f")],
).add_params(pick6).properties(width=380, height=240).facet(column=alt.Column("model_label:N", title=None,
                                                                              sort=model_order))
display(save_chart(chart_loss, "03_loss_by_position", figures_dir))

# %% [markdown]
# ## What was measured
#
# ### The model
#
# Read from the metadata of each pinned model file (`docgrad.measure.model_facts.model_description`):

# %% tags=["hide-input"]
mdescs = {}
for m in page_models:
    spec = model_registry.offline_model(m.model)
    try:                    # an offline model's file, sha256-checked; a hub model has no file described here
        mdescs[m.label] = model_facts.model_description(model=spec.name) if spec is not None else None
    except Exception as e:  # its wheels are not installed here: say so instead of describing it
        mdescs[m.label] = None
        display(Markdown(f"**{m.label}**: the model file is not available here ({type(e).__name__}: {e})."))
mdesc = mdescs.get(label)
other_size = group_sizes.get("other")
for lab, md in mdescs.items():
    if md is None:
        continue
    tt = md["tensor_types"]
    o_size = group_sizes_by_model.get(lab, {}).get("other")
    kinds = ", ".join(f"{v['tensors']} tensor{'s' if v['tensors'] > 1 else ''} ({v['weights']:,} weights) as {k} "
                      f"({v['bits_per_weight']:.2f} bits per weight)"
                      for k, v in sorted(tt.items(), key=lambda kv: -kv[1]["weights"]))
    display(Markdown(
        f"**{lab}**\n\n"
        f"- **What it is**: {md['name']}" + (f" by {md['organization']}" if md["organization"] else "")
        + f" (`{md['file']}`), a {md['layers']}-layer {md['architecture']} model of width {md['width']} and "
          f"vocabulary {md['vocab_size']:,}; "
        + ("an **instruction-tuned** chat model (the file carries a chat template; fine-tune tag "
           f"`{md['finetune']}`), not a pretrained base model like the published study's."
           if md["chat_template"] else "no chat template: a pretrained base model, like the published study's.")
        + f"\n- **Quantisation**: the file is {md['file_type']}: {kinds}."
        + (f" The {tt['F32']['weights']:,} float weights are exactly the parameter group *other* (the norm "
           "weights, as the result files' group sizes record): the only parameters stored unrounded."
           if "F32" in tt and tt["F32"]["weights"] == o_size else "")
        + f"\n- **Precision of the gradients**: the probe de-quantises every tensor to {md['dequantised_dtype']} "
          "and differentiates that model exactly: the gradients are exact for the rounded weights, not those "
          "of the original model."
        + f"\n- **Context**: the model was trained with a context of {md['context_length']:,} tokens; here "
          f"each {chunk}-token chunk is a standalone sequence"
        + (", preceded by the model's BOS token." if md["chunk_context"] == "standalone-bos" else ".")))

# %% [markdown]
# ### The control
#
# The published control is packed FineWeb: web documents concatenated into 16K-token sequences. Ours is
# built from Debian package descriptions (`docgrad.corpora.provenance.control_facts`, from the manifest and,
# when the span cache is present, from the measured spans themselves):

# %% tags=["hide-input"]
ctrl = None
try:
    ctrl = provenance.control_facts(manifest, CONTROL, chunk, doc_ids=cells_by[CONTROL].doc_ids if CONTROL in cells_by else None)
except (OSError, KeyError) as e:
    display(Markdown(f"No control record in the manifest ({type(e).__name__}: {e})."))
ctrl_cell = cells_by.get(CONTROL)
if ctrl is not None:
    dt, dp, b = ctrl["description_tokens"], ctrl["descriptions_per_document"], ctrl["boundaries"]
    sep = ctrl["separator"]
    text = (f"- **What it is**: {ctrl['descriptions_used']:,} Debian package long descriptions, each followed by the "
            f"separator `{sep['token']}` (id {sep['id']}) and packed into pseudo-documents of "
            f"{dp['min']:.0f} to {dp['max']:.0f} descriptions. A description is short: median {dt['median']:.0f} "
            f"tokens with its separator (quartiles {dt['q1']:.0f} and {dt['q3']:.0f}, longest {dt['max']:,}).")
    if b is not None:
        text += (f"\n- **Boundaries per chunk** (counted in the measured spans): {b['per_chunk']['mean']:.2f} "
                 f"separators per {chunk}-token chunk on average (median {b['per_chunk']['median']:.0f}, "
                 f"{b['per_chunk']['min']} to {b['per_chunk']['max']}); {b['frac_chunks_without']:.1%} of the "
                 f"{b['chunks']} chunks hold none. A chunk is several unrelated texts, and two adjacent chunks "
                 f"share only the description that straddles their boundary: on average the first "
                 f"{b['continued_tokens_mean']:.0f} tokens of a chunk ({b['continued_frac']:.0%}) continue a "
                 "description begun in the chunk before.")
    else:
        text += (f"\n- **Boundaries per chunk**: about {ctrl['expected_boundaries_per_chunk']} per {chunk}-token "
                 f"chunk (the manifest's packing record; the span cache is not built here).")
    if ctrl_cell is not None:
        text += (f"\n- **Its correlation**: ρ(512) = {ctrl_cell.all.rho.get(chunk):+.3f}, ρ_long = "
                 f"{ctrl_cell.all.rho_long:+.4f}, R(16K) = {ctrl_cell.all.R_16K:.3f}. The published study "
                 "attributes its control's short-lag correlation to web documents that straddle chunk "
                 "boundaries; here the text two adjacent chunks share is one short description, and the "
                 "control has little correlation at any lag, so dividing by it changes little (notebook 04).")
    display(Markdown(text))

# %% [markdown]
# ### The documents
#
# The measured documents of each corpus (from `data/corpora/manifest.json`), with their source,
# tokens [2048, 2048 + 16384) of each, cut into 32 chunks of 512 tokens.

# %%
if len(corpus_docs):
    display(corpus_docs.groupby("corpus", sort=False)["tokens"].agg(["count", "min", "median", "max"]))
corpus_docs.merge(sources_df.rename(columns={"source": "source label"}), on=["corpus", "doc"], how="left")

# %%
numbers = {"results_dir": results_dir, "model": model, "revision": revision, "chunk": chunk,
           "resamples": resamples, "seed": seed, "synthetic": synthetic, "missing": missing,
           "cells": [{"corpus": c.corpus, "n_docs": c.n_docs,
                      **{k: c.to_json().get(k) for k in ("rho_long", "rho_long_ci", "rho", "rho_ci")},
                      "rho_long_per_doc": {str(d): v for d, v in c.rho_long_per_doc.items()},
                      "rho_long_by_group": {g: e.rho_long for g, e in c.groups.items()},
                      "loss_by_chunk_position": c.loss_by_chunk_position}
                     for c in report.cells],
           "plateau": plateau.to_dict("records"), "rho_long_orders": rho_long_orders,
           "group_shares": group_share, "group_sizes": group_sizes,
           "n_parameters": sum(group_sizes.values()) if group_sizes else None, "leave_one_out_top": loo_facts,
           "leave_one_out": influence.to_dict("records"), "books_by_source": books_facts,
           "decomposition": {k: d.to_json() for k, d in decomp.items()},
           "model_description": mdesc, "model_other_group_size": other_size, "control": ctrl,
           "models": [m.__dict__ for m in page_models], "model_descriptions": mdescs,
           "by_model": {lab: {"missing": pages[lab][1],
                              "cells": [{"corpus": c.corpus, "n_docs": c.n_docs, "rho_long": c.all.rho_long,
                                         "rho_long_ci": list(c.all.interval("rho_long")), "rho_first": c.all.rho.get(chunk),
                                         "rho_long_by_group": {g: e.rho_long for g, e in c.groups.items()}}
                                        for c in r.cells]} for lab, r in reports.items()},
           "group_shares_by_model": group_share_by_model, "group_sizes_by_model": group_sizes_by_model,
           "parameters_by_model": {lab: {"n_parameters": sum(z.values()), "share": {g: n / sum(z.values()) for g, n in z.items()}}
                                   for lab, z in group_sizes_by_model.items() if z}}
_ = save_numbers("03_correlation_by_lag", numbers, figures_dir)


def rho_long_line(c):
    lo, hi = c.all.interval("rho_long")
    return (f"- **{c.corpus}**: ρ_long = {c.all.rho_long:+.4f}"
            + (f" (95% interval {lo:+.4f} to {hi:+.4f})" if lo is not None else "")
            + f"; ρ at {c.chunk} tokens = {c.all.rho.get(c.chunk, float('nan')):+.3f}")


display(Markdown("\n\n".join(f"**{lab}**\n\n" + "\n".join(rho_long_line(c) for c in r.cells) for lab, r in reports.items())))

# %% [markdown]
# ## References
#
# - Yang, H. (2026). *Long documents make your batch smaller than it looks: measuring within-document gradient
#   correlation* (doc-batch-gradients). Zenodo. [doi:10.5281/zenodo.23268861](https://doi.org/10.5281/zenodo.23268861).
#   The study this page repeats; its numbers are in `data/published/`.
# - Kish, L. (1965). *Survey Sampling*. New York: Wiley. (Design effect, $1 + (m-1)\rho$.)
# - Efron, B., & Tibshirani, R. J. (1993). *An Introduction to the Bootstrap*. New York: Chapman & Hall.
#   (Bootstrap and jackknife.)
# - Davison, A. C., & Hinkley, D. V. (1997). *Bootstrap Methods and their Application*. Cambridge University
#   Press. (Resampling the top level of hierarchical data: the source-clustered bootstrap.)
# - Searle, S. R., Casella, G., & McCulloch, C. E. (1992). *Variance Components*. New York: Wiley. (Nested
#   random effects: the source / document / chunk parts.)
# - Charikar, M., Chen, K., & Farach-Colton, M. (2002). Finding frequent items in data streams. *ICALP 2002*,
#   LNCS 2380, 693–703. (The count sketch behind the Gram matrices; notebook 02.)

# %%
versions()
