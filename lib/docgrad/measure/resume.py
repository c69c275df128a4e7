"""A probe run's state on disk, so that a killed run resumes where it stopped: the finished documents and the
cell's lock. Definitions: docs/methods.md#per-chunk-gradients.

Each finished document is saved in `<out dir>/.partial/<stem>/doc_NNNNN.npz` (sketches, exact norms, losses,
timings, and the run's fingerprint, docgrad.measure.probe_config), next to config.json (the fingerprint). A
restarted run with the same configuration skips finished documents; state of another configuration is refused,
naming the file and the differing keys. overwrite=True (--overwrite) deletes the state first. The final file is
assembled from the per-document state in document order, the same way in every run, so an interrupted-and-
resumed run and an uninterrupted one write identical arrays. The state is removed once the result is written.
While a run works on a cell it holds `<out dir>/.partial/<stem>.lock` (pid, host, time), so a second run on the
cell is refused.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from docgrad.fileio import atomic_write_json, atomic_write_npz
from docgrad.measure.probe_config import DocSpan, ProbeConfig, ProbeError, differences


def partial_dir(out_npz: Path) -> Path:
    """Where per-document state of a run lives: <dir of result>/.partial/<stem>/."""
    out_npz = Path(out_npz)
    return out_npz.parent / ".partial" / out_npz.stem

def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True

class PartialState:
    """The finished documents of one run: <directory>/doc_NNNNN.npz, each carrying the run's fingerprint, and
    <directory>/config.json; the cell's lock is <directory>.lock."""

    def __init__(self, directory: Path, config: ProbeConfig):
        self.dir = Path(directory)
        self.lock_path = self.dir.parent / f"{self.dir.name}.lock"
        self.fingerprint = config.fingerprint()
        self._fp_json = json.dumps(self.fingerprint, sort_keys=True)

    def path(self, doc: int) -> Path:
        return self.dir / f"doc_{doc:05d}.npz"

    def has(self, doc: int) -> bool:
        return self.path(doc).exists()

    def check(self) -> None:
        """Refuse a directory holding another configuration's state (config.json differs)."""
        cfg = self.dir / "config.json"
        if not cfg.exists():
            return
        try:
            old = json.loads(cfg.read_text())
        except (OSError, ValueError) as e:
            raise ProbeError(f"{cfg}: unreadable ({e}); delete {self.dir} to start this run over") from e
        if old != self.fingerprint:
            raise ProbeError(f"{self.dir}: partial state of a run with different arguments "
                             f"({differences(old, self.fingerprint)}); rerun with the same arguments to resume "
                             "it, or delete that directory (or pass --overwrite) to start over")

    def start(self) -> None:
        """Check, then record this run's fingerprint (rank 0, before any document)."""
        self.check()
        self.dir.mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.dir / "config.json", self.fingerprint)

    def save(self, doc: int, state: dict) -> None:
        atomic_write_npz(self.path(doc), {**state, "fingerprint": np.str_(self._fp_json)})

    def load(self, span: DocSpan, arrays: bool = True) -> dict:
        """One document's state, refused unless it was made for this span under this fingerprint.
        arrays=False reads only the small fields (a check before resuming)."""
        path = self.path(span.doc)
        small = ("doc", "sha256", "loss", "fingerprint")
        try:
            with np.load(path, allow_pickle=False) as z:
                state = {k: z[k] for k in (z.files if arrays else [k for k in small if k in z.files])}
        except Exception as e:  # noqa: BLE001 - any unreadable state is reported with the file named
            raise ProbeError(f"{path}: unreadable partial state ({e}); delete this file to recompute document "
                             f"{span.doc}") from e
        if "fingerprint" not in state:
            raise ProbeError(f"{path}: partial state without a fingerprint (written by an older probe); delete "
                             f"{self.dir} (or pass --overwrite) to start over")
        fp = str(state["fingerprint"])
        if fp != self._fp_json:
            try:
                diff = differences(json.loads(fp), self.fingerprint)
            except ValueError:
                diff = "fingerprint unreadable"
            raise ProbeError(f"{path}: document {span.doc} was computed with other settings ({diff}); rerun with "
                             f"those settings to resume, or delete {self.dir} (or pass --overwrite) to start over")
        m = self.fingerprint["chunks_per_document"]
        if int(state["doc"]) != span.doc or str(state["sha256"]) != span.sha256 or state["loss"].shape != (m,):
            raise ProbeError(f"{path}: partial state does not belong to document {span.doc} (sha256 "
                             f"{span.sha256[:12]}..) with {m} chunks; delete {self.dir} to start this run again")
        return state

    def clear(self, ignore_errors: bool = False) -> None:
        """Delete the documents' state (not the lock)."""
        if self.dir.exists():
            shutil.rmtree(self.dir, ignore_errors=ignore_errors)

    @contextmanager
    def lock(self):
        """Hold the cell's lock file for the block: created with O_CREAT|O_EXCL, so one run per cell. A lock
        whose pid no longer exists on this host is stale and taken over."""
        self.lock_path.parent.mkdir(parents=True, exist_ok=True)
        me = {"pid": os.getpid(), "host": socket.gethostname(),
              "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "command": " ".join(sys.argv)}
        for attempt in (0, 1):
            try:
                fd = os.open(self.lock_path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
                break
            except FileExistsError:
                holder = self._holder()
                pid = holder.get("pid")
                stale = (attempt == 0 and holder.get("host") == me["host"] and isinstance(pid, int) and pid > 0
                         and not _pid_alive(pid))
                if not stale:
                    raise ProbeError(
                        f"{self.lock_path}: another probe holds this cell (pid {pid} on {holder.get('host')}, "
                        f"since {holder.get('started_utc')}); wait for it to finish, or, if that process is gone, "
                        f"delete {self.lock_path} (a lock whose pid no longer exists on this host is taken over "
                        "automatically)") from None
                print(f"{self.lock_path}: taking over a stale lock (pid {pid} no longer exists on {me['host']})",
                      file=sys.stderr)
                self.lock_path.unlink(missing_ok=True)
        with os.fdopen(fd, "w") as f:
            json.dump(me, f)
        try:
            yield self
        finally:
            if self._holder().get("pid") == me["pid"]:
                self.lock_path.unlink(missing_ok=True)

    def _holder(self) -> dict:
        try:
            h = json.loads(self.lock_path.read_text())
            return h if isinstance(h, dict) else {}
        except (OSError, ValueError):
            return {}
