"""Policy-gradient loss normalisation as TRL's `GRPOTrainer` implements it (page 01d): the maths.

GRPO samples a group of G completions per prompt (`num_generations`), gives completion i an advantage A_i (its
reward minus its group's mean, optionally divided by a standard deviation: `scale_rewards`) and minimises, per
micro-batch, a weighted sum of per-token losses over the active tokens t of each completion. At ratio
pi/pi_old = 1 (`num_iterations` = 1 and steps_per_generation <= gradient_accumulation_steps, or the first update of
a generation batch) the gradient of that sum is

    d loss / d log pi_it = -c A_i w_it,

so token t of completion i is pushed by c A_i w_it: `loss_type` chooses the weight w_it, and c is 1 except for
`cispo` (min(1, epsilon_high), `gradient_factor`). Notation (one optimiser step):

    P    processes (data-parallel ranks); DDP averages their gradients
    K    accumulation steps: micro-batches per process per step (TRL's `current_gradient_accumulation_steps`)
    S    `steps_per_generation`: micro-batches per process in one generation batch (TRL's default: S = K)
    B    rows (completions) per micro-batch (`per_device_train_batch_size`); H = P K B rows in the step
    m_it the completion mask (1 on an active token), |o_i| = sum_t m_it, N_mb = the micro-batch's sum of m
    N    `num_items_in_batch`: the active tokens of the generation batch, summed over all processes
    L    `max_completion_length`

One micro-batch's weights in training mode (TRL 1.16.0, `GRPOTrainer._compute_loss`), and a token's weight in
the step's gradient once DDP divides by P and accumulation sums the K micro-batches:

    family              loss_type             micro-batch w_it            in the step
    sequence_mean       grpo, sapo            m / (|o_i| B K)             1 / (|o_i| H)
    local_token_mean    bnpo                  m / (N_mb K)                1 / (N_mb K P)
    constant            dr_grpo               m / (B L K)                 1 / (H L)
    global_token_mean   dapo, cispo, vespo    m / ((N / P) (K / S))       S / (N K)  (= 1/N when S = K)
    sequence_sum        luspo                 m / (B K)                   1 / H

`luspo`'s per-token loss is its completion's sequence loss (one ratio per completion, from the mean log-ratio), so
its gradient reaches each of the |o_i| tokens divided by |o_i|; summed over the row's copies, each token's weight
is the 1/H above. The installed-TRL comparison is in `rl_trl`; the page's worked-batch tables, worked solutions and
exercise checker in `rl_worked`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from docgrad.errors import AnalysisError


class RLLossError(AnalysisError):
    """Invalid input to an RL-normalisation function, or an installed TRL that differs from what page 01d explains."""


# --------------------------------------------------------------------------------------------------
# What the page explains: TRL 1.16.0's loss types, reward scalings, defaults and the papers behind them
# --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Paper:
    name: str          # as a class would say it
    arxiv: str         # arXiv identifier (YYMM.NNNNN), cited in the installed TRL's GRPO source

    @property
    def month(self) -> str:
        """The arXiv submission month, read off the identifier: '2402.03300' -> '2024-02'."""
        return f"20{self.arxiv[:2]}-{self.arxiv[2:4]}"


PAPERS = {
    "deepseekmath": Paper("DeepSeekMath (GRPO)", "2402.03300"),
    "dapo": Paper("DAPO", "2503.14476"),
    "dr_grpo": Paper("Dr. GRPO (Understanding R1-Zero-like training)", "2503.20783"),
    "minimax_m1": Paper("MiniMax-M1 (CISPO)", "2506.13585"),
    "gspo": Paper("GSPO (sequence-level ratio)", "2507.18071"),
    "lite_ppo": Paper("Lite PPO (Tricks or Traps?)", "2508.08221"),
    "scalerl": Paper("ScaleRL (CISPO's ε_max = 5)", "2510.13786"),
    "sapo": Paper("SAPO", "2511.20347"),
    "luspo": Paper("LUSPO (a GSPO variant)", "2602.05261"),
    "vespo": Paper("VESPO", "2602.10693"),
}


@dataclass(frozen=True)
class LossType:
    family: str        # the normaliser it shares with other loss types (see FAMILIES)
    token_loss: str    # how the per-token loss is formed, in a few words
    paper: str | None  # key of PAPERS: the paper TRL's docstring cites (None: TRL's own variant)

    @property
    def introduced(self) -> str:
        return "TRL's own batch-normalised variant" if self.paper is None else \
            f"{PAPERS[self.paper].name}, {PAPERS[self.paper].month}"


LOSS_TYPES = {
    "grpo": LossType("sequence_mean", "PPO-clipped ratio × advantage", "deepseekmath"),
    "bnpo": LossType("local_token_mean", "PPO-clipped ratio × advantage", None),
    "dr_grpo": LossType("constant", "PPO-clipped ratio × advantage", "dr_grpo"),
    "dapo": LossType("global_token_mean", "PPO-clipped ratio × advantage", "dapo"),
    "cispo": LossType("global_token_mean", "clamped, detached ratio × advantage × log-prob", "minimax_m1"),
    "sapo": LossType("sequence_mean", "soft (sigmoid) gate of the ratio × advantage", "sapo"),
    "luspo": LossType("sequence_sum", "sequence-level ratio × advantage", "luspo"),
    "vespo": LossType("global_token_mean", "Gamma weight of the sequence ratio × advantage × log-prob", "vespo"),
}
DEFAULT_LOSS_TYPE = "dapo"
FAMILIES = {
    "sequence_mean": "per completion: mean over its tokens, then mean over rows",
    "local_token_mean": "mean over the active tokens of the micro-batch",
    "constant": "sum / (rows × max_completion_length)",
    "global_token_mean": "sum / active tokens of the generation batch, all processes",
    "sequence_sum": "per completion: sum over its tokens, then mean over rows",
}
SCALE_REWARDS = ("group", "batch", "none")
SCALE_REWARDS_PAPERS = {"group": "deepseekmath", "batch": "lite_ppo", "none": "dr_grpo"}
DEFAULT_SCALE_REWARDS = "group"
STD_EPSILON = 1e-4          # TRL: advantages / (std_rewards + 1e-4)

# GRPOConfig's defaults of the fields _compute_loss reads at ratio 1 (rl_trl checks them against the installed
# GRPOConfig); the page's settings are the ones TRL's help recommends for a loss type where they differ
TRL_DEFAULTS = {"epsilon": 0.2, "epsilon_high": None, "delta": None, "beta": 0.0, "num_iterations": 1,
                "importance_sampling_level": "token", "sapo_temperature_pos": 1.0, "sapo_temperature_neg": 1.05,
                "vespo_k_pos": 2.0, "vespo_lambda_pos": 3.0, "vespo_k_neg": 3.0, "vespo_lambda_neg": 2.0,
                "top_entropy_quantile": 1.0, "off_policy_mask_threshold": None, "use_vllm": False,
                "vllm_importance_sampling_correction": True, "entropy_coef": 0.0, "use_adaptive_entropy": False,
                "use_bias_correction_kl": True, "multi_objective_aggregation": "sum_then_normalize"}
PAGE_SETTINGS = {
    "cispo": {"epsilon_high": 5.0},                        # ScaleRL's ε_max, as TRL's help recommends
    "luspo": {"importance_sampling_level": "sequence"},    # TRL warns unless sequence-level (LUSPO's setup)
}
PAGE_SETTINGS_PAPERS = {"cispo": "scalerl", "luspo": "gspo"}

# which loss_type / scale_rewards for which goal, each with the papers it rests on (keys of PAPERS)
GUIDE = (
    ("TRL's default: every token of the step weighs the same, whatever its completion's length", "dapo",
     ("dapo",)),
    ("reproduce the original GRPO (each completion weighs the same; short ones' tokens weigh more)",
     "grpo, scale_rewards=\"group\"", ("deepseekmath",)),
    ("a normaliser that does not move with the batch's token count; no question-level difficulty bias",
     "dr_grpo, scale_rewards=\"none\"", ("dr_grpo",)),
    ("keep a gradient on tokens whose ratio PPO's clip would drop (off-policy updates)",
     "cispo with epsilon_high=5", ("minimax_m1", "scalerl")),
    ("a smooth gate instead of PPO's hard clip, per-completion means as grpo", "sapo", ("sapo",)),
    ("one ratio per completion (sequence level), each completion's loss scaled by its length",
     "luspo with importance_sampling_level=\"sequence\"", ("gspo", "luspo")),
    ("one ratio per completion, a smooth asymmetric weight instead of a clip", "vespo", ("vespo",)),
    ("one advantage scale for the whole batch, so a group whose rewards barely differ is not blown up",
     "scale_rewards=\"batch\"", ("lite_ppo",)),
    ("a token mean per micro-batch: its weights change with how the step is cut (§3), as TRL's help warns",
     "bnpo", ()),
)


def family_members(family: str) -> list[str]:
    """The loss types that share `family`'s normaliser, in LOSS_TYPES order."""
    if family not in FAMILIES:
        raise RLLossError(f"unknown family {family!r}; expected one of {', '.join(FAMILIES)}")
    return [name for name, lt in LOSS_TYPES.items() if lt.family == family]


