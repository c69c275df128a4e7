"""Benchmark: full analysis (all cells, every group, 2000 document-bootstrap resamples, gates).

    PYTHONPATH=lib python benchmarks/analyze_speed.py [--results data/results] [--resamples 2000]
    PYTHONPATH=lib python benchmarks/analyze_speed.py --synthetic   # 4 synthetic cells, 16 docs x 32 chunks x 4 groups

Target: <= 30 s for the standard results (4 cells of 512 chunks). Prints total, load and per-cell times.
--synthetic writes result files of the standard size (shards of 4 documents) into a temporary directory
first (not timed), for use before real results exist.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from docgrad.results import stats


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", default="data/results", help="results directory (default data/results)")
    ap.add_argument("--resamples", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=20261007)
    ap.add_argument("--synthetic", action="store_true", help="benchmark on synthetic files of the standard size")
    ap.add_argument("--shard-size", type=int, default=4, help="documents per synthetic file (default 4)")
    args = ap.parse_args()
    tmp = None
    results = Path(args.results)
    if args.synthetic:
        from docgrad.results.synthetic import write_synthetic_results

        tmp = tempfile.TemporaryDirectory()
        results = Path(tmp.name)
        t = time.perf_counter()
        write_synthetic_results(results, n_docs=16, m=32, chunk=512, shard_size=args.shard_size, dim=256,
                                exact_ref=False)
        print(f"wrote synthetic results (16 docs x 32 chunks x 4 groups per cell) in {time.perf_counter() - t:.1f} s")
    t0 = time.perf_counter()
    report = stats.analyze(results, resamples=args.resamples, seed=args.seed)
    total = time.perf_counter() - t0
    print(f"results: {'synthetic' if args.synthetic else results}; resamples: {args.resamples}")
    print(f"load + pool (all files): {report['seconds']['load']:.2f} s")
    for c in report["cells"]:
        n = c["n_docs"] * c["chunks_per_doc"]
        print(f"  {c['model']} {c['revision']} {c['corpus']:7s} c{c['chunk']}: {n} chunks, "
              f"{len(c['files'])} files, estimates + bootstrap {c['seconds']:.3f} s")
    print(f"total: {total:.2f} s for {len(report['cells'])} cells (target <= 30 s)")
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
