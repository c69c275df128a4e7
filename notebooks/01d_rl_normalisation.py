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
# Where practitioners meet page 01's question (which mean, over what?) today: the `loss_type` and `scale_rewards`
# options of TRL's `GRPOTrainer`, read from the installed source and computed on a small batch. One class of about
# 30 minutes after pages 01 and 01b.
#
# > **The answer.** One optimiser step holds R completions from P processes × G accumulation steps; a micro-batch
# > holds N_mb active (unmasked) completion tokens, the step N; completion i has |o_i| of them;
# > L = `max_completion_length`. The table gives the weight of a token of completion i in the step's gradient.
# > `scale_rewards` (default `group`) divides each completion's reward minus its group's mean by the group's
# > standard deviation; `batch` by the whole batch's; `none` (or `False`) not at all.
#
# | `loss_type` | weight of a token | scope of the denominator | length bias |
# |---|---|---|---|
# | `grpo`, `sapo` | 1 / (R · \|o_i\|) | each completion, then the rows | a short completion's tokens weigh more: short answers pushed harder per token, long ones' penalties spread thinner |
# | `bnpo` | 1 / (P · G · N_mb) | the tokens of the local micro-batch | none within a micro-batch; a micro-batch with fewer tokens weighs each more; `grpo` at one row per micro-batch |
# | `dr_grpo` | 1 / (R · L) | a constant: rows × `max_completion_length` | none; every weight falls as L grows |
# | `dapo` (default), `cispo`, `vespo` | 1 / N | the active tokens of the whole step, all processes | none per token; a completion's total weight grows with its length |
# | `luspo` | 1 / R | a completion's tokens summed, then the rows averaged | none per token; the loss grows with the lengths |
#
# Every number is computed by `docgrad.teaching.rl_losses` (tested against TRL's own loss code), shown to three
# significant figures and saved to `figures/01d_rl_normalisation.json`. Other settings:
# `docgrad run 01d -p lengths "[[2, 12], [5, 9]]" -p rewards "[[1.0, 0.0], [0.0, 1.0]]" -p rows_per_microbatch 2`.

# %% tags=["parameters"]
lengths = [[3, 6, 9, 14], [4, 8, 12, 16]]  # active tokens |o_i| of each completion, one list per prompt (its group)
rewards = [[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.8]]  # each completion's reward, in the shape of lengths
max_completion_length = 16  # L: TRL's generation budget per completion
rows_per_microbatch = 4  # B: completions per micro-batch (per_device_train_batch_size)
num_processes = 1  # P: data-parallel processes
scale_rewards = "group"  # the advantages of the worked batch: group, batch or none

# %%
import altair as alt
import pandas as pd
import torch
from IPython.display import Markdown, display

from docgrad import page as dg

ROOT = dg.setup()
torch.set_num_threads(2)
RL = dg.rl_losses
NUMBERS = {"lengths": lengths, "rewards": rewards, "max_completion_length": max_completion_length,
           "rows_per_microbatch": rows_per_microbatch, "num_processes": num_processes, "scale_rewards": scale_rewards}

trl_version = RL.trl_version()
trl_read = RL.trl_loss_types()
assert sorted(set(trl_read["branches"])) == sorted(RL.LOSS_TYPES), (
    f"the installed TRL {trl_version} normalises loss types {sorted(set(trl_read['branches']))}, this page explains "
    f"{sorted(RL.LOSS_TYPES)} (TRL 1.16.0): re-read trl/trainer/grpo_trainer.py and update the page and rl_losses")
trl_read = RL.explained_matches_installed()          # also the config's list, the defaults and the advantage lines
NUMBERS["trl"] = {"version": trl_version, **trl_read}
display(Markdown(f"Computed with TRL {trl_version}: its `GRPOTrainer` normalises the loss types "
                 f"{', '.join(f'`{t}`' for t in trl_read['branches'])} (read from its source; the page stops if the "
                 f"list differs from the {len(RL.LOSS_TYPES)} explained here), default `loss_type="
                 f"\"{trl_read['default']}\"`, `scale_rewards=\"{trl_read['scale_rewards_default']}\"`."))

