"""Which bf16: autocast (the probe's --dtype bfloat16) or bf16 weights? Speed and gradient fidelity, one run.

    PYTHONPATH=lib .venv/bin/python benchmarks/bf16_choice.py [--chunks 8] [--corpus BOOKS] [--threads N]
        [--model smollm2-135m | random:smollm2-135m | random:neox-1.4b] [--device cpu|cuda] [--json F]

On the same 512-token chunks, interleaved chunk by chunk so that background load hits all three alike, the
gradient of the probe's chunk loss (docgrad.measure.gradients.chunk_loss) is computed three ways:

  float32    the reference: float32 weights and arithmetic;
  autocast   float32 weights, the forward under torch.autocast(bfloat16) (what `docgrad probe --dtype
             bfloat16` does: docgrad.measure.gradients.autocast); .grad is float32;
  weights    a bfloat16 copy of the model (every weight rounded to bf16, every op in bf16 save the loss,
             which is taken in float32 as the probe does); .grad is bf16 and is converted to float32 after
             the backward. There is nothing to accumulate across a chunk's backward beyond what the matrix
             kernels already accumulate in float32, so "float32 gradient accumulation" changes nothing here.

Prints per way the median forward+backward time (wall-clock and this process's CPU seconds; chunk 0 is a
warm-up and is left out of the timings), the chunks-per-hour ratio over float32, and per chunk the
all-parameter cosine and squared-norm ratio of its gradient against the float32 one, with their medians
and minima. The probe's gate is a median cosine >= 0.999 (docs/methods.md#reduced-precision).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from probe_overhead import load, random_chunks, real_chunks  # noqa: E402

WAYS = ("float32", "autocast", "weights")


def step(model, ids, dtype: str):
    """One forward+backward of the probe's chunk loss (docgrad.measure.gradients.forward_backward, autocast for "bfloat16");
    returns (loss, wall s, CPU s, the gradient as one float64 vector, tied weights once)."""
    import torch

    from docgrad.measure.precision import _grads_by_group
    from docgrad.measure.gradients import forward_backward, sync

    sync(ids.device.type)
    t, c = time.perf_counter(), time.process_time()
    loss = forward_backward(model, ids, None, dtype)
    sync(ids.device.type)
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    g = torch.cat([x for xs in _grads_by_group(model).values() for x in xs])
    model.zero_grad(set_to_none=True)
    return loss, wall, cpu, g


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--chunks", type=int, default=8)
    ap.add_argument("--chunk", type=int, default=512)
    ap.add_argument("--corpus", default="BOOKS")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None, help="also write the numbers to this JSON file")
    a = ap.parse_args(argv)
    if a.chunks < 2:
        ap.error(f"--chunks must be at least 2 (chunk 0 is a warm-up), got {a.chunks}")

    import copy

    import torch

    from docgrad.fileio import atomic_write_json, to_jsonable
    from docgrad.measure.gradients import resolve_device

    device = resolve_device(a.device)
    if a.threads:
        torch.set_num_threads(a.threads)
    model, desc = load(a.model, device)
    model.eval()
    if a.model.startswith("random:"):
        chunks, source = random_chunks(a.chunks, a.chunk, model.config.vocab_size, a.seed)
    else:
        chunks, source = real_chunks(a.chunks, a.chunk, a.corpus)
    bf16_model = copy.deepcopy(model).to(torch.bfloat16)
    bf16_model.eval()
    print(f"model: {desc}; device {device}; text: {source}; threads {torch.get_num_threads()}; "
          f"torch {torch.__version__}; load average {os.getloadavg()[0]:.2f}")

    rec = {w: {"loss": [], "wall_s": [], "cpu_s": [], "cosine": [], "sqnorm_ratio": []} for w in WAYS}
    for k, chunk in enumerate(chunks):
        ids = torch.as_tensor(np.asarray(chunk), dtype=torch.long, device=device)
        runs = {"float32": step(model, ids, "float32"), "autocast": step(model, ids, "bfloat16"),
                "weights": step(bf16_model, ids, "float32")}     # bf16 weights: no autocast, every op in bf16
        g = runs["float32"][3]
        gg = float(g @ g)
        for w, (loss, wall, cpu, h) in runs.items():
            hh = float(h @ h)
            r = rec[w]
            r["loss"].append(loss)
            r["wall_s"].append(wall)
            r["cpu_s"].append(cpu)
            r["cosine"].append(float(g @ h) / np.sqrt(gg * hh))
            r["sqnorm_ratio"].append(hh / gg)
        print(f"chunk {k}: " + "; ".join(f"{w} {rec[w]['wall_s'][-1]:.2f} s, loss {rec[w]['loss'][-1]:.4f}, "
                                         f"cosine {rec[w]['cosine'][-1]:.5f}" for w in WAYS), flush=True)

    out = {"model": desc, "device": device, "text": source, "chunks": a.chunks, "chunk_tokens": a.chunk,
           "threads": torch.get_num_threads(), "torch": torch.__version__, "by_way": rec, "summary": {}}
    f32 = np.median(rec["float32"]["wall_s"][1:])
    f32_cpu = np.median(rec["float32"]["cpu_s"][1:])
    for w in WAYS:
        r = rec[w]
        wall, cpu = float(np.median(r["wall_s"][1:])), float(np.median(r["cpu_s"][1:]))
        cos, ratio = np.array(r["cosine"]), np.array(r["sqnorm_ratio"])
        loss_diff = float(np.mean(np.array(r["loss"]) - np.array(rec["float32"]["loss"])))
        s = {"fb_median_s": wall, "fb_median_cpu_s": cpu, "speedup_wall": float(f32 / wall),
             "speedup_cpu": float(f32_cpu / cpu), "median_cosine": float(np.median(cos)),
             "min_cosine": float(cos.min()), "median_sqnorm_ratio": float(np.median(ratio)),
             "max_sqnorm_ratio": float(ratio.max()), "mean_loss_difference": loss_diff}
        out["summary"][w] = s
        print(f"[{w}] forward+backward median {wall:.3f} s ({cpu:.2f} CPU s) -> {s['speedup_wall']:.2f}x float32's "
              f"chunks per hour (CPU seconds {s['speedup_cpu']:.2f}x); gradient vs float32: median cosine "
              f"{s['median_cosine']:.5f} (min {s['min_cosine']:.5f}; gate >= 0.999), squared-norm ratio median "
              f"{s['median_sqnorm_ratio']:.4f} (max {s['max_sqnorm_ratio']:.4f}); mean loss difference "
              f"{loss_diff:+.4f} nats")
    print(f"load average at the end {os.getloadavg()[0]:.2f}")
    if a.json:
        atomic_write_json(Path(a.json), to_jsonable(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
