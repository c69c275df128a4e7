"""The analysis of pooled cells as typed results: estimates, document-bootstrap intervals, R_rel, gates.

    analyze(results_dir) -> Analysis          every cell of a directory, R_rel, gates, verdict
    estimate_cell(cell)  -> CellEstimate      one cell: Estimates for 'all' and for every parameter group
    Analysis.subset(...) -> Analysis          the cells one page shows, with gates and verdict recomputed on them

Definitions (docs/methods.md, "Estimators" and "Document bootstrap"): docgrad.core.bootstrap computes every
statistic from block sums for any document weights, so the point estimate and all resamples are one call.
Every cell uses its own generator seeded by (seed, crc32 of the cell name), so a cell's intervals do not
depend on which other cells are in the directory. R_rel = R_corpus(16K) / R_WEB(16K) at the same model,
revision and chunk; its interval divides the i-th draws of the two independently resampled cells.

`to_json()` of each result writes the field names of the published study's report.json (R_16K, rho_long,
B_simple_shuf_tokens, ...); `from_json()` reads them back (the pages' cached analysis).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import zlib
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from tqdm import tqdm

import docgrad
from docgrad.core import bootstrap as bs
from docgrad.core import gates
from docgrad.core.constants import (
    ALL,
    BOOTSTRAP_SEED,
    CONTROL,
    GROUPS,
    HEADLINE_WINDOW,
    LONG_LAG_TOKENS,
    MAX_NONFINITE_DRAWS,
    MIN_INTERVAL_DOCS,
    MIN_RESAMPLES,
    RESAMPLES,
    corpus_order,
)
from docgrad.errors import AnalysisError
from docgrad.fileio import atomic_write_json, to_jsonable
from docgrad.results.cells import Cell, check_kind, pool_results, read_results
from docgrad.results.format import Shard

Interval = tuple  # (lo, hi), each a float or None


def _key(tokens) -> str:
    return str(int(tokens))


def _interval(x) -> Interval:
    return (None, None) if x is None else (x[0], x[1])


def defined_ci(draws: np.ndarray) -> list:
    """bootstrap.percentile_ci over the finite draws, but [None, None] (undefined) for a statistic whose draws are
    more than MAX_NONFINITE_DRAWS non-finite: the finite rest is then a selected subset of the resamples, and its
    percentiles are not an interval of the statistic (docs/methods.md, "Gates and verdict")."""
    draws = np.asarray(draws, dtype=float)
    if draws.ndim > 1:
        return [defined_ci(draws[:, j]) for j in range(draws.shape[1])]
    if draws.size and np.mean(~np.isfinite(draws)) > MAX_NONFINITE_DRAWS:
        return [None, None]
    return bs.percentile_ci(draws)


@dataclass(frozen=True)
class Estimates:
    """The statistics of one Gram (a parameter group, or their sum 'all') of one cell, in tokens.

    rho: lag (tokens) -> rho; R: window (tokens) -> R(W). `ci` holds 95% intervals (lo, hi) under the same
    names ('rho' and 'R' map lag/window -> interval) when the cell was bootstrapped, else it is empty."""

    chunk: int
    S_cross: float
    sigma2: float
    rho: dict[int, float]
    rho_long: float
    R: dict[int, float]
    B_simple_shuf_tokens: float
    ci: dict = field(default_factory=dict)
    boot_nonfinite_frac: float | None = None

    @property
    def R_16K(self) -> float | None:
        return self.R.get(HEADLINE_WINDOW)

    @property
    def R_16K_ci(self) -> Interval:
        return _interval(self.ci.get("R", {}).get(HEADLINE_WINDOW))

    def interval(self, name: str, at: int | None = None) -> Interval:
        """(lo, hi) of a statistic (rho and R: at a lag/window in tokens); (None, None) without a bootstrap."""
        c = self.ci.get(name)
        return _interval(c if at is None else (c or {}).get(at))

    @property
    def B_simple_contig_tokens(self) -> dict[int, float]:
        """B_simple for batches of contiguous W-token blocks: R(W) times the shuffled value."""
        return {W: r * self.B_simple_shuf_tokens for W, r in self.R.items()}

    @classmethod
    def from_draws(cls, est: dict, draws: dict | None, sizes: np.ndarray, chunk: int) -> "Estimates":
        """From bootstrap.estimate's arrays: row 0 of `est` is the estimate, `draws` (optional) the resamples."""
        lags = [(l + 1) * chunk for l in range(est["rho"].shape[1])]
        windows = [int(b) * chunk for b in sizes]
        ci: dict = {}
        frac = None
        if draws is not None:
            ci = {"S_cross": defined_ci(draws["S_cross"]), "sigma2": defined_ci(draws["sigma2"]),
                  "rho_long": defined_ci(draws["rho_long"]),
                  "B_simple_shuf": defined_ci(draws["B_simple_shuf_tokens"]),
                  "rho": dict(zip(lags, defined_ci(draws["rho"]))),
                  "R": dict(zip(windows, defined_ci(draws["R"])))}
            frac = float(np.mean(~np.isfinite(draws["R"][:, -1])))
        return cls(chunk, float(est["S_cross"][0]), float(est["sigma2"][0]),
                   dict(zip(lags, map(float, est["rho"][0]))), float(est["rho_long"][0]),
                   dict(zip(windows, map(float, est["R"][0]))), float(est["B_simple_shuf_tokens"][0]), ci, frac)

    def to_json(self) -> dict:
        out = {"S_cross": self.S_cross, "sigma2": self.sigma2, "rho": {_key(k): v for k, v in self.rho.items()},
               "rho_long": self.rho_long, "R": {_key(k): v for k, v in self.R.items()},
               "B_simple_shuf_tokens": self.B_simple_shuf_tokens, "R_16K": self.R_16K,
               "B_simple_contig_tokens": {_key(k): v for k, v in self.B_simple_contig_tokens.items()}}
        if self.ci:
            c = self.ci
            out.update({"S_cross_ci": list(c["S_cross"]), "sigma2_ci": list(c["sigma2"]),
                        "rho_long_ci": list(c["rho_long"]), "B_simple_shuf_ci": list(c["B_simple_shuf"]),
                        "rho_ci": {_key(k): list(v) for k, v in c["rho"].items()},
                        "R_ci": {_key(k): list(v) for k, v in c["R"].items()},
                        "R_16K_ci": list(self.R_16K_ci), "boot_nonfinite_frac": self.boot_nonfinite_frac})
        return out

    @classmethod
    def from_json(cls, d: dict, chunk: int) -> "Estimates":
        ci = {}
        if "S_cross_ci" in d:
            ci = {"S_cross": d["S_cross_ci"], "sigma2": d["sigma2_ci"], "rho_long": d["rho_long_ci"],
                  "B_simple_shuf": d["B_simple_shuf_ci"],
                  "rho": {int(k): v for k, v in d["rho_ci"].items()}, "R": {int(k): v for k, v in d["R_ci"].items()}}
        f = lambda x: float("nan") if x is None else float(x)  # noqa: E731 (JSON null is NaN)
        return cls(chunk, f(d["S_cross"]), f(d["sigma2"]), {int(k): f(v) for k, v in d["rho"].items()},
                   f(d["rho_long"]), {int(k): f(v) for k, v in d["R"].items()}, f(d["B_simple_shuf_tokens"]), ci,
                   d.get("boot_nonfinite_frac"))


