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
# # Loss reduction in real trainers: data parallelism, accumulation, optimisers
#
# Page 01 worked out what a mean over tokens weights on a one-parameter model. The same arithmetic hides in the
# training loops of today's language models. This page, one class of about 45 minutes, follows it through data
# parallelism and gradient accumulation in the real `transformers.Trainer` (in one process and in two `torchrun`
# processes) and through the optimiser, where a loss factor meets SGD and Adam, each on SmolLM2-135M-Instruct
# with real text. Page 01c takes packing, cross-entropy denominators and policy-gradient losses. Exercises with
# worked solutions and two code exercises with checkers close the page.
#
# > **What to take away.**
# > - Every reduction across devices, microbatches or rows must divide by the **global** count of what should weigh
# >   equally (targets, or the sum of class weights), or weigh each part by its count; a mean of means is a
# >   different objective. transformers does this with `num_items_in_batch` (since October 2024) and
# >   `average_tokens_across_devices` (added October 2024, default True since July 2025) when the model accepts loss
# >   keyword arguments; custom losses (`compute_loss_func`) must do it themselves.
# > - A constant loss factor is a learning-rate change for SGD and (nearly) nothing for Adam, unless gradients are
# >   clipped or L2 decay is coupled to the gradient; a factor that varies by batch re-weights batches for both.
#
# Every number stated on this page is computed by `docgrad.teaching.pitfalls` and `docgrad.teaching.reduction`
# (tested in `tests/test_pitfalls.py` and `tests/test_reduction.py`) and saved to `figures/01b_real_trainers.json`.
# Re-execute with other settings, e.g. `docgrad run 01b -p train_steps 40 -p dp_lengths "[96, 8, 24]"`.

# %% tags=["parameters"]
model_name = "smollm2-135m"  # the offline default model (GGUF de-quantised to float32)
corpus = "BOOKS"  # real text: spans of this corpus (docgrad corpora build --corpus BOOKS makes the cache)
dp_lengths = [64, 16, 40]  # tokens of each document of the data-parallel and Trainer experiments
dp_ranks = [[0, 1], [2]]  # document indices held by each simulated data-parallel rank
ddp_lengths = [40, 12]  # tokens of the one document per process of the real torchrun step (tiny random model)
adam_check_scale = 0.5  # constant loss factor of the synthetic Adam/SGD check
train_steps = 20  # optimiser steps of the real training run
train_batch_size = 4  # rows per batch of the real training run
train_min_len = 4  # shortest row (tokens) of the real training run
train_max_len = 40  # longest row (tokens) of the real training run
train_top_layers = 4  # transformer blocks trained (the last ones; the rest of the model frozen)
sgd_lr = 0.01  # SGD learning rate (0.05 diverges here: runs that diverge cannot be compared)
adam_lr = 1e-4  # Adam learning rate
seed = 0  # seeds of batches, Trainer and the synthetic checks
rerun = False  # recompute the recorded Trainer, torchrun and fine-tuning runs (minutes) and rewrite data/teaching/

# %%
import altair as alt
import numpy as np
import pandas as pd
import torch
from IPython.display import Markdown, display

from docgrad.teaching import history
from docgrad.teaching import pitfalls as P
from docgrad.teaching import reduction as R
from docgrad.teaching.records import provenance_line, recorded
from docgrad.corpora.build import DEFAULT_MANIFEST, load_spans, read_manifest
from docgrad.models import load_model
from docgrad.runtime.pages import save_chart, save_numbers, setup, versions
from docgrad.core.constants import DOCS_PER_CORPUS

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
# ## 1. Data parallelism: a mean of rank means
#
# With W ranks (processes, one per device), each rank computes a loss on its own batch and back-propagates it;
# DistributedDataParallel then **averages** the W gradients (an all-reduce divided by W). If each rank's loss is
# its own token mean S_r / n_r (S_r the summed cross-entropy of its n_r targets), the step's gradient is
# (1/W) Σ_r ∇(S_r / n_r): every rank weighs 1/W whatever its number of targets. That is page 01's average of
# microbatch means (§3), across devices. The token mean of the global batch is ∇(Σ_r S_r / N) with the global
# count N = Σ_r n_r, so rank r must divide its *sum* by N (gathered from every rank) and multiply by W, which
# the all-reduce average then cancels.
#
# Below, three real-text documents are spread over two simulated ranks. Each rank's loss comes from the
# model's own loss function, exactly as `Trainer.compute_loss` calls it (`labels=`, and
# `num_items_in_batch=N` for the fix); the all-reduce is the average of the rank gradients.

