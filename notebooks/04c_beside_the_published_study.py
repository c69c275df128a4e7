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
# # Beside the published study
#
# Which orderings of the corpora by $R(16\text{K})$ do our data resolve, do two models order them alike, and
# what can be compared with the published Pythia-1.4B and OLMo-2-1B numbers ([Yang 2026](#References))? The
# published study found CODE > PAPERS > BOOKS; our point estimates differ.

# %% tags=["parameters"]
results_dir = "data/results"  # directory of result files (searched recursively)
models = ["smollm2-135m", "gemma3-270m"]  # offline model names or '<id>@<revision>'; the first is read in depth
corpora = ["BOOKS", "CODE", "PAPERS", "WEB"]  # corpora to show, in this order (WEB is the control)
chunk = 512  # chunk length C in tokens
resamples = 2000  # document-bootstrap resamples (0: no intervals)
seed = 20261007  # bootstrap seed
documents = "0:48"  # result files read: documents A:B (0:48 the 48-document cells of SmolLM2; Gemma has 0:16)
replication = "16:48"  # documents measured after the ordering rule was written, read apart ("": none)
replication_models = ["smollm2-135m"]  # models measured on those documents (Gemma has documents 0-15 only)
figures_dir = "figures"  # where figures and the numbers file are written

# %%
from docgrad import page as dg

ROOT = dg.setup()

from itertools import combinations

import altair as alt
import pandas as pd
from IPython.display import Markdown, display

page = dg.StudyPage(results_dir, models, corpora, documents, resamples, seed, chunk)   # reads the result files once
page_models, study, reports, decomps, label = page.models, page.study, page.reports, page.decomps, page.label
model_order = [m.label for m in page_models]
final = dg.published.final_checkpoints()
final = final[final["corpus"].isin(corpora)]
PUBLISHED_ORDER = ["CODE", "PAPERS", "BOOKS"]     # the published study's finding, stated before our data
long_corpora = [k for k in corpora if k != dg.CONTROL]

R_16K = {m.label: study.R_16K(m, corpora) for m in page_models}   # ({corpus: R(16K)}, {corpus: bootstrap draws})
orderings = {m.label: study.ordering(m, long_corpora, PUBLISHED_ORDER) for m in page_models}   # Holm per model
pairs = {lab: o["pairs"] for lab, o in orderings.items() if o["pairs"]}
decisions = {lab: orderings[lab]["decision"] for lab in pairs}
n_docs = {lab: o["n_docs"] for lab, o in orderings.items()}
paired = {(a, b): study.paired(ma, mb, corpora) for (a, ma), (b, mb) in
          combinations(zip(model_order, page_models), 2)}
model_cmp = dg.comparison.compare({lab: (points, draws or None) for lab, (points, draws) in R_16K.items()},
                                  {f"{lab} (published)": {k: v for k, v in zip(g["corpus"], g["R_16K"])}
                                   for lab, g in final.groupby("model_label", sort=False)},
                                  corpora=long_corpora, paired=paired, by_corpus_corpora=corpora)
model_claims = [c for blk in model_cmp["between_models"] for c in dg.comparison.by_corpus_claims(blk)]
rep_page = page.within(replication, replication_models) if replication else None   # the unseen documents alone
rep_orders = {m.label: rep_page.study.ordering(m, long_corpora, PUBLISHED_ORDER) for m in rep_page.models} \
    if rep_page else {}
replicated = {lab: dg.comparison.replication_verdicts(orderings[lab], o) for lab, o in rep_orders.items()
              if o["pairs"] and lab in pairs}
doc_span = lambda r: "{}-{}".format(*(int(x) - i for i, x in enumerate(r.split(":"))))   # "16:48" -> "16-47"
rep_docs = doc_span(replication) if replication else ""
code = reports[label].cell("CODE")
rho_claim = dg.comparison.code_rho_claim(code.all.rho_long, code.all.interval("rho_long"), dg.published.cells()) \
    if code else None

