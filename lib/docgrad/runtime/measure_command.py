"""`docgrad measure`: one command from a model and a corpus to R(W), in a folder of its own.

    docgrad measure --model M --corpus NAME [--control WEB] [--docs A:B] [--device cuda] [--out DIR]

1. what is missing is built: a built-in corpus (or the control) under M's tokenizer with `corpora build`; a
   corpus of your own must have been added (`docgrad corpora add NAME --from PATH`), else the error says so;
2. the plan (runtime.measure_plan), printed before any probe: each cell already measured, copied from an
   identical committed one under --reuse-from (default data/results), its rows of a committed cell over more
   documents, or probed (chunks, minutes at the measured seconds per chunk, disk, memory); --plan stops here;
3. the cells are reused or probed (`docgrad probe`: resumable, a progress bar with the time left) into
   DIR/results, never into the project's data/results; the control with --exact-ref, as the study probed WEB;
4. the cells are analysed (document bootstrap) and presentation.measurement prints R(16K), or R at the span when
   the corpus's span is shorter, R_rel against the control at the same window, the verdict, cautions of a thin
   sample and the decision sentence;
5. page 04e (your documents: the same reading, built by the same function), or the pages --pages names, is
   executed with those parameters into DIR (its notebook, figures and JSON twin) and exported to DIR/html/, never
   over the committed pages.
"""

from __future__ import annotations

import sys
from pathlib import Path

from docgrad import models
from docgrad.core.bootstrap import block_sizes
from docgrad.core.constants import CORPORA, DOCS_PER_CORPUS
from docgrad.corpora import build as corpora
from docgrad.corpora.derived import prefix_corpus
from docgrad.errors import DocgradError
from docgrad.fileio import shown_path
from docgrad.presentation.measurement import measured_analysis, measurement_lines
from docgrad.publication import finish_interrupted
from docgrad.results.format import parse_docs
from docgrad.results.stats import check_resamples, check_seed
from docgrad.runtime import notebooks as nb
from docgrad.runtime import report
from docgrad.runtime.cli import DEFAULT_PATHS, build_parser, resolve_default_paths
from docgrad.runtime.measure_plan import PROBED, carry_out, plan_cell, plan_line, seconds_per_chunk

PAGES = ("03", "04", "04e")   # the pages measure can execute: 04e (your documents, the default), 04 and 03 (rho by lag)


def run_verb(argv: list[str]) -> None:
    """Run another docgrad verb with its own checks (argparse, default paths); a refusal or failure is raised."""
    args = build_parser().parse_args(argv)
    code = int(args.func(resolve_default_paths(args)) or 0)
    if code:
        raise DocgradError(f"`docgrad {' '.join(argv)}` stopped with exit status {code} (its message is above)")


def model_argv(args) -> list[str]:
    """The model, manifest and cache options of the verbs measure runs (a hub model is named '<id>@<revision>')."""
    hub_id, _, revision = args.model.partition("@")
    return ["--model", hub_id, *(["--revision", revision] if revision else []), "--manifest", str(args.manifest),
            "--cache", args.cache]


def probe_argv(args, root: Path, results: Path, corpus: str, exact_ref: bool) -> list[str]:
    """The `docgrad probe` measure runs for one corpus into `results`: the control with --exact-ref (the G1 check
    of the sketch), as the study probed WEB, so the committed control cells are the same cell (reuse)."""
    return ["--root", str(root), "probe", "--corpus", corpus, "--docs", args.docs, "--chunk", str(args.chunk),
            "--device", args.device, "--out", str(results), *model_argv(args), *(["--exact-ref"] if exact_ref else []),
            *(["--threads", str(args.threads)] if args.threads else [])]