# %%
docs = R.make_documents(dp_lengths, tokens=spans[0].tokens[: sum(dp_lengths)])
reference = P.full_batch_gradient(model, docs)
dp = P.data_parallel_step(model, docs, dp_ranks, reference=reference)
NUMBERS["data_parallel"] = dp
pd.DataFrame({"documents": [str(r) for r in dp["ranks"]], "targets n_r": dp["targets_per_rank"],
              "weight, mean of rank means": dp["rank_weights_local_mean"],
              "weight, global count n_r / N": dp["rank_weights_global_count"]},
             index=[f"rank {r}" for r in range(dp["world_size"])]).round(4)

# %% tags=["hide-input"]
w_mm = R.microbatch_weights(dp["targets_per_rank"])
NUMBERS["data_parallel_weights"] = w_mm
display(Markdown(f"""
The ranks hold {dp['targets_per_rank']} targets (N = {dp['n_targets_total']}). Averaging rank means gives each
target of the smaller rank {f(w_mm['per_target_weight_ratio'], 3)} times the weight of a target of the larger one;
the two weightings are {f(w_mm['total_variation'], 3)} apart in total variation.

On {model_name}, the averaged rank means differ from the full-batch token-mean gradient by
**{f(dp['rel_discrepancy_local_mean'], 3)}** of its norm (cosine {dp['cosine_local_mean_full']:.4f}); dividing each
rank's sum by the global count and multiplying by W = {dp['world_size']} differs by
**{dp['rel_discrepancy_global_count']:.2g}** (float32 rounding). The logged losses barely tell them apart:
{f(dp['logged_loss_local_mean'], 6)} (mean of rank means) and {f(dp['logged_loss_global_count'], 6)} (global
count) against the full batch's {f(dp['loss_full'], 6)} nats.
"""))

# %% [markdown]
# ### The same step through `transformers.Trainer`
#
# Gradient accumulation is the single-process twin of data parallelism: microbatches in sequence instead of
# ranks side by side. The installed `Trainer` runs one optimiser step over the same three documents (batch size
# 1, `gradient_accumulation_steps=3`, SGD with learning rate 0 so the weights stay put, no clipping, CPU, fixed
# seed), and the accumulated gradient is read just before the optimiser step. Once as installed, and once with
# `model_accepts_loss_kwargs = False`, which is how the Trainer treats a model whose `forward` takes no loss
# keyword arguments.

# %%
trainer_rows, trainer_prov = recorded(
    "01b_trainer", {"model": model_name, "corpus": corpus, "dp_lengths": dp_lengths, "seed": seed},
    lambda: [P.trainer_accumulation(model, docs, use_num_items=u, seed=seed, reference=reference)
             for u in (True, False)], rerun=rerun)
display(Markdown(provenance_line("The Trainer steps", trainer_prov)))
NUMBERS["trainer"] = {("num_items" if r["use_num_items"] else "per_microbatch_mean"): r for r in trainer_rows}
tr_items, tr_mean = trainer_rows
pd.DataFrame([{"run": "as installed" if r["use_num_items"] else "model_accepts_loss_kwargs = False",
               "num_items_in_batch passed": r["num_items_in_batch_passed"],
               "|g − g_full| / |g_full|": r["rel_discrepancy"], "cosine": r["cosine_with_full"]}
              for r in trainer_rows]).set_index("run")

