"""Causal context in the analysis: per-position loss and squared norm with intervals, and standalone vs causal
gradients on the same tokens (docs/methods.md, "Causal context" and "Standalone vs causal").

    position_means(table, counts)             per-position means of a (documents x positions) table, any weights
    first_chunks(cell, m, doc_ids)            a cell restricted to chunks 0..m-1 of (some of) its documents
    compare_modes(causal, standalone)         rho(lag), R(W) for W <= window, sigma2, the noise of a window's mean
                                              gradient and the per-position loss and squared norm in both modes,
                                              with paired document-bootstrap intervals of each and of the difference
    page_comparisons(...)                     what page 06 shows: one comparison per measured corpus, and a reason
                                              for every requested corpus that is not measured yet
    (their frames and the reading in words are docgrad.presentation.causal)

In the causal context chunk k has every earlier chunk of its window as context, so the chunk positions of a
window are not exchangeable; the pooled estimators (docgrad.core.bootstrap.estimate) average over positions as
docs/methods.md#causal-context says, and the per-position loss and squared norm are reported beside them.

The comparison is paired: the standalone results for the tokens of a causal window of m = W/C chunks are
chunks 0..m-1 of the same documents in the standard cell, so every bootstrap draw resamples the documents once
and applies the same document counts to both modes. The interval of a difference (causal - standalone) is the
percentile interval of the draw-wise differences; because both modes share the documents of each draw, what
varies from document to document in the same way in both modes cancels from it.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from docgrad.core import bootstrap as bs
from docgrad.core import gates
from docgrad.core.constants import ALL, BOOTSTRAP_SEED, CAUSAL, CORPORA, FLOAT32, GROUPS, RESAMPLES, corpus_order
from docgrad.errors import AnalysisError
from docgrad.results.cells import Cell, load_cells, ordered_rows, pool_cell
from docgrad.results.format import ResultFileError, Shard, find_results, load_result, parse_stem
from docgrad.results.stats import Analysis, Estimates, cell_rng, check_resamples, estimate_cell, r_rel

STANDALONE_MODE, CAUSAL_MODE, DIFFERENCE = "standalone", "causal", "causal − standalone"
MODES = (STANDALONE_MODE, CAUSAL_MODE)
NOT_APPLICABLE = "not applicable"     # the verdict of a causal analysis (gates are defined on the standalone 16K one)


class ComparisonError(AnalysisError):
    """Two cells cannot be compared as standalone vs causal (different model, corpus, chunk, documents or
    tokens); the message names both cells' files and what was expected."""


# --- per-position means ------------------------------------------------------------------------------------

def position_means(table: np.ndarray, counts: np.ndarray | None = None, name: str = "table") -> np.ndarray:
    """(B, m) per-position means of a (D, m) table (documents x chunk positions) for document weights
    counts (B, D): row b is sum_d c_bd table[d, k] / sum_d c_bd. counts None: the plain means, shape (1, m).
    A draw with no document (all weights 0) gives NaN."""
    table = np.asarray(table, dtype=float)
    if table.ndim != 2 or table.shape[0] < 1 or table.shape[1] < 1:
        raise AnalysisError(f"position_means: {name} must be a (documents x positions) table, got shape "
                            f"{table.shape}")
    if not np.all(np.isfinite(table)):
        raise AnalysisError(f"position_means: {name} has {int(np.sum(~np.isfinite(table)))} non-finite entries")
    c = np.ones((1, table.shape[0])) if counts is None else np.atleast_2d(np.asarray(counts, dtype=float))
    if c.ndim != 2 or c.shape[1] != table.shape[0]:
        raise AnalysisError(f"position_means: counts must be (draws x {table.shape[0]} documents) to match "
                            f"{name}, got shape {np.shape(counts)}")
    if np.any(c < 0):
        raise AnalysisError("position_means: counts must be >= 0 (how often each document is drawn)")
    with np.errstate(divide="ignore", invalid="ignore"):
        n = c.sum(axis=1, keepdims=True)
        return np.where(n > 0, (c @ table) / np.where(n > 0, n, 1), np.nan)


