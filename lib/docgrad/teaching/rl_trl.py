"""Page 01d against the installed TRL: excerpts of its GRPO source (found by their text, with line numbers), the
loss types, defaults and papers it has, and its own `GRPOTrainer._compute_loss` run with no model.

`trl_compute_loss` calls the installed `_compute_loss` on a stub trainer: the log-probabilities it returns are a
tensor with a gradient, the old ones equal them (ratio 1), the settings are GRPOConfig's defaults (read from the
installed dataclass) with the given overrides, no KL term and no entropy bonus unless set. It returns TRL's loss and
its push -d loss / d log pi on every token, which `rl_losses` predicts (c A_i w_it). `trl_step` runs it on every
micro-batch of every process of a step, `trl_loss_table` for every loss type at TRL's defaults and at the page's
settings (rl_losses.PAGE_SETTINGS).
"""

from __future__ import annotations

import dataclasses
import re
from collections import defaultdict
from pathlib import Path

import torch
import trl
from trl import GRPOConfig
from trl.trainer.grpo_trainer import GRPOTrainer

from docgrad.presentation.evidence import RESULT_BOX_WORDS
from docgrad.teaching.rl_losses import (DEFAULT_LOSS_TYPE, DEFAULT_SCALE_REWARDS, LOSS_TYPES, MIRRORED_ADVANTAGE_LINES,
                                        PAGE_SETTINGS, PAPERS, TRL_DEFAULTS, RLLossError, as_mask, completion_mask,
                                        flat_step_weights, gradient_factor, loss_type, positive_int, settings_for,
                                        split_step, token_loss_at_ratio_one)
from docgrad.teaching.worked import sig


def trl_version() -> str:
    return trl.__version__


# --------------------------------------------------------------------------------------------------
# The installed source: excerpts, the loss types, defaults and papers
# --------------------------------------------------------------------------------------------------

