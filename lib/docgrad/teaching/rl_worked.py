"""Page 01d's worked batch and exercises: the tables computed on the worked batch (weights and length bias per
family, each completion's total for the figure, bnpo by micro-batch size, dapo across generation batches), the
worked solutions, and the checker of the code exercise (write the `dapo` normaliser).

`check_dapo_normaliser` runs a student's `dapo_loss` on every micro-batch of every process of a few steps with the
tensors TRL hands `_compute_loss` (float32 per-token losses, an integer mask, an integer count N), reads each
token's weight in the step off autograd (accumulation sums the micro-batches, DDP averages the processes) and says
*correct* when every active token weighs 1/N and every masked one 0, within float32's precision. Otherwise it names
the mistake made: it runs the common wrong normalisers (MISTAKES) on the same scenario and reports the one whose
weights the student's equal, or describes the weights when none does.
"""

from __future__ import annotations

import torch

from docgrad.teaching.rl_losses import (FAMILIES, LOSS_TYPES, SCALE_REWARDS, RLLossError, advantages,
                                        completion_mask, family_members, flat_step_weights, gradient_factor,
                                        microbatch_weights, positive_int, settings_for, split_step)
from docgrad.teaching.worked import Worked, sig

# --------------------------------------------------------------------------------------------------
# The worked batch: weights, pushes and length bias per family; scope
# --------------------------------------------------------------------------------------------------

def family_table(lengths, adv, *, max_completion_length: int, rows_per_microbatch: int,
                 num_processes: int = 1) -> list[dict]:
    """Per family, on one step of completions of `lengths` (dealt as split_step does) with advantages `adv`:
    each completion's per-token weight × N (1 = the step's token mean), its total weight × H (1 = every completion
    equal), its push A_i × total weight × H, the per-token weight of the shortest over the longest completion, and
    whether a token's weight changes when another completion's length does (the longest one token shorter, or
    longer if it has one token)."""
    n = [positive_int("lengths", v) for v in lengths]
    a = torch.as_tensor(adv, dtype=torch.float64).reshape(-1)
    if a.numel() != len(n):
        raise RLLossError(f"one advantage per completion: {a.numel()} for {len(n)} completions")
    L = positive_int("max_completion_length", max_completion_length)
    j = n.index(max(n))
    if n[j] == 1 and L == 1:
        raise RLLossError("every completion has one token and max_completion_length is 1: no length to vary")
    varied = [v - 1 if i == j and v > 1 else v + 1 if i == j else v for i, v in enumerate(n)]

    def weights(lens, name):
        masks = split_step(completion_mask(lens, L), rows_per_microbatch, num_processes)
        return flat_step_weights(masks, name, max_completion_length=L)

    N, R = float(sum(n)), len(n)
    short = n.index(min(n))
    rows = []
    for fam in FAMILIES:
        w, w_varied = weights(n, family_members(fam)[0]), weights(varied, family_members(fam)[0])
        per_token = w[:, 0]                                   # position 0 is active in every row
        total = w.sum(1)
        others = [i for i in range(R) if i != j]
        rows.append({"family": fam, "loss_types": ", ".join(family_members(fam)), "meaning": FAMILIES[fam],
                     "per_token_x_N": [float(v) * N for v in per_token],
                     "total_x_H": [float(t) * R for t in total],
                     "push": [float(ai * t) * R for ai, t in zip(a, total)],
                     "short_over_long_per_token": float(per_token[short] / per_token[j]),
                     "depends_on_other_lengths": bool((w_varied[others, 0] - per_token[others]).abs().max() > 1e-15)})
    return rows


