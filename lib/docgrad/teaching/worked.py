"""Worked solutions and 3-significant-figure tables for the teaching pages (01, 01a, 01b, 01c, 01d).

A worked solution is the algebra a student would write: the general formula, the exercise's numbers put in,
the result. Each function here returns a `Worked`: `markdown` (a few lines with LaTeX; every number in it is
formatted from the inputs or computed here, never typed) and `values` (the results, which the page checks
against the general library function and the tests pin). `sig` and `sig_table` format computed numbers for
the pages' prose and tables to three significant figures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from docgrad.teaching.reduction import ReductionError, check_int_list

SIG_DIGITS = 3


def sig(x, digits: int = SIG_DIGITS) -> str:
    """A number as text with `digits` significant figures; integers (and bools) stay exact, lists element-wise,
    None and NaN as an en dash."""
    if x is None:
        return "–"
    if isinstance(x, (bool, np.bool_)):
        return str(bool(x))
    if isinstance(x, (list, tuple, np.ndarray)):
        return "[" + ", ".join(sig(v, digits) for v in x) + "]"
    if isinstance(x, (int, np.integer)):
        return f"{int(x):,}"
    if isinstance(x, str):
        return x
    x = float(x)
    if math.isnan(x):
        return "–"
    if x == 0:
        return "0"
    if x == int(x) and abs(x) < 1e15:                      # an exact whole number (a count) stays exact
        return f"{int(x):,}"
    r = float(f"{x:.{digits}g}")
    if 10 ** (digits - 1) <= abs(r) < 1e15:                 # 12345.6 -> 12,300 and 999.9 -> 1,000, not 1e+03
        return f"{int(r):,}"
    return f"{x:.{digits}g}"


def sig_table(rows, columns=None, index=None, digits: int = SIG_DIGITS):
    """A pandas DataFrame of `rows` (a list of dicts, or a DataFrame) with every number written by `sig`.
    `columns` maps source keys to displayed names (order kept); `index` names the column to index by."""
    import pandas as pd

    df = rows.reset_index() if isinstance(rows, pd.DataFrame) and index is not None and index not in rows \
        else pd.DataFrame(rows)
    if columns is not None:
        keep = list(columns) + ([index] if index is not None and index not in columns else [])
        df = df[keep]
    out = df.apply(lambda col: col.map(lambda v: sig(v, digits)) if col.name != index else col)
    if columns is not None:
        out = out.rename(columns=columns)
    if index is not None:
        out = out.set_index(columns.get(index, index) if columns is not None else index)
        out.index.name = None
    return out


@dataclass(frozen=True)
class Worked:
    """A worked solution: Markdown with LaTeX, and the values it arrives at."""

    markdown: str
    values: dict = field(default_factory=dict)


def frac(num, den) -> str:
    """LaTeX \\frac{num}{den} of two numbers as given (integers stay integers)."""
    def plain(v):
        return str(int(v)) if float(v) == int(v) else sig(v, 6)

    return rf"\frac{{{plain(num)}}}{{{plain(den)}}}"


def _positive_counts(name: str, counts) -> list[int]:
    counts = check_int_list(name, counts)
    if any(c <= 0 for c in counts):
        raise ReductionError(f"{name} must all be positive, got {counts}")
    return counts


# --- pages 01 and 01a ---------------------------------------------------------------------------------------

def optima(n_a: int, n_b: int) -> Worked:
    """Document A: n_a positions labelled 1; B: n_b labelled 0. Optima of the token and document means."""
    n_a, n_b = _positive_counts("lengths", [n_a, n_b])
    tok = n_a / (n_a + n_b)
    doc = (n_a * 1 / (2 * n_a)) / (n_a / (2 * n_a) + n_b / (2 * n_b))
    md = (rf"Every objective is $\sum_j w_j \ell_j$, whose gradient $\sum_j w_j (p - y_j)$ vanishes at "
          rf"$p^* = \sum_j w_j y_j / \sum_j w_j$; only A's positions have $y = 1$."
          "\n\n"
          rf"- Token mean, $w_j = 1/(n_A + n_B)$: $p^* = \dfrac{{n_A}}{{n_A + n_B}} = {frac(n_a, n_a + n_b)} "
          rf"= {sig(tok)}$."
          "\n"
          rf"- Document mean, $w_j = 1/(2 n_i)$: A's positions carry $n_A \cdot \frac{{1}}{{2 n_A}} = \frac12$ of "
          rf"a total weight 1, so $p^* = {sig(doc)}$ whatever the lengths.")
    return Worked(md, {"token_mean": tok, "document_mean": doc})


def padding_factor(n_a: int, n_b: int, pad: int) -> Worked:
    """A (n_a positions, label 1) padded with `pad` positions; B (n_b, label 0). The numerator-only mask's factor
    and the optimum when padding counts as label-0 data."""
    n_a, n_b = _positive_counts("lengths", [n_a, n_b])
    pad = check_int_list("padding", [pad])[0]
    n_valid, n_all = n_a + n_b, n_a + n_b + pad
    factor, p = n_valid / n_all, n_a / n_all
    md = (rf"- Mask in the numerator only: $\dfrac{{\sum m\ell}}{{N_\text{{pad}}}} = "
          rf"\dfrac{{\sum m}}{{N_\text{{pad}}}} \cdot \dfrac{{\sum m \ell}}{{\sum m}}$, the token mean times "
          rf"${frac(n_valid, n_all)} = {sig(factor)}$."
          "\n"
          rf"- Padding as label-0 data: every one of the $N_\text{{pad}} = {n_all}$ positions weighs the same and "
          rf"only A's {n_a} have $y = 1$, so $p^* = {frac(n_a, n_all)} = {sig(p)}$.")
    return Worked(md, {"factor": factor, "padding_as_class0_p": p})


def pad_eos_targets(words) -> Worked:
    """Texts of these numbers of tokens, each followed by EOS and right-padded into one batch with the EOS token as
    pad token: the next-token targets by position, and what is left when the mask is taken from the token id."""
    words = _positive_counts("words", words)
    n = [w + 1 for w in words]                                  # each text's tokens and its EOS
    by_position, lost = sum(v - 1 for v in n), len(words)
    by_id = by_position - lost
    md = (rf"A row of $n$ tokens gives $n - 1$ next-token targets, the last one its EOS: "
          rf"${' + '.join(str(v - 1) for v in n)} = {by_position}$ by position (the padding adds none)."
          "\n\n"
          rf"- A mask taken from the token id cannot tell a real EOS from padding: it drops every text's EOS target "
          rf"with the padding, ${by_position} - {lost} = {by_id}$ targets left, and the model is never trained to stop."
          "\n"
          rf"- A mask taken from the position (the collator knows which positions it added) keeps all {by_position}.")
    return Worked(md, {"targets_by_position": by_position, "targets_masked_by_id": by_id, "real_eos_lost": lost})


def microbatch_weights(counts, unit: str = "microbatch", size: str = "K", index: str = "k") -> Worked:
    """Average of the `unit` means (K microbatches, or W data-parallel ranks with size "W" and index "r") against
    the token mean: each unit's weight, the per-target weight ratio and the total-variation distance between the
    two weightings (half the summed absolute difference of the weights: 0 when they agree, 1 when disjoint)."""
    counts = _positive_counts("counts", counts)
    K, N = len(counts), sum(counts)
    avg, tok = [1 / K] * K, [c / N for c in counts]
    ratio = max(counts) / min(counts)
    tv = 0.5 * sum(abs(a - t) for a, t in zip(avg, tok))
    terms = " + ".join(rf"\left|{sig(a)} - {sig(t)}\right|" for a, t in zip(avg, tok))
    md = (rf"- Average of means: each {unit} weighs $1/{size} = {sig(avg[0])}$; token mean: $n_{index}/N$ = "
          + ", ".join(f"${frac(c, N)}$" for c in counts) + "."
          "\n"
          rf"- A target of {unit} ${index}$ weighs $\dfrac{{1}}{{{size}\,n_{index}}}$ under the average, so a target "
          rf"of the smallest {unit} weighs $\dfrac{{n_\text{{max}}}}{{n_\text{{min}}}} = {frac(max(counts), min(counts))} "
          rf"= {sig(ratio)}$ times one of the largest."
          "\n"
          rf"- Total variation $\tfrac12 \sum_{index} |1/{size} - n_{index}/N| = \tfrac12({terms}) = {sig(tv)}$.")
    return Worked(md, {"averaged": avg, "token_mean": tok, "per_target_weight_ratio": ratio,
                       "total_variation": tv})


def target_count(n: int, q: int) -> Worked:
    """Next-token targets of an n-token document whose first q tokens (a prompt) are labelled -100."""
    n, q = check_int_list("n, q", [n, q])
    if n < 2 or not 0 <= q <= n:
        raise ReductionError(f"need n >= 2 and 0 <= q <= n, got n = {n}, q = {q}")
    with_prompt, without = n - max(q, 1), n - 1
    md = (rf"Position $t$ predicts token $t+1$, so the $n$ tokens give $n - 1$ targets, and the $q$ prompt labels "
          rf"remove the targets at tokens $2, \dots, q$ (token 1 never was one): $n - q$ for $q \ge 1$."
          "\n\n"
          rf"- With the prompt: ${n} - {q} = {with_prompt}$; without: ${n} - 1 = {without}$.")
    return Worked(md, {"with_prompt": with_prompt, "without_prompt": without})


def n_eff_documents(lengths) -> Worked:
    """Kish's n_eff of the token mean (equal weights: n) and of the document mean (D^2 / sum 1/n_i)."""
    n = _positive_counts("lengths", lengths)
    D, N = len(n), sum(n)
    doc = D ** 2 / sum(1 / v for v in n)
    inv = " + ".join(frac(1, v) for v in n)
    md = (rf"$n_\text{{eff}} = (\sum w)^2 / \sum w^2$."
          "\n\n"
          rf"- Token mean: equal weights, $n_\text{{eff}} = n = {N}$."
          "\n"
          rf"- Document mean: $w = \dfrac{{1}}{{D\,n_i}}$, so $n_\text{{eff}} = \dfrac{{D^2}}{{\sum_i 1/n_i}} = "
          rf"\dfrac{{{D ** 2}}}{{{inv}}} = {sig(doc)}$: the short documents dominate.")
    return Worked(md, {"token_mean": float(N), "document_mean": doc})


