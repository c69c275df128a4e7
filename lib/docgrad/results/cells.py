"""Cells: the result files (shards) of one (model, revision, corpus, chunk), pooled into block sums.

Every document keeps its within-document pairs, and cross-document pairs are used wherever both documents
sit in one file (pairs across files were never computed). The Gram diagonal is replaced by the exact squared
norms, and the group 'all' is the sum of the groups (inner products add over disjoint coordinates).
docs/methods.md, "Gram matrices and result files".

How the gradients were taken is part of a cell's identity: a causal file (--context causal --window W) belongs
to the cell (model, revision, corpus, chunk, "causal", W) and is never pooled with standalone files, and
load_cells reads one kind at a time (context="standalone", the default, or "causal"; docs/methods.md, "Causal
context"). Likewise the arithmetic: a bf16 file (--dtype bfloat16) belongs to its own cell, ending in
"bfloat16", and load_cells reads float32 files unless asked (dtype=). position_profile gives the per-position loss and squared norm, which matter once chunk positions are
not exchangeable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from docgrad.core import bootstrap as bs
from docgrad.core.constants import ALL, CAUSAL, DTYPES, FLOAT32, GROUPS, STANDALONE
from docgrad.results.format import ResultFileError, Shard, check_groups, find_results, load_result, parse_stem


class NoResultsError(ResultFileError, FileNotFoundError):
    """A results directory holds no result file."""


@dataclass
class Cell:
    """One pooled cell: documents in sorted order, the block sums per group (and 'all'), losses."""

    model: str
    revision: str
    corpus: str
    chunk: int
    doc_ids: list[int]                       # global document ids, sorted
    m: int                                   # chunks per document
    sums: dict[str, bs.BlockSums]            # group (and 'all') -> block sums
    loss: np.ndarray                         # (D, m) per-chunk loss
    shards: list[Shard] = field(default_factory=list, repr=False)   # in document order
    context: str = STANDALONE                # how the gradients were taken (args.context of every shard)
    window: int | None = None                # the causal window W in tokens, else None
    sqnorm: np.ndarray | None = field(default=None, repr=False)     # (D, m) exact squared norms, group 'all'
    dtype: str = FLOAT32                     # arithmetic of the forward passes (args.dtype of every shard)
    regime: str = ""                         # model regime (format.regime_label): '' for the model as loaded

    @property
    def files(self) -> list[Path]:
        return [sh.path for sh in self.shards]

    @property
    def file_list(self) -> str:
        """The cell's files, comma-separated, for messages that name them."""
        return ", ".join(str(f) for f in self.files) or "(no files)"

    @property
    def key(self) -> tuple:
        """(model, revision, corpus, chunk), ("causal", W) after it for a causal cell, the dtype last for a
        bf16 cell (Shard.cell)."""
        key = (self.model, self.revision, self.corpus, self.chunk)
        if self.context == CAUSAL:
            key = (*key, CAUSAL, self.window)
        key = key if self.dtype == FLOAT32 else (*key, self.dtype)
        return (*key, self.regime) if self.regime else key

    @property
    def name(self) -> str:
        """The cell's name (it also seeds the cell's bootstrap generator): a causal cell's ends in 'causal w<W>',
        a bf16 cell's in 'bfloat16' (a float32 cell's name is what it was before dtypes existed)."""
        name = f"{self.model} {self.revision} {self.corpus} c{self.chunk}"
        if self.context == CAUSAL:
            name = f"{name} {CAUSAL} w{self.window}"
        name = name if self.dtype == FLOAT32 else f"{name} {self.dtype}"
        return f"{name} {self.regime}" if self.regime else name


def ordered_rows(shard: Shard) -> tuple[list[int], int, np.ndarray]:
    """Documents of a file, chunks per document, and the row order (document, chunk); checks completeness."""
    idx = shard.index
    docs = sorted(set(idx[:, 0].tolist()))
    counts = {d: int(np.sum(idx[:, 0] == d)) for d in docs}
    m = counts[docs[0]]
    for d in docs:
        got = np.sort(idx[idx[:, 0] == d, 1])
        if counts[d] != m or not np.array_equal(got, np.arange(m)):
            raise ResultFileError(f"{shard.path}: document {d} has chunks {got.tolist()[:5]}... ({counts[d]} of them); "
                                  f"expected chunks 0..{m - 1} like document {docs[0]}")
    order = np.lexsort((idx[:, 1], idx[:, 0]))
    return docs, m, order


