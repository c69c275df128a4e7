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
# # Which documents and sources carry the correlation
#
# Page 03 gives each corpus's correlation $\rho(\Delta)$. Here the first model of `models` is read document by
# document: which documents carry it, how far one document moves the design effect, how documents that share a
# source (an author, a work, a project owner) share part of it, and what exactly was measured: the model files,
# the control and the documents.

# %% tags=["parameters"]
results_dir = "data/results"  # directory of result files (searched recursively)
models = ["smollm2-135m", "gemma3-270m"]  # offline model names or '<id>@<revision>'; the first is read in depth
corpora = ["BOOKS", "CODE", "PAPERS", "WEB"]  # corpora to show, in this order
chunk = 512  # chunk length C in tokens
resamples = 2000  # document-bootstrap resamples (0: no intervals)
seed = 20261007  # bootstrap seed
documents = "0:48"  # result files read: documents A:B (0:48 the 48-document cells of SmolLM2; Gemma has 0:16)
figures_dir = "figures"  # where figures and the numbers file are written

# %%
from docgrad import page as dg

ROOT = dg.setup()

import altair as alt
import numpy as np
import pandas as pd
from IPython.display import Markdown, display

page = dg.StudyPage(results_dir, models, corpora, documents, resamples, seed, chunk)   # reads the result files once
page_models, study, first = page.models, page.study, page.models[0]
report, missing = page.reports[first.label], page.missing[first.label]
label, manifest = first.label, first.manifest
cells_by = {c.corpus: c for c in report.cells}
decomp = study.decompositions(first, list(cells_by))
order = list(corpora)
color = dg.corpus_color(order)
corpus_docs = pd.concat([t[t["doc"].isin(cells_by[k].doc_ids)] for k in cells_by
                         for t in [dg.corpora_build.corpus_table(manifest, corpora=[k])]
                         if k in study.manifest(first).get("corpora", {})] or
                        [pd.DataFrame(columns=["corpus", "doc", "title", "tokens"])], ignore_index=True)
influence = dg.tables.influence_frame(decomp, corpus_docs)
loo_facts = dg.tables.leave_one_out_facts(dg.tables.top_influences(influence, 1), influence, cells_by, decomp)

# %% tags=["hide-input"]
display(Markdown(dg.correlation.documents_box(label, loo_facts, decomp)))

# %% [markdown]
# ## Which documents carry the correlation
#
# $\rho_\text{long}$ of each document on its own (with its cell's $S_\text{cross}$ and $\sigma^2$). A corpus
# mean driven by a few documents shows as a long upper tail; hover a point for the document.

# %%
per_doc = dg.tables.per_doc_frame(report).merge(corpus_docs[["corpus", "doc", "title"]], on=["corpus", "doc"],
                                            how="left").fillna({"title": ""})
pick4 = dg.legend_pick()
strip = alt.Chart(per_doc).mark_circle(size=60).encode(
    x=alt.X("corpus:N", sort=order, title=None), y=alt.Y("rho_long:Q", title="per-document ρ_long"),
    xOffset=alt.XOffset("doc:N", title="document"), color=color, opacity=dg.highlight(pick4, 0.9, 0.1),
    tooltip=["corpus:N", "doc:Q", "title:N", alt.Tooltip("rho_long:Q", format=".4f")],
).add_params(pick4).properties(width=420, height=280)
display(dg.save_chart(strip, "03b_rho_long_per_document", figures_dir))
dg.tables.three_significant(per_doc.sort_values("rho_long", ascending=False).groupby("corpus", sort=False).head(3)
                            [["corpus", "doc", "title", "rho_long"]])

# %% [markdown]
# ## Leave one document out
#
# How much does each document move its corpus's $R(16\text{K})$? The bars are $R$ without the document minus
# $R$ with all (that document's weight set to 0; [docs/methods.md](../docs/methods.md#decomposition)): a bar
# below 0 is a document that raises $R$. Page 04c gives the interval of the largest move.

