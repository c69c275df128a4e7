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
# The arithmetic of means of pages 01 and 01a, in real training loops: data parallelism and gradient accumulation
# in the `transformers.Trainer` (one process, then two), and what a loss factor does to SGD and Adam, on
# SmolLM2-135M with real text. One class of about 45 minutes; page 01c takes packing and cross-entropy's
# denominators, page 01d the normalisation of reinforcement-learning losses.
#
# *What the Trainer does changed over releases: the box "What changed when" at the end says when, and every
# statement about it below is read from the installed source when the page runs.*
#
# > **What to take away.**
# > - Every reduction across devices, microbatches or rows must divide by the **global** count of what should weigh
# >   equally (targets, or the sum of class weights), or weigh each part by its count; a mean of means is a
# >   different objective. The installed `Trainer` does this (`num_items_in_batch`,
# >   `average_tokens_across_devices`) only for a model it decides accepts loss keyword arguments; the class's
# >   `accepts_loss_kwargs` attribute decides first, and dozens of classes set it to False. Custom losses
# >   (`compute_loss_func`) must normalise themselves.
# > - A constant loss factor is a learning-rate change for SGD and (nearly) nothing for Adam, unless gradients are
# >   clipped or L2 decay is coupled to the gradient; a factor that varies by batch re-weights batches for both.
#
# Every number is computed by `docgrad.teaching` (tested), shown to three significant figures and saved to
# `figures/01b_real_trainers.json`. Other settings: `docgrad run 01b -p train_steps 40 -p dp_lengths "[96, 8, 24]"`.

# %% tags=["parameters"]
model_name = "smollm2-135m"  # the offline default model, read from a GGUF file (llama.cpp's one-file format, weights stored quantised: in fewer bits) and de-quantised to float32
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
rerun = False  # recompute the recorded data-parallel, Trainer, torchrun and fine-tuning runs (minutes) and rewrite data/teaching/

# %%
import functools

import altair as alt
import numpy as np
import pandas as pd
import torch
from IPython.display import Markdown, display

from docgrad import page as dg

ROOT = dg.setup()
torch.set_num_threads(2)
torch.manual_seed(seed)
NUMBERS = {"model": model_name, "corpus": corpus}


real_model = functools.cache(lambda: dg.models.load_model(model_name))   # loaded only for a run not in a record
spans = [s for s in dg.corpora_build.load_spans(corpus) if s.doc < dg.DOCS_PER_CORPUS]   # the other pages' 16
separator = dg.corpora_build.read_manifest(dg.corpora_build.DEFAULT_MANIFEST)["tokenizer"]["separator"]  # packs with
EOS = int(separator["id"])
NUMBERS["separator"] = separator
display(Markdown(f"{len(spans)} {corpus} spans of {len(spans[0].tokens):,} tokens (the documents below are cut from "
                 f"them); documents are separated by `{separator['token']}` (id {EOS}), the pretraining separator. "
                 f"The runs on {model_name} are read from committed records (their provenance is shown under each); "
                 f"`-p rerun True` recomputes them."))

# %% [markdown]
# ## 1. Data parallelism: a mean of rank means
#
# In *data parallelism* W processes (*ranks*, one per device) each back-propagate a loss on their own batch, and
# DistributedDataParallel (DDP) **averages** the W gradients with an *all-reduce* (every rank receives the sum
# over ranks), divided by W. If rank r's loss is its own token mean S_r / n_r (S_r the summed cross-entropy of its
# n_r targets), every rank weighs 1/W whatever its n_r: page 01a's average of K microbatch means, across devices.
# The global token mean needs rank r to divide its *sum* by the global count N = Σ_r n_r and multiply by W, which
# the average then cancels.
#
# Below, three real-text documents on two simulated ranks; each rank's loss is the model's own loss function,
# called as `Trainer.compute_loss` calls it (`num_items_in_batch=N` for the fix).

# %%
docs = dg.reduction.make_documents(dp_lengths, tokens=spans[0].tokens[: sum(dp_lengths)])
dp, dp_prov = dg.records.recorded(
    "01b_data_parallel", {"model": model_name, "corpus": corpus, "dp_lengths": dp_lengths, "dp_ranks": dp_ranks},
    lambda: dg.trainers.data_parallel_step(real_model(), docs, dp_ranks), rerun=rerun)
