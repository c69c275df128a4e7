"""Executing the report's notebooks (host side): discovery, validated parameters, papermill, `docgrad run`
and `docgrad report`. What runs inside a notebook's kernel is in docgrad.runtime.pages.

Conventions every notebook follows (notebooks/NN_name.py, or NNx_name.py for a page that follows page NN;
jupytext py:percent): a cell tagged `parameters` (papermill) holding plain literals only; `ROOT = pages.setup()`
early on; every number the page states computed by a tested function in docgrad and saved with
`pages.save_numbers`; a last cell showing `pages.versions()`.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from docgrad.core.constants import MAX_BUCKETS, MIN_BUCKETS, MIN_RESAMPLES
from docgrad.errors import DocgradError
from docgrad.fileio import check_output_file, move_into_place, project_root, shown_path
from docgrad.results.format import ResultFileError, parse_docs
from docgrad.runtime import report
from docgrad.runtime.pages import STAGING_ENV, is_page, page_order, page_prefix, staged_outputs

NOTEBOOK_GLOB = "[0-9][0-9]*_*.py"
# A page's stem is NN_name, or NNx_name for a page that follows page NN (e.g. 01b_real_trainers after
# 01_loss_reduction): its prefix (NN or NNx) is what `docgrad run` and `--only` take.
class NotebookError(DocgradError, RuntimeError):
    """A notebook could not be found, parameterised or executed; the message says which and why. `docgrad run` and
    `docgrad report` exit with 2 on it (a refusal of what was asked: unknown notebook, bad --output or parameter),
    with 1 on its subclass NotebookFailure."""


class NotebookFailure(NotebookError):
    """What was asked was valid but could not be done: a notebook failed in a cell or wrote outside the project,
    or the report would publish notebooks that are stale against their sources (exit 1)."""


class ParameterError(NotebookError):
    """An unknown notebook parameter or a value of the wrong type; the message lists the parameters."""


def earlier_run_of(path: Path, source: Path) -> bool:
    """Whether the notebook at `path` is an executed run of `source` (its pair, or papermill's record of its input
    is that source): what `docgrad run --output` may replace without --overwrite."""
    path = Path(path)
    if path.resolve() == Path(source).with_suffix(".ipynb").resolve():
        return True
    if path.suffix != ".ipynb":
        return False
    try:
        meta = json.loads(path.read_text()).get("metadata", {})
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        return False
    return Path(str(meta.get("papermill", {}).get("input_path", ""))).name == Path(source).name


def find_notebooks(directory: str | Path = "notebooks", only=None) -> list[Path]:
    """notebooks/NN_*.py and NNx_*.py in page order; `only` keeps those whose prefix (NN or NNx) or full stem is
    listed."""
    directory = Path(directory)
    found = sorted((p for p in directory.glob(NOTEBOOK_GLOB) if is_page(p)), key=page_order)
    if only:
        wanted = {str(o) for o in only}
        picked = [p for p in found if page_prefix(p) in wanted or p.stem in wanted]
        missing = sorted(w for w in wanted if not any(page_prefix(p) == w or p.stem == w for p in picked))
        if missing:
            raise NotebookError(f"no notebook {', '.join(missing)} in {directory}/ "
                                f"(have: {', '.join(p.stem for p in found) or 'none'})")
        found = picked
    return found


def resolve_notebook(spec: str, directory: str | Path = "notebooks") -> Path:
    """A notebook source from a path (.py or its .ipynb twin), a stem, or a page prefix like '01' or '01b'."""
    p = Path(spec)
    if p.suffix == ".ipynb":
        p = p.with_suffix(".py")
    if p.suffix == ".py":
        if not p.exists():
            raise NotebookError(f"notebook source {p} does not exist")
        return p
    matches = [q for q in find_notebooks(directory) if q.stem == spec or page_prefix(q) == spec]
    if len(matches) != 1:
        have = ", ".join(q.stem for q in find_notebooks(directory)) or "none"
        raise NotebookError(f"{'no' if not matches else 'more than one'} notebook matches {spec!r} in "
                            f"{directory}/ (have: {have})")
    return matches[0]


def _parameters_cell(nb) -> tuple[int, str]:
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and "parameters" in cell.metadata.get("tags", []):
            return i, cell.source
    raise NotebookError("the notebook has no code cell tagged 'parameters'")


def read_parameters(path: str | Path) -> dict[str, dict]:
    """The parameters cell of a notebook (.py via jupytext, or .ipynb): name -> {default, type, help}.

    The cell must hold plain assignments of Python literals (`name = literal  # help`)."""
    import ast

    import jupytext

    path = Path(path)
    nb = jupytext.read(path)
    try:
        _, source = _parameters_cell(nb)
    except NotebookError as e:
        raise NotebookError(f"{path}: {e}") from None
    lines = source.splitlines()
    params: dict[str, dict] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name, value = node.targets[0].id, node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            name, value = node.target.id, node.value
        else:
            raise NotebookError(f"{path}: parameters cell line {node.lineno}: only `name = literal` "
                                f"assignments are allowed")
        try:
            default = ast.literal_eval(value)
        except ValueError:
            raise NotebookError(f"{path}: parameter {name!r} (line {node.lineno}) is not a plain literal") from None
        line = lines[node.end_lineno - 1]
        help_ = line.split("#", 1)[1].strip() if "#" in line[value.end_col_offset:] else ""
        params[name] = {"default": default, "type": _type_name(default), "help": help_}
    return params


def _type_name(value) -> str:
    """`int`, `float`, ..., and `list[int]` / `list[list]` for homogeneous lists."""
    name = type(value).__name__
    if isinstance(value, (list, tuple)) and value and len({type(v) for v in value}) == 1:
        return f"{name}[{_type_name(value[0]).split('[')[0]}]"
    return name


def describe_parameters(params: dict[str, dict]) -> str:
    """One line per parameter: `name: type = default  # help`."""
    out = []
    for name, p in params.items():
        line = f"  {name}: {p['type']} = {p['default']!r}"
        if p["help"]:
            line += f"  # {p['help']}"
        out.append(line)
    return "\n".join(out) or "  (none)"


def _type_ok(value, default) -> bool:
    if default is None:               # an optional name (e.g. a hub revision): None or a string
        return value is None or isinstance(value, str)
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(default, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float))
    if isinstance(default, (list, tuple)):
        if not isinstance(value, (list, tuple)):
            return False
        kinds = {type(d) for d in default}
        if len(kinds) == 1:  # homogeneous default: check every element the same way
            (kind,) = kinds
            return all(_type_ok(v, kind()) if kind in (int, float, bool, str) else isinstance(v, kind)
                       for v in value)
        return True
    return type(value) is type(default)


def parse_value(raw):
    """A command-line value: a Python literal when it parses as one (3, 0.5, [2, 8], True, 'x'), else the string."""
    import ast

    if not isinstance(raw, str):
        return raw
    try:
        return ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        return raw


def validate_parameters(path: str | Path, given: dict) -> dict:
    """Check `given` (name -> value or raw string) against the notebook's parameters cell.

    Unknown names and values of the wrong type raise ParameterError listing every parameter with its type and
    default. Returns the values to inject (ints given for float parameters become floats; raw strings stay
    strings for str parameters)."""
    params = read_parameters(path)
    listing = f"parameters of {Path(path).name}:\n{describe_parameters(params)}"
    out = {}
    for name, raw in given.items():
        if name not in params:
            raise ParameterError(f"unknown parameter {name!r} for {Path(path).name}\n{listing}")
        default = params[name]["default"]
        value = raw if isinstance(default, str) and isinstance(raw, str) else parse_value(raw)
        if not _type_ok(value, default):
            raise ParameterError(f"parameter {name!r} expects {params[name]['type']} like {default!r}, "
                                 f"got {type(value).__name__} {value!r}\n{listing}")
        if isinstance(default, float) and isinstance(value, int):
            value = float(value)
        _check_range(name, value, listing)
        out[name] = value
    return out


def _check_range(name: str, value, listing: str) -> None:
    """The study's own parameters are range-checked before the kernel starts: seeds are non-negative integers,
    resamples 0 or MIN_RESAMPLES..10^6, a chunk at least 2 tokens, windows and batch sizes positive, a document
    range A:B with 0 <= A < B, sketch buckets MIN_BUCKETS..MAX_BUCKETS, and lists of models, corpora, batch sizes
    or buckets not empty."""
    def refuse(why):
        raise ParameterError(f"parameter {name!r} = {value!r}: {why}\n{listing}")

    if isinstance(value, bool):
        return
    if name.endswith("documents") and isinstance(value, str):      # documents, published_documents
        try:
            parse_docs(value)
        except ResultFileError:
            refuse("a document range is A:B with 0 <= A < B, e.g. '0:16' (documents A to B-1)")
    if name in ("models", "corpora", "batch_sizes", "buckets", "g1_models") and isinstance(value, list) \
            and not value:
        refuse("name at least one")
    if name == "buckets" and isinstance(value, list) and any(
            not isinstance(b, int) or not MIN_BUCKETS <= b <= MAX_BUCKETS for b in value):
        refuse(f"the count sketch takes {MIN_BUCKETS} to {MAX_BUCKETS} buckets")
    if (name == "seed" or name.endswith("_seed")) and isinstance(value, int) and value < 0:
        refuse("a seed is a non-negative integer")
    if name == "resamples" and isinstance(value, int) and value != 0 and not MIN_RESAMPLES <= value <= 10**6:
        refuse(f"resamples is 0 (no intervals) or {MIN_RESAMPLES} to 1,000,000")
    if name == "chunk" and isinstance(value, int) and value < 2:
        refuse("a chunk has at least 2 tokens")
    if name in ("window", "n_chunks") and isinstance(value, int) and value < 0:
        refuse("must be >= 0")
    if name in ("vocab_size", "standard_chunks") and isinstance(value, int) and value < 1:
        refuse("must be >= 1")
    if name == "batch_sizes" and isinstance(value, list) and any(not isinstance(b, int) or b < 1 for b in value):
        refuse("batch sizes are positive integers")


def _cell_label(nb, source: str, fallback_index: int) -> str:
    """`code cell N (cell i of n): first line`, locating the failing cell of the source notebook by its text
    (papermill's output inserts cells, so its index is not the reader's)."""
    code_cells = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    index = next((i for i in code_cells if nb.cells[i].source.strip() == source.strip()), None)
    first = next((ln for ln in source.splitlines() if ln.strip()), "").strip()[:80]
    if index is None:
        return f"cell {fallback_index + 1} of the executed notebook: {first}"
    return f"code cell {code_cells.index(index) + 1} (cell {index + 1} of {len(nb.cells)}): {first}"


def execute_notebook(source: str | Path, output: str | Path | None = None, parameters: dict | None = None,
                     cwd: str | Path | None = None, kernel_name: str = "python3", overwrite: bool = False) -> Path:
    """Execute a jupytext notebook source with papermill; write the executed .ipynb (default: beside it).

    Nothing the run writes is visible until every cell succeeded: the notebook runs in a temporary file, and
    the figures and numbers files it saves (docgrad.runtime.pages) go to a staging directory; on success they are all
    moved into place (also across file systems), on failure none is, so a failed run never leaves a half-
    executed notebook or half-replaced figures that look complete. The failed run is kept as
    <stem>.failed.ipynb beside the output and the error names the cell. Parameters are validated first."""
    import tempfile

    import jupytext
    import papermill as pm
    from papermill.exceptions import PapermillExecutionError

    source = Path(source)
    output = check_output_file(Path(output) if output else source.with_suffix(".ipynb"), "--output",
                               lambda p: earlier_run_of(p, source), overwrite)
    if output.suffix != ".ipynb":
        raise NotebookError(f"--output {output}: an executed notebook is written as .ipynb")
    cwd = Path(cwd) if cwd else project_root(source.parent)
    params = validate_parameters(source, parameters or {})
    nb = jupytext.read(source)
    for i, cell in enumerate(nb.cells):  # jupytext draws random cell ids; fixed ones keep re-executions diffable
        cell.id = f"cell-{i:03d}"
    failed = output.with_name(output.stem + ".failed.ipynb")
    with tempfile.TemporaryDirectory(prefix="docgrad-nb-") as tmp:
        src_ipynb = Path(tmp) / (source.stem + ".ipynb")
        out_ipynb = Path(tmp) / (source.stem + ".out.ipynb")
        staging = Path(tmp) / "staged"
        staging.mkdir()
        jupytext.write(nb, src_ipynb)
        previous = os.environ.get(STAGING_ENV)
        os.environ[STAGING_ENV] = str(staging)          # the kernel inherits it
        try:
            pm.execute_notebook(str(src_ipynb), str(out_ipynb), parameters=params, cwd=str(cwd),
                                kernel_name=kernel_name, progress_bar=False, log_output=False,
                                report_mode=False,
                                # keep the kernel's start-up log (e.g. ipykernel's TCP notice) off the progress lines
                                extra_arguments=["--IPKernelApp.log_level=ERROR"])
        except PapermillExecutionError as e:
            if out_ipynb.exists():
                move_into_place(out_ipynb, failed)
            where = _cell_label(nb, e.source or "", e.cell_index)
            raise NotebookFailure(f"{source.name} failed in {where}\n  {e.ename}: {e.evalue}\n"
                                f"  the partial run is in {failed}; {output} and the figures were left unchanged") from None
        finally:
            if previous is None:
                os.environ.pop(STAGING_ENV, None)
            else:
                os.environ[STAGING_ENV] = previous
        _tidy_executed(out_ipynb, source, output, cwd)
        publish_staged(staging, cwd, page_prefix(source))
        move_into_place(out_ipynb, output)
        if output == source.with_suffix(".ipynb"):
            # the jupytext pair: the outputs were made from this source, so the .ipynb is not "more recent than
            # the .py" (JupyterLab's jupytext would refuse to open a pair whose .ipynb is newer and differs)
            st = source.stat()
            os.utime(output, ns=(st.st_atime_ns, st.st_mtime_ns))
    if failed.exists():
        failed.unlink()
    return output


FIGURE_SUFFIXES = (".png", ".svg", ".json")   # what a page writes to its figures directory


def publish_staged(staging: Path, root: Path, prefix: str | None = None) -> list[Path]:
    """Move every file a notebook staged (docgrad.runtime.pages) to its destination, refusing destinations outside the
    project root; checked for all before any is moved. prefix (the page's, e.g. '06'): every other figure or twin
    of that page in the directories written to (`06_*.png|svg|json` that this run did not write) is removed, so a
    run replaces all of its page's figures, never some (a run with another window leaves no stale W = 4096 PNG)."""
    moves = staged_outputs(staging)
    for _, final in moves:
        if not final.resolve().is_relative_to(Path(root).resolve()):
            raise NotebookFailure(f"the notebook wrote {final}, outside the project {root}; nothing was published")
    for staged, final in moves:
        move_into_place(staged, final)
    written = {final.resolve() for _, final in moves}
    if prefix:
        for d in {final.parent for _, final in moves}:
            for old in d.glob(f"{prefix}_*"):
                if old.suffix in FIGURE_SUFFIXES and old.resolve() not in written:
                    old.unlink()
    return [final for _, final in moves]


def _tidy_executed(executed: Path, source: Path, output: Path, cwd: Path) -> None:
    """Papermill records the temporary files it ran; record the source and output instead (relative to the
    project when inside it), so re-executions do not differ by a random temporary directory. Per-cell timing
    metadata (papermill's and the kernel's `execution`) is dropped: it changes on every run, and it makes
    jupytext see the .ipynb's inputs as different from the .py's."""
    import nbformat

    nb = nbformat.read(str(executed), as_version=4)
    for cell in nb.cells:
        cell.metadata.pop("papermill", None)
        cell.metadata.pop("execution", None)
    pm_meta = nb.metadata.setdefault("papermill", {})
    pm_meta["input_path"], pm_meta["output_path"] = shown_path(source, cwd), shown_path(output, cwd)
    nbformat.write(nb, str(executed))


def _read_ipynb(path: Path):
    import nbformat

    return nbformat.read(str(path), as_version=4)


def run_notebooks(sources, cwd: str | Path | None = None, out=None) -> list[tuple[Path, float]]:
    """Execute notebooks in order, one progress line each (`[i/n] name ... ok 12.3 s`); stop at the first failure."""
    import time

    out = out or sys.stdout
    done = []
    for i, src in enumerate(sources, 1):
        print(f"[{i}/{len(sources)}] {src.stem} ...", end=" ", flush=True, file=out)
        t0 = time.perf_counter()
        try:
            path = execute_notebook(src, cwd=cwd)
        except NotebookError:
            print(f"FAILED after {time.perf_counter() - t0:.1f} s", file=out, flush=True)
            raise
        dt = time.perf_counter() - t0
        print(f"ok {dt:.1f} s -> {path}", file=out, flush=True)
        done.append((path, dt))
    return done


def cli_report(args) -> int:
    """`docgrad report`: execute notebooks (all, or --only NN) then build report/ from every executed notebook.
    Exit 2 when what was asked is refused (an unknown page, no notebooks), 1 when a page fails or is stale."""
    root = project_root()
    nb_dir = Path(args.notebooks)
    nb_dir = nb_dir if nb_dir.is_absolute() else root / nb_dir
    out = Path(args.out)
    out = out if out.is_absolute() else root / out
    try:
        if not args.no_html:          # before any page runs: a report folder that cannot be written fails now
            blocked = next((p for p in (out, *out.parents) if p.exists() and not p.is_dir()), None)
            if blocked is not None:
                raise NotebookError(f"--out {args.out}: {blocked} is a file, not a directory; the HTML report is a "
                                    "folder (give a folder path)")
        sources = find_notebooks(nb_dir, args.only)
        if not sources:
            raise NotebookError(f"no notebooks (NN_name.py) in {nb_dir}")
        if not getattr(args, "no_execute", False):
            run_notebooks(sources, cwd=root)
        if not args.no_html:          # every page of the report must match its source, not only those just run
            stale = [d for src in find_notebooks(nb_dir) for d in pair_differences(src)]
            if stale:
                raise NotebookFailure("cannot build the report from stale notebooks:\n  " + "\n  ".join(stale)
                                    + "\n  execute them first: docgrad report --only NN (or docgrad report)")
    except NotebookError as e:
        print(f"docgrad report: {e}", file=sys.stderr)
        return 1 if isinstance(e, NotebookFailure) else 2
    if not args.no_html:
        index = report.build_report(nb_dir, out)
        print(f"report: {index}")
    return 0


def cli_run(args) -> int:
    """`docgrad run NOTEBOOK -p name value ... [--list] [--output PATH]`. Exit 2 when what was asked is refused
    before any kernel starts (an unknown notebook or parameter, an --output that is not .ipynb), 1 when the page
    fails."""
    import time

    try:
        source = resolve_notebook(args.notebook, project_root() / "notebooks")
        if args.list:
            print(f"parameters of {source.name}:\n{describe_parameters(read_parameters(source))}")
            return 0
        given = {}
        for name, value in args.parameter:
            if name in given:
                raise ParameterError(f"parameter {name!r} given twice")
            given[name] = value
        validate_parameters(source, given)  # fail before starting a kernel
        if args.output is not None and Path(args.output).suffix != ".ipynb":
            raise NotebookError(f"--output {args.output}: an executed notebook is written as .ipynb")
        print(f"{source.stem} ...", end=" ", flush=True)
        t0 = time.perf_counter()
        try:
            path = execute_notebook(source, output=args.output, parameters=given,
                                    overwrite=getattr(args, "overwrite", False))
        except NotebookError:
            print(f"FAILED after {time.perf_counter() - t0:.1f} s", flush=True)
            raise
        print(f"ok {time.perf_counter() - t0:.1f} s -> {path}")
    except NotebookError as e:
        print(f"docgrad run: {e}", file=sys.stderr)
        return 1 if isinstance(e, NotebookFailure) else 2
    return 0


def pair_differences(source: str | Path) -> list[str]:
    """Differences between a notebook source (.py) and its executed twin (.ipynb): missing file, different
    cell count, type or source, or an execution with non-default parameters (papermill records them; its
    `injected-parameters` cell itself is not compared). Empty list = in sync."""
    import jupytext

    source = Path(source)
    twin = source.with_suffix(".ipynb")
    if not twin.exists():
        return [f"{twin} is missing (execute {source.name}: docgrad run {page_prefix(source) or source})"]
    a = [c for c in jupytext.read(source).cells]
    executed = _read_ipynb(twin)
    b = [c for c in executed.cells if "injected-parameters" not in c.metadata.get("tags", [])]
    diffs = []
    given = executed.metadata.get("papermill", {}).get("parameters") or {}
    if given:
        diffs.append(f"{twin.name} was executed with parameters {given} (the report shows the defaults: "
                     f"docgrad run {page_prefix(source) or source})")
    if len(a) != len(b):
        diffs.append(f"{source.name} has {len(a)} cells, {twin.name} has {len(b)}")
    for i, (x, y) in enumerate(zip(a, b), 1):
        if x.cell_type != y.cell_type or x.source.strip() != y.source.strip():
            first = (x.source.strip().splitlines() or [""])[0][:60]
            diffs.append(f"{source.name}: cell {i} differs from {twin.name} ({x.cell_type} starting {first!r})")
    return diffs
