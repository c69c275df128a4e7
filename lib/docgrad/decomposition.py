"""What drives a cell's R: sources, documents and chunks; robustness; what was measured.
Definitions: docs/methods.md#decomposition.

Every statistic here is, like those of docgrad.bootstrap, a ratio of sums of Gram entries K (chunk-gradient
inner products, exact squared norms on the diagonal) for document weights c (c = 1: the estimate; c = 0 leaves
a document out; resample counts give a bootstrap draw), computed from the cell's BlockSums.

Sources. Each document has a *source* (author, work, project or package: `source_label`). Chunk pairs fall
into four kinds, with means (for weights c; a document never pairs with its own copy):
  A_xs        over pairs of documents of different sources          (estimates |G|^2)
  A_ss(t)     over pairs of different documents of the same source t  (|G|^2 + tau_src^2 of source t)
  lag_l       over pairs of one document at lag l chunks           (bootstrap.BlockSums.lag)
  A_0         over the diagonal (exact squared norms)
Model: g_{d,k} = G + a_{s(d)} + b_d + e_{d,k}, components independent with mean 0 (sources, documents within a
source, chunks within a document). Then E K = |G|^2 + [same source] tau_src^2 + [same doc] tau_doc^2(l) +
[same chunk] tau_chunk^2, and with V = A_0 - A_xs (the chunk-noise variance about the cross-source mean):
  u_d         = A_ss(s(d)) - A_xs for a document whose source has another document in the sample, else 0
              (a source seen in one document only cannot be told apart from that document: it is counted in
              the document part)
  rho_src     = (sum_d c_d u_d / sum_d c_d) / V                                (source part)
  rho_x(l)    = (c.lag_l / c.nlag_l - A_xs) / V                                (correlation about A_xs)
  rho_x_long  = mean of rho_x(l) over the long lags (LONG_LAG_TOKENS)
  rho_doc     = rho_x_long - rho_src                                           (document-within-source part)
  rho_chunk   = 1 - rho_x_long                                                 (chunk part: not shared at long range)
  R_x(m'C)    = (c.blk_j / c.nblk_j - A_xs) / (V / m')                         (design effect about A_xs)
              = 1 + (m' - 1) rho_src + (m' - 1) rho_doc(m')   exactly, where rho_doc(m') is the mean over
                within-block pairs of (K - A_xs)/V - u_d/V (when m' divides m: every document then has m/m'
                blocks covering all its chunks, so the source term enters every window as (m' - 1) rho_src)
  R_within(W) = R_x(W) - (m' - 1) rho_src                                      (R without the source term)
  plateau     = 1 + (m - 1) rho_x_long  (Kish's 1 + (m-1) rho for a flat profile over the whole span);
                short-range part = R_x(mC) - plateau = (2/m) sum_l (m - l)(rho_x(l) - rho_x_long).
When every source has a single document (CODE projects of distinct owners, PAPERS, WEB), A_xs is S_cross,
V is sigma2, rho_src = 0 and R_x = R_within = the study's R (docs/methods.md#estimators). With shared sources
the study's pooled estimator subtracts S_cross, the mean over *all* cross-document pairs, which mixes A_xs
with the A_ss: it neither keeps the source term whole (R_x) nor removes it (R_within).

Robustness:
  leave_one_out       R(16K) and rho_long with each document's weight set to 0 (the cell's influence table)
  by_source           the estimators on the documents of one source alone (weights 1 on them, 0 elsewhere)
  cluster_counts      the source-clustered bootstrap: draw the cell's n_s sources with replacement and give
                      each document the count of its source (all documents of a drawn source come along);
                      with one document per source and the same generator it draws exactly the document
                      bootstrap's resamples
What was measured: `model_description` (GGUF metadata of the pinned model file), `control_boundaries` (document
separators per chunk of the packed control), `mean_gradient_share` and `group_shares`.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from docgrad import bootstrap as bs
from docgrad.study import BOOTSTRAP_SEED, CI_LEVEL, HEADLINE_WINDOW, RESAMPLES

# --- sources -------------------------------------------------------------------------------------------

# GitHub owner of each pinned CODE project's source repository, as its PyPI metadata (Project-URL / Home-page
# of the version in the manifest) records it. The manifest records package and version only, so the owners
# are listed here; tests/test_decomposition.py checks them against the installed distributions' metadata.
REPOSITORY_OWNERS = {
    "jupytext": "jupytext", "arrow": "arrow-py", "httpx": "encode", "requests": "psf", "gguf": "ggml-org",
    "mistune": "lepture", "python-dateutil": "dateutil", "nbformat": "jupyter", "accelerate": "huggingface",
    "rich": "Textualize", "jupyter_client": "jupyter", "click": "pallets", "anyio": "agronholm",
    "markdown-it-py": "executablebooks", "traitlets": "ipython", "attrs": "python-attrs",
    # docs 16-47 (nbconvert and beautifulsoup4 name no GitHub repository: each is its own source)
    "tqdm": "tqdm", "urllib3": "urllib3", "lark": "lark-parser", "typer": "fastapi", "h11": "python-hyper",
    "packaging": "pypa", "papermill": "nteract", "Jinja2": "pallets", "jsonschema": "python-jsonschema",
    "parso": "davidhalter", "pyparsing": "pyparsing", "narwhals": "narwhals-dev", "pytest": "pytest-dev",
    "pexpect": "pexpect", "pip": "pypa", "mdit-py-plugins": "executablebooks", "mpmath": "fredrik-johansson",
    "jupyter_builder": "jupyterlab", "sympy": "sympy", "ipykernel": "ipython", "pycparser": "eliben",
    "huggingface_hub": "huggingface", "platformdirs": "tox-dev", "jupyterlab": "jupyterlab", "networkx": "networkx",
    "jedi": "davidhalter", "soupsieve": "facelessuser", "filelock": "tox-dev", "ipython": "ipython",
    "Pygments": "pygments",
}


def source_label(corpus: str, doc: dict) -> str:
    """The source of one manifest document record (`corpora[corpus]["documents"][i]`), first rule that applies:

    1. a packed pseudo-document (its source lists `members`, the WEB control): its own source,
       "<corpus> <doc>" (its short descriptions are unrelated packages);
    2. a recorded `author` (BOOKS: "Jane Austen", "Herman Melville");
    3. a PyPI project (CODE): "github.com/<owner>", the owner of its source repository (REPOSITORY_OWNERS;
       a project not listed there is its own source, "pypi:<package>");
    4. a recorded `group` (PAPERS: the R package, one vignette per package);
    5. a title "<work>: <part>" (BOOKS: "King James Bible: Genesis" -> "King James Bible");
    6. else the package name.
    """
    src = doc.get("source", {}) or {}
    if "members" in src:
        return f"{corpus} {doc['doc']}"
    if src.get("author"):
        return str(src["author"])
    if src.get("registry") == "PyPI":
        pkg = str(src.get("package", ""))
        return f"github.com/{REPOSITORY_OWNERS[pkg]}" if pkg in REPOSITORY_OWNERS else f"pypi:{pkg}"
    if src.get("group"):
        return str(src["group"])
    title = str(doc.get("title", ""))
    if ": " in title:
        return title.split(": ", 1)[0]
    return str(src.get("package", f"{corpus} {doc['doc']}"))


def document_sources(manifest: dict, corpus: str, doc_ids: Sequence[int] | None = None) -> list[str]:
    """Source labels of a corpus's documents (manifest dict as read from data/corpora/manifest.json), in the
    order of doc_ids (default: the manifest's order). An id missing from the manifest is its own source."""
    docs = {int(d["doc"]): d for d in manifest["corpora"][corpus]["documents"]}
    ids = list(docs) if doc_ids is None else [int(i) for i in doc_ids]
    return [source_label(corpus, docs[i]) if i in docs else f"{corpus} {i}" for i in ids]


def same_source_pair_fraction(sources: Sequence[str]) -> float:
    """Fraction of the ordered pairs of distinct documents that share a source: sum_t n_t (n_t - 1) / (D (D - 1)).
    That fraction of the pairs behind the study's S_cross are same-source pairs."""
    n = np.array(list(Counter(sources).values()), dtype=float)
    D = n.sum()
    return float((n * (n - 1)).sum() / (D * (D - 1))) if D > 1 else float("nan")


def source_codes(sources: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    """(integer code per document, the distinct labels in first-seen order)."""
    names = list(dict.fromkeys(sources))
    return np.array([names.index(s) for s in sources]), names


# --- the decomposition -----------------------------------------------------------------------------------

def decompose(s: bs.BlockSums, sources: Sequence[str], chunk: int, c: np.ndarray | None = None) -> dict:
    """Source / document / chunk decomposition for document weights c ((B, D) or (D,); default all 1).

    Returns arrays with a leading B axis: A_xs, A_0, V, rho_src, rho_x (B, m-1), rho_x_long, rho_doc,
    rho_chunk, R_x (B, J; columns = s.sizes), R_within (B, J), plateau, short_range, and
    docs_identified (B,: documents whose source has another document in the sample). Undefined values
    (no cross-source pair, V = 0) are NaN. Formulas: the module docstring."""
    D = len(s.n)
    if len(sources) != D:
        raise ValueError(f"decompose: {len(sources)} source labels for {D} documents")
    c = np.atleast_2d(np.ones(D) if c is None else np.asarray(c, dtype=float))
    code, names = source_codes(sources)
    same = code[:, None] == code[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        xs_sum = np.einsum("bd,de,be->b", c, np.where(same, 0.0, s.P), c)
        xs_cnt = np.einsum("bd,de,be->b", c, np.where(same, 0.0, s.Np), c)
        A_xs = np.where(xs_cnt > 0, xs_sum / np.where(xs_cnt > 0, xs_cnt, 1), np.nan)
        A_0 = (c @ s.diag) / (c @ s.n)
        V = A_0 - A_xs
        u = np.zeros_like(c)
        ident = np.zeros_like(c, dtype=bool)
        dP, dN = np.diag(s.P), np.diag(s.Np)
        for t in range(len(names)):
            mem = code == t
            if mem.sum() < 2:
                continue
            ct = c[:, mem]
            Pt, Nt = s.P[np.ix_(mem, mem)], s.Np[np.ix_(mem, mem)]
            ss_sum = np.einsum("bd,de,be->b", ct, Pt, ct) - (ct**2) @ dP[mem]
            ss_cnt = np.einsum("bd,de,be->b", ct, Nt, ct) - (ct**2) @ dN[mem]
            ok = ss_cnt > 0
            A_ss = np.where(ok, ss_sum / np.where(ok, ss_cnt, 1), np.nan)
            u[:, mem] = np.where(ok, A_ss - A_xs, 0.0)[:, None]
            ident[:, mem] = (ok[:, None] & (ct > 0))
        rho_src = ((c * u).sum(axis=1) / c.sum(axis=1)) / V
        rho_x = ((c @ s.lag) / (c @ s.nlag) - A_xs[:, None]) / V[:, None]
        long = bs._long_lags(s, chunk)
        rho_x_long = rho_x[:, long].mean(axis=1) if long.any() else np.full(len(V), np.nan)
        R_x = ((c @ s.blk) / (c @ s.nblk) - A_xs[:, None]) / (V[:, None] / s.sizes[None, :])
        R_within = R_x - (s.sizes[None, :] - 1) * rho_src[:, None]
        m = s.lag.shape[1] + 1
        plateau = 1 + (m - 1) * rho_x_long
        full = np.flatnonzero(s.sizes == m)
        short = (R_x[:, full[0]] if full.size else np.full(len(V), np.nan)) - plateau
    return {"A_xs": A_xs, "A_0": A_0, "V": V, "rho_src": rho_src, "rho_x": rho_x, "rho_x_long": rho_x_long,
            "rho_doc": rho_x_long - rho_src, "rho_chunk": 1 - rho_x_long, "R_x": R_x, "R_within": R_within,
            "plateau": plateau, "short_range": short, "docs_identified": ident.sum(axis=1)}


def source_pair_means(s: bs.BlockSums, sources: Sequence[str]) -> dict:
    """Mean chunk inner product of the cell (weights 1) by kind of pair: 'cross-source', one entry per source
    with at least two documents ('<source>', its different-document pairs), and 'within document' (all
    pairs of one document at lags >= 1) and 'diagonal' (exact squared norms)."""
    code, names = source_codes(sources)
    same = code[:, None] == code[None, :]
    off = ~np.eye(len(code), dtype=bool)
    out = {"cross-source": float(s.P[~same].sum() / s.Np[~same].sum()) if s.Np[~same].sum() else float("nan")}
    for t, name in enumerate(names):
        mem = np.outer(code == t, code == t) & off
        if s.Np[mem].sum():
            out[name] = float(s.P[mem].sum() / s.Np[mem].sum())
    out["within document"] = float(s.lag.sum() / s.nlag.sum())
    out["diagonal"] = float(s.diag.sum() / s.n.sum())
    return out


def document_pair_means(s: bs.BlockSums) -> np.ndarray:
    """(D, D) mean chunk inner product of each pair of documents (weights 1): off the diagonal P_de / Np_de
    (NaN for pairs never computed, across files); on the diagonal the mean over pairs of two *different*
    chunks of the document (its lag sums), so the exact squared norms are left out."""
    with np.errstate(divide="ignore", invalid="ignore"):
        M = np.where(s.Np > 0, s.P / np.where(s.Np > 0, s.Np, 1), np.nan)
    M[np.diag_indices_from(M)] = s.lag.sum(axis=1) / s.nlag.sum(axis=1)
    return M


# --- robustness: leave one out, by source, clustered bootstrap -------------------------------------------

def _window_column(s: bs.BlockSums, chunk: int, window: int = HEADLINE_WINDOW) -> int:
    j = np.flatnonzero(s.sizes * chunk == window)
    if not j.size:
        raise ValueError(f"no window of {window} tokens among {list(s.sizes * chunk)}")
    return int(j[0])


def leave_one_out(s: bs.BlockSums, chunk: int, window: int = HEADLINE_WINDOW) -> dict[str, np.ndarray]:
    """Each document's influence: the estimators with that document's weight set to 0.

    Returns arrays over documents (cell order): R (R(window) without the document), dR (R without it minus
    R with all), rho_long, drho_long, S_cross (without it), and cross_mean: the mean inner product of the
    document's chunks with the other documents' chunks (computed pairs). dR < 0: the document raises the
    cell's R. A document whose cross_mean is below S_cross has a mean gradient far from the others': it
    lowers S_cross, which raises every document's rho, so leaving it out lowers R."""
    D = len(s.n)
    c = np.ones((D, D)) - np.eye(D)
    j = _window_column(s, chunk, window)
    full = bs.estimate(s, np.ones(D), chunk)
    loo = bs.estimate(s, c, chunk)
    off = ~np.eye(D, dtype=bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        cross = np.where(off, s.P, 0).sum(axis=1) / np.where(off, s.Np, 0).sum(axis=1)
    return {"R": loo["R"][:, j], "dR": loo["R"][:, j] - full["R"][0, j],
            "rho_long": loo["rho_long"], "drho_long": loo["rho_long"] - full["rho_long"][0],
            "S_cross": loo["S_cross"], "cross_mean": cross}


def jackknife_se(values: np.ndarray) -> float:
    """Jackknife standard error from leave-one-out values: sqrt((n-1)/n sum (v_i - mean v)^2)."""
    v = np.asarray(values, dtype=float)
    n = len(v)
    return float(np.sqrt((n - 1) / n * np.sum((v - v.mean()) ** 2)))


def by_source(s: bs.BlockSums, sources: Sequence[str], chunk: int, window: int = HEADLINE_WINDOW) -> list[dict]:
    """The study's estimators on the documents of each source alone (weights 1 on them, 0 elsewhere), and on
    all documents. A source with one document has no cross-document pair: S_cross and everything after it
    are NaN. Rows: source, n_docs, S_cross, sigma2, rho_long, R (at window), mean_gradient_share."""
    code, names = source_codes(sources)
    j = _window_column(s, chunk, window)
    rows = []
    for name, c in [*((n, (code == t).astype(float)) for t, n in enumerate(names)), ("all", np.ones(len(code)))]:
        e = bs.estimate(s, c, chunk)
        S, s2 = float(e["S_cross"][0]), float(e["sigma2"][0])
        rows.append({"source": name, "n_docs": int(c.sum()), "S_cross": S, "sigma2": s2,
                     "rho_long": float(e["rho_long"][0]), "R": float(e["R"][0, j]),
                     "mean_gradient_share": mean_gradient_share(S, s2)})
    return rows


def cluster_counts(rng: np.random.Generator, sources: Sequence[str], resamples: int) -> np.ndarray:
    """(resamples, D) document weights of the source-clustered bootstrap: draw the n_s distinct sources with
    replacement (rng.integers(0, n_s, (resamples, n_s)), sources numbered in first-seen order), each document
    gets its source's count. With one document per source this is bs.counts_from_indices of the same draws."""
    code, names = source_codes(sources)
    idx = rng.integers(0, len(names), size=(resamples, len(names)))
    per_source = bs.counts_from_indices(idx, len(names))
    return per_source[:, code]


def mean_gradient_share(S_cross, sigma2):
    """S_cross / (S_cross + sigma2): the share of a chunk gradient's expected squared norm that is the mean
    gradient |G|^2 (the rest is noise); C/B_simple_shuf in tokens: B_simple = C sigma2/S_cross."""
    S, s2 = np.asarray(S_cross, dtype=float), np.asarray(sigma2, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = S / (S + s2)
    return float(out) if out.ndim == 0 else out


def group_shares(sums: dict, chunk: int, groups: Sequence[str]) -> dict[str, dict[str, float]]:
    """Each parameter group's share of the cell's S_cross and of its sigma2 (weights 1). The groups' Grams add
    up to 'all', so both sets of shares sum to 1 over the groups."""
    D = len(sums["all"].n)
    tot = bs.estimate(sums["all"], np.ones(D), chunk)
    out = {}
    for g in groups:
        e = bs.estimate(sums[g], np.ones(D), chunk)
        out[g] = {"S_cross": float(e["S_cross"][0] / tot["S_cross"][0]),
                  "sigma2": float(e["sigma2"][0] / tot["sigma2"][0])}
    return out


# --- one cell, all of it ---------------------------------------------------------------------------------

DECOMP_KEYS = ("rho_src", "rho_doc", "rho_chunk", "rho_x_long", "plateau", "short_range")


@dataclass
class CellDecomposition:
    """Everything this module computes for one cell (group 'all'). Intervals: 95% percentile intervals over the
    finite draws, `doc` = document bootstrap (the draws of docgrad.stats, same generator), `source` =
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
    (docgrad.cells.Cell), group 'all'. Both bootstraps use the cell's generator (docgrad.stats.cell_rng), so
    the document bootstrap's draws are exactly those behind the pages' intervals."""
    from docgrad.stats import cell_rng, check_resamples

    s, C = cell.sums["all"], cell.chunk
    sources = list(sources)
    j = _window_column(s, C, window)
    ones = np.ones(len(s.n))
    e = bs.estimate(s, ones, C)
    d = decompose(s, sources, C)
    loo = leave_one_out(s, C, window)
    out = CellDecomposition(cell.corpus, list(cell.doc_ids), sources, C, cell.m, float(e["R"][0, j]),
                            float(d["R_x"][0, j]), float(d["R_within"][0, j]),
                            {k: float(d[k][0]) for k in DECOMP_KEYS}, source_pair_means(s, sources),
                            by_source(s, sources, C, window), {k: [float(x) for x in v] for k, v in loo.items()},
                            jackknife_se(loo["R"]))
    resamples = check_resamples(resamples)
    if resamples:
        D = len(s.n)
        counts = {"doc": bs.counts_from_indices(bs.resample_indices(cell_rng(seed, cell), D, resamples), D),
                  "source": cluster_counts(cell_rng(seed, cell), sources, resamples)}
        for kind, c in counts.items():
            dr = _boot_stats(s, sources, C, c, j)
            out.draws[kind] = dr
            out.intervals[kind] = {k: bs.percentile_ci(v, CI_LEVEL) for k, v in dr.items()}
            out.nonfinite[kind] = {k: float(np.mean(~np.isfinite(v))) for k, v in dr.items()}
            fin = dr["R"][np.isfinite(dr["R"])]
            out.support[kind] = {"distinct": int(np.unique(fin).size), "min": float(fin.min()) if fin.size else None,
                                 "max": float(fin.max()) if fin.size else None}
    return out


def difference_interval(a: np.ndarray, b: np.ndarray, level: float = CI_LEVEL) -> dict:
    """a - b for two independently resampled cells (draw i of each, as for R_rel): the percentile interval of
    the differences and the fraction of draws with a > b (finite pairs only)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    ok = np.isfinite(a) & np.isfinite(b)
    diff = a[ok] - b[ok]
    return {"ci": bs.percentile_ci(diff, level), "frac_greater": float(np.mean(diff > 0)) if diff.size else None}


def decompose_cells(results_dir, manifest, model: str, revision: str, chunk: int, corpora: Sequence[str],
                    resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED) -> dict[str, CellDecomposition]:
    """decompose_cell for each requested corpus that has a cell of (model, revision, chunk) in results_dir;
    sources from the manifest (path or dict). Corpora without a cell are left out."""
    import json

    from docgrad.cells import load_cells

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


# --- what was measured ------------------------------------------------------------------------------------

def control_boundaries(tokens: np.ndarray, separator_id: int, chunk: int) -> dict:
    """Document boundaries in a packed control: tokens (D, L) span token ids, cut into chunks of `chunk`.

    Returns: per_chunk (mean, median, min, max separators per chunk), frac_chunks_without (chunks with no
    separator: inside one long description), continued_tokens_mean (tokens at the start of a chunk up to and
    including its first separator: the part of the description that began in the previous chunk, chunk
    itself when there is no separator; first chunks of a span excluded) and its fraction of the chunk."""
    t = np.asarray(tokens)
    D, L = t.shape
    m = L // chunk
    x = t[:, : m * chunk].reshape(D, m, chunk) == separator_id
    n = x.sum(axis=2)
    first = np.where(x.any(axis=2), x.argmax(axis=2) + 1, chunk)[:, 1:]
    return {"per_chunk": {"mean": float(n.mean()), "median": float(np.median(n)), "min": int(n.min()),
                          "max": int(n.max())},
            "frac_chunks_without": float(np.mean(n == 0)), "continued_tokens_mean": float(first.mean()),
            "continued_frac": float(first.mean() / chunk), "chunks": int(D * m)}


def model_description(path: str | Path | None = None, model: str | None = None) -> dict:
    """What a model file is, from its GGUF metadata (the default model's file, or the offline model `model`'s,
    sha256-checked by docgrad.models.model_file; or the file at `path`): name,
    organisation, fine-tune tag, architecture, layers, width, trained context length, vocabulary, the file's
    quantisation (general.file_type) and its tensors by storage type with bits per weight, and whether it
    carries a chat template (an instruction/chat-tuned model). The probe de-quantises every tensor to
    docgrad.probe.DTYPES[0] (float32) and runs each chunk as a standalone sequence."""
    import gguf

    from docgrad import models
    from docgrad.probe import DTYPES, model_chunk_context

    spec = models.get_offline(model) if model is not None else models.SMOLLM2
    p = Path(path) if path is not None else models.model_file(spec)
    r = gguf.GGUFReader(str(p))

    def val(key, default=None):
        f = r.fields.get(key)
        return default if f is None else f.contents()

    arch = val("general.architecture")
    ft = val("general.file_type")
    tensors: dict[str, dict] = {}
    for t in r.tensors:
        k = t.tensor_type.name
        rec = tensors.setdefault(k, {"tensors": 0, "weights": 0, "bytes": 0})
        rec["tensors"] += 1
        rec["weights"] += int(t.n_elements)
        rec["bytes"] += int(t.n_bytes)
    for rec in tensors.values():
        rec["bits_per_weight"] = 8 * rec["bytes"] / rec["weights"]
    return {"file": p.name, "name": val("general.name"), "organization": val("general.organization"),
            "finetune": val("general.finetune"), "size_label": val("general.size_label"), "architecture": arch,
            "layers": val(f"{arch}.block_count"), "width": val(f"{arch}.embedding_length"),
            "context_length": val(f"{arch}.context_length"),
            "vocab_size": val(f"{arch}.vocab_size") or (len(r.fields["tokenizer.ggml.tokens"].data)
                                                       if "tokenizer.ggml.tokens" in r.fields else None),
            "file_type": gguf.LlamaFileType(ft).name.removeprefix("MOSTLY_") if ft is not None else None,
            "tensor_types": tensors, "chat_template": "tokenizer.chat_template" in r.fields,
            "dequantised_dtype": DTYPES[0],
            "chunk_context": model_chunk_context(spec)}


def control_facts(manifest_path: str | Path = "data/corpora/manifest.json", corpus: str = "WEB",
                  chunk: int = 512, cache_dir: str | Path | None = None) -> dict:
    """What the packed control is, for the pages: the manifest's packing record (separator, descriptions per
    pseudo-document, description length in tokens including the separator, the expected boundaries per
    chunk) and, when the span cache is there (checked against the manifest by corpora.load_spans), the
    boundaries counted in the measured spans (control_boundaries); `boundaries_from` says which."""
    from docgrad import corpora

    man = json.loads(Path(manifest_path).read_text())
    entry = man["corpora"][corpus]
    packing = entry.get("packing", {})
    sep = packing.get("separator") or man.get("tokenizer", {}).get("separator", {})
    out = {"corpus": corpus, "selection": entry.get("selection"), "source": entry.get("source", {}),
           "separator": sep, "descriptions_used": packing.get("short_documents_used"),
           "description_tokens": packing.get("short_document_tokens_incl_separator"),
           "descriptions_per_document": packing.get("short_documents_per_pseudo_document"),
           "expected_boundaries_per_chunk": packing.get(f"expected_boundaries_per_{chunk}_token_chunk"),
           "boundaries": None, "boundaries_from": "manifest"}
    try:
        kw = {} if cache_dir is None else {"cache_dir": cache_dir}
        spans = corpora.load_spans(corpus, manifest_path, **kw)
    except (corpora.CorpusError, OSError) as e:
        out["boundaries_note"] = f"span cache not available ({type(e).__name__}); expected value from the manifest"
        return out
    out["boundaries"] = control_boundaries(np.stack([s.tokens for s in spans]), int(sep["id"]), chunk)
    out["boundaries_from"] = "span cache"
    return out
