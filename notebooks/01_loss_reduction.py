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
# # What does a mean over tokens weight?
#
# The denominator of a mean is part of the training objective. This page works it out on a one-parameter model,
# then checks the algebra in PyTorch, on a tiny random language model and on SmolLM2-135M with real text; page 01b
# follows the same mistakes into real trainers.
#
# *What transformers does changed over releases: the box "What changed when" at the end says when, and what the
# installed version does.*
#
# > **What to take away.**
# > - A mean over tokens weighs documents by their number of supervised positions; a mean over documents weighs
# >   them equally. Neither is wrong; pick the one that states what should matter, and write it down.
# > - Padding is a tensor-shape device, not data: the mask must enter numerator and denominator, and must
# >   describe a position's role, never its label value (a pad token that is also the EOS token drops every real
# >   EOS target when the mask is taken from the token id).
# > - Splitting a batch must not change the objective: divide summed losses by the total valid-target count of
# >   the whole batch (after the causal shift and the prompt mask), or weight microbatch means by their counts.
# >   A mean of microbatch means is biased, not only noisy: it up-weights short documents, whose targets sit at
# >   early, higher-loss positions.
# > - An empty denominator is an error to report, not a zero loss.
# > - Unequal weights cost effective sample size: the document mean of unequal documents is worth fewer
# >   independent targets than it has.
#
# Every number is computed by `docgrad.teaching` (tested), shown to three significant figures and saved to
# `figures/01_loss_reduction.json`. Other documents: `docgrad run 01 -p lengths "[3, 30]" -p padding "[27, 0]"`.

# %% tags=["parameters"]
lengths = [2, 8]  # valid (supervised) positions of each document
labels = [1, 0]  # the label of every position of each document (0 or 1)
padding = [6, 0]  # padding positions appended to each document (here: pad A to B's length)
theta = 0.0  # the logit at which losses and gradients are reported; p is sigmoid(theta)
invariance_added = [0, 1, 6, 20]  # masked padding positions added to every document
invariance_thetas = [-1.0, 0.0, 0.3]  # logits at which padding invariance is checked
fd_theta = 0.3  # logit of the finite-difference check
fd_step = 1e-5  # central-difference step h
tolerance = 1e-8  # largest accepted |analytic - numeric| gradient difference
lm_arch = "llama"  # tiny causal LM built from a config: "llama" or "gpt_neox"
lm_lengths = [96, 24, 40]  # tokens per document in the language-model experiment
lm_prompt_lengths = [16, 0, 8]  # leading prompt tokens per document, masked with -100
lm_microbatches = [[0], [1], [2]]  # document indices per microbatch
growth_total_tokens = 128  # tokens shared by two microbatches in the growth experiment
growth_ratios = [1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 16.0, 32.0]  # long:short length ratios (growth)
real_model = "smollm2-135m"  # the growth experiment again on this real model, with real text
real_corpus = "BOOKS"  # the real text: the first span of this corpus
real_growth_ratios = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0]  # long:short length ratios on the real model
pad_eos_texts = ["the cat sat", "a dog ran far away"]  # texts collated with a tokenizer whose pad token is its EOS
kish_rho = 0.1  # correlation between two positions of the same document (section 6)
seed = 0  # seed of the tiny model and of its random tokens
rerun = False  # recompute the recorded run on the real model (data/teaching/01_growth_real.json) and rewrite it

# %%
import altair as alt
import numpy as np
import pandas as pd
import torch
from IPython.display import Markdown, display

from docgrad import page as dg

ROOT = dg.setup()
torch.set_num_threads(2)
NUMBERS = {}


# %% [markdown]
# ## 1. One logit, two documents, five objectives
#
# A *supervised position* is one where the model makes a prediction and a target exists. Here every position
# predicts class 1 with probability p = sigmoid(θ): one parameter, the *logit* θ = log(p / (1 − p)). A position
# with label y costs the cross-entropy ℓ = −[y log p + (1 − y) log(1 − p)] = softplus(θ) − yθ *nats*
# (natural-log units; softplus(θ) = log(1 + e^θ)), with gradient p − y (Appendix A checks it numerically).
#
# Document A has only label-1 positions, B only label-0 ones; A is padded to B's length to make one rectangular
# tensor. Document i has n_i supervised positions (D = 2 documents here), and the *mask* m is 1 at a supervised
# position and 0 at padding. Every objective is a weighted sum Σ w·ℓ over positions:
#
# | objective | weight of a position | what it means |
# |---|---|---|
# | token mean | mask / Σ mask | every supervised position counts equally: document i weighs n_i / Σn |
# | document mean | mask / (D · n_i) | every document counts equally: weight 1/D each |
# | padding counted as class-0 data | 1 / (all positions) | padding becomes invented label-0 examples |
# | padding out of numerator, in denominator | mask / (all positions) | the mask is applied to the sum only |
# | label 0 treated as padding | [y = 1] / #(y = 1) | the mask is derived from the label value |
#
# The gradient Σ w (p − y) vanishes at p* = Σ w y / Σ w, the weighted fraction of label-1 positions; the second
# derivative (Σ w) p(1 − p) is positive, so p* is this scalar model's unique optimum when 0 < p* < 1.