# --- restricting a cell to its first chunks ------------------------------------------------------------------

def first_chunks(cell: Cell, m: int, doc_ids=None) -> Cell:
    """The cell restricted to chunks 0..m-1 of each document (and to the documents doc_ids, default all), with
    its block sums, losses and squared norms rebuilt from its files as if only those chunks had been measured.
    Cross-document pairs stay those within a file. Used for the standalone results of the tokens of a causal
    window of m chunks: chunks 0..m-1 of the standard cell."""
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or not 1 <= int(m) <= cell.m:
        raise AnalysisError(f"first_chunks: m must be an integer from 1 to the {cell.m} chunks per document of "
                            f"cell {cell.name} ({cell.file_list}), got {m!r}")
    m = int(m)
    if not cell.shards:
        raise AnalysisError(f"first_chunks: cell {cell.name} has no files to rebuild it from")
    want = list(cell.doc_ids) if doc_ids is None else [int(d) for d in doc_ids]
    if len(set(want)) != len(want):
        raise AnalysisError(f"first_chunks: doc_ids repeats a document: {want}")
    absent = sorted(set(want) - set(cell.doc_ids))
    if absent:
        raise AnalysisError(f"first_chunks: documents {absent} are not in cell {cell.name} ({cell.file_list}), "
                            f"which has documents {list(cell.doc_ids)}")
    keep_ids = set(want)
    groups = sorted(cell.shards[0].gram)
    parts, doc_order, losses, sqnorms, used = [], [], [], [], []
    for sh in cell.shards:
        docs, m_full, order = ordered_rows(sh)
        keep = np.array([d in keep_ids for d in docs])
        if not keep.any():
            continue
        rows = order.reshape(len(docs), m_full)[keep, :m].ravel()       # (document, chunk) order, chunks < m
        n = int(keep.sum())
        blocks = {}
        for g in groups:
            K = np.array(sh.gram[g], dtype=np.float64)
            K[np.diag_indices_from(K)] = sh.sqnorm[g]
            blocks[g] = bs.shard_block_sums(K[np.ix_(rows, rows)], n, m)
        parts.append(blocks)
        doc_order += [d for d, k in zip(docs, keep) if k]
        losses.append(sh.loss[rows].reshape(n, m))
        sqnorms.append(sum(np.asarray(sh.sqnorm[g], dtype=np.float64) for g in groups)[rows].reshape(n, m))
        used.append(sh)
    sums = {g: bs.assemble([p[g] for p in parts], m) for g in groups}
    total = sums[groups[0]]
    for g in groups[1:]:
        total = total + sums[g]
    sums[ALL] = total
    if not np.any(total.Np - np.diag(np.diag(total.Np))):
        raise AnalysisError(f"first_chunks: documents {want} of cell {cell.name} have no cross-document pairs "
                            f"(no file holds two of them: {cell.file_list}); S_cross is undefined")
    return replace(cell, doc_ids=doc_order, m=m, sums=sums, loss=np.concatenate(losses),
                   sqnorm=np.concatenate(sqnorms), shards=used)


# --- standalone vs causal ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PositionStats:
    """Per chunk position k = 0..m-1: the mean over documents and its 95% interval (empty without a bootstrap)."""

    value: list[float]
    ci: list = field(default_factory=list)

    def to_json(self) -> dict:
        return {"value": list(self.value), "ci": [list(x) for x in self.ci]}

    @classmethod
    def from_draws(cls, point: np.ndarray, draws: np.ndarray | None) -> "PositionStats":
        return cls([float(x) for x in np.ravel(point)],
                   [] if draws is None else [tuple(x) for x in bs.percentile_ci(draws)])


