# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     notebook_metadata_filter: -jupytext.text_representation.jupytext_version
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Is R a property of the text or of our model?
#
# Every offline number of this report comes from 4-bit-rounded weights, and SmolLM2's chunks start with no
# start token. Does $R(16\text{K})$ move when a start token goes ahead of every chunk, or when the rounding is
# extrapolated away? The rule that decides it (a margin of ±10% of $R(16\text{K})$, Holm over the corpora of each
# question, nothing read before every cell of a question is committed) was written before the data:
# [docs/methods.md](../docs/methods.md#model-regime).

# %% tags=["parameters"]
results_dir = "data/results"  # result files of the model as loaded (searched recursively)
regime_dir = "data/regime"  # result files of the other regimes (start token, SIMEX noise)
model = "smollm2-135m"  # offline model name (`docgrad models` lists them)
resamples = 2000  # paired document-bootstrap resamples
seed = 20261007  # bootstrap seed
spike_record = "data/regime/spikes/CODE_bos0.json"  # `docgrad spikes` record of the start-token cell's spikes
figures_dir = "figures"  # where figures and the numbers file are written

# %%
from docgrad import page as dg

ROOT = dg.setup()

import altair as alt
import pandas as pd
from IPython.display import Markdown, display

found, readings = dg.model_regime.read_model_regime(results_dir, regime_dir, model, resamples, seed)
draw_rows = readings[dg.model_regime.ROUNDING]["second_draws"]   # a second set of SIMEX draws, described
tokenizer = dg.models.load_tokenizer(model)                       # to name the tokens the start-token cells use

# %% tags=["hide-input"]
box = dg.regime.result_box(readings, dg.models.model_label(dg.models.get_offline(model).model))
details = [line for r in readings.values() for line in dg.regime.question_lines(r)]
display(Markdown(box + "\n\n" + "\n\n".join(details)))

# %% [markdown]
# **What each question changes.** *Start token*: `<|endoftext|>` (id 0, the separator SmolLM2 was pretrained with)
# goes ahead of every 512-token chunk as context only; the chunk's 511 targets are the same, so each chunk's
# gradient is that of the same text with one token of context. *Rounding*: independent Gaussian noise with the
# variance of each weight's own rounding error is added once ($\lambda = 1$) and twice ($\lambda = 2$); the
# quadratic through $\lambda = 0, 1, 2$ is read at $\lambda = -1$, the weights without rounding error
# (simulation-extrapolation, SIMEX). Its first reading (2026-12-03) used one noise draw per $\lambda$ on 16
# documents, with an interval over the documents and not the draw; it is withdrawn (addendum 2026-12-07, section
# 5). Rounding is decided by three draws per $\lambda$ with common random numbers on documents 0-7, with an
# interval over documents and draws ("Rounding with its draws" below), and by nothing while one of those cells is
# missing. Every comparison is paired: the same documents, the same bootstrap counts for every regime of a
# corpus.

# %% tags=["hide-input"]
rows = [{"question": f"{q} (withdrawn, one draw)" if r.get("withdrawn") else q, "corpus": c, "delta": v["delta"],
         "lo": v["ci"][0], "hi": v["ci"][1], "decision": "withdrawn" if r.get("withdrawn") else v["decision"]}
        for q, r in readings.items() if r["complete"] for c, v in r["R"].items()]
if rows:
    d = pd.DataFrame(rows).assign(margin_lo=-dg.model_regime.REGIME_MARGIN, margin_hi=dg.model_regime.REGIME_MARGIN)
    band = alt.Chart().mark_rect(opacity=0.15, color="gray").encode(x="min(margin_lo):Q", x2="max(margin_hi):Q")
    bars = alt.Chart().mark_rule(strokeWidth=2).encode(
        x=alt.X("lo:Q", title="change of R(16K), relative (Holm-level interval)", axis=alt.Axis(format="%")),
        x2="hi:Q", y=alt.Y("corpus:N", title=None), color=dg.corpus_color())
    dots = alt.Chart().mark_point(filled=True, size=60).encode(x="delta:Q", y="corpus:N", color=dg.corpus_color(),
                                                               tooltip=["question", "corpus", "decision"])
    chart = alt.layer(band, bars, dots, data=d).properties(width=420, height=90).facet(
        row=alt.Row("question:N", title=None))
    dg.save_chart(chart.properties(title="R(16K) in another model regime, against the model as loaded "
                                         "(gray: the ±10% margin)"), "04d_model_regime", figures_dir)
    display(chart)