def missing_corpora(manifest: Path, wanted: list[str], need: int = 1) -> dict[str, int]:
    """{corpus: documents it holds} for the corpora of `wanted` that the manifest does not record or that hold
    fewer than `need` documents (every one of them, holding 0, when there is no manifest)."""
    recorded = corpora.read_manifest(manifest).get("corpora", {}) if Path(manifest).exists() else {}
    held = {c: len(recorded.get(c, {}).get("documents", [])) for c in wanted}
    return {c: n for c, n in held.items() if c not in recorded or n < need}


def execute_pages(root: Path, out: Path, pages: list[str], params: dict) -> list[Path]:
    """The pages (e.g. ["03", "04"]) executed with `params` (each page takes those its parameters cell names)
    into `out` (notebooks, figures_dir = out/figures, their JSON twins) and exported to out/html/; the committed
    pages, figures and report are not touched. Returns the HTML pages."""
    runs = []
    try:
        for page in nb.find_notebooks(root / "notebooks", pages):
            names = nb.read_parameters(page)
            given = {k: v for k, v in {**params, "figures_dir": str(out / "figures")}.items() if k in names}
            runs.append(nb.stage_notebook(page, output=out / f"{page.stem}.ipynb", parameters=given, cwd=root,
                                          overwrite=True))
    except BaseException:
        nb.discard(runs)
        raise
    nb.publish_runs(runs, out)
    report.build_report(out / "no-sources", out / "html", executed={r.source.stem: r.output for r in runs})
    return [out / "html" / f"{r.source.stem}.html" for r in runs]


def check_pages(text: str) -> list[str]:
    """--pages: a comma-separated list of the pages measure can execute for one corpus (PAGES)."""
    pages = [p.strip() for p in str(text).split(",") if p.strip()]
    bad = [p for p in pages if p not in PAGES]
    if not pages or bad or len(set(pages)) != len(pages):
        raise DocgradError(f"--pages {text}: name some of {', '.join(PAGES)} once each, comma-separated "
                           "(e.g. 03,04)")
    return sorted(pages)


MEASUREMENTS = "measurements"      # the project's folder for measurements (git-ignored); the study's files lie outside


def check_measurement_folder(out: Path, root: Path) -> None:
    """Refuse a measurement folder that could write over the study: inside the project anywhere but under
    <root>/measurements/ (notebooks/, figures/, data/results/, data/regime/, the report, the root itself), or a
    folder that holds the project. One line naming both and what to pass instead."""
    out, root = Path(out).resolve(), Path(root).resolve()
    other = next((d for d in out.parents if (d / "pyproject.toml").exists() and (d / "notebooks").is_dir()), None)
    if other is not None and other != root and not out.is_relative_to(root):
        root = other                       # another checkout's study is as much out of reach as this one's
    home = root / MEASUREMENTS
    if out == root or root.is_relative_to(out):
        raise DocgradError(f"--out {out}: holds the project {root}, whose committed pages, figures and results a "
                           f"measurement would write beside or over; give a folder of its own, e.g. --out "
                           f"{home / 'NAME'}")
    if out == home:
        raise DocgradError(f"--out {out}: is the measurements folder itself, which holds every measurement; pass a "
                           f"folder of this one's under it, e.g. --out {home / 'NAME'}")
    if out.is_relative_to(root) and not out.is_relative_to(home):
        raise DocgradError(f"--out {out}: is inside the project {root} but not under {home}/, where a measurement "
                           f"cannot touch the study's notebooks, figures or results; pass --out {home / 'NAME'}, "
                           "or a folder outside the project")


