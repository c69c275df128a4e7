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
