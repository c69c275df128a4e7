"""Reduced precision for the probe (--dtype bfloat16) and its fidelity against float32.
Definitions: docs/methods.md#reduced-precision.

The bf16 mode is torch.autocast(device, bfloat16) around each forward pass. The parameters stay float32;
autocast runs the matrix products (linear layers, attention) in bf16 and keeps reductions, norms, softmax
and the loss in float32; the backward runs each op in the dtype of its forward and accumulates every
parameter's gradient in float32 (the parameter's dtype). So .grad, the count sketch, the squared norms and
the Gram stay float32 / float64 exactly as in a float32 run: only the gradient itself is approximate. (The
other choice, bf16 weights with float32 gradient accumulation, rounds the weights and so probes a slightly
different model; autocast probes the float32 model with rounded arithmetic.)

Fidelity, on the same chunks (gradient_fidelity). With g the float32 gradient of a chunk's loss and h the
bf16 one, per parameter group and for all parameters together:

    cosine = <g, h> / (|g| |h|),        squared-norm ratio = |h|^2 / |g|^2,

and the loss difference. The gate (fidelity_gate): the median over chunks of the all-parameter cosine is
at least GATE_COSINE = 0.999 (a cosine of 0.999 is an angle of 2.6 degrees; the count sketch's own error on
a pair of chunks is about 1/sqrt(B) = 0.003 at B = 2^17).

At the level of the analysis (paired_difference): R(W) of a bf16 cell minus R(W) of the float32 cell on the
same documents, with a paired document bootstrap (each draw resamples the documents once and applies the
same counts to both cells), so the interval is that of the difference, not of either value.
"""

from __future__ import annotations

import json
import sys
import time
import zlib
from pathlib import Path
from typing import Sequence

import numpy as np

from docgrad import models
from docgrad.core import bootstrap as bs
from docgrad.core.constants import ALL, BFLOAT16, BOOTSTRAP_SEED, FLOAT32, GROUPS, RESAMPLES
from docgrad.core.groups import named_parameter_groups
from docgrad.corpora import build as corpora
from docgrad.errors import DocgradError
from docgrad.fileio import atomic_write_json, check_output_file, json_with_keys, to_jsonable
from docgrad.measure.gradients import (
    check_dtype,
    context_bos,
    forward_backward,
    model_chunk_context,
    resolve_device,
    versions,
)
from docgrad.results.cells import load_cells

GATE_COSINE = 0.999              # median per-chunk gradient cosine, bf16 vs float32
RECORD_FORMAT = "docgrad-precision/1"   # the "format" of a `docgrad precision` record
TAIL_COSINE = 0.99               # chunks below this are counted and named: the tail the median does not see


class PrecisionError(DocgradError, ValueError):
    """An unknown dtype, or two cells that cannot be compared; the message names them."""


def _grads_by_group(model) -> dict[str, list]:
    """Detached copies of every parameter's gradient (float64 on the model's device), by group; tied weights once."""
    out = {g: [] for g in GROUPS}
    for _, p, g in named_parameter_groups(model):
        if p.grad is not None:
            out[g].append(p.grad.detach().reshape(-1).double().clone())
    return out


