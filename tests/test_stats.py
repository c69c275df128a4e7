"""Estimators against known answers: population Grams, sampled gradients, identities, pooling of shards."""

import json

import numpy as np
import pytest
from docgrad.results.cells import load_cells
from docgrad.core import bootstrap as bs
from docgrad.core.constants import GROUPS
from docgrad.fileio import to_jsonable
from docgrad.results import stats
from docgrad.results.synthetic import Profile, population_gram, sample_gradients, write_gram_cell

C = 512


def _split(K, weights=(0.4, 0.3, 0.2, 0.1)):
    """Split one Gram into the four groups (they add back up to K)."""
    return {g: w * K for g, w in zip(GROUPS, weights)}


def _one_cell(tmp_path, K, n_docs, m, shard_size, **kw):
    write_gram_cell(tmp_path, _split(K), n_docs=n_docs, m=m, shard_size=shard_size, **kw)
    cells = load_cells(tmp_path)
    assert len(cells) == 1
    return next(iter(cells.values()))


def _point(cell, group="all") -> stats.Estimates:
    est = stats.estimate_cell(cell, resamples=0)
    return est.all if group == "all" else est.groups[group]


@pytest.mark.parametrize("shard_size", [16, 4])
def test_exchangeable_population_gram_recovers_rho_R_and_B_simple_exactly(tmp_path, shard_size):
    prof = Profile(exch=0.2)
    n_docs, m, sigma2, mu2 = 16, 32, 3.0, 0.25
    cell = _one_cell(tmp_path, population_gram(n_docs, m, prof, sigma2, mu2), n_docs, m, shard_size)
    for group in ("all", "attn", "other"):
        scale = 1.0 if group == "all" else dict(zip(GROUPS, (0.4, 0.3, 0.2, 0.1)))[group]
        st = _point(cell, group)
        assert st.S_cross == pytest.approx(mu2 * scale, rel=1e-12)
        assert st.sigma2 == pytest.approx(sigma2 * scale, rel=1e-12)
        assert list(st.rho) == [l * C for l in range(1, m)]
        assert np.allclose(list(st.rho.values()), 0.2, atol=1e-12)
        assert st.rho_long == pytest.approx(0.2, abs=1e-12)
        assert list(st.R) == [b * C for b in (1, 2, 4, 8, 16, 32)]
        for b in (1, 2, 4, 8, 16, 32):
            assert st.R[b * C] == pytest.approx(1 + (b - 1) * 0.2, rel=1e-12)
        assert st.B_simple_shuf_tokens == pytest.approx(C * sigma2 / mu2, rel=1e-12)
        assert st.B_simple_contig_tokens[16384] == pytest.approx(C * sigma2 / mu2 * (1 + 31 * 0.2), rel=1e-12)


def test_ar1_population_gram_recovers_geometric_rho_and_closed_form_R(tmp_path):
    prof = Profile(ar=0.6, phi=0.8)
    n_docs, m = 8, 32
    cell = _one_cell(tmp_path, population_gram(n_docs, m, prof, 2.0, 0.1), n_docs, m, 4)
    st = _point(cell)
    lags = np.arange(1, m)
    assert np.allclose(list(st.rho.values()), 0.6 * 0.8**lags, atol=1e-12)
    long = lags[(lags * C >= 2048) & (lags * C < 16384)]
    assert st.rho_long == pytest.approx(np.mean(0.6 * 0.8**long), abs=1e-12)
    for b in (1, 2, 4, 8, 16, 32):
        closed = 1 + 2 / b * sum((b - l) * 0.6 * 0.8**l for l in range(1, b))
        assert st.R[b * C] == pytest.approx(closed, rel=1e-12)


def test_R_of_whole_span_equals_kish_identity_on_an_arbitrary_gram(tmp_path):
    """R(mC) = 1 + (2/m) sum_l (m - l) rho(l) holds for any Gram with full documents, not only in expectation."""
    rng = np.random.default_rng(1)
    n_docs, m = 6, 16
    X = rng.standard_normal((n_docs * m, 40)) + 0.3
    cell = _one_cell(tmp_path, X @ X.T, n_docs, m, 3)
    for group in ("all", "mlp"):
        st = _point(cell, group)
        rho = np.array(list(st.rho.values()))
        kish = 1 + 2 / m * np.sum((m - np.arange(1, m)) * rho)
        assert st.R[m * C] == pytest.approx(kish, rel=1e-10)
        assert st.R[C] == pytest.approx(1.0, rel=1e-12)      # R(C) = 1 by construction


