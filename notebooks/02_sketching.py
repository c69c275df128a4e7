# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     notebook_metadata_filter: -jupytext.text_representation.jupytext_version
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Sketching per-chunk gradients
#
# The study needs the inner product of every pair of chunk gradients in a result file (every chunk of every
# document the file holds), for every parameter group. Holding the gradients themselves is out of the question;
# this page shows why, what we keep instead (a count sketch), why its inner products are right on average and
# how far off a single one is, and then measures all of that live on the default model (SmolLM2-135M) over real
# chunks, together with what it costs per chunk.
#
# Every number on this page comes from `docgrad.core.sketch`, `docgrad.measure.gradients` and
# `docgrad.measure.probe_bench` (tested in `tests/test_sketch.py` and `tests/test_probe.py`) and is saved to
# `figures/02_sketching.json`. Re-execute with other settings, e.g.
# `docgrad run 02 -p n_chunks 10 -p corpus "\"CODE\""`.

# %% tags=["parameters"]
model_name = "smollm2-135m"  # 'smollm2-135m' (offline default) or a pinned hub id
revision = None  # hub revision (pinned in data/checkpoint_revisions.json); None for the default model
corpus = "BOOKS"  # which corpus the real chunks come from
n_chunks = 6  # chunks measured (half from each of the corpus's first two documents); chunk 0 is the reference
chunk = 512  # tokens per chunk
buckets = [1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072]  # bucket counts per group (the largest is timed)
seed = 0  # sketch hash seed
seed_style_coords = 200_000_000  # coordinates the seed-style numpy sketch is timed on (more than all: the whole model)
standard_chunks = 2048  # chunks of the published design (4 corpora x 16 documents x 32 chunks), for memory arithmetic
results_dir = "data/results"  # committed result files, for G1 per model
documents = "0:16"  # result files read: documents A:B (0:16 the published design; 0:48 the 48-document cells)
g1_documents = ["0:16", "0:48"]  # document ranges G1 is shown for (0:48: the files pages 03b-04c read)
g1_models = ["smollm2-135m", "gemma3-270m"]  # models whose --exact-ref result files give G1 (offline names or '<id>@<revision>')
precision_record = "data/precision/smollm2-135m_bfloat16.json"  # a `docgrad precision` record (bf16 vs float32 gradients)
precision_context_records = [  # records of the same chunks with a token ahead of each (`docgrad precision --context standalone-bos`)
    "data/precision/smollm2-135m_bfloat16_bos-im_start.json",
    "data/precision/smollm2-135m_bfloat16_bos-endoftext.json",
]

# %%
from docgrad import page as dg

ROOT = dg.setup()

import altair as alt
import numpy as np
import pandas as pd
import torch
from IPython.display import Markdown, display

all_files = dg.Study(results_dir, chunk=chunk)   # reads the result files once
g1_by_documents = {}                             # documents read -> model label -> G1 on those files
for docs in dict.fromkeys([documents, *g1_documents]):
    study = all_files.within(dg.parse_docs(docs))
    for m in dg.models.result_models(g1_models):
        shown, _ = study.page(m, [dg.CONTROL])
        gate = shown.gates["G1"]
        g1_by_documents.setdefault(docs, {})[m.label] = {k: v for k, v in gate.items() if k != "files"} | {
            "files": [str(f) for f in gate.get("files", [])]}
g1_by_model = g1_by_documents[documents]
prec = dg.precision_checks.read_record(precision_record)
ref_model = dg.models.result_model(model_name)
prec_checks = dg.precision_checks.cell_checks(results_dir, ref_model.model, ref_model.revision, docs=dg.parse_docs(documents))

# %% tags=["hide-input"]
display(Markdown(dg.sketching.sketch_box(g1_by_model, prec, prec_checks, dg.BF16_R_EQUIVALENCE_MARGIN)))

# %% [markdown]
# ## Why a sketch
#
# One chunk's gradient has one number per parameter. Keeping every chunk's gradient of the standard study, to
# take all pairwise inner products afterwards, would need:

