"""The design-effect explorer: one Vega-Lite chart, computed in the browser from the committed correlation profiles
(docgrad.results.profiles), with sliders for the window W and the batch size and a shaped profile beside the
measured ones. No kernel and no hand-written JavaScript: the arithmetic is Vega expressions.

What the browser computes, for block length m = W / C chunks (docs/methods.md#estimators):

    R(mC)       = 1 + (2/m) sum_{l<m} (m - l) rho(l)         (docgrad.core.bootstrap.R_from_rho)
                = 1 + (2/m) (m S1 - S2),  S1 = sum_{l<m} rho(l),  S2 = sum_{l<m} l rho(l)   (running sums)
    effective independent chunks in a batch of T tokens   = (T / C) / R
    shuffled-chunk batch with the same gradient noise     = T / R tokens
    B_simple of contiguous W-token blocks                 = R * B_simple (shuffled chunks)

The 95% intervals of R come from the document bootstrap (computed in Python: the browser cannot resample).
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from docgrad.presentation.evidence import sig
from docgrad.results.published import FINAL_1B

W_DEFAULT, BATCH_DEFAULT = 16384, 1_048_576
TEXT_FIELDS = ("R", "effective", "shuffled_tokens", "B_contig")


def published_text(by_window: pd.DataFrame, models=FINAL_1B) -> pd.DataFrame:
    """(corpus, W_tokens, text) of the published 1B-class R(W) at the windows it was reported at, final
    checkpoints only ((model, revision) pairs; docgrad.results.published.R_by_window), e.g.
    'Pythia-1.4B 6.91, OLMo-2-1B 4.73'."""
    keep = pd.Series(False, index=by_window.index)
    for model, rev in models:
        keep |= (by_window["model"] == model) & (by_window["revision"] == rev)
    f = by_window[keep]
    rows = [{"corpus": k, "W_tokens": int(w), "text": ", ".join(f"{r.model_label} {r.R:.3g}" for r in g.itertuples())}
            for (k, w), g in f.groupby(["corpus", "W_tokens"], sort=True)]
    return pd.DataFrame(rows, columns=["corpus", "W_tokens", "text"])


def _profiles_with_lag0(rho: pd.DataFrame) -> pd.DataFrame:
    """The rho rows with a lag-0 row of rho = 0 per cell, so that every block length, m = 1 included, has a row."""
    zero = rho.drop_duplicates(["label", "corpus"]).assign(lag=0, lag_tokens=0, rho=0.0)
    return pd.concat([zero, rho], ignore_index=True).sort_values(["label", "corpus", "lag"]).reset_index(drop=True)


def explorer_chart(rho: pd.DataFrame, R: pd.DataFrame, published: pd.DataFrame | None = None,
                   chunk: int = 512, window: int | None = None) -> alt.VConcatChart:
    """The explorer. rho, R: results.profiles.cell_profile rows of every cell shown (concatenated); published:
    rows (corpus, W_tokens, text) to print beside ours where the published study has a value at that window;
    window: the window it opens at (default 16K, or the longest measured when shorter; a corpus of your own
    opens at its span)."""
    corpora = list(dict.fromkeys(R["corpus"]))
    labels = list(dict.fromkeys(R["label"]))
    max_tokens = int(R["W_tokens"].max())
    W = alt.param(name="W", value=min(window or W_DEFAULT, max_tokens),
                  bind=alt.binding_range(min=chunk, max=max_tokens, step=chunk, name="window W (tokens) "))
    batch = alt.param(name="batch", value=BATCH_DEFAULT,
                      bind=alt.binding_range(min=max_tokens, max=64 * BATCH_DEFAULT, step=max_tokens,
                                             name="batch (tokens) "))
    model = alt.param(name="model", value=labels[0], bind=alt.binding_select(options=labels, name="model "))
    short = alt.param(name="rho1", value=0.3, bind=alt.binding_range(min=0, max=0.8, step=0.01,
                                                                      name="shaped: ρ at the first lag "))
    plateau = alt.param(name="plateau", value=0.05, bind=alt.binding_range(min=0, max=0.3, step=0.005,
                                                                           name="shaped: long-range plateau "))
    decay = alt.param(name="decay", value=2.0, bind=alt.binding_range(min=0.25, max=16, step=0.25,
                                                                      name="shaped: decay length (chunks) "))
    pick = alt.selection_point(fields=["corpus"], bind="legend")
    color = alt.Color("corpus:N", sort=corpora, title="corpus")
    R_keyed = R.assign(key=R["label"] + "|" + R["corpus"] + "|" + R["m"].astype(str))
    pub = published if published is not None and len(published) else pd.DataFrame(
        {"key": ["-"], "published": [""]})
    if "key" not in pub:
        pub = pub.assign(key=pub["corpus"] + "|" + pub["W_tokens"].astype(str))[["key", "text"]].rename(
            columns={"text": "published"})

    # measured R(W') from the profile: running sums over the lags, R at m = lag + 1
    curves = alt.Chart(_profiles_with_lag0(rho)).transform_filter(alt.datum.label == model).transform_window(
        S1="sum(rho)", frame=[None, 0], groupby=["label", "corpus"], sort=[alt.SortField("lag")]
    ).transform_calculate(lrho="datum.lag * datum.rho").transform_window(
        S2="sum(lrho)", frame=[None, 0], groupby=["label", "corpus"], sort=[alt.SortField("lag")]
    ).transform_calculate(m="datum.lag + 1", W_tokens=f"(datum.lag + 1) * {chunk}").transform_calculate(
        R="1 + 2 / datum.m * (datum.m * datum.S1 - datum.S2)")
    x = alt.X("W_tokens:Q", title="window W (tokens)", scale=alt.Scale(domain=[0, max_tokens]))
    band = alt.Chart(R_keyed).transform_filter(alt.datum.label == model).mark_area(opacity=0.15).encode(
        x=x, y=alt.Y("lo:Q", title="R(W)"), y2="hi:Q", color=color, opacity=alt.condition(pick, alt.value(0.2),
                                                                                          alt.value(0.03)))
    lines = curves.mark_line(point=True).encode(
        x=x, y=alt.Y("R:Q", title="R(W)"), color=color, opacity=alt.condition(pick, alt.value(1.0), alt.value(0.15)),
        tooltip=["corpus:N", "W_tokens:Q", alt.Tooltip("R:Q", format=".4g")])
    rule = alt.Chart(pd.DataFrame({"z": [0]})).mark_rule(color="black", strokeDash=[4, 3]).encode(
        x=alt.datum(W, type="quantitative"))
    measured = alt.layer(band.add_params(pick), lines, rule).properties(   # the first layer with colour holds it
        width=460, height=260, title="measured, one model")

    # the numbers at the chosen W and batch, one line per corpus
    at_W = curves.transform_filter(f"datum.W_tokens == W").transform_calculate(
        key=f"datum.label + '|' + datum.corpus + '|' + datum.m", pkey=f"datum.corpus + '|' + W"
    ).transform_lookup(lookup="key", from_=alt.LookupData(R_keyed, key="key",
                                                          fields=["lo", "hi", "B_simple_shuf_tokens"])
    ).transform_lookup(lookup="pkey", from_=alt.LookupData(pub, key="key", fields=["published"]), default=""
    ).transform_calculate(
        effective=f"batch / {chunk} / datum.R", shuffled_tokens="batch / datum.R",
        B_contig="datum.R * datum.B_simple_shuf_tokens",
        line=("datum.corpus + ':  R(W) = ' + format(datum.R, '.4g') + ' [' + format(datum.lo, '.3g') + ', '"
              " + format(datum.hi, '.3g') + ']   effective chunks ' + format(datum.effective, ',.1f') + ' of '"
              f" + format(batch / {chunk}, ',') + '   same noise as ' + format(datum.shuffled_tokens, ',.0f')"
              " + ' shuffled tokens   B_simple ' + format(datum.B_contig, ',.0f') + ' (contiguous) vs '"
              " + format(datum.B_simple_shuf_tokens, ',.0f') + ' (shuffled)'"
              " + (datum.published ? '   published: ' + datum.published : '')"))
    table = at_W.mark_text(align="left", fontSize=12).encode(
        y=alt.Y("corpus:N", sort=corpora, axis=None), x=alt.value(0), text="line:N", color=color,
    ).properties(width=900, height=22 * len(corpora), title=alt.Title(
        alt.expr("'At W = ' + format(W, ',') + ' tokens and a batch of ' + format(batch, ',') + ' tokens'")))

    # a shaped profile: rho(l) = plateau + (rho1 - plateau) exp(-(l - 1) / decay), and its R(W')
    shaped = alt.Chart(alt.sequence(0, max_tokens // chunk, as_="lag")).transform_calculate(
        rho="datum.lag == 0 ? 0 : plateau + (rho1 - plateau) * exp(-(datum.lag - 1) / decay)"
    ).transform_window(S1="sum(rho)", frame=[None, 0], sort=[alt.SortField("lag")]).transform_calculate(
        lrho="datum.lag * datum.rho").transform_window(S2="sum(lrho)", frame=[None, 0], sort=[alt.SortField("lag")]
    ).transform_calculate(m="datum.lag + 1", W_tokens=f"(datum.lag + 1) * {chunk}",
                          R="1 + 2 / datum.m * (datum.m * datum.S1 - datum.S2)", corpus="'shaped profile'")
    shaped_line = shaped.mark_line(color="black", strokeWidth=3).encode(
        x=x, y=alt.Y("R:Q", title="R(W)"), tooltip=[alt.Tooltip("W_tokens:Q"), alt.Tooltip("R:Q", format=".4g")])
    beside = alt.layer(lines, shaped_line).properties(
        width=460, height=260, title="a shaped correlation profile (black) beside the measured curves")
    return alt.vconcat(alt.hconcat(measured, beside), table).add_params(W, batch, model, short, plateau, decay)


def estimator_note(blocks: pd.DataFrame, profile: pd.DataFrame, whole: int) -> str:
    """Why the R(W) chart and the explorer can show different R(W) below the whole span. blocks: R(W) from aligned
    blocks (rows label, corpus, W_tokens, R: tables.R_frame of group 'all' with the model label); profile: R(W)
    from the correlation profile (results.profiles.cell_profile's R rows); whole: the span in tokens. The two agree
    at the whole span and differ below it only by which chunk pairs they average (docgrad.core.bootstrap.R_from_rho);
    per model, the largest relative difference below the whole span is named with both values."""
    both = blocks.merge(profile, on=["label", "corpus", "W_tokens"], suffixes=("_blocks", "_profile"))
    below = both[both["W_tokens"] < whole].assign(rel=lambda f: f["R_profile"] / f["R_blocks"] - 1)
    at_whole = both[both["W_tokens"] == whole]
    agree = bool(len(at_whole)) and bool(((at_whole["R_profile"] / at_whole["R_blocks"] - 1).abs() < 1e-9).all())
    text = ("The chart above and the explorer estimate R(W) two ways: the chart from the noise of each document's "
            "aligned, disjoint W-token blocks, the explorer from the correlation profile, R(mC) = 1 + (2/m) Σ (m − l) "
            "ρ(l), with ρ(l) averaged over every pair of chunks l apart. ")
    text += (f"At the whole span ({whole:,} tokens) both use every pair and agree; " if agree else
             f"At the whole span ({whole:,} tokens) both use every pair; ")
    if below.empty:
        return text + "no shorter window is shown."
    parts = []
    for lab, g in below.groupby("label", sort=False):
        r = g.loc[g["rel"].abs().idxmax()]
        parts.append(f"{lab} by at most {abs(r['rel']):.1%} ({r['corpus']}: R({int(r['W_tokens']):,}) "
                     f"{sig(r['R_blocks'], 4)} from blocks, {sig(r['R_profile'], 4)} from the profile)")
    return text + "below it they average different pairs and differ, " + "; ".join(parts) + "."
