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
# # RL losses in TRL: what each `loss_type` divides by
#
# Page 01's question, which mean over what, in TRL's `GRPOTrainer`: its `loss_type` and `scale_rewards` options,
# read from the installed source and run on a small batch. One class of about 50 minutes with its exercises, the
# fifth after pages 01, 01a, 01b and 01c.
#
# GRPO samples a *group* of G completions per prompt and scores each with a reward; completion i's *advantage* A_i
# is its reward minus its group's mean (`scale_rewards` chooses what divides it). Training pushes up the
# log-probability of each token t of completion i in proportion to A_i · w_it; `loss_type` chooses the *weight*
# w_it. Completion i has |o_i| active (unmasked) tokens; an optimiser step holds H completions; N counts the
# active tokens of the *generation batch* (all processes); L is `max_completion_length`.
#
# Every number is computed by `docgrad.teaching` (tested against TRL's own code) and saved to
# `figures/01d_rl_normalisation.json`. Other settings: `docgrad run 01d -p rows_per_microbatch 2`.

# %% tags=["parameters"]
lengths = [[3, 6, 9, 14], [4, 8, 12, 16]]  # active tokens |o_i| of each completion, one list per prompt (its group)
rewards = [[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.8]]  # each completion's reward, in the shape of lengths
max_completion_length = 16  # L: TRL's generation budget per completion
rows_per_microbatch = 4  # B: completions per micro-batch (per_device_train_batch_size)
num_processes = 1  # P: data-parallel processes
scale_rewards = "group"  # the advantages of the worked batch: group, batch or none
log_prob = -1.0  # every token's log-probability when TRL's loss is computed (cispo's and vespo's loss depend on it)

# %% tags=["hide-input"]
import altair as alt
import pandas as pd
import torch
from IPython.display import Markdown, display

from docgrad import page as dg

ROOT = dg.setup()
torch.set_num_threads(2)
RL, RLT, RLW = dg.rl_losses, dg.rl_trl, dg.rl_worked
NUMBERS = {"lengths": lengths, "rewards": rewards, "max_completion_length": max_completion_length,
           "rows_per_microbatch": rows_per_microbatch, "num_processes": num_processes, "scale_rewards": scale_rewards,
           "log_prob": log_prob}

trl_read = RLT.explained_matches_installed()   # loss types, defaults, advantage lines, papers: stops if they differ
NUMBERS["trl"] = {"version": RLT.trl_version(), **trl_read}

n_gen = len(lengths[0])
assert all(len(g) == n_gen for g in lengths) and [len(g) for g in rewards] == [len(g) for g in lengths], \
    f"lengths and rewards must be groups of equal size, got {lengths} and {rewards}"
flat_lengths = [v for g in lengths for v in g]
flat_rewards = [v for g in rewards for v in g]
adv = {s: [float(a) for a in RL.advantages(flat_rewards, n_gen, s)] for s in RL.SCALE_REWARDS}
scale = RL.normalise_scale_rewards(scale_rewards)         # True / False as GRPOConfig maps them
A = adv[scale]
step = dict(max_completion_length=max_completion_length, rows_per_microbatch=rows_per_microbatch,
            num_processes=num_processes)
trl_table = RLT.trl_loss_table(flat_lengths, A, log_prob=log_prob, **step)
NUMBERS["trl_losses"] = trl_table
display(Markdown(RLT.answer_box(trl_table)))

