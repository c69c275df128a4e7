"""`docgrad precision`: gradient fidelity of --dtype against float32 on real chunks of each corpus
(docgrad.measure.precision), written as a record and described (docs/methods.md#reduced-precision).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from docgrad import models
from docgrad.corpora import build as corpora
from docgrad.fileio import atomic_write_json, check_output_file, json_with_keys, to_jsonable
from docgrad.measure.gradients import check_dtype, check_token_id, context_bos, model_chunk_context, resolve_device, versions
from docgrad.measure.precision import fidelity_chunks, gradient_fidelity, with_gates
from docgrad.presentation.sketching import describe
from docgrad.results.precision_checks import RECORD_FORMAT, PrecisionError


def same_record_settings(path, settings: dict, corpora: list[str], bos_id: int | None) -> bool:
    """Whether `path` is an earlier `docgrad precision` record made with these settings (the only file --out may
    replace without --overwrite): the same model, dtype, context, chunk, documents, chunks, corpora and, when
    given, start token. A record made with other settings is a PrecisionError naming what differs."""
    if not json_with_keys(path, ("format",)):
        return False
    old = json.loads(Path(path).read_text())
    if old.get("format") != RECORD_FORMAT:
        return False
    differ = [f"{k} {old.get(k)!r} there, {v!r} now" for k, v in settings.items() if old.get(k) != v]
    if sorted(old.get("by_corpus") or {}) != sorted(corpora):
        differ.append(f"corpora {sorted(old.get('by_corpus') or {})} there, {sorted(corpora)} now")
    if bos_id is not None and old.get("bos_id") != bos_id:
        differ.append(f"bos_id {old.get('bos_id')!r} there, {bos_id!r} now")
    if differ:
        raise PrecisionError(f"--out {path} is a precision record made with other settings ({'; '.join(differ)}); "
                             "it is not replaced: choose another --out, or pass --overwrite to replace it")
    return True

def cli_precision(args) -> int:
    """`docgrad precision`: gradient fidelity of --dtype against float32 on real chunks of each corpus."""
    import torch

    check_dtype(args.dtype)
    for name in ("docs", "chunks", "chunk"):
        if getattr(args, name) < (2 if name == "chunk" else 1):
            raise PrecisionError(f"--{name} {getattr(args, name)}: must be at least {2 if name == 'chunk' else 1}")
    if args.threads is not None and args.threads < 1:
        raise PrecisionError(f"--threads {args.threads}: need at least 1 (or leave it out for torch's choice)")
    names = [c.strip().upper() for c in args.corpora.split(",") if c.strip()]
    if not names:
        raise PrecisionError(f"--corpora {args.corpora!r}: name at least one corpus, e.g. --corpora BOOKS,CODE")
    twice = sorted({c for c in names if names.count(c) > 1})
    if twice:
        raise PrecisionError(f"--corpora {args.corpora!r}: names {', '.join(twice)} more than once; name each corpus "
                             "once, e.g. --corpora " + ",".join(dict.fromkeys(names)))
    pin = models.model_pin(args.model, args.revision, args.allow_unpinned)
    spec = models.model_spec(args.model)
    context = getattr(args, "context", None) or model_chunk_context(spec)
    settings = {"format": RECORD_FORMAT, "model": pin["model"], "revision": pin["revision"], "dtype": args.dtype,
                "context": context, "chunk": args.chunk, "documents": args.docs, "chunks_per_document": args.chunks}
    out = check_output_file(args.out, "--out", lambda p: same_record_settings(p, settings, names, args.bos_id),
                            getattr(args, "overwrite", False))
    spans = {c: corpora.load_spans(c, args.manifest, args.cache) for c in names}     # before the model loads
    selected = {c: fidelity_chunks(sp, args.docs, args.chunks, args.chunk) for c, sp in spans.items()}
    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    bos_id = getattr(args, "bos_id", None)
    if bos_id is not None and context != "standalone-bos":      # refused before the model loads
        raise PrecisionError(f"--bos-id {bos_id}: applies to --context standalone-bos, not {context}")
    model = models.load_model(args.model, args.revision, args.allow_unpinned, device=device)
    bos = context_bos(model, context)
    if bos_id is not None:
        bos = check_token_id(model, bos_id, "--bos-id")
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
