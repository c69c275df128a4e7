"""Presentation of an Analysis (docgrad.stats): tidy frames for the charts, the headline table, plain-language
reading lines, and the fixed-width summary that `docgrad analyze` prints. Nothing here estimates anything."""

from __future__ import annotations

import numpy as np
import pandas as pd

from docgrad.gates import MEANING
from docgrad.stats import Analysis, CellEstimate
from docgrad.study import ALL, CONTROL, HEADLINE_WINDOW, PUBLISHED_MODELS, PUBLISHED_ROW_ORDER

_ID = ["model", "revision", "corpus", "chunk"]


def _id(c) -> dict:
    return {"model": c.model, "revision": c.revision, "corpus": c.corpus, "chunk": c.chunk}


CELL_COLUMNS = _ID + ["n_docs", "S_cross", "S_cross_lo", "S_cross_hi", "sigma2", "rho_long", "rho_long_lo",
                      "rho_long_hi", "R_16K", "R_16K_lo", "R_16K_hi", "B_simple_shuf_tokens", "B_simple_shuf_lo",
                      "B_simple_shuf_hi", "B_simple_contig_16K_tokens", "loss_mean"]


def cells_frame(a: Analysis) -> pd.DataFrame:
    """One row per cell (group 'all'): headline numbers with their intervals."""
    recs = []
    for c in a.cells:
        e = c.all
        recs.append({**_id(c), "n_docs": c.n_docs, "S_cross": e.S_cross,
                     **dict(zip(("S_cross_lo", "S_cross_hi"), e.interval("S_cross"))), "sigma2": e.sigma2,
                     "rho_long": e.rho_long, **dict(zip(("rho_long_lo", "rho_long_hi"), e.interval("rho_long"))),
                     "R_16K": e.R_16K, **dict(zip(("R_16K_lo", "R_16K_hi"), e.R_16K_ci)),
                     "B_simple_shuf_tokens": e.B_simple_shuf_tokens,
                     **dict(zip(("B_simple_shuf_lo", "B_simple_shuf_hi"), e.interval("B_simple_shuf"))),
                     "B_simple_contig_16K_tokens": e.B_simple_contig_tokens.get(HEADLINE_WINDOW),
                     "loss_mean": c.loss_mean})
    return pd.DataFrame(recs, columns=CELL_COLUMNS)


def _curve_frame(a: Analysis, key: str, xname: str) -> pd.DataFrame:
    recs = []
    for c in a.cells:
        for g, e in [(ALL, c.all), *c.groups.items()]:
            for x, v in getattr(e, key).items():
                lo, hi = e.interval(key, x)
                recs.append({**_id(c), "group": g, xname: int(x), key: v, "lo": lo, "hi": hi})
    return pd.DataFrame(recs, columns=_ID + ["group", xname, key, "lo", "hi"])


def rho_frame(a: Analysis) -> pd.DataFrame:
    """rho by lag (tokens) per cell and group ('all' and each parameter group), with bootstrap bands."""
    return _curve_frame(a, "rho", "lag_tokens")


def R_frame(a: Analysis) -> pd.DataFrame:
    """R(W) by window W (tokens) per cell and group, with bootstrap intervals."""
    return _curve_frame(a, "R", "W_tokens")


def per_doc_frame(a: Analysis) -> pd.DataFrame:
    """Per-document rho_long (with the cell's S_cross and sigma2) for every cell."""
    return pd.DataFrame([{**_id(c), "doc": int(d), "rho_long": v}
                         for c in a.cells for d, v in c.rho_long_per_doc.items()],
                        columns=_ID + ["doc", "rho_long"])


def loss_frame(a: Analysis) -> pd.DataFrame:
    """Mean loss by chunk position (0 = first chunk of the span) for every cell."""
    return pd.DataFrame([{**_id(c), "position": i, "start_token": i * c.chunk, "loss": v}
                         for c in a.cells for i, v in enumerate(c.loss_by_chunk_position)],
                        columns=_ID + ["position", "start_token", "loss"])


def group_frame(a: Analysis) -> pd.DataFrame:
    """Per cell and parameter group: rho_long and the group's share of sigma2."""
    return pd.DataFrame([{"corpus": c.corpus, "group": g, "rho_long": e.rho_long,
                          "share of sigma2": e.sigma2 / c.all.sigma2}
                         for c in a.cells for g, e in c.groups.items()],
                        columns=["corpus", "group", "rho_long", "share of sigma2"])


def r_rel_frame(a: Analysis) -> pd.DataFrame:
    return pd.DataFrame([{"model": r.model, "revision": r.revision, "corpus": r.corpus, "chunk": r.chunk,
                          "R_rel": r.R_rel, "lo": r.R_rel_ci[0], "hi": r.R_rel_ci[1]} for r in a.R_rel],
                        columns=_ID + ["R_rel", "lo", "hi"])


def gates_frame(a: Analysis) -> pd.DataFrame:
    """One row per gate: status, what was measured, what the gate means; plus the verdict as the last row."""
    rows = [{"gate": k, "status": g["status"], "measured": g["summary"], "meaning": MEANING[k]}
            for k, g in a.gates.items()]
    rows.append({"gate": "verdict", "status": a.verdict, "measured": "; ".join(a.verdict_detail),
                 "meaning": "INCOMPLETE: a gate could not be evaluated; INCONCLUSIVE: G1 or G2 failed; "
                            "MEASURED: both instrument gates pass."})
    return pd.DataFrame(rows, columns=["gate", "status", "measured", "meaning"])


