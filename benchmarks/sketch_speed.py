"""The fused count sketch against the pre-fused one, on random gradients of a real model's shapes.

    PYTHONPATH=lib .venv/bin/python benchmarks/sketch_speed.py [--model random:smollm2-135m] [--device cpu]
        [--repeats 7] [--threads 2] [--buckets 131072]

The fused path ("new": CountSketch(fused=True)), the blockwise path (CountSketch(fused=False), the CPU default)
and the pre-fused implementation ("old": docgrad.core.sketch.reference_sketch) sketch the same
random vectors of every parameter's shape, interleaved call by call, with and without the exact reference dot
(--exact-ref). Prints the median seconds of each, the ratio old / new, the largest differences between their
outputs (sketch, squared norms, reference dot) and the memory of the sign table and the work buffer. On CUDA
every timing is synchronised.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="random:smollm2-135m")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--buckets", type=int, default=2**17)
    a = ap.parse_args(argv)

    import torch

    from docgrad.models import named_parameter_groups, random_config
    from docgrad.measure.gradients import sync
    from docgrad.core.sketch import CountSketch, reference_sketch

    if a.threads:
        torch.set_num_threads(a.threads)
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        shapes = [(n, tuple(p.shape), g)
                  for n, p, g in named_parameter_groups(AutoModelForCausalLM.from_config(random_config(a.model)))]
    t0 = time.perf_counter()
    cs = CountSketch(shapes, a.buckets, 0, a.device, fused=True)
    t_hash = time.perf_counter() - t0
    block = CountSketch(shapes, a.buckets, 0, a.device, fused=False, signs_from=cs)
    gen = torch.Generator(device=a.device).manual_seed(0)
    vec = {n: torch.randn(s, generator=gen, device=a.device) for n, s, _ in shapes}
    ref_new = cs.sketch(vec, keep_signed=True).signed
    ref_old = reference_sketch(cs, vec, keep_signed=True).signed
    vec = {n: torch.randn(s, generator=gen, device=a.device) for n, s, _ in shapes}

    def timed(f):
        sync(a.device)
        t = time.perf_counter()
        r = f()
        sync(a.device)
        return time.perf_counter() - t, r

    runs = {"new": lambda: cs.sketch(vec), "old": lambda: reference_sketch(cs, vec),
            "blockwise": lambda: block.sketch(vec),
            "new+ref": lambda: cs.sketch(vec, ref=ref_new), "old+ref": lambda: reference_sketch(cs, vec, ref=ref_old)}
    times = {k: [] for k in runs}
    out = {}
    for _ in range(a.repeats + 1):                     # the first round warms up and is dropped
        for k, f in runs.items():
            t, out[k] = timed(f)
            times[k].append(t)
    med = {k: float(np.median(v[1:])) for k, v in times.items()}
    n = sum(p.numel for p in cs.params.values())
    blocks = cs.rows
    print(f"{a.model} on {a.device} ({torch.get_num_threads()} threads): {n:,} parameters in {len(shapes)} tensors, "
          f"{blocks:,} blocks of B = {a.buckets}; hash build {t_hash:.2f} s")
    print(f"memory: sign table {cs.memory_bytes / 2**20:.0f} MiB (4 bytes per parameter), work buffer "
          f"{cs.work_bytes / 2**20:.0f} MiB ({cs.work_bytes / (4 * n) - 1:+.1%} padding to whole rows)")
    for k in ("old", "blockwise", "new", "old+ref", "new+ref"):
        print(f"  {k:8s} median {med[k] * 1e3:8.1f} ms   (all: {np.round(np.array(times[k][1:]) * 1e3, 1).tolist()})")
    print(f"RATIO old / new: {med['old'] / med['new']:.2f} (sketch + squared norms), "
          f"{med['old+ref'] / med['new+ref']:.2f} (with the exact reference dot)")
    o, w = out["old+ref"], out["new+ref"]
    print(f"agreement: max |sketch difference| {float((o.sketch - w.sketch).abs().max()):.3g} "
          f"(max |sketch| {float(o.sketch.abs().max()):.3g}); squared norms max relative difference "
          f"{float(np.max(np.abs(o.sqnorm - w.sqnorm) / np.maximum(o.sqnorm, 1e-30))):.3g}; reference dot relative "
          f"difference {abs(o.ref_dot - w.ref_dot) / abs(o.ref_dot):.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
