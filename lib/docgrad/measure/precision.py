"""Reduced precision for the probe (--dtype bfloat16) and its fidelity against float32.
Definitions: docs/methods.md#reduced-precision.

The bf16 mode is torch.autocast(device, bfloat16) around each forward pass. The parameters stay float32;
autocast runs the matrix products (linear layers, attention) in bf16 and keeps reductions, norms, softmax
and the loss in float32; the backward runs each op in the dtype of its forward and accumulates every
parameter's gradient in float32 (the parameter's dtype). So .grad, the count sketch, the squared norms and
the Gram stay float32 / float64 exactly as in a float32 run: only the gradient itself is approximate. (The
other choice, bf16 weights with float32 gradient accumulation, rounds the weights and so probes a slightly
different model; autocast probes the float32 model with rounded arithmetic.)

Fidelity, on the same chunks (gradient_fidelity). With g the float32 gradient of a chunk's loss and h the
bf16 one, per parameter group and for all parameters together:

    cosine = <g, h> / (|g| |h|),        squared-norm ratio = |h|^2 / |g|^2,

and the loss difference. The gate (fidelity_gate): the median over chunks of the all-parameter cosine is
at least core.constants.BF16_GATE_COSINE = 0.999 (a cosine of 0.999 is an angle of 2.6 degrees; the count sketch's own error on
a pair of chunks is about 1/sqrt(B) = 0.003 at B = 2^17).

At the level of the analysis (paired_difference): R(W) of a bf16 cell minus R(W) of the float32 cell on the
same documents, with a paired document bootstrap (each draw resamples the documents once and applies the
same counts to both cells), so the interval is that of the difference, not of either value.

The records a `docgrad precision` run writes are read and compared by docgrad.results.precision_checks, put in
words by docgrad.presentation.sketching (page 02); the command is docgrad.runtime.precision_command.
"""

from __future__ import annotations

import time
from typing import Sequence

import numpy as np

from docgrad.core.constants import ALL, BF16_GATE_COSINE, BF16_TAIL_COSINE, BFLOAT16, FLOAT32, GROUPS
from docgrad.core.groups import named_parameter_groups
from docgrad.measure.gradients import check_dtype, forward_backward
from docgrad.results.precision_checks import PrecisionError, chunk_row


def _grads_by_group(model) -> dict[str, list]:
    """Detached copies of every parameter's gradient (float64 on the model's device), by group; tied weights once."""
    out = {g: [] for g in GROUPS}
    for _, p, g in named_parameter_groups(model):
        if p.grad is not None:
            out[g].append(p.grad.detach().reshape(-1).double().clone())
    return out


def gradient_fidelity(model, chunks: Sequence, dtype: str = BFLOAT16, bos_id: int | None = None,
                      progress: bool = False) -> dict:
    """Per chunk (token id sequences), the float32 and the `dtype` gradient of the probe's chunk loss
    (probe.forward_backward, the same function the probe runs), compared: 'cosine' and 'sqnorm_ratio'
    (chunks x groups, then 'all' in the last column), 'sqnorm_fp32' (the float32 gradient's squared norm over
    all parameters), 'loss_fp32' and 'loss' (chunks), 'groups', and the
    CPU seconds of each forward+backward ('cpu_seconds_fp32', 'cpu_seconds': this process, all threads).
    A group whose float32 gradient is zero gets nan."""
    import torch

    check_dtype(dtype)
    device = next(model.parameters()).device
    model.eval()
    n, G = len(chunks), len(GROUPS)
    res = {"dtype": dtype, "groups": [*GROUPS, ALL], "cosine": np.full((n, G + 1), np.nan),
           "sqnorm_ratio": np.full((n, G + 1), np.nan), "sqnorm_fp32": np.zeros(n), "loss_fp32": np.zeros(n),
           "loss": np.zeros(n),
           "cpu_seconds_fp32": np.zeros(n), "cpu_seconds": np.zeros(n)}
    from tqdm.auto import tqdm

    for k in tqdm(range(n), disable=not progress, desc=f"float32 vs {dtype}"):
        ids = torch.as_tensor(np.asarray(chunks[k]), dtype=torch.long, device=device)
        c0 = time.process_time()
        res["loss_fp32"][k] = forward_backward(model, ids, bos_id, FLOAT32)
        res["cpu_seconds_fp32"][k] = time.process_time() - c0
        g = _grads_by_group(model)
        c0 = time.process_time()
        res["loss"][k] = forward_backward(model, ids, bos_id, dtype)
        res["cpu_seconds"][k] = time.process_time() - c0
        h = _grads_by_group(model)
        model.zero_grad(set_to_none=True)
        tot = np.zeros(3)                          # <g,h>, |g|^2, |h|^2 over all groups
        for gi, grp in enumerate(GROUPS):
            parts = np.array([[float(torch.dot(a, b)), float(torch.dot(a, a)), float(torch.dot(b, b))]
                              for a, b in zip(g[grp], h[grp])]).reshape(-1, 3).sum(0)
            tot += parts
            res["cosine"][k, gi], res["sqnorm_ratio"][k, gi] = _cos_ratio(parts)
        res["cosine"][k, G], res["sqnorm_ratio"][k, G] = _cos_ratio(tot)
        res["sqnorm_fp32"][k] = tot[1]
    return res