def test_sampled_gradients_recover_profile_within_their_sampling_error(tmp_path):
    """Gram of sampled vectors g = mu + e (p coordinates, D documents).

    Within one document the lag-l products e_i.e_j average p coordinates; their variance is at most
    sigma2^2 (1 + rho^2) / p <= 2 sigma2^2 / p, and documents are independent, so sd(rho_hat(l)) <=
    sqrt(2 / (p D)); likewise sd(R_hat(b)) <= R(b) sqrt(2 / (p D)) (|block mean|^2 is a sum of p squared
    Gaussians). Errors of S_cross and sigma2 average far more pairs and are neglected. Tolerance: 5 sd.
    """
    prof = Profile(exch=0.1, ar=0.3, phi=0.7)
    n_docs, m, p, sigma2 = 16, 32, 4096, 1.0
    rng = np.random.default_rng(7)
    mu = rng.standard_normal(p) * np.sqrt(0.05 / p)
    X = sample_gradients(rng, n_docs, m, p, prof, sigma2, mu)
    cell = _one_cell(tmp_path, X @ X.T, n_docs, m, 4)
    st = _point(cell)
    sd_rho = np.sqrt(2 / (p * n_docs))
    lags = np.arange(1, m)
    err = np.abs(np.array(list(st.rho.values())) - prof.rho(lags))
    assert err.max() < 5 * sd_rho, (err.max(), sd_rho)
    for b in (2, 4, 8, 16, 32):
        assert abs(st.R[b * C] - prof.R(b)) < 5 * prof.R(b) * sd_rho
    assert st.sigma2 == pytest.approx(sigma2, rel=5 * np.sqrt(2 / (p * n_docs * m)) * 4)
    assert st.S_cross == pytest.approx(mu @ mu, abs=5 * sigma2 * np.sqrt(2 / (p * n_docs**2)))


def _naive(K, doc, chunk, src, shard, C=C):
    """Reference: the definitions of docs/methods.md#estimators applied literally to an explicit Gram of drawn rows.

    doc: label of each drawn document copy; src: original document (pairs with equal src are never
    cross-document pairs); shard: file of the original (cross pairs exist only within a file).
    """
    n = len(doc)
    off = ~np.eye(n, dtype=bool)
    cross = off & (src[:, None] != src[None, :]) & (shard[:, None] == shard[None, :])
    S = K[cross].mean()
    sigma2 = np.diag(K).mean() - S
    m = chunk.max() + 1
    same = doc[:, None] == doc[None, :]
    rho = np.array([(K[same & (chunk[None, :] - chunk[:, None] == l)].mean() - S) / sigma2 for l in range(1, m)])
    R = {}
    for b in bs.block_sizes(m):
        vals = []
        for d in np.unique(doc):
            for s in range(0, m - b + 1, b):
                r = np.flatnonzero((doc == d) & (chunk >= s) & (chunk < s + b))
                vals.append(K[np.ix_(r, r)].sum() / b**2)
        R[b] = (np.mean(vals) - S) / (sigma2 / b)
    return S, sigma2, rho, R


def _explicit_resample(K, n_docs, m, shard_of_doc, draw):
    rows = np.concatenate([np.arange(d * m, (d + 1) * m) for d in draw])
    doc = np.repeat(np.arange(len(draw)), m)
    src = np.repeat(draw, m)
    return K[np.ix_(rows, rows)], doc, np.tile(np.arange(m), len(draw)), src, shard_of_doc[src]


def test_pooled_shards_equal_the_definitions_applied_to_within_file_pairs(tmp_path):
    rng = np.random.default_rng(3)
    n_docs, m = 8, 8
    X = rng.standard_normal((n_docs * m, 30)) + 0.5
    K = X @ X.T
    cell = _one_cell(tmp_path, K, n_docs, m, 3)          # files of 3, 3 and 2 documents
    st = _point(cell)
    shard_of_doc = np.array([0, 0, 0, 1, 1, 1, 2, 2])
    S, sigma2, rho, R = _naive(*_explicit_resample(K, n_docs, m, shard_of_doc, np.arange(n_docs)))
    assert st.S_cross == pytest.approx(S, rel=1e-12)
    assert st.sigma2 == pytest.approx(sigma2, rel=1e-12)
    assert np.allclose(list(st.rho.values()), rho, rtol=1e-10, atol=1e-12)
    assert np.allclose(list(st.R.values()), list(R.values()), rtol=1e-10)


