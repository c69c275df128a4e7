"""The training test's runs (docs/methods.md, "Does R predict learning?"): a small Llama trained from scratch on
one corpus's chunks, shuffled or document-contiguous, with its held-out loss recorded along the way.

    data = LearningData.from_spans(spans, chunk=128)          # the committed 16K spans; documents 0-39 / 40-47
    record = train_run(RunConfig("CODE", "shuffled", b=8, seed=0, steps=T, eval_every=E), data)

An arm draws the b chunks of each step either uniformly from all training chunks without replacement (shuffled,
a new permutation each epoch) or as the b consecutive chunks of one aligned (b*C)-token block of one training
document (contiguous, blocks in a random order each epoch). The seed sets the initialisation and the order. The
loss of a step is the mean over its chunks of each chunk's mean over its C - 1 targets.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import torch
from transformers import LlamaConfig, LlamaForCausalLM

SHUFFLED, CONTIGUOUS = "shuffled", "contiguous"
VOCAB_FILE = "docgrad_vocab.json"       # beside a checkpoint's weights: {"tokenizer_ids": the id of each row}
TRAIN_DOCS, HELD_OUT_DOCS = (0, 40), (40, 48)


@dataclass(frozen=True)
class RunConfig:
    """One run of the ladder; every field but corpus, arm, b and seed is the rule's, fixed for every arm."""

    corpus: str
    arm: str                      # SHUFFLED or CONTIGUOUS
    b: int                        # chunks per step
    seed: int
    steps: int                    # T
    eval_every: int               # E
    chunk: int = 128              # C
    layers: int = 4
    width: int = 128
    heads: int = 4
    mlp: int = 512
    lr: float = 1e-3
    warmup: float = 0.05          # fraction of T of linear warm-up
    final_lr: float = 0.1         # cosine to this fraction of lr
    betas: tuple = (0.9, 0.95)
    weight_decay: float = 0.1
    clip: float = 1.0
    checkpoints: tuple = ()       # steps after which the model is saved as a local model folder

    def __post_init__(self):
        if self.arm not in (SHUFFLED, CONTIGUOUS):
            raise ValueError(f"arm {self.arm!r}: {SHUFFLED} or {CONTIGUOUS}")
        if self.b < 1 or self.steps < 1 or not 1 <= self.eval_every <= self.steps:
            raise ValueError(f"b {self.b}, steps {self.steps}, eval_every {self.eval_every}: need b >= 1 and "
                             "1 <= eval_every <= steps")

    @property
    def name(self) -> str:
        return f"{self.corpus}_{self.arm}_b{self.b}_s{self.seed}"


@dataclass(frozen=True)
class LearningData:
    """A corpus's chunks under a vocabulary of its own: train [n_train_docs, chunks, C] and held-out
    [n_held_docs, chunks, C] int64 tensors of ids 0..V-1, and `vocab`, the tokenizer id of each (the map)."""

    train: torch.Tensor
    held_out: torch.Tensor
    vocab: np.ndarray

    @classmethod
    def from_spans(cls, spans: list[np.ndarray], chunk: int = 128, train=TRAIN_DOCS,
                   held_out=HELD_OUT_DOCS) -> "LearningData":
        """Documents train[0]..train[1]-1 and held_out[0]..held_out[1]-1 of `spans` (equal-length token arrays),
        cut into whole chunks; the vocabulary is the ids that occur in those documents, sorted."""
        docs = [np.asarray(s, dtype=np.int64) for s in spans]
        if len(docs) < held_out[1] or len({len(d) for d in docs}) != 1:
            raise ValueError(f"need {held_out[1]} spans of one length, got {len(docs)} of lengths "
                             f"{sorted({len(d) for d in docs})}")
        m = len(docs[0]) // chunk
        used = np.stack([d[: m * chunk] for d in docs[train[0]:train[1]] + docs[held_out[0]:held_out[1]]])
        vocab = np.unique(used)
        ids = torch.from_numpy(np.searchsorted(vocab, used)).reshape(len(used), m, chunk)
        n = train[1] - train[0]
        return cls(ids[:n], ids[n:], vocab)

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)


def batch_order(arm: str, b: int, n_docs: int, chunks_per_doc: int, seed: int) -> Iterator[np.ndarray]:
    """Endless (doc, chunk) index arrays of shape [b, 2], one per step (module docstring). Shuffled: a permutation
    of every training chunk per epoch, taken b at a time (a remainder shorter than b is dropped). Contiguous: the
    aligned blocks of b consecutive chunks of every document, in a random order per epoch."""
    rng = np.random.default_rng(seed)
    if arm == SHUFFLED:
        every = np.array([(d, k) for d in range(n_docs) for k in range(chunks_per_doc)])
        while True:
            p = every[rng.permutation(len(every))]
            for i in range(0, len(p) - b + 1, b):
                yield p[i:i + b]
    if chunks_per_doc < b:
        raise ValueError(f"contiguous b={b} needs {b} chunks a document, a span holds {chunks_per_doc}")
    blocks = [(d, j * b) for d in range(n_docs) for j in range(chunks_per_doc // b)]
    while True:
        for i in rng.permutation(len(blocks)):
            d, k = blocks[i]
            yield np.array([(d, k + j) for j in range(b)])


def learning_rate(step: int, config: RunConfig) -> float:
    """Linear warm-up over warmup*T steps, then cosine from lr to final_lr*lr at step T."""
    warm = max(1, round(config.warmup * config.steps))
    if step < warm:
        return config.lr * (step + 1) / warm
    t = (step - warm) / max(1, config.steps - warm)
    return config.lr * (config.final_lr + (1 - config.final_lr) * 0.5 * (1 + math.cos(math.pi * min(t, 1.0))))


def make_model(config: RunConfig, vocab_size: int):
    """The rule's Llama: `layers` x `width`, `heads` heads, MLP `mlp`, tied embeddings, seeded initialisation."""
    torch.manual_seed(config.seed)
    cfg = LlamaConfig(vocab_size=vocab_size, hidden_size=config.width, intermediate_size=config.mlp,
                      num_hidden_layers=config.layers, num_attention_heads=config.heads,
                      num_key_value_heads=config.heads, max_position_embeddings=config.chunk,
                      tie_word_embeddings=True, bos_token_id=None, eos_token_id=None, pad_token_id=None)
    return LlamaForCausalLM(cfg).float()


def chunk_loss(model, chunks: torch.Tensor) -> torch.Tensor:
    """Mean over chunks of each chunk's mean next-token cross-entropy over its C - 1 targets."""
    logits = model(input_ids=chunks).logits[:, :-1]
    per_token = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), chunks[:, 1:].reshape(-1),
                                                  reduction="none").view(chunks.shape[0], -1)
    return per_token.mean(dim=1).mean()


