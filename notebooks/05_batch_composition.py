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
# A batch-composition study ([u/residual_cartographer 2026](#References)) regrouped training rows four ways by
# their unigram surprise and found no learning difference worth replicating; it could describe its batches only
# lexically. The Gram matrices measured here give the gradient noise of any batch built from their chunks, so this
# page measures both for the study's four rules.

# %% tags=["parameters"]
results_dir = "data/results"  # directory of result files (searched recursively)
models = ["HuggingFaceTB/SmolLM2-135M-Instruct"]  # models to show, as recorded in the result files
corpora = ["BOOKS", "CODE", "PAPERS", "WEB"]  # corpora to show, in this order (WEB is the control)
batch_sizes = [4, 8, 16, 32]  # batch sizes b in chunks
window = 0  # regroup within consecutive windows of this many chunks (whole documents); 0: the whole cell
score = "unigram"  # what balanced and coherent sort by: 'unigram' (mean unigram surprise) or 'loss'
seed = 20261007  # seed of the random halves of the documents and of the rules' random permutations
documents = "0:16"  # result files read: documents A:B (a rule needs a cell measured in one file: 0:16)
resamples = 500  # random halves of the documents (intervals), also the Monte-Carlo draws of random partitions (0: none)
vocab_size = 49152  # vocabulary for the add-one counts, used only if the corpus manifest records none
regime_dir = "data/regime"  # SmolLM2's model-regime cells (start token, SIMEX; page 04d)
figures_dir = "figures"  # where figures and the numbers file are written

# %%
from docgrad import page as dg

ROOT = dg.setup()

import altair as alt
import pandas as pd
from IPython.display import Markdown, display

study = dg.Study(results_dir, resamples, seed, docs=dg.parse_docs(documents))   # reads the result files once
cells = [c for c in study.cells.values() if c.model in models and c.corpus in corpora]
cells.sort(key=lambda c: (models.index(c.model), c.revision, corpora.index(c.corpus), c.chunk))
rows, comparisons, measured, refused, notes = [], [], [], {}, {}
for cell in cells:
    try:
        inputs = dg.batching.cell_inputs(cell, vocab_size=vocab_size)
    except dg.AnalysisError as e:  # e.g. a cell of several files: cross-file pairs were never computed
        refused[cell.name] = str(e)
        continue
    if inputs.surprise is None:
        notes[cell.corpus] = inputs.surprise_note
    cell_rows = dg.batching.measure(inputs, batch_sizes, window=window, score=score, resamples=resamples, seed=seed)
    rows += cell_rows
    comparisons += dg.batching.compare_identity(inputs, cell_rows, dg.stats.estimate_cell(cell, resamples=0).all)
    measured.append({"cell": cell.name, "corpus": cell.corpus, "n_chunks": inputs.n, "documents": len(inputs.doc_ids),
                     "chunks_per_document": inputs.m, "vocab_size": inputs.vocab_size,
                     "unigram_surprise": inputs.surprise_note or "available", "synthetic": any(
                         bool(sh.meta.get("synthetic")) for sh in cell.shards)})
tests = dg.batching.rule_tests(rows)             # the page's family: Holm over every comparison it states
summary = dg.batching.summary(rows, tests, comparisons)
reading = dg.batch_reading.reading(summary) + [
    dg.batch_reading.interval_note(resamples, max((c["documents"] for c in measured), default=None))]
box = dg.batch_reading.result_box(summary, models, max((c["documents"] for c in measured), default=0), batch_sizes)

# %% tags=["hide-input"]
display(Markdown(box))

# %% [markdown]
# **Terms.** A cell's chunks (16 documents of 32 chunks of 512 tokens) are cut into batches of $b$ chunks. The
# *gradient noise* of a partition is how far the batch-mean gradients $g_B$ stray from the mean $\bar g$,
# $V = \operatorname{mean}_B \lvert g_B - \bar g\rvert^2$, exact from the Gram matrix of the chunks' gradients. A
# rule is reported by its *ratio to random*, $V$ over its expectation for uniformly shuffled batches: above 1
# noisier than random, below 1 quieter. The *lexical ratio* is the same ratio for the chunks' mean *unigram
# surprise* (the average $-\log p$ of their tokens under the cell's token frequencies), the statistic the study
# reported. **Document order** (the study's *identity* rule on our chunks): the chunks as listed, document after
# document, so a batch is $b$ consecutive chunks of one document, page 04's blocks. The study's identity kept its
# packed rows, each many short documents, in their original order; of our corpora only the WEB control (short
# texts packed together) comes near that. **Balanced**: chunks sorted by surprise, cut into $b$ strata, one chunk
# of each per batch (taken in expectation over the strata's shuffles). **Coherent**: $b$ neighbours in sorted order.
#
# A difference is *resolved* when its interval excludes 0 after Holm's step-down over
# every comparison the page makes, each rule against random and document order against coherent per corpus and
# $b$ ([Holm 1979](#References)); rules on one cell are compared on the same halves of the documents (*paired*).
# Brackets: 95% intervals from the *delete-half jackknife* ([Shao & Wu 1989](#References)): the surprise and the
# rule recomputed on random halves of the cell's documents, no document twice, and the estimate ×
# exp(±1.96 standard errors) ([methods](../docs/methods.md#batch-composition)).

