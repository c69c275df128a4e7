"""One pooled cell's decomposition (docgrad.core.decomposition) with its by-source table, leave-one-out influence
and both bootstraps (document, source-clustered), as the pages read it. Definitions: docs/methods.md#decomposition."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from docgrad.core import bootstrap as bs
from docgrad.core.constants import BOOTSTRAP_SEED, CHUNK, HEADLINE_WINDOW, MIN_INTERVAL_DOCS, RESAMPLES, RHO_BANDS
from docgrad.core.decomposition import (
    DECOMP_KEYS,
    span_window,
    by_source,
    cluster_counts,
    decompose,
    jackknife_se,
    leave_one_out,
    mean_gradient_share,
    same_source_pair_fraction,
    source_pair_means,
    window_column,
)
from docgrad.corpora.provenance import document_sources
from docgrad.results.cells import load_cells
from docgrad.results.stats import cell_rng, check_resamples, defined_ci


@dataclass
class CellDecomposition:
    """Everything this module computes for one cell (group 'all'). Intervals: 95% percentile intervals over the
    finite draws, `doc` = document bootstrap (the draws of docgrad.results.stats, same generator), `source` =
    source-clustered bootstrap (same generator, sources drawn)."""

    corpus: str
    doc_ids: list[int]
    sources: list[str]
    chunk: int
    m: int
    R: float                                  # the study's R(16K)
    R_x: float                                # about the cross-source mean (source term included)
    R_within: float                           # source term removed
    terms: dict[str, float]                   # DECOMP_KEYS
    pair_means: dict[str, float]
    by_source: list[dict]
    loo: dict[str, list[float]]               # per document (cell order): leave_one_out's arrays
    jackknife_se_R: float
    intervals: dict = field(default_factory=dict)   # {'doc'|'source': {stat: [lo, hi]}}
    nonfinite: dict = field(default_factory=dict)   # {'doc'|'source': {stat: fraction of non-finite draws}}
    draws: dict = field(default_factory=dict, repr=False)   # {'doc'|'source': {stat: array}} (not serialised)
    support: dict = field(default_factory=dict)     # {'doc'|'source': distinct finite R draws, their min and max}

    @property
    def n_sources(self) -> int:
        return len(set(self.sources))

    @property
    def shared_sources(self) -> dict[str, int]:
        """Sources with more than one document, with their document counts."""
        return {k: v for k, v in Counter(self.sources).items() if v > 1}

    def to_json(self) -> dict:
        return {"corpus": self.corpus, "doc_ids": self.doc_ids, "sources": self.sources, "n_sources": self.n_sources,
                "shared_sources": self.shared_sources,
                "same_source_pair_fraction": same_source_pair_fraction(self.sources), "R_16K": self.R,
                "R_x_16K": self.R_x,
                "R_within_16K": self.R_within, **self.terms, "pair_means": self.pair_means,
                "by_source": self.by_source, "leave_one_out": self.loo, "jackknife_se_R_16K": self.jackknife_se_R,
                "intervals": self.intervals, "nonfinite": self.nonfinite, "support": self.support}


BOOT_STATS = ("R", "R_x", "R_within", "rho_src", "rho_doc", "B_simple_shuf", "B_simple_contig_16K",
              "mean_gradient_share")


def _boot_stats(s: bs.BlockSums, sources, chunk: int, c: np.ndarray, j: int) -> dict[str, np.ndarray]:
    e = bs.estimate(s, c, chunk)
    d = decompose(s, sources, chunk, c)
    return {"R": e["R"][:, j], "R_x": d["R_x"][:, j], "R_within": d["R_within"][:, j], "rho_src": d["rho_src"],
            "rho_doc": d["rho_doc"], "B_simple_shuf": e["B_simple_shuf_tokens"],
            "B_simple_contig_16K": e["B_simple_shuf_tokens"] * e["R"][:, j],
            "mean_gradient_share": mean_gradient_share(e["S_cross"], e["sigma2"])}


def decompose_cell(cell, sources: Sequence[str], resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED,
                   window: int = HEADLINE_WINDOW) -> CellDecomposition:
    """The decomposition, by-source table, leave-one-out influence and both bootstraps of one pooled cell
    (docgrad.results.cells.Cell), group 'all'. Both bootstraps use the cell's generator (docgrad.results.stats.cell_rng), so
    the document bootstrap's draws are exactly those behind the pages' intervals."""
    s, C = cell.sums["all"], cell.chunk
    sources = list(sources)
    window = span_window(s, C, window)          # R at the span when the corpus's span is shorter than 16K
    j = window_column(s, C, window)
    ones = np.ones(len(s.n))
    e = bs.estimate(s, ones, C)
    d = decompose(s, sources, C)
    loo = leave_one_out(s, C, window)
    out = CellDecomposition(cell.corpus, list(cell.doc_ids), sources, C, cell.m, float(e["R"][0, j]),
                            float(d["R_x"][0, j]), float(d["R_within"][0, j]),
                            {k: float(d[k][0]) for k in DECOMP_KEYS}, source_pair_means(s, sources),
                            by_source(s, sources, C, window, cell_rng(seed, cell), check_resamples(resamples)), {k: [float(x) for x in v] for k, v in loo.items()},
                            jackknife_se(loo["R"]))
    resamples = check_resamples(resamples)
    if resamples:
        D = len(s.n)
        counts = {"doc": bs.counts_from_indices(bs.resample_indices(cell_rng(seed, cell), D, resamples), D),
                  "source": cluster_counts(cell_rng(seed, cell), sources, resamples)}
        for kind, c in counts.items():
            dr = _boot_stats(s, sources, C, c, j)
            out.draws[kind] = dr
            few = len(s.n) < MIN_INTERVAL_DOCS      # too few documents; defined_ci: too many non-finite draws
            out.intervals[kind] = {k: [None, None] if few else defined_ci(v) for k, v in dr.items()}
            out.nonfinite[kind] = {k: float(np.mean(~np.isfinite(v))) for k, v in dr.items()}
            fin = dr["R"][np.isfinite(dr["R"])]
            out.support[kind] = {"distinct": int(np.unique(fin).size), "min": float(fin.min()) if fin.size else None,
                                 "max": float(fin.max()) if fin.size else None}
    return out


def R_draws_without(cell, drop: int, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED,
                    window: int = HEADLINE_WINDOW) -> tuple[float, np.ndarray]:
    """R(window) of the cell without the document at position `drop` (weight 0), and its document-bootstrap
    draws over the remaining documents (the cell's generator): the interval of a leave-one-out value, which the
    leave-one-out point alone does not give."""
    s = cell.sums["all"]
    D = len(s.n)
    keep = np.delete(np.arange(D), drop)
    window = span_window(s, cell.chunk, window)
    j = window_column(s, cell.chunk, window)
    c = np.zeros((1 + resamples, D))
    c[0, keep] = 1
    if resamples:
        c[1:, keep] = bs.counts_from_indices(bs.resample_indices(cell_rng(seed, cell), D - 1, resamples), D - 1)
    R = bs.estimate(s, c, cell.chunk)["R"][:, j]
    return float(R[0]), R[1:]


def band_lags(chunk: int, bands: Sequence[tuple[int, int]] = RHO_BANDS) -> list[tuple[int, int]]:
    """The bands of lags (first, last, in chunks of `chunk` tokens) that cover the token ranges of `bands`, which
    are in chunks of the study's CHUNK (512): band (a, b) is the lags l with a * 512 <= l C < (b + 1) * 512, so at
    C = 512 the bands are RHO_BANDS themselves (docs/methods.md#estimators, a span shorter than 16K). A band with no
    such lag is dropped."""
    out = []
    for a, b in bands:
        lo, hi = -(-a * CHUNK // chunk), -(-(b + 1) * CHUNK // chunk) - 1      # ceilings
        if lo <= hi:
            out.append((lo, hi))
    return out


def rho_bands(cell, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED,
              bands: Sequence[tuple[int, int]] = RHO_BANDS) -> dict:
    """ρ averaged over each band of lags (band_lags: the token ranges of RHO_BANDS at the cell's chunk length),
    group 'all', with its document-bootstrap draws (the cell's generator, so the draws are those behind the page's
    intervals), and the first band minus the last over the same draws (paired: one document draw gives both). Does
    ρ decay across its long lags? The difference says, where its interval excludes 0. A band the span does not
    hold whole (its last lag beyond the cell's m - 1) is left out, so a span shorter than 16K shows fewer bands,
    and with fewer than two no difference."""
    s = cell.sums["all"]
    D, L = len(s.n), s.lag.shape[1]
    c = np.ones((1, D))
    if resamples:
        c = np.vstack([c, bs.counts_from_indices(bs.resample_indices(cell_rng(seed, cell), D, resamples), D)])
    rho = bs.estimate(s, c, cell.chunk)["rho"]
    out = {"bands": []}
    for a, b in band_lags(cell.chunk, bands):
        if b > L:
            continue
        v = rho[:, a - 1:b].mean(axis=1)
        out["bands"].append({"lags": [a, b], "tokens": [a * cell.chunk, b * cell.chunk], "rho": float(v[0]),
                             "draws": v[1:]})
    if len(out["bands"]) >= 2:
        first, last = out["bands"][0], out["bands"][-1]
        out["first_minus_last"] = {"diff": first["rho"] - last["rho"], "draws": first["draws"] - last["draws"]}
    return out


def decompose_cells(results_dir, manifest, model: str, revision: str, chunk: int, corpora: Sequence[str],
                    resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED) -> dict[str, CellDecomposition]:
    """decompose_cell for each requested corpus that has a cell of (model, revision, chunk) in results_dir;
    sources from the manifest (path or dict). Corpora without a cell are left out."""
    man = manifest if isinstance(manifest, dict) else json.loads(Path(manifest).read_text())
    cells = load_cells(Path(results_dir))
    out = {}
    for k in corpora:
        cell = cells.get((model, revision, k, chunk))
        if cell is None:
            continue
        src = document_sources(man, k, cell.doc_ids) if k in man.get("corpora", {}) \
            else [f"{k} {i}" for i in cell.doc_ids]
        out[k] = decompose_cell(cell, src, resamples, seed)
    return out
