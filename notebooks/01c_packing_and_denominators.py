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
# # Loss reduction in packed rows, cross-entropy options and policy-gradient losses
#
# The second class after page 01: packing, `cross_entropy`'s denominators, policy-gradient normalisation, and the
# effective sample size that links every weighting to page 04's design effect (by how much weighting or correlation
# inflates a mean's variance), on SmolLM2-135M with real text.
#
# > **What to take away.**
# > - Packing changes the weights (documents by length) and adds cross-document targets and context: drop each
# >   document's first label, reset positions and mask attention per document, then choose the weighting.
# > - With class weights, PyTorch's mean divides by the sum of the targets' weights, not by their count (class-index
# >   targets; probability targets divide by the number of rows).
# > - Per-sequence normalisation in policy-gradient losses is page 01's document mean, with its length bias.
# > - Unequal weights cost effective sample size (the number of equally weighted units a weighted mean is worth),
# >   just as correlation does in page 04's R.
#
# Every number is computed by `docgrad.teaching` (tested), shown to three significant figures and saved to
# `figures/01c_packing_and_denominators.json`. Other settings: `docgrad run 01c -p pack_lengths "[30, 10, 60]"`.

# %% tags=["parameters"]
model_name = "smollm2-135m"  # the offline default model, read from a GGUF file (llama.cpp's one-file format, weights stored quantised: in fewer bits) and de-quantised to float32
corpus = "BOOKS"  # real text: spans of this corpus (docgrad corpora build --corpus BOOKS makes the cache)
pack_lengths = [47, 15, 39, 23]  # tokens of each document of a packed row (each followed by EOS)
pack_rows = 8  # packed rows (every document from another book or place)
pack_offsets = [0, 1, 2, 3, 4, 6, 8, 12, 16]  # positions after a boundary reported (0 = the boundary target)
ce_ignored = [1, 4]  # positions whose target is ignore_index in the cross-entropy example
ce_weight = [1.0, 2.0, 0.5, 3.0, 1.5]  # class weights of the cross-entropy example (5 classes)
ce_smoothing = 0.1  # label_smoothing of the cross-entropy example
pg_lengths = [2, 8, 4, 16]  # response lengths of one policy-gradient group
pg_advantages = [1.0, -1.0, 1.0, -1.0]  # each response's advantage (its reward minus the group's mean reward)
pg_max_length = 32  # L_max of the constant normalisation: the generation budget, fixed before sampling
kish_lengths = [2, 8]  # page 01's documents, for the effective sample sizes
kish_labels = [1, 0]
kish_padding = [6, 0]
kish_rho = 0.1  # within-document correlation of the design-effect example
seed = 0  # seeds of batches, Trainer and the synthetic checks

# %%
import altair as alt
import numpy as np
import pandas as pd
import torch
from IPython.display import Markdown, display

from docgrad import page as dg

ROOT = dg.setup()
torch.set_num_threads(2)
torch.manual_seed(seed)
NUMBERS = {"model": model_name, "corpus": corpus}


model = dg.models.load_model(model_name)
spans = [s for s in dg.corpora_build.load_spans(corpus) if s.doc < dg.DOCS_PER_CORPUS]   # the other pages' 16
separator = dg.corpora_build.read_manifest(dg.corpora_build.DEFAULT_MANIFEST)["tokenizer"]["separator"]  # packs with
EOS = int(separator["id"])
NUMBERS["separator"] = separator
display(Markdown(f"{model_name}: {sum(p.numel() for p in model.parameters()):,} parameters; {len(spans)} "
                 f"{corpus} spans of {len(spans[0].tokens):,} tokens (the documents below are cut from them); "
                 f"documents are separated by `{separator['token']}` (id {EOS}), the pretraining separator."))
display(Markdown(dg.history.what_changed_when()))

