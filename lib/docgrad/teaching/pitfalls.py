"""Where loss-reduction mistakes happen in real training setups (teaching pages 01b and 01c), built on docgrad.teaching.reduction.

Every function returns plain numbers (dicts, lists) that a page states and a test pins.

Data parallelism
    W ranks each reduce their own batch; DDP then *averages* the W gradients. A per-rank mean followed by that
    average is a mean of means (rank r weighs 1/W instead of n_r / N), the microbatch pitfall again. The fix
    is the global target count N = sum_r n_r: rank r's loss is S_r / N, multiplied by W to undo DDP's 1/W
    (what transformers' Trainer does with `average_tokens_across_devices`, see `transformers_excerpts`).
    `data_parallel_step` simulates the ranks in one process with the model's own loss function (the
    `num_items_in_batch` keyword) and the all-reduce average; `trainer_accumulation` runs the real
    `transformers.Trainer` for one accumulated optimiser step and reads the gradient it built;
    `ddp_trainer_step` runs the Trainer in real processes under torchrun (gloo, CPU) on a tiny model.

Packed sequences
    Several documents in one row. The row's token mean weighs document i by its target count; the targets just
    after a boundary are predicted from another document (cross-document context), and the first token of a
    document is itself a target predicted from the previous document's end. `packed_target_losses` measures
    every target's loss under four layouts (standalone documents; a packed row with plain causal attention;
    with position ids reset only; with position ids reset and a per-document attention mask, built by
    transformers' `DataCollatorWithFlattening`, whose labels also drop each document's first target).

Cross-entropy denominators
    `cross_entropy_by_hand` writes out what torch.nn.functional.cross_entropy's mean divides by with
    `ignore_index`, class `weight=` and `label_smoothing`: the sum of the non-ignored targets' class weights
    (the count only when there are no class weights).

Optimisers
    A constant factor c on the loss multiplies SGD's step by c, but Adam's update m / (sqrt(v) + eps) is
    unchanged except that eps acts as eps / c (`adam_scale_check`). A factor that changes from batch to
    batch (the padded denominator of page 01) re-weights the batches, and no optimiser undoes that
    (`training_drift`: a short real fine-tuning run of the last blocks, several objectives in lockstep).

Policy-gradient normalisation
    Per-sequence mean then mean over sequences gives a token of sequence i the weight 1 / (G n_i): page 01's
    document mean; the token-level mean gives 1 / sum n (page 01's token mean); a constant 1 / (G L_max)
    weighs every token equally without depending on the batch's lengths (`policy_gradient_weights`).

Effective sample size
    Kish: a weighted mean of n independent units with equal variance has the variance of an unweighted mean of
    n_eff = (sum w)^2 / sum w^2 units; the design effect n / n_eff = n sum w^2 / (sum w)^2. With correlated
    units (correlation matrix C) the general design effect is n w'Cw / (sum w)^2, which for equal weights and
    equal correlation rho within blocks of m is 1 + (m - 1) rho, the form of page 04's R(W)
    (`design_effect`, `equicorrelated_design_effect`).
"""

from __future__ import annotations

import inspect
import math
import re
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from docgrad.models import tiny_model
from docgrad.results.stats import Analysis
from docgrad.teaching.reduction import (
    IGNORE_INDEX,
    OBJECTIVE_LABELS,
    OBJECTIVES,
    Batch,
    NoValidPositionsError,
    ReductionError,
    check_int_list,
    count_targets,
    flat_grad,
    make_documents,
    objective_weights,
    pad_batch,
    summed_loss,
)


class PitfallError(ReductionError):
    """Invalid input to a pitfalls computation (the message says which and why)."""


# --------------------------------------------------------------------------------------------------
# Data parallelism: per-rank means vs the global target count
# --------------------------------------------------------------------------------------------------

def _rank_loss(model, docs, num_items_in_batch=None):
    """The model's own loss on one padded batch of `docs` (transformers' ForCausalLMLoss: it shifts the labels,
    ignores -100, and divides by num_items_in_batch when given, else by this batch's target count)."""
    ids, att, lab = pad_batch(docs)
    kwargs = {} if num_items_in_batch is None else {"num_items_in_batch": num_items_in_batch}
    return model(input_ids=ids, attention_mask=att, labels=lab, **kwargs).loss


def data_parallel_step(model, docs, ranks, reference=None) -> dict:
    """One data-parallel step over W = len(ranks) simulated ranks; rank r holds the documents `ranks[r]` as one
    padded batch. DDP's all-reduce averages the ranks' gradients: g = (1/W) sum_r g_r. Two rank losses:

      local_mean    the model's default loss on the rank's batch: S_r / n_r (mean over its own targets)
      global_count  transformers' Trainer with average_tokens_across_devices: the model's loss with
                    num_items_in_batch = N (all ranks' targets, gathered) is S_r / N, then multiplied by W

    and the reference `full`: one batch of every document, S / N (`reference`: its (gradient, loss) from
    full_batch_gradient(model, docs), computed when not given). Returns the target counts, the rank weights under
    each rule (1/W vs n_r / N), the relative gradient differences from the full batch and the losses."""
    import torch

    ranks = [list(r) for r in ranks]
    if not ranks or any(not r for r in ranks):
        raise PitfallError(f"every rank needs at least one document, got {ranks}")
    W = len(ranks)
    counts = [sum(docs[i]["n_targets"] for i in r) for r in ranks]
    if any(c == 0 for c in counts):
        raise NoValidPositionsError(f"a rank has zero targets after the causal shift: counts {counts}")
    N = sum(counts)

    if sorted(i for r in ranks for i in r) != list(range(len(docs))):
        raise PitfallError(f"the ranks must hold every document once: {ranks} for {len(docs)} documents")
    g_full, loss_full = reference if reference is not None else full_batch_gradient(model, docs)

    def step(rule):
        grads, losses = [], []
        for r in ranks:
            model.zero_grad(set_to_none=True)
            if rule == "local_mean":
                loss = _rank_loss(model, [docs[i] for i in r])
            else:
                loss = _rank_loss(model, [docs[i] for i in r], num_items_in_batch=torch.tensor(N)) * W
            loss.backward()
            grads.append(flat_grad(model))
            losses.append(float(loss.detach()))
        return torch.stack(grads).mean(dim=0), losses       # the all-reduce average over ranks

    g_local, loss_local = step("local_mean")
    g_global, loss_global = step("global_count")
    model.zero_grad(set_to_none=True)
    nf = float(g_full.norm())
    return {
        "world_size": W, "ranks": ranks, "targets_per_rank": counts, "n_targets_total": N,
        "rank_weights_local_mean": [1.0 / W] * W, "rank_weights_global_count": [c / N for c in counts],
        "loss_full": loss_full,
        "rank_losses_local_mean": loss_local, "rank_losses_global_count": loss_global,
        "logged_loss_local_mean": sum(loss_local) / W, "logged_loss_global_count": sum(loss_global) / W,
        "grad_norm_full": nf,
        "rel_discrepancy_local_mean": float((g_local - g_full).norm()) / nf,
        "rel_discrepancy_global_count": float((g_global - g_full).norm()) / nf,
        "cosine_local_mean_full": float(g_local @ g_full) / (float(g_local.norm()) * nf),
    }


