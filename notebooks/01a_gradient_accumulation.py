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
# # Splitting a batch: gradient accumulation, and what a weighting costs
#
# Page 01 chose what a mean weighs; this page keeps that choice when a batch is run in slices. First on page 01's
# two documents, then on a tiny random causal language model and on SmolLM2-135M with real text; the last section
# prices a weighting in effective sample size. One class of about 50 minutes with its exercises; page 01b follows
# both into real trainers.
#
# *What transformers does changed over releases: the box "What changed when" at the end says when, and what the
# installed version does.*
#
# > **What to take away.**
# > - Splitting a batch must not change the objective: divide summed losses by the total valid-target count of
# >   the whole batch (after the causal shift and the prompt mask), or weight microbatch means by their counts.
# > - A mean of microbatch means is biased, not only noisy: it up-weights short documents, whose targets sit at
# >   early, higher-loss positions.
# > - Unequal weights cost effective sample size: the document mean of unequal documents is worth fewer
# >   independent targets than it has.
#
# Every number is computed by `docgrad.teaching` (tested), shown to three significant figures and saved to
# `figures/01a_gradient_accumulation.json`. Other settings: `docgrad run 01a -p lm_lengths "[120, 8, 40]"`.

# %% tags=["parameters"]
lengths = [2, 8]  # valid (supervised) positions of each document (page 01's documents A and B)
labels = [1, 0]  # the label of every position of each document (0 or 1)
padding = [6, 0]  # padding positions appended to each document (here: pad A to B's length)
theta = 0.0  # the logit at which gradients are reported; p is sigmoid(theta)
lm_arch = "llama"  # tiny causal LM built from a config: "llama" or "gpt_neox"
lm_lengths = [96, 24, 40]  # tokens per document in the language-model experiment
lm_prompt_lengths = [16, 0, 8]  # leading prompt tokens per document, masked with -100
lm_microbatches = [[0], [1], [2]]  # document indices per microbatch
growth_total_tokens = 128  # tokens shared by two microbatches in the growth experiment
growth_ratios = [1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 16.0, 32.0]  # long:short length ratios (growth)
real_model = "smollm2-135m"  # the growth experiment again on this real model, with real text
real_corpus = "BOOKS"  # the real text: the first span of this corpus
real_growth_ratios = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0]  # long:short length ratios on the real model
kish_rho = 0.1  # correlation between two positions of the same document (section 3)
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
batch = dg.reduction.make_batch(lengths, labels, padding)


# %% [markdown]
# ## 1. Splitting the batch into microbatches
#
# *Microbatches* are slices of a batch run forward and backward one at a time (to save memory), their gradients
# added before one optimiser step. Page 01's document A has n_A supervised positions labelled 1, B has n_B
# labelled 0; its token mean weighs every position equally, its document mean every document. Put A and B in
# separate microbatches, K = 2 of them: the plain average of their mean gradients g_k weighs each microbatch 1/K,
# which is the document mean. Weighting each mean by its valid count n_k, Σ n_k g_k / Σ n_k, gives the token mean
# back.

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
# ## 2. Gradient accumulation on a causal language model
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
    rerun=rerun, command="docgrad run 01a -p rerun True")
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
dg.save_chart(growth_chart, "01a_accumulation_growth")

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
# ## 3. What a weighting costs: effective sample size
#
# A weighted mean Σ w_u x_u / Σ w_u of U independent units x_u with equal variance σ² has variance
# σ² Σ w² / (Σ w)², that of an unweighted mean of **n_eff = (Σ w)² / Σ w²** units (Kish's *effective sample
# size*); U / n_eff is the *design effect* of the weighting (the appendix simulates it). Equal weights give
# n_eff = U, unequal ones less. Taking each supervised position's loss as an independent unit, for page 01's
# documents and objectives:

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
# **Exercise 1 (accumulation).** Two microbatches hold 20 and 80 targets. Under the average of microbatch means,
# how much more does a target of the first weigh than one of the second, and how far apart (total variation) are the
# two microbatch weightings?

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution"]
ex1 = dg.worked.microbatch_weights([20, 80])
display(Markdown(ex1.markdown))
assert ex1.values == dg.reduction.microbatch_weights([20, 80])          # the library's weights agree

# %% [markdown]
# **Exercise 2 (counting targets).** A 50-token document starts with a 12-token prompt masked by −100. How many
# next-token targets does it contribute to `num_items_in_batch`? And without a prompt?

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution"]
ex2 = dg.worked.target_count(50, 12)
ex2_count = dg.installed.count_check(dg.models.tiny_model("llama", seed=seed),
                                     [dg.reduction.causal_lm_labels(torch.arange(50), 0)[None]])
display(Markdown(ex2.markdown + f"""
- What transformers passes for the document without a prompt depends on the release: the targets,
  {ex2_count['shifted_count']}, in {ex2_count['ranges']['shifted']}; every label != −100,
  {ex2_count['unshifted_count']}, in {ex2_count['ranges']['unshifted']} (position 0 included, so each row's loss
  was divided by one more than its targets). The installed transformers {ex2_count['version']} passes
  **{ex2_count['installed_count']}**."""))
assert ex2.values == {"with_prompt": dg.reduction.count_targets(dg.reduction.causal_lm_labels(torch.arange(50), 12)),
                      "without_prompt": dg.reduction.count_targets(dg.reduction.causal_lm_labels(torch.arange(50), 0))}
assert ex2_count["agrees"], f"transformers {ex2_count['version']} counts otherwise than the page says: {ex2_count}"

# %% [markdown]
# **Exercise 3 (effective sample size).** Three documents of 1, 1 and 98 positions. What is Kish's n_eff of the
# token mean and of the document mean?

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution"]
ex3 = dg.worked.n_eff_documents([1, 1, 98])
display(Markdown(ex3.markdown))
ex3_rows = {r["objective"]: r for r in dg.effective_size.objective_effective_sizes(
    dg.reduction.make_batch([1, 1, 98], [1, 0, 1], [0, 0, 0]))}
assert all(abs(ex3.values[k] - ex3_rows[k]["n_eff"]) < 1e-9 for k in ex3.values)

# %% [markdown]
# ### Code exercise
#
# It comes with a checker (`docgrad.teaching.reduction`): it runs your divisor on a tiny causal LM, says *correct*
# or *not yet*, and names the usual mistake its answer matches.
#
# **Exercise 4 (the accumulation normaliser).** One optimiser step runs K microbatches; `labels[j]` is microbatch
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


ex4 = dg.reduction.check_normaliser(divisor)
print(ex4["message"])

# %% [markdown]
# ## Appendix: the design effect of a weighting, simulated (§3)
#
# Weighted means of independent unit-variance draws with the document mean's weights, against the exact
# U Σ w² / (Σ w)².

# %%
dg.sig_table([{"draws": mc["draws"], "n": mc["n"], "simulated": mc["simulated"], "exact": mc["exact"]}],
             {"draws": "draws", "n": "units", "simulated": "simulated design effect", "exact": "exact"})

# %% [markdown]
# ## What changed when

# %% tags=["hide-input"]
history_topics = ("accumulation",)
NUMBERS["what_changed_when"] = dg.history.rows(history_topics)
display(Markdown(dg.history.what_changed_when(history_topics)))

# %%
NUMBERS["exercises"] = {"1": ex1.values, "2": {**ex2.values, "installed_count": ex2_count}, "3": ex3.values,
                        "4": ex4}
dg.save_numbers("01a_gradient_accumulation", NUMBERS)
dg.versions()
