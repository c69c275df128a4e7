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
# Filling each training sequence with one long document puts correlated chunks into the same batch, so the batch
# carries fewer independent samples than its token count suggests. This page gives how many fewer, for books,
# code and papers against a packed control of short texts, beside the published Pythia-1.4B and OLMo-2-1B
# numbers ([Yang 2026](#References)).

# %% tags=["parameters"]
results_dir = "data/results"  # directory of result files (searched recursively)
models = ["smollm2-135m", "gemma3-270m"]  # offline model names or '<id>@<revision>'
corpora = ["BOOKS", "CODE", "PAPERS", "WEB"]  # corpora to show, in this order (WEB is the control)
chunk = 512  # chunk length C in tokens
resamples = 2000  # document-bootstrap resamples (0: no intervals)
seed = 20261007  # bootstrap seed
documents = "0:48"  # result files read: documents A:B (0:48 the 48-document cells of SmolLM2; Gemma has 0:16)
published_documents = "0:16"  # the published design's documents, shown beside (a sub-range of documents)
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
design = page.within(published_documents)   # the published design's documents, from the same files
page_models, study, reports, decomps = page.models, page.study, page.reports, page.decomps
_, regime_readings = dg.model_regime.read_model_regime(study_results_dir, regime_dir)
regime_note = dg.regime.headline_note(regime_readings, dg.models.model_label(dg.models.get_offline("smollm2-135m")
                                                                            .model))

# %% tags=["hide-input", "headline"]
box = dg.design_effect.result_box(reports, decomps, incomplete=page.incomplete, models_note=page.models_note,
                                  regime_note=regime_note)
display(Markdown(box))

# %% tags=["hide-input", "headline"]
R16 = {lab: {c.corpus: c.all.R_16K for c in r.cells} for lab, r in reports.items()}
final = dg.published.final_checkpoints()
own = models[0] == "smollm2-135m"        # the regime cells are SmolLM2's: read beside its numbers only
training = (dg.model_regime.read_training_regime_of(study_results_dir, regime_dir, models[0], resamples, seed)
            if own else {})
answers = [dg.regime.corpus_answer(dg.regime.answer_facts(
    c, R16, regime_readings[dg.model_regime.START_TOKEN] if own else {}, training,
    final.groupby("corpus")["R_16K"].apply(list).to_dict(), chunk)) for c in corpora]
display(Markdown("\n".join(f"- {a}" for a in answers if a)))

# %% tags=["headline"]
forest = dg.design_effect.forest_frame([(page.reports, page.decomps), (design.reports, design.decomps)],
                                       dg.published.final_checkpoints())
display(dg.save_chart(dg.forest_chart(forest, corpora), "04_R_forest", figures_dir))

# %% tags=["hide-input"]
shares = {lab: {c.corpus: dg.decomposition.mean_gradient_share(c.all.S_cross, c.all.sigma2) for c in r.cells}
          for lab, r in reports.items()}
without_norms = {m.label: {c.corpus: dg.decomposition.without_groups(study.cell(m, c.corpus).sums, chunk, ["other"])
                           for c in reports[m.label].cells} for m in page_models}
pub_shares = final[final.corpus.isin(dg.design_effect.LONG_DOCUMENT_CORPORA)]["mean_gradient_share"].tolist()
regime = dg.design_effect.regime_line(dg.models.model_regimes(page_models), shares, without_norms, pub_shares, R16)
display(Markdown(regime))

# %% [markdown]
# **What R is.** The design effect $R(W)$ is the gradient-noise variance of one block of $m$ consecutive chunks
# of one document, divided by that of $m$ independent chunks with the same token count ([Kish 1965](#References)):
# with $\rho(l)$ the correlation of two chunks $l$ apart, $R(mC) = 1 + \frac{2}{m}\sum_{l=1}^{m-1}(m-l)\rho(l)$.
# A batch of such blocks carries about $1/R$ as many independent samples as its tokens suggest. $R(16\text{K})$
# is the block of 32 chunks of $C = 512$ tokens. Brackets are 95% intervals from resampling documents
# ([docs/methods.md](../docs/methods.md#document-bootstrap)).

# %% tags=["hide-input"]
display(Markdown("\n".join(page.inputs_lines())))

# %% [markdown]
# ## R(W) against the window W
#
# $R(C) = 1$ by definition; it grows with $W$ as long as chunks further apart stay correlated. One panel per
# model, beside the published final checkpoints. Hover for values; click a legend entry to highlight a corpus.

# %% tags=["headline"]
order = list(corpora)
R = pd.concat([dg.tables.R_frame(r) for r in reports.values()], ignore_index=True)
both = dg.published.beside_ours(R[R["group"] == "all"], dg.published.R_by_window(), None, "W_tokens")
both = both[both["corpus"].isin(order)]
pick = dg.legend_pick()
color = dg.corpus_color(order)
xW = alt.X("W_tokens:Q", title="window W (tokens)", scale=alt.Scale(type="log", base=2),
           axis=alt.Axis(values=[512, 1024, 2048, 4096, 8192, 16384]))