display(Markdown(dg.records.provenance_line(f"The data-parallel step ({model_name}, {dp['n_parameters']:,} "
                                            f"parameters)", dp_prov)))
NUMBERS["data_parallel"] = dp
dg.sig_table([{"rank": f"rank {r}", "documents": str(d), "n": n, "local": a, "global": g}
              for r, (d, n, a, g) in enumerate(zip(dp["ranks"], dp["targets_per_rank"], dp["rank_weights_local_mean"],
                                                   dp["rank_weights_global_count"]))],
             {"rank": "rank", "documents": "documents", "n": "targets n_r", "local": "weight, mean of rank means",
              "global": "weight, global count n_r / N"}, index="rank")

# %% tags=["hide-input"]
w_mm = dg.reduction.microbatch_weights(dp["targets_per_rank"])
NUMBERS["data_parallel_weights"] = w_mm
display(Markdown(f"A target of the smaller rank weighs {dg.sig(w_mm['per_target_weight_ratio'])} times one of the "
                 f"larger under the mean of rank means; the two weightings are {dg.sig(w_mm['total_variation'])} apart in "
                 f"total variation (half the summed absolute difference of the weights, page 01a). The gradients, "
                 f"against the full batch's token mean:"))
dg.sig_table([{"how": "mean of rank means", "rel": dp["rel_discrepancy_local_mean"],
               "cos": dp["cosine_local_mean_full"], "loss": dp["logged_loss_local_mean"]},
              {"how": f"sum / global N, × W = {dp['world_size']}", "rel": dp["rel_discrepancy_global_count"],
               "cos": None, "loss": dp["logged_loss_global_count"]},
              {"how": "full batch", "rel": 0.0, "cos": 1.0, "loss": dp["loss_full"]}],
             {"how": "loss of each rank", "rel": "|g − g_full| / |g_full|", "cos": "cosine", "loss": "logged loss (nats)"},
             index="how")

# %% [markdown]
# ### The same step through `transformers.Trainer`
#
# Gradient accumulation is data parallelism's single-process twin: microbatches in sequence instead of ranks
# side by side. The installed `Trainer` runs one optimiser step over the same documents (batch size 1, one
# accumulation step per document, learning rate 0, no clipping) and the gradient is read before the step: once
# as installed, once with `model_accepts_loss_kwargs = False`. The Trainer sets that flag itself: from the model
# class's `accepts_loss_kwargs` attribute when the class has one, and only otherwise from whether its `forward`
# takes `**kwargs`. How many classes of the installed transformers set the attribute to False:

# %% tags=["hide-input"]
accepts = dg.installed.accepts_loss_kwargs_summary()
NUMBERS["accepts_loss_kwargs"] = accepts
display(Markdown(f"**{accepts['false']}** classes of transformers {accepts['version']} set `accepts_loss_kwargs = "
                 f"False` in their own body (their subclasses inherit it), **{accepts['generation_heads']}** of them "
                 f"generation heads (`...ForConditionalGeneration`, e.g. `{accepts['examples'][0]}`): for them the "
                 f"Trainer passes no count and divides each microbatch's mean by the accumulation steps, a mean of "
                 f"microbatch means, whatever their `forward` accepts. Llama's causal-LM class sets no attribute and "
                 f"its `forward` takes `**kwargs`: the Trainer passes it the count."))

# %%
trainer_rows, trainer_prov = dg.records.recorded(
    "01b_trainer", {"model": model_name, "corpus": corpus, "dp_lengths": dp_lengths, "seed": seed},
    lambda: [dg.trainers.trainer_accumulation(real_model(), docs, use_num_items=u, seed=seed)
             for u in (True, False)], rerun=rerun)
display(Markdown(dg.records.provenance_line("The Trainer steps", trainer_prov)))
NUMBERS["trainer"] = {("num_items" if r["use_num_items"] else "per_microbatch_mean"): r for r in trainer_rows}
tr_items, tr_mean = trainer_rows
dg.sig_table([{"run": "as installed" if r["use_num_items"] else "model_accepts_loss_kwargs = False",
               "targets": r["targets_per_microbatch"], "passed": r["num_items_in_batch_passed"],
               "rel": r["rel_discrepancy"], "cos": r["cosine_with_full"]} for r in trainer_rows],
             {"run": "run", "targets": "targets per microbatch", "passed": "num_items_in_batch passed",
              "rel": "|g − g_full| / |g_full|", "cos": "cosine"}, index="run")

