"""Cell statistics from result files: pooling shards, estimates, document bootstrap, R_rel, report.json.

A cell is (model, revision, corpus, chunk). Its result files (shards) are pooled: every document keeps
its within-document pairs, and cross-document pairs are used wherever both documents sit in one file
(pairs across files were never computed). The Gram diagonal is replaced by the exact squared norms, and
the group 'all' is the sum of the groups (attn + mlp + embed + other; inner products add over disjoint
coordinates). Definitions of the statistics: docgrad.bootstrap (DESIGN.md).

Intervals: 95% percentile document bootstrap: each resample draws n_docs documents with replacement
from the pooled cell; a document drawn twice never forms cross-document pairs with its own copy.
Every cell uses its own generator seeded by (seed, cell name), so a cell's intervals do not depend on
which other cells are in the directory. R_rel = R_corpus(16K) / R_WEB(16K) at the same model, revision
and chunk; its interval divides the i-th draws of the two (independently resampled) cells.
"""

from __future__ import annotations

import sys
import zlib
from dataclasses import dataclass, field
from typing import NamedTuple
from pathlib import Path

import numpy as np

from docgrad import bootstrap as bs
from docgrad import gates
from docgrad.gates import CONTROL
from docgrad.results import GROUPS, ResultFileError, Shard, atomic_write_json, find_results, to_jsonable, load_result, parse_stem

SPAN_TOKENS = 16384          # W of the headline R(16K)
ALL = "all"


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

    @property
    def files(self) -> list[Path]:
        return [sh.path for sh in self.shards]

    @property
    def key(self) -> tuple[str, str, str, int]:
        return (self.model, self.revision, self.corpus, self.chunk)

    @property
    def name(self) -> str:
        return f"{self.model} {self.revision} {self.corpus} c{self.chunk}"


def _ordered_rows(shard: Shard) -> tuple[list[int], int, np.ndarray]:
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


def pool_cell(shards: list[Shard]) -> Cell:
    """Pool the shards of one cell; refuse overlapping documents, mixed chunk counts, mismatched groups."""
    if not shards:
        raise ValueError("pool_cell: no shards")
    key = shards[0].cell
    groups = sorted(shards[0].gram)
    for sh in shards:
        _check_names(sh)
        if sh.cell != key:
            raise ResultFileError(f"{sh.path}: belongs to cell {sh.cell}, not {key}")
        if sorted(sh.gram) != groups:
            raise ResultFileError(f"{sh.path}: groups {sorted(sh.gram)} differ from {groups} in {shards[0].path}")
    seen: dict[int, Path] = {}
    parts, clashes = [], []
    for sh in shards:
        docs, m, order = _ordered_rows(sh)
        clashes += [f"document {d} in {sh.path} and {seen[d]}" for d in docs if d in seen]
        seen.update({d: sh.path for d in docs if d not in seen})
        parts.append(_Part(sh, docs, m, order))
    if clashes:
        raise ResultFileError(f"overlapping shards of cell {key}: " + "; ".join(clashes))
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
    if len(doc_ids) < 2 or not np.any(sums[ALL].Np - np.diag(np.diag(sums[ALL].Np))):
        raise ResultFileError(f"cell {key}: no cross-document pairs (every file holds a single document: "
                              f"{[str(p.shard.path) for p in parts]}); S_cross is undefined")
    model, revision, corpus, chunk = key
    return Cell(model, revision, corpus, chunk, doc_ids, m, sums, loss, [p.shard for p in parts])


def load_cells(results_dir: Path, groups: tuple[str, ...] | None = GROUPS) -> dict[tuple, Cell]:
    """Every cell under results_dir, pooled. groups: groups each file must have (None: whatever they share)."""
    files = find_results(results_dir)
    if not files:
        raise FileNotFoundError(f"{results_dir}: no result files (*.npz with .json) found")
    by_cell: dict[tuple, list[Shard]] = {}
    for f in files:
        sh = load_result(f, groups=groups)
        by_cell.setdefault(sh.cell, []).append(sh)
    return {k: pool_cell(v) for k, v in sorted(by_cell.items())}


# ---------------------------------------------------------------------------------------------------
# Estimates and bootstrap

def cell_rng(seed: int, cell: Cell) -> np.random.Generator:
    """Generator for one cell: (seed, crc32 of the cell name), independent of the other cells present."""
    return np.random.default_rng([int(seed), zlib.crc32(cell.name.encode())])


