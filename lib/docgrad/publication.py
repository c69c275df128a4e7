"""One publication rule for every output a command makes: staged, then published together, or not at all.

A page run under `docgrad run` / `docgrad report` writes its figures, its JSON twin and any teaching record into a
staging directory (`staged_path`); the runner adds the executed notebook, `docgrad report` adds every page and the
HTML report. `publish(moves)` then makes them visible in three steps:

  1. every staged file is copied beside its destination as `.<name>.docgrad-new`. A full disk, an unwritable folder
     or a refusal (`guard`) fails here, before any destination is touched, and the copies are removed;
  2. the journal `<root>/.docgrad-publishing.json` lists the renames and removals still to do;
  3. with SIGINT and SIGTERM held back, every copy is renamed over its destination and the files the run replaces
     (a page's figures it no longer makes) are removed; then the journal is deleted.

A rename within one file system does not need space, so step 3 can be cut short only by a kill -9 or a machine
stop. The next run or report then finds the journal and completes it (`finish_interrupted`) before doing
anything else, so a reader never keeps a mix of old and new files.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterable

from docgrad.errors import DocgradError
from docgrad.fileio import file_sha256

# Set by the runner: pages then write their files into this staging directory (see staged_path).
STAGING_ENV = "DOCGRAD_STAGING"
STAGED_LIST = "staged.jsonl"
JOURNAL = ".docgrad-publishing.json"
NEW_SUFFIX = ".docgrad-new"


class PublicationError(DocgradError):
    """Outputs could not be published; nothing was (the message says why and where the staged files are)."""


def staged_path(path: str | Path) -> Path:
    """Where a page should write `path`: `path` itself, or, under the runner, a file in its staging directory
    (recorded with its destination, see staged_outputs)."""
    path = Path(path)
    staging = os.environ.get(STAGING_ENV)
    if not staging:
        return path
    staging = Path(staging)
    record = staging / STAGED_LIST
    n = len(record.read_text().splitlines()) if record.exists() else 0
    staged = staging / f"{n:04d}_{path.name}"
    with open(record, "a") as f:
        f.write(json.dumps({"staged": str(staged), "final": str(path.resolve())}) + "\n")
    return staged


def staged_outputs(staging: str | Path) -> list[tuple[Path, Path]]:
    """(staged file, destination) of everything a run staged, in order (a later write of the same destination
    wins, as it would have without staging)."""
    record = Path(staging) / STAGED_LIST
    if not record.exists():
        return []
    moves = [json.loads(line) for line in record.read_text().splitlines()]
    last = {m["final"]: m["staged"] for m in moves}
    return [(Path(st), Path(final)) for final, st in last.items()]


def _new_copy(final: Path) -> Path:
    return final.with_name(f".{final.name}{NEW_SUFFIX}")


@contextmanager
def _signals_held():
    """SIGINT and SIGTERM that arrive inside the block take effect after it (re-raised on exit). Python handlers
    rather than a thread signal mask: any thread of the process may receive the signal. Main thread only (signal
    handlers can be set nowhere else); elsewhere a no-op."""
    pending: list[int] = []
    try:
        old = {s: signal.signal(s, lambda signum, frame: pending.append(signum))
               for s in (signal.SIGINT, signal.SIGTERM)}
    except ValueError:
        old = {}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
        for s in pending:
            signal.raise_signal(s)


def publish(moves: Iterable[tuple[Path, Path]], journal_dir: str | Path, removals: Iterable[Path] = (),
            guard: Callable[[Path, Path], None] | None = None) -> list[Path]:
    """Publish every (staged, final) of `moves` and remove `removals`, all together or none (module docstring).

    The journal is written in `journal_dir` (the project root). guard(staged, final), called for each move before
    anything is touched, raises to refuse a destination (e.g. a record made with other settings). Returns the
    destinations."""
    moves = [(Path(s), Path(f)) for s, f in moves]
    removals = [Path(r) for r in removals if Path(r) not in {f for _, f in moves}]
    for staged, final in moves:
        if guard is not None:
            guard(staged, final)
    copies = []
    try:
        for staged, final in moves:                               # step 1: the only step that needs space
            final.parent.mkdir(parents=True, exist_ok=True)
            copy = _new_copy(final)
            copies.append(copy)
            shutil.copyfile(staged, copy)
            os.chmod(copy, 0o644)
            st = os.stat(staged)                                  # keep its time (a jupytext pair's .ipynb)
            os.utime(copy, ns=(st.st_atime_ns, st.st_mtime_ns))
        journal = Path(journal_dir) / JOURNAL
        _write_journal(journal, [(c, f) for c, (_, f) in zip(copies, moves)], removals, journal_dir)   # step 2
    except BaseException as e:
        for c in copies:
            c.unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise PublicationError(f"could not stage {len(moves)} file(s) beside their destinations ({e}); "
                                   "nothing was published, every file is as it was") from None
        raise
    with _signals_held():                                        # step 3
        _complete(journal)
    return [f for _, f in moves]


def _write_journal(journal: Path, renames: list[tuple[Path, Path]], removals: list[Path], root) -> None:
    """The journal names its root and, per rename, the sha256 of the copy: a copy found missing later was renamed
    already only if its destination holds those bytes."""
    tmp = journal.with_name(journal.name + ".tmp")
    tmp.write_text(json.dumps({"root": str(Path(root).resolve()),
                               "renames": [[str(c), str(f), file_sha256(c)] for c, f in renames],
                               "removals": [str(r) for r in removals]}, indent=1))
    with open(tmp, "rb") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, journal)


def _inside(path: str, root: Path) -> bool:
    """Whether `path` lies inside `root`, its folders' links resolved (a link cannot lead out of the root)."""
    p = Path(path)
    return Path(os.path.realpath(p.parent)).is_relative_to(root) and p.name not in ("", ".", "..")