@dataclass(frozen=True)
class ModeComparison:
    """Standalone vs causal gradients of one corpus on the same tokens: the first `window` tokens (m chunks) of
    each of the same documents. `standalone` and `causal` hold the estimators of group 'all' in each mode (rho
    at lags C..(m-1)C, R at W = C, 2C, 4C, .., window); `difference` the causal − standalone differences of rho
    and R with paired intervals; `ratio` causal / standalone of sigma2 and of the window noise (sigma2 R(W)/m,
    the noise variance of a window's mean chunk gradient) with paired intervals; `positions` the per-position
    mean loss and squared norm in each mode and their differences."""

    model: str
    revision: str
    corpus: str
    chunk: int
    window: int
    doc_ids: list[int]
    resamples: int
    seed: int
    standalone: Estimates
    causal: Estimates
    difference: dict            # "rho": {lag: value}, "rho_ci": {lag: (lo, hi)}, "R": ..., "R_ci": ...
    ratio: dict                 # "sigma2", "sigma2_ci", "window_noise", "window_noise_ci", "window_noise_modes"
    positions: dict             # mode (and DIFFERENCE) -> {"loss": PositionStats, "sqnorm": PositionStats}
    files: dict                 # mode -> file paths
    standalone_context: str     # args.context of the standalone files ("standalone" or "standalone-bos")
    standalone_chunks: int      # chunks per document of the full standalone cell
    R_window_draws: dict = field(default_factory=dict, repr=False, compare=False)   # mode -> draws of R(window)

    @property
    def m(self) -> int:
        return self.window // self.chunk

    @property
    def n_docs(self) -> int:
        return len(self.doc_ids)

    def estimates(self, mode: str) -> Estimates:
        return {STANDALONE_MODE: self.standalone, CAUSAL_MODE: self.causal}[mode]

    def to_json(self) -> dict:
        def iv(d):
            return {str(k): list(v) for k, v in d.items()}

        return {"model": self.model, "revision": self.revision, "corpus": self.corpus, "chunk": self.chunk,
                "window": self.window, "chunks_per_window": self.m, "n_docs": self.n_docs,
                "doc_ids": list(self.doc_ids), "resamples": self.resamples, "seed": self.seed,
                "standalone": self.standalone.to_json(), "causal": self.causal.to_json(),
                "difference": {"rho": {str(k): v for k, v in self.difference["rho"].items()},
                               "rho_ci": iv(self.difference["rho_ci"]),
                               "R": {str(k): v for k, v in self.difference["R"].items()},
                               "R_ci": iv(self.difference["R_ci"])},
                "ratio": {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.ratio.items()},
                "positions": {mode: {q: s.to_json() for q, s in p.items()} for mode, p in self.positions.items()},
                "files": {k: list(v) for k, v in self.files.items()},
                "standalone_context": self.standalone_context, "standalone_chunks": self.standalone_chunks}


def comparison_rng(seed: int, causal: Cell) -> np.random.Generator:
    """The comparison's generator: (seed, crc32 of '<causal cell name> vs standalone'), so its draws do not
    depend on which other cells are present and differ from the causal cell's own (docgrad.results.stats.cell_rng)."""
    return np.random.default_rng([int(seed), zlib.crc32(f"{causal.name} vs standalone".encode())])


