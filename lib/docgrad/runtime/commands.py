"""`docgrad analyze`: the analysis of a results directory, written to report.json and printed as a summary."""

from __future__ import annotations

from pathlib import Path

from docgrad.fileio import atomic_write_json, check_output_file, json_with_keys, to_jsonable
from docgrad.presentation import causal, tables
from docgrad.results import positions, stats
from docgrad.results.format import parse_docs


def cli_analyze(args) -> int:
    """docgrad analyze: the analysis of a results directory -> report.json and a summary table."""
    out = check_output_file(args.out, "--out", lambda p: json_with_keys(p, ("context", "cells", "verdict")),
                            getattr(args, "overwrite", False))
    context = getattr(args, "context", "standalone")
    dtype = getattr(args, "dtype", "float32")
    if context == "causal":
        a, by_position = positions.analyze_causal(Path(args.results), resamples=args.resamples, seed=args.seed,
                                                  dtype=dtype)
        atomic_write_json(out, {"context": context, "dtype": dtype, **to_jsonable(a),
                                "positions": to_jsonable(by_position)})
        print("context: causal (each chunk's gradient with every earlier chunk of its window as context)")
        print(causal.causal_summary_table(a, by_position))
    else:
        a = stats.analyze(Path(args.results), resamples=args.resamples, seed=args.seed, dtype=dtype,
                          docs=parse_docs(args.docs) if getattr(args, "docs", None) else None)
        atomic_write_json(out, {"context": context, "dtype": dtype, **to_jsonable(a)})
        print("context: standalone (every chunk its own sequence; causal files are left out: --context causal); "
              f"dtype {dtype}")
        print(tables.summary_table(a))
        for line in per_model_gates(a):
            print(line)
    print(f"wrote {out} ({len(a.cells)} {context} cells, {a.resamples} resamples, {a.seconds['total']:.1f} s)")
    return 0


def per_model_gates(a) -> list[str]:
    """With cells of several models (or revisions, chunk lengths), the gates and verdict of each one on its own
    cells (Analysis.subset: its own control and exact-reference files); the lines above gate all cells together."""
    keys = sorted({(c.model, c.revision, c.chunk) for c in a.cells})
    if len(keys) < 2:
        return []
    lines = ["gates per model (each on its own cells):"]
    for model, revision, chunk in keys:
        s = a.subset(model, revision, chunk)
        lines.append(f"  {model} {revision} C={chunk} ({', '.join(c.corpus for c in s.cells)}): "
                     + "; ".join(f"{name} {g['status']}" for name, g in s.gates.items()) + f"; verdict {s.verdict}")
    return lines
