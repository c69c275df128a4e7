"""Batch composition as gradient noise: the formula against explicit vectors, random's closed form against
enumeration and Monte Carlo, identity against R(bC), the rules, the bootstrap's copies, scores and the reading."""

import itertools
import json
import zlib

import numpy as np
import pytest
from docgrad.core import bootstrap as bs
from docgrad.core.constants import GROUPS
from docgrad.errors import AnalysisError
from docgrad.results import batching as B
from docgrad.results import stats
from docgrad.results.synthetic import Profile, sample_gradients, write_gram_cell

C = 512


def _vectors(D=6, m=8, p=20, seed=0):
    """Explicit gradients with a shared mean and within-document correlation, rows (document, chunk)."""
    rng = np.random.default_rng(seed)
    return sample_gradients(rng, D, m, p, Profile(exch=0.3, ar=0.3, phi=0.7), 1.0, rng.standard_normal(p) * 0.5)


def _brute_noise(X, chunks, batches, window):
    """mean over batches of |mean of the batch's vectors - mean of its window's vectors|^2, by definition."""
    Xl = X[chunks]
    n, b = len(Xl), batches.shape[-1]
    w = n if window == 0 else window
    dev = []
    for batch in batches:
        a = (batch[0] // w) * w
        dev.append(np.sum((Xl[batch].mean(0) - Xl[a:a + w].mean(0)) ** 2))
    return float(np.mean(dev))


def _split(K, weights=(0.4, 0.3, 0.2, 0.1)):
    return {g: w * K for g, w in zip(GROUPS, weights)}


def _cell(tmp_path, X, n_docs, m, **kw):
    K = X @ X.T
    write_gram_cell(tmp_path, _split(K), n_docs=n_docs, m=m, shard_size=kw.pop("shard_size", n_docs), **kw)
    (cell,) = stats.load_cells(tmp_path).values()
    return cell


# --- the formula ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("window", [0, 16, 24])
@pytest.mark.parametrize("b", [2, 4, 8])
@pytest.mark.parametrize("rule", B.RULES)
def test_noise_equals_brute_force_over_explicit_vectors(rule, b, window):
    X = _vectors()
    if window % b:
        pytest.skip("window must hold whole batches")
    score = np.random.default_rng(1).standard_normal(len(X))
    batches = B.partition(rule, score, b, window, np.random.default_rng(2))
    pop = B.Population.of(X @ X.T, 8, window=window)
    assert float(pop.noise(batches)) == pytest.approx(_brute_noise(X, np.arange(len(X)), batches, window), rel=1e-10)


@pytest.mark.parametrize("window", [0, 4])
def test_random_closed_form_equals_the_average_over_every_batch_of_b_chunks(window):
    """A random partition's batch is a simple random sample without replacement: average over all subsets."""
    X = _vectors(D=2, m=4, p=5)
    b, n = 2, 8
    w = n if window == 0 else window
    devs = []
    for a in range(0, n, w):
        devs += [np.sum((X[list(s)].mean(0) - X[a:a + w].mean(0)) ** 2)
                 for s in itertools.combinations(range(a, a + w), b)]
    # every window has the same number of batches, so the mean over windows of subset means is the plain mean
    pop = B.Population.of(X @ X.T, 4, window=window)
    assert float(pop.random_noise(b)) == pytest.approx(np.mean(devs), rel=1e-12)


def test_random_closed_form_matches_monte_carlo():
    X = _vectors(D=8, m=8)
    pop = B.Population.of(X @ X.T, 8)
    draws = B.partition("random", np.zeros((20000, 64)), 4, 0, np.random.default_rng(3))
    r = pop.ratio(draws)
    assert abs(r.mean() - 1) < 3 * r.std() / np.sqrt(len(r))


def test_scalar_score_gives_the_ratio_of_between_batch_variances():
    s = np.random.default_rng(4).gamma(2.0, 1.0, 64)
    batches = B.partition("coherent", s, 8)
    pop = B.Population.of(np.outer(s, s), 8)
    means = s[batches].mean(axis=-1)
    assert float(pop.noise(batches)) == pytest.approx(np.var(means), rel=1e-10)
    srs = np.var(s) / 8 * (64 - 8) / (64 - 1)             # variance of a mean of 8 drawn without replacement
    assert float(pop.ratio(batches)) == pytest.approx(np.var(means) / srs, rel=1e-10)


# --- identity and R(bC) -------------------------------------------------------------------------------------

@pytest.mark.parametrize("b", [2, 4, 8, 16])
def test_identity_ratio_is_R_of_stats_up_to_the_mean_gradient_estimate(tmp_path, b):
    D, m = 8, 16
    X = _vectors(D=D, m=m, p=30, seed=5)
    cell = _cell(tmp_path, X, D, m)
    K = B.cell_gram(cell)
    n = D * m
    ratio = float(B.Population.of(K, m).ratio(B.partition("identity", np.zeros(n), b)))
    est = stats.estimate_cell(cell, resamples=0).all
    R = est.R[b * C]
    # the same formula with |gbar|^2 = Q (this page) or S_cross (notebook 04) and the finite-population factor
    A = np.mean([np.sum(X[i:i + b].mean(0) ** 2) for i in range(0, n, b)])
    T, Q = np.trace(K) / n, K.sum() / n**2
    assert ratio == pytest.approx((n - 1) / (n - b) * b * (A - Q) / (T - Q), rel=1e-10)
    assert R == pytest.approx(b * (A - est.S_cross) / (T - est.S_cross), rel=1e-10)
    assert B.identity_to_R(ratio, K, b, est.S_cross) == pytest.approx(R, rel=1e-10)


def test_compare_identity_lists_each_b_that_divides_the_document():
    X = _vectors(D=4, m=8)
    ci = B.CellInputs("t/m", "r0", "BOOKS", C, [0, 1, 2, 3], 8, X @ X.T, np.ones(32))
    rows = B.measure(ci, sizes=(2, 4, 8), score="loss", resamples=0)

    class Est:
        R = {2 * C: 1.5, 4 * C: 2.0}
        S_cross, sigma2 = 0.1, 1.0
    out = B.compare_identity(ci, rows, Est)
    assert [c["b"] for c in out] == [2, 4]
    assert out[0]["rel_diff"] == pytest.approx(out[0]["identity"] / 1.5 - 1)


# --- rules -----------------------------------------------------------------------------------------------------

def test_partitions_cover_every_chunk_once_and_stay_within_their_windows():
    s = np.random.default_rng(6).standard_normal((3, 48))
    for rule in B.RULES:
        p = B.partition(rule, s, 4, 16, np.random.default_rng(7))
        assert p.shape == (3, 12, 4)
        for row in p:
            assert sorted(row.ravel()) == list(range(48))
            assert all(len({x // 16 for x in batch}) == 1 for batch in row)


def test_balanced_takes_one_chunk_from_each_stratum_and_coherent_groups_neighbours_in_sorted_order():
    s = np.random.default_rng(8).permutation(32).astype(float)     # distinct scores: stratum of chunk = rank // 8
    rank = np.argsort(np.argsort(s))
    bal = B.partition("balanced", s, 4, 0, np.random.default_rng(9))
    assert all(sorted(rank[batch] // 8) == [0, 1, 2, 3] for batch in bal)
    coh = B.partition("coherent", s, 4)
    assert sorted(sorted(rank[batch]) for batch in coh) == [list(range(i, i + 4)) for i in range(0, 32, 4)]
    ident = B.partition("identity", s, 4)
    assert ident.tolist() == np.arange(32).reshape(8, 4).tolist()


def test_sorting_ties_are_broken_by_position():
    s = np.array([1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0])
    assert B.partition("coherent", s, 2).tolist() == [[1, 3], [5, 7], [0, 2], [4, 6]]


def test_random_rules_need_a_generator_and_are_reproducible_with_one():
    s = np.arange(16.0)
    with pytest.raises(AnalysisError, match="seeded numpy Generator"):
        B.partition("balanced", s, 4)
    a = B.partition("balanced", s, 4, 0, np.random.default_rng(1))
    assert np.array_equal(a, B.partition("balanced", s, 4, 0, np.random.default_rng(1)))


@pytest.mark.parametrize("b, window, m, match", [(5, 0, 8, "does not divide"), (4, 12, 8, "whole number of documents"),
                                                 (8, 8, 8, "at least two")])
def test_bad_batch_sizes_and_windows_are_refused(b, window, m, match):
    X = _vectors(D=4, m=8)
    with pytest.raises(AnalysisError, match=match):
        pop = B.Population.of(X @ X.T, m, window=window)
        pop.noise(B.partition("identity", np.zeros(32), b, window))


# --- bootstrap ----------------------------------------------------------------------------------------------

def test_copies_of_a_document_count_as_distinct_documents():
    """A resample [0, 0, 1, 2]: pairs across the two copies of document 0 get the resample's cross-document mean
    (pairs of different documents only), everything else is the Gram's own entry."""
    X = _vectors(D=3, m=4, p=10, seed=10)
    K, m, slots = X @ X.T, 4, np.array([0, 0, 1, 2])
    chunks = (slots[:, None] * m + np.arange(m)).ravel()
    Kl = K[np.ix_(chunks, chunks)]
    doc, slot = chunks // m, np.arange(16) // m
    cross = doc[:, None] != doc[None, :]
    S = Kl[cross].mean()
    Kl = np.where((doc[:, None] == doc[None, :]) & (slot[:, None] != slot[None, :]), S, Kl)
    batches = B.partition("random", np.zeros(16), 4, 0, np.random.default_rng(11))
    pop = B.Population.of(K, m, slots)
    V = np.mean([Kl[np.ix_(bt, bt)].sum() / 16 for bt in batches]) - Kl.sum() / 16**2
    E = (16 - 4) / (4 * 15) * (np.trace(Kl) - Kl.sum() / 16) / 16
    assert float(pop.noise(batches)) == pytest.approx(V, rel=1e-10)
    assert float(pop.random_noise(4)) == pytest.approx(E, rel=1e-10)
    kept = B.Population.of(K, m, slots, independent_copies=False)
    Kraw = K[np.ix_(chunks, chunks)]
    assert float(kept.noise(batches)) == pytest.approx(
        np.mean([Kraw[np.ix_(bt, bt)].sum() / 16 for bt in batches]) - Kraw.sum() / 16**2, rel=1e-10)


def test_vectorised_resamples_equal_one_population_each():
    X = _vectors(D=4, m=8)
    K = X @ X.T
    slots = B.bootstrap_slots(4, 6, np.random.default_rng(12))
    pop = B.Population.of(K, 8, slots, window=16)
    batches = B.partition("random", np.zeros((6, 32)), 4, 16, np.random.default_rng(13))
    each = [float(B.Population.of(K, 8, slots[i], window=16).ratio(batches[i])) for i in range(6)]
    assert np.allclose(pop.ratio(batches), each, rtol=1e-12, equal_nan=True)   # NaN: one document drawn 4 times, no S


def test_bootstrap_draws_the_documents_docgrad_stats_draws(tmp_path):
    X = _vectors(D=6, m=8)
    cell = _cell(tmp_path, X, 6, 8)
    ours = B.bootstrap_slots(6, 50, np.random.default_rng([7, zlib.crc32(cell.name.encode())]))
    theirs = np.sort(bs.resample_indices(stats.cell_rng(7, cell), 6, 50), axis=1)
    assert np.array_equal(ours, theirs)


# --- a cell's inputs ----------------------------------------------------------------------------------------

def test_cell_gram_has_the_exact_squared_norms_and_refuses_a_cell_of_several_files(tmp_path):
    X = _vectors(D=4, m=8)
    K = X @ X.T
    sq = {g: w * np.diag(K) * 1.01 for g, w in zip(GROUPS, (0.4, 0.3, 0.2, 0.1))}   # sketch != exact on the diagonal
    write_gram_cell(tmp_path / "one", _split(K), n_docs=4, m=8, shard_size=4, sqnorms=sq)
    (cell,) = stats.load_cells(tmp_path / "one").values()
    G = B.cell_gram(cell)
    assert np.allclose(np.diag(G), 1.01 * np.diag(K)) and np.allclose(G - np.diag(np.diag(G)), K - np.diag(np.diag(K)))
    write_gram_cell(tmp_path / "two", _split(K), n_docs=4, m=8, shard_size=2)
    (cell2,) = stats.load_cells(tmp_path / "two").values()
    with pytest.raises(AnalysisError, match="2 result files.*cross-file"):
        B.cell_gram(cell2)


def test_unigram_surprise_is_the_add_one_mean_over_each_chunks_targets():
    rng = np.random.default_rng(14)
    spans = rng.integers(0, 50, size=(3, 40))
    V, Cc = 64, 8
    out = B.unigram_surprise(spans, Cc, V)
    targets = [spans[d, k * Cc + 1:(k + 1) * Cc] for d in range(3) for k in range(5)]
    counts = {}
    for t in targets:
        for y in t:
            counts[int(y)] = counts.get(int(y), 0) + 1
    N = sum(counts.values())
    naive = [np.mean([-np.log((counts.get(int(y), 0) + 1) / (N + V)) for y in t]) for t in targets]
    assert out.shape == (3, 5) and np.allclose(out.ravel(), naive, rtol=1e-14)


def test_missing_span_cache_leaves_surprise_unavailable_with_the_fix(tmp_path):
    X = _vectors(D=4, m=8)
    cell = _cell(tmp_path / "r", X, 4, 8)
    ci = B.cell_inputs(cell, manifest="data/corpora/manifest.json", cache=tmp_path / "empty")
    assert ci.surprise is None
    assert ci.surprise_note == "not available (span cache missing: docgrad corpora build --corpus BOOKS)"
    rows = B.measure(ci, sizes=(4,), resamples=0)            # unigram order unavailable: identity and random only
    assert [r.rule for r in rows] == ["identity", "random"] and rows[0].lexical is None


def test_span_cache_gives_surprise_only_for_the_spans_the_result_file_measured(tmp_path):
    from docgrad.core.constants import SPAN_TOKENS
    from docgrad.corpora import build as corpora

    tokens = np.random.default_rng(15).integers(0, 100, size=(2, SPAN_TOKENS)).astype(np.int32)
    docs = [{"doc": d, "span_sha256": corpora.span_sha256(tokens[d]), "title": f"d{d}", "source": {}} for d in (0, 1)]
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"format": corpora.MANIFEST_FORMAT, "tokenizer": {"vocab_size": 128},
                                    "corpora": {"BOOKS": {"documents": docs}}}))
    corpora.write_spans(tmp_path / "cache", "BOOKS", tokens)
    m = SPAN_TOKENS // C
    X = _vectors(D=2, m=m, p=8)
    cell = _cell(tmp_path / "r", X, 2, m)
    ci = B.cell_inputs(cell, manifest, tmp_path / "cache")
    assert ci.vocab_size == 128
    assert np.allclose(ci.surprise, B.unigram_surprise(tokens, C, 128).ravel())
    meta_path = cell.files[0].with_suffix(".json")
    meta = json.loads(meta_path.read_text())
    meta["spans_sha256"] = {"0": docs[0]["span_sha256"], "1": "0" * 64}
    meta_path.write_text(json.dumps(meta))
    (cell,) = stats.load_cells(tmp_path / "r").values()
    ci = B.cell_inputs(cell, manifest, tmp_path / "cache")
    assert ci.surprise is None and "documents [1] are not the ones the result file measured" in ci.surprise_note


# --- measure and reading ------------------------------------------------------------------------------------

def _inputs(D=8, m=16, seed=16):
    X = _vectors(D=D, m=m, p=24, seed=seed)
    surprise = np.repeat(np.arange(D, dtype=float), m) + np.random.default_rng(seed).normal(0, 0.3, D * m)
    return B.CellInputs("t/m", "r0", "BOOKS", C, list(range(D)), m, X @ X.T, -surprise, surprise)


def test_measure_is_reproducible_per_seed_and_random_is_the_reference():
    ci = _inputs()
    a = B.measure(ci, sizes=(4, 8), resamples=60, seed=1)
    assert [x.to_json() for x in a] == [x.to_json() for x in B.measure(ci, sizes=(4, 8), resamples=60, seed=1)]
    rand = [r for r in a if r.rule == "random"]
    assert all(r.gradient == r.lexical == r.loss == 1.0 and r.gradient_ci == (None, None) for r in rand)
    assert all(0.8 < r.gradient_draws_mean < 1.2 and r.gradient_draws[0] < 1 < r.gradient_draws[1] for r in rand)
    bal, coh = (next(r for r in a if r.rule == k and r.b == 8) for k in ("balanced", "coherent"))
    assert bal.lexical < 0.2 and coh.lexical > 5           # surprise is document-level here: sorting separates it
    assert coh.gradient > 1 and bal.gradient_ci[0] <= bal.gradient_ci[1]
    other = B.measure(ci, sizes=(8,), resamples=60, seed=2)
    assert next(r for r in other if r.rule == "balanced").gradient != bal.gradient      # another seed, another draw


def test_measure_refuses_too_few_resamples_and_unknown_scores():
    ci = _inputs()
    with pytest.raises(AnalysisError, match="resamples"):
        B.measure(ci, resamples=10)
    with pytest.raises(AnalysisError, match="unknown score"):
        B.measure(ci, score="entropy")


def _row(corpus, b, rule, g, lex, ci=(0.9, 1.1), boot=None):
    return B.RuleRatio("t/m", "r0", corpus, b, rule, 0, "unigram", g, ci, boot, None, None, lex, (None, None), None,
                       1.0, 1.0, 1.0, 100)


def test_reading_says_lexical_balance_does_not_predict_gradient_noise_when_the_gradient_barely_moves():
    rows = [_row("BOOKS", 8, "identity", 3.0, 8.0, (2.5, 3.5)), _row("BOOKS", 8, "balanced", 0.98, 0.05),
            _row("BOOKS", 8, "coherent", 1.2, 8.0, (1.1, 1.3)), _row("WEB", 8, "identity", 1.01, 1.0)]
    s = B.summary(rows)
    assert s["rules"]["balanced"]["elasticity_median"] == pytest.approx(np.log(0.98) / np.log(0.05))
    text = "\n".join(B.composition_reading(s))
    assert "does not predict gradient-noise balance" in text
    assert "BOOKS 3.00× [2.50, 3.50] vs coherent 1.20× and balanced 0.98×" in text
    assert "Identity exceeds coherent in 1 of 1" in text and "WEB control identity is 1.01–1.01×" in text
    implied = B.COMPOSITION_STUDY["balanced"] ** (np.log(0.98) / np.log(0.05))
    assert s["composition_study_implied"]["balanced"] == pytest.approx(implied)
    assert f"gradient-noise change of about {implied - 1:+.0%} (balanced)" in text
    assert "barely changes the gradient noise" in text and "like document contiguity (up to 3.0× here)" in text


def test_reading_says_lexical_balance_predicts_when_the_gradient_follows_it():
    rows = [_row("BOOKS", 8, "identity", 3.0, 8.0), _row("BOOKS", 8, "balanced", 0.3, 0.1, (0.2, 0.4)),
            _row("BOOKS", 8, "coherent", 4.0, 8.0, (3.0, 5.0))]
    text = "\n".join(B.composition_reading(B.summary(rows)))
    assert "**Lexical balance predicts gradient-noise balance.**" in text
    assert "1 of 1 balanced and 1 of 1 coherent" in text
    assert "a learning effect could have shown" in text and "barely" not in text


def test_table_shows_estimate_and_interval_and_the_note_where_surprise_is_missing():
    rows = [_row("BOOKS", 8, "identity", 3.0, 8.0, (2.5, 3.5)), _row("CODE", 8, "identity", 2.0, None)]
    t = B.table(rows, {"CODE": "not available (span cache missing: docgrad corpora build --corpus CODE)"})
    assert t.loc[("BOOKS", 8), ("identity", "gradient noise")] == "3.000 [2.500, 3.500]"
    assert t.loc[("CODE", 8), ("identity", "lexical")].startswith("not available (span cache missing")


def test_reading_names_a_loss_sort_and_then_leaves_the_surprise_study_out():
    rows = [_row("BOOKS", 8, "identity", 3.0, 8.0), _row("BOOKS", 8, "balanced", 0.98, 0.5),
            _row("BOOKS", 8, "coherent", 1.2, 2.0, (1.1, 1.3))]
    rows = [B.RuleRatio(**{**r.__dict__, "score": "loss"}) for r in rows]
    text = "\n".join(B.composition_reading(B.summary(rows)))
    assert "Balanced batches (sorted by model loss)" in text and "null result" not in text