def full_batch_gradient(model, docs):
    """(flat gradient, loss) of the token mean over every target of `docs` in one padded batch."""
    model.zero_grad(set_to_none=True)
    loss = _rank_loss(model, docs)
    loss.backward()
    g = flat_grad(model)
    model.zero_grad(set_to_none=True)
    return g, float(loss.detach())


@contextmanager
def _dequantised_for_trainer(model):
    """A GGUF model loaded by transformers keeps its `hf_quantizer` even when every weight was de-quantised to an
    ordinary float32 parameter (docgrad.models.load_model), and Trainer refuses to fine-tune a 'quantized' model.
    When every parameter is a plain floating-point nn.Parameter, the quantizer is detached while the Trainer
    runs (and put back after); otherwise this is an error."""
    import torch

    q = getattr(model, "hf_quantizer", None)
    if q is None:
        yield model
        return
    plain = all(type(p) is torch.nn.Parameter and p.dtype.is_floating_point for p in model.parameters())
    if not plain:
        raise PitfallError("the model holds quantized weights; Trainer cannot fine-tune it here")
    flag = getattr(model, "is_quantized", False)
    model.hf_quantizer, model.is_quantized = None, False
    try:
        yield model
    finally:
        model.hf_quantizer, model.is_quantized = q, flag


def _recording_trainer(model, docs, args, captured: dict, seen: list, with_doc: bool = False):
    """A transformers Trainer over `docs` (one document per item, stacked by a plain collate) with SGD at
    learning rate 0 and no printed log lines, that records the num_items_in_batch each compute_loss receives into
    `seen` and the accumulated gradient at on_pre_optimizer_step into captured['grad']; with_doc, also each
    item's document index (captured['doc']) and loss (captured['loss'])."""
    import torch
    from transformers import PrinterCallback, Trainer, TrainerCallback

    class _Data(torch.utils.data.Dataset):
        def __len__(self):
            return len(docs)

        def __getitem__(self, i):
            item = {"input_ids": docs[i]["input_ids"], "labels": docs[i]["labels"]}
            return {**item, "doc": torch.tensor(i)} if with_doc else item

    def collate(features):
        return {k: torch.stack([f[k] for f in features]) for k in features[0]}

    class _Capture(TrainerCallback):
        def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
            captured["grad"] = flat_grad(model).clone()

    class _Recording(Trainer):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            if with_doc:
                captured["doc"] = int(inputs.pop("doc")[0])
            seen.append(None if num_items_in_batch is None else int(num_items_in_batch))
            loss = super().compute_loss(model, inputs, return_outputs=return_outputs,
                                        num_items_in_batch=num_items_in_batch)
            if with_doc:
                captured["loss"] = float(loss.detach())
            return loss

    trainer = _Recording(model=model, args=args, train_dataset=_Data(), data_collator=collate,
                         optimizers=(torch.optim.SGD(model.parameters(), lr=0.0), None), callbacks=[_Capture()])
    trainer.remove_callback(PrinterCallback)             # no log line printed into the page
    return trainer


def trainer_accumulation(model, docs, use_num_items: bool = True, seed: int = 0, output_dir=None,
                         reference=None) -> dict:
    """One optimiser step of the real `transformers.Trainer` over `docs`: per-device batch size 1, gradient
    accumulation over all len(docs) microbatches, no clipping, SGD with learning rate 0 (the step leaves the
    weights as they were). The accumulated gradient is read at `on_pre_optimizer_step` and compared with the
    full-batch token-mean gradient.

    use_num_items=True: the Trainer as installed (the Llama forward accepts **kwargs, so the Trainer counts the
    targets of the whole accumulated batch and passes num_items_in_batch to the model's loss).
    use_num_items=False: `model_accepts_loss_kwargs` set to False, as for a model whose forward takes no
    loss kwargs: each microbatch's mean loss is divided by the number of accumulation steps (mean of means).
    `reference`: (gradient, loss) from full_batch_gradient(model, docs), computed when not given.
    Returns the num_items_in_batch values the Trainer passed, the relative difference and cosine."""
    import tempfile

    from transformers import TrainingArguments

    if len(docs) < 1:
        raise PitfallError("trainer_accumulation needs at least one document")
    g_full, loss_full = reference if reference is not None else full_batch_gradient(model, docs)
    seen: list = []
    captured: dict = {}

    with tempfile.TemporaryDirectory(prefix="docgrad-trainer-") as tmp, _dequantised_for_trainer(model):
        args = TrainingArguments(output_dir=output_dir or tmp, per_device_train_batch_size=1,
                                 gradient_accumulation_steps=len(docs), max_steps=1, learning_rate=0.0,
                                 max_grad_norm=0.0, weight_decay=0.0, report_to=[], use_cpu=True, seed=seed,
                                 data_seed=seed, logging_strategy="no", save_strategy="no", disable_tqdm=True,
                                 dataloader_num_workers=0, remove_unused_columns=False)
        trainer = _recording_trainer(model, docs, args, captured, seen)
        accepts = bool(trainer.model_accepts_loss_kwargs)
        if not use_num_items:
            trainer.model_accepts_loss_kwargs = False
        trainer.train()
    model.zero_grad(set_to_none=True)
    model.eval()
    g = captured["grad"]
    nf = float(g_full.norm())
    return {
        "use_num_items": use_num_items, "model_accepts_loss_kwargs": accepts,
        "gradient_accumulation_steps": len(docs), "num_items_in_batch_passed": seen,
        "n_targets_total": sum(d["n_targets"] for d in docs),
        "targets_per_microbatch": [d["n_targets"] for d in docs],
        "loss_full_token_mean": loss_full,
        "rel_discrepancy": float((g - g_full).norm()) / nf,
        "cosine_with_full": float(g @ g_full) / (float(g.norm()) * nf),
    }


# What the page states about the installed transformers, each with the source line(s) that show it.
TRANSFORMERS_CLAIMS = {
    "count": ("Trainer._get_num_items_in_batch", r"labels\.ne\(-100\)\.sum\(\)",
              "counts the targets (labels != -100) of all the microbatches of one optimiser step"),
    "shift": ("Trainer._get_num_items_in_batch", r'batch\["labels"\]\[\.\.\., 1:\]',
              "counts causal-LM targets after the shift (labels[..., 1:])"),
    "gather": ("Trainer._get_num_items_in_batch", r"self\.accelerator\.gather\(num_items_in_batch",
               "with average_tokens_across_devices and world_size > 1, sums the counts of all ranks (gather)"),
    "times_world": ("Trainer.compute_loss", r"loss \*= loss_scale",
                    "multiplies the rank's loss by the number of processes, undoing DDP's 1/W average"),
    "sum_over_items": ("fixed_cross_entropy", r"loss = loss / num_items_in_batch",
                       "the model's loss: summed cross-entropy divided by num_items_in_batch"),
    "ga_divide": ("Trainer.training_step", r"loss = loss / self\.current_gradient_accumulation_steps",
                  "without num_items_in_batch, divides each microbatch's mean by the accumulation steps"),
    "default_true": ("TrainingArguments", r"average_tokens_across_devices: bool = field\(\s*default=True",
                     "average_tokens_across_devices defaults to True"),
}


