"""What changed when: the library behaviours the teaching pages rely on, each with its date and a link to the
source (blog post, pull request, documentation), and the versions a page executed with."""

from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version


@dataclass(frozen=True)
class Change:
    date: str          # YYYY-MM (when it was merged or published)
    what: str
    source: str        # a short name of the source
    url: str


CHANGES = (
    Change("2024-08", "transformers 4.44: packing by position ids (`DataCollatorWithFlattening`), for "
                      "FlashAttention-2 only: restarting position ids give each document its own attention",
           "Hugging Face blog, packing with FlashAttention-2", "https://huggingface.co/blog/packing-with-FA2"),
    Change("2024-10", "the gradient-accumulation fix, first part: the Trainer counts the targets of the whole "
                      "accumulated batch and passes them as `num_items_in_batch`",
           "transformers #34191", "https://github.com/huggingface/transformers/pull/34191"),
    Change("2024-10", "the gradient-accumulation fix, second part: the models' losses divide their summed loss by "
                      "`num_items_in_batch`", "transformers #34198",
           "https://github.com/huggingface/transformers/pull/34198"),
    Change("2024-10", "the bug and the fix explained: a mean of microbatch means is not the token mean",
           "Hugging Face blog, fixing gradient accumulation", "https://huggingface.co/blog/gradient_accumulation"),
    Change("2024-10", "the same bug found and measured in training losses", "Unsloth blog, gradient accumulation",
           "https://unsloth.ai/blog/gradient"),
    Change("2024-10", "`average_tokens_across_devices` added, default False: the token count all-reduced across "
                      "data-parallel ranks", "transformers #34373",
           "https://github.com/huggingface/transformers/pull/34373"),
    Change("2025-07", "`average_tokens_across_devices` becomes default True", "transformers #39395",
           "https://github.com/huggingface/transformers/pull/39395"),
    Change("current", "`cross_entropy` with `reduction='mean'`: class-index targets divide by the sum of the "
                      "targets' class weights (their count without weights); probability targets divide by the "
                      "number of rows", "PyTorch documentation, CrossEntropyLoss",
           "https://pytorch.org/docs/stable/generated/torch.nn.CrossEntropyLoss.html"),
)


def installed(packages=("torch", "transformers")) -> dict[str, str]:
    """The installed version of each package ('not installed' when absent)."""
    out = {}
    for p in packages:
        try:
            out[p] = version(p)
        except PackageNotFoundError:
            out[p] = "not installed"
    return out


def what_changed_when(changes=CHANGES, packages=("torch", "transformers")) -> str:
    """A Markdown box: each change with its date and linked source, then the versions this page executed with."""
    lines = [f"> - **{c.date}**: {c.what} ([{c.source}]({c.url}))" for c in changes]
    v = installed(packages)
    lines.append("> ")
    lines.append("> Executed with " + ", ".join(f"{p} {x}" for p, x in v.items()) + ".")
    return "> **What changed when.**\n>\n" + "\n".join(lines)
