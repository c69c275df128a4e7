"""Batch composition measured as gradient noise: identity, random, balanced and coherent batches of a cell's chunks.
Definitions: docs/methods.md#batch-composition.

A rule partitions a list of n chunks (gradients g_i, Gram K with the exact squared norms on its diagonal) into
batches B of b chunks, inside consecutive windows w of whole documents (default: one window, the cell). The
gradient noise of the partition is the mean squared deviation of the batch means from the mean of their window:

    V = mean_B |g_B - gbar_w(B)|^2 = mean_B 1_B' K 1_B / b^2  -  (1/n) sum_w 1_w' K 1_w / n_w

(a window's n_w/b batch means average to its mean gbar_w, so the cross term is -|gbar_w|^2 per batch). With one
window this is mean_B 1_B' K 1_B / b^2 - 1' K 1 / n^2. Under uniformly random batches (a uniform permutation of
each window, cut into batches) every batch is a sample of b of the window's n_w chunks without replacement, so

    E V_random = sum_w (n_w / n) (n_w - b) / (b (n_w - 1)) s2_w,    s2_w = (tr K_w - 1_w' K 1_w / n_w) / n_w,

s2_w being the window's population variance (1/n_w) sum_i |g_i - gbar_w|^2. The rule's design effect is
V / E V_random (1 for random batches on average). A scalar score s is the Gram s s': V is then the between-batch
variance of the batch-mean score, the lexical statistic of the batch-composition study (u/residual_cartographer,
"Completed batch composition study: structured grouping misses replication rule", 2026-10-14).

Rules (that study's definitions, applied inside each window of n_w chunks, positions in the list's order):
  identity  consecutive b chunks (within one document when b divides its chunk count)
  random    a uniform permutation, cut into batches of b
  balanced  sort by score ascending (ties: earlier position first), cut into b strata of n_w/b chunks, permute
            each stratum uniformly, batch j takes the j-th chunk of every stratum
  coherent  the same sorted order cut into consecutive batches of b
Batch order and order within a batch do not change V, so they are not drawn.

Scores: per-chunk mean unigram surprise (add-one counts over every target token of the cell's chunks, FP64 mean of
-log p over the chunk's C-1 targets; `unigram_surprise`) and the per-chunk model loss from the result file.

Document bootstrap (`measure`): a resample draws the cell's D documents with replacement (the documents
docgrad.results.stats draws for the same seed and cell), lists them in ascending order, applies the rule with fresh
randomness and recomputes V / E V_random. A document drawn twice gives two copies that count as distinct
documents: chunk pairs across copies get the resample's cross-document mean inner product S (as docgrad.core.bootstrap
never pairs a document with its own copy), while a copy keeps its chunks' scores (so sorted rules batch copies
together, which pulls their resampled ratios toward 1; `summary` measures by how much).

Identity and R(bC) (`identity_to_R`): with b dividing the chunks per document m, identity's ratio is
    ratio = (n - 1)/(n - b) * b (A - Q)/(T - Q),   R(bC) = b (A - S)/(T - S)   (docgrad.core.bootstrap),
with A the mean |block mean|^2, T the mean squared norm, Q = 1'K1/n^2 (|gbar|^2 of the cell, diagonal and
within-document pairs included) and S = S_cross (cross-document pairs only): the two differ only in how |gbar|^2
is estimated and by the finite-population factor.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from docgrad.core import bootstrap as bs
from docgrad.core.constants import ALL, BOOTSTRAP_SEED, CI_LEVEL, CONTROL
from docgrad.corpora import build as corpora
from docgrad.errors import AnalysisError
from docgrad.results.cells import Cell
from docgrad.results.stats import check_resamples

RULES = ("identity", "random", "balanced", "coherent")
SCORES = ("unigram", "loss")
DEFAULT_RESAMPLES = 500        # document-bootstrap resamples of the page (2000 take a few seconds per cell)
_BLOCK = 256                   # resamples per vectorised block (bounds the gathered (block, n/b, b, b) array)


# --- partitions ---------------------------------------------------------------------------------------------

def window_bounds(n: int, b: int, window: int = 0) -> list[tuple[int, int]]:
    """Consecutive windows [start, stop) of `window` chunks over a list of n (the last may be shorter); window 0
    (or >= n) is one window. Every window must hold whole batches, at least two of them."""
    if b < 1 or n % b:
        raise AnalysisError(f"batch size {b} does not divide the {n} chunks of the cell")
    w = n if window <= 0 or window >= n else int(window)
    if w % b or w < 2 * b:
        raise AnalysisError(f"window {window} must be a multiple of the batch size {b} holding at least two "
                            f"batches (or 0 for the whole cell)")
    return [(a, min(a + w, n)) for a in range(0, n, w)]


def partition(rule: str, scores: np.ndarray, b: int, window: int = 0,
              rng: np.random.Generator | None = None) -> np.ndarray:
    """Batches of a rule as positions into the chunk list: scores (..., n) -> (..., n/b, b) int.

    Leading axes are independent lists (e.g. bootstrap resamples), each with its own random draws. identity and
    random ignore the scores' values; random and balanced need `rng`."""
    scores = np.asarray(scores, dtype=float)
    lead, n = scores.shape[:-1], scores.shape[-1]
    if rule not in RULES:
        raise AnalysisError(f"unknown batching rule {rule!r}: expected one of {', '.join(RULES)}")
    if rule in ("random", "balanced") and rng is None:
        raise AnalysisError(f"rule {rule!r} draws at random: pass a seeded numpy Generator")
    out = []
    for a, e in window_bounds(n, b, window):
        nw, nb = e - a, (e - a) // b
        pos = np.broadcast_to(np.arange(a, e), lead + (nw,))
        if rule == "identity":
            batches = pos.reshape(lead + (nb, b))
        elif rule == "random":
            batches = rng.permuted(pos, axis=-1).reshape(lead + (nb, b))
        else:
            ordered = a + np.argsort(scores[..., a:e], axis=-1, kind="stable")   # stable: ties keep list order
            if rule == "coherent":
                batches = ordered.reshape(lead + (nb, b))
            else:                                                                # b strata of nb chunks each
                strata = rng.permuted(ordered.reshape(lead + (b, nb)), axis=-1)
                batches = np.swapaxes(strata, -1, -2)
        out.append(np.asarray(batches))
    return np.concatenate(out, axis=-2)


