"""A regime's R read through its parts: docs/methods.md, Model regime, addendum 2026-12-07, sections 1 and 2.

R(W) is a ratio, block noise over what m' = W/C independent chunks would give (group 'all'):

    R(W) = N(W) / (sigma^2 / m'),   N(W) = sigma^2 R(W) / m'   (the noise variance of one W-token block),

and its long-lag part in gradient units is the long-lag covariance  sigma^2 rho_long  (rho_long's numerator).
When a regime changes R, these say whether the numerator (block noise, long-lag covariance) or the denominator
(sigma^2) moved. The per-chunk squared norms |g_{d,k}|^2 say where sigma^2 comes from: a chunk above
SPIKE_FACTOR times the cell's median is a *spiking chunk*; the share of the cell's total squared norm carried by
its TOP largest chunks says how few chunks carry it.

Every comparison of two regimes is on the same documents, so both are resampled with the same document counts
(results.regime.paired_counts) and each part's ratio other / base gets a percentile interval over those draws.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from docgrad.core import bootstrap as bs
from docgrad.core.constants import ALL
from docgrad.core.decomposition import window_column
from docgrad.results.cells import Cell, NoResultsError, load_cells
from docgrad.results.positions import first_chunks
from docgrad.results.paired import paired_counts

SPIKE_FACTOR = 10.0      # a spiking chunk: |g|^2 above this many times the cell's median
TOP = 5                  # the largest chunks whose share of all squared norm is reported
PARTS = ("R", "sigma2", "S_cross", "long_cov", "block_noise")
RATIO_PARTS = ("R", "sigma2", "long_cov", "block_noise")


def norm_distribution(cell: Cell, factor: float = SPIKE_FACTOR, top: int = TOP) -> dict:
    """The distribution of the cell's exact per-chunk squared norms (group 'all'): n chunks, median, largest,
    the spiking chunks (|g|^2 > factor x median) as rows (document, chunk, sqnorm, times the median, loss) largest
    first, their count, and the share of sum |g|^2 carried by the `top` largest chunks."""
    sq = np.asarray(cell.sqnorm, dtype=np.float64)
    flat = sq.ravel()
    median = float(np.median(flat))
    order = np.argsort(flat)[::-1]
    rows = []
    for i in order:
        if not flat[i] > factor * median:
            break
        d, k = divmod(int(i), sq.shape[1])
        rows.append({"doc": int(cell.doc_ids[d]), "chunk": k, "sqnorm": float(flat[i]),
                     "times_median": float(flat[i] / median), "loss": float(cell.loss[d, k])})
    return {"n_chunks": int(flat.size), "median": median, "largest": float(flat.max()),
            "n_spiking": len(rows), "top_share": float(flat[order[:top]].sum() / flat.sum()), "spiking": rows}


def spiking_documents(cell: Cell, factor: float = SPIKE_FACTOR) -> list[int]:
    """The documents of the cell with at least one spiking chunk (norm_distribution)."""
    return sorted({r["doc"] for r in norm_distribution(cell, factor)["spiking"]})


def parts(cell: Cell, counts: np.ndarray, window: int) -> dict[str, np.ndarray]:
    """R(window) and its parts for document weights `counts` (B, D): arrays (B,) of PARTS."""
    s = cell.sums[ALL]
    e = bs.estimate(s, counts, cell.chunk)
    j = window_column(s, cell.chunk, window)
    R = e["R"][:, j]
    return {"R": R, "sigma2": e["sigma2"], "S_cross": e["S_cross"], "long_cov": e["sigma2"] * e["rho_long"],
            "block_noise": e["sigma2"] * R / s.sizes[j]}


def paired_parts(base: Cell, other: Cell, window: int, resamples: int, seed: int, alpha: float = 0.05) -> dict:
    """Each part of PARTS for both cells on the same paired document counts: {part: {"base", "other", "ratio",
    "ci"}}, ratio = other / base with its (1 - alpha) percentile interval over the paired draws (S_cross: values
    only, its ratio is not read)."""
    counts = paired_counts([base, other], resamples, seed)
    a, b = parts(base, counts, window), parts(other, counts, window)
    out = {}
    for k in PARTS:
        row = {"base": float(a[k][0]), "other": float(b[k][0])}
        if k in RATIO_PARTS:
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = b[k] / a[k]
            row["ratio"] = float(ratio[0])
            row["ci"] = bs.percentile_ci(ratio[1:], 1 - alpha)
        out[k] = row
    return out


def through_its_parts(p: dict) -> str:
    """Which side of R moved (docs/methods.md, addendum 2026-12-07 section 2), from paired_parts:
    'denominator' when the sigma^2 ratio's interval lies above 1 while the long-lag covariance ratio's holds 1;
    'numerator' when the long-lag covariance ratio's interval excludes 1; otherwise 'neither resolved'."""
    slo, shi = p["sigma2"]["ci"]
    llo, lhi = p["long_cov"]["ci"]
    if llo is None or slo is None:
        return "neither resolved"
    if not llo <= 1.0 <= lhi:
        return "numerator"
    if slo > 1.0:
        return "denominator"
    return "neither resolved"


