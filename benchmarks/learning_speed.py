"""Benchmark: seconds a training step (b = 32) and a held-out evaluation of the training test's model, with glibc's
default malloc and with freed blocks kept (MALLOC_TUNABLES), at several evaluation batch sizes.

    PYTHONPATH=lib python benchmarks/learning_speed.py [--corpus WEB] [--steps 5]

Each setting runs in its own process (the malloc tunables are read when a process starts), one after the other in
one run of this script; it prints the seconds and the ratios to the default. Why: every step of the b = 32 arm
allocates ~0.4 GB of logits (32 x 128 tokens x 23,111 ids of WEB in float32) and their gradient; above glibc's
mmap threshold each allocation is a fresh mapping whose pages fault in again, which shows as system time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

MALLOC_TUNABLES = "glibc.malloc.mmap_threshold=4294967296:glibc.malloc.trim_threshold=4294967296"
EVAL_BATCHES = (64, 16, 4)


def measure(corpus: str, steps: int) -> dict:
    """Seconds a b = 32 step (mean over `steps` after one warm-up) and of one evaluation of 256 held-out chunks at
    each batch size, in this process."""
    import torch

    from docgrad.measure.learning import SHUFFLED, RunConfig, chunk_loss, held_out_loss, make_model
    from docgrad.runtime.learning_command import corpus_data

    d = corpus_data(corpus, "data/corpora/manifest.json", "data/corpora/cache", 128)
    model = make_model(RunConfig(corpus, SHUFFLED, 32, 0, steps=steps, eval_every=steps), d.vocab_size)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    flat = d.train.reshape(-1, d.train.shape[-1])

    def step(i):
        loss = chunk_loss(model, flat[32 * i:32 * (i + 1)])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    step(0)
    t0 = time.perf_counter()
    for i in range(1, steps + 1):
        step(i)
    out = {"step_b32": (time.perf_counter() - t0) / steps}
    for batch in EVAL_BATCHES:
        t0 = time.perf_counter()
        held_out_loss(model, d.held_out[:2], batch=batch)
        out[f"eval256_batch{batch}"] = time.perf_counter() - t0
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default="WEB")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(measure(args.corpus, args.steps)))
        return
    rows = {}
    for name, extra in (("default malloc", {}), ("freed blocks kept", {"GLIBC_TUNABLES": MALLOC_TUNABLES})):
        env = {**os.environ, **extra}
        env.pop("GLIBC_TUNABLES", None) if not extra else None
        run = subprocess.run([sys.executable, __file__, "--child", "--corpus", args.corpus, "--steps", str(args.steps)],
                             env=env, capture_output=True, text=True, check=True)
        rows[name] = json.loads(run.stdout.strip().splitlines()[-1])
    base = rows["default malloc"]
    print(f"{args.corpus}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    for name, r in rows.items():
        print(name + ": " + ", ".join(f"{k} {v:.2f} s ({base[k] / v:.2f}x)" for k, v in r.items()))


if __name__ == "__main__":
    main()
