"""Packed rows (page 01c, sections 1 and 2): what packing does to the weights, the targets and the context, and
how the installed collators prepare a packed batch.

Several documents in one row. The row's token mean weighs document i by its target count n_i (1 / D each under
the per-document mean); the first token of a later document is a target predicted from the previous document's
end; and under plain causal attention every later position also sees the documents before it.

    packed_target_losses   every target's loss under four layouts (standalone; packed with plain causal
                           attention; position ids reset only; position ids reset and a per-document mask)
    collate_both           transformers' DataCollatorWithFlattening and TRL's padding-free collator on the same
                           documents: position ids, labels, cu_seq_lens, seq_idx
    trl_packed             TRL's pack_dataset (best-fit decreasing) then its padding-free collator: seq_lengths
    check_per_document_mean  the page's code exercise: the per-document mean of a packed batch
"""

from __future__ import annotations

from docgrad.teaching.installed import expected_count, trainer_count
from docgrad.teaching.reduction import IGNORE_INDEX, NoValidPositionsError, ReductionError, check_int_list


PACKING_LAYOUTS = ("standalone", "packed_causal", "packed_positions_reset", "packed_document_mask")
PACKING_LABELS = {
    "standalone": "each document alone",
    "packed_causal": "packed, plain causal attention",
    "packed_positions_reset": "packed, positions reset, attention across documents",
    "packed_document_mask": "packed, positions reset + per-document mask",
}


def packed_weights(lengths, per_document: bool = False) -> dict:
    """Weights of the D documents of one packed row whose document i has n_i = `lengths[i]` targets: the row's
    token mean gives document i the weight n_i / sum n, the per-document mean 1 / D. Also each target's weight."""
    n = check_int_list("lengths", lengths)
    if any(v <= 0 for v in n):
        raise NoValidPositionsError(f"every packed document needs at least one target, got {n}")
    D, N = len(n), sum(n)
    doc_w = [1.0 / D] * D if per_document else [v / N for v in n]
    return {"document_weights": doc_w, "target_weights": [w / v for w, v in zip(doc_w, n)], "n": N}


