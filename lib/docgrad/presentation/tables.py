"""Presentation of an Analysis (docgrad.results.stats): tidy frames for the charts, the headline table, plain-language
reading lines, and the fixed-width summary that `docgrad analyze` prints. Nothing here estimates anything."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from docgrad.core.constants import ALL, CONTROL, HEADLINE_WINDOW, PUBLISHED_MODELS, PUBLISHED_ROW_ORDER
from docgrad.core.decomposition import mean_gradient_share
from docgrad.core.gates import MEANING
from docgrad.models import model_label
from docgrad.presentation.design_effect import few_clusters
from docgrad.presentation.evidence import measured_of_held, sig
from docgrad.results.stats import Analysis

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
    """Per cell and parameter group: the model's short name, rho_long, R(16K) and the group's share of sigma2
    (each group's own estimators on its own Gram; the shares over the groups add up to 1)."""
    return pd.DataFrame([{"model": model_label(c.model), "corpus": c.corpus, "group": g, "rho_long": e.rho_long,
                          "R_16K": e.R_16K, "share of sigma2": e.sigma2 / c.all.sigma2}
                         for c in a.cells for g, e in c.groups.items()],
                        columns=["model", "corpus", "group", "rho_long", "R_16K", "share of sigma2"])


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


def three_significant(df: pd.DataFrame, digits: int = 3) -> pd.DataFrame:
    """The frame as a reader reads it: every float, in float and in mixed columns, written as text at `digits`
    significant figures (evidence.sig: 0.128 as '0.128', 3.3e-05 as '0.0000330', 1101.9 as '1,102', NaN as '–'),
    so no table pads a rounded value to six decimals ('0.128000'); integers, booleans and text are kept, and
    columns that are empty (all NaN) are dropped."""
    df = df.dropna(axis=1, how="all").copy()
    for col in df.columns:
        values = df[col].tolist()
        if any(_is_float(v) for v in values):
            df[col] = pd.Series([sig(v, digits) if _is_float(v) else v for v in values], index=df.index,
                                dtype=object)
    return df


def _is_float(v) -> bool:
    return isinstance(v, (float, np.floating)) and not isinstance(v, bool)


def page_inputs_lines(results_dir, documents: str, chunk: int, resamples: int, page_models, pages: dict,
                      incomplete: dict | None = None) -> list[str]:
    """What a design-effect page read: the results directory and documents, then per model the cells present
    and missing (and that without its control there is no R_rel and no G2), the cells that lack documents their
    corpus holds, and a warning for synthetic files.
    pages: {model label: (Analysis, missing corpora)} as Study.page returns them; incomplete: {model label:
    Study.incomplete(...)}."""
    lines = [f"- results directory: `{results_dir}` (documents {documents}); C = {chunk} tokens, {resamples} "
             "bootstrap resamples"]
    for m in page_models:
        rep, miss = pages[m.label]
        line = (f"- **{m.label}** (`{m.model}` at `{m.revision}`): cells present "
                f"{', '.join(c.corpus for c in rep.cells) or 'none'}; missing {', '.join(miss) or 'none'}")
        lines.append(line + ("; without its WEB control there is no R_rel and gate G2 cannot be evaluated"
                             if CONTROL in miss else ""))
        short = (incomplete or {}).get(m.label)
        if short:
            lines.append(f"- **{m.label}: cells still lacking documents** (shards not yet probed): "
                         + measured_of_held(short)
                         + "; their numbers are provisional and no ordering is read from them")
    if any(c.synthetic for rep, _ in pages.values() for c in rep.cells):
        lines.append("- **these result files are SYNTHETIC** (docgrad.results.synthetic): the numbers below "
                     "illustrate the pipeline, they are not measurements")
    return lines


def pair_order_frame(pairs: dict, decisions: dict) -> pd.DataFrame:
    """Rows: pairs 'A − B'; columns: models; values: the pair's order under Holm ('A > B' or 'not resolved'),
    marked 'provisional: ' for a model whose decision was not read because its cells lack documents.
    pairs: {model: core.orderings.resolve_pairs}; decisions: {model: ordering_decision}."""
    rows = [{"model": lab, "pair": f"{p['a']} − {p['b']}",
             "order": ("provisional: " if decisions.get(lab, {}).get("incomplete") else "") + p["order"]}
            for lab, ps in pairs.items() for p in ps]
    return pd.DataFrame(rows, columns=["model", "pair", "order"]).pivot(index="pair", columns="model", values="order")


def subset_frame(full: dict, subset: dict, name: str) -> pd.DataFrame:
    """Per model and corpus: R(16K) with its 95% interval over the page's documents beside the same over a subset
    of them (`name`, e.g. 'docs 0:16', the published design), with both document counts. full, subset: {model
    label: Analysis}. Cells that are their own subset (the same document count) are left out; a corpus without
    a subset cell shows '-'."""
    rows = []
    for lab, a in full.items():
        b = subset.get(lab)
        for c in a.cells:
            s = b.cell(c.corpus) if b is not None else None
            if s is not None and s.n_docs == c.n_docs:
                continue
            rows.append({"model": lab, "corpus": c.corpus, "documents": c.n_docs,
                         "R(16K)": fmt_interval(c.all.R_16K, *c.all.R_16K_ci),
                         f"{name}: documents": s.n_docs if s else None,
                         f"{name}: R(16K)": fmt_interval(s.all.R_16K, *s.all.R_16K_ci) if s else "-"})
    return pd.DataFrame(rows, columns=["model", "corpus", "documents", "R(16K)", f"{name}: documents",
                                       f"{name}: R(16K)"])


def fmt_interval(v, lo=None, hi=None, digits: int = 2) -> str:
    """'v [lo, hi]' (or 'v' without an interval, '-' when v is missing)."""
    if v is None or (isinstance(v, float) and not np.isfinite(v)):
        return "-"
    if lo is None or hi is None or lo != lo:
        return f"{v:.{digits}f}"
    return f"{v:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def headline_table(a, published_cells=None, published_r_rel=None,
                   published_models=PUBLISHED_MODELS, sources: dict | None = None) -> pd.DataFrame:
    """Per corpus: our R(16K) and R_rel with 95% intervals, for each of our models, beside the published
    final-checkpoint values.

    a: one Analysis of one model/revision/chunk (Analysis.subset), or a list of them (one per model, in
    column order). Published frames as from docgrad.results.published (our corpus names); only each published
    model's final checkpoint (frac_training == 1) is shown.
    Columns: corpus, then for each source '<label> R(16K)', '<label> R_rel' as 'value [lo, hi]' strings.
    sources: {label: {corpus: CellDecomposition}}: adds '<label> sources resampled', the source-clustered
    interval of R(16K) where documents share sources ('[lo, hi], 12 sources'), else 'as documents'; none where
    the source bootstrap is too coarse for a 95% interval (design_effect.few_clusters: BOOKS's 3 sources).
    """
    analyses = [a] if isinstance(a, Analysis) else list(a)
    corpora = list(dict.fromkeys(c.corpus for x in analyses for c in x.cells))
    if published_cells is not None:
        corpora += [k for k in PUBLISHED_ROW_ORDER if k not in corpora]
    rows = []
    for k in corpora:
        row = {"corpus": k}
        for x in analyses:
            rel = {r.corpus: r for r in x.R_rel}
            label = "ours" if not x.cells else model_label(x.cells[0].model)
            c = x.cell(k)
            row[f"{label} R(16K)"] = fmt_interval(c.all.R_16K, *c.all.R_16K_ci) if c else "missing"
            if sources is not None:
                d = sources.get(label, {}).get(k)
                ci = d.intervals.get("source", {}).get("R", [None, None]) if d else [None, None]
                row[f"{label} sources resampled"] = "-" if d is None or ci[0] is None else (
                    f"no interval over {d.n_sources} sources (R by source)" if few_clusters(d) else
                    f"[{ci[0]:.2f}, {ci[1]:.2f}], {d.n_sources} sources" if d.n_sources < len(d.doc_ids)
                    else "as documents")
            r = rel.get(k)
            row[f"{label} R_rel"] = "1 (control)" if k == CONTROL and c else (fmt_interval(r.R_rel, *r.R_rel_ci)
                                                                              if r else "-")
        for model in published_models if published_cells is not None else ():
            pc = published_cells[(published_cells.model == model) & (published_cells.frac_training == 1.0)
                                 & (published_cells.corpus == k)]
            name = pc["model_label"].iloc[0] if len(pc) else model_label(model)
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
    """Fixed-width text table: one line per cell, then R_rel, gates and the verdict. An undefined value (None,
    NaN) is a '-' in its column's width; an undefined interval of a bootstrapped cell is a '-' too (blank without
    a bootstrap)."""
    def f(x, fmt):
        if x is None or (isinstance(x, float) and not np.isfinite(x)):
            return "-".rjust(int(re.match(r"[<>^=]?[+\- ]?#?0?(\d*)", fmt).group(1) or 0))
        return format(x, fmt)

    def ci(x, bootstrapped=False):
        return ("-" if bootstrapped else "") if not x or x[0] is None else f"[{x[0]:.3g}, {x[1]:.3g}]"

    lines = [f"{'model':34s} {'revision':24s} {'corpus':7s} {'C':>5s} {'docs':>4s} {'S_cross':>10s} "
             f"{'sigma2':>10s} {'rho_long':>9s} {'R(16K)':>7s} {'R(16K) 95%':>16s} {'B_simple':>9s} {'s':>5s}"]
    for c in a.cells:
        e = c.all
        lines.append(f"{c.model[:34]:34s} {c.revision[:24]:24s} {c.corpus:7s} {c.chunk:5d} "
                     f"{c.n_docs:4d} {f(e.S_cross, '10.4g')} {f(e.sigma2, '10.4g')} "
                     f"{f(e.rho_long, '+9.4f')} {f(e.R_16K, '7.3f')} {ci(e.R_16K_ci, c.resamples > 0):>16s} "
                     f"{f(e.B_simple_shuf_tokens, '9.3g')} {c.seconds or 0:5.2f}")
    for r in a.R_rel:
        lines.append(f"R_rel {r.model} {r.revision} {r.corpus}: {f(r.R_rel, '.3f')} {ci(r.R_rel_ci)}")
    for name, gt in a.gates.items():
        lines.append(f"{name}: {gt['status']} - {gt['summary']}")
    lines.append(f"verdict: {a.verdict}")
    return "\n".join(lines)