def check_plan(docs: tuple[int, int], chunk: int, corpus: str, control: str, recorded: dict) -> None:
    """What would stop the analysis after hours of probing, refused first: fewer than two documents (the mean
    gradient S_cross is estimated from pairs of documents), and a control whose span is not a whole number of
    the corpus's chunks (both are probed at that chunk, so R_rel reads them at the same windows)."""
    a, b = docs
    if b - a < 2:
        raise DocgradError(f"--docs {a}:{b}: one document; R needs at least two (the mean gradient is estimated from "
                           f"pairs of documents): measure e.g. --docs {a}:{a + 8}")
    for name in (n for n in (corpus, control) if n in recorded):     # one not built yet is refused by its probe
        tokens = corpora.span_rule(recorded[name]).tokens
        if tokens % chunk or tokens // chunk < 2:
            raise DocgradError(f"--control {control}: its span of {tokens} tokens is not two or more whole chunks of "
                               f"{corpus}'s {chunk} tokens, so the two cannot be read at the same windows; choose a "
                               f"control added with a span that is a multiple of {chunk} (`docgrad corpora add ... "
                               f"--chunk {chunk}`)" if name == control else
                               f"--chunk {chunk}: {corpus}'s span of {tokens} tokens is not two or more whole chunks")
        if tokens // chunk > MAX_CHUNKS_PER_DOCUMENT:
            raise DocgradError(f"--chunk {chunk}: {name}'s span of {tokens} tokens is {tokens // chunk} chunks a "
                               f"document (at most {MAX_CHUNKS_PER_DOCUMENT}: each is a forward and backward pass, "
                               f"and the Gram grows with their square); measure at a chunk of at least "
                               f"{-(-tokens // MAX_CHUNKS_PER_DOCUMENT)} tokens")


MAX_CHUNKS_PER_DOCUMENT = 256


def control_at_span(args, root: Path, results: Path, reuse_from: Path, corpus: str, control: str,
                    recorded: dict) -> str:
    """The control measure probes: the control itself when its cell is reused (a committed one, or rows of one)
    or already measured and has R at the corpus's span, or when the corpus's span is as long as the control's, or
    with --full-control; else the first <span> tokens of the control's spans (corpora.derived,
    `<CONTROL>S<span>`), since R_rel is read at the corpus's span: the rest of the control's would cost chunks for
    nothing, and a span of 3 chunks is no window of a 32-chunk control (R is read in blocks of 1, 2, 4, ... 32).
    One line says which."""
    if args.full_control or corpus not in recorded or control not in recorded:    # one not built: its probe refuses
        return control
    tokens, full = corpora.span_rule(recorded[corpus]).tokens, corpora.span_rule(recorded[control]).tokens
    if tokens >= full:
        return control
    has_window = tokens // args.chunk in block_sizes(full // args.chunk)     # R is read in blocks of 1, 2, 4, ... m
    own = plan_cell(probe_argv(args, root, results, control, exact_ref=True), results, reuse_from, args.no_reuse)
    if own.action != PROBED and has_window:
        return control
    name = prefix_corpus(control, tokens, args.chunk, args.manifest, args.cache,
                         command=f"docgrad measure --corpus {corpus} --control {control} (derived)")
    print(f"measure: the control {control} is probed at {corpus}'s span, its first {tokens} of {full} tokens, as "
          f"the corpus {name} of {shown_path(Path(args.manifest))} ({full // tokens}x fewer chunks; R_rel is read at "
          f"{tokens} tokens either way; --full-control probes all of {control})", file=sys.stderr)
    return name


