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
# Two 512-token chunks of the same document: how similar is the noise of their gradients, as a function of the
# distance between them? This page reads the Gram matrices measured on two small models for books, code, papers
# and a packed control of short texts, from 512 to 15,872 tokens apart, beside the published Pythia and OLMo
# curves ([Yang 2026](#References)), and per parameter group. Page 03b asks which documents and sources carry it.

# %% tags=["parameters"]
results_dir = "data/results"  # directory of result files (searched recursively)
models = ["smollm2-135m", "gemma3-270m"]  # offline model names or '<id>@<revision>'
corpora = ["BOOKS", "CODE", "PAPERS", "WEB"]  # corpora to show, in this order
chunk = 512  # chunk length C in tokens
resamples = 2000  # document-bootstrap resamples (0: no intervals)
seed = 20261007  # bootstrap seed
documents = "0:48"  # result files read: documents A:B (0:48 the 48-document cells of SmolLM2; Gemma has 0:16)
regime_dir = "data/regime"  # SmolLM2's model-regime cells (start token, SIMEX; page 04d)
study_results_dir = "data/results"  # the study's results the regime cells are read beside (another results_dir too)
figures_dir = "figures"  # where figures and the numbers file are written

# %%
from docgrad import page as dg

ROOT = dg.setup()

import altair as alt
import pandas as pd
from IPython.display import Markdown, display

page = dg.StudyPage(results_dir, models, corpora, documents, resamples, seed, chunk)   # reads the result files once
page_models, study, reports = page.models, page.study, page.reports
model_order = list(reports)
bands = {m.label: {c.corpus: dg.cell_decomposition.rho_bands(study.cell(m, c.corpus), resamples, seed)
                    for c in reports[m.label].cells} for m in page_models}
bands = {lab: {k: b for k, b in by.items() if b["bands"]} for lab, by in bands.items()}   # a short span holds none
band_claims = {lab: dg.correlation.band_claims(b) for lab, b in bands.items()}

# %% tags=["hide-input"]
display(Markdown(dg.correlation.correlation_box(reports, band_claims, page.incomplete, page.decomps,
                                                page.models_note)))

# %% [markdown]
# **What ρ is.** With $K$ the Gram matrix of per-chunk gradients (exact squared norms on its diagonal),
#
# $$\rho(\Delta) = \frac{\overline{K}_{\text{same doc, lag }\Delta} - S_\text{cross}}{\sigma^2},\qquad
# S_\text{cross} = \overline{K}_{\text{different docs}} \approx |G|^2,\quad \sigma^2 = \overline{K_{ii}} - S_\text{cross}.$$
#
# Subtracting $S_\text{cross}$ removes what every chunk shares with the corpus mean gradient $G$, so $\rho$ is
# the correlation of the *noise* around it; $\rho_\text{long}$ averages it over 2,048 ≤ Δ < 16,384 tokens. Bands
# and brackets are 95% intervals from resampling documents ([Efron & Tibshirani 1993](#References);
# [docs/methods.md](../docs/methods.md#estimators)).

# %% tags=["hide-input"]
display(Markdown("\n".join(page.inputs_lines())))

# %% [markdown]
# ## ρ(Δ) by distance, per corpus
#
# Hover a point for its value and interval; click a corpus in the legend to highlight it (shift-click for
# several). The grey span marks the lags averaged into $\rho_\text{long}$.

# %%
order = list(corpora)
rho = pd.concat([dg.tables.rho_frame(r) for r in reports.values()], ignore_index=True)
rho["model_label"] = rho["model"].map(dg.models.model_label)
rho_all = rho[rho["group"] == "all"]
pick = dg.legend_pick()
color = dg.corpus_color(order)
x = alt.X("lag_tokens:Q", title="distance Δ between chunks (tokens)", scale=alt.Scale(domainMin=0))
tip = [alt.Tooltip("corpus:N"), alt.Tooltip("lag_tokens:Q", title="lag (tokens)"),
       alt.Tooltip("rho:Q", format=".4f", title="ρ"), alt.Tooltip("lo:Q", format=".4f", title="95% lo"),
       alt.Tooltip("hi:Q", format=".4f", title="95% hi")]
long_span = alt.Chart(pd.DataFrame({"a": [2048], "b": [16384]})).mark_rect(color="#eee").encode(x="a:Q", x2="b:Q")
zero = alt.Chart(pd.DataFrame({"y": [0]})).mark_rule(color="grey").encode(y="y:Q")
band = alt.Chart().mark_area(opacity=0.2).encode(
    x=x, y="lo:Q", y2="hi:Q", color=color, opacity=dg.highlight(pick, 0.25, 0.03)).add_params(pick)