def _stats_dict(est: dict, sizes: np.ndarray, chunk: int) -> dict:
    """The point estimates (row 0 of bootstrap.estimate's arrays) as a JSON-ready dict keyed in tokens."""
    out = {
        "S_cross": float(est["S_cross"][0]), "sigma2": float(est["sigma2"][0]),
        "rho": {str((l + 1) * chunk): float(r) for l, r in enumerate(est["rho"][0])},
        "rho_long": float(est["rho_long"][0]),
        "R": {str(int(b) * chunk): float(r) for b, r in zip(sizes, est["R"][0])},
        "B_simple_shuf_tokens": float(est["B_simple_shuf_tokens"][0]),
    }
    out["R_16K"] = out["R"].get(str(SPAN_TOKENS))
    out["B_simple_contig_tokens"] = {w: r * out["B_simple_shuf_tokens"] for w, r in out["R"].items()}
    return out


def _ci_dict(draws: dict, sizes: np.ndarray, chunk: int) -> dict:
    rho_ci = bs.percentile_ci(draws["rho"])
    R_ci = bs.percentile_ci(draws["R"])
    R = {str(int(b) * chunk): ci for b, ci in zip(sizes, R_ci)}
    return {
        "S_cross_ci": bs.percentile_ci(draws["S_cross"]), "sigma2_ci": bs.percentile_ci(draws["sigma2"]),
        "rho_long_ci": bs.percentile_ci(draws["rho_long"]),
        "B_simple_shuf_ci": bs.percentile_ci(draws["B_simple_shuf_tokens"]),
        "rho_ci": {str((l + 1) * chunk): ci for l, ci in enumerate(rho_ci)},
        "R_ci": R, "R_16K_ci": R.get(str(SPAN_TOKENS), [None, None]),
    }


def analyze_cell(cell: Cell, resamples: int = 2000, seed: int = 20261007,
                 indices: np.ndarray | None = None) -> tuple[dict, np.ndarray | None]:
    """Estimates (per group and 'all'), per-document rho_long, losses, and bootstrap intervals of one cell.

    Returns (row, draws of R(16K) for 'all' or None). indices: explicit (B, D) resample indices
    (overrides resamples/seed; used by tests).
    """
    D, C = len(cell.doc_ids), cell.chunk
    ones = np.ones((1, D))
    if indices is None and resamples > 0:
        indices = bs.resample_indices(cell_rng(seed, cell), D, resamples)
    counts = bs.counts_from_indices(indices, D) if indices is not None else None
    row: dict = {"model": cell.model, "revision": cell.revision, "corpus": cell.corpus, "chunk": C,
                 "n_docs": D, "doc_ids": cell.doc_ids, "chunks_per_doc": cell.m,
                 "files": [str(f) for f in cell.files],
                 "synthetic": any(bool(sh.meta.get("synthetic")) for sh in cell.shards)}
    groups: dict = {}
    r16_draws = None
    for g, s in cell.sums.items():
        est = bs.estimate(s, ones, C)
        st = _stats_dict(est, s.sizes, C)
        if counts is not None:
            draws = bs.estimate(s, counts, C)
            st.update(_ci_dict(draws, s.sizes, C))
            st["boot_nonfinite_frac"] = float(np.mean(~np.isfinite(draws["R"][:, -1])))
            if g == ALL:
                j = np.flatnonzero(s.sizes * C == SPAN_TOKENS)
                r16_draws = draws["R"][:, j[0]] if j.size else np.full(len(counts), np.nan)
        groups[g] = st
    row.update(groups.pop(ALL))
    row["resamples"] = 0 if counts is None else int(len(counts))
    per_doc = bs.per_document_rho_long(cell.sums[ALL], row["S_cross"], row["sigma2"], C)
    row["secondary"] = {
        "rho_long_per_doc": {str(d): float(v) for d, v in zip(cell.doc_ids, per_doc)},
        "rho_long_per_doc_quartiles": [float(q) for q in np.nanpercentile(per_doc, [0, 25, 50, 75, 100])]
        if np.isfinite(per_doc).any() else [None] * 5,
        "loss_mean": float(cell.loss.mean()),
        "loss_by_chunk_position": [float(x) for x in cell.loss.mean(axis=0)],
    }
    row["loss_mean"] = row["secondary"]["loss_mean"]
    row["groups"] = groups
    return row, r16_draws


