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
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from docgrad.core.constants import MAX_BUCKETS, MIN_BUCKETS, MIN_RESAMPLES
from docgrad.errors import DocgradError
from docgrad.fileio import check_output_file, move_into_place, project_root, shown_path
from docgrad.results.format import ResultFileError, parse_docs
from docgrad.runtime import report
from docgrad.publication import (STAGING_ENV, PublicationError, finish_interrupted, inputs_disagree, publish,
                                 staged_outputs)
from docgrad.runtime.pages import is_page, page_order, page_prefix

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
        if isinstance(default, list) and isinstance(value, tuple):
            value = list(value)             # ('WEB', 'CODE') is the list it spells, never its characters
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
    if name in ("models", "corpora", "g1_models") and isinstance(value, list):
        twice = sorted({str(v) for v in value if value.count(v) > 1})
        if twice:
            refuse(f"names {', '.join(twice)} more than once; name each once")
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


def _quiet_kernel_death_logs() -> None:
    """Keep nbclient's own reports of a dead kernel off the terminal: "Kernel died while waiting for execute reply"
    (papermill's logger) and the "Task exception was never retrieved ... DeadKernelError" asyncio prints when Ctrl-C
    or SIGTERM stops a run mid-cell and the kernel is shut down under a pending cell (a race: sometimes). An
    interrupted run says one word; a kernel that dies on its own is reported by stage_notebook as NotebookFailure."""
    import logging

    from nbclient.exceptions import DeadKernelError

    class KernelDeath(logging.Filter):
        def filter(self, record):
            exc = record.exc_info[1] if record.exc_info else None
            return not (isinstance(exc, DeadKernelError) or "DeadKernelError" in record.getMessage()
                        or record.getMessage().startswith("Kernel died"))

    for name in ("papermill", "asyncio"):
        logger = logging.getLogger(name)
        if not any(type(f).__name__ == "KernelDeath" for f in logger.filters):
            logger.addFilter(KernelDeath())


def quiet_kernel_manager(log: Path):
    """jupyter_client's AsyncKernelManager whose kernel process writes its own stderr (start-up notices, the ZMQ
    traceback of a kernel shut down mid-cell on Ctrl-C) to `log` instead of the terminal. A cell's output and
    errors reach the notebook through the kernel's messages, not this stream."""
    from jupyter_client import AsyncKernelManager

    class QuietKernelManager(AsyncKernelManager):
        async def start_kernel(self, **kw):
            with open(log, "ab") as f:            # the kernel keeps its own copy of the descriptor
                kw.setdefault("stderr", f)
                return await super().start_kernel(**kw)

    return QuietKernelManager


@dataclass
class StagedRun:
    """A notebook that ran to the end, its outputs not yet published: `moves` are (staged file, destination),
    the executed notebook last; `workdir` holds the staged files until they are published."""
    source: Path
    output: Path
    executed: Path
    moves: list[tuple[Path, Path]]
    workdir: Path

    def removals(self) -> list[Path]:
        """The page's figures and twins this run did not make (`NN_*.png|svg|json` of its prefix in the folders it
        writes to): publishing the run replaces all of its page's figures, never some (a run with another window
        leaves no stale W = 4096 PNG). Only figure folders are swept (those it writes a PNG, an SVG or its JSON twin
        <stem>.json to), never a records folder."""
        prefix = page_prefix(self.source)
        written = {final.resolve() for _, final in self.moves}
        if not prefix:
            return []
        figure_dirs = {final.parent for _, final in self.moves
                       if final.suffix in (".png", ".svg") or final.name == f"{self.source.stem}.json"}
        return [old for d in figure_dirs if d.is_dir()
                for old in d.glob(f"{prefix}_*") if old.suffix in FIGURE_SUFFIXES and old.resolve() not in written]


FIGURE_SUFFIXES = (".png", ".svg", ".json")   # what a page writes to its figures directory


