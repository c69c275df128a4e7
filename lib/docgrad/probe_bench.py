"""Speed and fidelity of the probe's step on a few real chunks (benchmarks/probe_overhead.py, notebook 02).

measure_chunks runs, per chunk, the plain forward+backward and the probe's step (forward+backward, in-place
count sketch, exact squared norms) and keeps, untimed, what the G1 statistics need: the exact inner product
of every chunk's gradient with chunk 0's, and the sketched one at several bucket counts. chunk_fidelity,
bucket_sweep and speed_summary reduce that result.
"""

from __future__ import annotations

import os
import time
from typing import Sequence

import numpy as np

from docgrad.probe import as_doc_spans, forward_backward, sync
from docgrad.sketch import CountSketch, cosine_errors, fidelity, g1_statistics
from docgrad.study import DEFAULT_BUCKETS, GROUPS, SKETCH_SEED


def measure_chunks(model, chunks: Sequence, buckets: Sequence[int] = (DEFAULT_BUCKETS,), seed: int = SKETCH_SEED,
                   plain: bool = True, seed_style_coords: int = 0, progress: bool = False) -> dict:
    """Speed and fidelity of the probe on real chunks, in one run. Chunk 0 is the reference.

    For every chunk k (token id sequences of equal length):
      * plain forward+backward, timed (if plain) — the baseline;
      * the probe's step: forward+backward (timed) and the in-place sketch at buckets[0] with exact squared
        norms (timed: this is all the probe adds per chunk besides storing the result);
      * untimed extras: the already sign-multiplied gradient folded at the other bucket counts, and the exact
        inner product with chunk 0's gradient per group.
    With seed_style_coords > 0, the seed-style numpy sketch (hashes regenerated per chunk) is timed on the
    first parameters up to that many coordinates of chunk 0's gradient, and extrapolated linearly to all.
    Returns numpy arrays: loss (n), sqnorm (n x groups), exact_ref_dot (n x groups), and per bucket count
    sketched_ref_dot / sketched_sqnorm (n x groups); timings in seconds.
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
           "hash_build_s": t_hash, "threads": torch.get_num_threads(), "device": str(device),
           "parameters": sum(p.numel for p in main.params.values()), "sign_table_bytes": main.memory_bytes,
           "loadavg_start": os.getloadavg()[0]}
    ref_signed, ref_sk = None, {}
    from tqdm.auto import tqdm

    for k in tqdm(range(n), disable=not progress, desc="chunks"):
        ids = torch.as_tensor(np.asarray(chunks[k]), dtype=torch.long, device=device)
        if plain:
            t0 = time.perf_counter()
            forward_backward(model, ids)
            sync(device)
            res["plain_fb_s"][k] = time.perf_counter() - t0
            model.zero_grad(set_to_none=True)
        t0 = time.perf_counter()
        res["loss"][k] = forward_backward(model, ids)
        sync(device)
        t1 = time.perf_counter()
        res["probe_fb_s"][k] = t1 - t0
        if k == 0 and seed_style_coords > 0:
            from docgrad.sketch import seed_style_sketch

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
        grads = {nm: p.grad for nm, p in model.named_parameters() if nm in main.params and p.grad is not None}
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
    return res


def chunk_fidelity(res: dict, b: int, per_group: bool = False) -> dict:
    """G1 statistics (docgrad.sketch.fidelity) of a measure_chunks result at bucket count b, summed over groups;
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
    out = {"plain_forward_backward_s": plain, "probe_forward_backward_s": fb, "sketch_s": sk,
           "probe_step_s": fb + sk, "ratio_probe_over_plain": (fb + sk) / plain,
           "ratio_components": (plain + sk) / plain, "hash_build_s": res["hash_build_s"],
           "loadavg_start": res.get("loadavg_start"), "loadavg_end": res.get("loadavg_end"), "threads": res.get("threads")}
    if "seed_style_per_chunk_s" in res:
        out["seed_style_sketch_s"] = res["seed_style_per_chunk_s"]
        out["seed_style_measured_fraction"] = res["seed_style_subset_coords"] / res["parameters"]
        out["seed_style_ratio"] = (plain + res["seed_style_per_chunk_s"]) / plain
    return out