def _check_pair(causal: Cell, standalone: Cell) -> None:
    """Refuse a pair that is not standalone vs causal on the same tokens."""
    both = f"causal cell {causal.name} ({causal.file_list}) and standalone cell {standalone.name} ({standalone.file_list})"
    if causal.context != CAUSAL or causal.window is None:
        raise ComparisonError(f"compare_modes: the first cell must be causal (--context causal --window W), got "
                              f"context {causal.context!r} for {causal.name} ({causal.file_list})")
    if standalone.context == CAUSAL:
        raise ComparisonError(f"compare_modes: the second cell must be standalone, got a causal cell "
                              f"{standalone.name} ({standalone.file_list})")
    for what, a, b in (("model", causal.model, standalone.model), ("revision", causal.revision, standalone.revision),
                       ("corpus", causal.corpus, standalone.corpus), ("chunk", causal.chunk, standalone.chunk)):
        if a != b:
            raise ComparisonError(f"compare_modes: {both} differ in {what} (causal {a!r}, standalone {b!r}); "
                                  "the comparison needs the same model, revision, corpus and chunk")
    if causal.m * causal.chunk != causal.window:
        raise ComparisonError(f"compare_modes: causal cell {causal.name} has {causal.m} chunks of {causal.chunk} "
                              f"per document, expected window / chunk = {causal.window // causal.chunk}")
    if causal.m > standalone.m:
        raise ComparisonError(f"compare_modes: {both}: the window has {causal.m} chunks per document but the "
                              f"standalone cell only {standalone.m}; expected at least {causal.m}")
    absent = sorted(set(causal.doc_ids) - set(standalone.doc_ids))
    if absent:
        raise ComparisonError(f"compare_modes: {both}: documents {absent} of the causal cell have no standalone "
                              f"results (standalone documents {list(standalone.doc_ids)})")
    hashes = {}
    for mode, cell in ((CAUSAL_MODE, causal), (STANDALONE_MODE, standalone)):
        for sh in cell.shards:
            rec = sh.meta.get("spans_sha256")
            if isinstance(rec, dict):
                for d, h in rec.items():
                    hashes.setdefault(int(d), {})[mode] = (h, sh.path)
    for d in causal.doc_ids:
        h = hashes.get(int(d), {})
        if len(h) == 2 and h[CAUSAL_MODE][0] != h[STANDALONE_MODE][0]:
            raise ComparisonError(f"compare_modes: document {d} is not the same text in both modes: span sha256 "
                                  f"{h[CAUSAL_MODE][0][:12]}.. in {h[CAUSAL_MODE][1]}, {h[STANDALONE_MODE][0][:12]}.. "
                                  f"in {h[STANDALONE_MODE][1]} (different corpus manifests or tokenizers?)")


def _counts_for(doc_ids: list[int], ref_ids: list[int], counts: np.ndarray) -> np.ndarray:
    """Columns of counts (over ref_ids) rearranged to the order of doc_ids (the same documents)."""
    col = {d: i for i, d in enumerate(ref_ids)}
    return counts[:, [col[d] for d in doc_ids]]