# %% [markdown]
# ## 1. What `loss_type` decides
#
# TRL minimises, per micro-batch, loss = Σ_i Σ_t w_it · l_it over the active tokens t of every completion i (the
# completion mask m_it is 1 on an active token, 0 on prompt, padding and masked tool output); l_it is the token's
# loss. While the model still equals the one that sampled the batch (ratio π_θ/π_old = 1: always when
# `num_iterations` = 1 and `steps_per_generation` ≤ `gradient_accumulation_steps`, the defaults), l_it's gradient
# is −c · A_i ∇log π_θ(o_it): c = 1 except for `cispo`, whose clamped ratio gives min(1, `epsilon_high`). (`luspo`
# at sequence level gives every token its row's loss, whose gradient reaches each token divided by |o_i|; the sum
# counts it |o_i| times.) Three factors multiply l_it: vLLM's importance-sampling ratio (on by default with
# `use_vllm`; `vespo` folds it into its weight), the entropy mask (`top_entropy_quantile` < 1) and the off-policy
# mask (`off_policy_mask_threshold`); the masks zero tokens that still count in the denominators. The KL term
# (`beta` > 0) is added to l_it.
#
# How TRL cuts a step: each of P processes runs K = `gradient_accumulation_steps` micro-batches of
# B = `per_device_train_batch_size` rows, H = P·K·B (DDP averages the processes' gradients); a generation batch is
# sampled once, shuffled and split into S = `steps_per_generation` micro-batches per process (S = K unless set).
# The installed source, found by its text:

# %% tags=["hide-input"]
src = RLT.trl_excerpts()
NUMBERS["source_lines"] = {k: [v["file"], v["first_line"], v["last_line"]] for k, v in src.items()}
shown = [("How a micro-batch's loss is normalised (`_compute_loss`)", "normalisers"),
         ("The per-token losses: cispo's clamp, PPO's clip, sapo's gate, vespo's weight", "token_losses"),
         ("What multiplies them after (masks, vLLM's factor, KL)", "token_factors"),
         ("When the ratio is 1", "ratio_one"), ("cispo's `epsilon_high` falls back to `epsilon`", "epsilon_high"),
         ("What N counts (summed and gathered over processes)", "num_items_in_batch"),
         ("How a generation batch becomes micro-batches (`_prepare_inputs`)", "micro_batches"),
         ("Why the Trainer does not divide by K again", "scaled_for_accumulation"),
         ("S = K unless set (`GRPOConfig.__post_init__`)", "steps_per_generation")]
display(Markdown("\n\n".join(f"**{title}**, " + RLT.excerpt_markdown(src[key]) for title, key in shown)))

# %% [markdown]
# Read per branch (N_mb: a micro-batch's active tokens), then summed over the K micro-batches and divided by P:
#
# | `loss_type` | a micro-batch's weights | a token's weight in the step (× c) | length bias |
# |---|---|---|---|
# | `grpo`, `sapo` | m_it / (\|o_i\|·B·K) | 1 / (H·\|o_i\|) | a short completion's tokens weigh more |
# | `bnpo` | m_it / (N_mb·K) | 1 / (P·K·N_mb) | none inside a micro-batch; between them, yes |
# | `dr_grpo` | m_it / (B·L·K) | 1 / (H·L) | none; the gradient shrinks as L grows |
# | `dapo`, `cispo`, `vespo` | m_it / ((N/P)·(K/S)) | S / (N·K): 1/N when S = K | none per token |
# | `luspo` | m_it / (B·K) | 1 / H | none per token; grows with the lengths |
#
# A row whose every token is masked (a truncated completion under `mask_truncated_completions`) still counts in B.

# %% [markdown]
# ## 2. A worked batch
#
# The parameters' completions, dealt in order into micro-batches of B rows (TRL shuffles first), with the advantages
# of each `scale_rewards` (§4):