# --- reading the result: decomposition, robustness, comparison with the published study -------------------
# (docgrad.core.decomposition computes; these functions only arrange its numbers)

def ordering(values: dict, digits: int | None = None) -> str:
    """'A > B > C' by decreasing value (ties keep the given order); NaN/None values are left out.
    With digits, each name is followed by its value: 'A (5.36) > B (4.30)'."""
    ok = [(k, float(v)) for k, v in values.items() if v is not None and np.isfinite(float(v))]
    ok.sort(key=lambda kv: -kv[1])
    return " > ".join(k if digits is None else f"{k} ({v:.{digits}f})" for k, v in ok)


def decomposition_frame(decomps: dict) -> pd.DataFrame:
    """One row per cell (docgrad.results.cell_decomposition.CellDecomposition): the study's R(16K), R about the cross-source
    mean (R_x) and without the source term (R_within), each with its document-bootstrap interval (_lo, _hi) and
    the source-clustered one (_slo, _shi); the chunk-level shares rho_src, rho_doc, rho_chunk; the plateau
    1 + (m-1) rho_x_long and the short-range part; the jackknife standard error of R(16K)."""
    rows = []
    for k, d in decomps.items():
        iv, sv = d.intervals.get("doc", {}), d.intervals.get("source", {})
        row = {"corpus": k, "n_docs": len(d.doc_ids), "n_sources": d.n_sources,
               "shared_sources": ", ".join(f"{s} ({n})" for s, n in d.shared_sources.items()) or "none"}
        for name, v in (("R", d.R), ("R_x", d.R_x), ("R_within", d.R_within)):
            row[name] = v
            row[f"{name}_lo"], row[f"{name}_hi"] = iv.get(name, [None, None])
            row[f"{name}_slo"], row[f"{name}_shi"] = sv.get(name, [None, None])
        row.update({k2: d.terms[k2] for k2 in ("rho_src", "rho_doc", "rho_chunk", "plateau", "short_range")})
        row["jackknife_se_R"] = d.jackknife_se_R
        rows.append(row)
    return pd.DataFrame(rows)