tip = ["source:N", "corpus:N", "W_tokens:Q", alt.Tooltip("R:Q", format=".3f"),
       alt.Tooltip("lo:Q", format=".3f", title="95% lo"), alt.Tooltip("hi:Q", format=".3f", title="95% hi")]
base = alt.Chart(both)
chart_R = alt.layer(   # the selection lives on the first layer that encodes colour (the line; its legend)
    base.mark_line(point=True).encode(x=xW, y=alt.Y("R:Q", title="R(W)"), color=color, tooltip=tip,
                                      opacity=dg.highlight(pick)).add_params(pick),
    base.mark_errorbar(ticks=True).encode(x=xW, y=alt.Y("lo:Q", title="R(W)"), y2="hi:Q", color=color,
                                          opacity=dg.highlight(pick, 0.8, 0.08)),
).properties(width=260, height=240).facet(
    column=alt.Column("source:N", title=None, sort=list(dict.fromkeys(both["source"]))))
display(dg.save_chart(chart_R, "04_R_by_window", figures_dir))

# %% [markdown]
# ## R(16K) and R_rel beside the published, as a table
#
# Ours beside the published final checkpoints (their corpora renamed to ours: PG19 → BOOKS, REPOS → CODE,
# ARXIV → PAPERS). *Sources resampled* is the interval when the sources (author, work, project owner) are
# resampled instead of the documents: where documents share a source it is the one for "text of this kind",
# unless the sources are too few for a 95% interval (our BOOKS: 3 sources, read by source in the plot above).
# $R_\text{rel}$ divides by the control of the same model; the two studies' controls
# differ, so compare $R$ across them (page 04c).

# %%
headline = dg.tables.headline_table(list(reports.values()), dg.published.cells(), dg.published.r_rel(), sources=decomps)
headline.set_index("corpus")

# %% [markdown]
# **What a clustered corpus is.** A corpus whose documents share a few sources is named by them, with $R(16\text{K})$
# of each source alone (documents resampled within the source).

# %% tags=["hide-input"]
sources_said = {lab: dg.design_effect.source_lines(d) for lab, d in decomps.items()}
display(Markdown("\n".join(f"- {lab}: {line}" for lab, lines in sources_said.items() for line in lines)))

# %% [markdown]
# ## Shards: the design respected
#
# A 48-document cell is three result files of 16 documents, and pairs of documents were computed only inside a
# file, so the design fixes which documents pair and how many each file holds. Per cell: $R(16\text{K})$ of each
# shard alone; the headline's interval (documents resampled across the cell) beside one that resamples documents
# within their shard; and how far $R$ moves when the pairs never computed are filled with the mean of the computed
# pairs of their sources: a size of the bias they could carry, not a correction
# ([docs/methods.md](../docs/methods.md#shards)).

# %% tags=["hide-input"]
shards_said = dg.design_effect.shard_lines(page.shard_readings())
display(Markdown(f"**{page.label}**\n\n" + "\n".join(shards_said)))

# %% [markdown]
# **The published design beside it.** The published study read 16 documents per corpus; ours are the first 16 of
# the same corpora, so the 16-document cells are a subset of the ones above (the same files, fewer documents).
# Where the two differ by more than their intervals suggest, a few documents carry the difference (page 04b).

# %%
beside = dg.tables.subset_frame(reports, design.reports, f"docs {published_documents}")
beside.set_index(["model", "corpus"])

# %% [markdown]
# ## What it means for a batch
#
# A block of $N$ chunks with design effect $R$ carries about $N/R$ effectively independent chunks.

# %% tags=["hide-input"]
report = reports[page_models[0].label]
display(Markdown("\n".join(f"- {s}" for s in [*dg.tables.reading(report), *dg.tables.effective_chunks_notes(report)])))

# %% [markdown]
# ## Gates and verdict
#
# Each gate checks an assumption the headline depends on; a failing gate is a finding, not tuned away: G1 (the
# count sketch is faithful), G2 (the control has no long-range correlation: $R(16\text{K}) < 1.2$ and
# $\rho_\text{long} < 0.01$, decided on the point estimates; the intervals are shown and a threshold inside
# one is named), G3 (the mean gradient is resolved, so $B_\text{simple}$ is defined)
# ([docs/methods.md](../docs/methods.md#gates-and-verdict)).

# %% tags=["hide-input"]
g2 = dg.design_effect.gate_claims(reports)
display(Markdown("\n".join(f"- {c}" for c in g2)))
gates_table = pd.concat([dg.tables.gates_frame(r).assign(model=lab) for lab, r in reports.items()],
                        ignore_index=True)[["model", "gate", "status", "measured"]]
with pd.option_context("display.max_colwidth", 200):
    display(gates_table)

