"""Your own documents as a corpus: `docgrad corpora add NAME --from PATH`.

A user corpus is built with the discipline of the built-in ones (`docgrad.corpora.build`) from one of
- a folder of text files: one document per file, the files in sorted path order (kind `files`);
- a folder of folders: one document per subfolder, its files concatenated in sorted path order, each preceded
  by the `# ===== <path> =====` header CODE uses (kind `directories`); a folder holding both files and folders
  (the modules and packages of a Python library) gives one document per entry, a file as it is and a folder
  concatenated (kind `mixed`);
- a JSON Lines (.jsonl, .ndjson, .json), Parquet (.parquet, .pq) or CSV (.csv, .tsv) file with a text column
  (`--text-field`, default "text"; `--id-field` names the documents), read with pyarrow (kinds `jsonl`,
  `parquet`, `csv`, `tsv`; .gz/.bz2/.zst/.lz4 JSON Lines and CSV files are decompressed by pyarrow).
Hidden files and folders (names starting with '.') are skipped.

Selection: the candidates in source order (or, with a seed, in the order of sha256(f"{seed}:{key}"), key the
path or "row i", `sources.seeded_order`), each tokenized whole (no special tokens) under the model's tokenizer
and kept when it has at least span.start + span.tokens tokens, until `docs` are kept. Every candidate tried and
not kept is recorded with its reason (too short with its token count, empty, not UTF-8 text). The span rule
(start, length, chunk; the study's 2048 / 16384 / 512 by default) is a parameter of the corpus, recorded in its
manifest entry as "span", and `build.load_spans` checks the cached spans by it, so `docgrad probe --corpus NAME`
reads a user corpus like a built-in one. A file inside a folder's document that is not UTF-8 text (an image, a
compiled file) is left out of its document, counted in the document's `source.skipped_binary` and the first
ten named in `source.skipped_binary_first`.

The entry (beside the built-in corpora in the model's manifest, written atomically):
    "NAME": {"selection": "...", "origin": {"path": PATH as given, "kind": ..., "sha256": of a file source,
             "text_field"/"id_field": of a table, "candidates": how many}, "order": "source" | "seeded",
             "seed": S (seeded only), "span": {"start", "tokens", "chunk", "min_tokens"},
             "documents_requested": N, "candidates_tried": k, "command": the `docgrad corpora add` that
             rebuilds it, "tokens": summary, "documents": [... text_sha256, span_sha256 ...], "rejected": [...]}
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from docgrad import models
from docgrad.core.constants import CHUNK, CORPORA, DOCS_PER_CORPUS, HUB_CORPORA, SPAN_START, SPAN_TOKENS
from docgrad.corpora import build
from docgrad.corpora.build import CorpusError, SpanRule
from docgrad.corpora.sources import Candidate, DocumentError, concat_files, decode_utf8, say, seeded_order
from docgrad.fileio import check_output_file, locked, project_root, shown_path

NAME_PATTERN = re.compile(r"[A-Z][A-Z0-9_]*")
MAX_NAME = 64
MIN_DOCS = 2                    # S_cross, the mean gradient's estimate, needs pairs of documents
TABLE_KINDS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".parquet": "parquet", ".pq": "parquet",
               ".csv": "csv", ".tsv": "tsv"}
COMPRESSED = (".gz", ".bz2", ".zst", ".lz4")      # pyarrow decompresses JSON and CSV files with these suffixes
KIND_WORDS = {"files": "a folder of text files, one document per file",
              "directories": "a folder of folders, one document per folder, its files concatenated with path "
                             "headers",
              "mixed": "a folder of files and folders, one document per file and one per folder (its files "
                       "concatenated with path headers)",
              "jsonl": "JSON Lines", "parquet": "Parquet", "csv": "CSV", "tsv": "tab-separated values"}
SUPPORTED = ("a folder of text files, a folder of folders, or a JSON Lines (.jsonl), Parquet (.parquet) or "
             "CSV (.csv) file")
FOLDER_KINDS = ("files", "directories", "mixed")
SKIPPED_SHOWN = 10             # binary files left out of a folder's document: counted, the first ones named
MAX_BLOCK = 2**31 - 1          # pyarrow's block_size is an int32


# --- arguments ---------------------------------------------------------------------------------------------

def check_name(name: str) -> str:
    """NAME: an upper-case identifier that is not a built-in or hub corpus."""
    if not NAME_PATTERN.fullmatch(name or "") or len(name) > MAX_NAME:
        hint = re.sub(r"[^A-Z0-9_]", "_", (name or "").upper())
        hint = hint if NAME_PATTERN.fullmatch(hint) else "MYDOCS"
        raise CorpusError(f"corpus name {name!r}: expected an upper-case identifier of at most {MAX_NAME} characters "
                          f"(a letter, then letters, digits or _), e.g. {hint[:MAX_NAME]}")
    if name in CORPORA or name in HUB_CORPORA:
        which = "a built-in corpus (docgrad corpora build)" if name in CORPORA else "a hub corpus (docgrad corpora hub)"
        raise CorpusError(f"corpus name {name}: that is {which}; choose another name for your documents")
    return name


# --- sources -----------------------------------------------------------------------------------------------

@dataclass
class Source:
    """What `--from PATH` holds: its kind, its candidate documents in source order (with one unique key each,
    for a seeded order) and the origin record of the manifest."""

    kind: str
    candidates: list[Candidate]
    keys: list[str]
    origin: dict


def _visible(p: Path) -> bool:
    return not p.name.startswith(".")


def _text_of_file(path: Path, what: str) -> str:
    """A file's text: UTF-8 without NUL bytes, else a DocumentError naming the file."""
    data = path.read_bytes()
    nul = data.find(b"\x00")
    if nul >= 0:
        raise DocumentError(f"{what}: a binary file (NUL byte at byte {nul}), not text")
    return decode_utf8(data, what)


