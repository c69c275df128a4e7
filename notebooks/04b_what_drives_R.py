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
# # What drives R, and how robust it is
#
# Page 04 gives the design effect $R(16\text{K})$ of each corpus. This page takes it apart: by parameter group,
# into a part shared by documents of one source, a part shared within a document and a short-range part, and
# asks how far one document or the choice of what to resample moves it; it ends with the mean gradient and the
# gradient noise scale $B_\text{simple}$.

# %% tags=["parameters"]
results_dir = "data/results"  # directory of result files (searched recursively)
models = ["smollm2-135m", "gemma3-270m"]  # offline model names or '<id>@<revision>'; the first is read in depth
corpora = ["BOOKS", "CODE", "PAPERS", "WEB"]  # corpora to show, in this order (WEB is the control)
chunk = 512  # chunk length C in tokens
resamples = 2000  # document-bootstrap resamples (0: no intervals)
seed = 20261007  # bootstrap seed
documents = "0:48"  # result files read: documents A:B (0:48 the 48-document cells of SmolLM2; Gemma has 0:16)
figures_dir = "figures"  # where figures and the numbers file are written

# %%
from docgrad import page as dg

ROOT = dg.setup()

import altair as alt
import pandas as pd
from IPython.display import Markdown, display

page = dg.StudyPage(results_dir, models, corpora, documents, resamples, seed, chunk)   # reads the result files once
page_models, study, reports, decomps = page.models, page.study, page.reports, page.decomps
label = page.label                                # the model read in depth
decomp = decomps[label]
final = dg.published.final_checkpoints()
final = final[final["corpus"].isin(corpora)]
shares = {lab: {c.corpus: dg.decomposition.mean_gradient_share(c.all.S_cross, c.all.sigma2) for c in r.cells}
          for lab, r in reports.items()}
without_norms = {m.label: {k: dg.decomposition.without_groups(study.cell(m, k).sums, chunk, ["other"])
                           for k in decomps[m.label] if "other" in study.cell(m, k).sums} for m in page_models}
pub_shares = final[final.corpus.isin(dg.design_effect.LONG_DOCUMENT_CORPORA)]["mean_gradient_share"].tolist()

# %% tags=["hide-input"]
display(Markdown(dg.design_effect.drivers_box(label, decomp, shares[label], without_norms[label], pub_shares)))

# %% [markdown]
# ## Per parameter group
#
# Each parameter group (attention, MLP, the embedding with the tied output matrix, and the rest: the norm
# weights) has its own Gram and so its own $R(16\text{K})$. A model's overall $R$ weights the groups by their
# shares of its noise $\sigma^2$; the models split their parameters very differently (Gemma-3-270M's embedding
# is most of its parameters).

# %%
order = list(corpora)
color = dg.corpus_color(order)
model_order = [m.label for m in page_models]
groups_by_model = pd.concat([dg.tables.group_frame(r) for r in reports.values()], ignore_index=True)
gpick = dg.legend_pick()
chart_groups = alt.Chart(groups_by_model).mark_point(filled=True, size=70).encode(
    x=alt.X("group:N", sort=list(dg.GROUPS), title="parameter group"), y=alt.Y("R_16K:Q", title="R(16K) of the group"),
    color=color, opacity=dg.highlight(gpick, 1.0, 0.15),
    tooltip=["model:N", "corpus:N", "group:N", alt.Tooltip("R_16K:Q", format=".3f"),
             alt.Tooltip("share of sigma2:Q", format=".3f", title="share of σ²")],
).add_params(gpick).properties(width=240, height=220).facet(column=alt.Column("model:N", title=None, sort=model_order))
display(dg.save_chart(chart_groups, "04b_R_by_group_and_model", figures_dir))
groups_by_model.pivot_table(index=["model", "corpus"], columns="group", values=["R_16K", "share of sigma2"],
                            sort=False).round(3)

