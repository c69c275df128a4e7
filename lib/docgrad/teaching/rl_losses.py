"""Policy-gradient loss normalisation as TRL's `GRPOTrainer` implements it (page 01d).

A GRPO-style trainer samples `num_generations` completions per prompt, gives completion i an advantage A_i (its
reward minus its group's mean, optionally divided by a standard deviation: `scale_rewards`) and minimises, per
micro-batch, a weighted sum of per-token losses l_it over the active tokens t of each completion:

    loss = sum_i sum_t w_it l_it,        l_it = -A_i at the first update (ratio pi/pi_old = 1),

so the gradient pushes token t of completion i with -A_i w_it. `loss_type` chooses the weights w_it. Notation
(one optimiser step):

    P    processes (data-parallel ranks); DDP averages their gradients
    G    accumulation steps: micro-batches per process per step (TRL's `current_gradient_accumulation_steps`)
    S    `steps_per_generation`: micro-batches per process in one generation batch (TRL's default: S = G)
    B    rows (completions) per micro-batch (`per_device_train_batch_size`); R = P G B rows in the step
    m_it the completion mask (1 on an active token), |o_i| = sum_t m_it, N_mb = the micro-batch's sum of m
    N    `num_items_in_batch`: the active tokens of the generation batch, summed over all processes
    L    `max_completion_length`

One micro-batch's weights in training mode (TRL 1.16.0, `GRPOTrainer._compute_loss`), and a token's weight in
the step's gradient once DDP divides by P and accumulation sums the G micro-batches:

    family              loss_type             micro-batch w_it            in the step
    sequence_mean       grpo, sapo            m / (|o_i| B G)             1 / (|o_i| R)
    local_token_mean    bnpo                  m / (N_mb G)                1 / (N_mb G P)
    constant            dr_grpo               m / (B L G)                 1 / (R L)
    global_token_mean   dapo, cispo, vespo    m / ((N / P) (G / S))       S / (N G)  (= 1/N when S = G)
    sequence_sum        luspo                 m / (B G)                   1 / R

`microbatch_weights` computes the middle column, `step_weights` the last, `trl_microbatch_weights` reads the same
weights off TRL's own `_compute_loss` (run on given tensors with no model), `advantages` mirrors TRL's
`scale_rewards`, `check_dapo_normaliser` is the page's code-exercise checker.
"""

from __future__ import annotations

import importlib.util
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import torch

from docgrad.errors import AnalysisError
from docgrad.teaching.worked import Worked, sig


class RLLossError(AnalysisError):
    """Invalid input to an RL-normalisation function, or an installed TRL that differs from what page 01d explains."""


# --------------------------------------------------------------------------------------------------
# What the page explains: TRL 1.16.0's loss types and reward scalings
# --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class LossType:
    family: str        # the normaliser it shares with other loss types (see FAMILIES)
    token_loss: str    # how the per-token loss is formed, in a few words
    introduced: str    # the paper TRL's docstring cites


LOSS_TYPES = {
    "grpo": LossType("sequence_mean", "PPO-clipped ratio × advantage", "DeepSeekMath (GRPO)"),
    "bnpo": LossType("local_token_mean", "PPO-clipped ratio × advantage", "TRL's batch-normalised variant"),
    "dr_grpo": LossType("constant", "PPO-clipped ratio × advantage", "Dr. GRPO"),
    "dapo": LossType("global_token_mean", "PPO-clipped ratio × advantage", "DAPO"),
    "cispo": LossType("global_token_mean", "clipped, detached ratio × advantage × log-prob", "MiniMax-M1 (CISPO)"),
    "sapo": LossType("sequence_mean", "soft (sigmoid) gate of the ratio × advantage", "SAPO"),
    "luspo": LossType("sequence_sum", "sequence-level ratio × advantage", "LUSPO (a GSPO variant)"),
    "vespo": LossType("global_token_mean", "Gamma weight of the sequence ratio × advantage × log-prob", "VESPO"),
}
DEFAULT_LOSS_TYPE = "dapo"
FAMILIES = {
    "sequence_mean": "per completion: mean over its tokens, then mean over rows",
    "local_token_mean": "mean over the active tokens of the micro-batch",
    "constant": "sum / (rows × max_completion_length)",
    "global_token_mean": "sum / active tokens of the whole step, all processes",
    "sequence_sum": "per completion: sum over its tokens, then mean over rows",
}
SCALE_REWARDS = ("group", "batch", "none")
DEFAULT_SCALE_REWARDS = "group"
STD_EPSILON = 1e-4          # TRL: advantages / (std_rewards + 1e-4)


def family_members(family: str) -> list[str]:
    """The loss types that share `family`'s normaliser, in LOSS_TYPES order."""
    if family not in FAMILIES:
        raise RLLossError(f"unknown family {family!r}; expected one of {', '.join(FAMILIES)}")
    return [name for name, lt in LOSS_TYPES.items() if lt.family == family]