else:
    display(Markdown("*No question has all its cells yet: no figure is drawn (partial data are not shown).*"))

# %% [markdown]
# ## The start token, read through its parts
#
# $R(16\text{K})$ is a ratio: the noise of one 16K block, $N = \sigma^2 R/32$, over what 32 independent chunks
# would give, $\sigma^2/32$. So a change of $R$ is read through both: $\sigma^2$ (the denominator), the long-lag
# covariance $\sigma^2\rho_\mathrm{long}$ (the numerator's long-range part) and the block noise itself, each as
# a ratio with its 95% paired interval; and the per-chunk squared norms that make $\sigma^2$: their median,
# the largest, how many chunks lie above 10× the median (*spiking* chunks) and the share of all squared norm
# that the five largest carry ([docs/methods.md](../docs/methods.md#model-regime), addendum 2026-12-07).

# %% tags=["hide-input"]
parts_table = pd.DataFrame(dg.regime.parts_rows(readings[dg.model_regime.START_TOKEN]))
if len(parts_table):
    display(parts_table.round(3))
    norms = pd.DataFrame(dg.regime.norm_rows(found))
    chart = alt.Chart(norms).mark_circle(opacity=0.7).encode(
        x=alt.X("times_median:Q", title="chunk's squared gradient norm / the cell's median (log; 10 bins a decade)",
                scale=alt.Scale(type="log")),
        y=alt.Y("regime:N", title=None), color=dg.corpus_color(),
        size=alt.Size("chunks:Q", title="chunks", scale=alt.Scale(type="sqrt")),
        tooltip=["corpus", "regime", "times_median", "chunks", "largest"]).properties(width=420, height=60).facet(
        row=alt.Row("corpus:N", title=None))
    display(dg.save_chart(chart.properties(title="Every chunk's squared gradient norm, as loaded and with "
                                                 "<|endoftext|> ahead of it"), "04d_norms", figures_dir))
else:
    display(Markdown("*The start-token cells are not all committed: nothing to read through its parts.*"))

# %% [markdown]
# ### Where a spike comes from
#
# For the largest spiking chunks of CODE with `<|endoftext|>` first, and as many non-spiking chunks of the same
# documents: the squared gradient norm with the first targets dropped (target 1 is $x_1$, predicted from
# `<|endoftext|>` and $x_0$), each first target alone, the same chunk moved one token later, the chunk without
# the start token, and the model in float64 (`docgrad spikes`; the tests and thresholds were stated before the
# data, addendum 2026-12-07). Each value is relative to the cell's median squared norm.

# %% tags=["hide-input"]
spike_data = dg.spikes.read_record(ROOT / spike_record)
if spike_data:
    spike_reading = dg.spikes.spike_reading(spike_data)
    display(Markdown(dg.spikes.spike_sentence(spike_reading)),
            pd.DataFrame(spike_reading["chunks"]).drop(columns=["check"]).round(3))
else:
    spike_reading = None
    display(Markdown(f"*No spike record at `{spike_record}` yet (`docgrad spikes --out {spike_record}`).*"))

# %% [markdown]
# Every chunk of the four start-token cells, by the token it begins with:

# %% tags=["hide-input"]
first_tokens, first_token_line = {}, ""
try:
    first_tokens = {c: dg.spikes.first_token_counts(found[(c, r)], {int(s.doc): s.tokens for s in
                                                                   dg.corpora_build.load_spans(c)})
                    for c, (_, r) in dg.model_regime.QUESTIONS[dg.model_regime.START_TOKEN].items() if (c, r) in found}
except (OSError, dg.corpora_build.CorpusError) as e:   # no span cache: `make report` builds it first
    first_token_line = f"*The span caches are not built, so first tokens are not counted ({e}).*"
spike_token = dg.spikes.most_common_first_token(first_tokens)
if spike_token is not None:
    first_token_line = dg.spikes.first_token_sentence(
        first_tokens, spike_token, tokenizer.decode([spike_token]))
elif first_tokens:
    first_token_line = "*No chunk of the start-token cells spikes.*"
display(Markdown(first_token_line + "\n\n" + dg.regime.spike_free_sentence(readings[dg.model_regime.START_TOKEN])))

