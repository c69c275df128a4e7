"""Where a spiking chunk's gradient comes from: docs/methods.md, Model regime, addendum 2026-12-07, section 3.

For one standalone chunk x_0 .. x_{C-1} with a start token b ahead of it (context only), the probe's loss is
L = (1/(C-1)) sum_{t=1}^{C-1} l_t, l_t = -log p(x_t | b, x_0 .. x_{t-1}). This module measures, with exact squared
norms over every parameter (tied weights once, as the probe's group 'all'):

  * tail(s) = |grad (1/(C-1)) sum_{t>=s} l_t|^2 for the starts s of TAIL_STARTS: the gradient with the targets
    before s dropped and the normalisation kept, so tail(1) is the probe's |g|^2 and a fall from tail(1) to
    tail(s) is what targets 1 .. s-1 carry (with their interference);
  * single(t) = |grad l_t / (C-1)|^2 for the first targets t of SINGLE_TARGETS: each target alone;
  * shifted: tail(1) of the chunk one token later in its span (one token earlier for the span's last chunk),
    the same start token ahead: whether the spike follows the chunk's first token;
  * float64: tail(1) with the model and the arithmetic in float64: whether the spike is rounding.
"""

from __future__ import annotations

import copy

import numpy as np

from docgrad.core.groups import named_parameter_groups

TAIL_STARTS = (1, 2, 3, 5, 9, 17, 65)
SINGLE_TARGETS = (1, 2, 3)


def _sqnorm(params) -> float:
    return float(sum(float((p.grad.double() ** 2).sum()) for p in params if p.grad is not None))


def target_losses(model, ids, bos_id: int | None):
    """l_t for t = 1 .. C-1 (a tensor of C-1 with its graph), the start token `bos_id` ahead as context only."""
    import torch
    import torch.nn.functional as F

    seq = ids if bos_id is None else torch.cat([ids.new_tensor([bos_id]), ids])
    off = 0 if bos_id is None else 1
    logits = model(input_ids=seq[None], use_cache=False).logits[0, off:off + len(ids) - 1]
    return F.cross_entropy(logits.float() if logits.dtype != torch.float64 else logits, ids[1:], reduction="none")


def chunk_attribution(model, ids, bos_id: int | None, starts=TAIL_STARTS, singles=SINGLE_TARGETS) -> dict:
    """{"loss": L, "tail": {s: tail(s)}, "single": {t: single(t)}} of one chunk (module docstring): one forward,
    a backward per quantity through the same graph."""
    params = [p for _, p, _ in named_parameter_groups(model)]
    ce = target_losses(model, ids, bos_id)
    n = ce.numel()
    todo = [("tail", s, ce[s - 1:].sum() / n) for s in starts] + [("single", t, ce[t - 1] / n) for t in singles]
    out = {"loss": float(ce.detach().mean()), "tail": {}, "single": {}}
    for i, (kind, at, loss) in enumerate(todo):
        model.zero_grad(set_to_none=True)
        loss.backward(retain_graph=i < len(todo) - 1)
        out[kind][int(at)] = _sqnorm(params)
    model.zero_grad(set_to_none=True)
    return out


def chunk_sqnorm(model, ids, bos_id: int | None) -> float:
    """The probe's |g|^2 of one chunk (tail(1)), in the model's own dtype."""
    params = [p for _, p, _ in named_parameter_groups(model)]
    model.zero_grad(set_to_none=True)
    target_losses(model, ids, bos_id).mean().backward()
    value = _sqnorm(params)
    model.zero_grad(set_to_none=True)
    return value


def shifted_tokens(span_tokens, chunk: int, k: int) -> tuple[np.ndarray, int]:
    """Chunk k of a span moved by one token: (tokens, shift) with shift +1, or -1 for the span's last chunk."""
    tokens = np.asarray(span_tokens)
    shift = 1 if (k + 1) * chunk + 1 <= len(tokens) else -1
    a = k * chunk + shift
    return tokens[a:a + chunk], shift


def diagnose(model, span_tokens, chunk: int, k: int, bos_id: int, model64=None) -> dict:
    """Every measurement of the module docstring for chunk k of one span (model64: the same model in float64,
    or None to skip that one)."""
    import torch

    tokens = np.asarray(span_tokens)
    ids = torch.as_tensor(tokens[k * chunk:(k + 1) * chunk], dtype=torch.long)
    rec = chunk_attribution(model, ids, bos_id)
    moved, shift = shifted_tokens(tokens, chunk, k)
    rec["shifted"] = {"shift": shift, "sqnorm": chunk_sqnorm(model, torch.as_tensor(moved, dtype=torch.long), bos_id)}
    rec["no_start_token"] = chunk_sqnorm(model, ids, None)
    if model64 is not None:
        rec["float64"] = chunk_sqnorm(model64, ids, bos_id)
    rec["first_tokens"] = [int(t) for t in tokens[k * chunk:k * chunk + 4]]
    return rec


def float64_copy(model):
    """A float64 copy of the model (the original is untouched)."""
    return copy.deepcopy(model).double()