def _source_of(where: str) -> str:
    import transformers
    from transformers.loss.loss_utils import fixed_cross_entropy

    if where == "fixed_cross_entropy":
        return inspect.getsource(fixed_cross_entropy)
    if where == "TrainingArguments":
        return inspect.getsource(transformers.TrainingArguments)
    cls, name = where.split(".")
    return inspect.getsource(getattr(getattr(transformers, cls), name))


def transformers_excerpts(context: int = 0) -> dict:
    """The installed transformers version and, for each claim in TRANSFORMERS_CLAIMS, the matching source
    line(s) of the installed code (found: False when the pattern is not there, i.e. the code changed and the
    page's description must be checked)."""
    import transformers

    out = {"version": transformers.__version__, "claims": {}}
    for key, (where, pattern, meaning) in TRANSFORMERS_CLAIMS.items():
        src = _source_of(where)
        m = re.search(pattern, src)
        lines = []
        if m:
            first = src.count("\n", 0, m.start())
            last = src.count("\n", 0, m.end())
            all_lines = src.splitlines()
            lines = [ln.strip() for ln in all_lines[max(0, first - context):last + 1 + context]]
        out["claims"][key] = {"where": where, "meaning": meaning, "found": bool(m), "lines": lines}
    return out


# --------------------------------------------------------------------------------------------------
# Packed sequences
# --------------------------------------------------------------------------------------------------

PACKING_LAYOUTS = ("standalone", "packed_causal", "packed_positions_reset", "packed_document_mask")
PACKING_LABELS = {
    "standalone": "each document alone",
    "packed_causal": "packed, plain causal attention",
    "packed_positions_reset": "packed, positions reset, attention across documents",
    "packed_document_mask": "packed, positions reset + per-document mask",
}


def packed_weights(lengths, per_document: bool = False) -> dict:
    """Weights of the documents of one packed row whose document i has `lengths[i]` targets: the row's token
    mean gives n_i / sum n, per-document weighting gives 1 / D. Also each target's weight and Kish's n_eff."""
    n = check_int_list("lengths", lengths)
    if any(v <= 0 for v in n):
        raise NoValidPositionsError(f"every packed document needs at least one target, got {n}")
    D, N = len(n), sum(n)
    doc_w = [1.0 / D] * D if per_document else [v / N for v in n]
    target_w = [w / v for w, v in zip(doc_w, n)]
    flat = [tw for tw, v in zip(target_w, n) for _ in range(v)]
    return {"document_weights": doc_w, "target_weights": target_w, "n_eff": kish_n_eff(flat), "n": N}


def pack_documents(docs_tokens, eos_id: int) -> dict:
    """One packed row: each document's tokens followed by `eos_id`, concatenated. Returns input_ids, the
    document index and the offset within its document of every position, the reset position ids, and the
    labels DataCollatorWithFlattening gives (each document's first label replaced by -100)."""
    ids, doc, off = [], [], []
    for i, toks in enumerate(docs_tokens):
        toks = [int(t) for t in toks] + [int(eos_id)]
        if len(toks) < 2:
            raise PitfallError(f"document {i} is empty")
        ids += toks
        doc += [i] * len(toks)
        off += list(range(len(toks)))
    return {"input_ids": ids, "doc": doc, "offset": off, "position_ids": list(off),
            "lengths": [len(t) + 1 for t in docs_tokens]}


def flattening_batch(rows_docs, eos_id: int) -> dict:
    """transformers' DataCollatorWithFlattening applied to each row's documents (each + eos): input_ids,
    labels (first label of every document -100) and position ids reset per document, one row per packed row."""
    import torch
    from transformers import DataCollatorWithFlattening

    collate = DataCollatorWithFlattening(return_tensors="pt")
    out = {"input_ids": [], "labels": [], "position_ids": []}
    for docs in rows_docs:
        feats = [{"input_ids": [int(t) for t in d] + [int(eos_id)], "labels": [int(t) for t in d] + [int(eos_id)]}
                 for d in docs]
        b = collate(feats)
        for k in out:
            out[k].append(b[k][0])
    return {k: torch.stack(v) for k, v in out.items()}


def _per_target_ce(logits, ids):
    """Cross-entropy of every next-token target of every row: (rows, T - 1), target t + 1 from logits t."""
    import torch.nn.functional as F

    lg = logits[:, :-1, :].float()
    return F.cross_entropy(lg.reshape(-1, lg.shape[-1]), ids[:, 1:].reshape(-1), reduction="none").reshape(
        ids.shape[0], -1)


def packed_target_losses(model, rows_docs, eos_id: int) -> list[dict]:
    """Every next-token target's loss (nats) under the four PACKING_LAYOUTS. `rows_docs[r]` lists the
    documents (token id lists) of packed row r; all rows must have the same total length (one batch).

    Rows: layout, row, doc, offset (position of the target within its document, EOS included; offset 0 is the
    document's first token, a target only in the packed layouts, predicted across the boundary), boundary
    (offset == 0), loss, and `in_flattening_labels` (False where DataCollatorWithFlattening's labels are -100).
    """
    import torch

    packs = [pack_documents(docs, eos_id) for docs in rows_docs]
    T = len(packs[0]["input_ids"])
    if any(len(p["input_ids"]) != T for p in packs):
        raise PitfallError(f"packed rows differ in length: {[len(p['input_ids']) for p in packs]}")
    ids = torch.tensor([p["input_ids"] for p in packs])
    pos_reset = torch.tensor([p["position_ids"] for p in packs])
    flat = flattening_batch(rows_docs, eos_id)
    if not torch.equal(flat["input_ids"], ids) or not torch.equal(flat["position_ids"], pos_reset):
        raise PitfallError("DataCollatorWithFlattening packed the rows differently from pack_documents")
    keep = (flat["labels"][:, 1:] != IGNORE_INDEX)
    rows = []
    with torch.no_grad():
        runs = {
            "packed_causal": model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits,
            "packed_positions_reset": model(input_ids=ids, attention_mask=torch.ones_like(ids),
                                            position_ids=pos_reset).logits,
            # transformers (masking_utils) builds the per-document (block) mask from position ids that restart
            # only when three things hold: no attention mask, no cache (use_cache=False: a model whose config
            # has use_cache=True, as SmolLM2's, builds a cache and attends across documents), and an attention
            # implementation that applies the mask it builds (eager/sdpa/flex here; FlashAttention reads the
            # packed boundaries from the position ids, e.g. with DataCollatorWithFlattening)
            "packed_document_mask": model(input_ids=ids, position_ids=pos_reset, use_cache=False).logits,
        }
        for layout, logits in runs.items():
            ce = _per_target_ce(logits, ids)
            for r, p in enumerate(packs):
                for t in range(1, T):
                    rows.append({"layout": layout, "row": r, "doc": p["doc"][t], "offset": p["offset"][t],
                                 "boundary": p["offset"][t] == 0, "loss": float(ce[r, t - 1]),
                                 "in_flattening_labels": bool(keep[r, t - 1])})
        # every document alone, in one right-padded batch (right padding leaves a causal model's earlier
        # positions unchanged; the padded positions are not read)
        alone = [(r, i, [int(t) for t in d] + [int(eos_id)]) for r, docs in enumerate(rows_docs)
                 for i, d in enumerate(docs)]
        L = max(len(x) for _, _, x in alone)
        seqs = torch.zeros((len(alone), L), dtype=torch.long)
        att = torch.zeros((len(alone), L), dtype=torch.long)
        for j, (_, _, x) in enumerate(alone):
            seqs[j, :len(x)], att[j, :len(x)] = torch.tensor(x), 1
        ce = _per_target_ce(model(input_ids=seqs, attention_mask=att).logits, seqs)
        for j, (r, i, x) in enumerate(alone):
            for k in range(1, len(x)):
                rows.append({"layout": "standalone", "row": r, "doc": i, "offset": k, "boundary": False,
                             "loss": float(ce[j, k - 1]), "in_flattening_labels": True})
    return rows