# %%
batch = dg.reduction.make_batch(lengths, labels, padding)
table = pd.DataFrame(dg.reduction.objectives_table(batch, theta))
NUMBERS["theta"] = theta
NUMBERS["valid_counts"] = batch.valid_counts
NUMBERS["positions_in_padded_batch"] = batch.n_positions
NUMBERS["objectives"] = {r["objective"]: {k: r[k] for k in ("loss", "gradient", "optimum_p", "optimum",
                                                             "document_weights")}
                         for r in table.to_dict("records")}
dg.sig_table(table.assign(optimum=["none" if pd.isna(p) else dg.sig(p) for p in table["optimum_p"]]),
             {"label": "objective", "document_weights": "weights of A, B", "loss": f"loss at θ = {theta:g}",
              "gradient": f"gradient at θ = {theta:g}", "optimum": "optimum p*"}, index="label")

# %% tags=["hide-input"]
o = NUMBERS["objectives"]
tm, dm, pc, pd_, lp = (o[k] for k in dg.reduction.OBJECTIVES)
display(Markdown(f"""
The token mean weighs B {dg.sig(tm['document_weights'][1] / tm['document_weights'][0])} times as much as A. At
θ = {theta:g} the token and document means have losses {dg.sig(tm['loss'])} and {dg.sig(dm['loss'])} nats but gradients
{dg.sig(tm['gradient'])} and {dg.sig(dm['gradient'])}: the loss value does not tell you the update.

- **Padding as data** moves the optimum to {dg.sig(pc['optimum_p'])} although no document changed.
- **Mask in the numerator only** multiplies the token mean by {batch.n_valid}/{batch.n_positions}, a factor that
  changes with each batch's padding; a lower plotted loss is not a better prediction.
- **Label 0 mistaken for padding** drops all of B's targets: {lp['optimum']}.
"""))

# %%
ps = [i / 200 for i in range(4, 197)]
curves = pd.DataFrame(dg.reduction.loss_curves(batch, ps))
optima = pd.DataFrame([{"label": dg.reduction.OBJECTIVE_LABELS[k], "p": v["optimum_p"],
                        "loss": dg.reduction.loss(dg.reduction.logit(v["optimum_p"]), batch, k),
                        "optimum": v["optimum"]}
                       for k, v in NUMBERS["objectives"].items() if v["optimum_p"] is not None])
pick = alt.selection_point(fields=["label"], bind="legend")
color = alt.Color("label:N", title="objective",
                  sort=[dg.reduction.OBJECTIVE_LABELS[k] for k in dg.reduction.OBJECTIVES],
                  legend=alt.Legend(labelLimit=320))
lines = alt.Chart(curves).mark_line().encode(
    x=alt.X("p:Q", title="p = sigmoid(θ)"), y=alt.Y("loss:Q", title="loss (nats)"), color=color,
    opacity=alt.condition(pick, alt.value(1.0), alt.value(0.15)),
    tooltip=["label", alt.Tooltip("p:Q", format=".3f"), alt.Tooltip("loss:Q", format=".4f")],
).add_params(pick)
points = alt.Chart(optima).mark_point(size=120, filled=True, shape="diamond").encode(
    x="p:Q", y="loss:Q", color=color, opacity=alt.condition(pick, alt.value(1.0), alt.value(0.15)),
    tooltip=["label", "optimum", alt.Tooltip("loss:Q", format=".4f")])
objectives_chart = (lines + points).properties(
    width=560, height=340,
    title=alt.Title("Five objectives for the same two documents",
                    subtitle="diamonds: optima; label 0 treated as padding has none (keeps falling as p → 1)"))
dg.save_chart(objectives_chart, "01_objectives_vs_p")

# %% [markdown]
# ## 2. A mask must act on the numerator and the denominator
#
# With the mask m (1 at a supervised position, 0 at padding), the token mean is Σ m·ℓ / Σ m: masked positions
# change neither sum. Adding padding to every document (each case in Appendix B):