# --- page 01b ------------------------------------------------------------------------------------------------

def rank_weights(counts) -> Worked:
    """W ranks with n_r targets, each back-propagating its own token mean, averaged by DDP: the microbatch
    weights again, and the factor transformers multiplies rank 0's summed loss by (W / N)."""
    base = microbatch_weights(counts, unit="rank", size="W", index="r")
    counts = _positive_counts("counts", counts)
    W, N = len(counts), sum(counts)
    md = (base.markdown + "\n"
          + rf"- Rank 0's loss must be $\dfrac{{S_0}}{{N}} \cdot W$ (DDP divides by $W$ again): "
            rf"$S_0 \cdot {frac(W, N)} = S_0 \cdot {sig(W / N)}$.")
    return Worked(md, {**base.values, "rank0_loss_factor": W / N})


def adam_eps(g: float, c: float, eps: float) -> Worked:
    """Adam's step on a coordinate with a constant gradient g, the loss scaled by c: after bias correction
    m/sqrt(v) = g exactly, so the step is lr g / (g + eps) unscaled and lr c g / (c g + eps) = lr g / (g + eps/c)
    scaled. Returns the ratio of the two steps and SGD's ratio c."""
    g, c, eps = float(g), float(c), float(eps)
    if g <= 0 or c <= 0 or eps <= 0:
        raise ReductionError("g, c and eps must be positive")
    plain, scaled = g / (g + eps), g / (g + eps / c)
    ratio = scaled / plain
    md = (rf"With a constant gradient, Adam's bias-corrected $\hat m = g$ and $\sqrt{{\hat v}} = |g|$, so the step is "
          rf"$\mathrm{{lr}}\,\dfrac{{g}}{{g + \varepsilon}}$; scaling the loss by $c$ gives "
          rf"$\mathrm{{lr}}\,\dfrac{{cg}}{{cg + \varepsilon}} = \mathrm{{lr}}\,\dfrac{{g}}{{g + \varepsilon/c}}$."
          "\n\n"
          rf"- $\varepsilon/c = {sig(eps / c)}$, the size of $g = {sig(g)}$: the step is "
          rf"$\dfrac{{g}}{{g + \varepsilon/c}} = {sig(scaled)}$ of lr instead of "
          rf"$\dfrac{{g}}{{g + \varepsilon}} = {sig(plain, 6)}$: a ratio of ${sig(ratio, 5)}$."
          "\n"
          rf"- SGD's step $\mathrm{{lr}}\,c\,g$ is $c = {sig(c)}$ times as long.")
    return Worked(md, {"step_ratio": ratio, "sgd_step_ratio": c})