# %% tags=["hide-input"]
box = dg.comparison.comparison_box(decisions, model_claims, rho_claim, PUBLISHED_ORDER, n_docs, replicated, rep_docs,
                                     pairs, {lab: o["pairs"] for lab, o in rep_orders.items()})
display(Markdown(box))

# %% [markdown]
# ## Ours against each published R(16K)
#
# Per corpus, our $R(16\text{K})$ against each published final checkpoint's (Pythia-1.4B and OLMo-2-1B, the
# models of the figure below) on the same kind of corpus. The corpora differ (PyPI packages against repository dumps, R vignettes
# against arXiv, Austen, Melville and King James books against PG19) and so do the models (4-bit, 135M-270M
# parameters, against unquantised base checkpoints of 1-1.4B): a resolved difference says that our cells
# differ from theirs, not why. A comparison is resolved only when the two intervals do not overlap, ours at the
# Bonferroni level over one model's comparisons, the published at their own 95%
# ([docs/methods.md](../docs/methods.md#evidence-rules)).

# %% tags=["hide-input"]
published_R = dg.comparison.published_R_claims(R_16K, final)
display(Markdown(dg.evidence.claims_markdown(dg.comparison.published_R_lines(published_R))))

# %% [markdown]
# ## The orderings, pair by pair
#
# For one model, the difference of $R(16\text{K})$ between two corpora is resampled over the two cells'
# document-bootstrap draws (different documents: independent draws). The three pairs of BOOKS, CODE and PAPERS
# of a model are one family under Holm's step-down (each is far above the control WEB): a pair is *resolved* only when Holm resolves it, and its interval is at the level Holm
# tests it at ([docs/methods.md](../docs/methods.md#evidence-rules)). Two follow-ups sit outside the family, at
# 95%: a resolved pair without its most influential document, and BOOKS against CODE without the source term.

# %%
order = list(corpora)
by_model = pd.concat([dg.tables.cells_frame(r).assign(model_label=lab) for lab, r in reports.items()],
                     ignore_index=True)
mbase = alt.Chart(by_model)
mcolor = alt.Color("model_label:N", title="model", sort=model_order)
xo = alt.XOffset("model_label:N", sort=model_order)
chart_models = alt.layer(
    mbase.mark_point(filled=True, size=80).encode(
        x=alt.X("corpus:N", sort=order, title=None), xOffset=xo, y=alt.Y("R_16K:Q", title="R(16K)"), color=mcolor,
        tooltip=["model_label:N", "corpus:N", alt.Tooltip("R_16K:Q", format=".3f"),
                 alt.Tooltip("R_16K_lo:Q", format=".3f", title="95% lo"),
                 alt.Tooltip("R_16K_hi:Q", format=".3f", title="95% hi")]),
    mbase.mark_errorbar(ticks=True).encode(x=alt.X("corpus:N", sort=order), xOffset=xo,
                                           y=alt.Y("R_16K_lo:Q", title="R(16K)"), y2="R_16K_hi:Q", color=mcolor),
).properties(width=420, height=260, title=alt.Title(
    "R(16K) per corpus and model, 95% document-bootstrap intervals",
    subtitle=dg.evidence.documents_per_corpus({lab: [c.n_docs for c in r.cells] for lab, r in reports.items()})
    + ": the models are not read on the same number of documents"))
display(dg.save_chart(chart_models, "04c_R_by_model", figures_dir))
d0 = decomps[label]
loo = {}
for k, d in d0.items():
    i = dg.design_effect.most_influential(d)
    title = next((doc["title"] for doc in study.manifest(page_models[0]).get("corpora", {}).get(k, {})
                  .get("documents", []) if doc["doc"] == d.doc_ids[i]), f"document {d.doc_ids[i]}")
    R_loo, loo_draws = dg.cell_decomposition.R_draws_without(study.cell(page_models[0], k), i, resamples, seed)
    loo[k] = {"title": title, "R": R_loo, "draws": loo_draws}
