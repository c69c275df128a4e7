"""The study as the pages ask it: one object over a results directory that reads the result files once, analyses
every cell once (estimates, bootstrap draws, gates: `stats.cached_analysis`, cached on disk by inputs and code),
decomposes each cell once, and answers the pages' questions. A page builds one `Study` and asks it; it never
loads result files itself and never reads another page's output.

    study = Study(results_dir, resamples=2000, seed=20261007, docs=(0, 16))
    shown, missing = study.page(model, corpora)        # the cells a page shows, gated on themselves
    study.decompositions(model, corpora)               # {corpus: CellDecomposition}, computed once per cell
    study.cell(model, corpus)                          # the pooled cell (block sums, losses, shards)
    study.within((0, 16))                              # the same study over fewer documents, files not read again
    study.R_16K(model, corpora)                        # R(16K) per corpus and its document-bootstrap draws
    study.paired(model_x, model_y, corpora)            # {corpus: R(16K) of y - x, paired over shared documents}
    study.incomplete(model, corpora)                   # {corpus: (measured, held)}: cells lacking documents
    study.ordering(model, corpora, published_order)    # the pre-stated decision on the long-document corpora

`docs` selects the result files whose documents lie in [a, b): (0, 16) is the published design's 16 documents
when 48-document shards sit beside them; None reads every file (docs/methods.md#the-48-document-cells-what-is-read-and-how-it-is-decided).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Sequence

import numpy as np

from docgrad.core.constants import BOOTSTRAP_SEED, CHUNK, CONTROL, CORPORA, RESAMPLES
from docgrad.core.orderings import ordering_decision, resolve_pairs
from docgrad.corpora.provenance import document_sources
from docgrad.errors import AnalysisError
from docgrad.models import ResultModel, probe_model_option
from docgrad.publication import note_inputs
from docgrad.results.cell_decomposition import CellDecomposition, decompose_cell
from docgrad.results.cells import Cell, pool_results, read_results
from docgrad.results.format import Shard
from docgrad.results.paired import PairedDifference, paired_difference, shared_documents
from docgrad.results.stats import Analysis, cached_analysis, check_resamples, check_seed


def files_digest(shards: list[Shard], results_dir: Path) -> str:
    """sha256 over every result file's path (relative to results_dir) and digest, in path order: two reads of a
    directory agree on it exactly when they read the same files with the same bytes."""
    h = hashlib.sha256()
    for rel, digest in sorted((str(Path(sh.path).relative_to(results_dir)), sh.sha256) for sh in shards):
        h.update(f"{rel}\0{digest}\n".encode())
    return h.hexdigest()


@dataclass
class Study:
    """The measurements of one results directory, read once and answered to the pages (see the module docstring)."""

    results_dir: Path
    resamples: int = RESAMPLES
    seed: int = BOOTSTRAP_SEED
    chunk: int = CHUNK
    docs: tuple[int, int] | None = None
    cache_dir: Path = Path("cache/analysis")
    shards: list[Shard] | None = field(default=None, repr=False, compare=False)   # files as read (None: read at first use)
    _decompositions: dict = field(default_factory=dict, init=False, repr=False)
    _manifests: dict = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self):
        self.results_dir = Path(self.results_dir)
        self.resamples, self.seed = check_resamples(self.resamples), check_seed(self.seed)
        if self.docs is not None:
            self.docs = (int(self.docs[0]), int(self.docs[1]))

    def read(self) -> list[Shard]:
        """Every result file of the directory, read and validated once (cells.read_results) and kept: the cells,
        the analysis and its cache key, and every study `within` this one, use these."""
        if self.shards is None:
            if not self.results_dir.is_dir():
                raise AnalysisError(f"results directory {self.results_dir} does not exist")
            self.shards = read_results(self.results_dir)
            note_inputs(self.results_dir, len(self.shards), files_digest(self.shards, self.results_dir))
        return self.shards

    def within(self, docs: tuple[int, int]) -> "Study":
        """The same study over the files whose documents lie in [a, b) (e.g. the published design's (0, 16)
        beside the 48-document cells), from the files this one read."""
        return Study(self.results_dir, self.resamples, self.seed, self.chunk, docs, self.cache_dir, self.read())

    @cached_property
    def cells(self) -> dict[tuple, Cell]:
        """Every standalone float32 cell of the directory (within `docs`), pooled; keyed (model, revision, corpus,
        chunk)."""
        return pool_results(self.read(), self.results_dir, docs=self.docs)

    @cached_property
    def analysis(self) -> Analysis:
        """The analysis of every cell (stats.cached_analysis: computed once per set of inputs and code)."""
        return cached_analysis(self.results_dir, self.resamples, self.seed, self.cache_dir, self.docs, self.read())

    def page(self, model: ResultModel, corpora: Sequence[str]) -> tuple[Analysis, list[str]]:
        """(the cells of `model` a page shows, gates and verdict on them alone; the requested corpora without a
        cell). Refused before a page draws anything: no corpora, a repeated or unknown corpus, no cell at all."""
        corpora = list(corpora)
        if not corpora:
            raise AnalysisError("corpora is empty: name at least one corpus, e.g. ['BOOKS', 'WEB']")
        if len(set(corpora)) != len(corpora):
            raise AnalysisError(f"corpora repeats a name: {corpora}")
        cells = self.cells                      # pooled without the bootstrap: a page that shows nothing stops here
        known = set(CORPORA) | {k[2] for k in cells}
        unknown = [k for k in corpora if k not in known]
        if unknown:
            raise AnalysisError(f"unknown corpus {', '.join(map(repr, unknown))}: expected some of "
                                f"{', '.join(sorted(known))}")
        if not any((model.model, model.revision, k, self.chunk) in cells for k in corpora):
            have = "; ".join(sorted({f"{m} {r} c{c}: {k}" for m, r, k, c in cells}))
            docs = f"{self.docs[0]}:{self.docs[1]}" if self.docs else "0:16"
            raise AnalysisError(f"no cell of {model.model} at {model.revision} with chunk {self.chunk} for {corpora} "
                                f"in {self.results_dir} (it has: {have or 'none'}); make one with: docgrad probe "
                                f"{probe_model_option(model)} --corpus {corpora[0]} --chunk {self.chunk} --docs {docs} "
                                f"--out {self.results_dir}" + (f" (and likewise --corpus {', '.join(corpora[1:])})"
                                                               if len(corpora) > 1 else ""))
        a = self.analysis
        return (a.subset(model.model, model.revision, self.chunk, corpora),
                a.missing(model.model, model.revision, self.chunk, corpora))

    def cell(self, model: ResultModel, corpus: str) -> Cell | None:
        """The pooled cell of `model` and `corpus` at the study's chunk length, or None."""
        return self.cells.get((model.model, model.revision, corpus, self.chunk))

    def manifest(self, model: ResultModel) -> dict:
        """The model's own corpus manifest (spans are per tokenizer), read once; without one, every document is
        its own source ({"corpora": {}})."""
        if model.label not in self._manifests:
            try:
                self._manifests[model.label] = json.loads(Path(model.manifest).read_text())
            except OSError:
                self._manifests[model.label] = {"corpora": {}}
        return self._manifests[model.label]

    def sources(self, model: ResultModel, corpus: str) -> list[str]:
        """The source (author, work, project owner, package) of each document of the cell, in cell order. The
        manifest must describe the spans the files measured: a recorded span sha256 that differs from the
        manifest's is an AnalysisError naming the file and the document (sources would be misattributed)."""
        cell = self.cell(model, corpus)
        man = self.manifest(model)
        if cell is None:
            return []
        if corpus not in man.get("corpora", {}):
            return [f"{corpus} {i}" for i in cell.doc_ids]
        check_span_hashes(cell, man["corpora"][corpus], model.manifest)
        return document_sources(man, corpus, cell.doc_ids)

    def decompositions(self, model: ResultModel, corpora: Sequence[str]) -> dict[str, CellDecomposition]:
        """decompose_cell of each requested corpus that has a cell (same generator as the analysis, so the
        document bootstrap's draws are the page's), computed once per (model, corpus)."""
        out = {}
        for k in corpora:
            cell = self.cell(model, k)
            if cell is None:
                continue
            key = (model.label, k)
            if key not in self._decompositions:
                self._decompositions[key] = decompose_cell(cell, self.sources(model, k), self.resamples, self.seed)
            out[k] = self._decompositions[key]
        return out

    def held_documents(self, model: ResultModel, corpus: str) -> list[int]:
        """The documents of `corpus` that the model's manifest holds within the study's document range."""
        docs = [int(d["doc"]) for d in self.manifest(model).get("corpora", {}).get(corpus, {}).get("documents", [])]
        lo, hi = self.docs if self.docs is not None else (0, float("inf"))
        return [d for d in docs if lo <= d < hi]

    def incomplete(self, model: ResultModel, corpora: Sequence[str]) -> dict[str, tuple[int, int]]:
        """{corpus: (documents measured, documents held)} for each cell that lacks documents its manifest holds
        within the range (a shard not yet probed); complete cells and corpora without a cell are left out."""
        out = {}
        for k in corpora:
            cell, held = self.cell(model, k), self.held_documents(model, k)
            if cell is not None and set(held) - set(cell.doc_ids):
                out[k] = (len(cell.doc_ids), len(held))
        return out

    def ordering(self, model: ResultModel, corpora: Sequence[str], published: Sequence[str] | None = None) -> dict:
        """The pre-stated decision (docs/methods.md#the-48-document-cells-what-is-read-and-how-it-is-decided) on
        the long-document corpora among `corpora` that have a cell: 'pairs' (core.orderings.resolve_pairs over
        the document-bootstrap draws of R(16K), Holm over the family) and 'decision' (ordering_decision; not read
        while a cell is incomplete), with each cell's document count in 'n_docs'."""
        long = [k for k in corpora if k != CONTROL]
        points, draws = self.R_16K(model, long)
        pairs = resolve_pairs(points, draws, list(draws))
        decision = ordering_decision(points, pairs, published, self.incomplete(model, list(draws))) if pairs else None
        return {"pairs": pairs, "decision": decision,
                "n_docs": {k: len(d.doc_ids) for k, d in self.decompositions(model, long).items()}}

    def R_16K(self, model: ResultModel, corpora: Sequence[str]) -> tuple[dict[str, float], dict[str, np.ndarray]]:
        """({corpus: R(16K)}, {corpus: its document-bootstrap draws}) of each requested corpus with a cell, from
        the decompositions (the draws are the analysis's; a cell without a bootstrap has a point and no draws)."""
        decomps = self.decompositions(model, corpora)
        return ({k: d.R for k, d in decomps.items()},
                {k: d.draws["doc"]["R"] for k, d in decomps.items() if "doc" in d.draws})

    def paired(self, x: ResultModel, y: ResultModel, corpora: Sequence[str]) -> dict[str, PairedDifference]:
        """R(16K) of model y minus model x per corpus, over the documents both measured (matched by text sha256
        in their manifests), with paired document-bootstrap draws (docgrad.results.paired). Corpora without a
        cell in both, or with fewer than paired.MIN_SHARED shared documents, are left out."""
        out = {}
        for k in corpora:
            cx, cy = self.cell(x, k), self.cell(y, k)
            if cx is None or cy is None:
                continue
            docs = [self.manifest(m).get("corpora", {}).get(k, {}).get("documents", []) for m in (x, y)]
            d = paired_difference(cx, cy, shared_documents(docs[0], docs[1], cx.doc_ids, cy.doc_ids),
                                  self.resamples, self.seed)
            if d is not None:
                out[k] = d
        return out

    def group_sizes(self, model: ResultModel) -> dict[str, int]:
        """Parameters per group as the probe recorded them (the first cell's first file), {} without a cell."""
        cell = next((c for k, c in sorted(self.cells.items()) if k[:2] == (model.model, model.revision)
                     and k[3] == self.chunk), None)
        return dict(cell.shards[0].meta.get("group_sizes", {})) if cell is not None else {}