def packed_target_counts(lengths) -> dict:
    """Next-token targets of one packed row whose documents have `lengths[i]` tokens (separator included):
    T - 1 targets in all, D - 1 of them a document's first token predicted across a boundary, and T - D left
    when each document's first label is -100 (DataCollatorWithFlattening), the standalone count sum(n_i - 1)."""
    n = check_int_list("lengths", lengths)
    if any(v < 1 for v in n):
        raise PitfallError(f"every packed document needs at least one token, got {n}")
    T, D = sum(n), len(n)
    return {"tokens": T, "targets": T - 1, "boundary_targets": D - 1, "targets_without_boundaries": T - D}


def packing_summary(rows: list[dict], offsets=(0, 1, 2, 4, 8, 16, 32)) -> dict:
    """From packed_target_losses: per layout the number of targets, the mean loss of the boundary targets and of
    the rest, the row token mean with and without the boundary targets; per offset (0 = the boundary target)
    the mean loss over the documents after the first (the ones that follow a boundary) in each layout, with
    the mean paired difference from the same targets predicted standalone; and each layout's largest
    |loss - standalone loss| over the targets both have, and its mean difference over the targets of the
    documents after the first (mean_diff_vs_standalone_after_boundary)."""
    import pandas as pd

    df = pd.DataFrame(rows)
    if df.empty:
        raise PitfallError("no packed-target rows")
    out = {"layouts": {}, "by_offset": [], "max_abs_diff_vs_standalone": {}}
    key = ["row", "doc", "offset"]
    alone = df[df.layout == "standalone"].set_index(key)["loss"]
    for layout, g in df.groupby("layout", sort=False):
        b = g[g.boundary]
        kept = g[g.in_flattening_labels]
        out["layouts"][layout] = {
            "n_targets": int(len(g)), "n_boundary_targets": int(len(b)),
            "mean_loss_boundary": float(b.loss.mean()) if len(b) else None,
            "mean_loss_not_boundary": float(g[~g.boundary].loss.mean()),
            "token_mean_all_targets": float(g.loss.mean()),
            "token_mean_flattening_labels": float(kept.loss.mean()),
            "boundary_share_of_summed_loss": float(b.loss.sum() / g.loss.sum()) if len(b) else 0.0,
        }
        if layout != "standalone":
            both = g[~g.boundary].set_index(key)["loss"]
            diff = both - alone.reindex(both.index)
            out["max_abs_diff_vs_standalone"][layout] = float(diff.abs().max())
            later_docs = diff[diff.index.get_level_values("doc") > 0]
            out["layouts"][layout]["mean_diff_vs_standalone_after_boundary"] = float(later_docs.mean())
    later = df[(df.doc > 0) & (df.offset.isin(list(offsets)))]
    for (layout, k), g in later.groupby(["layout", "offset"], sort=True):
        diff = None
        if k > 0 and layout != "standalone":
            paired = g.set_index(key)["loss"]
            diff = float((paired - alone.reindex(paired.index)).mean())
        out["by_offset"].append({"layout": layout, "offset": int(k), "mean_loss": float(g.loss.mean()),
                                 "n": int(len(g)), "mean_diff_vs_standalone": diff})
    return out


def packed_row_objectives(rows: list[dict], layout: str = "packed_document_mask") -> dict:
    """The two objectives of a packed batch on measured losses (boundary targets dropped, as the flattening
    collator's labels do): the token mean (document i weighs n_i / sum n) and the per-document mean (1 / D
    per document, each document's mean loss first). Per row and over all rows."""
    import pandas as pd

    df = pd.DataFrame(rows)
    g = df[(df.layout == layout) & df.in_flattening_labels]
    if g.empty:
        raise PitfallError(f"no targets of layout {layout!r}")
    per_doc = g.groupby(["row", "doc"]).loss.agg(["mean", "size"]).reset_index()
    return {"layout": layout, "token_mean": float(g.loss.mean()),
            "document_mean": float(per_doc["mean"].mean()),
            "targets_per_document": per_doc["size"].astype(int).tolist(),
            "document_mean_losses": per_doc["mean"].tolist()}


# --------------------------------------------------------------------------------------------------
# What cross_entropy's mean divides by
# --------------------------------------------------------------------------------------------------

def cross_entropy_by_hand(logits, targets, weight=None, label_smoothing: float = 0.0,
                          ignore_index: int = IGNORE_INDEX) -> dict:
    """torch.nn.functional.cross_entropy(reduction='mean') written out in float64 numpy for class-index targets.

    Per non-ignored target i with class y_i, C classes, class weights w (all 1 when None), smoothing eps:
        l_i = (1 - eps) w[y_i] (-log p_i[y_i]) + (eps / C) sum_c w[c] (-log p_i[c])
    and the mean is  sum_i l_i / sum_i w[y_i]  (the sum of the targets' class weights; the count of
    non-ignored targets when there are no class weights). Returns numerator, denominator, loss and count."""
    x = np.asarray(logits, dtype=np.float64)
    y = np.asarray(targets, dtype=np.int64)
    if x.ndim != 2 or y.shape != (x.shape[0],):
        raise PitfallError(f"logits must be (n, C) and targets (n,), got {x.shape} and {y.shape}")
    C = x.shape[1]
    w = np.ones(C) if weight is None else np.asarray(weight, dtype=np.float64)
    if w.shape != (C,):
        raise PitfallError(f"weight must have one entry per class ({C}), got shape {w.shape}")
    valid = y != ignore_index
    if np.any((y[valid] < 0) | (y[valid] >= C)):
        raise PitfallError(f"targets outside [0, {C}) that are not ignore_index={ignore_index}")
    z = x - x.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    yv = y[valid]
    nll = -logp[valid, yv]
    smooth = -(logp[valid] * w).sum(axis=1)
    eps = float(label_smoothing)
    num = float(((1 - eps) * w[yv] * nll + eps / C * smooth).sum())
    den = float(w[yv].sum())
    return {"numerator": num, "denominator": den, "loss": num / den if den else float("nan"),
            "n_valid": int(valid.sum()), "n_ignored": int((~valid).sum())}


