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
# # Your documents, measured
#
# `docgrad measure` executes this page for a corpus of your own, with the numbers it printed. Committed, it reads
# the study's CODE documents as if they were yours, against the packed control WEB.

# %% tags=["parameters"]
results_dir = "data/results"  # directory of result files (searched recursively)
model = "smollm2-135m"  # offline model name, '<id>@<revision>', or a local checkpoint as its result files name it
corpus = "CODE"  # your corpus
control = "WEB"  # the packed short-document control R_rel divides by
chunk = 512  # chunk length C in tokens
documents = "0:16"  # documents A:B
resamples = 2000  # document-bootstrap resamples (0: no intervals)
seed = 20261007  # bootstrap seed
study_results_dir = "data/results"  # the study's own results and regime folders (page 04d's finding)
regime_dir = "data/regime"
figures_dir = "figures"  # where figures and the numbers file are written

# %%
from docgrad import page as dg

ROOT = dg.setup()

import altair as alt
import pandas as pd
from IPython.display import Markdown, display

page = dg.StudyPage(results_dir, [model], [corpus, control], documents, resamples, seed, chunk)
measured = dg.measurement.measured_analysis(results_dir, model, corpus, control, chunk, documents, resamples, seed)
m = dg.measurement.read_measurement(measured, page.label, corpus, control)      # what `docgrad measure` printed
ran = dg.measurement.ran_as(results_dir, m.cell)
regime = dg.measurement.model_regime_lines(model, page.label, ran, study_results_dir, regime_dir)
display(Markdown(f"**{corpus}** under **{page.label}**, against **{control}**, "
                 f"{chunk}-token chunks, documents {documents}."))

# %% tags=["hide-input", "headline"]
box = dg.measurement.measurement_box(m, regime[-1])
display(Markdown(box))

# %% tags=["hide-input"]
lines = dg.measurement.measurement_lines(measured, page.label, corpus, control)
display(Markdown("What `docgrad measure` printed for these cells:\n\n" + "\n".join(f"- {x}" for x in lines)))

# %% [markdown]
# **What R is.** The design effect $R(W)$ is the gradient-noise variance of one block of $m$ consecutive chunks of
# one document, divided by that of $m$ independent chunks with the same token count: with $\rho(l)$ the correlation
# of two chunks $l$ apart, $R(mC) = 1 + \frac{2}{m}\sum_{l=1}^{m-1}(m-l)\rho(l)$. $R_\text{rel}$ divides it by the
# control's at the same window. Brackets are 95% intervals from resampling documents
# ([docs/methods.md](../docs/methods.md#document-bootstrap)).

# %% tags=["hide-input"]
display(Markdown("\n".join(page.inputs_lines())))

# %% [markdown]
# ## The two cells at one window

# %%
table = dg.measurement.measurement_frame(m)
table.set_index("corpus")

# %% [markdown]
# ## R(W) against the window W
#
# Both cells up to the longest window each span allows; R_rel is read where both have a value.

# %% tags=["headline"]
R = dg.tables.R_frame(measured)
R = R[R["group"] == "all"]
color = dg.corpus_color([corpus, control])
xW = alt.X("W_tokens:Q", title="window W (tokens)", scale=alt.Scale(type="log", base=2))
tip = ["corpus:N", "W_tokens:Q", alt.Tooltip("R:Q", format=".3f"), alt.Tooltip("lo:Q", format=".3f", title="95% lo"),
       alt.Tooltip("hi:Q", format=".3f", title="95% hi")]
base = alt.Chart(R)
chart = alt.layer(base.mark_line(point=True).encode(x=xW, y=alt.Y("R:Q", title="R(W)"), color=color, tooltip=tip),
                  base.mark_errorbar(ticks=True).encode(x=xW, y=alt.Y("lo:Q", title="R(W)"), y2="hi:Q", color=color)
                  ).properties(width=420, height=260, title=f"{corpus} and {control} under {page.label}")
display(dg.save_chart(chart, "04e_R_by_window", figures_dir))

# %% [markdown]
# ## The model's regime

# %% tags=["hide-input"]
display(Markdown("\n".join(f"- {x}" for x in regime)))

# %% [markdown]
# ## Gates and verdict
#
# G1: the count sketch reproduces exact inner products; G2: the control shows (almost) no long-range correlation,
# $R(W) < 1.2$ and $\rho_\text{long} < 0.01$ at the window read; G3: the mean gradient is resolved, so $B_\text{simple}$
# is defined ([docs/methods.md](../docs/methods.md#gates-and-verdict)).

# %% tags=["hide-input"]
display(Markdown(f"**Verdict: {m.verdict}**"))
with pd.option_context("display.max_colwidth", 200):
    display(dg.measurement.gate_rows(m))

# %% [markdown]
# ## Explore it yourself
#
# The explorer opens at your corpus's window. Move the window and batch sliders: it recomputes $R(W)$ from each
# cell's correlation profile, the effective number of independent chunks in a batch, and $B_\text{simple}$ for
# contiguous blocks.

# %%
profiles = [dg.profiles.cell_profile(page.study.cell(page.models[0], c.corpus), page.label, resamples, seed)
            for c in page.reports[page.label].cells]
explorer = dg.explorer.explorer_chart(pd.concat([p[0] for p in profiles], ignore_index=True),
                                      pd.concat([p[1] for p in profiles], ignore_index=True), None, chunk,
                                      window=m.corpus_window)
display(dg.save_chart(explorer, "04e_explorer", figures_dir))

# %%
numbers = {"results_dir": results_dir, "model": model, "corpus": corpus, "control": control, "chunk": chunk,
           "documents": documents, "resamples": resamples, "seed": seed, "window": m.window,
           "corpus_window": m.corpus_window, "R_rel": m.R_rel, "R_rel_ci": list(m.R_rel_ci), "verdict": m.verdict,
           "verdict_detail": list(m.verdict_detail), "printed_lines": lines, "result_box": box, "regime": regime,
           "table": table.to_dict("records"),
           "gates": {k: {"status": g["status"], "summary": g["summary"]} for k, g in m.gates.items()}}
_ = dg.save_numbers("04e_your_documents", numbers, figures_dir)

# %%
dg.versions()