# %% [markdown]
# ## 1. What `loss_type` decides
#
# GRPO (Group Relative Policy Optimization) samples a *group* of completions for each prompt, scores each with a
# reward, and turns rewards into *advantages* A_i: completion i's reward minus its group's mean reward (§4 covers
# the scaling). It then minimises a sum over the active tokens t of every completion i (prompt and padding are
# masked out by the completion mask m_it, which is 1 on an active token):
#
#     loss = Σ_i Σ_t w_it · l_it
#
# where l_it is the token's loss. At the first update of a generation batch the model still equals the one that
# sampled it (the probability ratio π_θ/π_old is 1), and l_it's gradient is then −A_i ∇log π_θ(o_it) for every
# loss type but `cispo`, whose clamp multiplies it by the constant min(1, ε_max) (`epsilon_high`, which defaults to
# `epsilon` = 0.2; the recommended 5 leaves it 1): the token's log-probability is pushed up by A_i w_it. So the
# *weight* w_it alone decides how hard each token, and each completion, is pushed: that is what `loss_type`
# chooses, with the per-token loss around it (clipping, soft gates). A KL penalty (`beta` > 0; 0 by default) is
# added to l_it and weighed the same way. The weight depends on how TRL cuts a step into pieces:
#
# - a **generation batch** is sampled once and shuffled, then split into `steps_per_generation` = S micro-batches
#   per process (by default S = G, `gradient_accumulation_steps`);
# - a **micro-batch** holds B = `per_device_train_batch_size` rows; each process runs G of them per optimiser step
#   (accumulation), and DDP averages the P processes' gradients: R = P·G·B rows per step;
# - `num_items_in_batch` = N counts the active tokens of the generation batch over all processes.
#
# The installed source, found by its text (the line numbers are read at execution time):

# %% tags=["hide-input"]
src = RL.trl_excerpts()
NUMBERS["source_lines"] = {k: [v["file"], v["first_line"], v["last_line"]] for k, v in src.items()}
display(Markdown("**How a micro-batch's loss is normalised** (`GRPOTrainer._compute_loss`), "
                 + RL.excerpt_markdown(src["normalisers"])))
display(Markdown("**What N counts** (`_generate_and_score_completions`: the completion mask, times the tool mask "
                 "in multi-turn runs, summed and gathered over processes), "
                 + RL.excerpt_markdown(src["num_items_in_batch"])
                 + "\n\n**How a generation batch becomes micro-batches** (`_prepare_inputs`), "
                 + RL.excerpt_markdown(src["micro_batches"])
                 + "\n\n**Why the Trainer does not divide by G again**: the class tells it the loss is already scaled "
                   "for accumulation, " + RL.excerpt_markdown(src["scaled_for_accumulation"])
                 + "\n\n**S = G unless set** (`GRPOConfig.__post_init__`), "
                 + RL.excerpt_markdown(src["steps_per_generation"])))

# %% [markdown]
# Read per branch, a micro-batch's weights are m_it / (|o_i|·B·G) for `grpo` and `sapo` (a mean over each row's
# tokens, a mean over the B rows, divided by G), m_it / (N_mb·G) for `bnpo`, m_it / (B·L·G) for `dr_grpo`,
# m_it / ((N/P)·(G/S)) for `dapo`, `cispo` and `vespo`, and m_it / (B·G) for `luspo` (a sum over the row's tokens,
# a mean over rows). Accumulation sums the G micro-batches and DDP divides by P, which gives the answer box's
# column (in evaluation the factors G and G/S are 1). A row whose every token is masked (e.g. a truncated
# completion with `mask_truncated_completions`) still counts in B under `grpo`, `sapo`, `dr_grpo` and `luspo`.

# %% [markdown]
# ## 2. A worked batch
#
# The parameters' prompts and completions, dealt in order into micro-batches of B rows (TRL shuffles first; the
# order is kept here: with the defaults each micro-batch is one prompt's group), with the advantages of `scale_rewards`:

# %%
n_gen = len(lengths[0])
assert all(len(g) == n_gen for g in lengths) and [len(g) for g in rewards] == [len(g) for g in lengths], \
    f"lengths and rewards must be groups of equal size, got {lengths} and {rewards}"
