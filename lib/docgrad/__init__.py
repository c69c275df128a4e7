"""docgrad: within-document gradient correlation of language models, measured and explained.

Definitions: docs/methods.md. Modules (one concern each):
  study        the study's constants: corpora, span, chunk, groups, windows, seeds, gate thresholds
  errors       DocgradError, the base of every error a user can cause (one line, exit status 2)
  fileio       atomic writes, JSON conversion, package versions, project root
  reduction    loss-reduction objectives of the teaching pages, and accumulation checks
  pitfalls     the reduction mistakes of real training setups (page 01b): data parallelism, Trainer
               accumulation, packing, cross-entropy denominators, optimisers, policy gradients, Kish's n_eff
  models       the offline models (SmolLM2, Gemma 3: GGUF files in PyPI wheels, sha256-pinned), pinned hub
               models, parameter groups
  corpora      the four offline corpora, their manifest and token spans
               (+ corpora_sources: fetching from Debian/PyPI; rlazy: R lazy-load databases;
                hub_corpora: the published corpora, for users with network)
  sketch       the count sketch of per-chunk gradients, and the G1 fidelity statistics
  probe        per-chunk gradients -> sketches -> Gram matrices -> result files (ProbeConfig, PartialState)
  probe_bench  speed and fidelity of the probe on a few real chunks (notebook 02, benchmarks)
  precision    --dtype bfloat16 (autocast) and its fidelity against float32: per chunk, and per cell
  results      the result-file format (read, validate, write)
  cells        result files of one cell pooled into block sums
  bootstrap    estimators from block sums, and the vectorised document bootstrap
  stats        the analysis as typed results (Estimates, CellEstimate, RRel, Analysis), cached per inputs
  gates        gates G1-G3 and the verdict
  decomposition what drives a cell's R: sources / documents / chunks, leave one out, source-clustered
               bootstrap; what was measured (model file, control boundaries)
  comparison   does the corpus ordering depend on the model: pairwise differences resolved by the bootstrap,
               agreement between models and with the published points
  positions    causal vs standalone context: per-position loss and norm, paired mode comparison (page 06)
  batching     batch-composition rules (identity, random, balanced, coherent) measured as gradient noise
  tables       frames, headline table, reading lines and the summary printed by `docgrad analyze`
  published    the published study's numbers as frames, with our corpus names
  synthetic    synthetic gradients with a known correlation profile (tests, benchmarks)
  pages        what a notebook calls in its kernel: setup, chart renderer, figures, JSON twin, versions
  charts       chart idioms: corpus colours, legend highlighting
  notebooks    executing notebooks with validated parameters (`docgrad run`, `docgrad report`)
  report       the self-contained HTML report
  cli          the `docgrad` command line
"""

__version__ = "0.1.0"