# %% tags=["hide-input"]
display(Markdown("\n".join(dg.batch_reading.inputs_lines(results_dir, models, batch_sizes, window, score, seed,
                                                         resamples, measured, corpora, refused, notes))))

# %% [markdown]
# ## Rule by rule
#
# Each rule's ratio to random for the gradients (solid) and the surprise (dashed), against $b$ (log scales; 1 =
# random), with 95% intervals. Hover for values; click a legend entry to highlight a corpus. In the table, `*`
# marks a gradient-noise ratio resolved from random's.

# %%
df = dg.batch_reading.frame(rows)
order = [k for k in corpora if k in {c["corpus"] for c in measured}]
long = pd.concat([
    df.assign(measure="gradient noise", ratio=df["gradient"], lo=df["gradient_lo"], hi=df["gradient_hi"]),
    df.assign(measure="unigram surprise (lexical)", ratio=df["lexical"], lo=df["lexical_lo"], hi=df["lexical_hi"]),
])[["model", "corpus", "b", "rule", "measure", "ratio", "lo", "hi"]]
long = long[(long["rule"] != "random") & long["ratio"].notna()]
long["model"] = long["model"].str.split("/").str[-1]
long["rule"] = long["rule"].map(dg.batch_reading.RULE_LABELS)
rule_order = [dg.batch_reading.RULE_LABELS[r] for r in ("identity", "balanced", "coherent")]
pick = dg.legend_pick()
color = dg.corpus_color(order)
measures = ["gradient noise", "unigram surprise (lexical)"]
yR = alt.Y("ratio:Q", title="ratio to random batches", scale=alt.Scale(type="log"))
xb = alt.X("b:Q", title="batch size b (chunks)", scale=alt.Scale(type="log", base=2),
           axis=alt.Axis(values=batch_sizes))
dash = alt.StrokeDash("measure:N", sort=measures, title=None)
tip = ["corpus:N", "rule:N", "measure:N", "b:Q", alt.Tooltip("ratio:Q", format=".3g"),
       alt.Tooltip("lo:Q", format=".3g", title="95% lo"), alt.Tooltip("hi:Q", format=".3g", title="95% hi")]
base = alt.Chart(long)
chart_rules = alt.layer(  # the legend selection lives on the first layer that encodes the corpus colour
    base.mark_line(point=True).encode(x=xb, y=yR, color=color, strokeDash=dash, tooltip=tip,
                                      opacity=dg.highlight(pick)).add_params(pick),
    base.mark_errorbar(ticks=True).encode(x=xb, y=alt.Y("lo:Q", title="ratio to random batches"), y2="hi:Q",
                                          color=color, opacity=dg.highlight(pick, 0.7, 0.05)),
    base.mark_rule(color="gray", strokeDash=[2, 2]).encode(y=alt.datum(1)),
).properties(width=210, height=260)
facet = dict(column=alt.Column("rule:N", title=None, sort=rule_order))
if long["model"].nunique() > 1:
    facet["row"] = alt.Row("model:N", title=None)
chart_rules = chart_rules.facet(**facet)
if len(long):
    display(dg.save_chart(chart_rules, "05_ratio_by_batch_size", figures_dir))
with pd.option_context("display.max_colwidth", 80):
    display(dg.batch_reading.table(rows, tests, notes))

# %% [markdown]
# ## Does the lexical ratio predict the gradient noise?
#
# Every (corpus, $b$, rule) as one point: the lexical ratio (x) against the gradient-noise ratio (y). Points on the
# diagonal would mean the gradient noise moves as the lexical statistic does; a flat cloud near $y = 1$ means it
# barely notices the sort.