# %% tags=["hide-input"]
src = P.transformers_excerpts()
NUMBERS["transformers"] = src
assert all(c["found"] for c in src["claims"].values()), "the installed transformers changed: re-read its source"
display(Markdown(f"""
As installed, the Trainer passed num_items_in_batch = {tr_items['num_items_in_batch_passed'][0]} to each of the
{tr_items['gradient_accumulation_steps']} microbatches (the {tr_items['targets_per_microbatch']} targets counted
after the causal shift), and its accumulated gradient matches the full batch to
**{tr_items['rel_discrepancy']:.2g}**. Without loss keyword arguments it divides each microbatch's mean by the
number of accumulation steps, and the gradient is off by **{f(tr_mean['rel_discrepancy'], 3)}**, the same
mean-of-means error as the data-parallel one above.

What transformers {src['version']} does, read from its installed source (`docgrad.teaching.pitfalls.transformers_excerpts`
finds each line; the page stops if one is missing):
""" + "\n".join(f"* {c['meaning']}: `{' '.join(c['lines'])}` (`{c['where']}`)" for c in src["claims"].values())
+ """

So with `average_tokens_across_devices=True` (the default since July 2025) and a model that accepts
`num_items_in_batch`, each rank divides its summed loss by the target count gathered from all ranks and multiplies
it by the number of processes: the global-count fix above. With it off, the step is a mean of rank means again.
A custom `compute_loss_func` that returns a per-batch mean is worse: the Trainer treats its loss as already
normalised, so it is not divided by the accumulation steps, and it is still multiplied by the number of
processes: the weights are a mean of means and the gradient is larger by both factors. The same holds for a model
whose forward accepts `**kwargs` but drops `num_items_in_batch`."""))

# %% [markdown]
# ### A real data-parallel step
#
# The same Trainer, now in two CPU processes launched by `torchrun` (gloo backend, one document per process,
# batch size 1, one step with learning rate 0), once with `average_tokens_across_devices=True` and once with
# `False`. The all-reduced gradient is compared with the full-batch gradient of the same model and documents
# computed in one process. Here exactness is the point, so the model is the tiny random Llama of page 01 (two
# processes of SmolLM2 would double the memory and the loading time for the same check).

# %%
ddp, ddp_prov = recorded("01b_torchrun", {"ddp_lengths": ddp_lengths, "seed": seed},
                         lambda: [P.ddp_trainer_step(ddp_lengths, average_tokens=a, seed=seed) for a in (True, False)],
                         rerun=rerun)
display(Markdown(provenance_line("The two-process torchrun steps", ddp_prov)))
NUMBERS["ddp_torchrun"] = {("average_tokens" if r["average_tokens_across_devices"] else "per_rank_count"): r
                           for r in ddp}
pd.DataFrame([{"average_tokens_across_devices": r["average_tokens_across_devices"],
               "processes": r["world_size"], "document of each rank": r["rank_docs"],
               "num_items_in_batch per rank": r["num_items_in_batch"],
               "|g − g_full| / |g_full|": r["rel_discrepancy"]}
              for r in ddp]).set_index("average_tokens_across_devices")

# %% tags=["hide-input"]
ddp_on, ddp_off = ddp
display(Markdown(f"""
With `average_tokens_across_devices=True` both processes passed num_items_in_batch =
{ddp_on['num_items_in_batch'][0][0]} (the {' + '.join(str(n) for n in ddp_on['n_targets'])} targets of the two
documents, gathered) and the all-reduced gradient equals the full batch's to **{ddp_on['rel_discrepancy']:.2g}**.
With `False`, each process passed its own count
({', '.join(str(r[0]) for r in ddp_off['num_items_in_batch'])}) and the gradient is off by
**{f(ddp_off['rel_discrepancy'], 3)}**: a mean of rank means, now from the real distributed code path.
"""))

# %%
dp_chart_data = pd.DataFrame([
    {"how": "2 ranks: mean of rank means", "kind": "pitfall", "value": dp["rel_discrepancy_local_mean"]},
    {"how": "2 ranks: sum / global N, × W", "kind": "fix", "value": dp["rel_discrepancy_global_count"]},
    {"how": "Trainer: mean / accumulation steps", "kind": "pitfall", "value": tr_mean["rel_discrepancy"]},
    {"how": "Trainer: num_items_in_batch", "kind": "fix", "value": tr_items["rel_discrepancy"]},
    {"how": "torchrun, tiny model: average_tokens False", "kind": "pitfall", "value": ddp_off["rel_discrepancy"]},
    {"how": "torchrun, tiny model: average_tokens True", "kind": "fix", "value": ddp_on["rel_discrepancy"]},
])
dp_base = alt.Chart(dp_chart_data).encode(
    y=alt.Y("how:N", sort=None, title=None, axis=alt.Axis(labelLimit=400)),
    x=alt.X("value:Q", scale=alt.Scale(type="log", domain=[1e-8, 3]), axis=alt.Axis(format=".0e"),
            title="|g − g_full| / |g_full| (log scale)"),
    color=alt.Color("kind:N", scale=alt.Scale(domain=["pitfall", "fix"], range=["#d62728", "#2ca02c"]),
                    title=None),
    tooltip=["how", alt.Tooltip("value:Q", format=".3g")])