# --- gradient noise of a partition ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Population:
    """A list of whole documents (slots: document ids, repeats allowed; leading axes: independent lists) over a
    Gram K of D documents x m chunks (rows (document, chunk)), cut into windows of whole documents.

    The list's chunks are each slot's m chunks in order. Two copies of one document (a bootstrap draw) are
    distinct documents: a chunk pair across the copies gets the list's cross-document mean inner product S
    (pairs of different documents, as S_cross in docgrad.core.bootstrap), never the copy's own squared norm.
    `noise(batches)` is V and `random_noise(b)` is E V_random for that list's Gram."""

    K: np.ndarray
    m: int
    slots: np.ndarray                           # (..., S) document ids
    window: int
    independent_copies: bool
    S: np.ndarray = field(repr=False)           # (...,) cross-document mean inner product
    win_sum: np.ndarray = field(repr=False)     # (..., W) 1_w' K 1_w of each window
    win_trace: np.ndarray = field(repr=False)   # (..., W)
    sizes: np.ndarray = field(repr=False)       # (W,) chunks per window

    @classmethod
    def of(cls, K: np.ndarray, m: int, slots: np.ndarray | None = None, window: int = 0,
           independent_copies: bool = True) -> "Population":
        """The population of a list of documents (default: each of K's documents once, in order). window: chunks
        per window, a multiple of m (0: one window). independent_copies=False keeps K between copies (for a
        score: a copy's scores are the document's)."""
        K = np.asarray(K, dtype=float)
        D = len(K) // m
        if D * m != len(K):
            raise AnalysisError(f"a Gram of {len(K)} rows is not {m} chunks per document")
        slots = np.arange(D) if slots is None else np.asarray(slots)
        n = slots.shape[-1] * m
        w = n if window <= 0 or window >= n else int(window)
        if w % m:
            raise AnalysisError(f"window {window} is not a whole number of documents of {m} chunks")
        P = K.reshape(D, m, D, m).sum(axis=(1, 3))                          # document-pair sums
        same = slots[..., :, None] == slots[..., None, :]
        copies = same & ~np.eye(slots.shape[-1], dtype=bool)                 # pairs of copies of one document
        Pl = P[slots[..., :, None], slots[..., None, :]]                     # (..., S, S) slot-pair sums
        with np.errstate(invalid="ignore", divide="ignore"):
            S = np.where(same, 0, Pl).sum(axis=(-2, -1)) / (m * m * (~same).sum(axis=(-2, -1)))
        if independent_copies:
            Pl = np.where(copies, (m * m * S)[..., None, None], Pl)
        tr = np.diag(K).reshape(D, m).sum(axis=1)[slots]                    # (..., S)
        per = w // m
        bounds = range(0, slots.shape[-1], per)
        win_sum = np.stack([Pl[..., a:a + per, a:a + per].sum(axis=(-2, -1)) for a in bounds], axis=-1)
        win_trace = np.stack([tr[..., a:a + per].sum(axis=-1) for a in bounds], axis=-1)
        sizes = np.array([m * len(range(a, min(a + per, slots.shape[-1]))) for a in bounds], dtype=float)
        return cls(K, m, slots, w, independent_copies, S, win_sum, win_trace, sizes)

    @property
    def n(self) -> int:
        return self.slots.shape[-1] * self.m

    @property
    def chunks(self) -> np.ndarray:
        """(..., n) the list's chunks as rows of K."""
        return (self.slots[..., :, None] * self.m + np.arange(self.m)).reshape(self.slots.shape[:-1] + (self.n,))

    def noise(self, batches: np.ndarray) -> np.ndarray:
        """V = mean_B 1_B'K1_B / b^2 - (1/n) sum_w 1_w'K1_w / n_w for batches (..., n/b, b) of list positions."""
        b = batches.shape[-1]
        if batches.shape[-2] * b != self.n:
            raise AnalysisError(f"batches {batches.shape} do not partition the {self.n} chunks")
        window_bounds(self.n, b, self.window)
        lead = np.broadcast_shapes(batches.shape[:-2], self.slots.shape[:-1])
        pos = np.broadcast_to(batches, lead + batches.shape[-2:]).reshape((-1,) + batches.shape[-2:])
        chunks = np.broadcast_to(self.chunks, lead + (self.n,)).reshape(-1, self.n)
        S = np.broadcast_to(self.S, lead).reshape(-1)
        within = np.concatenate([self._batch_sums(pos[i:i + _BLOCK], chunks[i:i + _BLOCK], S[i:i + _BLOCK])
                                 for i in range(0, len(pos), _BLOCK)]).reshape(lead) / b**2
        return within - (self.win_sum / self.sizes).sum(axis=-1) / self.n

    def _batch_sums(self, pos: np.ndarray, chunks: np.ndarray, S: np.ndarray) -> np.ndarray:
        """Mean over batches of 1_B'K1_B, copy pairs set to S; pos (L, nB, b), chunks (L, n), S (L,)."""
        ids = np.take_along_axis(chunks, pos.reshape(len(pos), -1), axis=1).reshape(pos.shape)
        Kb = self.K[ids[..., :, None], ids[..., None, :]]                       # (L, nB, b, b)
        slot, doc = pos // self.m, ids // self.m
        copies = (doc[..., :, None] == doc[..., None, :]) & (slot[..., :, None] != slot[..., None, :])
        if self.independent_copies:
            Kb = np.where(copies, S[:, None, None, None], Kb)
        return Kb.sum(axis=(-2, -1)).mean(axis=-1)

    def random_noise(self, b: int) -> np.ndarray:
        """E V_random = sum_w (n_w/n) (n_w - b)/(b (n_w - 1)) s2_w, s2_w = (tr K_w - 1_w'K1_w/n_w)/n_w."""
        nw = self.sizes
        s2 = (self.win_trace - self.win_sum / nw) / nw
        return (nw / self.n * (nw - b) / (b * (nw - 1)) * s2).sum(axis=-1)

    def ratio(self, batches: np.ndarray) -> np.ndarray:
        """The partition's design effect V / E V_random (NaN where E V_random is 0)."""
        e = self.random_noise(batches.shape[-1])
        v = self.noise(batches)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(e > 0, v / np.where(e > 0, e, 1), np.nan)