# %% [markdown]
# ## 1. Packed sequences
#
# *Packing* concatenates several documents, each followed by the end-of-text token (EOS), into one row so that no
# position is wasted on padding. Three things change at once:
#
# 1. the row's token mean weighs each document by its number of targets; the mean of per-document means (1/D
#    each) is the alternative;
# 2. each later document's first token becomes a target, predicted from the end of the *previous* document;
# 3. with plain causal attention every later position also attends to the documents before it, and its
#    *position id* (the index its positional encoding uses) counts from the start of the row.
#
# transformers' `DataCollatorWithFlattening` prepares the fix: position ids that restart at every document and a
# −100 label at each document's first token. transformers builds a per-document attention mask from those
# position ids only when (5.24, `masking_utils`) **no attention mask** is passed, **no cache** is built
# (`use_cache=False`: no key-value cache, which generation keeps; SmolLM2's config has `use_cache=True`), and the
# attention implementation applies the mask (eager and SDPA, PyTorch's fused attention, here; FlashAttention,
# another fused kernel, reads the boundaries from the position ids). The `Trainer` turns the cache off, so a model
# behaves differently after one is built: the runs below pass `use_cache=False`. The rows hold real spans from
# different books, each starting mid-text.

# %%
rng = np.random.default_rng(seed)
rows_docs = []
for r in range(pack_rows):
    picks = rng.choice(len(spans), size=len(pack_lengths), replace=False)
    row = []
    for d, n in zip(picks, pack_lengths):
        start = int(rng.integers(0, len(spans[d].tokens) - n))
        row.append(spans[d].tokens[start:start + n].tolist())
    rows_docs.append(row)
counts = dg.pitfalls.packed_target_counts([n + 1 for n in pack_lengths])
weights_tok = dg.pitfalls.packed_weights([n for n in pack_lengths])
weights_doc = dg.pitfalls.packed_weights([n for n in pack_lengths], per_document=True)
NUMBERS["packing_counts"] = counts
NUMBERS["packing_weights"] = {"token_mean": weights_tok, "per_document": weights_doc}
packed_rows = dg.pitfalls.packed_target_losses(model, rows_docs, EOS)
pack = dg.pitfalls.packing_summary(packed_rows, pack_offsets)
pack_objectives = dg.pitfalls.packed_row_objectives(packed_rows)
NUMBERS["packing"] = {"layouts": pack["layouts"], "max_abs_diff_vs_standalone": pack["max_abs_diff_vs_standalone"],
                      "by_offset": pack["by_offset"],
                      "objectives": {k: pack_objectives[k] for k in ("token_mean", "document_mean")}}
display(Markdown(f"""
**The weights.** A row of documents of {pack_lengths} tokens (+ EOS each, {counts['tokens']} tokens) has
{counts['targets']} next-token targets; {counts['boundary_targets']} are a document's first token predicted across a
boundary, {counts['targets_without_boundaries']} remain without them. Over those, the two objectives weigh the
documents differently; n_eff, Kish's *effective sample size* (Σw)² / Σw² over the targets' weights w, is the number
of equally weighted targets that would be as precise (§4):
"""))
dg.sig_table([{"objective": "token mean", **{f"document {i}": w for i, w in enumerate(weights_tok["document_weights"])},
               "n_eff": weights_tok["n_eff"], "loss": pack_objectives["token_mean"]},
              {"objective": "per-document mean", **{f"document {i}": w for i, w in enumerate(weights_doc["document_weights"])},
               "n_eff": weights_doc["n_eff"], "loss": pack_objectives["document_mean"]}],
             {"objective": "objective", **{f"document {i}": f"weight of document {i}" for i in range(len(pack_lengths))},
              "n_eff": "n_eff", "loss": f"loss over {pack_rows} rows (nats)"}, index="objective")