def _loss_type(name: str) -> LossType:
    if name not in LOSS_TYPES:
        raise RLLossError(f"unknown loss_type {name!r}; TRL 1.16.0 has {', '.join(LOSS_TYPES)}")
    return LOSS_TYPES[name]


def _positive_int(name: str, value) -> int:
    if isinstance(value, bool) or int(value) != value or int(value) < 1:
        raise RLLossError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _mask(mask) -> torch.Tensor:
    m = torch.as_tensor(mask, dtype=torch.float64)
    if m.dim() != 2:
        raise RLLossError(f"mask must be 2-D (rows × completion positions), got shape {tuple(m.shape)}")
    if not torch.all((m == 0) | (m == 1)):
        raise RLLossError("mask must hold only 0 and 1")
    return m


# --------------------------------------------------------------------------------------------------
# The weights
# --------------------------------------------------------------------------------------------------

def microbatch_weights(mask, loss_type: str, *, max_completion_length: int | None = None, accumulation_steps: int = 1,
                       num_processes: int = 1, steps_per_generation: int | None = None,
                       num_items_in_batch: float | None = None) -> torch.Tensor:
    """w_it of one micro-batch's loss sum_it w_it l_it in training mode (module docstring's table), float64 (B, T).
    A row with no active token counts in B (TRL's `.mean()` over rows and `size(0)`) but weighs nothing;
    `num_items_in_batch` (N) is needed by the global-token-mean family only, `max_completion_length` (L) by
    dr_grpo only; `steps_per_generation` defaults to `accumulation_steps` (TRL's default)."""
    fam = _loss_type(loss_type).family
    m = _mask(mask)
    G = _positive_int("accumulation_steps", accumulation_steps)
    P = _positive_int("num_processes", num_processes)
    S = G if steps_per_generation is None else _positive_int("steps_per_generation", steps_per_generation)
    B = m.shape[0]
    if fam == "sequence_mean":
        return m / (m.sum(1, keepdim=True).clamp(min=1.0) * B * G)
    if fam == "local_token_mean":
        return m / (m.sum().clamp(min=1.0) * G)
    if fam == "constant":
        if max_completion_length is None:
            raise RLLossError("dr_grpo divides by rows × max_completion_length: pass max_completion_length")
        L = _positive_int("max_completion_length", max_completion_length)
        return m / (B * L * G)
    if fam == "global_token_mean":
        if num_items_in_batch is None:
            raise RLLossError(f"{loss_type} divides by num_items_in_batch (the generation batch's active tokens over "
                              "all processes): pass it")
        return m / (max(float(num_items_in_batch), 1.0) / P * G / S)
    return m / (B * G)                                        # sequence_sum


def microbatch_loss(per_token_loss, mask, loss_type: str, **kw) -> torch.Tensor:
    """sum_it w_it l_it: one micro-batch's loss as TRL reduces it (`kw` as for microbatch_weights)."""
    w = microbatch_weights(mask, loss_type, **kw)
    l = torch.as_tensor(per_token_loss, dtype=torch.float64)
    if l.shape != w.shape:
        raise RLLossError(f"per_token_loss has shape {tuple(l.shape)}, the mask {tuple(w.shape)}")
    return (w * l).sum()


def step_weights(masks, loss_type: str, *, max_completion_length: int | None = None,
                 steps_per_generation: int | None = None, num_items_in_batch: float | None = None) -> list:
    """Each token's weight in one optimiser step's gradient: masks[p][g] is micro-batch g of process p (P processes
    of G micro-batches each); micro-batch weights (microbatch_weights) divided by P, as DDP averages the processes'
    gradients and accumulation sums the micro-batches. N defaults to every given token, which is TRL's count when
    the generation batch is this step (S = G); for another S pass the generation batch's `num_items_in_batch`."""
    P = len(masks)
    if P == 0 or any(len(p) != len(masks[0]) or len(p) == 0 for p in masks):
        raise RLLossError("masks must be a non-empty list per process, every process with the same number of "
                          f"micro-batches; got {[len(p) for p in masks]}")
    G = len(masks[0])
    S = G if steps_per_generation is None else _positive_int("steps_per_generation", steps_per_generation)
    if num_items_in_batch is None:
        if S != G:
            raise RLLossError(f"steps_per_generation {S} != accumulation steps {G}: the generation batch is not this "
                              "step, so pass its num_items_in_batch")
        num_items_in_batch = float(sum(_mask(m).sum() for p in masks for m in p))
    return [[microbatch_weights(m, loss_type, max_completion_length=max_completion_length, accumulation_steps=G,
                                num_processes=P, steps_per_generation=S, num_items_in_batch=num_items_in_batch) / P
             for m in p] for p in masks]