def test_splitting_a_cell_into_shards_changes_only_which_cross_pairs_exist(tmp_path):
    """Within-document sums are identical; with a Gram whose cross-document blocks all have the same mean
    (population Gram), pooling 4 shards gives exactly the single-file estimate."""
    rng = np.random.default_rng(4)
    n_docs, m = 8, 8
    X = rng.standard_normal((n_docs * m, 30))
    whole = _one_cell(tmp_path / "whole", X @ X.T, n_docs, m, 8)
    split = _one_cell(tmp_path / "split", X @ X.T, n_docs, m, 2)
    for a, b in zip((whole.sums["all"].diag, whole.sums["all"].lag, whole.sums["all"].blk),
                    (split.sums["all"].diag, split.sums["all"].lag, split.sums["all"].blk)):
        assert np.allclose(a, b, rtol=1e-12)
    assert len(split.files) == 4 and split.doc_ids == list(range(8))
    Kp = population_gram(n_docs, m, Profile(ar=0.5, phi=0.6), 1.0, 0.2)
    one = _point(_one_cell(tmp_path / "p1", Kp, n_docs, m, 8))
    four = _point(_one_cell(tmp_path / "p4", Kp, n_docs, m, 2))
    for key in ("S_cross", "sigma2", "rho_long", "B_simple_shuf_tokens"):
        assert getattr(four, key) == pytest.approx(getattr(one, key), rel=1e-12)
    assert np.allclose(list(four.R.values()), list(one.R.values()), rtol=1e-12)


def test_vectorised_bootstrap_equals_explicit_resampling_for_the_same_indices(tmp_path):
    rng = np.random.default_rng(5)
    n_docs, m = 6, 8
    X = rng.standard_normal((n_docs * m, 25)) + 0.4
    K = X @ X.T
    cell = _one_cell(tmp_path, K, n_docs, m, 3)
    shard_of_doc = np.array([0, 0, 0, 1, 1, 1])
    idx = bs.resample_indices(np.random.default_rng(0), n_docs, 25)
    idx[0] = [2, 2, 2, 4, 4, 0]                            # duplicates on purpose
    est = bs.estimate(cell.sums["all"], bs.counts_from_indices(idx, n_docs), C)
    for i, draw in enumerate(idx):
        S, sigma2, rho, R = _naive(*_explicit_resample(K, n_docs, m, shard_of_doc, draw))
        assert est["S_cross"][i] == pytest.approx(S, rel=1e-10)
        assert est["sigma2"][i] == pytest.approx(sigma2, rel=1e-10)
        assert np.allclose(est["rho"][i], rho, rtol=1e-9, atol=1e-12)
        assert np.allclose(est["R"][i], list(R.values()), rtol=1e-9)


def test_a_document_drawn_twice_never_pairs_with_its_own_copy():
    n_docs, m = 3, 4
    K = np.full((n_docs * m, n_docs * m), 1.0)            # cross-document products = 1
    for d in range(n_docs):
        K[d * m:(d + 1) * m, d * m:(d + 1) * m] = 100.0   # within a document = 100
    s = bs.assemble([bs.shard_block_sums(K, n_docs, m)], m)
    est = bs.estimate(s, np.array([[2.0, 1.0, 0.0], [3.0, 0.0, 0.0]]), C)
    assert est["S_cross"][0] == pytest.approx(1.0)       # copies of doc 0 never pair with each other
    assert np.isnan(est["S_cross"][1])                    # only one document drawn: no cross pairs at all


def test_R_rel_interval_divides_the_ith_draws_of_two_independently_resampled_cells(tmp_path):
    from docgrad.results.synthetic import write_cell

    for corpus, prof in (("WEB", Profile(ar=0.1, phi=0.3)), ("CODE", Profile(exch=0.1, ar=0.2, phi=0.8))):
        write_cell(tmp_path, model="t/m", revision="r", corpus=corpus, profile=prof, m=16, chunk=1024,
                   shard_size=8, dim=64, seed=1)
    cells = load_cells(tmp_path)
    est = {k[2]: stats.estimate_cell(c, resamples=300, seed=11) for k, c in cells.items()}
    (rel,) = stats.r_rel(list(est.values()))
    code, web = est["CODE"].R_16K_draws, est["WEB"].R_16K_draws
    assert rel.R_rel == pytest.approx(est["CODE"].all.R_16K / est["WEB"].all.R_16K)
    assert list(rel.R_rel_ci) == pytest.approx(np.percentile(code / web, [2.5, 97.5]).tolist())
    assert list(rel.R_rel_ci) != pytest.approx(
        (np.percentile(code, [2.5, 97.5]) / np.percentile(web, [2.5, 97.5])).tolist())