# %%
pick5 = dg.legend_pick()
chart_loo = alt.Chart(influence).mark_bar().encode(
    x=alt.X("doc:O", title="document"), y=alt.Y("dR:Q", title="R(16K) without it − R(16K)"), color=color,
    opacity=dg.highlight(pick5, 0.9, 0.15),
    tooltip=["corpus:N", "doc:Q", "title:N", "source:N", alt.Tooltip("R_without:Q", format=".3f"),
             alt.Tooltip("dR:Q", format="+.3f"), alt.Tooltip("dR_frac:Q", format="+.1%")],
).add_params(pick5).properties(width=170, height=220).facet(column=alt.Column("corpus:N", sort=order, title=None))
display(dg.save_chart(chart_loo, "03b_leave_one_out", figures_dir))
loo_lines = dg.correlation.leave_one_out_lines(loo_facts)
display(Markdown("\n".join(f"- {s}" for s in loo_lines)))

# %% [markdown]
# ## Documents that share a source
#
# Each document's source comes from the manifest (`docgrad.corpora.provenance.source_label`: the author of a
# novel, the work of a Bible book, the GitHub owner of a Python project, the R package of a vignette; each packed
# WEB pseudo-document is its own). Documents of one source can share a mean gradient of their own, so two
# chunks of *different* documents of that source are correlated too. The chart shows, for every pair of
# documents, the mean inner product of their chunks relative to the cell's $S_\text{cross}$.

# %%
pair_frames, src_rows = [], []
for k, d in decomp.items():
    src_rows += [{"corpus": k, "doc": doc, "source": s_} for doc, s_ in zip(d.doc_ids, d.sources)]
    M = dg.decomposition.document_pair_means(study.cell(first, k).sums["all"])
    S = cells_by[k].all.S_cross
    pair_frames.append(pd.DataFrame([{"corpus": k, "doc_a": a, "doc_b": b, "ratio": M[i, j] / S,
                                      "source_a": d.sources[i], "source_b": d.sources[j]}
                                     for i, a in enumerate(d.doc_ids) for j, b in enumerate(d.doc_ids)]))
sources_df = pd.DataFrame(src_rows, columns=["corpus", "doc", "source"])
pairs_df = pd.concat(pair_frames, ignore_index=True).dropna(subset=["ratio"])   # pairs across result files: never measured
positive = bool((pairs_df["ratio"] > 0).all())   # a log scale only for positive ratios
heat = alt.Chart(pairs_df).mark_rect().encode(
    x=alt.X("doc_a:O", title="document"), y=alt.Y("doc_b:O", title="document"),
    color=alt.Color("ratio:Q", title="mean K / S_cross",
                    scale=alt.Scale(scheme="viridis", type="log" if positive else "linear")),
    tooltip=["corpus:N", "doc_a:Q", "source_a:N", "doc_b:Q", "source_b:N", alt.Tooltip("ratio:Q", format=".2f")],
).properties(width=170, height=170).facet(column=alt.Column("corpus:N", sort=order, title=None))
display(dg.save_chart(heat, "03b_document_pairs", figures_dir))
src_lines = [line for k, d in decomp.items() for line in dg.correlation.source_lines(
    d, cells_by[k].all.S_cross, dg.tables.per_doc_by_source(cells_by[k].rho_long_per_doc, d.doc_ids, d.sources),
    cells_by[k].all.R_16K_ci)]
display(Markdown("\n\n".join(src_lines) or "No corpus has two sources with several documents each."))

# %% [markdown]
# ### Source, document and chunk parts of the correlation
#
# With sources, the correlation of two chunks splits into three nested parts ([Searle, Casella & McCulloch
# 1992](#References)), measured about the mean inner product of chunks from *different sources*: the
# **source** part $\rho_\text{src}$ (two chunks of different documents of one source), the **document** part
# $\rho_\text{doc}$ (one document beyond its source) and the **chunk** part (not shared at long range). A source
# with one document cannot be told apart from that document, so its part counts as document.

# %%
parts = dg.tables.decomposition_frame(decomp)[["corpus", "n_sources", "shared_sources", "rho_src", "rho_doc",
                                               "rho_chunk"]]