order_claims = {lab: dg.comparison.ordering_claims(pairs[lab], decomps[lab], loo if lab == label else None,
                                                  decisions[lab]["incomplete"]) for lab in pairs}
display(Markdown("\n\n".join(f"**{lab}**\n\n" + "\n".join(f"- {c}" for c in cl) for lab, cl in order_claims.items())))
dg.tables.pair_order_frame(pairs, decisions)

# %% [markdown]
# ## The replication: the documents measured after the rule
#
# The rule above was written after documents 0-15 of every corpus had been measured and read, and before any of
# documents 16-47. The pooled test holds the documents that were seen, so it is partly exploratory; the same
# pairs under the same rule on documents 16-47 alone are the replication. A pooled pair is *replicated* only when
# it is resolved there too, in the same direction
# ([docs/methods.md](../docs/methods.md#the-48-document-cells-what-is-read-and-how-it-is-decided)).

# %% tags=["hide-input"]
rep_lines = {lab: dg.comparison.replication_lines(orderings[lab], o, doc_span(documents), rep_docs,
                                                     o["n_docs"]) for lab, o in rep_orders.items() if lab in replicated}
rep_sources = {lab: dg.design_effect.source_lines(rep_page.decomps[lab]) for lab in rep_lines}
display(Markdown("\n\n".join(f"**{lab}**\n\n" + "\n".join(lines) + "\n\n" + " ".join(rep_sources[lab])
                              for lab, lines in rep_lines.items())
                 or f"*No model has cells on documents {rep_docs}: no replication to read.*"))

# %% [markdown]
# ## Model against model, and against the published points
#
# Both models measured the same first 16 BOOKS and PAPERS documents and 15 of the first 16 CODE documents
# (SmolLM2 measured more), so their difference is resampled with **paired** draws over those shared documents;
# WEB's packed pseudo-documents differ per tokenizer and are resampled independently. The corpora are one Holm family. The published models have point values only, so
# each of ours is compared with them by point order.

# %% tags=["hide-input"]
display(Markdown("\n".join(f"- {line}" for line in dg.comparison.describe(model_cmp))))

# %% [markdown]
# ## Our code against the published code
#
# What differs between the two CODE corpora, and is not separated here: the material (one Python package per
# document, its `.py` files in path order with tests removed, against repositories from The Stack), the model
# and the tokenizer. Telling them apart needs the published corpora through this model (`docgrad corpora hub`)
# or these corpora through the published models.

# %% tags=["hide-input"]
display(Markdown(f"- {rho_claim}" if rho_claim else "- no CODE cell"))

# %% [markdown]
# ## R_rel is not like for like
#
# $R_\text{rel}$ divides a corpus's $R$ by its control's. The controls differ: packed FineWeb web documents
# there, short Debian package descriptions here. $R$ is relative to shuffled chunks of its own corpus, so $R$
# is the number to compare across the studies.

# %%
lfl = dg.tables.like_for_like_frame(reports[label], dg.published.cells())
lfl = lfl[lfl["corpus"].isin(order)].reset_index(drop=True)
ctrl = reports[label].cell(dg.CONTROL)
like_lines = dg.comparison.like_for_like_lines(lfl, label, ctrl.all.R_16K, ctrl.all.R_16K_ci) if ctrl else []
display(Markdown("\n".join(f"- {s}" for s in like_lines)))
dg.tables.three_significant(lfl.assign(block_noise_ratio=lfl["R_rel"] * lfl["sigma2_ratio"]))

# %% [markdown]
# ## The published study through training
#
# The published study measured its models at several checkpoints (some early cells hold fewer documents, see
# the tooltips). Ours is one checkpoint of each model.