# %%
pts = df[(df["rule"] != "random") & df["lexical"].notna()].copy()
pts["rule"] = pts["rule"].map(dg.batch_reading.RULE_LABELS)
diag = pd.DataFrame({"x": [0.005, 50.0], "y": [0.005, 50.0]})
log = alt.Scale(type="log", domain=[0.005, 50], nice=False)
pick2 = dg.legend_pick()
chart_scatter = alt.layer(
    alt.Chart(diag).mark_line(color="gray", strokeDash=[4, 3]).encode(x=alt.X("x:Q", scale=log),
                                                                      y=alt.Y("y:Q", scale=log)),
    alt.Chart(diag).mark_rule(color="gray").encode(y=alt.datum(1)),
    alt.Chart(pts).mark_point(filled=True, size=70).encode(
        x=alt.X("lexical:Q", scale=log, title="lexical ratio to random (between-batch variance of mean surprise)"),
        y=alt.Y("gradient:Q", scale=log, title="gradient-noise ratio to random"),
        color=dg.corpus_color(order), shape=alt.Shape("rule:N", sort=rule_order),
        opacity=dg.highlight(pick2),
        tooltip=["corpus:N", "rule:N", "b:Q", alt.Tooltip("lexical:Q", format=".3g"),
                 alt.Tooltip("gradient:Q", format=".3g")]).add_params(pick2),
).properties(width=420, height=320)
if len(pts):
    display(dg.save_chart(chart_scatter, "05_lexical_vs_gradient", figures_dir))

# %% [markdown]
# ## Document order and R(bC)
#
# Document order's batches are page 04's blocks of $b$ consecutive chunks. Its ratio and page 04's design effect
# $R(bC)$ differ only in the estimate of $\lvert\bar g\rvert^2$ and a finite-population factor; converting one
# into the other reproduces $R(bC)$ ([methods](../docs/methods.md#batch-composition)).

# %%
dg.batch_reading.identity_table(comparisons)

# %% [markdown]
# ## Reading

# %% tags=["hide-input"]
display(Markdown(dg.evidence.claims_markdown(reading)))

# %% [markdown]
# ## What was measured, and what not
#
# - **Chunks at fixed weights.** A batch is made of measured chunks, each a standalone sequence through the model
#   at fixed weights: the noise of one step, not training, momentum or the study's optimizer. Whether that noise
#   changes how a model learns is page 07's question ([Does R predict learning?](07_does_R_predict_learning.html)).
# - **Surprise on the cell.** Token frequencies are counted over the cell's own chunks; the study counted its whole
#   training stream and batched packed rows of many documents.
# - **Documents, not sources.** BOOKS's documents share a few sources (Bible books, Austen novels): its intervals
#   describe these documents.
# - **One model.** The page reads the models of its `models` parameter (SmolLM2-135M-Instruct); sorting by surprise
#   needs that model's own span cache.

# %% tags=["hide-input"]
_, regime_readings = dg.model_regime.read_model_regime(results_dir, regime_dir)
display(Markdown(f"- {dg.regime.limitation_line(regime_readings)}"))

# %% tags=["hide-input"]
display(Markdown(f"- {dg.batch_reading.refused_line(refused, len(measured))}"))

# %%
numbers = {"regime_dir": regime_dir, "model_regime": dg.regime.reading_numbers(regime_readings),
           "regime_limitation": dg.regime.limitation_line(regime_readings),
           "results_dir": results_dir, "models": models, "corpora": corpora, "batch_sizes": batch_sizes,
           "window": window, "score": score, "seed": seed, "resamples": resamples, "measured": measured,
           "refused": refused, "lexical_notes": notes, "composition_study": dg.batching.COMPOSITION_STUDY,
           "rows": rows, "identity_vs_R": comparisons, "tests": tests, "summary": summary,
           "comparison_claims": [c.text for c in dg.batch_reading.comparison_claims(tests)],
           "result_box": box, "reading": [str(c) for c in reading]}
_ = dg.save_numbers("05_batch_composition", numbers, figures_dir)

# %% [markdown]
# ## References
#
# - u/residual_cartographer (2026-10-14). *Completed batch composition study: structured grouping misses
#   replication rule.* The four partition rules and lexical ratios this page repeats.
# - Holm, S. (1979). A simple sequentially rejective multiple test procedure. *Scandinavian Journal of Statistics*
#   6(2), 65–70.
# - Shao, J., & Wu, C. F. J. (1989). A general theory for jackknife variance estimation. *The Annals of
#   Statistics* 17(3), 1176–1197. (The delete-d jackknife; here d = half the documents.)
# - Cochran, W. G. (1977). *Sampling Techniques* (3rd ed.). New York: Wiley. (Random batches as samples without
#   replacement.)

# %%
dg.versions()