# %%
lm = dg.models.load_model(model_name, revision)
sizes = dg.groups.group_sizes(lm)
n_params = sum(sizes.values())
mem = dg.sketch.storage_bytes(standard_chunks, n_params, max(buckets))
dg.tables.three_significant(pd.DataFrame({"parameters per gradient": [n_params], "chunks": [standard_chunks],
                                          "exact gradients (GB, float32)": [mem["exact_gradients"] / 1e9],
                                          "count sketches (GB, float32)": [mem["sketches"] / 1e9],
                                          "compression": [mem["compression"]]}))

# %% [markdown]
# Exact gradients would take about a terabyte; a count sketch of 2^17 buckets for each of the four parameter
# groups (attention, MLP, embeddings incl. the tied output layer, other) takes a few gigabytes for the whole study
# and about a gigabyte per 512-chunk cell, and the probe keeps the exact squared norm of every group beside it
# (those replace the Gram diagonal in the analysis).
#
# ## The count sketch, and why it is unbiased
#
# Each coordinate i of a group gets a bucket h(i) in {0..B-1} and a sign s(i) = +-1, fixed once for the whole
# run. The sketch of a gradient g is the vector of bucket sums (S g)_b = sum over i with h(i) = b of s(i) g_i. Then
#
# <S g, S u> = <g, u> + sum over i != j with h(i) = h(j) of s(i) s(j) g_i u_j.
#
# The signs are independent with mean 0, so each cross term has mean 0: the sketched inner product is unbiased.
# Its variance is about (|g|^2 |u|^2 + <g, u>^2) / B, so the error of a sketched cosine is of order
# sqrt((1 + cos^2) / B): 0.003 at B = 2^17, whatever the number of parameters.
#
# Our hash (`docgrad.core.sketch`, see its docstring) cuts each parameter into blocks of B coordinates and adds each
# block into the buckets rotated by a random offset, with a random sign per coordinate. Any two coordinates meet
# with probability at most 1/B, as with a fully random hash, so the same mean and variance hold; but sketching
# is then a multiply and contiguous adds, with no scatter and no per-chunk random numbers. The published probe
# regenerated a random bucket and sign for every coordinate for every chunk, which is where most of its time went.
#
# ## Measured on the default model

# %%
spans = dg.corpora_build.load_spans(corpus)  # `docgrad corpora build --corpus BOOKS` makes the cache (make report does)
chunks = dg.probe_bench.sample_chunks(spans, n_chunks, chunk)
res = dg.probe_bench.measure_chunks(lm, chunks, buckets=[max(buckets)] + [b for b in buckets if b != max(buckets)],
                           seed=seed, plain=True, seed_style_coords=seed_style_coords)
g1 = dg.probe_bench.chunk_fidelity(res, max(buckets))
dg.tables.three_significant(pd.Series({
    "pairs (chunk 0 vs others)": g1["pairs"], "mean exact cosine": g1["mean_exact_cosine"],
    "mean cosine error": g1["mean_cosine_error"], "sd cosine error": g1["sd_cosine_error"],
    "max |cosine error|": g1["max_abs_cosine_error"], "mean sketched/exact norm": g1["mean_norm_ratio"],
    "G1 passes": g1["passes"]}, name=f"B = {max(buckets)}").to_frame())

# %% [markdown]
# The G1 gate asks for |mean cosine error| <= 0.003, sd <= 0.03 and a sketched/exact norm ratio within 3%.
# With only a few chunks this is a spot check; the standard run records, in each result file, the exact inner
# products of one chunk with every other chunk of the file (`--exact-ref`), and the analysis evaluates G1 on those.
#
# ### G1 on the committed results, per model
#
# Each model's WEB result files were probed with `--exact-ref`: exact inner products of one chunk with every
# other chunk of its file beside the sketched ones. G1 per model and documents read, from those files
# (`docgrad.results.study.Study.page`, on each model's own cells):

