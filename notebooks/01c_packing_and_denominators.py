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
# # Loss reduction in packed rows, cross-entropy options and policy-gradient losses
#
# The second class after page 01: packing several documents into one row (what changes in the weights, the
# targets and the attention, and what `DataCollatorWithFlattening` fixes), what `cross_entropy`'s mean divides
# by, per-sequence and per-token normalisation in policy-gradient fine-tuning, and the effective sample size that
# links every weighting to page 04's design effect, measured on SmolLM2-135M-Instruct with real text where it
# matters. Exercises with worked solutions close the page.
#
# > **What to take away.**
# > - Packing changes the weights (documents by length) and adds cross-document targets and context: drop each
# >   document's first label, reset positions and mask attention per document, then choose the weighting.
# > - With class weights, PyTorch's mean divides by the sum of the targets' weights, not by their count (class-index
# >   targets; probability targets divide by the number of rows).
# > - Per-sequence normalisation in policy-gradient losses is page 01's document mean, with its length bias.
# > - Unequal weights cost effective sample size, (Σ w)² / Σ w², just as correlation does in page 04's R.
#
# Every number stated on this page is computed by `docgrad.teaching.pitfalls` and `docgrad.teaching.reduction`
# (tested in `tests/test_pitfalls.py` and `tests/test_reduction.py`) and saved to
# `figures/01c_packing_and_denominators.json`. Re-execute with other settings, e.g.
# `docgrad run 01c -p pack_lengths "[30, 10, 60]"`.

# %% tags=["parameters"]
model_name = "smollm2-135m"  # the offline default model (GGUF de-quantised to float32)
corpus = "BOOKS"  # real text: spans of this corpus (docgrad corpora build --corpus BOOKS makes the cache)
pack_lengths = [47, 15, 39, 23]  # tokens of each document of a packed row (each followed by EOS)
pack_rows = 8  # packed rows (every document from another book or place)
pack_offsets = [0, 1, 2, 3, 4, 6, 8, 12, 16]  # positions after a boundary reported (0 = the boundary target)
ce_ignored = [1, 4]  # positions whose target is ignore_index in the cross-entropy example
ce_weight = [1.0, 2.0, 0.5, 3.0, 1.5]  # class weights of the cross-entropy example (5 classes)
ce_smoothing = 0.1  # label_smoothing of the cross-entropy example
pg_lengths = [2, 8, 4, 16]  # response lengths of one policy-gradient group
pg_advantages = [1.0, -1.0, 1.0, -1.0]  # each response's advantage
pg_max_length = 32  # L_max of the constant normalisation: the generation budget, fixed before sampling
kish_lengths = [2, 8]  # page 01's documents, for the effective sample sizes
kish_labels = [1, 0]
kish_padding = [6, 0]
kish_rho = 0.1  # within-document correlation of the design-effect example
seed = 0  # seeds of batches, Trainer and the synthetic checks

# %%
import altair as alt
import numpy as np
import pandas as pd
import torch
from IPython.display import Markdown, display

from docgrad.teaching import history
from docgrad.teaching import pitfalls as P
from docgrad.teaching import reduction as R
from docgrad.corpora.build import DEFAULT_MANIFEST, load_spans, read_manifest
from docgrad.models import load_model, result_model
from docgrad.results.study import Study
from docgrad.runtime.pages import save_chart, save_numbers, setup, versions
from docgrad.core.constants import CHUNK, CORPORA, DOCS_PER_CORPUS, HEADLINE_WINDOW

ROOT = setup()
torch.set_num_threads(2)
torch.manual_seed(seed)
NUMBERS = {"model": model_name, "corpus": corpus}


def f(x, digits=4):
    """Format a computed number for the prose."""
    return f"{x:.{digits}g}"


def pct(x, digits=3):
    return f"{100 * x:.{digits}g}%"


model = load_model(model_name)
spans = [s for s in load_spans(corpus) if s.doc < DOCS_PER_CORPUS]   # the 16 documents the other pages read
separator = read_manifest(DEFAULT_MANIFEST)["tokenizer"]["separator"]  # what the corpora pack documents with
EOS = int(separator["id"])
NUMBERS["separator"] = separator
display(Markdown(f"{model_name}: {sum(p.numel() for p in model.parameters()):,} parameters; {len(spans)} "
                 f"{corpus} spans of {len(spans[0].tokens):,} tokens (the documents below are cut from them); "
                 f"documents are separated by `{separator['token']}` (id {EOS}), the pretraining separator."))
