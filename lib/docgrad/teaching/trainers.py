"""Loss reduction in real training loops (page 01b, section 1): data parallelism and gradient accumulation in the
installed transformers.Trainer.

W ranks each reduce their own batch; DDP then *averages* the W gradients. A per-rank mean followed by that average
is a mean of means (rank r weighs 1/W instead of n_r / N), page 01a's microbatch pitfall again. The fix is the
global target count N = sum_r n_r: rank r's loss is S_r / N, multiplied by W to undo DDP's 1/W (what the Trainer
does with `average_tokens_across_devices`; the installed lines: docgrad.teaching.installed.TRAINER_CLAIMS).

    data_parallel_step     the ranks simulated in one process with the model's own loss (num_items_in_batch)
    trainer_accumulation   the real Trainer, one accumulated optimiser step; the gradient it built
    ddp_trainer_step       the Trainer in real processes under torchrun (gloo, CPU) on a tiny model
    check_accumulation, check_rank_loss   the page's code exercises: a student's function against the full batch
"""

from __future__ import annotations

from contextlib import contextmanager

from docgrad.models import tiny_model
from docgrad.teaching.reduction import (NoValidPositionsError, ReductionError, check_int_list, checked,
                                        exercise_setup, flat_grad, full_batch_gradient, make_documents, pad_batch,
                                        summed_loss)


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
        raise ReductionError(f"every rank needs at least one document, got {ranks}")
    W = len(ranks)
    counts = [sum(docs[i]["n_targets"] for i in r) for r in ranks]
    if any(c == 0 for c in counts):
        raise NoValidPositionsError(f"a rank has zero targets after the causal shift: counts {counts}")
    N = sum(counts)

    if sorted(i for r in ranks for i in r) != list(range(len(docs))):
        raise ReductionError(f"the ranks must hold every document once: {ranks} for {len(docs)} documents")
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
        "n_parameters": int(sum(p.numel() for p in model.parameters())),
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
        raise ReductionError("the model holds quantized weights; Trainer cannot fine-tune it here")
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
    use_num_items=False: `model_accepts_loss_kwargs` set to False, what the Trainer decides for a model class whose
    `accepts_loss_kwargs` attribute is False (or, for a class without the attribute, whose forward takes no
    **kwargs): no count is passed, and each microbatch's mean loss is divided by the number of accumulation steps
    (a mean of microbatch means).
    `reference`: (gradient, loss) from full_batch_gradient(model, docs), computed when not given.
    Returns the num_items_in_batch values the Trainer passed, the relative difference and cosine."""
    import tempfile

    from transformers import TrainingArguments

    if len(docs) < 1:
        raise ReductionError("trainer_accumulation needs at least one document")
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
        raise ReductionError(f"one document per process: {len(lengths)} documents for {nproc} processes")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory(prefix="docgrad-ddp-") as tmp:
        out = f"{tmp}/step"
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}", "--master-addr=127.0.0.1",
               f"--master-port={port}", "-m", "docgrad.teaching.trainers", "ddp-worker", out, json.dumps(lengths),
               "1" if average_tokens else "0", str(seed), arch]
        env = {**os.environ, "OMP_NUM_THREADS": "1", "TQDM_DISABLE": "1"}
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        if done.returncode != 0:
            raise ReductionError(f"torchrun failed ({done.returncode}):\n{done.stderr[-3000:]}")
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


# --------------------------------------------------------------------------------------------------
# Code exercises: a student's function, checked against the full-batch token mean
# --------------------------------------------------------------------------------------------------

def check_accumulation(accumulate, lengths=(48, 6, 20), seed: int = 0) -> dict:
    """Checker of the accumulation exercise. `accumulate(model, microbatches)` gets a tiny causal LM and a list of
    microbatches (each a list of documents, as reduction.make_documents makes them), must run backward once per
    microbatch and return nothing; its accumulated .grad is compared with the full-batch token-mean gradient.
    Helpers a solution may use: reduction.summed_loss(model, docs), reduction.count_targets(doc['labels'])."""
    model, docs, g_full = exercise_setup(lengths, seed)
    model.zero_grad(set_to_none=True)
    accumulate(model, [[d] for d in docs])
    g = flat_grad(model)
    model.zero_grad(set_to_none=True)
    return checked(float((g - g_full).norm() / g_full.norm()), "the accumulated gradient")


def check_rank_loss(rank_loss, lengths=(48, 6, 20, 12), seed: int = 0) -> dict:
    """Checker of the data-parallel exercise. `rank_loss(summed, n_local, n_global, world_size)` returns the loss a
    rank back-propagates, from its summed target loss (a tensor), its own target count, the all-reduced count of
    every rank and the number of ranks. DDP then averages the ranks' gradients (simulated here: one document per
    rank, gradients summed and divided by the world size); the result is compared with the full-batch token mean."""
    model, docs, g_full = exercise_setup(lengths, seed)
    W = len(docs)
    n = [d["n_targets"] for d in docs]
    total = None
    for d, n_r in zip(docs, n):
        model.zero_grad(set_to_none=True)
        rank_loss(summed_loss(model, [d]), n_r, sum(n), W).backward()
        g_r = flat_grad(model)
        total = g_r if total is None else total + g_r
    model.zero_grad(set_to_none=True)
    return checked(float((total / W - g_full).norm() / g_full.norm()), "the DDP-averaged gradient")


if __name__ == "__main__":          # torchrun -m docgrad.teaching.trainers ddp-worker OUT LENGTHS AVERAGE SEED ARCH
    import json
    import sys

    if len(sys.argv) != 7 or sys.argv[1] != "ddp-worker":
        raise SystemExit("usage: python -m docgrad.teaching.trainers ddp-worker OUT LENGTHS(JSON) AVERAGE(0|1) SEED "
                         "ARCH")
    _ddp_worker(sys.argv[2], json.loads(sys.argv[3]), sys.argv[4] == "1", int(sys.argv[5]), sys.argv[6])