# %% tags=["hide-input"]
inv = pd.DataFrame(dg.reduction.padding_invariance(lengths, labels, invariance_added, invariance_thetas))
NUMBERS["padding_invariance_max_abs_diff"] = float(inv[["abs_loss_diff", "abs_grad_diff"]].to_numpy().max())
display(Markdown(f"Largest change of loss or gradient over {len(inv)} comparisons (added {invariance_added} "
                 f"positions, θ in {invariance_thetas}): **{dg.sig(NUMBERS['padding_invariance_max_abs_diff'])}**."))

# %% [markdown]
# ### A mask taken from a token id: pad == EOS
#
# "Label 0 treated as padding" has a real form. A tokenizer without a pad token is often given its end-of-text
# token (EOS) as one (`tokenizer.pad_token = tokenizer.eos_token`), and a collator that builds the mask from the
# token id then drops every real EOS target with the padding: the model is never trained to stop. Below, two
# texts, each followed by EOS, collated into one right-padded batch by transformers'
# `DataCollatorForLanguageModeling(mlm=False)` and by TRL's `DataCollatorForLanguageModeling`, with a small
# word-level tokenizer whose pad token is its EOS token:

# %%
pad_eos = dg.reduction.pad_is_eos(pad_eos_texts)
pad_src = dg.installed.read_claims(dg.installed.PAD_CLAIMS)
dg.installed.require(pad_src)
NUMBERS["pad_is_eos"] = {**pad_eos, "source": pad_src}
pd.DataFrame({"token": [t for row in pad_eos["tokens"] for t in row],
              "transformers label": [v for row in pad_eos["transformers"]["labels"] for v in row],
              "TRL label": [v for row in pad_eos["trl"]["labels"] for v in row]},
             index=pd.MultiIndex.from_tuples([(f"text {r}", t) for r, row in enumerate(pad_eos["tokens"])
                                              for t in range(len(row))], names=["row", "position"])).T

# %% tags=["hide-input"]
display(Markdown(f"""
Of the {pad_eos['n_real_eos']} real EOS targets, transformers' collator keeps
**{pad_eos['transformers']['real_eos_labels_kept']}** and TRL's keeps **{pad_eos['trl']['real_eos_labels_kept']}**;
the batch has {pad_eos['targets_by_position']} next-token targets by position, and the two collators' labels leave
{pad_eos['transformers']['targets']} and {pad_eos['trl']['targets']}. What each does, in the installed source:

""" + dg.installed.claims_markdown(pad_src) + """

A mask must say which positions are padding by where they are (the collator knows which positions it added), not
by what token they hold."""))

# %% [markdown]
# ## 3. Splitting the batch into microbatches
#
# *Microbatches* are slices of a batch run forward and backward one at a time (to save memory), their gradients
# added before one optimiser step. Put A and B in separate microbatches, K = 2 of them: the plain average of their
# mean gradients g_k weighs each microbatch 1/K, which is the document mean. Weighting each mean by its valid
# count n_k, Σ n_k g_k / Σ n_k, gives the token mean back.

# %% tags=["hide-input"]
acc = dg.reduction.microbatch_accumulation(lengths, labels, theta)
NUMBERS["microbatch"] = acc
dg.sig_table([{"gradient": f"microbatch {d} alone ({n} positions)", "value": g}
              for d, n, g in zip("AB", acc["valid_counts"], acc["microbatch_mean_gradients"])]
             + [{"gradient": "unweighted average of the two", "value": acc["unweighted_average"]},
                {"gradient": "unsplit document mean", "value": acc["full_batch_document_mean"]},
                {"gradient": "count-weighted average", "value": acc["count_weighted_average"]},
                {"gradient": "unsplit token mean", "value": acc["full_batch_token_mean"]}],
             {"gradient": "gradient", "value": f"at θ = {theta:g}"}, index="gradient")

# %% [markdown]
# ## 4. No valid position: an error, not a zero
#
# A mean over zero supervised positions is 0/0. Returning 0 would report a perfect prediction that never
# happened, so `docgrad.teaching.reduction` raises an error naming the empty denominator.

# %%
try:
    dg.reduction.loss(theta, dg.reduction.make_batch([0, 0], labels, padding=[4, 4]), "token_mean")
except dg.reduction.NoValidPositionsError as e:
    zero_valid_error = f"{type(e).__name__}: {e}"
print(zero_valid_error)
NUMBERS["zero_valid_positions"] = zero_valid_error