def cli_measure(args) -> int:
    root = nb.command_root(args)
    corpus, control = args.corpus.upper(), args.control.upper()
    if corpus == control:
        raise DocgradError(f"--corpus {corpus} is also the --control: the control is the packed short-document "
                           "corpus R_rel divides by (default WEB); name another corpus to measure")
    docs = parse_docs(args.docs)
    rm = models.result_model(args.model)                # how the result files and page 04 name it
    label = rm.label
    out = Path(args.out).resolve() if args.out else root / MEASUREMENTS / label.replace("/", "__") / corpus
    check_measurement_folder(out, root)
    results = out / "results"
    check_resamples(args.resamples), check_seed(args.seed)   # before hours of probing, not after
    pages = check_pages(args.pages)
    blocked = next((p for p in (out, *out.parents) if p.exists() and not p.is_dir()), None)
    if blocked is not None:
        raise DocgradError(f"--out {out}: {blocked} is a file, not a folder; a measurement is a folder (results/, "
                           "the executed page, html/)")
    if out.is_dir() and (note := finish_interrupted(out)):   # a page publication of an earlier measure, cut short
        print(f"measure: {note} in {out}", file=sys.stderr)
    manifest = Path(args.manifest)                      # the model's own by default (cli.resolve_default_paths)
    model_args = model_argv(args)

    for name, held in missing_corpora(manifest, [corpus, control], docs[1]).items():    # 1. what is missing
        if name not in CORPORA and not held:
            raise DocgradError(f"corpus {name} is not in {manifest}: add your documents first with `docgrad corpora "
                               f"add {name} --from PATH --model {args.model}` (README 'Measure your own documents')")
        if name not in CORPORA:
            raise DocgradError(f"--docs {args.docs}: corpus {name} holds {held} documents in {manifest}; measure "
                               f"--docs 0:{held}, or add it again with more (`docgrad corpora add {name} --from PATH "
                               f"--docs {docs[1]} --model {args.model} --manifest {manifest} --cache {args.cache} "
                               "--overwrite`)")
        more = ["--documents", str(docs[1])] if held or docs[1] > DOCS_PER_CORPUS else []   # extends, never redraws
        print(f"measure: building {name} under {label}'s tokenizer" + (f", {docs[1]} documents" if more else ""),
              file=sys.stderr)
        run_verb(["--root", str(root), "corpora", "build", "--corpus", name, *model_args, *more])

    recorded = corpora.read_manifest(manifest)["corpora"]
    if args.chunk is None:                  # the corpus's own chunk length (corpora add --chunk), else 512
        args.chunk = corpora.span_rule(recorded[corpus]).chunk
    check_plan(docs, args.chunk, corpus, control, recorded)             # before any probe, not after one
    reuse_from = Path(args.reuse_from).resolve() if args.reuse_from else root / DEFAULT_PATHS["results"]
    if args.reuse_from and not reuse_from.is_dir():
        raise DocgradError(f"--reuse-from {args.reuse_from}: no such folder (a results folder, e.g. data/results)")
    control = control_at_span(args, root, results, reuse_from, corpus, control, recorded)
    plans = [plan_cell(probe_argv(args, root, results, name, exact_ref=name == control), results, reuse_from,
                       args.no_reuse) for name in (corpus, control)]     # 2. the plan, printed before any probe
    for p in plans:
        print(plan_line(p, seconds_per_chunk(p.config, [results, reuse_from]) if p.action == PROBED else None),
              file=sys.stdout if args.plan else sys.stderr)
    if args.plan:
        return 0
    for p in plans:                        # a finished cell is kept, an identical one copied, a covering one subset
        if not carry_out(p, results, reuse_from):
            run_verb(p.argv)

    spec = args.model if models.offline_model(args.model) else f"{rm.model}@{rm.revision}"   # as the files say
    a = measured_analysis(results, spec, corpus, control, args.chunk, args.docs, args.resamples,   # 4. this model's
                          args.seed)                                                                # cells only
    for line in measurement_lines(a, label, corpus, control):
        print(line)
    if not args.no_page:                                                   # 4. the pages, in out/
        print(f"measure: executing page {' and '.join(pages)} into {out} ...", file=sys.stderr)
        for html in execute_pages(root, out, pages, {"results_dir": str(results), "models": [spec], "model": spec,
                                                     "corpora": [corpus, control], "corpus": corpus,
                                                     "control": control, "chunk": args.chunk,
                                                     "resamples": args.resamples, "seed": args.seed,
                                                     "documents": args.docs, "published_documents": args.docs,
                                                     "study_results_dir": str(root / DEFAULT_PATHS["results"]),
                                                     "regime_dir": str(root / "data" / "regime")}):
            print(f"page: {html}")
    return 0
