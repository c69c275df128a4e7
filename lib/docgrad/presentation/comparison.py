"""Does the ordering of the corpora depend on the model? Pairwise orders of corpora by a statistic (R(16K)),
resolved by the document bootstrap, and their agreement between models and with the published study.
Definitions: docs/methods.md#comparing-models.

For one model and two corpora A, B measured on it, the difference d = R_A - R_B has a 95% percentile
interval over the two cells' document-bootstrap draws (draw i of each; the cells are resampled independently,
as for R_rel: decomposition.difference_interval). The pair's order in that model is

    'A > B'  if the interval lies above 0,   'B > A'  if below,   'unresolved'  if it contains 0.

A published model has no draws here, only point values: its order of a pair is that of the points.
Two models *agree* on a pair when both resolve it the same way, *disagree* when both resolve it and the
orders are opposite (the only outcome that says the ordering depends on the model), and otherwise the pair
is *not settled* by these data. Against a published model (points only) a pair is compared by point
order, and the comparison says whether our side of it is resolved.
"""

from __future__ import annotations

from itertools import combinations
from typing import Mapping, Sequence

import numpy as np

from docgrad.core.decomposition import difference_interval

UNRESOLVED = "unresolved"
AGREE, DISAGREE, NOT_SETTLED = "agree", "disagree", "not settled"


def _finite(v) -> bool:
    return v is not None and np.isfinite(float(v))


def pair_orders(points: Mapping[str, float], draws: Mapping[str, np.ndarray] | None = None,
                corpora: Sequence[str] | None = None) -> dict[tuple[str, str], dict]:
    """For every pair (A, B) of corpora (in `corpora` order, default the order of `points`) that both have a
    finite point value: the point difference A - B, and with draws its 95% interval and the fraction of draws
    with A > B; 'order' is 'A > B', 'B > A' or 'unresolved' (points only: never 'unresolved' unless equal)."""
    names = [k for k in (corpora if corpora is not None else points) if k in points and _finite(points[k])]
    out = {}
    for a, b in combinations(names, 2):
        d = float(points[a]) - float(points[b])
        rec = {"a": a, "b": b, "diff": d, "ci": None, "frac_greater": None, "resolved_by": "points"}
        if draws is not None and a in draws and b in draws:
            iv = difference_interval(draws[a], draws[b])
            rec.update(ci=list(iv["ci"]), frac_greater=iv["frac_greater"], resolved_by="bootstrap")
            lo, hi = iv["ci"]
            sign = 0 if lo is None or (lo <= 0 <= hi) else (1 if lo > 0 else -1)
        else:
            sign = int(np.sign(d))
        rec["order"] = f"{a} > {b}" if sign > 0 else (f"{b} > {a}" if sign < 0 else UNRESOLVED)
        rec["sign"] = sign
        out[(a, b)] = rec
    return out


def agreement(x: Mapping[tuple[str, str], dict], y: Mapping[tuple[str, str], dict]) -> dict[tuple[str, str], str]:
    """Per pair of corpora present in both: 'agree' (both resolved, same order), 'disagree' (both resolved,
    opposite orders) or 'not settled' (at least one side unresolved)."""
    out = {}
    for pair in x:
        if pair not in y:
            continue
        sx, sy = x[pair]["sign"], y[pair]["sign"]
        out[pair] = NOT_SETTLED if sx == 0 or sy == 0 else (AGREE if sx == sy else DISAGREE)
    return out


def compare(ours: Mapping[str, tuple[Mapping[str, float], Mapping[str, np.ndarray] | None]],
            published: Mapping[str, Mapping[str, float]] | None = None,
            corpora: Sequence[str] | None = None) -> dict:
    """The whole comparison, JSON-ready.

    ours: {model label: (points by corpus, bootstrap draws by corpus)}; published: {label: points by corpus}.
    Returns {"orders": {label: [pair records]}, "between_models": [{"x", "y", "pairs": {pair: status},
    "counts": {status: n}, "by_corpus": {corpus: {"diff": y - x, "ci", "frac_greater"}}}], "with_published":
    [...the same without by_corpus, published on the y side...]}; pair keys are 'A|B'. by_corpus compares
    the two models on one corpus: the difference of their values, with the interval of draw i of y minus
    draw i of x (independent cells). Every pair of our models is compared, and each of our models with each published model."""
    orders = {lab: pair_orders(p, d, corpora) for lab, (p, d) in ours.items()}
    pub = {lab: pair_orders(p, None, corpora) for lab, p in (published or {}).items()}

    def block(xl, yl, xo, yo):
        st = agreement(xo, yo)
        return {"x": xl, "y": yl, "pairs": {f"{a}|{b}": s for (a, b), s in st.items()},
                "counts": {s: sum(v == s for v in st.values()) for s in (AGREE, DISAGREE, NOT_SETTLED)}}

    def by_corpus(xl, yl):
        (px, dx), (py, dy) = ours[xl], ours[yl]
        out = {}
        for k in (corpora if corpora is not None else px):
            if k in px and k in py and _finite(px[k]) and _finite(py[k]):
                rec = {"diff": float(py[k]) - float(px[k]), "ci": None, "frac_greater": None}
                if dx is not None and dy is not None and k in dx and k in dy:
                    iv = difference_interval(dy[k], dx[k])
                    rec.update(ci=list(iv["ci"]), frac_greater=iv["frac_greater"])
                out[k] = rec
        return out

    labels = list(orders)
    return {"orders": {lab: [r for r in o.values()] for lab, o in {**orders, **pub}.items()},
            "between_models": [block(a, b, orders[a], orders[b]) | {"by_corpus": by_corpus(a, b)}
                               for a, b in combinations(labels, 2)],
            "with_published": [block(a, p, orders[a], pub[p]) for a in labels for p in pub]}