# %% tags=["hide-input"]
src = dg.installed.read_claims(dg.installed.TRAINER_CLAIMS)
dg.installed.require(src)                     # the page stops, naming the line, if the installed source changed
tr_count = dg.installed.count_check(dg.models.tiny_model("llama", seed=seed), [d["labels"][None] for d in docs])
assert tr_count["agrees"], f"the installed Trainer counts otherwise than the page says: {tr_count}"
rec_versions = trainer_prov["versions"]
NUMBERS["transformers"] = {"version": tr_count["version"], "claims": src, "installed_count": tr_count}
display(Markdown(f"""
As run for the record, the Trainer passes every microbatch the step's whole count and matches the full batch to
{dg.sig(tr_items['rel_discrepancy'])}; with `model_accepts_loss_kwargs = False` it divides each microbatch's mean by
the accumulation steps: the mean-of-means error above. The installed transformers {tr_count['version']} passes
**{tr_count['installed_count']}** for these documents (it counts {tr_count['how']}; counted now on a tiny Llama,
whose loss is the same causal-LM loss){"" if tr_count['installed_count'] == tr_items['num_items_in_batch_passed'][0]
else f", not the {tr_items['num_items_in_batch_passed'][0]} of the record made with transformers "
     f"{rec_versions.get('transformers')}: `docgrad run 01b -p rerun True` measures the installed version"}.
What it does, read from its installed source (the page stops if a line is missing):

""" + dg.installed.claims_markdown(src) + """

So with `average_tokens_across_devices=True` and a model the Trainer lets take `num_items_in_batch`, each process
divides its summed loss by the count gathered from all processes (divided by the processes that share one batch:
tensor, context and sequence parallelism) and multiplies it by `num_processes // tp_size`, the processes that hold
different data: the global-count fix. With the option off, the step is a mean of rank means. A custom
`compute_loss_func` returning a per-batch mean is worse: its loss is not divided by the accumulation steps but
still multiplied by that factor, so the weights are a mean of means and the gradient is larger by both factors
(unless a Trainer subclass sets `loss_is_scaled_for_ga = False`). The same holds for a model whose forward accepts
`**kwargs` but drops `num_items_in_batch`."""))

# %% [markdown]
# ### A real data-parallel step
#
# The same Trainer in two CPU processes started by `torchrun` (PyTorch's launcher, one process per device)
# that talk through *gloo* (PyTorch's communication backend for CPUs): one document per process, one step with
# learning rate 0, with `average_tokens_across_devices` True and False. Exactness is the point, so the model is
# page 01a's tiny random Llama (two copies of SmolLM2 would double memory and loading time for the same check).

# %%
ddp, ddp_prov = dg.records.recorded("01b_torchrun", {"ddp_lengths": ddp_lengths, "seed": seed},
                                    lambda: [dg.trainers.ddp_trainer_step(ddp_lengths, average_tokens=a, seed=seed)
                                             for a in (True, False)],
                                    rerun=rerun)
display(Markdown(dg.records.provenance_line("The two-process torchrun steps", ddp_prov)))
NUMBERS["ddp_torchrun"] = {("average_tokens" if r["average_tokens_across_devices"] else "per_rank_count"): r
                           for r in ddp}
dg.sig_table([{"avg": str(r["average_tokens_across_devices"]), "targets": r["n_targets"],
               "passed": [x[0] for x in r["num_items_in_batch"]], "rel": r["rel_discrepancy"]} for r in ddp],
             {"avg": "average_tokens_across_devices", "targets": "targets of each rank",
              "passed": "num_items_in_batch per rank", "rel": "|g − g_full| / |g_full|"}, index="avg")

# %% tags=["hide-input"]
ddp_on, ddp_off = ddp
display(Markdown("With `True` both processes pass the gathered count and the gradient is the full batch's; with "
                 "`False` each passes its own: a mean of rank means, from the real distributed code path."))