@dataclass(frozen=True)
class G1Sample:
    """The G1 check data of a cell's --exact-ref files: cosine errors and sketched/exact squared-norm ratios."""

    cosine_errors: np.ndarray
    sqnorm_ratios: np.ndarray
    files: tuple[str, ...]


@dataclass(frozen=True)
class CellEstimate:
    """Everything estimated for one cell (model, revision, corpus, chunk). `all` is the summed Gram."""

    model: str
    revision: str
    corpus: str
    chunk: int
    doc_ids: list[int]
    chunks_per_doc: int
    files: list[str]
    synthetic: bool
    all: Estimates
    groups: dict[str, Estimates]
    rho_long_per_doc: dict[int, float]
    loss_by_chunk_position: list[float]
    resamples: int
    R_16K_draws: np.ndarray | None = field(default=None, repr=False)   # for R_rel intervals; not serialised
    g1: G1Sample | None = field(default=None, repr=False)
    seconds: float | None = None
    sqnorm_by_chunk_position: list[float] | None = None   # mean exact squared norm (group 'all') per position
    context: str = "standalone"             # how the gradients were taken (cells.Cell.context)
    window: int | None = None               # causal window W in tokens, else None
    R_draws: dict | None = field(default=None, repr=False)   # {W: draws of R(W)} (group 'all'); not serialised

    @property
    def n_docs(self) -> int:
        return len(self.doc_ids)

    @property
    def key(self) -> tuple[str, str, str, int]:
        return (self.model, self.revision, self.corpus, self.chunk)

    @property
    def name(self) -> str:
        return f"{self.model} {self.revision} {self.corpus} c{self.chunk}"

    @property
    def loss_mean(self) -> float:
        return float(np.mean(self.loss_by_chunk_position))

    def to_json(self) -> dict:
        per_doc = np.array(list(self.rho_long_per_doc.values()), dtype=float)
        row = {"model": self.model, "revision": self.revision, "corpus": self.corpus, "chunk": self.chunk,
               "n_docs": self.n_docs, "doc_ids": list(self.doc_ids), "chunks_per_doc": self.chunks_per_doc,
               "files": list(self.files), "synthetic": self.synthetic, **self.all.to_json(),
               "resamples": self.resamples,
               "secondary": {
                   "rho_long_per_doc": {str(d): v for d, v in self.rho_long_per_doc.items()},
                   "rho_long_per_doc_quartiles": [float(q) for q in np.nanpercentile(per_doc, [0, 25, 50, 75, 100])]
                   if np.isfinite(per_doc).any() else [None] * 5,
                   "loss_mean": self.loss_mean, "loss_by_chunk_position": list(self.loss_by_chunk_position),
                   "sqnorm_by_chunk_position": None if self.sqnorm_by_chunk_position is None
                   else list(self.sqnorm_by_chunk_position)},
               "loss_mean": self.loss_mean,
               "groups": {g: e.to_json() for g, e in self.groups.items()}}
        if self.g1 is not None:
            row["g1_sample"] = {"cosine_errors": self.g1.cosine_errors, "sqnorm_ratios": self.g1.sqnorm_ratios,
                                "files": list(self.g1.files)}
        if self.seconds is not None:
            row["seconds"] = self.seconds
        if self.context == "causal":            # standalone rows keep the published keys only
            row["context"], row["window"] = self.context, self.window
        return row

    @classmethod
    def from_json(cls, d: dict) -> "CellEstimate":
        C = int(d["chunk"])
        g1 = d.get("g1_sample")
        return cls(d["model"], d["revision"], d["corpus"], C, list(d["doc_ids"]), int(d["chunks_per_doc"]),
                   list(d["files"]), bool(d["synthetic"]), Estimates.from_json(d, C),
                   {g: Estimates.from_json(e, C) for g, e in d["groups"].items()},
                   {int(k): float("nan") if v is None else v for k, v in d["secondary"]["rho_long_per_doc"].items()},
                   list(d["secondary"]["loss_by_chunk_position"]), int(d["resamples"]),
                   g1=None if g1 is None else G1Sample(np.asarray(g1["cosine_errors"], dtype=float),
                                                       np.asarray(g1["sqnorm_ratios"], dtype=float),
                                                       tuple(g1["files"])),
                   seconds=d.get("seconds"), sqnorm_by_chunk_position=d["secondary"].get("sqnorm_by_chunk_position"),
                   context=d.get("context", "standalone"), window=d.get("window"))