def _folder_document(folder: Path, rel: str, source: dict) -> str:
    """The files under `folder` (hidden ones skipped) concatenated in sorted path order with path headers; files
    that are not UTF-8 text are left out, counted in source["skipped_binary"]."""
    texts, skipped = {}, []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for f in filenames:
            p = Path(dirpath) / f
            if f.startswith(".") or not p.is_file():
                continue
            path = p.relative_to(folder).as_posix()
            try:
                texts[path] = _text_of_file(p, f"{rel}/{path}")
            except DocumentError:
                skipped.append(path)
    source["files"] = len(texts)
    if skipped:                         # e.g. images, compiled files; the first few named
        source["skipped_binary"] = len(skipped)
        source["skipped_binary_first"] = sorted(skipped)[:SKIPPED_SHOWN]
    if not texts:
        raise DocumentError(f"{rel}: no UTF-8 text files" + (f" ({len(skipped)} binary files skipped)" if skipped
                                                              else " (the folder is empty)"))
    return concat_files(texts)


def folder_source(path: Path, given: str) -> Source:
    entries = sorted((p for p in path.iterdir() if _visible(p) and (p.is_file() or p.is_dir())),
                     key=lambda p: p.name)
    files, folders = [p for p in entries if p.is_file()], [p for p in entries if p.is_dir()]
    if not entries:
        raise CorpusError(f"--from {given}: the folder is empty (no files or folders other than hidden ones); "
                          f"expected {SUPPORTED}")
    cands = []
    for p in entries:                   # one document per entry, in sorted name order
        source = {"path": p.name}
        if p.is_file():
            cands.append(Candidate(p.name, source, lambda p=p: _text_of_file(p, p.name)))
        else:
            cands.append(Candidate(p.name, source, lambda p=p, s=source: _folder_document(p, p.name, s)))
    kind = "mixed" if files and folders else "files" if files else "directories"
    return Source(kind, cands, [c.source["path"] for c in cands], {"path": given, "kind": kind,
                                                                    "candidates": len(cands)})


def _sniff(path: Path, given: str, kind: str) -> None:
    """Refuse a JSON Lines / CSV file that is empty or binary before pyarrow reads it (a compressed file is
    left to pyarrow)."""
    if path.name.endswith(COMPRESSED):
        return
    with open(path, "rb") as f:
        head = f.read(1 << 16)
    if not head.strip():
        raise CorpusError(f"--from {given}: the file is empty; expected {KIND_WORDS[kind]} with a text column")
    nul = head.find(b"\x00")
    if nul >= 0:
        raise CorpusError(f"--from {given}: a binary file (NUL byte at offset {nul}), not {KIND_WORDS[kind]} text")
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.reason != "unexpected end of data":            # not just a character cut by the 64 KiB read
            raise CorpusError(f"--from {given}: not UTF-8 text (undecodable byte at offset {e.start}); "
                              f"{KIND_WORDS[kind]} must be UTF-8") from None


