"""Two measurements of the same documents, compared with paired resamples. Definitions:
docs/methods.md#evidence-rules.

Two models measured the same documents of a corpus (the same text, each through its own tokenizer). Their
R(16K) are then not independent: a hard document is hard for both. The paired document bootstrap draws the
shared documents with replacement once per resample and gives both cells the same counts, so the difference

    d^(i) = R_y(c^(i)) - R_x(c^(i)),      c^(i) = counts of the shared documents in draw i,

keeps the correlation between the models; the point difference is R_y(1) - R_x(1) over the shared documents
alone (a document only one model measured has weight 0). Documents are matched by the sha256 of their text in
each model's corpus manifest; a corpus with fewer than MIN_SHARED shared documents (a packed control is packed
per tokenizer, so its pseudo-documents differ) has no paired comparison.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

from docgrad.core import bootstrap as bs
from docgrad.core.constants import HEADLINE_WINDOW
from docgrad.core.decomposition import window_column
from docgrad.results.cells import Cell
from docgrad.results.format import ResultFileError

MIN_SHARED = 4


@dataclass
class PairedDifference:
    """y minus x on the shared documents: the point difference, the per-draw differences (paired), each side's
    point value on the shared documents and how many documents they share."""

    corpus: str
    n_shared: int
    x: float
    y: float
    diff: float
    draws: np.ndarray

    def to_json(self) -> dict:
        return {"corpus": self.corpus, "n_shared": self.n_shared, "x": self.x, "y": self.y, "diff": self.diff,
                "ci": bs.percentile_ci(self.draws)}


def shared_documents(docs_x: list[dict], docs_y: list[dict], ids_x, ids_y) -> list[tuple[int, int]]:
    """(position in cell x, position in cell y) of every document both cells measured, matched by the text
    sha256 of their manifest entries (lists of the manifest's document records), in x's order."""
    sha_x = {int(d["doc"]): d["text_sha256"] for d in docs_x}
    pos_y = {}
    by_doc_y = {int(d["doc"]): d["text_sha256"] for d in docs_y}
    for j, i in enumerate(ids_y):
        if int(i) in by_doc_y:
            pos_y.setdefault(by_doc_y[int(i)], j)
    return [(j, pos_y[sha_x[int(i)]]) for j, i in enumerate(ids_x)
            if int(i) in sha_x and sha_x[int(i)] in pos_y]


def paired_rng(seed: int, corpus: str) -> np.random.Generator:
    """The generator of a paired comparison: (seed, crc32 of 'paired ' + corpus), the same for every pair of
    models, so the same shared documents get the same draws."""
    return np.random.default_rng([int(seed), zlib.crc32(f"paired {corpus}".encode())])


def _R(cell: Cell, counts: np.ndarray, window: int) -> np.ndarray:
    s = cell.sums["all"]
    return bs.estimate(s, counts, cell.chunk)["R"][:, window_column(s, cell.chunk, window)]


def paired_difference(x: Cell, y: Cell, pairs: list[tuple[int, int]], resamples: int, seed: int,
                      window: int = HEADLINE_WINDOW) -> PairedDifference | None:
    """R(window) of y minus that of x over their shared documents `pairs` (shared_documents), with `resamples`
    paired document-bootstrap draws; None with fewer than MIN_SHARED shared documents."""
    if len(pairs) < MIN_SHARED:
        return None
    px, py = np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
    n = len(pairs)
    shared = bs.counts_from_indices(bs.resample_indices(paired_rng(seed, x.corpus), n, resamples), n) \
        if resamples else np.ones((0, n))
    ones = np.ones((1, n))

    def spread(c, pos, D):
        out = np.zeros((c.shape[0], D))
        out[:, pos] = c
        return out

    Dx, Dy = len(x.sums["all"].n), len(y.sums["all"].n)
    rx = _R(x, spread(np.vstack([ones, shared]), px, Dx), window)
    ry = _R(y, spread(np.vstack([ones, shared]), py, Dy), window)
    return PairedDifference(x.corpus, n, float(rx[0]), float(ry[0]), float(ry[0] - rx[0]), ry[1:] - rx[1:])


# --- regimes of one model on the same documents (results.regime, results.regime_parts) -------------------

def span_hashes(cell: Cell) -> dict[int, str]:
    """document -> span sha256, from the json of every shard of the cell."""
    out = {}
    for sh in cell.shards:
        out.update({int(d): str(h) for d, h in (sh.meta.get("spans_sha256") or {}).items()})
    return out


def check_same_documents(cells: list[Cell], docs: list[int] | None = None) -> None:
    """Refuse cells that did not measure the same documents over the same spans (names the cell and documents);
    with `docs`, only those documents, which every cell must hold (cells over more documents read on a subset)."""
    first = cells[0]
    hashes = span_hashes(first)
    for c in cells[1:]:
        if docs is None and list(c.doc_ids) != list(first.doc_ids):
            raise ResultFileError(f"{c.name} holds documents {c.doc_ids}, {first.name} {first.doc_ids}: a regime "
                                  "comparison needs the same documents")
        other = span_hashes(c)
        differ = [d for d in (first.doc_ids if docs is None else docs)
                  if hashes.get(d) is None or hashes.get(d) != other.get(d)]
        if differ:
            raise ResultFileError(f"{c.name} and {first.name}: the span sha256 of documents {differ} differ or are "
                                  "missing; a regime comparison needs the same spans")


def paired_counts(cells: list[Cell], resamples: int, seed: int) -> np.ndarray:
    """Document counts (1 + resamples, documents) shared by every regime of one corpus: row 0 every document once,
    rows 1.. the paired draws (the corpus's paired generator); the cells must hold the same documents."""
    check_same_documents(cells)
    n = len(cells[0].doc_ids)
    draws = bs.counts_from_indices(bs.resample_indices(paired_rng(seed, cells[0].corpus), n, resamples), n) \
        if resamples else np.ones((0, n))
    return np.vstack([np.ones((1, n)), draws])
