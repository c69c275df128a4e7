"""Page 06 in frames and words: standalone vs causal context per corpus (docgrad.results.positions computes it).
Definitions: docs/methods.md#standalone-vs-causal."""

from __future__ import annotations

import numpy as np

from docgrad.presentation.comparison import DISAGREE, agreement, pair_orders
from docgrad.presentation.tables import ordering
from docgrad.results.positions import CAUSAL_MODE, DIFFERENCE, MODES, STANDALONE_MODE, ModeComparison, cell_name


def _ci(ci: dict, key):
    lo, hi = (ci.get(key) or (None, None))
    return (np.nan if lo is None else lo), (np.nan if hi is None else hi)


def _mode_frame(comps: dict, key: str, xname: str):
    """Rows (corpus, mode, <xname>, <key>, lo, hi) of one curve (rho by lag or R by window): both modes, and
    the difference (mode DIFFERENCE)."""
    import pandas as pd

    rows = []
    for k, c in comps.items():
        for mode in MODES:
            e = c.estimates(mode)
            for x, v in getattr(e, key).items():
                lo, hi = _ci(e.ci.get(key, {}), x)
                rows.append({"corpus": k, "mode": mode, xname: x, key: v, "lo": lo, "hi": hi})
        for x, v in c.difference[key].items():
            lo, hi = _ci(c.difference[f"{key}_ci"], x)
            rows.append({"corpus": k, "mode": DIFFERENCE, xname: x, key: v, "lo": lo, "hi": hi})
    return pd.DataFrame(rows, columns=["corpus", "mode", xname, key, "lo", "hi"])


def rho_by_mode_frame(comps: dict):
    """Rows (corpus, mode, lag_tokens, rho, lo, hi): both modes, and the difference (mode DIFFERENCE)."""
    return _mode_frame(comps, "rho", "lag_tokens")


def R_by_mode_frame(comps: dict):
    """Rows (corpus, mode, W_tokens, R, lo, hi): both modes, and the difference (mode DIFFERENCE)."""
    return _mode_frame(comps, "R", "W_tokens")


def position_frame(comps: dict):
    """Rows (corpus, mode, quantity, position, start_tokens, value, lo, hi) for the per-position mean loss
    ('loss') and squared gradient norm ('sqnorm'), both modes and their difference."""
    import pandas as pd

    rows = []
    for k, c in comps.items():
        for mode, per in c.positions.items():
            for q, s in per.items():
                for pos, v in enumerate(s.value):
                    lo, hi = s.ci[pos] if s.ci else (None, None)
                    rows.append({"corpus": k, "mode": mode, "quantity": q, "position": pos,
                                 "start_tokens": pos * c.chunk, "value": v,
                                 "lo": np.nan if lo is None else lo, "hi": np.nan if hi is None else hi})
    return pd.DataFrame(rows, columns=["corpus", "mode", "quantity", "position", "start_tokens", "value", "lo", "hi"])


def _resolved(ci) -> int:
    """+1 when an interval lies above 0, -1 below, 0 when it contains 0 or is missing."""
    lo, hi = ci if ci else (None, None)
    if lo is None or hi is None:
        return 0
    return 1 if lo > 0 else -1 if hi < 0 else 0


def _loss_sentence(f: dict, diff: float, ci: str) -> str:
    """What context does to the loss of the window's last chunk, in words that follow its paired interval."""
    head = {-1: "Context lowers the loss of the window's last chunk", 1: "Context raises the loss of the window's "
            "last chunk", 0: "The loss of the window's last chunk does not change resolvably with context"}
    return (f"{head[f['loss_last_difference_sign']]}: {f['loss_last_standalone']:.3f} standalone, "
            f"{f['loss_last_causal']:.3f} causal nats per token ({diff:+.3f}{ci}); chunk 0 has no context in "
            f"either mode ({f['loss_first_standalone']:.3f} vs {f['loss_first_causal']:.3f}).")