def loss_type(name: str) -> LossType:
    """LOSS_TYPES[name], or an RLLossError naming the known ones."""
    if name not in LOSS_TYPES:
        raise RLLossError(f"unknown loss_type {name!r}; TRL 1.16.0 has {', '.join(LOSS_TYPES)}")
    return LOSS_TYPES[name]


def positive_int(name: str, value) -> int:
    """`value` as an int, or an RLLossError unless it is a positive whole number."""
    if isinstance(value, bool) or int(value) != value or int(value) < 1:
        raise RLLossError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def as_mask(mask) -> torch.Tensor:
    """A 2-D 0/1 mask (rows × completion positions) as float64, or an RLLossError."""
    m = torch.as_tensor(mask, dtype=torch.float64)
    if m.dim() != 2:
        raise RLLossError(f"mask must be 2-D (rows × completion positions), got shape {tuple(m.shape)}")
    if not torch.all((m == 0) | (m == 1)):
        raise RLLossError("mask must hold only 0 and 1")
    return m


def settings_for(name: str, page: bool = False) -> dict:
    """The GRPOConfig fields _compute_loss reads, at TRL's defaults or (page=True) with PAGE_SETTINGS applied."""
    loss_type(name)
    return {**TRL_DEFAULTS, **(PAGE_SETTINGS.get(name, {}) if page else {})}