def cross_entropy_cases(n: int = 8, classes: int = 5, ignored=(1, 4), weight=(1.0, 2.0, 0.5, 3.0, 1.5),
                        label_smoothing: float = 0.1, seed: int = 0) -> list[dict]:
    """Random float64 logits for `n` targets (`ignored` positions set to -100); for no options, weight=,
    label_smoothing= and both: PyTorch's loss, the hand computation, its denominator, the valid count, and
    what dividing by the count instead would give. Also transformers' LabelSmoother (no class weights)."""
    import torch
    import torch.nn.functional as F
    from transformers.trainer_pt_utils import LabelSmoother

    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, classes))
    y = rng.integers(0, classes, size=n)
    y[list(ignored)] = IGNORE_INDEX
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    wt = torch.tensor(weight, dtype=torch.float64)
    rows = []
    for name, kw in (("plain", {}), ("weight", {"weight": wt}), ("label_smoothing", {"label_smoothing": label_smoothing}),
                     ("weight + label_smoothing", {"weight": wt, "label_smoothing": label_smoothing})):
        torch_loss = float(F.cross_entropy(xt, yt, ignore_index=IGNORE_INDEX, **kw))
        hand = cross_entropy_by_hand(x, y, weight=weight if "weight" in kw else None,
                                     label_smoothing=kw.get("label_smoothing", 0.0))
        rows.append({"case": name, "torch": torch_loss, "by_hand": hand["loss"], "denominator": hand["denominator"],
                     "n_valid": hand["n_valid"], "n_ignored": hand["n_ignored"],
                     "divided_by_count": hand["numerator"] / hand["n_valid"],
                     "abs_diff": abs(torch_loss - hand["loss"])})
    ls = LabelSmoother(epsilon=label_smoothing)
    hf = float(ls({"logits": xt}, yt))
    hand = cross_entropy_by_hand(x, y, label_smoothing=label_smoothing)
    rows.append({"case": "transformers LabelSmoother", "torch": hf, "by_hand": hand["loss"],
                 "denominator": hand["denominator"], "n_valid": hand["n_valid"], "n_ignored": hand["n_ignored"],
                 "divided_by_count": hand["numerator"] / hand["n_valid"], "abs_diff": abs(hf - hand["loss"])})
    for r in rows:
        r["targets"] = [int(v) for v in y]
    return rows


# --------------------------------------------------------------------------------------------------
# Optimisers: a constant scale vs a denominator that varies by batch
# --------------------------------------------------------------------------------------------------

def adam_scale_check(grads, scale: float, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8) -> dict:
    """Run torch.optim.Adam and SGD on one parameter vector with the gradient sequence `grads` (steps x dim,
    float64), once as given and once multiplied by `scale`. Adam's update m / (sqrt(v) + eps) with gradients
    c g equals the update with g and eps / c, so the scaled run matches an unscaled run with eps / scale.
    Returns the relative differences of the final parameters (from the same start)."""
    import torch

    g = torch.as_tensor(np.asarray(grads, dtype=np.float64))
    if g.ndim != 2:
        raise PitfallError("grads must be (steps, dim)")

    def run(kind, c, eps_):
        p = torch.zeros(g.shape[1], dtype=torch.float64, requires_grad=True)
        opt = (torch.optim.Adam([p], lr=lr, betas=betas, eps=eps_) if kind == "adam"
               else torch.optim.SGD([p], lr=lr))
        for gt in g:
            p.grad = (c * gt).clone()
            opt.step()
        return p.detach().clone()

    def rel(a, b):
        return float((a - b).norm() / b.norm())

    adam, adam_c, adam_eps = run("adam", 1.0, eps), run("adam", scale, eps), run("adam", 1.0, eps / scale)
    sgd, sgd_c = run("sgd", 1.0, eps), run("sgd", scale, eps)
    return {"scale": scale, "eps": eps, "rel_diff_adam_scaled": rel(adam_c, adam),
            "rel_diff_adam_scaled_vs_eps_over_scale": rel(adam_c, adam_eps),
            "rel_diff_sgd_scaled": rel(sgd_c, sgd), "sgd_step_ratio": float(sgd_c.norm() / sgd.norm())}


TRAINING_SCHEMES = ("token_mean", "constant_scale", "padded_denominator")
TRAINING_LABELS = {
    "token_mean": "token mean (reference)",
    "constant_scale": "token mean × constant c",
    "padded_denominator": "sum / padded positions (c_b varies)",
}


@dataclass(frozen=True)
class TrainBatch:
    """Right-padded rows: input_ids, attention_mask, labels (-100 at padding)."""

    input_ids: object
    attention_mask: object
    labels: object

    @property
    def n_valid(self) -> int:
        return count_targets(self.labels)

    @property
    def n_padded(self) -> int:
        """Target positions of the padded tensor: rows x (T - 1)."""
        return int(self.labels.shape[0] * (self.labels.shape[1] - 1))


def training_batches(token_streams, steps: int, batch_size: int, min_len: int, max_len: int,
                     seed: int = 0) -> list[TrainBatch]:
    """`steps` batches of `batch_size` rows, each row a window of a random stream at a random offset with a
    length drawn uniformly from [min_len, max_len] (seeded), right-padded to the batch's longest row."""
    import torch

    if not (2 <= min_len <= max_len):
        raise PitfallError(f"need 2 <= min_len <= max_len, got {min_len}, {max_len}")
    rng = np.random.default_rng(seed)
    streams = [np.asarray(s) for s in token_streams]
    out = []
    for _ in range(steps):
        docs = []
        for _ in range(batch_size):
            s = streams[int(rng.integers(len(streams)))]
            n = int(rng.integers(min_len, max_len + 1))
            start = int(rng.integers(0, len(s) - n))
            ids = torch.as_tensor(s[start:start + n], dtype=torch.long)
            docs.append({"input_ids": ids, "labels": ids.clone(), "n_tokens": n})
        ids, att, lab = pad_batch(docs)
        out.append(TrainBatch(ids, att, lab))
    return out


def batch_scales(batches) -> list[float]:
    """c_b = n_valid / n_padded of each batch: the factor by which dividing by the padded positions scales
    the token mean."""
    return [b.n_valid / b.n_padded for b in batches]


def scheme_loss(summed, batch: TrainBatch, scheme: str, constant: float):
    """The loss a scheme backpropagates, from the summed cross-entropy of the batch's valid targets."""
    if scheme == "token_mean":
        return summed / batch.n_valid
    if scheme == "constant_scale":
        return constant * summed / batch.n_valid
    if scheme == "padded_denominator":
        return summed / batch.n_padded
    raise PitfallError(f"unknown scheme {scheme!r}; expected one of {', '.join(TRAINING_SCHEMES)}")


