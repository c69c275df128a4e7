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
# # Packed rows and what cross-entropy's mean divides by
#
# The fourth of five classes (01, 01a, 01b, 01c, 01d): what packing several documents into one row does to the
# weights, the targets and the context, how the installed collators of transformers and TRL prepare a packed
# batch, and what `cross_entropy`'s mean divides by, on SmolLM2-135M with real text. The normalisation of
# reinforcement-learning losses (per sequence, per token, per batch) is page 01d_rl_normalisation, the fifth.
#
# *What the libraries do changed over releases: the box "What changed when" at the end says when, and every
# statement about them below is read from the installed source when the page runs.*
#
# > **What to take away.**
# > - Packing changes the weights (documents by length) and adds cross-document targets and context: drop each
# >   document's first label, restart the positions, keep attention inside each document, then choose the weighting.
# > - Keeping attention inside a document depends on the implementation: eager and SDPA build a per-document
# >   mask from restarting position ids (with no attention mask and no cache); FlashAttention needs `cu_seq_lens`,
# >   or reads the boundaries from position ids only in a one-row batch. TRL's padding-free collator and
# >   `DataCollatorWithFlattening` flatten the batch into one row and mask each document's first label.
# > - With class weights, PyTorch's mean divides by the sum of the targets' weights (class-index targets);
# >   probability targets divide by the number of rows.
#
# Every number is computed by `docgrad.teaching` (tested), shown to three significant figures and saved to
# `figures/01c_packing_and_denominators.json`. Other settings: `docgrad run 01c -p pack_lengths "[30, 10, 60]"`.

# %% tags=["parameters"]
model_name = "smollm2-135m"  # the offline default model, read from a GGUF file (llama.cpp's one-file format, weights stored quantised: in fewer bits) and de-quantised to float32
corpus = "BOOKS"  # real text: spans of this corpus (docgrad corpora build --corpus BOOKS makes the cache)
pack_lengths = [47, 15, 39, 23]  # tokens of each document of a packed row (each followed by EOS)
pack_rows = 8  # packed rows (every document from another book or place)
pack_offsets = [0, 1, 2, 3, 4, 6, 8, 12, 16]  # positions after a boundary reported (0 = the boundary target)
collate_lengths = [6, 3, 4]  # tokens of the documents the two collators are run on (each followed by EOS)
collate_multiple = 6  # TRL's pad_to_multiple_of in the collator comparison
trl_seq_length = 16  # row length of TRL's pack_dataset in the collator comparison
trl_pack_lengths = [9, 4, 6, 3, 8]  # tokens of the documents TRL's pack_dataset packs
ce_ignored = [1, 4]  # positions whose target is ignore_index in the cross-entropy example
ce_weight = [1.0, 2.0, 0.5, 3.0, 1.5]  # class weights of the cross-entropy example (5 classes)
ce_equal_weight = 2.5  # the one weight of every class in the equal-weights case
ce_smoothing = 0.1  # label_smoothing of the cross-entropy example
seed = 0  # seeds of the rows, the collator documents and the cross-entropy logits
rerun = False  # recompute the recorded packed-row losses on the real model (data/teaching/01c_packing.json) and rewrite it

# %%
import functools

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


real_model = functools.cache(lambda: dg.models.load_model(model_name))   # loaded only for a run not in the record
spans = [s for s in dg.corpora_build.load_spans(corpus) if s.doc < dg.DOCS_PER_CORPUS]   # the other pages' 16
separator = dg.corpora_build.read_manifest(dg.corpora_build.DEFAULT_MANIFEST)["tokenizer"]["separator"]  # packs with
EOS = int(separator["id"])
NUMBERS["separator"] = separator
display(Markdown(f"{len(spans)} {corpus} spans of {len(spans[0].tokens):,} tokens (the documents below are cut from "
                 f"them); documents are separated by `{separator['token']}` (id {EOS}), the pretraining separator."))