# %% [markdown]
# ## 5. The same algebra in PyTorch
#
# ### 5a. `torch.nn.functional.cross_entropy`
#
# With two-class logits [0, θ], softmax gives class 1 the probability sigmoid(θ), so `cross_entropy` computes ℓ.
# Targets equal to `ignore_index` (−100) are excluded, and for **class-index targets** `reduction="mean"` divides
# by the count of the rest, or with class weights by the sum of their weights
# ([PyTorch, `CrossEntropyLoss`](https://pytorch.org/docs/stable/generated/torch.nn.CrossEntropyLoss.html)).
# Each objective is one expression; gradients from autograd:

# %%
torch_rows = pd.DataFrame(dg.reduction.torch_objectives(batch, theta))
torch_rows["label"] = torch_rows["objective"].map(dg.reduction.OBJECTIVE_LABELS)
NUMBERS["torch_max_abs_diff"] = max(
    max(abs(r["loss"] - NUMBERS["objectives"][r["objective"]]["loss"]),
        abs(r["gradient"] - NUMBERS["objectives"][r["objective"]]["gradient"])) for r in torch_rows.to_dict("records"))
pd.set_option("display.max_colwidth", 120)
dg.sig_table(torch_rows, {"label": "objective", "how": "PyTorch expression", "loss": "loss",
                          "gradient": "gradient"}, index="label")

# %% tags=["hide-input"]
ignored = dg.reduction.all_ignored_comparison()
NUMBERS["all_targets_ignored"] = ignored
display(Markdown(f"""
Largest difference from the table of §1: {dg.sig(NUMBERS['torch_max_abs_diff'])}.

**Every target ignored.** `cross_entropy(..., reduction="mean")` returns **{ignored['torch_mean']}** (0/0), and
`reduction="sum"` returns {dg.sig(ignored['torch_sum'])}, which silently looks like a perfect batch. Our reduction
instead says: *{ignored['docgrad']}*
"""))

# %% [markdown]
# **Probability targets divide by the rows.** The same targets given as probabilities (one-hot or soft labels)
# are averaged over the rows, class weights or not. Three rows:

# %% tags=["hide-input"]
prob_weights = [1.0, 4.0, 0.5]
prob = dg.reduction.probability_targets_mean([[2.0, 0.0, -1.0], [0.5, 1.0, 0.0], [0.0, 0.0, 3.0]], [1, 1, 2],
                                             prob_weights)
NUMBERS["probability_targets"] = prob
display(Markdown(f"Class weights {dg.sig(prob_weights)}; weighted sum of the row losses "
                 f"{dg.sig(prob['weighted_sum'])}."))
dg.sig_table([{"targets given as": "class indices", "divides by": "the targets' weights",
               "denominator": prob["sum_of_target_weights"], "mean": prob["indices"]},
              {"targets given as": "one-hot probabilities", "divides by": "the rows",
               "denominator": prob["n_rows"], "mean": prob["probabilities"]}], index="targets given as")

# %% [markdown]
# ### 5b. Gradient accumulation on a causal language model
#
# A *causal* language model predicts each token from the ones before it, so n tokens give n − 1 targets; a
# prompt of q tokens labelled −100 (q ≥ 1) leaves n − q. The attention mask says what the model may *see*, the −100
# labels which predictions *count*. With K microbatches, microbatch k holding n_k targets with summed loss S_k
# (N = Σ_k n_k in all):
#
# * **full batch**: Σ_k S_k / N, the token mean;
# * **average of means**: Σ_k (S_k / n_k) / K, what calling `backward()` on each microbatch's mean / K computes;
# * **normalised by the total count**: each S_k / N before `backward()`, what transformers' `Trainer` passes to
#   the model as `num_items_in_batch` ([the fix explained](https://huggingface.co/blog/gradient_accumulation)).
#   Which count it passes depends on the release; below, the installed `Trainer` counts these documents.
#
# The model is a tiny Llama or GPT-NeoX (two open model architectures) with random weights and random tokens.

# %%
model = dg.models.tiny_model(lm_arch, seed=seed)
docs = dg.reduction.make_documents(lm_lengths, lm_prompt_lengths, seed=seed)
lm = dg.reduction.lm_accumulation(model, docs, lm_microbatches)
NUMBERS["lm"] = {"arch": lm_arch, "layers": model.config.num_hidden_layers, "width": model.config.hidden_size, **lm}
display(Markdown(f"{lm_arch}: {model.config.num_hidden_layers} layers, width {model.config.hidden_size}, "
                 f"{sum(p.numel() for p in model.parameters()):,} parameters."))
