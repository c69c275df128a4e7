"""`docgrad learning`: the training test's runs (docs/methods.md, "Does R predict learning?"), resumable.

    docgrad learning --pilot                       # seconds a step of the slowest and fastest arms; T and E to set
    docgrad learning --steps T --eval-every E      # every run of the ladder, each one JSON file under --out
    docgrad learning --steps T --probe             # R of the probed run's checkpoints: <out>/R_<CORPUS>.json

Each run writes <out>/<CORPUS>_<arm>_b<b>_s<seed>.json when it finishes (atomically); a run whose file holds the
same configuration is skipped, one whose file holds another is refused (the file is kept). The shuffled b = 32
run of seed 0 saves its model at steps T/10, T/2 and T under <out>/checkpoints/ (local model folders, git-ignored),
which --probe measures (measure.checkpoint_probe: the probe's kernel on the documents' ids mapped through the
checkpoint's vocabulary; result files under <out>/probe/, git-ignored, regenerated from the checkpoints) and reads
into <out>/R_<CORPUS>.json (results.learning.checkpoint_R), the file page 07 reads.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from docgrad.corpora import build as corpora
from docgrad.errors import DocgradError
from docgrad.fileio import atomic_write_json, project_root, shown_path
from docgrad.measure.checkpoint_probe import probe_checkpoint
from docgrad.measure.learning import (CONTIGUOUS, HELD_OUT_DOCS, SHUFFLED, LearningData, RunConfig, code_sha256,
                                      RunRecord, data_sha256, held_out_loss, make_model, train_run)
from docgrad.results import learning as reading
from docgrad.results.cells import load_cells

LADDER = (2, 4, 8, 16, 32)          # shuffled chunks per step
CONTIGUOUS_B = 32                   # the contiguous arm: one aligned 4,096-token block of 128-token chunks
PROBED_RUN = (SHUFFLED, 32, 0)      # the run whose checkpoints give R (arm, b, seed)
PILOT_STEPS = 30
PROBE_DOCS = (0, 16)                # training documents the checkpoints are probed on
PROBE_WINDOW = 4096                 # R(W) at the contiguous arm's block, W = 32 x 128
PROBE_RESAMPLES, PROBE_SEED = 2000, 20261207


def ladder(corpus: str, seeds, steps: int, eval_every: int) -> list[RunConfig]:
    """Every run of one corpus: the shuffled ladder and the contiguous arm, per seed; the probed run carries its
    checkpoints (T/10, T/2, T)."""
    runs = []
    for seed in seeds:
        for arm, b in [*((SHUFFLED, b) for b in LADDER), (CONTIGUOUS, CONTIGUOUS_B)]:
            marks = (steps // 10, steps // 2, steps) if (arm, b, seed) == PROBED_RUN else ()
            runs.append(RunConfig(corpus, arm, b, seed, steps, eval_every, checkpoints=marks))
    return runs


def corpus_data(corpus: str, manifest, cache, chunk: int) -> LearningData:
    """The corpus's committed spans (documents 0-47) under a vocabulary of their own."""
    spans = corpora.load_spans(corpus, manifest, cache)
    if len(spans) < HELD_OUT_DOCS[1]:
        raise DocgradError(f"{corpus}: {len(spans)} documents in {manifest}; the training test needs "
                           f"{HELD_OUT_DOCS[1]} (0-39 train, 40-47 held out): `docgrad corpora build --documents 48`")
    return LearningData.from_spans([s.tokens for s in spans], chunk)


def done(path: Path, config: RunConfig) -> bool:
    """Whether `path` holds this run finished; a file holding another configuration is refused."""
    if not path.exists():
        return False
    held = json.loads(path.read_text()).get("config")
    if held != json.loads(json.dumps(asdict(config))):
        raise DocgradError(f"{shown_path(path)} holds another run's configuration than this one; it is kept: move it "
                           "away, or run with the settings it records")
    return True