def compare_modes(causal: Cell, standalone: Cell, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED,
                  indices: np.ndarray | None = None) -> ModeComparison:
    """Standalone vs causal on the same tokens: the causal cell (window W = mC) against chunks 0..m-1 of the
    same documents in the standalone cell (first_chunks). Every bootstrap draw resamples the causal cell's
    documents once (comparison_rng) and applies the same counts to both modes, so the intervals of the
    differences and ratios are paired.

    indices: explicit (B, D) resample indices into causal.doc_ids (overrides resamples/seed; tests)."""
    _check_pair(causal, standalone)
    m, C, D = causal.m, causal.chunk, len(causal.doc_ids)
    sub = first_chunks(standalone, m, causal.doc_ids)
    if indices is None and check_resamples(resamples) > 0:
        indices = bs.resample_indices(comparison_rng(seed, causal), D, resamples)
    counts = bs.counts_from_indices(np.asarray(indices), D) if indices is not None else None
    ones = np.ones((1, D))
    cells = {CAUSAL_MODE: causal, STANDALONE_MODE: sub}
    est, draws, pos_pt, pos_dr = {}, {}, {}, {}
    for mode, cell in cells.items():
        w_pt = _counts_for(cell.doc_ids, causal.doc_ids, ones)
        w_dr = None if counts is None else _counts_for(cell.doc_ids, causal.doc_ids, counts)
        pt = bs.estimate(cell.sums[ALL], w_pt, C)
        dr = None if w_dr is None else bs.estimate(cell.sums[ALL], w_dr, C)
        est[mode] = Estimates.from_draws(pt, dr, cell.sums[ALL].sizes, C)
        draws[mode] = (pt, dr)
        pos_pt[mode] = {q: position_means(getattr(cell, q), w_pt, q) for q in ("loss", "sqnorm")}
        pos_dr[mode] = None if w_dr is None else {q: position_means(getattr(cell, q), w_dr, q)
                                                  for q in ("loss", "sqnorm")}
    lags = [(l + 1) * C for l in range(m - 1)]
    windows = [int(b) * C for b in causal.sums[ALL].sizes]

    def diff(key):
        pt = draws[CAUSAL_MODE][0][key][0] - draws[STANDALONE_MODE][0][key][0]
        dr = None if counts is None else draws[CAUSAL_MODE][1][key] - draws[STANDALONE_MODE][1][key]
        return pt, (None if dr is None else bs.percentile_ci(dr))

    rho_pt, rho_ci = diff("rho")
    R_pt, R_ci = diff("R")
    difference = {"rho": dict(zip(lags, map(float, rho_pt))), "R": dict(zip(windows, map(float, R_pt))),
                  "rho_ci": {} if rho_ci is None else dict(zip(lags, map(tuple, rho_ci))),
                  "R_ci": {} if R_ci is None else dict(zip(windows, map(tuple, R_ci)))}

    def noise(d):        # sigma2 R(W) / m = the noise variance of a window's mean chunk gradient
        return d["sigma2"] * d["R"][:, -1] / m

    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = {"sigma2": float(draws[CAUSAL_MODE][0]["sigma2"][0] / draws[STANDALONE_MODE][0]["sigma2"][0]),
                 "window_noise": float(noise(draws[CAUSAL_MODE][0])[0] / noise(draws[STANDALONE_MODE][0])[0]),
                 "window_noise_modes": {mode: float(noise(draws[mode][0])[0]) for mode in MODES}}
        if counts is not None:
            ratio["sigma2_ci"] = tuple(bs.percentile_ci(draws[CAUSAL_MODE][1]["sigma2"]
                                                        / draws[STANDALONE_MODE][1]["sigma2"]))
            ratio["window_noise_ci"] = tuple(bs.percentile_ci(noise(draws[CAUSAL_MODE][1])
                                                              / noise(draws[STANDALONE_MODE][1])))
    positions = {mode: {q: PositionStats.from_draws(pos_pt[mode][q], None if pos_dr[mode] is None
                                                    else pos_dr[mode][q]) for q in ("loss", "sqnorm")}
                 for mode in MODES}
    positions[DIFFERENCE] = {q: PositionStats.from_draws(
        pos_pt[CAUSAL_MODE][q] - pos_pt[STANDALONE_MODE][q],
        None if counts is None else pos_dr[CAUSAL_MODE][q] - pos_dr[STANDALONE_MODE][q]) for q in ("loss", "sqnorm")}
    ctx = {str(sh.args.get("context") or "standalone") for sh in standalone.shards}
    r_draws = {} if counts is None else {mode: draws[mode][1]["R"][:, -1] for mode in MODES}
    return ModeComparison(causal.model, causal.revision, causal.corpus, C, int(causal.window), list(causal.doc_ids),
                          0 if counts is None else int(len(counts)), int(seed), est[STANDALONE_MODE], est[CAUSAL_MODE],
                          difference, ratio, positions,
                          {STANDALONE_MODE: [str(f) for f in sub.files], CAUSAL_MODE: [str(f) for f in causal.files]},
                          "/".join(sorted(ctx)), standalone.m, r_draws)


# --- what a page shows ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PageComparisons:
    """Page 06's input: one ModeComparison per measured corpus (requested order), and for every requested
    corpus without one the reason (`not_measured`); `causal_windows` lists the windows of every causal cell of
    the model found (corpus -> windows), so a page can say that another window exists."""

    comparisons: dict
    not_measured: dict
    causal_windows: dict
    window: int
    chunk: int
    model: str
    revision: str

    @property
    def measured(self) -> list[str]:
        return list(self.comparisons)

    def to_json(self) -> dict:
        return {"model": self.model, "revision": self.revision, "chunk": self.chunk, "window": self.window,
                "measured": self.measured, "not_measured": dict(self.not_measured),
                "causal_windows": {k: list(v) for k, v in self.causal_windows.items()},
                "comparisons": {k: c.to_json() for k, c in self.comparisons.items()}}


