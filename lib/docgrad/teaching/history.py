"""What changed when: the library behaviours the teaching pages rely on, each with its date, its source (pull
request, release, blog post, documentation), the first release that has it where that was checked, and the line
of the installed source that shows it today.

A release range ("first in 5.10.1, not in 5.9.0") was checked by reading the released wheels' source; a change
whose pull request was not identified names the release instead. `verify` reads each change's line from the
installed source (docgrad.teaching.installed), so the box a page shows says what the installed version does, and a
test fails when a line the box quotes is gone.
"""

from __future__ import annotations

from dataclasses import dataclass

from docgrad.teaching.installed import (PACKING_CLAIMS, TRAINER, TRAINER_CLAIMS, Claim, SourceChanged, excerpt,
                                        package_version)

TOPICS = ("accumulation", "data_parallel", "packing", "cross_entropy")
PR = "https://github.com/huggingface/transformers/pull/"
WHEEL = "https://pypi.org/project/transformers/"


@dataclass(frozen=True)
class Change:
    date: str                     # YYYY-MM: the month the pull request was opened, or the post or release published
    what: str
    source: str                   # a short name of the source
    url: str
    topics: tuple[str, ...]       # which of TOPICS it concerns (a page shows the changes of its topics)
    released: str = ""            # the release range, as checked in the released wheels ("" when not checked)
    check: Claim | None = None    # the line of the installed source that shows it today (None: nothing to read)


CHANGES = (
    Change("2024-08", "`DataCollatorWithFlattening` packs by position ids (restarting at every document), first for "
                      "FlashAttention-2", "Hugging Face blog, packing with FlashAttention-2",
           "https://huggingface.co/blog/packing-with-FA2", ("packing",), "transformers 4.44, as the post says",
           PACKING_CLAIMS["flattening_labels"]),
    Change("2024-10", "the gradient-accumulation fix, first part: the Trainer counts the targets of all the "
                      "microbatches of a step and passes them as `num_items_in_batch` (4.46.0 and 4.46.1 counted "
                      "`labels[..., 1:]`)", "transformers #34191", PR + "34191", ("accumulation",),
           "first in 4.46.0 (not in 4.45.2)", TRAINER_CLAIMS["count"]),
    Change("2024-10", "the fix, second part: the models' cross-entropy sums and divides by `num_items_in_batch` "
                      "(`fixed_cross_entropy`)", "transformers #34198", PR + "34198", ("accumulation",),
           "first in 4.46.0 (not in 4.45.2)", TRAINER_CLAIMS["divide_by_count"]),
    Change("2024-10", "the bug and the fix explained: a mean of microbatch means is not the token mean",
           "Hugging Face blog, fixing gradient accumulation", "https://huggingface.co/blog/gradient_accumulation",
           ("accumulation",)),
    Change("2024-10", "the same bug found and measured in training losses", "Unsloth blog, gradient accumulation",
           "https://unsloth.ai/blog/gradient", ("accumulation",)),
    Change("2024-10", "the fix reaches every model: causal-LM heads pass their keyword arguments on to "
                      "`self.loss_function`", "transformers #34283", PR + "34283", ("accumulation",), "",
           Claim("transformers.models.llama.modeling_llama.LlamaForCausalLM.forward",
                 r"loss = self\.loss_function\(.*\*\*kwargs\)", "")),
    Change("2024-10", "`average_tokens_across_devices` added, default False: the count summed over the "
                      "data-parallel processes", "transformers #34373", PR + "34373", ("data_parallel",),
           "first in 4.46.2 (not in 4.46.1)", TRAINER_CLAIMS["gather"]),
    Change("2024-11", "with `average_tokens_across_devices` on, the loss is multiplied by the number of processes, "
                      "undoing DDP's average over them; pull request not identified here",
           "transformers 4.46.2 (release)", WHEEL + "4.46.2/", ("data_parallel",),
           "first in 4.46.2 (4.46.1 has no such option)", TRAINER_CLAIMS["loss_scale"]),
    Change("2024-11", "the count becomes every label != -100, position 0 included (one more than the targets per "
                      "row of a causal LM); pull request not identified here", "transformers 4.46.2 (release)",
           WHEEL + "4.46.2/", ("accumulation",), "4.46.2 to 5.9.0 (checked: 4.46.2, 4.46.3, 4.47.0, 4.47.1, "
                                                 "4.48.0, 4.53.3, 4.54.0, 5.6.0, 5.9.0)"),
    Change("2024-11", "`model_accepts_loss_kwargs` is True for any `forward(**kwargs)` (4.46.x required a "
                      "parameter named `loss_kwargs`)", "transformers #34915", PR + "34915", ("accumulation",),
           "first in 4.47.0 (not in 4.46.3)", TRAINER_CLAIMS["accepts_signature"]),
    Change("2024-12", "a model that does not accept loss keyword arguments gets no count again, so its microbatch "
                      "mean is divided by the accumulation steps (4.47.1 gave it the count, and its loss was neither "
                      "normalised by it nor divided)", "transformers #35438", PR + "35438", ("accumulation",),
           "first in 4.48.0 (not in 4.47.1)", TRAINER_CLAIMS["ga_divide"]),
    Change("2025-01", "a model class's `accepts_loss_kwargs` attribute decides first, before the signature; pull "
                      "request not identified here", "transformers 4.48.0 (release)", WHEEL + "4.48.0/",
           ("accumulation",), "first in 4.48.0 (not in 4.47.1)", TRAINER_CLAIMS["accepts_attribute"]),
    Change("2025-07", "`average_tokens_across_devices` becomes default True", "transformers #39395", PR + "39395",
           ("data_parallel",), "first in 4.54.0 (4.53.3 has False)", TRAINER_CLAIMS["default_true"]),
    Change("2025-09", "under `nn.DataParallel` (one process, n_gpu > 1) the count and the loss factor use n_gpu, as "
                      "the pull request describes; which lines it wrote was not checked here",
           "transformers #40799", PR + "40799", ("data_parallel",), "",
           Claim(f"{TRAINER}._get_num_items_in_batch", r"num_items_in_batch = num_items_in_batch // self\.args\.n_gpu",
                 "")),
    Change("2026-05", "the loss factor becomes `num_processes // tp_size`: tensor-parallel processes share one batch",
           "transformers #45994", PR + "45994", ("data_parallel",), "first in 5.19.0 (not in 5.18.0)",
           TRAINER_CLAIMS["loss_scale"]),
    Change("2026-05", "the count is divided by tp × cp × sp sizes (5.18.0 divided by the parallelism config's "
                      "non-data-parallel size), and a Trainer subclass can say whether its loss is already "
                      "normalised (`loss_is_scaled_for_ga`); pull requests not identified here",
           "transformers 5.19.0 (release)", WHEEL + "5.19.0/", ("data_parallel", "accumulation"),
           "first in 5.19.0 (not in 5.18.0)", TRAINER_CLAIMS["count_divisor"]),
    Change("2026-05", "a causal-LM loss's count is `labels[..., 1:]` again (the targets after the shift), or a "
                      "collator's `shift_labels`", "transformers #46204", PR + "46204", ("accumulation",),
           "first in 5.10.1 (not in 5.9.0; 5.10.0 was not published)", TRAINER_CLAIMS["shift"]),
    Change("2026-06", "the documentation of `num_items_in_batch` says causal-LM targets are counted after the shift",
           "transformers #46335", PR + "46335", ("accumulation",)),
    Change("current", "`cross_entropy` with `reduction='mean'`: class-index targets divide by the sum of the targets' "
                      "class weights, probability targets by the number of rows (PyTorch is C++ here: the pages "
                      "check it by running it)", "PyTorch documentation, CrossEntropyLoss",
           "https://pytorch.org/docs/stable/generated/torch.nn.CrossEntropyLoss.html", ("cross_entropy",)),
)