# %%
real = f"{model_name}, {len(dp_lengths)} documents ({sum(dp_lengths)} tokens)"
tiny = f"tiny random Llama, {len(ddp_lengths)} documents ({sum(ddp_lengths)} tokens)"
dp_chart_data = pd.DataFrame([
    {"how": f"{len(dp_ranks)} simulated ranks: mean of rank means", "kind": "pitfall", "setting": real,
     "value": dp["rel_discrepancy_local_mean"]},
    {"how": f"{len(dp_ranks)} simulated ranks: sum / global N, × W", "kind": "fix", "setting": real,
     "value": dp["rel_discrepancy_global_count"]},
    {"how": "Trainer: mean / accumulation steps", "kind": "pitfall", "setting": real, "value": tr_mean["rel_discrepancy"]},
    {"how": "Trainer: num_items_in_batch", "kind": "fix", "setting": real, "value": tr_items["rel_discrepancy"]},
    {"how": "torchrun, 2 processes: average_tokens False", "kind": "pitfall", "setting": tiny,
     "value": ddp_off["rel_discrepancy"]},
    {"how": "torchrun, 2 processes: average_tokens True", "kind": "fix", "setting": tiny,
     "value": ddp_on["rel_discrepancy"]},
])
dp_base = alt.Chart(dp_chart_data).encode(
    y=alt.Y("how:N", sort=None, title=None, axis=alt.Axis(labelLimit=400)),
    x=alt.X("value:Q", scale=alt.Scale(type="log", domain=[1e-8, 3]), axis=alt.Axis(format=".0e"),
            title="|g − g_full| / |g_full| (log scale)"),
    color=alt.Color("kind:N", scale=alt.Scale(domain=["pitfall", "fix"], range=["#d62728", "#2ca02c"]),
                    title=None),
    tooltip=["setting", "how", alt.Tooltip("value:Q", format=".3g")])
dp_chart = (dp_base.mark_point(filled=True, size=160)
            + dp_base.mark_text(align="left", dx=10).encode(text=alt.Text("value:Q", format=".2g"))).properties(
    width=520, height=210, title=alt.Title(
    "One optimiser step, pitfall against fix, in three settings",
    subtitle=[f"simulated ranks and Trainer: {real}", f"torchrun: {tiny}",
              "gradient difference from the same documents' full-batch token mean"]))
dg.save_chart(dp_chart, "01b_data_parallel")

# %% [markdown]
# ## 2. Optimisers: a constant scale and a varying denominator
#
# Multiplying the loss by a constant c multiplies every gradient by c. SGD's step is lr·g: a constant factor is a
# change of learning rate. Adam's step is lr·m̂/(√v̂ + ε), with m̂ and v̂ running averages of the gradient and
# of its square and ε a small constant; m̂ and √v̂ both scale by c, so the step is lr·m̂/(√v̂ + ε/c): unchanged
# but for ε (checked on synthetic gradients in Appendix A). Two exceptions, switched off below: **gradient
# clipping** (rescaling a gradient whose norm exceeds `max_grad_norm`, 1.0 by default in the Trainer: a scaled
# loss is clipped at another point) and **coupled L2 weight decay** (a decay term added to the gradient does not
# scale with c; AdamW's decoupled decay never enters the gradient).
#
# A denominator that **varies from batch to batch** is different. Page 01's padded-denominator pitfall divides
# batch b's masked sum by every position of its padded tensor: the token mean times a per-batch factor
# c_b = n_valid / n_padded (valid targets over all positions of batch b). Batches are re-weighted against each
# other, and no optimiser undoes that: Adam normalises by an average over batches, not by each batch's factor.
#
# A short fine-tuning run shows it: SmolLM2's last blocks are trained on right-padded real-text batches, all runs
# from the same weights on the same batches: the token mean (reference), the token mean times a constant c (the
# average c_b), and the padded denominator, each with SGD and Adam. The *drift* is a run's distance from the
# reference run's weights over the reference's distance from the start.

# %%
batches = dg.optimisers.training_batches([s.tokens for s in spans], train_steps, train_batch_size, train_min_len,
                                       train_max_len, seed=seed)
drift, drift_prov = dg.records.recorded(
    "01b_drift", {"model": model_name, "corpus": corpus, "train_steps": train_steps,
                  "train_batch_size": train_batch_size, "train_min_len": train_min_len, "train_max_len": train_max_len,
                  "train_top_layers": train_top_layers, "sgd_lr": sgd_lr, "adam_lr": adam_lr, "seed": seed},
    lambda: dg.optimisers.training_drift(real_model(), batches, optimizers=(("sgd", sgd_lr), ("adam", adam_lr)),
                                       train_top_layers=train_top_layers), rerun=rerun)