def fmt_interval(v, lo=None, hi=None, digits: int = 2) -> str:
    """'v [lo, hi]' (or 'v' without an interval, '-' when v is missing)."""
    if v is None or (isinstance(v, float) and not np.isfinite(v)):
        return "-"
    if lo is None or hi is None or lo != lo:
        return f"{v:.{digits}f}"
    return f"{v:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def headline_table(a: Analysis, published_cells=None, published_r_rel=None,
                   published_models=PUBLISHED_MODELS) -> pd.DataFrame:
    """Per corpus: our R(16K) and R_rel with 95% intervals, beside the published final-checkpoint values.

    a: one model/revision/chunk (Analysis.subset). Published frames as from docgrad.published (our corpus
    names); only each published model's final checkpoint (frac_training == 1) is shown.
    Columns: corpus, then for each source '<label> R(16K)', '<label> R_rel' as 'value [lo, hi]' strings.
    """
    corpora = [c.corpus for c in a.cells]
    if published_cells is not None:
        corpora += [k for k in PUBLISHED_ROW_ORDER if k not in corpora]
    rel = {r.corpus: r for r in a.R_rel}
    label = "ours" if not a.cells else a.cells[0].model.split("/")[-1]
    rows = []
    for k in corpora:
        row = {"corpus": k}
        c = a.cell(k)
        row[f"{label} R(16K)"] = fmt_interval(c.all.R_16K, *c.all.R_16K_ci) if c else "missing"
        r = rel.get(k)
        row[f"{label} R_rel"] = "1 (control)" if k == CONTROL and c else (fmt_interval(r.R_rel, *r.R_rel_ci)
                                                                          if r else "-")
        for model in published_models if published_cells is not None else ():
            pc = published_cells[(published_cells.model == model) & (published_cells.frac_training == 1.0)
                                 & (published_cells.corpus == k)]
            name = pc["model_label"].iloc[0] if len(pc) else model.split("/")[-1]
            row[f"{name} R(16K)"] = fmt_interval(*pc[["R_16K", "R_16K_lo", "R_16K_hi"]].iloc[0].tolist()) \
                if len(pc) else "-"
            pr = None if published_r_rel is None else published_r_rel[
                (published_r_rel.model == model) & (published_r_rel.corpus == k)]
            row[f"{name} R_rel"] = "1 (control)" if k == CONTROL else (
                fmt_interval(*pr[["R_rel", "lo", "hi"]].iloc[0].tolist()) if pr is not None and len(pr) else "-")
        rows.append(row)
    return pd.DataFrame(rows)


def effective_chunks(R: float, n_chunks: int = 32) -> float:
    """Effective independent chunks in a block of n_chunks consecutive chunks with design effect R: n/R."""
    return float(n_chunks) / float(R)


def reading(a: Analysis, window_tokens: int = HEADLINE_WINDOW) -> list[str]:
    """Plain-language lines: a batch of W-token blocks of corpus X carries about N/R effective independent
    chunks per block of N chunks (with the interval), for every cell."""
    out = []
    for c in a.cells:
        R = c.all.R.get(window_tokens)
        if R is None or not np.isfinite(R) or R <= 0:
            continue
        n = window_tokens // c.chunk
        line = (f"A batch of {window_tokens // 1024}K-token blocks of {c.corpus} carries about "
                f"{effective_chunks(R, n):.1f} effective independent {c.chunk}-token chunks per block of {n} "
                f"(R = {R:.2f}")
        lo, hi = c.all.interval("R", window_tokens)
        if lo is not None and lo > 0:
            line += f"; 95% interval {effective_chunks(hi, n):.1f} to {effective_chunks(lo, n):.1f} chunks"
        out.append(line + ").")
    return out


def summary_table(a: Analysis) -> str:
    """Fixed-width text table: one line per cell, then R_rel, gates and the verdict."""
    def f(x, fmt):
        return "-" if x is None or (isinstance(x, float) and not np.isfinite(x)) else format(x, fmt)

    def ci(x):
        return "" if not x or x[0] is None else f"[{x[0]:.3g}, {x[1]:.3g}]"

    lines = [f"{'model':34s} {'revision':24s} {'corpus':7s} {'C':>5s} {'docs':>4s} {'S_cross':>10s} "
             f"{'sigma2':>10s} {'rho_long':>9s} {'R(16K)':>7s} {'R(16K) 95%':>16s} {'B_simple':>9s} {'s':>5s}"]
    for c in a.cells:
        e = c.all
        lines.append(f"{c.model[:34]:34s} {c.revision[:24]:24s} {c.corpus:7s} {c.chunk:5d} "
                     f"{c.n_docs:4d} {f(e.S_cross, '10.4g')} {f(e.sigma2, '10.4g')} "
                     f"{f(e.rho_long, '+9.4f')} {f(e.R_16K, '7.3f')} {ci(e.R_16K_ci):>16s} "
                     f"{f(e.B_simple_shuf_tokens, '9.3g')} {c.seconds or 0:5.2f}")
    for r in a.R_rel:
        lines.append(f"R_rel {r.model} {r.revision} {r.corpus}: {f(r.R_rel, '.3f')} {ci(r.R_rel_ci)}")
    for name, gt in a.gates.items():
        lines.append(f"{name}: {gt['status']} - {gt['summary']}")
    lines.append(f"verdict: {a.verdict}")
    return "\n".join(lines)