dp_chart = (dp_base.mark_point(filled=True, size=160)
            + dp_base.mark_text(align="left", dx=10).encode(text=alt.Text("value:Q", format=".2g"))).properties(
    width=520, height=210, title=alt.Title(
    f"One step over {len(dp_lengths)} documents ({sum(dp_lengths)} tokens) on {model_name}",
    subtitle="gradient difference from the full-batch token mean; the torchrun rows: two real processes, "
             "tiny random model"))
save_chart(dp_chart, "01b_data_parallel")

# %% [markdown]
# ## 2. Optimisers: a constant scale and a varying denominator
#
# Multiplying the loss by a constant c multiplies every gradient by c. SGD's step is lr·g, so it scales by c: a
# constant factor is a change of learning rate. Adam's step is lr·m̂/(√v̂ + ε), where m̂ and √v̂ both scale by c,
# so the step is lr·m̂/(√v̂ + ε/c): unchanged except that ε acts as ε/c. A constant factor is (almost) absorbed
# by Adam and not by SGD, with two exceptions the runs below switch off: **gradient clipping** (the Trainer's
# `max_grad_norm` defaults to 1.0; a scaled loss is clipped at a different point, so it changes Adam's step too)
# and **coupled L2 weight decay** (a decay term added to the gradient does not scale with c; AdamW's decoupled
# decay does not see the gradient):

# %%
synthetic = np.random.default_rng(seed).normal(size=(20, 1000)) * 1e-3
adam_check = P.adam_scale_check(synthetic, adam_check_scale)
NUMBERS["adam_scale_check"] = adam_check
pd.Series(adam_check)

# %% [markdown]
# A denominator that **varies from batch to batch** is different. Page 01's padded-denominator pitfall divides
# the masked sum by every position of the padded tensor: that is the token mean times c_b = n_valid / n_padded,
# and c_b changes with each batch's padding. Batches are re-weighted relative to each other, and neither
# optimiser can undo that: Adam normalises by a running average over batches, not by each batch's own factor.
#
# A short real training run shows it: SmolLM2's last blocks (and final norm) are fine-tuned on real-text batches
# of rows of random lengths, right-padded, with fixed seeds; three objectives, each with SGD and with Adam, all
# runs from the same weights on the same batches in lockstep: the token mean (reference), the token mean times
# a constant c equal to the average c_b, and the padded denominator. The drift is the distance of a run's
# weights from the reference run's, relative to how far the reference has moved.

# %%
batches = P.training_batches([s.tokens for s in spans], train_steps, train_batch_size, train_min_len,
                             train_max_len, seed=seed)
drift, drift_prov = recorded(
    "01b_drift", {"model": model_name, "corpus": corpus, "train_steps": train_steps,
                  "train_batch_size": train_batch_size, "train_min_len": train_min_len, "train_max_len": train_max_len,
                  "train_top_layers": train_top_layers, "sgd_lr": sgd_lr, "adam_lr": adam_lr, "seed": seed},
    lambda: P.training_drift(model, batches, optimizers=(("sgd", sgd_lr), ("adam", adam_lr)),
                             train_top_layers=train_top_layers), rerun=rerun)
display(Markdown(provenance_line("The fine-tuning runs", drift_prov)))
NUMBERS["provenance"] = {"trainer": trainer_prov, "torchrun": ddp_prov, "drift": drift_prov}
NUMBERS["training"] = {k: drift[k] for k in ("n_trainable", "constant", "scales", "final")}
NUMBERS["training"]["trainable_blocks"] = train_top_layers
steps_df = pd.DataFrame(drift["steps"])
final = pd.DataFrame(drift["final"]).set_index(["optimizer", "scheme"])
final[["drift", "drift_from_constant", "ref_distance_from_start", "token_mean_loss"]]

