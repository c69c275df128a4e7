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
# Every number on pages 03 and 04 comes from 512-token chunks run as *standalone* sequences: chunk $k$ of a
# document sees none of the text before it. That is a proxy for long-context training, and the published study
# says so: "real long-context gradients, where each chunk attends to the ones before it, were not measured".
# This page measures them. In the *causal* context the first $W$ tokens of each document are one training
# sequence, and the gradient of chunk $k$ is that of the loss of the tokens chunk $k$ predicts, with every
# earlier token of the window as context and full backpropagation through it
# ([docs/methods.md](../docs/methods.md#causal-context)); the standalone results for the same tokens are chunks
# $0,\dots,m-1$ ($m = W/C$) of the same documents in the standard cells.
#
# Per corpus, side by side: the gradient-noise correlation $\rho(\Delta)$ and the design effect $R(W')$ for
# windows $W' \le W$ in both modes, the loss and the gradient's squared norm by chunk position, and what changes
# in the design-effect reading. Intervals are 95% document bootstraps ([Efron & Tibshirani 1993](#References)),
# **paired**: each draw resamples the documents once and uses the same documents in both modes, so the interval
# of a difference (causal − standalone) leaves out what varies between documents in the same way in both modes
# ([docs/methods.md](../docs/methods.md#standalone-vs-causal)).

# %% tags=["parameters"]
causal_dir = "data/results"  # directory of causal result files (docgrad probe --context causal; searched recursively)
standalone_dir = "data/results"  # directory of the standalone results of the same documents
model = "smollm2-135m"  # offline model name or '<id>@<revision>'
corpora = ["BOOKS", "CODE", "PAPERS", "WEB"]  # corpora to show, in this order (WEB is the control)
chunk = 512  # chunk length C in tokens
window = 4096  # causal window W in tokens, a multiple of chunk (W / C chunks per document)
resamples = 2000  # document-bootstrap resamples (0: no intervals)
seed = 20261007  # bootstrap seed
figures_dir = "figures"  # where figures and the numbers file are written

# %%
from docgrad.runtime.pages import save_chart, save_numbers, setup, versions

ROOT = setup()

import altair as alt
import pandas as pd
from IPython.display import Markdown, display

from docgrad import models as model_registry
from docgrad.presentation import causal
from docgrad.results import positions
from docgrad.presentation.charts import corpus_color

# %% [markdown]
# ## What is measured
#
# Which of the requested corpora have a causal result at this window, and for those that do not, why. The
# committed causal results (16 documents per corpus, $W = 4096$) take several hours of CPU; the README says how
# to run them (`make probe-causal`).

# %%
page_model = model_registry.result_model(model)
pc = positions.page_comparisons(causal_dir, standalone_dir, page_model.model, page_model.revision, chunk, window,
                                corpora, resamples, seed)
comps = pc.comparisons
measured = pc.measured
m_chunks = window // chunk
lines = [f"- model **{page_model.label}** (`{page_model.model}` at `{page_model.revision}`); C = {chunk} tokens, "
         f"W = {window} tokens ({m_chunks} chunks per window); causal results from `{causal_dir}`, standalone "
         f"from `{standalone_dir}`; {resamples} paired bootstrap resamples",
         f"- **measured**: {', '.join(f'{k} ({comps[k].n_docs} documents)' for k in measured) or 'none'}"]
lines += [f"- **not measured yet: {k}**: {why}" for k, why in pc.not_measured.items()]
if not measured:
    lines.append(f"\n**Nothing is measured yet.** There is no causal result of {page_model.label} at W = {window} "
                 f"for {', '.join(corpora)}: every section below is empty until the causal probe has run "
                 "(`make probe-causal`, several hours on 2 CPU cores, resumable; then `docgrad run 06`). The "
                 "standalone proxy of pages 03 and 04 stands unchecked against real context.")
elif pc.not_measured:
    lines.append(f"\nOnly {', '.join(measured)} {'is' if len(measured) == 1 else 'are'} compared below; "
                 f"{', '.join(pc.not_measured)} {'is' if len(pc.not_measured) == 1 else 'are'} not measured yet.")