# --- a cell's inputs ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CellInputs:
    """What batching needs of one cell: its full Gram (rows in (document, chunk) order, exact squared norms on
    the diagonal, summed over the parameter groups) and the per-chunk scores."""

    model: str
    revision: str
    corpus: str
    chunk: int
    doc_ids: list[int]
    m: int
    gram: np.ndarray = field(repr=False)
    loss: np.ndarray = field(repr=False)                     # (n,) per-chunk model loss
    surprise: np.ndarray | None = field(default=None, repr=False)   # (n,) unigram surprise, None if unavailable
    surprise_note: str = ""                                  # why the surprise is not available
    vocab_size: int | None = None

    @property
    def name(self) -> str:
        return f"{self.model} {self.revision} {self.corpus} c{self.chunk}"

    @property
    def n(self) -> int:
        return len(self.gram)

    def scores(self, score: str) -> np.ndarray | None:
        if score not in SCORES:
            raise AnalysisError(f"unknown score {score!r}: expected one of {', '.join(SCORES)}")
        return self.loss if score == "loss" else self.surprise


def cell_gram(cell: Cell, group: str = ALL) -> np.ndarray:
    """The cell's full Gram of `group` ('all': the sum of the groups) with rows in (document, chunk) order and the
    exact squared norms on the diagonal. Only a single-file cell has every pair: cross-file pairs were never
    computed, so a cell of several files is refused."""
    if len(cell.shards) != 1:
        raise AnalysisError(f"cell {cell.name} has {len(cell.shards)} result files: batches mixing documents of "
                            "different files need cross-file Gram entries, which were never computed; batching "
                            "needs a cell measured in one file (e.g. `docgrad probe --docs 0:16`)")
    sh = cell.shards[0]
    groups = [g for g in cell.sums if g != ALL] if group == ALL else [group]
    missing = [g for g in groups if g not in sh.gram]
    if missing:
        raise AnalysisError(f"{sh.path}: no Gram for group(s) {missing} (has {sorted(sh.gram)})")
    K = sum(np.asarray(sh.gram[g], dtype=np.float64) for g in groups)
    K[np.diag_indices_from(K)] = sum(np.asarray(sh.sqnorm[g], dtype=np.float64) for g in groups)
    order = np.lexsort((sh.index[:, 1], sh.index[:, 0]))
    return K[np.ix_(order, order)]


