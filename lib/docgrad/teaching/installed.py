"""What the installed libraries do, read from their source when a page executes.

A teaching page's statement about transformers, TRL or PyTorch is either computed by running the installed code
or shown as an excerpt of the installed source: the file (relative to site-packages), its line numbers and the
lines, found by a pattern at execution time (`excerpt`), never typed. A statement that holds only for some
versions carries its range (`count_rule`), and a page asserts that the installed library does what the range
says for its version (`trainer_count` against `expected_count`).

    ex = excerpt("transformers.trainer.Trainer._get_num_items_in_batch", r"labels\\.ne\\(-100\\)")
    ex.cite()        ->  "transformers/trainer.py, line 2343, transformers 5.24.0"
"""

from __future__ import annotations

import importlib
import inspect
import re
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from docgrad.teaching.reduction import IGNORE_INDEX, ReductionError


class SourceChanged(ReductionError):
    """A line a page quotes from an installed library is not in its source: the library changed, and the page's
    description must be read again against the new source."""


# --------------------------------------------------------------------------------------------------
# Excerpts of the installed source
# --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Excerpt:
    """Lines `first`..`last` (1-based) of `file` (relative to site-packages) in `package` `version`."""

    target: str
    package: str
    version: str
    file: str
    first: int
    last: int
    lines: tuple[str, ...]

    def cite(self) -> str:
        where = f"line {self.first}" if self.first == self.last else f"lines {self.first}–{self.last}"
        return f"{self.file}, {where}, {self.package} {self.version}"

    def code(self) -> str:
        """The lines as one inline-code string (stripped and joined)."""
        return " ".join(ln.strip() for ln in self.lines)

    def block(self) -> str:
        """A Markdown code block with the file's line numbers."""
        width = len(str(self.last))
        body = "\n".join(f"{n:>{width}}  {ln}" for n, ln in zip(range(self.first, self.last + 1), self.lines))
        return f"`{self.file}` ({self.package} {self.version}):\n\n```python\n{body}\n```"

    def to_dict(self) -> dict:
        return {"target": self.target, "file": self.file, "first": self.first, "last": self.last,
                "lines": list(self.lines), "package": self.package, "version": self.version}


def package_version(package: str) -> str:
    """The installed version of a distribution ('not installed' when absent)."""
    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed"


def resolve(target: str):
    """The object named by a dotted path: the longest importable module prefix, then attributes
    ('transformers.trainer.Trainer.compute_loss')."""
    parts = target.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for name in parts[i:]:
            try:
                obj = getattr(obj, name)
            except AttributeError:
                raise SourceChanged(f"{target}: the installed {parts[0]} {package_version(parts[0])} has no "
                                    f"{name!r} in {'.'.join(parts[:i])}") from None
        return obj
    raise SourceChanged(f"{target}: no module of it can be imported")


def _site_relative(path: str) -> str:
    p = Path(path)
    for i, part in enumerate(p.parts):
        if part in ("site-packages", "dist-packages"):
            return "/".join(p.parts[i + 1:])
    return p.name


def excerpt(target: str, pattern: str, context: int = 0) -> Excerpt:
    """The line(s) of the installed source of `target` (a dotted path to a module, class or function) matching the
    regular expression `pattern` (which may span lines), with `context` lines either side. Raises SourceChanged
    when the pattern is not there."""
    obj = resolve(target)
    if inspect.isfunction(obj) or inspect.ismethod(obj):
        obj = inspect.unwrap(obj)               # a decorated method: the source of the function it wraps
    try:
        lines, start = inspect.getsourcelines(obj)
        path = inspect.getsourcefile(obj)
    except (OSError, TypeError) as e:
        raise SourceChanged(f"{target}: its source cannot be read ({e})") from None
    start = max(start, 1)            # a module's source starts at line 0 in getsourcelines
    text = "".join(lines)
    m = re.search(pattern, text)
    if m is None:
        pkg = target.split(".")[0]
        raise SourceChanged(f"{target} in {pkg} {package_version(pkg)}: no line matches {pattern!r}; the page's "
                            f"statement was written against another version: read the source again")
    a = text.count("\n", 0, m.start())
    b = text.count("\n", 0, max(m.end() - 1, m.start()))
    a, b = max(0, a - context), min(len(lines) - 1, b + context)
    pkg = target.split(".")[0]
    return Excerpt(target, pkg, package_version(pkg), _site_relative(path), start + a, start + b,
                   tuple(ln.rstrip("\n") for ln in lines[a:b + 1]))