def installed(packages=("torch", "transformers")) -> dict[str, str]:
    """The installed version of each package ('not installed' when absent)."""
    return {p: package_version(p) for p in packages}


def verify(change: Change) -> dict:
    """The change's line in the installed source: {found, cite, code} (found None when it has nothing to read)."""
    if change.check is None:
        return {"found": None}
    try:
        ex = excerpt(change.check.target, change.check.pattern)
    except SourceChanged as e:
        return {"found": False, "error": str(e)}
    return {"found": True, "cite": ex.cite(), "code": ex.code()}


def changes_for(topics) -> list[Change]:
    topics = tuple(topics)
    bad = [t for t in topics if t not in TOPICS]
    if bad:
        raise ValueError(f"unknown topic(s) {bad}; expected some of {', '.join(TOPICS)}")
    return [c for c in CHANGES if set(c.topics) & set(topics)]


def rows(topics=TOPICS) -> list[dict]:
    """The changes of these topics as plain rows (for a page's JSON twin): date, source, url, release range, and
    whether and where the installed source has the change's line."""
    return [{"date": c.date, "what": c.what, "source": c.source, "url": c.url, "released": c.released, **verify(c)}
            for c in changes_for(topics)]


def what_changed_when(topics=TOPICS, packages=("torch", "transformers", "trl")) -> str:
    """A Markdown box: each change of these topics with its date, linked source, checked release range and its
    line in the installed source, then the versions this page executed with."""
    lines = []
    for c in changes_for(topics):
        v = verify(c)
        text = f"> - **{c.date}**: {c.what} ([{c.source}]({c.url}))"
        if c.released:
            text += f"; {c.released}"
        if v["found"] is True:
            text += f". Installed: `{v['code']}` ({v['cite']})"
        elif v["found"] is False:
            text += ". **Not in the installed source**"
        lines.append(text + ".")
    lines.append("> ")
    lines.append("> Release ranges were checked in the released wheels' source; \"installed\" is read from this "
                 "install when the page runs. Executed with "
                 + ", ".join(f"{p} {x}" for p, x in installed(packages).items()) + ".")
    return "> **What changed when.**\n>\n" + "\n".join(lines)


POINTER = ("*The library behaviour this page relies on changed over releases: the box \"What changed when\" at "
           "the end lists when, and what the installed version does.*")