# %% tags=["hide-input"]
fin = {(r["optimizer"], r["scheme"]): r for r in drift["final"]}
sc = drift["scales"]
display(Markdown(f"""
Synthetic check first: with gradients multiplied by {adam_check_scale}, Adam's weights end
{adam_check['rel_diff_adam_scaled']:.2g} (relative) from the unscaled run's, and
{adam_check['rel_diff_adam_scaled_vs_eps_over_scale']:.2g}
from an unscaled run with ε/c: the ε/c rule is exact. SGD's displacement is {f(adam_check['sgd_step_ratio'], 3)} times
as long.

In the real run ({train_steps} steps, {drift['n_trainable']:,} trained weights in the last {train_top_layers} blocks),
c_b ranged from {f(min(sc), 3)} to {f(max(sc), 3)} (mean c = {f(drift['constant'], 3)}). After the last step:

* **SGD**: the constant factor drifts **{f(fin[('sgd', 'constant_scale')]['drift'], 3)}** from the reference (it is
  a learning rate {f(drift['constant'], 3)} times smaller), and the padded denominator
  {f(fin[('sgd', 'padded_denominator')]['drift'], 3)}; even against the constant-factor run, which a retuned
  learning rate would match, it stays {f(fin[('sgd', 'padded_denominator')]['drift_from_constant'], 3)} away.
* **Adam**: the constant factor drifts only **{fin[('adam', 'constant_scale')]['drift']:.2g}** (the ε/c effect),
  while the padded denominator drifts **{f(fin[('adam', 'padded_denominator')]['drift'], 3)}**: the
  batch-to-batch variation is not absorbed.
"""))

# %%
lines = []
for (opt, scheme), g in steps_df.groupby(["optimizer", "scheme"]):
    if scheme != "token_mean":
        lines.append(g.assign(comparison=f"{P.TRAINING_LABELS[scheme]} vs reference", value=g["drift"]))
    if scheme == "padded_denominator":
        lines.append(g.assign(comparison="padded denominator vs constant c", value=g["drift_from_constant"]))
drift_plot = pd.concat(lines)
drift_plot["optimizer"] = drift_plot["optimizer"].map({"sgd": f"SGD, lr {sgd_lr:g}", "adam": f"Adam, lr {adam_lr:g}"})
pick = alt.selection_point(fields=["comparison"], bind="legend")
drift_chart = alt.Chart(drift_plot).mark_line(point=True).encode(
    x=alt.X("step:Q", title="optimiser step"),
    y=alt.Y("value:Q", scale=alt.Scale(type="log"), title="|θ − θ_other| / |θ_ref − θ_0| (log scale)"),
    color=alt.Color("comparison:N", title=None, legend=alt.Legend(orient="bottom", columns=1, labelLimit=400)),
    strokeDash=alt.StrokeDash("comparison:N", legend=None),          # lines that coincide stay visible
    shape=alt.Shape("comparison:N", legend=None),
    opacity=alt.condition(pick, alt.value(1.0), alt.value(0.15)),
    tooltip=["optimizer", "comparison", "step", alt.Tooltip("value:Q", format=".3g"),
             alt.Tooltip("scale:Q", format=".3f", title="c_b")],
).add_params(pick).properties(width=300, height=250).facet(
    column=alt.Column("optimizer:N", title=None, sort=[f"SGD, lr {sgd_lr:g}", f"Adam, lr {adam_lr:g}"])
).properties(title=alt.Title(
    f"Fine-tuning the last {train_top_layers} blocks of {model_name}: drift from the token-mean run",
    subtitle="a constant factor is absorbed by Adam, not by SGD; a per-batch factor by neither"))
save_chart(drift_chart, "01b_optimizer_drift")