@dataclass(frozen=True)
class Claim:
    """A statement a page makes about an installed library, and the source line(s) that show it."""

    target: str
    pattern: str
    meaning: str


def read_claims(claims: dict[str, Claim], context: int = 0) -> dict[str, dict]:
    """For each claim: its meaning, whether its line is in the installed source, and the excerpt (file, lines)."""
    out = {}
    for key, c in claims.items():
        try:
            ex = excerpt(c.target, c.pattern, context)
            out[key] = {"meaning": c.meaning, "found": True, **ex.to_dict(), "cite": ex.cite(), "code": ex.code()}
        except SourceChanged as e:
            out[key] = {"meaning": c.meaning, "found": False, "target": c.target, "error": str(e)}
    return out


def claims_markdown(read: dict[str, dict]) -> str:
    """One bullet per claim: what it means, the installed line(s) and where they are."""
    return "\n".join(f"* {c['meaning']}: `{c['code']}` ({c['cite']})" if c["found"]
                     else f"* {c['meaning']}: **not found** ({c['error']})" for c in read.values())


def require(read: dict[str, dict]) -> None:
    """Stop a page whose quoted lines are not all in the installed source (the error names each one)."""
    missing = [c["error"] for c in read.values() if not c["found"]]
    if missing:
        raise SourceChanged("the installed libraries changed:\n" + "\n".join(missing))


# --------------------------------------------------------------------------------------------------
# What the pages quote, by topic
# --------------------------------------------------------------------------------------------------

TRAINER = "transformers.trainer.Trainer"

# page 01b: how the Trainer counts and normalises (gradient accumulation and data parallelism)
TRAINER_CLAIMS = {
    "count": Claim(f"{TRAINER}._get_num_items_in_batch", r"num_items_in_batch = sum\(labels\.ne\(-100\)\.sum\(\)",
                   "counts the targets (labels != -100) of all the microbatches of one optimiser step"),
    "shift": Claim(f"{TRAINER}._get_num_items_in_batch",
                   r'else batch\["labels"\]\[\.\.\., 1:\]\s*\n\s*if self\._loss_shifts_labels',
                   "counts a causal-LM loss's targets after the shift (labels[..., 1:]), a collator's "
                   "`shift_labels` as given"),
    "gather": Claim(f"{TRAINER}._get_num_items_in_batch",
                    r"if self\.args\.average_tokens_across_devices:\s*\n\s*if self\.args\.world_size > 1:\s*\n\s*"
                    r"num_items_in_batch = self\.accelerator\.gather\(num_items_in_batch",
                    "with average_tokens_across_devices and more than one process, sums the counts of all processes"),
    "count_divisor": Claim(f"{TRAINER}._get_num_items_in_batch",
                           r"num_items_in_batch = num_items_in_batch / \(\s*self\.get_tp_size\(\) \* "
                           r"self\.get_cp_size\(\) \* self\.get_sp_size\(\)\s*\)",
                           "divides the gathered count by the tensor-, context- and sequence-parallel sizes (the "
                           "processes that share one batch)"),
    "loss_scale": Claim(f"{TRAINER}.compute_loss",
                        r"loss_scale = self\.accelerator\.num_processes // self\.get_tp_size\(\)\s*\n\s*"
                        r"loss \*= loss_scale if self\.args\.n_gpu <= 1 else self\.args\.n_gpu",
                        "multiplies the loss by the number of processes divided by the tensor-parallel size "
                        "(nn.DataParallel: by n_gpu), undoing DDP's average over the processes that hold "
                        "different data"),
    "divide_by_count": Claim("transformers.loss.loss_utils.fixed_cross_entropy",
                             r"loss = loss / num_items_in_batch",
                             "the model's loss: summed cross-entropy divided by num_items_in_batch"),
    "scaled_rule": Claim(f"{TRAINER}.training_step",
                         r"loss_is_scaled_for_ga = \(\s*self\.model_accepts_loss_kwargs and num_items_in_batch is not "
                         r"None\s*\) or self\.compute_loss_func is not None",
                         "a loss counts as already normalised when the model accepts loss keyword arguments and got a "
                         "count, or when a `compute_loss_func` computed it"),
    "ga_divide": Claim(f"{TRAINER}.training_step",
                       r"if not loss_is_scaled_for_ga:\s*\n\s*loss = loss / self\.current_gradient_accumulation_steps",
                       "otherwise divides each microbatch's loss by the number of accumulation steps"),
    "accepts_attribute": Claim(f"{TRAINER}.__init__",
                               r'if hasattr\(unwrapped_model, "accepts_loss_kwargs"\):\s*\n\s*'
                               r"self\.model_accepts_loss_kwargs = unwrapped_model\.accepts_loss_kwargs",
                               "decides `model_accepts_loss_kwargs` from the model class's `accepts_loss_kwargs` "
                               "attribute first"),
    "scaled_attribute": Claim(TRAINER, r"loss_is_scaled_for_ga: bool \| None = None",
                              "a Trainer subclass that computes its own loss can say whether it is already normalised "
                              "(`loss_is_scaled_for_ga`; None: decided as above)"),
    "accepts_signature": Claim(f"{TRAINER}.__init__",
                               r"self\.model_accepts_loss_kwargs = any\(\s*k\.kind == inspect\.Parameter\.VAR_KEYWORD",
                               "and only for a class without it, from whether `forward` takes `**kwargs`"),
    "default_true": Claim("transformers.training_args.TrainingArguments",
                          r"average_tokens_across_devices: bool = field\(\s*default=True",
                          "`average_tokens_across_devices` defaults to True"),
}