def r_rel_rows(rows: list[dict], draws: dict[tuple, np.ndarray | None]) -> list[dict]:
    """R_rel = R(16K) / R_WEB(16K) for every non-control cell with a control at the same model, revision, chunk."""
    by = {(r["model"], r["revision"], r["chunk"], r["corpus"]): r for r in rows}
    out = []
    for (model, rev, C, corpus), r in sorted(by.items()):
        web = by.get((model, rev, C, CONTROL))
        if corpus == CONTROL or web is None:
            continue
        num, den = r.get("R_16K"), web.get("R_16K")
        val = num / den if num is not None and den not in (None, 0) else None
        bc, bw = draws.get((model, rev, corpus, C)), draws.get((model, rev, CONTROL, C))
        ci = bs.percentile_ci(bc / bw) if bc is not None and bw is not None else [None, None]
        out.append({"model": model, "revision": rev, "corpus": corpus, "chunk": C, "R_rel": val, "R_rel_ci": ci,
                    "n_docs": r["n_docs"], "n_docs_web": web["n_docs"]})
    return out


def analyze(results_dir: Path, resamples: int = 2000, seed: int = 20261007,
            groups: tuple[str, ...] | None = GROUPS, missing_ok: bool = False) -> dict:
    """The whole analysis of a results directory as a JSON-ready dict (cells, R_rel, gates, verdict).

    missing_ok: a missing or empty directory gives a report without cells (for notebooks) instead of an error.
    """
    import time

    t0 = time.perf_counter()
    try:
        cells = load_cells(Path(results_dir), groups=groups)
    except FileNotFoundError:  # a missing or empty directory
        if not missing_ok:
            raise
        cells = {}
    t_load = time.perf_counter() - t0
    rows, draws = [], {}
    for key, cell in cells.items():
        t1 = time.perf_counter()
        row, d = analyze_cell(cell, resamples, seed)
        row["seconds"] = time.perf_counter() - t1
        rows.append(row)
        draws[key] = d
    rel = r_rel_rows(rows, draws)
    g = gates.evaluate(cells, rows, rel)
    return {"results_dir": str(results_dir), "resamples": int(resamples), "seed": int(seed),
            "span_tokens": SPAN_TOKENS, "cells": rows, "R_rel": rel, "gates": g["gates"],
            "verdict": g["verdict"], "verdict_detail": g["detail"],
            "seconds": {"load": t_load, "total": time.perf_counter() - t0}}


# ---------------------------------------------------------------------------------------------------
# Tidy tables (for notebooks and the summary print)

def _ci(x, i):
    return None if x is None or x[i] is None else float(x[i])


CELL_COLUMNS = ["model", "revision", "corpus", "chunk", "n_docs", "S_cross", "S_cross_lo", "S_cross_hi", "sigma2",
                "rho_long", "rho_long_lo", "rho_long_hi", "R_16K", "R_16K_lo", "R_16K_hi", "B_simple_shuf_tokens",
                "B_simple_contig_16K_tokens", "loss_mean"]


def cells_frame(report: dict):
    """One row per cell (group 'all'): headline numbers with their intervals."""
    import pandas as pd

    recs = []
    for c in report["cells"]:
        recs.append({"model": c["model"], "revision": c["revision"], "corpus": c["corpus"], "chunk": c["chunk"],
                     "n_docs": c["n_docs"], "S_cross": c["S_cross"], "S_cross_lo": _ci(c.get("S_cross_ci"), 0),
                     "S_cross_hi": _ci(c.get("S_cross_ci"), 1), "sigma2": c["sigma2"], "rho_long": c["rho_long"],
                     "rho_long_lo": _ci(c.get("rho_long_ci"), 0), "rho_long_hi": _ci(c.get("rho_long_ci"), 1),
                     "R_16K": c.get("R_16K"), "R_16K_lo": _ci(c.get("R_16K_ci"), 0),
                     "R_16K_hi": _ci(c.get("R_16K_ci"), 1), "B_simple_shuf_tokens": c["B_simple_shuf_tokens"],
                     "B_simple_contig_16K_tokens": c["B_simple_contig_tokens"].get(str(SPAN_TOKENS)),
                     "loss_mean": c["loss_mean"]})
    return pd.DataFrame(recs, columns=CELL_COLUMNS)


def _curve_frame(report: dict, key: str, xname: str):
    import pandas as pd

    recs = []
    for c in report["cells"]:
        for g, st in [(ALL, c), *c["groups"].items()]:
            cis = st.get(f"{key}_ci", {})
            for x, v in st[key].items():
                ci = cis.get(x, [None, None])
                recs.append({"model": c["model"], "revision": c["revision"], "corpus": c["corpus"],
                             "chunk": c["chunk"], "group": g, xname: int(x), key: v, "lo": ci[0], "hi": ci[1]})
    return pd.DataFrame(recs, columns=["model", "revision", "corpus", "chunk", "group", xname, key, "lo", "hi"])