def completion_mask(lengths, max_completion_length: int) -> torch.Tensor:
    """Right-padded (R, L) mask: row i has lengths[i] active tokens."""
    L = _positive_int("max_completion_length", max_completion_length)
    n = [_positive_int("lengths", v) for v in lengths]
    if max(n) > L:
        raise RLLossError(f"a completion of {max(n)} tokens is longer than max_completion_length {L}")
    return (torch.arange(L)[None, :] < torch.tensor(n)[:, None]).to(torch.float64)


def split_step(mask, rows_per_microbatch: int, num_processes: int = 1) -> list:
    """masks[p][g] as TRL deals rows: process p takes the p-th contiguous block of R / P rows, split into micro-batches
    of B rows in order (TRL shuffles the rows of a generation batch before splitting; here the order is kept)."""
    m = _mask(mask)
    B, P = _positive_int("rows_per_microbatch", rows_per_microbatch), _positive_int("num_processes", num_processes)
    R = m.shape[0]
    if R % (B * P):
        raise RLLossError(f"{R} rows do not split into {P} process(es) × micro-batches of {B} rows")
    G = R // (B * P)
    return [[m[(p * G + g) * B:(p * G + g + 1) * B] for g in range(G)] for p in range(P)]


def flat_step_weights(masks, loss_type: str, **kw) -> torch.Tensor:
    """step_weights stacked back into the (R, L) layout split_step came from."""
    return torch.cat([w for p in step_weights(masks, loss_type, **kw) for w in p])


# --------------------------------------------------------------------------------------------------
# Advantages: scale_rewards
# --------------------------------------------------------------------------------------------------

def normalise_scale_rewards(scale_rewards) -> str:
    """GRPOConfig's mapping: True -> "group", False -> "none", a name as given."""
    value = {True: "group", False: "none"}.get(scale_rewards, scale_rewards)
    if value not in SCALE_REWARDS:
        raise RLLossError(f"scale_rewards must be True, False or one of {', '.join(SCALE_REWARDS)}; "
                          f"got {scale_rewards!r}")
    return value


def advantages(rewards, num_generations: int, scale_rewards="group") -> torch.Tensor:
    """A_i = r_i - mean of its group (consecutive blocks of `num_generations`), divided by (std + 1e-4) unless
    scale_rewards is "none": the group's std for "group", one std of all rewards for "batch" (Bessel-corrected,
    as TRL's nanstd). Mirrors GRPOTrainer._generate_and_score_completions with one reward function and no
    unscorable (NaN) reward; MIRRORED_ADVANTAGE_LINES are the source lines it follows."""
    scale = normalise_scale_rewards(scale_rewards)
    k = _positive_int("num_generations", num_generations)
    r = torch.as_tensor(rewards, dtype=torch.float64).reshape(-1)
    if k < 2:
        raise RLLossError("num_generations must be at least 2 (GRPOConfig refuses fewer in training)")
    if r.numel() == 0 or r.numel() % k:
        raise RLLossError(f"{r.numel()} rewards do not form groups of num_generations = {k}")
    if not torch.all(torch.isfinite(r)):
        raise RLLossError("rewards must be finite (TRL's unscorable NaN rewards are outside this mirror)")
    groups = r.view(-1, k)
    a = r - groups.mean(1).repeat_interleave(k)
    if scale == "group":
        a = a / (groups.std(1, correction=1).repeat_interleave(k) + STD_EPSILON)
    elif scale == "batch":
        a = a / (r.std(correction=1) + STD_EPSILON)
    return a


MIRRORED_ADVANTAGE_LINES = (
    "mean_grouped_rewards = torch.nanmean(rewards.view(-1, num_generations), dim=1)",
    "mean_grouped_rewards = mean_grouped_rewards.repeat_interleave(num_generations, dim=0)",
    "std_rewards = nanstd(rewards.view(-1, num_generations), dim=1)",
    "std_rewards = std_rewards.repeat_interleave(num_generations, dim=0)",
    "std_rewards = nanstd(rewards).expand_as(rewards)",
    "advantages = rewards - mean_grouped_rewards",
    'if self.scale_rewards != "none":',
    "advantages = advantages / (std_rewards + 1e-4)",
)


# --------------------------------------------------------------------------------------------------
# The worked batch: weights, pushes and length bias per family
# --------------------------------------------------------------------------------------------------