display(Markdown(dg.records.provenance_line("The fine-tuning runs", drift_prov)))
NUMBERS["provenance"] = {"data_parallel": dp_prov, "trainer": trainer_prov, "torchrun": ddp_prov, "drift": drift_prov}
NUMBERS["training"] = {k: drift[k] for k in ("n_trainable", "constant", "scales", "final")}
NUMBERS["training"]["trainable_blocks"] = train_top_layers
steps_df = pd.DataFrame(drift["steps"])
sc = drift["scales"]
display(Markdown(f"{train_steps} steps, {dg.sig(drift['n_trainable'])} trained weights in the last {train_top_layers} "
                 f"blocks; c_b from {dg.sig(min(sc))} to {dg.sig(max(sc))}, c = {dg.sig(drift['constant'])}. After the last "
                 f"step:"))
dg.sig_table([dict(r, optimizer={"sgd": "SGD", "adam": "Adam"}[r["optimizer"]],
                   scheme=dg.optimisers.TRAINING_LABELS[r["scheme"]])
              for r in drift["final"] if r["scheme"] != "token_mean"],
             {"optimizer": "optimizer", "scheme": "objective", "drift": "drift from the reference",
              "drift_from_constant": "from the constant-c run"}).set_index(["optimizer", "objective"])

# %% tags=["hide-input"]
fin = {(r["optimizer"], r["scheme"]): r for r in drift["final"]}
adam_absorbs = fin[("adam", "constant_scale")]["drift"] < 0.1 * fin[("adam", "padded_denominator")]["drift"]
display(Markdown(
    "With SGD the constant factor is a smaller learning rate, so it drifts; against the constant-c run, which a "
    "retuned learning rate would match, the padded denominator " + ("still drifts" if fin[("sgd", "padded_denominator")]
    ["drift_from_constant"] > 0.1 * fin[("sgd", "constant_scale")]["drift"] else "hardly drifts") + ". With Adam the "
    "constant factor " + ("drifts less than a tenth as far as the padded denominator (the ε/c effect): the "
                          "batch-to-batch variation is not absorbed, the constant is." if adam_absorbs else
                          "is not absorbed here: read the table.")))

# %%
lines = []
labels_ = dg.optimisers.TRAINING_LABELS
for (opt, scheme), g in steps_df.groupby(["optimizer", "scheme"]):
    if scheme != "token_mean":
        lines.append(g.assign(comparison=f"{labels_[scheme]} vs the reference run", value=g["drift"]))
    if scheme == "padded_denominator":
        lines.append(g.assign(comparison=f"{labels_[scheme]} vs the {labels_['constant_scale']} run",
                              value=g["drift_from_constant"]))
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
dg.save_chart(drift_chart, "01b_optimizer_drift")

# %% [markdown]
# ## Exercises
#
# Predict, then open the solution (JupyterLab: click the collapsed cell; HTML: *Solution*). Each shows the
# algebra (numbers filled in by `docgrad.teaching.worked`) and a line checking it against the library.
#
# **Exercise 1 (data parallelism).** Four ranks hold 120, 480, 200 and 200 targets and each back-propagates its own
# token mean before DDP averages the gradients. What weight does each rank get, what would the global token mean
# give it, how much more does a target of rank 0 weigh than one of rank 1, and by what does transformers multiply
# rank 0's summed loss to fix it?

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution"]
ex1_counts = [120, 480, 200, 200]
ex1 = dg.worked.rank_weights(ex1_counts)
display(Markdown(ex1.markdown))
assert {k: v for k, v in ex1.values.items() if k != "rank0_loss_factor"} == dg.reduction.microbatch_weights(ex1_counts)