def completion_totals(lengths, *, max_completion_length: int, rows_per_microbatch: int, num_processes: int = 1,
                      page_settings: bool = False) -> list[dict]:
    """The figure's data: per loss type and completion, the completion's total push per unit advantage
    c · sum_t w_it, × H (1 = an equal share of the step), at TRL's defaults or the page's settings."""
    n = [positive_int("lengths", v) for v in lengths]
    L = positive_int("max_completion_length", max_completion_length)
    masks = split_step(completion_mask(n, L), rows_per_microbatch, num_processes)
    B, K = positive_int("rows_per_microbatch", rows_per_microbatch), len(masks[0])
    out = []
    for name in LOSS_TYPES:
        c = gradient_factor(name, settings_for(name, page_settings))
        total = flat_step_weights(masks, name, max_completion_length=L).sum(1) * c * len(n)
        out += [{"loss_type": name, "completion": i + 1, "length": v, "micro-batch": (i // B) % K + 1,
                 "process": i // (B * K) + 1, "total_x_H": float(total[i])} for i, v in enumerate(n)]
    return out


def bnpo_by_microbatch_size(lengths, max_completion_length: int, sizes) -> list[dict]:
    """bnpo's per-token step weights × N (one process) for each micro-batch size B in `sizes`, beside grpo's and
    dapo's: bnpo is dapo when one micro-batch holds the whole step and grpo at B = 1."""
    n = [positive_int("lengths", v) for v in lengths]
    mask = completion_mask(n, max_completion_length)
    N = float(mask.sum())
    out = []
    for B in sizes:
        masks = split_step(mask, B, 1)
        per = {lt: [float(x) * N for x in flat_step_weights(masks, lt)[:, 0]] for lt in ("bnpo", "grpo", "dapo")}
        out.append({"rows_per_microbatch": int(B), "accumulation_steps": len(masks[0]), "bnpo": per["bnpo"],
                    "equals_grpo": bool(torch.allclose(torch.tensor(per["bnpo"]), torch.tensor(per["grpo"]))),
                    "equals_dapo": bool(torch.allclose(torch.tensor(per["bnpo"]), torch.tensor(per["dapo"])))})
    return out


def generation_batches(lengths, max_completion_length: int, rows_per_microbatch: int, steps_per_generation: int,
                       accumulation_steps: int) -> list[dict]:
    """dapo when the micro-batches of `lengths` (one process, B rows each, in order) are cut into generation batches
    of S micro-batches and optimiser steps of K: per micro-batch, its optimiser step and generation batch, its
    tokens, the N of its generation batch, TRL's token weight S / (N K) and that weight over its step's token mean
    1 / N_step (1 when S = K). S > K: one generation batch feeds S / K steps, each weighed by its tokens over the
    generation batch's average per step; S < K: one step holds K / S generation batches, each a token mean of its
    own."""
    S = positive_int("steps_per_generation", steps_per_generation)
    K = positive_int("accumulation_steps", accumulation_steps)
    micro = split_step(completion_mask(lengths, max_completion_length), rows_per_microbatch, 1)[0]
    if len(micro) % S or len(micro) % K:
        raise RLLossError(f"{len(micro)} micro-batches of {rows_per_microbatch} rows do not split into generation "
                          f"batches of S = {S} and optimiser steps of K = {K}")
    gen_tokens = [float(sum(m.sum() for m in micro[g:g + S])) for g in range(0, len(micro), S)]
    step_tokens = [float(sum(m.sum() for m in micro[s:s + K])) for s in range(0, len(micro), K)]
    out = []
    for j, m in enumerate(micro):
        N = gen_tokens[j // S]
        w = float(microbatch_weights(m, "dapo", accumulation_steps=K, steps_per_generation=S,
                                     num_items_in_batch=N)[0, 0])
        out.append({"micro_batch": j + 1, "step": j // K + 1, "generation_batch": j // S + 1,
                    "tokens": int(m.sum()), "N": int(N), "weight": w, "step_tokens": int(step_tokens[j // K]),
                    "over_step_token_mean": w * step_tokens[j // K]})
    return out


# --------------------------------------------------------------------------------------------------
# The code exercise: write the dapo normaliser
# --------------------------------------------------------------------------------------------------

CHECK_RTOL = 1e-5        # relative weight error a correct answer stays below: float32 keeps about 7 digits

# (what, processes: each a list of micro-batches, each a list of rows; a row is its length, or a list of 0/1)
DAPO_SCENARIOS = (
    ("one process, two accumulation steps, right padding", [[[3, 7], [11, 2]]]),
    ("two processes × two accumulation steps, N odd, each process padded to its own width, a tool-output span "
     "masked inside a row, a truncated row masked out",
     [[[5, [1, 1, 0, 0, 1, 1, 1, 1]], [2, 9]], [[[1, 1, 1, 0, 0, 0, 1, 1, 1, 1], 5], [[0] * 6, 11]]]),
    ("one process, three accumulation steps of one row each", [[[1], [9], [4]]]),
)

DIVIDE_BY_N = "divide the masked sum by num_items_in_batch / num_processes"
# the common wrong normalisers, each as a student would write it, and what the checker says when it is made
MISTAKES = (
    (lambda l, m, n, p: (l * m).sum() / m.sum(),
     "the denominator is the micro-batch's own token count (TRL's bnpo), so a micro-batch of short completions "
     f"weighs its tokens more: {DIVIDE_BY_N}, the count of the whole step"),
    (lambda l, m, n, p: ((l * m).sum(-1) / m.sum(-1).clamp(min=1)).mean(),
     "each completion is averaged over its own tokens first (TRL's grpo), so a short completion's tokens weigh "
     f"more: sum the tokens, do not average each row, and {DIVIDE_BY_N}"),
    (lambda l, m, n, p: (l * m).mean(),
     "the denominator counts every position of the micro-batch, padding included (.mean() or mask.numel(), "
     f"like dr_grpo's rows × max_completion_length): {DIVIDE_BY_N}"),
    (lambda l, m, n, p: (l * m).sum(-1).mean(),
     "each completion's tokens are summed, then the rows averaged (TRL's luspo): the denominator is the number of "
     f"rows, not of tokens; {DIVIDE_BY_N}"),
    (lambda l, m, n, p: (l * m).sum() / n,
     "every process divides by N, and DDP then averages the processes' gradients, so each token weighs 1/(N·P): "
     "each process must divide by num_items_in_batch / num_processes"),
    (lambda l, m, n, p: (l * m).sum() / (n * p),
     "the denominator is N × P; DDP's average over processes divides by P once more: each process must divide by "
     "num_items_in_batch / num_processes"),
    (lambda l, m, n, p: (l * m).sum() / (n // p),
     "integer division: num_items_in_batch // num_processes rounds N / P down when N is not a multiple of P (the "
     "count is an integer tensor, as in TRL): divide with /"),
)


def scenario_masks(procs) -> list:
    """masks[p][k] (int64, as TRL's completion_mask) of a scenario; each process padded to its own longest row."""
    out = []
    for proc in procs:
        width = max(r if isinstance(r, int) else len(r) for mb in proc for r in mb)
        out.append([])
        for rows in proc:
            m = torch.zeros(len(rows), width, dtype=torch.long)
            for i, r in enumerate(rows):
                if isinstance(r, int):
                    m[i, :r] = 1
                else:
                    m[i, :len(r)] = torch.tensor(r)
            out[-1].append(m)
    return out


def step_weights_of(dapo_loss, masks, seed: int = 0):
    """Each token's weight in the step under `dapo_loss` (float64, masks' layout), or a message saying why it could
    not be read: the call raised, did not return a 0-dim tensor, or cut the graph to per_token_loss."""
    P = len(masks)
    N = torch.tensor(int(sum(int(m.sum()) for p in masks for m in p)))
    gen = torch.Generator().manual_seed(seed)
    weights = []
    for p in masks:
        weights.append([])
        for m in p:
            loss_in = torch.rand(m.shape, generator=gen, dtype=torch.float32).requires_grad_(True)
            try:
                out = dapo_loss(loss_in, m.clone(), N.clone(), P)
            except Exception as e:   # noqa: BLE001 - the student's code may raise anything; report it
                return f"dapo_loss raised {type(e).__name__}: {e}"
            if not isinstance(out, torch.Tensor) or out.dim() != 0:
                got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
                return f"return one number as a 0-dim tensor, got {got}"
            if not out.requires_grad:
                return "the loss does not depend on per_token_loss through torch operations (no .item(), no float())"
            (g,) = torch.autograd.grad(out, loss_in, allow_unused=True)
            weights[-1].append((torch.zeros(m.shape) if g is None else g.detach()).to(torch.float64) / P)
    return weights


def _flat(x) -> torch.Tensor:
    return torch.cat([t.reshape(-1) for p in x for t in p])


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return bool(torch.allclose(a, b, rtol=CHECK_RTOL, atol=CHECK_RTOL * float(b.abs().max().clamp(min=1e-30))))


def diagnose(w, masks) -> str | None:
    """None when every active token weighs 1/N and every masked one 0 (float32 precision); else the mistake made."""
    N = float(sum(m.sum() for p in masks for m in p))
    flat_w, flat_m = _flat(w), _flat(masks).to(torch.float64)
    active = flat_m > 0
    if (flat_w[~active].abs() > CHECK_RTOL / N).any():
        return ("tokens with mask 0 get weight (padding or masked tool output counts): multiply per_token_loss by "
                "the mask before summing")
    if _close(flat_w, flat_m / N):
        return None
    for mistake, hint in MISTAKES:
        theirs = step_weights_of(mistake, masks)
        if not isinstance(theirs, str) and _close(flat_w, _flat(theirs)):
            return hint
    rel = flat_w[active] * N
    if _close(rel, rel[0].expand_as(rel)):
        c = float(rel[0])
        return (f"every active token weighs {sig(c) if sig(c) != '1' else f'{c:.7g}'} × 1/N instead of 1/N: off by a "
                "constant factor (the weights must sum to 1 over the step's active tokens)")
    per_mb = [x[m > 0] * N for p_w, p_m in zip(w, masks) for x, m in zip(p_w, p_m) if m.sum() > 0]
    if all(_close(v, v[0].expand_as(v)) for v in per_mb):
        return ("the tokens of one micro-batch share a weight, but it differs between micro-batches (× N: "
                + ", ".join(sig(float(v[0])) for v in per_mb) + f"): the denominator changes with the micro-batch; "
                f"{DIVIDE_BY_N}")
    return (f"active tokens weigh from {sig(float(rel.min()))} to {sig(float(rel.max()))} × 1/N; every one should "
            "weigh exactly 1/N")


def check_dapo_normaliser(dapo_loss) -> dict:
    """Checker of page 01d's code exercise. `dapo_loss(per_token_loss, mask, num_items_in_batch, num_processes)`
    returns one micro-batch's loss (a 0-dim tensor) from its (B, T) float32 per-token losses and integer 0/1 mask,
    the active-token count N of the whole step over all processes (an integer 0-dim tensor) and the number of
    processes P. Each scenario runs it on every micro-batch of every process; accumulation sums the micro-batches'
    gradients and DDP averages the processes'. Correct: every active token's weight d(step loss)/d l_it is 1/N, every
    masked token's 0, to a relative CHECK_RTOL."""
    for s, (what, procs) in enumerate(DAPO_SCENARIOS, 1):
        masks = scenario_masks(procs)
        N = int(sum(int(m.sum()) for p in masks for m in p))
        where = f"scenario {s} ({what}, N = {N}, P = {len(masks)})"
        w = step_weights_of(dapo_loss, masks, seed=s)
        problem = w if isinstance(w, str) else diagnose(w, masks)
        if problem is not None:
            return {"passed": False, "scenario": s, "message": f"not yet: {where}: {problem}"}
    return {"passed": True, "scenario": None,
            "message": f"correct: in all {len(DAPO_SCENARIOS)} scenarios (1 or 2 processes, 2 or 3 accumulation steps, "
                       "N odd, masked tokens) every active token weighs 1/N in the step and every masked token 0"}


# --------------------------------------------------------------------------------------------------
# Worked solutions
# --------------------------------------------------------------------------------------------------

def worked_two_completions(lengths, adv, max_completion_length: int) -> Worked:
    """Two (or more) completions in one micro-batch, one process, one accumulation step (H = B, K = P = 1): the
    per-token weights under grpo, dapo and dr_grpo and which completion's tokens are pushed harder."""
    n = [positive_int("lengths", v) for v in lengths]
    a = [float(v) for v in adv]
    if len(a) != len(n):
        raise RLLossError(f"one advantage per completion: {len(a)} for {len(n)}")
    L = positive_int("max_completion_length", max_completion_length)
    R, N = len(n), sum(n)
    mask = completion_mask(n, L)
    w = {lt: [float(x) for x in microbatch_weights(mask, lt, max_completion_length=L, num_items_in_batch=N)[:, 0]]
         for lt in ("grpo", "dapo", "dr_grpo")}
    push = {lt: [ai * wi for ai, wi in zip(a, w[lt])] for lt in w}
    md = (rf"One micro-batch holds the whole step ($H = {R}$ rows, $N = {' + '.join(map(str, n))} = {N}$ tokens, "
          rf"$L = {L}$)."
          "\n\n"
          rf"- grpo: $w_i = 1/(|o_i|\,H)$ = " + ", ".join(f"$1/({v}\\cdot{R}) = {sig(1 / (v * R))}$" for v in n)
          + rf"; a token of the {min(n)}-token completion weighs {sig(max(n) / min(n))} times one of the "
            rf"{max(n)}-token one."
          "\n"
          rf"- dapo: $w = 1/N = {sig(1 / N)}$ for every token."
          "\n"
          rf"- dr_grpo: $w = 1/(H\,L) = 1/({R}\cdot{L}) = {sig(1 / (R * L))}$ for every token."
          "\n\n"
          "The push on a token is $A_i w_i$: under grpo " + ", ".join(
              f"{sig(p)} for the {v}-token completion" for p, v in zip(push["grpo"], n))
          + "; the short completion is pushed harder per token, and the long one's penalty is spread thinner. "
            "Under dapo and dr_grpo every token's push is its advantage times one shared weight.")
    return Worked(md, {"weights": w, "push": push})


def worked_advantages(rewards, num_generations: int) -> Worked:
    """The advantages of `rewards` (groups of num_generations) under each scale_rewards, with each group's std."""
    r = torch.as_tensor(rewards, dtype=torch.float64).reshape(-1)
    adv = {s: [float(x) for x in advantages(r, num_generations, s)] for s in SCALE_REWARDS}
    groups = r.view(-1, positive_int("num_generations", num_generations))
    stds = [float(g.std(correction=1)) for g in groups]
    means = [float(g.mean()) for g in groups]
    batch_std = float(r.std(correction=1))
    lines = [rf"Group means {sig(means)}, group standard deviations {sig(stds)} (Bessel-corrected), the "
             rf"batch's {sig(batch_std)}; $\varepsilon = 10^{{-4}}$."
             "\n",
             r"- `none`: $A_i = r_i - \bar r_g$ = " + f"{sig(adv['none'])}.",
             r"- `group`: $A_i = (r_i - \bar r_g)/(s_g + \varepsilon)$ = " + f"{sig(adv['group'])}.",
             r"- `batch`: $A_i = (r_i - \bar r_g)/(s + \varepsilon)$ = " + f"{sig(adv['batch'])}."]
    spread = [g for g in range(len(stds)) if stds[g] > 0]
    k = len(r) // len(stds)

    def largest(scale: str, g: int) -> float:
        return max(abs(x) for x in adv[scale][g * k:(g + 1) * k])

    if len(spread) > 1:
        small, big = min(spread, key=lambda g: stds[g]), max(spread, key=lambda g: stds[g])
        lines.append(f"\nUnder `group` the group with the smallest spread (group {small + 1}, s = {sig(stds[small])}) "
                     f"is enlarged the most: its gaps of up to {sig(largest('none', small))} become "
                     f"{sig(largest('group', small))}, against {sig(largest('group', big))} for group {big + 1}'s gaps "
                     f"of up to {sig(largest('none', big))}. A small reward gap becomes a full-size push (the "
                     "question-level difficulty bias the Dr. GRPO paper points out); `batch` and `none` keep the "
                     "groups' gaps in proportion.")
    flat = [g + 1 for g in range(len(stds)) if stds[g] == 0]
    if flat:
        lines.append(f"Group{'s' if len(flat) > 1 else ''} {', '.join(map(str, flat))} "
                     f"ha{'ve' if len(flat) > 1 else 's'} equal rewards: every advantage is 0 under all three "
                     "(0 / (0 + ε)), so those completions push nothing.")
    return Worked("\n".join(lines), {"advantages": adv, "group_std": stds, "batch_std": batch_std})


def worked_generation_batches(tokens, accumulation_steps: int) -> Worked:
    """dapo when one optimiser step of K micro-batches (one process, one row each, of `tokens` active tokens) holds
    K generation batches (steps_per_generation = 1), beside the default S = K: each token's weight S / (N K)."""
    n = [positive_int("tokens", v) for v in tokens]
    K = positive_int("accumulation_steps", accumulation_steps)
    if len(n) != K:
        raise RLLossError(f"one micro-batch per accumulation step: {len(n)} token counts for K = {K}")
    split = generation_batches(n, max(n), 1, 1, K)
    joined = generation_batches(n, max(n), 1, K, K)
    w1, wk = [r["weight"] for r in split], [r["weight"] for r in joined]
    md = (rf"With $S = 1$ each micro-batch is its own generation batch, $N_j = |o_j|$, and a token weighs "
          rf"$S/(N_j K)$: " + ", ".join(f"$1/({v}\\cdot{K}) = {sig(x)}$" for v, x in zip(n, w1))
          + rf". The step is the mean of the {K} generation batches' token means: a token of the {min(n)}-token batch "
            rf"weighs {sig(max(n) / min(n))} times one of the {max(n)}-token batch. With $S = K = {K}$ one generation "
            rf"batch holds the step, $N = {sum(n)}$, and every token weighs $1/N = {sig(wk[0])}$.")
    return Worked(md, {"weights_s1": w1, "weights_sk": wk})