# %%
L = pack["layouts"]
dg.sig_table([{"layout": dg.pitfalls.PACKING_LABELS[k], **L[k], "max": pack["max_abs_diff_vs_standalone"].get(k)}
              for k in dg.pitfalls.PACKING_LAYOUTS],
             {"layout": "layout", "n_targets": "targets", "n_boundary_targets": "boundary targets",
              "mean_loss_boundary": "boundary target loss", "mean_loss_not_boundary": "other targets' loss",
              "boundary_share_of_summed_loss": "boundary share of summed loss",
              "mean_diff_vs_standalone_after_boundary": "mean change vs standalone",
              "max": "largest |change| vs standalone"}, index="layout")

# %% tags=["hide-input"]
by_off = pd.DataFrame(pack["by_offset"])
display(Markdown(f"""
Losses in nats; "change vs standalone" compares each target of the documents after the first with the same
target when its document stands alone.

**The boundary target** {"costs more than the other targets" if L["packed_causal"]["mean_loss_boundary"] >
L["packed_causal"]["mean_loss_not_boundary"] else "does not cost more than the others here"}. The per-document mask
does not remove it (the first token is still predicted from the previous document's end); only the −100 label
does. The rows start mid-text, which
inflates this cost, and dropping the boundary target is a choice of objective, not a correction.

**Cross-document context.** Plain causal packing and reset positions alone both change the later documents'
losses; with positions reset *and* the per-document mask the largest change is
**{dg.sig(pack['max_abs_diff_vs_standalone']['packed_document_mask'])}** nats: packing then changes nothing but the
weights.
"""))

# %%
plot = by_off.copy()
plot["layout label"] = plot["layout"].map(dg.pitfalls.PACKING_LABELS)
standalone = plot[plot["layout"] == "standalone"]
panels = pd.concat([pd.concat([g.assign(line="this layout"), standalone.assign(line="standalone (reference)")])
                    .assign(panel=lab) for lab, g in plot[plot["layout"] != "standalone"].groupby("layout label",
                                                                                                sort=False)])
pack_chart = alt.Chart(panels).mark_line(point=True).encode(
    x=alt.X("offset:Q", title="position in the document (0 = first token)",
            scale=alt.Scale(domain=[0, max(pack_offsets)])),
    y=alt.Y("mean_loss:Q", title="mean loss (nats)", scale=alt.Scale(zero=False)),
    color=alt.Color("line:N", title=None, sort=["this layout", "standalone (reference)"],
                    scale=alt.Scale(range=["#1f77b4", "#999999"]), legend=alt.Legend(orient="bottom")),
    strokeDash=alt.StrokeDash("line:N", sort=["this layout", "standalone (reference)"], legend=None),
    tooltip=["layout label", "line", "offset", alt.Tooltip("mean_loss:Q", format=".3f"),
             alt.Tooltip("mean_diff_vs_standalone:Q", format=".3f"), "n"],
).properties(width=230, height=200).facet(
    column=alt.Column("panel:N", title=None, sort=[dg.pitfalls.PACKING_LABELS[k] for k in dg.pitfalls.PACKING_LAYOUTS],
                      header=alt.Header(labelLimit=260))
).properties(title=alt.Title(
    f"Documents after a boundary, {pack_rows} packed rows of {len(pack_lengths)} documents on {model_name}",
    subtitle="one panel per layout, the standalone losses (grey, dashed) in each; standalone has no target at 0"))
dg.save_chart(pack_chart, "01c_packing_by_offset")

# %% [markdown]
# ## 2. What `cross_entropy`'s mean divides by
#
# For class-index targets, `torch.nn.functional.cross_entropy(..., reduction="mean")` divides the summed loss by
# the **sum of the class weights of the non-ignored targets**, Σ_i w[y_i], which is their count only when there
# are no class weights. With `label_smoothing=ε`, each non-ignored target's loss is
# (1 − ε) w[y_i](−log p_i[y_i]) + (ε/C) Σ_c w[c](−log p_i[c]) over C classes, over the same denominator. Below,
# random targets with some ignored, each case by PyTorch and by hand (`pitfalls.cross_entropy_by_hand`, float64),
# and what dividing by the count instead would give:

# %%
ce = pd.DataFrame(dg.pitfalls.cross_entropy_cases(ignored=ce_ignored, weight=ce_weight, label_smoothing=ce_smoothing,
                                                  seed=seed))