def _arrow_message(e: Exception) -> str:
    return " ".join(str(e).split())[:300]


def _read_blocks(read, path: Path):
    """read(block_size) with a block large enough for the longest row (pyarrow refuses a row that straddles two
    blocks): the file's size, or grown until it fits."""
    size = path.stat().st_size
    block = min(max(size + 1, 1 << 20), MAX_BLOCK) if not path.name.endswith(COMPRESSED) else 64 << 20
    while True:
        try:
            return read(block)
        except Exception as e:  # noqa: BLE001 -- pyarrow.ArrowInvalid; anything else is reported by the caller
            if "straddl" in str(e) and block < MAX_BLOCK:
                block = min(block * 4, MAX_BLOCK)
                continue
            raise


def read_table(path: Path, given: str, kind: str, text_field: str, id_field: str | None):
    """The pyarrow table of a JSON Lines / Parquet / CSV file (every column; Parquet: the two needed), or a
    CorpusError naming the file and what pyarrow said. A missing column lists the file's columns."""
    import pyarrow as pa

    fields = [text_field] + ([id_field] if id_field else [])
    what = KIND_WORDS[kind]
    try:
        if kind == "parquet":
            import pyarrow.parquet as pq

            try:
                names = pq.read_schema(path).names
            except (pa.ArrowException, OSError) as e:
                raise CorpusError(f"--from {given}: not a readable Parquet file ({_arrow_message(e)})") from None
            _check_columns(given, names, text_field, id_field)
            return pq.read_table(path, columns=fields)
        _sniff(path, given, kind)
        if kind == "jsonl":
            import pyarrow.json as pj

            def read(block, parse=None):
                return pj.read_json(path, read_options=pj.ReadOptions(block_size=block),
                                    parse_options=parse or pj.ParseOptions())
            try:
                table = _read_blocks(read, path)
            except pa.ArrowInvalid as e:
                # another column with mixed types (messy metadata): read only the columns needed, as strings
                if "Column(/" not in str(e) or any(f"Column(/{f})" in str(e) for f in fields):
                    raise
                schema = pa.schema([(f, pa.string()) for f in fields])
                table = _read_blocks(lambda b: read(b, pj.ParseOptions(explicit_schema=schema,
                                                                       unexpected_field_behavior="ignore")), path)
                if table.column(text_field).null_count == table.num_rows:
                    raise CorpusError(f"--from {given}: no row has a string in column {text_field!r} "
                                      "(--text-field); name the column that holds the documents") from None
        else:
            import pyarrow.csv as pc

            def read(block):
                return pc.read_csv(path, read_options=pc.ReadOptions(block_size=block),
                                   parse_options=pc.ParseOptions(delimiter="\t" if kind == "tsv" else ",",
                                                                 newlines_in_values=True),
                                   convert_options=pc.ConvertOptions(
                                       column_types={text_field: pa.large_binary(),   # decoded row by row
                                                     **({id_field: pa.string()} if id_field else {})}))
            table = _read_blocks(read, path)
    except (pa.ArrowException, OSError) as e:
        msg = _arrow_message(e)
        if any(f"Column(/{f})" in msg for f in fields):
            msg += " (every value of the column must be a string)"
        elif kind == "jsonl":
            msg += " (expected one JSON object per line)"
        raise CorpusError(f"--from {given}: cannot read it as {what}: {msg}") from None
    _check_columns(given, table.column_names, text_field, id_field)
    return table


def _check_columns(given: str, names: list[str], text_field: str, id_field: str | None) -> None:
    for option, f in (("--text-field", text_field), ("--id-field", id_field)):
        if f is not None and f not in names:
            shown = ", ".join(repr(n) for n in names[:20]) + (f", ... ({len(names)} in all)" if len(names) > 20 else "")
            raise CorpusError(f"--from {given}: no column {f!r} ({option}); its columns are {shown or 'none'}")


