"""`docgrad measure`: one command from a model and a corpus to R(W), in a folder of its own.

    docgrad measure --model M --corpus NAME [--control WEB] [--docs A:B] [--device cuda] [--out DIR]

1. what is missing is built: a built-in corpus (or the control) under M's tokenizer with `corpora build`; a
   corpus of your own must have been added (`docgrad corpora add NAME --from PATH`), else the error says so;
2. the corpus and the control are probed (`docgrad probe`: resumable, a progress bar with the time left) into
   DIR/results, never into the project's data/results (the committed pages read that folder);
3. the cells are analysed (document bootstrap) and the headline printed: R(16K), or R at the span when the
   corpus's span is shorter, with its interval, and R_rel against the control;
4. the design-effect page (04) is executed with those parameters into DIR (its notebook, figures and JSON twin)
   and exported to DIR/html/, never over the committed pages.
"""

from __future__ import annotations

import sys
from pathlib import Path

from docgrad import models
from docgrad.core.constants import CORPORA
from docgrad.corpora import build as corpora
from docgrad.errors import DocgradError
from docgrad.presentation.design_effect import measurement_lines
from docgrad.results.format import parse_docs
from docgrad.results.stats import analyze, check_resamples, check_seed
from docgrad.runtime import notebooks as nb
from docgrad.runtime import report
from docgrad.runtime.cli import build_parser, resolve_default_paths
from docgrad.runtime.probe_command import result_path

PAGE = "04"


def run_verb(argv: list[str]) -> None:
    """Run another docgrad verb with its own checks (argparse, default paths); a refusal or failure is raised."""
    args = build_parser().parse_args(argv)
    code = int(args.func(resolve_default_paths(args)) or 0)
    if code:
        raise DocgradError(f"`docgrad {' '.join(argv)}` stopped with exit status {code} (its message is above)")


def missing_corpora(manifest: Path, wanted: list[str]) -> list[str]:
    """The corpora of `wanted` the manifest does not record (all of them when there is no manifest)."""
    if not Path(manifest).exists():
        return list(wanted)
    recorded = corpora.read_manifest(manifest).get("corpora", {})
    return [c for c in wanted if c not in recorded]


def execute_page(root: Path, out: Path, params: dict) -> Path:
    """Page 04 executed with `params` into `out` (notebook, figures_dir = out/figures, its JSON twin) and exported
    to out/html/; the committed page, figures and report are not touched. Returns the HTML page."""
    page = nb.find_notebooks(root / "notebooks", [PAGE])[0]
    run = nb.stage_notebook(page, output=out / f"{page.stem}.ipynb", parameters={**params,
                            "figures_dir": str(out / "figures")}, cwd=root, overwrite=True)
    nb.publish_runs([run], out)
    report.build_report(out / "no-sources", out / "html", executed={page.stem: out / f"{page.stem}.ipynb"})
    return out / "html" / f"{page.stem}.html"


def cli_measure(args) -> int:
    root = nb.command_root(args)
    corpus, control = args.corpus.upper(), args.control.upper()
    if corpus == control:
        raise DocgradError(f"--corpus {corpus} is also the --control: the control is the packed short-document "
                           "corpus R_rel divides by (default WEB); name another corpus to measure")
    docs = parse_docs(args.docs)
    rm = models.result_model(args.model)                # how the result files and page 04 name it
    label = rm.label
    out = Path(args.out).resolve() if args.out else root / "measurements" / label.replace("/", "__") / corpus
    results = out / "results"
    check_resamples(args.resamples), check_seed(args.seed)   # before hours of probing, not after
    blocked = next((p for p in (out, *out.parents) if p.exists() and not p.is_dir()), None)
    if blocked is not None:
        raise DocgradError(f"--out {out}: {blocked} is a file, not a folder; a measurement is a folder (results/, "
                           "the executed page, html/)")
    manifest = Path(args.manifest)                      # the model's own by default (cli.resolve_default_paths)
    hub_id, _, revision = args.model.partition("@")     # a hub model is named '<id>@<revision>'
    model_args = ["--model", hub_id, *(["--revision", revision] if revision else []), "--manifest", str(manifest),
                  "--cache", args.cache]

    for name in missing_corpora(manifest, [corpus, control]):           # 1. what is missing
        if name not in CORPORA:
            raise DocgradError(f"corpus {name} is not in {manifest}: add your documents first with `docgrad corpora "
                               f"add {name} --from PATH --model {args.model}` (README 'Measure your own documents')")
        print(f"measure: building {name} under {label}'s tokenizer", file=sys.stderr)
        run_verb(["--root", str(root), "corpora", "build", "--corpus", name, *model_args])

    if args.chunk is None:                  # the corpus's own chunk length (corpora add --chunk), else 512
        args.chunk = corpora.span_rule(corpora.read_manifest(manifest)["corpora"][corpus]).chunk
    for name in (corpus, control):                                        # 2. probe (a finished cell is kept)
        probe = ["--root", str(root), "probe", "--corpus", name, "--docs", args.docs, "--chunk", str(args.chunk),
                 "--device", args.device, "--out", str(results), *model_args]
        if args.threads:
            probe += ["--threads", str(args.threads)]
        if not result_path(results, rm.model, rm.revision, name, args.chunk, docs).with_suffix(".json").exists():
            run_verb(probe)

    a = analyze(results, resamples=args.resamples, seed=args.seed, docs=docs).subset(   # 3. analyse this model's
        rm.model, rm.revision, args.chunk, [corpus, control])                             # cells, never another's
    for line in measurement_lines(a, label, corpus, control):
        print(line)
    if not args.no_page:                                                   # 4. the page, in out/
        print(f"measure: executing page {PAGE} into {out} ...", file=sys.stderr)
        spec = args.model if models.offline_model(args.model) else f"{rm.model}@{rm.revision}"   # as the files say
        html = execute_page(root, out, {"results_dir": str(results), "models": [spec],
                                        "corpora": [corpus, control], "chunk": args.chunk,
                                        "resamples": args.resamples, "seed": args.seed, "documents": args.docs,
                                        "published_documents": args.docs})
        print(f"page: {html}")
    return 0
