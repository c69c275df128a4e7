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
# # Standalone chunks vs real context
#
# Pages 03 and 04 measure 512-token *chunks* run as *standalone* sequences: chunk $k$ of a document sees none of
# the text before it, a proxy for long-context training. Here the first $W$ tokens of each document are one
# training sequence (the *causal* context): the gradient of chunk $k$ is that of the loss of the tokens it
# predicts, with every earlier token of the window as context ([methods](../docs/methods.md#causal-context)). The
# standalone results for the same tokens are chunks $0,\dots,m-1$ ($m = W/C$, $C$ the chunk length) of the same
# documents.
#
# **Terms.** $\rho(\Delta)$ is the correlation of the gradient noise of two chunks $\Delta$ tokens apart in one
# document; $R(W')$, the *design effect*, is the noise of the mean gradient of a contiguous $W'$-token block
# relative to that of $W'/C$ independent chunks ([Kish 1965](#References)). *Position means*: with context the mean
# gradient $G_k$ of chunk position $k$ can change with $k$; pages 03–04's estimators measure noise around one mean
# of all positions, so a drifting $G_k$ enters $\rho$ as a spurious correlation (a steady drift makes it negative
# at long lags). The *centred* estimators measure noise around each position's own mean, estimated from pairs of
# different documents so that no document is compared with itself
# ([methods](../docs/methods.md#standalone-vs-causal)). *Paired*: each bootstrap draw resamples the documents once
# and uses them in both modes ([Efron & Tibshirani 1993](#References)). A comparison is *resolved* when Holm's
# step-down over every comparison the page states ([Holm 1979](#References)) rejects it; one that is not is *not
# resolved*, never "no difference".

# %% tags=["parameters"]
causal_dir = "data/results"  # directory of causal result files (docgrad probe --context causal; searched recursively)
standalone_dir = "data/results"  # directory of the standalone results of the same documents
model = "smollm2-135m"  # offline model name or '<id>@<revision>'
corpora = ["BOOKS", "CODE", "PAPERS", "WEB"]  # corpora to show, in this order (WEB is the control)
chunk = 512  # chunk length C in tokens
window = 4096  # causal window W in tokens, a multiple of chunk (W / C chunks per document)
resamples = 2000  # document-bootstrap resamples (0: no intervals)
seed = 20261007  # bootstrap seed
regime_dir = "data/regime"  # the model-regime cells: causal windows with <|endoftext|> at position 0 (page 04d)
figures_dir = "figures"  # where figures and the numbers file are written

# %%
from docgrad import page as dg

ROOT = dg.setup()

import altair as alt
import pandas as pd
from IPython.display import Markdown, display

page_model = dg.models.result_model(model)
pc = dg.positions.page_comparisons(causal_dir, standalone_dir, page_model.model, page_model.revision, chunk, window,
                                   corpora, resamples, seed)
comps = pc.comparisons
measured = pc.measured
family = dg.positions.comparison_family(comps, quantities=dg.positions.GRADIENT_QUANTITIES)   # the findings
check = dg.positions.comparison_family(comps, quantities=dg.positions.CHECK_QUANTITIES)      # context is used

# %% tags=["hide-input"]
box_facts, box = dg.causal.result_box(pc, family, page_model.label, check)
display(Markdown(box))

# %% [markdown]
# ## What is measured

# %%
display(Markdown("\n".join(dg.causal.measured_lines(pc, page_model.label, causal_dir, standalone_dir, resamples))))
order = [k for k in corpora if k in measured]
modes = list(dg.causal.FIGURE_MODES)
mode_color = alt.Color("mode:N", title="gradients", sort=modes, scale=alt.Scale(domain=modes))


def side_by_side(frame, x, y, x_title, value_title, name, ref=0.0, log_x=False):
    """Both modes (top row, a rule at `ref`) and the two differences with their paired intervals (bottom row, a
    rule at 0), one column per corpus; hover for values."""
    diff = frame["mode"].isin([dg.causal.CENTRED_DIFFERENCE, dg.causal.UNCENTRED_DIFFERENCE])
    frame = frame.assign(panel=["causal − standalone" if d else value_title for d in diff],
                         ref=[0.0 if d else ref for d in diff])
    xs = alt.X(f"{x}:Q", title=x_title, scale=alt.Scale(type="log", base=2) if log_x else alt.Scale(domainMin=0))
    tip = ["corpus:N", "mode:N", alt.Tooltip(f"{x}:Q", title=x_title), alt.Tooltip(f"{y}:Q", format=".4f"),
           alt.Tooltip("lo:Q", format=".4f", title="95% lo"), alt.Tooltip("hi:Q", format=".4f", title="95% hi")]
    rule = alt.Chart().mark_rule(color="grey", strokeDash=[3, 3]).encode(y=alt.Y("ref:Q", title=None))
    bars = alt.Chart().mark_errorbar(ticks=True).encode(x=xs, y=alt.Y("lo:Q", title=None), y2="hi:Q",
                                                        color=mode_color)
    line = alt.Chart().mark_line(point=True).encode(
        x=xs, y=alt.Y(f"{y}:Q", title=None, scale=alt.Scale(zero=False)), color=mode_color, tooltip=tip)
    chart = alt.layer(rule, bars, line, data=frame).properties(width=200, height=170).facet(
        column=alt.Column("corpus:N", sort=order, title=None),
        row=alt.Row("panel:N", sort=[value_title, "causal − standalone"], title=None),
    ).resolve_scale(y="independent")
    return display(dg.save_chart(chart, name, figures_dir))