def table_source(path: Path, given: str, kind: str, text_field: str, id_field: str | None) -> Source:
    import pyarrow as pa

    table = read_table(path, given, kind, text_field, id_field)
    col = table.column(text_field)
    typ = col.type.value_type if pa.types.is_dictionary(col.type) else col.type
    if pa.types.is_dictionary(col.type):
        col = col.cast(typ)
    if not any(check(typ) for check in (pa.types.is_string, pa.types.is_large_string, pa.types.is_binary,
                                        pa.types.is_large_binary)):
        row, value = next(((i, v) for i, v in enumerate(col.to_pylist()) if v is not None), (None, None))
        example = "" if row is None else f"; row {row}: {str(value)[:40]!r}"
        raise CorpusError(f"--from {given}: column {text_field!r} holds {typ} values, not text{example}; name the "
                          "column of the documents with --text-field")
    values = col.cast(pa.large_binary()).to_pylist() if not pa.types.is_large_binary(typ) else col.to_pylist()
    ids = [None if v is None else str(v) for v in table.column(id_field).to_pylist()] if id_field else None
    cands, keys = [], []
    for i, raw in enumerate(values):
        title = ids[i] if ids and ids[i] is not None else f"row {i}"
        source = {"row": i, **({"id": ids[i]} if ids else {})}

        def load(raw=raw, title=title):
            if raw is None:
                raise DocumentError(f"{title}: no text (null in column {text_field!r})")
            return decode_utf8(raw, title)
        cands.append(Candidate(title, source, load))
        keys.append(f"row {i}")
    if not cands:
        raise CorpusError(f"--from {given}: no rows; expected one document per row in column {text_field!r}")
    origin = {"path": given, "kind": kind, "sha256": models.sha256_file(path), "text_field": text_field,
              **({"id_field": id_field} if id_field else {}), "candidates": len(cands)}
    return Source(kind, cands, keys, origin)


def open_source(path_given: str, text_field: str | None = None, id_field: str | None = None) -> Source:
    """The candidates of `--from PATH` in source order, or a CorpusError naming what is wrong with PATH.
    text_field: the table column of the documents (default "text"); id_field: the column of their titles."""
    path = Path(path_given)
    if not path.exists():
        raise CorpusError(f"--from {path_given}: no such file or folder")
    if path.is_dir():
        if not os.access(path, os.R_OK | os.X_OK):
            raise CorpusError(f"--from {path_given}: the folder is not readable")
        given = [o for o, v in (("--text-field", text_field), ("--id-field", id_field)) if v is not None]
        if given:
            raise CorpusError(f"{' and '.join(given)}: columns of a JSON Lines, Parquet or CSV file; --from "
                              f"{path_given} is a folder, whose documents are named by their paths")
        return folder_source(path, path_given)
    if not path.is_file():
        raise CorpusError(f"--from {path_given}: not a regular file or folder; expected {SUPPORTED}")
    name = path.name.lower()
    for z in COMPRESSED:
        if name.endswith(z):
            name = name[: -len(z)]
            break
    kind = TABLE_KINDS.get(Path(name).suffix)
    if kind is None or (kind == "parquet" and name != path.name.lower()):
        raise CorpusError(f"--from {path_given}: a file of type {Path(path.name).suffix or '(no suffix)'!r} is not a "
                          f"source of documents; expected {SUPPORTED} (a single text file is one document: put "
                          "your documents in a folder, one file each)")
    text_field = "text" if text_field is None else text_field
    if not text_field or id_field == "":
        raise CorpusError(f"{'--text-field' if not text_field else '--id-field'}: give the name of a column")
    return table_source(path, path_given, kind, text_field, id_field)


# --- selection ---------------------------------------------------------------------------------------------

def ordered(source: Source, seed: int | None) -> list[Candidate]:
    """The candidates in source order, or (seed given) in the order of sha256(f"{seed}:{key}")."""
    if seed is None:
        return list(source.candidates)
    by_key = dict(zip(source.keys, source.candidates))
    return [by_key[k] for k in seeded_order(source.keys, seed)]


@dataclass
class Selection:
    documents: list[dict]
    spans: list[np.ndarray]
    rejected: list[dict]
    lengths: list[int]              # token counts of every candidate tokenized
    tried: int