def trainable_top_layers(model, k: int) -> list[str]:
    """Names of the parameters of the last `k` transformer blocks and of the final norm (embeddings frozen)."""
    n_layers = int(model.config.num_hidden_layers)
    if not 1 <= k <= n_layers:
        raise PitfallError(f"train_top_layers must be in [1, {n_layers}], got {k}")
    names = []
    for name, _ in model.named_parameters():
        m = re.search(r"\.layers\.(\d+)\.", name)
        if m and int(m.group(1)) >= n_layers - k:
            names.append(name)
        elif not m and "norm" in name:
            names.append(name)
    return names


def frozen_input(model, batch: TrainBatch, k: int):
    """The hidden states entering the first of the last `k` blocks (the frozen part's output), no gradient."""
    import torch

    n_layers = int(model.config.num_hidden_layers)
    with torch.no_grad():
        out = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, output_hidden_states=True)
    return out.hidden_states[n_layers - k]


@contextmanager
def top_layers_only(model, k: int):
    """Inside the block the decoder holds only its last `k` blocks, so model(inputs_embeds=frozen_input(...))
    runs those blocks, the final norm and the output layer: the same logits as the whole model, without
    recomputing the frozen blocks (tested against the full forward)."""
    import torch

    base = model.base_model
    layers = getattr(base, "layers", None)
    if layers is None:
        raise PitfallError(f"{type(base).__name__} has no `layers` list of blocks")
    base.layers = torch.nn.ModuleList(list(layers)[len(layers) - k:])
    try:
        yield model
    finally:
        base.layers = layers


def training_drift(model, batches, optimizers=(("sgd", 0.01), ("adam", 1e-4)), schemes=TRAINING_SCHEMES,
                   train_top_layers: int = 4, constant: float | None = None, adam_eps: float = 1e-8) -> dict:
    """Fine-tune the last `train_top_layers` blocks (+ the final norm; embeddings and lower blocks frozen) of
    `model` on the same batches once per (optimiser, scheme), all runs in lockstep from the same start. The
    frozen part runs once per batch (frozen_input); each run's parameters are copied into the top blocks for
    its forward and backward, and its own optimiser steps its own copy. `constant` (default: the mean of the
    batches' c_b) is the constant_scale factor, so the constant and the varying scheme have the same average
    scale. The model's weights are restored at the end.

    Per step and run: the token-mean loss of the batch before the update, and the drift
    |theta_run - theta_ref| / |theta_ref - theta_0| from the same optimiser's token-mean run; for the varying
    scheme also |theta_var - theta_const| / |theta_ref - theta_0| (what no rescaling of the learning rate can
    remove). Returns {"steps": rows, "final": rows of the last step, "constant", "scales", ...}."""
    import torch
    import torch.nn.functional as F

    names = trainable_top_layers(model, train_top_layers)
    live = dict(model.named_parameters())
    theta0 = {n: live[n].detach().clone() for n in names}
    flags = {n: p.requires_grad for n, p in live.items()}
    scales = batch_scales(batches)
    c = float(np.mean(scales)) if constant is None else float(constant)
    runs = {}
    for opt_name, lr in optimizers:
        for scheme in schemes:
            if scheme not in TRAINING_SCHEMES:
                raise PitfallError(f"unknown scheme {scheme!r}; expected one of {', '.join(TRAINING_SCHEMES)}")
            ps = {n: theta0[n].clone().requires_grad_(True) for n in names}
            if opt_name == "sgd":
                opt = torch.optim.SGD(list(ps.values()), lr=lr)
            elif opt_name == "adam":
                opt = torch.optim.Adam(list(ps.values()), lr=lr, eps=adam_eps)
            else:
                raise PitfallError(f"unknown optimiser {opt_name!r}: 'sgd' or 'adam'")
            runs[(opt_name, scheme)] = (ps, opt)

    def dist(a, b):
        return math.sqrt(sum(float((a[n].detach() - b[n].detach()).double().pow(2).sum()) for n in names))

    step_rows = []
    try:
        for n, p in live.items():
            p.requires_grad_(n in names)
        for t, b in enumerate(batches):
            hidden = frozen_input(model, b, train_top_layers)
            for (opt_name, scheme), (ps, opt) in runs.items():
                with torch.no_grad():
                    for n in names:
                        live[n].copy_(ps[n])
                with top_layers_only(model, train_top_layers):
                    logits = model(inputs_embeds=hidden, attention_mask=b.attention_mask).logits
                lg = logits[:, :-1, :].float()
                summed = F.cross_entropy(lg.reshape(-1, lg.shape[-1]), b.labels[:, 1:].reshape(-1),
                                         ignore_index=IGNORE_INDEX, reduction="sum")
                loss = scheme_loss(summed, b, scheme, c)
                model.zero_grad(set_to_none=True)
                loss.backward()
                for n in names:
                    ps[n].grad = live[n].grad
                opt.step()
                opt.zero_grad(set_to_none=True)
                step_rows.append({"step": t + 1, "optimizer": opt_name, "scheme": scheme,
                                  "token_mean_loss": float(summed.detach()) / b.n_valid, "scale": scales[t]})
            for opt_name, _ in optimizers:
                ref = runs[(opt_name, "token_mean")][0] if (opt_name, "token_mean") in runs else None
                moved = dist(ref, theta0) if ref is not None else 0.0
                for r in step_rows[-len(runs):]:
                    if r["optimizer"] != opt_name or ref is None:
                        continue
                    ps = runs[(opt_name, r["scheme"])][0]
                    r["ref_distance_from_start"] = moved
                    r["drift"] = dist(ps, ref) / moved if moved else 0.0
                    if r["scheme"] == "padded_denominator" and (opt_name, "constant_scale") in runs:
                        r["drift_from_constant"] = dist(ps, runs[(opt_name, "constant_scale")][0]) / moved
    finally:
        model.zero_grad(set_to_none=True)
        with torch.no_grad():
            for n in names:
                live[n].copy_(theta0[n])
        for n, p in live.items():
            p.requires_grad_(flags[n])
    last = step_rows[-len(runs):]
    return {"trainable": names, "n_trainable": int(sum(theta0[n].numel() for n in names)), "constant": c,
            "scales": scales, "steps": step_rows, "final": last}


# --------------------------------------------------------------------------------------------------
# Policy-gradient normalisation
# --------------------------------------------------------------------------------------------------

PG_SCHEMES = ("sequence_mean", "token_mean", "constant")
PG_LABELS = {
    "sequence_mean": "per-sequence mean, then mean over sequences",
    "token_mean": "mean over all tokens of the group",
    "constant": "sum / (G · L_max), a constant",
}


def policy_gradient_weights(lengths, scheme: str, max_length: int | None = None) -> list[float]:
    """Weight of one token of each sequence (G sequences of `lengths[i]` tokens) in the group's loss
    sum_i sum_t w_i A_i (-log pi(o_it)):
      sequence_mean  w_i = 1 / (G n_i)     (page 01's document mean)
      token_mean     w_i = 1 / sum n       (page 01's token mean)
      constant       w_i = 1 / (G L_max)   (L_max = max_length, default max(lengths))"""
    n = check_int_list("lengths", lengths)
    if any(v <= 0 for v in n):
        raise NoValidPositionsError(f"every sequence needs at least one token, got {n}")
    G = len(n)
    if scheme == "sequence_mean":
        return [1.0 / (G * v) for v in n]
    if scheme == "token_mean":
        return [1.0 / sum(n)] * G
    if scheme == "constant":
        L = max(n) if max_length is None else int(max_length)
        if L < max(n):
            raise PitfallError(f"max_length {L} is shorter than the longest sequence {max(n)}")
        return [1.0 / (G * L)] * G
    raise PitfallError(f"unknown scheme {scheme!r}; expected one of {', '.join(PG_SCHEMES)}")


