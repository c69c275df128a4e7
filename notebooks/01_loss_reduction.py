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
# Averaging the loss over every supervised position of a batch gives each document a weight proportional to its
# number of positions; averaging per document first gives every document the same weight. The denominator of a
# mean is part of the training objective. This page works the difference out exactly on a one-parameter model,
# shows what padding masks and gradient accumulation must do to keep the objective you meant, and then checks
# the same algebra in PyTorch, on a small randomly initialised causal language model and on SmolLM2-135M with
# real text. Exercises with worked solutions close the page; page 01b follows these mistakes into real training
# setups.
#
# > **What to take away.**
# > - A mean over tokens weighs documents by their number of supervised positions; a mean over documents weighs
# >   them equally. Neither is wrong; pick the one that states what should matter, and write it down.
# > - Padding is a tensor-shape device, not data: the mask must enter numerator and denominator, and must
# >   describe a position's role, never its label value.
# > - Splitting a batch must not change the objective: divide summed losses by the total valid-target count of
# >   the whole batch (after the causal shift and the prompt mask), or weight microbatch means by their counts.
# >   A mean of microbatch means is biased, not only noisy: it up-weights short documents, whose targets sit at
# >   early, higher-loss positions.
# > - An empty denominator is an error to report, not a zero loss.
#
# Every number stated on this page is computed by `docgrad.teaching.reduction` (tested in `tests/test_reduction.py`)
# and saved to `figures/01_loss_reduction.json`. Re-execute with other documents, e.g.
# `docgrad run 01 -p lengths "[3, 30]" -p labels "[1, 0]" -p padding "[27, 0]"`.

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
seed = 0  # seed of the tiny model and of its random tokens
rerun = False  # recompute the recorded run on the real model (data/teaching/01_growth_real.json) and rewrite it

# %%
import altair as alt
import pandas as pd
import torch
from IPython.display import Markdown, display

from docgrad.teaching import history
from docgrad.teaching import reduction as R
from docgrad.teaching.records import provenance_line, recorded
from docgrad.corpora.build import load_spans
from docgrad.models import load_model, tiny_model
from docgrad.runtime.pages import save_chart, save_numbers, setup, versions

ROOT = setup()
torch.set_num_threads(2)
NUMBERS = {}


def f(x, digits=6):
    """Format a computed number for the prose."""
    return f"{x:.{digits}g}"


# %% tags=["hide-input"]
display(Markdown(history.what_changed_when()))


# %% [markdown]
# ## 1. One logit, two documents, five objectives
#
# A *supervised position* is a place where the model is asked for a prediction and a target exists. In this
# model every position predicts class 1 with the same probability p = sigmoid(θ), so there is a single
# parameter, the logit θ. A position with label y costs the binary cross-entropy
# ℓ(θ, y) = −[y log p + (1 − y) log(1 − p)] = softplus(θ) − yθ nats, and its gradient is
# dℓ/dθ = p − y. (The softplus form never takes the log of a rounded-to-zero probability.)
#
# Document A has only label-1 positions, B only label-0 positions, and A is padded to B's length so that the
# two rows form one rectangular tensor. Every objective below is a weighted sum Σ w·ℓ over positions:
#
# | objective | weight of a position | what it means |
# |---|---|---|
# | token mean | mask / Σ mask | every supervised position counts equally: document i weighs n_i / Σn |
# | document mean | mask / (D · n_i) | every document counts equally: weight 1/D each |
# | padding counted as class-0 data | 1 / (all positions) | padding becomes invented label-0 examples |
# | padding out of numerator, in denominator | mask / (all positions) | the mask is applied to the sum only |
# | label 0 treated as padding | [y = 1] / #(y = 1) | the mask is derived from the label value |
#
# Because the gradient is Σ w (p − y), it vanishes at p* = Σ w y / Σ w: the optimum is the weighted fraction of
# label-1 positions. The second derivative (Σ w) p(1 − p) is positive, so p* is the unique optimum of this
# scalar model whenever 0 < p* < 1 (this says nothing about a large model's loss landscape).