# %%
mask = RL.completion_mask(flat_lengths, max_completion_length)
masks = RL.split_step(mask, rows_per_microbatch, num_processes)
K = len(masks[0])
H, N = len(flat_lengths), int(mask.sum())
completions = [{"completion": f"{i + 1}", "prompt": i // n_gen + 1, "process": i // (K * rows_per_microbatch) + 1,
                "micro-batch": (i // rows_per_microbatch) % K + 1, "length": n, "reward": r,
                **{f"A ({s})": adv[s][i] for s in RL.SCALE_REWARDS}}
               for i, (n, r) in enumerate(zip(flat_lengths, flat_rewards))]
NUMBERS["step"] = {"H": H, "N": N, "K": K, "P": num_processes, "B": rows_per_microbatch, "advantages": adv}
display(Markdown(f"H = {H} completions, N = {N} active tokens, P = {num_processes} process(es) × K = {K} "
                 f"micro-batch(es) of B = {rows_per_microbatch} rows, L = {max_completion_length}."))
dg.sig_table(completions, index="completion")

# %% [markdown]
# The normaliser's weights (c = 1), from `rl_worked.family_table`: a token's weight × N (1 is the step's token
# mean), then the completion's total Σ_t w_it × H (1 is an equal share per completion):

# %%
fam = RLW.family_table(flat_lengths, A, **step)
NUMBERS["families"] = fam
for key in ("per_token_x_N", "total_x_H"):
    display(dg.sig_table([{"completion": c["completion"], "length": c["length"],
                           **{f["loss_types"]: f[key][i] for f in fam}} for i, c in enumerate(completions)],
                         index="completion").rename_axis(
        "token weight × N" if key == "per_token_x_N" else "total weight × H", axis=1))
dg.sig_table([{"loss types": f["loss_types"], "short/long": f["short_over_long_per_token"],
               "depends": f["depends_on_other_lengths"]} for f in fam],
             {"loss types": "loss types", "short/long": "token weight, shortest / longest completion",
              "depends": "changes with another completion's length"}, index="loss types")

# %%
totals = RLW.completion_totals(flat_lengths, **step)
NUMBERS["completion_totals"] = totals
tot = pd.DataFrame([{**r, "segment": f"micro-batch {r['micro-batch']}, process {r['process']}"
                      if r["loss_type"] == "bnpo" else "all"} for r in totals])      # bnpo: one line per micro-batch
x_dom = [min(flat_lengths) / 1.2, max(flat_lengths) * 1.2]
x_ticks = sorted({min(flat_lengths), max(flat_lengths)} | {2 ** k for k in range(12) if x_dom[0] <= 2 ** k <= x_dom[1]})
y_dom = [min(tot["total_x_H"].min(), 1) / 1.5, max(tot["total_x_H"].max(), 1) * 1.5]
base = alt.Chart(tot).encode(
    x=alt.X("length:Q", scale=alt.Scale(type="log", domain=x_dom, nice=False), axis=alt.Axis(values=x_ticks),
            title="completion length |o_i| (log)"),
    y=alt.Y("total_x_H:Q", scale=alt.Scale(type="log", domain=y_dom, nice=False),
            title="completion's total weight × H (log)"),
    tooltip=["loss_type", "completion", "length", "micro-batch", alt.Tooltip("total_x_H:Q", format=".3g")])
lines = base.mark_line(color="#4c78a8").encode(detail="segment:N", order="length:Q")
points = base.mark_point(filled=True, size=60).encode(
    color=alt.Color("micro-batch:N", scale=alt.Scale(range=["#4c78a8", "#f58518", "#54a24b", "#e45756"]),
                    title="micro-batch"),
    shape=alt.Shape("micro-batch:N", title="micro-batch"))
equal = alt.Chart(tot).mark_rule(color="gray", strokeDash=[4, 3]).encode(y=alt.datum(1))
total_chart = alt.layer(equal, lines, points).properties(width=170, height=150).facet(
    facet=alt.Facet("loss_type:N", sort=list(RL.LOSS_TYPES), title=None), columns=4).properties(title=alt.Title(
        "Each completion's share of a GRPOTrainer step, by its length",
        subtitle=[f"TRL {RLT.trl_version()} at its defaults; {H} completions, {N} tokens; dashed: an equal share "
                  f"(1/H each)", "flat: every completion weighs the same (short ones' tokens more); rising: every "
                  "token weighs the same (long completions more)"]))
dg.save_chart(total_chart, "01d_weight_by_length")

# %% [markdown]
# ### TRL's own loss on the worked batch
#
# `rl_trl.trl_loss_table` runs the installed `GRPOTrainer._compute_loss` on every micro-batch of the step with a
# stub trainer and no model: log-probabilities `log_prob` with a gradient, old ones equal (ratio 1), the advantages
# above, GRPOConfig's defaults read from the installed class, then the page's settings. "Push size" is
# Σ|∂loss/∂log π| over dapo's at the defaults: the factor the loss type puts on an SGD learning rate (Adam cancels a
# constant factor, page 01b, but not one that moves with the lengths).

# %%
dg.sig_table(trl_table, {"loss_type": "loss_type", "loss_defaults": "TRL's loss, defaults",
                         "size_defaults": "push size / dapo's, defaults", "page": "page's settings",
                         "loss_page": "TRL's loss, page's settings", "size_page": "push size / dapo's, page's",
                         "max_push_diff": "largest |push_TRL − c·A·w|"}, index="loss_type")

# %% tags=["hide-input"]
rows = {r["loss_type"]: r for r in trl_table}
assert all(r["max_push_diff"] < 1e-7 and abs(r["loss_defaults"] - r["predicted_defaults"]) < 1e-6
           for r in trl_table), f"TRL's _compute_loss disagrees with rl_losses: {trl_table}"
display(Markdown(
    f"Every push agrees with `rl_losses`' c·A_i·w_it (largest difference "
    f"{dg.sig(max(r['max_push_diff'] for r in trl_table))}). "
    f"The loss itself is not comparable across loss types: `sapo`'s is {dg.sig(rows['sapo']['loss_defaults'])} where "
    f"`grpo`'s is {dg.sig(rows['grpo']['loss_defaults'])} (its gate gives 2/τ at ratio 1, τ by the advantage's sign), "
    f"`cispo`'s and `vespo`'s are −c·A·log π (here {dg.sig(rows['cispo']['loss_page'])} and "
    f"{dg.sig(rows['vespo']['loss_defaults'])} at log π = {dg.sig(log_prob)}), and `cispo` at the defaults pushes "
    f"{dg.sig(rows['cispo']['size_defaults'])} × as hard as at `epsilon_high` = "
    f"{dg.sig(RL.PAGE_SETTINGS['cispo']['epsilon_high'])}."))

# %% [markdown]
# ## 3. Scope: micro-batch, step, generation batch
#
# `bnpo`'s denominator is the micro-batch's own token count, so its weights depend on how the step is cut. The same
# completions in micro-batches of every size that divides them (one process):

# %%
sizes = [b for b in range(H, 0, -1) if H % b == 0]
bnpo = RLW.bnpo_by_microbatch_size(flat_lengths, max_completion_length, sizes)
NUMBERS["bnpo_by_microbatch_size"] = bnpo
same = torch.allclose(RL.flat_step_weights(RL.split_step(mask, rows_per_microbatch, 1), "bnpo"),
                      RL.flat_step_weights(RL.split_step(mask, rows_per_microbatch, H // rows_per_microbatch), "bnpo"))
NUMBERS["processes_equal_accumulation"] = bool(same)
display(Markdown(f"Cut over {H // rows_per_microbatch} processes instead of accumulation steps, `bnpo` gives "
                 + ("the same weights: DDP's division by P and accumulation's by K play one role." if same else
                    "other weights.")))
dg.sig_table([{"B": r["rows_per_microbatch"], "K": r["accumulation_steps"], "w": r["bnpo"],
               "grpo": r["equals_grpo"], "dapo": r["equals_dapo"]} for r in bnpo],
             {"B": "rows per micro-batch B", "K": "accumulation steps K",
              "w": "bnpo: each completion's token weight × N",
              "grpo": "= grpo", "dapo": "= dapo"}, index="B")

# %% [markdown]
# `dapo`'s N counts the *generation batch*. When one feeds several optimiser steps (S > K; here S = 2, K = 1), a token
# weighs S/(N·K), one over the generation batch's average tokens per step, so a step with more tokens weighs more
# (S < K is exercise 3):

# %%
spans = (RLW.generation_batches(flat_lengths, max_completion_length, H // 2, 2, 1) if H % 2 == 0 else [])
NUMBERS["generation_batches"] = spans
if spans:
    display(dg.sig_table(spans, {"step": "optimiser step", "tokens": "its active tokens", "N": "N",
                                 "weight": "TRL's token weight S/(N·K)",
                                 "over_step_token_mean": "over the step's token mean"}, index="step"))

# %% [markdown]
# ## 4. `scale_rewards`: the advantages
#
# A_i = r_i − r̄_g (r̄_g the mean reward of completion i's group), divided by s + 10⁻⁴ unless `scale_rewards` is
# `"none"` (or `False`): s is the group's standard deviation (`"group"` or `True`, the default) or the standard
# deviation of every reward of the generation batch, gathered over all processes (`"batch"`; the mean stays the
# group's). With several reward functions, `multi_objective_aggregation="normalize_then_sum"` bypasses
# `scale_rewards`: each function is normalised per group, then their weighted sum is centred and scaled over the
# batch. The installed lines (`rl_losses.advantages` mirrors the default path; the page stops if one changes):

# %% tags=["hide-input"]
display(Markdown("\n\n".join(RLT.excerpt_markdown(src[k]) for k in
                             ("rewards_gathered", "advantages", "normalize_then_sum", "scale_rewards_bool"))))

# %%
group_std = [float(torch.tensor(g, dtype=torch.float64).std()) for g in rewards]
NUMBERS["group_std"] = group_std
display(Markdown(f"The groups' standard deviations: {dg.sig(group_std)}."))
dg.sig_table([{"completion": c["completion"], "prompt": c["prompt"], "reward": c["reward"],
               **{s: adv[s][i] for s in RL.SCALE_REWARDS}} for i, c in enumerate(completions)],
             {"completion": "completion", "prompt": "prompt", "reward": "reward",
              **{s: f"A, scale_rewards={s!r}" for s in RL.SCALE_REWARDS}}, index="completion")

# %% [markdown]
# A completion's push is A_i Σ_t w_it: the two choices compound.
#
# ## 5. Which `loss_type` for which goal, and where each came from
#
# A short guide (each source is a paper TRL's help cites), then the papers by arXiv month:

# %%
guide, history = RL.guide_rows(), RL.history_rows()
NUMBERS["guide"], NUMBERS["history"] = guide, history
display(dg.sig_table(guide, {"goal": "goal", "setting": "setting", "source": "source"}, index="setting"))
dg.sig_table(history, {"month": "arXiv month", "paper": "paper", "arxiv": "arXiv", "in TRL": "in TRL"},
             index="month")

# %% [markdown]
# ## Exercises
#
# Predict, then open the solution (JupyterLab: click the collapsed cell; HTML: *Solution*): the algebra, its
# numbers from `rl_worked`, checked against TRL or the library.
#
# **Exercise 1 (per-token weights).** One process, one accumulation step, one micro-batch holding two completions of
# 3 and 12 tokens with advantages +1 and −1, `max_completion_length` 16. Give a token's weight under `grpo`, `dapo`
# and `dr_grpo`. Which completion's tokens are pushed harder under each?

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution"]
ex1 = RLW.worked_two_completions([3, 12], [1.0, -1.0], 16)
display(Markdown(ex1.markdown))
ex1_mask = RL.completion_mask([3, 12], 16)
ex1_trl = {lt: RLT.trl_microbatch_weights(ex1_mask, lt, max_completion_length=16,   # TRL's own _compute_loss
                                          num_items_in_batch=15)[:, 0].tolist() for lt in ("grpo", "dapo", "dr_grpo")}
assert all(abs(a - b) < 1e-7 for lt, w in ex1_trl.items() for a, b in zip(ex1.values["weights"][lt], w))

# %% [markdown]
# **Exercise 2 (`scale_rewards`).** Three groups of four completions have rewards [0, 0, 1, 1], [0.4, 0.5, 0.5, 0.6]
# and [1, 1, 1, 1]. Give the advantages under `"none"`, `"group"` and `"batch"`. Which group's gaps does `"group"`
# enlarge the most, and what do the completions of the third group push?

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution"]
ex2_rewards = [0.0, 0.0, 1.0, 1.0, 0.4, 0.5, 0.5, 0.6, 1.0, 1.0, 1.0, 1.0]
ex2 = RLW.worked_advantages(ex2_rewards, 4)
display(Markdown(ex2.markdown))
assert all(abs(a - b) < 1e-12 for s in RL.SCALE_REWARDS
           for a, b in zip(ex2.values["advantages"][s], RL.advantages(ex2_rewards, 4, s).tolist()))

# %% [markdown]
# **Exercise 3 (generation batch against step).** One process, `gradient_accumulation_steps=2` but
# `steps_per_generation=1`, so each optimiser step holds two generation batches; here of 20 and 60 active tokens.
# Under `dapo`, what does a token of each weigh in the step, and what is the step's loss a mean of? What would a
# token weigh with `steps_per_generation=2`?

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution"]
ex3 = RLW.worked_generation_batches([20, 60], 2)
display(Markdown(ex3.markdown))
ex3_trl = [float(RLT.trl_microbatch_weights(RL.completion_mask([n], 60), "dapo", max_completion_length=60,
                                            accumulation_steps=2, steps_per_generation=1,
                                            num_items_in_batch=n)[0, 0]) for n in (20, 60)]
assert all(abs(a - b) < 1e-7 for a, b in zip(ex3.values["weights_s1"], ex3_trl))

# %% [markdown]
# ### Code exercise
#
# The checker (`rl_worked.check_dapo_normaliser`) runs your function on every micro-batch of three steps (one or
# two processes, an odd N, masked tokens) with the tensors TRL passes, sums the micro-batches' gradients, averages
# the processes' as DDP does, and says *correct* or *not yet* with the mistake it recognises.
#
# **Exercise 4 (write the `dapo` normaliser).** `dapo_loss(per_token_loss, mask, num_items_in_batch, num_processes)`
# gets one micro-batch's float32 per-token losses and integer 0/1 mask (rows × positions), the active-token count N
# of the whole step over all processes (an integer tensor) and P. Return the micro-batch's loss so that every
# active token of the step weighs 1/N. The version below divides by the micro-batch's own count: predict what the
# checker says, then fix it.

# %% tags=["show-input"]
def dapo_loss(per_token_loss, mask, num_items_in_batch, num_processes):
    return (per_token_loss * mask).sum() / mask.sum()


print(RLW.check_dapo_normaliser(dapo_loss)["message"])

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution"]
def dapo_loss(per_token_loss, mask, num_items_in_batch, num_processes):
    return (per_token_loss * mask).sum() / (num_items_in_batch / num_processes)   # DDP divides by P again


ex4 = RLW.check_dapo_normaliser(dapo_loss)
print(ex4["message"])
print("TRL's line (it also multiplies by K/S, which is 1 by default):",
      next(t.strip() for _, t in src["normalisers"]["lines"] if "num_items_in_batch" in t and "normalizer =" in t))

# %%
NUMBERS["exercises"] = {"1": ex1.values, "2": {"rewards": ex2_rewards, **ex2.values}, "3": ex3.values, "4": ex4}
dg.save_numbers("01d_rl_normalisation", NUMBERS)
dg.versions()