def _model_files(results_dir: Path, model: str, revision: str, corpora) -> list[Path]:
    """Result files that may belong to (model, revision) and one of corpora: the model's own folder when the
    directory has the standard layout, else every file; names that do not parse are kept (args decide)."""
    root = Path(results_dir)
    own = root / model.replace("/", "__") / revision
    files = find_results(own if own.is_dir() else root)
    keep = []
    for f in files:
        try:
            if parse_stem(f)["corpus"] not in corpora:
                continue
        except ResultFileError:
            pass
        keep.append(f)
    return keep


def _cells(results_dir: Path, model: str, revision: str, chunk: int, corpora, causal: bool) -> dict:
    """corpus -> pooled Cell of (model, revision, chunk) in one context (causal: corpus -> {window: Cell})."""
    by: dict[tuple, list[Shard]] = {}
    for f in _model_files(results_dir, model, revision, corpora):
        sh = load_result(f, groups=GROUPS)
        a = sh.args
        if (a["model"], str(a["revision"]), int(a["chunk"])) != (model, revision, chunk) or a["corpus"] not in corpora:
            continue
        if (sh.context == CAUSAL) != causal or sh.dtype != FLOAT32:
            continue                                   # page 06 compares float32 probes
        by.setdefault(sh.cell, []).append(sh)
    out: dict = {}
    for key, shards in sorted(by.items()):
        cell = pool_cell(shards)
        if causal:
            out.setdefault(cell.corpus, {})[cell.window] = cell
        else:
            out[cell.corpus] = cell
    return out


def check_page_parameters(corpora, chunk: int, window: int, resamples: int) -> list[str]:
    """The parameters page 06 cannot use, refused before it draws anything (AnalysisError naming the
    parameter, what it expects and what it got). Returns the corpora as a list."""
    corpora = list(corpora)
    if not corpora:
        raise AnalysisError("corpora is empty: name at least one corpus, e.g. ['BOOKS', 'WEB']")
    if len(set(corpora)) != len(corpora):
        raise AnalysisError(f"corpora repeats a name: {corpora}")
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 2:
        raise AnalysisError(f"chunk must be an integer >= 2 (tokens), got {chunk!r}")
    if isinstance(window, bool) or not isinstance(window, int) or window < chunk or window % chunk:
        raise AnalysisError(f"window must be a positive multiple of chunk ({chunk}) in tokens, e.g. {8 * chunk}, "
                            f"got {window!r}")
    check_resamples(resamples)
    return corpora


def page_comparisons(causal_dir: Path, standalone_dir: Path, model: str, revision: str, chunk: int, window: int,
                     corpora, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED) -> PageComparisons:
    """Standalone vs causal for every requested corpus measured in the causal context at `window`; the
    others with the reason they are not compared. A corpus name is refused when it is neither a study corpus
    nor a cell of the model in either directory; a missing directory is refused."""
    corpora = check_page_parameters(corpora, chunk, window, resamples)
    for name, d in (("causal_dir", causal_dir), ("standalone_dir", standalone_dir)):
        if not Path(d).is_dir():
            raise AnalysisError(f"{name}: results directory {d} does not exist")
    causal = _cells(Path(causal_dir), model, revision, chunk, corpora, causal=True)
    standalone = _cells(Path(standalone_dir), model, revision, chunk, corpora, causal=False)
    known = set(CORPORA) | set(causal) | set(standalone)
    unknown = [k for k in corpora if k not in known]
    if unknown:
        raise AnalysisError(f"unknown corpus {', '.join(map(repr, unknown))}: expected some of "
                            f"{', '.join(sorted(known))}")
    comps, reasons = {}, {}
    for k in sorted(corpora, key=lambda c: corpora.index(c)):
        wins = causal.get(k, {})
        if window not in wins:
            other = f" (causal results at W = {', '.join(map(str, sorted(wins)))} only)" if wins else ""
            reasons[k] = f"no causal result at W = {window} in {causal_dir} yet{other}"
        elif k not in standalone:
            reasons[k] = f"causal result at W = {window}, but no standalone cell in {standalone_dir} to compare"
        elif standalone[k].m < window // chunk:
            reasons[k] = (f"the standalone cell has {standalone[k].m} chunks per document, fewer than the "
                          f"{window // chunk} of the window")
        else:
            comps[k] = compare_modes(wins[window], standalone[k], resamples, seed)
    return PageComparisons(comps, reasons, {k: sorted(v) for k, v in sorted(causal.items(), key=lambda kv:
                                                                            corpus_order(kv[0]))},
                           window, chunk, model, revision)


