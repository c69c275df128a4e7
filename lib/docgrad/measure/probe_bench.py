"""Speed and fidelity of the probe's step on a few real chunks (benchmarks/probe_overhead.py, notebook 02).

measure_chunks runs, per chunk, the plain forward+backward and the probe's step (forward+backward, in-place
count sketch, exact squared norms) and keeps, untimed, what the G1 statistics need: the exact inner product
of every chunk's gradient with chunk 0's, and the sketched one at several bucket counts. chunk_fidelity,
bucket_sweep and speed_summary reduce that result.

measure_causal does the same for the causal context (docs/methods.md#causal-context): per window and chunk
position, a standalone forward+backward of the chunk (the baseline, interleaved) and the causal step
(probe.causal_steps) plus its sketch; causal_summary gives the cost per chunk relative to standalone, overall
and by position, in wall-clock and in CPU seconds (the CPU time of this process is robust to other load).
"""

from __future__ import annotations

import os
import time
from typing import Sequence

import numpy as np

from docgrad.core.constants import DEFAULT_BUCKETS, FLOAT32, GROUPS, SKETCH_SEED
from docgrad.core.sketch import CountSketch, cosine_errors, fidelity, g1_statistics, seed_style_sketch
from docgrad.measure.causal import causal_steps
from docgrad.measure.gradients import forward_backward, sync
from docgrad.measure.probe_config import as_doc_spans


def measure_chunks(model, chunks: Sequence, buckets: Sequence[int] = (DEFAULT_BUCKETS,), seed: int = SKETCH_SEED,
                   plain: bool = True, seed_style_coords: int = 0, progress: bool = False,
                   dtype: str = FLOAT32) -> dict:
    """Speed and fidelity of the probe on real chunks, in one run. Chunk 0 is the reference.
    dtype: the arithmetic of every forward pass, plain and probe alike (docgrad.measure.precision).

    For every chunk k (token id sequences of equal length):
      * plain forward+backward, timed (if plain) — the baseline;
      * the probe's step: forward+backward (timed) and the in-place sketch at buckets[0] with exact squared
        norms (timed: this is all the probe adds per chunk besides storing the result);
      * untimed extras: the already sign-multiplied gradient folded at the other bucket counts, and the exact
        inner product with chunk 0's gradient per group.
    With seed_style_coords > 0, the seed-style numpy sketch (hashes regenerated per chunk) is timed on the
    first parameters up to that many coordinates of chunk 0's gradient, and extrapolated linearly to all.
    Returns numpy arrays: loss (n), sqnorm (n x groups), exact_ref_dot (n x groups), and per bucket count
    sketched_ref_dot / sketched_sqnorm (n x groups); timings in seconds (wall-clock, and CPU seconds of this
    process for the two forward+backward passes); on CUDA the peak allocated memory of the probe phase.
    """
    import torch

    device = next(model.parameters()).device
    model.eval()
    t0 = time.perf_counter()
    main = CountSketch.from_model(model, buckets[0], seed, device)
    others = {b: main.with_buckets(b) for b in buckets[1:]}
    t_hash = time.perf_counter() - t0
    n, G = len(chunks), len(GROUPS)
    res = {"buckets": list(buckets), "loss": np.zeros(n), "sqnorm": np.zeros((n, G)), "exact_ref_dot": np.zeros((n, G)),
           "sketched_ref_dot": {b: np.zeros((n, G)) for b in buckets},
           "sketched_sqnorm": {b: np.zeros((n, G)) for b in buckets},
           "plain_fb_s": np.full(n, np.nan), "probe_fb_s": np.zeros(n), "sketch_s": np.zeros(n),
           "plain_fb_cpu_s": np.full(n, np.nan), "probe_fb_cpu_s": np.zeros(n), "dtype": dtype,
           "hash_build_s": t_hash, "threads": torch.get_num_threads(), "device": str(device),
           "parameters": sum(p.numel for p in main.params.values()), "sign_table_bytes": main.memory_bytes,
           "loadavg_start": os.getloadavg()[0]}
    ref_signed, ref_sk = None, {}
    from tqdm.auto import tqdm

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    for k in tqdm(range(n), disable=not progress, desc=f"chunks ({dtype})"):
        ids = torch.as_tensor(np.asarray(chunks[k]), dtype=torch.long, device=device)
        if plain:
            t0, c0 = time.perf_counter(), time.process_time()
            forward_backward(model, ids, dtype=dtype)
            sync(device)
            res["plain_fb_s"][k], res["plain_fb_cpu_s"][k] = time.perf_counter() - t0, time.process_time() - c0
            model.zero_grad(set_to_none=True)
        t0, c0 = time.perf_counter(), time.process_time()
        res["loss"][k] = forward_backward(model, ids, dtype=dtype)
        sync(device)
        t1 = time.perf_counter()
        res["probe_fb_s"][k], res["probe_fb_cpu_s"][k] = t1 - t0, time.process_time() - c0
        if k == 0 and seed_style_coords > 0:
            sub, total = {}, 0
            for name, p in model.named_parameters():
                if name in main.params and total < seed_style_coords:
                    sub[name] = p.grad.detach().cpu().numpy().copy()
                    total += p.numel()
            ts = time.perf_counter()
            seed_style_sketch(sub, {nm: GROUPS[main.params[nm].group] for nm in sub}, buckets[0], seed)
            res["seed_style_subset_s"] = time.perf_counter() - ts
            res["seed_style_subset_coords"] = total
            res["seed_style_per_chunk_s"] = res["seed_style_subset_s"] * res["parameters"] / total
            t1 = time.perf_counter()        # the seed-style timing is not part of the probe's step
        r = main.sketch_model_grads(model, keep_signed=(k == 0))
        sync(device)
        res["sketch_s"][k] = time.perf_counter() - t1
        res["sqnorm"][k] = r.sqnorm
        grads = main.signed_views()              # s * g of this chunk (the fused path leaves .grad unsigned)
        sketches = {buckets[0]: r.sketch, **{b: sk.fold(grads) for b, sk in others.items()}}
        if k == 0:
            ref_signed, ref_sk = r.signed, sketches
        for gi in range(G):
            res["exact_ref_dot"][k, gi] = sum(float(torch.dot(ref_signed[nm].reshape(-1), grads[nm].reshape(-1)).double())
                                              for nm in grads if main.params[nm].group == gi)
        for b in buckets:
            res["sketched_ref_dot"][b][k] = (ref_sk[b].double() * sketches[b].double()).sum(1).cpu().numpy()
            res["sketched_sqnorm"][b][k] = (sketches[b].double() ** 2).sum(1).cpu().numpy()
        model.zero_grad(set_to_none=True)
    res["loadavg_end"] = os.getloadavg()[0]       # 1-minute load average: > cores means the timings were contended
    if device.type == "cuda":
        res["cuda_peak_allocated_bytes"] = int(torch.cuda.max_memory_allocated(device))
    return res