display(Markdown(history.what_changed_when()))

# %% [markdown]
# ## 1. Packed sequences
#
# Packing concatenates several documents (each followed by the end-of-text token) into one row so that no
# position is wasted on padding. Three things change at once:
#
# 1. the row's token mean weighs each document by its number of targets, page 01's token mean inside a row;
#    weighting each document by 1/D (the mean of per-document means) is the alternative objective;
# 2. the first token of every document after the first becomes a target, predicted from the end of the
#    *previous* document;
# 3. with plain causal attention every later position of a document also attends to the documents before it,
#    and its position id counts from the start of the row.
#
# The fix for 2 and 3 is what transformers' `DataCollatorWithFlattening` prepares: position ids that restart at
# every document and a label of −100 at each document's first token. transformers builds a per-document
# attention mask from those position ids only when three things hold (transformers 5.24, `masking_utils`): **no
# attention mask** is passed, **no cache** is built (`use_cache=False`; SmolLM2's config has `use_cache=True`, and
# with it the row attends across documents although its positions restart), and the attention implementation
# applies the mask (eager and SDPA here; FlashAttention reads the boundaries from the position ids itself). The
# `Trainer` turns the cache off for training, so the same model object behaves differently before and after one is
# built: the runs below pass `use_cache=False` explicitly. The rows hold real spans from different books, each
# starting mid-text.

# %%
rng = np.random.default_rng(seed)
rows_docs = []
for r in range(pack_rows):
    picks = rng.choice(len(spans), size=len(pack_lengths), replace=False)
    row = []
    for d, n in zip(picks, pack_lengths):
        start = int(rng.integers(0, len(spans[d].tokens) - n))
        row.append(spans[d].tokens[start:start + n].tolist())
    rows_docs.append(row)
counts = P.packed_target_counts([n + 1 for n in pack_lengths])
weights_tok = P.packed_weights([n for n in pack_lengths])
weights_doc = P.packed_weights([n for n in pack_lengths], per_document=True)
NUMBERS["packing_counts"] = counts
NUMBERS["packing_weights"] = {"token_mean": weights_tok, "per_document": weights_doc}
packed_rows = P.packed_target_losses(model, rows_docs, EOS)
pack = P.packing_summary(packed_rows, pack_offsets)
pack_objectives = P.packed_row_objectives(packed_rows)
NUMBERS["packing"] = {"layouts": pack["layouts"], "max_abs_diff_vs_standalone": pack["max_abs_diff_vs_standalone"],
                      "by_offset": pack["by_offset"],
                      "objectives": {k: pack_objectives[k] for k in ("token_mean", "document_mean")}}
layouts = pd.DataFrame(pack["layouts"]).T.loc[list(P.PACKING_LAYOUTS)]
layouts["max |loss − standalone|"] = [pack["max_abs_diff_vs_standalone"].get(k) for k in layouts.index]
layouts.index = [P.PACKING_LABELS[k] for k in layouts.index]
layouts[["n_targets", "n_boundary_targets", "mean_loss_boundary", "mean_loss_not_boundary",
         "token_mean_all_targets", "max |loss − standalone|"]]

