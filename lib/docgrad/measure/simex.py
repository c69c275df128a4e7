"""SIMEX for 4-bit rounding: noise of a known multiple of the rounding error's variance, added to the rounded
weights. Definitions: docs/methods.md#model-regime.

A GGUF file stores each quantised tensor in blocks of 32 weights with one step d per block (Q4_1: x = d q + m,
q in 0..15; Q8_0: x = d q, q in -127..127). Rounding to a grid of step d leaves an error of variance d^2/12 per
weight (uniform on [-d/2, d/2]). SIMEX (Cook & Stefanski 1994) adds independent noise

    w' = w + sqrt(lambda / 12) * d * z,   z ~ N(0, 1) per weight, fixed seed,

so that the total error variance is (1 + lambda) d^2/12, measures each statistic at lambda = 1, 2 beside the
model as loaded (lambda = 0), and extrapolates the trend to lambda = -1, no rounding error
(docgrad.core.simex_fit). Unrounded tensors (F32: the norm gains) are left as they are.

The steps are recovered from the de-quantised weights themselves, which transformers has already laid out as the
model's parameters (rows of q_proj and k_proj permuted back): a Q4_1 block's values span exactly 15 steps
(llama.cpp puts its minimum at q = 0 and its maximum at q = 15), a Q8_0 block's largest magnitude is exactly 127
steps. `file_steps` reads d from the file's bytes, and `check_steps` compares both on every tensor whose rows
the loader did not permute.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from docgrad.measure.probe_config import ProbeError

BLOCK = 32                                   # weights per block, Q4_1 and Q8_0
LEVELS = {"Q4_1": 15.0, "Q8_0": 127.0}       # how many steps a block's range (Q4_1) or magnitude (Q8_0) spans
UNROUNDED = ("F32",)


class SimexError(ProbeError):
    """The model's tensors cannot be given SIMEX noise as asked (an unknown tensor type, a missing file)."""


@dataclass(frozen=True)
class RoundedTensor:
    """One parameter of the model and how its GGUF tensor was rounded."""

    name: str              # the model's parameter name
    gguf_name: str         # the tensor's name in the GGUF file
    qtype: str             # GGUF tensor type: Q4_1, Q8_0, F32


def gguf_tensor_types(gguf_path) -> dict[str, str]:
    """GGUF tensor name -> its type name (Q4_1, Q8_0, F32, ...), read by gguf-py's reader."""
    from gguf import GGUFReader

    return {t.name: t.tensor_type.name for t in GGUFReader(str(gguf_path)).tensors}


def rounded_tensors(model, gguf_path) -> list[RoundedTensor]:
    """Every parameter of `model` (tied weights once) with its GGUF tensor and type; a parameter with no tensor
    in the file, or a type other than Q4_1, Q8_0 or F32, is a SimexError naming it."""
    import gguf

    types = gguf_tensor_types(gguf_path)
    arch = {"llama": gguf.MODEL_ARCH.LLAMA}.get(model.config.model_type)
    if arch is None:
        raise SimexError(f"SIMEX noise: architecture {model.config.model_type!r} is not mapped to GGUF names "
                         "(llama only)")
    names = gguf.get_tensor_name_map(arch, model.config.num_hidden_layers)
    out = []
    for name, _ in model.named_parameters():
        g = names.get_name(name, try_suffixes=(".weight", ".bias"))
        if g is None or g not in types:
            raise SimexError(f"SIMEX noise: parameter {name} has no tensor in {gguf_path} (looked for {g!r})")
        if types[g] not in LEVELS and types[g] not in UNROUNDED:
            raise SimexError(f"SIMEX noise: {g} ({name}) is {types[g]}; the rounding steps of "
                             f"{', '.join(LEVELS)} blocks are implemented")
        out.append(RoundedTensor(name, g, types[g]))
    return out


