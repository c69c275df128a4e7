"""Probe overhead and sketch fidelity, per dtype, in one run (default: SmolLM2-135M on CPU, float32 and bfloat16).

    PYTHONPATH=lib .venv/bin/python benchmarks/probe_overhead.py [--chunks 8] [--corpus BOOKS] [--threads N]
        [--model smollm2-135m | random:smollm2-135m | random:neox-1.4b] [--device cpu|cuda]
        [--dtype float32,bfloat16]
    PYTHONPATH=lib .venv/bin/python benchmarks/probe_overhead.py --context causal --window 4096 [--windows 1]

Per 512-token chunk of real text: plain forward+backward vs the probe's step (forward+backward + count
sketch at 2^17 buckets per group + exact squared norms), interleaved chunk by chunk so background load hits
both alike, for each --dtype (bfloat16: the forward passes under torch.autocast, docgrad.measure.precision); plus the
per-chunk share of the bookkeeping the probe does once per document / run (saving a document's state, the final
float64 Gram of 512 chunks). Prints per dtype the ratio (target <= 1.10), chunks per hour, the peak memory
(CUDA: peak allocated; CPU: peak RSS) and
the G1 fidelity statistics of chunk 0 against every other chunk (|mean cosine error| <= 0.003,
sd <= 0.03, sketched/exact squared-norm ratio within 3%), then bf16's chunks per hour over float32's
(target >= 1.7 on CPU). Text: the corpus spans when built, else CPython standard-library sources; a
random:<shape> model (docgrad.models.RANDOM_SHAPES) reads uniform random token ids.

--context causal --window W: per chunk position of the first W tokens of --windows documents, the causal
step (docgrad.measure.probe.causal_steps: the chunk's gradient with every earlier token of the window as context)
against the standalone forward+backward of the same chunk, interleaved; prints the cost per chunk relative to
standalone mode (wall-clock and CPU seconds, overall and by position, beside the theory of the scheme), the
peak RSS (the window's retained activations), per-position loss and squared norm, and the G1 statistics of the
causal gradients against the first window's chunk 0.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def rss_mb(field: str = "VmRSS") -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def real_chunks(n: int, chunk: int, corpus: str) -> tuple[list[np.ndarray], str]:
    try:
        from docgrad.corpora import build as corpora

        from docgrad.measure.probe_bench import sample_chunks

        spans = corpora.load_spans(corpus)
        half = (n + 1) // 2
        return (sample_chunks(spans, n, chunk),
                f"{corpus} documents {spans[0].doc} and {spans[1].doc}, chunks 0..{half - 1} of each")
    except Exception as e:  # noqa: BLE001 - fall back to any real text available offline
        print(f"corpus {corpus} unavailable ({e}); using CPython stdlib sources", file=sys.stderr)
        import sysconfig

        from docgrad.models import load_tokenizer

        tok = load_tokenizer()
        files = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))[:40]
        ids = tok("\n".join(f.read_text(errors="replace") for f in files), add_special_tokens=False)["input_ids"]
        return [np.asarray(ids[k * chunk:(k + 1) * chunk]) for k in range(n)], "CPython stdlib *.py"


def random_chunks(n: int, chunk: int, vocab: int, seed: int = 0) -> tuple[list[np.ndarray], str]:
    """Uniform random token ids (a random-initialised model has no text of its own); seeded."""
    rng = np.random.default_rng(seed)
    return [rng.integers(0, vocab, chunk) for _ in range(n)], f"uniform random token ids (seed {seed}, vocab {vocab})"


def load(model_name: str, device: str):
    """(model, description): an offline/hub model, or `random:<shape>` random-initialised weights."""
    from docgrad import models

    if models.is_random(model_name):
        return models.random_model(model_name, seed=0, device=device), f"{model_name} (random-initialised weights)"
    return models.load_model(model_name, device=device), model_name


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m",
                    help="offline model (default smollm2-135m) or random:smollm2-135m / random:neox-1.4b "
                    "(random-initialised weights of the real shapes: runs on any machine without model files)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--dtype", default="float32,bfloat16",
                    help="comma-separated dtypes to measure, each with its own interleaved baseline (default both)")
    ap.add_argument("--chunks", type=int, default=8)
    ap.add_argument("--chunk", type=int, default=512)
    ap.add_argument("--corpus", default="BOOKS")
    ap.add_argument("--buckets", type=int, default=2**17)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--run-chunks", type=int, default=512, help="chunks per run, for the Gram share (default 512)")
    ap.add_argument("--json", default=None, help="also write the numbers to this JSON file")
    ap.add_argument("--context", default="standalone", choices=["standalone", "causal"])
    ap.add_argument("--window", type=int, default=4096, help="causal window W in tokens (default 4096)")
    ap.add_argument("--windows", type=int, default=1, help="causal: windows (documents) to measure (default 1)")
    a = ap.parse_args(argv)
    if a.context == "causal":
        return main_causal(a)

    import torch

    from docgrad.fileio import atomic_write_json, atomic_write_npz, to_jsonable
    from docgrad.measure.gradients import check_dtype
    from docgrad.measure.gradients import resolve_device
    from docgrad.measure.probe_bench import chunk_fidelity, measure_chunks, speed_summary

    dtypes = [check_dtype(d.strip()) for d in a.dtype.split(",") if d.strip()]
    device = resolve_device(a.device)
    if a.threads:
        torch.set_num_threads(a.threads)
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    model, model_desc = load(a.model, device)
    t_load = time.perf_counter() - t0
    if a.model.startswith("random:"):
        chunks, source = random_chunks(a.chunks, a.chunk, model.config.vocab_size, a.seed)
    else:
        chunks, source = real_chunks(a.chunks, a.chunk, a.corpus)
    rss_after_load = rss_mb()
    gpu = torch.cuda.get_device_name(device) if device.startswith("cuda") else None

    # bookkeeping shares (CPU, once): one document's state saved per 32 chunks, one float64 Gram per run
    m = 16384 // a.chunk
    state = np.random.default_rng(0).standard_normal((m, 4, a.buckets), dtype=np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        ts = time.perf_counter()
        atomic_write_npz(Path(tmp) / "doc.npz", {"sketch": state})   # as the probe saves a document
        t_save = time.perf_counter() - ts
    del state
    x = np.random.default_rng(1).standard_normal((a.run_chunks, a.buckets), dtype=np.float32)
    ts = time.perf_counter()
    xd = x.astype(np.float64)
    _ = xd @ xd.T
    t_gram = 4 * (time.perf_counter() - ts)          # four groups
    del x, xd
    book = t_save / m + t_gram / a.run_chunks

    print(f"model: {model_desc}; device {device}{f' ({gpu})' if gpu else ''}; text: {source}; threads "
          f"{torch.get_num_threads()}; torch {torch.__version__}")
    print(f"model load {t_load:.1f} s; bookkeeping per chunk {book:.4f} s (document state {t_save:.3f} s per "
          f"{m} chunks, float64 Gram of {a.run_chunks} chunks {t_gram:.2f} s)")
    out = {"model": model_desc, "device": device, "gpu": gpu, "text": source, "chunks": a.chunks,
           "chunk_tokens": a.chunk, "buckets": a.buckets, "threads": torch.get_num_threads(), "load_s": t_load,
           "bookkeeping_per_chunk_s": book, "doc_state_save_s": t_save, "gram_512_s": t_gram,
           "rss_after_load_mb": rss_after_load, "loadavg_start": load0, "by_dtype": {}}
    skip = 1                                           # chunk 0 warms caches/allocator for both paths
    for dtype in dtypes:
        try:                                       # reset the peak so VmHWM is this phase's peak
            Path("/proc/self/clear_refs").write_text("5")
        except OSError:
            pass
        res = measure_chunks(model, chunks, buckets=(a.buckets,), seed=a.seed, plain=True, progress=True,
                             dtype=dtype)
        peak = rss_mb("VmHWM")
        speed = speed_summary(res, skip=skip)
        plain, fb, sk = speed["plain_forward_backward_s"], speed["probe_forward_backward_s"], speed["sketch_s"]
        probe = fb + sk + book
        g1 = chunk_fidelity(res, a.buckets)
        r = {"plain_fb_median_s": plain, "probe_fb_median_s": fb, "sketch_median_s": sk,
             "plain_fb_median_cpu_s": speed["plain_forward_backward_cpu_s"],
             "probe_per_chunk_s": probe, "ratio_probe_over_plain": probe / plain,
             "ratio_components": (plain + sk + book) / plain, "chunks_per_hour": 3600 / probe,
             "peak_rss_mb": peak, "cuda_peak_allocated_mb": res.get("cuda_peak_allocated_bytes", 0) / 2**20 or None,
             "plain_fb_s": res["plain_fb_s"].tolist(), "probe_fb_s": res["probe_fb_s"].tolist(),
             "sketch_s": res["sketch_s"].tolist(), "loss": res["loss"].tolist(), "G1": g1,
             "loadavg_end": os.getloadavg()}
        out["by_dtype"][dtype] = r
        mem = (f"CUDA peak allocated {r['cuda_peak_allocated_mb']:.0f} MiB" if r["cuda_peak_allocated_mb"]
               else f"peak RSS {peak:.0f} MiB")
        print(f"[{dtype}] per chunk (median of {a.chunks - skip}): plain forward+backward {plain:.4f} s | probe: "
              f"forward+backward {fb:.4f} s + sketch {sk:.4f} s + bookkeeping {book:.4f} s = {probe:.4f} s")
        print(f"[{dtype}] RATIO probe / plain = {probe / plain:.3f} (target <= 1.10); (plain + sketch + bookkeeping) "
              f"/ plain = {r['ratio_components']:.3f}; {r['chunks_per_hour']:.0f} chunks per hour; {mem}; "
              f"load average -> {r['loadavg_end'][0]:.2f}")
        print(f"[{dtype}] G1 over {g1['pairs']} pairs: mean cosine error {g1['mean_cosine_error']:+.5f}, sd "
              f"{g1['sd_cosine_error']:.5f}, mean norm ratio {g1['mean_norm_ratio']:.4f} -> "
              f"{'PASS' if g1['passes'] else 'FAIL'}; losses {np.round(res['loss'], 3).tolist()}")
    if len(dtypes) > 1 and "float32" in out["by_dtype"]:
        f = out["by_dtype"]["float32"]
        for dtype in dtypes:
            if dtype != "float32":
                b = out["by_dtype"][dtype]
                cpu = (f["plain_fb_median_cpu_s"] / b["plain_fb_median_cpu_s"]) if device == "cpu" else None
                out[f"throughput_{dtype}_over_float32"] = b["chunks_per_hour"] / f["chunks_per_hour"]
                print(f"{dtype} / float32 chunks per hour: {out[f'throughput_{dtype}_over_float32']:.2f} (wall-clock)"
                      + (f"; plain forward+backward CPU seconds float32 / {dtype}: {cpu:.2f}" if cpu else "")
                      + " (target >= 1.7 on CPU)")
    out["peak_rss_process_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if a.json:
        atomic_write_json(Path(a.json), to_jsonable(out))
    return 0


def real_windows(n: int, window: int, corpus: str) -> tuple[list[np.ndarray], str]:
    from docgrad.corpora import build as corpora

    spans = corpora.load_spans(corpus)[:n]
    return [s.tokens[:window] for s in spans], f"{corpus} documents {[s.doc for s in spans]}, tokens [0, {window}) of the span"


def main_causal(a) -> int:
    import torch

    from docgrad import models
    from docgrad.fileio import atomic_write_json, to_jsonable
    from docgrad.measure.causal import check_window
    from docgrad.measure.probe_bench import causal_summary, measure_causal

    if a.window % a.chunk:
        raise SystemExit(f"--window {a.window} is not a multiple of --chunk {a.chunk}")
    if a.threads:
        torch.set_num_threads(a.threads)
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    model = models.load_model()
    t_load = time.perf_counter() - t0
    check_window(model, a.window)
    windows, source = real_windows(a.windows, a.window, a.corpus)
    rss_after_load = rss_mb()
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass
    res = measure_causal(model, windows, a.chunk, a.buckets, a.seed, plain=True, progress=True)
    peak = rss_mb("VmHWM")
    s = causal_summary(res)
    out = {"text": source, "context": "causal", **s, "load_s": t_load, "rss_after_load_mb": rss_after_load,
           "peak_rss_probe_phase_mb": peak, "peak_over_loaded_model_mb": peak - rss_after_load,
           "peak_rss_process_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
           "loadavg_start_all": load0, "loadavg_end_all": os.getloadavg(),
           "raw": {k: res[k] for k in ("loss", "standalone_loss", "sqnorm", "plain_fb_s", "plain_fb_cpu_s",
                                       "causal_fb_s", "causal_fb_cpu_s", "sketch_s", "sketch_cpu_s")}}
    m = s["chunks_per_window"]
    print(f"text: {source}; W {a.window} = {m} chunks of {a.chunk}; threads {s['threads']}; load average "
          f"{load0[0]:.2f} -> {out['loadavg_end_all'][0]:.2f}")
    for clock in ("cpu", "wall"):
        c = s[clock]
        print(f"{clock:4s} s per chunk: standalone forward+backward {c['standalone_per_chunk_s']:.2f} | causal step "
              f"{c['causal_per_chunk_s']:.2f} + sketch {c['sketch_per_chunk_s']:.2f} -> RATIO causal / standalone "
              f"{c['ratio_causal_over_standalone']:.2f} (with sketch {c['ratio_probe_step_over_standalone']:.2f})")
        print(f"     by position k=0..{m - 1}: {np.round(c['ratio_by_position'], 2).tolist()}")
    th = s["theory"]
    print(f"theory (backward = 2 forwards, attention growth aside): incremental {th['incremental']:.2f}, prefix "
          f"truncation {th['prefix_truncation']:.2f}, m backwards of the window {th['full_window_backwards']:.2f}")
    print(f"peak RSS {peak:.0f} MiB ({peak - rss_after_load:.0f} MiB over the loaded model, {rss_after_load:.0f} MiB)")
    print(f"loss by position: causal {np.round(s['loss_by_position'], 3).tolist()}, standalone "
          f"{np.round(s['standalone_loss_by_position'], 3).tolist()}")
    print(f"squared norm by position: {np.round(s['sqnorm_by_position'], 2).tolist()}")
    g1 = s["G1"]
    print(f"G1 on causal gradients ({g1['pairs']} pairs): mean cosine error {g1['mean_cosine_error']:+.5f}, sd "
          f"{g1['sd_cosine_error']:.5f}, mean squared-norm ratio {g1['mean_sqnorm_ratio']:.4f} -> "
          f"{'PASS' if g1['passes'] else 'FAIL'}")
    if a.json:
        atomic_write_json(Path(a.json), to_jsonable(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