@dataclass(frozen=True)
class RRel:
    """R_rel = R(16K) of a corpus / R(16K) of the control at the same model, revision and chunk."""

    model: str
    revision: str
    corpus: str
    chunk: int
    R_rel: float | None
    R_rel_ci: Interval
    n_docs: int
    n_docs_web: int

    @property
    def key(self) -> tuple[str, str, str, int]:
        return (self.model, self.revision, self.corpus, self.chunk)

    def to_json(self) -> dict:
        return {"model": self.model, "revision": self.revision, "corpus": self.corpus, "chunk": self.chunk,
                "R_rel": self.R_rel, "R_rel_ci": list(self.R_rel_ci), "n_docs": self.n_docs,
                "n_docs_web": self.n_docs_web}

    @classmethod
    def from_json(cls, d: dict) -> "RRel":
        return cls(d["model"], d["revision"], d["corpus"], int(d["chunk"]), d["R_rel"], tuple(d["R_rel_ci"]),
                   int(d["n_docs"]), int(d["n_docs_web"]))


@dataclass(frozen=True)
class Analysis:
    """The analysis of a results directory (or of the part of it one page shows)."""

    results_dir: str
    resamples: int
    seed: int
    cells: list[CellEstimate]
    R_rel: list[RRel]
    gates: dict
    verdict: str
    verdict_detail: list[str]
    seconds: dict = field(default_factory=dict)
    span_tokens: int = HEADLINE_WINDOW

    def cell(self, corpus: str) -> CellEstimate | None:
        return next((c for c in self.cells if c.corpus == corpus), None)

    def subset(self, model: str, revision: str, chunk: int, corpora=None) -> "Analysis":
        """The cells of one model, revision and chunk (and corpora, in that order), with R_rel, gates and
        verdict recomputed on exactly those cells."""
        def keep(r):
            return (r.model == model and r.revision == revision and r.chunk == chunk
                    and (corpora is None or r.corpus in corpora))

        order = {k: i for i, k in enumerate(corpora or [])}
        cells = sorted((c for c in self.cells if keep(c)), key=lambda c: (order.get(c.corpus, len(order)),
                                                                           corpus_order(c.corpus)))
        return with_gates(replace(self, cells=cells, R_rel=[r for r in self.R_rel if keep(r)]))

    def missing(self, model: str, revision: str, chunk: int, corpora) -> list[str]:
        """Corpora with no cell for (model, revision, chunk)."""
        have = {c.corpus for c in self.subset(model, revision, chunk).cells}
        return [k for k in corpora if k not in have]

    def to_json(self) -> dict:
        return {"results_dir": self.results_dir, "resamples": self.resamples, "seed": self.seed,
                "span_tokens": self.span_tokens, "cells": [c.to_json() for c in self.cells],
                "R_rel": [r.to_json() for r in self.R_rel], "gates": self.gates, "verdict": self.verdict,
                "verdict_detail": list(self.verdict_detail), "seconds": self.seconds}

    @classmethod
    def from_json(cls, d: dict) -> "Analysis":
        return cls(d["results_dir"], int(d["resamples"]), int(d["seed"]),
                   [CellEstimate.from_json(c) for c in d["cells"]], [RRel.from_json(r) for r in d["R_rel"]],
                   d["gates"], d["verdict"], list(d["verdict_detail"]), d.get("seconds", {}),
                   int(d.get("span_tokens", HEADLINE_WINDOW)))