def unigram_surprise(spans: np.ndarray, chunk: int, vocab_size: int) -> np.ndarray:
    """Per-chunk mean unigram surprise, (D, L) token spans -> (D, m), m = L // chunk.

    Targets are tokens 1..C-1 of each chunk (the tokens its loss scores); counts c[v] run over every target of
    every chunk (N = D m (C-1) tokens), p[v] = (c[v] + 1) / (N + V), and a chunk's score is the FP64 mean of
    -log p[y] over its targets."""
    spans = np.asarray(spans)
    D, L = spans.shape
    m = L // chunk
    if m < 1 or chunk < 2:
        raise AnalysisError(f"spans of {L} tokens hold no chunk of {chunk} tokens with a target")
    targets = spans[:, :m * chunk].reshape(D, m, chunk)[:, :, 1:].astype(np.int64)
    if targets.min() < 0 or targets.max() >= vocab_size:
        raise AnalysisError(f"token ids span [{targets.min()}, {targets.max()}], outside a vocabulary of {vocab_size}")
    counts = np.bincount(targets.ravel(), minlength=vocab_size).astype(np.float64)
    logp = np.log(counts + 1.0) - np.log(targets.size + float(vocab_size))
    return -logp[targets].mean(axis=-1)


def cell_inputs(cell: Cell, manifest: str | Path = "data/corpora/manifest.json",
                cache: str | Path = "data/corpora/cache", vocab_size: int | None = None) -> CellInputs:
    """The Gram, losses and (when the span cache is there) unigram surprise of a single-file cell.

    The vocabulary size is the manifest's tokenizer record, else `vocab_size`. The cached spans must be the ones
    the result file records (spans_sha256 per document); a missing cache or manifest leaves surprise None with
    the reason in surprise_note, so a page can say so instead of failing."""
    K = cell_gram(cell)
    loss = np.asarray(cell.loss, dtype=float).reshape(-1)
    base = dict(model=cell.model, revision=cell.revision, corpus=cell.corpus, chunk=cell.chunk,
                doc_ids=list(cell.doc_ids), m=cell.m, gram=K, loss=loss)
    fix = f"docgrad corpora build --corpus {cell.corpus}"
    try:
        spans = {s.doc: s for s in corpora.load_spans(cell.corpus, manifest, cache)}
        tok = corpora.read_manifest(manifest).get("tokenizer", {})
    except corpora.CorpusError as e:
        note = "span cache missing" if "missing" in str(e) else f"span cache unusable: {e}"
        return CellInputs(**base, surprise_note=f"not available ({note}: {fix})", vocab_size=vocab_size)
    V = tok.get("vocab_size") or vocab_size
    if not V:
        raise AnalysisError(f"{manifest} records no tokenizer vocab_size: pass vocab_size")
    recorded = cell.shards[0].meta.get("spans_sha256")
    absent = [d for d in cell.doc_ids if d not in spans]
    if absent:
        return CellInputs(**base, surprise_note=f"not available (documents {absent} not in the span cache: {fix})",
                          vocab_size=int(V))
    if isinstance(recorded, dict):
        differ = [d for d in cell.doc_ids if recorded.get(str(d)) not in (None, spans[d].sha256)]
        if differ:
            return CellInputs(**base, vocab_size=int(V), surprise_note=(
                f"not available (cached spans of documents {differ} are not the ones the result file measured)"))
    tokens = np.stack([spans[d].tokens for d in cell.doc_ids])
    s = unigram_surprise(tokens, cell.chunk, int(V))
    if s.shape[1] != cell.m:
        raise AnalysisError(f"{cell.corpus}: spans give {s.shape[1]} chunks per document, the cell has {cell.m}")
    return CellInputs(**base, surprise=s.reshape(-1), vocab_size=int(V))


# --- measurement with intervals ---------------------------------------------------------------------------

def rule_rng(seed: int, name: str, b: int, rule: str, stream: int) -> np.random.Generator:
    """Generator of one (cell, batch size, rule) and stream (0: the measured partition, 1: bootstrap, 2: draws),
    independent of which other cells, sizes and rules are computed."""
    return np.random.default_rng([int(seed), zlib.crc32(name.encode()), int(b), RULES.index(rule), int(stream)])