display(Markdown("\n".join(lines)))
order = [k for k in corpora if k in measured]
modes = [positions.STANDALONE_MODE, positions.CAUSAL_MODE, positions.DIFFERENCE]
mode_color = alt.Color("mode:N", title="gradients", sort=modes, scale=alt.Scale(domain=modes))


def side_by_side(frame, x, y, x_title, value_title, name, ref=0.0, log_x=False):
    """Both modes (top row, a rule at `ref`) and their difference with its paired interval (bottom row, a rule at
    0), one column per corpus; hover for values."""
    diff = frame["mode"] == positions.DIFFERENCE
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
    return display(save_chart(chart, name, figures_dir))


# %% [markdown]
# ## ρ(Δ) in both modes
#
# In the causal context the chunk positions of a window are not exchangeable: chunk $k$ has $k$ chunks of
# context, so its loss and gradient change with $k$. $\rho(\Delta)$ pools them as the standalone estimator does,
# weighting the $m-\Delta/C$ start positions of lag $\Delta$ equally: it is a covariance averaged over start
# positions relative to the noise $\sigma^2$ of a chunk at a uniformly random position of the window, not an
# average of per-position correlations ([docs/methods.md](../docs/methods.md#causal-context)). Top row: each
# mode with its interval; bottom row: causal − standalone with its paired interval (0 dashed).

# %%
if measured:
    rho = causal.rho_by_mode_frame(comps)
    side_by_side(rho, "lag_tokens", "rho", "distance Δ between chunks (tokens)", "ρ(Δ)", "06_rho_by_mode")
else:
    display(Markdown("*Not measured yet: no causal result to show.*"))

# %% [markdown]
# ## R(W′) for windows up to W
#
# Kish's design effect ([Kish 1965](#References))
# $R(W') = 1 + \frac{2}{m'}\sum_{l=1}^{m'-1}(m'-l)\,\rho(l)$ for blocks of $m' = W'/C$ chunks, up to the causal
# window. In the causal context $R(W)$ compares the noise of a window's mean chunk gradient (what one $W$-token
# training sequence contributes) with that of $m$ independent chunks, each at a random position of a window.

# %%
if measured:
    R_by = causal.R_by_mode_frame(comps)
    side_by_side(R_by, "W_tokens", "R", "window W′ (tokens)", "R(W′)", "06_R_by_mode", ref=1.0, log_x=True)
    summary = pd.DataFrame([{
        "corpus": k, "documents": c.n_docs,
        f"R({window}) standalone": c.standalone.R[window], "lo (s)": c.standalone.interval("R", window)[0],
        "hi (s)": c.standalone.interval("R", window)[1],
        f"R({window}) causal": c.causal.R[window], "lo (c)": c.causal.interval("R", window)[0],
        "hi (c)": c.causal.interval("R", window)[1],
        "difference": c.difference["R"][window], "lo (d)": (c.difference["R_ci"].get(window) or (None,))[0],
        "hi (d)": (c.difference["R_ci"].get(window) or (None, None))[1],
        "σ² causal / standalone": c.ratio["sigma2"],
        "window noise causal / standalone": c.ratio["window_noise"]} for k, c in comps.items()]).set_index("corpus")
    display(summary.round(3))
else:
    display(Markdown("*Not measured yet.*"))

# %% [markdown]
# ## Loss and gradient norm by chunk position
#
# Mean loss (nats per target token) and mean squared gradient norm $\lVert g_{d,k}\rVert^2$ at each chunk
# position $k$ of the window, over the documents, in both modes with their intervals. Chunk 0 has no context in
# either mode (the same $C-1$ targets; the two agree to float rounding); from chunk 1 on, the causal chunk also
# predicts its first token from the chunk before it ($C$ targets against $C-1$ standalone). Context should lower
# the later chunks' loss.