# ---------------------------------------------------------------------------------------------------

def long_lag_range(chunk: int, m: int) -> tuple[int, int] | None:
    """(first, last) lag in tokens that rho_long averages in a span of m chunks of C tokens: the lags l C, l = 1 ..
    m - 1, with LONG_LAG_TOKENS[0] <= l C < LONG_LAG_TOKENS[1] (bootstrap.long_lags); None when no lag of the span
    is that long (its longest, (m - 1) C, is under 2,048 tokens): the cell then has no rho_long
    (docs/methods.md#estimators, a span shorter than 16K)."""
    lags = [l * chunk for l in range(1, m) if LONG_LAG_TOKENS[0] <= l * chunk < LONG_LAG_TOKENS[1]]
    return (lags[0], lags[-1]) if lags else None


def cell_rng(seed: int, cell: Cell) -> np.random.Generator:
    """Generator for one cell: (seed, crc32 of the cell name), independent of the other cells present."""
    return np.random.default_rng([int(seed), zlib.crc32(cell.name.encode())])


def check_resamples(resamples: int) -> int:
    """0 (no intervals) or at least MIN_RESAMPLES: fewer draws cannot place both ends of a 95% interval."""
    resamples = int(resamples)
    if resamples != 0 and not MIN_RESAMPLES <= resamples <= 10**6:
        raise AnalysisError(f"resamples must be 0 (no intervals) or between {MIN_RESAMPLES} and 1,000,000, "
                            f"got {resamples}: with fewer draws a 95% percentile interval has no draws beyond "
                            "its ends")
    return resamples


