"""Optimisers and loss factors (page 01b, section 2): a constant factor c on the loss against a denominator that
varies from batch to batch.

A constant factor c multiplies SGD's step by c, but Adam's update m / (sqrt(v) + eps) is unchanged except that eps
acts as eps / c (`adam_scale_check`). A factor that changes from batch to batch (page 01's padded denominator:
c_b = n_valid / n_padded) re-weights the batches, and no optimiser undoes that (`training_drift`: a short real
fine-tuning run of the last blocks, several objectives in lockstep from the same start).
"""

from __future__ import annotations

import math
import re
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from docgrad.teaching.reduction import IGNORE_INDEX, ReductionError, count_targets, pad_batch


def adam_scale_check(grads, scale: float, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8) -> dict:
    """Run torch.optim.Adam and SGD on one parameter vector with the gradient sequence `grads` (steps x dim,
    float64), once as given and once multiplied by `scale`. Adam's update m / (sqrt(v) + eps) with gradients
    c g equals the update with g and eps / c, so the scaled run matches an unscaled run with eps / scale.
    Returns the relative differences of the final parameters (from the same start)."""
    import torch

    g = torch.as_tensor(np.asarray(grads, dtype=np.float64))
    if g.ndim != 2:
        raise ReductionError("grads must be (steps, dim)")

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
        raise ReductionError(f"need 2 <= min_len <= max_len, got {min_len}, {max_len}")
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
    raise ReductionError(f"unknown scheme {scheme!r}; expected one of {', '.join(TRAINING_SCHEMES)}")


def trainable_top_layers(model, k: int) -> list[str]:
    """Names of the parameters of the last `k` transformer blocks and of the final norm (embeddings frozen)."""
    n_layers = int(model.config.num_hidden_layers)
    if not 1 <= k <= n_layers:
        raise ReductionError(f"train_top_layers must be in [1, {n_layers}], got {k}")
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
        raise ReductionError(f"{type(base).__name__} has no `layers` list of blocks")
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
                raise ReductionError(f"unknown scheme {scheme!r}; expected one of {', '.join(TRAINING_SCHEMES)}")
            ps = {n: theta0[n].clone().requires_grad_(True) for n in names}
            if opt_name == "sgd":
                opt = torch.optim.SGD(list(ps.values()), lr=lr)
            elif opt_name == "adam":
                opt = torch.optim.Adam(list(ps.values()), lr=lr, eps=adam_eps)
            else:
                raise ReductionError(f"unknown optimiser {opt_name!r}: 'sgd' or 'adam'")
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