# %% tags=["hide-input"]
L = pack["layouts"]
by_off = pd.DataFrame(pack["by_offset"])
after1 = by_off[(by_off.offset == 1) & (by_off.layout == "packed_causal")].iloc[0]
display(Markdown(f"""
**The weights.** A row of documents with {pack_lengths} tokens (+ EOS each, {counts['tokens']} tokens) has
{counts['targets']} next-token targets; {counts['boundary_targets']} of them are a document's first token
predicted across a boundary, and {counts['targets_without_boundaries']} remain once those are dropped. Over those,
the token mean weighs the documents {', '.join(f(w, 3) for w in weights_tok['document_weights'])} (n_eff =
{f(weights_tok['n_eff'])} targets); the per-document mean weighs each {f(weights_doc['document_weights'][0], 3)}
(n_eff = {f(weights_doc['n_eff'])}). On {model_name}, over {pack_rows} rows, the two objectives read
{f(pack_objectives['token_mean'])} and {f(pack_objectives['document_mean'])} nats: different numbers for the same
predictions, because they weigh different documents more.

**The boundary target.** (The rows start each document mid-text, which inflates this cost over a document that
starts at its beginning; dropping the boundary target is a choice of objective, not a correction.) Predicting a
document's first token from the end of another book costs
{f(L['packed_causal']['mean_loss_boundary'])} nats on average (plain causal packing) against
{f(L['packed_causal']['mean_loss_not_boundary'])} for the other targets; the
{L['packed_causal']['n_boundary_targets']}
boundary targets carry {pct(L['packed_causal']['boundary_share_of_summed_loss'])} of the row's summed loss. The
per-document mask does not remove them: the first token is still predicted from the previous document's end
({f(L['packed_document_mask']['mean_loss_boundary'])} nats). Only the −100 label does.

**Cross-document context.** With plain causal attention, a document's second token (predicted from its first
token alone when the document stands alone) costs {f(abs(after1['mean_diff_vs_standalone']), 3)} nats
{'more' if after1['mean_diff_vs_standalone'] > 0 else 'less'} when the previous documents are visible (mean over
{int(after1['n'])} targets), and over all targets of the documents after the first the loss changes by
{f(L['packed_causal']['mean_diff_vs_standalone_after_boundary'], 3)} nats on average; the largest change of a
single target is
{f(pack['max_abs_diff_vs_standalone']['packed_causal'], 3)} nats. Resetting the positions while attention still
crosses documents is no fix either: the loss changes by
{f(L['packed_positions_reset']['mean_diff_vs_standalone_after_boundary'], 3)} nats on average (largest
{f(pack['max_abs_diff_vs_standalone']['packed_positions_reset'], 3)}). With positions reset *and* the per-document
mask every target's loss is the standalone one (largest difference
**{pack['max_abs_diff_vs_standalone']['packed_document_mask']:.2g}** nats): packing then changes nothing but the
weights.
"""))

# %%
plot = by_off.copy()
plot["layout label"] = plot["layout"].map(P.PACKING_LABELS)
standalone = plot[plot["layout"] == "standalone"]
panels = pd.concat([pd.concat([g.assign(line="this layout"), standalone.assign(line="standalone (reference)")])
                    .assign(panel=lab) for lab, g in plot[plot["layout"] != "standalone"].groupby("layout label",
                                                                                                sort=False)])
pack_chart = alt.Chart(panels).mark_line(point=True).encode(
    x=alt.X("offset:Q", title="position in the document (0 = first token)",
            scale=alt.Scale(domain=[0, max(pack_offsets)])),
    y=alt.Y("mean_loss:Q", title="mean loss (nats)", scale=alt.Scale(zero=False)),
    color=alt.Color("line:N", title=None, sort=["this layout", "standalone (reference)"],
                    scale=alt.Scale(range=["#1f77b4", "#999999"]), legend=alt.Legend(orient="bottom")),
    strokeDash=alt.StrokeDash("line:N", sort=["this layout", "standalone (reference)"], legend=None),
    tooltip=["layout label", "line", "offset", alt.Tooltip("mean_loss:Q", format=".3f"),
             alt.Tooltip("mean_diff_vs_standalone:Q", format=".3f"), "n"],
).properties(width=230, height=200).facet(
    column=alt.Column("panel:N", title=None, sort=[P.PACKING_LABELS[k] for k in P.PACKING_LAYOUTS],
                      header=alt.Header(labelLimit=260))
).properties(title=alt.Title(
    f"Documents after a boundary, {pack_rows} packed rows of {len(pack_lengths)} documents on {model_name}",
    subtitle="one panel per layout, the standalone losses (grey, dashed) in each; standalone has no target at 0"))
save_chart(pack_chart, "01c_packing_by_offset")

# %% [markdown]
# ## 2. What `cross_entropy`'s mean divides by
#
# For class-index targets, `torch.nn.functional.cross_entropy(..., reduction="mean")` divides the summed loss by
# the **sum of the class weights of the non-ignored targets**, Σ_i w[y_i], which is their count only when there
# are no class weights. With `label_smoothing=ε`, each non-ignored target's loss is
# (1 − ε) w[y_i](−log p_i[y_i]) + (ε/C) Σ_c w[c](−log p_i[c]), over the same denominator. Below, eight
# targets over five classes, two of them ignored, each case by PyTorch and by hand
# (`docgrad.teaching.pitfalls.cross_entropy_by_hand`,
# float64), and what dividing by the count instead would give:

