"""The model regime read from cells of the same documents: a start token, and SIMEX extrapolation to unrounded
weights. Definitions: docs/methods.md#model-regime.

Every regime of a corpus measured the same documents (the same spans: their sha256 must agree), so all its cells
are resampled with the same document counts c^(i) (paired document bootstrap, the generator of
docgrad.results.paired):

  start token:  delta^(i) = R_bos(c^(i)) / R_0(c^(i)) - 1;
  SIMEX:        delta^(i) = R_-1(c^(i)) / R_0(c^(i)) - 1,  R_-1 = extrapolate(R_0, R_1, R_2) (quadratic).

regime_reading puts Holm over the corpora of one question and decides each with core.simex_fit.regime_decision;
read_question does it for a whole question (QUESTIONS) once every cell of it is there, and reads nothing before.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from docgrad.core import bootstrap as bs
from docgrad.core.constants import ALL, BOOTSTRAP_SEED, HEADLINE_WINDOW, RESAMPLES
from docgrad.core.decomposition import window_column
from docgrad.core.orderings import resolve_differences
from docgrad.core.simex_fit import LAMBDAS, REGIME_MARGIN, extrapolant_weights, extrapolate, regime_decision
from docgrad.models import get_offline, result_model
from docgrad.results import regime_parts as RP
from docgrad.results import rounding as RD
from docgrad.results.cells import Cell, NoResultsError, load_cells
from docgrad.results.format import ResultFileError, result_stem
from docgrad.results.paired import check_same_documents, paired_counts, paired_rng, span_hashes

STATISTICS = ("R", "rho_long", "mean_gradient_share", "B_simple_tokens")

START_TOKEN, ROUNDING = "start token", "rounding"
AS_LOADED = ""
# The cells each question needs, per corpus, in the order the change is computed (docs/methods.md#model-regime):
# the model as loaded first; SIMEX's cells at lambda = 0, 1, 2.
QUESTIONS = {
    START_TOKEN: {c: (AS_LOADED, "bos0") for c in ("BOOKS", "CODE", "PAPERS", "WEB")},
    ROUNDING: {c: (AS_LOADED, "simex1-s1", "simex2-s2") for c in ("CODE", "WEB")},
}
QUESTION_DOCS = (0, 16)


def paired_statistics(cells: list[Cell], resamples: int, seed: int, window: int = HEADLINE_WINDOW) -> dict:
    """Each statistic of STATISTICS for every cell on the same document counts: arrays (1 + resamples, cells),
    row 0 the point estimate (every document once), rows 1.. the paired draws."""
    counts = paired_counts(cells, resamples, seed)
    out = {k: np.zeros((len(counts), len(cells))) for k in STATISTICS}
    for j, c in enumerate(cells):
        s = c.sums[ALL]
        e = bs.estimate(s, counts, c.chunk)
        out["R"][:, j] = e["R"][:, window_column(s, c.chunk, window)]
        out["rho_long"][:, j] = e["rho_long"]
        out["mean_gradient_share"][:, j] = e["S_cross"] / (e["sigma2"] + e["S_cross"])
        out["B_simple_tokens"][:, j] = e["B_simple_shuf_tokens"]
    return out


def regime_curves(reading: dict, found: dict, resamples: int, seed: int, alpha: float = 0.05) -> dict:
    """R(W) at every window and rho by lag of each cell of a complete question (read_question), each with its
    (1 - alpha) percentile interval over the paired draws of its corpus (the draws the decision used):
    {"R": rows (corpus, regime, W tokens, value, lo, hi), "rho": rows (corpus, regime, lag tokens, ...)}.
    Described, not decided (docs/methods.md#model-regime); an incomplete question has no curves ({})."""
    if not reading["complete"]:
        return {}
    rows = {"R": [], "rho": []}
    for corpus, regimes in QUESTIONS[reading["question"]].items():
        cells = [found[(corpus, r)] for r in regimes]
        counts = paired_counts(cells, resamples, seed)
        for regime, c in zip(regimes, cells):
            e = bs.estimate(c.sums[ALL], counts, c.chunk)
            for key, x in (("R", c.sums[ALL].sizes * c.chunk), ("rho", np.arange(1, e["rho"].shape[1] + 1) * c.chunk)):
                for j, at in enumerate(x):
                    lo, hi = bs.percentile_ci(e[key][1:, j], 1 - alpha)
                    rows[key].append({"corpus": corpus, "regime": regime or "as loaded", "tokens": int(at),
                                      "value": float(e[key][0, j]), "lo": lo, "hi": hi})
    return rows


SIMEX_GRID = np.linspace(-1.0, 2.0, 31)


def simex_curves(reading: dict, found: dict, resamples: int, seed: int, statistics=("R", "mean_gradient_share"),
                 alpha: float = 0.05, grid=SIMEX_GRID) -> list[dict]:
    """The SIMEX curves of a complete rounding question (read_question): per corpus and statistic, theta measured
    at lambda = 0, 1, 2 and each extrapolant's fitted curve on `grid` (lambda = -1: unrounded weights), every point
    with its (1 - alpha) percentile interval over the paired draws the decision used (the curve is fitted per
    draw). Rows: corpus, statistic, kind ('measured', 'quadratic', 'linear'), lambda, value, lo, hi. Described, not
    decided; any other reading gives []."""
    if reading["question"] != ROUNDING or not reading["complete"]:
        return []
    rows = []
    for corpus, regimes in QUESTIONS[ROUNDING].items():
        st = paired_statistics([found[(corpus, r)] for r in regimes], resamples, seed)
        for k in statistics:
            curves = [("measured", np.array(LAMBDAS), st[k])]
            curves += [(m, grid, st[k] @ extrapolant_weights(grid, m).T) for m in ("quadratic", "linear")]
            for kind, lams, theta in curves:
                for j, lam in enumerate(lams):
                    lo, hi = bs.percentile_ci(theta[1:, j], 1 - alpha)
                    rows.append({"corpus": corpus, "statistic": k, "kind": kind, "lambda": float(lam),
                                 "value": float(theta[0, j]), "lo": lo, "hi": hi})
    return rows


# A second, independent set of SIMEX noise draws (lambda = 1, 2), described only: docs/methods.md#model-regime,
# the paragraph added on 2026-12-06.
SECOND_DRAWS = {"WEB": ("simex1-s3", "simex2-s4")}
FIRST_SET, SECOND_SET, AVERAGED = "seeds 1, 2 (decided)", "seeds 3, 4", "average of both"


def second_draw_rows(found: dict, resamples: int, seed: int, alpha: float = 0.05) -> list[dict]:
    """R(16K) at lambda = 1, 2 and its quadratic extrapolant's change for each set of noise draws of a corpus of
    SECOND_DRAWS whose five cells (lambda 0; 1 and 2 of each set) are all in `found`: the first set (the decided
    one), the second, and the average of the two draws at each lambda (Cook & Stefanski's average over draws).
    All on the same paired document counts; rows: corpus, draws, R at lambda 1 and 2, R(-1), change, and the
    change's (1 - alpha) percentile interval. Described, not decided; a corpus with a cell missing gives no rows."""
    rows = []
    for corpus, second in SECOND_DRAWS.items():
        keys = [(corpus, r) for r in (*QUESTIONS[ROUNDING][corpus], *second)]
        if not all(k in found for k in keys):
            continue
        R = paired_statistics([found[k] for k in keys], resamples, seed)["R"]   # lambda 0, 1, 2, 1', 2'
        sets = {FIRST_SET: R[:, [0, 1, 2]], SECOND_SET: R[:, [0, 3, 4]],
                AVERAGED: np.stack([R[:, 0], (R[:, 1] + R[:, 3]) / 2, (R[:, 2] + R[:, 4]) / 2], axis=1)}
        for name, theta in sets.items():
            unrounded = extrapolate(theta)
            point, draws = relative_change(theta[:, 0], unrounded)
            rows.append({"corpus": corpus, "draws": name, "R_lambda1": float(theta[0, 1]),
                         "R_lambda2": float(theta[0, 2]), "R_unrounded": float(unrounded[0]),
                         "change": point, "ci": bs.percentile_ci(draws, 1 - alpha)})
    return rows


def relative_change(before: np.ndarray, after: np.ndarray) -> tuple[float, np.ndarray]:
    """after / before - 1: (point, draws) from arrays whose row 0 is the point estimate."""
    with np.errstate(divide="ignore", invalid="ignore"):
        d = after / before - 1.0
    return float(d[0]), d[1:]


def start_token_change(base: Cell, with_token: Cell, resamples: int, seed: int, statistic: str = "R") -> tuple:
    """delta = R_bos / R_0 - 1 (or another of STATISTICS) with its paired draws."""
    st = paired_statistics([base, with_token], resamples, seed)[statistic]
    return relative_change(st[:, 0], st[:, 1])


def simex_change(by_lambda: list[Cell], resamples: int, seed: int, method: str = "quadratic",
                 statistic: str = "R") -> tuple:
    """delta = theta(-1) / theta(0) - 1 from the cells at lambda = 0, 1, 2 (in that order), with its paired draws;
    method: the extrapolant (quadratic decides, linear is the sensitivity check)."""
    if len(by_lambda) != 3:
        raise ValueError(f"simex_change needs the cells at lambda = 0, 1, 2; got {len(by_lambda)}")
    st = paired_statistics(by_lambda, resamples, seed)[statistic]
    return relative_change(st[:, 0], extrapolate(st, method))


def regime_reading(changes: dict[str, tuple[float, np.ndarray]], margin: float = REGIME_MARGIN) -> dict:
    """Holm over the corpora of one question ({corpus: (delta, draws)}): per corpus delta, its interval at its Holm
    level, the level, and the decision ('robust' / 'moves' / 'not resolved'; docs/methods.md#model-regime)."""
    held = resolve_differences(changes)
    out = {}
    for corpus, r in held.items():
        lo, hi = r["ci"]
        decision = regime_decision(lo, hi, margin) if lo is not None else "not resolved"
        out[corpus] = {"delta": r["diff"], "ci": [lo, hi], "level": r["level"], "decision": decision}
    return out


def regime_cells(results_dir: str | Path, regime_dir: str | Path, docs: tuple[int, int] = QUESTION_DOCS) -> dict:
    """{(corpus, regime): Cell} of documents `docs`: the model as loaded from results_dir (regime ''), every other
    regime from regime_dir (a missing or empty regime_dir gives none). Float32 standalone cells only."""
    found = {}
    for directory, regime in ((results_dir, AS_LOADED), (regime_dir, None)):
        try:
            cells = load_cells(Path(directory), groups=None, docs=docs, regime=regime)
        except NoResultsError:
            continue
        for c in cells.values():
            if regime is None and c.regime == AS_LOADED:
                continue                      # the model as loaded is read from results_dir only
            found[(c.corpus, c.regime)] = c
    return found


def _change(question: str, st: np.ndarray, method: str = "quadratic") -> tuple[float, np.ndarray]:
    """delta of one statistic from its paired array (1 + draws, cells in QUESTIONS order)."""
    if question == START_TOKEN:
        return relative_change(st[:, 0], st[:, 1])
    return relative_change(st[:, 0], extrapolate(st, method))


def read_question(question: str, found: dict, resamples: int, seed: int, alpha: float = 0.05) -> dict:
    """One question of QUESTIONS read from the cells `found` (regime_cells).

    Incomplete (a needed cell missing): {"complete": False, "present": [...], "missing": [...]} and nothing else:
    partial data are not read. Complete: also "R", the regime_reading of R(16K) (Holm over the corpora, decided
    against the margin), and "described": per statistic of STATISTICS and corpus the change with its (1 - alpha)
    percentile interval, not decided; for rounding also "linear": the linear extrapolant's change of R (a
    sensitivity check, never the decision)."""
    if question not in QUESTIONS:
        raise ValueError(f"question {question!r}: choose one of {', '.join(QUESTIONS)}")
    needed = [(corpus, r) for corpus, regimes in QUESTIONS[question].items() for r in regimes]
    out = {"question": question, "present": [k for k in needed if k in found],
           "missing": [k for k in needed if k not in found]}
    out["complete"] = not out["missing"]
    if not out["complete"]:
        return out
    changes, described, linear = {}, {k: {} for k in STATISTICS}, {}
    for corpus, regimes in QUESTIONS[question].items():
        st = paired_statistics([found[(corpus, r)] for r in regimes], resamples, seed)
        for k in STATISTICS:
            point, draws = _change(question, st[k])
            ci = bs.percentile_ci(draws, 1 - alpha)
            ci = None if ci[0] is None else ci
            described[k][corpus] = {"delta": point, "ci": ci}
            if k == "R":
                changes[corpus] = (point, draws)
        if question == ROUNDING:
            linear[corpus] = _change(question, st["R"], "linear")[0]
    out["R"] = regime_reading(changes)
    out["described"] = described
    if question == ROUNDING:
        out["linear"] = linear
    out["n_docs"] = len(found[needed[0]].doc_ids)
    return out


# docs/methods.md, Model regime, addendum 2026-12-07, section 5: the rounding decision of 2026-12-03 left the noise
# draw out of its interval and is withdrawn; its cells are described, not decided, until the common-random-number
# cells (three draws per lambda, results.rounding) are all committed and read in its place.


def crn_reading(results_dir: str | Path, regime_dir: str | Path, found: dict, resamples: int, seed: int) -> dict:
    """The rounding question by common random numbers (results.rounding) from the regime folder's cells of
    documents 0-7 and the model as loaded in `found`; complete: "R" is its regime_reading (Holm over CODE and WEB,
    margin 10%) and "curves" the rows of its figure (rounding.crn_curve_rows)."""
    try:
        crn = {(c.corpus, c.regime): c for c in load_cells(Path(regime_dir), groups=None, docs=RD.CRN_DOCS,
                                                             regime=None).values() if c.regime}
    except NoResultsError:
        crn = {}
    as_loaded = {c: found[(c, AS_LOADED)] for c in RD.CRN_CORPORA if (c, AS_LOADED) in found}
    out = RD.read_crn_rounding(crn, as_loaded, resamples, seed)
    if out["complete"]:
        out["R"] = regime_reading(out.pop("changes"))
        out["curves"] = RD.crn_curve_rows(out["values"])
    return out


def read_model_regime(results_dir: str | Path, regime_dir: str | Path, model: str = "smollm2-135m",
                      resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED) -> tuple[dict, dict]:
    """An offline model's regime cells (regime_cells under each root's <org>__<model>/<revision>/) and every
    question of QUESTIONS read from them: ({(corpus, regime): Cell}, {question: read_question}). The pages that
    state R(16K) (03-05) read it with the rule's 2,000 paired draws and seed, whatever their own resamples; page
    04d, which shows it all, with its parameters (the same by default). The rounding reading also carries
    "second_draws" (second_draw_rows: a second set of noise draws, described, [] until committed), "crn" (the
    common-random-number reading, crn_reading) and "withdrawn" (until that reading is complete; then its "R",
    "linear" and "n_docs" are the question's, the first draw's kept under "first_draw", with which its
    "described" statistics go); a complete start-token reading carries "parts" (regime_parts.start_token_parts per
    corpus: R's change read through sigma^2, the long-lag covariance and the block noise)."""
    sub = get_offline(model).results_dir
    found = regime_cells(Path(results_dir) / sub, Path(regime_dir) / sub)
    readings = {q: read_question(q, found, resamples, seed) for q in QUESTIONS}
    readings[ROUNDING]["second_draws"] = second_draw_rows(found, resamples, seed)     # described beside it
    crn = crn_reading(Path(results_dir) / sub, Path(regime_dir) / sub, found, resamples, seed)
    readings[ROUNDING]["crn"] = crn
    readings[ROUNDING]["withdrawn"] = not crn["complete"]
    if crn["complete"]:                        # the decision is the common-random-number reading's
        first = {k: readings[ROUNDING][k] for k in ("R", "linear", "n_docs") if k in readings[ROUNDING]}
        readings[ROUNDING].update({"R": crn["R"], "linear": crn["linear"], "n_docs": crn["n_docs"], "first_draw": first})
    start = readings[START_TOKEN]
    if start["complete"]:                        # each change read through its numerator and denominator
        start["parts"] = {c: RP.start_token_parts(found[(c, AS_LOADED)], found[(c, r)], resamples, seed)
                          for c, (_, r) in QUESTIONS[START_TOKEN].items()}
    return found, readings


def read_training_regime(found: dict, resamples: int, seed: int, alpha: float = 0.05,
                         window: int = RP.CAUSAL_WINDOW, corpora=RP.TRAINING_CORPORA) -> dict:
    """The training-regime question (addendum 2026-12-07, section 4) from training_cells: while a cell is missing
    {"complete": False, "present", "missing"} and nothing else. Complete: "R", the regime_reading of
    delta = R_causal+bos(window) / R_causal(window) - 1 (Holm over the corpora, margin 10%); "values": per corpus
    and kind R(window), sigma^2, the long-lag covariance and the block noise (R and the block noise with their
    95% paired intervals, "ci" and "block_ci"); "parts": per corpus the paired parts of causal+bos against causal
    with `side`; "norms": per corpus and kind the cell's norm distribution (regime_parts.norm_distribution, its
    spiking chunks' rows included); "spike_free": per corpus causal+bos against causal on the documents whose
    causal+bos window has no spiking chunk (regime_parts.spike_free_change, described)."""
    needed = [(c, k) for c in corpora for k in RP.TRAINING_KINDS]
    out = {"question": "training regime", "present": [k for k in needed if k in found],
           "missing": [k for k in needed if k not in found]}
    out["complete"] = not out["missing"]
    if not out["complete"]:
        return out
    changes, values, parts_of, norms, spike_free = {}, {}, {}, {}, {}
    for corpus in corpora:
        cells = [found[(corpus, k)] for k in RP.TRAINING_KINDS]
        counts = paired_counts(cells, resamples, seed)
        p = [RP.parts(c, counts, window) for c in cells]
        changes[corpus] = relative_change(p[0]["R"], p[1]["R"])
        values[corpus] = {k: {"R": float(x["R"][0]), "ci": bs.percentile_ci(x["R"][1:], 1 - alpha),
                              "sigma2": float(x["sigma2"][0]), "long_cov": float(x["long_cov"][0]),
                              "block_noise": float(x["block_noise"][0]),
                              "block_ci": bs.percentile_ci(x["block_noise"][1:], 1 - alpha)}
                          for k, x in zip(RP.TRAINING_KINDS, p)}
        pp = RP.paired_parts(cells[0], cells[1], window, resamples, seed, alpha)
        parts_of[corpus] = {**pp, "side": RP.through_its_parts(pp)}
        norms[corpus] = {k: RP.norm_distribution(c) for k, c in zip(RP.TRAINING_KINDS, cells)}
        spike_free[corpus] = RP.spike_free_change(cells[0], cells[1], window)
    out.update(R=regime_reading(changes), values=values, parts=parts_of, norms=norms, spike_free=spike_free,
               n_docs=len(found[(corpora[0], "causal")].doc_ids), window=window,
               chunk=found[(corpora[0], "causal")].chunk)
    return out


def read_training_regime_of(results_dir, regime_dir, model: str, resamples: int, seed: int,
                            window: int = RP.CAUSAL_WINDOW) -> dict:
    """read_training_regime over a model's folders (<org>__<name>/<revision>/) of results_dir and regime_dir."""
    rm = result_model(model)
    sub = Path(result_stem(rm.model, rm.revision, "X", 512, (0, 1))).parent
    found = RP.training_cells(Path(results_dir) / sub, Path(regime_dir) / sub, window=window)
    return read_training_regime(found, resamples, seed, window=window)


def other_start_tokens(found: dict, resamples: int, seed: int) -> dict:
    """Start tokens measured beside the question's <|endoftext|> (regime 'bos<ID>' other than bos0, e.g. SmolLM2's
    <|im_start|>, id 1; docs/methods.md, Model regime, addendum 2026-12-07, section 3), described, not decided:
    {(corpus, regime): regime_parts.start_token_parts against the model as loaded}."""
    asked = {r for regimes in QUESTIONS[START_TOKEN].values() for r in regimes}
    return {(c, r): RP.start_token_parts(found[(c, AS_LOADED)], cell, resamples, seed)
            for (c, r), cell in sorted(found.items())
            if r.startswith("bos") and r not in asked and (c, AS_LOADED) in found}