# %% [markdown]
# ## 1. Packed sequences
#
# *Packing* concatenates several documents, each followed by the end-of-text token (EOS), into one row so that no
# position is wasted on padding. A row holds D documents; document i has n_i targets. Three things change at once:
#
# 1. the row's token mean weighs document i by n_i / Σ n; the mean of per-document means (1/D each) is the
#    alternative;
# 2. each later document's first token becomes a target, predicted from the end of the *previous* document;
# 3. with plain causal attention every later position also attends to the documents before it, and its
#    *position id* (the index its positional encoding uses) counts from the start of the row.
#
# transformers' `DataCollatorWithFlattening` prepares the fix: position ids that restart at every document and a
# −100 label at each document's first token (§2 runs it). Whether attention then stays inside each document
# depends on the attention implementation. Eager attention and SDPA (PyTorch's fused attention, used here) apply
# a mask that transformers builds from the restarting position ids only when no attention mask is passed and no
# cache is built (`use_cache=False`: no key-value cache, which generation keeps; SmolLM2's config has
# `use_cache=True`). FlashAttention builds no mask: it needs the boundaries as `cu_seq_lens`, and reads them from
# the position ids only when the batch is one row, so the batch of several rows below would attend across
# documents under FlashAttention without them. The lines that decide it, in the installed source:

# %% tags=["hide-input"]
pack_src = dg.installed.read_claims(dg.installed.PACKING_CLAIMS)
dg.installed.require(pack_src)
NUMBERS["packing_source"] = pack_src
display(Markdown(dg.installed.claims_markdown({k: pack_src[k] for k in ("packed_mask_conditions", "flash_batch_one",
                                                                         "flash_varlen")})))

# %% [markdown]
# The `Trainer` turns the cache off, so a model behaves differently after one is built: the runs below pass
# `use_cache=False`. The rows hold real spans from different books, each starting mid-text.

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
counts = dg.packing.packed_target_counts([n + 1 for n in pack_lengths])
weights_tok = dg.packing.packed_weights([n for n in pack_lengths])
weights_doc = dg.packing.packed_weights([n for n in pack_lengths], per_document=True)
NUMBERS["packing_counts"] = counts
NUMBERS["packing_weights"] = {"token_mean": weights_tok, "per_document": weights_doc}
packed, pack_prov = dg.records.recorded(
    "01c_packing", {"model": model_name, "corpus": corpus, "pack_lengths": pack_lengths, "pack_rows": pack_rows,
                    "pack_offsets": pack_offsets, "seed": seed},
    lambda: dg.packing.packed_losses_summary(real_model(), rows_docs, EOS, pack_offsets),
    rerun=rerun, command="docgrad run 01c -p rerun True")
display(Markdown(dg.records.provenance_line(f"The packed rows' losses ({model_name}, {packed['n_parameters']:,} "
                                            f"parameters)", pack_prov)))
pack, pack_objectives = packed["summary"], packed["objectives"]
NUMBERS["provenance"] = {"packing": pack_prov}
NUMBERS["packing"] = {"layouts": pack["layouts"], "max_abs_diff_vs_standalone": pack["max_abs_diff_vs_standalone"],
                      "by_offset": pack["by_offset"],
                      "objectives": {k: pack_objectives[k] for k in ("token_mean", "document_mean")}}
display(Markdown(f"""
**The weights.** A row of D = {len(pack_lengths)} documents of {pack_lengths} tokens (+ EOS each, T =
{counts['tokens']} tokens) has T − 1 = {counts['targets']} next-token targets; D − 1 = {counts['boundary_targets']} are
a document's first token predicted across a boundary, T − D = {counts['targets_without_boundaries']} remain without
them, n_i for document i. Over those, the two objectives weigh the documents differently:
"""))
dg.sig_table([{"objective": "token mean", **{f"document {i}": w for i, w in enumerate(weights_tok["document_weights"])},
               "loss": pack_objectives["token_mean"]},
              {"objective": "per-document mean", **{f"document {i}": w for i, w in enumerate(weights_doc["document_weights"])},
               "loss": pack_objectives["document_mean"]}],
             {"objective": "objective", **{f"document {i}": f"weight of document {i}" for i in range(len(pack_lengths))},
              "loss": f"loss over {pack_rows} rows (nats)"}, index="objective")