def select(cands: list[Candidate], tok, name: str, n: int, rule: SpanRule) -> Selection:
    """The first n candidates with >= rule.min_tokens tokens (docs 0..n-1), every other candidate tried listed
    with its reason; a tqdm bar on stderr (a terminal only) while tokenizing."""
    from tqdm import tqdm

    sel = Selection([], [], [], [], 0)
    texts = set()                                  # sha256 of every text tokenized: copies counted once
    with tqdm(total=len(cands), desc=f"{name}: tokenizing", unit="doc", file=sys.stderr, disable=None,
              dynamic_ncols=True) as bar:
        for cand in cands:
            if len(sel.documents) == n:
                break
            sel.tried += 1
            bar.update(1)
            tokens, copy = None, False
            try:
                text = cand.text()
                tokens = tok.encode(text)
                digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
                copy = digest in texts             # a copy never counts towards what other spans would keep
                texts.add(digest)
                entry, span = build.document_entry(tok, len(sel.documents), cand.title, cand.source, text, tokens,
                                                   rule)
            except DocumentError as e:
                msg = str(e)
                rejected = {"title": cand.title, "source": cand.source,
                            "reason": msg if msg.startswith(cand.title) else f"{cand.title}: {msg}"}
                if tokens is not None:
                    rejected["tokens"] = len(tokens)
                    if not copy:
                        sel.lengths.append(len(tokens))
                sel.rejected.append(rejected)
                continue
            if not copy:
                sel.lengths.append(len(tokens))
            same = next((d for d in sel.documents if d["span_sha256"] == entry["span_sha256"]), None)
            if same is not None:            # two copies of one text would be counted as two independent documents
                sel.rejected.append({"title": cand.title, "source": cand.source, "tokens": len(tokens),
                                     "reason": f"{cand.title}: its span is byte-identical to document {same['doc']} "
                                               f"({same['title']}); a copy is not an independent document"})
                continue
            sel.documents.append(entry)
            sel.spans.append(span)
            bar.set_postfix(kept=len(sel.documents))
    return sel


def whole_window(chunks: int) -> int:
    """The largest power of two at most `chunks`: a span of that many chunks is a window the study's 16K controls
    are read at (blocks of 1, 2, 4, ... chunks), so a committed control cell can be reused for R_rel."""
    return 1 << (int(chunks).bit_length() - 1)


def _fits(lengths: list[int], k: int, rule: SpanRule) -> str:
    """What would let k of these documents qualify (the k-th longest decides): span options, or why none do."""
    kth = sorted(lengths, reverse=True)[k - 1]
    c = rule.chunk
    if kth - rule.start >= 2 * c:
        return f"--span-tokens {whole_window((kth - rule.start) // c) * c} would keep {k}"
    if kth >= 2 * c:
        return f"--span-start 0 --span-tokens {whole_window(kth // c) * c} would keep {k}"
    return f"the {k} longest are not all two chunks long ({2 * c} tokens); a smaller --chunk is needed"


def too_few(name: str, given: str, sel: Selection, n: int, rule: SpanRule, tok_name: str) -> CorpusError:
    """The one line for a corpus with fewer than n qualifying documents: how many qualified, how many were
    needed, the longest document's token count and span options that would fit (from the distinct texts' lengths:
    a copy of a text never qualifies)."""
    k, texts = len(sel.documents), len(sel.lengths)
    if texts == 0:
        first = sel.rejected[0]["reason"] if sel.rejected else "no candidates"
        return CorpusError(f"{name}: --from {given} holds no text documents: none of its {sel.tried} candidates "
                           f"is UTF-8 text (first: {first})")
    msg = (f"{name}: only {k} of {sel.tried} documents qualify and --docs {n} are needed: a document needs at least "
           f"{rule.min_tokens} tokens under the {tok_name} tokenizer ({rule.describe()}); the longest has "
           f"{max(sel.lengths)} tokens")
    if texts >= n:
        return CorpusError(f"{msg}; {_fits(sel.lengths, n, rule)}")
    if texts >= MIN_DOCS:
        return CorpusError(f"{msg}; only {texts} documents are distinct texts (copies counted once): pass --docs "
                           f"{texts} or fewer "
                           f"({_fits(sel.lengths, texts, rule)})")
    return CorpusError(f"{msg}; at least {MIN_DOCS} text documents are needed")