def mode_reading(c: ModeComparison) -> tuple[dict, list[str]]:
    """The design-effect reading of one comparison: (facts, sentences). Every number a sentence states is in
    facts (rounded the way it is written), so a page can save facts in its JSON twin."""
    W, m = c.window, c.m
    Rs, Rc = c.standalone.R[W], c.causal.R[W]
    Rs_ci, Rc_ci = c.standalone.interval("R", W), c.causal.interval("R", W)
    dR, dR_ci = c.difference["R"][W], c.difference["R_ci"].get(W)
    loss = c.positions[DIFFERENCE]["loss"]
    last = m - 1
    f = {"corpus": c.corpus, "window": W, "chunks_per_window": m, "n_docs": c.n_docs,
         "R_standalone": Rs, "R_standalone_ci": list(Rs_ci), "R_causal": Rc, "R_causal_ci": list(Rc_ci),
         "R_difference": dR, "R_difference_ci": None if dR_ci is None else list(dR_ci),
         "R_difference_sign": _resolved(dR_ci),
         "effective_chunks_standalone": m / Rs if Rs else None, "effective_chunks_causal": m / Rc if Rc else None,
         "sigma2_ratio": c.ratio["sigma2"], "sigma2_ratio_ci": list(c.ratio.get("sigma2_ci", (None, None))),
         "window_noise_ratio": c.ratio["window_noise"],
         "window_noise_ratio_ci": list(c.ratio.get("window_noise_ci", (None, None))),
         "loss_first_standalone": c.positions[STANDALONE_MODE]["loss"].value[0],
         "loss_first_causal": c.positions[CAUSAL_MODE]["loss"].value[0],
         "loss_last_standalone": c.positions[STANDALONE_MODE]["loss"].value[last],
         "loss_last_causal": c.positions[CAUSAL_MODE]["loss"].value[last],
         "loss_last_difference": loss.value[last],
         "loss_last_difference_ci": list(loss.ci[last]) if loss.ci else None,
         "loss_last_difference_sign": _resolved(loss.ci[last] if loss.ci else None),
         "sqnorm_last_ratio": c.positions[CAUSAL_MODE]["sqnorm"].value[last]
         / c.positions[STANDALONE_MODE]["sqnorm"].value[last]}

    def iv(ci, fmt):
        return "" if ci is None or ci[0] is None else f" [{format(ci[0], fmt)}, {format(ci[1], fmt)}]"

    word = {1: "resolved above 0: R(W) is higher with real context", -1: "resolved below 0: R(W) is lower with "
            "real context", 0: "not resolved: its paired interval contains 0"}[f["R_difference_sign"]]
    lines = [f"**{c.corpus}** ({c.n_docs} documents, W = {W} tokens = {m} chunks): R(W) is {Rs:.2f}{iv(Rs_ci, '.2f')} "
             f"for standalone chunks and {Rc:.2f}{iv(Rc_ci, '.2f')} with real context; the difference "
             f"{dR:+.3f}{iv(dR_ci, '+.3f')} is {word}.",
             f"A {W}-token window then carries about {m / Rs:.1f} effective independent chunks by the standalone "
             f"proxy and {m / Rc:.1f} in causal training (m / R(W) of its {m})."
             if Rs and Rc and Rs > 0 and Rc > 0 else "R(W) is not positive in one mode: no effective sample size.",
             f"The per-chunk noise σ² changes by a factor {c.ratio['sigma2']:.2f}"
             f"{iv(c.ratio.get('sigma2_ci'), '.2f')}, and the noise of the window's mean gradient, σ² R(W)/m, by "
             f"{c.ratio['window_noise']:.2f}{iv(c.ratio.get('window_noise_ci'), '.2f')} (causal / standalone).",
             _loss_sentence(f, loss.value[last], iv(f["loss_last_difference_ci"], "+.3f"))]
    return f, lines