# %% [markdown]
# **Exercise 2 (Adam's ε).** A loss is accidentally divided by 10⁴ (c = 10⁻⁴) and a coordinate's gradient is a
# constant 10⁻⁴ before scaling. With ε = 10⁻⁸, how much shorter is Adam's step on that coordinate than without
# the factor?

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution"]
ex4 = dg.worked.adam_eps(g=1e-4, c=1e-4, eps=1e-8)
display(Markdown(ex4.markdown))
ex4_run = dg.optimisers.adam_scale_check(np.full((10, 1), 1e-4), 1e-4)     # torch.optim.Adam, ten steps of this gradient
assert abs(ex4.values["step_ratio"] - (1 - ex4_run["rel_diff_adam_scaled"])) < 1e-6

# %% [markdown]
# ### Code exercises
#
# Each comes with a checker: it builds a small random causal LM, compares your function's gradient with the
# full-batch token mean, and says *correct* or *not yet* (`docgrad.teaching.trainers`).
#
# **Exercise 3 (find the bug).** This accumulation loop back-propagates each microbatch's mean loss, scaled by
# the number of microbatches. Predict what the checker will say, run it, then fix the loop
# (`R.summed_loss(model, docs)` is a microbatch's summed target loss, `R.count_targets(doc["labels"])` a
# document's target count).

# %% tags=["show-input"]
def accumulate(model, microbatches):
    for mb in microbatches:
        n = sum(dg.reduction.count_targets(d["labels"]) for d in mb)
        loss = dg.reduction.summed_loss(model, mb) / n / len(microbatches)
        loss.backward()


print(dg.trainers.check_accumulation(accumulate)["message"])

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution"]
def accumulate(model, microbatches):
    total = sum(dg.reduction.count_targets(d["labels"]) for mb in microbatches for d in mb)   # the whole batch's count
    for mb in microbatches:
        (dg.reduction.summed_loss(model, mb) / total).backward()


ex7 = dg.trainers.check_accumulation(accumulate)
print(ex7["message"])

# %% [markdown]
# **Exercise 4 (write the data-parallel loss).** Each rank holds `summed`, its summed target loss, its own count
# `n_local`, the all-reduced count `n_global` of every rank and the number of ranks `world_size`; DDP averages the
# ranks' gradients. Return the loss a rank must back-propagate so that the average is the global token mean.
# The version below is the mean of rank means.

# %% tags=["show-input"]
def rank_loss(summed, n_local, n_global, world_size):
    return summed / n_local


print(dg.trainers.check_rank_loss(rank_loss)["message"])

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution"]
def rank_loss(summed, n_local, n_global, world_size):
    return summed * world_size / n_global      # DDP divides by world_size; what transformers does


ex8 = dg.trainers.check_rank_loss(rank_loss)
print(ex8["message"])

# %% [markdown]
# ## Appendix
#
# ### A. Adam absorbs a constant factor: a synthetic check (§2)
#
# Random gradients run through `torch.optim.Adam` and `SGD` as given and multiplied by c; Adam's run is repeated
# unscaled with ε/c.

# %%
synthetic = np.random.default_rng(seed).normal(size=(20, 1000)) * 1e-3
adam_check = dg.optimisers.adam_scale_check(synthetic, adam_check_scale)
NUMBERS["adam_scale_check"] = adam_check
display(Markdown(f"{synthetic.shape[0]} steps on a {synthetic.shape[1]:,}-dimensional parameter, ε = {adam_check['eps']:g}."))
dg.sig_table([{"run": f"Adam, gradients × c = {dg.sig(adam_check_scale)}, against Adam unscaled",
               "rel": adam_check["rel_diff_adam_scaled"]},
              {"run": "the same, against Adam unscaled with ε/c", "rel": adam_check["rel_diff_adam_scaled_vs_eps_over_scale"]},
              {"run": "SGD, gradients × c, against SGD unscaled", "rel": adam_check["rel_diff_sgd_scaled"]}],
             {"run": "run", "rel": "relative difference of the final weights"}, index="run")

# %% [markdown]
# ## What changed when

# %% tags=["hide-input"]
history_topics = ("accumulation", "data_parallel")
NUMBERS["what_changed_when"] = dg.history.rows(history_topics)
display(Markdown(dg.history.what_changed_when(history_topics)))

# %%
NUMBERS["exercises"] = {"1": {"counts": ex1_counts, **ex1.values},
                        "2": {**ex4.values, "rel_diff_adam_scaled": ex4_run["rel_diff_adam_scaled"]}, "3": ex7, "4": ex8}
dg.save_numbers("01b_real_trainers", NUMBERS)
dg.versions()