def test_bootstrap_is_reproducible_per_cell_and_percentile_intervals_cover_the_estimate(tmp_path):
    from docgrad.results.synthetic import write_cell

    write_cell(tmp_path, model="t/m", revision="r", corpus="BOOKS", profile=Profile(exch=0.1), m=8, chunk=2048,
               shard_size=4, dim=64, seed=2)
    cell = next(iter(load_cells(tmp_path).values()))
    a, b, c = (stats.estimate_cell(cell, resamples=200, seed=s) for s in (1, 1, 2))
    assert np.array_equal(a.R_16K_draws, b.R_16K_draws) and not np.array_equal(a.R_16K_draws, c.R_16K_draws)
    assert a.all.R_16K_ci[0] <= a.all.R_16K <= a.all.R_16K_ci[1]
    assert a.all.interval("rho", 2048)[0] <= a.all.rho[2048] <= a.all.interval("rho", 2048)[1]
    assert a.resamples == 200 and a.groups["embed"].interval("R", 16384)[0] is not None


def test_per_document_rho_long_and_loss_by_position(tmp_path):
    n_docs, m = 4, 8
    prof = Profile(exch=0.3)
    K = population_gram(n_docs, m, prof, 1.0, 0.1)
    K[:m, :m] = 0.1 + 0.6                                  # document 0: rho = 0.6 at every lag (diag fixed below)
    K[np.arange(m), np.arange(m)] = 1.1
    loss = np.tile(np.arange(m, dtype=float), n_docs) + np.repeat(np.arange(n_docs), m)
    write_gram_cell(tmp_path, _split(K), n_docs=n_docs, m=m, shard_size=2, loss=loss, chunk=1024)
    est = stats.estimate_cell(next(iter(load_cells(tmp_path).values())), resamples=0)
    # cell S_cross = 0.1, sigma2 = 1.0; rho_long uses lags 2..7 (2048 <= lag*1024 < 16384)
    assert est.rho_long_per_doc[0] == pytest.approx(0.6) and est.rho_long_per_doc[1] == pytest.approx(0.3)
    assert est.loss_by_chunk_position == pytest.approx(np.arange(m) + 1.5)
    assert est.loss_mean == pytest.approx(np.mean(loss))


def test_reads_a_file_in_the_published_layout(tmp_path):
    """npz written directly with numpy and a json with the published keys (as in the published results/)."""
    rng = np.random.default_rng(8)
    d = tmp_path / "EleutherAI__pythia-1.4b" / "step143000"
    d.mkdir(parents=True)
    m, docs = 32, [(0, 4), (4, 8)]
    for a, b in docs:
        n = (b - a) * m
        X = {g: rng.standard_normal((n, 50)) + 0.2 for g in GROUPS}
        arrays = {"index": np.array([(doc, k) for doc in range(a, b) for k in range(m)], dtype=np.int32),
                  "loss": rng.uniform(2, 3, n), "exact_ref_dot": np.array([])}
        for g in GROUPS:
            arrays[f"gram_{g}"] = X[g] @ X[g].T
            arrays[f"sqnorm_{g}"] = np.einsum("ij,ij->i", X[g], X[g])
        np.savez_compressed(d / f"WEB_c512_d{a}-{b}.npz", **arrays)
        meta = {"args": {"model": "EleutherAI/pythia-1.4b", "revision": "step143000", "tok": "pythia",
                         "corpus": "WEB", "docs": f"{a}:{b}", "chunk": 512, "exact_ref": False, "threads": 4,
                         "out": f"results/EleutherAI__pythia-1.4b/step143000/WEB_c512_d{a}-{b}.npz"},
                "chunks": n, "chunks_per_doc": m, "sketch": "count sketch, 131072 buckets per group",
                "seed": 20261007, "seconds_load": 32.0, "seconds_chunks": 6207.8, "torch": "2.14.1+cpu",
                "transformers": "4.57.6", "numpy": "2.4.6", "python": "3.11.17", "threads": 4,
                "machine": "x86_64", "spans_sha256": "d6f7"}
        (d / f"WEB_c512_d{a}-{b}.json").write_text(json.dumps(meta))
    rep = stats.analyze(tmp_path, resamples=50, seed=0).to_json()
    (cell,) = rep["cells"]
    assert (cell["model"], cell["revision"], cell["corpus"], cell["chunk"], cell["n_docs"]) == \
        ("EleutherAI/pythia-1.4b", "step143000", "WEB", 512, 8)
    assert cell["doc_ids"] == list(range(8)) and len(cell["R"]) == 6 and len(cell["rho"]) == 31
    assert rep["gates"]["G1"]["status"] == "not evaluated"