def check_seed(seed: int) -> int:
    """A bootstrap seed: a non-negative integer (numpy's generators take no other)."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise AnalysisError(f"--seed {seed}: the bootstrap seed is a non-negative integer, e.g. {BOOTSTRAP_SEED}")
    return int(seed)


def _undefined(ci: dict, names) -> dict:
    """ci with the intervals of `names` undefined: (None, None), or {lag or window: (None, None)} for rho and R."""
    out = dict(ci)
    for n in names:
        if n in out:
            out[n] = {k: (None, None) for k in out[n]} if isinstance(out[n], dict) else (None, None)
    return out


def defined_only(e: Estimates, n_docs: int) -> Estimates:
    """The estimates with what cannot be estimated undefined, never a number: with sigma2 <= 0, rho, R and
    B_simple (NaN, no interval); with S_cross <= 0, B_simple; with fewer than MIN_INTERVAL_DOCS documents or more
    than MAX_NONFINITE_DRAWS of the R(16K) draws non-finite (boot_nonfinite_frac), every interval (docs/methods.md,
    "Gates and verdict"; such a cell is also not estimable in the verdict, gates.not_estimable). An interval whose
    own draws are more than MAX_NONFINITE_DRAWS non-finite is already undefined (defined_ci). Estimates of a cell
    that can be estimated are unchanged."""
    nan, ci, changes = float("nan"), e.ci, {}
    if not (np.isfinite(e.sigma2) and e.sigma2 > 0):
        changes = {"rho": {k: nan for k in e.rho}, "R": {k: nan for k in e.R}, "rho_long": nan,
                   "B_simple_shuf_tokens": nan}
        ci = _undefined(ci, ("rho", "R", "rho_long", "B_simple_shuf"))
    elif not (np.isfinite(e.S_cross) and e.S_cross > 0):
        changes = {"B_simple_shuf_tokens": nan}
        ci = _undefined(ci, ("B_simple_shuf",))
    too_many_nonfinite = e.boot_nonfinite_frac is not None and e.boot_nonfinite_frac > MAX_NONFINITE_DRAWS
    if ci and (n_docs < MIN_INTERVAL_DOCS or too_many_nonfinite):
        ci = _undefined(ci, list(ci))
    return replace(e, ci=ci, **changes) if changes or ci is not e.ci else e


def estimate_cell(cell: Cell, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED,
                  indices: np.ndarray | None = None) -> CellEstimate:
    """Estimates (for 'all' and per group), per-document rho_long, losses, and bootstrap intervals of one cell.

    indices: explicit (B, D) resample indices (overrides resamples/seed; used by tests)."""
    D, C = len(cell.doc_ids), cell.chunk
    if indices is None and resamples > 0:
        indices = bs.resample_indices(cell_rng(seed, cell), D, check_resamples(resamples))
    counts = bs.counts_from_indices(indices, D) if indices is not None else None
    ones = np.ones((1, D))
    est: dict[str, Estimates] = {}
    r16_draws = r_draws = None
    for g, s in cell.sums.items():
        draws = bs.estimate(s, counts, C) if counts is not None else None
        est[g] = defined_only(Estimates.from_draws(bs.estimate(s, ones, C), draws, s.sizes, C), D)
        if g == ALL and draws is not None:
            r_draws = {int(b) * C: draws["R"][:, j] for j, b in enumerate(s.sizes)}
            r16_draws = r_draws.get(HEADLINE_WINDOW, np.full(len(counts), np.nan))
    e = est.pop(ALL)
    with np.errstate(divide="ignore", invalid="ignore"):      # sigma2 = 0: NaN, and the cell is not estimable
        per_doc = bs.per_document_rho_long(cell.sums[ALL], e.S_cross, e.sigma2, C)
    return CellEstimate(cell.model, cell.revision, cell.corpus, C, list(cell.doc_ids), cell.m,
                        [str(f) for f in cell.files], any(bool(sh.meta.get("synthetic")) for sh in cell.shards),
                        e, est, {d: float(v) for d, v in zip(cell.doc_ids, per_doc)},
                        [float(x) for x in cell.loss.mean(axis=0)], 0 if counts is None else int(len(counts)),
                        R_16K_draws=r16_draws, g1=g1_sample(cell),
                        sqnorm_by_chunk_position=None if cell.sqnorm is None
                        else [float(x) for x in cell.sqnorm.mean(axis=0)],
                        context=cell.context, window=cell.window, R_draws=r_draws)


def g1_sample(cell: Cell) -> G1Sample | None:
    """The G1 errors of every --exact-ref file of the cell (gates.g1_errors), pooled; None without one."""
    errs, ratios, files = [], [], []
    for sh in cell.shards:
        e, q = gates.g1_errors(sh)
        if e.size:
            errs.append(e)
            ratios.append(q)
            files.append(str(sh.path))
    if not errs:
        return None
    return G1Sample(np.concatenate(errs), np.concatenate(ratios), tuple(files))


def r_rel(cells: list[CellEstimate]) -> list[RRel]:
    """R_rel for every non-control cell with a control cell at the same model, revision and chunk (and, for
    causal cells, the same window); no interval when either cell is not estimable (gates.not_estimable)."""
    by = {(c.model, c.revision, c.chunk, c.context == "causal", c.window or 0, c.corpus): c for c in cells}
    out = []
    for (model, rev, C, causal, W, corpus), c in sorted(by.items()):
        web = by.get((model, rev, C, causal, W, CONTROL))
        if corpus == CONTROL or web is None:
            continue
        val, ci = ratio_at(c, web, HEADLINE_WINDOW, c.R_16K_draws, web.R_16K_draws)
        out.append(RRel(model, rev, corpus, C, val, ci, c.n_docs, web.n_docs))
    return out


def ratio_at(c: CellEstimate, control: CellEstimate, W: int, draws_c=None, draws_control=None) -> tuple:
    """(R_c(W) / R_control(W), its 95% interval): the i-th document-bootstrap draws of the two independently
    resampled cells divided (defined_ci); no value unless both cells have R at W, no interval without both cells'
    draws at W (default: their R_draws) or when either is not estimable (gates.not_estimable)."""
    num, den = c.all.R.get(W), control.all.R.get(W)
    val = num / den if num is not None and den not in (None, 0) else None
    bc = draws_c if draws_c is not None else (c.R_draws or {}).get(W)
    bw = draws_control if draws_control is not None else (control.R_draws or {}).get(W)
    estimable = estimable_at(c, W) and estimable_at(control, W)
    with np.errstate(divide="ignore", invalid="ignore"):
        ci = tuple(defined_ci(bc / bw)) if bc is not None and bw is not None and estimable else (None, None)
    return val, ci


def estimable_at(cell: CellEstimate, W: int) -> bool:
    """Whether a cell's R(W) can carry an interval: gates.not_estimable says nothing against it at W = 16K; at a
    shorter window (a span shorter than 16K) its same conditions with R(W) in place of R(16K): sigma2 > 0,
    S_cross > 0, R(W) finite, and with a bootstrap at least MIN_INTERVAL_DOCS documents and at most
    MAX_NONFINITE_DRAWS of the draws at the span non-finite."""
    if W == HEADLINE_WINDOW:
        return not gates.not_estimable(cell)
    e, boot = cell.all, bool(cell.resamples)
    return bool(np.isfinite(e.sigma2) and e.sigma2 > 0 and np.isfinite(e.S_cross) and e.S_cross > 0
                and np.isfinite(e.R.get(W, np.nan)) and not (boot and cell.n_docs < MIN_INTERVAL_DOCS)
                and not (boot and e.boot_nonfinite_frac is not None and e.boot_nonfinite_frac > MAX_NONFINITE_DRAWS))


def r_rel_at_span(c: CellEstimate, control: CellEstimate) -> tuple[int | None, float | None, Interval]:
    """R_rel of two cells whose spans differ (a corpus of your own shorter than 16K), read at one window W: the
    shorter span, when the other cell has R there too (docs/methods.md#your-own-model-and-documents). Returns (W,
    R_c(W) / R_control(W), interval); W None when either cell has no R or the other has none at the shorter span."""
    if not c.all.R or not control.all.R:
        return None, None, (None, None)
    W = min(max(c.all.R), max(control.all.R))
    if W not in c.all.R or W not in control.all.R:
        return None, None, (None, None)
    return (W, *ratio_at(c, control, W))


def with_gates(a: Analysis) -> Analysis:
    """The analysis with its gates and verdict evaluated on its own cells and R_rel rows."""
    g = gates.evaluate(a.cells, a.R_rel)
    return replace(a, gates=g["gates"], verdict=g["verdict"], verdict_detail=g["detail"])


PROGRESS_RESAMPLES = 100_000   # from this many resamples analyze shows its progress on stderr, terminal or not


def bootstrap_bytes(resamples: int, cells: list[Cell]) -> int:
    """Memory the document bootstrap of `cells` needs, in bytes: 8 x resamples x (number of cells + the largest
    2D + 4(m + J + 3) of a cell).

    Cells are bootstrapped one at a time. A cell of D documents, m chunks each and J windows holds per draw its
    D document indices and D counts, and for each group the draws of S_cross, sigma2, rho_long, B_simple (4),
    rho (m - 1) and R (J) with their temporaries; measured with tracemalloc, 2D + 3(m + J) floats, so
    2D + 4(m + J + 3) is an upper bound. Every cell also keeps its R(16K) draws (one float) for R_rel. At the
    maximum of 1,000,000 resamples a 48-document cell alone takes about 2 GB."""
    per_draw = max((2 * len(c.doc_ids) + 4 * (c.m + len(bs.block_sizes(c.m)) + 3) for c in cells), default=0)
    return 8 * int(resamples) * (len(cells) + per_draw)


def available_memory() -> int | None:
    """Bytes of memory available to a new allocation now (psutil's `available`; else the free physical pages of
    os.sysconf), or None where neither can tell."""
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except ImportError:
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return None


def check_bootstrap_memory(resamples: int, cells: list[Cell]) -> None:
    """Refuse, before any draw, a bootstrap that needs more memory (bootstrap_bytes) than the machine has
    available (available_memory): it would run for minutes and then fail, or swap."""
    need, have = bootstrap_bytes(resamples, cells), available_memory()
    if have is not None and need > have:
        raise AnalysisError(f"--resamples {int(resamples):,}: the document bootstrap of {len(cells)} cell(s) needs "
                            f"about {need / 2**30:.2f} GiB, more than the {have / 2**30:.2f} GiB of memory available "
                            f"on this machine; use fewer resamples (the study's is {RESAMPLES:,}) or fewer cells")


def _progress(items, resamples: int):
    """items, with a progress bar on stderr (tqdm) when stderr is a terminal (shown after a second) or the
    analysis draws at least PROGRESS_RESAMPLES resamples (shown at once)."""
    many = int(resamples) >= PROGRESS_RESAMPLES
    show = many or bool(getattr(sys.stderr, "isatty", lambda: False)())
    return tqdm(items, desc=f"bootstrap, {int(resamples):,} resamples", unit="cell", file=sys.stderr,
                disable=not show, delay=0 if many else 1, dynamic_ncols=True)


def analyze(results_dir: Path, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED,
            groups: tuple[str, ...] | None = GROUPS, context: str = "standalone", dtype: str = "float32",
            docs: tuple[int, int] | None = None, shards: list[Shard] | None = None) -> Analysis:
    """Every cell of a results directory, R_rel, gates and verdict. A missing or empty directory is an error.
    context: "standalone" (default; causal files beside them are left out) or "causal" (only causal cells:
    gates and verdict are defined for the standalone 16K measurement, and G2 cannot pass without R(16K)).
    dtype: "float32" (default; bf16 files beside them are left out) or "bfloat16" (only bf16 cells).
    docs: (a, b) analyses only the files whose documents lie in [a, b) (cells.pool_results); None: every file.
    shards: the directory's files already read (cells.read_results), so none is read again."""
    t0 = time.perf_counter()
    resamples, seed = check_resamples(resamples), check_seed(seed)
    check_kind(context, dtype)
    shards = read_results(Path(results_dir)) if shards is None else shards
    cells = pool_results(shards, Path(results_dir), groups=groups, context=context, dtype=dtype, docs=docs)
    t_load = time.perf_counter() - t0
    check_bootstrap_memory(resamples, list(cells.values()))
    estimates = []
    for cell in _progress(list(cells.values()), resamples):
        t1 = time.perf_counter()
        e = estimate_cell(cell, resamples, seed)
        estimates.append(replace(e, seconds=time.perf_counter() - t1))
    a = Analysis(str(results_dir), int(resamples), int(seed), estimates, r_rel(estimates), {}, "", [])
    a = with_gates(a)
    return replace(a, seconds={"load": t_load, "total": time.perf_counter() - t0})