# %%
L = pack["layouts"]
dg.sig_table([{"layout": dg.packing.PACKING_LABELS[k], **L[k], "max": pack["max_abs_diff_vs_standalone"].get(k)}
              for k in dg.packing.PACKING_LAYOUTS],
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
plot["layout label"] = plot["layout"].map(dg.packing.PACKING_LABELS)
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
    column=alt.Column("panel:N", title=None, sort=[dg.packing.PACKING_LABELS[k] for k in dg.packing.PACKING_LAYOUTS],
                      header=alt.Header(labelLimit=260))
).properties(title=alt.Title(
    f"Documents after a boundary, {pack_rows} packed rows of {len(pack_lengths)} documents on {model_name}",
    subtitle="one panel per layout, the standalone losses (grey, dashed) in each; standalone has no target at 0"))
dg.save_chart(pack_chart, "01c_packing_by_offset")

# %% [markdown]
# ## 2. The installed collators on the same documents
#
# Two collators prepare a packed batch for training: transformers' `DataCollatorWithFlattening` and TRL's
# `DataCollatorForLanguageModeling` with `padding_free=True` (what TRL's `SFTTrainer` uses with `padding_free` or
# best-fit-decreasing packing). Both flatten the whole batch into one row. Below, both on the same real documents
# (the first tokens of three spans, each followed by EOS); *cu_seq_lens* are the cumulative document lengths
# FlashAttention reads, *seq_idx* each position's document:

# %%
collate_docs = [spans[i].tokens[:n].tolist() + [EOS] for i, n in enumerate(collate_lengths)]
both = dg.packing.collate_both(collate_docs)
NUMBERS["collators"] = both
hf, trl = both["transformers"], both["trl"]
pd.DataFrame({"input id": hf["input_ids"][0], "position id (both)": hf["position_ids"][0],
              "label, transformers": hf["labels"][0], "label, TRL": trl["labels"][0],
              "seq_idx (both)": hf["seq_idx"][0]}).T

# %% tags=["hide-input"]
padded_trl = dg.packing.collate_both(collate_docs, pad_to_multiple_of=collate_multiple)["trl"]
packed_trl = dg.packing.trl_packed([spans[i].tokens[:n].tolist() for i, n in enumerate(trl_pack_lengths)],
                                   trl_seq_length)
NUMBERS["trl_padded"] = padded_trl
NUMBERS["trl_packed"] = packed_trl
same = hf["labels"] == trl["labels"] and hf["position_ids"] == trl["position_ids"]
display(Markdown(f"""
The two collators give {"the same" if same else "different"} position ids and labels here: each document's first
label is −100 (the boundary target of §1), every other label is the next token. `cu_seq_lens` is
{hf['cu_seq_lens_q']} from transformers (asked for with `return_flash_attn_kwargs=True`) and {trl['cu_seq_lens_q']}
from TRL (always). Two differences show at the edges:

- **Padding.** With `pad_to_multiple_of={collate_multiple}`, TRL pads the row to {len(padded_trl['input_ids'][0])}
  positions ({len(padded_trl['input_ids'][0]) - len(hf['input_ids'][0])} of padding) with position id 0 and label
  −100, so `cu_seq_lens` = {padded_trl['cu_seq_lens_q']}: every padding position is a sequence of its own, with no
  target.
- **Packing.** TRL's `pack_dataset` (best-fit decreasing, documents kept whole) packs documents of
  {trl_pack_lengths} tokens into rows of at most {trl_seq_length}, each with its `seq_lengths`
  {[r['seq_lengths'] for r in packed_trl['rows']]}; the collator restarts the position ids there:
  {packed_trl['collated']['position_ids'][0]}, with `cu_seq_lens` {packed_trl['collated']['cu_seq_lens_q']} and
  −100 at positions {[i for i, v in enumerate(packed_trl['collated']['labels'][0]) if v == -100]}.

What each collator does, in the installed source:

""" + dg.installed.claims_markdown({k: pack_src[k] for k in ("flattening_labels", "flattening_positions",
                                                              "trl_labels", "trl_cu_seq_lens", "trl_seq_lengths")})))