# %%
display(Markdown(" ".join(dg.sketching.g1_scope_lines(g1_by_documents))))
dg.tables.three_significant(pd.DataFrame([
    {"model": lab, "documents": docs, "files": len(g.get("files", [])), "status": g["status"],
     "pairs": g.get("n_pairs"), "mean cosine error": g.get("mean_cos_diff"), "sd cosine error": g.get("sd_cos_diff"),
     "mean sketched/exact squared norm": g.get("mean_norm_ratio")}
    for docs, per in g1_by_documents.items() for lab, g in per.items()]))

# %% [markdown]
# ### Error against bucket count
#
# Each group has its own hash, so the four groups give four independent errors per pair. The line is the theory
# sd sqrt((1 + cos^2) / B) over the same pairs.

# %%
sweep = pd.DataFrame([{k: v for k, v in r.items() if k != "g1_total"} for r in dg.probe_bench.bucket_sweep(res)])
long = pd.concat([sweep.assign(kind="measured rms error", value=sweep["rms_cosine_error"]),
                  sweep.assign(kind="theory sd", value=sweep["theory_sd"])])
chart = alt.Chart(long).mark_line(point=True).encode(
    x=alt.X("buckets:Q", scale=alt.Scale(type="log", base=2), title="buckets per group B"),
    y=alt.Y("value:Q", scale=alt.Scale(type="log"), title="cosine error"),
    color=alt.Color("kind:N", title=None), tooltip=["buckets", "kind", alt.Tooltip("value:Q", format=".5f")],
).properties(width=460, height=280, title="Sketched cosine error vs bucket count (per-group pairs)")
dg.save_chart(chart, "02_error_vs_buckets")

# %%
dg.tables.three_significant(sweep[["buckets", "pairs", "mean_cosine_error", "sd_cosine_error", "rms_cosine_error",
                                   "theory_sd"]])

# %% [markdown]
# ### Per-group norms
#
# How the squared gradient norm splits over the groups (mean over the measured chunks); the embedding group
# holds the tied input/output matrix.

# %%
sq = res["sqnorm"]
norms = pd.DataFrame({"group": list(dg.GROUPS), "parameters": [sizes[g] for g in dg.GROUPS],
                      "mean squared norm": sq.mean(0), "share of squared norm": sq.mean(0) / sq.sum(1).mean(),
                      "sketched/exact at 2^17": (res["sketched_sqnorm"][max(buckets)] / sq).mean(0)})
dg.tables.three_significant(norms)

# %% [markdown]
# ### Speed, from the same run
#
# Per chunk (median over chunks 1..n-1): plain forward+backward, the probe's forward+backward and its sketch,
# and the seed-style numpy sketch (hashes regenerated per chunk), timed once on chunk 0's gradient.
# The probe's per-document and per-run bookkeeping (saving state, the final Gram) is measured separately by
# `benchmarks/probe_overhead.py`. These are wall-clock times on a shared machine: background load inflates both
# forward+backward passes differently, so the table also gives (plain + sketch) / plain, which compares the same
# forward+backward with and without the sketch.

# %%
speed = dg.probe_bench.speed_summary(res)
speed_table = pd.DataFrame([
    {"step": "plain forward+backward", "seconds per chunk": speed["plain_forward_backward_s"]},
    {"step": "probe: forward+backward", "seconds per chunk": speed["probe_forward_backward_s"]},
    {"step": f"probe: count sketch (B = {max(buckets)}) + exact norms", "seconds per chunk": speed["sketch_s"]},
    {"step": "seed-style numpy sketch (hashes regenerated)", "seconds per chunk": speed.get("seed_style_sketch_s")},
    {"step": "hash tables, once per run", "seconds per chunk": speed["hash_build_s"]},
])
speed_table["x plain forward+backward"] = speed_table["seconds per chunk"] / speed["plain_forward_backward_s"]
print(f"probe step / plain forward+backward: {speed['ratio_probe_over_plain']:.3f}; "
      f"(plain + sketch) / plain: {speed['ratio_components']:.3f}")
dg.tables.three_significant(speed_table)

