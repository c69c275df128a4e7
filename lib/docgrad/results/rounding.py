"""Rounding read with its noise draws (docs/methods.md, Model regime, addendum 2026-12-07, section 5).

Common random numbers: draw j adds sqrt(lambda/12) d z_j to every rounded weight (seed 10 + j), the same z_j at
lambda = 1 and 2; three draws j = 1, 2, 3 per lambda, CODE and WEB, documents 0-7 (CRN_CELLS). With
theta_lambda the mean over draws of R_lambda,j(16K) and theta_0 the model as loaded on the same documents,

    delta = (3 theta_0 - 3 theta_1 + theta_2) / theta_0 - 1          (the quadratic extrapolant to lambda = -1)

and its interval covers documents and draws: replicate i resamples the 8 documents (the same counts for every
cell of the corpus: the paired generator of results.paired) and, independently, 3 draws with replacement (a
resampled draw brings its lambda = 1 and 2 cells together). Holm over the 2 corpora, margin 10%
(core.simex_fit.regime_decision). With 3 draws the interval understates the draw variance by about (J - 1) / J;
the reading carries each draw's own delta so a page can show their spread.
"""

from __future__ import annotations

import numpy as np

from docgrad.core import bootstrap as bs
from docgrad.core.constants import ALL, HEADLINE_WINDOW
from docgrad.core.decomposition import window_column
from docgrad.core.simex_fit import extrapolate
from docgrad.results.cells import Cell
from docgrad.results.paired import check_same_documents, paired_rng

CRN_SEEDS = (11, 12, 13)
CRN_CORPORA = ("CODE", "WEB")
CRN_DOCS = (0, 8)


def crn_regimes() -> list[tuple[float, int, str]]:
    """(lambda, seed, regime label) of every common-random-number cell of a corpus, lambda 1 then 2."""
    return [(lam, s, f"simex{lam}-s{s}") for lam in (1, 2) for s in CRN_SEEDS]


def crn_cells(found: dict, as_loaded: dict) -> dict:
    """{"complete", "present", "missing"}: which CRN cells are in `found` ({(corpus, regime): Cell} of documents
    CRN_DOCS) and whether each corpus's model as loaded (`as_loaded` {corpus: Cell}) holds those documents."""
    needed = [(c, r) for c in CRN_CORPORA for _, _, r in crn_regimes()]
    present = [k for k in needed if k in found]
    missing = [k for k in needed if k not in found] + [(c, "") for c in CRN_CORPORA if c not in as_loaded]
    return {"complete": not missing, "present": present, "missing": missing}


def document_counts(cell: Cell, docs: list[int], counts: np.ndarray) -> np.ndarray:
    """counts (rows, len(docs)) placed at the cell's columns of those documents, 0 for its other documents: a
    cell over more documents read on a subset of them."""
    out = np.zeros((counts.shape[0], len(cell.doc_ids)))
    where = {d: i for i, d in enumerate(cell.doc_ids)}
    missing = [d for d in docs if d not in where]
    if missing:
        raise ValueError(f"{cell.name}: documents {missing} are not in the cell")
    out[:, [where[d] for d in docs]] = counts
    return out


def crn_R(base: Cell, by_regime: dict[str, Cell], resamples: int, seed: int,
          window: int = HEADLINE_WINDOW) -> tuple[np.ndarray, np.ndarray]:
    """(R_0 of shape (1 + resamples,), R of shape (1 + resamples, 2, 3): lambda 1 and 2 by draw) on the same
    document counts, row 0 every document of CRN_DOCS once."""
    docs = list(range(*CRN_DOCS))
    cells = [by_regime[r] for _, _, r in crn_regimes()]
    check_same_documents([base, *cells], docs)
    n = len(docs)
    draws = (bs.counts_from_indices(bs.resample_indices(paired_rng(seed, base.corpus), n, resamples), n)
             if resamples else np.zeros((0, n)))
    counts = np.vstack([np.ones((1, n)), draws])

    def R(cell):
        s = cell.sums[ALL]
        return bs.estimate(s, document_counts(cell, docs, counts), cell.chunk)["R"][:, window_column(s, cell.chunk,
                                                                                                     window)]
    return R(base), np.stack([R(c) for c in cells], axis=1).reshape(len(counts), 2, len(CRN_SEEDS))