# %% [markdown]
# ## Source, document and short range
#
# Where several documents come from one source (an author, a work, a project owner), their chunks share part
# of their noise with each other, not only within a document. Measured about the mean inner product of chunks
# of *different sources*, $R(16\text{K})$ splits exactly into
#
# $$R_\text{x}(mC) = 1 + (m-1)\,\rho_\text{src} + (m-1)\,\rho_\text{doc} + \text{short range},$$
#
# the chunk itself, the source term, the document term and the rest; $R_\text{within} = R_\text{x} -
# (m-1)\rho_\text{src}$ is $R$ without the source term ([docs/methods.md](../docs/methods.md#decomposition)).
# The study's estimator centres on the mean over all cross-document pairs, same-source ones included, so with
# shared sources it lies between the two. Bars: the parts of $R_\text{x}$; black tick: the study's $R$; white
# tick: $R_\text{within}$. This section and the next read the first model of `models` in depth.

# %%
comp = dg.tables.R_components_frame(decomp)
pick2 = dg.legend_pick("component")
ccolor = alt.Color("component:N", sort=list(dg.tables.R_COMPONENTS), title="part of R_x(16K)",
                   scale=alt.Scale(domain=list(dg.tables.R_COMPONENTS),
                                   range=["#bbbbbb", "#d62728", "#1f77b4", "#9ecae1"]))
bars = alt.Chart(comp).mark_bar().encode(
    y=alt.Y("corpus:N", sort=order, title=None), x=alt.X("value:Q", stack="zero", title="R(16K)"),
    color=ccolor, order=alt.Order("order:Q"), opacity=dg.highlight(pick2, 1.0, 0.25),
    tooltip=["corpus:N", "component:N", alt.Tooltip("value:Q", format=".3f"), alt.Tooltip("R_x:Q", format=".3f"),
             alt.Tooltip("R:Q", format=".3f", title="study's R"), alt.Tooltip("R_within:Q", format=".3f")],
).add_params(pick2)
ticks = comp.drop_duplicates("corpus")
tick_R = alt.Chart(ticks).mark_tick(color="black", thickness=3, size=34, opacity=1).encode(
    y=alt.Y("corpus:N", sort=order), x="R:Q", tooltip=[alt.Tooltip("R:Q", format=".3f", title="study's R")])
tick_W = alt.Chart(ticks).mark_tick(color="white", thickness=3, size=34, opacity=1).encode(
    y=alt.Y("corpus:N", sort=order), x="R_within:Q",
    tooltip=[alt.Tooltip("R_within:Q", format=".3f", title="R without the source term")])
display(dg.save_chart((bars + tick_R + tick_W).properties(width=520, height=200), "04b_R_components", figures_dir))
drive_lines = dg.design_effect.decomposition_lines(decomp)
display(Markdown("\n".join(f"- {s}" for s in drive_lines)))

# %% [markdown]
# ## How robust it is
#
# **Leave one document out**: the estimators with one document's weight set to 0 (page 03 has the chart), and
# the jackknife standard error ([Efron & Tibshirani 1993](#References)). **Resample sources, not documents**:
# where documents share a source they are not independent draws; the source-clustered bootstrap draws sources
# with replacement and takes all documents of each ([Davison & Hinkley 1997](#References)).

# %%
man = study.manifest(page_models[0])
titles = {k: {int(d["doc"]): d["title"] for d in man.get("corpora", {}).get(k, {}).get("documents", [])}
          for k in decomp}
rob_lines = dg.design_effect.robustness_lines(decomp, titles)
display(Markdown("\n".join(f"- {s}" for s in rob_lines)))
dg.tables.bootstrap_frame(decomp, stats=("R", "R_within")).round(3)

# %% [markdown]
# ## The mean gradient and B_simple
#
# The gradient noise scale $B_\text{simple} = C\sigma^2/S_\text{cross}$ ([McCandlish et al. 2018](#References))
# is the batch size (in tokens) beyond which larger batches of independent chunks give diminishing returns;
# for contiguous 16K blocks it is $R(16\text{K})$ times larger. It is $C(1/s - 1)$ with $s =
# S_\text{cross}/(S_\text{cross} + \sigma^2)$, the share of a chunk gradient's expected squared norm that is the
# mean gradient. Log scale; ours with 95% intervals, the published final checkpoints without (none published).