parts_text = dg.correlation.parts_lines(parts)
display(Markdown("\n".join(f"- {s}" for s in parts_text)))

# %% [markdown]
# ## What was measured
#
# ### The models
#
# Read from the metadata of each pinned model file (`docgrad.measure.model_facts.model_description`):

# %% tags=["hide-input"]
mdescs, not_installed = {}, {}
for m in page_models:
    spec = dg.models.offline_model(m.model)   # an offline model's file, sha256-checked; a hub model has none
    if spec is not None and not dg.models.installed(spec):
        not_installed[m.label] = dg.correlation.model_not_installed_line(m.label, spec)
        display(Markdown(not_installed[m.label]))
        spec = None
    mdescs[m.label] = dg.model_facts.model_description(model=spec.name) if spec is not None else None
display(Markdown("\n\n".join(dg.correlation.model_lines(lab, md, study.group_sizes(m).get("other"), chunk)
                             for (lab, md), m in zip(mdescs.items(), page_models) if md is not None)))

# %% [markdown]
# ### The control
#
# The published control is packed FineWeb: web documents concatenated into 16K-token sequences. Ours is built
# from Debian package descriptions (`docgrad.corpora.provenance.control_facts`):

# %% tags=["hide-input"]
ctrl = None
try:
    ctrl = dg.provenance.control_facts(manifest, dg.CONTROL, chunk,
                                       doc_ids=cells_by[dg.CONTROL].doc_ids if dg.CONTROL in cells_by else None)
except (OSError, KeyError) as e:
    display(Markdown(f"No control record in the manifest ({type(e).__name__}: {e})."))
c_ctrl = cells_by.get(dg.CONTROL)
ctrl_lines = dg.correlation.control_lines(ctrl, chunk, c_ctrl.all.rho.get(chunk) if c_ctrl else None,
                                          c_ctrl.all.rho_long if c_ctrl else None,
                                          c_ctrl.all.R_16K if c_ctrl else None) if ctrl else []
display(Markdown("\n".join(f"- {s}" for s in ctrl_lines)))

# %% [markdown]
# ### The documents
#
# The measured documents of each corpus (from the model's corpus manifest), with their source; tokens
# [2048, 2048 + 16384) of each, cut into 32 chunks of 512 tokens.

# %%
corpus_docs.merge(sources_df.rename(columns={"source": "source label"}), on=["corpus", "doc"], how="left")

# %%
numbers = {"results_dir": results_dir, "model": first.model, "revision": first.revision, "chunk": chunk,
           "resamples": resamples, "seed": seed, "documents": documents, "missing": missing,
           "rho_long_per_doc": {c.corpus: {str(d): v for d, v in c.rho_long_per_doc.items()} for c in report.cells},
           "result_box": dg.correlation.documents_box(label, loo_facts, decomp), "leave_one_out_top": loo_facts,
           "leave_one_out_lines": loo_lines,
           "leave_one_out": influence.to_dict("records"), "source_lines": src_lines,
           "decomposition": {k: d.to_json() for k, d in decomp.items()}, "parts_lines": parts_text,
           "model_descriptions": mdescs, "models_not_installed": not_installed,
           "group_sizes": study.group_sizes(first), "control": ctrl,
           "control_lines": ctrl_lines, "R_16K": {c.corpus: c.all.R_16K for c in report.cells},
           "rho": {c.corpus: c.all.rho for c in report.cells}}
_ = dg.save_numbers("03b_documents_and_sources", numbers, figures_dir)

# %% [markdown]
# ## References
#
# - Efron, B., & Tibshirani, R. J. (1993). *An Introduction to the Bootstrap*. New York: Chapman & Hall.
#   (Jackknife.)
# - Searle, S. R., Casella, G., & McCulloch, C. E. (1992). *Variance Components*. New York: Wiley. (Nested
#   random effects: the source / document / chunk parts.)
# - Charikar, M., Chen, K., & Farach-Colton, M. (2002). Finding frequent items in data streams. *ICALP 2002*,
#   LNCS 2380, 693–703. (The count sketch behind the Gram matrices; notebook 02.)

# %%
dg.versions()
