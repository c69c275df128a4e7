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
# # Batch composition, measured as gradient noise
#
# A batch-composition study (u/residual_cartographer, "Completed batch composition study: structured grouping
# misses replication rule", 2026-10-14) regrouped training rows four ways (identity, random, balanced and
# coherent by per-row unigram surprise, within windows of 32 microbatches) and found no difference in final loss
# worth replicating. It could only describe its batches lexically: "These are lexical statistics, not measured
# gradient variances." The Gram matrices measured here are a sufficient statistic for the gradient noise of
# *any* batch built from the measured chunks, so this page measures what that study could not: how much each
# rule changes the gradient noise of a batch, beside how much it changes the lexical statistic.
#
# For a partition of the $n$ chunks into batches $B$ of $b$ chunks, the gradient noise is the mean squared
# deviation of the batch-mean gradients from the overall mean,
#
# $$V = \operatorname{mean}_B \lvert g_B - \bar g\rvert^2
#   = \operatorname{mean}_B \frac{\mathbf 1_B^\top K \mathbf 1_B}{b^2} - \frac{\mathbf 1^\top K \mathbf 1}{n^2},$$
#
# and under uniformly random batches (sampling without replacement) its expectation is
# $\frac{n-b}{b(n-1)}\,s^2$ with $s^2$ the mean of $\lvert g_i-\bar g\rvert^2$. The ratio
# $V/\mathrm{E}\,V_\text{random}$ is the rule's design effect: above 1 the rule's batches are noisier than random
# ones, below 1 quieter. The same formula with the Gram $K = s s^\top$ of a scalar score gives the lexical
# statistic, the between-batch variance of mean unigram surprise relative to random. Rules: **identity**
# (consecutive chunks of one document), **random**, **balanced** (sort by score, $b$ strata, one chunk from each
# per batch), **coherent** (sorted, grouped consecutively). Definitions:
# [docs/methods.md](../docs/methods.md#batch-composition).

# %% tags=["parameters"]
results_dir = "data/results"  # directory of result files (searched recursively)
models = ["HuggingFaceTB/SmolLM2-135M-Instruct"]  # models to show, as recorded in the result files
corpora = ["BOOKS", "CODE", "PAPERS", "WEB"]  # corpora to show, in this order (WEB is the control)
batch_sizes = [4, 8, 16, 32]  # batch sizes b in chunks
window = 0  # regroup within consecutive windows of this many chunks (whole documents); 0: the whole cell
score = "unigram"  # what balanced and coherent sort by: 'unigram' (mean unigram surprise) or 'loss'
seed = 20261007  # seed of the bootstrap draws and of the rules' random permutations
documents = "0:16"  # result files read: documents A:B (a rule needs a cell measured in one file: 0:16)
resamples = 500  # document-bootstrap resamples, also the Monte-Carlo draws of random partitions (0: none)
vocab_size = 49152  # vocabulary for the add-one counts, used only if the corpus manifest records none
figures_dir = "figures"  # where figures and the numbers file are written

# %%
from docgrad.runtime.pages import save_chart, save_numbers, setup, versions

ROOT = setup()

import altair as alt
import pandas as pd
from IPython.display import Markdown, display

from docgrad.results import batching
from docgrad.results import stats
from docgrad.results.format import parse_docs
from docgrad.results.study import Study
from docgrad.presentation.charts import corpus_color, highlight, legend_pick
from docgrad.errors import AnalysisError

# %%
study = Study(results_dir, resamples, seed, docs=parse_docs(documents))   # reads the result files once
cells = [c for c in study.cells.values() if c.model in models and c.corpus in corpora]
cells.sort(key=lambda c: (models.index(c.model), c.revision, corpora.index(c.corpus), c.chunk))
rows, comparisons, measured, refused, notes = [], [], [], {}, {}
for cell in cells:
    try:
        inputs = batching.cell_inputs(cell, vocab_size=vocab_size)
    except AnalysisError as e:  # e.g. a cell of several files: cross-file pairs were never computed
        refused[cell.name] = str(e)
        continue
    if inputs.surprise is None:
        notes[cell.corpus] = inputs.surprise_note
    cell_rows = batching.measure(inputs, batch_sizes, window=window, score=score, resamples=resamples, seed=seed)
    rows += cell_rows
    comparisons += batching.compare_identity(inputs, cell_rows, stats.estimate_cell(cell, resamples=0).all)
    measured.append({"cell": cell.name, "corpus": cell.corpus, "n_chunks": inputs.n, "documents": len(inputs.doc_ids),
                     "chunks_per_document": inputs.m, "vocab_size": inputs.vocab_size,
                     "unigram_surprise": inputs.surprise_note or "available", "synthetic": any(
                         bool(sh.meta.get("synthetic")) for sh in cell.shards)})