# %%
batch = R.make_batch(lengths, labels, padding)
table = pd.DataFrame(R.objectives_table(batch, theta))
NUMBERS["theta"] = theta
NUMBERS["valid_counts"] = batch.valid_counts
NUMBERS["positions_in_padded_batch"] = batch.n_positions
NUMBERS["objectives"] = {r["objective"]: {k: r[k] for k in ("loss", "gradient", "optimum_p", "optimum",
                                                             "document_weights")}
                         for r in table.to_dict("records")}
table[["label", "loss", "gradient", "optimum", "document_weights"]].round(6)

# %% tags=["hide-input"]
o = NUMBERS["objectives"]
tm, dm, pc, pd_, lp = (o[k] for k in R.OBJECTIVES)
display(Markdown(f"""
With n = {batch.valid_counts} valid positions, the token mean is
{f(tm['document_weights'][0], 3)}·L_A + {f(tm['document_weights'][1], 3)}·L_B and the document mean is
{f(dm['document_weights'][0], 3)}·L_A + {f(dm['document_weights'][1], 3)}·L_B: under the token mean B weighs
{f(tm['document_weights'][1] / tm['document_weights'][0], 3)} times as much as A.

At θ = {theta} (p = {f(R.sigmoid(theta), 3)}) the token-mean loss is {f(tm['loss'])} nats and the document-mean loss
is {f(dm['loss'])} nats, yet their gradients are {f(tm['gradient'])} and {f(dm['gradient'])}: one objective pushes
θ down, the other is already stationary. The loss value alone does not tell you which update you will get.
The token mean is minimised at {tm['optimum']}, the document mean at {dm['optimum']}.

**Padding as data.** Counting A's {padding[0]} padding positions as label-0 examples moves the optimum to
{pc['optimum']} although no document changed: invented examples entered the objective.

**Mask in the numerator only.** Dropping padding from the sum but still dividing by all
{batch.n_positions} positions multiplies the token mean by {batch.n_valid}/{batch.n_positions}: the loss reads
{f(pd_['loss'])} instead of {f(tm['loss'])} and the gradient {f(pd_['gradient'])} instead of {f(tm['gradient'])}.
The optimum stays at {pd_['optimum']} (a positive constant factor does not move it), but the update scale
changes, and when the padding fraction varies from batch to batch the factor varies with it. A lower plotted
loss is not a better prediction.

**Label 0 mistaken for padding.** Ignoring every 0 drops all of B's legitimate targets. The gradient becomes
{f(lp['gradient'])} and the objective has {lp['optimum']}: the mask must describe a position's role, not its
class.
"""))

# %%
ps = [i / 200 for i in range(4, 197)]
curves = pd.DataFrame(R.loss_curves(batch, ps))
optima = pd.DataFrame([{"label": R.OBJECTIVE_LABELS[k], "p": v["optimum_p"],
                        "loss": R.loss(R.logit(v["optimum_p"]), batch, k), "optimum": v["optimum"]}
                       for k, v in NUMBERS["objectives"].items() if v["optimum_p"] is not None])