R_COMPONENTS = ("the chunk itself", "source", "document", "short range")


def R_components_frame(decomps: dict) -> pd.DataFrame:
    """Long form of R_x(16K) = 1 + (m-1) rho_src + (m-1) rho_doc + short range, per corpus (the parts add up
    to R_x exactly), for a stacked bar chart; `order` is the stacking order."""
    rows = []
    for k, d in decomps.items():
        t = d.terms
        parts = (1.0, (d.m - 1) * t["rho_src"], (d.m - 1) * t["rho_doc"], t["short_range"])
        rows += [{"corpus": k, "component": c, "order": i, "value": float(v), "R_x": d.R_x, "R": d.R,
                  "R_within": d.R_within} for i, (c, v) in enumerate(zip(R_COMPONENTS, parts))]
    return pd.DataFrame(rows, columns=["corpus", "component", "order", "value", "R_x", "R", "R_within"])


def influence_frame(decomps: dict, titles: pd.DataFrame | None = None) -> pd.DataFrame:
    """Leave-one-document-out influence, one row per document: R(16K) without it, the change dR (and as a
    fraction of the cell's R), rho_long and S_cross without it, the document's mean inner product with the
    other documents (cross_mean); with titles (corpus, doc, title) when given."""
    rows = []
    for k, d in decomps.items():
        for i, doc in enumerate(d.doc_ids):
            rows.append({"corpus": k, "doc": int(doc), "source": d.sources[i], "R_without": d.loo["R"][i],
                         "dR": d.loo["dR"][i], "dR_frac": d.loo["dR"][i] / d.R, "R": d.R,
                         "rho_long_without": d.loo["rho_long"][i], "S_cross_without": d.loo["S_cross"][i],
                         "cross_mean": d.loo["cross_mean"][i]})
    df = pd.DataFrame(rows, columns=["corpus", "doc", "source", "R_without", "dR", "dR_frac", "R",
                                     "rho_long_without", "S_cross_without", "cross_mean"])
    if titles is not None and len(titles):
        df = df.merge(titles[["corpus", "doc", "title"]], on=["corpus", "doc"], how="left")
    else:
        df["title"] = ""
    return df.fillna({"title": ""})


