"""What `docgrad measure` says about one corpus of your own, and its page (04e) says in the same words: one reading
(`read_measurement`) from which the printed lines, the page's result box, table, gates and verdict are all built,
so the command line and the page cannot disagree.

The window W. R and R_rel are read at 16K when both the corpus's and the control's spans reach it, else at the
longest window both reach (the shorter span): R_rel(W) = R_corpus(W) / R_control(W), the i-th document-bootstrap
draws of the two cells divided (results.stats.ratio_at). Gates G2 (the control named, at W) and the verdict are
the study's rules (core.gates) read at that W.

The decision. A batch of B tokens cut into W-token blocks of one document each has the gradient noise of about
B / R(W) tokens of shuffled chunks. Steps cost noise while the batch is below the critical batch of those blocks,
B_simple(W) = R(W) * B_simple(shuffled) (McCandlish et al. 2018: steps ~ 1 + B_simple / B).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from docgrad.core import gates
from docgrad.core.constants import HEADLINE_WINDOW
from docgrad.core.gates import window_name
from docgrad.models import result_model
from docgrad.presentation.evidence import interval, result_box, sig
from docgrad.presentation.regime import headline_note
from docgrad.results.regime import read_model_regime
from docgrad.results.format import parse_docs
from docgrad.results.stats import Analysis, CellEstimate, RRel, analyze, r_rel_at_span, ratio_at

REGIME_MODEL = "smollm2-135m"   # the model whose regimes page 04d measured
FEW_DOCUMENTS = 8        # fewer documents than this: the interval is rough and a few documents can carry R


def headline_window(e) -> int | None:
    """The window of a cell's headline R: 16K (HEADLINE_WINDOW) when its span reaches it, else the longest window
    its span allows (a corpus of your own with a shorter span); None without any."""
    if not e.R:
        return None
    return HEADLINE_WINDOW if HEADLINE_WINDOW in e.R else max(e.R)


@dataclass(frozen=True)
class Measurement:
    """One corpus of your own against its control under one model, read at one window (module docstring)."""

    label: str                          # the model, as the pages name it
    corpus: str
    control: str
    cell: CellEstimate | None
    control_cell: CellEstimate | None
    window: int | None                  # where R_rel is read (16K, or the span both cells reach); None: nowhere
    R_rel: float | None = None
    R_rel_ci: tuple = (None, None)
    why_no_R_rel: str = ""              # why R_rel is not computed, when it is not
    gates: dict = field(default_factory=dict)
    verdict: str = ""
    verdict_detail: tuple = ()

    @property
    def corpus_window(self) -> int | None:
        """The corpus's own window: W, or its headline window when the two cells share none."""
        return self.window or (headline_window(self.cell.all) if self.cell is not None else None)

    def R(self, name: str) -> tuple[float | None, tuple]:
        """(R(W), its interval) of the corpus or the control at the corpus's window."""
        c = self.cell if name == self.corpus else self.control_cell
        W = self.corpus_window
        if c is None or W is None or W not in c.all.R:
            return None, (None, None)
        return c.all.R[W], c.all.interval("R", W)


def measured_analysis(results_dir, model: str, corpus: str, control: str, chunk: int, documents: str,
                      resamples: int, seed: int) -> Analysis:
    """The analysis `docgrad measure` prints and page 04e shows: the document bootstrap of the two cells of
    `model` in `results_dir` (computed afresh, with every cell's draws at every window: R_rel at a span shorter
    than 16K divides them; the pages' on-disk cache keeps R(16K)'s only)."""
    rm = result_model(model)
    return analyze(Path(results_dir), resamples=resamples, seed=seed, docs=parse_docs(documents)).subset(
        rm.model, rm.revision, chunk, [corpus, control])