def cell_positions(cell: Cell, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED,
                   indices: np.ndarray | None = None) -> dict:
    """Per-position mean loss and squared norm of one cell with 95% document-bootstrap intervals. The draws are
    the cell's own (docgrad.results.stats.cell_rng), the same documents as its other intervals in estimate_cell.
    indices: explicit (B, D) resample indices (tests)."""
    D = len(cell.doc_ids)
    if indices is None and check_resamples(resamples) > 0:
        indices = bs.resample_indices(cell_rng(seed, cell), D, resamples)
    counts = None if indices is None else bs.counts_from_indices(np.asarray(indices), D)
    if cell.sqnorm is None:
        raise AnalysisError(f"cell {cell.name} ({cell.file_list}) has no squared norms per chunk")
    return {q: PositionStats.from_draws(position_means(getattr(cell, q), None, q),
                                        None if counts is None else position_means(getattr(cell, q), counts, q))
            for q in ("loss", "sqnorm")}


def cell_name(c) -> str:
    """The name of an estimated cell (docgrad.results.stats.CellEstimate) as its pooled cell has it (docgrad.results.cells.Cell.name):
    '<model> <revision> <CORPUS> c<chunk>', followed by ' causal w<W>' for a causal cell."""
    name = f"{c.model} {c.revision} {c.corpus} c{c.chunk}"
    return f"{name} {CAUSAL} w{c.window}" if c.context == CAUSAL else name


def analyze_causal(results_dir: Path, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED,
                   groups=GROUPS, dtype: str = FLOAT32) -> tuple:
    """(Analysis of the causal cells of results_dir, {cell name: cell_positions}). The estimators and intervals
    are docgrad.results.stats.analyze's on the causal cells; of the gates, G1 (sketch fidelity of --exact-ref files) and
    G3 (S_cross resolved) apply to any cell, G2 and the verdict are defined on the standalone 16K measurement and
    are marked not applicable. dtype: which probes (float32 by default, as docgrad.results.cells.load_cells)."""
    import time

    t0 = time.perf_counter()
    resamples = check_resamples(resamples)
    cells = load_cells(Path(results_dir), groups=groups, context=CAUSAL, dtype=dtype)
    t_load = time.perf_counter() - t0
    est, pos = [], {}
    for cell in cells.values():
        t1 = time.perf_counter()
        e = estimate_cell(cell, resamples, seed)
        pos[cell_name(e)] = cell_positions(cell, resamples, seed)
        est.append(replace(e, seconds=time.perf_counter() - t1))
    g = {"G1": gates.gate_g1(est), "G2": {"status": NOT_APPLICABLE, "pass": None,
                                           "summary": "G2 (the control's R(16K) and rho_long) is defined on the "
                                                      "standalone 16K measurement"},
         "G3": gates.gate_g3(est)}
    verdict = (f"{NOT_APPLICABLE} (causal context: the verdict is defined on the standalone 16K measurement; "
               f"G1 {g['G1']['status']}, G3 {g['G3']['status']})")
    a = Analysis(str(results_dir), int(resamples), int(seed), est, r_rel(est), g, verdict, [],
                 {"load": t_load, "total": time.perf_counter() - t0})
    return a, pos