def _check_names(shard: Shard) -> None:
    try:
        st = parse_stem(shard.path)
    except ResultFileError:
        return                                     # names are informative only; args are authoritative
    a = shard.args
    if (st["context"] == CAUSAL) != (shard.context == CAUSAL) or st["window"] != shard.window:
        named = f"window {st['window']} (causal)" if st["context"] == CAUSAL else "no window (standalone)"
        raise ResultFileError(f"{shard.path}: file name says {named} but args say context {shard.context!r}, "
                              f"window {shard.window}")
    if st["regime"] != shard.regime:
        raise ResultFileError(f"{shard.path}: file name says model regime {st['regime'] or '(none)'!r} but its args "
                              f"(start_token, simex) say {shard.regime or '(none)'!r}")
    if st["dtype"] != shard.dtype:
        raise ResultFileError(f"{shard.path}: file name says dtype {st['dtype']} but args.dtype is {shard.dtype!r}")
    if int(st["chunk"]) != int(a["chunk"]):
        raise ResultFileError(f"{shard.path}: file name says chunk {st['chunk']} but args.chunk is {a['chunk']} "
                              f"(mixed chunk sizes in one cell)")
    if st["corpus"] != a["corpus"]:
        raise ResultFileError(f"{shard.path}: file name says corpus {st['corpus']} but args.corpus is {a['corpus']}")


class _Part(NamedTuple):
    """One shard of a cell with its documents (ascending), chunks per document and row order."""
    shard: Shard
    docs: list[int]
    m: int
    order: np.ndarray


def _check_distinct_spans(key, parts: list[_Part]) -> None:
    """Refuse a cell in which two document ids carry the same token span (the same text counted twice would
    pass for two independent documents). Uses the files' spans_sha256 records where they are per-document."""
    first: dict[str, tuple[int, Path]] = {}
    for p in parts:
        rec = p.shard.meta.get("spans_sha256")
        if not isinstance(rec, dict):
            continue                               # published files record one hash for the whole shard
        for d in p.docs:
            h = rec.get(str(d))
            if h is None:
                continue
            if h in first:
                d0, f0 = first[h]
                raise ResultFileError(f"cell {key}: documents {d0} ({f0}) and {d} ({p.shard.path}) have the same "
                                      f"token span (sha256 {h[:12]}..); a document measured twice is not two "
                                      "independent documents")
            first[h] = (d, p.shard.path)


SHARD_AGREES_ON = ("buckets", "seed")     # beside model, revision, corpus, chunk, context, window and dtype