def recovered_steps(weight: np.ndarray, qtype: str) -> np.ndarray:
    """The step d of every block of 32 consecutive weights along the last axis of a de-quantised tensor
    (shape (..., n / 32)): (max - min) / 15 for Q4_1, max |x| / 127 for Q8_0."""
    w = np.asarray(weight, dtype=np.float64)
    if w.shape[-1] % BLOCK:
        raise SimexError(f"a {qtype} tensor's rows hold whole blocks of {BLOCK}; got rows of {w.shape[-1]}")
    b = w.reshape(*w.shape[:-1], w.shape[-1] // BLOCK, BLOCK)
    if qtype == "Q4_1":
        return (b.max(-1) - b.min(-1)) / LEVELS[qtype]
    if qtype == "Q8_0":
        return np.abs(b).max(-1) / LEVELS[qtype]
    raise SimexError(f"no rounding step for tensor type {qtype}")


def file_steps(reader, gguf_name: str) -> np.ndarray:
    """The step d of every block of one Q4_1 or Q8_0 tensor as stored in the file (the first two bytes of each
    block, float16), shape (rows, blocks per row) in the file's row order. reader: a gguf.GGUFReader, or a path."""
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFReader

    if not isinstance(reader, GGUFReader):
        reader = GGUFReader(str(reader))
    t = next((t for t in reader.tensors if t.name == gguf_name), None)
    if t is None:
        raise SimexError(f"no tensor {gguf_name} in the GGUF file")
    qtype = GGMLQuantizationType[t.tensor_type.name]
    block, size = GGML_QUANT_SIZES[qtype]
    raw = np.asarray(t.data, dtype=np.uint8).reshape(-1, size)
    d = raw[:, :2].copy().view(np.float16)[:, 0].astype(np.float64)
    rows = int(np.prod([int(x) for x in t.shape[1:]])) if len(t.shape) > 1 else 1
    return d.reshape(rows, -1)


def check_steps(model, gguf_path, tensors: list[RoundedTensor] | None = None, rtol: float = 1e-6) -> dict:
    """Compare recovered_steps with file_steps on every rounded tensor the loader did not permute (all but
    attn_q / attn_k, whose rows transformers reorders). Returns {gguf name: max relative difference}; a
    difference above rtol is a SimexError (the recovery rule does not hold for this file)."""
    from gguf import GGUFReader

    params = dict(model.named_parameters())
    reader = GGUFReader(str(gguf_path))
    out = {}
    for t in tensors or rounded_tensors(model, gguf_path):
        if t.qtype not in LEVELS or t.gguf_name.endswith(("attn_q.weight", "attn_k.weight")):
            continue
        rec = recovered_steps(params[t.name].detach().cpu().numpy(), t.qtype)
        stored = file_steps(reader, t.gguf_name)
        if rec.shape != stored.shape:
            raise SimexError(f"{t.gguf_name}: {stored.shape} blocks in the file, {rec.shape} in {t.name}")
        diff = float(np.max(np.abs(rec - stored) / np.maximum(np.abs(stored), 1e-30)))
        if diff > rtol:
            raise SimexError(f"{t.gguf_name}: the steps recovered from {t.name} differ from the file's by up to "
                             f"{diff:.2e} (relative); the recovery rule does not hold for this file")
        out[t.gguf_name] = diff
    return out


def add_rounding_noise(model, tensors: list[RoundedTensor], lam: float, seed: int) -> dict:
    """w += sqrt(lam / 12) * d * z on every rounded parameter (z ~ N(0, 1), one torch generator seeded with
    `seed`, parameters in the model's order); unrounded ones are untouched. Returns what was done: the added
    noise's variance per group of tensor types, relative to the rounding error's, and the counts."""
    import torch

    if not lam > 0:
        raise SimexError(f"SIMEX lambda {lam}: the added variance is a positive multiple of the rounding error's")
    params = dict(model.named_parameters())
    gen = torch.Generator(device="cpu").manual_seed(int(seed))
    noised, untouched, ratio = 0, 0, []
    with torch.no_grad():
        for t in tensors:
            p = params[t.name]
            if t.qtype not in LEVELS:
                untouched += p.numel()
                continue
            d = torch.as_tensor(recovered_steps(p.detach().cpu().numpy(), t.qtype), dtype=torch.float32)
            z = torch.randn(p.shape, generator=gen, dtype=torch.float32)
            step = d.repeat_interleave(BLOCK, dim=-1).reshape(p.shape)
            noise = (lam / 12.0) ** 0.5 * step * z
            p.add_(noise.to(p.device))
            noised += p.numel()
            ratio.append(float((noise.double() ** 2).sum() / max((step.double() ** 2).sum() / 12.0, 1e-300)))
    return {"lambda": float(lam), "seed": int(seed), "noised_weights": noised, "unrounded_weights": untouched,
            "added_variance_over_rounding": float(np.mean(ratio)) if ratio else None}