def run_one(config: RunConfig, data: LearningData, out: Path) -> dict:
    """One run, resumable from out/.partial/<name>.pt, as the record written to out/<name>.json: the run's record
    with the data's and the code's sha256, the versions and threads it ran with."""
    state = out / ".partial" / f"{config.name}.pt"
    with tqdm(total=config.steps, desc=config.name, unit="step", file=sys.stderr, dynamic_ncols=True) as bar:
        def progress(step, held):
            bar.n = step
            bar.set_postfix(held_out=f"{held:.3f}")
            bar.refresh()
        rec = train_run(config, data, out / "checkpoints", progress, state_path=state)
    state.unlink(missing_ok=True)
    return {**asdict(rec), "data_sha256": data_sha256(data), "code_sha256": code_sha256(),
            "torch": torch.__version__, "torch_threads": torch.get_num_threads()}


def check_arguments(args, root: Path) -> tuple[list[str], list[int], Path]:
    """(corpora, seeds, out), or one DocgradError naming the option: seeds are non-negative integers, T and E
    positive with E <= T, and --out inside the project only under data/learning (never over committed pages)."""
    corpora_names = [c.strip().upper() for c in args.corpora.split(",") if c.strip()]
    try:
        seeds = [int(s) for s in str(args.seeds).split(",")]
    except ValueError:
        raise DocgradError(f"--seeds {args.seeds}: comma-separated non-negative integers, e.g. 0,1,2") from None
    if not corpora_names or any(s < 0 for s in seeds):
        raise DocgradError(f"--corpora {args.corpora} --seeds {args.seeds}: name at least one corpus, seeds >= 0")
    if args.steps is not None and args.eval_every is not None and not 1 <= args.eval_every <= args.steps:
        raise DocgradError(f"--steps {args.steps} --eval-every {args.eval_every}: need 1 <= E <= T")
    out, home = Path(args.out).resolve(), (root / "data" / "learning").resolve()
    if out.is_relative_to(root) and not out.is_relative_to(home) or root.is_relative_to(out):
        raise DocgradError(f"--out {out}: inside the project only under {home}, where no committed page or result "
                           "can be written over; or give a folder outside the project")
    return corpora_names, seeds, out


def cli_learning(args) -> int:
    root = Path(args.root).resolve() if getattr(args, "root", None) else project_root()
    corpora_names, seeds, out = check_arguments(args, root.resolve())
    if args.threads:
        torch.set_num_threads(args.threads)
    if not args.probe and "mmap_threshold" not in os.environ.get("GLIBC_TUNABLES", ""):   # training only
        print("learning: glibc's malloc returns each step's logits to the kernel here: steps take about 1.6x longer "
              "than under `make learning` (GLIBC_TUNABLES, benchmarks/learning_speed.py)", file=sys.stderr)
    check_writable(out)                # before minutes of training, not after them
    data = {c: corpus_data(c, args.manifest, args.cache, args.chunk) for c in corpora_names}
    if args.pilot:
        return pilot(data, out)
    if args.probe:
        if args.steps is None:
            raise DocgradError("--probe --steps T: the T the runs were trained with (their checkpoints are at T/10, "
                               "T/2 and T)")
        for c in corpora_names:
            spans = corpora.load_spans(c, args.manifest, args.cache)
            probe_run(c, spans, args.steps, args.chunk, out)
        return 0
    if args.steps is None or args.eval_every is None:
        raise DocgradError("--steps and --eval-every: set them (docs/methods.md: by the pilot, `docgrad learning "
                           "--pilot`)")
    runs = [r for c in corpora_names for r in ladder(c, seeds, args.steps, args.eval_every)]
    todo = [r for r in runs if not done(out / f"{r.name}.json", r)]
    print(f"learning: {len(runs) - len(todo)} of {len(runs)} runs already in {shown_path(out)}; {len(todo)} to run",
          file=sys.stderr)
    for r in todo:
        rec = run_one(r, data[r.corpus], out)
        atomic_write_json(out / f"{r.name}.json", rec)
        print(f"learning: {r.name}: held-out loss {rec['held_out'][0]:.3f} -> {rec['held_out'][-1]:.3f} in "
              f"{rec['seconds'] / 60:.1f} min", file=sys.stderr)
    return 0