pick = alt.selection_point(fields=["label"], bind="legend")
color = alt.Color("label:N", title="objective", sort=[R.OBJECTIVE_LABELS[k] for k in R.OBJECTIVES],
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
save_chart(objectives_chart, "01_objectives_vs_p")

# %% [markdown]
# ## 2. A mask must act on the numerator and the denominator
#
# With the mask m (1 at a supervised position, 0 at padding), the token mean is Σ m·ℓ / Σ m. Adding any number
# of masked positions changes neither sum, so neither the loss nor the gradient can move. The check adds the
# same number of padding positions to every document and compares with the unpadded batch.

# %%
inv = pd.DataFrame(R.padding_invariance(lengths, labels, invariance_added, invariance_thetas))
NUMBERS["padding_invariance_max_abs_diff"] = float(inv[["abs_loss_diff", "abs_grad_diff"]].to_numpy().max())
display(inv.pivot_table(index=["objective", "added"], columns="theta",
                        values=["abs_loss_diff", "abs_grad_diff"]))
display(Markdown(f"Largest change over {len(inv)} comparisons (added {invariance_added} positions, "
                 f"θ in {invariance_thetas}): **{NUMBERS['padding_invariance_max_abs_diff']:.3g}**."))

# %% [markdown]
# ## 3. Splitting the batch into microbatches
#
# Put A and B in separate microbatches (to save memory) and average the per-microbatch mean gradients. The
# simple average gives each *microbatch* weight 1/B, which reconstructs the document mean, not the token mean.
# To get the token mean back, weight each microbatch's mean by its valid count: Σ n_b g_b / Σ n_b. Equal valid
# counts make the two agree; equal padded tensor lengths do not.

# %% tags=["hide-input"]
acc = R.microbatch_accumulation(lengths, labels, theta)
NUMBERS["microbatch"] = acc
display(Markdown(f"""
Microbatch mean gradients at θ = {theta}: {', '.join(f(g) for g in acc['microbatch_mean_gradients'])}
(valid counts {acc['valid_counts']}).
Unweighted average: **{f(acc['unweighted_average'])}** (the unsplit document mean is {f(acc['full_batch_document_mean'])}).
Count-weighted average: **{f(acc['count_weighted_average'])}** (the unsplit token mean is {f(acc['full_batch_token_mean'])}).
"""))

# %% [markdown]
# ## 4. No valid position: an error, not a zero
#
# A mean over zero supervised positions divides 0 by 0. Returning 0 would report a perfect prediction that
# never happened, so `docgrad.teaching.reduction` raises an error that says which denominator is empty. (A document
# without targets also has an undefined mean L_i; excluding it is a policy to declare, not a default.)

# %%
try:
    R.loss(theta, R.make_batch([0, 0], labels, padding=[4, 4]), "token_mean")
except R.NoValidPositionsError as e:
    zero_valid_error = f"{type(e).__name__}: {e}"
print(zero_valid_error)
NUMBERS["zero_valid_positions"] = zero_valid_error

# %% [markdown]
# ## 5. The analytic gradient against a central finite difference

# %%
fd = [R.finite_difference_check(batch, obj, fd_theta, fd_step) for obj in R.OBJECTIVES]
NUMBERS["finite_difference"] = {r["objective"]: r for r in fd}
worst = max(r["abs_error"] for r in fd)
assert worst < tolerance, f"finite-difference error {worst} exceeds the tolerance {tolerance}"
display(pd.DataFrame(fd).set_index("objective")[["analytic", "numeric", "abs_error"]])
display(Markdown(f"At θ = {fd_theta} with h = {fd_step:g}, the token-mean gradient differs from "
                 f"(L(θ+h) − L(θ−h))/2h by {NUMBERS['finite_difference']['token_mean']['abs_error']:.2g}; "
                 f"the largest difference over the five objectives is {worst:.2g}, below the tolerance "
                 f"{tolerance:g}."))

# %% [markdown]
# ## 6. The same algebra in PyTorch
#
# ### 6a. `torch.nn.functional.cross_entropy`
#
# With two-class logits [0, θ] per position, softmax gives class 1 the probability sigmoid(θ), so
# `cross_entropy` computes exactly ℓ. Targets equal to `ignore_index` (−100 by default) are excluded from the
# loss and the gradient, and for **class-index targets** `reduction="mean"` divides by the number of targets that
# are not ignored, or with class weights by the sum of the targets' weights
# ([PyTorch, `CrossEntropyLoss`](https://pytorch.org/docs/stable/generated/torch.nn.CrossEntropyLoss.html)).
# Each objective is one expression; the gradients come from autograd:

# %%
torch_rows = pd.DataFrame(R.torch_objectives(batch, theta)).set_index("objective")
torch_rows["docgrad loss"] = [NUMBERS["objectives"][k]["loss"] for k in torch_rows.index]
torch_rows["docgrad gradient"] = [NUMBERS["objectives"][k]["gradient"] for k in torch_rows.index]
NUMBERS["torch_max_abs_diff"] = float(max((torch_rows["loss"] - torch_rows["docgrad loss"]).abs().max(),
                                          (torch_rows["gradient"] - torch_rows["docgrad gradient"]).abs().max()))
pd.set_option("display.max_colwidth", 120)
torch_rows

# %% tags=["hide-input"]
ignored = R.all_ignored_comparison()
NUMBERS["all_targets_ignored"] = ignored
display(Markdown(f"""
Largest difference between PyTorch and `docgrad.teaching.reduction`: {NUMBERS['torch_max_abs_diff']:.2g}.

**Every target ignored.** `cross_entropy(..., reduction="mean")` returns **{ignored['torch_mean']}** (0/0), and
`reduction="sum"` returns {ignored['torch_sum']}, which silently looks like a perfect batch. Our reduction instead
says: *{ignored['docgrad']}*
"""))

# %% [markdown]
# **Probability targets divide by the rows.** The same targets given as probabilities (one-hot rows, or soft
# labels) are averaged over the number of rows N, with class weights too: the denominator is not the sum of the
# targets' weights any more. Three rows, class weights [1, 4, 0.5]:

# %% tags=["hide-input"]
prob = R.probability_targets_mean([[2.0, 0.0, -1.0], [0.5, 1.0, 0.0], [0.0, 0.0, 3.0]], [1, 1, 2], [1.0, 4.0, 0.5])
NUMBERS["probability_targets"] = prob
display(Markdown(f"Weighted sum of the row losses {f(prob['weighted_sum'], 4)}: as class indices the mean divides "
                 f"by the targets' weights, {f(prob['sum_of_target_weights'], 3)}, giving {f(prob['indices'], 4)}; "
                 f"as one-hot probabilities by the {prob['n_rows']} rows, giving {f(prob['probabilities'], 4)}."))

# %% [markdown]
# ### 6b. Gradient accumulation on a causal language model
#
# A causal LM is trained on next-token targets: logits at position t predict token t + 1, so a document of n
# tokens gives n − 1 targets (the model shifts the labels internally). Prompt positions that should not be
# learned are set to −100 in the labels; with a k-token prompt (k ≥ 1) the document gives n − k targets. The
# attention mask says which tokens the model may *see*; the −100 labels say which predictions *count*. The valid
# count of a microbatch is the number of targets left after both.
#
# Three ways to accumulate the gradient over microbatches b with n_b targets and summed loss S_b:
#
# * **full batch**: one padded batch, loss = Σ_b S_b / N (the token mean over all N targets);
# * **average of means**: Σ_b (S_b / n_b) / B (what a loop that calls `loss.backward()` on each microbatch's
#   mean, scaled by 1/B, computes);
# * **normalised by the total count**: Σ_b S_b / N, i.e. each microbatch's summed loss divided by N before
#   `backward()` (what transformers passes to the loss as `num_items_in_batch` since October 2024:
#   [the fix explained](https://huggingface.co/blog/gradient_accumulation)).
#
# The model is a two-layer, 32-wide Llama (or GPT-NeoX) built from a config with random weights, and the tokens
# are random; the algebra does not depend on either.

# %%
model = tiny_model(lm_arch, seed=seed)
docs = R.make_documents(lm_lengths, lm_prompt_lengths, seed=seed)
lm = R.lm_accumulation(model, docs, lm_microbatches)
NUMBERS["lm"] = {"arch": lm_arch, **lm}
display(pd.DataFrame({"tokens": lm["n_tokens"], "prompt (masked)": lm_prompt_lengths,
                      "targets after shift and mask": lm["n_targets_per_document"]},
                     index=[f"document {i}" for i in range(len(docs))]))

# %% tags=["hide-input"]
display(Markdown(f"""
Microbatches {lm_microbatches} hold {lm['targets_per_microbatch']} targets ({lm['n_targets_total']} in all).
Relative gradient difference from the full batch, |g − g_full| / |g_full|:

* average of microbatch means: **{lm['rel_discrepancy_averaged']:.3g}** (cosine with the full-batch gradient
  {lm['cosine_averaged_full']:.3f});
* normalised by the total target count: **{lm['rel_discrepancy_num_items']:.2g}** (float32 rounding).

The losses read {f(lm['loss_full_token_mean'], 7)} (full batch), {f(lm['loss_num_items'], 7)} (total-count
normalisation) and {f(lm['loss_averaged_means'], 7)} (average of means): the loss values are close, the
gradients are not, because the short microbatch's targets are up-weighted by n_long / n_short.
"""))

# %% [markdown]
# ### How the discrepancy grows with unequal lengths
#
# Two microbatches share a fixed token budget with lengths in ratio r : 1. Under the average of means, each
# target of the short microbatch weighs (n_long / n_short) times as much as a target of the long one; the
# total-variation distance between the microbatch weights (1/B each vs n_b/N) measures how far the objective has
# moved. With equal lengths the two accumulations agree exactly.
#
# The experiment runs twice: on the tiny random model with random tokens (where the exactness of the fix is the
# point: any difference is float rounding), and on the real SmolLM2-135M with real text (the first tokens of a
# BOOKS span), where the size of the error is the point.

# %%
growth = pd.DataFrame(R.accumulation_growth(model, growth_total_tokens, growth_ratios, seed=seed))
NUMBERS["growth"] = growth.to_dict("records")
growth_real_rows, growth_real_prov = recorded(
    "01_growth_real", {"model": real_model, "corpus": real_corpus, "total_tokens": growth_total_tokens,
                       "ratios": real_growth_ratios},
    lambda: R.accumulation_growth(load_model(real_model), growth_total_tokens, real_growth_ratios,
                                  tokens=load_spans(real_corpus)[0].tokens),
    rerun=rerun, command="docgrad run 01 -p rerun True")
display(Markdown(provenance_line(f"The run on {real_model}", growth_real_prov)))
growth_real = pd.DataFrame(growth_real_rows)
NUMBERS["growth_real"] = {"model": real_model, "corpus": real_corpus, "rows": growth_real.to_dict("records"),
                          "provenance": growth_real_prov}
model_names = [f"tiny random {lm_arch}, random tokens", f"{real_model}, {real_corpus} text"]
both = pd.concat([growth.assign(model=model_names[0]), growth_real.assign(model=model_names[1])])
display(both.set_index(["model", "ratio"])[["lengths", "targets", "target_ratio", "total_variation",
                                            "rel_discrepancy_averaged", "rel_discrepancy_num_items"]])
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
save_chart(growth_chart, "01_accumulation_growth")

# %% tags=["hide-input"]
g0, g1 = NUMBERS["growth"][0], NUMBERS["growth"][-1]
r0, r1 = NUMBERS["growth_real"]["rows"][0], NUMBERS["growth_real"]["rows"][-1]
display(Markdown(f"""
With equal lengths {g0['lengths']} the average of means differs from the full batch by
{g0['rel_discrepancy_averaged']:.2g} (rounding only); at {g1['lengths']} tokens ({g1['targets']} targets, a
per-target weight ratio of {g1['target_ratio']:.3g}) it differs by **{g1['rel_discrepancy_averaged']:.3g}** of the
full-batch gradient's norm, while normalising by the total target count never exceeds
{max(r['rel_discrepancy_num_items'] for r in NUMBERS['growth']):.2g}.

On {real_model} with {real_corpus} text the error is of the same kind: {r0['rel_discrepancy_averaged']:.2g} at equal
lengths, **{r1['rel_discrepancy_averaged']:.3g}** at {r1['lengths']} tokens (per-target weight ratio
{r1['target_ratio']:.3g}; {'more' if r1['rel_discrepancy_averaged'] > g1['rel_discrepancy_averaged'] else 'less'}
than on the random model at its largest ratio), while the total-count normalisation stays below
{max(r['rel_discrepancy_num_items'] for r in NUMBERS['growth_real']['rows']):.2g}. On both models the mean gradient
of a few targets is large and noisy, so up-weighting it moves the update by more than the full gradient's length
once the lengths differ enough.

**The systematic part.** Each document is its own sequence, so all of the short one's targets sit at early
positions, with little context. On {real_model}:
""" + "\n".join(f"- {line}" for line in R.growth_bias_lines(NUMBERS["growth_real"]["rows"]))))

# %% [markdown]
# ## Exercises
#
# Each solution is computed with the library functions this page uses; the test suite checks the same values
# (`tests/test_reduction.py`). Predict the answer first, then open the solution: in JupyterLab its cell is
# collapsed (click the bar to the left of it), in the HTML report click *Solution*.
#
# **Exercise 1 (optima).** Document A has 3 positions labelled 1, document B 30 positions labelled 0. Where are the
# optima p* of the token mean and of the document mean?

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution"]
ex1_batch = R.make_batch([3, 30], [1, 0], padding=[0, 0])
ex1 = {k: R.optimum(ex1_batch, k).p for k in ("token_mean", "document_mean")}
display(Markdown(f"Token mean: p* = Σ w y / Σ w = 3/33 = {f(ex1['token_mean'], 4)}; document mean: p* = "
                 f"(1/2)·1 + (1/2)·0 = {f(ex1['document_mean'], 4)}."))

# %% [markdown]
# **Exercise 2 (padding).** Pad A with 27 positions to B's length. By what factor does dividing the masked sum by
# every position scale the token mean, and where is the optimum when the padding is counted as label-0 data?

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution"]
ex2_batch = R.make_batch([3, 30], [1, 0], padding=[27, 0])
ex2 = {"factor": R.loss(0.0, ex2_batch, "padding_in_denominator") / R.loss(0.0, ex2_batch, "token_mean"),
       "padding_as_class0_p": R.optimum(ex2_batch, "padding_as_class0").p}
display(Markdown(f"The factor is n_valid / n_positions = 33/60 = {f(ex2['factor'], 4)}; counting padding as data "
                 f"puts the optimum at 3/60 = {f(ex2['padding_as_class0_p'], 4)}."))

# %% [markdown]
# **Exercise 3 (accumulation).** Two microbatches hold 20 and 80 targets. Under the average of microbatch means,
# how much more does a target of the first weigh than one of the second, and how far apart (total variation) are the
# two microbatch weightings?

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution"]
ex3 = R.microbatch_weights([20, 80])
display(Markdown(f"Average of means: {ex3['averaged']} per microbatch; token mean: {ex3['token_mean']}. A target of "
                 f"the first weighs {f(ex3['per_target_weight_ratio'])} times one of the second (80/20); total "
                 f"variation {f(ex3['total_variation'])}."))

# %% [markdown]
# **Exercise 4 (counting targets).** A 50-token document starts with a 12-token prompt masked by −100. How many
# next-token targets does it contribute to `num_items_in_batch`? And without a prompt?

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution"]
ex4 = {"with_prompt": R.count_targets(R.causal_lm_labels(torch.arange(50), 12)),
       "without_prompt": R.count_targets(R.causal_lm_labels(torch.arange(50), 0))}
display(Markdown(f"With the prompt: n − k = 50 − 12 = {ex4['with_prompt']}; without: n − 1 = "
                 f"{ex4['without_prompt']} (the first token has nothing before it to be predicted from)."))

# %%
NUMBERS["exercises"] = {"1": ex1, "2": ex2, "3": ex3, "4": ex4}
save_numbers("01_loss_reduction", NUMBERS)
versions()
