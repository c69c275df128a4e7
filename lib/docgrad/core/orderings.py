"""Is the ordering of the corpora established? Pairwise differences of R(16K) resolved under Holm's
multiplicity control, and the decision rule stated before the 48-document cells were complete.
Definitions: docs/methods.md#the-48-document-cells-what-is-read-and-how-it-is-decided.

For corpora A, B with bootstrap draws R_A^(i), R_B^(i) (each cell's own generator; different documents, so
the draws are independent, not paired), the difference d^(i) = R_A^(i) - R_B^(i) has the two-sided
bootstrap p-value

    p = min(1, 2 min(P(d <= 0), P(d >= 0)))        over the finite draws.

Holm (1979) over k pairs at family-wise level alpha: sort p_(1) <= ... <= p_(k); the pair of rank j is
resolved when p_(r) <= alpha / (k - r + 1) for every r <= j (step-down: the first failure stops it), and its
interval is the percentile interval at level 1 - alpha / (k - j + 1).

The ordering of three corpora is *established* when both adjacent pairs of the point-estimate order are
resolved, *partly established* when some but not both are, *not established* when none is. Against a
published order it runs in the *same direction* (every resolved pair in the published direction), *differs*
(some resolved pair opposite) or is *not compared* (nothing resolved). Not "agrees" or "contradicts": the
published order is of point values never tested against each other, on other corpora and other models. The rule is applied to complete cells only: while any
cell lacks documents its corpus manifest holds, the ordering is *not read* and nothing is compared.
"""

from __future__ import annotations

from itertools import combinations
from typing import Mapping, Sequence

import numpy as np

ALPHA = 0.05
ESTABLISHED, PARTLY, NOT_ESTABLISHED = "established", "partly established", "not established"
NOT_READ = "not read (cells incomplete)"
SAME_DIRECTION, DIFFERS, NOT_COMPARED = "same direction", "differs", "not compared"


def bootstrap_p(diff_draws) -> float:
    """Two-sided bootstrap p-value of a difference: min(1, 2 min(share of draws <= 0, share >= 0)),
    over the finite draws (nan when there is none)."""
    d = np.asarray(diff_draws, dtype=float)
    d = d[np.isfinite(d)]
    if d.size == 0:
        return float("nan")
    return float(min(1.0, 2 * min(np.mean(d <= 0), np.mean(d >= 0))))


def holm(pvalues: Sequence[float], alpha: float = ALPHA) -> list[dict]:
    """Holm's step-down procedure. Per p-value (input order): its rank (1 = smallest), the level it is
    tested at (alpha / (k - rank + 1)) and whether it is rejected (resolved). A nan p-value is never
    rejected and stops the procedure when reached (it sorts last)."""
    p = np.asarray(pvalues, dtype=float)
    k = len(p)
    order = sorted(range(k), key=lambda i: (np.isnan(p[i]), p[i]))
    out: list[dict] = [{} for _ in range(k)]
    going = True
    for rank, i in enumerate(order, start=1):
        level = alpha / (k - rank + 1)
        going = going and bool(np.isfinite(p[i]) and p[i] <= level)
        out[i] = {"rank": rank, "level": level, "resolved": going}
    return out


def resolve_differences(named: Mapping[str, tuple[float, np.ndarray]], alpha: float = ALPHA) -> dict[str, dict]:
    """Holm over a family of differences {name: (point difference, its bootstrap draws)}: per name the point
    'diff', its p-value, Holm rank and level, the percentile interval of the draws at that level, 'resolved'
    and 'sign' (+1 / -1 when resolved, else 0)."""
    names = list(named)
    draws = [np.asarray(named[k][1], float) for k in names]
    pvals = [bootstrap_p(d) for d in draws]
    out = {}
    for k, d, p, t in zip(names, draws, pvals, holm(pvals, alpha)):
        fin = d[np.isfinite(d)]
        q = t["level"] / 2
        ci = [float(np.quantile(fin, q)), float(np.quantile(fin, 1 - q))] if fin.size else [None, None]
        diff = float(named[k][0])
        out[k] = {"diff": diff, "p": p, **t, "ci": ci, "sign": int(np.sign(diff)) if t["resolved"] else 0}
    return out


def resolve_pairs(points: Mapping[str, float], draws: Mapping[str, np.ndarray],
                  corpora: Sequence[str], alpha: float = ALPHA) -> list[dict]:
    """Every pair (A, B) of `corpora` (in that order) under Holm (resolve_differences of A - B): the point
    difference, its p-value, Holm rank and level, the percentile interval of the draws at that level, and
    'order' ('A > B', 'B > A', or 'not resolved')."""
    pairs = list(combinations(corpora, 2))
    res = resolve_differences({(a, b): (float(points[a]) - float(points[b]),
                                        np.asarray(draws[a], float) - np.asarray(draws[b], float))
                               for a, b in pairs}, alpha)
    out = []
    for a, b in pairs:
        r = res[(a, b)]
        order = (f"{a} > {b}" if r["diff"] > 0 else f"{b} > {a}") if r["resolved"] else "not resolved"
        out.append({"a": a, "b": b, **r, "order": order})
    return out


def ordering_decision(points: Mapping[str, float], pairs: Sequence[dict],
                      published: Sequence[str] | None = None,
                      incomplete: Mapping[str, tuple[int, int]] | None = None) -> dict:
    """The decision of docs/methods.md for the corpora of `pairs` (resolve_pairs): their point order
    (highest first), which adjacent pairs are resolved, the status (established / partly / not) and, given a
    published order (highest first), whether ours agrees with it, contradicts it or is not compared.
    incomplete: {corpus: (documents measured, documents the corpus holds)} of the cells that lack documents;
    any such cell makes the status NOT_READ and the comparison NOT_COMPARED (the rule reads complete cells only)."""
    names = sorted({p["a"] for p in pairs} | {p["b"] for p in pairs}, key=lambda c: -float(points[c]))
    by = {frozenset((p["a"], p["b"])): p for p in pairs}
    adjacent = [by[frozenset(ab)] for ab in zip(names, names[1:])]
    n_adj = sum(p["resolved"] for p in adjacent)
    resolved = [p for p in pairs if p["resolved"]]
    status = ESTABLISHED if n_adj == len(adjacent) else (PARTLY if resolved else NOT_ESTABLISHED)
    incomplete = {k: list(v) for k, v in (incomplete or {}).items()}
    if incomplete:
        status = NOT_READ
    out = {"point_order": names, "status": status, "resolved": [p["order"] for p in resolved],
           "incomplete": incomplete}
    if published is not None and incomplete:
        out["published"], out["against_published"] = list(published), NOT_COMPARED
    elif published is not None:
        rank = {c: i for i, c in enumerate(published)}
        same = [(rank[p["a"]] < rank[p["b"]]) == (p["diff"] > 0) for p in resolved if p["a"] in rank and p["b"] in rank]
        out["published"] = list(published)
        out["against_published"] = NOT_COMPARED if not same else (SAME_DIRECTION if all(same) else DIFFERS)
    return out