def gradient_fidelity(model, chunks: Sequence, dtype: str = BFLOAT16, bos_id: int | None = None,
                      progress: bool = False) -> dict:
    """Per chunk (token id sequences), the float32 and the `dtype` gradient of the probe's chunk loss
    (probe.forward_backward, the same function the probe runs), compared: 'cosine' and 'sqnorm_ratio'
    (chunks x groups, then 'all' in the last column), 'sqnorm_fp32' (the float32 gradient's squared norm over
    all parameters), 'loss_fp32' and 'loss' (chunks), 'groups', and the
    CPU seconds of each forward+backward ('cpu_seconds_fp32', 'cpu_seconds': this process, all threads).
    A group whose float32 gradient is zero gets nan."""
    import torch

    check_dtype(dtype)
    device = next(model.parameters()).device
    model.eval()
    n, G = len(chunks), len(GROUPS)
    res = {"dtype": dtype, "groups": [*GROUPS, ALL], "cosine": np.full((n, G + 1), np.nan),
           "sqnorm_ratio": np.full((n, G + 1), np.nan), "sqnorm_fp32": np.zeros(n), "loss_fp32": np.zeros(n),
           "loss": np.zeros(n),
           "cpu_seconds_fp32": np.zeros(n), "cpu_seconds": np.zeros(n)}
    from tqdm.auto import tqdm

    for k in tqdm(range(n), disable=not progress, desc=f"float32 vs {dtype}"):
        ids = torch.as_tensor(np.asarray(chunks[k]), dtype=torch.long, device=device)
        c0 = time.process_time()
        res["loss_fp32"][k] = forward_backward(model, ids, bos_id, FLOAT32)
        res["cpu_seconds_fp32"][k] = time.process_time() - c0
        g = _grads_by_group(model)
        c0 = time.process_time()
        res["loss"][k] = forward_backward(model, ids, bos_id, dtype)
        res["cpu_seconds"][k] = time.process_time() - c0
        h = _grads_by_group(model)
        model.zero_grad(set_to_none=True)
        tot = np.zeros(3)                          # <g,h>, |g|^2, |h|^2 over all groups
        for gi, grp in enumerate(GROUPS):
            parts = np.array([[float(torch.dot(a, b)), float(torch.dot(a, a)), float(torch.dot(b, b))]
                              for a, b in zip(g[grp], h[grp])]).reshape(-1, 3).sum(0)
            tot += parts
            res["cosine"][k, gi], res["sqnorm_ratio"][k, gi] = _cos_ratio(parts)
        res["cosine"][k, G], res["sqnorm_ratio"][k, G] = _cos_ratio(tot)
        res["sqnorm_fp32"][k] = tot[1]
    return res


def _cos_ratio(parts) -> tuple[float, float]:
    gh, gg, hh = parts
    if gg <= 0:
        return np.nan, np.nan
    return gh / np.sqrt(gg * hh) if hh > 0 else np.nan, hh / gg


R_EQUIVALENCE_MARGIN = None   # the margin on R(16K) for "bf16 = float32": none was stated before the check


def fidelity_gate(fid: dict, threshold: float = GATE_COSINE) -> dict:
    """The bf16 gate on a gradient_fidelity result: median all-parameter cosine >= threshold. Also the
    median per group, the smallest cosine, the median and largest squared-norm ratio, the mean loss
    difference, and the tail: the chunks (row numbers) whose cosine is below TAIL_COSINE."""
    cos, ratio = np.asarray(fid["cosine"]), np.asarray(fid["sqnorm_ratio"])
    if cos.shape[0] == 0:
        raise PrecisionError("fidelity_gate: no chunks were compared")
    med = float(np.median(cos[:, -1]))
    groups = list(fid["groups"])
    return {"dtype": fid["dtype"], "chunks": int(cos.shape[0]), "threshold": float(threshold),
            "median_cosine": med, "min_cosine": float(np.min(cos[:, -1])),
            "median_sqnorm_ratio": float(np.median(ratio[:, -1])),
            "max_sqnorm_ratio": float(np.max(ratio[:, -1])), "tail_cosine": TAIL_COSINE,
            "tail_rows": [int(i) for i in np.flatnonzero(cos[:, -1] < TAIL_COSINE)],
            "median_cosine_by_group": {g: float(np.nanmedian(cos[:, i])) if np.isfinite(cos[:, i]).any() else None
                                       for i, g in enumerate(groups)},
            "median_sqnorm_ratio_by_group": {g: float(np.nanmedian(ratio[:, i])) if np.isfinite(ratio[:, i]).any()
                                             else None for i, g in enumerate(groups)},
            "mean_loss_difference": float(np.mean(np.asarray(fid["loss"]) - np.asarray(fid["loss_fp32"]))),
            "passes": bool(med >= threshold)}