def top_influences(influence: pd.DataFrame, n: int = 1) -> pd.DataFrame:
    """Per corpus the n documents whose removal changes R(16K) most (largest |dR|)."""
    df = influence.assign(abs_dR=influence["dR"].abs())
    return (df.sort_values("abs_dR", ascending=False).groupby("corpus", sort=False).head(n)
            .drop(columns="abs_dR").reset_index(drop=True))


def leave_one_out_facts(top: pd.DataFrame, influence: pd.DataFrame, cells_by: dict, decomps: dict) -> dict:
    """Per corpus, from its most influential document (top_influences): its title, R with and without it, its
    own ρ_long against the highest other document's, its mean inner product with the other documents against
    S_cross, and the jackknife standard error (the facts correlation.leave_one_out_lines states)."""
    out = {}
    by_doc = influence.set_index(["corpus", "doc"])
    for _, r in top.iterrows():
        k = r["corpus"]
        per = cells_by[k].rho_long_per_doc
        others = {d: v for d, v in per.items() if d != r["doc"] and np.isfinite(v)}
        hd = max(others, key=others.get) if others else None
        out[k] = {"doc": int(r["doc"]), "title": r["title"], "R": r["R"], "R_without": r["R_without"],
                  "dR": r["dR"], "dR_frac": r["dR_frac"], "rho_long_doc": per.get(int(r["doc"])),
                  "highest_other_rho_long": others.get(hd), "highest_other_doc": hd,
                  "highest_other_title": by_doc.loc[(k, hd), "title"] if hd is not None else None,
                  "cross_mean": r["cross_mean"], "S_cross": cells_by[k].all.S_cross,
                  "S_cross_without": r["S_cross_without"], "jackknife_se": decomps[k].jackknife_se_R}
    return out