line = alt.Chart().mark_line(point=True).encode(
    x=x, y=alt.Y("rho:Q", title="ρ(Δ)"), color=color, tooltip=tip,
    opacity=dg.highlight(pick, 1.0, 0.15))
chart_rho = alt.layer(long_span, zero, band, line).properties(width=380, height=300).facet(   # data: each panel's rows
    column=alt.Column("model_label:N", title=None, sort=model_order), data=rho_all)
display(dg.save_chart(chart_rho, "03_rho_by_lag", figures_dir))

# %% [markdown]
# ## Does ρ decay across the long lags?
#
# If $\rho(\Delta)$ were one constant $\rho$ at every lag, a block of $m$ chunks would have Kish's design effect
# $R = 1 + (m-1)\rho$ ([Kish 1965](#References)). Whether it is constant is a question for the data: $\rho$
# averaged over three bands of long lags, and the first band minus the last with paired draws (one document
# draw gives both), under Holm over the corpora of each model.

# %% tags=["hide-input"]
display(Markdown("\n\n".join(f"**{lab}**\n\n" + "\n".join(f"- {c}" for c in cl) for lab, cl in band_claims.items())))
bands_table = dg.correlation.band_frame(bands)
dg.tables.three_significant(bands_table.pivot_table(index=["model", "corpus"], columns="lags (tokens)", values="rho",
                                                    sort=False).reset_index())

# %% [markdown]
# ## Beside the published Pythia-1.4B and OLMo-2-1B curves
#
# The published study measured the same quantity on Pythia and OLMo with PG-19 books, code repositories, arXiv
# and packed FineWeb, matched to ours by kind (`docgrad.results.published.PUBLISHED_TO_OURS`). The material
# differs (page 03b, *What was measured*), so compare shapes, not digits.

# %%
both = dg.published.beside_ours(rho_all, dg.published.rho_by_lag(), None, "lag_tokens")
both = both[both["corpus"].isin(order)]
pick2 = dg.legend_pick()
chart_cmp = alt.Chart(both).mark_line(point=alt.OverlayMarkDef(size=18)).encode(
    x=alt.X("lag_tokens:Q", title="Δ (tokens)"), y=alt.Y("rho:Q", title="ρ(Δ)"), color=color,
    opacity=dg.highlight(pick2),
    tooltip=["source:N", "corpus:N", "lag_tokens:Q", alt.Tooltip("rho:Q", format=".4f")],
).add_params(pick2).properties(width=260, height=220).facet(
    column=alt.Column("source:N", title=None, sort=list(dict.fromkeys(both["source"]))))
display(dg.save_chart(chart_cmp, "03_rho_vs_published", figures_dir))
final = dg.published.final_checkpoints()
rho_long_orders = {lab: {c.corpus: c.all.rho_long for c in r.cells} for lab, r in reports.items()}
for lab, g in final.groupby("model_label", sort=False):
    rho_long_orders[f"{lab} (published)"] = {k: v for k, v in zip(g["corpus"], g["rho_long"]) if k in order}
order_lines = dg.correlation.rho_long_order_lines(rho_long_orders, model_order)
display(Markdown("Ordered by ρ_long:\n\n" + "\n".join(f"- {s}" for s in order_lines)))

# %% [markdown]
# ## Per parameter group
#
# The gradient splits into attention, MLP, embedding (with the tied LM head) and the rest, which for both
# models is exactly the norm weight vectors. Each group has its own Gram, so its own $S_\text{cross}$,
# $\sigma^2$ and $\rho(\Delta)$; the curves above are for the sum, which weights each group by its share of the
# noise. One row of panels per model.

# %%
rho_groups = rho[rho["group"] != "all"]
pick3 = dg.legend_pick()
chart_groups = alt.Chart(rho_groups).mark_line().encode(
    x=alt.X("lag_tokens:Q", title="Δ (tokens)"), y=alt.Y("rho:Q", title="ρ(Δ)"), color=color,
    opacity=dg.highlight(pick3),
    tooltip=["group:N", "corpus:N", "lag_tokens:Q", alt.Tooltip("rho:Q", format=".4f"),
             alt.Tooltip("lo:Q", format=".4f"), alt.Tooltip("hi:Q", format=".4f")],
).add_params(pick3).properties(width=200, height=160).facet(column=alt.Column("group:N", title="parameter group"),
                                                           row=alt.Row("model_label:N", title=None, sort=model_order))
display(dg.save_chart(chart_groups, "03_rho_by_group", figures_dir))
group_long_all = pd.concat([dg.tables.group_frame(r) for r in reports.values()], ignore_index=True)
group_share_by_model = {m.label: {c.corpus: dg.decomposition.group_shares(
    study.cell(m, c.corpus).sums, chunk, [g for g in dg.GROUPS if g in study.cell(m, c.corpus).sums])
    for c in reports[m.label].cells} for m in page_models}