def read_measurement(a: Analysis, label: str, corpus: str, control: str) -> Measurement:
    """The reading of `corpus` against `control` in the analysis `a` (one model's cells): the window both reach,
    R_rel there with its interval, the gates (G2 on the named control at that window) and the verdict."""
    c, k = a.cell(corpus), a.cell(control)
    if c is None or k is None or not c.all.R or not k.all.R:
        return Measurement(label, corpus, control, c, k, None, why_no_R_rel="it needs R of both cells",
                           verdict="INCOMPLETE (" + ", ".join(f"no {n} cell" for n, x in ((corpus, c), (control, k))
                                                              if x is None or not x.all.R) + ")")
    if HEADLINE_WINDOW in c.all.R and HEADLINE_WINDOW in k.all.R:
        W = HEADLINE_WINDOW
        val, ci = ratio_at(c, k, W)
        why = "" if val is not None else f"the {control} cell's R(16K) is 0 or undefined"
    else:
        W, val, ci = r_rel_at_span(c, k)
        short = min(max(c.all.R), max(k.all.R))
        why = ("" if val is not None else
               f"the two cells have no R at one window: the shorter span is {short} tokens" if W is None
               else f"the {control} cell's R({window_name(W)}) is 0 or undefined")
    at = W or headline_window(c.all)          # without a common window, each gate at the corpus's own
    g = {"G1": gates.gate_g1([c, k]), "G2": gates.gate_g2([k], control, W or headline_window(k.all)),
         "G3": gates.gate_g3([c, k])}
    rows = [RRel(c.model, c.revision, corpus, c.chunk, val, tuple(ci), c.n_docs, k.n_docs)] if val is not None else []
    verdict, detail = gates.verdict(g, rows, [c] if W is None else [c, k], at)
    if W is None:                              # nothing to compare the corpus with: not a measured R_rel
        verdict = f"INCOMPLETE (no R_rel: {why}){'; ' + verdict if not verdict.startswith('MEASURED') else ''}"
    return Measurement(label, corpus, control, c, k, W, val, tuple(ci), why, g, verdict, tuple(detail))


def _r_line(m: Measurement, name: str) -> str:
    c = m.cell if name == m.corpus else m.control_cell
    if c is None:
        return f"{name} under {m.label}: no cell (nothing measured)"
    W = headline_window(c.all)
    if W is None:
        return f"{name} under {m.label}: no R (a span of one chunk has no window)"
    span = "" if W == HEADLINE_WINDOW else f" (R at the span: the corpus's span is {W} tokens, shorter than 16K)"
    return (f"{name} under {m.label}: R({window_name(W)}) = {interval(c.all.R[W], c.all.interval('R', W))} "
            f"over {c.n_docs} documents{span}: a batch of {window_name(W)}-token document blocks "
            f"has the gradient noise of 1/R as many independently drawn chunks")


def r_rel_line(m: Measurement, short: bool = False) -> str:
    """R_rel at the measurement's window, with its interval, or why it is not computed (short: without saying
    why the window is shorter than 16K)."""
    name = f"R_rel({m.corpus} / {m.control})"
    if m.R_rel is None:
        return f"{name}: not computed ({m.why_no_R_rel}" + ("; R_rel divides R at one window)"
                                                           if "one window" in m.why_no_R_rel else ")")
    if m.window == HEADLINE_WINDOW:
        return f"{name} = {interval(m.R_rel, m.R_rel_ci)}"
    return (f"{name} at {window_name(m.window)} = {interval(m.R_rel, m.R_rel_ci)}" + (
        "" if short else f": both cells read at the longest window both spans reach, {m.window} tokens (the "
        "study's R_rel is at 16K)"))