# ---------------------------------------------------------------------------------------------------
# The pages' shared analysis: computed once per set of inputs, read by every page that shows it.

ANALYSIS_FORMAT = "docgrad-analysis/1"


NUMBER_PACKAGES = ("core", "results")   # the docgrad packages whose code can decide a number of the analysis


def number_sources() -> list[Path]:
    """Every source file that can decide a number of the analysis: each .py under docgrad/core (the method:
    estimators, bootstrap, sketch and G1 statistics, gates, constants) and docgrad/results (reading, validating
    and pooling files, the analysis), sorted. A rule by folder, not a list of modules, so that a module added or
    newly imported there is covered without anyone remembering to list it."""
    lib = Path(__file__).resolve().parents[1]
    return sorted(p for pkg in NUMBER_PACKAGES for p in (lib / pkg).rglob("*.py"))


def inputs_key(results_dir: Path, resamples: int, seed: int, docs: tuple[int, int] | None,
               shards: list[Shard]) -> str:
    """sha256 over the analysis inputs: the results directory as spelled (the analysis records it and its files'
    paths, so "data/results" and its absolute path are two entries, not whichever was asked first), every result
    file's relative path and digest (Shard.sha256, format.result_digest of the bytes as read), resamples, seed,
    the document range, the package version, and the path and bytes of every source that can decide a number
    (number_sources), so a change to any of them invalidates the cache."""
    scope = "" if docs is None else f"|docs {int(docs[0])}:{int(docs[1])}"
    h = hashlib.sha256(f"{ANALYSIS_FORMAT}|{docgrad.__version__}|{results_dir}|{int(resamples)}|{int(seed)}{scope}"
                       .encode())
    for sh in shards:
        h.update(str(Path(sh.path).relative_to(results_dir)).encode())
        h.update(sh.sha256.encode())
    lib = Path(__file__).resolve().parents[1]
    for src in number_sources():
        code = src.read_bytes()
        h.update(f"\0{src.relative_to(lib).as_posix()}\0{len(code)}\0".encode())
        h.update(code)
    return h.hexdigest()


def cached_analysis(results_dir: Path, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED,
                    cache_dir: Path = Path("cache/analysis"), docs: tuple[int, int] | None = None,
                    shards: list[Shard] | None = None) -> Analysis:
    """analyze(results_dir, resamples, seed, docs=docs), stored in cache_dir under the sha256 of its inputs
    (inputs_key); a later call with the same inputs reads it instead of recomputing. Timings are those of the
    first run. shards: the directory's files already read (cells.read_results; read here when None), from which
    both the key and the analysis are computed."""
    resamples, seed = check_resamples(resamples), check_seed(seed)
    results_dir = Path(results_dir)
    if not results_dir.is_dir():
        raise AnalysisError(f"results directory {results_dir} does not exist")
    shards = read_results(results_dir) if shards is None else shards
    path = Path(cache_dir) / f"{inputs_key(results_dir, resamples, seed, docs, shards)}.json"
    if path.exists():
        try:
            return Analysis.from_json(json.loads(path.read_text()))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            path.unlink(missing_ok=True)        # unreadable cache entry: recompute it
    a = analyze(results_dir, resamples, seed, docs=docs, shards=shards)
    atomic_write_json(path, to_jsonable(a))
    return a