present = {c["corpus"] for c in measured}
lines = [f"- results directory: `{results_dir}`; models: {', '.join(f'`{m}`' for m in models)}; batch sizes "
         f"{batch_sizes} chunks; window: {'the whole cell' if window == 0 else f'{window} chunks'}; balanced and "
         f"coherent sort by {'mean unigram surprise' if score == 'unigram' else 'the model loss'}; seed {seed}; "
         f"{resamples} document-bootstrap resamples",
         f"- cells measured: {', '.join(c['cell'] for c in measured) or 'none'}",
         f"- corpora without a cell: {', '.join(k for k in corpora if k not in present) or 'none'}",
         f"- models without a cell: {', '.join(m for m in models if not any(c.model == m for c in cells)) or 'none'}"]
lines += [f"- refused: {name}: {why}" for name, why in refused.items()]
lines += [f"- {corpus}: unigram surprise {note}" for corpus, note in notes.items()]
if any(c["synthetic"] for c in measured):
    lines.append("- **these result files are SYNTHETIC** (docgrad.results.synthetic): the numbers illustrate the pipeline")
display(Markdown("\n".join(lines)))

# %% [markdown]
# ## Gradient noise and lexical statistic, rule by rule
#
# Each rule's ratio to random batches, for the gradients (solid) and for the mean unigram surprise (dashed),
# against the batch size $b$ (log scales; 1 = random). Brackets and bars are 95% document-bootstrap
# intervals. Hover for values; click a legend entry to highlight a corpus.

# %%
df = batching.frame(rows)
order = [k for k in corpora if k in present]
long = pd.concat([
    df.assign(measure="gradient noise", ratio=df["gradient"], lo=df["gradient_lo"], hi=df["gradient_hi"]),
    df.assign(measure="unigram surprise (lexical)", ratio=df["lexical"], lo=df["lexical_lo"], hi=df["lexical_hi"]),
])[["model", "corpus", "b", "rule", "measure", "ratio", "lo", "hi"]]
long = long[(long["rule"] != "random") & long["ratio"].notna()]
long["model"] = long["model"].str.split("/").str[-1]
pick = legend_pick()
color = corpus_color(order)
measures = ["gradient noise", "unigram surprise (lexical)"]
yR = alt.Y("ratio:Q", title="ratio to random batches", scale=alt.Scale(type="log"))
xb = alt.X("b:Q", title="batch size b (chunks)", scale=alt.Scale(type="log", base=2),
           axis=alt.Axis(values=batch_sizes))
dash = alt.StrokeDash("measure:N", sort=measures, title=None)
tip = ["corpus:N", "rule:N", "measure:N", "b:Q", alt.Tooltip("ratio:Q", format=".3f"),
       alt.Tooltip("lo:Q", format=".3f", title="95% lo"), alt.Tooltip("hi:Q", format=".3f", title="95% hi")]
base = alt.Chart(long)
chart_rules = alt.layer(  # the legend selection lives on the first layer that encodes the corpus colour
    base.mark_line(point=True).encode(x=xb, y=yR, color=color, strokeDash=dash, tooltip=tip,
                                      opacity=highlight(pick)).add_params(pick),
    base.mark_errorbar(ticks=True).encode(x=xb, y=alt.Y("lo:Q", title="ratio to random batches"), y2="hi:Q",
                                          color=color, opacity=highlight(pick, 0.7, 0.05)),
    base.mark_rule(color="gray", strokeDash=[2, 2]).encode(y=alt.datum(1)),
).properties(width=210, height=260)
facet = dict(column=alt.Column("rule:N", title=None, sort=["identity", "balanced", "coherent"]))
if long["model"].nunique() > 1:
    facet["row"] = alt.Row("model:N", title=None)
chart_rules = chart_rules.facet(**facet)
if len(long):
    display(save_chart(chart_rules, "05_ratio_by_batch_size", figures_dir))
with pd.option_context("display.max_colwidth", 80):
    display(batching.table(rows, notes))

# %% [markdown]
# ## Does the lexical statistic predict the gradient noise?
#
# Every (corpus, $b$, rule) as one point: how far the rule moves the lexical statistic (x) against how far it
# moves the gradient noise (y). If lexical balance predicted gradient-noise balance, the points would lie along
# the diagonal $y = x$; a flat cloud near $y = 1$ means the gradients barely notice what the surprise sort does.