# %% [markdown]
# ## ρ(Δ) and R(W′) in both modes
#
# Top rows: the centred estimators in each mode with 95% intervals; bottom rows: causal − standalone, centred and
# uncentred (pages 03–04's estimator), with paired 95% intervals (0 dashed). At the whole window
# $R(W) = 1 + \frac{2}{m}\sum_{l=1}^{m-1}(m-l)\,\rho(l)$ holds exactly for both estimators.

# %%
if measured:
    side_by_side(dg.causal.rho_by_mode_frame(comps), "lag_tokens", "rho", "distance Δ between chunks (tokens)",
                 "ρ(Δ), centred", "06_rho_by_mode")
    side_by_side(dg.causal.R_by_mode_frame(comps), "W_tokens", "R", "window W′ (tokens)", "R(W′), centred",
                 "06_R_by_mode", ref=1.0, log_x=True)
else:
    display(Markdown("*Not measured yet: no causal result to show.*"))

# %% [markdown]
# ## Every comparison the page states
#
# Per corpus: the centred $\rho$ difference at every lag, the centred $R$ difference at every window $W' > C$
# ($R(C) = 1$ in both modes), the ratio of the *window noise* $\sigma^2 R(W)/m$ (the noise of a window's mean
# chunk gradient, what one $W$-token training sequence contributes; centring does not change it) and, at the last
# chunk, the ratios (causal / standalone) of the mean squared gradient norm $\lVert g\rVert^2$ and of the squared
# norm of the position mean $\lVert G_k\rVert^2$. All of them form one family under Holm at family-wise level 5%:
# each has a two-sided bootstrap p-value from its paired draws and its interval at the level Holm tests it at. The
# uncentred difference is shown beside the centred one; it is not tested. The last chunk's loss is not among
# them: a model that reads its context should predict better with it, so its fall is a *check* that the context
# is used, tested apart (second table, Holm over the corpora), not a finding.

# %%
if measured:
    display(dg.causal.family_frame(family, comps))
    display(dg.causal.family_frame(check, comps))
else:
    display(Markdown("*Not measured yet.*"))

# %% [markdown]
# ## Loss, gradient norm and position means by chunk position
#
# Mean loss (nats per target token), mean squared gradient norm $\lVert g_{d,k}\rVert^2$ and the squared norm of
# the position mean $\lVert G_k\rVert^2$ (from pairs of different documents) at each chunk position $k$, in both
# modes with 95% intervals. Chunk 0 has no context in either mode. Below: $\lVert G_k\rVert^2$ at the first and
# last chunk, the share $\sigma^2_\mathrm{pos}/\sigma^2$ of the noise that is spread of the position means, and
# the position-mean term $\mu$ of $\rho$ at the longest lag (uncentred $\rho = (\sigma^2_c/\sigma^2)\rho_c + \mu$,
# [methods](../docs/methods.md#standalone-vs-causal)).

# %%
if measured:
    pos = dg.causal.position_frame(comps)
    both_modes = pos[pos["mode"] != dg.positions.DIFFERENCE].assign(
        quantity=lambda f: f["quantity"].map(dg.causal.QUANTITY_LABELS))
    xk = alt.X("position:O", title="chunk position k in the window", axis=alt.Axis(labelAngle=0))
    two = alt.Color("mode:N", title="gradients", sort=modes[:2], scale=alt.Scale(domain=modes[:2]))
    tip = ["corpus:N", "mode:N", "position:O", alt.Tooltip("value:Q", format=".4f"),
           alt.Tooltip("lo:Q", format=".4f", title="95% lo"), alt.Tooltip("hi:Q", format=".4f", title="95% hi")]
    chart_pos = alt.layer(
        alt.Chart().mark_errorbar(ticks=True).encode(x=xk, y=alt.Y("lo:Q", title=None), y2="hi:Q", color=two,
                                                     xOffset=alt.XOffset("mode:N", sort=modes[:2])),
        alt.Chart().mark_point(filled=True, size=50).encode(x=xk, y=alt.Y("value:Q", title=None,
                                                                          scale=alt.Scale(zero=False)),
                                                            color=two, tooltip=tip,
                                                            xOffset=alt.XOffset("mode:N", sort=modes[:2])),
        data=both_modes,
    ).properties(width=200, height=150).facet(
        column=alt.Column("corpus:N", sort=order, title=None),
        row=alt.Row("quantity:N", sort=list(dg.causal.QUANTITY_LABELS.values()), title=None),
    ).resolve_scale(y="independent")
    display(dg.save_chart(chart_pos, "06_loss_norm_by_position", figures_dir))
    display(dg.causal.position_mean_frame(comps))
    position_facts, position_line = dg.causal.position_reading(comps)
    display(Markdown(position_line))