# %%
tt = dg.published.through_training()
tt = tt[tt["corpus"].isin(order)]
color = dg.corpus_color(order)
pick4 = dg.legend_pick()
xt = alt.X("frac_training:Q", title="fraction of training", scale=alt.Scale(type="log", nice=False),
           axis=alt.Axis(values=sorted(tt["frac_training"].unique().tolist()), format=".1%"))
tbase = alt.Chart(tt)
chart_tt = alt.layer(   # the line first: the layer that draws the colour legend holds the selection
    tbase.mark_line(point=True).encode(
        x=xt, y=alt.Y("R_16K:Q", title="R(16K)"), color=color, opacity=dg.highlight(pick4),
        tooltip=["model_label:N", "revision:N", "corpus:N", "n_docs:Q", alt.Tooltip("frac_training:Q", format=".4f"),
                 alt.Tooltip("R_16K:Q", format=".3f"), alt.Tooltip("lo:Q", format=".3f"),
                 alt.Tooltip("hi:Q", format=".3f")]).add_params(pick4),
    tbase.mark_errorbar(ticks=True).encode(x=xt, y=alt.Y("lo:Q", title="R(16K)"), y2="hi:Q", color=color,
                                           opacity=dg.highlight(pick4, 0.7, 0.08)),
).properties(width=230, height=220).facet(column=alt.Column("model_label:N", title=None,
                                                            sort=["Pythia-410M", "Pythia-1.4B", "OLMo-2-1B"]))
display(dg.save_chart(chart_tt, "04c_published_through_training", figures_dir))
tt_orders = {f"{g.iloc[0].model_label} {g.iloc[0].frac_training:.1%}":
             dg.tables.ordering(dict(zip(g["corpus"], g["R_16K"])))
             for _, g in tt.groupby(["model", "frac_training"], sort=True)}
tt_lines = dg.comparison.through_training_lines(tt_orders)
display(Markdown("Ordered by R(16K) at each checkpoint (fraction of training):\n\n"
                 + "\n".join(f"- {s}" for s in tt_lines)))

# %%
numbers = {"results_dir": results_dir, "chunk": chunk, "resamples": resamples, "seed": seed, "documents": documents,
           "models": [m.__dict__ for m in page_models], "published_order": PUBLISHED_ORDER,
           "result_box": box, "replication": replication, "replicated": replicated, "replication_lines": rep_lines,
           "replication_sources": rep_sources,
           "pairs": pairs, "decisions": decisions, "n_docs": n_docs,
           "published_R_claims": {lab: [{"status": c.status, "text": c.text} for c in cs]
                                  for lab, cs in published_R.items()},
           "published_R_lines": dg.comparison.published_R_lines(published_R),
           "leave_one_out": {k: {"title": v["title"], "R": v["R"]} for k, v in loo.items()},
           "ordering_claims": {lab: [c.text for c in cl] for lab, cl in order_claims.items()},
           "paired": {f"{a} vs {b}": {k: d.to_json() for k, d in v.items()} for (a, b), v in paired.items()},
           "model_comparison": {**model_cmp, "lines": dg.comparison.describe(model_cmp)},
           "code_rho_long": rho_claim.text if rho_claim else None,
           "like_for_like": lfl.to_dict("records"), "like_for_like_lines": like_lines,
           "published_orders_through_training": tt_orders, "through_training_lines": tt_lines}
_ = dg.save_numbers("04c_beside_the_published_study", numbers, figures_dir)

# %% [markdown]
# ## References
#
# - Yang, H. (2026). *Long documents make your batch smaller than it looks: measuring within-document gradient
#   correlation* (doc-batch-gradients). Zenodo. [doi:10.5281/zenodo.23268861](https://doi.org/10.5281/zenodo.23268861).
# - Holm, S. (1979). A simple sequentially rejective multiple test procedure. *Scandinavian Journal of
#   Statistics* 6(2), 65-70.

# %%
dg.versions()