display(pd.DataFrame({"tokens": lm["n_tokens"], "prompt (masked)": lm_prompt_lengths,
                      "targets after shift and mask": lm["n_targets_per_document"]},
                     index=[f"document {i}" for i in range(len(docs))]))
lm_count = dg.installed.count_check(dg.models.tiny_model("llama", seed=seed),
                                    [dg.reduction.pad_batch([docs[i] for i in mb])[2] for mb in lm_microbatches])
NUMBERS["installed_count"] = lm_count
assert lm_count["agrees"], (f"transformers {lm_count['version']} passes {lm_count['installed_count']}, but the page "
                            f"says releases from {lm_count['since']} count {lm_count['how']} ({lm_count['rule_count']})")

# %% tags=["hide-input"]
display(Markdown(f"Microbatches {lm_microbatches} hold {lm['targets_per_microbatch']} targets "
                 f"({lm['n_targets_total']} in all). The installed transformers {lm_count['version']} passes "
                 f"`num_items_in_batch` = **{lm_count['installed_count']}** for them: it counts "
                 f"{lm_count['how']}, as every release checked from {lm_count['since']} on does (releases "
                 f"{lm_count['ranges']['unshifted']} counted every label, position 0 included: "
                 f"{lm_count['unshifted_count']} here). The losses are "
                 f"close, the gradients are not: the short microbatch's targets are up-weighted by n_long / n_short."))
dg.sig_table([{"accumulation": "full batch", "loss": lm["loss_full_token_mean"], "rel": 0.0, "cos": 1.0},
              {"accumulation": "average of microbatch means", "loss": lm["loss_averaged_means"],
               "rel": lm["rel_discrepancy_averaged"], "cos": lm["cosine_averaged_full"]},
              {"accumulation": "normalised by the total count", "loss": lm["loss_num_items"],
               "rel": lm["rel_discrepancy_num_items"], "cos": None}],
             {"accumulation": "accumulation", "loss": "loss (nats)", "rel": "|g − g_full| / |g_full|",
              "cos": "cosine with g_full"}, index="accumulation")

# %% [markdown]
# ### How the discrepancy grows with unequal lengths
#
# Two microbatches share a token budget with lengths in ratio r : 1; under the average of means a short
# microbatch's target weighs n_long / n_short times a long one's. The *total-variation distance* between the two
# weightings (1/K each against n_k / N) is half their summed absolute difference: 0 when they agree, 1 when they
# share nothing. On the tiny random model the fix's exactness is the point; on SmolLM2-135M (135 million
# parameters) with a BOOKS span (a stretch of one book) the size of the error is.

# %%
growth = pd.DataFrame(dg.reduction.accumulation_growth(model, growth_total_tokens, growth_ratios, seed=seed))
NUMBERS["growth"] = growth.to_dict("records")
growth_real_rows, growth_real_prov = dg.records.recorded(
    "01_growth_real", {"model": real_model, "corpus": real_corpus, "total_tokens": growth_total_tokens,
                       "ratios": real_growth_ratios},
    lambda: dg.reduction.accumulation_growth(dg.models.load_model(real_model), growth_total_tokens, real_growth_ratios,
                                             tokens=dg.corpora_build.load_spans(real_corpus)[0].tokens),
    rerun=rerun, command="docgrad run 01 -p rerun True")
display(Markdown(dg.records.provenance_line(f"The run on {real_model}", growth_real_prov)))
growth_real = pd.DataFrame(growth_real_rows)
NUMBERS["growth_real"] = {"model": real_model, "corpus": real_corpus, "rows": growth_real.to_dict("records"),
                          "provenance": growth_real_prov}
model_names = [f"tiny random {lm_arch}, random tokens", f"{real_model}, {real_corpus} text"]
both = pd.concat([growth.assign(model=model_names[0]), growth_real.assign(model=model_names[1])])
dg.sig_table(both.assign(lengths=[f"{a} + {b}" for a, b in both["lengths"]]),
             {"model": "model", "lengths": "tokens", "target_ratio": "n_long / n_short",
              "total_variation": "total variation", "rel_discrepancy_averaged": "average of means: rel. error",
              "rel_discrepancy_num_items": "total count: rel. error"}).set_index(["model", "tokens"])

# %%
long_growth = both.melt(id_vars=["model", "target_ratio", "ratio"],
                        value_vars=["rel_discrepancy_averaged", "total_variation", "rel_discrepancy_num_items"],
                        var_name="quantity", value_name="value")
