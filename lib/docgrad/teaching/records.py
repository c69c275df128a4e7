"""Committed records of the teaching pages' expensive real runs (the Trainer step, the two-process torchrun step,
the fine-tuning drift run), so a page re-executes in class in seconds and still shows measured numbers.

    result, provenance = recorded("01b_trainer", settings, compute, rerun=False)

reads data/teaching/<name>.json when its settings are exactly `settings`; otherwise (no record, other settings,
or rerun=True) it runs `compute()` live. With rerun=True it also writes the record, with its provenance: the
settings, the UTC date, the versions of torch and transformers, and the command that makes it
(`docgrad run 01b -p rerun True`). A record is never read for settings it was not made with.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any, Callable

from docgrad.fileio import atomic_write_json, package_versions, project_root, to_jsonable
from docgrad.publication import staged_path

RECORDS_DIR = Path("data/teaching")
FORMAT = "docgrad-teaching-record/1"


def record_path(name: str, directory: Path | None = None) -> Path:
    return (directory if directory is not None else project_root() / RECORDS_DIR) / f"{name}.json"


def read_record(name: str, settings: dict, directory: Path | None = None) -> dict | None:
    """The record of `name` made with exactly these settings, or None (missing, another format, other settings)."""
    path = record_path(name, directory)
    try:
        rec = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if rec.get("format") != FORMAT or rec.get("settings") != to_jsonable(settings):
        return None
    return rec


def recorded(name: str, settings: dict, compute: Callable[[], Any], rerun: bool = False,
             command: str = "docgrad run 01b -p rerun True", directory: Path | None = None) -> tuple[Any, dict]:
    """(result, provenance): from the record when it matches and rerun is False, else computed now (and, with
    rerun, written as the new record). provenance: source ('record' or 'computed now'), date, versions, and
    `command`, the one that recomputes it now (a record made by a page since split or renamed names the old one)."""
    if not rerun:
        rec = read_record(name, settings, directory)
        if rec is not None:
            return rec["result"], {k: rec[k] for k in ("date", "versions")} | {"command": command, "source": "record"}
    result = to_jsonable(compute())
    prov = {"date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "versions": package_versions(["torch", "transformers"]), "command": command}
    if rerun:      # under `docgrad run`, staged: published with the page's other outputs, or not at all
        atomic_write_json(staged_path(record_path(name, directory)), {"format": FORMAT, "name": name,
                                                         "settings": to_jsonable(settings), **prov, "result": result})
    return result, prov | {"source": "computed now"}


def provenance_line(what: str, prov: dict) -> str:
    """One line a page shows under a recorded run: where its numbers come from."""
    v = prov["versions"]
    how = ("from the committed record" if prov["source"] == "record" else "computed in this run")
    return (f"*{what}: {how}, made {prov['date']} with torch {v.get('torch')} and transformers "
            f"{v.get('transformers')}; `{prov['command']}` recomputes it.*")
