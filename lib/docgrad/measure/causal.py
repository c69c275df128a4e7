"""Causal context: per-chunk gradients inside one window of W tokens, every earlier token of the window as
context (docs/methods.md#causal-context). causal_targets says which targets each chunk owns; causal_steps
computes the chunks' gradients one after another with the key/value cache and its graph kept;
causal_prefix_loss and causal_window_loss are the brute-force references the tests compare with.
"""

from __future__ import annotations

import os
from contextlib import contextmanager

from docgrad.core.constants import FLOAT32
from docgrad.measure.gradients import autocast
from docgrad.measure.probe_config import ProbeError


def model_context(model) -> int | None:
    """The longest sequence the model was built for (config.max_position_embeddings), or None if unknown."""
    n = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    return int(n) if isinstance(n, int) and n > 0 else None

def check_window(model, window: int) -> None:
    """Refuse a causal window longer than the model's context (SmolLM2-135M: 8,192 per its GGUF metadata)."""
    n = model_context(model)
    if n is not None and window > n:
        raise ProbeError(f"--window {window} exceeds the model's context of {n} tokens "
                         "(config.max_position_embeddings); use a window of at most that")

def causal_targets(chunk: int, m: int) -> list[tuple[int, int]]:
    """Target ownership in a causal window of m chunks of C = chunk tokens: chunk k owns the targets t (the
    token x_t predicted from x_0 .. x_{t-1}) with kC <= t < (k+1)C, i.e. the next-token predictions OF the
    chunk's own tokens. Position 0 has no prediction, so chunk 0 owns C-1 targets (exactly a standalone
    chunk's) and every later chunk C; the counts n_k sum to W-1, the window's targets. Returns [(a_k, b_k)]:
    chunk k owns t in [a_k, b_k), n_k = b_k - a_k.

    With L_k the mean cross-entropy over chunk k's targets, sum_k n_k L_k is the window's token-sum loss,
    hence sum_k n_k grad L_k is its gradient. L_k depends on x_0 .. x_{(k+1)C-1} only (targets up to the
    end of chunk k, predicted from inputs before them): the prefix up to the end of chunk k."""
    return [(max(k * chunk, 1), (k + 1) * chunk) for k in range(m)]