# %% [markdown]
# **Another start token.** SmolLM2-Instruct's own turn token `<|im_start|>` (id 1) ahead of every CODE chunk,
# read by the same parts (described, not decided; addendum 2026-12-07, section 3):

# %% tags=["hide-input"]
others = dg.model_regime.other_start_tokens(found, resamples, seed)
other_lines = dg.regime.other_start_token_lines(
    others, {r: tokenizer.decode([int(r[3:])]) for _, r in others})
display(Markdown("\n".join(other_lines) or "*No cell with another start token is committed yet "
                 "(`make probe-regime-parts` probes CODE with `<|im_start|>`).*"))

# %% [markdown]
# **What the spike is.** A chunk is cut from the middle of a document at a fixed token count, so it can begin in
# the middle of a sentence. With `<|endoftext|>` ahead of it, the model reads it as the start of a new document,
# and a document that opens with a comma is a context it has hardly ever seen. Its prediction of the second token
# from those two tokens is where the gradient comes from: dropping that one target removes nearly all of the
# chunk's squared norm, the float64 model gives the same value, and the same chunk moved one token on, or without
# the start token, does not spike. So the spike is an artefact of putting a start token ahead of chunks cut from
# the middle of documents, not a property of the text or of the rounding. In training a start token heads a whole
# document, at its real first token; the causal windows below put it ahead of a window that begins inside its
# document, so their first chunk can spike the same way (one chunk a window, not every chunk). The report reads
# $R(16\text{K})$ as loaded as its measurement; the start-token cells' lower $R$ is their denominator
# $\sigma^2$ inflated by these chunks, while the noise of a whole 16K block rises.

# %% [markdown]
# ## The training regime, read through its parts
#
# Long-context training puts one document in a sequence with `<|endoftext|>` at its position 0 only, and every
# chunk sees the chunks before it. The causal windows of page 06 ($W = 4096$, documents 0-15), without and with
# that start token, beside the window's chunks run alone, without and with the start token ahead of each chunk:
# each regime's $R(4\text{K})$ and the parts it is made of, on the same documents, with the decision the rule
# stated before these cells existed (addendum 2026-12-07, section 4).

# %% tags=["hide-input"]
training = dg.model_regime.read_training_regime_of(results_dir, regime_dir, model, resamples, seed)
training_table = pd.DataFrame(dg.regime.training_rows(training))
try:
    spans = {c: {int(s.doc): s.tokens for s in dg.corpora_build.load_spans(c)} for c in training.get("norms", {})}
    training_spikes = dg.regime.training_spike_sentence(
        training, lambda c, d, k: tokenizer.decode([int(spans[c][d][k * training["chunk"]])]))
except (OSError, dg.corpora_build.CorpusError) as e:   # no span cache: `make report` builds it first
    training_spikes = f"*The span caches are not built, so the spiking windows' first tokens are not read ({e}).*"
display(Markdown("\n".join(dg.regime.training_lines(training)) + "\n\n" + training_spikes))
if len(training_table):
    display(training_table.round(3))

# %% [markdown]
# **What the training regime's spikes are.** A causal window begins where its document's span begins, inside the
# document ([docs/methods.md](../docs/methods.md#corpora-and-spans)), so `<|endoftext|>` at position 0 stands
# ahead of a token from the middle of a text: the window's first chunk is then exactly the first chunk of the
# standalone start-token cell, the same input, and it spikes as it does there. Training puts the token ahead of a
# document's own first token, which these cells do not measure. So the training answer reads the causal windows
# without the start token, and beside them the windows with it through their parts: where $R(4\text{K})$ falls,
# it falls through $\sigma^2$ of a few windows' first chunk, and the noise of a whole block rises.

# %% [markdown]
# ## The SIMEX curves of the first draw
#
# The first reading's cells (one noise draw per $\lambda$, 16 documents; described, its decision withdrawn):
# $R(16\text{K})$ and the mean-gradient share measured at $\lambda = 0$ (the model as loaded), 1 and 2 (points,
# 95% paired intervals), the quadratic through them (solid, with the 95% band of the quadratic fitted to every
# paired draw) and the linear least-squares line (dashed, the sensitivity check), both read at $\lambda = -1$,
# weights without rounding error (diamonds). An extrapolant is not bounded by what the statistic can be: a share
# below 0 there says only that the extrapolation cannot tell it from 0.