def by_source_frame(decomps: dict, min_docs: int = 2) -> pd.DataFrame:
    """The study's estimators on each source alone (sources with at least min_docs documents) and on all."""
    rows = [{"corpus": k, **r} for k, d in decomps.items() for r in d.by_source
            if r["source"] == "all" or r["n_docs"] >= min_docs]
    return pd.DataFrame(rows, columns=["corpus", "source", "n_docs", "S_cross", "sigma2", "rho_long", "R",
                                       "mean_gradient_share"])


def bootstrap_frame(decomps: dict, stats=("R", "R_x", "R_within", "rho_src")) -> pd.DataFrame:
    """Document vs source-clustered bootstrap: per corpus and statistic the estimate, both 95% intervals and
    the fraction of non-finite draws of the clustered one (resamples without a cross-source or cross-document
    pair)."""
    est = {"R": lambda d: d.R, "R_x": lambda d: d.R_x, "R_within": lambda d: d.R_within,
           "rho_src": lambda d: d.terms["rho_src"], "rho_doc": lambda d: d.terms["rho_doc"]}
    rows = []
    for k, d in decomps.items():
        for st in stats:
            lo, hi = d.intervals.get("doc", {}).get(st, [None, None])
            slo, shi = d.intervals.get("source", {}).get(st, [None, None])
            rows.append({"corpus": k, "statistic": st, "estimate": est[st](d), "doc_lo": lo, "doc_hi": hi,
                         "source_lo": slo, "source_hi": shi, "n_sources": d.n_sources,
                         "source_nonfinite": d.nonfinite.get("source", {}).get(st)})
    return pd.DataFrame(rows)


def like_for_like_frame(a: Analysis, published_cells: pd.DataFrame, published_models=PUBLISHED_MODELS,
                        control: str = CONTROL) -> pd.DataFrame:
    """Per source (ours, each published final checkpoint) and corpus: R(16K), the control's R(16K), R_rel and
    the noise-variance ratio sigma2 / sigma2_control. R is relative to shuffled chunks of its own corpus and
    comparable across studies; R_rel also divides by a control that differs between the studies."""
    rows = []
    web = a.cell(control)
    label = model_label(a.cells[0].model) if a.cells else "ours"
    for c in a.cells:
        rows.append({"source": label, "corpus": c.corpus, "R_16K": c.all.R_16K,
                     "control_R_16K": web.all.R_16K if web else None,
                     "R_rel": c.all.R_16K / web.all.R_16K if web else None,
                     "sigma2_ratio": c.all.sigma2 / web.all.sigma2 if web else None})
    for model in published_models:
        pc = published_cells[(published_cells.model == model) & (published_cells.frac_training == 1.0)]
        w = pc[pc.corpus == control]
        for _, r in pc.iterrows():
            rows.append({"source": f"{r['model_label']} (published)", "corpus": r["corpus"], "R_16K": r["R_16K"],
                         "control_R_16K": float(w["R_16K"].iloc[0]) if len(w) else None,
                         "R_rel": r["R_16K"] / float(w["R_16K"].iloc[0]) if len(w) else None,
                         "sigma2_ratio": r["sigma2"] / float(w["sigma2"].iloc[0]) if len(w) else None})
    return pd.DataFrame(rows, columns=["source", "corpus", "R_16K", "control_R_16K", "R_rel", "sigma2_ratio"])