def family_table(lengths, adv, *, max_completion_length: int, rows_per_microbatch: int,
                 num_processes: int = 1) -> list[dict]:
    """Per family, on one step of completions of `lengths` (dealt as split_step does) with advantages `adv`:
    each completion's per-token weight × N (1 = the step's token mean), its total weight × R (1 = every completion
    equal), its push A_i × total weight × R, the loss sum_it w_it (-A_i), the per-token weight of the shortest over
    the longest completion, and whether a token's weight changes when another completion's length does (the
    longest one token shorter, or longer if it has one token)."""
    n = [_positive_int("lengths", v) for v in lengths]
    a = torch.as_tensor(adv, dtype=torch.float64).reshape(-1)
    if a.numel() != len(n):
        raise RLLossError(f"one advantage per completion: {a.numel()} for {len(n)} completions")
    L = _positive_int("max_completion_length", max_completion_length)
    j = n.index(max(n))
    if n[j] == 1 and L == 1:
        raise RLLossError("every completion has one token and max_completion_length is 1: no length to vary")
    varied = [v - 1 if i == j and v > 1 else v + 1 if i == j else v for i, v in enumerate(n)]

    def weights(lens, loss_type):
        masks = split_step(completion_mask(lens, L), rows_per_microbatch, num_processes)
        return flat_step_weights(masks, loss_type, max_completion_length=L)

    N, R = float(sum(n)), len(n)
    short = n.index(min(n))
    rows = []
    for fam in FAMILIES:
        lt = family_members(fam)[0]
        w, w_varied = weights(n, lt), weights(varied, lt)
        per_token = w[:, 0]                                   # position 0 is active in every row
        total = w.sum(1)
        others = [i for i in range(R) if i != j]
        rows.append({"family": fam, "loss_types": ", ".join(family_members(fam)), "meaning": FAMILIES[fam],
                     "per_token_x_N": [float(v) * N for v in per_token],
                     "total_x_R": [float(t) * R for t in total],
                     "push": [float(ai * t) * R for ai, t in zip(a, total)],
                     "loss": _zero_rounding(float(-(total * a).sum())),
                     "short_over_long_per_token": float(per_token[short] / per_token[j]),
                     "depends_on_other_lengths": bool((w_varied[others, 0] - per_token[others]).abs().max() > 1e-15)})
    return rows


def _zero_rounding(x: float) -> float:
    """0 for |x| < 1e-12 (a sum that is zero up to float rounding, e.g. advantages that sum to 0 in each group)."""
    return 0.0 if abs(x) < 1e-12 else x


def bnpo_by_microbatch_size(lengths, max_completion_length: int, sizes) -> list[dict]:
    """bnpo's per-token step weights × N (one process) for each micro-batch size B in `sizes`, beside grpo's and
    dapo's: bnpo is dapo when one micro-batch holds the whole step and grpo at B = 1."""
    n = [_positive_int("lengths", v) for v in lengths]
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


def generation_spans_steps(lengths, max_completion_length: int, rows_per_microbatch: int,
                           steps_per_generation: int) -> list[dict]:
    """dapo when one generation batch (all `lengths`, one process) feeds `steps_per_generation` optimiser steps of one
    micro-batch each (G = 1): per step, its active tokens, the weight TRL gives a token (S / N) and the step token
    mean's 1 / N_step, and their ratio (the step's scale)."""
    mask = completion_mask(lengths, max_completion_length)
    N = float(mask.sum())
    S = _positive_int("steps_per_generation", steps_per_generation)
    micro = split_step(mask, rows_per_microbatch, 1)[0]
    if len(micro) != S:
        raise RLLossError(f"{len(micro)} micro-batches of {rows_per_microbatch} rows, not steps_per_generation = {S}")
    out = []
    for s, m in enumerate(micro):
        w = float(microbatch_weights(m, "dapo", accumulation_steps=1, steps_per_generation=S,
                                     num_items_in_batch=N)[0, 0])
        n_step = float(m.sum())
        out.append({"step": s + 1, "tokens": int(n_step), "weight": w, "step_token_mean": 1 / n_step,
                    "scale": w * n_step})
    return out


# --------------------------------------------------------------------------------------------------
# The installed TRL: its source (for excerpts and the loss-type list) and its own loss computation
# --------------------------------------------------------------------------------------------------

def trl_version() -> str:
    import trl

    return trl.__version__


def trl_source_path(module: str = "trainer/grpo_trainer.py") -> Path:
    """The installed TRL's source file `module` (relative to the trl package), found without importing it."""
    spec = importlib.util.find_spec("trl")
    if spec is None or spec.origin is None:
        raise RLLossError("trl is not installed: page 01d reads its GRPOTrainer (pip install 'trl==1.16.0')")
    path = Path(spec.origin).parent / module
    if not path.is_file():
        raise RLLossError(f"the installed trl has no {module} (looked at {path})")
    return path