def policy_gradient_table(lengths, advantages, max_length: int | None = None) -> list[dict]:
    """Per scheme: each sequence's per-token weight, its total weight (n_i w_i), its signed push A_i n_i w_i,
    the per-token weight ratio shortest/longest, and Kish's n_eff of the token weights."""
    n = check_int_list("lengths", lengths)
    a = [float(v) for v in advantages]
    if len(a) != len(n):
        raise PitfallError(f"one advantage per sequence: {len(a)} for {len(n)} sequences")
    rows = []
    short, long_ = int(np.argmin(n)), int(np.argmax(n))
    for s in PG_SCHEMES:
        w = policy_gradient_weights(n, s, max_length)
        rows.append({"scheme": s, "label": PG_LABELS[s], "per_token_weight": w,
                     "sequence_weight": [wi * ni for wi, ni in zip(w, n)],
                     "signed_push": [ai * wi * ni for ai, wi, ni in zip(a, w, n)],
                     "short_over_long_per_token": w[short] / w[long_],
                     "total_weight": sum(wi * ni for wi, ni in zip(w, n)),
                     "n_eff": kish_n_eff([wi for wi, ni in zip(w, n) for _ in range(ni)])})
    return rows


# --------------------------------------------------------------------------------------------------
# Effective sample size and design effects
# --------------------------------------------------------------------------------------------------

def _weights(weights) -> np.ndarray:
    w = np.asarray(weights, dtype=np.float64).reshape(-1)
    if w.size == 0:
        raise PitfallError("no weights")
    if np.any(w < 0) or not np.all(np.isfinite(w)):
        raise PitfallError("weights must be finite and non-negative")
    if w.sum() == 0:
        raise NoValidPositionsError("all weights are zero")
    return w


def kish_n_eff(weights) -> float:
    """Kish's effective sample size (sum w)^2 / sum w^2 (zero weights contribute nothing)."""
    w = _weights(weights)
    return float(w.sum() ** 2 / (w ** 2).sum())


def kish_design_effect(weights) -> float:
    """n sum w^2 / (sum w)^2 = n / n_eff over the n units with a non-zero weight (1 for equal weights)."""
    w = _weights(weights)
    w = w[w > 0]
    return float(w.size * (w ** 2).sum() / w.sum() ** 2)


def design_effect(weights, corr) -> float:
    """Var(sum w x / sum w) / Var(mean of n independent units) for units of equal variance with correlation
    matrix `corr`: n w' C w / (sum w)^2. C = I gives Kish's weighting effect; equal weights and equal
    correlation rho within a block of m give 1 + (m - 1) rho."""
    w = _weights(weights)
    C = np.asarray(corr, dtype=np.float64)
    if C.shape != (w.size, w.size):
        raise PitfallError(f"corr must be {w.size} x {w.size}, got {C.shape}")
    if not np.allclose(C, C.T) or not np.allclose(np.diag(C), 1.0):
        raise PitfallError("corr must be a symmetric matrix with ones on the diagonal")
    return float(w.size * (w @ C @ w) / w.sum() ** 2)


def equicorrelated_design_effect(m: int, rho: float) -> float:
    """1 + (m - 1) rho: m units with pairwise correlation rho, averaged with equal weights (Kish)."""
    if m < 1:
        raise PitfallError(f"m must be >= 1, got {m}")
    return 1.0 + (m - 1) * float(rho)


def block_correlation(sizes, rho: float) -> np.ndarray:
    """Correlation matrix of units in blocks (documents) of the given sizes: rho within a block, 0 across."""
    sizes = check_int_list("sizes", sizes)
    n = sum(sizes)
    C = np.zeros((n, n))
    start = 0
    for s in sizes:
        C[start:start + s, start:start + s] = rho
        start += s
    np.fill_diagonal(C, 1.0)
    return C


def objective_effective_sizes(batch: Batch) -> list[dict]:
    """For each of page 01's objectives on `batch`: the positions with non-zero weight, Kish's n_eff and the
    weighting design effect n / n_eff."""
    rows = []
    for obj in OBJECTIVES:
        w = np.concatenate(objective_weights(batch, obj))
        rows.append({"objective": obj, "label": OBJECTIVE_LABELS[obj], "n": int((w > 0).sum()),
                     "n_eff": kish_n_eff(w), "design_effect": kish_design_effect(w)})
    return rows


def weighted_mean_variance(weights, corr=None, draws: int = 20000, seed: int = 0) -> dict:
    """Monte-Carlo check of the design effect: draw unit-variance units (independent, or with correlation
    `corr`), form the weighted mean, and compare its variance with that of an equal-weight mean of n
    independent units (1 / n). Returns the simulated and the exact design effect."""
    w = _weights(weights)
    n = w.size
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((draws, n))
    if corr is not None:
        z = z @ np.linalg.cholesky(np.asarray(corr, dtype=np.float64)).T
    est = z @ (w / w.sum())
    exact = design_effect(w, np.eye(n) if corr is None else corr)
    return {"n": n, "draws": draws, "simulated": float(est.var(ddof=1) * n), "exact": exact}


def flat_rho(design_effect_value: float, m: int) -> float:
    """The correlation rho that, equal between every pair of m units, gives this design effect: (deff - 1)/(m - 1)."""
    if m < 2:
        raise PitfallError(f"m must be >= 2, got {m}")
    return (float(design_effect_value) - 1.0) / (m - 1)


def design_effects(shown: Analysis, window_chunks: int = 32) -> list[dict]:
    """R(16K) per corpus of the cells a page shows (a Study.page analysis: the same numbers page 04 states, from
    the result files, not from another page's output), with the effective number of independent chunks of a 16K
    block (window_chunks / R) and the flat correlation that would give the same R."""
    out = []
    for c in shown.cells:
        R = c.all.R_16K
        if R is None or not np.isfinite(R):
            continue
        lo, hi = c.all.R_16K_ci
        out.append({"corpus": c.corpus, "R_16K": float(R), "R_16K_ci": [lo, hi] if lo is not None else [],
                    "effective_chunks": window_chunks / float(R), "flat_rho": flat_rho(float(R), window_chunks)})
    if not out:
        raise PitfallError("the results state no R(16K): probe a cell first (make probe)")
    return out


# --------------------------------------------------------------------------------------------------
# A real multi-process data-parallel Trainer step (torchrun, gloo, CPU), for the tests
# --------------------------------------------------------------------------------------------------