# --- the corpus --------------------------------------------------------------------------------------------

def add_command(name: str, given: str, source: Source, text_field: str, id_field: str | None, model: str,
                rule: SpanRule, docs: int, seed: int | None) -> str:
    """The `docgrad corpora add` command that rebuilds this corpus (recorded in the entry)."""
    parts = ["docgrad", "corpora", "add", name, "--from", shlex.quote(given)]
    if source.kind not in FOLDER_KINDS:
        parts += [*(["--text-field", shlex.quote(text_field)] if text_field not in (None, "text") else []),
                  *(["--id-field", shlex.quote(id_field)] if id_field else [])]
    if not models.is_default(model):
        parts += ["--model", shlex.quote(model)]
    parts += ["--span-start", str(rule.start), "--span-tokens", str(rule.tokens), "--chunk", str(rule.chunk),
              "--docs", str(docs)]
    if seed is not None:
        parts += ["--seed", str(seed)]
    return " ".join(parts)


def new_spans_dir(manifest_path: Path, spec) -> str:
    """The span folder of a manifest `corpora add` creates: the model's own (spec.spans_dir) for the model's own
    manifest, else one keyed by the manifest's path (spans/m-<sha256 of the path, 12 hex>), so two manifests that
    name a corpus alike never share its span file."""
    resolved = Path(manifest_path).resolve()
    if resolved.parts[-len(Path(spec.corpora).parts):] == Path(spec.corpora).parts:
        return spec.spans_dir
    return f"{spec.spans_dir}/m-{hashlib.sha256(str(resolved).encode()).hexdigest()[:12]}"


def add_corpus(name: str, path: str, manifest_path: str | Path, cache_dir: str | Path,
               model: str = models.SMOLLM2.name, text_field: str | None = None, id_field: str | None = None,
               span_start: int = SPAN_START, span_tokens: int = SPAN_TOKENS, chunk: int = CHUNK,
               docs: int = DOCS_PER_CORPUS, seed: int | None = None, overwrite: bool = False, tok=None) -> dict:
    """Build corpus `name` from `path` and write it into the manifest (beside its other corpora) and its spans
    into <cache_dir>/<spans_dir>/<name>.npy; returns the manifest entry. Everything a user can get wrong is a
    CorpusError raised before anything is written. tok: a tokenizer (default: `model`'s, loaded after every
    check that needs none)."""
    name = check_name(name)
    rule = build.check_span_rule(span_start, span_tokens, chunk)
    if not isinstance(docs, int) or docs < MIN_DOCS:
        raise CorpusError(f"--docs {docs}: need at least {MIN_DOCS} documents (the mean gradient is estimated "
                          "from pairs of documents)")
    if seed is not None and seed < 0:
        raise CorpusError(f"--seed {seed}: the selection seed is a non-negative integer")
    spec = models.corpus_model(model)                   # an offline model, or a local model directory / .gguf file
    manifest_path, cache_dir = Path(manifest_path), Path(cache_dir)
    check_output_file(manifest_path, "--manifest")
    with locked(manifest_path):        # two adds into one manifest: the second reads what the first wrote
        return _add_corpus(name, path, manifest_path, cache_dir, spec, rule, model, text_field, id_field, docs, seed,
                           overwrite, tok)