# %%
ce = pd.DataFrame(P.cross_entropy_cases(ignored=ce_ignored, weight=ce_weight, label_smoothing=ce_smoothing,
                                        seed=seed))
NUMBERS["cross_entropy"] = ce.drop(columns="targets").to_dict("records")
NUMBERS["cross_entropy_targets"] = ce["targets"].iloc[0]
ce.set_index("case")[["torch", "by_hand", "abs_diff", "denominator", "n_valid", "divided_by_count"]]

# %% tags=["hide-input"]
c = {r["case"]: r for r in NUMBERS["cross_entropy"]}
display(Markdown(f"""
Targets {NUMBERS['cross_entropy_targets']} (−100 ignored), class weights {ce_weight}: the weighted mean divides by
Σ w[y_i] = **{f(c['weight']['denominator'])}**, not by the {c['weight']['n_valid']} valid targets; dividing by the
count would report {f(c['weight']['divided_by_count'])} instead of {f(c['weight']['torch'])}. PyTorch and the hand
computation agree to {max(r['abs_diff'] for r in NUMBERS['cross_entropy'][:4]):.2g} in every case, and transformers'
`LabelSmoother` (no class weights; it divides by the valid count, or by `num_items_in_batch`) to
{c['transformers LabelSmoother']['abs_diff']:.2g} (it sums the smoothing term in float32).

Consequence for accumulation: with class weights, the right global denominator is the sum of the weights of all
targets of the step, Σ_b Σ_i w[y_i], not the target count `num_items_in_batch` counts; averaging per-microbatch
weighted means is again a mean of means, weighted 1/B instead of by each microbatch's weight total.
"""))

# %% [markdown]
# ## 3. Policy-gradient fine-tuning: per-sequence or per-token normalisation
#
# Policy-gradient fine-tuning (e.g. GRPO) samples a group of G responses, gives each an advantage A_i, and
# minimises Σ_i Σ_t w_i A_i (−log π(o_it)). The weight of a token is where the length enters:
#
# | scheme | weight of a token of response i | page 01's name |
# |---|---|---|
# | per-sequence mean, then mean over sequences | 1 / (G n_i) | document mean |
# | mean over all tokens of the group | 1 / Σ n | token mean |
# | sum / (G · L_max), a constant | 1 / (G L_max) | a fixed denominator |
#
# Under the per-sequence mean every response weighs 1/G in total, so each token of a short response weighs more
# than each token of a long one: a short response with a positive advantage is reinforced more per token, and a
# long one with a negative advantage is penalised less per token (a known length bias of this normalisation).
# The loss shown is the on-policy policy gradient: GRPO's ratio clipping and KL term are left out, since they do
# not change where the length enters.

# %%
pg = pd.DataFrame(P.policy_gradient_table(pg_lengths, pg_advantages, max_length=pg_max_length))
NUMBERS["policy_gradient"] = {"lengths": pg_lengths, "advantages": pg_advantages, "max_length": pg_max_length,
                              "schemes": pg.to_dict("records")}
pg.set_index("label")[["per_token_weight", "sequence_weight", "signed_push", "short_over_long_per_token", "n_eff"]]

# %% tags=["hide-input"]
pgr = {r["scheme"]: r for r in NUMBERS["policy_gradient"]["schemes"]}
display(Markdown(f"""
Responses of {pg_lengths} tokens with advantages {pg_advantages}: under the per-sequence mean a token of the
shortest response weighs **{f(pgr['sequence_mean']['short_over_long_per_token'], 3)}** times a token of the longest
(the length ratio), and the {max(pg_lengths)}-token response with advantage
{pg_advantages[int(np.argmax(pg_lengths))]:g}
pushes with total weight {f(pgr['sequence_mean']['sequence_weight'][int(np.argmax(pg_lengths))], 3)}, the same as the
{min(pg_lengths)}-token one. Under the token mean and the constant denominator every token weighs the same
({f(pgr['token_mean']['per_token_weight'][0], 3)} and {f(pgr['constant']['per_token_weight'][0], 3)}); the constant
one (L_max = {pg_max_length}, the generation budget) also does not change with the group's lengths, so a group of
long responses is not scaled down relative to a group of short ones. The
token weights' effective sizes are {f(pgr['sequence_mean']['n_eff'])} (per sequence) against {sum(pg_lengths)} tokens.
"""))