NUMBERS["cross_entropy"] = ce.drop(columns="targets").to_dict("records")
NUMBERS["cross_entropy_targets"] = ce["targets"].iloc[0]
display(Markdown(f"Targets {NUMBERS['cross_entropy_targets']} (−100 ignored), class weights {dg.sig(ce_weight)}, "
                 f"`label_smoothing` {dg.sig(ce_smoothing)}:"))
dg.sig_table(ce, {"case": "case", "torch": "PyTorch", "by_hand": "by hand", "abs_diff": "|difference|",
                  "denominator": "denominator", "n_valid": "valid targets", "divided_by_count": "divided by the count"},
             index="case")

# %% [markdown]
# transformers' `LabelSmoother` (no class weights) sums its smoothing term in float32, hence its larger difference.
# With class weights, accumulation needs the sum of the weights of all targets of the step, Σ_b Σ_i w[y_i], not
# the count `num_items_in_batch` holds; averaging per-microbatch weighted means is again a mean of means.

# %% [markdown]
# ## 3. Policy-gradient fine-tuning: per-sequence or per-token normalisation
#
# Policy-gradient fine-tuning (e.g. GRPO, Group Relative Policy Optimization) samples a group of G responses to
# one prompt, gives each an *advantage* A_i (its reward minus the group's mean reward, often divided by their
# standard deviation: positive for better-than-average responses), and minimises Σ_i Σ_t w_i A_i (−log π(o_it)),
# with π the model's probability of the response's token o_it. The weight of a token is where the length enters:
#
# | scheme | weight of a token of response i | page 01's name |
# |---|---|---|
# | per-sequence mean, then mean over sequences | 1 / (G n_i) | document mean |
# | mean over all tokens of the group | 1 / Σ n | token mean |
# | sum / (G · L_max), a constant | 1 / (G L_max) | a fixed denominator |
#
# Under the per-sequence mean each response weighs 1/G in total, so a short response's tokens weigh more: a short
# positive response is reinforced more per token, a long negative one penalised less (a known length bias). The
# loss is the *on-policy* policy gradient (responses sampled from the model being trained): GRPO's ratio clipping
# (bounding each token's probability change per step) and KL term (a penalty for leaving a reference model) are
# left out; they do not change where the length enters.

# %%
pg = pd.DataFrame(dg.pitfalls.policy_gradient_table(pg_lengths, pg_advantages, max_length=pg_max_length))
NUMBERS["policy_gradient"] = {"lengths": pg_lengths, "advantages": pg_advantages, "max_length": pg_max_length,
                              "schemes": pg.to_dict("records")}
display(Markdown(f"Responses of {pg_lengths} tokens with advantages {dg.sig(pg_advantages)}; L_max = {pg_max_length} "
                 f"(the generation budget, fixed before sampling):"))
dg.sig_table(pg, {"label": "scheme", "per_token_weight": "weight of one token",
                  "sequence_weight": "weight of each response",
                  "signed_push": "A_i × response weight", "short_over_long_per_token": "shortest / longest, per token",
                  "n_eff": "n_eff of the tokens"}, index="label")

# %% [markdown]
# Under the per-sequence mean each response pushes with the same total weight whatever its length; under the token
# mean and the constant denominator every token weighs the same, and the constant one also does not change with the
# group's lengths, so a group of long responses is not scaled down relative to a group of short ones.

# %% [markdown]
# ## 4. Effective sample size: from weights to page 04's design effect
#
# A weighted mean Σ w_i x_i / Σ w_i of n independent units with equal variance σ² has variance
# σ² Σ w² / (Σ w)², that of an unweighted mean of **n_eff = (Σ w)² / Σ w²** units (Kish's effective sample size);
# n / n_eff is the *design effect* of the weighting (a simulation checks it in Appendix A). Equal weights give
# n_eff = n, unequal ones less. For page 01's default documents A and B (A padded):

