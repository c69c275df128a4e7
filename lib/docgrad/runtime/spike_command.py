"""`docgrad spikes`: the spiking chunks of a start-token cell diagnosed (docgrad.measure.spike; docs/methods.md,
Model regime, addendum 2026-12-07, section 3), with as many non-spiking chunks of the same documents as controls.
Writes one JSON record (atomically; an existing record is replaced only with --overwrite)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from docgrad import models
from docgrad.corpora import build as corpora
from docgrad.errors import DocgradError
from docgrad.fileio import atomic_write_json, check_output_file, to_jsonable
from docgrad.measure import spike as SP
from docgrad.measure.gradients import versions
from docgrad.results import regime as RG
from docgrad.results import regime_parts as RP

RECORD_FORMAT = "docgrad-spikes-1"


def controls(cell, spiking: list[dict]) -> list[tuple[int, int]]:
    """One non-spiking chunk per spiking one: the nearest later (else earlier) chunk of the same document that is
    neither spiking nor already chosen."""
    bad = {(r["doc"], r["chunk"]) for r in spiking}
    chosen = []
    for r in spiking:
        for k in [*range(r["chunk"] + 1, cell.m), *range(r["chunk"] - 1, -1, -1)]:
            if (r["doc"], k) not in bad and (r["doc"], k) not in chosen:
                chosen.append((r["doc"], k))
                break
    return chosen


def cli_spikes(args) -> int:
    import torch

    regime = f"bos{args.start_token}"
    found = RG.regime_cells(Path(args.results) / models.SMOLLM2.results_dir, Path(args.regime) / models.SMOLLM2.results_dir)
    corpus = args.corpus.upper()
    if (corpus, regime) not in found:
        have = sorted(f"{c} {r}" for c, r in found if r == regime) or ["none"]
        raise DocgradError(f"--corpus {corpus} --start-token {args.start_token}: no committed cell {corpus} {regime} of "
                           f"documents 0-15 under {args.regime} (cells with that start token: {', '.join(have)}); "
                           f"probe it first: docgrad probe --corpus {corpus} --docs 0:16 --start-token "
                           f"{args.start_token} --out {args.regime}")
    out = check_output_file(args.out, "--out", lambda p: json.loads(Path(p).read_text()).get("format") == RECORD_FORMAT,
                            args.overwrite)
    if out.exists() and not args.overwrite:
        raise DocgradError(f"--out {out}: a spike record is already there; pass --overwrite to measure it again")
    cell = found[(corpus, regime)]
    nd = RP.norm_distribution(cell)
    rows = nd["spiking"][:args.max_chunks] if args.max_chunks else nd["spiking"]
    todo = [("spiking", r["doc"], r["chunk"]) for r in rows] + [("control", d, k) for d, k in controls(cell, rows)]
    if args.threads:
        torch.set_num_threads(args.threads)
    spans = {int(s.doc): s.tokens for s in corpora.load_spans(corpus, args.manifest, args.cache)}
    t0 = time.perf_counter()
    model = models.load_model(models.SMOLLM2.name)
    model64 = SP.float64_copy(model)
    row_of = {d: i for i, d in enumerate(cell.doc_ids)}
    from tqdm.auto import tqdm

    records = []
    for kind, d, k in tqdm(todo, desc=f"spikes {corpus}", unit="chunk"):
        rec = SP.diagnose(model, spans[d], cell.chunk, k, args.start_token, model64)
        rec.update(kind=kind, doc=d, chunk=k, cell_sqnorm=float(cell.sqnorm[row_of[d], k]),
                   cell_loss=float(cell.loss[row_of[d], k]))
        records.append(rec)
    record = {"format": RECORD_FORMAT, "corpus": corpus, "start_token": args.start_token, "cell": cell.name,
              "cell_files": [str(f) for f in cell.files], "median": nd["median"], "n_spiking": nd["n_spiking"],
              "tail_starts": list(SP.TAIL_STARTS), "single_targets": list(SP.SINGLE_TARGETS),
              "pin": models.model_pin(models.SMOLLM2.name), "threads": torch.get_num_threads(),
              "seconds": time.perf_counter() - t0, "versions": versions(), "chunks": records,
              "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    atomic_write_json(out, to_jsonable(record))
    print(out)
    return 0
