"""Does the ordering of the corpora depend on the model? Pairwise orders of corpora by a statistic (R(16K)),
resolved by the document bootstrap, and their agreement between models and with the published study.
Definitions: docs/methods.md#comparing-models.

For one model and two corpora A, B measured on it, the difference d = R_A - R_B has draws d^(i) = R_A^(i) -
R_B^(i) over the two cells' document-bootstrap draws (the cells are resampled independently: different
documents). The pairs of one model are one family under Holm (docgrad.core.orderings.resolve_pairs): a pair's
order in that model is

    'A > B' / 'B > A'  when Holm resolves it (its interval at Holm's level excludes 0),   'unresolved'  else.

A published model has no draws here, only point values: its order of a pair is that of the points.
Two models *agree* on a pair when both resolve it the same way, *disagree* when both resolve it and the
orders are opposite (the only outcome that says the ordering depends on the model), and otherwise the pair
is *not settled* by these data. Against a published model (points only) a pair is compared by point
order, and the comparison says whether our side of it is resolved.

Corpus by corpus, two of our models are compared by y's R(16K) minus x's: with paired draws over the documents
both measured where given (docgrad.results.paired; the same documents through two models are not independent),
else draw i of y minus draw i of x (independent cells). The corpora are one family under Holm.
"""

from __future__ import annotations

from itertools import combinations
from typing import Mapping, Sequence

import numpy as np

from docgrad.core.decomposition import difference_interval
from docgrad.core.orderings import resolve_differences, resolve_pairs
from docgrad.presentation import evidence

UNRESOLVED = "unresolved"
AGREE, DISAGREE, NOT_SETTLED = "agree", "disagree", "not settled"


def _finite(v) -> bool:
    return v is not None and np.isfinite(float(v))


def pair_orders(points: Mapping[str, float], draws: Mapping[str, np.ndarray] | None = None,
                corpora: Sequence[str] | None = None) -> dict[tuple[str, str], dict]:
    """For every pair (A, B) of corpora (in `corpora` order, default the order of `points`) that both have a
    finite point value: the point difference A - B, and with draws its interval at Holm's level over the pairs
    (resolve_pairs), its p-value and the fraction of draws with A > B; 'order' is 'A > B', 'B > A' or
    'unresolved' (points only: never 'unresolved' unless equal)."""
    names = [k for k in (corpora if corpora is not None else points) if k in points and _finite(points[k])]
    with_draws = draws is not None and all(k in draws for k in names)
    held = {(r["a"], r["b"]): r for r in resolve_pairs(points, draws, names)} if with_draws else {}
    out = {}
    for a, b in combinations(names, 2):
        d = float(points[a]) - float(points[b])
        rec = {"a": a, "b": b, "diff": d, "ci": None, "frac_greater": None, "resolved_by": "points"}
        if with_draws:
            h = held[(a, b)]
            rec.update(ci=h["ci"], p=h["p"], level=h["level"], resolved_by=f"bootstrap, Holm over {len(held)} pairs",
                       frac_greater=difference_interval(draws[a], draws[b])["frac_greater"])
            sign = h["sign"]
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
            corpora: Sequence[str] | None = None,
            paired: Mapping[tuple[str, str], Mapping[str, object]] | None = None,
            by_corpus_corpora: Sequence[str] | None = None) -> dict:
    """The whole comparison, JSON-ready.

    ours: {model label: (points by corpus, bootstrap draws by corpus)}; published: {label: points by corpus};
    paired: {(x label, y label): {corpus: docgrad.results.paired.PairedDifference}} where the two models measured
    the same documents. Returns {"orders": {label: [pair records]}, "between_models": [{"x", "y", "pairs":
    {pair: status}, "counts": {status: n}, "by_corpus": {corpus: {"diff": y - x, "ci", "p", "level",
    "resolved", "paired", "n_shared"}}}], "with_published": [...the same without by_corpus, published on the y
    side...]}; pair keys are 'A|B'. by_corpus: Holm over the corpora; paired draws where given, else draw i of
    y minus draw i of x (independent cells)."""
    orders = {lab: pair_orders(p, d, corpora) for lab, (p, d) in ours.items()}
    pub = {lab: pair_orders(p, None, corpora) for lab, p in (published or {}).items()}

    def block(xl, yl, xo, yo):
        st = agreement(xo, yo)
        return {"x": xl, "y": yl, "pairs": {f"{a}|{b}": s for (a, b), s in st.items()},
                "counts": {s: sum(v == s for v in st.values()) for s in (AGREE, DISAGREE, NOT_SETTLED)}}

    def by_corpus(xl, yl):
        (px, dx), (py, dy) = ours[xl], ours[yl]
        pd_ = (paired or {}).get((xl, yl), {})
        family, meta = {}, {}
        for k in (by_corpus_corpora or corpora or px):
            if k in pd_:
                family[k] = (pd_[k].diff, pd_[k].draws)
                meta[k] = {"paired": True, "n_shared": pd_[k].n_shared}
            elif k in px and k in py and _finite(px[k]) and _finite(py[k]) and dx and dy and k in dx and k in dy:
                family[k] = (float(py[k]) - float(px[k]), np.asarray(dy[k], float) - np.asarray(dx[k], float))
                meta[k] = {"paired": False, "n_shared": 0}
        return {k: {**{f: r[f] for f in ("diff", "ci", "p", "level", "resolved")}, **meta[k]}
                for k, r in resolve_differences(family).items()} if family else {}

    labels = list(orders)
    return {"orders": {lab: [r for r in o.values()] for lab, o in {**orders, **pub}.items()},
            "between_models": [block(a, b, orders[a], orders[b]) | {"by_corpus": by_corpus(a, b)}
                               for a, b in combinations(labels, 2)],
            "with_published": [block(a, p, orders[a], pub[p]) for a in labels for p in pub]}


def by_corpus_claims(blk: dict) -> list[evidence.Claim]:
    """One claim per corpus of a between-models block (compare()): y's R(16K) against x's, resolved only under
    Holm over the corpora, saying whether the draws were paired over shared documents."""
    k = len(blk.get("by_corpus", {}))
    out = []
    for corpus, r in blk.get("by_corpus", {}).items():
        how = (f"paired over the {r['n_shared']} documents both measured" if r["paired"]
               else "independent draws: the documents differ")
        family = f"{how}; Holm over {k} corpora, interval at {1 - r['level']:.1%}" if k > 1 else how
        c = evidence.difference(f"{corpus}: R(16K)", blk["y"], blk["x"], r["diff"], r["ci"], family=family)
        if c.status == evidence.RESOLVED and not r["resolved"]:
            c = evidence.Claim(evidence.NOT_RESOLVED, f"{corpus}: R(16K) does not separate {blk['y']} from "
                                                      f"{blk['x']} after Holm's step-down ({how}).")
        out.append(c)
    return out


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
        lines += [c.text for c in by_corpus_claims(blk)]
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