def rho_frame(report: dict):
    """rho by lag (tokens) per cell and group ('all' and each parameter group), with bootstrap bands."""
    return _curve_frame(report, "rho", "lag_tokens")


def R_frame(report: dict):
    """R(W) by window W (tokens) per cell and group, with bootstrap intervals."""
    return _curve_frame(report, "R", "W_tokens")


def per_doc_frame(report: dict):
    """Per-document rho_long (cell S_cross and sigma2) for every cell."""
    import pandas as pd

    return pd.DataFrame([{"model": c["model"], "revision": c["revision"], "corpus": c["corpus"],
                          "chunk": c["chunk"], "doc": int(d), "rho_long": v}
                         for c in report["cells"] for d, v in c["secondary"]["rho_long_per_doc"].items()],
                        columns=["model", "revision", "corpus", "chunk", "doc", "rho_long"])


def loss_frame(report: dict):
    """Mean loss by chunk position (0 = first chunk of the span) for every cell."""
    import pandas as pd

    return pd.DataFrame([{"model": c["model"], "revision": c["revision"], "corpus": c["corpus"],
                          "chunk": c["chunk"], "position": i, "start_token": i * c["chunk"], "loss": v}
                         for c in report["cells"] for i, v in enumerate(c["secondary"]["loss_by_chunk_position"])],
                        columns=["model", "revision", "corpus", "chunk", "position", "start_token", "loss"])


def r_rel_frame(report: dict):
    import pandas as pd

    return pd.DataFrame([{**{k: r[k] for k in ("model", "revision", "corpus", "chunk", "R_rel")},
                          "lo": r["R_rel_ci"][0], "hi": r["R_rel_ci"][1]} for r in report["R_rel"]],
                        columns=["model", "revision", "corpus", "chunk", "R_rel", "lo", "hi"])


def subset(report: dict, model: str, revision: str, chunk: int, corpora=None) -> dict:
    """The report restricted to one model, revision and chunk (and corpora, if given): cells and R_rel rows."""
    def keep(r):
        return (r["model"] == model and r["revision"] == revision and r["chunk"] == chunk
                and (corpora is None or r["corpus"] in corpora))

    order = {k: i for i, k in enumerate(corpora or [])}
    out = dict(report)
    out["cells"] = sorted((c for c in report["cells"] if keep(c)), key=lambda c: order.get(c["corpus"], 99))
    out["R_rel"] = [r for r in report["R_rel"] if keep(r)]
    return out


def headline_table(report: dict, published_cells=None, published_r_rel=None,
                   published_models=("EleutherAI/pythia-1.4b", "allenai/OLMo-2-0425-1B")):
    """Per corpus: our R(16K) and R_rel with 95% intervals, beside the published final-checkpoint values.

    report: one model/revision/chunk (see subset). Published frames as from docgrad.published (our corpus
    names); only each published model's final checkpoint (frac_training == 1) is shown.
    Columns: corpus, then for each source '<label> R(16K)', '<label> R_rel' as 'value [lo, hi]' strings.
    """
    import pandas as pd

    def fmt(v, lo=None, hi=None):
        if v is None or (isinstance(v, float) and not np.isfinite(v)):
            return "-"
        return f"{v:.2f}" if lo is None or hi is None or lo != lo else f"{v:.2f} [{lo:.2f}, {hi:.2f}]"

    corpora = [c["corpus"] for c in report["cells"]]
    if published_cells is not None:
        corpora += [k for k in ["CODE", "PAPERS", "BOOKS", "WEB"] if k not in corpora]
    rel = {r["corpus"]: r for r in report["R_rel"]}
    ours = {c["corpus"]: c for c in report["cells"]}
    label = "ours" if not report["cells"] else report["cells"][0]["model"].split("/")[-1]
    rows = []
    for k in corpora:
        row = {"corpus": k}
        c = ours.get(k)
        row[f"{label} R(16K)"] = fmt(c.get("R_16K"), *(c.get("R_16K_ci") or [None, None])) if c else "missing"
        r = rel.get(k)
        row[f"{label} R_rel"] = "1 (control)" if k == CONTROL and c else (
            fmt(r["R_rel"], *r["R_rel_ci"]) if r else "-")
        for model in published_models if published_cells is not None else ():
            pc = published_cells[(published_cells.model == model) & (published_cells.frac_training == 1.0)
                                 & (published_cells.corpus == k)]
            name = pc["model_label"].iloc[0] if len(pc) else model.split("/")[-1]
            row[f"{name} R(16K)"] = fmt(*pc[["R_16K", "R_16K_lo", "R_16K_hi"]].iloc[0].tolist()) if len(pc) else "-"
            pr = None if published_r_rel is None else published_r_rel[
                (published_r_rel.model == model) & (published_r_rel.corpus == k)]
            row[f"{name} R_rel"] = "1 (control)" if k == CONTROL else (
                fmt(*pr[["R_rel", "lo", "hi"]].iloc[0].tolist()) if pr is not None and len(pr) else "-")
        rows.append(row)
    return pd.DataFrame(rows)


