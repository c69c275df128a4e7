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
# The denominator of a mean is part of the training objective. This page works it out on a one-parameter model
# and checks it in PyTorch: which positions a mean weighs, how a mask must treat padding, and what a mean over no
# target should do. One class of about 50 minutes with its exercises; page 01a splits the batch (gradient
# accumulation) and prices a weighting, page 01b follows both into real trainers.
#
# > **What to take away.**
# > - A mean over tokens weighs documents by their number of supervised positions; a mean over documents weighs
# >   them equally. Neither is wrong; pick the one that states what should matter, and write it down.
# > - Padding is a tensor-shape device, not data: the mask must enter numerator and denominator, and must
# >   describe a position's role, never its label value (a pad token that is also the EOS token drops every real
# >   EOS target when the mask is taken from the token id).
# > - An empty denominator is an error to report, not a zero loss.
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
pad_eos_texts = ["the cat sat", "a dog ran far away"]  # texts collated with a tokenizer whose pad token is its EOS

# %%
import altair as alt
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
# ## 3. No valid position: an error, not a zero
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
# ## 4. The same algebra in PyTorch: `torch.nn.functional.cross_entropy`
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
# **Exercise 3 (pad == EOS).** Two texts of 5 and 2 tokens, each followed by EOS, are right-padded into one batch
# with the EOS token as pad token. How many next-token targets does the batch hold, and how many are left when the
# collator masks every position that holds the pad token's id?

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution"]
ex3_words = [5, 2]
ex3 = dg.worked.pad_eos_targets(ex3_words)
display(Markdown(ex3.markdown))
ex3_run = dg.reduction.pad_is_eos([" ".join(f"w{i}" for i in range(n)) for n in ex3_words])   # both collators
assert ex3.values == {"targets_by_position": ex3_run["trl"]["targets"],
                      "targets_masked_by_id": ex3_run["transformers"]["targets"],
                      "real_eos_lost": ex3_run["n_real_eos"] - ex3_run["transformers"]["real_eos_labels_kept"]}

# %% [markdown]
# ### Code exercise
#
# It comes with a checker (`docgrad.teaching.reduction`): it runs your function on several batches, says
# *correct* or *not yet*, and names the batch it got wrong and the usual mistake its answer matches.
#
# **Exercise 4 (write the masked token mean).** `losses` holds every position's loss (rows × positions, float64;
# padding positions have a loss too, as `cross_entropy(..., reduction="none")` gives without `ignore_index`) and
# `labels` holds −100 where nothing is supervised (padding, a prompt). Return the token mean over the supervised
# positions, and raise an error when there is none (§3). The version below divides by every position.

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


ex4 = dg.reduction.check_token_mean(token_mean)
print(ex4["message"])

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
# ## What changed when

# %% tags=["hide-input"]
history_topics = ("cross_entropy",)
NUMBERS["what_changed_when"] = dg.history.rows(history_topics)
display(Markdown(dg.history.what_changed_when(history_topics)))

# %%
NUMBERS["exercises"] = {"1": ex1.values, "2": ex2.values, "3": {"words": ex3_words, **ex3.values}, "4": ex4}
dg.save_numbers("01_loss_reduction", NUMBERS)
dg.versions()