# %%
bsf = pd.concat([dg.tables.b_simple_frame(r, decomps[lab], final if lab == label else final.iloc[0:0])
                 for lab, r in reports.items()], ignore_index=True)
pick3 = dg.legend_pick()
bx = alt.X("source:N", title=None, sort=list(dict.fromkeys(bsf["source"])))
by = alt.Y("B_simple_shuf:Q", title="B_simple, shuffled chunks (tokens)", scale=alt.Scale(type="log"))
chart_Bp = alt.layer(   # points first: the layer that draws the colour legend holds the selection
    alt.Chart(bsf).mark_point(filled=True, size=70).encode(
        x=bx, y=by, xOffset="corpus:N", color=color, opacity=dg.highlight(pick3, 1.0, 0.15),
        tooltip=["source:N", "corpus:N", alt.Tooltip("B_simple_shuf:Q", format=",.0f"),
                 alt.Tooltip("shuf_lo:Q", format=",.0f", title="95% lo"),
                 alt.Tooltip("shuf_hi:Q", format=",.0f", title="95% hi"),
                 alt.Tooltip("mean_gradient_share:Q", format=".4f", title="S/(S+σ²)")]).add_params(pick3),
    alt.Chart(bsf).mark_errorbar(ticks=True).encode(
        x=bx, y=alt.Y("shuf_lo:Q", title="B_simple, shuffled chunks (tokens)"), y2="shuf_hi:Q", xOffset="corpus:N",
        color=color, opacity=dg.highlight(pick3, 0.9, 0.1)),
).properties(width=420, height=280)
display(dg.save_chart(chart_Bp, "04b_B_simple_vs_published", figures_dir))
R16 = {lab: {c.corpus: c.all.R_16K for c in r.cells} for lab, r in reports.items()}
pub_by = {k: float(v) for k, v in final[final.corpus.isin(dg.design_effect.LONG_DOCUMENT_CORPORA)]
          .set_index(["model_label", "corpus"])["mean_gradient_share"].items()} if len(final) else {}
mg_lines = dg.design_effect.mean_gradient_lines(shares, without_norms, pub_by, R16)
display(Markdown("\n".join(f"- {s}" for s in mg_lines)))
dg.tables.three_significant(bsf[["source", "corpus", "B_simple_shuf", "shuf_lo", "shuf_hi", "B_simple_contig_16K",
                                 "mean_gradient_share"]])

# %%
numbers = {"results_dir": results_dir, "chunk": chunk, "resamples": resamples, "seed": seed, "documents": documents,
           "model": label, "models": [m.__dict__ for m in page_models],
           "result_box": dg.design_effect.drivers_box(label, decomp, shares[label], without_norms[label], pub_shares),
           "groups_by_model": groups_by_model.to_dict("records"),
           "decomposition": {k: d.to_json() for k, d in decomp.items()}, "decomposition_lines": drive_lines,
           "robustness_lines": rob_lines, "mean_gradient_share": shares, "without_norm_weights": without_norms,
           "published_mean_gradient_share": {f"{a} {b}": v for (a, b), v in pub_by.items()},
           "mean_gradient_lines": mg_lines, "B_simple": bsf.to_dict("records")}
_ = dg.save_numbers("04b_what_drives_R", numbers, figures_dir)

# %% [markdown]
# ## References
#
# - McCandlish, S., Kaplan, J., Amodei, D., & OpenAI Dota Team (2018). *An Empirical Model of Large-Batch
#   Training*. [arXiv:1812.06162](https://arxiv.org/abs/1812.06162). (Gradient noise scale $B_\text{simple}$.)
# - Efron, B., & Tibshirani, R. J. (1993). *An Introduction to the Bootstrap*. New York: Chapman & Hall.
#   (Bootstrap and jackknife.)
# - Davison, A. C., & Hinkley, D. V. (1997). *Bootstrap Methods and their Application*. Cambridge University
#   Press. (Resampling the top level of hierarchical data: the source-clustered bootstrap.)
# - Searle, S. R., Casella, G., & McCulloch, C. E. (1992). *Variance Components*. New York: Wiley. (Nested
#   random effects: the source / document / chunk parts of R.)

# %%
dg.versions()