def _add_corpus(name, path, manifest_path, cache_dir, spec, rule, model, text_field, id_field, docs, seed, overwrite,
                tok) -> dict:
    """add_corpus with the manifest held: read it, check, build, store."""
    old = build.read_manifest(manifest_path, complete=True) if manifest_path.exists() else None
    if old and name in old["corpora"] and not overwrite:
        prev = old["corpora"][name]
        came = (prev.get("origin") or {}).get("path")
        raise CorpusError(f"{manifest_path}: already has a corpus {name} ({len(prev['documents'])} documents"
                          f"{f' from {came}' if came else ''}); pass --overwrite to replace it, or choose another name")
    expected = build.tokenizer_key(tok.identity) if tok is not None else spec.tokenizer_key
    recorded = ((old or {}).get("tokenizer") or {})
    if old and build.tokenizer_key(recorded) != expected:
        raise CorpusError(f"{manifest_path}: its spans were cut by the tokenizer of {recorded.get('model')!r}, not "
                          f"{spec.model}'s; leave out --manifest (default: the model's own, {spec.corpora}) or "
                          "choose --model to match it")
    spans_dir = build.manifest_spans_dir(old) if old else new_spans_dir(manifest_path, spec)
    build.check_cache_dir(cache_dir, spans_dir, [name])
    source = open_source(path, text_field, id_field)                     # the source's errors before the tokenizer
    say(f"{name}: {len(source.candidates)} candidates in {path} ({KIND_WORDS[source.kind]}), "
        f"{'source order' if seed is None else f'seeded order (seed {seed})'}; keeping the first {docs} with "
        f">= {rule.min_tokens} tokens ({rule.describe()}, {rule.chunks} chunks of {rule.chunk})")
    tok = tok or build.model_tokenizer(getattr(spec, "path", spec.name))
    sel = select(ordered(source, seed), tok, name, docs, rule)
    if len(sel.documents) < docs:
        raise too_few(name, path, sel, docs, rule, model)
    key = "its path" if source.kind in FOLDER_KINDS else "'row i'"
    order = ("source order" if seed is None else
             f"the order of sha256(f'{{seed}}:{{key}}') with seed {seed}, the key of a document {key}")
    entry = {"selection": f"User documents from {path} ({KIND_WORDS[source.kind]}) in {order}; the first {docs} with "
                          f">= {rule.min_tokens} tokens under the model's tokenizer ({rule.describe()}, "
                          f"{rule.chunks} chunks of {rule.chunk} tokens).",
             "origin": source.origin, "order": "source" if seed is None else "seeded",
             **({"seed": seed} if seed is not None else {}), "span": rule.record(), "documents_requested": docs,
             "candidates_tried": sel.tried,
             "command": add_command(name, path, source, text_field, id_field, model, rule, docs, seed)}
    entry = build.finish_entry(entry, sel.documents, sel.rejected)
    man = build.open_manifest_for(manifest_path, tok, False, spans_dir, old)
    build.store(man, manifest_path, cache_dir, {name: (entry, np.stack(sel.spans))})
    return entry


# --- CLI ---------------------------------------------------------------------------------------------------

def cli_add(args) -> int:
    """`docgrad corpora add NAME --from PATH`: add_corpus, then what was kept and how to probe it."""
    entry = add_corpus(args.name, args.source, args.manifest, args.cache, model=args.model,
                       text_field=args.text_field, id_field=args.id_field, span_start=args.span_start,
                       span_tokens=args.span_tokens, chunk=args.chunk, docs=args.docs, seed=args.seed,
                       overwrite=args.overwrite)
    rule, t = build.span_rule(entry), entry["tokens"]
    build.print_out(f"{args.name}: {len(entry['documents'])} documents from {args.source} ({entry['origin']['kind']}), "
                    f"tokens min {t['min']} / median {t['median']:g} / max {t['max']}; {rule.describe()}, "
                    f"{rule.chunks} chunks of {rule.chunk}; {len(entry['rejected'])} of {entry['candidates_tried']} "
                    f"candidates tried rejected; written to {shown_path(args.manifest)}")
    root = Path(args.root).resolve() if getattr(args, "root", None) else project_root()
    where = []
    if not models.is_default(args.model):
        where += ["--model", shlex.quote(args.model)]
    if Path(args.manifest).resolve() != (root / models.corpus_manifest(args.model)).resolve():
        where += ["--manifest", shlex.quote(str(args.manifest))]
    if Path(args.cache).resolve() != (root / build.DEFAULT_CACHE).resolve():
        where += ["--cache", shlex.quote(str(args.cache))]
    docs = ["--docs", f"0:{len(entry['documents'])}"]
    build.print_out(f"measure it next (R(W) with its interval, the control beside it, and its page): "
                    f"{' '.join(['docgrad', 'measure', '--corpus', args.name, *docs, *where])}")
    probe = ["docgrad", "probe", "--corpus", args.name, *docs, *(["--chunk", str(rule.chunk)] if rule.chunk != CHUNK
                                                                 else []), *where]
    build.print_out(f"or only its result file: {' '.join(probe)}")
    return 0