flat_lengths = [v for g in lengths for v in g]
flat_rewards = [v for g in rewards for v in g]
adv = {s: [float(a) for a in RL.advantages(flat_rewards, n_gen, s)] for s in RL.SCALE_REWARDS}
mask = RL.completion_mask(flat_lengths, max_completion_length)
masks = RL.split_step(mask, rows_per_microbatch, num_processes)
G = len(masks[0])
R, N = len(flat_lengths), int(mask.sum())
completions = [{"completion": f"{i + 1}", "prompt": i // n_gen + 1, "process": i // (G * rows_per_microbatch) + 1,
                "micro-batch": (i // rows_per_microbatch) % G + 1, "length": n, "reward": r,
                **{f"A ({s})": adv[s][i] for s in RL.SCALE_REWARDS}}
               for i, (n, r) in enumerate(zip(flat_lengths, flat_rewards))]
NUMBERS["step"] = {"R": R, "N": N, "G": G, "P": num_processes, "B": rows_per_microbatch, "advantages": adv}
display(Markdown(f"R = {R} completions, N = {N} active tokens, P = {num_processes} process(es) × G = {G} "
                 f"micro-batch(es) of B = {rows_per_microbatch} rows, L = {max_completion_length}."))
dg.sig_table(completions, index="completion")

# %% [markdown]
# Each completion's weights under every normaliser, from `rl_losses.step_weights`: first a token's weight × N (1 is
# the step's token mean), then the completion's total weight Σ_t w_it × R (1 is an equal share per completion):

# %%
scale = RL.normalise_scale_rewards(scale_rewards)         # True / False as GRPOConfig maps them
A = adv[scale]
fam = RL.family_table(flat_lengths, A, max_completion_length=max_completion_length,
                      rows_per_microbatch=rows_per_microbatch, num_processes=num_processes)
NUMBERS["families"] = fam
for key in ("per_token_x_N", "total_x_R"):
    display(dg.sig_table([{"completion": c["completion"], "length": c["length"],
                           **{f["loss_types"]: f[key][i] for f in fam}} for i, c in enumerate(completions)],
                         index="completion").rename_axis(
        "token weight × N" if key == "per_token_x_N" else "total weight × R", axis=1))

# %% [markdown]
# Per normaliser: the per-token weight of the shortest completion over the longest's (the length bias), whether a
# token's weight changes when *another* completion's length does (the scope), and the loss at ratio 1,
# Σ_i A_i Σ_t w_it with the sign flipped:

# %%
summary = [{"loss types": f["loss_types"], "normaliser": f["meaning"], "short/long": f["short_over_long_per_token"],
            "depends": f["depends_on_other_lengths"], "loss": f["loss"]} for f in fam]
dg.sig_table(summary, {"loss types": "loss types", "normaliser": "normaliser",
                       "short/long": "token weight, shortest / longest", "depends": "depends on other lengths",
                       "loss": "loss at ratio 1"}, index="loss types")

# %% tags=["hide-input"]
by = {f["family"]: f for f in fam}
seq, glob = by["sequence_mean"], by["global_token_mean"]
display(Markdown(
    f"Under `grpo` a token of the {min(flat_lengths)}-token completion weighs "
    f"{dg.sig(seq['short_over_long_per_token'])} "
    f"times one of the {max(flat_lengths)}-token completion, while every completion's total is the same; under `dapo` "
    f"every token weighs 1/N and the {max(flat_lengths)}-token completion's total is "
    f"{dg.sig(max(glob['total_x_R']) / min(glob['total_x_R']))} times the {min(flat_lengths)}-token one's. "
    f"The loss at ratio 1 is {dg.sig(seq['loss'])} under `grpo` (in each group the advantages sum to zero"
    + (" and" if scale != "batch" else ", also under `batch` scaling, and") + " every completion weighs 1/R) "
    f"but {dg.sig(glob['loss'])} under `dapo`: a token-weighted loss is "
    + ("positive when the longer completions have the lower advantages." if glob["loss"] > 0 else
       "negative here: the longer completions have the higher advantages." if glob["loss"] < 0 else
       "zero here: lengths and advantages are unrelated.")))

# %%
fig_rows = [{"loss types": f["loss_types"], "completion": i + 1, "length": flat_lengths[i],
             "micro-batch": f"micro-batch {completions[i]['micro-batch']}, process {completions[i]['process']}",
             "weight": f["per_token_x_N"][i]} for f in fam for i in range(R)]
order = [f["loss_types"] for f in sorted(fam, key=lambda f: -max(f["per_token_x_N"]))]
base = alt.Chart(pd.DataFrame(fig_rows)).encode(
    x=alt.X("length:Q", title="completion length |o_i| (active tokens)"),
    y=alt.Y("weight:Q", scale=alt.Scale(type="log"), title="weight of one token × N (log scale)"),
    color=alt.Color("loss types:N", sort=order, title="loss_type"),
    detail="micro-batch:N",
    tooltip=["loss types", "completion", "length", "micro-batch", alt.Tooltip("weight:Q", format=".3g")])
weight_chart = (base.mark_line() + base.mark_point(filled=True, size=70).encode(shape=alt.Shape(
    "micro-batch:N", title=None))).properties(width=460, height=280, title=alt.Title(
        "Weight of one token in a GRPOTrainer step, by completion length",
        subtitle=f"TRL {trl_version}; {R} completions, {N} tokens (N); micro-batches of {rows_per_microbatch} rows; "
                 f"1 = the step's token mean 1/N"))
dg.save_chart(weight_chart, "01d_weight_by_length")

# %% [markdown]
# ### The same weights from TRL's own code
#
# `rl_losses.trl_microbatch_weights` runs the installed `GRPOTrainer._compute_loss` itself on each micro-batch's
# completion mask, with no model: a stub trainer hands it log-probabilities of 0 that carry a gradient, old
# log-probabilities equal to them (ratio 1), advantages of 1, no KL term and no entropy bonus, so each token's
# gradient is −w_it. Against the library's weights for every `loss_type`, on every micro-batch of the step:

# %%
trl_rows = []
for lt in RL.LOSS_TYPES:
    diffs = [float((RL.trl_microbatch_weights(m, lt, max_completion_length=max_completion_length, accumulation_steps=G,
                                              num_processes=num_processes, num_items_in_batch=N)
                    - RL.microbatch_weights(m, lt, max_completion_length=max_completion_length,
                                            accumulation_steps=G, num_processes=num_processes,
                                            num_items_in_batch=N)).abs().max())
             for p in masks for m in p]
    trl_rows.append({"loss_type": lt, "normaliser": RL.FAMILIES[RL.LOSS_TYPES[lt].family], "max_abs_diff": max(diffs)})
NUMBERS["trl_check"] = trl_rows
assert all(r["max_abs_diff"] < 1e-7 for r in trl_rows), f"TRL's _compute_loss weighs tokens otherwise: {trl_rows}"
dg.sig_table(trl_rows, {"loss_type": "loss_type", "normaliser": "normaliser",
                        "max_abs_diff": "largest |w_TRL − w_library|"}, index="loss_type")

# %% [markdown]
# ## 3. Scope: local micro-batch, accumulated step, generation batch
#
# `bnpo`'s denominator is the micro-batch's own token count, so its weights depend on how the step is cut. The same
# completions in micro-batches of every size that divides them (one process):

# %%
sizes = [b for b in range(R, 0, -1) if R % b == 0]
bnpo = RL.bnpo_by_microbatch_size(flat_lengths, max_completion_length, sizes)
NUMBERS["bnpo_by_microbatch_size"] = bnpo
dg.sig_table([{"B": r["rows_per_microbatch"], "G": r["accumulation_steps"], "w": r["bnpo"],
               "grpo": r["equals_grpo"], "dapo": r["equals_dapo"]} for r in bnpo],
             {"B": "rows per micro-batch B", "G": "accumulation steps G",
              "w": "bnpo: each completion's token weight × N",
              "grpo": "= grpo", "dapo": "= dapo"}, index="B")

# %% tags=["hide-input"]
same = torch.allclose(RL.flat_step_weights(RL.split_step(mask, rows_per_microbatch, 1), "bnpo"),
                      RL.flat_step_weights(RL.split_step(mask, rows_per_microbatch, R // rows_per_microbatch), "bnpo"))
NUMBERS["processes_equal_accumulation"] = bool(same)
display(Markdown(
    f"With one micro-batch for the whole step `bnpo` is `dapo`; at one row per micro-batch it is `grpo`; in between "
    f"it is neither. Cutting the step across processes instead of accumulation steps (micro-batches of "
    f"{rows_per_microbatch} rows on {R // rows_per_microbatch} processes × 1 step, against 1 process × "
    f"{R // rows_per_microbatch} steps) gives " + ("the same weights for `bnpo`" if same else "other weights")
    + ": DDP's division by P and accumulation's by G play the same role."))

# %% [markdown]
# `dapo` divides by N/P·G/S, where N counts the *generation batch*. When one generation batch feeds several optimiser
# steps (S > G, e.g. `steps_per_generation` = 2 with G = 1), each step's tokens weigh S/(N·G): the generation batch's
# average tokens per step, not the step's own count. Each step is then a token mean scaled by its token count over
# that average:

# %%
spans = RL.generation_spans_steps(flat_lengths, max_completion_length, R // 2, 2) if R % 2 == 0 else []
NUMBERS["generation_spans_steps"] = spans
if spans:
    display(dg.sig_table(spans, {"step": "optimiser step", "tokens": "its active tokens",
                                 "weight": "TRL's token weight S/N",
                                 "step_token_mean": "the step's 1/N_step", "scale": "ratio (the step's scale)"},
                         index="step"))

# %% [markdown]
# ## 4. `scale_rewards`: the advantages
#
# The advantage is A_i = r_i − r̄_g (r̄_g the mean reward of completion i's group), divided by s + 10⁻⁴ unless
# `scale_rewards` is `"none"`: s is the group's standard deviation (`"group"`, the default) or the whole batch's
# (`"batch"`; the mean stays the group's). `True` and `False` mean `"group"` and `"none"`. The installed lines
# (`rl_losses.advantages` mirrors them, and the page stops if one changes):

# %% tags=["hide-input"]
display(Markdown(RL.excerpt_markdown(src["advantages"]) + "\n\n" + RL.excerpt_markdown(src["scale_rewards_bool"])))

# %%
group_std = [float(torch.tensor(g, dtype=torch.float64).std()) for g in rewards]
NUMBERS["group_std"] = group_std
dg.sig_table([{"completion": c["completion"], "prompt": c["prompt"], "reward": c["reward"],
               **{s: adv[s][i] for s in RL.SCALE_REWARDS}} for i, c in enumerate(completions)],
             {"completion": "completion", "prompt": "prompt", "reward": "reward",
              **{s: f"A, scale_rewards={s!r}" for s in RL.SCALE_REWARDS}}, index="completion")

# %% tags=["hide-input"]
display(Markdown(
    f"The groups' standard deviations are {dg.sig(group_std)}. Under `group` every group with any spread gets "
    "advantages of about unit size, so a group whose rewards barely differ has its small gaps blown up to full "
    "pushes (the Dr. GRPO paper's *question-level difficulty bias*, the reason it recommends `none`, paired with "
    "`dr_grpo`); `batch` and `none` keep the groups' gaps in proportion. The advantage multiplies every weight of "
    "§2: a completion's push is A_i Σ_t w_it, so the two choices compound."))

# %% [markdown]
# ## Exercises
#
# Predict, then open the solution (JupyterLab: click the collapsed cell; HTML: *Solution*). Each shows the
# algebra (numbers filled in by `docgrad.teaching.rl_losses`) and a line checking it against the library.
#
# **Exercise 1 (per-token weights).** One process, one accumulation step, one micro-batch holding two completions of
# 3 and 12 tokens with advantages +1 and −1, `max_completion_length` 16. Give a token's weight under `grpo`, `dapo`
# and `dr_grpo`. Which completion's tokens are pushed harder under each?

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution"]
ex1 = RL.worked_two_completions([3, 12], [1.0, -1.0], 16)
display(Markdown(ex1.markdown))
ex1_mask = RL.completion_mask([3, 12], 16)
ex1_trl = {lt: RL.trl_microbatch_weights(ex1_mask, lt, max_completion_length=16,   # TRL's own _compute_loss
                                         num_items_in_batch=15)[:, 0].tolist() for lt in ("grpo", "dapo", "dr_grpo")}
assert all(abs(a - b) < 1e-7 for lt, w in ex1_trl.items() for a, b in zip(ex1.values["weights"][lt], w))

# %% [markdown]
# **Exercise 2 (`scale_rewards`).** Two groups of four completions have rewards [1, 0, 0, 0] and [1, 1, 1, 0.8].
# Give the advantages under `"none"`, `"group"` and `"batch"`. Which group's gaps does `"group"` enlarge?

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution"]
ex2_rewards = [1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.8]
ex2 = RL.worked_advantages(ex2_rewards, 4)
display(Markdown(ex2.markdown))
assert all(abs(a - b) < 1e-12 for s in RL.SCALE_REWARDS
           for a, b in zip(ex2.values["advantages"][s], RL.advantages(ex2_rewards, 4, s).tolist()))

# %% [markdown]
# **Exercise 3 (scope).** TRL's docstring says that with `per_device_train_batch_size=1` `bnpo` "is equivalent to
# the GRPO loss". Why? And for which cut of the step is `bnpo` the same as `dapo`?

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution"]
ex3_lengths = [3, 12, 5, 7]
ex3 = {r["rows_per_microbatch"]: r for r in RL.bnpo_by_microbatch_size(ex3_lengths, 16, [len(ex3_lengths), 1])}
display(Markdown(
    "With one row per micro-batch the micro-batch's token count N_mb is that row's |o_i|, and B = 1, so bnpo's "
    "1/(N_mb·G·P) is grpo's 1/(|o_i|·R) (R = G·P). With one micro-batch for the whole step (one process, G = 1), "
    f"N_mb is N and bnpo is dapo. Computed on completions of {ex3_lengths} tokens: one row per micro-batch, "
    f"bnpo = grpo is {ex3[1]['equals_grpo']}; all {len(ex3_lengths)} in one micro-batch, bnpo = dapo is "
    f"{ex3[len(ex3_lengths)]['equals_dapo']}."))
assert ex3[1]["equals_grpo"] and ex3[len(ex3_lengths)]["equals_dapo"] and not ex3[len(ex3_lengths)]["equals_grpo"]

# %% [markdown]
# ### Code exercise
#
# The checker (`rl_losses.check_dapo_normaliser`) runs your function on every micro-batch of three steps (one or
# two processes, two or three accumulation steps, rows of different lengths, a masked tool-output span, a
# truncated row masked out), sums the micro-batches' gradients, averages the processes' as DDP does, and says
# *correct* or *not yet* with what the token weights look like.
#
# **Exercise 4 (write the `dapo` normaliser).** `dapo_loss(per_token_loss, mask, num_items_in_batch, num_processes)`
# gets one micro-batch's per-token losses and 0/1 mask (rows × positions), the active-token count N of the whole
# step over all processes (a tensor) and P. Return the micro-batch's loss so that every active token of the step
# weighs 1/N. The version below divides by the micro-batch's own count: predict what the checker says, then fix it.

# %% tags=["show-input"]
def dapo_loss(per_token_loss, mask, num_items_in_batch, num_processes):
    return (per_token_loss * mask).sum() / mask.sum()


print(RL.check_dapo_normaliser(dapo_loss)["message"])

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution"]
def dapo_loss(per_token_loss, mask, num_items_in_batch, num_processes):
    return (per_token_loss * mask).sum() / (num_items_in_batch / num_processes)   # DDP divides by P again


ex4 = RL.check_dapo_normaliser(dapo_loss)
print(ex4["message"])
print("TRL's line (it also multiplies by G/S, which is 1 by default):",
      next(t.strip() for _, t in src["normalisers"]["lines"] if "num_items_in_batch" in t and "normalizer =" in t))

# %%
NUMBERS["exercises"] = {"1": ex1.values, "2": {"rewards": ex2_rewards, **ex2.values},
                        "3": {"lengths": ex3_lengths, **{str(k): v for k, v in ex3.items()}}, "4": ex4}
dg.save_numbers("01d_rl_normalisation", NUMBERS)
dg.versions()