def caution_lines(m: Measurement) -> list[str]:
    """What a thin sample does to the numbers, said beside them: fewer than FEW_DOCUMENTS documents; an interval
    of R reaching below 1 (no more noise than shuffled chunks is then not excluded); an interval of B_simple or of
    the mean gradient's squared norm S_cross reaching 0 or below (neither can be negative). The control's R near 1
    is what gate G2 asks of it, not a caution."""
    out = []
    for c in (m.cell, m.control_cell):
        if c is None:
            continue
        if c.n_docs < FEW_DOCUMENTS:
            out.append(f"Caution: {c.corpus} has {c.n_docs} documents (fewer than {FEW_DOCUMENTS}): its interval is "
                       f"rough and one or two documents can carry its R; measure more (e.g. --docs 0:16)")
        R, ci = m.R(c.corpus)
        if c is m.cell and ci[0] is not None and ci[0] < 1:      # the control's R near 1 is gate G2's expectation
            out.append(f"Caution: {c.corpus}'s R({window_name(m.corpus_window)}) interval reaches below 1 "
                       f"({sig(ci[0])}): these documents may add no gradient noise beyond shuffled chunks")
        lo = c.all.interval("S_cross")[0]
        if lo is not None and lo <= 0:
            out.append(f"Caution: {c.corpus}'s mean-gradient interval (S_cross) reaches {sig(lo)}: its B_simple is "
                       "not resolved (gate G3)")
    return out


def decision_sentence(m: Measurement) -> str:
    """What the measured R means for a batch of these documents (module docstring): B/R shuffled tokens, and the
    critical batch R(W) * B_simple(shuffled) below which that costs steps; said without B_simple where the mean
    gradient is not resolved (its interval reaches 0)."""
    R, ci = m.R(m.corpus)
    W = m.corpus_window
    if R is None or not np.isfinite(R):
        return f"No decision for {m.corpus}: its R is not measured."
    head = (f"A batch of B tokens in {window_name(W)}-token blocks of {m.corpus} documents carries the "
            f"gradient noise of about B/{sig(R, 2)} shuffled tokens (R({window_name(W)}) = {interval(R, ci)})")
    e = m.cell.all
    lo = e.interval("S_cross")[0]
    if not (np.isfinite(e.B_simple_shuf_tokens) and e.B_simple_shuf_tokens > 0) or (lo is not None and lo <= 0):
        return head + "; where that costs steps is not known here: the mean gradient is not resolved (gate G3)."
    crit = R * e.B_simple_shuf_tokens
    return (head + f". Below a batch of about {rounded(crit)} tokens (B_simple of such blocks) that noise costs "
            "steps: put more documents in each batch; well above it, little.")


def rounded(x: float, digits: int = 2) -> str:
    """x rounded to `digits` significant figures, written whole ('11,000' for 10,813): a size to act on."""
    return f"{float(f'{x:.{digits}g}'):,.0f}" if abs(x) >= 10 ** (digits - 1) else sig(x, digits)


def measurement_lines(a: Analysis, label: str, corpus: str, control: str) -> list[str]:
    """What `docgrad measure` prints (read_measurement): R at the headline window of the corpus and of the
    control, each with its 95% document-bootstrap interval; R_rel at the window both reach; the verdict; the
    cautions of a thin sample; the decision sentence. No ordering of corpora is stated (page 04c's rule)."""
    m = read_measurement(a, label, corpus, control)
    return [_r_line(m, corpus), _r_line(m, control), r_rel_line(m), f"Verdict: {m.verdict}",
            *caution_lines(m), decision_sentence(m)]


def measured_line(m: Measurement) -> str:
    c = m.cell
    if c is None:
        return f"nothing of {m.corpus} under {m.label} yet"
    return (f"{c.n_docs} {m.corpus} documents ({c.chunks_per_doc} chunks of {c.chunk} tokens) under {m.label}, "
            f"against {m.control_cell.n_docs if m.control_cell else 0} {m.control} documents.")


def measurement_box(m: Measurement, regime: str) -> str:
    """The page's result box: the decision sentence, R_rel and the verdict (as measure printed them), what was
    measured, and the first caution (or else the regime finding) as its caveat."""
    cautions = caution_lines(m)
    more = f" ({len(cautions) - 1} more cautions below.)" if len(cautions) > 1 else ""
    caveat = (cautions[0].removeprefix("Caution: ") + "." + more if cautions else
              regime or "one model, one chunk length; R is a property of these documents under this model.")
    answer = [decision_sentence(m), f"{r_rel_line(m, short=True)}; verdict {m.verdict}."]
    try:
        return result_box(answer, measured_line(m), caveat)
    except ValueError:                  # past the box's words: the caveat points to where it is said in full
        return result_box(answer, measured_line(m), "cautions and the model's regime are below the box; read "
                          "them before acting on the numbers.")


