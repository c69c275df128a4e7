"""R of the training test's own model: the probe run on a checkpoint of a `docgrad learning` run
(docs/methods.md, "Does R predict learning?", "Which R").

A checkpoint is a local model folder (save_pretrained) whose vocabulary is the corpus's own: row i of its
embedding is tokenizer id vocab[i] (measure.learning.VOCAB_FILE beside the weights). So the documents' tokenizer ids are mapped
through that vocabulary, id -> its row, and the probe's own kernel (measure.probe.run_probe: the same chunks, the
same count sketch, the same result files) runs on the mapped spans. `docgrad probe --model <folder>` cannot do this
itself: the folder has no tokenizer, and its ids are not the tokenizer's.

    path = probe_checkpoint(folder, "CODE", spans, out_dir)     # out_dir/<model>/<revision>/CODE_c128_d0-16.npz
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch
from transformers import LlamaForCausalLM

from docgrad.errors import DocgradError
from docgrad.fileio import file_sha256
from docgrad.measure.learning import VOCAB_FILE
from docgrad.measure.probe import run_probe
from docgrad.measure.probe_config import ProbeConfig, as_doc_spans
from docgrad.models import digest_lines
from docgrad.results.format import result_stem

MODEL_PREFIX = "docgrad-learning/"       # the model id a checkpoint's results are filed under


def read_vocabulary(folder: Path) -> np.ndarray:
    """The checkpoint's vocabulary map (sorted tokenizer ids), or a DocgradError naming the folder."""
    path = Path(folder) / VOCAB_FILE
    try:
        vocab = np.asarray(json.loads(path.read_text())["tokenizer_ids"], dtype=np.int64)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise DocgradError(f"{path}: not a `docgrad learning` checkpoint's vocabulary map ({e})") from None
    if vocab.size == 0 or np.any(np.diff(vocab) <= 0):
        raise DocgradError(f"{path}: the vocabulary map must be a non-empty sorted list of distinct token ids")
    return vocab


def map_tokens(tokens: np.ndarray, vocab: np.ndarray, where: str) -> np.ndarray:
    """Each tokenizer id's row in the vocabulary (vocab sorted); an id outside it is a DocgradError naming `where`."""
    tokens = np.asarray(tokens, dtype=np.int64)
    rows = np.clip(np.searchsorted(vocab, tokens), 0, len(vocab) - 1)
    missing = tokens[vocab[rows] != tokens]
    if missing.size:
        raise DocgradError(f"{where}: token ids {sorted(set(missing.tolist()))[:5]} are not in the checkpoint's "
                           f"vocabulary of {len(vocab):,} ids: probe the documents the run trained on")
    return rows


def weights_sha256(folder: Path) -> str:
    """The digest of the folder's safetensors weight files by the rule of a local model directory's pin
    (models.digest_lines over each file's sha256)."""
    files = sorted(Path(folder).glob("*.safetensors"))
    if not files:
        raise DocgradError(f"{folder}: no .safetensors weights (a checkpoint is saved with save_pretrained)")
    return digest_lines([(f.name, file_sha256(f)) for f in files])


def checkpoint_id(folder: Path) -> tuple[str, str]:
    """(model id, revision) of a checkpoint folder <run name>_step<k>: docgrad-learning/<run name> and
    step<k>-<weights sha256[:12]>."""
    name = Path(folder).name
    run, sep, step = name.rpartition("_step")
    if not sep or not step.isdigit():
        raise DocgradError(f"{folder}: a checkpoint folder is named <run>_step<k> (docgrad learning names them so)")
    return MODEL_PREFIX + run, f"step{step}-{weights_sha256(folder)[:12]}"


def probe_checkpoint(folder: Path, corpus: str, spans, out: Path, chunk: int = 128, docs: tuple[int, int] = (0, 16),
                     progress: bool = True) -> Path:
    """Probe the checkpoint on documents docs[0]..docs[1]-1 of `spans` (corpora.load_spans of the corpus the run
    trained on) at chunk C, standalone chunks, float32; the result path (an existing result is kept and returned)."""
    folder = Path(folder)
    model_id, revision = checkpoint_id(folder)
    path = Path(out) / (result_stem(model_id, revision, corpus, chunk, docs) + ".npz")
    if path.exists() and path.with_suffix(".json").exists():
        return path
    vocab = read_vocabulary(folder)
    chosen = [s for s in as_doc_spans(spans) if docs[0] <= s.doc < docs[1]]
    if [s.doc for s in chosen] != list(range(*docs)):
        raise DocgradError(f"{corpus}: documents {docs[0]}-{docs[1] - 1} are not all in the spans given")
    mapped = [(s.doc, map_tokens(s.tokens, vocab, f"{corpus} document {s.doc}"), s.sha256) for s in chosen]
    model = LlamaForCausalLM.from_pretrained(folder, torch_dtype=torch.float32)
    pin = {"model": model_id, "revision": revision, "folder": str(folder), "vocab_size": int(len(vocab))}
    config = ProbeConfig(model=model_id, revision=revision, corpus=corpus, chunk=chunk, pin=pin, docs=docs,
                         command=" ".join(sys.argv))
    path.parent.mkdir(parents=True, exist_ok=True)
    return run_probe(model, mapped, path, config, progress=progress)