def chunk_fidelity(res: dict, b: int, per_group: bool = False) -> dict:
    """G1 statistics (docgrad.core.sketch.fidelity) of a measure_chunks result at bucket count b, summed over groups;
    per_group=True pools the cosine errors of each group separately (4 x more pairs, each group its own hash)."""
    if not per_group:
        return fidelity(res["exact_ref_dot"].sum(1), res["sketched_ref_dot"][b].sum(1), res["sqnorm"].sum(1),
                        sketched_diag=res["sketched_sqnorm"][b].sum(1))
    e = np.concatenate([cosine_errors(res["exact_ref_dot"][:, gi], res["sketched_ref_dot"][b][:, gi], sq)
                        for gi, sq in enumerate(res["sqnorm"].T) if sq.min() > 0])
    g1 = g1_statistics(e)
    return {"pairs": g1["pairs"], "mean_cosine_error": g1["mean_cosine_error"], "sd_cosine_error": g1["sd_cosine_error"],
            "rms_cosine_error": float(np.sqrt((e ** 2).mean()))}


def sample_chunks(spans, n: int, chunk: int, documents: int = 2) -> list[np.ndarray]:
    """n chunks of real text: the first ceil(n/documents) chunks of each of the first `documents` spans."""
    spans = as_doc_spans(spans)[:documents]
    per = -(-n // len(spans))
    return [s.tokens[k * chunk:(k + 1) * chunk] for s in spans for k in range(per)][:n]


def bucket_sweep(res: dict) -> list[dict]:
    """Per bucket count: cosine errors of the reference chunk against the others, pooled over groups (each group
    has its own hash), beside the theory sd sqrt((1 + cos^2) / B) averaged over the same pairs."""
    rows = []
    cos = []
    for gi in range(len(GROUPS)):
        sq = res["sqnorm"][:, gi]
        if sq.min() > 0:
            cos.append(res["exact_ref_dot"][1:, gi] / np.sqrt(sq[0] * sq[1:]))
    cos = np.concatenate(cos)
    for b in sorted(res["buckets"]):
        f = chunk_fidelity(res, b, per_group=True)
        rows.append({"buckets": b, **f, "theory_sd": float(np.sqrt(np.mean((1 + cos ** 2) / b))),
                     "g1_total": chunk_fidelity(res, b)})
    return rows


def speed_summary(res: dict, skip: int = 1) -> dict:
    """Median seconds per chunk (chunk 0 skipped: warm-up and the seed-style timing) and the probe's ratio."""
    plain = float(np.nanmedian(res["plain_fb_s"][skip:]))
    fb = float(np.median(res["probe_fb_s"][skip:]))
    sk = float(np.median(res["sketch_s"][skip:]))
    out = {"dtype": res.get("dtype", FLOAT32), "plain_forward_backward_s": plain, "probe_forward_backward_s": fb,
           "sketch_s": sk, "plain_forward_backward_cpu_s": float(np.nanmedian(res["plain_fb_cpu_s"][skip:]))
           if "plain_fb_cpu_s" in res else None,
           "probe_step_s": fb + sk, "ratio_probe_over_plain": (fb + sk) / plain,
           "ratio_components": (plain + sk) / plain, "hash_build_s": res["hash_build_s"],
           "loadavg_start": res.get("loadavg_start"), "loadavg_end": res.get("loadavg_end"), "threads": res.get("threads")}
    if "seed_style_per_chunk_s" in res:
        out["seed_style_sketch_s"] = res["seed_style_per_chunk_s"]
        out["seed_style_measured_fraction"] = res["seed_style_subset_coords"] / res["parameters"]
        out["seed_style_ratio"] = (plain + res["seed_style_per_chunk_s"]) / plain
    return out


def measure_causal(model, windows: Sequence, chunk: int, buckets: int = DEFAULT_BUCKETS, seed: int = SKETCH_SEED,
                   plain: bool = True, progress: bool = False) -> dict:
    """Cost of the causal context's per-chunk gradients on real windows (token arrays of W = m * chunk).

    For every window and chunk position k, interleaved so that background load hits both alike:
      * plain: the standalone forward+backward of chunk k alone (the baseline; skipped if plain=False);
      * the causal step k (probe.causal_steps: segment k's forward with the window's cache, backward of L_k
        through every earlier chunk) and the in-place count sketch of its gradient, as the probe does.
    Each is timed in wall-clock and in CPU seconds (time.process_time: all threads of this process).
    Returns (windows x m) arrays: loss, standalone_loss, sqnorm (exact, summed over groups), and the timings,
    plus the exact and sketched inner products of every causal gradient with the first window's chunk 0
    (G1 statistics of causal gradients, untimed)."""
    import torch

    device = next(model.parameters()).device
    model.eval()
    sketcher = CountSketch.from_model(model, buckets, seed, device)
    n, m = len(windows), len(windows[0]) // chunk
    z = lambda: np.full((n, m), np.nan)            # noqa: E731
    res = {"chunk": chunk, "window": m * chunk, "chunks_per_window": m, "loss": z(), "standalone_loss": z(),
           "sqnorm": z(), "exact_ref_dot": z(), "sketched_ref_dot": z(), "sketched_sqnorm": z(),
           "plain_fb_s": z(), "plain_fb_cpu_s": z(), "causal_fb_s": z(), "causal_fb_cpu_s": z(),
           "sketch_s": z(), "sketch_cpu_s": z(), "threads": torch.get_num_threads(), "device": str(device),
           "loadavg_start": os.getloadavg()[0]}
    ref_signed, ref_sketch = None, None
    from tqdm.auto import tqdm

    bar = tqdm(total=n * m, disable=not progress, desc="causal chunks")
    for w, window in enumerate(windows):
        ids = torch.as_tensor(np.asarray(window), dtype=torch.long, device=device)
        if len(ids) != m * chunk:
            raise ValueError(f"measure_causal: window {w} has {len(ids)} tokens, expected {m * chunk}")
        steps = causal_steps(model, ids, chunk)
        for k in range(m):
            if plain:                               # the standalone chunk, between two causal steps
                t0, c0 = time.perf_counter(), time.process_time()
                res["standalone_loss"][w, k] = forward_backward(model, ids[k * chunk:(k + 1) * chunk])
                sync(device)
                res["plain_fb_s"][w, k] = time.perf_counter() - t0
                res["plain_fb_cpu_s"][w, k] = time.process_time() - c0
                model.zero_grad(set_to_none=True)
            t0, c0 = time.perf_counter(), time.process_time()
            res["loss"][w, k] = next(steps)
            sync(device)
            t1, c1 = time.perf_counter(), time.process_time()
            r = sketcher.sketch_model_grads(model, keep_signed=ref_signed is None)
            sync(device)
            res["causal_fb_s"][w, k], res["causal_fb_cpu_s"][w, k] = t1 - t0, c1 - c0
            res["sketch_s"][w, k], res["sketch_cpu_s"][w, k] = time.perf_counter() - t1, time.process_time() - c1
            res["sqnorm"][w, k] = float(np.sum(r.sqnorm))
            if ref_signed is None:
                ref_signed, ref_sketch = r.signed, r.sketch.double()
            grads = sketcher.signed_views()      # s * g of this chunk (the fused path leaves .grad unsigned)
            res["exact_ref_dot"][w, k] = sum(float(torch.dot(ref_signed[nm].reshape(-1), g.reshape(-1)).double())
                                             for nm, g in grads.items())
            res["sketched_ref_dot"][w, k] = float((ref_sketch * r.sketch.double()).sum())
            res["sketched_sqnorm"][w, k] = float((r.sketch.double() ** 2).sum())
            model.zero_grad(set_to_none=True)
            bar.update(1)
        steps.close()
    bar.close()
    res["loadavg_end"] = os.getloadavg()[0]
    return res


def causal_summary(res: dict) -> dict:
    """Cost of a causal chunk relative to a standalone one (measure_causal): totals over every window and
    position, in wall-clock and CPU seconds; by position k, the mean over windows; and the theory of the
    incremental scheme, (m+2)/3 with a backward costing twice a forward, attention's growth with context aside
    (prefix truncation: (m+1)/2; m backwards of the whole window: (2m+1)/3)."""
    m = res["chunks_per_window"]
    out = {"window": res["window"], "chunk": res["chunk"], "chunks_per_window": m, "windows": len(res["loss"]),
           "threads": res["threads"], "loadavg_start": res["loadavg_start"], "loadavg_end": res.get("loadavg_end")}
    for clock, sfx in (("wall", "_s"), ("cpu", "_cpu_s")):
        plain = float(np.nansum(res["plain_fb" + sfx]))
        causal = float(np.nansum(res["causal_fb" + sfx]))
        sk = float(np.nansum(res["sketch" + sfx]))
        n = res["loss"].size
        out[clock] = {"standalone_per_chunk_s": plain / n, "causal_per_chunk_s": causal / n,
                      "sketch_per_chunk_s": sk / n,
                      "ratio_causal_over_standalone": causal / plain if plain else None,
                      "ratio_probe_step_over_standalone": (causal + sk) / plain if plain else None,
                      "ratio_by_position": (np.nanmean(res["causal_fb" + sfx], 0)
                                            / np.nanmean(res["plain_fb" + sfx], 0)).tolist() if plain else None}
    out["theory"] = {"incremental": (m + 2) / 3, "prefix_truncation": (m + 1) / 2,
                     "full_window_backwards": (2 * m + 1) / 3}
    out["loss_by_position"] = np.nanmean(res["loss"], 0).tolist()
    out["standalone_loss_by_position"] = np.nanmean(res["standalone_loss"], 0).tolist()
    out["sqnorm_by_position"] = np.nanmean(res["sqnorm"], 0).tolist()
    ex, sq = res["exact_ref_dot"].reshape(-1), res["sqnorm"].reshape(-1)
    out["G1"] = fidelity(ex, res["sketched_ref_dot"].reshape(-1), sq, sketched_diag=res["sketched_sqnorm"].reshape(-1))
    return out