def trl_source_path(module: str = "trainer/grpo_trainer.py") -> Path:
    """The installed TRL's source file `module` (relative to the trl package)."""
    path = Path(trl.__file__).parent / module
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
    per-token losses and what multiplies them, when the ratio is 1, the count `num_items_in_batch`, the split of a
    generation batch into micro-batches, the flag telling the Trainer not to divide by the accumulation steps
    again, epsilon_high's fallback, the rewards gathered over processes, the advantages (`scale_rewards` and
    `normalize_then_sum`), and GRPOConfig's mapping of True/False and default steps_per_generation."""
    trainer = trl_source_path("trainer/grpo_trainer.py")
    config = trl_source_path("trainer/grpo_config.py")
    after = "def _compute_loss("
    return {
        "normalisers": source_excerpt(trainer, 'mode = "train" if self.model.training else "eval"', "Unknown loss type",
                                      after=after),
        "token_losses": source_excerpt(trainer, 'if self.loss_type == "cispo":', "Unknown loss type", after=after),
        "token_factors": source_excerpt(trainer, "per_token_loss = per_token_loss * off_policy_mask",
                                        "per_token_loss = per_token_loss + self.beta * per_token_kl", after=after),
        "ratio_one": source_excerpt(trainer, "When num_iterations == 1 and steps_per_generation <=",
                                    "old_per_token_logps = per_token_logps.detach() if", after=after),
        "num_items_in_batch": source_excerpt(trainer, "loss_mask = completion_mask if tool_mask is None",
                                             "num_items_in_batch = self.accelerator.gather("),
        "micro_batches": source_excerpt(trainer, "generation_batch = shuffle_sequence_dict(generation_batch)",
                                        "generation_batches = split_tensor_dict(", after="def _prepare_inputs("),
        "scaled_for_accumulation": source_excerpt(trainer, "loss_is_scaled_for_ga = True", "loss_is_scaled_for_ga"),
        "epsilon_high": source_excerpt(trainer, "self.epsilon_low = args.epsilon",
                                       "self.epsilon_high = args.epsilon_high if"),
        "rewards_gathered": source_excerpt(trainer, "rewards_per_func = gather(rewards_per_func)",
                                           "rewards_per_func = gather(rewards_per_func)"),
        "advantages": source_excerpt(trainer, "mean_grouped_rewards = torch.nanmean(",
                                     "advantages = advantages / (std_rewards + 1e-4)",
                                     after="def _generate_and_score_completions("),
        "normalize_then_sum": source_excerpt(trainer, 'elif self.multi_objective_aggregation == "normalize_then_sum":',
                                             "advantages = (rewards - torch.nanmean(rewards))",
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


def config_defaults() -> dict:
    """Every GRPOConfig field's default, read from the installed dataclass."""
    return {f.name: f.default if f.default is not dataclasses.MISSING else
            f.default_factory() if f.default_factory is not dataclasses.MISSING else None
            for f in dataclasses.fields(GRPOConfig)}


def papers_cited() -> dict:
    """arXiv id -> whether the installed GRPOConfig or GRPOTrainer source cites it (a huggingface.co/papers link)."""
    text = "".join(trl_source_path(f"trainer/grpo_{m}.py").read_text() for m in ("config", "trainer"))
    return {p.arxiv: f"papers/{p.arxiv}" in text for p in PAPERS.values()}


def explained_matches_installed() -> dict:
    """Raises RLLossError naming the difference when the installed TRL's loss types, defaults (loss_type,
    scale_rewards and the fields of rl_losses.TRL_DEFAULTS), advantage lines or cited papers are not the ones this
    page explains; returns what was read."""
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
    installed = config_defaults()
    differ = {k: (installed.get(k, "absent"), v) for k, v in TRL_DEFAULTS.items() if installed.get(k, "absent") != v}
    if differ:
        raise RLLossError(f"the installed GRPOConfig's defaults differ from page 01d's (installed, explained): "
                          f"{differ}; update rl_losses.TRL_DEFAULTS and the page")
    missing = [line for line in MIRRORED_ADVANTAGE_LINES if line not in advantage_lines]
    if missing:
        raise RLLossError(f"the installed TRL's advantage lines changed (missing {missing}): re-read "
                          "_generate_and_score_completions and update rl_losses.advantages")
    uncited = [a for a, cited in papers_cited().items() if not cited]
    if uncited:
        raise RLLossError(f"the installed TRL's GRPO source no longer cites arXiv {uncited}: re-read its help")
    return got


# --------------------------------------------------------------------------------------------------
# TRL's own _compute_loss, run on a stub trainer
# --------------------------------------------------------------------------------------------------

class StubAttributeError(AttributeError):
    """TRL's code read an attribute the stub trainer does not set."""


class _Strict:
    """Attributes as given; reading any other one names it (an AttributeError, so hasattr still works)."""

    def __init__(self, what: str, **attrs):
        self.__dict__.update(attrs)
        self.__dict__["_what"] = what

    def __getattr__(self, name):
        raise StubAttributeError(f"TRL's GRPOTrainer._compute_loss read {self._what}.{name}, which "
                                 "docgrad.teaching.rl_trl's stub does not set: the installed TRL changed that method")


class _Accelerator:
    """One process's view of `num_processes` processes; gather and reduce are the identity (the local tensors)."""

    def __init__(self, num_processes: int):
        self.num_processes = num_processes
        self.sync_gradients = True

    def gather(self, x):
        return x

    def gather_for_metrics(self, x):
        return x

    def reduce(self, x, reduction="sum"):
        return x


def trl_compute_loss(mask, name: str, *, advantages=None, log_prob: float = 0.0, settings: dict | None = None,
                     max_completion_length: int = 16, accumulation_steps: int = 1, num_processes: int = 1,
                     steps_per_generation: int | None = None, num_items_in_batch: float | None = None) -> tuple:
    """(loss, push): the installed `GRPOTrainer._compute_loss` on one micro-batch in training mode, every active
    token's log-probability `log_prob` (with a gradient; the old ones equal, ratio 1), the rows' `advantages`
    (default 1), GRPOConfig's defaults overridden by `settings`; push = -d loss / d log pi (float64, B × T)."""
    loss_type(name)
    m = as_mask(mask).to(torch.float32)
    Bn, T = m.shape
    K = positive_int("accumulation_steps", accumulation_steps)
    P = positive_int("num_processes", num_processes)
    S = K if steps_per_generation is None else positive_int("steps_per_generation", steps_per_generation)
    N = float(m.sum()) if num_items_in_batch is None else float(num_items_in_batch)
    a = torch.ones(Bn) if advantages is None else torch.as_tensor(advantages, dtype=torch.float32).reshape(-1)
    if a.numel() != Bn:
        raise RLLossError(f"one advantage per row: {a.numel()} for {Bn} rows")
    args = _Strict("args", **{**config_defaults(), **TRL_DEFAULTS, **(settings or {}), "loss_type": name,
                              "max_completion_length": max_completion_length, "gradient_accumulation_steps": K,
                              "steps_per_generation": S})
    if args.beta != 0.0 or args.entropy_coef != 0.0 or args.use_adaptive_entropy or args.use_vllm \
            or args.top_entropy_quantile < 1.0 or args.off_policy_mask_threshold is not None:
        raise RLLossError("trl_compute_loss runs without a model: no KL term (beta 0), no entropy bonus, no vLLM, no "
                          "entropy or off-policy mask")
    logps = torch.full((Bn, T), float(log_prob), requires_grad=True)
    stub = _Strict(
        "self", args=args, loss_type=name, max_completion_length=max_completion_length,
        current_gradient_accumulation_steps=K, accelerator=_Accelerator(P), model=_Strict("model", training=True),
        top_entropy_quantile=args.top_entropy_quantile, off_policy_mask_threshold=args.off_policy_mask_threshold,
        beta=args.beta, epsilon_low=args.epsilon,
        epsilon_high=args.epsilon_high if args.epsilon_high is not None else args.epsilon,  # GRPOTrainer.__init__
        use_vllm=args.use_vllm, vllm_importance_sampling_correction=args.vllm_importance_sampling_correction,
        importance_sampling_level=args.importance_sampling_level, _entropy_bonus_enabled=False,
        aux_loss_enabled=False, _metrics=defaultdict(lambda: defaultdict(list)),
        get_gamma_weights=GRPOTrainer.get_gamma_weights,
        _get_per_token_logps_and_entropies=lambda *x, **k: (logps, torch.zeros(Bn, T), None))
    inputs = {"prompt_ids": torch.zeros(Bn, 1, dtype=torch.long), "prompt_mask": torch.ones(Bn, 1, dtype=torch.long),
              "completion_ids": torch.zeros(Bn, T, dtype=torch.long), "completion_mask": m.long(),
              "advantages": a, "num_items_in_batch": torch.tensor(N)}
    loss = GRPOTrainer._compute_loss(stub, None, inputs)
    (grad,) = torch.autograd.grad(loss, logps)
    return float(loss.detach()), (-grad).to(torch.float64)


def trl_microbatch_weights(mask, name: str, *, settings: dict | None = None, **kw) -> torch.Tensor:
    """TRL's push per unit advantage at ratio 1, c · w_it (rl_losses.microbatch_weights × gradient_factor): every
    advantage 1; `kw` as for trl_compute_loss."""
    return trl_compute_loss(mask, name, settings=settings, **kw)[1]


def trl_step(lengths, adv, name: str, *, max_completion_length: int, rows_per_microbatch: int,
             num_processes: int = 1, log_prob: float = -1.0, settings: dict | None = None) -> dict:
    """TRL's `_compute_loss` on every micro-batch of one step (completions of `lengths` with advantages `adv`, dealt
    as rl_losses.split_step does, S = K): the step's loss (1/P) sum_p sum_k loss_pk, whose gradient is the step's
    (accumulation sums, DDP averages), and the (H, L) push on every token."""
    L = positive_int("max_completion_length", max_completion_length)
    a = torch.as_tensor(adv, dtype=torch.float64).reshape(-1)
    masks = split_step(completion_mask(lengths, L), rows_per_microbatch, num_processes)
    P, K, B = len(masks), len(masks[0]), positive_int("rows_per_microbatch", rows_per_microbatch)
    N = float(sum(lengths))
    loss, pushes = 0.0, []
    for p, proc in enumerate(masks):
        for k, m in enumerate(proc):
            row0 = (p * K + k) * B
            value, push = trl_compute_loss(m, name, advantages=a[row0:row0 + B], log_prob=log_prob, settings=settings,
                                           max_completion_length=L, accumulation_steps=K, num_processes=P,
                                           num_items_in_batch=N)
            loss += value / P
            pushes.append(push / P)
    return {"loss": loss, "push": torch.cat(pushes)}


def float32_zero(loss: float, push: torch.Tensor) -> float:
    """0 for a loss below float32's resolution of its terms (|loss| < 1e-6 · sum |push|, e.g. grpo's sum of
    advantages that is 0 in every group), else the loss."""
    return 0.0 if abs(loss) < 1e-6 * max(float(push.abs().sum()), 1e-30) else loss


def settings_text(settings: dict) -> str:
    """The settings that differ from TRL's defaults, as a GRPOConfig call would write them ('defaults' if none)."""
    diff = {k: v for k, v in settings.items() if TRL_DEFAULTS.get(k, "absent") != v}
    return ", ".join(f"{k}={v!r}" for k, v in diff.items()) or "defaults"


def trl_loss_table(lengths, adv, *, max_completion_length: int, rows_per_microbatch: int, num_processes: int = 1,
                   log_prob: float = -1.0) -> list[dict]:
    """Per loss type, TRL's own loss on the worked step at TRL's defaults and at the page's settings (rl_losses.
    PAGE_SETTINGS), beside rl_losses' prediction sum_it w_it l_it; the push's size sum |d loss / d log pi| over
    dapo's at the defaults (the factor an SGD learning rate is multiplied by); the largest difference between TRL's
    push and rl_losses' c A_i w_it."""
    L = positive_int("max_completion_length", max_completion_length)
    kw = dict(max_completion_length=L, rows_per_microbatch=rows_per_microbatch, num_processes=num_processes)
    a = torch.as_tensor(adv, dtype=torch.float64).reshape(-1)
    masks = split_step(completion_mask(lengths, L), rows_per_microbatch, num_processes)
    runs = {}
    for name in LOSS_TYPES:
        w = flat_step_weights(masks, name, max_completion_length=L)
        for page in (False, True):
            s = settings_for(name, page)
            got = trl_step(lengths, a, name, log_prob=log_prob, settings=s, **kw)
            predicted_push = gradient_factor(name, s) * a[:, None] * w
            predicted_loss = float((w * token_loss_at_ratio_one(name, a, log_prob, s)[:, None]).sum())
            runs[name, page] = {"settings": settings_text(s), "loss": float32_zero(got["loss"], got["push"]),
                                "predicted": predicted_loss,
                                "size": float(got["push"].abs().sum()),
                                "diff": float((got["push"] - predicted_push).abs().max())}
    dapo = runs[DEFAULT_LOSS_TYPE, False]["size"]
    return [{"loss_type": name, "defaults": runs[name, False]["settings"], "loss_defaults": runs[name, False]["loss"],
             "page": runs[name, True]["settings"] if name in PAGE_SETTINGS else "as defaults",
             "loss_page": runs[name, True]["loss"],
             "predicted_defaults": runs[name, False]["predicted"], "predicted_page": runs[name, True]["predicted"],
             "size_defaults": runs[name, False]["size"] / dapo, "size_page": runs[name, True]["size"] / dapo,
             "max_push_diff": max(runs[name, False]["diff"], runs[name, True]["diff"])} for name in LOSS_TYPES]


def answer_box(table: list[dict]) -> str:
    """The page's take-away box (a Markdown block quote within the result box's word limit), its numbers from
    `trl_loss_table`'s rows on the worked batch and the installed TRL's version and defaults."""
    rows = {r["loss_type"]: r for r in table}
    lines = [
        f"**What to take away.** TRL {trl_version()}, its `_compute_loss` run on the batch below.",
        "- `loss_type` sets a token's weight w_it in the step's gradient, `scale_rewards` the advantage A_i's "
        "divisor; a token is pushed by A_i·w_it.",
        "- `dapo` (the default) and `vespo` weigh every token 1/N, so long completions weigh more in total; N is "
        "the step's tokens only when steps_per_generation = gradient_accumulation_steps (default).",
        f"- `cispo` at the defaults weighs {sig(rows['cispo']['size_defaults'])}/N: `epsilon_high` falls back to "
        f"`epsilon` = {sig(TRL_DEFAULTS['epsilon'])}; set it to {sig(PAGE_SETTINGS['cispo']['epsilon_high'])}.",
        "- `grpo` and `sapo` give each completion the same total: short ones' tokens weigh more.",
        f"- `dr_grpo` and `luspo` scale the gradient by mean length / L and mean length (here "
        f"{sig(rows['dr_grpo']['size_defaults'])}, {sig(rows['luspo']['size_defaults'])} × dapo's): retune the "
        "learning rate.",
    ]
    words = sum(len(x.split()) for x in lines)
    if words > RESULT_BOX_WORDS:
        raise RLLossError(f"the answer box has {words} words, more than {RESULT_BOX_WORDS}")
    return "\n".join("> " + x for x in lines)
