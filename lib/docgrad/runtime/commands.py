"""`docgrad analyze`: the analysis of a results directory, written to report.json and printed as a summary."""

from __future__ import annotations

import json
from pathlib import Path

from docgrad import models
from docgrad.errors import AnalysisError
from docgrad.fileio import atomic_write_json, check_output_file, json_with_keys, project_root, to_jsonable
from docgrad.presentation import causal, tables
from docgrad.results import positions, stats
from docgrad.results.cells import load_cells
from docgrad.results.format import parse_docs
from docgrad.results.study import check_span_hashes


def cli_analyze(args) -> int:
    """docgrad analyze: the analysis of a results directory -> report.json and a summary table."""
    out = check_output_file(args.out, "--out", lambda p: json_with_keys(p, ("context", "cells", "verdict")),
                            getattr(args, "overwrite", False))
    context = getattr(args, "context", "standalone")
    dtype = getattr(args, "dtype", "float32")
    docs = parse_docs(args.docs) if getattr(args, "docs", None) else None
    read = docs if context != "causal" else None                       # what each analysis reads
    if getattr(args, "span_manifest", None):
        check_manifest_spans(Path(args.results), Path(args.span_manifest), context, dtype, read)
    else:                   # each offline model's cells against that model's own manifest, where the file exists
        root = Path(args.root).resolve() if getattr(args, "root", None) else project_root()
        manifests = own_manifests(root)
        cells = list(load_cells(Path(args.results), context=context, dtype=dtype, docs=read).values()) \
            if manifests else []
        for (model, revision), manifest in manifests.items():
            check_manifest_spans(Path(args.results), manifest, context, dtype, read,
                                 cells=[c for c in cells if (c.model, c.revision) == (model, revision)],
                                 note=f"{manifest} is {model} at {revision}'s own manifest, checked by default; "
                                      "--manifest M checks against another")
    if context == "causal":
        a, by_position = positions.analyze_causal(Path(args.results), resamples=args.resamples, seed=args.seed,
                                                  dtype=dtype)
        atomic_write_json(out, {"context": context, "dtype": dtype, **to_jsonable(a),
                                "positions": to_jsonable(by_position)})
        print("context: causal (each chunk's gradient with every earlier chunk of its window as context)")
        print(causal.causal_summary_table(a, by_position))
    else:
        a = stats.analyze(Path(args.results), resamples=args.resamples, seed=args.seed, dtype=dtype,
                          docs=docs)
        atomic_write_json(out, {"context": context, "dtype": dtype, **to_jsonable(a)})
        print("context: standalone (every chunk its own sequence; causal files are left out: --context causal); "
              f"dtype {dtype}")
        print(tables.summary_table(a))
        for line in per_model_gates(a):
            print(line)
    print(f"wrote {out} ({len(a.cells)} {context} cells, {a.resamples} resamples, {a.seconds['total']:.1f} s)")
    return 0


def own_manifests(root: Path) -> dict[tuple[str, str], Path]:
    """{(model, revision): corpus manifest} of every offline model (`docgrad models`) whose manifest file exists
    under the project root: what `docgrad analyze` checks span sha256s against without --manifest."""
    out = {}
    for spec in models.OFFLINE_MODELS.values():
        path = Path(root) / spec.corpora
        if path.is_file():
            out[(spec.model, spec.revision)] = path
    return out


def check_manifest_spans(results: Path, manifest: Path, context: str, dtype: str, docs, cells: list | None = None,
                         note: str | None = None) -> None:
    """Every cell's corpus is in the manifest and every span sha256 its files record is the manifest's for that
    document (results.study.check_span_hashes); else one line naming the file. cells: the cells to check, already
    loaded (default: every cell of `results`, as `analyze --manifest` asks). note: said after each refusal (which
    manifest was checked by default, and how to name another)."""
    option = f"--manifest {manifest}" if note is None else f"manifest {manifest}"

    def refuse(msg: str) -> AnalysisError:
        return AnalysisError(msg if note is None else f"{msg} ({note})")

    try:
        corpora = json.loads(manifest.read_text()).get("corpora")
    except (UnicodeDecodeError, ValueError, AttributeError) as e:
        raise refuse(f"{option}: not a corpus manifest ({type(e).__name__})") from None
    if not isinstance(corpora, dict):
        raise refuse(f"{option}: not a corpus manifest (no 'corpora' object)")
    if cells is None:
        cells = list(load_cells(results, context=context, dtype=dtype, docs=docs).values())
    for cell in cells:
        if not isinstance(corpora.get(cell.corpus), dict):
            raise refuse(f"{cell.file_list}: corpus {cell.corpus} is not in {option} "
                         f"(it has {', '.join(corpora) or 'none'})")
        try:
            check_span_hashes(cell, corpora[cell.corpus], manifest)
        except AnalysisError as e:
            raise refuse(str(e)) from None
        except (KeyError, TypeError, ValueError) as e:
            raise refuse(f"{cell.file_list}: spans_sha256, or {option}'s {cell.corpus} documents, are not "
                         f"{{document number: sha256}} ({type(e).__name__}: {e})") from None


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