# %% tags=["hide-input"]
simex = pd.DataFrame(dg.model_regime.simex_curves(readings[dg.model_regime.ROUNDING], found, resamples, seed))
if len(simex):
    simex["statistic"] = simex["statistic"].map(dg.regime.STATISTIC_NAMES)
    base = alt.Chart().encode(x=alt.X("lambda:Q", title="λ (added variance / rounding's)"), color=dg.corpus_color())
    fitted, measured = alt.datum.kind != "measured", alt.datum.kind == "measured"
    dashes = alt.Scale(domain=["quadratic", "linear"], range=[[1, 0], [5, 3]])
    chart = alt.layer(
        base.transform_filter(alt.datum.kind == "quadratic").mark_area(opacity=0.15).encode(y="lo:Q", y2="hi:Q"),
        base.transform_filter(fitted).mark_line().encode(
            y=alt.Y("value:Q", title=None), strokeDash=alt.StrokeDash("kind:N", title="extrapolant", scale=dashes)),
        base.transform_filter(measured).mark_rule().encode(y="lo:Q", y2="hi:Q"),
        base.transform_filter(measured).mark_point(filled=True, size=50).encode(
            y="value:Q", tooltip=["corpus", "statistic", "lambda", "value", "lo", "hi"]),
        base.transform_filter(fitted & (alt.datum["lambda"] == -1)).mark_point(shape="diamond", size=90).encode(
            y="value:Q", tooltip=["corpus", "statistic", "kind", "value", "lo", "hi"]),
        data=simex).properties(width=240, height=150).facet(
        row=alt.Row("statistic:N", title=None), column=alt.Column("corpus:N", title=None)
    ).resolve_scale(y="independent")
    display(dg.save_chart(chart.properties(title="SIMEX: each statistic against the rounding-error variance, "
                                                 "extrapolated to λ = −1 (unrounded)"), "04d_simex", figures_dir),
            Markdown(dg.regime.described_sentence(readings[dg.model_regime.ROUNDING])))
else:
    display(Markdown("*The rounding question's cells are not all committed: no SIMEX curve is drawn.*"))

# %% [markdown]
# ### A second set of noise draws, described
#
# The first reading rested on one noise draw per $\lambda$. A second, independent set for WEB ($\lambda = 1$ seed 3,
# $\lambda = 2$ seed 4), added after the rounding was read
# ([docs/methods.md](../docs/methods.md#model-regime)), shows how far the draw alone moves the extrapolant, alone
# and averaged with the first draw at each $\lambda$. Described, not decided.

# %% tags=["hide-input"]
if draw_rows:
    display(Markdown(dg.regime.second_draw_sentence(draw_rows)), pd.DataFrame(
        [{"corpus": r["corpus"], "noise draws": r["draws"], "R(16K) at λ = 1": r["R_lambda1"],
          "at λ = 2": r["R_lambda2"], "at λ = −1 (quadratic)": r["R_unrounded"],
          "change": dg.regime.signed_pct(r["change"]), "95% interval": dg.regime.interval_pct(r["ci"])}
         for r in draw_rows]).round(3))
else:
    display(Markdown("*The second set of noise draws is not committed yet.*"))

# %% [markdown]
# ### Rounding with its draws
#
# What decides rounding (addendum 2026-12-07, section 5): three independent noise draws per $\lambda$ with common
# random numbers (the same draw scaled by $\sqrt\lambda$), CODE and WEB documents 0-7, and an interval that
# resamples the documents and the draws. The figure gives $R(16\text{K})$ at $\lambda$ = 0, 1, 2 for each draw
# (thin) and for their mean $\theta_\lambda$ (thick), each quadratic read at $\lambda = -1$ (diamonds): how far
# the draws alone move the extrapolant.