# %% [markdown]
# ## Explore it yourself
#
# Move the window and batch sliders: the chart recomputes, in your browser, $R(W)$ from each corpus's measured
# correlation profile, the effective number of independent chunks in the batch, the batch of shuffled chunks with
# the same gradient noise and $B_\text{simple}$ for contiguous blocks (intervals from the document bootstrap;
# the published 1B-class value where one exists). The right panel draws $R(W)$ for a correlation profile you shape
# (first-lag level, long-range plateau, decay length) beside the measured ones: the plateau, not the first lags,
# sets the design effect of a long window. The formulas are in `docgrad.presentation.explorer`.

# %%
profiles = [dg.profiles.cell_profile(study.cell(m, c.corpus), m.label, resamples, seed) for m in page_models
            for c in reports[m.label].cells]
explorer = dg.explorer.explorer_chart(pd.concat([p[0] for p in profiles], ignore_index=True),
                                      pd.concat([p[1] for p in profiles], ignore_index=True),
                                      dg.explorer.published_text(dg.published.R_by_window()), chunk)
display(dg.save_chart(explorer, "04_explorer", figures_dir))

# %% tags=["hide-input"]
blocks = pd.concat([dg.tables.R_frame(r).assign(label=lab) for lab, r in reports.items()], ignore_index=True)
blocks = blocks[blocks["group"] == "all"]
estimator_note = dg.explorer.estimator_note(blocks, pd.concat([p[1] for p in profiles], ignore_index=True),
                                            int(blocks["W_tokens"].max()))
display(Markdown(estimator_note))

# %% [markdown]
# ## Where to read on
#
# - **04b, what drives R**: the parameter groups, the source / document / short-range parts of $R$, how far one
#   document or the choice of resampling unit moves it, and the mean gradient ($B_\text{simple}$).
# - **04c, beside the published study**: which orderings of the corpora the data resolve, model against model
#   on the same documents, and what can and cannot be compared with Pythia and OLMo.
# - **07, does R predict learning?**: a small model trained from scratch with shuffled and document-contiguous
#   batches, and whether the contiguous ones train like $b/R$ shuffled chunks
#   ([07](07_does_R_predict_learning.html)).
#
# **Limitations.** Each 512-token chunk was run as its own sequence; page 06 measures gradients with the
# preceding context over the first 4,096 tokens. The models are small, 4-bit quantised and may have seen
# these public documents in training. 16 to 48 documents per corpus (the result box says which); where they share
# sources, fewer independent draws than they look.

# %% tags=["hide-input"]
display(Markdown(dg.regime.limitation_line(regime_readings)))

# %%
numbers = {"results_dir": results_dir, "chunk": chunk, "resamples": resamples, "seed": seed, "documents": documents,
           "published_documents": published_documents, "incomplete": page.incomplete, "regime_dir": regime_dir,
           "regime_note": regime_note, "regime_limitation": dg.regime.limitation_line(regime_readings),
           "regime_answers": answers,
           "model_regime": dg.regime.reading_numbers(regime_readings),
           "published_design": beside.to_dict("records"), "source_lines": sources_said,
           "models": [m.__dict__ for m in page_models],
           "synthetic": any(c.synthetic for r in reports.values() for c in r.cells),
           "by_model": {lab: {"cells": [{"corpus": c.corpus, "n_docs": c.n_docs, "R_16K": c.all.R_16K,
                                         "R_16K_ci": list(c.all.R_16K_ci), "rho_long": c.all.rho_long,
                                         "rho_long_ci": list(c.all.interval("rho_long")),
                                         "B_simple_shuf_tokens": c.all.B_simple_shuf_tokens}
                                        for c in r.cells],
                              "sources": {k: {"n_sources": d.n_sources, "n_docs": len(d.doc_ids),
                                              "R_source_ci": d.intervals.get("source", {}).get("R")}
                                          for k, d in decomps[lab].items()},
                              "R_rel": [x.to_json() for x in r.R_rel], "missing": page.missing[lab],
                              "gates": {k: {"status": g["status"], "summary": g["summary"]}
                                        for k, g in r.gates.items()},
                              "reading": dg.tables.reading(r),
                              "effective_chunks_notes": dg.tables.effective_chunks_notes(r),
                              "verdict": r.verdict, "verdict_detail": r.verdict_detail}
                        for lab, r in reports.items()},
           "result_box": box,
           "forest": forest.to_dict("records"),
           "gate_claims": [c.text for c in g2], "estimator_note": estimator_note,
           "regime_line": regime, "mean_gradient_share": shares, "without_norm_gains": without_norms,
           "shard_lines": shards_said}
_ = dg.save_numbers("04_design_effect", numbers, figures_dir)

# %% [markdown]
# ## References
#
# - Yang, H. (2026). *Long documents make your batch smaller than it looks: measuring within-document gradient
#   correlation* (doc-batch-gradients). Zenodo. [doi:10.5281/zenodo.23268861](https://doi.org/10.5281/zenodo.23268861).
#   The study this page repeats; its numbers are in `data/published/`.
# - Kish, L. (1965). *Survey Sampling*. New York: Wiley. (Design effect.)
# - Efron, B., & Tibshirani, R. J. (1993). *An Introduction to the Bootstrap*. New York: Chapman & Hall.

# %%
dg.versions()