def source_excerpt(path: Path, start: str, end: str, after: str | None = None) -> dict:
    """The lines of `path` from the first line containing `start` (after the first line containing `after`, if given)
    to the next line containing `end`, with 1-based line numbers; a marker that is missing is an RLLossError."""
    lines = Path(path).read_text().splitlines()
    i0 = 0
    if after is not None:
        i0 = next((i for i, s in enumerate(lines) if after in s), None)
        if i0 is None:
            raise RLLossError(f"{path}: no line contains {after!r}: the installed TRL changed, re-read it")
    i = next((j for j in range(i0, len(lines)) if start in lines[j]), None)
    if i is None:
        raise RLLossError(f"{path}: no line contains {start!r}: the installed TRL changed, re-read it")
    k = next((j for j in range(i, len(lines)) if end in lines[j]), None)
    if k is None:
        raise RLLossError(f"{path}: no line containing {end!r} follows line {i + 1}: the installed TRL changed")
    parts = Path(path).parts
    short = "/".join(parts[parts.index("trl"):]) if "trl" in parts else str(path)
    return {"file": short, "first_line": i + 1, "last_line": k + 1,
            "lines": [(j + 1, lines[j]) for j in range(i, k + 1)]}


def excerpt_markdown(ex: dict) -> str:
    """An excerpt as a fenced code block headed by its file and line range, each line with its number."""
    body = "\n".join(f"{no:>5}  {text}" for no, text in ex["lines"])
    return f"`{ex['file']}`, lines {ex['first_line']}–{ex['last_line']}:\n\n```python\n{body}\n```"


def trl_excerpts() -> dict:
    """Excerpts of the installed TRL, each found by its text: the normalisation branches of `_compute_loss`, the
    count `num_items_in_batch`, the shuffle and split of a generation batch into micro-batches, the flag telling
    the Trainer not to divide by the accumulation steps again, the advantages (`scale_rewards`), and GRPOConfig's
    mapping of True/False and default steps_per_generation."""
    trainer = trl_source_path("trainer/grpo_trainer.py")
    config = trl_source_path("trainer/grpo_config.py")
    return {
        "normalisers": source_excerpt(trainer, 'mode = "train" if self.model.training else "eval"', "Unknown loss type",
                                      after="def _compute_loss("),
        "num_items_in_batch": source_excerpt(trainer, "loss_mask = completion_mask if tool_mask is None",
                                             "num_items_in_batch = self.accelerator.gather("),
        "micro_batches": source_excerpt(trainer, "generation_batch = shuffle_sequence_dict(generation_batch)",
                                        "generation_batches = split_tensor_dict(", after="def _prepare_inputs("),
        "scaled_for_accumulation": source_excerpt(trainer, "loss_is_scaled_for_ga = True", "loss_is_scaled_for_ga"),
        "advantages": source_excerpt(trainer, "mean_grouped_rewards = torch.nanmean(",
                                     "advantages = advantages / (std_rewards + 1e-4)",
                                     after="def _generate_and_score_completions("),
        "scale_rewards_bool": source_excerpt(config, "self.scale_rewards = {True:", "self.scale_rewards = {True:"),
        "steps_per_generation": source_excerpt(config, "if self.generation_batch_size is None and self.steps_per_gen",
                                               "self.generation_batch_size = self.per_device_train_batch_size"),
    }


_BRANCH = re.compile(r"self\.loss_type\s*(?:==\s*\"(\w+)\"|in\s*\[([^\]]*)\])")


def trl_loss_types() -> dict:
    """The loss types the installed TRL knows, read three ways from its source: the names the normalisation
    branches of `_compute_loss` test, the names GRPOConfig's help lists as supported, and its default."""
    ex = trl_excerpts()["normalisers"]
    branches = []
    for _, text in ex["lines"]:
        for eq, listed in _BRANCH.findall(text):
            branches += [eq] if eq else re.findall(r"\"(\w+)\"", listed)
    config = trl_source_path("trainer/grpo_config.py").read_text()
    field_at = config.find("loss_type: str = field(")
    m = re.search(r"Supported values are (.*?)\.\s", config[field_at:field_at + 3000], re.S) if field_at >= 0 else None
    help_listed = re.findall(r"'(\w+)'", m.group(1)) if m else []
    d = re.search(r"loss_type: str = field\(\s*default=\"(\w+)\"", config)
    s = re.search(r"scale_rewards: str = field\(\s*default=\"(\w+)\"", config)
    return {"branches": branches, "config_help": help_listed, "default": d.group(1) if d else None,
            "scale_rewards_default": s.group(1) if s else None}


def explained_matches_installed() -> dict:
    """Raises RLLossError naming the difference when the installed TRL's loss types, defaults or advantage lines
    are not the ones this module (and page 01d) explains; returns what was read."""
    got = trl_loss_types()
    advantage_lines = [text.strip() for _, text in trl_excerpts()["advantages"]["lines"]]
    want = sorted(LOSS_TYPES)
    for where, names in (("the normalisation branches of GRPOTrainer._compute_loss", got["branches"]),
                         ("GRPOConfig's loss_type help", got["config_help"])):
        if sorted(set(names)) != want:
            raise RLLossError(
                f"the installed TRL {trl_version()} lists loss types {sorted(set(names))} in {where}; page 01d "
                f"explains {want} (TRL 1.16.0): new {sorted(set(names) - set(want))}, gone "
                f"{sorted(set(want) - set(names))}. Re-read grpo_trainer.py and update docgrad.teaching.rl_losses")
    if got["default"] != DEFAULT_LOSS_TYPE or got["scale_rewards_default"] != DEFAULT_SCALE_REWARDS:
        raise RLLossError(f"the installed TRL's defaults are loss_type={got['default']!r}, scale_rewards="
                          f"{got['scale_rewards_default']!r}; page 01d explains {DEFAULT_LOSS_TYPE!r}, "
                          f"{DEFAULT_SCALE_REWARDS!r}")
    missing = [line for line in MIRRORED_ADVANTAGE_LINES if line not in advantage_lines]
    if missing:
        raise RLLossError(f"the installed TRL's advantage lines changed (missing {missing}): re-read "
                          "_generate_and_score_completions and update rl_losses.advantages")
    return got