def overall_reading(comps: dict, not_measured=(), window: int | None = None) -> tuple[dict, list[str]]:
    """Across corpora (comps: corpus -> ModeComparison, in page order): the ordering of R(window) in each mode,
    with each pair of corpora resolved by the bootstrap (docgrad.presentation.comparison.pair_orders on the draws of
    R(window); corpora are resampled independently), whether the two modes order any resolved pair oppositely
    (comparison.agreement), and which corpora's R(W) moves resolvably with context. Returns (facts, sentences)."""
    order = list(comps)
    if not order:
        return {}, ["**Nothing is measured yet**, so nothing is read: the design effect of pages 03 and 04 "
                    "rests on the standalone proxy alone."]
    W = window or next(iter(comps.values())).window
    facts, lines, pairs = {"window": W, "orderings": {}, "pairs": {}, "agreement": {}}, [], {}
    for mode in MODES:
        pts = {k: comps[k].estimates(mode).R[W] for k in order}
        drw = {k: comps[k].R_window_draws[mode] for k in order if mode in comps[k].R_window_draws}
        pairs[mode] = pair_orders(pts, drw or None, order)
        facts["orderings"][mode] = ordering(pts, 2)
        facts["pairs"][mode] = {f"{a}|{b}": r["order"] for (a, b), r in pairs[mode].items()}
    lines.append(f"Ordered by R({W}): standalone {facts['orderings'][STANDALONE_MODE]}; causal "
                 f"{facts['orderings'][CAUSAL_MODE]} (point values).")
    if len(order) > 1:
        st = agreement(pairs[STANDALONE_MODE], pairs[CAUSAL_MODE])
        facts["agreement"] = {f"{a}|{b}": v for (a, b), v in st.items()}
        for mode in MODES:
            res = [r["order"] for r in pairs[mode].values() if r["sign"] != 0]
            open_ = [f"{a} vs {b}" for (a, b), r in pairs[mode].items() if r["sign"] == 0]
            lines.append(f"Resolved by the bootstrap ({mode}): {', '.join(res) or 'no pair'}"
                         + (f"; not resolved: {', '.join(open_)}." if open_ else "."))
        flips = [f"{a} vs {b}" for (a, b), v in st.items() if v == DISAGREE]
        lines.append(f"The two modes order {', '.join(flips)} oppositely, each resolved." if flips else
                     "No pair of corpora is ordered oppositely by the two modes with both orders resolved; a "
                     "difference between the point orderings above is within the intervals.")
    sign = {k: _resolved(comps[k].difference["R_ci"].get(W)) for k in order}
    facts["R_difference_sign"] = sign
    up, down, same = ([k for k in order if sign[k] == s] for s in (1, -1, 0))
    if up:
        lines.append(f"With real context R(W) is higher for {', '.join(up)}: the standalone proxy understates "
                     "the design effect of whole-document windows there.")
    if down:
        lines.append(f"With real context R(W) is lower for {', '.join(down)}: the standalone proxy overstates "
                     "the design effect there.")
    if same:
        lines.append(f"For {', '.join(same)} the measured difference is not resolved: at this number of "
                     "documents the standalone proxy's R(W) is not distinguishable from the causal one.")
    if not_measured:
        lines.append(f"Not measured yet: {', '.join(not_measured)}; nothing is said about them.")
    return facts, lines


# --- `docgrad analyze --context causal` ------------------------------------------------------------------------

def causal_summary_table(a, positions: dict) -> str:
    """Fixed-width text for `docgrad analyze --context causal`: one line per causal cell (window, documents,
    S_cross, sigma2, R at the window with its interval), its loss and squared norm by position, the gates."""
    def f(x, fmt):
        return "-" if x is None or (isinstance(x, float) and not np.isfinite(x)) else format(x, fmt)

    lines = [f"{'model':34s} {'revision':24s} {'corpus':7s} {'C':>5s} {'W':>6s} {'docs':>4s} {'S_cross':>10s} "
             f"{'sigma2':>10s} {'R(W)':>7s} {'R(W) 95%':>16s}"]
    for c in a.cells:
        e, W = c.all, c.window
        lo, hi = e.interval("R", W)
        ci = "" if lo is None else f"[{lo:.3g}, {hi:.3g}]"
        lines.append(f"{c.model[:34]:34s} {c.revision[:24]:24s} {c.corpus:7s} {c.chunk:5d} {W:6d} {c.n_docs:4d} "
                     f"{f(e.S_cross, '10.4g')} {f(e.sigma2, '10.4g')} {f(e.R.get(W), '7.3f')} {ci:>16s}")
        p = positions.get(cell_name(c))
        if p is not None:
            for q, label in (("loss", "loss by position"), ("sqnorm", "|g|^2 by position")):
                lines.append(f"    {label:18s} " + " ".join(f(v, ".4g") for v in p[q].value))
    for name, gt in a.gates.items():
        lines.append(f"{name}: {gt['status']} - {gt['summary']}")
    lines.append(f"verdict: {a.verdict}")
    return "\n".join(lines)