def paired_difference(cell, reference, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED,
                      indices: np.ndarray | None = None) -> dict:
    """R(W) of `cell` minus R(W) of `reference` (two cells.Cell of the same model, corpus, chunk, context and
    documents, e.g. a bf16 probe and the float32 one), per window W, with the 95% percentile interval of the
    difference over a paired document bootstrap (one set of resample counts for both cells; generator seeded
    by (seed, crc32 of '<cell name> vs <reference name>')). indices: explicit (B, D) resample indices (tests).
    Returns windows, R of each cell, diff, diff_ci (None without resamples), and whether each interval
    contains 0 ('within')."""
    for what in ("model", "revision", "corpus", "chunk", "context", "window", "m"):
        a, b = getattr(cell, what), getattr(reference, what)
        if a != b:
            raise PrecisionError(f"paired_difference: {cell.name} ({cell.file_list}) and {reference.name} "
                                 f"({reference.file_list}) differ in {what} ({a!r} vs {b!r}); a paired comparison "
                                 "needs the same model, corpus, chunking and context")
    if list(cell.doc_ids) != list(reference.doc_ids):
        raise PrecisionError(f"paired_difference: {cell.name} has documents {list(cell.doc_ids)} but {reference.name} "
                             f"has {list(reference.doc_ids)}; a paired comparison needs the same documents")
    D, C = len(cell.doc_ids), cell.chunk
    if indices is None and resamples:
        rng = np.random.default_rng([int(seed), zlib.crc32(f"{cell.name} vs {reference.name}".encode())])
        indices = bs.resample_indices(rng, D, int(resamples))
    ones = np.ones((1, D))
    pt = {k: bs.estimate(c.sums[ALL], ones, C)["R"][0] for k, c in (("cell", cell), ("reference", reference))}
    windows = [int(s) * C for s in cell.sums[ALL].sizes]
    out = {"windows": windows, "R": pt["cell"].tolist(), "R_reference": pt["reference"].tolist(),
           "diff": (pt["cell"] - pt["reference"]).tolist(), "diff_ci": None, "within": None, "resamples": 0,
           "cell": cell.name, "reference": reference.name}
    if indices is not None:
        counts = bs.counts_from_indices(np.asarray(indices), D)
        d = bs.estimate(cell.sums[ALL], counts, C)["R"] - bs.estimate(reference.sums[ALL], counts, C)["R"]
        ci = bs.percentile_ci(d)
        out.update(diff_ci=ci, within=[None if lo is None else bool(lo <= 0 <= hi) for lo, hi in ci],
                   resamples=int(len(counts)))
    return out



def fidelity_chunks(spans, documents: int, chunks: int, chunk: int) -> tuple[list[np.ndarray], list[tuple[int, int]]]:
    """The first `chunks` chunks of the first `documents` spans: (token arrays, [(doc, k)])."""
    spans = list(spans)[:documents]
    if len(spans) < documents:
        raise PrecisionError(f"--docs {documents}: the corpus has only {len(spans)} documents")
    short = [int(s.doc) for s in spans if len(s.tokens) < chunks * chunk]
    if short:
        raise PrecisionError(f"--chunks {chunks} x --chunk {chunk}: documents {short} are shorter than "
                             f"{chunks * chunk} tokens")
    toks = [np.asarray(s.tokens[k * chunk:(k + 1) * chunk]) for s in spans for k in range(chunks)]
    return toks, [(int(s.doc), k) for s in spans for k in range(chunks)]


