"""What `docgrad measure` will do with each cell, decided before any probe and printed (`--plan` stops there).

A cell is, in this order: already measured (the very cell is in the measurement's results folder); copied (the
same cell, every recorded setting equal, is under --reuse-from: the study's committed cells by default); a subset
(a committed cell of the same settings over more documents: its rows, never probed again); or probed, with its
chunks, the minutes they should take at the seconds per chunk measured for this model on this device type (the
`timings` of the fastest earlier result file of the model, scaled by chunk length), and the disk and memory it
needs.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from docgrad.errors import DocgradError
from docgrad.fileio import shown_path
from docgrad.measure.probe_config import ProbeConfig
from docgrad.measure.reuse import agreed, copy_cell, covering_file, same_cell_files, subset_cell, why_not
from docgrad.results.format import find_results, result_stem
from docgrad.runtime.cli import build_parser, resolve_default_paths
from docgrad.runtime.probe_command import planned_config, resource_needs

MEASURED, COPIED, SUBSET, PROBED = "measured", "copied", "subset", "probed"


@dataclass(frozen=True)
class CellPlan:
    """One cell of a measurement and what will be done with it (module docstring)."""

    config: ProbeConfig
    action: str                             # MEASURED, COPIED, SUBSET or PROBED
    files: tuple[Path, ...] = ()            # what is copied, or the covering cell
    why: str = ""                           # why a file of the same name is not reused
    argv: list[str] = field(default_factory=list)


def plan_cell(probe: list[str], results: Path, source: Path, no_reuse: bool = False) -> CellPlan:
    """What measure does with the cell `docgrad probe <probe>` would write into `results` (module docstring). A
    file of that name in `results` holding another cell is refused (DocgradError naming what differs; the file is
    kept): it is never read as this one."""
    config = planned_config(resolve_default_paths(build_parser().parse_args(probe)))
    fp = config.fingerprint()
    stem = result_stem(config.model, config.revision, config.corpus, config.chunk, config.docs, config.context,
                       config.window, config.dtype, config.regime)
    if same_cell_files(results, fp):
        return CellPlan(config, MEASURED, argv=probe)
    differs = why_not(results, fp, stem)
    if differs:
        raise DocgradError(f"{shown_path(results / stem)}.npz holds another {config.corpus} cell than this run would "
                           f"measure (it differs in {differs}); it is kept: measure into another --out, or delete "
                           "its .npz and .json to measure it again")
    if no_reuse or source.resolve() == results.resolve():
        return CellPlan(config, PROBED, argv=probe)
    found = same_cell_files(source, fp)
    if found is not None:
        return CellPlan(config, COPIED, tuple(found), argv=probe)
    covering = covering_file(source, fp)
    if covering is not None:
        return CellPlan(config, SUBSET, (covering,), argv=probe)
    differs = why_not(source, fp, stem)
    return CellPlan(config, PROBED, why=f"{shown_path(source / stem)}.npz is not reused, it differs from this probe "
                    f"in {differs}" if differs else "", argv=probe)


def seconds_per_chunk(config: ProbeConfig, folders) -> tuple[float, Path] | None:
    """(seconds of forward, backward and sketch per chunk, the file they were measured in) from the fastest result
    file of the same model, revision, context and dtype on the same device type under `folders` (the speed of
    free cores; busy_note says when they are not), scaled to this chunk length
    (the time of a chunk grows about linearly with its tokens); None when none records it."""
    best = None
    for folder in folders:
        for npz in find_results(Path(folder)) if Path(folder).is_dir() else []:
            try:
                meta = json.loads(npz.with_suffix(".json").read_text())
                a, t = meta["args"], meta["timings"]
                same = ((a["model"], str(a["revision"]), a.get("context") or "standalone", a.get("dtype") or "float32")
                        == (config.model, str(config.revision), config.context, config.dtype))
                if not same or str(meta["device"]).split(":")[0] != config.device_type:
                    continue
                s = (t["forward_backward_per_chunk_s"] + t["sketch_per_chunk_s"]) * config.chunk / int(a["chunk"])
            except (OSError, ValueError, KeyError, TypeError):
                continue
            if best is None or s < best[0]:
                best = (float(s), npz)
    return best


def busy_note(load: float | None = None, cores: int | None = None) -> str:
    """', on cores busy now (load 5.2 on 2): expect longer' when the 1-minute load average exceeds the cores; the
    seconds a chunk were measured on cores as free as they were then."""
    load = os.getloadavg()[0] if load is None else load
    cores = os.cpu_count() or 1 if cores is None else cores
    return f", on cores busy now (load {load:.1f} on {cores}): expect longer" if load > cores else ""


def plan_line(p: CellPlan, timing: tuple[float, Path] | None) -> str:
    """One line of the plan: the cell and what is done with it, why, and for a probe its size, time and needs."""
    c = p.config
    a, b = c.docs
    cell = f"{c.corpus} documents {a}-{b - 1} ({c.chunks_per_document} chunks of {c.chunk} tokens each)"
    if p.action == MEASURED:
        return f"plan: {cell}: already measured in this folder"
    if p.action == COPIED:
        return f"plan: {cell}: reused, copied from {', '.join(shown_path(f) for f in p.files)} (the same cell)"
    if p.action == SUBSET:
        return f"plan: {cell}: reused, its rows of {shown_path(p.files[0])} (the same cell over more documents)"
    need = resource_needs(c)
    gib = lambda x: f"{x / 2**30:.1f} GiB"
    when = (f"about {need['chunks'] * timing[0] / 60:.0f} min at {timing[0]:.1f} s a chunk (measured in "
            f"{shown_path(timing[1])}){busy_note()}" if timing else
            f"no timing of {c.model} on {c.device_type} yet: the progress bar gives one after the first chunks")
    return (f"plan: {cell}: probed, {need['chunks']} forward and backward passes on {c.device_type}, {when}; "
            f"{gib(need['disk'])} of disk, {gib(need['memory'])} of memory"
            + (f" ({p.why})" if p.why else ""))


def carry_out(p: CellPlan, results: Path, source: Path) -> bool:
    """Copy or subset a reused cell into `results`, one line on stderr saying which files and why; True when the
    cell is there now (nothing left to probe)."""
    fp = p.config.fingerprint()
    if p.action == MEASURED:
        return True
    if p.action == SUBSET:
        made = subset_cell(p.files[0], p.config.docs, source, results)
        a, b = p.config.docs
        print(f"measure: {fp['corpus']} reused documents {a}-{b - 1} of {shown_path(p.files[0])} (its rows written to "
              f"{shown_path(made)}; --no-reuse probes them afresh): the same cell over more documents, its json "
              "records the same settings", file=sys.stderr)
        return True
    if p.action == COPIED:
        copy_cell(list(p.files), source, results)
        print(f"measure: {fp['corpus']} reused {', '.join(shown_path(f) for f in p.files)} (copied into "
              f"{shown_path(results)}; --no-reuse probes it afresh): the same cell as this probe, its json records "
              f"the same {agreed(fp)}", file=sys.stderr)
        return True
    if p.why:
        print(f"measure: {p.why}", file=sys.stderr)
    return False


def reuse(probe: list[str], results: Path, source: Path) -> bool:
    """Whether the cell `docgrad probe <probe>` would write is in `results` now, copied or subset from `source`
    when the same cell (or one over more documents) is there (plan_cell, carry_out)."""
    return carry_out(plan_cell(probe, results, source), results, source)