def bootstrap_slots(D: int, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """(resamples, D) documents drawn with replacement (docgrad.core.bootstrap.resample_indices), ascending."""
    return np.sort(bs.resample_indices(rng, D, resamples), axis=1)


@dataclass(frozen=True)
class RuleRatio:
    """One rule at one batch size on one cell: the design effect V / E V_random of its batches for the gradients,
    the unigram surprise (lexical; None without the span cache) and the per-chunk loss.

    random is the reference: its ratios are 1 (the closed form) and it has no bootstrap interval. *_ci: 95%
    document-bootstrap interval. *_draws: 95% range over `resamples` repeated draws of the rule's randomness on
    the measured cell (random: the Monte-Carlo distribution of single random partitions; balanced: of the
    within-stratum permutations; identity and coherent draw nothing: None)."""

    model: str
    revision: str
    corpus: str
    b: int
    rule: str
    window: int
    score: str
    gradient: float
    gradient_ci: tuple
    gradient_boot_median: float | None
    gradient_draws: tuple | None
    gradient_draws_mean: float | None
    lexical: float | None
    lexical_ci: tuple
    lexical_draws: tuple | None
    loss: float
    noise: float                 # V of the measured partition (random: E V_random)
    random_noise: float          # E V_random
    resamples: int

    def to_json(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


def measure(ci: CellInputs, sizes=(4, 8, 16, 32), rules=RULES, window: int = 0, score: str = "unigram",
            resamples: int = DEFAULT_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> list[RuleRatio]:
    """Every rule at every batch size on one cell (gradients, unigram surprise, loss), with the document
    bootstrap and the spread of the rules' random draws; `resamples` (0, or >= MIN_RESAMPLES) serves both.

    `score` ('unigram' or 'loss') orders balanced and coherent; without it (no span cache) they are left out.
    Randomness: the documents drawn are docgrad.results.stats.cell_rng's for (seed, cell); each (b, rule) has its own
    generators (rule_rng)."""
    resamples = check_resamples(resamples)
    order = ci.scores(score)
    rules = [r for r in rules if order is not None or r in ("identity", "random")]
    grams = {"gradient": ci.gram, "lexical": _outer(ci.surprise), "loss": _outer(ci.loss)}
    pops = {k: Population.of(K, ci.m, window=window) for k, K in grams.items() if K is not None}
    boot, boot_order = {}, None
    if resamples:
        docs_rng = np.random.default_rng([int(seed), zlib.crc32(ci.name.encode())])   # = stats.cell_rng
        slots = bootstrap_slots(len(ci.doc_ids), resamples, docs_rng)
        boot = {k: Population.of(pops[k].K, ci.m, slots, window, independent_copies=k == "gradient")
                for k in ("gradient", "lexical") if k in pops}
        boot_order = None if order is None else order[boot["gradient"].chunks]
    order = np.zeros(ci.n) if order is None else order
    rows = []
    for b in sizes:
        for rule in rules:
            rows.append(_rule_row(ci, pops, boot, order, boot_order, int(b), rule, window, score, resamples, seed))
    return rows


def _outer(s: np.ndarray | None) -> np.ndarray | None:
    """The Gram of a scalar score (its V is the between-batch variance of the batch-mean score)."""
    return None if s is None else np.outer(s, s)


def _rule_row(ci, pops, boot, order, boot_order, b, rule, window, score, resamples, seed) -> RuleRatio:
    """measure() for one (b, rule)."""
    batches = partition(rule, order, b, window, rule_rng(seed, ci.name, b, rule, 0))
    g, e = pops["gradient"], float(pops["gradient"].random_noise(b))
    if rule == "random":
        point = {k: 1.0 for k in pops}
        noise = e
    else:
        point = {k: float(p.ratio(batches)) for k, p in pops.items()}
        noise = float(g.noise(batches))
    ci_ = {"gradient": (None, None), "lexical": (None, None)}
    draws = {"gradient": None, "lexical": None}
    draws_mean = boot_median = None
    if resamples and rule != "random":
        scores = np.broadcast_to(order, (resamples, ci.n)) if boot_order is None else boot_order
        rb = partition(rule, scores, b, window, rule_rng(seed, ci.name, b, rule, 1))
        for k, p in boot.items():
            r = p.ratio(rb)
            ci_[k] = tuple(bs.percentile_ci(r, CI_LEVEL))
            boot_median = float(np.nanmedian(r)) if k == "gradient" else boot_median
    if resamples and rule in ("random", "balanced"):
        rd = partition(rule, np.broadcast_to(order, (resamples, ci.n)), b, window, rule_rng(seed, ci.name, b, rule, 2))
        for k in draws:
            if k in pops:
                r = pops[k].ratio(rd)
                draws[k] = tuple(bs.percentile_ci(r, CI_LEVEL))
                draws_mean = float(np.mean(r)) if k == "gradient" else draws_mean
    return RuleRatio(ci.model, ci.revision, ci.corpus, b, rule, int(window), score, point["gradient"],
                     ci_["gradient"], boot_median, draws["gradient"], draws_mean, point.get("lexical"), ci_["lexical"],
                     draws["lexical"], point["loss"], noise, e, resamples)


# --- identity against R(bC) -----------------------------------------------------------------------------------

def identity_to_R(ratio: float, K: np.ndarray, b: int, S_cross: float) -> float:
    """R(bC) from identity's ratio on the Gram K (b dividing the chunks per document, one window): undo the
    finite-population factor and estimate |gbar|^2 by S_cross instead of Q = 1'K1/n^2,

        A = Q + ratio (n - b)(T - Q) / ((n - 1) b),   R(bC) = b (A - S_cross) / (T - S_cross),   T = tr K / n."""
    n = len(K)
    Q, T = K.sum() / n**2, np.trace(K) / n
    A = Q + ratio * (n - b) * (T - Q) / ((n - 1) * b)
    return float(b * (A - S_cross) / (T - S_cross))


def compare_identity(ci: CellInputs, rows: list[RuleRatio], estimates) -> list[dict]:
    """Identity's ratio beside R(bC) of docgrad.results.stats (`estimates`: the cell's Estimates of group 'all'), for
    every measured b that divides the chunks per document, with |gbar|^2 as each estimates it (Q, S_cross)."""
    n, K = ci.n, ci.gram
    out = []
    for r in rows:
        W = r.b * ci.chunk
        if r.rule != "identity" or r.window not in (0, n) or ci.m % r.b or W not in estimates.R:
            continue
        R = estimates.R[W]
        out.append({"model": ci.model, "revision": ci.revision, "corpus": ci.corpus, "b": r.b,
                    "identity": r.gradient, "R_bC": R, "rel_diff": r.gradient / R - 1,
                    "R_from_identity": identity_to_R(r.gradient, K, r.b, estimates.S_cross),
                    "fpc": (n - 1) / (n - r.b), "Q": float(K.sum() / n**2), "S_cross": estimates.S_cross,
                    "sigma2": estimates.sigma2})
    return out


# --- presentation -------------------------------------------------------------------------------------------

def frame(rows: list[RuleRatio]):
    """One row per (cell, b, rule): ratios to random with their intervals (lo/hi), for tables and charts."""
    import pandas as pd

    recs = []
    for r in rows:
        draws = r.gradient_draws or (None, None)
        recs.append({"model": r.model, "revision": r.revision, "corpus": r.corpus, "b": r.b, "rule": r.rule,
                     "gradient": r.gradient, "gradient_lo": r.gradient_ci[0], "gradient_hi": r.gradient_ci[1],
                     "lexical": r.lexical, "lexical_lo": r.lexical_ci[0], "lexical_hi": r.lexical_ci[1],
                     "loss": r.loss, "draws_lo": draws[0], "draws_hi": draws[1]})
    return pd.DataFrame(recs, columns=["model", "revision", "corpus", "b", "rule", "gradient", "gradient_lo",
                                       "gradient_hi", "lexical", "lexical_lo", "lexical_hi", "loss", "draws_lo",
                                       "draws_hi"]).astype({"gradient_lo": float, "gradient_hi": float,
                                                            "lexical": float, "lexical_lo": float,
                                                            "lexical_hi": float, "draws_lo": float,
                                                            "draws_hi": float})


# --- reading -----------------------------------------------------------------------------------------------

# The batch-composition study's lexical ratios to (one) random partition, 64-row batches (cited in the docstring)
COMPOSITION_STUDY = {"balanced": 0.06704, "coherent": 58.4895, "b": 64, "window_batches": 32}
SMALL_CHANGE = 0.1   # reading: a gradient-noise change below 10% counts as "barely changes"
WEAK_POWER = 0.5     # reading: below this median power the gradient noise moves less than the square root of the
                     # lexical change, and lexical balance "does not predict gradient-noise balance in size"


def elasticity(gradient: float, lexical: float) -> float:
    """ln(gradient ratio) / ln(lexical ratio): the power of the lexical change that the gradient noise follows
    (1: as large on a log scale, 0: unmoved); NaN where the lexical ratio is 1 or not positive."""
    if lexical is None or not lexical > 0 or lexical == 1 or not gradient > 0:
        return float("nan")
    return float(np.log(gradient) / np.log(lexical))


def summary(rows: list[RuleRatio], comparisons: list[dict] = (), control: str = CONTROL) -> dict:
    """The numbers the page's reading states, from measure() rows (and compare_identity() rows)."""
    out: dict = {"rules": {}, "identity": {}, "control": control,
                 "score": next((r.score for r in rows if r.rule in ("balanced", "coherent")), None)}
    for rule, side in (("balanced", -1), ("coherent", 1)):
        rs = [r for r in rows if r.rule == rule and r.lexical is not None]
        if not rs:
            continue
        e = np.array([elasticity(r.gradient, r.lexical) for r in rs])
        beyond = [r for r in rs if r.gradient_ci[0] is not None
                  and (r.gradient_ci[1] < 1 if side < 0 else r.gradient_ci[0] > 1)]
        keep = [(r.gradient - 1, r.gradient_boot_median - 1) for r in rs
                if r.gradient_boot_median is not None and abs(r.gradient - 1) > 0.02]
        out["rules"][rule] = {
            "cells": len(rs), "lexical_range": [min(r.lexical for r in rs), max(r.lexical for r in rs)],
            "gradient_range": [min(r.gradient for r in rs), max(r.gradient for r in rs)],
            "elasticity_median": float(np.nanmedian(e)) if np.isfinite(e).any() else None,
            "predicted_side": len(beyond), "with_interval": sum(r.gradient_ci[0] is not None for r in rs),
            "boot_effect_kept": float(np.median([bm / pt for pt, bm in keep])) if keep else None}
    rand = [r for r in rows if r.rule == "random" and r.gradient_draws is not None]
    if rand:
        out["random_draws"] = {
            "gradient": [min(r.gradient_draws[0] for r in rand), max(r.gradient_draws[1] for r in rand)],
            "lexical": [min(r.lexical_draws[0] for r in rand if r.lexical_draws),
                        max(r.lexical_draws[1] for r in rand if r.lexical_draws)]
            if any(r.lexical_draws for r in rand) else None,
            "gradient_mean_range": [min(r.gradient_draws_mean for r in rand), max(r.gradient_draws_mean for r in rand)]}
    sizes = sorted({r.b for r in rows})
    by = {(r.model, r.revision, r.corpus, r.b, r.rule): r for r in rows}
    cells = list(dict.fromkeys((r.model, r.revision, r.corpus) for r in rows))
    ident = []
    for cell in cells:
        for b in sizes:
            i, c, bal = (by.get(cell + (b, rule)) for rule in ("identity", "coherent", "balanced"))
            if i is None:
                continue
            ident.append({"corpus": cell[2], "b": b, "identity": i.gradient, "identity_ci": list(i.gradient_ci),
                          "coherent": None if c is None else c.gradient,
                          "balanced": None if bal is None else bal.gradient})
    studied = [x for x in ident if x["corpus"] != control and x["coherent"] is not None]
    out["identity"] = {
        "at_largest_b": [x for x in ident if x["b"] == (sizes[-1] if sizes else None)],
        "above_coherent": sum(x["identity"] > x["coherent"] for x in studied), "compared": len(studied),
        "max": max((x["identity"] for x in ident if x["corpus"] != control), default=None),
        "control_range": [min((x["identity"] for x in ident if x["corpus"] == control), default=None),
                          max((x["identity"] for x in ident if x["corpus"] == control), default=None)],
        "balanced_best_saving": max((1 - x["balanced"] for x in ident if x["balanced"] is not None), default=None)}
    if comparisons:
        d = [c["rel_diff"] for c in comparisons]
        err = [abs(c["R_from_identity"] / c["R_bC"] - 1) for c in comparisons]
        out["identity_vs_R"] = {"rel_diff_range": [min(d), max(d)], "max_conversion_error": max(err),
                                "Q_over_S_cross": {c["corpus"]: c["Q"] / c["S_cross"] for c in comparisons}}
    eb, ec = (out["rules"].get(k, {}).get("elasticity_median") for k in ("balanced", "coherent"))
    out["composition_study_implied"] = {
        "balanced": None if eb is None else float(COMPOSITION_STUDY["balanced"] ** eb),
        "coherent": None if ec is None else float(COMPOSITION_STUDY["coherent"] ** ec)}
    return out


def _pct(x: float) -> str:
    return f"{x:+.0%}" if abs(x) >= 0.01 else f"{x:+.1%}"


def composition_reading(s: dict) -> list[str]:
    """Plain-words reading of summary(): does lexical balance predict gradient-noise balance, what
    document-contiguous batching costs, and what that implies for the batch-composition study's null result."""
    lines = []
    bal, coh = s["rules"].get("balanced"), s["rules"].get("coherent")
    if bal and coh:
        eb, ec = bal["elasticity_median"], coh["elasticity_median"]
        sort = " (sorted by model loss)" if s.get("score") == "loss" else ""
        weak = max(abs(eb), abs(ec)) < WEAK_POWER
        lines.append(
            f"**Lexical balance {'does not predict' if weak else 'predicts'} gradient-noise balance"
            f"{' in size' if weak else ''}.** Balanced batches{sort} cut the between-batch variance of mean unigram "
            f"surprise to {bal['lexical_range'][0]:.3f}–{bal['lexical_range'][1]:.3f}× that of random batches, but "
            f"the gradient noise only to {bal['gradient_range'][0]:.3f}–{bal['gradient_range'][1]:.3f}×; coherent "
            f"batches raise the surprise variance {coh['lexical_range'][0]:.1f}–{coh['lexical_range'][1]:.1f}× and "
            f"the gradient noise {coh['gradient_range'][0]:.2f}–{coh['gradient_range'][1]:.2f}×. On a log scale "
            f"the gradient noise follows the lexical statistic with a median power of {eb:.3f} (balanced) and "
            f"{ec:.3f} (coherent): a tenfold cut in surprise variance goes with {_pct(10 ** -eb - 1)} gradient "
            f"noise, a tenfold rise with {_pct(10 ** ec - 1)}. The direction holds where the interval excludes 1: "
            f"{bal['predicted_side']} of {bal['with_interval']} balanced and {coh['predicted_side']} of "
            f"{coh['with_interval']} coherent (corpus, b) cells.")
    idn = s["identity"]
    top = [x for x in idn["at_largest_b"] if x["corpus"] != s["control"]]
    if top:
        b = top[0]["b"]
        each = "; ".join(
            f"{x['corpus']} {x['identity']:.2f}×"
            + (f" [{x['identity_ci'][0]:.2f}, {x['identity_ci'][1]:.2f}]" if x["identity_ci"][0] is not None else "")
            + (f" vs coherent {x['coherent']:.2f}× and balanced {x['balanced']:.2f}×" if x["coherent"] is not None
               else "") for x in top)
        most = idn["compared"] and idn["above_coherent"] == idn["compared"]
        head = ("Document-contiguous batches cost more than either lexical rule" if most else
                "What document-contiguous batches cost")
        text = f"**{head}.** At b = {b}, identity batches carry {each} the gradient noise of random batches."
        if idn["compared"]:
            text += (f" Identity exceeds coherent in {idn['above_coherent']} of {idn['compared']} non-control "
                     f"(corpus, b) cells")
            if idn["balanced_best_saving"] is not None:
                text += f", while balancing saves at most {idn['balanced_best_saving']:.1%} of random's noise"
            text += "."
        lo, hi = idn["control_range"]
        if lo is not None:
            text += f" In the {s['control']} control identity is {lo:.2f}–{hi:.2f}× (no long documents to share)."
        lines.append(text)
    rd = s.get("random_draws")
    if rd:
        text = (f"**Random batches are the reference** (ratio 1, the closed form; the mean of the Monte-Carlo draws "
                f"is {rd['gradient_mean_range'][0]:.3f}–{rd['gradient_mean_range'][1]:.3f}). A single random "
                f"partition lands anywhere in {rd['gradient'][0]:.2f}–{rd['gradient'][1]:.2f}× for the gradients")
        if rd["lexical"]:
            text += f" and {rd['lexical'][0]:.2f}–{rd['lexical'][1]:.2f}× for the surprise (95% ranges)"
        lines.append(text + " at these cells' n/b batches: a ratio to a single random draw carries that spread "
                     "(the study's thousands of batches make its random arm much steadier).")
    cmp_ = s.get("identity_vs_R")
    if cmp_:
        q = ", ".join(f"{k} {v:.2f}" for k, v in cmp_["Q_over_S_cross"].items())
        lines.append(
            f"**Identity is R(bC) of notebook 04 up to the estimate of |ḡ|².** The two differ by "
            f"{_pct(cmp_['rel_diff_range'][0])} to {_pct(cmp_['rel_diff_range'][1])}: here |ḡ|² is the cell's "
            f"1ᵀK1/n² (Q/S_cross: {q}) with the finite-population factor (n−1)/(n−b); with S_cross and no factor "
            f"the identity ratio reproduces R(bC) to {cmp_['max_conversion_error']:.0e}.")
    imp = s["composition_study_implied"]
    if bal and coh and imp["balanced"] is not None and s.get("score", "unigram") == "unigram":
        text = (f"**For the batch-composition study's null result:** its balanced and coherent rules moved surprise "
                f"variance to {COMPOSITION_STUDY['balanced']}× and {COMPOSITION_STUDY['coherent']}× of random. "
                f"Carried over at the median powers measured here, that is a gradient-noise change of about "
                f"{_pct(imp['balanced'] - 1)} (balanced) and {_pct(imp['coherent'] - 1)} (coherent). ")
        if abs(imp["balanced"] - 1) < SMALL_CHANGE:
            text += ("Balancing by surprise barely changes the gradient noise, so no measurable learning gain was to "
                     "be expected from it")
        else:
            text += "Balancing by surprise changes the gradient noise enough that a learning effect could have shown"
        if imp["coherent"] > 1:
            text += "; coherent's small loss penalty is in the direction of its extra noise"
        text += ". "
        if idn["max"] is not None and idn["max"] > max(imp["coherent"], 1 / imp["balanced"]):
            text += (f"The null says little about batch composition in general: a rule that moves the gradient "
                     f"noise itself, like document contiguity (up to {idn['max']:.1f}× here), is the stronger test. ")
        lines.append(text + "(Other model, row length and batch size: the powers, not the ratios, are carried over.)")
    kept = {rule: r["boot_effect_kept"] for rule, r in s["rules"].items() if r["boot_effect_kept"] is not None}
    if kept and min(kept.values()) < 0.9:
        lines.append(
            "*Intervals of the sorted rules lean toward 1:* in a bootstrap resample the copies of a document share "
            "their scores, so sorted batches hold copies, which count as independent documents; the resamples keep "
            "a median " + " and ".join(f"{v:.0%} ({k})" for k, v in kept.items()) + " of the estimated effect "
            "(ratio − 1), so read the intervals as conservative about the distance from 1.")
    return lines


def _fmt(x, ci=None, digits=3) -> str:
    if x is None or x != x:
        return "n/a"
    s = f"{x:.{digits}f}"
    if ci is not None and ci[0] is not None:
        s += f" [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"
    return s


def table(rows: list[RuleRatio], lexical_note: dict | None = None):
    """Ratio to random per (cell, b) and rule: gradient noise and lexical (unigram surprise) statistic, each
    'estimate [95% interval]'; lexical_note maps a corpus without surprise to the text shown instead."""
    import pandas as pd

    lexical_note = lexical_note or {}
    models = {(r.model, r.revision) for r in rows}
    recs: dict = {}
    for r in rows:
        if r.rule == "random":
            continue
        key = ((r.model.split("/")[-1],) if len(models) > 1 else ()) + (r.corpus, r.b)
        rec = recs.setdefault(key, {})
        rec[(r.rule, "gradient noise")] = _fmt(r.gradient, r.gradient_ci)
        rec[(r.rule, "lexical")] = (_fmt(r.lexical, r.lexical_ci) if r.lexical is not None
                                    else lexical_note.get(r.corpus, "not available"))
    names = (["model"] if len(models) > 1 else []) + ["corpus", "b"]
    cols = [(rule, m) for rule in ("identity", "balanced", "coherent") for m in ("gradient noise", "lexical")]
    df = pd.DataFrame.from_dict(recs, orient="index")
    df = df.reindex(columns=[c for c in cols if c in df.columns]).fillna("not formed (no unigram surprise)")
    df.index = pd.MultiIndex.from_tuples(df.index, names=names)
    df.columns = pd.MultiIndex.from_tuples(df.columns, names=["rule", "ratio to random"])
    return df