# --- page 01c ------------------------------------------------------------------------------------------------

def packing(lengths) -> Worked:
    """One packed row of D documents of n_i = `lengths[i]` tokens, each followed by EOS: its targets, the boundary
    targets, what DataCollatorWithFlattening leaves, and each document's weight under the token mean and the
    per-document mean over those."""
    n = _positive_counts("lengths", lengths)
    D = len(n)
    T = sum(n) + D
    left = T - D
    tok = [v / left for v in n]
    md = (rf"- Tokens: $T = \sum_i (n_i + 1) = {T}$; targets $T - 1 = {T - 1}$, of which $D - 1 = {D - 1}$ are a "
          rf"document's first token predicted across a boundary; dropping them leaves $T - D = {left}$ "
          rf"($n_i$ per document: its $n_i - 1$ tokens after the first, and its EOS)."
          "\n"
          rf"- Token mean: document $i$ weighs $n_i / (T - D)$ = " + ", ".join(f"${frac(v, left)}$" for v in n)
          + "."
          "\n"
          rf"- Per-document mean: $1/D = {frac(1, D)}$ each, so a target of the shortest document weighs "
          rf"$\dfrac{{n_\text{{max}}}}{{n_\text{{min}}}} = {sig(max(n) / min(n))}$ times one of the longest.")
    return Worked(md, {"counts": {"tokens": T, "targets": T - 1, "boundary_targets": D - 1,
                                  "targets_without_boundaries": left},
                       "token_mean_weights": tok, "per_document_weights": [1 / D] * D,
                       "short_over_long_per_target": max(n) / min(n)})