def stage_notebook(source: str | Path, output: str | Path | None = None, parameters: dict | None = None,
                   cwd: str | Path | None = None, kernel_name: str = "python3", overwrite: bool = False) -> StagedRun:
    """Execute a jupytext notebook source with papermill in a temporary work folder; nothing is published.

    The figures, numbers and teaching records the page saves (docgrad.runtime.pages, docgrad.publication) go to
    the staging folder, and the executed notebook beside it. When a cell fails, the work folder is removed, the
    failed run is kept as <stem>.failed.ipynb beside the output and the error names the cell. Parameters are
    validated first."""
    import tempfile

    import jupytext
    import papermill as pm
    from nbclient.exceptions import DeadKernelError
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
    work = Path(tempfile.mkdtemp(prefix=f"docgrad-{source.stem}-"))
    src_ipynb, out_ipynb, staging = work / (source.stem + ".ipynb"), work / (source.stem + ".out.ipynb"), work / "staged"
    staging.mkdir()
    jupytext.write(nb, src_ipynb)
    previous = os.environ.get(STAGING_ENV)
    os.environ[STAGING_ENV] = str(staging)          # the kernel inherits it
    _quiet_kernel_death_logs()
    try:
        pm.execute_notebook(str(src_ipynb), str(out_ipynb), parameters=params, cwd=str(cwd),
                            kernel_name=kernel_name, progress_bar=False, log_output=False, report_mode=False,
                            kernel_manager_class=quiet_kernel_manager(work / "kernel.log"),
                            # keep the kernel's start-up log (e.g. ipykernel's TCP notice) off the progress lines
                            extra_arguments=["--IPKernelApp.log_level=ERROR"])
    except PapermillExecutionError as e:
        if out_ipynb.exists():
            move_into_place(out_ipynb, failed)
        shutil.rmtree(work, ignore_errors=True)
        where = _cell_label(nb, e.source or "", e.cell_index)
        raise NotebookFailure(f"{source.name} failed in {where}\n  {e.ename}: {e.evalue}\n"
                              f"  the partial run is in {failed}; nothing was published (the notebook, figures "
                              "and records are as they were)") from None
    except DeadKernelError:
        if out_ipynb.exists():
            move_into_place(out_ipynb, failed)
        shutil.rmtree(work, ignore_errors=True)
        raise NotebookFailure(f"{source.name}: the kernel process died while a cell ran (killed from outside, e.g. "
                              f"for memory, or crashed); the partial run is in {failed}; nothing was published "
                              "(the notebook, figures and records are as they were)") from None
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    finally:
        if previous is None:
            os.environ.pop(STAGING_ENV, None)
        else:
            os.environ[STAGING_ENV] = previous
    _tidy_executed(out_ipynb, source, output, cwd)
    if output == source.with_suffix(".ipynb"):
        # the jupytext pair: the outputs were made from this source, so the .ipynb is not "more recent than the
        # .py" (JupyterLab's jupytext would refuse to open a pair whose .ipynb is newer and differs)
        st = source.stat()
        os.utime(out_ipynb, ns=(st.st_atime_ns, st.st_mtime_ns))
    return StagedRun(source, output, out_ipynb, [*staged_outputs(staging), (out_ipynb, output)], work)


def publish_runs(runs: list[StagedRun], root: Path, extra: list[tuple[Path, Path]] = (), removals=(),
                 overwrite: bool = False) -> None:
    """Publish the staged runs (and `extra` moves, e.g. the HTML report) together, or nothing
    (docgrad.publication.publish). A teaching record made with other settings than the one it would replace is
    refused unless overwrite. On a failure the staged files are kept and the error says where."""
    root = Path(root).resolve()
    for r in runs:                      # what the kernel wrote stays in the project; --output may lie anywhere
        for _, final in r.moves:
            if final != r.output and not final.resolve().is_relative_to(root):
                raise NotebookFailure(f"{r.source.name} wrote {final}, outside the project {root}; nothing was "
                                      f"published (its staged outputs are kept in {r.workdir})")
    try:
        publish([m for r in runs for m in r.moves] + list(extra), root,
                [*(p for r in runs for p in r.removals()), *removals],
                guard=None if overwrite else refuse_other_settings)
    except DocgradError as e:
        kept = ", ".join(str(r.workdir) for r in runs)
        raise NotebookFailure(f"{e}\n  nothing was published; the staged outputs are kept in {kept}") from None
    for r in runs:
        shutil.rmtree(r.workdir, ignore_errors=True)
        r.output.with_name(r.output.stem + ".failed.ipynb").unlink(missing_ok=True)