# %% tags=["hide-input"]
crn = readings[dg.model_regime.ROUNDING]["crn"]
crn_line = dg.regime.crn_sentence(crn)
display(Markdown(crn_line))
crn_rows = crn.get("curves", [])
if crn_rows:
    d = pd.DataFrame(crn_rows)
    base = alt.Chart().encode(x=alt.X("lambda:Q", title="λ (added variance / rounding's)"),
                              y=alt.Y("R:Q", title="R(16K)", scale=alt.Scale(zero=False)),
                              detail="draw:N", color=dg.corpus_color())
    thick = alt.condition(alt.datum.draw == "mean", alt.value(3), alt.value(1))
    chart = alt.layer(base.transform_filter(alt.datum.kind == "quadratic").mark_line().encode(strokeWidth=thick),
                      base.transform_filter(alt.datum.kind == "measured").mark_point(filled=True),
                      base.transform_filter(alt.datum.kind == "unrounded").mark_point(shape="diamond", size=90)
                      .encode(tooltip=["corpus", "draw", "R"]),
                      data=d).properties(width=260, height=180).facet(column=alt.Column("corpus:N", title=None))
    display(dg.save_chart(chart.resolve_scale(y="independent").properties(
        title="Rounding with common random numbers: each draw and their mean, extrapolated to λ = −1"),
        "04d_crn", figures_dir))

# %% [markdown]
# ## R(W) and ρ by lag in each regime
#
# Each cell's $R(W)$ for every window and its correlation $\rho$ by lag, with 95% intervals over the same paired
# draws as the decision (described, not decided). Lags are in tokens between the chunks' starts.

# %% tags=["hide-input"]
curves = {q: dg.model_regime.regime_curves(r, found, resamples, seed) for q, r in readings.items() if r["complete"]}
for q, cv in curves.items():
    for key, title, y in (("R", "R(W) against the window", "R(W)"), ("rho", "ρ by lag", "ρ(lag)")):
        d = pd.DataFrame(cv[key])
        base = alt.Chart().encode(x=alt.X("tokens:Q", title="window W (tokens)" if key == "R" else "lag (tokens)"),
                                  color=alt.Color("regime:N"))
        chart = alt.layer(base.mark_area(opacity=0.2).encode(y=alt.Y("lo:Q", title=y), y2="hi:Q"),
                          base.mark_line(point=key == "R").encode(y="value:Q", tooltip=["corpus", "regime", "tokens",
                                                                                        "value", "lo", "hi"]),
                          data=d).properties(width=220, height=160).facet(column=alt.Column("corpus:N", title=None))
        name = f"04d_{key}_{q.replace(' ', '_')}"
        display(dg.save_chart(chart.properties(title=f"{title}: {q}"), name, figures_dir))

# %% [markdown]
# ## The other statistics, described
#
# The mean-gradient share ($S_\mathrm{cross}$ over a chunk's mean squared gradient norm), $\rho_\mathrm{long}$
# and $B_\mathrm{simple}$ are described with their 95% paired intervals and not decided; for rounding, the linear
# extrapolant's change of $R(16\text{K})$ is shown beside the quadratic as a sensitivity check.

# %% tags=["hide-input"]
described = {q: dg.regime.described_rows(r) for q, r in readings.items() if r["complete"]}
for q, rws in described.items():
    first = readings[q].get("first_draw")
    display(Markdown(f"**{q.capitalize()}**" + (f" (its first draw, {first['n_docs']} documents)" if first else "")),
            pd.DataFrame(rws))
if not described:
    display(Markdown("*Nothing to describe until a question's cells are all committed.*"))

# %%
numbers = {"results_dir": results_dir, "regime_dir": regime_dir, "model": model, "resamples": resamples,
           "seed": seed, "result_box": box, "question_lines": details,
           "cells_present": sorted(dg.regime.cell_name(k) for k in found),
           "questions": dg.regime.reading_numbers(readings), "curves": curves,
           "simex_curves": simex.to_dict("records"), "start_token_parts": parts_table.to_dict("records"),
           "spikes": spike_reading, "first_tokens": first_tokens, "first_token_line": first_token_line,
           "other_start_tokens": other_lines, "crn_line": crn_line, "crn_curves": crn_rows,
           "training_regime": dg.regime.training_lines(training), "training_table": training_table.to_dict("records"),
           "training_spikes": training_spikes, "training_decisions": training.get("R"),
           "training_spike_free": training.get("spike_free")}
_ = dg.save_numbers("04d_model_regime", numbers, figures_dir)

# %% [markdown]
# ## References
#
# - Cook, J. R. & Stefanski, L. A. (1994). Simulation-extrapolation estimation in parametric measurement error
#   models. *Journal of the American Statistical Association* 89(428), 1314-1328.
# - Holm, S. (1979). A simple sequentially rejective multiple test procedure. *Scandinavian Journal of
#   Statistics* 6(2), 65-70.

# %%
dg.versions()