class StubAttributeError(AttributeError):
    """TRL's code read an attribute the stub trainer does not set."""


class _Strict:
    """Attributes as given; reading any other one names it (an AttributeError, so hasattr still works)."""

    def __init__(self, what: str, **attrs):
        self.__dict__.update(attrs)
        self.__dict__["_what"] = what

    def __getattr__(self, name):
        raise StubAttributeError(f"TRL's GRPOTrainer._compute_loss read {self._what}.{name}, which "
                                 "docgrad.teaching.rl_losses' stub does not set: the installed TRL changed that "
                                 "method")


class _Accelerator:
    """One process's view of `num_processes` processes; gather and reduce are the identity (the local tensors)."""

    def __init__(self, num_processes: int):
        self.num_processes = num_processes

    def gather(self, x):
        return x

    def gather_for_metrics(self, x):
        return x

    def reduce(self, x, reduction="sum"):
        return x


def trl_microbatch_weights(mask, loss_type: str, *, max_completion_length: int = 16, accumulation_steps: int = 1,
                           num_processes: int = 1, steps_per_generation: int | None = None,
                           num_items_in_batch: float | None = None) -> torch.Tensor:
    """The installed TRL's own w_it, read off `GRPOTrainer._compute_loss` run on a stub trainer with no model:
    log-probs zero with gradient, old log-probs the same (ratio 1), every advantage 1, no KL, no entropy bonus, so
    each token's loss is linear in its log-prob with slope -1 at ratio 1 (for cispo: epsilon_high = 5, TRL's
    recommended ε_max, so the clamp does not bind) and -d loss / d log-prob_it = w_it. luspo runs with
    importance_sampling_level="sequence", as TRL requires."""
    from trl.trainer.grpo_trainer import GRPOTrainer

    _loss_type(loss_type)
    m = _mask(mask).to(torch.float32)
    Bn, T = m.shape
    G = _positive_int("accumulation_steps", accumulation_steps)
    P = _positive_int("num_processes", num_processes)
    S = G if steps_per_generation is None else _positive_int("steps_per_generation", steps_per_generation)
    N = float(m.sum()) if num_items_in_batch is None else float(num_items_in_batch)
    logps = torch.zeros(Bn, T, requires_grad=True)
    args = _Strict("args", delta=None, steps_per_generation=S, sapo_temperature_pos=1.0, sapo_temperature_neg=1.05,
                   vespo_k_pos=2.0, vespo_lambda_pos=3.0, vespo_k_neg=3.0, vespo_lambda_neg=2.0,
                   use_bias_correction_kl=False)
    stub = _Strict(
        "self", args=args, loss_type=loss_type, max_completion_length=max_completion_length,
        current_gradient_accumulation_steps=G, accelerator=_Accelerator(P), model=_Strict("model", training=True),
        top_entropy_quantile=1.0, off_policy_mask_threshold=None, beta=0.0, epsilon_low=0.2,
        epsilon_high=5.0 if loss_type == "cispo" else 0.28, use_vllm=False, vllm_importance_sampling_correction=False,
        importance_sampling_level="sequence" if loss_type == "luspo" else "token", _entropy_bonus_enabled=False,
        aux_loss_enabled=False, _metrics=defaultdict(lambda: defaultdict(list)),
        get_gamma_weights=GRPOTrainer.get_gamma_weights,
        _get_per_token_logps_and_entropies=lambda *a, **k: (logps, torch.zeros(Bn, T), None))
    inputs = {"prompt_ids": torch.zeros(Bn, 1, dtype=torch.long), "prompt_mask": torch.ones(Bn, 1, dtype=torch.long),
              "completion_ids": torch.zeros(Bn, T, dtype=torch.long), "completion_mask": m.long(),
              "advantages": torch.ones(Bn), "num_items_in_batch": torch.tensor(N)}
    loss = GRPOTrainer._compute_loss(stub, None, inputs)
    (grad,) = torch.autograd.grad(loss, logps)
    return (-grad).to(torch.float64)


# --------------------------------------------------------------------------------------------------
# The code exercise: write the dapo normaliser
# --------------------------------------------------------------------------------------------------