# %% [markdown]
# ## Exercises
#
# Each solution is computed with the library functions the page uses; the test suite checks the same values
# (`tests/test_pitfalls.py`). Predict the answer first, then open the solution: in JupyterLab its cell is
# collapsed (click the bar to the left of it), in the HTML report click *Solution*.
#
# **Exercise 1 (data parallelism).** Four ranks hold 120, 480, 200 and 200 targets and each back-propagates its own
# token mean before DDP averages the gradients. What weight does each rank get, what would the global token mean
# give it, how much more does a target of rank 0 weigh than one of rank 1, and by what does transformers multiply
# rank 0's summed loss to fix it?

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution"]
ex1_counts = [120, 480, 200, 200]
ex1 = R.microbatch_weights(ex1_counts)
ex1["rank0_loss_factor"] = len(ex1_counts) / sum(ex1_counts)  # S_0 / N, times W
display(Markdown(f"Mean of rank means: {ex1['averaged']}; global token mean: {ex1['token_mean']}. A target of rank 0 "
                 f"weighs {f(ex1['per_target_weight_ratio'])} times one of rank 1 (480/120); the weightings are "
                 f"{f(ex1['total_variation'])} apart (total variation). Rank 0's loss is S_0 / N × W = "
                 f"S_0 × {f(ex1['rank0_loss_factor'])}."))

# %% [markdown]
# **Exercise 2 (Adam's ε).** A loss is accidentally divided by 10⁴ (c = 10⁻⁴) and a coordinate's gradient is a
# constant 10⁻⁴ before scaling. With ε = 10⁻⁸, how much shorter is Adam's step on that coordinate than without
# the factor?

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution"]
ex4 = P.adam_scale_check(np.full((10, 1), 1e-4), 1e-4)
ex4["step_ratio"] = 1 - ex4["rel_diff_adam_scaled"]
display(Markdown(f"ε acts as ε/c = 10⁻⁴, the size of the gradient: the step is lr·g / (g + ε/c) = lr/2 instead "
                 f"of lr·g / (g + ε) ≈ lr, i.e. {f(ex4['step_ratio'])} times as long (relative difference "
                 f"{f(ex4['rel_diff_adam_scaled'])}). SGD's step would be {f(ex4['sgd_step_ratio'])} times as long."))

# %% [markdown]
# ### Code exercises
#
# Each comes with a checker you run: it builds a small causal LM with random weights, compares your function's
# gradient with the full-batch token mean, and says *correct* or *not yet* (`docgrad.teaching.pitfalls`).
#
# **Exercise 3 (find the bug).** This accumulation loop back-propagates each microbatch's mean loss, scaled by
# the number of microbatches. Predict what the checker will say, run it, then fix the loop
# (`R.summed_loss(model, docs)` is a microbatch's summed target loss, `R.count_targets(doc["labels"])` a
# document's target count).

# %% tags=["show-input"]
def accumulate(model, microbatches):
    for mb in microbatches:
        n = sum(R.count_targets(d["labels"]) for d in mb)
        loss = R.summed_loss(model, mb) / n / len(microbatches)
        loss.backward()


print(P.check_accumulation(accumulate)["message"])

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution"]
def accumulate(model, microbatches):
    total = sum(R.count_targets(d["labels"]) for mb in microbatches for d in mb)   # the whole batch's count
    for mb in microbatches:
        (R.summed_loss(model, mb) / total).backward()


ex7 = P.check_accumulation(accumulate)
print(ex7["message"])

# %% [markdown]
# **Exercise 4 (write the data-parallel loss).** Each rank holds `summed`, its summed target loss, its own count
# `n_local`, the all-reduced count `n_global` of every rank and the number of ranks `world_size`; DDP averages the
# ranks' gradients. Return the loss a rank must back-propagate so that the average is the global token mean.
# The version below is the mean of rank means.

# %% tags=["show-input"]
def rank_loss(summed, n_local, n_global, world_size):
    return summed / n_local


print(P.check_rank_loss(rank_loss)["message"])

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution"]
def rank_loss(summed, n_local, n_global, world_size):
    return summed * world_size / n_global      # DDP divides by world_size; what transformers does


ex8 = P.check_rank_loss(rank_loss)
print(ex8["message"])

# %%
NUMBERS["exercises"] = {"1": {"counts": ex1_counts, **ex1}, "2": ex4, "3": ex7, "4": ex8}
save_numbers("01b_real_trainers", NUMBERS)
versions()