def b_simple_frame(a: Analysis, decomps: dict, published_final: pd.DataFrame) -> pd.DataFrame:
    """B_simple (tokens) for shuffled chunks and contiguous 16K blocks, ours with document-bootstrap intervals
    (the contiguous one from the same draws: R(16K) x B_simple_shuf per draw), beside the published final
    checkpoints (docgrad.results.published.final_checkpoints; no intervals published); and the mean-gradient share
    S_cross / (S_cross + sigma2)."""
    label = model_label(a.cells[0].model) if a.cells else "ours"
    rows = []
    for c in a.cells:
        d = decomps.get(c.corpus)
        iv = d.intervals.get("doc", {}) if d else {}
        lo, hi = c.all.interval("B_simple_shuf")
        clo, chi = iv.get("B_simple_contig_16K", [None, None])
        slo, shi = iv.get("mean_gradient_share", [None, None])
        rows.append({"source": label, "corpus": c.corpus, "B_simple_shuf": c.all.B_simple_shuf_tokens,
                     "shuf_lo": lo, "shuf_hi": hi,
                     "B_simple_contig_16K": c.all.B_simple_contig_tokens.get(HEADLINE_WINDOW),
                     "contig_lo": clo, "contig_hi": chi,
                     "mean_gradient_share": mean_gradient_share(c.all.S_cross, c.all.sigma2),
                     "share_lo": slo, "share_hi": shi})
    for _, r in published_final.iterrows():
        rows.append({"source": f"{r['model_label']} (published)", "corpus": r["corpus"],
                     "B_simple_shuf": r["B_simple_shuf_tokens"], "shuf_lo": None, "shuf_hi": None,
                     "B_simple_contig_16K": r["B_simple_shuf_tokens"] * r["R_16K"], "contig_lo": None,
                     "contig_hi": None, "mean_gradient_share": r["mean_gradient_share"], "share_lo": None,
                     "share_hi": None})
    return pd.DataFrame(rows)


def effective_chunks_notes(a: Analysis, window_tokens: int = HEADLINE_WINDOW) -> list[str]:
    """For every cell whose R(W) interval reaches below 1 (so the effective-chunk interval of `reading` reaches
    above the block size): why. R < 1 would mean negatively correlated chunks (a block worth more than its
    chunks drawn at random); an interval that merely includes values below 1 says R is not distinguishable
    from 1 at this sample size."""
    out = []
    for c in a.cells:
        R = c.all.R.get(window_tokens)
        lo, hi = c.all.interval("R", window_tokens)
        if R is None or lo is None or lo >= 1 or lo <= 0:
            continue
        n = window_tokens // c.chunk
        rl, rh = c.all.interval("rho_long")
        out.append(f"{c.corpus}: the interval of R({window_tokens // 1024}K) reaches {lo:.2f}, below 1, so its "
                   f"effective-chunk interval reaches {effective_chunks(lo, n):.1f}, above the {n} chunks of a "
                   f"block. R below 1 would mean negatively correlated chunks; here the estimate is "
                   f"{R:.2f} and ρ_long's interval ({rl:+.4f} to {rh:+.4f}) "
                   + ("includes 0: R is indistinguishable from 1, and the part of the interval above the block "
                      "size is sampling noise, not a block worth more than its chunks."
                      if rl is not None and rl <= 0 <= rh else "does not include 0."))
    return out


def plateau_frame(a: Analysis, window_tokens: int = HEADLINE_WINDOW) -> pd.DataFrame:
    """Per cell: rho at the first lag, rho_long, the flat-profile design effect 1 + (m-1) rho_long over the
    window (Kish's formula with rho = rho_long), the measured R(window), and the difference R - plateau,
    which is (2/m) sum_l (m - l)(rho(l) - rho_long): what the lags above (or below) the plateau add."""
    rows = []
    for c in a.cells:
        m = window_tokens // c.chunk
        R = c.all.R.get(window_tokens)
        pl = 1 + (m - 1) * c.all.rho_long
        rows.append({"corpus": c.corpus, "m": m, "rho_first": c.all.rho.get(c.chunk), "rho_long": c.all.rho_long,
                     "plateau": pl, "R": R, "short_range": None if R is None else R - pl,
                     "plateau_share": None if R is None or R == 1 else (pl - 1) / (R - 1)})
    return pd.DataFrame(rows, columns=["corpus", "m", "rho_first", "rho_long", "plateau", "R", "short_range",
                                       "plateau_share"])


def per_doc_by_source(per_doc: dict, doc_ids, sources) -> pd.DataFrame:
    """Per-document rho_long (stats.CellEstimate.rho_long_per_doc) summarised by source: documents, how many
    are negative, min, median, max."""
    df = pd.DataFrame({"doc": list(doc_ids), "source": list(sources)})
    df["rho_long"] = [per_doc.get(d, np.nan) for d in df["doc"]]
    g = df.groupby("source", sort=False)["rho_long"]
    return pd.DataFrame({"n_docs": g.size(), "n_negative": g.apply(lambda v: int((v < 0).sum())),
                         "min": g.min(), "median": g.median(), "max": g.max()}).reset_index()