# %% [markdown]
# ### bf16 arithmetic: faithful enough?
#
# `docgrad probe --dtype bfloat16` runs the forward passes under `torch.autocast` in bf16, with float32 weights
# and gradients (docs/methods.md, "Reduced precision"). It is faster on CPUs with bf16 instructions, but the
# study's numbers may only be probed that way if the gradients stay faithful. Two checks: per chunk, the cosine
# between the bf16 and the float32 gradient of the same chunk (`docgrad precision`, committed at
# `precision_record`; gate: median at least 0.999); and per cell, R(16K) of a bf16 probe minus that of the
# float32 cell on the same documents, with a paired bootstrap interval (`docgrad.results.precision_checks.cell_checks`, on
# whatever bf16 cells sit in `results_dir`).

# %%
prec_rows = [{"corpus": c, "chunks": r["gate"]["chunks"], "median cosine": r["gate"]["median_cosine"],
              "smallest cosine": r["gate"]["min_cosine"], "median squared-norm ratio": r["gate"]["median_sqnorm_ratio"],
              **{f"cosine {g}": v for g, v in r["gate"]["median_cosine_by_group"].items() if g != "all"}}
             for c, r in prec["by_corpus"].items()]
display(Markdown(" ".join(dg.sketching.fidelity_reading(prec, prec_checks))))
dg.tables.three_significant(pd.DataFrame(prec_rows))

# %% [markdown]
# Where does the tail come from? A chunk of text alone starts on whatever token its first position holds. The
# same chunks with a token put ahead of each (`docgrad precision --context standalone-bos --bos-id N`): the
# Instruct model's configured BOS, `<|im_start|>`, a chat token, and `<|endoftext|>`, the separator between
# documents in the model's pretraining data. Each tail chunk is followed into the other record
# (`docgrad.results.precision_checks.tail_across_contexts`).

# %%
prec_contexts = [dg.precision_checks.tail_across_contexts(prec, dg.precision_checks.read_record(p))
                 for p in precision_context_records]
for c in prec_contexts:
    display(Markdown(" ".join(dg.sketching.context_reading(c))))
dg.tables.three_significant(pd.DataFrame(dg.sketching.context_rows(prec, prec_contexts)))

# %%
numbers = {
    "result_box": dg.sketching.sketch_box(g1_by_model, prec, prec_checks, dg.BF16_R_EQUIVALENCE_MARGIN),
    "model": model_name, "corpus": corpus, "n_chunks": n_chunks, "chunk": chunk, "seed": seed,
    "sketch": dg.sketch.SKETCH_NAME,
    "threads": res["threads"], "parameters": n_params, "group_sizes": sizes, "storage": mem,
    "g1": g1, "g1_by_model": g1_by_model, "g1_by_documents": g1_by_documents,
    "g1_scope": dg.sketching.g1_scope_lines(g1_by_documents), "bucket_sweep": dg.probe_bench.bucket_sweep(res),
    "speed": speed,
    "losses": res["loss"],
    "group_sqnorm_share": dict(zip(dg.GROUPS, (sq.mean(0) / sq.sum(1).mean()).tolist())),
    "precision": {"record": precision_record, "gate": prec["gate"], "by_corpus": {c: r["gate"] for c, r in
                                                                                  prec["by_corpus"].items()},
                  "median_cpu_speedup": prec["median_cpu_speedup"], "cell_checks": prec_checks,
                  "contexts": [{"record": p, **c} for p, c in zip(precision_context_records, prec_contexts)]},
}
dg.save_numbers("02_sketching", numbers)
print(f"G1 at 2^17: mean error {g1['mean_cosine_error']:+.5f}, sd {g1['sd_cosine_error']:.5f}, "
      f"norm ratio {g1['mean_norm_ratio']:.4f}; probe/plain {speed['ratio_probe_over_plain']:.3f}; "
      f"seed-style sketch {speed.get('seed_style_sketch_s', float('nan')):.1f} s vs ours {speed['sketch_s']:.3f} s")

# %%
dg.versions()