# page 01c: packing (collators, the per-document mask, FlashAttention's boundaries)
PACKING_CLAIMS = {
    "flattening_labels": Claim("transformers.data.data_collator.DataCollatorWithFlattening.__call__",
                               r'batch\["labels"\] \+= \[separator_id\] \+ labels\[1:\]',
                               "`DataCollatorWithFlattening` replaces each document's first label by "
                               "`separator_id` (-100)"),
    "flattening_positions": Claim("transformers.data.data_collator.DataCollatorWithFlattening.__call__",
                                  r'batch\["position_ids"\] \+= \[self\.position_ids_start \+ i for i in range',
                                  "and restarts the position ids at every document"),
    "trl_labels": Claim("trl.trainer.sft_trainer.DataCollatorForLanguageModeling.torch_call",
                        r'output\["labels"\]\[output\["position_ids"\] == 0\] = -100',
                        "TRL's padding-free collator sets the label to -100 wherever a position id is 0"),
    "trl_cu_seq_lens": Claim("trl.trainer.sft_trainer.DataCollatorForLanguageModeling.torch_call",
                             r'seq_starts = \(output\["position_ids"\]\[0\] == 0\)\.nonzero\(\)\.flatten\(\)',
                             "and builds `cu_seq_lens` from the positions where a position id is 0"),
    "trl_seq_lengths": Claim("trl.trainer.sft_trainer.DataCollatorForLanguageModeling.torch_call",
                             r"position_ids = self\.get_position_ids_from_packed_seq_lengths\(batch_seq_lengths\)",
                             "with packing, from the `seq_lengths` of each packed row"),
    "packed_mask_conditions": Claim("transformers.masking_utils._preprocess_mask_arguments",
                                    r"if position_ids is not None and attention_mask is None and cache is None:",
                                    "eager and SDPA attention get a per-document mask from restarting position ids "
                                    "only with no attention mask and no cache"),
    "flash_batch_one": Claim("transformers.modeling_flash_attention_utils._is_packed_sequence",
                             r"if position_ids is None or batch_size != 1",
                             "FlashAttention infers document boundaries from position ids only for a batch of one "
                             "row"),
    "flash_varlen": Claim("transformers.modeling_flash_attention_utils._flash_attention_forward",
                          r"is_fa_with_varlen_kwargs = all\(x is not None for x in \(cu_seq_lens_q, cu_seq_lens_k, "
                          r"max_length_q, max_length_k\)\)",
                          "otherwise it needs the boundaries given as `cu_seq_lens_q/k` and `max_length_q/k`"),
}

# page 01c: what cross_entropy's mean divides by, in transformers' label smoother
CROSS_ENTROPY_CLAIMS = {
    "smoother_float32": Claim("transformers.trainer_pt_utils.LabelSmoother.__call__",
                              r"smoothed_loss = log_probs\.sum\(dim=-1, keepdim=True, dtype=torch\.float32\)",
                              "transformers' `LabelSmoother` sums its smoothing term in float32"),
    "smoother_denominator": Claim("transformers.trainer_pt_utils.LabelSmoother.__call__",
                                  r"if num_items_in_batch is None:\s*\n\s*denominator = padding_mask\.numel\(\) - "
                                  r"padding_mask\.long\(\)\.sum\(\)",
                                  "and divides by its count of non-ignored labels, or by the Trainer's "
                                  "`num_items_in_batch` when given"),
}

