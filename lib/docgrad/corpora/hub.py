"""Loaders for the published study's corpora, for users with network access to the Hugging Face hub.

Same rules and manifest format as the offline corpora (`docgrad.corpora.build`): candidates in a fixed order,
the first 16 with >= 18432 tokens under the chosen tokenizer, span [2048, 18432), every rejected
candidate listed. Dataset files are fetched with `huggingface_hub.hf_hub_download` at the revision pinned
in data/checkpoint_revisions.json ("datasets"), so a rerun reads the same bytes; an unpinned revision
is refused unless allow_unpinned.

- PG19  (BOOKS analogue): emozilla/pg19 parquet, column `text`, title `short_book_title`, rows in file order.
- ARXIV (PAPERS analogue): ccdv/arxiv-summarization parquet, column `article` (the published fallback).
- FINEWEB (WEB control): any parquet file with a `text` column (e.g. HuggingFaceFW/fineweb sample
  files); short documents packed with the separator exactly like the offline WEB corpus.
- The ProLong subsets (princeton-nlp/prolong-data-64K: thestackv1_concat_by_repo-65536, arxiv,
  fineweb-2023-50) are stored as MDS shards of Llama-3 token ids, not parquet text; `prolong_note()` says
  how to use them. They are not read here.

Tests run these loaders on small local parquet files (the download function is replaced), never the hub.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from docgrad import models
from docgrad.corpora import build as corpora
from docgrad.corpora.sources import Candidate, SourceError, decode_utf8, say
from docgrad.fileio import check_output_file

PINS_PATH = models.PINS_PATH

HUB_SPECS = {
    "PG19": {"pin": "pg19", "corpus": "BOOKS", "files": ["data/train-00000-of-00003.parquet"],
             "text": "text", "title": "short_book_title", "mode": "documents"},
    "ARXIV": {"pin": "arxiv_fallback", "corpus": "PAPERS", "files": ["train.parquet"],
              "text": "article", "title": None, "mode": "documents"},
    "FINEWEB": {"pin": None, "repo": "HuggingFaceFW/fineweb", "corpus": "WEB",
                "files": ["sample/10BT/000_00000.parquet"], "text": "text", "title": "id", "mode": "packed"},
}


def prolong_note() -> str:
    return ("princeton-nlp/prolong-data-64K stores MDS shards of Llama-3 token ids; read them with "
            "`mosaicml-streaming` (StreamingDataset(local=..., remote=...)) and decode with the Llama-3 "
            "tokenizer, then pass (title, text) pairs to hub_corpora.build_from_texts().")


def download(repo: str, filename: str, revision: str, cache_dir: str | Path | None = None) -> str:
    """One dataset file from the hub at `revision` (tests replace this function)."""
    from huggingface_hub import hf_hub_download

    say(f"hf_hub_download {repo}@{revision} {filename}")
    try:
        return hf_hub_download(repo, filename, repo_type="dataset", revision=revision,
                               cache_dir=str(cache_dir) if cache_dir else None)
    except Exception as e:  # network, auth, missing file: all name the file
        raise SourceError(f"{repo}@{revision}: cannot download {filename}: {e}") from None


def resolve_dataset(name: str, revision: str | None = None, allow_unpinned: bool = False,
                    pins_path: Path = PINS_PATH) -> tuple[str, str]:
    """(repo, revision) for a hub corpus, the revision pinned in checkpoint_revisions.json."""
    spec = HUB_SPECS[name]
    pin = models.load_pins(pins_path).get("datasets", {}).get(spec["pin"]) if spec["pin"] else None
    repo = pin["repo"] if pin else spec["repo"]
    if pin and revision in (None, pin["revision"]):
        return repo, pin["revision"]
    if not allow_unpinned:
        raise SourceError(f"{name}: {repo}@{revision} is not pinned in {pins_path} "
                          f"(pinned: {pin['revision'] if pin else 'none'}); pass allow_unpinned=True (--allow-unpinned)")
    if revision is None:
        raise SourceError(f"{name}: give a revision for {repo}")
    return repo, revision


def parquet_rows(path: str | Path, text_col: str, title_col: str | None):
    """(title, text) rows of a parquet file in file order; a text that is bytes must be UTF-8."""
    import pyarrow.parquet as pq

    cols = [text_col] + ([title_col] if title_col else [])
    table = pq.read_table(path, columns=cols)
    texts = table.column(text_col).to_pylist()
    titles = table.column(title_col).to_pylist() if title_col else [f"row {i}" for i in range(len(texts))]
    for i, (title, text) in enumerate(zip(titles, texts)):
        name = f"{Path(path).name} row {i} ({title})"
        if isinstance(text, bytes):
            text = decode_utf8(text, name)
        yield name, text or ""


def build_from_texts(name: str, rows, tok, source: dict, seed: int = corpora.DEFAULT_SEED) -> tuple[dict, np.ndarray]:
    """A manifest entry + spans from (title, text) rows, with the rule of `HUB_SPECS[name]["mode"]`."""
    spec = HUB_SPECS[name]
    entry = {"selection": f"{name}: rows in file order; " + (
        "the first 16 with >= 18432 tokens" if spec["mode"] == "documents" else
        "short documents packed with the separator into 16 pseudo-documents of >= 18432 tokens"),
        "seed": seed, "source": source}
    if spec["mode"] == "documents":
        cands = (Candidate(title, {**source, "row": title}, lambda t=text: t) for title, text in rows)
        docs, spans, rejected = corpora.select_documents(cands, tok, name)
    else:
        docs, spans, rejected, stats = corpora.pack_short_documents(rows, tok, name)
        entry["packing"] = {"separator": tok.identity["separator"], **stats}
    return corpora.finish_entry(entry, docs, rejected), spans


def build_hub_corpus(name: str, tok=None, revision: str | None = None, allow_unpinned: bool = False,
                     files: list[str] | None = None, cache_dir: str | Path | None = None,
                     manifest_path: str | Path | None = None, spans_cache: str | Path | None = None,
                     force: bool = False):
    """Fetch the pinned files of a published corpus and build its entry (and optionally write it as corpus
    `name` into a manifest + span cache of the same format as the offline corpora; a manifest recorded for
    another tokenizer is refused unless force=True)."""
    if name not in HUB_SPECS:
        raise SourceError(f"unknown hub corpus {name!r}; expected one of {', '.join(HUB_SPECS)}")
    spec = HUB_SPECS[name]
    repo, rev = resolve_dataset(name, revision, allow_unpinned)
    old = None
    if manifest_path:                   # the outputs and the manifest are checked before any download
        mp, spans_cache = Path(manifest_path), Path(spans_cache or corpora.DEFAULT_CACHE)
        check_output_file(mp, "--manifest")
        old = corpora.read_manifest(mp, complete=True) if mp.exists() else None
        corpora.check_cache_dir(spans_cache, corpora.manifest_spans_dir(old or {}), [name])
    if cache_dir:
        corpora.check_output_dir(cache_dir, "--cache")
    tok = tok or corpora.default_tokenizer()
    man = corpora.open_manifest_for(mp, tok, force, old=old) if manifest_path else None
    files = files or spec["files"]

    def rows():
        for f in files:
            yield from parquet_rows(download(repo, f, rev, cache_dir), spec["text"], spec["title"])

    entry, spans = build_from_texts(name, rows(), tok, {"repo": repo, "revision": rev, "files": files})
    if man is not None:
        corpora.store(man, mp, spans_cache, {name: (entry, spans)})
    return entry, spans


def cli_hub(args) -> int:
    """`docgrad corpora hub NAME`: build_hub_corpus into the manifest and span cache."""
    entry, _ = build_hub_corpus(args.name, revision=args.revision, allow_unpinned=args.allow_unpinned,
                                cache_dir=Path(args.cache) / "hub", manifest_path=args.manifest,
                                spans_cache=args.cache, force=args.force)
    corpora.print_out(f"{args.name}: {len(entry['documents'])} documents written to {args.manifest}")
    return 0