# %%
if measured:
    pos = causal.position_frame(comps)
    both_modes = pos[pos["mode"] != positions.DIFFERENCE].assign(
        quantity=lambda f: f["quantity"].map({"loss": "mean loss (nats/token)", "sqnorm": "mean |g|²"}))
    xk = alt.X("position:O", title="chunk position k in the window", axis=alt.Axis(labelAngle=0))
    two = alt.Color("mode:N", title="gradients", sort=modes[:2], scale=alt.Scale(domain=modes[:2]))
    tip = ["corpus:N", "mode:N", "position:O", alt.Tooltip("value:Q", format=".4f"),
           alt.Tooltip("lo:Q", format=".4f", title="95% lo"), alt.Tooltip("hi:Q", format=".4f", title="95% hi")]
    chart_pos = alt.layer(
        alt.Chart().mark_errorbar(ticks=True).encode(x=xk, y=alt.Y("lo:Q", title=None), y2="hi:Q", color=two,
                                                     xOffset=alt.XOffset("mode:N", sort=modes)),
        alt.Chart().mark_point(filled=True, size=50).encode(x=xk, y=alt.Y("value:Q", title=None,
                                                                          scale=alt.Scale(zero=False)),
                                                            color=two, tooltip=tip,
                                                            xOffset=alt.XOffset("mode:N", sort=modes)),
        data=both_modes,
    ).properties(width=200, height=170).facet(
        column=alt.Column("corpus:N", sort=order, title=None),
        row=alt.Row("quantity:N", title=None)).resolve_scale(y="independent")
    display(save_chart(chart_pos, "06_loss_norm_by_position", figures_dir))
    diff_pos = pos[pos["mode"] == positions.DIFFERENCE].pivot_table(
        index=["corpus", "position"], columns="quantity", values=["value", "lo", "hi"], sort=False)
    display(Markdown("Causal − standalone by position (paired intervals):"))
    display(diff_pos.round(4))
else:
    display(Markdown("*Not measured yet.*"))

# %% [markdown]
# ## What changes in the design-effect reading
#
# Computed from the numbers above, corpus by corpus: $R(W)$ in both modes and their difference (*resolved* when
# its paired interval excludes 0), the effective number of independent chunks $m/R(W)$ a $W$-token window
# carries, the per-chunk noise $\sigma^2$ and the noise of a window's mean gradient $\sigma^2 R(W)/m$ (causal /
# standalone), and what context does to the loss of the window's last chunk. Then across corpora: the ordering by
# $R(W)$ in each mode, each pair of corpora resolved by the bootstrap or not, and whether the two modes order any
# resolved pair oppositely (`docgrad.presentation.causal.overall_reading`).

# %%
readings = {k: causal.mode_reading(c) for k, c in comps.items()}
facts = {k: f for k, (f, _) in readings.items()}
overall_facts, overall = causal.overall_reading(comps, pc.not_measured, window)
text = [f"- {line}" for k in order for line in readings[k][1]]
display(Markdown("\n".join(text) + "\n\n" + " ".join(overall)))

# %%
numbers = {"parameters": {"causal_dir": causal_dir, "standalone_dir": standalone_dir, "model": model,
                          "corpora": list(corpora), "chunk": chunk, "window": window, "resamples": resamples,
                          "seed": seed},
           "model": {"id": page_model.model, "revision": page_model.revision, "label": page_model.label},
           "chunks_per_window": m_chunks, "measured": measured, "not_measured": pc.not_measured,
           "causal_windows": pc.causal_windows, "nothing_measured": not measured,
           "comparisons": {k: c.to_json() for k, c in comps.items()}, "readings": facts,
           "overall": overall_facts}
_ = save_numbers("06_causal_context", numbers, figures_dir)

# %% [markdown]
# ## References
#
# - Yang, H. (2026). *Long documents make your batch smaller than it looks: measuring within-document gradient
#   correlation* (doc-batch-gradients). Zenodo. [doi:10.5281/zenodo.23268861](https://doi.org/10.5281/zenodo.23268861).
#   The study whose standalone-chunk proxy this page checks.
# - Kish, L. (1965). *Survey Sampling*. New York: Wiley. (Design effect.)
# - Efron, B., & Tibshirani, R. J. (1993). *An Introduction to the Bootstrap*. New York: Chapman & Hall.
#   (Bootstrap; paired resampling of the same units in two conditions.)

# %%
versions()