# page 01: masks derived from a token id (pad == EOS)
PAD_CLAIMS = {
    "mask_by_id": Claim("transformers.data.data_collator.DataCollatorForLanguageModeling.torch_call",
                        r"labels\[labels == self\.tokenizer\.pad_token_id\] = -100",
                        "transformers' `DataCollatorForLanguageModeling(mlm=False)` sets every label equal to the "
                        "pad token id to -100"),
    "trl_pads_by_position": Claim("trl.trainer.sft_trainer.DataCollatorForLanguageModeling.torch_call",
                                  r'output\["labels"\] = pad\(\s*labels, padding_value=-100',
                                  "TRL's collator pads the labels with -100 where it adds positions, whatever the "
                                  "token id"),
    "trl_pad_is_eos": Claim("trl.trainer.sft_trainer.SFTTrainer.__init__",
                            r"pad_token = args\.pad_token or self\._tokenizer\.pad_token or "
                            r"self\._tokenizer\.eos_token",
                            "TRL's SFTTrainer uses the EOS token as the pad token when the tokenizer has none"),
}


# --------------------------------------------------------------------------------------------------
# Which classes decide `model_accepts_loss_kwargs` by their attribute
# --------------------------------------------------------------------------------------------------

_CLASS_OR_ATTR = re.compile(r"^class (\w+)\(|^    accepts_loss_kwargs\s*=\s*(\w+)", re.M)


def accepts_loss_kwargs_classes() -> list[dict]:
    """Every class of the installed transformers' models/*/modeling_*.py that sets `accepts_loss_kwargs` in its own
    body (a text scan, no import): model directory, class name, value. Subclasses inherit the value."""
    import transformers

    rows = []
    for f in sorted((Path(transformers.__file__).parent / "models").glob("*/modeling_*.py")):
        text = f.read_text()
        if "accepts_loss_kwargs" not in text:
            continue
        cls = None
        for m in _CLASS_OR_ATTR.finditer(text):
            if m.group(1):
                cls = m.group(1)
            elif cls is not None:
                rows.append({"model": f.parent.name, "class": cls, "value": m.group(2)})
    return rows


def accepts_loss_kwargs_summary() -> dict:
    """How many classes set `accepts_loss_kwargs = False`: all, the generation heads (...ForConditionalGeneration)
    and the rest, with a few example names."""
    rows = [r for r in accepts_loss_kwargs_classes() if r["value"] == "False"]
    heads = [r["class"] for r in rows if r["class"].endswith("ForConditionalGeneration")]
    return {"version": package_version("transformers"), "false": len(rows), "generation_heads": len(heads),
            "other": len(rows) - len(heads), "examples": heads[:4],
            "true": sum(1 for r in accepts_loss_kwargs_classes() if r["value"] == "True")}


# --------------------------------------------------------------------------------------------------
# The target count num_items_in_batch: the rule by version, and the installed Trainer's count
# --------------------------------------------------------------------------------------------------

# How the Trainer counts the targets it passes as num_items_in_batch, by transformers release. Checked in the
# released wheels (the lines of Trainer.get_batch_samples / _get_num_items_in_batch): 4.45.2 passes no count;
# 4.46.0 and 4.46.1 count labels[..., 1:]; 4.46.2, 4.46.3, 4.47.0, 4.47.1, 4.48.0, 4.53.3, 4.54.0, 5.6.0 and 5.9.0
# count every label; 5.10.1, 5.11.0, 5.12.0, 5.18.0, 5.19.0, 5.20.0, 5.22.0 and 5.24.0 count labels[..., 1:] of a
# causal-LM loss (PR #46204). Releases between two checked ones are taken to be alike; 5.10.0 was not published.
COUNT_RULES = (
    ("0", "none", "no count: each microbatch's mean loss is divided by the accumulation steps"),
    ("4.46.0", "shifted", "labels[..., 1:] != -100 (the targets after the causal shift)"),
    ("4.46.2", "unshifted", "labels != -100, position 0 included (one more per row than the targets)"),
    ("5.10.1", "shifted", "labels[..., 1:] != -100 for a causal-LM loss (PR #46204)"),
)
COUNT_CHECKED = {"none": ["4.45.2"], "shifted": ["4.46.0", "4.46.1", "5.10.1", "5.11.0", "5.12.0", "5.18.0",
                                                  "5.19.0", "5.20.0", "5.22.0", "5.24.0"],
                 "unshifted": ["4.46.2", "4.46.3", "4.47.0", "4.47.1", "4.48.0", "4.53.3", "4.54.0", "5.6.0",
                               "5.9.0"]}