# %% [markdown]
# ## 4. Effective sample size: from weights to page 04's design effect
#
# A weighted mean Σ w_i x_i / Σ w_i of n independent units with equal variance σ² has variance
# σ² Σ w² / (Σ w)². An unweighted mean of **n_eff = (Σ w)² / Σ w²** units has the same variance (Kish's
# effective sample size); n / n_eff = n Σ w² / (Σ w)² is the *design effect* of the weighting. Equal weights give
# n_eff = n; every unequal weighting gives less. For page 01's batch (its default documents A and B, with A's
# padding):

# %%
kish_batch = R.make_batch(kish_lengths, kish_labels, kish_padding)
kish = pd.DataFrame(P.objective_effective_sizes(kish_batch))
doc_w = np.concatenate(R.objective_weights(kish_batch, "document_mean"))
doc_w = doc_w[doc_w > 0]
mc = P.weighted_mean_variance(doc_w, seed=seed)
C = P.block_correlation([n for n in kish_lengths], kish_rho)
deff_tok_corr = P.design_effect(np.ones(sum(kish_lengths)), C)
deff_doc_corr = P.design_effect(doc_w, C)
design_study = Study(ROOT / "data" / "results", docs=(0, DOCS_PER_CORPUS))     # the published design's cells
page04 = P.design_effects(design_study.page(result_model(model_name), CORPORA)[0], HEADLINE_WINDOW // CHUNK)
NUMBERS["effective_sample_size"] = {"objectives": kish.to_dict("records"), "monte_carlo_document_mean": mc,
                                    "rho": kish_rho, "deff_token_mean_correlated": deff_tok_corr,
                                    "deff_document_mean_correlated": deff_doc_corr, "page_04": page04}
kish.set_index("label")[["n", "n_eff", "design_effect"]]

# %% tags=["hide-input"]
k = {r["objective"]: r for r in NUMBERS["effective_sample_size"]["objectives"]}
books = next((c for c in page04 if c["corpus"] == "BOOKS"), page04[0])
m_block = HEADLINE_WINDOW // CHUNK
display(Markdown(f"""
The token mean weighs its {k['token_mean']['n']} positions equally: n_eff = {f(k['token_mean']['n_eff'])}. The
document mean gives A's {kish_lengths[0]} positions {f(kish_lengths[1] / kish_lengths[0], 3)} times the weight of
B's, so its {k['document_mean']['n']} positions are worth n_eff = **{f(k['document_mean']['n_eff'])}** independent
ones (design effect {f(k['document_mean']['design_effect'])}; a simulation of {mc['draws']:,} weighted means of
independent unit-variance draws gives {f(mc['simulated'], 3)}). Counting padding as data inflates n to
{k['padding_as_class0']['n']}; treating label 0 as padding leaves n_eff = {f(k['label0_as_padding']['n_eff'])}.
The weights that decide what is learned also decide how much noise the estimate carries.

**Correlated units.** For units with correlation matrix C the design effect is n wᵀCw / (Σ w)²
(`docgrad.teaching.pitfalls.design_effect`). C = I gives Kish's weighting effect above; equal weights and a correlation ρ
shared by the m units of a block give 1 + (m − 1)ρ, Kish's cluster design effect. With ρ = {kish_rho:g} between
positions of the same document, the token mean's design effect is {f(deff_tok_corr)} and the document mean's
{f(deff_doc_corr)}: correlation and weighting compound.

**Page 04.** R(W) is this design effect for chunk gradients: the variance of the mean gradient of one contiguous
W-token block over that of {m_block} independent chunks, equal weights, correlation measured by lag. Page 04 states
R(16K) = {books['R_16K']:.2f} for {books['corpus']}, so a 16K-token block is worth {m_block}/{books['R_16K']:.2f} =
**{f(books['effective_chunks'], 3)}** independent chunks, as if every pair of its chunks were correlated
ρ = {f(books['flat_rho'], 3)}. Page 01's document mean and page 04's block are the same question, how many independent
units the estimate is worth; one loses them to unequal weights, the other to correlation.
"""))

# %% [markdown]
# ## Exercises
#
# Each solution is computed with the library functions the page uses; the test suite checks the same values
# (`tests/test_pitfalls.py`). Predict the answer first, then open the solution: in JupyterLab its cell is
# collapsed (click the bar to the left of it), in the HTML report click *Solution*.
#
# **Exercise 1 (packing).** A row packs three documents of 10, 30 and 60 tokens, each followed by EOS. How many
# next-token targets does the row have, how many are predicted across a boundary, and how many remain with
# `DataCollatorWithFlattening`'s labels? Over the remaining targets, what are Kish's n_eff of the token mean and of
# the per-document mean?

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution"]
ex2_lengths = [10, 30, 60]
ex2 = {"counts": P.packed_target_counts([n + 1 for n in ex2_lengths]),
       "n_eff_token_mean": P.packed_weights(ex2_lengths)["n_eff"],
       "n_eff_per_document": P.packed_weights(ex2_lengths, per_document=True)["n_eff"]}
display(Markdown(f"{ex2['counts']['targets']} targets, {ex2['counts']['boundary_targets']} across a boundary, "
                 f"{ex2['counts']['targets_without_boundaries']} left (each document's n tokens + EOS give n "
                 f"targets). n_eff: {f(ex2['n_eff_token_mean'])} (token mean, equal weights) and "
                 f"{f(ex2['n_eff_per_document'])} (per-document mean: each target of document i weighs 1/(3 n_i), "
                 f"so (Σw)² / Σw² = 1 / Σ_i n_i (1/(3 n_i))² = 9 / Σ_i 1/n_i)."))

# %% [markdown]
# **Exercise 2 (class weights).** Targets [0, 2, 2, −100, 1] over three classes with `weight=[1, 4, 0.5]`: what does
# `cross_entropy`'s mean divide by, and does the hand computation match PyTorch?

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution"]
ex3_targets = [0, 2, 2, -100, 1]
ex3_weight = [1.0, 4.0, 0.5]
ex3_logits = np.random.default_rng(seed).normal(size=(len(ex3_targets), len(ex3_weight)))
ex3 = P.cross_entropy_by_hand(ex3_logits, ex3_targets, weight=ex3_weight)
ex3["torch"] = float(torch.nn.functional.cross_entropy(torch.from_numpy(ex3_logits), torch.tensor(ex3_targets),
                                                       weight=torch.tensor(ex3_weight, dtype=torch.float64)))
display(Markdown(f"The denominator is w[0] + w[2] + w[2] + w[1] = {f(ex3['denominator'])} (not the "
                 f"{ex3['n_valid']} valid targets); by hand {f(ex3['loss'], 8)}, PyTorch {f(ex3['torch'], 8)}."))

# %% [markdown]
# **Exercise 3 (policy gradient).** A group of two responses of 3 and 12 tokens has advantages +1 and −1. Give the
# per-token weights under the per-sequence mean and under the token mean. Which response's tokens are pushed
# harder under each?

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution"]
ex5 = {r["scheme"]: r for r in P.policy_gradient_table([3, 12], [1.0, -1.0])}
display(Markdown(f"Per-sequence mean: {', '.join(f(w) for w in ex5['sequence_mean']['per_token_weight'])} "
                 f"(1/6 and 1/24: "
                 f"a token of the short, positive response weighs "
                 f"{f(ex5['sequence_mean']['short_over_long_per_token'])} "
                 f"times one of the long, negative response). Token mean: "
                 f"{', '.join(f(w) for w in ex5['token_mean']['per_token_weight'])} (1/15 each)."))

# %% [markdown]
# **Exercise 4 (effective sample size).** Three documents of 1, 1 and 98 positions. What is Kish's n_eff of the
# token mean and of the document mean?

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution"]
ex6 = {r["objective"]: r for r in P.objective_effective_sizes(R.make_batch([1, 1, 98], [1, 0, 1], [0, 0, 0]))}
display(Markdown(f"Token mean: {f(ex6['token_mean']['n_eff'])}; document mean: "
                 f"{f(ex6['document_mean']['n_eff'])} (weights 1/3, 1/3 and 1/294 × 98: the two one-position "
                 f"documents dominate)."))

# %%
NUMBERS["exercises"] = {
    "1": {"lengths": ex2_lengths, **ex2},
    "2": {"targets": ex3_targets, "weight": ex3_weight, "seed": seed, **ex3},
    "3": {"lengths": [3, 12], "advantages": [1.0, -1.0],
          "per_token_weight": {k: v["per_token_weight"] for k, v in ex5.items()},
          "short_over_long_per_token": ex5["sequence_mean"]["short_over_long_per_token"]},
    "4": {k: ex6[k]["n_eff"] for k in ("token_mean", "document_mean")},
}
save_numbers("01c_packing_and_denominators", NUMBERS)
versions()
