"""Small file utilities: atomic writes (a reader never sees a partial file), JSON conversion, versions.

Every output of the project goes through `atomic_write_bytes`: the data is written to a temporary file in the
destination's directory, flushed, and renamed over the destination, so an interrupted run leaves either the
old file or the new one, never half of one. `move_into_place` does the same for a file built elsewhere
(e.g. a temporary directory on another file system, where a plain rename fails with EXDEV).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from docgrad.errors import DocgradError


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write to a temporary file in the same directory, then rename: readers never see a partial file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; results are ordinary shared files
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes, read in 1 MiB blocks."""
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def replace_together(files: list[tuple[Path, bytes]]) -> None:
    """Write every (path, bytes) beside its path first (each fsynced), then rename them all into place: a write
    that fails (a full disk) leaves every path as it was, its temporary files removed; renames need no space."""
    staged = []
    try:
        for path, data in files:
            path = Path(path)
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            staged.append((Path(tmp), path))
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, 0o644)
    except BaseException:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
        raise
    for tmp, path in staged:
        os.replace(tmp, path)


@contextmanager
def locked(path: Path):
    """Hold an exclusive lock on `path`'s lock file (.<name>.lock beside it) for the block; another process asking
    for it waits (said once on stderr). The kernel releases it when a holder dies (flock)."""
    import fcntl

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(f".{path.name}.lock"), "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"{path}: another command is writing it; waiting for it to finish", file=sys.stderr)
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def atomic_write_json(path: Path, obj) -> None:
    atomic_write_bytes(Path(path), (json.dumps(obj, indent=1, sort_keys=False) + "\n").encode())


def atomic_write_npz(path: Path, arrays: dict, compressed: bool = False) -> None:
    """np.savez(_compressed) of `arrays`, written atomically (built in memory, then atomic_write_bytes)."""
    buf = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buf, **arrays)
    atomic_write_bytes(path, buf.getvalue())


def move_into_place(src: Path, dst: Path) -> None:
    """Move a finished file to `dst` atomically, also across file systems (copy beside dst, then rename)."""
    src, dst = Path(src), Path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.replace(src, dst)
        return
    except OSError as e:
        import errno

        if e.errno != errno.EXDEV:
            raise
    fd, tmp = tempfile.mkstemp(dir=dst.parent, prefix=f".{dst.name}.", suffix=".tmp")
    os.close(fd)
    try:
        shutil.copyfile(src, tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, dst)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    Path(src).unlink(missing_ok=True)


def to_jsonable(x):
    """numpy scalars/arrays -> Python numbers/lists, dict keys -> str, NaN -> null (so the file stays valid JSON).
    Objects with a to_json() method (the typed results) are converted through it."""
    if hasattr(x, "to_json") and callable(x.to_json):
        return to_jsonable(x.to_json())
    if isinstance(x, dict):
        return {str(k): to_jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [to_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return to_jsonable(x.tolist())
    if isinstance(x, np.bool_):
        return bool(x)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return None if x != x else float(x)
    return x


def package_versions(dists, missing=None) -> dict:
    """{"python": ..., "platform": ..., dist: installed version (or `missing`)} for result and page metadata."""
    import importlib.metadata as md
    import platform
    import sys

    v = {"python": sys.version.split()[0], "platform": platform.platform()}
    for dist in dists:
        try:
            v[dist] = md.version(dist)
        except md.PackageNotFoundError:
            v[dist] = missing
    return v


def project_root(start: Path | None = None) -> Path:
    """The project root: the nearest directory above `start` (default: cwd) holding pyproject.toml and
    notebooks/, else the checkout this package is installed from (editable install)."""
    here = Path(start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if (d / "pyproject.toml").exists() and (d / "notebooks").is_dir():
            return d
    d = Path(__file__).resolve().parents[2]
    if (d / "pyproject.toml").exists():
        return d
    raise DocgradError(f"no docgrad project root (pyproject.toml + notebooks/) above {here}; pass --root")


def check_output_file(path, option: str, earlier_output=None, overwrite: bool = False) -> Path:
    """An output file path that can be written: not a directory, and no regular file where a parent
    directory must be. Checked before any work starts, so a long run does not fail at its last step.

    earlier_output: a predicate; an existing file it does not recognise as an earlier output of the same command
    (a result file, a source, another page's notebook, the README) is refused unless overwrite=True."""
    path = Path(path)
    if path.is_dir():
        raise DocgradError(f"{option} {path} is a directory; give a file path")
    if earlier_output is not None and path.exists() and not overwrite and not earlier_output(path):
        raise DocgradError(f"{option} {path} exists and is not an earlier output of this command: it would be "
                           "overwritten; choose another path, or pass --overwrite to replace it")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise DocgradError(f"{option} {path}: {parent} is a file, not a directory")
            if not os.access(parent, os.W_OK):
                raise DocgradError(f"{option} {path}: directory {parent} is not writable")
            break
    return path


def inside(path, directory, what: str) -> Path:
    """`path` resolved, refused unless it lies inside `directory` (no '..' or absolute parts escaping it)."""
    p, d = Path(path).resolve(), Path(directory).resolve()
    if not p.is_relative_to(d):
        raise DocgradError(f"{what}: {path} would be written outside {directory}")
    return p


def shown_path(path, root=None) -> str:
    """`path` relative to `root` (default: the project root) when inside it, else absolute: how paths are
    recorded in metadata, so files written on two machines do not differ by where the checkout lives."""
    p = Path(path).resolve()
    r = Path(root).resolve() if root is not None else project_root()
    return str(p.relative_to(r)) if p.is_relative_to(r) else str(p)


def json_with_keys(path, keys) -> bool:
    """Whether `path` is a JSON object with all of `keys` (how a command recognises its own earlier output)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return isinstance(data, dict) and all(k in data for k in keys)


def as_ranges(numbers) -> str:
    """Sorted integers as ranges: [0, 1, 2, 5, 7, 8] -> '0-2, 5, 7-8' (a message names 352 documents in a line)."""
    out, run = [], []
    for n in sorted(set(int(x) for x in numbers)):
        if run and n == run[-1] + 1:
            run.append(n)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [n]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ", ".join(out)