def spike_free_change(base: Cell, other: Cell, window: int, factor: float = SPIKE_FACTOR) -> dict:
    """R(window) of both cells on the documents where `other` has no spiking chunk (a sensitivity check,
    described): {"docs": kept documents, "base", "other", "change" = other / base - 1}; change is None when fewer
    than two documents are kept (no cross-document pair)."""
    spiking = set(spiking_documents(other, factor))
    keep = np.array([0.0 if d in spiking else 1.0 for d in other.doc_ids])
    docs = [int(d) for d, k in zip(other.doc_ids, keep) if k]
    if len(docs) < 2:
        return {"docs": docs, "base": None, "other": None, "change": None}
    ra = float(parts(base, keep[None, :], window)["R"][0])
    rb = float(parts(other, keep[None, :], window)["R"][0])
    return {"docs": docs, "base": ra, "other": rb, "change": rb / ra - 1.0}


def start_token_parts(base: Cell, with_token: Cell, resamples: int, seed: int, window: int = 16384,
                      alpha: float = 0.05) -> dict:
    """What a start-token cell's R(window) change is made of (addendum 2026-12-07, sections 1-2): paired_parts
    with its `side` (through_its_parts), the norm distribution of both cells (without the chunk rows), and the
    spike-free sensitivity."""
    p = paired_parts(base, with_token, window, resamples, seed, alpha)
    norms = {}
    for name, cell in (("as_loaded", base), ("with_token", with_token)):
        nd = norm_distribution(cell)
        norms[name] = {k: v for k, v in nd.items() if k != "spiking"}
    return {**p, "side": through_its_parts(p), "norms": norms, "spike_free": spike_free_change(base, with_token, window)}


# --- the training regime: causal windows with and without the start token (addendum 2026-12-07, section 4) ------

TRAINING_CORPORA = ("BOOKS", "CODE", "PAPERS")
CAUSAL_WINDOW = 4096
TRAINING_KINDS = ("causal", "causal_bos", "standalone", "standalone_bos")


def training_cells(results_dir, regime_dir, docs: tuple[int, int] = (0, 16), window: int = CAUSAL_WINDOW,
                   corpora=TRAINING_CORPORA) -> dict:
    """{(corpus, kind): Cell} over documents `docs` for the kinds of TRAINING_KINDS: the causal cell (results_dir),
    the causal cell with <|endoftext|> at position 0 (regime_dir, regime 'bos0'), and the standalone cells as
    loaded and with the start token restricted to the window's chunks (positions.first_chunks). Missing ones are
    left out."""
    def cells(directory, context, regime):
        try:
            return {c.corpus: c for c in load_cells(Path(directory), groups=None, context=context, docs=docs,
                                                    regime=regime).values()
                    if c.corpus in corpora and (c.window in (None, window))}
        except NoResultsError:
            return {}

    found = {}
    for kind, directory, context, regime in (("causal", results_dir, "causal", ""),
                                             ("causal_bos", regime_dir, "causal", "bos0"),
                                             ("standalone", results_dir, "standalone", ""),
                                             ("standalone_bos", regime_dir, "standalone", "bos0")):
        for corpus, c in cells(directory, context, regime).items():
            found[(corpus, kind)] = first_chunks(c, window // c.chunk) if context == "standalone" else c
    return found