@torch.no_grad()
def held_out_loss(model, held_out: torch.Tensor, batch: int = 16) -> float:
    """The mean loss over every chunk of the held-out documents (each chunk's mean over its targets); `batch`
    chunks a forward pass (16: a quarter of the logits of 64, 1.3-2x faster on 2 cores, benchmarks/learning_speed.py)."""
    model.eval()
    flat = held_out.reshape(-1, held_out.shape[-1])
    total = sum(chunk_loss(model, flat[i:i + batch]).item() * len(flat[i:i + batch])
                for i in range(0, len(flat), batch))
    model.train()
    return total / len(flat)


@dataclass
class RunRecord:
    """What a run leaves: its config, the held-out loss at every evaluated step (step 0 included), the train loss
    of every step, the checkpoints saved, and its seconds."""

    config: dict
    eval_steps: list = field(default_factory=list)
    held_out: list = field(default_factory=list)
    train_loss: list = field(default_factory=list)
    checkpoints: dict = field(default_factory=dict)
    seconds: float = 0.0
    vocab_size: int = 0


def data_sha256(data: LearningData) -> str:
    """sha256 of the training and held-out ids and the vocabulary map: the data a run learned from."""
    h = hashlib.sha256()
    for a in (data.train.numpy(), data.held_out.numpy(), np.asarray(data.vocab)):
        h.update(np.ascontiguousarray(a, dtype=np.int64).tobytes())
    return h.hexdigest()


def code_sha256() -> str:
    """sha256 of this module's source: the code a run was trained with."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()


def train_run(config: RunConfig, data: LearningData, checkpoint_dir: Path | None = None,
              progress: Callable[[int, float], None] | None = None, state_path: Path | None = None,
              save_every: int = 100) -> RunRecord:
    """Train one run of the ladder (module docstring) and return its record; with `checkpoint_dir`, the model after
    each step of config.checkpoints is saved there as a local model folder (save_pretrained, with its vocabulary map
    VOCAB_FILE: measure.checkpoint_probe reads both). With `state_path`,
    the model, optimiser and record are saved there every `save_every` steps and a run cut short resumes from
    them (the batch order is replayed to the step reached, so a resumed run is the run uninterrupted)."""
    model = make_model(config, data.vocab_size)
    opt = torch.optim.AdamW(model.parameters(), lr=config.lr, betas=config.betas, weight_decay=config.weight_decay)
    order = batch_order(config.arm, config.b, data.train.shape[0], data.train.shape[1], config.seed)
    rec = RunRecord(asdict(config), vocab_size=data.vocab_size)
    start = 0
    if state_path is not None and Path(state_path).exists():
        state = torch.load(state_path, weights_only=False)
        if state["config"] != rec.config or state["data_sha256"] != data_sha256(data):
            raise ValueError(f"{state_path}: the partial state of another run or other data; delete it to start over")
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        rec = RunRecord(**state["record"])
        start = state["step"]
        for _ in range(start):                 # the same batches from here on
            next(order)
    t0 = time.perf_counter() - rec.seconds
    if start == 0:
        rec.eval_steps.append(0)
        rec.held_out.append(held_out_loss(model, data.held_out))
    for step in range(start, config.steps):
        idx = next(order)
        for g in opt.param_groups:
            g["lr"] = learning_rate(step, config)
        loss = chunk_loss(model, data.train[idx[:, 0], idx[:, 1]])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.clip)
        opt.step()
        rec.train_loss.append(float(loss.item()))
        done = step + 1
        if done % config.eval_every == 0 or done == config.steps:
            rec.eval_steps.append(done)
            rec.held_out.append(held_out_loss(model, data.held_out))
        if checkpoint_dir is not None and done in config.checkpoints:
            path = Path(checkpoint_dir) / f"{config.name}_step{done}"
            model.save_pretrained(path)
            (path / VOCAB_FILE).write_text(json.dumps({"tokenizer_ids": [int(v) for v in data.vocab]}))
            rec.checkpoints[str(done)] = str(path)
        if state_path is not None and done % save_every == 0 and done < config.steps:
            rec.seconds = time.perf_counter() - t0
            Path(state_path).parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(f"{state_path}.tmp")
            torch.save({"config": rec.config, "data_sha256": data_sha256(data), "step": done,
                        "model": model.state_dict(), "optimizer": opt.state_dict(), "record": asdict(rec)}, tmp)
            tmp.replace(state_path)
        if progress is not None:
            progress(done, rec.held_out[-1])
    rec.seconds = time.perf_counter() - t0
    return rec