def gradient_factor(name: str, settings: dict | None = None) -> float:
    """c in d loss / d log pi_it = -c A_i w_it at ratio 1: min(1, epsilon_high) for cispo (the trainer's
    epsilon_high is GRPOConfig's, or `epsilon` when that is None), 1 for every other loss type (PPO's clip does not
    bind at ratio 1, sapo's gate 4/τ·σ(τ(r − 1)) has slope 1 there, vespo's Gamma weight is 1)."""
    s = settings_for(name) if settings is None else settings
    if name != "cispo":
        loss_type(name)
        return 1.0
    eps_high = s["epsilon"] if s["epsilon_high"] is None else s["epsilon_high"]
    return float(min(1.0, eps_high))


def token_loss_at_ratio_one(name: str, adv, log_prob: float, settings: dict | None = None) -> torch.Tensor:
    """Each row's per-token loss value l_i at ratio 1 (the same on every token of a row) when every active token has
    log-probability `log_prob`: -A_i (grpo, bnpo, dr_grpo, dapo, luspo), -(2/τ_i) A_i (sapo: σ(0)·4/τ with τ the
    positive or negative temperature by the advantage's sign), -c A_i log pi (cispo), -A_i log pi (vespo: φ(1) = 1)."""
    s = settings_for(name) if settings is None else settings
    a = torch.as_tensor(adv, dtype=torch.float64).reshape(-1)
    if name == "sapo":
        tau = torch.where(a > 0, torch.tensor(s["sapo_temperature_pos"], dtype=torch.float64),
                          torch.tensor(s["sapo_temperature_neg"], dtype=torch.float64))
        return -(2 / tau) * a
    if name in ("cispo", "vespo"):
        return -gradient_factor(name, s) * a * float(log_prob)
    loss_type(name)
    return -a


