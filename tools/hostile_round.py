"""A hostile round on the user-facing verbs: each case is one command that must be refused before any work, with
exit status 2, one line on stderr (a page's parameter listing may follow `run`'s), no traceback and nothing
written into the project. Prints one line per case and the counts; exit status 1 if any case fails that.

    .venv/bin/python tools/hostile_round.py

The cases are the ones of issue 49 and those found on the verbs it touched (measure, spikes, probe with a causal
start token, precision, run). None starts a kernel or loads a model, so the round takes about a minute.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASES = [
    "measure --corpus CODE --no-page --out notebooks",
    "measure --corpus CODE --no-page --out .",
    "measure --corpus CODE --no-page --out data/results/mine",
    "measure --corpus CODE --no-page --out data/regime",
    "measure --corpus CODE --no-page --out figures/x",
    "measure --corpus CODE --no-page --out measurements",
    "measure --corpus CODE --no-page --out /",
    "measure --corpus CODE --docs 3:4 --no-page --out {tmp}/m1",
    "measure --corpus CODE --docs 0:8 --chunk 16 --no-page --out {tmp}/m2",
    "spikes --corpus NOPE --out {tmp}/s.json",
    "spikes --corpus CODE --start-token 5 --out {tmp}/s.json",
    "spikes --corpus CODE --out {tmp}",
    "probe --corpus CODE --docs 0:2 --context causal --window 1024 --start-token -1",
    "probe --corpus CODE --docs 0:2 --context causal --window 1000 --start-token 0",
    "probe --corpus CODE --docs 0:2 --start-token none",
    "probe --corpus CODE --docs 15:400",
    "precision --corpora WEB,web --out {tmp}/p.json",
    "run 04 -p corpora ['WEB','WEB']",
    "run 04 -p corpora []",
]


def status() -> str:
    return subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True).stdout


def main() -> int:
    docgrad = Path(sys.executable).with_name("docgrad")
    before, failed = status(), 0
    with tempfile.TemporaryDirectory() as tmp:
        for case in CASES:
            argv = [str(docgrad), *shlex.split(case.format(tmp=tmp))]
            r = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
            lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
            first = lines[0] if lines else ""
            ok = (r.returncode == 2 and "Traceback" not in r.stderr and first.startswith("docgrad ")
                  and (len(lines) == 1 or case.startswith("run ")))
            failed += not ok
            print(f"{'ok  ' if ok else 'FAIL'} rc={r.returncode} lines={len(lines)} | {case} | {first[:160]}")
    written = status() != before
    print(f"{len(CASES) - failed} of {len(CASES)} cases refused in one line; project files written: {written}")
    return 1 if failed or written else 0


if __name__ == "__main__":
    sys.exit(main())