def measurement_frame(m: Measurement) -> pd.DataFrame:
    """The corpus and its control at the measurement's window: documents, R(W) with its interval, rho_long,
    sigma^2 and B_simple for shuffled chunks and for W-token blocks."""
    W = m.corpus_window
    rows = []
    for name, c in ((m.corpus, m.cell), (m.control, m.control_cell)):
        if c is None:
            rows.append({"corpus": name, "documents": 0})
            continue
        R, (lo, hi) = m.R(name)
        e = c.all
        rows.append({"corpus": name, "documents": c.n_docs, "W_tokens": W, "R": R, "R_lo": lo, "R_hi": hi,
                     "rho_long": e.rho_long, "sigma2": e.sigma2, "B_simple_shuf_tokens": e.B_simple_shuf_tokens,
                     "B_simple_blocks_tokens": None if R is None else R * e.B_simple_shuf_tokens})
    return pd.DataFrame(rows)


def gate_rows(m: Measurement) -> pd.DataFrame:
    """The gates as the measurement read them (G2 named for its control, at its window)."""
    return pd.DataFrame([{"gate": k, "status": g["status"], "measured": g["summary"]} for k, g in m.gates.items()])


def ran_as(results_dir, cell: CellEstimate | None) -> str:
    """The regime the model ran in, from the first result file's json: start token or not, arithmetic, and whether
    its weights are a de-quantised GGUF file (the study's models are 4-bit)."""
    if cell is None or not cell.files:
        return "regime unknown (no result file)"
    path = Path(results_dir) / cell.files[0]
    path = path if path.exists() else Path(cell.files[0])
    try:
        meta = json.loads(path.with_suffix(".json").read_text())
    except (OSError, ValueError):
        return "regime unknown (its result json is not readable)"
    a, pin = meta.get("args", {}), meta.get("pin", {})
    if a.get("start_token") is not None:
        start = f"token {a['start_token']} ahead of every chunk"
    elif a.get("context") == "standalone-bos" or pin.get("bos") and not a.get("no_start_token"):
        start = "the model's <bos> ahead of every chunk"
    else:
        start = "no start token"
    weights = (f"weights de-quantised from {pin['gguf_file']}" if pin.get("gguf_file") else
               "weights as stored" if pin.get("local") else "weights at a pinned hub commit")
    return f"{start}, {a.get('dtype') or 'float32'}, {weights}"


def model_regime_lines(model: str, label: str, ran: str, study_results_dir, regime_dir) -> list[str]:
    """regime_lines, with page 04d's finding read from the study's folders (wherever the measurement's --out is)
    when `model` is the model page 04d measured."""
    studied = result_model(model) == result_model(REGIME_MODEL)
    note = headline_note(read_model_regime(study_results_dir, regime_dir)[1], label) if studied else ""
    return regime_lines(label, ran, note, studied)


def regime_lines(label: str, ran: str, study_note: str, studied: bool) -> list[str]:
    """The regime on a measurement page: how the model ran, and what page 04d found for it (the study's default
    model: `study_note`, regime.headline_note of the study's regime folder) or that nothing is known (any other)."""
    out = [f"{label} ran with {ran}."]
    if studied:
        out.append(f"In other regimes (page 04d): {study_note}." if study_note else
                   "Page 04d measured this model in other regimes and decides no change of its R.")
    else:
        out.append(f"Page 04d's regime checks (a start token ahead of every chunk, the weights' rounding, causal "
                   f"context) are of SmolLM2-135M only: whether they move {label}'s R is not known.")
    return out