def class_weight_mean(logits, targets, weight, ignore_index: int = -100) -> Worked:
    """cross_entropy's weighted mean written out: each non-ignored row's -log p[y] times w[y], over the sum of
    the targets' weights."""
    x = np.asarray(logits, dtype=np.float64)
    y = [int(t) for t in targets]
    w = [float(v) for v in weight]
    keep = [i for i, t in enumerate(y) if t != ignore_index]
    z = x - x.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    nll = {i: float(-logp[i, y[i]]) for i in keep}
    den = sum(w[y[i]] for i in keep)
    num = sum(w[y[i]] * nll[i] for i in keep)
    md = (rf"$\text{{mean}} = \dfrac{{\sum_i w[y_i]\,(-\log p_i[y_i])}}{{\sum_i w[y_i]}}$ over the rows whose target is "
          rf"not {ignore_index}."
          "\n\n"
          rf"- Denominator: " + " + ".join(f"$w[{y[i]}]$" for i in keep) + " = "
          + " + ".join(sig(w[y[i]]) for i in keep) + rf" $= {sig(den)}$, not the {len(keep)} targets."
          "\n"
          rf"- Numerator: " + " + ".join(rf"${sig(w[y[i]])} \cdot {sig(nll[i])}$" for i in keep)
          + rf" $= {sig(num)}$; mean ${sig(num)} / {sig(den)} = {sig(num / den)}$.")
    return Worked(md, {"denominator": den, "numerator": num, "loss": num / den, "n_valid": len(keep)})