group_sizes_by_model = {m.label: study.group_sizes(m) for m in page_models}
share_lines = dg.correlation.group_share_lines(group_share_by_model, group_sizes_by_model, group_long_all)
display(Markdown("Each group's share of $S_\\text{cross}$ and of $\\sigma^2$ (they add up to 1 over the groups; "
                 "page 04b reads the mean gradient):\n\n" + "\n".join(f"- {s}" for s in share_lines)))
(group_long_all.pivot_table(index=["model", "corpus"], columns="group", values="rho_long", sort=False).round(3)
 if len(group_long_all) else group_long_all)

# %% [markdown]
# ## Mean loss by chunk position
#
# Each chunk is a standalone 512-token sequence, so the loss does not fall with position the way it would with
# the whole document as context (page 06 measures that). The two models' tokenizers differ, so their losses per
# token are not on one scale.
#
# **Limitations.** The study's models are small, and R(16K) sums these correlations: whether it moves with the
# model's regime is read below.

# %% tags=["hide-input"]
_, regime_readings = dg.model_regime.read_model_regime(study_results_dir, regime_dir)
display(Markdown(dg.regime.limitation_line(regime_readings)))

# %%
loss = pd.concat([dg.tables.loss_frame(r) for r in reports.values()], ignore_index=True)
loss["model_label"] = loss["model"].map(dg.models.model_label)
pick6 = dg.legend_pick()
chart_loss = alt.Chart(loss).mark_line(point=True).encode(
    x=alt.X("start_token:Q", title="chunk start within the span (tokens)"),
    y=alt.Y("loss:Q", title="mean next-token loss (nats)", scale=alt.Scale(zero=False)), color=color,
    opacity=dg.highlight(pick6),
    tooltip=["model_label:N", "corpus:N", "position:Q", alt.Tooltip("loss:Q", format=".3f")],
).add_params(pick6).properties(width=380, height=240).facet(column=alt.Column("model_label:N", title=None,
                                                                              sort=model_order))
display(dg.save_chart(chart_loss, "03_loss_by_position", figures_dir))

# %%
numbers = {"regime_dir": regime_dir, "model_regime": dg.regime.reading_numbers(regime_readings),
           "regime_limitation": dg.regime.limitation_line(regime_readings),
           "results_dir": results_dir, "chunk": chunk, "resamples": resamples, "seed": seed, "documents": documents,
           "models": [m.__dict__ for m in page_models],
           "synthetic": any(c.synthetic for r in reports.values() for c in r.cells),
           "result_box": dg.correlation.correlation_box(reports, band_claims, page.incomplete, page.decomps,
                                                        page.models_note),
           "by_model": {lab: {"missing": page.missing[lab],
                              "cells": [{"corpus": c.corpus, "n_docs": c.n_docs, "rho_long": c.all.rho_long,
                                         "rho_long_ci": list(c.all.interval("rho_long")), "rho": c.all.rho,
                                         "rho_first": c.all.rho.get(chunk),
                                         "rho_long_by_group": {g: e.rho_long for g, e in c.groups.items()},
                                         "loss_by_chunk_position": c.loss_by_chunk_position}
                                        for c in r.cells]} for lab, r in reports.items()},
           "rho_bands": bands_table.to_dict("records"),
           "band_claims": {lab: [c.text for c in cl] for lab, cl in band_claims.items()},
           "rho_long_orders": rho_long_orders, "order_lines": order_lines,
           "group_shares_by_model": group_share_by_model, "group_sizes_by_model": group_sizes_by_model,
           "share_lines": share_lines}
_ = dg.save_numbers("03_correlation_by_lag", numbers, figures_dir)

# %% [markdown]
# ## References
#
# - Yang, H. (2026). *Long documents make your batch smaller than it looks: measuring within-document gradient
#   correlation* (doc-batch-gradients). Zenodo. [doi:10.5281/zenodo.23268861](https://doi.org/10.5281/zenodo.23268861).
#   The study this page repeats; its numbers are in `data/published/`.
# - Kish, L. (1965). *Survey Sampling*. New York: Wiley. (Design effect, $1 + (m-1)\rho$.)
# - Efron, B., & Tibshirani, R. J. (1993). *An Introduction to the Bootstrap*. New York: Chapman & Hall.
# - Holm, S. (1979). A simple sequentially rejective multiple test procedure. *Scandinavian Journal of
#   Statistics* 6(2), 65-70.

# %%
dg.versions()