long_growth["quantity"] = long_growth["quantity"].map({
    "rel_discrepancy_averaged": "|g_avg − g_full| / |g_full| (average of means)",
    "total_variation": "total variation between microbatch weightings",
    "rel_discrepancy_num_items": "|g_items − g_full| / |g_full| (num_items_in_batch)"})
long_growth = long_growth[long_growth["value"] > 0]          # a log axis: an exact 0 (equal lengths) is not drawn
growth_chart = alt.Chart(long_growth).mark_line(point=True).encode(
    x=alt.X("target_ratio:Q", scale=alt.Scale(type="log", domain=[1, float(long_growth["target_ratio"].max())]),
            title="n_long / n_short (targets)"),
    y=alt.Y("value:Q", scale=alt.Scale(type="log"), title=None),
    color=alt.Color("model:N", title=None, sort=model_names, legend=alt.Legend(orient="bottom", labelLimit=420)),
    tooltip=["model", "quantity", alt.Tooltip("target_ratio:Q", format=".3g"), alt.Tooltip("value:Q", format=".3g")],
).properties(width=250, height=220).facet(column=alt.Column("quantity:N", title=None, header=alt.Header(labelLimit=300))
                                          ).resolve_scale(y="independent").properties(title=alt.Title(
    f"Averaging microbatch means: {growth_total_tokens} tokens in two microbatches (log scales)",
    subtitle="each quantity on its own axis; normalising by the total target count stays at float32 rounding"))
dg.save_chart(growth_chart, "01_accumulation_growth")

# %% tags=["hide-input"]
g1, r1 = NUMBERS["growth"][-1], NUMBERS["growth_real"]["rows"][-1]
fix_worst = max(r["rel_discrepancy_num_items"] for r in NUMBERS["growth"] + NUMBERS["growth_real"]["rows"])
bias = dg.reduction.growth_bias_rows(NUMBERS["growth_real"]["rows"])
NUMBERS["growth_bias"] = bias
display(Markdown(f"""
At the largest ratio the average of means moves the gradient by **{dg.sig(g1['rel_discrepancy_averaged'])}** of its
norm (tiny model) and **{dg.sig(r1['rel_discrepancy_averaged'])}** ({real_model}); the total count stays below
{dg.sig(fix_worst)} (float32 rounding).

**The error is biased, not only noisy.** The short document's targets all sit at early positions, with little
context, so up-weighting them moves the loss one way ({"here it raises it in every row" if bias and all(
r["effect"] == "raises" for r in bias) else "the last column says which"}; {real_model}, nats):
"""))
dg.sig_table(bias, {"long_tokens": "long", "short_tokens": "short", "loss_averaged_means": "average of means",
                    "loss_token_mean": "token mean", "bias": "difference", "loss_short": "short document",
                    "loss_long": "long document", "effect": "up-weighting the short one"})

# %% [markdown]
# ## 6. What a weighting costs: effective sample size
#
# A weighted mean Σ w_u x_u / Σ w_u of U independent units x_u with equal variance σ² has variance
# σ² Σ w² / (Σ w)², that of an unweighted mean of **n_eff = (Σ w)² / Σ w²** units (Kish's *effective sample
# size*); U / n_eff is the *design effect* of the weighting (Appendix C simulates it). Equal weights give
# n_eff = U, unequal ones less. Taking each supervised position's loss as an independent unit, for the documents
# of §1:

# %%
kish = pd.DataFrame(dg.effective_size.objective_effective_sizes(batch))
doc_w = np.concatenate(dg.reduction.objective_weights(batch, "document_mean"))
doc_w = doc_w[doc_w > 0]
C = dg.effective_size.block_correlation(batch.valid_counts, kish_rho)
deff_corr = {"token_mean": dg.effective_size.design_effect(np.ones(batch.n_valid), C),
             "document_mean": dg.effective_size.design_effect(doc_w, C)}
mc = dg.effective_size.weighted_mean_variance(doc_w, seed=seed)
NUMBERS["effective_sample_size"] = {"objectives": kish.to_dict("records"), "rho": kish_rho,
                                    "design_effect_correlated": deff_corr, "monte_carlo_document_mean": mc}
dg.sig_table(kish, {"label": "objective", "n": "positions with weight", "n_eff": "n_eff",
                    "design_effect": "design effect"}, index="label")