# --------------------------------------------------------------------------------------------------
# The weights
# --------------------------------------------------------------------------------------------------

def microbatch_weights(mask, name: str, *, max_completion_length: int | None = None, accumulation_steps: int = 1,
                       num_processes: int = 1, steps_per_generation: int | None = None,
                       num_items_in_batch: float | None = None) -> torch.Tensor:
    """w_it of one micro-batch's loss sum_it w_it l_it in training mode (module docstring's table), float64 (B, T).
    A row with no active token counts in B (TRL's `.mean()` over rows and `size(0)`) but weighs nothing;
    `num_items_in_batch` (N) is needed by the global-token-mean family only, `max_completion_length` (L) by
    dr_grpo only; `steps_per_generation` defaults to `accumulation_steps` (TRL's default)."""
    fam = loss_type(name).family
    m = as_mask(mask)
    K = positive_int("accumulation_steps", accumulation_steps)
    P = positive_int("num_processes", num_processes)
    S = K if steps_per_generation is None else positive_int("steps_per_generation", steps_per_generation)
    B = m.shape[0]
    if fam == "sequence_mean":
        return m / (m.sum(1, keepdim=True).clamp(min=1.0) * B * K)
    if fam == "local_token_mean":
        return m / (m.sum().clamp(min=1.0) * K)
    if fam == "constant":
        if max_completion_length is None:
            raise RLLossError("dr_grpo divides by rows × max_completion_length: pass max_completion_length")
        L = positive_int("max_completion_length", max_completion_length)
        return m / (B * L * K)
    if fam == "global_token_mean":
        if num_items_in_batch is None:
            raise RLLossError(f"{name} divides by num_items_in_batch (the generation batch's active tokens over "
                              "all processes): pass it")
        return m / (max(float(num_items_in_batch), 1.0) / P * K / S)
    return m / (B * K)                                        # sequence_sum


def microbatch_loss(per_token_loss, mask, name: str, **kw) -> torch.Tensor:
    """sum_it w_it l_it: one micro-batch's loss as TRL reduces it (`kw` as for microbatch_weights)."""
    w = microbatch_weights(mask, name, **kw)
    l = torch.as_tensor(per_token_loss, dtype=torch.float64)
    if l.shape != w.shape:
        raise RLLossError(f"per_token_loss has shape {tuple(l.shape)}, the mask {tuple(w.shape)}")
    return (w * l).sum()


def step_weights(masks, name: str, *, max_completion_length: int | None = None,
                 steps_per_generation: int | None = None, num_items_in_batch: float | None = None) -> list:
    """Each token's weight in one optimiser step's gradient: masks[p][k] is micro-batch k of process p (P processes
    of K micro-batches each); micro-batch weights (microbatch_weights) divided by P, as DDP averages the processes'
    gradients and accumulation sums the micro-batches. N defaults to every given token, which is TRL's count when
    the generation batch is this step (S = K); for another S pass the generation batch's `num_items_in_batch`."""
    P = len(masks)
    if P == 0 or any(len(p) != len(masks[0]) or len(p) == 0 for p in masks):
        raise RLLossError("masks must be a non-empty list per process, every process with the same number of "
                          f"micro-batches; got {[len(p) for p in masks]}")
    K = len(masks[0])
    S = K if steps_per_generation is None else positive_int("steps_per_generation", steps_per_generation)
    if num_items_in_batch is None:
        if S != K:
            raise RLLossError(f"steps_per_generation {S} != accumulation steps {K}: the generation batch is not this "
                              "step, so pass its num_items_in_batch")
        num_items_in_batch = float(sum(as_mask(m).sum() for p in masks for m in p))
    return [[microbatch_weights(m, name, max_completion_length=max_completion_length, accumulation_steps=K,
                                num_processes=P, steps_per_generation=S, num_items_in_batch=num_items_in_batch) / P
             for m in p] for p in masks]