def count_ranges() -> list[dict]:
    """The count rules as release ranges for a page's prose: each rule with its first release and the last release
    checked before the next rule ('' for the last rule, which holds up to the newest release checked)."""
    out = []
    for i, (since, rule, how) in enumerate(COUNT_RULES):
        nxt = COUNT_RULES[i + 1][0] if i + 1 < len(COUNT_RULES) else None
        seen = [v for v in COUNT_CHECKED[rule] if _release(v) >= _release(since)
                and (nxt is None or _release(v) < _release(nxt))]
        last = max(seen, key=_release) if seen else since
        out.append({"rule": rule, "how": how, "since": since, "last_checked": last, "open": nxt is None,
                    "range": (f"from {since} on" if nxt is None else
                              f"before {nxt}" if since == "0" else f"{since} to {last}")})
    return out


def _release(v: str):
    from packaging.version import Version

    return Version(v)


def count_rule(transformers_version: str | None = None) -> dict:
    """The counting rule of a transformers release (default: the installed one): {rule, how, since, until}."""
    v = _release(transformers_version or package_version("transformers"))
    out = None
    for i, (since, rule, how) in enumerate(COUNT_RULES):
        if v >= _release(since):
            until = COUNT_RULES[i + 1][0] if i + 1 < len(COUNT_RULES) else None
            out = {"rule": rule, "how": how, "since": since, "until": until}
    return out


def expected_count(label_batches, rule: str) -> int | None:
    """num_items_in_batch under a rule, for the label tensors of the microbatches of one optimiser step."""
    if rule == "none":
        return None
    if rule == "shifted":
        return int(sum(int((lab[..., 1:] != IGNORE_INDEX).sum()) for lab in label_batches))
    if rule == "unshifted":
        return int(sum(int((lab != IGNORE_INDEX).sum()) for lab in label_batches))
    raise ReductionError(f"unknown count rule {rule!r}; expected none, shifted or unshifted")


def trainer_count(model, label_batches) -> int | None:
    """What the installed transformers.Trainer passes as num_items_in_batch for one optimiser step whose
    microbatches have these label tensors (rows x positions, -100 where nothing is predicted): a Trainer is built
    on `model` (one process, CPU) and its public `get_batch_samples` counts them as the training loop does."""
    import tempfile

    import torch
    from transformers import Trainer, TrainingArguments

    if not hasattr(Trainer, "get_batch_samples"):
        return None                         # before 4.46.0: the Trainer counts nothing
    with tempfile.TemporaryDirectory(prefix="docgrad-count-") as tmp:
        args = TrainingArguments(output_dir=tmp, use_cpu=True, report_to=[], per_device_train_batch_size=1,
                                 gradient_accumulation_steps=len(label_batches), disable_tqdm=True)
        trainer = Trainer(model=model, args=args)
        batches = [{"input_ids": torch.zeros_like(lab), "labels": lab} for lab in label_batches]
        try:
            _, n = trainer.get_batch_samples(iter(batches), len(batches), torch.device("cpu"))
        except TypeError:                   # 4.46-4.4x: get_batch_samples(epoch_iterator, num_batches)
            _, n = trainer.get_batch_samples(iter(batches), len(batches))
    return None if n is None else int(n)


def count_check(model, label_batches) -> dict:
    """The installed Trainer's count against the rule the page states for the installed version; `agrees` is
    False when the installed transformers counts otherwise (then the page's version range is wrong)."""
    rule = count_rule()
    got = trainer_count(model, label_batches)
    want = expected_count(label_batches, rule["rule"])
    ranges = {r: " and ".join(x["range"] for x in count_ranges() if x["rule"] == r)
              for r in ("none", "shifted", "unshifted")}
    return {"version": package_version("transformers"), **rule, "installed_count": got, "rule_count": want,
            "agrees": got == want, "shifted_count": expected_count(label_batches, "shifted"),
            "unshifted_count": expected_count(label_batches, "unshifted"), "ranges": ranges}