# %% [markdown]
# The weights that decide what is learned also decide how much noise the estimate carries.
#
# **Correlated units.** Positions of one document are not independent. For units with correlation matrix C the
# design effect is U wᵀCw / (Σ w)²: C = I gives the weighting effect above, and equal weights with a correlation ρ
# shared by the b units of a block give 1 + (b − 1)ρ, Kish's cluster design effect. With ρ between any two
# positions of the same document (0 across documents), correlation and weighting compound:

# %% tags=["hide-input"]
dg.sig_table([{"objective": dg.reduction.OBJECTIVE_LABELS[k], "deff": v} for k, v in deff_corr.items()],
             {"objective": "objective", "deff": f"design effect, ρ = {dg.sig(kish_rho)} within a document"},
             index="objective")

# %% [markdown]
# Page 04 measures a design effect of this kind, R(W), for the gradients of W contiguous tokens of real text,
# with the correlation estimated from the data instead of assumed.

# %% [markdown]
# ## Exercises
#
# Predict, then open the solution (JupyterLab: click the collapsed cell; HTML: *Solution*). Each shows the
# algebra (numbers filled in by `docgrad.teaching.worked`) and a line checking it against the library.
#
# **Exercise 1 (optima).** Document A has 3 positions labelled 1, document B 30 positions labelled 0. Where are the
# optima p* of the token mean and of the document mean?

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution"]
ex1 = dg.worked.optima(3, 30)
display(Markdown(ex1.markdown))
ex1_batch = dg.reduction.make_batch([3, 30], [1, 0], padding=[0, 0])
# the general formula agrees
assert all(abs(ex1.values[k] - dg.reduction.optimum(ex1_batch, k).p) < 1e-12 for k in ex1.values)

# %% [markdown]
# **Exercise 2 (padding).** Pad A with 27 positions to B's length. By what factor does dividing the masked sum by
# every position scale the token mean, and where is the optimum when the padding is counted as label-0 data?

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution"]
ex2 = dg.worked.padding_factor(3, 30, 27)
display(Markdown(ex2.markdown))
ex2_batch = dg.reduction.make_batch([3, 30], [1, 0], padding=[27, 0])
assert abs(ex2.values["factor"] - dg.reduction.loss(0.0, ex2_batch, "padding_in_denominator")
           / dg.reduction.loss(0.0, ex2_batch, "token_mean")) < 1e-12
assert abs(ex2.values["padding_as_class0_p"] - dg.reduction.optimum(ex2_batch, "padding_as_class0").p) < 1e-12

# %% [markdown]
# **Exercise 3 (accumulation).** Two microbatches hold 20 and 80 targets. Under the average of microbatch means,
# how much more does a target of the first weigh than one of the second, and how far apart (total variation) are the
# two microbatch weightings?

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution"]
ex3 = dg.worked.microbatch_weights([20, 80])
display(Markdown(ex3.markdown))
assert ex3.values == dg.reduction.microbatch_weights([20, 80])          # the library's weights agree

# %% [markdown]
# **Exercise 4 (counting targets).** A 50-token document starts with a 12-token prompt masked by −100. How many
# next-token targets does it contribute to `num_items_in_batch`? And without a prompt?

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution"]
ex4 = dg.worked.target_count(50, 12)
ex4_count = dg.installed.count_check(dg.models.tiny_model("llama", seed=seed),
                                     [dg.reduction.causal_lm_labels(torch.arange(50), 0)[None]])
display(Markdown(ex4.markdown + f"""
- What transformers passes for the document without a prompt depends on the release: the targets,
  {ex4_count['shifted_count']}, in {ex4_count['ranges']['shifted']}; every label != −100,
  {ex4_count['unshifted_count']}, in {ex4_count['ranges']['unshifted']} (position 0 included, so each row's loss
  was divided by one more than its targets). The installed transformers {ex4_count['version']} passes
  **{ex4_count['installed_count']}**."""))
assert ex4.values == {"with_prompt": dg.reduction.count_targets(dg.reduction.causal_lm_labels(torch.arange(50), 12)),
                      "without_prompt": dg.reduction.count_targets(dg.reduction.causal_lm_labels(torch.arange(50), 0))}
assert ex4_count["agrees"], f"transformers {ex4_count['version']} counts otherwise than the page says: {ex4_count}"

# %% [markdown]
# **Exercise 5 (effective sample size).** Three documents of 1, 1 and 98 positions. What is Kish's n_eff of the
# token mean and of the document mean?

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution"]
ex5 = dg.worked.n_eff_documents([1, 1, 98])
display(Markdown(ex5.markdown))
ex5_rows = {r["objective"]: r for r in dg.effective_size.objective_effective_sizes(
    dg.reduction.make_batch([1, 1, 98], [1, 0, 1], [0, 0, 0]))}