def test_analyze_report_uses_the_published_field_names(tmp_path):
    from docgrad.results.synthetic import write_synthetic_results

    write_synthetic_results(tmp_path, n_docs=4, m=8, chunk=2048, shard_size=2, dim=32)
    rep = stats.analyze(tmp_path, resamples=100, seed=0).to_json()
    published = {"model", "revision", "corpus", "chunk", "n_docs", "doc_ids", "S_cross", "sigma2", "rho",
                 "rho_long", "R", "B_simple_shuf_tokens", "rho_long_ci", "R_16K_ci", "B_simple_shuf_ci",
                 "S_cross_ci", "boot_nonfinite_frac", "secondary", "groups", "loss_mean"}
    for c in rep["cells"]:
        assert published <= set(c)
        assert set(c["groups"]) == set(GROUPS)
        assert {"rho_long_per_doc", "rho_long_per_doc_quartiles", "loss_mean", "loss_by_chunk_position"} \
            <= set(c["secondary"])
    assert [r["corpus"] for r in rep["R_rel"]] == ["BOOKS", "CODE", "PAPERS"]
    assert {"R_rel", "R_rel_ci", "n_docs", "n_docs_web"} <= set(rep["R_rel"][0])
    assert set(rep["gates"]) == {"G1", "G2", "G3"} and rep["verdict"]


def test_effective_chunks_is_n_over_R():
    from docgrad.presentation.tables import effective_chunks

    assert effective_chunks(4.0, 32) == 8.0
    assert effective_chunks(1.0) == 32.0


def test_analysis_json_round_trip_keeps_every_number(tmp_path):
    from docgrad.results.synthetic import write_synthetic_results

    write_synthetic_results(tmp_path, n_docs=4, m=8, chunk=2048, shard_size=2, dim=32)
    a = stats.analyze(tmp_path, resamples=100, seed=0)
    j = json.loads(json.dumps(to_jsonable(a)))
    assert to_jsonable(stats.Analysis.from_json(j)) == j


def test_cached_analysis_reuses_the_result_until_an_input_changes(tmp_path):
    from docgrad.results.synthetic import write_synthetic_results

    write_synthetic_results(tmp_path / "res", n_docs=4, m=8, chunk=2048, shard_size=2, dim=32)
    cache = tmp_path / "cache"
    a = stats.cached_analysis(tmp_path / "res", 100, 0, cache_dir=cache)
    (entry,) = cache.glob("*.json")
    b = stats.cached_analysis(tmp_path / "res", 100, 0, cache_dir=cache)
    assert to_jsonable(a) == to_jsonable(b)
    stats.cached_analysis(tmp_path / "res", 100, 1, cache_dir=cache)       # another seed: another entry
    assert len(list(cache.glob("*.json"))) == 2
    f = next((tmp_path / "res").rglob("*.json"))
    f.write_text(f.read_text().replace('"synthetic": true', '"synthetic": true, "note": "edited"'))
    stats.cached_analysis(tmp_path / "res", 100, 0, cache_dir=cache)       # a result file changed
    assert len(list(cache.glob("*.json"))) == 3 and entry.exists()


def test_the_cache_key_follows_each_files_bytes_as_read(tmp_path):
    from docgrad.results.cells import read_results
    from docgrad.results.synthetic import write_synthetic_results

    write_synthetic_results(tmp_path, n_docs=4, m=8, chunk=2048, shard_size=2, dim=32)
    shards = read_results(tmp_path)
    key = stats.inputs_key(tmp_path, 100, 0, (0, 4), shards)
    assert key == stats.inputs_key(tmp_path, 100, 0, (0, 4), read_results(tmp_path))   # read again: same key
    shards[0].sha256 = "0" * 64                                        # another file's bytes: another key
    assert stats.inputs_key(tmp_path, 100, 0, (0, 4), shards) != key


def test_the_cached_analysis_keeps_the_results_directory_as_each_caller_spelled_it(tmp_path, monkeypatch):
    from docgrad.results.synthetic import write_synthetic_results

    write_synthetic_results(tmp_path / "res", n_docs=4, m=8, chunk=2048, shard_size=2, dim=32)
    monkeypatch.chdir(tmp_path)
    cache = tmp_path / "cache"
    absolute = stats.cached_analysis(tmp_path / "res", 0, 0, cache_dir=cache)     # asked first, absolute
    relative = stats.cached_analysis("res", 0, 0, cache_dir=cache)                # then as a page spells it
    assert absolute.results_dir == str(tmp_path / "res") and relative.results_dir == "res"
    assert len(list(cache.glob("*.json"))) == 2
