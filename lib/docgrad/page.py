"""What a notebook page imports, under one name: `from docgrad import page as dg`.

A page then calls `dg.setup()`, `dg.StudyPage(...)`, `dg.tables.R_frame(report)`, `dg.published.cells()`: the
module that does the work stays in every call, and nothing is defined here, only gathered (as d2l's
`from d2l import torch as d2l`). tests/test_layout.py checks that each page imports this name and nothing else of
docgrad, and that everything gathered here is used by some page.

  running a page     setup, save_chart, save_numbers, versions; corpus_color, highlight, legend_pick,
                     forest_chart (charts)
  the measurements   StudyPage (a research page's opening call), Study, parse_docs, AnalysisError; the study's
                     constants BF16_R_EQUIVALENCE_MARGIN, CONTROL, DOCS_PER_CORPUS, GROUPS
  the method         decomposition, groups, sketch (docgrad.core)
  the inputs         models (offline models, loading), corpora_build, provenance, model_facts, probe_bench
  the results        published, precision_checks, stats, batching, positions, cell_decomposition, profiles,
                     model_regime, spikes, learning_runs (page 07: the training test's runs and its reading)
  what pages say     tables, design_effect, correlation, comparison, evidence, batch_reading, causal, sketching,
                     explorer, regime, measurement (page 04e: your own documents), learning (page 07)
  teaching pages     reduction (01), effective_size (01a), trainers, optimisers (01b), packing, cross_entropy (01c),
                     rl_losses, rl_trl, rl_worked (01d; imported on first use: they need torch and TRL);
                     installed (the installed libraries' source), history, records, worked (and its sig, sig_table)
"""

from docgrad import models
from docgrad.core import decomposition, groups, sketch
from docgrad.core.constants import BF16_R_EQUIVALENCE_MARGIN, CONTROL, DOCS_PER_CORPUS, GROUPS
from docgrad.corpora import build as corpora_build
from docgrad.corpora import provenance
from docgrad.errors import AnalysisError
from docgrad.measure import model_facts, probe_bench
from docgrad.presentation import (batch_reading, causal, comparison, correlation, design_effect, evidence, explorer,
                                  learning, measurement, regime, sketching, tables)
from docgrad.presentation.charts import corpus_color, forest_chart, highlight, legend_pick
from docgrad.results import batching, cell_decomposition, positions, precision_checks, profiles, published, stats
from docgrad.results import learning as learning_runs
from docgrad.results import regime as model_regime
from docgrad.results import spikes
from docgrad.results.format import parse_docs
from docgrad.results.study import Study
from docgrad.runtime.pages import save_chart, save_numbers, setup, versions
from docgrad.runtime.study_page import StudyPage
from docgrad.teaching import (cross_entropy, effective_size, history, installed, optimisers, packing, records,
                              reduction, trainers, worked)
from docgrad.teaching.worked import sig, sig_table

__all__ = [
    "setup", "save_chart", "save_numbers", "versions", "corpus_color", "forest_chart", "highlight", "legend_pick",
    "StudyPage", "Study", "parse_docs", "AnalysisError",
    "BF16_R_EQUIVALENCE_MARGIN", "CONTROL", "DOCS_PER_CORPUS", "GROUPS",
    "decomposition", "groups", "sketch",
    "models", "corpora_build", "provenance", "model_facts", "probe_bench",
    "published", "precision_checks", "stats", "batching", "positions", "cell_decomposition", "profiles",
    "model_regime", "spikes", "learning_runs",
    "tables", "design_effect", "correlation", "comparison", "evidence", "batch_reading", "causal", "sketching",
    "explorer", "regime", "measurement", "learning",
    "reduction", "effective_size", "trainers", "optimisers", "packing", "cross_entropy", "installed", "worked", "sig",
    "sig_table", "records", "history",
    "rl_losses", "rl_trl", "rl_worked",
]


def __getattr__(name):
    """Page 01d's modules are imported on first use (PEP 562): they need torch and TRL, seconds of import in every
    page's kernel that does not use them."""
    if name == "rl_losses":
        from docgrad.teaching import rl_losses
        return rl_losses
    if name == "rl_trl":
        from docgrad.teaching import rl_trl
        return rl_trl
    if name == "rl_worked":
        from docgrad.teaching import rl_worked
        return rl_worked
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
