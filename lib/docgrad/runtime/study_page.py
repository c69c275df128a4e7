"""What a research page (03-04c) opens with, built from its parameters cell in one call: its models, the Study
over its results directory, the cells it shows, their decompositions and what they lack.

    page = StudyPage(results_dir, models, corpora, documents, resamples, seed, chunk)
    page.models          the ResultModels, in the page's order; page.label is the first, read in depth
    page.study           the Study (result files read once, each cell analysed and decomposed once)
    page.reports         {label: Analysis of the cells the page shows}; page.missing {label: corpora without one}
    page.decomps         {label: {corpus: CellDecomposition}}
    page.incomplete      {label: {corpus: (documents measured, documents held)}}: shards not yet probed
    page.inputs_lines()  what the page read, as Markdown bullet lines
    page.models_note     what it measured, in words (the result box's 'Measured')
    page.within("0:16")  the same page over fewer documents, from the files already read
"""

from __future__ import annotations

from functools import cached_property
from typing import Sequence

from docgrad.core.constants import BOOTSTRAP_SEED, CHUNK, HEADLINE_WINDOW, RESAMPLES
from docgrad.models import models_note, result_models
from docgrad.presentation.tables import page_inputs_lines
from docgrad.results.cell_decomposition import band_lags
from docgrad.results.format import parse_docs
from docgrad.results.shards import shard_reading
from docgrad.results.stats import long_lag_range
from docgrad.results.study import Study


class StudyPage:
    """One research page's view of the measurements (see the module docstring). `documents` is the page's 'A:B'
    document range (None: every result file)."""

    def __init__(self, results_dir, models: Sequence[str], corpora: Sequence[str], documents: str | None = None,
                 resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED, chunk: int = CHUNK, study: Study | None = None):
        self.results_dir, self.model_names, self.corpora = results_dir, list(models), list(corpora)
        self.documents = documents
        self.resamples, self.seed, self.chunk = resamples, seed, chunk
        self.models = result_models(models)
        self.label = self.models[0].label
        self.study = study or Study(results_dir, resamples, seed, chunk, docs=parse_docs(documents) if documents else None)
        shown = {m.label: self.study.page(m, self.corpora) for m in self.models}
        self.reports = {lab: rep for lab, (rep, _) in shown.items()}
        self.missing = {lab: miss for lab, (_, miss) in shown.items()}
        self.incomplete = {m.label: self.study.incomplete(m, self.corpora) for m in self.models}

    def within(self, documents: str, models: Sequence[str] | None = None) -> "StudyPage":
        """This page over documents A:B (e.g. the published design's "0:16"), from the result files already read;
        models: a subset of the page's models (default all; a model without cells in A:B is an AnalysisError)."""
        return StudyPage(self.results_dir, self.model_names if models is None else models, self.corpora, documents,
                         self.resamples, self.seed, self.chunk, study=self.study.within(parse_docs(documents)))

    @cached_property
    def decomps(self) -> dict:
        """{label: {corpus: CellDecomposition}} of every cell the page shows (computed once per cell)."""
        return {m.label: self.study.decompositions(m, [c.corpus for c in self.reports[m.label].cells])
                for m in self.models}

    def shard_readings(self, label: str | None = None) -> list[dict]:
        """results.shards.shard_reading of each cell of one model (default the first) with its decomposition's
        sources: R(16K) per shard, the within-shard interval, the cross-shard fill (docs/methods.md#shards)."""
        label = label or self.label
        model = next(m for m in self.models if m.label == label)
        return [shard_reading(self.study.cell(model, c.corpus), self.decomps[label][c.corpus].sources, self.resamples,
                              self.seed) for c in self.reports[label].cells]

    @property
    def models_note(self) -> str:
        """What the page measured, for its result box ('two small 4-bit-quantised models', or a local checkpoint)."""
        return models_note(self.models)

    def inputs_lines(self) -> list[str]:
        """The results directory and documents read, per model the cells present, missing and lacking documents,
        and what a span shorter than 16K changes (span_lines)."""
        return page_inputs_lines(self.results_dir, self.documents or "all", self.chunk, self.resamples, self.models,
                                 {lab: (self.reports[lab], self.missing[lab]) for lab in self.reports},
                                 self.incomplete) + self.span_lines()

    def span_lines(self) -> list[str]:
        """One Markdown bullet per cell whose span is shorter than 16K (a corpus of your own): R is read up to the
        span, ρ_long averages the long lags the span has (stats.long_lag_range) or is not there, and which bands
        of long lags it holds whole (cell_decomposition.band_lags; docs/methods.md#estimators). Empty for the
        study's cells."""
        out = []
        for lab, rep in self.reports.items():
            for c in rep.cells:
                span = c.chunks_per_doc * c.chunk
                if span >= HEADLINE_WINDOW:
                    continue
                lags = long_lag_range(c.chunk, c.chunks_per_doc)
                full = long_lag_range(c.chunk, HEADLINE_WINDOW // c.chunk)
                bands = [f"{a * c.chunk:,}-{b * c.chunk:,}" for a, b in band_lags(c.chunk) if b < c.chunks_per_doc]
                rho = (f"ρ_long averages its lags of {lags[0]:,}-{lags[1]:,} tokens only (a 16K span's run on to "
                       f"{full[1]:,}), and of the bands of long lags it holds whole "
                       + (f"only {', '.join(bands)} tokens" if bands else "none") if lags else
                       f"no lag reaches 2,048 tokens (the longest is {span - c.chunk:,}), so there is no ρ_long "
                       "and no band of long lags")
                out.append(f"- **{c.corpus}** ({lab}): a span of {span:,} tokens, shorter than 16K: R is read at the "
                           f"span, W = {span:,} tokens; {rho}")
        return out