# %% [markdown]
# **The count the Trainer divides by.** Each document's first label is already −100, so a flattened row holds
# exactly the targets of the documents standing alone (each document's tokens minus one), whichever way the
# Trainer counts; a right-padded batch of the same documents, one per row, gains one label per row when position 0
# is counted:

# %% tags=["hide-input"]
flat_counts = dg.packing.counts_of_a_packed_batch(dg.models.tiny_model("llama", seed=seed),
                                                  [d[:-1] for d in collate_docs], EOS)
NUMBERS["packed_batch_counts"] = flat_counts
dg.sig_table([{"batch": f"{b}: {w}", "installed": flat_counts[b]["installed_trainer"],
               "shifted": flat_counts[b]["shifted"], "unshifted": flat_counts[b]["unshifted"]}
              for b, w in (("flattened", "one row"), ("padded", f"{len(collate_docs)} rows"))],
             {"batch": "batch", "installed": f"installed Trainer (transformers {dg.installed.package_version('transformers')})",
              "shifted": "labels[..., 1:] != −100", "unshifted": "labels != −100"}, index="batch")

# %% [markdown]
# ## 3. What `cross_entropy`'s mean divides by
#
# For class-index targets, `torch.nn.functional.cross_entropy(..., reduction="mean")` divides the summed loss by
# the **sum of the class weights of the non-ignored targets**, Σ_i w[y_i]: their count when every weight is 1, and
# the plain mean whenever all C classes have the same weight (a common w cancels from numerator and denominator).
# With `label_smoothing=ε`, each non-ignored target's loss is (1 − ε) w[y_i](−log p_i[y_i]) + (ε/C) Σ_c w[c](−log
# p_i[c]), over the same denominator. Below, random targets with some ignored, each case by PyTorch and by hand
# (`cross_entropy.cross_entropy_by_hand`, float64), and what dividing by the count instead would give:

# %%
ce = pd.DataFrame(dg.cross_entropy.cross_entropy_cases(ignored=ce_ignored, weight=ce_weight,
                                                       label_smoothing=ce_smoothing, equal_weight=ce_equal_weight,
                                                       seed=seed))
NUMBERS["cross_entropy"] = ce.drop(columns="targets").to_dict("records")
NUMBERS["cross_entropy_targets"] = ce["targets"].iloc[0]
display(Markdown(f"Targets {NUMBERS['cross_entropy_targets']} (−100 ignored), class weights {dg.sig(ce_weight)} "
                 f"(and {dg.sig(ce_equal_weight)} for every class in the equal-weights case), `label_smoothing` "
                 f"{dg.sig(ce_smoothing)}:"))
dg.sig_table(ce, {"case": "case", "torch": "PyTorch", "by_hand": "by hand", "abs_diff": "|difference|",
                  "denominator": "denominator", "n_valid": "valid targets", "divided_by_count": "divided by the count"},
             index="case")

# %% tags=["hide-input"]
ce_src = dg.installed.read_claims(dg.installed.CROSS_ENTROPY_CLAIMS)
dg.installed.require(ce_src)
NUMBERS["cross_entropy_source"] = ce_src
display(Markdown("""
The equal weights divide by their sum and give the plain mean. transformers' `LabelSmoother` (no class weights)
differs from the hand computation by float32 rounding:

""" + dg.installed.claims_markdown(ce_src) + """

With class weights, accumulation needs the sum of the weights of all targets of the step, Σ_k Σ_i w[y_i] over the K
microbatches, not the count `num_items_in_batch` holds; averaging per-microbatch weighted means is again a mean of
means."""))