def pool_cell(shards: list[Shard]) -> Cell:
    """Pool the shards of one cell; refuse overlapping documents, mixed chunk counts, mismatched groups."""
    if not shards:
        raise ValueError("pool_cell: no shards")
    key = shards[0].cell
    groups = sorted(shards[0].gram)
    mode = (shards[0].context, shards[0].window)
    for sh in shards:
        _check_names(sh)
        if sh.regime != shards[0].regime:
            raise ResultFileError(f"{sh.path}: model regime {sh.regime or '(none)'!r}, but "
                                  f"{shards[0].regime or '(none)'!r} in {shards[0].path}; regimes are never pooled")
        if (sh.context, sh.window) != mode:
            raise ResultFileError(f"{sh.path}: its gradients were taken in context {sh.context!r} (window "
                                  f"{sh.window}), those of {shards[0].path} in {mode[0]!r} (window {mode[1]}); "
                                  "causal and standalone shards (or two windows) are never pooled into one cell")
        if sh.dtype != shards[0].dtype:
            raise ResultFileError(f"{sh.path}: its forward passes ran in {sh.dtype}, those of {shards[0].path} in "
                                  f"{shards[0].dtype}; shards of different dtypes are never pooled into one cell "
                                  "(compare them with docgrad.results.precision_checks.paired_difference)")
        if sh.cell != key:
            raise ResultFileError(f"{sh.path}: belongs to cell {sh.cell}, not {key}")
        if sorted(sh.gram) != groups:
            raise ResultFileError(f"{sh.path}: groups {sorted(sh.gram)} differ from {groups} in {shards[0].path}")
        for key_ in SHARD_AGREES_ON:                   # what changes the numbers must be the same in every shard
            mine, first = sh.args.get(key_), shards[0].args.get(key_)
            if mine != first:
                raise ResultFileError(f"{sh.path}: args.{key_} is {mine!r} but {first!r} in {shards[0].path}; "
                                      "shards sketched differently are never pooled into one cell")
    seen: dict[int, Path] = {}
    parts, clashes = [], []
    for sh in shards:
        docs, m, order = ordered_rows(sh)
        clashes += [f"document {d} in {sh.path} and {seen[d]}" for d in docs if d in seen]
        seen.update({d: sh.path for d in docs if d not in seen})
        parts.append(_Part(sh, docs, m, order))
    if clashes:
        raise ResultFileError(f"overlapping shards of cell {key}: " + "; ".join(clashes))
    _check_distinct_spans(key, parts)
    ms = {p.m for p in parts}
    if len(ms) > 1:
        detail = ", ".join(f"{p.shard.path.name}: {p.m}" for p in parts)
        raise ResultFileError(f"cell {key}: files disagree on chunks per document ({detail})")
    m = ms.pop()
    parts.sort(key=lambda p: p.docs[0])
    sums: dict[str, bs.BlockSums] = {}
    for g in groups:
        blocks = []
        for p in parts:
            K = np.array(p.shard.gram[g], dtype=np.float64)
            K[np.diag_indices_from(K)] = p.shard.sqnorm[g]
            blocks.append(bs.shard_block_sums(K[np.ix_(p.order, p.order)], len(p.docs), m))
        sums[g] = bs.assemble(blocks, m)
    total = sums[groups[0]]
    for g in groups[1:]:
        total = total + sums[g]
    sums[ALL] = total
    doc_ids = [d for p in parts for d in p.docs]
    loss = np.concatenate([p.shard.loss[p.order].reshape(len(p.docs), m) for p in parts])
    sqnorm = np.concatenate([sum(np.asarray(p.shard.sqnorm[g], dtype=np.float64) for g in groups)[p.order]
                             .reshape(len(p.docs), m) for p in parts])
    if len(doc_ids) < 2 or not np.any(sums[ALL].Np - np.diag(np.diag(sums[ALL].Np))):
        raise ResultFileError(f"cell {key}: no cross-document pairs (every file holds a single document: "
                              f"{[str(p.shard.path) for p in parts]}); S_cross is undefined")
    model, revision, corpus, chunk = key[:4]
    return Cell(model, revision, corpus, chunk, doc_ids, m, sums, loss, [p.shard for p in parts],
                context=mode[0], window=mode[1], sqnorm=sqnorm, dtype=shards[0].dtype, regime=shards[0].regime)


def position_profile(cell: Cell) -> dict[str, np.ndarray]:
    """Per chunk position k = 0 .. m-1, over the cell's documents: mean loss ('loss') and mean exact squared
    norm of the gradient, group 'all' ('sqnorm'). In the causal context positions are not exchangeable
    (chunk k has k chunks of context), so these are reported beside the pooled estimators."""
    return {"loss": cell.loss.mean(axis=0), "sqnorm": cell.sqnorm.mean(axis=0)}


def read_results(results_dir: Path) -> list[Shard]:
    """Every result file under results_dir (format.find_results), read and validated once, in path order. A
    directory without result files (or none at all) is a NoResultsError; a bad file, a ResultFileError naming it."""
    files = find_results(results_dir)
    if not files:
        raise NoResultsError(f"{results_dir}: no result files (*.npz with .json) found")
    shards = []
    for f in files:
        sh = load_result(f)
        _check_names(sh)                         # a renamed file is refused, not silently filtered out
        shards.append(sh)
    return shards


