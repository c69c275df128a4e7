"""The data of the design-effect explorer: each cell's correlation profile rho(l) and, per block length m, R(mC)
from it (docgrad.core.bootstrap.R_from_rho) with its 95% document-bootstrap interval, plus the noise terms that
turn R into batch sizes. The browser recomputes R from the profile; the intervals need the resamples, so they
are computed here."""

from __future__ import annotations

import numpy as np
import pandas as pd

from docgrad.core import bootstrap as bs
from docgrad.core.constants import CI_LEVEL
from docgrad.results.cells import Cell
from docgrad.results.stats import cell_rng


def cell_profile(cell: Cell, label: str, resamples: int, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(rho rows: label, corpus, lag (chunks), lag_tokens, rho; R rows: label, corpus, m, W_tokens, R, lo, hi,
    sigma2, S_cross, B_simple_shuf_tokens) of one cell, group 'all'. The draws are the cell's document bootstrap
    (its generator, as for the pages' intervals)."""
    s, C = cell.sums["all"], cell.chunk
    D = len(s.n)
    c = np.ones((1, D))
    if resamples:
        c = np.vstack([c, bs.counts_from_indices(bs.resample_indices(cell_rng(seed, cell), D, resamples), D)])
    e = bs.estimate(s, c, C)
    rho = e["rho"]
    L = rho.shape[1]
    rho_rows = pd.DataFrame({"label": label, "corpus": cell.corpus, "lag": np.arange(1, L + 1),
                             "lag_tokens": np.arange(1, L + 1) * C, "rho": rho[0]})
    rows = []
    for m in range(1, L + 2):
        R = bs.R_from_rho(rho, m)
        lo, hi = bs.percentile_ci(R[1:], CI_LEVEL) if resamples else (None, None)
        rows.append({"label": label, "corpus": cell.corpus, "m": m, "W_tokens": m * C, "R": float(R[0]), "lo": lo,
                     "hi": hi})
    R_rows = pd.DataFrame(rows).assign(sigma2=float(e["sigma2"][0]), S_cross=float(e["S_cross"][0]),
                                       B_simple_shuf_tokens=float(e["B_simple_shuf_tokens"][0]), chunk=C)
    return rho_rows, R_rows