def check_span_hashes(cell: Cell, entry: dict, manifest_path) -> None:
    """Every span sha256 a cell's files record (spans_sha256, {document: sha256}) is the corpus manifest entry's for
    that document, and every document of a file whose span the manifest pins has one recorded. A file without that
    record is refused, not passed unchecked: its arrays could be any cell's (another corpus's npz beside this
    corpus's json)."""
    recorded = {int(d["doc"]): d.get("span_sha256") for d in entry.get("documents", [])}
    for sh in cell.shards:
        hashes = sh.meta.get("spans_sha256")
        for doc, h in (hashes.items() if isinstance(hashes, dict) else ()):
            want = recorded.get(int(doc))
            if want is None:
                raise AnalysisError(f"{sh.path}: document {doc} is not in {manifest_path} (it has "
                                    f"{len(recorded)} documents of {cell.corpus})")
            if h != want:
                raise AnalysisError(f"{sh.path}: document {doc}'s span sha256 {str(h)[:12]}.. differs from "
                                    f"{manifest_path}'s {str(want)[:12]}..: the files measured other spans than the "
                                    "manifest describes")
        pinned = [int(d) for d in sh.documents if recorded.get(int(d))]
        if pinned and not isinstance(hashes, dict):
            raise AnalysisError(f"{sh.path}: its json records no spans_sha256 ({{document: span sha256}}, got "
                                f"{hashes!r:.40}), so the spans it measured cannot be checked against "
                                f"{manifest_path}, which pins them")
        unrecorded = [d for d in pinned if not hashes.get(str(d))]
        if unrecorded:
            raise AnalysisError(f"{sh.path}: spans_sha256 records no span sha256 for document(s) {unrecorded} of the "
                                f"file, so the spans it measured cannot be checked against {manifest_path}, which "
                                "pins them")
