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

from docgrad.core.bootstrap import percentile_ci
from docgrad.core.constants import CONTROL
from docgrad.core.decomposition import difference_interval
from docgrad.core.orderings import DIFFERS, SAME_DIRECTION, resolve_differences, resolve_pairs
from docgrad.presentation import evidence as ev
from docgrad.presentation.design_effect import clustered
from docgrad.presentation.evidence import Claim, interval, sig
from docgrad.results.cell_decomposition import CellDecomposition

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


def by_corpus_claims(blk: dict) -> list[ev.Claim]:
    """One claim per corpus of a between-models block (compare()): y's R(16K) against x's, resolved only under
    Holm over the corpora, saying whether the draws were paired over shared documents."""
    k = len(blk.get("by_corpus", {}))
    out = []
    for corpus, r in blk.get("by_corpus", {}).items():
        how = (f"paired over the {r['n_shared']} documents both measured" if r["paired"]
               else "independent draws: the documents differ")
        family = f"{how}; Holm over {k} corpora, interval at {1 - r['level']:.1%}" if k > 1 else how
        c = ev.difference(f"{corpus}: R(16K)", blk["y"], blk["x"], r["diff"], r["ci"], family=family)
        if c.status == ev.RESOLVED and not r["resolved"]:
            c = ev.Claim(ev.NOT_RESOLVED, f"{corpus}: R(16K) does not separate {blk['y']} from "
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


# --- page 04c's sentences: orderings, the published rows, replication ------------------------------------------

def _scoped(claim: Claim, pair: Mapping, decomps: Mapping[str, CellDecomposition]) -> Claim:
    """A resolved pair that involves a corpus clustered by source holds for its documents, not for its kind of
    text (docs/methods.md: with a few sources the source-clustered interval cannot resolve it)."""
    few = [decomps[k] for k in (pair["a"], pair["b"]) if k in decomps and clustered(decomps[k])]
    if claim.status != ev.RESOLVED or not few:
        return claim
    d = few[0]
    return Claim(claim.status, claim.text[:-1] + f"; this holds for these {len(d.doc_ids)} {d.corpus} documents "
                 f"of {d.n_sources} sources, not for {d.corpus} text in general.")


def ordering_claims(pairs: Sequence[dict], decomps: Mapping[str, CellDecomposition],
                    leave_one_out: Mapping[str, dict] | None = None,
                    incomplete: Mapping[str, Sequence[int]] | None = None) -> list[Claim]:
    """The ordering of one model's corpora, pair by pair under Holm over `pairs` (the family;
    docgrad.core.orderings.resolve_pairs; a resolved pair with a corpus clustered by source is scoped to its
    documents),
    then two follow-ups outside the Holm family, each at 95%: a resolved pair's difference without the leading
    corpus's most influential document (`leave_one_out`: {corpus: {'title', 'R', 'draws'}}), and BOOKS against
    CODE with the source term removed. With `incomplete` cells ({corpus: (measured, held)}) every claim is
    provisional (ev.provisional): the rule reads complete cells only."""
    out = [_scoped(c, p, decomps) for c, p in zip(ev.pair_claims("R(16K)", pairs), pairs)]
    for p in pairs:
        if not p["resolved"] or CONTROL in (p["a"], p["b"]):
            continue
        hi, lo = (p["a"], p["b"]) if p["diff"] > 0 else (p["b"], p["a"])
        loo = (leave_one_out or {}).get(hi)
        if loo is None or lo not in decomps:
            continue
        iv = difference_interval(loo["draws"], decomps[lo].draws["doc"]["R"])
        c = ev.difference(f"Without {loo['title']}, R(16K)", hi, lo, loo["R"] - decomps[lo].R, iv["ci"],
                          family="a follow-up outside the Holm family, 95%")
        out.append(c)
    if {"BOOKS", "CODE"} <= set(decomps) and "doc" in decomps["BOOKS"].draws and decomps["BOOKS"].shared_sources:
        b, c = decomps["BOOKS"], decomps["CODE"]
        iv = difference_interval(b.draws["doc"]["R_within"], c.draws["doc"]["R_within"])
        out.append(ev.difference("Without the source term, R(16K)", "BOOKS", "CODE", b.R_within - c.R_within,
                                 iv["ci"], family="outside the Holm family, 95%"))
    return [ev.provisional(c, incomplete) for c in out] if incomplete else out


def code_rho_claim(ours: float, ours_ci, published_cells) -> Claim:
    """Our CODE ρ_long against the published final checkpoints' (with their intervals)."""
    pub = published_cells[(published_cells.corpus == "CODE") & (published_cells.frac_training == 1.0)]
    values = {r.model_label: (float(r.rho_long), [float(r.rho_long_lo), float(r.rho_long_hi)])
              for r in pub.itertuples()}
    return ev.against_published("CODE's ρ_long", ours, ours_ci, values)


def _model_ordering(label: str, dec: Mapping, pairs: Sequence[Mapping] = (), replicated: Mapping[str, str] = (),
                    replication_pairs: Sequence[Mapping] = (), replication_docs: str = "") -> str:
    """One model's clause of page 04c's lead: the pairs Holm resolves with their difference and Holm-level interval
    (when `pairs` are given), how that stands against the published order, and each one's replication on the
    documents measured after the rule (with its interval there); or that nothing is read while cells lack
    documents."""
    if dec.get("incomplete"):
        return (f"{label}'s ordering is not read until every cell holds its documents "
                f"({ev.measured_of_held(dec['incomplete'])} measured so far)")
    if not dec["resolved"]:
        return f"{label} resolves no pair"
    by_key = {frozenset(p["order"].split(" > ")): p for p in pairs if p["order"] != "not resolved"}
    rep = {_pair_key(p): p for p in replication_pairs}
    said, again = [], []
    for order in dec["resolved"]:
        p = by_key.get(frozenset(order.split(" > ")))
        said.append(order + (" by {2} ({3})".format(*_pair_interval(p)) if p else ""))
        verdict = dict(replicated or {}).get(order)
        if verdict in ("replicated", "not replicated"):
            r = rep.get(_pair_key(p)) if p else None
            there = " (there {2}, {3})".format(*_pair_interval(r, order.split(" > ")[0])) if r else ""
            again.append(f"; on documents {replication_docs} alone {order} is {verdict}{there}")
    only = "" if dec["status"] == "established" else "only "
    against = {DIFFERS: ", which differs from the published order",
               SAME_DIRECTION: ", in the published direction"}.get(dec.get("against_published"), "")
    return f"{label} resolves {only}{', '.join(said)}{against}{''.join(again)}"


def comparison_box(decisions: Mapping[str, dict], model_claims: Sequence[Claim], rho_claim: Claim,
                   published_order: Sequence[str], n_docs: Mapping[str, Mapping[str, int]] | None = None,
                   replicated: Mapping[str, Mapping[str, str]] | None = None, replication_docs: str = "",
                   pairs: Mapping[str, Sequence[Mapping]] | None = None,
                   replication_pairs: Mapping[str, Sequence[Mapping]] | None = None) -> str:
    """Page 04c's answer, first what a practitioner does with it: measure R(16K) on one's own corpus rather than
    borrow the published order (untested point values on other corpora and models), with what each model resolves
    under Holm (docgrad.core.orderings.ordering_decision; with `pairs` {model: resolve_pairs} the difference and its
    Holm-level interval), how that stands against the published order, and its replication on the documents
    `replication_docs` measured after the rule (replicated: {model: replication_verdicts}; replication_pairs:
    {model: resolve_pairs on those documents}); a model whose cells lack documents is not read. Then the
    model-vs-model differences resolved on the shared documents and our CODE ρ_long against the published.
    n_docs: {model: {corpus: documents}}."""
    clauses = [_model_ordering(label, dec, (pairs or {}).get(label, ()), (replicated or {}).get(label, {}),
                               (replication_pairs or {}).get(label, ()), replication_docs)
               for label, dec in decisions.items()]
    answer = [f"Measure R(16K) on your own corpus rather than borrow the published order "
              f"{' > '.join(published_order)} (untested point values, other corpora and models): "
              + "; ".join(clauses) + "."]
    resolved = [c for c in model_claims if c.status == ev.RESOLVED]
    answer.append(f"Model against model (same documents): {len(resolved)} of {len(model_claims)} corpora "
                  "differ after Holm" + (" (" + "; ".join(c.text.split(":")[0] for c in resolved) + ")."
                                         if resolved else "."))
    if rho_claim is not None:
        answer.append(f"CODE's ρ_long against the published: {rho_claim.status}.")
    counts = ev.documents_per_corpus({lab: list(per.values()) for lab, per in (n_docs or {}).items()})
    measured = f"R(16K), {counts}; Holm over each model's pairs; paired draws across models."
    caveat = "the published models are 5-10 times larger, unquantised, and read other documents."
    return ev.result_box(answer, measured, caveat)


def like_for_like_lines(lfl, label: str, control_R: float, control_ci) -> list[str]:
    """Why R_rel is not comparable across the two studies: our control's R(16K) against the published
    controls', the factor that puts on R_rel, and the noise-variance ratios σ²/σ²_control to use instead.
    lfl: tables.like_for_like_frame (source, corpus, R_16K, control_R_16K, R_rel, sigma2_ratio)."""
    pub = lfl[lfl.source != label].drop_duplicates("source").set_index("source")["control_R_16K"]
    if not len(pub):
        return [f"Our control's R(16K) is {interval(control_R, control_ci)}; no published control to compare."]
    lo, hi = float(pub.min()), float(pub.max())
    sig2 = lfl[lfl.corpus != CONTROL].pivot(index="corpus", columns="source", values="sigma2_ratio")
    return [f"Our control's R(16K) is {interval(control_R, control_ci)}; the published controls' "
            + ", ".join(f"{sig(v)} ({s.replace(' (published)', '')})" for s, v in pub.items())
            + f". A corpus with the same R gets an R_rel {sig(lo / control_R)}-{sig(hi / control_R)} times larger "
              "here: compare R, not R_rel.",
            "For absolute noise, the noise-variance ratios σ²/σ²_control: "
            + "; ".join(f"{s.replace(' (published)', '')}: " + ", ".join(f"{k} {sig(v)}" for k, v in sig2[s].items()
                                                                         if np.isfinite(v))
                        for s in sig2.columns) + "."]


def through_training_lines(orders: Mapping[str, str]) -> list[str]:
    """The published orderings by R(16K) at each checkpoint ({'<model> <fraction>': 'A > B > ...'}), and, per
    model with several checkpoints, whether the corpora measured at all of them keep one ordering."""
    out = [f"{k}: {o}" for k, o in orders.items()]
    by_model: dict[str, list[list[str]]] = {}
    for k, o in orders.items():
        by_model.setdefault(k.rsplit(" ", 1)[0], []).append(o.split(" > "))
    for m, seqs in by_model.items():
        if len(seqs) < 2:
            continue
        common = set.intersection(*map(set, seqs))
        kept = {tuple(c for c in seq if c in common) for seq in seqs}
        names = ", ".join(sorted(common))
        out.append(f"{m}: {names} (measured at all {len(seqs)} checkpoints) keep one ordering." if len(kept) == 1
                   else f"{m}: the ordering of {names} changes across its {len(seqs)} checkpoints.")
    return out


def published_R_claims(R_16K: Mapping[str, tuple], final, alpha: float = 0.05) -> dict[str, list[Claim]]:
    """Our R(16K) of each corpus against each published final checkpoint's R(16K) of the same kind of corpus
    (docs/methods.md#evidence-rules: resolved only when the two intervals do not overlap). R_16K: {model label:
    ({corpus: R(16K)}, {corpus: document-bootstrap draws})} (Study.R_16K); final: the published final checkpoints
    (docgrad.results.published.final_checkpoints: R_16K, lo, hi). The k comparisons of one model are one family: our interval is
    the percentile interval at the Bonferroni level 1 - alpha/k; the published one is its own 95% interval."""
    out = {}
    for label, (points, draws) in R_16K.items():
        rows = [(k, r) for k in points for r in final[final["corpus"] == k].itertuples()]
        level = 1 - alpha / max(len(rows), 1)
        out[label] = [ev.against_published(f"{label} {corpus} R(16K)", points[corpus],
                                           percentile_ci(draws[corpus], level) if corpus in draws else None,
                                           {r.model_label: (float(r.R_16K), [float(r.lo), float(r.hi)])})
                      for corpus, r in rows]
    return out


def published_R_lines(claims: Mapping[str, Sequence[Claim]]) -> list[str]:
    """Page 04c's per-corpus comparison in words: per model, how many of its comparisons are resolved, then each
    claim (ours at the Bonferroni level of its family)."""
    lines = []
    for label, cs in claims.items():
        k = len(cs)
        n = sum(c.status == ev.RESOLVED for c in cs)
        lines.append(f"**{label}**: {n} of {k} comparisons resolved (ours at the Bonferroni level "
                     f"{100 * (1 - 0.05 / max(k, 1)):.2f}% over its {k}; the published at their 95%).")
        lines += [c.text for c in cs]
    return lines


def _pair_interval(p: Mapping, first: str | None = None) -> tuple[str, str, str, str]:
    """(a, b, '1.27 [0.167, 2.49]', 'Holm 98.3%') for one pair of core.orderings.resolve_pairs: a − b with its
    interval at Holm's level, a the higher point (or `first`, when given)."""
    a, b, d, (lo, hi) = p["a"], p["b"], p["diff"], p["ci"]
    if (first is None and d < 0) or (first is not None and first != a):
        a, b, d, lo, hi = b, a, -d, -hi, -lo
    level = f"{(1 - p['level']) * 100:.1f}".rstrip("0").rstrip(".")
    return a, b, f"{sig(d)} [{sig(lo)}, {sig(hi)}]", f"Holm {level}%"


def _pair_text(p: Mapping) -> str:
    """'PAPERS − CODE 1.27 [0.167, 2.49] (Holm 98.3%): resolved' for one pair of core.orderings.resolve_pairs,
    written as the higher point minus the lower."""
    a, b, iv, level = _pair_interval(p)
    state = "resolved" if p["order"] != "not resolved" else "not resolved"
    return f"{a} − {b} {iv} ({level}): {state}"


def _pair_key(p: Mapping) -> frozenset:
    return frozenset((p["a"], p["b"]))


def replication_verdicts(pooled: Mapping, replication: Mapping) -> dict[str, str]:
    """{pooled pair's order or 'A vs B': 'replicated' | 'not replicated' | 'not resolved (pooled)'}: a pooled pair
    is replicated only when resolved on the replication documents too, in the same direction."""
    rep = {_pair_key(p): p for p in replication["pairs"]}
    out = {}
    for p in pooled["pairs"]:
        r = rep.get(_pair_key(p))
        if p["order"] == "not resolved":
            out[f"{p['a']} vs {p['b']}"] = "not resolved (pooled)"
        else:
            out[p["order"]] = "replicated" if r is not None and r["order"] == p["order"] else "not replicated"
    return out


def replication_lines(pooled: Mapping, replication: Mapping, pooled_docs: str, replication_docs: str,
                      n_docs: Mapping[str, int]) -> list[str]:
    """The ordering's pairs on the pooled documents beside the same pairs on the documents that were not seen when
    the rule was written (docs/methods.md#the-48-document-cells-what-is-read-and-how-it-is-decided): pooled and
    replication are Study.ordering results; replication_verdicts decides each pooled pair. The pooled result is
    labelled partly exploratory."""
    rep = {_pair_key(p): p for p in replication["pairs"]}
    lines = [f"Pooled, documents {pooled_docs} (partly exploratory: documents 0-15 had been seen when the rule was "
             f"written, and they are in it): {', '.join(pooled['decision']['resolved']) or 'no pair'} resolved.",
             f"Replication, documents {replication_docs} alone (measured after the rule; "
             + ", ".join(f"{k} {n}" for k, n in n_docs.items()) + f" documents): "
             f"{', '.join(replication['decision']['resolved']) or 'no pair'} resolved."]
    for p, verdict in zip(pooled["pairs"], replication_verdicts(pooled, replication).values()):
        r = rep.get(_pair_key(p))
        lines.append(f"- pooled {_pair_text(p)}; replication {_pair_text(r) if r else 'not measured'} → {verdict}")
    for k, r in rep.items():
        if r["order"] != "not resolved" and all(_pair_key(p) != k or p["order"] == "not resolved"
                                                for p in pooled["pairs"]):
            lines.append(f"- resolved on the replication documents only: {r['order']} (a finding of those "
                         "documents, not of the pooled cells)")
    return lines