def check_kind(context: str | None, dtype: str | None) -> None:
    """context and dtype name kinds of result files (see pool_results)."""
    if context not in (STANDALONE, CAUSAL, None):
        raise ValueError(f"load_cells: context must be {STANDALONE!r}, {CAUSAL!r} or None, got {context!r}")
    if dtype is not None and dtype not in DTYPES:
        raise ValueError(f"load_cells: dtype must be one of {DTYPES} or None, got {dtype!r}")


def pool_results(shards: list[Shard], results_dir: Path, groups: tuple[str, ...] | None = GROUPS,
                 context: str | None = STANDALONE, dtype: str | None = FLOAT32,
                 docs: tuple[int, int] | None = None, regime: str | None = "") -> dict[tuple, Cell]:
    """The cells of result files already read (read_results from results_dir), pooled. groups: groups each file
    must have (None: whatever they share). context: which files to pool: "standalone" (default: every file that
    is not causal, so the standard analysis is the same whether or not causal results sit beside it), "causal",
    or None (all kinds, each in its own cells). dtype: likewise "float32" (default), "bfloat16", or None (both,
    each in its own cells). docs: (a, b) pools only the files whose documents all lie in [a, b) (e.g. (0, 16),
    the published design's documents, when 48-document shards sit beside them); None (default) every file.
    regime: the model regime to pool ('' (default): the model as loaded; 'bos0', ...; None: every regime, each in
    its own cells)."""
    check_kind(context, dtype)
    by_cell: dict[tuple, list[Shard]] = {}
    skipped, other_dtype, outside, other_regime = 0, set(), [], set()
    for sh in shards:
        if regime is not None and sh.regime != regime:
            other_regime.add(sh.regime or "(none)")
            continue
        if groups is not None:
            check_groups(sh, groups)
        if context is not None and (sh.context == CAUSAL) != (context == CAUSAL):
            skipped += 1
            continue
        if docs is not None and not all(docs[0] <= int(d) < docs[1] for d in np.unique(sh.index[:, 0])):
            outside.append(sh.path.stem)
            continue
        if dtype is not None and sh.dtype != dtype:
            other_dtype.add(sh.dtype)
            continue
        by_cell.setdefault(sh.cell, []).append(sh)
    if not by_cell and other_regime:
        raise NoResultsError(f"{results_dir}: no result files of model regime {regime or '(none)'!r} (only "
                             f"{', '.join(sorted(other_regime))} there; pass regime= one of those)")
    if not by_cell and other_dtype:
        raise NoResultsError(f"{results_dir}: no {dtype} result files of context {context} (only "
                             f"{', '.join(sorted(other_dtype))} files there; read those with --dtype / dtype= "
                             f"{' or '.join(sorted(other_dtype))})")
    if not by_cell and outside:
        raise NoResultsError(f"{results_dir}: no {context or ''} result file holds only documents {docs[0]}:{docs[1]} "
                             f"(a cell is pooled from whole files; {len(outside)} file(s) hold others, e.g. "
                             f"{', '.join(sorted(set(outside))[:3])}); choose a range of whole files, e.g. 0:16")
    if not by_cell:
        other = "standalone" if context == CAUSAL else "causal"
        raise NoResultsError(f"{results_dir}: no {context} result files ({skipped} {other} file(s) there; read "
                             f"those with context={other!r})")
    return {k: pool_cell(v) for k, v in sorted(by_cell.items())}


def load_cells(results_dir: Path, groups: tuple[str, ...] | None = GROUPS,
               context: str | None = STANDALONE, dtype: str | None = FLOAT32,
               docs: tuple[int, int] | None = None, regime: str | None = "") -> dict[tuple, Cell]:
    """Every cell under results_dir, pooled: pool_results(read_results(results_dir), ...) (see both)."""
    check_kind(context, dtype)
    return pool_results(read_results(results_dir), results_dir, groups, context, dtype, docs, regime)