# %% [markdown]
# ## Exercises
#
# Predict, then open the solution (JupyterLab: click the collapsed cell; HTML: *Solution*). Each shows the
# algebra (numbers filled in by `docgrad.teaching.worked`) and a line checking it against the library.
#
# **Exercise 1 (packing).** A row packs three documents of 10, 30 and 60 tokens, each followed by EOS. How many
# next-token targets does the row have, how many are predicted across a boundary, and how many remain with
# `DataCollatorWithFlattening`'s labels? What weight does each document get under the token mean and under the
# per-document mean?

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution"]
ex1_lengths = [10, 30, 60]
ex1 = dg.worked.packing(ex1_lengths)
display(Markdown(ex1.markdown))
assert ex1.values["counts"] == dg.packing.packed_target_counts([n + 1 for n in ex1_lengths])
assert ex1.values["token_mean_weights"] == dg.packing.packed_weights(ex1_lengths)["document_weights"]
assert ex1.values["per_document_weights"] == dg.packing.packed_weights(ex1_lengths, per_document=True)["document_weights"]

# %% [markdown]
# **Exercise 2 (class weights).** Targets [0, 2, 2, −100, 1] over three classes with `weight=[1, 4, 0.5]` and
# random logits: what does `cross_entropy`'s mean divide by? Work the mean out by hand and compare with PyTorch.

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution"]
ex2_targets = [0, 2, 2, -100, 1]
ex2_weight = [1.0, 4.0, 0.5]
ex2_logits = np.random.default_rng(seed).normal(size=(len(ex2_targets), len(ex2_weight)))
ex2 = dg.worked.class_weight_mean(ex2_logits, ex2_targets, ex2_weight)
ex2_torch = float(torch.nn.functional.cross_entropy(torch.from_numpy(ex2_logits), torch.tensor(ex2_targets),
                                                    weight=torch.tensor(ex2_weight, dtype=torch.float64)))
display(Markdown(ex2.markdown + f"\n- PyTorch: {dg.sig(ex2_torch)}."))
assert abs(ex2.values["loss"] - ex2_torch) < 1e-12

# %% [markdown]
# ### Code exercise
#
# The checker (`docgrad.teaching.packing`) runs your function on batches made by the installed collators, says
# *correct* or *not yet*, and names the batch it got wrong and the usual mistake its answer matches.
#
# **Exercise 3 (the per-document mean of a packed batch).** `losses` holds the loss of every position's label
# (rows × positions, float64; masked positions have a loss too), `labels` holds −100 where nothing is supervised
# and `position_ids` restart at 0 where a document starts (documents never span rows). Return the mean over
# documents of each document's mean loss over its supervised targets, leaving out a document with none (a padding
# position can be a document of its own). The version below is the batch's token mean.

# %% tags=["show-input"]
def per_document_mean(losses, labels, position_ids):
    mask = (labels != -100).to(losses.dtype)
    return (losses * mask).sum() / mask.sum()


print(dg.packing.check_per_document_mean(per_document_mean)["message"])

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution"]
def per_document_mean(losses, labels, position_ids):
    doc = torch.cumsum((position_ids == 0).reshape(-1).long(), 0) - 1      # each position's document
    mask = (labels != -100).reshape(-1).to(losses.dtype)
    sums = torch.zeros(int(doc[-1]) + 1, dtype=losses.dtype).index_add(0, doc, losses.reshape(-1) * mask)
    counts = torch.zeros(int(doc[-1]) + 1, dtype=losses.dtype).index_add(0, doc, mask)
    keep = counts > 0                                                       # documents with a target
    return (sums[keep] / counts[keep]).mean()


ex3 = dg.packing.check_per_document_mean(per_document_mean)
print(ex3["message"])

# %% [markdown]
# ## What changed when

# %% tags=["hide-input"]
history_topics = ("packing", "cross_entropy")
NUMBERS["what_changed_when"] = dg.history.rows(history_topics)
display(Markdown(dg.history.what_changed_when(history_topics)))

# %%
NUMBERS["exercises"] = {
    "1": {"lengths": ex1_lengths, **ex1.values},
    "2": {"targets": ex2_targets, "weight": ex2_weight, "seed": seed, **ex2.values, "torch": ex2_torch},
    "3": ex3,
}
dg.save_numbers("01c_packing_and_denominators", NUMBERS)
dg.versions()
