"""Sentences that state a conclusion, each no stronger than its interval. The rules (docs/methods.md#evidence-rules):

- a difference is *resolved* only when its interval excludes 0, at the level left after the page's multiplicity
  control (Holm: docgrad.core.orderings.resolve_pairs gives each pair its level and interval);
- "no difference" needs an equivalence margin stated before the data: *equivalent* only when the interval lies
  inside (-margin, +margin); without a margin an interval that contains 0 is *not resolved*;
- a gate decided on a point estimate shows its interval and says when the interval straddles the threshold;
- ours against a published value is resolved only when our interval (and the published one, when there is one)
  do not overlap;
- a corpus whose documents cluster by source shows the source-level interval beside the document-level one.

Every builder returns a `Claim`: its status (one of the constants below) and the sentence. The pages print
`claim.text` and never branch on numbers themselves.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Mapping, Sequence

RESOLVED, NOT_RESOLVED, NOT_MEASURED, EQUIVALENT = "resolved", "not resolved", "not measured", "equivalent"
PROVISIONAL = "provisional"     # computed on cells that still lack documents: shown, never read as a conclusion
PASSES, FAILS, STRADDLES = "passes", "fails", "passes on its point estimate only"
RESULT_BOX_WORDS = 120


@dataclass(frozen=True)
class Claim:
    """One stated conclusion: `status` (RESOLVED, NOT_RESOLVED, NOT_MEASURED, EQUIVALENT or a gate status) and
    the sentence that says it."""

    status: str
    text: str

    def __str__(self) -> str:
        return self.text


def _finite(x) -> bool:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(float(x))


def sig(x, digits: int = 3) -> str:
    """x to `digits` significant figures, without trailing zeros beyond them ('4.30', '0.0660', '1,530')."""
    if not _finite(x):
        return "–"
    x = float(x)
    if x == 0:
        return "0"
    decimals = max(digits - 1 - int(math.floor(math.log10(abs(x)))), 0)
    return f"{x:,.{decimals}f}"


def measured_of_held(incomplete: Mapping[str, Sequence[int]]) -> str:
    """'CODE 32 of 48, WEB 32 of 48' from {corpus: (documents measured, documents held)}: how every page and
    result box counts the cells that lack documents."""
    return ", ".join(f"{k} {a} of {b}" for k, (a, b) in incomplete.items())


def documents_per_corpus(counts: Mapping[str, Sequence[int]],
                         incomplete: Mapping[str, Mapping[str, Sequence[int]]] | None = None) -> str:
    """'SmolLM2 31-48; Gemma 16 documents per corpus' from {model: document counts of its cells}, with
    ' (provisional: SmolLM2 CODE 32 of 48, WEB 32 of 48)' for cells that lack documents their corpus holds."""
    def span(c):
        c = sorted(set(c))
        return f"{c[0]}" if len(c) == 1 else f"{c[0]}-{c[-1]}"
    out = "; ".join(f"{lab} {span(c)}" for lab, c in counts.items() if len(c)) + " documents per corpus"
    short = [f"{lab} {measured_of_held(per)}" for lab, per in (incomplete or {}).items() if per]
    return out + (f" (provisional: {'; '.join(short)})" if short else "")


def provisional(claim: Claim, incomplete: Mapping[str, Sequence[int]]) -> Claim:
    """A claim computed on cells that lack documents ({corpus: (measured, held)}): status PROVISIONAL and the
    counts in front, so no sentence reads as a conclusion before the data it was stated for are in."""
    return Claim(PROVISIONAL, f"Provisional ({measured_of_held(incomplete)} documents): {claim.text}")


def _has(ci) -> bool:
    return ci is not None and len(ci) == 2 and _finite(ci[0]) and _finite(ci[1])


def interval(value, ci=None, digits: int = 3) -> str:
    """'4.30 [3.55, 5.04]' (value and 95% interval at `digits` significant figures; the value alone without one)."""
    out = sig(value, digits)
    return f"{out} [{sig(ci[0], digits)}, {sig(ci[1], digits)}]" if _has(ci) else out


def excludes_zero(ci) -> bool:
    return _has(ci) and (ci[0] > 0 or ci[1] < 0)


def difference(what: str, a: str, b: str, diff, ci, *, family: str = "") -> Claim:
    """`what` of a minus that of b, with its interval (already at the page's multiplicity-controlled level;
    `family` says which, e.g. 'Holm over 3 pairs'). Resolved only when the interval excludes 0."""
    note = f" ({family})" if family else ""
    if not _finite(diff) or not _has(ci):
        return Claim(NOT_MEASURED, f"{what}, {a} against {b}: not measured (no interval).")
    if excludes_zero(ci):
        hi_lo = "higher" if diff > 0 else "lower"
        return Claim(RESOLVED, f"{what} is {hi_lo} for {a} than for {b}: difference {interval(diff, ci)}{note}.")
    return Claim(NOT_RESOLVED, f"{what} does not separate {a} from {b}: the difference {interval(diff, ci)} "
                               f"includes 0{note}.")


def pair_claims(what: str, pairs: Sequence[Mapping]) -> list[Claim]:
    """One `difference` claim per pair of docgrad.core.orderings.resolve_pairs (Holm): a pair is resolved only
    when Holm resolves it; its interval is at the level Holm tests it at."""
    k = len(pairs)
    out = []
    for p in pairs:
        family = f"Holm over {k} pairs, interval at {1 - p['level']:.1%}" if k > 1 else ""
        c = difference(what, p["a"], p["b"], p["diff"], p["ci"], family=family)
        if c.status == RESOLVED and not p["resolved"]:   # interval excludes 0 but an earlier Holm step failed
            c = Claim(NOT_RESOLVED, f"{what} does not separate {p['a']} from {p['b']} after Holm's step-down "
                                    f"(difference {interval(p['diff'], p['ci'])}, p = {sig(p['p'], 2)}).")
        out.append(c)
    return out


def equivalence(what: str, diff, ci, margin: float | None) -> Claim:
    """'No difference' only within a margin stated before the data: EQUIVALENT when the interval lies inside
    (-margin, +margin); RESOLVED (a difference) when it excludes 0; otherwise NOT_RESOLVED, which says what the
    data leave open."""
    if not _finite(diff) or not _has(ci):
        return Claim(NOT_MEASURED, f"{what}: not measured (no interval).")
    iv = interval(diff, ci)
    if margin is not None and -margin < ci[0] and ci[1] < margin:
        return Claim(EQUIVALENT, f"{what} is equivalent within the margin ±{sig(margin)} stated in advance: {iv}.")
    if excludes_zero(ci):
        return Claim(RESOLVED, f"{what} differs: {iv} excludes 0.")
    if margin is None:
        return Claim(NOT_RESOLVED, f"{what} is not resolved: {iv} includes 0, and with no margin stated in "
                                   "advance that is not evidence of no difference.")
    return Claim(NOT_RESOLVED, f"{what} is not resolved: {iv} includes 0 but reaches beyond the margin "
                               f"±{sig(margin)} stated in advance.")


def threshold_gate(what: str, point, ci, threshold: float, *, below: bool = True) -> Claim:
    """A gate decided on a point estimate (`point` < threshold passes when `below`), with its interval: PASSES
    or FAILS when the whole interval is on one side, STRADDLES when the point passes but the interval reaches
    the threshold (FAILS with the same note when the point fails)."""
    if not _finite(point):
        return Claim(NOT_MEASURED, f"{what}: not measured.")
    side = "<" if below else ">"
    passes = point < threshold if below else point > threshold
    iv = interval(point, ci)
    rule = f"{what} {side} {sig(threshold)}"
    if _has(ci) and ci[0] < threshold < ci[1]:
        if passes:
            return Claim(STRADDLES, f"{rule} passes on its point estimate only: {iv}, the interval straddles "
                                    f"{sig(threshold)}.")
        return Claim(FAILS, f"{rule} fails on its point estimate: {iv}, the interval straddles {sig(threshold)}.")
    return Claim(PASSES if passes else FAILS, f"{rule} {'passes' if passes else 'fails'}: {iv}.")


def against_published(what: str, ours, ours_ci, published: Mapping[str, tuple]) -> Claim:
    """Ours against published values {label: (value, ci or None)}: resolved (ours above or below) only when our
    interval excludes every published value and, where a published interval exists, does not overlap it."""
    if not _finite(ours) or not _has(ours_ci) or not published:
        return Claim(NOT_MEASURED, f"{what}: ours against the published values is not measured.")
    sides, parts = set(), []
    for label, (value, ci) in published.items():
        lo, hi = (ci if _has(ci) else (value, value))
        parts.append(f"{label} {interval(value, ci)}")
        sides.add("below" if ours_ci[1] < lo else "above" if ours_ci[0] > hi else "overlap")
    listed = ", ".join(parts)
    if sides == {"below"} or sides == {"above"}:
        side = sides.pop()
        return Claim(RESOLVED, f"{what} is {side} the published values: ours {interval(ours, ours_ci)} against "
                               f"{listed}.")
    return Claim(NOT_RESOLVED, f"{what} is not resolved against the published values: ours "
                               f"{interval(ours, ours_ci)} overlaps {listed}.")


def clustered_interval(value, doc_ci, source_ci, n_docs: int, n_sources: int) -> str:
    """The headline interval of a cell: the document-bootstrap one, and beside it the source-clustered one when
    documents share sources ('4.30 [3.55, 5.04] over 16 documents; over its 8 sources [1.75, 4.30]')."""
    out = f"{interval(value, doc_ci)} over {n_docs} documents"
    if n_sources < n_docs and _has(source_ci):
        out += f"; resampling its {n_sources} sources, [{sig(source_ci[0])}, {sig(source_ci[1])}]"
    return out


def effective_count(n: int, value, ci=None) -> tuple[float | None, list | None]:
    """n / value with its interval mapped through the same function: [n / hi, n / lo] (the map decreases, so the
    ends swap). How many independent chunks a block of n chunks with design effect R is worth. (None, None) when
    value is not positive; the interval None when it is missing or an end is not positive."""
    if not _finite(value) or value <= 0:
        return None, None
    ok = _has(ci) and ci[0] > 0 and ci[1] > 0
    return n / float(value), ([n / float(ci[1]), n / float(ci[0])] if ok else None)


def first_sentence(box: str) -> str:
    """The sentence a result box opens with (after '**Result.**'): the answer a practitioner can act on."""
    text = box.split("**Result.**", 1)[-1].split("\n", 1)[0].strip()
    return re.split(r"(?<=[.!?])\s+", text, maxsplit=1)[0]


def result_box(answer: Sequence[str], measured: str, caveat: str, limit: int = RESULT_BOX_WORDS) -> str:
    """The answer a page opens with, as a Markdown block quote: the answer lines (the first one a plain sentence a
    practitioner can act on, then the numbers), what was measured and the one caveat that matters. Refused
    (ValueError) beyond `limit` words, so a page's first screen stays short."""
    lines = ["**Result.** " + " ".join(answer), f"**Measured:** {measured}", f"**Caveat:** {caveat}"]
    words = sum(len(x.split()) for x in lines)
    if words > limit:
        raise ValueError(f"result box has {words} words, more than {limit}: shorten the answer or the caveat")
    return "\n>\n".join("> " + x for x in lines)


def claims_markdown(claims: Sequence[Claim | str]) -> str:
    """A bullet list of claims (or plain lines)."""
    return "\n".join(f"- {c}" for c in claims)
