"""The probe: per-chunk gradients of a language model -> count sketches -> Gram matrices -> a result file.
Definitions: docs/methods.md#per-chunk-gradients.

For every document span and every chunk k of C tokens (tokens [kC, (k+1)C) of the span):
  * the chunk's gradient g_{d,k}, standalone (docgrad.measure.gradients) or, with --context causal --window W,
    with every earlier token of the first W tokens as context (docgrad.measure.causal), in float32 or bf16;
  * per parameter group (attn, mlp, embed incl. lm_head, other; tied weights once): the count sketch
    S g (docgrad.core.sketch, B buckets) and the exact squared norm |g|^2;
  * with exact_ref, the exact inner product <g_ref, g_{d,k}> with the run's first chunk (G1 check).
The Gram K = X X^T (float64) is over ALL chunks of ALL documents of the run, per group. A span must be a
whole number of chunks (no tail is dropped silently). The run's settings are a ProbeConfig
(docgrad.measure.probe_config); each finished document is kept so a killed run resumes (docgrad.measure.resume);
an existing result is never overwritten unless overwrite=True.

Scale-out: under torchrun (WORLD_SIZE > 1), document i goes to rank i mod world_size; ranks write their
documents' state to the shared .partial directory (one machine, or a shared file system), rank 0 holds the
lock and assembles the one result file after a barrier.
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from pathlib import Path
from typing import Callable

import numpy as np

from docgrad.core.constants import FLOAT32, GROUPS
from docgrad.core.sketch import SKETCH_NAME, CountSketch
from docgrad.core.sketch import gram as gram_matrix
from docgrad.measure.causal import causal_steps, check_window, model_context
from docgrad.measure.gradients import check_token_id, context_bos, forward_backward, sync, versions
from docgrad.measure.probe_config import DocSpan, ProbeConfig, ProbeError, as_doc_spans
from docgrad.measure.resume import PartialState, partial_dir
from docgrad.results.format import write_result


class NonFiniteError(ProbeError):
    """A loss or gradient is not finite."""

class ResultExistsError(ProbeError, FileExistsError):
    """A complete result is already there and overwrite was not asked for."""

def _dist():
    """(rank, world_size) of an initialised torch.distributed group, else (0, 1)."""
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except ImportError:
        pass
    return 0, 1

def _barrier():
    rank, world = _dist()
    if world > 1:
        import torch.distributed as dist

        dist.barrier()

def run_probe(model, spans, out_npz, config: ProbeConfig, *, overwrite: bool = False, progress: bool = True,
              load_seconds: float = 0.0, on_document: Callable[[int], None] | None = None,
              extra_meta: dict | None = None) -> Path | None:
    """Probe every chunk of every span and write the result file `out_npz` (+ .json). See the module docstring.

    model: a causal LM already on its device. spans: corpora.Span objects or (doc, tokens, sha256) tuples.
    on_document(doc) is called after each finished document (tests use it to simulate a kill). extra_meta: keys
    added to the result json (e.g. what SIMEX noise was added; the numbers' settings are in config).
    Returns the result path on rank 0 (None on other ranks).
    """
    import torch

    t_start = time.perf_counter()
    out_npz = Path(out_npz)
    rank, world = _dist()
    spans = as_doc_spans(spans)
    if out_npz.suffix != ".npz":
        raise ProbeError(f"{out_npz}: the result path must end in .npz")
    if not overwrite and (out_npz.exists() or out_npz.with_suffix(".json").exists()):
        raise ResultExistsError(f"{out_npz}: a complete result already exists; pass --overwrite to replace it")
    device = next(model.parameters()).device
    config = config.bind(spans, device.type)
    m, chunk = config.chunks_per_document, config.chunk
    bos_id = (check_token_id(model, config.start_token, "start token") if config.start_token is not None
              else context_bos(model, config.context))
    if config.context == "causal":
        check_window(model, config.window)
    check_inputs(model, spans, chunk, m, config.context, bos_id)
    model.eval()

    state = PartialState(partial_dir(out_npz), config)
    with state.lock() if rank == 0 else nullcontext():
        if rank == 0:
            if overwrite:
                state.clear()                  # --overwrite starts the cell afresh
            state.start()
        _barrier()
        state.check()

        t0 = time.perf_counter()
        sketcher = CountSketch.from_model(model, config.buckets, config.seed, device)
        sync(device)
        t_hash = time.perf_counter() - t0

        ref_signed, t_ref = None, 0.0
        if config.exact_ref:
            t0 = time.perf_counter()
            ids = torch.as_tensor(spans[0].tokens[:m * chunk], dtype=torch.long, device=device)
            ref_steps = chunk_steps(model, ids, chunk, m, config.context, bos_id, config.dtype)
            next(ref_steps)                    # chunk 0's gradient (causal: identical to standalone chunk 0's)
            ref_steps.close()
            ref_signed = sketcher.sketch_model_grads(model, keep_signed=True).signed
            model.zero_grad(set_to_none=True)
            sync(device)
            t_ref = time.perf_counter() - t0

        mine = [s for i, s in enumerate(spans) if i % world == rank]
        for s in mine:
            if state.has(s.doc):
                state.load(s, arrays=False)    # refuse foreign state before computing anything
        todo = [s for s in mine if not state.has(s.doc)]
        resumed = len(mine) - len(todo)
        from tqdm.auto import tqdm

        bar = tqdm(total=len(mine) * m, initial=resumed * m, unit="chunk", disable=not progress or rank != 0,
                   desc=f"probe {config.corpus} rank {rank}/{world}", dynamic_ncols=True)
        for span in todo:
            state.save(span.doc, probe_document(model, sketcher, span, chunk, m, ref_signed, bar, bos_id,
                                                config.context, config.dtype))
            if on_document is not None:
                on_document(span.doc)
        bar.close()
        _barrier()
        if rank != 0:
            return None

        t0 = time.perf_counter()
        states = [state.load(s) for s in spans]
        index = np.array([(s.doc, k) for s in spans for k in range(m)], dtype=np.int32)
        loss = np.concatenate([st["loss"] for st in states])
        sqnorm = {g: np.concatenate([st["sqnorm"][:, gi] for st in states]) for gi, g in enumerate(GROUPS)}
        gram = {}
        for gi, g in enumerate(GROUPS):
            gram[g] = gram_matrix(np.concatenate([st["sketch"][:, gi, :] for st in states]))
        ref_dot = np.concatenate([st["ref_dot"] for st in states]) if config.exact_ref else None
        t_gram = time.perf_counter() - t0

        fb = float(sum(st["fb_seconds"].sum() for st in states))
        sk = float(sum(st["sketch_seconds"].sum() for st in states))
        n = len(index)
        meta = {
            "args": config.args(),
            "pin": config.pin,
            "spans_sha256": {str(d): h for d, h in config.spans},
            "n_chunks": n, "chunks_per_document": m, "groups": list(GROUPS),
            "exact_ref_row": 0 if config.exact_ref else None,
            "exact_ref_chunk": [int(spans[0].doc), 0] if config.exact_ref else None,
            "sketch": {"name": SKETCH_NAME, "buckets": config.buckets, "seed": config.seed,
                       "sign_table_bytes": sketcher.memory_bytes},
            "group_sizes": {g: int(sum(p.numel for p in sketcher.params.values() if GROUPS[p.group] == g))
                            for g in GROUPS},
            "device": str(device), "threads": torch.get_num_threads(), "world_size": world,
            "timings": {"load_s": load_seconds, "hash_s": t_hash, "exact_ref_s": t_ref,
                        "forward_backward_s": fb, "sketch_s": sk, "gram_s": t_gram,
                        "forward_backward_per_chunk_s": fb / n, "sketch_per_chunk_s": sk / n,
                        "this_session_wall_s": time.perf_counter() - t_start,
                        "documents_resumed": resumed if world == 1 else None},
            "versions": versions(),
            "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            **(extra_meta or {}),
        }
        write_result(out_npz, index=index, loss=loss, gram=gram, sqnorm=sqnorm, exact_ref_dot=ref_dot, meta=meta,
                     overwrite=overwrite)
        state.clear(ignore_errors=True)
    try:
        state.dir.parent.rmdir()          # .partial/ itself, when empty
    except OSError:
        pass
    return out_npz

def check_inputs(model, spans, chunk: int, m: int, context: str, bos_id: int | None) -> None:
    """Refuse, before the first chunk, what the model cannot read: a standalone chunk (with its start token) longer
    than the model's context, or a token id outside its vocabulary (spans cut by a tokenizer with more ids)."""
    n = model_context(model)
    length = chunk + (bos_id is not None)
    if context != "causal" and n is not None and length > n:
        raise ProbeError(f"--chunk {chunk}: a chunk of {length} tokens{' with its start token' if bos_id is not None else ''}"
                         f" exceeds the model's context of {n} tokens (config.max_position_embeddings); use a chunk "
                         f"of at most {n - (bos_id is not None)}")
    vocab = model.get_input_embeddings().num_embeddings
    top = max(int(np.max(s.tokens[:m * chunk])) for s in spans)
    if top >= vocab:
        doc = next(s.doc for s in spans if int(np.max(s.tokens[:m * chunk])) == top)
        raise ProbeError(f"document {doc} holds token id {top}, but the model's vocabulary has {vocab} ids (0 to "
                         f"{vocab - 1}): its spans were cut by a tokenizer with more ids than this model reads; cut "
                         "the corpus with this model's tokenizer (`docgrad corpora add ... --model` this model)")


def chunk_steps(model, tokens, chunk: int, m: int, context: str = "standalone", bos_id: int | None = None,
                dtype: str = FLOAT32):
    """For k = 0 .. m-1: leave chunk k's gradient g_{d,k} in the parameters' .grad and yield its loss (a float).
    Standalone contexts: one forward_backward per chunk. "causal": causal_steps over the first m chunks as
    one window. Only how each gradient is produced differs; the sketching after each step is shared."""
    if context == "causal":
        yield from causal_steps(model, tokens[:m * chunk], chunk, dtype, bos_id)
        return
    for k in range(m):
        yield forward_backward(model, tokens[k * chunk:(k + 1) * chunk], bos_id, dtype)

def probe_document(model, sketcher: CountSketch, span: DocSpan, chunk: int, m: int, ref_signed=None, bar=None,
                   bos_id: int | None = None, context: str = "standalone", dtype: str = FLOAT32) -> dict:
    """Sketches (m x groups x B float32), exact squared norms, losses, ref dots and timings of one document
    (its first m chunks; in the causal context, one window of m chunks)."""
    import torch

    device = sketcher.device
    sketches = np.zeros((m, len(GROUPS), sketcher.buckets), dtype=np.float32)
    sq = np.zeros((m, len(GROUPS)))
    losses = np.zeros(m)
    ref_dot = np.zeros(m if ref_signed is not None else 0)
    fb_s, sk_s = np.zeros(m), np.zeros(m)
    tokens = torch.as_tensor(span.tokens[:m * chunk], dtype=torch.long).to(device)
    steps = chunk_steps(model, tokens, chunk, m, context, bos_id, dtype)
    for k in range(m):
        t0 = time.perf_counter()
        loss = next(steps)
        sync(device)
        t1 = time.perf_counter()
        if not np.isfinite(loss):
            raise NonFiniteError(f"document {span.doc} chunk {k}: loss is {loss}; finished documents are kept "
                                 "in the .partial state")
        r = sketcher.sketch_model_grads(model, ref=ref_signed)
        sketches[k], sq[k] = r.sketch.cpu().numpy(), r.sqnorm
        model.zero_grad(set_to_none=True)
        sync(device)
        t2 = time.perf_counter()
        if not np.all(np.isfinite(sq[k])) or not np.all(np.isfinite(sketches[k])):
            bad = [g for g, v in zip(GROUPS, sq[k]) if not np.isfinite(v)]
            raise NonFiniteError(f"document {span.doc} chunk {k}: non-finite gradient (groups {bad or 'sketch'}); "
                                 "finished documents are kept in the .partial state")
        losses[k] = loss
        if ref_signed is not None:
            ref_dot[k] = r.ref_dot
        fb_s[k], sk_s[k] = t1 - t0, t2 - t1
        if bar is not None:
            bar.update(1)
            bar.set_postfix(doc=span.doc, loss=f"{loss:.3f}", fb=f"{t1 - t0:.2f}s", sketch=f"{t2 - t1:.2f}s", refresh=False)
    steps.close()
    return {"doc": np.int64(span.doc), "sha256": np.str_(span.sha256), "sketch": sketches, "sqnorm": sq,
            "loss": losses, "ref_dot": ref_dot, "fb_seconds": fb_s, "sketch_seconds": sk_s}