def _cos_ratio(parts) -> tuple[float, float]:
    gh, gg, hh = parts
    if gg <= 0:
        return np.nan, np.nan
    return gh / np.sqrt(gg * hh) if hh > 0 else np.nan, hh / gg


def fidelity_gate(fid: dict, threshold: float = BF16_GATE_COSINE) -> dict:
    """The bf16 gate on a gradient_fidelity result: median all-parameter cosine >= threshold. Also the
    median per group, the smallest cosine, the median and largest squared-norm ratio, the mean loss
    difference, and the tail: the chunks (row numbers) whose cosine is below BF16_TAIL_COSINE."""
    cos, ratio = np.asarray(fid["cosine"]), np.asarray(fid["sqnorm_ratio"])
    if cos.shape[0] == 0:
        raise PrecisionError("fidelity_gate: no chunks were compared")
    med = float(np.median(cos[:, -1]))
    groups = list(fid["groups"])
    return {"dtype": fid["dtype"], "chunks": int(cos.shape[0]), "threshold": float(threshold),
            "median_cosine": med, "min_cosine": float(np.min(cos[:, -1])),
            "median_sqnorm_ratio": float(np.median(ratio[:, -1])),
            "max_sqnorm_ratio": float(np.max(ratio[:, -1])), "tail_cosine": BF16_TAIL_COSINE,
            "tail_rows": [int(i) for i in np.flatnonzero(cos[:, -1] < BF16_TAIL_COSINE)],
            "median_cosine_by_group": {g: float(np.nanmedian(cos[:, i])) if np.isfinite(cos[:, i]).any() else None
                                       for i, g in enumerate(groups)},
            "median_sqnorm_ratio_by_group": {g: float(np.nanmedian(ratio[:, i])) if np.isfinite(ratio[:, i]).any()
                                             else None for i, g in enumerate(groups)},
            "mean_loss_difference": float(np.mean(np.asarray(fid["loss"]) - np.asarray(fid["loss_fp32"]))),
            "passes": bool(med >= threshold)}


def fidelity_chunks(spans, documents: int, chunks: int, chunk: int) -> tuple[list[np.ndarray], list[tuple[int, int]]]:
    """The first `chunks` chunks of the first `documents` spans: (token arrays, [(doc, k)])."""
    spans = list(spans)[:documents]
    if len(spans) < documents:
        raise PrecisionError(f"--docs {documents}: the corpus has only {len(spans)} documents")
    short = [int(s.doc) for s in spans if len(s.tokens) < chunks * chunk]
    if short:
        raise PrecisionError(f"--chunks {chunks} x --chunk {chunk}: documents {short} are shorter than "
                             f"{chunks * chunk} tokens")
    toks = [np.asarray(s.tokens[k * chunk:(k + 1) * chunk]) for s in spans for k in range(chunks)]
    return toks, [(int(s.doc), k) for s in spans for k in range(chunks)]


def with_gates(record: dict) -> dict:
    """The record with its gates computed from its per-chunk arrays: each corpus's 'gate', the pooled 'gate'
    over every chunk, 'tail' (corpus, document, chunk, cosine, squared-norm ratio, both losses of each pooled
    tail row) and 'median_cpu_speedup' (median float32 / dtype CPU seconds of a forward+backward)."""
    keys = ("cosine", "sqnorm_ratio", "loss_fp32", "loss", "cpu_seconds_fp32", "cpu_seconds")
    by = record["by_corpus"]
    first = next(iter(by.values()))
    pooled = {"dtype": record["dtype"], "groups": first["groups"],
              **{k: np.concatenate([np.asarray(r[k], dtype=float) for r in by.values()]) for k in keys}}
    where = [(c, *map(int, ch)) for c, r in by.items() for ch in r["chunks"]]
    gate = fidelity_gate(pooled)
    tail = [{"corpus": where[i][0], "document": where[i][1], "chunk": where[i][2],
             **chunk_row(record, where[i][0], where[i][1], where[i][2])} for i in gate["tail_rows"]]
    return {**record, "gate": gate, "tail": tail,
            "median_cpu_speedup": float(np.median(pooled["cpu_seconds_fp32"]) / np.median(pooled["cpu_seconds"])),
            "by_corpus": {c: {**r, "gate": fidelity_gate({"dtype": record["dtype"], **r})} for c, r in by.items()}}