def cli_precision(args) -> int:
    """`docgrad precision`: gradient fidelity of --dtype against float32 on real chunks of each corpus."""
    import torch

    check_dtype(args.dtype)
    for name in ("docs", "chunks", "chunk"):
        if getattr(args, name) < (2 if name == "chunk" else 1):
            raise PrecisionError(f"--{name} {getattr(args, name)}: must be at least {2 if name == 'chunk' else 1}")
    if args.threads is not None and args.threads < 1:
        raise PrecisionError(f"--threads {args.threads}: need at least 1 (or leave it out for torch's choice)")
    out = check_output_file(args.out, "--out", lambda p: json_with_keys(p, ("format",)) and
                            json.loads(Path(p).read_text()).get("format") == RECORD_FORMAT,
                            getattr(args, "overwrite", False))
    names = [c.strip().upper() for c in args.corpora.split(",") if c.strip()]
    if not names:
        raise PrecisionError(f"--corpora {args.corpora!r}: name at least one corpus, e.g. --corpora BOOKS,CODE")
    spans = {c: corpora.load_spans(c, args.manifest, args.cache) for c in names}     # before the model loads
    selected = {c: fidelity_chunks(sp, args.docs, args.chunks, args.chunk) for c, sp in spans.items()}
    if args.threads:
        torch.set_num_threads(args.threads)
    pin = models.model_pin(args.model, args.revision, args.allow_unpinned)
    spec = models.offline_model(args.model)
    device = resolve_device(args.device)
    context = getattr(args, "context", None) or model_chunk_context(spec)
    bos_id = getattr(args, "bos_id", None)
    if bos_id is not None and context != "standalone-bos":      # refused before the model loads
        raise PrecisionError(f"--bos-id {bos_id}: applies to --context standalone-bos, not {context}")
    model = models.load_model(args.model, args.revision, args.allow_unpinned, device=device)
    bos = context_bos(model, context)
    if bos_id is not None:
        vocab = model.get_input_embeddings().num_embeddings
        if not 0 <= bos_id < vocab:
            raise PrecisionError(f"--bos-id {bos_id}: not a token id of the model (0 to {vocab - 1})")
        bos = bos_id
    bos_token = (models.load_tokenizer(args.model, args.revision, args.allow_unpinned).convert_ids_to_tokens(bos)
                 if bos is not None else None)
    by_corpus = {c: {"chunks": where, **gradient_fidelity(model, toks, args.dtype, bos, progress=True)}
                 for c, (toks, where) in selected.items()}
    record = {"format": RECORD_FORMAT, "model": pin["model"], "revision": pin["revision"], "dtype": args.dtype,
              "context": context, "bos_id": bos, "bos_token": bos_token, "chunk": args.chunk, "documents": args.docs,
              "chunks_per_document": args.chunks, "device": device,
              "threads": torch.get_num_threads(), "command": " ".join(sys.argv), "by_corpus": by_corpus,
              "versions": versions(), "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    record = with_gates(record)
    atomic_write_json(out, to_jsonable(record))
    print(describe(record))
    print(f"wrote {out}")
    return 0


def with_gates(record: dict) -> dict:
    """The record with its gates computed from its per-chunk arrays: each corpus's 'gate', the pooled 'gate'
    over every chunk, 'tail' (corpus, document, chunk, cosine, squared-norm ratio, both losses of each pooled
    tail row) and 'median_cpu_speedup' (median float32 / dtype CPU seconds of a forward+backward)."""
    keys = ("cosine", "sqnorm_ratio", "loss_fp32", "loss", "cpu_seconds_fp32", "cpu_seconds")
    by = record["by_corpus"]
    first = next(iter(by.values()))
    pooled = {"dtype": record["dtype"], "groups": first["groups"],
              **{k: np.concatenate([np.asarray(r[k], dtype=float) for r in by.values()]) for k in keys}}
    where = [(c, *map(int, ch)) for c, r in by.items() for ch in r["chunks"]]
    gate = fidelity_gate(pooled)
    tail = [{"corpus": where[i][0], "document": where[i][1], "chunk": where[i][2],
             **chunk_row(record, where[i][0], where[i][1], where[i][2])} for i in gate["tail_rows"]]
    return {**record, "gate": gate, "tail": tail,
            "median_cpu_speedup": float(np.median(pooled["cpu_seconds_fp32"]) / np.median(pooled["cpu_seconds"])),
            "by_corpus": {c: {**r, "gate": fidelity_gate({"dtype": record["dtype"], **r})} for c, r in by.items()}}


def describe(record: dict) -> str:
    """A few lines on a `docgrad precision` record: the gate, per corpus and per group."""
    g = record["gate"]
    lines = [f"{record['dtype']} vs float32, {record['model']}: {g['chunks']} chunks, {context_label(record)}; "
             "median gradient cosine "
             f"{g['median_cosine']:.5f} (min {g['min_cosine']:.5f}), median squared-norm ratio "
             f"{g['median_sqnorm_ratio']:.4f}, mean loss difference {g['mean_loss_difference']:+.4f} nats -> "
             f"{'PASSES' if g['passes'] else 'FAILS'} the gate (median cosine >= {g['threshold']})",
             f"forward+backward CPU time, float32 / {record['dtype']} (median): {record['median_cpu_speedup']:.2f}x"]
    for t in record["tail"]:
        lines.append(f"  tail: {t['corpus']} document {t['document']} chunk {t['chunk']}: cosine {t['cosine']:.4f}, "
                     f"squared-norm ratio {t['sqnorm_ratio']:.3f}"
                     + (f", float32 squared norm {t['sqnorm_fp32']:.1f}" if t.get("sqnorm_fp32") is not None else ""))
    for c, r in record["by_corpus"].items():
        gc = r["gate"]
        groups = ", ".join(f"{k} {v:.4f}" for k, v in gc["median_cosine_by_group"].items() if v is not None)
        lines.append(f"  {c}: median cosine {gc['median_cosine']:.5f}; by group {groups}")
    return "\n".join(lines)


# --- what a page shows ----------------------------------------------------------------------------------------

def read_record(path) -> dict:
    """A `docgrad precision` record (JSON), checked for its format; a missing or foreign file is an error."""
    from pathlib import Path

    path = Path(path)
    if not path.is_file():
        raise PrecisionError(f"{path}: no precision record; make one with `docgrad precision --out {path}`")
    try:
        rec = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise PrecisionError(f"{path}: not valid JSON ({e})") from e
    found = rec.get("format") if isinstance(rec, dict) else None
    if found != RECORD_FORMAT:
        raise PrecisionError(f"{path}: not a docgrad precision record (format {found!r}, expected {RECORD_FORMAT!r})")
    return rec


def chunk_row(record: dict, corpus: str, document: int, chunk: int) -> dict:
    """One chunk of a precision record: its all-parameter cosine, squared-norm ratio, the float32 gradient's
    squared norm (None in older records) and both losses. A chunk the record did not measure is a PrecisionError
    naming it."""
    r = record["by_corpus"].get(corpus)
    where = [tuple(map(int, ch)) for ch in r["chunks"]] if r is not None else []
    if (document, chunk) not in where:
        raise PrecisionError(f"precision record ({record.get('context', 'standalone')}): {corpus} document {document} "
                             f"chunk {chunk} was not measured")
    i = where.index((document, chunk))
    sq = r.get("sqnorm_fp32")                     # absent from records written before it was kept
    return {"cosine": float(np.asarray(r["cosine"])[i, -1]), "sqnorm_ratio": float(np.asarray(r["sqnorm_ratio"])[i, -1]),
            "sqnorm_fp32": None if sq is None else float(sq[i]), "loss_fp32": float(r["loss_fp32"][i]),
            "loss": float(r["loss"][i])}


def tail_across_contexts(record: dict, other: dict) -> dict:
    """The tail of `record` in another record of the same model, dtype and chunks that differs in its chunk
    context (e.g. `docgrad precision --context standalone-bos`, the model's BOS token ahead of every chunk):
    each tail chunk's cosine, squared-norm ratio and float32 squared norm in both ('tail'; the other record's
    values end in _other), the other record's gate and tail, the chunks only it has in its tail
    ('other_own_tail', seen from the other record: _other is `record`'s value), and 'spike_factors': for every
    failing chunk of either list, its float32 squared norm where it fails over that where it does not (None
    when a record lacks the norms). Records of other models, dtypes, chunk lengths or chunk sets are refused,
    naming what differs."""
    for key in ("model", "revision", "dtype", "chunk"):
        if record.get(key) != other.get(key):
            raise PrecisionError(f"precision records differ in {key}: {record.get(key)!r} vs {other.get(key)!r}")
    chunks = {c: [list(map(int, ch)) for ch in r["chunks"]] for c, r in record["by_corpus"].items()}
    if chunks != {c: [list(map(int, ch)) for ch in r["chunks"]] for c, r in other["by_corpus"].items()}:
        raise PrecisionError("precision records measured different chunks; compare records of the same "
                             "--corpora, --docs and --chunks")

    def both(first, second, t):
        return {"corpus": t["corpus"], "document": t["document"], "chunk": t["chunk"],
                **chunk_row(first, t["corpus"], t["document"], t["chunk"]),
                **{f"{k}_other": v for k, v in chunk_row(second, t["corpus"], t["document"], t["chunk"]).items()}}

    rows = [both(record, other, t) for t in record["tail"]]
    mine = {(t["corpus"], t["document"], t["chunk"]) for t in record["tail"]}
    own = [both(other, record, t) for t in other["tail"] if (t["corpus"], t["document"], t["chunk"]) not in mine]
    # the float32 squared norm of each failing chunk in the context where it fails, over that in the other
    spikes = [r["sqnorm_fp32"] / r["sqnorm_fp32_other"] for r in rows + own
              if r["sqnorm_fp32"] is not None and r["sqnorm_fp32_other"]]
    return {"context": record.get("context", "standalone"), "other_context": other.get("context", "standalone"),
            "label": context_label(record), "label_markdown": context_label(record, markdown=True),
            "other_label": context_label(other),
            "other_label_markdown": context_label(other, markdown=True), "tail": rows,
            "other_gate": other["gate"], "other_tail": other["tail"], "other_own_tail": own,
            "spike_factors": spikes if len(spikes) == len(rows) + len(own) else None}


def context_label(record: dict, markdown: bool = False) -> str:
    """How a record's chunks were fed: "the chunk alone" or "<token> (token N) ahead of each chunk" (the token
    in backticks for Markdown, where <|...|> would otherwise be read as an HTML tag)."""
    if record.get("context", "standalone") != "standalone-bos":
        return "the chunk alone"
    tok = record.get("bos_token")
    if not tok:
        return "the model's BOS ahead of each chunk"
    return f"{f'`{tok}`' if markdown else tok} (token {record.get('bos_id')}) ahead of each chunk"


def context_reading(comparison: dict) -> list[str]:
    """Sentences on tail_across_contexts: where the tail chunks go in the other context, the chunks that fail
    only there, and whether every failure comes with a float32 gradient larger than in the other context."""
    c, g = comparison, comparison["other_gate"]
    if not c["tail"]:
        return [f"No chunk falls below a cosine of {g['tail_cosine']} with {c['label_markdown']}, so there is no tail to "
                "follow into another context."]
    norm = lambda t: (f" (float32 squared norm {t['sqnorm_fp32']:.1f} to {t['sqnorm_fp32_other']:.1f})"   # noqa: E731
                      if t["sqnorm_fp32"] is not None and t["sqnorm_fp32_other"] is not None else "")
    moves = "; ".join(f"{t['corpus']} document {t['document']} chunk {t['chunk']} from {t['cosine']:.4f} to "
                      f"{t['cosine_other']:.4f}{norm(t)}" for t in c["tail"])
    out = [f"With {c['other_label_markdown']}, the same {g['chunks']} chunks give a median cosine of {g['median_cosine']:.4f} "
           f"(smallest {g['min_cosine']:.4f}); the tail chunks go {moves}."]
    gone = all(t["cosine_other"] >= g["tail_cosine"] for t in c["tail"])
    own = c["other_own_tail"]
    if own:
        names = "; ".join(f"{t['corpus']} document {t['document']} chunk {t['chunk']} ({t['cosine']:.4f}, squared-norm "
                          f"ratio {t['sqnorm_ratio']:.2f}"
                          + (f"; float32 squared norm {t['sqnorm_fp32']:.1f}, against {t['sqnorm_fp32_other']:.1f} for "
                             f"{c['label_markdown']}" if t["sqnorm_fp32"] is not None else "") + ")" for t in own)
        out.append(f"But {len(own)} other chunk{' falls' if len(own) == 1 else 's fall'} below {g['tail_cosine']} "
                   f"there: {names}. The tail {'moves' if gone else 'grows'} with what stands at the first position; "
                   "it does not go away.")
    elif gone:
        out.append(f"No chunk falls below {g['tail_cosine']} there: the tail sits at the chunk's first position, which "
                   "the chunk alone fills with an arbitrary token.")
    f = c["spike_factors"]
    if f and min(f) > 1:
        out.append(f"Each failing chunk fails in the context where its float32 gradient is the larger ({min(f):.1f} to "
                   f"{max(f):.1f} times the squared norm it has in the other): bf16 goes astray where the float32 "
                   "gradient itself spikes.")
    return out


def context_rows(record: dict, comparisons: list[dict]) -> list[dict]:
    """A table row per chunk input, `record`'s first, then each tail_across_contexts(record, other)'s other:
    median and smallest cosine, the number of chunks below TAIL_COSINE, and the cosine of each of `record`'s
    tail chunks."""
    tail = [(t["corpus"], t["document"], t["chunk"]) for t in record["tail"]]
    name = lambda k: f"{k[0]} d{k[1]} c{k[2]}"                                    # noqa: E731

    def row(label, gate, n_tail, cosines):
        return {"chunk input": label, "median cosine": gate["median_cosine"], "smallest cosine": gate["min_cosine"],
                f"chunks below {TAIL_COSINE}": n_tail, **{name(k): v for k, v in zip(tail, cosines)}}

    return [row(context_label(record), record["gate"], len(record["tail"]), [t["cosine"] for t in record["tail"]]),
            *[row(c["other_label"], c["other_gate"], len(c["other_tail"]), [t["cosine_other"] for t in c["tail"]])
              for c in comparisons]]


def cell_checks(results_dir, model: str, revision: str, dtype: str = BFLOAT16, window: int = 16384,
                resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED, docs: tuple[int, int] | None = None) -> dict:
    """For every corpus of (model, revision) that has a standalone `dtype` cell and a float32 cell on the same
    documents: paired_difference(dtype cell, float32 cell) reduced to `window` (R of each, the difference,
    its interval and 'within'). Corpora without a `dtype` cell are absent. docs: read only the files of documents
    [a, b) (the bf16 cells cover 0:16; the float32 cells may also hold the 48-document shards)."""
    from pathlib import Path

    cells = load_cells(Path(results_dir), dtype=None, docs=docs)
    out = {}
    for key, cell in cells.items():
        if cell.model != model or cell.revision != revision or cell.dtype != dtype or cell.context != "standalone":
            continue
        ref = cells.get(key[:4])
        if ref is None:
            continue
        d = paired_difference(cell, ref, resamples, seed)
        if window not in d["windows"]:
            raise PrecisionError(f"cell {cell.name}: no window of {window} tokens (windows {d['windows']})")
        j = d["windows"].index(window)
        out[cell.corpus] = {"window": window, "R": d["R"][j], "R_reference": d["R_reference"][j],
                            "diff": d["diff"][j], "diff_ci": None if d["diff_ci"] is None else d["diff_ci"][j],
                            "within": None if d["within"] is None else d["within"][j], "documents": len(cell.doc_ids),
                            "files": [str(f) for f in cell.files], "reference_files": [str(f) for f in ref.files]}
    return out


def fidelity_reading(record: dict, checks: dict, margin: float | None = R_EQUIVALENCE_MARGIN) -> list[str]:
    """Sentences on bf16's fidelity, from a precision record and cell_checks: the gate, the cell-level check
    per corpus (or that none was run), and what the project does with it. "No difference" needs an equivalence
    margin stated before the check (docs/methods.md#evidence-rules): bf16 is called equivalent at the level of
    R(16K) only when every paired interval lies inside (-margin, +margin); without a margin an interval that
    contains 0 leaves the question open, and float32 stays the arithmetic of new cells."""
    g = record["gate"]
    dt = record["dtype"]
    out = [f"Per chunk, over {g['chunks']} chunks of real text, the {dt} gradient has a median cosine of "
           f"{g['median_cosine']:.4f} with the float32 one (smallest {g['min_cosine']:.4f}) and a median squared-norm "
           f"ratio of {g['median_sqnorm_ratio']:.4f}: it {'passes' if g['passes'] else 'fails'} the gate "
           f"(median cosine at least {g['threshold']})."]
    tail = record.get("tail", [])
    if tail:
        worst = max(t["sqnorm_ratio"] for t in tail)
        names = ", ".join(f"{t['corpus']} document {t['document']} chunk {t['chunk']}" for t in tail)
        out.append(f"The median hides a tail: {len(tail)} of the {g['chunks']} chunks ({names}) fall below a cosine of "
                   f"{g['tail_cosine']}, with bf16 squared norms up to {worst:.2f} times the float32 ones, so only "
                   "the check on a whole cell can say whether the study's numbers move.")
    equivalent = []
    for c, d in checks.items():
        if d["diff_ci"] is None:
            out.append(f"{c}: R(16K) is {d['R']:.2f} in {dt} against {d['R_reference']:.2f} in float32 (no interval).")
            continue
        lo, hi = d["diff_ci"]
        inside = margin is not None and -margin < lo and hi < margin
        equivalent.append(inside)
        out.append(f"{c} ({d['documents']} documents): R(16K) is {d['R']:.2f} in {dt} against {d['R_reference']:.2f} "
                   f"in float32; the paired difference {d['diff']:+.2f} [{lo:+.2f}, {hi:+.2f}] "
                   + (f"lies inside the margin ±{margin} stated in advance: equivalent." if inside else
                      "excludes 0: bf16 moves R(16K)." if not d["within"] else
                      "contains 0, but no equivalence margin was stated before the check, so it does not show that "
                      "bf16 leaves R(16K) unchanged: not resolved." if margin is None else
                      f"contains 0 but reaches beyond the margin ±{margin} stated in advance: not resolved."))
    if not checks:
        out.append(f"No {dt} cell has been probed, so the check at the level of R(16K) has not been made.")
    if g["passes"] and equivalent and all(equivalent):
        out.append(f"{dt} passes the per-chunk gate and is equivalent at the level of R(16K): new cells may be "
                   f"probed with --dtype {dt}. The committed cells stay float32, and float32 stays the default.")
    else:
        out.append(f"{dt} is not shown equivalent to float32, so float32 stays the default and every committed "
                   "cell is float32.")
    return out
