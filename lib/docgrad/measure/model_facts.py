"""What was measured: the model file's own description of itself (GGUF metadata), for the pages."""

from __future__ import annotations

from pathlib import Path

from docgrad import models
from docgrad.core.constants import DTYPES
from docgrad.measure.gradients import model_chunk_context


def model_description(path: str | Path | None = None, model: str | None = None) -> dict:
    """What a model file is, from its GGUF metadata (the default model's file, or the offline model `model`'s,
    sha256-checked by docgrad.models.model_file; or the file at `path`): name,
    organisation, fine-tune tag, architecture, layers, width, trained context length, vocabulary, the file's
    quantisation (general.file_type) and its tensors by storage type with bits per weight, and whether it
    carries a chat template (an instruction/chat-tuned model). The probe de-quantises every tensor to
    docgrad.core.constants.DTYPES[0] (float32) and runs each chunk as a standalone sequence."""
    import gguf  # deferred: only this function reads GGUF metadata

    spec = models.get_offline(model) if model is not None else models.SMOLLM2
    p = Path(path) if path is not None else models.model_file(spec)
    r = gguf.GGUFReader(str(p))

    def val(key, default=None):
        f = r.fields.get(key)
        return default if f is None else f.contents()

    arch = val("general.architecture")
    ft = val("general.file_type")
    tensors: dict[str, dict] = {}
    for t in r.tensors:
        k = t.tensor_type.name
        rec = tensors.setdefault(k, {"tensors": 0, "weights": 0, "bytes": 0})
        rec["tensors"] += 1
        rec["weights"] += int(t.n_elements)
        rec["bytes"] += int(t.n_bytes)
    for rec in tensors.values():
        rec["bits_per_weight"] = 8 * rec["bytes"] / rec["weights"]
    return {"file": p.name, "name": val("general.name"), "organization": val("general.organization"),
            "finetune": val("general.finetune"), "size_label": val("general.size_label"), "architecture": arch,
            "layers": val(f"{arch}.block_count"), "width": val(f"{arch}.embedding_length"),
            "context_length": val(f"{arch}.context_length"),
            "vocab_size": val(f"{arch}.vocab_size") or (len(r.fields["tokenizer.ggml.tokens"].data)
                                                       if "tokenizer.ggml.tokens" in r.fields else None),
            "file_type": gguf.LlamaFileType(ft).name.removeprefix("MOSTLY_") if ft is not None else None,
            "tensor_types": tensors, "chat_template": "tokenizer.chat_template" in r.fields,
            "dequantised_dtype": DTYPES[0],
            "chunk_context": model_chunk_context(spec)}