def completion_mask(lengths, max_completion_length: int) -> torch.Tensor:
    """Right-padded (H, L) mask: row i has lengths[i] active tokens."""
    L = positive_int("max_completion_length", max_completion_length)
    n = [positive_int("lengths", v) for v in lengths]
    if max(n) > L:
        raise RLLossError(f"a completion of {max(n)} tokens is longer than max_completion_length {L}")
    return (torch.arange(L)[None, :] < torch.tensor(n)[:, None]).to(torch.float64)


def split_step(mask, rows_per_microbatch: int, num_processes: int = 1) -> list:
    """masks[p][k] as TRL deals rows: process p takes the p-th contiguous block of H / P rows, split into micro-batches
    of B rows in order (TRL shuffles the rows of a generation batch before splitting; here the order is kept)."""
    m = as_mask(mask)
    B, P = positive_int("rows_per_microbatch", rows_per_microbatch), positive_int("num_processes", num_processes)
    R = m.shape[0]
    if R % (B * P):
        raise RLLossError(f"{R} rows do not split into {P} process(es) × micro-batches of {B} rows")
    K = R // (B * P)
    return [[m[(p * K + k) * B:(p * K + k + 1) * B] for k in range(K)] for p in range(P)]


def flat_step_weights(masks, name: str, **kw) -> torch.Tensor:
    """step_weights stacked back into the (H, L) layout split_step came from."""
    return torch.cat([w for p in step_weights(masks, name, **kw) for w in p])


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
    as TRL's nanstd; TRL gathers every process's rewards first, so it is the std over all processes). Mirrors
    GRPOTrainer._generate_and_score_completions with one reward function, multi_objective_aggregation =
    "sum_then_normalize" (the default) and no unscorable (NaN) reward; MIRRORED_ADVANTAGE_LINES are its lines."""
    scale = normalise_scale_rewards(scale_rewards)
    k = positive_int("num_generations", num_generations)
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
# The papers: history and guide
# --------------------------------------------------------------------------------------------------

def history_rows() -> list[dict]:
    """Each paper behind a loss_type or scale_rewards option, by arXiv month: what TRL took from it."""
    rows = []
    for key, p in sorted(PAPERS.items(), key=lambda kv: kv[1].arxiv):
        took = [f"loss_type=\"{n}\"" for n, lt in LOSS_TYPES.items() if lt.paper == key]
        took += [f"scale_rewards=\"{s}\"" for s, k in SCALE_REWARDS_PAPERS.items() if k == key]
        took += [f"{', '.join(f'{k}={v!r}' for k, v in s.items())} (the page's {name} setting)"
                 for name, s in PAGE_SETTINGS.items() if PAGE_SETTINGS_PAPERS[name] == key]
        rows.append({"month": p.month, "paper": p.name, "arxiv": p.arxiv, "in TRL": ", ".join(took)})
    return rows


def guide_rows() -> list[dict]:
    """GUIDE as table rows: the goal, the setting and its sources with their months."""
    return [{"goal": goal, "setting": setting,
             "source": "; ".join(f"{PAPERS[k].name} ({PAPERS[k].month}, arXiv {PAPERS[k].arxiv})" for k in keys)
             or "TRL's own variant (no paper)"}
            for goal, setting, keys in GUIDE]