def causal_window_loss(model, ids, chunk: int):
    """(token-sum next-token cross-entropy of the whole window, as a tensor; per-chunk target counts n_k):
    one forward of the window, the definition the per-chunk losses of causal_steps decompose."""
    import torch.nn.functional as F

    logits = model(input_ids=ids[None], use_cache=False).logits[0, :-1]
    counts = [b - a for a, b in causal_targets(chunk, len(ids) // chunk)]
    return F.cross_entropy(logits.float(), ids[1:], reduction="sum"), counts

def causal_prefix_loss(model, ids, chunk: int, k: int, bos_id: int | None = None):
    """Chunk k's causal loss L_k by brute force: one forward of the prefix that ends with chunk k
    (tokens [0, (k+1)C), after the start token bos_id if given), mean cross-entropy over the targets chunk k
    owns. The reference for causal_steps; as a scheme ("prefix truncation") it costs about (m+1)/2 standalone
    chunks per chunk."""
    import torch
    import torch.nn.functional as F

    a, b = causal_targets(chunk, k + 1)[k]
    seq = ids[:b - 1] if bos_id is None else torch.cat([ids.new_tensor([bos_id]), ids[:b - 1]])
    logits = model(input_ids=seq[None], use_cache=False).logits[0, -(b - a):]
    return F.cross_entropy(logits.float(), ids[a:b], reduction="mean")

@contextmanager
def _grouped_kv_attention():
    """While a causal segment's forward runs: let transformers' SDPA attention hand grouped key/value heads to
    torch as they are (enable_gqa) instead of repeating them (repeat_kv), which it otherwise does whenever a
    mask is passed, as it is for every segment after the first. The repeated copies would be saved for the
    backward of every later chunk: for SmolLM2 (9 query, 3 key/value heads) at W = 4096 this cuts the peak
    memory over the model from about 10.4 to 8.4 GiB (measured with every chunk's logits kept), at the same
    speed. The result is the same function (tests/test_causal.py compares with brute force on a grouped-head
    model); a transformers version without this switch simply repeats the heads."""
    key = "TRANSFORMERS_SDPA_FORCE_GQA"
    old = os.environ.get(key)
    os.environ[key] = "1"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = old

def causal_steps(model, ids, chunk: int, dtype: str = FLOAT32, bos_id: int | None = None):
    """The causal per-chunk gradients of one window `ids` (m = len(ids)/C chunks), one chunk at a time: a
    generator that, for k = 0 .. m-1, leaves grad L_k in the parameters' .grad (previous gradients dropped)
    and yields L_k as a float. The caller sketches .grad between steps (and may clear it).

    With bos_id (a start token, docs/methods.md#model-regime) the sequence is bos_id + window, as long-context
    training feeds one document: the start token sits at position 0 as context only and every chunk owns the
    same targets as without it (chunk 0's loss and gradient are then exactly a standalone chunk's with that
    start token ahead of it); every later chunk sees it at the head of its context.

    Scheme: an incremental forward with the autograd graph kept. Segment k feeds the inputs whose predictions
    chunk k owns, positions [a_k - 1, b_k - 1) (causal_targets), through the model with the key/value cache
    of all earlier positions (a transformers DynamicCache whose tensors keep their graph), so its logits are
    exactly chunk k's predictions and L_k is their mean cross-entropy. Then L_k.backward(retain_graph=True)
    backpropagates through segment k and, via the cached keys and values, through every earlier segment:
    the full gradient with every preceding token as context. The logits of segment k are dropped after its
    backward; what stays is the graph of the positions seen so far (at the end, that of the whole window).

    Cost, in standalone-chunk units F (forward) + B (backward, about 2F): segment k costs one chunk forward
    and a backward through k+1 chunks (attention over longer contexts costs more, for every scheme), so
    m F + m(m+1)/2 B in all: about (m+2)/3 standalone chunks per chunk, 3.3 at m = 8. Prefix truncation
    (causal_prefix_loss for each k) recomputes the forward of each prefix: m(m+1)/2 (F+B), (m+1)/2 = 4.5 per
    chunk; one forward of the whole window followed by m backwards of the whole window (retained graph)
    costs m F + m^2 B, (2m+1)/3 = 5.7 per chunk, because a backward cannot skip the positions after chunk k.
    Each L_k needs its own reverse pass through every earlier chunk, so m(m+1)/2 chunk backwards is the floor
    for exact per-chunk gradients; batching the m cotangents (is_grads_batched) keeps that count and holds m
    gradient copies. Measured on SmolLM2-135M, 1 thread, CPU seconds: at W = 2048 incremental 2.17x standalone,
    prefix truncation 2.69x, m backwards of the window 3.42x; at W = 4096 incremental 3.98x (attention's growth
    with context adds to the 3.33). Memory: the activations of the whole window (the same peak as prefix
    truncation's longest prefix): about 8 GiB for SmolLM2 at W = 4096 (benchmarks/probe_overhead.py
    --context causal; the benchmark process peaked at 10.9 GiB)."""
    import torch
    import torch.nn.functional as F
    from transformers import DynamicCache

    m = len(ids) // chunk
    if m < 1 or len(ids) != m * chunk:
        raise ProbeError(f"causal window of {len(ids)} tokens is not a whole number of {chunk}-token chunks")
    shift = 0 if bos_id is None else 1          # positions of the window's tokens in the fed sequence
    seq = ids if bos_id is None else torch.cat([ids.new_tensor([bos_id]), ids])
    cache = DynamicCache(config=getattr(model, "config", None))
    try:
        for k, (a, b) in enumerate(causal_targets(chunk, m)):
            lo = 0 if k == 0 else a - 1 + shift      # segment 0 also feeds the start token
            pos = torch.arange(lo, b - 1 + shift, device=ids.device)
            with _grouped_kv_attention(), autocast(dtype, ids.device.type):
                logits = model(input_ids=seq[None, lo:b - 1 + shift], position_ids=pos[None], cache=cache,
                               use_cache=True).logits[0, -(b - a):]
            loss = F.cross_entropy(logits.float(), ids[a:b], reduction="mean")
            del logits
            model.zero_grad(set_to_none=True)
            loss.backward(retain_graph=k < m - 1)
            value = float(loss.detach())
            del loss
            yield value
    finally:
        del cache
