"""Reduced-precision records and cells, read and compared: a `docgrad precision` record (read_record, chunk_row),
the same chunks in two chunk contexts (tail_across_contexts), and a bf16 cell against the float32 cell on the
same documents with a paired document bootstrap (paired_difference, cell_checks).
Definitions: docs/methods.md#reduced-precision.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import numpy as np

from docgrad.core import bootstrap as bs
from docgrad.core.constants import ALL, BFLOAT16, BOOTSTRAP_SEED, RESAMPLES
from docgrad.errors import DocgradError
from docgrad.results.cells import load_cells

RECORD_FORMAT = "docgrad-precision/1"   # the "format" of a `docgrad precision` record


class PrecisionError(DocgradError, ValueError):
    """An unknown dtype, or two cells that cannot be compared; the message names them."""


def read_record(path) -> dict:
    """A `docgrad precision` record (JSON), checked for its format; a missing or foreign file is an error."""
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


def cell_checks(results_dir, model: str, revision: str, dtype: str = BFLOAT16, window: int = 16384,
                resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED, docs: tuple[int, int] | None = None) -> dict:
    """For every corpus of (model, revision) that has a standalone `dtype` cell and a float32 cell on the same
    documents: paired_difference(dtype cell, float32 cell) reduced to `window` (R of each, the difference,
    its interval and 'within'). Corpora without a `dtype` cell are absent. docs: read only the files of documents
    [a, b) (the bf16 cells cover 0:16; the float32 cells may also hold the 48-document shards)."""
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