assert all(abs(ex5.values[k] - ex5_rows[k]["n_eff"]) < 1e-9 for k in ex5.values)

# %% [markdown]
# ### Code exercises
#
# Each comes with a checker (`docgrad.teaching.reduction`): it runs your function on several batches, says
# *correct* or *not yet*, and names the batch it got wrong and the usual mistake its answer matches.
#
# **Exercise 6 (write the masked token mean).** `losses` holds every position's loss (rows × positions, float64;
# padding positions have a loss too, as `cross_entropy(..., reduction="none")` gives without `ignore_index`) and
# `labels` holds −100 where nothing is supervised (padding, a prompt). Return the token mean over the supervised
# positions, and raise an error when there is none (§4). The version below divides by every position.

# %% tags=["show-input"]
def token_mean(losses, labels):
    return losses.mean()


print(dg.reduction.check_token_mean(token_mean)["message"])

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution"]
def token_mean(losses, labels):
    mask = (labels != -100).to(losses.dtype)            # a position's role, not its label value
    if mask.sum() == 0:
        raise ValueError("no supervised position: the token mean is 0/0")
    return (losses * mask).sum() / mask.sum()


ex6 = dg.reduction.check_token_mean(token_mean)
print(ex6["message"])

# %% [markdown]
# **Exercise 7 (the accumulation normaliser).** One optimiser step runs K microbatches; `labels[j]` is microbatch
# j's label tensor (rows × positions, −100 at prompts and padding). Microbatch k's summed next-token loss is
# divided by `divisor(labels, k)` and back-propagated. Return the divisor that makes the accumulated gradient the
# token mean of the whole step. The version below is microbatch k's own target count times K: the average of
# microbatch means.

# %% tags=["show-input"]
def divisor(labels, k):
    own = int((labels[k][..., 1:] != -100).sum())
    return own * len(labels)


print(dg.reduction.check_normaliser(divisor)["message"])

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution"]
def divisor(labels, k):
    return sum(int((lab[..., 1:] != -100).sum()) for lab in labels)    # every microbatch's targets, after the shift


ex7 = dg.reduction.check_normaliser(divisor)
print(ex7["message"])

# %% [markdown]
# ## Appendix
#
# ### A. The analytic gradient against a central finite difference

# %%
fd = [dg.reduction.finite_difference_check(batch, obj, fd_theta, fd_step) for obj in dg.reduction.OBJECTIVES]
NUMBERS["finite_difference"] = {r["objective"]: r for r in fd}
worst = max(r["abs_error"] for r in fd)
assert worst < tolerance, f"finite-difference error {worst} exceeds the tolerance {tolerance}"
display(Markdown(f"At θ = {fd_theta:g} with step h = {fd_step:g}, (L(θ+h) − L(θ−h))/2h against Σ w (p − y); the "
                 f"largest difference, {dg.sig(worst)}, is below the tolerance {tolerance:g}."))
dg.sig_table([dict(r, objective=dg.reduction.OBJECTIVE_LABELS[r["objective"]]) for r in fd],
             {"objective": "objective", "analytic": "analytic", "numeric": "numeric", "abs_error": "|difference|"},
             index="objective")

# %% [markdown]
# ### B. Padding invariance, case by case (§2)

# %%
inv.pivot_table(index=["objective", "added"], columns="theta", values=["abs_loss_diff", "abs_grad_diff"]).map(dg.sig)

# %% [markdown]
# ### C. The design effect of a weighting, simulated (§6)
#
# Weighted means of independent unit-variance draws with the document mean's weights, against the exact
# U Σ w² / (Σ w)².

# %%
dg.sig_table([{"draws": mc["draws"], "n": mc["n"], "simulated": mc["simulated"], "exact": mc["exact"]}],
             {"draws": "draws", "n": "units", "simulated": "simulated design effect", "exact": "exact"})

# %% [markdown]
# ## What changed when

# %% tags=["hide-input"]
history_topics = ("accumulation", "cross_entropy")
NUMBERS["what_changed_when"] = dg.history.rows(history_topics)
display(Markdown(dg.history.what_changed_when(history_topics)))

# %%
NUMBERS["exercises"] = {"1": ex1.values, "2": ex2.values, "3": ex3.values,
                        "4": {**ex4.values, "installed_count": ex4_count}, "5": ex5.values, "6": ex6, "7": ex7}
dg.save_numbers("01_loss_reduction", NUMBERS)
dg.versions()