def describe(result: dict) -> list[str]:
    """Plain-language lines for a comparison (compare()): for each pair of our models, which pairs of corpora
    they order the same way, which opposite, which the data do not settle; then each model against each
    published model by point order."""
    orders = {lab: {f"{r['a']}|{r['b']}": r for r in recs} for lab, recs in result["orders"].items()}

    def pairs_text(keys, lab):
        return ", ".join(orders[lab][k]["order"] if orders[lab][k]["sign"] else k.replace("|", " vs ")
                         for k in keys)

    lines = []
    for blk in result["between_models"]:
        x, y, pairs = blk["x"], blk["y"], blk["pairs"]
        if not pairs:
            lines.append(f"{x} and {y} share fewer than two measured corpora: nothing to compare yet.")
            continue
        by = {s: [k for k, v in pairs.items() if v == s] for s in (AGREE, DISAGREE, NOT_SETTLED)}
        n = len(pairs)
        text = (f"Of the {n} pairs of corpora measured on both {x} and {y}, " if n > 1 else
                f"The one pair of corpora measured on both {x} and {y} ")
        parts = []

        def are(k):
            return "is" if n == 1 else f"{k} {'is' if k == 1 else 'are'}"

        if by[AGREE]:
            parts.append(f"{are(len(by[AGREE]))} resolved the same way by both ({pairs_text(by[AGREE], x)})")
        if by[DISAGREE]:
            parts.append(f"{are(len(by[DISAGREE]))} resolved in opposite directions ("
                         + "; ".join(f"{x}: {orders[x][k]['order']}, {y}: {orders[y][k]['order']}"
                                     for k in by[DISAGREE]) + ")")
        if by[NOT_SETTLED]:
            parts.append(f"{are(len(by[NOT_SETTLED]))} not settled: the interval of the difference includes 0 for "
                         "at least one model (" + "; ".join(
                             f"{k.replace('|', ' vs ')}: " + ", ".join(
                                 f"{lab} {orders[lab][k]['order']}" for lab in (x, y)) for k in by[NOT_SETTLED]) + ")")
        text += "; ".join(parts) + ". "
        text += ("So on these corpora the ordering depends on the model." if by[DISAGREE] else
                 "No pair is ordered oppositely by the two models: these data show no ordering that depends on "
                 "the model" + (", though some pairs are too close to tell." if by[NOT_SETTLED] else "."))
        lines.append(text)
    for blk in result["between_models"]:
        bc = {k: r for k, r in blk.get("by_corpus", {}).items()}
        if bc:
            lines.append(f"Corpus by corpus, {blk['y']} minus {blk['x']}: " + "; ".join(
                f"{k} {r['diff']:+.2f}" + (f" [{r['ci'][0]:+.2f}, {r['ci'][1]:+.2f}]"
                                           + ("" if r["ci"][0] > 0 or r["ci"][1] < 0 else ", not resolved")
                                           if r["ci"] and r["ci"][0] is not None else "")
                for k, r in bc.items()) + ".")
    for blk in result["with_published"]:
        x, y, pairs = blk["x"], blk["y"], blk["pairs"]
        if not pairs:
            continue
        same = [k for k in pairs if np.sign(orders[x][k]["diff"]) == orders[y][k]["sign"]]
        opp = [k for k in pairs if k not in same]
        lines.append(
            f"{x} against {y}, by point order: "
            + (f"same point order for {', '.join(k.replace('|', ' vs ') for k in same)}" if same else "no pair in the same order")
            + (f"; opposite for {', '.join(k.replace('|', ' vs ') for k in opp)}"
               + (f" ({sum(pairs[k] == DISAGREE for k in opp)} of them resolved on our side)") if opp else "")
            + ".")
    return lines