def check_writable(out: Path) -> None:
    """--out exists (made if missing) and takes a file, or one DocgradError naming it."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".docgrad-write-check"
        probe.touch()
        probe.unlink()
    except OSError as e:
        raise DocgradError(f"--out {shown_path(out)}: cannot write there ({e.strerror or e}); give a folder you "
                           "can write") from None


def step_seconds(config: RunConfig, d: LearningData) -> tuple[float, RunRecord]:
    """(seconds a training step, the run's record) for one run evaluated only at step 0 and its last step: the
    median of the times between consecutive steps' ends, the first and the last left out (the evaluations fall
    there), so the step's time is timed alone, not a run's seconds less a separately timed evaluation (whose
    difference goes negative on busy cores). Needs config.steps >= 3."""
    if config.steps < 3:
        raise ValueError(f"steps {config.steps}: at least 3 to time a step between the two evaluations")
    ends = []
    rec = train_run(config, d, progress=lambda step, loss: ends.append(time.perf_counter()))
    return float(np.median(np.diff(ends[:-1]))), rec


def pilot_corpus(corpus: str, d: LearningData, steps: int) -> dict:
    """One corpus's costs: seconds a step of the cheapest and dearest arms (shuffled b = 2 and b = 32, contiguous
    b = 32), seed 0, over `steps` steps (step_seconds); the seconds of one held-out evaluation; the ladder's
    per-step seconds interpolated linearly in the chunks a step."""
    rows = {}
    for arm, b in ((SHUFFLED, 2), (SHUFFLED, 32), (CONTIGUOUS, 32)):
        per_step, rec = step_seconds(RunConfig(corpus, arm, b, 0, steps=steps, eval_every=steps), d)
        rows[f"{arm} b={b}"] = {"seconds": rec.seconds, "held_out": [rec.held_out[0], rec.held_out[-1]],
                                "seconds_per_step": per_step}
    model = make_model(RunConfig(corpus, SHUFFLED, 2, 0, steps=1, eval_every=1), d.vocab_size)
    t0 = time.perf_counter()
    held_out_loss(model, d.held_out)
    evaluation = time.perf_counter() - t0
    lo, hi = rows[f"{SHUFFLED} b=2"]["seconds_per_step"], rows[f"{SHUFFLED} b=32"]["seconds_per_step"]
    per_step = {b: lo + (hi - lo) * (b - 2) / 30 for b in LADDER}
    return {"vocab_size": d.vocab_size, "arms": rows, "seconds_per_evaluation": evaluation,
            "seconds_per_step_interpolated": per_step,
            "seconds_per_seed_steps": sum(per_step.values()) + rows[f"{CONTIGUOUS} b=32"]["seconds_per_step"]}


def pilot_hours(costs: dict, T: int, E: int, seeds: int = 3) -> float:
    """Hours of every run (per corpus, `seeds` x the 6 arms): T steps each plus T // E + 1 evaluations each."""
    runs = len(LADDER) + 1
    return sum(seeds * (c["seconds_per_seed_steps"] * T + runs * (T // E + 1) * c["seconds_per_evaluation"])
               for c in costs.values()) / 3600


def pilot(data: dict, out: Path) -> int:
    """The pilot of docs/methods.md ("Does R predict learning?"): every corpus's costs (`pilot_corpus`) and the
    hours of all 3 x 6 runs per corpus at a few T and E, which is what the rule lets the pilot set."""
    costs = {}
    for corpus, d in data.items():
        costs[corpus] = c = pilot_corpus(corpus, d, PILOT_STEPS)
        for k, v in c["arms"].items():
            print(f"pilot: {corpus} {k}: {v['seconds_per_step']:.3f} s a step, held-out {v['held_out'][0]:.3f} -> "
                  f"{v['held_out'][1]:.3f} in {PILOT_STEPS} steps")
        print(f"pilot: {corpus} one held-out evaluation ({c['vocab_size']:,} ids): {c['seconds_per_evaluation']:.1f} s")
    runs = len(data) * 3 * (len(LADDER) + 1)
    hours = {f"T={T}, E={E}": pilot_hours(costs, T, E) for T in (250, 500, 1000, 2000, 4000) for E in (10, 25, 50)}
    record = {"steps": PILOT_STEPS, "corpora": costs, "runs": runs, "torch_threads": torch.get_num_threads(),
              "load_average": os.getloadavg(), "hours_for_all_runs": hours}
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / "pilot.json", record)
    for k, h in hours.items():
        print(f"pilot: {k}: the {runs} runs take about {h:.1f} h on these cores")
    return 0


def probe_settings(corpus: str, run: RunConfig, chunk: int) -> dict:
    """What an R_<corpus>.json is of: the probed run, its checkpoints' steps, documents, C, draws and seed."""
    return {"corpus": corpus, "run": run.name, "checkpoint_steps": list(run.checkpoints), "docs": list(PROBE_DOCS),
            "chunk": chunk, "resamples": PROBE_RESAMPLES, "seed": PROBE_SEED, "window": PROBE_WINDOW}


def probe_run(corpus: str, spans, steps: int, chunk: int, out: Path) -> dict:
    """R of the probed run (PROBED_RUN) of one corpus: its checkpoints at T/10, T/2 and T probed on training
    documents PROBE_DOCS (a result already there is kept), read by results.learning.checkpoint_R and written to
    out/R_<corpus>.json with each checkpoint's weights digest (the probe result's revision) and result sha256.
    An R_<corpus>.json of the same settings is kept (its checkpoints, git-ignored, need not be there); one of
    other settings is refused."""
    run = next(r for r in ladder(corpus, [PROBED_RUN[2]], steps, steps) if (r.arm, r.b, r.seed) == PROBED_RUN)
    settings, target = probe_settings(corpus, run, chunk), out / f"R_{corpus}.json"
    if target.exists():
        held = json.loads(target.read_text())
        if {k: held.get(k) for k in settings} != settings:
            raise DocgradError(f"{shown_path(target)} holds R of other settings than these ({settings}); it is kept: "
                               "move it away, or probe with the settings it records")
        print(f"learning: {shown_path(target)} is already there, kept", file=sys.stderr)
        return held
    folders = [out / "checkpoints" / f"{run.name}_step{k}" for k in run.checkpoints]
    missing = [shown_path(f) for f in folders if not f.is_dir()]
    if missing:
        raise DocgradError(f"{', '.join(missing)}: no such checkpoint; `docgrad learning --steps {steps} ...` saves "
                           f"them while it trains {run.name} (rerun it after deleting {run.name}.json to regenerate "
                           "them bit for bit)")
    found, pins = [], []
    for k, f in zip(run.checkpoints, folders):
        path = probe_checkpoint(f, corpus, spans, out / "probe", chunk, PROBE_DOCS)
        found.append(next(iter(load_cells(path.parent, groups=None, docs=PROBE_DOCS).values())))
        meta = json.loads(path.with_suffix(".json").read_text())
        pins.append({"step": k, "revision": meta["pin"]["revision"], "npz_sha256": meta["npz_sha256"]})
        print(f"learning: probed {shown_path(f)} -> {shown_path(path)}", file=sys.stderr)
    R = reading.checkpoint_R(found, PROBE_WINDOW, PROBE_RESAMPLES, PROBE_SEED)
    record = {**settings, **R, "probed": pins}
    atomic_write_json(target, record)
    print(f"learning: {corpus} R({PROBE_WINDOW}) of {run.name} at steps {run.checkpoints}: "
          + ", ".join(f"{c['R']:.2f}" for c in R["checkpoints"]) + f"; their mean {R['R']:.2f} "
          f"[{R['ci'][0]:.2f}, {R['ci'][1]:.2f}]", file=sys.stderr)
    return record
