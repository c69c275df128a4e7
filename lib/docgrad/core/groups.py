"""Parameter groups: which of the four groups (attn, mlp, embed, other) each parameter of a model belongs to.
Each group has its own count sketch and Gram (docs/methods.md#per-chunk-gradients)."""

from __future__ import annotations

from docgrad.core.constants import GROUPS

# A parameter's group is decided by the module names in its dotted path (first match wins, in this order).
# Llama/SmolLM2/OLMo: embed_tokens, lm_head, self_attn.*, mlp.*; GPT-NeoX/Pythia: embed_in, embed_out,
# attention.*, mlp.*; GPT-2 style: wte, wpe, attn, mlp. Norms, biases outside these modules -> "other".
_GROUP_KEYS = (
    ("embed", frozenset({"embed_tokens", "embed_in", "embed_out", "lm_head", "wte", "wpe", "embeddings"})),
    ("attn", frozenset({"self_attn", "attention", "attn", "cross_attn"})),
    ("mlp", frozenset({"mlp", "feed_forward", "ffn"})),
)


def param_group(name: str) -> str:
    """The group ('attn', 'mlp', 'embed' or 'other') of a parameter, from its dotted name."""
    parts = set(name.split("."))
    for group, keys in _GROUP_KEYS:
        if parts & keys:
            return group
    return "other"


def named_parameter_groups(model) -> list[tuple[str, object, str]]:
    """(name, parameter, group) for every trainable parameter, tied weights once.

    `named_parameters()` already yields a shared tensor only under its first name, so SmolLM2's tied
    lm_head.weight appears once, as model.embed_tokens.weight (group 'embed').
    """
    return [(n, p, param_group(n)) for n, p in model.named_parameters() if p.requires_grad]


def group_sizes(model) -> dict[str, int]:
    """Number of parameters per group (tied weights counted once); every group in GROUPS is present."""
    sizes = dict.fromkeys(GROUPS, 0)
    for _, p, g in named_parameter_groups(model):
        sizes[g] += p.numel()
    return sizes