# %%
kish_batch = dg.reduction.make_batch(kish_lengths, kish_labels, kish_padding)
kish = pd.DataFrame(dg.pitfalls.objective_effective_sizes(kish_batch))
doc_w = np.concatenate(dg.reduction.objective_weights(kish_batch, "document_mean"))
doc_w = doc_w[doc_w > 0]
mc = dg.pitfalls.weighted_mean_variance(doc_w, seed=seed)
C = dg.pitfalls.block_correlation([n for n in kish_lengths], kish_rho)
deff_tok_corr = dg.pitfalls.design_effect(np.ones(sum(kish_lengths)), C)
deff_doc_corr = dg.pitfalls.design_effect(doc_w, C)
design_study = dg.Study(ROOT / "data" / "results", docs=(0, dg.DOCS_PER_CORPUS))     # the published design's cells
page04 = dg.pitfalls.design_effects(design_study.page(dg.models.result_model(model_name), dg.CORPORA)[0],
                                    dg.HEADLINE_WINDOW // dg.CHUNK)
NUMBERS["effective_sample_size"] = {"objectives": kish.to_dict("records"), "monte_carlo_document_mean": mc,
                                    "rho": kish_rho, "deff_token_mean_correlated": deff_tok_corr,
                                    "deff_document_mean_correlated": deff_doc_corr, "page_04": page04}
dg.sig_table(kish, {"label": "objective", "n": "positions with weight", "n_eff": "n_eff",
                    "design_effect": "design effect"}, index="label")

# %% [markdown]
# The weights that decide what is learned also decide how much noise the estimate carries.
#
# **Correlated units.** For units with correlation matrix C the design effect is n wᵀCw / (Σ w)²
# (`pitfalls.design_effect`). C = I gives the weighting effect above; equal weights and a correlation ρ shared by
# the m units of a block give 1 + (m − 1)ρ, Kish's cluster design effect. With a correlation ρ between positions of
# the same document, correlation and weighting compound:

# %% tags=["hide-input"]
books = next((c for c in page04 if c["corpus"] == "BOOKS"), page04[0])
m_block = dg.HEADLINE_WINDOW // dg.CHUNK
dg.sig_table([{"objective": "token mean", "deff": deff_tok_corr},
              {"objective": "document mean", "deff": deff_doc_corr}],
             {"objective": "objective", "deff": f"design effect, ρ = {dg.sig(kish_rho)} within a document"},
             index="objective")

# %% [markdown]
# **Page 04.** R(W) is this design effect for the chunk gradients of one contiguous W-token block, equal weights,
# correlation measured by lag. A block of m chunks is worth m / R independent ones, as if every pair shared one
# correlation ρ = (R − 1) / (m − 1): page 01's document mean loses independent units to unequal weights, page 04's
# block to correlation.

# %% tags=["hide-input"]
dg.sig_table([{"corpus": c["corpus"], "R": c["R_16K"], "m": m_block, "eff": c["effective_chunks"], "rho": c["flat_rho"]}
              for c in page04],
             {"corpus": "corpus", "R": f"R({dg.HEADLINE_WINDOW // 1024}K), page 04", "m": "chunks per block",
              "eff": "independent chunks it is worth", "rho": "equivalent ρ"}, index="corpus")

# %% [markdown]
# ## Exercises
#
# Predict, then open the solution (JupyterLab: click the collapsed cell; HTML: *Solution*). Each shows the
# algebra (numbers filled in by `docgrad.teaching.worked`) and a line checking it against the library.
#
# **Exercise 1 (packing).** A row packs three documents of 10, 30 and 60 tokens, each followed by EOS. How many
# next-token targets does the row have, how many are predicted across a boundary, and how many remain with
# `DataCollatorWithFlattening`'s labels? Over the remaining targets, what are Kish's n_eff of the token mean and of
# the per-document mean?

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution"]
ex2_lengths = [10, 30, 60]
ex2 = dg.worked.packing(ex2_lengths)
display(Markdown(ex2.markdown))
assert ex2.values["counts"] == dg.pitfalls.packed_target_counts([n + 1 for n in ex2_lengths])
assert abs(ex2.values["n_eff_per_document"]
           - dg.pitfalls.packed_weights(ex2_lengths, per_document=True)["n_eff"]) < 1e-9

# %% [markdown]
# **Exercise 2 (class weights).** Targets [0, 2, 2, −100, 1] over three classes with `weight=[1, 4, 0.5]` and
# random logits: what does `cross_entropy`'s mean divide by? Work the mean out by hand and compare with PyTorch.

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution"]
ex3_targets = [0, 2, 2, -100, 1]
ex3_weight = [1.0, 4.0, 0.5]
ex3_logits = np.random.default_rng(seed).normal(size=(len(ex3_targets), len(ex3_weight)))
ex3 = dg.worked.class_weight_mean(ex3_logits, ex3_targets, ex3_weight)
ex3_torch = float(torch.nn.functional.cross_entropy(torch.from_numpy(ex3_logits), torch.tensor(ex3_targets),
                                                    weight=torch.tensor(ex3_weight, dtype=torch.float64)))
display(Markdown(ex3.markdown + f"\n- PyTorch: {dg.sig(ex3_torch)}."))
assert abs(ex3.values["loss"] - ex3_torch) < 1e-12

# %% [markdown]
# **Exercise 3 (policy gradient).** A group of two responses of 3 and 12 tokens has advantages +1 and −1. Give the
# per-token weights under the per-sequence mean and under the token mean. Which response's tokens are pushed
# harder under each?

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution"]
ex5 = dg.worked.policy_gradient([3, 12])
display(Markdown(ex5.markdown + "\n- So the short, positive response's tokens are pushed harder under the "
                 "per-sequence mean, and all tokens equally under the token mean."))
ex5_rows = {r["scheme"]: r for r in dg.pitfalls.policy_gradient_table([3, 12], [1.0, -1.0])}
assert all(abs(a - b) < 1e-12 for k in ("sequence_mean", "token_mean")
           for a, b in zip(ex5.values[k], ex5_rows[k]["per_token_weight"]))

# %% [markdown]
# **Exercise 4 (effective sample size).** Three documents of 1, 1 and 98 positions. What is Kish's n_eff of the
# token mean and of the document mean?

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution"]
ex6 = dg.worked.n_eff_documents([1, 1, 98])
display(Markdown(ex6.markdown))
ex6_batch = dg.reduction.make_batch([1, 1, 98], [1, 0, 1], [0, 0, 0])
ex6_rows = {r["objective"]: r for r in dg.pitfalls.objective_effective_sizes(ex6_batch)}
assert all(abs(ex6.values[k] - ex6_rows[k]["n_eff"]) < 1e-9 for k in ex6.values)

# %% [markdown]
# ## Appendix
#
# ### A. The design effect of a weighting, simulated (§4)
#
# Weighted means of independent unit-variance draws with the document mean's weights, against the exact
# n Σ w² / (Σ w)².

# %%
dg.sig_table([{"draws": mc["draws"], "n": mc["n"], "simulated": mc["simulated"], "exact": mc["exact"]}],
             {"draws": "draws", "n": "units", "simulated": "simulated design effect", "exact": "exact"})

# %%
NUMBERS["exercises"] = {
    "1": {"lengths": ex2_lengths, **ex2.values},
    "2": {"targets": ex3_targets, "weight": ex3_weight, "seed": seed, **ex3.values, "torch": ex3_torch},
    "3": {"lengths": [3, 12], "advantages": [1.0, -1.0],
          "per_token_weight": {k: ex5.values[k] for k in ("sequence_mean", "token_mean")},
          "short_over_long_per_token": ex5.values["short_over_long_per_token"]},
    "4": ex6.values,
}
dg.save_numbers("01c_packing_and_denominators", NUMBERS)
dg.versions()