def reading(report: dict, window_tokens: int = SPAN_TOKENS) -> list[str]:
    """Plain-language lines: a batch of W-token blocks of corpus X carries about N/R effective independent
    chunks per block of N chunks (with the interval), for every cell of the report."""
    out = []
    for c in report["cells"]:
        R = c["R"].get(str(window_tokens))
        if R is None or not np.isfinite(R) or R <= 0:
            continue
        n = window_tokens // c["chunk"]
        line = (f"A batch of {window_tokens // 1024}K-token blocks of {c['corpus']} carries about "
                f"{effective_chunks(R, n):.1f} effective independent {c['chunk']}-token chunks per block of {n} "
                f"(R = {R:.2f}")
        ci = c.get("R_ci", {}).get(str(window_tokens))
        if ci and ci[0] is not None and ci[0] > 0:
            line += f"; 95% interval {effective_chunks(ci[1], n):.1f} to {effective_chunks(ci[0], n):.1f} chunks"
        out.append(line + ").")
    return out


def effective_chunks(R: float, n_chunks: int = 32) -> float:
    """Effective independent chunks in a block of n_chunks consecutive chunks with design effect R: n/R."""
    return float(n_chunks) / float(R)


def missing_cells(report: dict, model: str, revision: str, corpora, chunk: int) -> list[str]:
    """Corpora with no cell for (model, revision, chunk) in the report."""
    have = {c["corpus"] for c in subset(report, model, revision, chunk)["cells"]}
    return [k for k in corpora if k not in have]


def summary_table(report: dict) -> str:
    """Fixed-width text table: one line per cell, then R_rel, gates and the verdict."""
    def f(x, fmt):
        return "-" if x is None or (isinstance(x, float) and not np.isfinite(x)) else format(x, fmt)

    def ci(x):
        return "" if not x or x[0] is None else f"[{x[0]:.3g}, {x[1]:.3g}]"

    lines = [f"{'model':34s} {'revision':24s} {'corpus':7s} {'C':>5s} {'docs':>4s} {'S_cross':>10s} "
             f"{'sigma2':>10s} {'rho_long':>9s} {'R(16K)':>7s} {'R(16K) 95%':>16s} {'B_simple':>9s} {'s':>5s}"]
    for c in report["cells"]:
        lines.append(f"{c['model'][:34]:34s} {c['revision'][:24]:24s} {c['corpus']:7s} {c['chunk']:5d} "
                     f"{c['n_docs']:4d} {f(c['S_cross'], '10.4g')} {f(c['sigma2'], '10.4g')} "
                     f"{f(c['rho_long'], '+9.4f')} {f(c.get('R_16K'), '7.3f')} {ci(c.get('R_16K_ci')):>16s} "
                     f"{f(c['B_simple_shuf_tokens'], '9.3g')} {c.get('seconds', 0):5.2f}")
    for r in report["R_rel"]:
        lines.append(f"R_rel {r['model']} {r['revision']} {r['corpus']}: {f(r['R_rel'], '.3f')} {ci(r['R_rel_ci'])}")
    for name, gt in report["gates"].items():
        lines.append(f"{name}: {gt['status']} - {gt['summary']}")
    lines.append(f"verdict: {report['verdict']}")
    return "\n".join(lines)


def cli_analyze(args) -> int:
    """docgrad analyze --results DIR --out report.json [--resamples N] [--seed S]."""
    if args.resamples < 0:
        print(f"--resamples must be >= 0, got {args.resamples}", file=sys.stderr)
        return 2
    try:
        report = analyze(Path(args.results), resamples=args.resamples, seed=args.seed)
    except (ResultFileError, FileNotFoundError) as e:
        print(f"docgrad analyze: {e}", file=sys.stderr)
        return 1
    atomic_write_json(Path(args.out), to_jsonable(report))
    print(summary_table(report))
    print(f"wrote {args.out} ({len(report['cells'])} cells, {report['resamples']} resamples, "
          f"{report['seconds']['total']:.1f} s)")
    return 0