def pack_documents(docs_tokens, eos_id: int) -> dict:
    """One packed row: each document's tokens followed by `eos_id`, concatenated. Returns input_ids, the
    document index and the offset within its document of every position, the reset position ids, and the
    labels DataCollatorWithFlattening gives (each document's first label replaced by -100)."""
    ids, doc, off = [], [], []
    for i, toks in enumerate(docs_tokens):
        toks = [int(t) for t in toks] + [int(eos_id)]
        if len(toks) < 2:
            raise ReductionError(f"document {i} is empty")
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
        raise ReductionError(f"packed rows differ in length: {[len(p['input_ids']) for p in packs]}")
    ids = torch.tensor([p["input_ids"] for p in packs])
    pos_reset = torch.tensor([p["position_ids"] for p in packs])
    flat = flattening_batch(rows_docs, eos_id)
    if not torch.equal(flat["input_ids"], ids) or not torch.equal(flat["position_ids"], pos_reset):
        raise ReductionError("DataCollatorWithFlattening packed the rows differently from pack_documents")
    keep = (flat["labels"][:, 1:] != IGNORE_INDEX)
    rows = []
    with torch.no_grad():
        runs = {
            "packed_causal": model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits,
            "packed_positions_reset": model(input_ids=ids, attention_mask=torch.ones_like(ids),
                                            position_ids=pos_reset).logits,
            # transformers (masking_utils) builds the per-document (block) mask from position ids that restart
            # only when there is no attention mask and no cache (use_cache=False: a model whose config has
            # use_cache=True, as SmolLM2's, builds a cache and attends across documents); eager and SDPA apply
            # it. FlashAttention builds no mask: it reads the boundaries from cu_seq_lens, or from the position
            # ids only when the batch has one row (installed.PACKING_CLAIMS), so this 8-row batch would attend
            # across documents under FlashAttention without cu_seq_lens
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
        raise ReductionError(f"every packed document needs at least one token, got {n}")
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
        raise ReductionError("no packed-target rows")
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
        raise ReductionError(f"no targets of layout {layout!r}")
    per_doc = g.groupby(["row", "doc"]).loss.agg(["mean", "size"]).reset_index()
    return {"layout": layout, "token_mean": float(g.loss.mean()),
            "document_mean": float(per_doc["mean"].mean()),
            "targets_per_document": per_doc["size"].astype(int).tolist(),
            "document_mean_losses": per_doc["mean"].tolist()}


def packed_losses_summary(model, rows_docs, eos_id: int, offsets=(0, 1, 2, 4, 8, 16, 32)) -> dict:
    """What a page states of packed_target_losses (the expensive run, kept as a record): the packing_summary, the
    two objectives (packed_row_objectives) and the model's parameter count."""
    rows = packed_target_losses(model, rows_docs, eos_id)
    return {"summary": packing_summary(rows, offsets), "objectives": packed_row_objectives(rows),
            "n_parameters": int(sum(p.numel() for p in model.parameters()))}


# --------------------------------------------------------------------------------------------------
# The installed collators on the same documents
# --------------------------------------------------------------------------------------------------

def _lists(batch) -> dict:
    return {k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in batch.items()}


def collate_both(docs_tokens, pad_to_multiple_of: int | None = None) -> dict:
    """The documents (token id lists, labels = input ids) collated by transformers' DataCollatorWithFlattening
    (with its FlashAttention kwargs and sequence index) and by TRL's DataCollatorForLanguageModeling with
    padding_free=True (`pad_to_multiple_of` passed to TRL's): both flatten the batch into one row."""
    from transformers import DataCollatorWithFlattening
    from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

    docs = [[int(t) for t in d] for d in docs_tokens]
    if not docs or any(len(d) < 1 for d in docs):
        raise ReductionError(f"collate_both needs non-empty documents, got lengths {[len(d) for d in docs]}")
    feats = [{"input_ids": d, "labels": list(d)} for d in docs]
    hf = DataCollatorWithFlattening(return_tensors="pt", return_flash_attn_kwargs=True, return_seq_idx=True)(feats)
    trl = DataCollatorForLanguageModeling(pad_token_id=0, padding_free=True, pad_to_multiple_of=pad_to_multiple_of)(
        [{"input_ids": d, "labels": list(d)} for d in docs])
    return {"lengths": [len(d) for d in docs], "transformers": _lists(hf), "trl": _lists(trl)}


def trl_packed(docs_tokens, seq_length: int) -> dict:
    """TRL's pack_dataset (strategy 'bfd': best-fit decreasing, documents kept whole) into rows of at most
    `seq_length` tokens, each row with its `seq_lengths`; then TRL's padding-free collator on those rows."""
    import datasets
    from trl import pack_dataset
    from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

    datasets.disable_progress_bars()
    docs = [[int(t) for t in d] for d in docs_tokens]
    if any(len(d) > seq_length for d in docs):
        raise ReductionError(f"a document is longer than seq_length={seq_length}: lengths {[len(d) for d in docs]}")
    packed = pack_dataset(datasets.Dataset.from_dict({"input_ids": docs}), seq_length, strategy="bfd")
    rows = [{"input_ids": list(r["input_ids"]), "seq_lengths": list(r["seq_lengths"])} for r in packed]
    out = DataCollatorForLanguageModeling(pad_token_id=0, padding_free=True)(rows)
    return {"rows": rows, "collated": _lists(out)}


def counts_of_a_packed_batch(model, docs_tokens, eos_id: int) -> dict:
    """num_items_in_batch of the same documents (each + EOS) as one flattened row (DataCollatorWithFlattening's
    labels) and as a right-padded batch of rows, counted by the installed Trainer and by the two rules (targets
    after the shift; every label != -100). The flattened row's first label of each document is -100 already, so
    both rules agree on it; on the padded batch the every-label rule counts one more per row."""
    import torch

    docs = [[int(t) for t in d] + [int(eos_id)] for d in docs_tokens]
    flat = collate_both(docs)["transformers"]
    flat_labels = torch.tensor(flat["labels"])
    T = max(len(d) for d in docs)
    padded = torch.full((len(docs), T), IGNORE_INDEX, dtype=torch.long)
    for i, d in enumerate(docs):
        padded[i, :len(d)] = torch.tensor(d)
    out = {"lengths": [len(d) for d in docs], "standalone_targets": sum(len(d) - 1 for d in docs)}
    for name, lab in (("flattened", flat_labels), ("padded", padded)):
        out[name] = {"installed_trainer": trainer_count(model, [lab]),
                     "shifted": expected_count([lab], "shifted"), "unshifted": expected_count([lab], "unshifted")}
    return out


# --------------------------------------------------------------------------------------------------
# Code exercise: the per-document mean of a packed batch
# --------------------------------------------------------------------------------------------------

def per_document_mean(losses, labels, position_ids):
    """The mean over documents of each document's mean loss over its supervised targets (labels != -100). A
    document starts where a position id is 0 (documents never span rows); a document without a supervised target
    (e.g. a padding position of its own) is left out. Raises NoValidPositionsError when no document has one."""
    import torch

    start = (position_ids == 0).reshape(-1)
    if not bool(start[0]):
        raise ReductionError("the first position id must be 0: a packed row starts with a document")
    doc = torch.cumsum(start.long(), 0) - 1
    m = (labels != IGNORE_INDEX).reshape(-1).to(torch.float64)
    D = int(doc[-1]) + 1
    sums = torch.zeros(D, dtype=torch.float64).index_add(0, doc, losses.reshape(-1).to(torch.float64) * m)
    counts = torch.zeros(D, dtype=torch.float64).index_add(0, doc, m)
    keep = counts > 0
    if not bool(keep.any()):
        raise NoValidPositionsError("no document has a supervised target: the per-document mean is undefined")
    return (sums[keep] / counts[keep]).mean()


def per_document_mean_cases(seed: int = 0) -> list[dict]:
    """The batches the per-document-mean checker tries, made by the installed collators: a flattened row
    (DataCollatorWithFlattening), the same with prompts masked, TRL's padding-free row padded to a multiple of 8
    (each padding position a 'document' of its own with no target), and two rows packed by TRL's pack_dataset.
    Per-position losses are non-zero everywhere, so masked positions must be left out."""
    import torch

    g = torch.Generator().manual_seed(seed)

    def tokens(lengths):
        return [torch.randint(1, 50, (n,), generator=g).tolist() for n in lengths]

    def losses(like):
        return 0.5 + 2.5 * torch.rand(like.shape, generator=g, dtype=torch.float64)

    cases = []
    hf = collate_both(tokens([7, 3, 12]))["transformers"]
    lab, pos = torch.tensor(hf["labels"]), torch.tensor(hf["position_ids"])
    cases.append({"case": "a flattened row of 3 documents", "labels": lab, "position_ids": pos})
    prompt = lab.clone()
    prompt[0, 1:4] = IGNORE_INDEX                 # the first document's prompt
    prompt[0, 11:14] = IGNORE_INDEX               # the third document's prompt
    cases.append({"case": "the same row with prompts masked", "labels": prompt, "position_ids": pos})
    trl = collate_both(tokens([5, 9, 2, 6]), pad_to_multiple_of=8)["trl"]
    cases.append({"case": "TRL's padding-free row, padded to a multiple of 8",
                  "labels": torch.tensor(trl["labels"]), "position_ids": torch.tensor(trl["position_ids"])})
    pk = trl_packed(tokens([9, 4, 6, 3, 8]), seq_length=16)["collated"]
    cases.append({"case": "rows packed by TRL's pack_dataset", "labels": torch.tensor(pk["labels"]),
                  "position_ids": torch.tensor(pk["position_ids"])})
    for c in cases:
        c["losses"] = losses(c["labels"])
    return cases


def _per_document_bugs(losses, labels, position_ids) -> dict:
    """What the usual mistakes return on one batch."""
    import torch

    m = (labels != IGNORE_INDEX).to(torch.float64)
    doc = torch.cumsum((position_ids == 0).reshape(-1).long(), 0) - 1
    D = int(doc[-1]) + 1
    sums = torch.zeros(D, dtype=torch.float64).index_add(0, doc, (losses * m).reshape(-1))
    cnt = torch.zeros(D, dtype=torch.float64).index_add(0, doc, m.reshape(-1))
    size = torch.zeros(D, dtype=torch.float64).index_add(0, doc, torch.ones_like(m).reshape(-1))
    keep = cnt > 0
    return {"it is the token mean of the batch (documents weighted by their targets)": (losses * m).sum() / m.sum(),
            "each document's sum is divided by its length, masked positions included":
                (sums[keep] / size[keep]).mean(),
            "documents without a supervised target count as 0 in the mean over documents":
                torch.where(keep, sums / cnt.clamp(min=1), torch.zeros_like(sums)).mean()}


def check_per_document_mean(candidate, seed: int = 0) -> dict:
    """Checker of page 01c's code exercise. `candidate(losses, labels, position_ids)` gets per-position losses,
    labels (-100 where nothing is supervised) and position ids (0 where a document starts) of a packed batch and
    must return `per_document_mean`. Returns passed, a message naming the first wrong case (and the usual mistake
    it matches), and one row per case."""
    rows, wrong = [], None
    for c in per_document_mean_cases(seed):
        want = float(per_document_mean(c["losses"], c["labels"], c["position_ids"]))
        try:
            got = float(candidate(c["losses"].clone(), c["labels"].clone(), c["position_ids"].clone()))
        except Exception as e:                       # the student's function may raise anything
            got = f"raised {type(e).__name__}: {e}"
        ok = not isinstance(got, str) and abs(got - want) <= 1e-9 * abs(want)
        rows.append({"case": c["case"], "expected": want, "got": got, "ok": ok})
        if not ok and wrong is None:
            why = "" if isinstance(got, str) else next(
                (b for b, v in _per_document_bugs(c["losses"], c["labels"], c["position_ids"]).items()
                 if abs(got - float(v)) <= 1e-9 * abs(float(v))), "")
            wrong = (c["case"], want, got, why)
    if wrong is None:
        return {"passed": True, "rows": rows, "message": f"correct: the per-document mean on all {len(rows)} batches"}
    case, want, got, why = wrong
    shown = got if isinstance(got, str) else f"{got:.6g}"
    return {"passed": False, "rows": rows,
            "message": f"not yet: on '{case}' the per-document mean is {want:.6g}, got {shown}" + (f": {why}" if why
                                                                                              else "")}