def crn_change(R0: np.ndarray, R: np.ndarray, rng: np.random.Generator, method: str = "quadratic") -> tuple:
    """(delta, its draws over documents and draws, each draw's own delta): theta_lambda the mean over the draws
    of R_lambda (row 0: all three; replicate i: 3 draws resampled with replacement, the same for both lambdas)."""
    def delta(r0, th1, th2):
        with np.errstate(divide="ignore", invalid="ignore"):
            return extrapolate(np.stack([r0, th1, th2], axis=-1), method) / r0 - 1.0

    point = float(delta(R0[0], R[0, 0].mean(), R[0, 1].mean()))
    J = R.shape[2]
    pick = rng.integers(0, J, size=(len(R) - 1, J))
    rows = np.arange(1, len(R))[:, None]
    th1, th2 = R[rows, 0, pick].mean(axis=1), R[rows, 1, pick].mean(axis=1)
    each = [float(delta(R0[0], R[0, 0, j], R[0, 1, j])) for j in range(J)]
    return point, delta(R0[1:], th1, th2), each


def read_crn_rounding(found: dict, as_loaded: dict, resamples: int, seed: int, alpha: float = 0.05) -> dict:
    """The rounding question by section 5: while a cell is missing {"complete": False, "present", "missing"}
    only; complete: "R" (regime_reading: Holm over CODE and WEB, margin 10%), "linear" (the linear extrapolant's
    delta, a sensitivity check), "each_draw" ({corpus: delta of each draw alone}), "values" ({corpus: R(16K) at
    lambda 0 and, per draw, at 1 and 2}), "n_docs" and "draws"."""
    out = {"question": "rounding", **crn_cells(found, as_loaded), "method": "common random numbers"}
    if not out["complete"]:
        return out
    changes, linear, each, values = {}, {}, {}, {}
    for corpus in CRN_CORPORA:
        R0, R = crn_R(as_loaded[corpus], {r: found[(corpus, r)] for _, _, r in crn_regimes()}, resamples, seed)
        rng = np.random.default_rng([seed, sum(map(ord, corpus)), 5])      # the draws' resampling, its own stream
        point, draws, each[corpus] = crn_change(R0, R, rng)
        changes[corpus] = (point, draws)
        linear[corpus] = crn_change(R0, R, np.random.default_rng(0), "linear")[0]
        values[corpus] = {"lambda0": float(R0[0]), "lambda1": R[0, 0].tolist(), "lambda2": R[0, 1].tolist()}
    out.update({"changes": changes, "linear": linear, "each_draw": each, "values": values,
                "n_docs": CRN_DOCS[1] - CRN_DOCS[0], "draws": len(CRN_SEEDS)})
    return out


CURVE_LAMBDAS = np.linspace(-1.0, 2.0, 13)


def crn_curve_rows(values: dict[str, dict]) -> list[dict]:
    """The figure of the rounding reading: per corpus and draw ("seed 11".., and "mean", theta_lambda) R(16K) at
    lambda = 0, 1, 2 ("measured"), the quadratic through them on CURVE_LAMBDAS ("quadratic") and read at
    lambda = -1 ("unrounded", the extrapolant the reading decides on); values: read_crn_rounding's
    {corpus: {"lambda0", "lambda1": [per draw], "lambda2": [per draw]}}."""
    rows = []
    for corpus, v in values.items():
        by = {f"seed {s}": (v["lambda0"], a, b) for s, a, b in zip(CRN_SEEDS, v["lambda1"], v["lambda2"])}
        by["mean"] = (v["lambda0"], float(np.mean(v["lambda1"])), float(np.mean(v["lambda2"])))
        for draw, theta in by.items():
            row = {"corpus": corpus, "draw": draw}
            rows += [row | {"lambda": lam, "R": r, "kind": "measured"} for lam, r in zip((0, 1, 2), theta)]
            curve = np.polyval(np.polyfit([0.0, 1.0, 2.0], theta, 2), CURVE_LAMBDAS)
            rows += [row | {"lambda": float(lam), "R": float(r), "kind": "quadratic"}
                     for lam, r in zip(CURVE_LAMBDAS, curve)]
            rows.append(row | {"lambda": -1, "R": float(extrapolate(np.array(theta), "quadratic")),
                               "kind": "unrounded"})
    return rows