CHECK_TOLERANCE = 1e-9        # relative weight error a correct answer stays below (float64)

# (processes, then per process its micro-batches, each a list of rows; a row is its length, or a list of 0/1)
DAPO_SCENARIOS = (
    ("one process, two accumulation steps, right padding", [[[3, 7], [12, 2]]]),
    ("two processes × two accumulation steps, a tool-output span masked inside a row, a truncated row masked out",
     [[[5, [1, 1, 0, 0, 1, 1, 1, 1]], [2, 9]], [[[1, 1, 1, 0, 0, 0, 1, 1, 1, 1], 4], [[0] * 6, 11]]]),
    ("one process, three accumulation steps of one row each", [[[1], [9], [4]]]),
)


def _scenario_mask(rows, width: int) -> torch.Tensor:
    out = torch.zeros(len(rows), width, dtype=torch.float64)
    for i, r in enumerate(rows):
        if isinstance(r, int):
            out[i, :r] = 1
        else:
            out[i, :len(r)] = torch.tensor(r, dtype=torch.float64)
    return out


def _diagnose(w, masks, N: float, P: int) -> str | None:
    """None when every active token weighs 1/N and every masked one 0; else what the weights look like."""
    flat_w = torch.cat([x.reshape(-1) for p in w for x in p])
    flat_m = torch.cat([x.reshape(-1) for p in masks for x in p])
    active = flat_m > 0
    if (flat_w[~active].abs() > CHECK_TOLERANCE / N).any():
        return ("tokens with mask 0 get weight (padding or masked tool output counts): multiply per_token_loss by "
                "the mask before summing")
    rel = flat_w[active] * N
    if torch.allclose(rel, torch.ones_like(rel), rtol=CHECK_TOLERANCE, atol=0):
        return None
    if torch.allclose(rel, rel[0].expand_as(rel), rtol=1e-9, atol=0):
        c = float(rel[0])
        hint = (f" DDP then averages the {P} processes' gradients, so each process divides by "
                "num_items_in_batch / num_processes" if P > 1 and abs(c * P - 1) < 1e-9 else
                " (the weights must sum to 1 over the step's active tokens)")
        return f"every active token weighs {sig(c)} × 1/N instead of 1/N: off by a constant factor.{hint}"
    per_mb = [x[m > 0] * N for p_w, p_m in zip(w, masks) for x, m in zip(p_w, p_m) if m.sum() > 0]
    if all(torch.allclose(v, v[0].expand_as(v), rtol=1e-9, atol=0) for v in per_mb):
        return ("the tokens of one micro-batch share a weight, but it differs between micro-batches (× N: "
                + ", ".join(sig(float(v[0])) for v in per_mb) + "): the denominator is the micro-batch's own token "
                "count (TRL's bnpo), so a micro-batch of short completions weighs its tokens more. Divide by the "
                "count of the whole accumulated batch, num_items_in_batch")
    rows = [(x[i][m[i] > 0] * N, int(m[i].sum())) for p_w, p_m in zip(w, masks) for x, m in zip(p_w, p_m)
            for i in range(m.shape[0]) if m[i].sum() > 0]
    if all(torch.allclose(v, v[0].expand_as(v), rtol=1e-9, atol=0) for v, _ in rows):
        return ("each completion's tokens share a weight that falls with its length (× N: "
                + ", ".join(f"{sig(float(v[0]))} for {n} tokens" for v, n in rows[:4]) + ", ...): a per-completion "
                "mean first (TRL's grpo), so a short completion's tokens weigh more. Sum the tokens, do not average "
                "each row")
    return (f"active tokens weigh from {sig(float(rel.min()))} to {sig(float(rel.max()))} × 1/N; every one should "
            "weigh exactly 1/N")