# %%
pts = df[(df["rule"] != "random") & df["lexical"].notna()].copy()
diag = pd.DataFrame({"x": [0.005, 50.0], "y": [0.005, 50.0]})
log = alt.Scale(type="log", domain=[0.005, 50], nice=False)
pick2 = legend_pick()
chart_scatter = alt.layer(
    alt.Chart(diag).mark_line(color="gray", strokeDash=[4, 3]).encode(x=alt.X("x:Q", scale=log),
                                                                      y=alt.Y("y:Q", scale=log)),
    alt.Chart(diag).mark_rule(color="gray").encode(y=alt.datum(1)),
    alt.Chart(pts).mark_point(filled=True, size=70).encode(
        x=alt.X("lexical:Q", scale=log, title="lexical ratio to random (between-batch variance of mean surprise)"),
        y=alt.Y("gradient:Q", scale=log, title="gradient-noise ratio to random"),
        color=corpus_color(order), shape=alt.Shape("rule:N", sort=["identity", "balanced", "coherent"]),
        opacity=highlight(pick2),
        tooltip=["corpus:N", "rule:N", "b:Q", alt.Tooltip("lexical:Q", format=".3f"),
                 alt.Tooltip("gradient:Q", format=".3f")]).add_params(pick2),
).properties(width=420, height=320)
if len(pts):
    display(save_chart(chart_scatter, "05_lexical_vs_gradient", figures_dir))
else:
    display(Markdown("No lexical ratios to plot: the unigram surprise is not available for any cell."))

# %% [markdown]
# ## Identity batches and R(bC)
#
# A batch of $b$ consecutive chunks of one document is the block of notebook 04's design effect $R(bC)$. The two
# estimates differ only in how they estimate $\lvert\bar g\rvert^2$: here the cell's own mean gradient
# ($Q = \mathbf 1^\top K\mathbf 1/n^2$, which includes every chunk's squared norm and within-document pairs) with the
# finite-population factor $(n-1)/(n-b)$ of sampling without replacement; there $S_\text{cross}$, the mean over
# pairs of different documents. `R_from_identity` converts this page's ratio to notebook 04's estimator.

# %%
cmp_df = pd.DataFrame(comparisons)
if len(cmp_df):
    cmp_df = cmp_df[["corpus", "b", "identity", "R_bC", "rel_diff", "R_from_identity", "fpc", "Q", "S_cross"]]
cmp_df

# %% [markdown]
# ## Reading

# %%
summary = batching.summary(rows, comparisons)
reading = batching.composition_reading(summary)
display(Markdown("\n\n".join(reading) or "No cells to read."))

# %% [markdown]
# ## What was measured, and what not
#
# - **Chunks, not training rows.** The batches are made of the 512 measured 512-token chunks of each cell (16
#   documents × 32 chunks), each a standalone sequence through SmolLM2-135M-Instruct at fixed weights: the
#   gradient noise of one step, not the course of training, momentum or the optimizer the study used.
# - **Unigram surprise as the study defines it**, on this cell: add-one counts over every target token of the
#   cell's chunks (16 × 32 × 511), vocabulary from the corpus manifest's tokenizer record, FP64 mean of
#   $-\log p$ over each chunk's 511 targets. The study counted over its whole training stream and used
#   2048-token rows and 64-row batches in windows of 32 batches; here the default window is the whole cell.
# - **One cell per file.** A batch mixing documents of different result files would need Gram entries that
#   were never computed, so a cell of several files is refused (listed above), not approximated.
# - **Intervals.** Documents are resampled as in notebook 04 (same documents drawn for the same seed); a document
#   drawn twice counts as two documents, whose chunk pairs get the resample's cross-document mean. Random is the
#   reference (ratio 1 exactly); its Monte-Carlo draws show how far a single random partition strays.

# %%
numbers = {"results_dir": results_dir, "models": models, "corpora": corpora, "batch_sizes": batch_sizes,
           "window": window, "score": score, "seed": seed, "resamples": resamples, "measured": measured,
           "refused": refused, "lexical_notes": notes, "composition_study": batching.COMPOSITION_STUDY,
           "rows": rows, "identity_vs_R": comparisons, "summary": summary, "reading": reading}
_ = save_numbers("05_batch_composition", numbers, figures_dir)

# %%
versions()