else:
    position_facts = {}
    display(Markdown("*Not measured yet.*"))

# %% [markdown]
# ## Reading
#
# Per corpus, from the family above (`docgrad.presentation.causal.corpus_reading`): the resolved comparisons with
# their intervals at Holm's level, and the others; then the check that the context is used.

# %%
reading_facts, reading_lines = dg.causal.readings(pc, family, check)
display(Markdown("\n".join(reading_lines)))

# %% [markdown]
# ## With a start token at the head of each window
#
# Long-context training feeds one document per sequence with the model's separator `<|endoftext|>` at position 0.
# The same windows with it (`docgrad probe --context causal --start-token 0`), against the windows above and the
# window's chunks run alone, with and without it ahead of each chunk: paired, on the same documents, decided by
# the rule stated before these cells existed ([docs/methods.md](../docs/methods.md#model-regime), addendum
# 2026-12-07, section 4). Page 04d's $R(4\text{K})$ differs from this page's for the same documents: it averages
# the four 4K blocks of each 16K span, this page reads the first block only, the one the causal window covers.

# %% tags=["hide-input"]
training = dg.model_regime.read_training_regime_of(causal_dir, regime_dir, model, resamples, seed, window)
regime_readings = (dg.model_regime.read_model_regime(standalone_dir, regime_dir)[1]
                   if model == "smollm2-135m" else {})    # the regime cells are SmolLM2's
regime_line = dg.regime.limitation_line(regime_readings) if regime_readings else ""
display(Markdown("\n".join(dg.regime.training_lines(training)) + "\n\n" + regime_line))
training_table = pd.DataFrame(dg.regime.training_rows(training))   # each regime's R(4K) beside its parts (as 04d)
if len(training_table):
    display(training_table.round(3))

# %%
numbers = {"parameters": {"causal_dir": causal_dir, "standalone_dir": standalone_dir, "model": model,
                          "corpora": list(corpora), "chunk": chunk, "window": window, "resamples": resamples,
                          "seed": seed},
           "model": {"id": page_model.model, "revision": page_model.revision, "label": page_model.label},
           "chunks_per_window": window // chunk, "measured": measured, "not_measured": pc.not_measured,
           "causal_windows": pc.causal_windows, "nothing_measured": not measured,
           "comparisons": {k: c.to_json() for k, c in comps.items()}, "family": dg.causal.family_facts(family),
           "check": dg.causal.family_facts(check),
           "result_box": box_facts, "positions": position_facts, "corpus_readings": reading_facts,
           "readings": {k: dg.causal.window_facts(c) for k, c in comps.items()},
           "training_regime": dg.regime.training_lines(training), "regime_line": regime_line,
           "training_table": training_table.to_dict("records"),
           "training_decisions": training.get("R"), "training_spike_free": training.get("spike_free"),
           "model_regime": dg.regime.reading_numbers(regime_readings)}
_ = dg.save_numbers("06_causal_context", numbers, figures_dir)

# %% [markdown]
# ## References
#
# - Yang, H. (2026). *Long documents make your batch smaller than it looks: measuring within-document gradient
#   correlation* (doc-batch-gradients). Zenodo. [doi:10.5281/zenodo.23268861](https://doi.org/10.5281/zenodo.23268861).
#   The study whose standalone-chunk proxy this page checks.
# - Kish, L. (1965). *Survey Sampling*. New York: Wiley. (Design effect.)
# - Efron, B., & Tibshirani, R. J. (1993). *An Introduction to the Bootstrap*. New York: Chapman & Hall.
#   (Bootstrap; paired resampling of the same units in two conditions.)
# - Holm, S. (1979). A simple sequentially rejective multiple test procedure. *Scandinavian Journal of
#   Statistics* 6(2), 65–70. (Holm's step-down.)

# %%
dg.versions()