def check_dapo_normaliser(dapo_loss) -> dict:
    """Checker of page 01d's code exercise. `dapo_loss(per_token_loss, mask, num_items_in_batch, num_processes)`
    returns one micro-batch's loss (a 0-dim tensor) from its (B, T) per-token losses and 0/1 mask, the active-token
    count of the whole step over all processes (a tensor) and the number of processes. Each scenario runs it on
    every micro-batch of every process; accumulation sums the micro-batches' gradients and DDP averages the
    processes'. Correct: every active token's weight d(step loss)/d l_it is 1/N, every masked token's 0."""
    for s, (what, procs) in enumerate(DAPO_SCENARIOS, 1):
        width = max(r if isinstance(r, int) else len(r) for p in procs for mb in p for r in mb)
        masks = [[_scenario_mask(mb, width) for mb in p] for p in procs]
        P = len(masks)
        N = float(sum(m.sum() for p in masks for m in p))
        gen = torch.Generator().manual_seed(s)
        weights = []
        for p in masks:
            weights.append([])
            for m in p:
                loss_in = torch.rand(m.shape, generator=gen, dtype=torch.float64).requires_grad_(True)
                where = f"scenario {s} ({what})"
                try:
                    out = dapo_loss(loss_in, m.clone(), torch.tensor(N, dtype=torch.float64), P)
                except Exception as e:   # noqa: BLE001 - the student's code may raise anything; report it
                    return {"passed": False, "scenario": s,
                            "message": f"not yet: {where}: dapo_loss raised {type(e).__name__}: {e}"}
                if not isinstance(out, torch.Tensor) or out.dim() != 0:
                    got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
                    return {"passed": False, "scenario": s,
                            "message": f"not yet: {where}: return one number as a 0-dim tensor, got {got}"}
                if not out.requires_grad:
                    return {"passed": False, "scenario": s,
                            "message": f"not yet: {where}: the loss does not depend on per_token_loss through torch "
                                       "operations (no .item(), no float())"}
                (g,) = torch.autograd.grad(out, loss_in, allow_unused=True)
                weights[-1].append((torch.zeros_like(m) if g is None else g.detach()) / P)
        problem = _diagnose(weights, masks, N, P)
        if problem is not None:
            return {"passed": False, "scenario": s,
                    "message": f"not yet: scenario {s} ({what}, N = {int(N)}): {problem}"}
    return {"passed": True, "scenario": None,
            "message": f"correct: in all {len(DAPO_SCENARIOS)} scenarios (1 or 2 processes, 2 or 3 accumulation steps, "
                       "masked tokens) every active token weighs 1/N in the step and every masked token 0"}


# --------------------------------------------------------------------------------------------------
# Worked solutions of page 01d's exercises
# --------------------------------------------------------------------------------------------------

def worked_two_completions(lengths, adv, max_completion_length: int) -> Worked:
    """Two (or more) completions in one micro-batch, one process, one accumulation step (R = B, G = P = 1): the
    per-token weights under grpo, dapo and dr_grpo and which completion's tokens are pushed harder."""
    n = [_positive_int("lengths", v) for v in lengths]
    a = [float(v) for v in adv]
    if len(a) != len(n):
        raise RLLossError(f"one advantage per completion: {len(a)} for {len(n)}")
    L = _positive_int("max_completion_length", max_completion_length)
    R, N = len(n), sum(n)
    mask = completion_mask(n, L)
    w = {lt: [float(x) for x in microbatch_weights(mask, lt, max_completion_length=L, num_items_in_batch=N)[:, 0]]
         for lt in ("grpo", "dapo", "dr_grpo")}
    push = {lt: [ai * wi for ai, wi in zip(a, w[lt])] for lt in w}
    md = (rf"One micro-batch holds the whole step ($R = {R}$ rows, $N = {' + '.join(map(str, n))} = {N}$ tokens, "
          rf"$L = {L}$)."
          "\n\n"
          rf"- grpo: $w_i = 1/(|o_i|\,R)$ = " + ", ".join(f"$1/({v}\\cdot{R}) = {sig(1 / (v * R))}$" for v in n)
          + rf"; a token of the {min(n)}-token completion weighs {sig(max(n) / min(n))} times one of the "
            rf"{max(n)}-token one."
          "\n"
          rf"- dapo: $w = 1/N = {sig(1 / N)}$ for every token."
          "\n"
          rf"- dr_grpo: $w = 1/(R\,L) = 1/({R}\cdot{L}) = {sig(1 / (R * L))}$ for every token."
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
    groups = r.view(-1, _positive_int("num_generations", num_generations))
    stds = [float(g.std(correction=1)) for g in groups]
    means = [float(g.mean()) for g in groups]
    batch_std = float(r.std(correction=1))
    lines = [rf"Group means {sig(means)}, group standard deviations {sig(stds)} (Bessel-corrected), the "
             rf"batch's {sig(batch_std)}; $\varepsilon = 10^{{-4}}$."
             "\n"]
    lines.append(r"- `none`: $A_i = r_i - \bar r_g$ = " + f"{sig(adv['none'])}.")
    lines.append(r"- `group`: $A_i = (r_i - \bar r_g)/(s_g + \varepsilon)$ = " + f"{sig(adv['group'])}.")
    lines.append(r"- `batch`: $A_i = (r_i - \bar r_g)/(s + \varepsilon)$ = " + f"{sig(adv['batch'])}.")
    small = int(min(range(len(stds)), key=lambda g: stds[g]))
    lines.append(f"\nUnder `group` the group with the smaller spread (group {small + 1}, s = {sig(stds[small])}) gets "
                 "advantages as large as the other's: a small reward gap becomes a full-size push (the question-level "
                 "difficulty bias the Dr. GRPO paper points out); `batch` and `none` keep the groups' gaps in "
                 "proportion.")
    return Worked("\n".join(lines), {"advantages": adv, "group_std": stds, "batch_std": batch_std})