def refuse_other_settings(staged: Path, final: Path) -> None:
    """A record (a JSON with "format" and "settings", e.g. data/teaching/*.json) made with other settings than the
    one at `final` does not replace it: the committed record is what the page reads by default."""
    if final.suffix != ".json" or not final.exists():
        return
    try:
        old, new = json.loads(final.read_text()), json.loads(Path(staged).read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        return
    if not (isinstance(old, dict) and isinstance(new, dict) and "settings" in old and "settings" in new
            and old.get("format") == new.get("format")):
        return
    if old["settings"] != new["settings"]:
        a, b = old["settings"], new["settings"]
        differ = sorted(k for k in {*a, *b} if a.get(k) != b.get(k)) if isinstance(a, dict) and isinstance(b, dict) \
            else ["settings"]
        raise PublicationError(f"{final} holds a record made with other settings (differ in: {', '.join(differ)}); "
                               "it is not replaced without --overwrite")


def execute_notebook(source: str | Path, output: str | Path | None = None, parameters: dict | None = None,
                     cwd: str | Path | None = None, kernel_name: str = "python3", overwrite: bool = False) -> Path:
    """Execute a notebook (stage_notebook) and publish its notebook, figures, twin and records together, or nothing
    (docgrad.publication): a failed run never leaves a half-executed notebook or half-replaced figures."""
    run = stage_notebook(source, output, parameters, cwd, kernel_name, overwrite)
    root = Path(cwd) if cwd else project_root(Path(source).parent)
    publish_runs([run], root, overwrite=overwrite)
    return run.output


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


def run_notebooks(sources, cwd: str | Path | None = None, out=None, publish_each: bool = True) -> list[StagedRun]:
    """Execute notebooks in order, one progress line each (`[i/n] name ... ok 12.3 s`); stop at the first failure.
    publish_each: publish every page when it succeeds (else the caller publishes the returned runs together;
    a failure then discards the runs staged before it)."""
    import time

    out = out or sys.stdout
    done: list[StagedRun] = []
    try:
        for i, src in enumerate(sources, 1):
            print(f"[{i}/{len(sources)}] {src.stem} ...", end=" ", flush=True, file=out)
            t0 = time.perf_counter()
            try:
                run = stage_notebook(src, cwd=cwd)
                if publish_each:
                    publish_runs([run], Path(cwd) if cwd else project_root(src.parent))
            except NotebookError:
                print(f"FAILED after {time.perf_counter() - t0:.1f} s", file=out, flush=True)
                raise
            print(f"ok {time.perf_counter() - t0:.1f} s -> {run.output}", file=out, flush=True)
            done.append(run)
    except BaseException:
        if not publish_each:
            discard(done)
        raise
    return done


def discard(runs: list[StagedRun]) -> None:
    for r in runs:
        shutil.rmtree(r.workdir, ignore_errors=True)


def command_root(args) -> Path:
    """The project a command works on: --root, else the checkout above the current directory."""
    return Path(args.root).resolve() if getattr(args, "root", None) else project_root()


def report_problems(nb_dir: Path, root: Path, runs: list[StagedRun], html: bool) -> list[str]:
    """Why the pages of nb_dir (those just run as staged, the others as committed) cannot be published as one
    report: a page holding an error output; pages that read the same results directory with different files
    (their twins' "inputs_read"); with html, a page stale against its source. Empty: consistent."""
    staged = {r.source.stem: r for r in runs}
    problems, read_by_page = [], {}
    for src in find_notebooks(nb_dir):
        run = staged.get(src.stem)
        executed = run.executed if run else src.with_suffix(".ipynb")
        if html:
            problems += pair_differences(src, executed)
        if executed.exists():
            for i, cell in enumerate(_read_ipynb(executed).cells, 1):
                for o in cell.get("outputs", []):
                    if o.get("output_type") == "error":
                        problems.append(f"{src.stem}: cell {i} holds an error output ({o.get('ename')}: "
                                        f"{str(o.get('evalue'))[:120]})")
        twin = root / "figures" / f"{src.stem}.json"
        if run:
            twin = next((st for st, final in run.moves if final.resolve() == twin.resolve()), twin)
        try:
            read_by_page[src.stem] = json.loads(twin.read_text()).get("inputs_read") or {}
        except (OSError, ValueError, AttributeError):
            pass
    disagree = inputs_disagree(read_by_page)
    if disagree:
        problems += [f"pages read different results: {d}" for d in disagree]
        problems.append("execute them together so every page reads the same files: docgrad report")
    return problems


def cli_report(args) -> int:
    """`docgrad report`: execute notebooks (all, or --only NN), check that every page can stand in one report, build
    the HTML report, then publish the executed pages, their figures and the report together (docgrad.publication),
    or nothing. Exit 2 when what was asked is refused (an unknown page, no notebooks), 1 when a page fails or the
    report would be stale or inconsistent."""
    import tempfile

    root = command_root(args)
    nb_dir = Path(args.notebooks).resolve()       # the defaults lie under root; a path given is relative to cwd
    out = Path(args.out).resolve()
    runs: list[StagedRun] = []
    try:
        if (note := finish_interrupted(root)):
            print(f"docgrad report: {note}", file=sys.stderr)
        if not args.no_html:          # before any page runs: a report folder that cannot be written fails now
            blocked = next((p for p in (out, *out.parents) if p.exists() and not p.is_dir()), None)
            if blocked is not None:
                raise NotebookError(f"--out {args.out}: {blocked} is a file, not a directory; the HTML report is a "
                                    "folder (give a folder path)")
        sources = find_notebooks(nb_dir, args.only)
        if not sources:
            raise NotebookError(f"no notebooks (NN_name.py) in {nb_dir}")
        if not getattr(args, "no_execute", False):
            runs = run_notebooks(sources, cwd=root, publish_each=False)
        problems = report_problems(nb_dir, root, runs, html=not args.no_html)
        if problems:
            raise NotebookFailure("the report would not be one consistent report; nothing was published:\n  "
                                  + "\n  ".join(problems) + "\n  execute stale pages first: docgrad report "
                                  "--only NN (or docgrad report)")
        with tempfile.TemporaryDirectory(prefix="docgrad-report-") as html_dir:
            extra, removals = [], []
            if not args.no_html:       # built aside, published with the pages: never old and new pages mixed
                report.build_report(nb_dir, html_dir, executed={r.source.stem: r.executed for r in runs})
                made = sorted(Path(html_dir).iterdir())
                extra = [(f, out / f.name) for f in made]
                removals = [old for old in out.glob("*.html")
                            if is_page(old) and old.name not in {f.name for f in made}]
            publish_runs(runs, root, extra, removals)
    except NotebookError as e:
        discard(runs)
        print(f"docgrad report: {e}", file=sys.stderr)
        return 1 if isinstance(e, NotebookFailure) else 2
    except BaseException:
        discard(runs)
        raise
    if not args.no_html:
        print(f"report: {out / 'index.html'}")
    return 0


def cli_run(args) -> int:
    """`docgrad run NOTEBOOK -p name value ... [--list] [--output PATH]`. Exit 2 when what was asked is refused
    before any kernel starts (an unknown notebook or parameter, an --output that is not .ipynb), 1 when the page
    fails or its outputs cannot be published."""
    import time

    root = command_root(args)
    try:
        source = resolve_notebook(args.notebook, root / "notebooks")
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
        if (note := finish_interrupted(root)):
            print(f"docgrad run: {note}", file=sys.stderr)
        print(f"{source.stem} ...", end=" ", flush=True)
        t0 = time.perf_counter()
        try:
            path = execute_notebook(source, output=args.output, parameters=given, cwd=root,
                                    overwrite=getattr(args, "overwrite", False))
        except NotebookError:
            print(f"FAILED after {time.perf_counter() - t0:.1f} s", flush=True)
            raise
        print(f"ok {time.perf_counter() - t0:.1f} s -> {path}")
    except NotebookError as e:
        print(f"docgrad run: {e}", file=sys.stderr)
        return 1 if isinstance(e, NotebookFailure) else 2
    return 0


def pair_differences(source: str | Path, executed: str | Path | None = None) -> list[str]:
    """Differences between a notebook source (.py) and its executed twin (.ipynb, or `executed`: a staged run):
    missing file, different cell count, type or source, or an execution with non-default parameters (papermill
    records them; its `injected-parameters` cell itself is not compared). Empty list = in sync."""
    import jupytext

    source = Path(source)
    twin = Path(executed) if executed is not None else source.with_suffix(".ipynb")
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
