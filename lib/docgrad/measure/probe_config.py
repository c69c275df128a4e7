"""What one probe run is: its spans (DocSpan) and its settings (ProbeConfig), whose fingerprint() is the resume key
and whose args() are the result json's "args". Definitions: docs/methods.md#per-chunk-gradients.

Configuration. One frozen ProbeConfig holds the run: its fingerprint() (everything the numbers depend on:
model pin, corpus, span hashes, chunk, buckets, seed, exact_ref, dtype, context (and a causal run's window, a
start token, SIMEX noise), device type) is the resume key (docgrad.measure.resume), and its args() the result json's "args".
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace

import numpy as np

from docgrad.core.constants import (
    CAUSAL,
    CHUNK,
    CONTEXTS,
    DEFAULT_BUCKETS,
    DTYPES,
    MAX_BUCKETS,
    MIN_BUCKETS,
    SKETCH_SEED,
    STANDALONE,
    STANDALONE_BOS,
)
from docgrad.core.sketch import SKETCH_NAME
from docgrad.errors import DocgradError
from docgrad.models import pin_key
from docgrad.results.format import regime_label

PARTIAL_FORMAT = "docgrad-probe-partial/2"


class ProbeError(DocgradError, RuntimeError):
    """The probe cannot continue; the message names the document/chunk/file and what to do."""

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
    start_token: int | None = None          # a token id ahead of every standalone chunk (context standalone-bos)
                                            # or at position 0 of every causal window (context causal),
                                            # instead of the model's config.bos_token_id (docs/methods.md#model-regime)
    no_start_token: bool = False            # no start token although the model's own default puts its BOS first
                                            # (context standalone; `--start-token none`, regime 'nobos')
    simex: dict | None = field(default=None, hash=False)   # {"lambda": L, "seed": S}: rounding noise added to
                                            # the weights before probing (docgrad.measure.simex)
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
        if self.start_token is not None:
            t = self.start_token
            if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or t < 0:
                raise ProbeError(f"--start-token {t!r}: a token id is a non-negative integer (SmolLM2's "
                                 "<|endoftext|> is 0)")
            if self.context not in (STANDALONE_BOS, CAUSAL):
                raise ProbeError(f"--start-token {t}: a start token goes ahead of standalone chunks (context "
                                 f"{STANDALONE_BOS}) or at the head of a causal window, not context "
                                 f"{self.context!r}")
            object.__setattr__(self, "start_token", int(t))
        if self.no_start_token:
            if self.start_token is not None or self.context != STANDALONE:
                raise ProbeError("--start-token none: chunks without a start token are standalone (context "
                                 f"{STANDALONE}), with no --start-token ID beside it")
        object.__setattr__(self, "no_start_token", bool(self.no_start_token))
        if self.simex is not None:
            lam, seed = self.simex.get("lambda"), self.simex.get("seed")
            if isinstance(lam, bool) or not isinstance(lam, (int, float, np.integer, np.floating)) or not lam > 0:
                raise ProbeError(f"--simex-lambda {lam!r}: the added rounding-noise variance is a positive multiple "
                                 "of the rounding error's (e.g. 1 or 2)")
            if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
                raise ProbeError(f"--simex-seed {seed!r}: the noise seed is a non-negative integer")
            object.__setattr__(self, "simex", {"lambda": float(lam), "seed": int(seed)})
        object.__setattr__(self, "exact_ref", bool(self.exact_ref))
        object.__setattr__(self, "pin", dict(self.pin or {}))
        if self.docs is not None:
            object.__setattr__(self, "docs", (int(self.docs[0]), int(self.docs[1])))
        object.__setattr__(self, "spans", tuple((int(d), str(h)) for d, h in self.spans))

    @property
    def regime(self) -> str:
        """The model regime's label ('' for the model as loaded; results.format.regime_label)."""
        return regime_label(self.start_token, self.simex, self.no_start_token)

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
        return self.bind_hashes([(s.doc, s.sha256) for s in spans], lengths[0], device_type)

    def bind_hashes(self, hashes, span_tokens: int, device_type: str) -> "ProbeConfig":
        """bind() from what a corpus manifest records, without the tokens: the documents' (doc, span sha256) in
        document order and their common span length in tokens (docgrad measure plans a probe with it)."""
        if not hashes:
            raise ProbeError("no documents to probe")
        C, L = self.chunk, int(span_tokens)
        if self.context == "causal":
            if self.window > L:
                raise ProbeError(f"--window {self.window} is longer than the document spans ({L} tokens); use a "
                                 f"window of at most {L // C * C}")
            L = self.window                    # only the first W tokens of each span are probed
        if L % C:
            raise ProbeError(f"--chunk {C} does not divide the span length {L}: the last {L % C} tokens of every "
                             f"document would be dropped; use a chunk that divides {L} (nearest: "
                             f"{' or '.join(map(str, nearest_divisors(L, C)))})")
        hashes = [(int(d), str(h)) for d, h in hashes]
        bound = {"docs": (hashes[0][0], hashes[-1][0] + 1), "device_type": str(device_type),
                 "spans": tuple(hashes), "chunks_per_document": L // C}
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
        fp = {"format": PARTIAL_FORMAT, "model": self.model, "revision": self.revision, "pin": pin_key(self.pin),
              "corpus": self.corpus, "chunk": self.chunk, "chunks_per_document": self.chunks_per_document,
              "buckets": self.buckets, "seed": self.seed, "exact_ref": self.exact_ref, "dtype": self.dtype,
              "context": self.context, "sketch": SKETCH_NAME, "device_type": self.device_type,
              "spans": [[d, h] for d, h in self.spans]}
        if self.context == "causal":          # other fingerprints stay as they were (their state stays resumable)
            fp["window"] = self.window
        if self.start_token is not None:
            fp["start_token"] = self.start_token
        if self.no_start_token:
            fp["no_start_token"] = True
        if self.simex is not None:
            fp["simex"] = self.simex
        return json.loads(json.dumps(fp, default=str))

    def args(self) -> dict:
        """The result json's "args" (the committed files' keys, plus dtype, context and window)."""
        return {"model": self.model, "revision": self.revision, "corpus": self.corpus, "chunk": self.chunk,
                "docs": None if self.docs is None else list(self.docs), "device": self.device,
                "manifest": self.manifest, "command": self.command, "buckets": self.buckets, "seed": self.seed,
                "exact_ref": self.exact_ref, "dtype": self.dtype, "context": self.context, "window": self.window,
                **({"start_token": self.start_token} if self.start_token is not None else {}),
                **({"no_start_token": True} if self.no_start_token else {}),
                **({"simex": self.simex} if self.simex is not None else {})}

def nearest_divisors(n: int, c: int) -> list[int]:
    """The divisors of n nearest to c from below (if >= 2) and from above."""
    divs = sorted({d for k in range(1, int(n ** 0.5) + 1) if n % k == 0 for d in (k, n // k)})
    below = [d for d in divs if 2 <= d <= c]
    above = [d for d in divs if d >= c]
    return sorted({*below[-1:], *above[:1]})

def differences(old: dict, new: dict) -> str:
    """'key: old there, new now; ...' for the keys that differ (long values just named)."""
    def show(v):
        r = repr(v)
        return r if len(r) <= 80 else "(differs)"

    keys = sorted(set(old) | set(new))
    return "; ".join(f"{k}: {show(old.get(k))} there, {show(new.get(k))} now"
                     for k in keys if old.get(k) != new.get(k))[:1000]

def result_fingerprint(meta: dict) -> dict | None:
    """The fingerprint (ProbeConfig.fingerprint) of the probe run that wrote a result file, rebuilt from its json
    `meta`: args (model, revision, corpus, chunk, buckets, seed, exact_ref, dtype, context, window, start_token,
    no_start_token, simex), pin, chunks_per_document (or chunks_per_doc), sketch.name, device (its type) and spans_sha256. A file
    without dtype or context recorded is float32 and standalone (results.format). None when the file does not
    record one of the other keys: such a file is never taken for the same cell as a planned probe."""
    try:
        a = meta["args"]
        context = a.get("context") or STANDALONE
        fp = {"format": PARTIAL_FORMAT, "model": a["model"], "revision": str(a["revision"]),
              "pin": pin_key(meta["pin"]), "corpus": a["corpus"], "chunk": int(a["chunk"]),
              "chunks_per_document": int(meta.get("chunks_per_document", meta.get("chunks_per_doc"))), "buckets": int(a["buckets"]),
              "seed": int(a["seed"]), "exact_ref": bool(a["exact_ref"]), "dtype": a.get("dtype") or "float32",
              "context": context, "sketch": meta["sketch"]["name"], "device_type": str(meta["device"]).split(":")[0],
              "spans": [[int(d), str(h)] for d, h in sorted(meta["spans_sha256"].items(), key=lambda kv: int(kv[0]))]}
        if context == "causal":
            fp["window"] = int(a["window"])
        if a.get("start_token") is not None:
            fp["start_token"] = int(a["start_token"])
        if a.get("no_start_token"):
            fp["no_start_token"] = True
        if a.get("simex") is not None:
            fp["simex"] = {"lambda": float(a["simex"]["lambda"]), "seed": int(a["simex"]["seed"])}
        return json.loads(json.dumps(fp, default=str))
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