def check_journal(journal: Path, todo: dict) -> None:
    """Refuse a journal (PublicationError, one line, nothing touched) that is not this root's own or not whole:
    another root, a removal outside the root, a copy that is not its destination's `.<name>.docgrad-new` twin,
    or a copy missing while its destination does not hold the copy's bytes (it was never renamed: completing
    would publish half). A destination may lie outside the root (`run --output`, `report --out` elsewhere): it is
    only ever replaced by the staged twin that publish left beside it."""
    root = journal.parent.resolve()
    if not isinstance(todo, dict) or todo.get("root") != str(root):
        raise PublicationError(f"{journal}: names the root {todo.get('root') if isinstance(todo, dict) else None!r}, "
                               f"not {root}; it is another checkout's or not a docgrad journal, and nothing was "
                               "touched: delete it")
    for row in todo["renames"]:
        copy, final, digest = row
        if Path(copy) != _new_copy(Path(final)):
            raise PublicationError(f"{journal}: lists {final} from {copy}, which is not its staged twin "
                                   f"{_new_copy(Path(final)).name}; nothing was touched: delete the journal")
        if not Path(copy).exists() and not (Path(final).is_file() and file_sha256(Path(final)) == digest):
            raise PublicationError(f"{journal}: the staged copy {copy} is missing and {final} is not it; completing "
                                   "would publish half of a run, so nothing was touched: run the command again, "
                                   "then delete the journal")
    bad = [r for r in todo["removals"] if not _inside(r, root)]
    if bad:
        raise PublicationError(f"{journal}: lists removals outside {root} ({bad[0]}); nothing was touched: delete it")


def _complete(journal: Path) -> int:
    """Do what the journal lists (renames whose copy still exists, removals), then delete it; returns the renames.
    The journal is checked first (check_journal)."""
    todo = json.loads(journal.read_text())
    check_journal(journal, todo)
    done = 0
    for copy, final, _ in todo["renames"]:
        if Path(copy).exists():
            os.replace(copy, final)
            done += 1
    for r in todo["removals"]:
        Path(r).unlink(missing_ok=True)
    journal.unlink()
    return done


def finish_interrupted(root: str | Path) -> str | None:
    """Complete a publication that was cut short in its rename step (the journal is still there); returns a line
    saying so, or None when there was none. Commands that publish call it first."""
    journal = Path(root) / JOURNAL
    if not journal.exists():
        return None
    try:
        n = _complete(journal)
    except PublicationError:
        raise
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise PublicationError(f"{journal}: an interrupted publication could not be completed ({e}); "
                               "inspect the files it lists, then delete it") from None
    return f"completed an interrupted publication ({n} file(s) renamed, listed in {journal.name})"


# --- what a page read ------------------------------------------------------------------------------
# {results directory (resolved): {"files": n, "sha256": digest of the files' paths and bytes}} read in this process
# (results.study.Study.read notes it); a page's JSON twin records it (runtime.pages.save_numbers), and `docgrad
# report` refuses pages that read the same directory with different files (a shard that landed between two pages).
INPUTS_READ: dict[str, dict] = {}


def note_inputs(directory: str | Path, files: int, digest: str) -> None:
    INPUTS_READ[str(Path(directory).resolve())] = {"files": int(files), "sha256": digest}


def inputs_disagree(read_by_page: dict[str, dict]) -> list[str]:
    """One line per directory that two pages read with different files: read_by_page is {page: {directory:
    {"files", "sha256"}}} (a twin's "inputs_read")."""
    seen: dict[str, tuple[str, dict]] = {}
    lines = []
    for page, read in read_by_page.items():
        for directory, rec in (read or {}).items():
            if directory not in seen:
                seen[directory] = (page, rec)
            elif seen[directory][1].get("sha256") != rec.get("sha256"):
                first, other = seen[directory]
                lines.append(f"{page} read {directory} as {rec.get('files')} file(s) ({str(rec.get('sha256'))[:12]}), "
                             f"{first} as {other.get('files')} ({str(other.get('sha256'))[:12]})")
    return lines