def _ddp_worker(out: str, lengths, average_tokens: bool, seed: int, arch: str) -> None:
    """Run under torchrun: every rank builds the same tiny model and documents; transformers' Trainer (CPU, gloo)
    gives each rank one document (batch size 1, no accumulation) and takes one SGD step with learning rate 0.
    Rank 0 saves the all-reduced gradient, and every rank the num_items_in_batch it passed and its loss."""
    import json
    import os
    import tempfile

    import torch
    from transformers import TrainingArguments

    rank = int(os.environ.get("RANK", "0"))
    model = tiny_model(arch, seed=seed)
    docs = make_documents(lengths, seed=seed + 1)
    seen, captured = [], {}

    with tempfile.TemporaryDirectory(prefix=f"docgrad-ddp-{rank}-") as tmp:
        args = TrainingArguments(output_dir=tmp, per_device_train_batch_size=1, gradient_accumulation_steps=1,
                                 max_steps=1, learning_rate=0.0, max_grad_norm=0.0, weight_decay=0.0, report_to=[],
                                 use_cpu=True, seed=seed, data_seed=seed, logging_strategy="no", save_strategy="no",
                                 disable_tqdm=True, dataloader_num_workers=0, remove_unused_columns=False,
                                 average_tokens_across_devices=average_tokens, ddp_backend="gloo")
        trainer = _recording_trainer(model, docs, args, captured, seen, with_doc=True)
        trainer.train()
        world = trainer.args.world_size
    with open(f"{out}.rank{rank}.json", "w") as f:
        json.dump({"rank": rank, "world_size": world, "doc": captured["doc"], "num_items_in_batch": seen,
                   "loss": captured["loss"]}, f)
    if rank == 0:
        torch.save(captured["grad"], f"{out}.grad.pt")


def ddp_trainer_step(lengths, average_tokens: bool, nproc: int = 2, seed: int = 0, arch: str = "llama",
                     timeout: float = 600) -> dict:
    """One real data-parallel Trainer step: `nproc` CPU processes under torchrun (gloo), rank r given one of the
    documents of `lengths` tokens, `average_tokens_across_devices=average_tokens`. Compared with the full-batch
    token-mean gradient of the same tiny model and documents in this process. Returns the ranks' documents,
    num_items_in_batch and losses, and the relative gradient difference."""
    import json
    import os
    import socket
    import subprocess
    import sys
    import tempfile

    import torch

    lengths = check_int_list("lengths", lengths)
    if len(lengths) != nproc:
        raise PitfallError(f"one document per process: {len(lengths)} documents for {nproc} processes")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory(prefix="docgrad-ddp-") as tmp:
        out = f"{tmp}/step"
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}", "--master-addr=127.0.0.1",
               f"--master-port={port}", "-m", "docgrad.teaching.pitfalls", "ddp-worker", out, json.dumps(lengths),
               "1" if average_tokens else "0", str(seed), arch]
        env = {**os.environ, "OMP_NUM_THREADS": "1", "TQDM_DISABLE": "1"}
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        if done.returncode != 0:
            raise PitfallError(f"torchrun failed ({done.returncode}):\n{done.stderr[-3000:]}")
        ranks = [json.loads(open(f"{out}.rank{r}.json").read()) for r in range(nproc)]
        g = torch.load(f"{out}.grad.pt")
    model = tiny_model(arch, seed=seed)
    docs = make_documents(lengths, seed=seed + 1)
    g_full, loss_full = full_batch_gradient(model, docs)
    nf = float(g_full.norm())
    return {"average_tokens_across_devices": average_tokens, "world_size": ranks[0]["world_size"],
            "rank_docs": [r["doc"] for r in ranks], "num_items_in_batch": [r["num_items_in_batch"] for r in ranks],
            "rank_losses": [r["loss"] for r in ranks], "n_targets": [d["n_targets"] for d in docs],
            "loss_full": loss_full, "rel_discrepancy": float((g.double() - g_full).norm()) / nf}


if __name__ == "__main__":          # torchrun -m docgrad.teaching.pitfalls ddp-worker OUT LENGTHS AVERAGE SEED ARCH
    import json
    import sys

    if len(sys.argv) != 7 or sys.argv[1] != "ddp-worker":
        raise SystemExit("usage: python -m docgrad.teaching.pitfalls ddp-worker OUT LENGTHS(JSON) AVERAGE(0|1) SEED ARCH")
    _ddp_worker(sys.argv[2], json.loads(sys.argv[3]), sys.argv[4] == "1", int(sys.argv[5]), sys.argv[6])


# --------------------------------------------------------------------------------------------------
# Code exercises: a student's function, checked against the full-batch token mean
# --------------------------------------------------------------------------------------------------

CHECK_TOLERANCE = 1e-5        # relative gradient difference a correct answer stays below (float32 rounding)


def _checked(rel: float, what: str) -> dict:
    ok = bool(rel < CHECK_TOLERANCE)
    return {"passed": ok, "rel_diff": rel,
            "message": (f"correct: {what} matches the full-batch token mean (relative difference {rel:.1e})" if ok
                        else f"not yet: {what} differs from the full-batch token mean by {rel:.3g} of its norm "
                             f"(a correct answer stays below {CHECK_TOLERANCE:g})")}


def _exercise_setup(lengths, seed: int):
    model = tiny_model("llama", seed=seed)
    docs = make_documents(lengths, seed=seed + 1)
    g_full, _ = full_batch_gradient(model, docs)
    return model, docs, g_full


def check_accumulation(accumulate, lengths=(48, 6, 20), seed: int = 0) -> dict:
    """Checker of the accumulation exercise. `accumulate(model, microbatches)` gets a tiny causal LM and a list of
    microbatches (each a list of documents, as reduction.make_documents makes them), must run backward once per
    microbatch and return nothing; its accumulated .grad is compared with the full-batch token-mean gradient.
    Helpers a solution may use: reduction.summed_loss(model, docs), reduction.count_targets(doc['labels'])."""
    model, docs, g_full = _exercise_setup(lengths, seed)
    model.zero_grad(set_to_none=True)
    accumulate(model, [[d] for d in docs])
    g = flat_grad(model)
    model.zero_grad(set_to_none=True)
    return _checked(float((g - g_full).norm() / g_full.norm()), "the accumulated gradient")


def check_rank_loss(rank_loss, lengths=(48, 6, 20, 12), seed: int = 0) -> dict:
    """Checker of the data-parallel exercise. `rank_loss(summed, n_local, n_global, world_size)` returns the loss a
    rank back-propagates, from its summed target loss (a tensor), its own target count, the all-reduced count of
    every rank and the number of ranks. DDP then averages the ranks' gradients (simulated here: one document per
    rank, gradients summed and divided by the world size); the result is compared with the full-batch token mean."""
    model, docs, g_full = _exercise_setup(lengths, seed)
    W = len(docs)
    n = [d["n_targets"] for d in docs]
    total = None
    for d, n_r in zip(docs, n):
        model.zero_grad(set_to_none=True)
        rank_loss(summed_loss(model, [d]), n_r, sum(n), W).backward()
        g_r = flat_grad(model)
        total = g_r if total is None else total + g_r
    model.zero_grad(set_to_none=True)
    return _checked(float((total / W - g_full).norm() / g_full.norm()), "the DDP-averaged gradient")
