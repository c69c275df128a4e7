"""The sentences of the design-effect pages (docgrad.presentation.design_effect): each says resolved, not
resolved or not measured as its numbers allow, and a result box stays within its word limit."""

import numpy as np
import pandas as pd
import pytest

from docgrad.core.orderings import resolve_pairs
from docgrad.presentation import comparison as cp
from docgrad.presentation import design_effect as de
from docgrad.presentation import evidence as ev
from docgrad.results import stats
from docgrad.results.cell_decomposition import R_draws_without, decompose_cell
from docgrad.results.cells import load_cells
from docgrad.results.synthetic import Profile, write_cell

CELL = dict(n_docs=8, m=8, chunk=2048, shard_size=8, dim=32)


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    root = tmp_path_factory.mktemp("de")
    for corpus, prof in {"BOOKS": Profile(exch=0.3), "CODE": Profile(exch=0.02), "PAPERS": Profile(exch=0.28),
                         "WEB": Profile()}.items():
        write_cell(root, model="o/m", revision="r", corpus=corpus, profile=prof, **CELL)
    cells = {k[2]: c for k, c in load_cells(root).items()}
    sources = {"BOOKS": ["Austen"] * 4 + ["Bible"] * 3 + ["Melville"]}
    decomps = {k: decompose_cell(c, sources.get(k, [f"{k} {i}" for i in c.doc_ids]), 400, 0) for k, c in cells.items()}
    rep = stats.analyze(root, resamples=400, seed=0)
    return cells, decomps, rep


def test_ordering_claims_resolve_only_what_holm_resolves_and_follow_up_without_the_top_document(study):
    cells, decomps, _ = study
    long = ["BOOKS", "CODE", "PAPERS"]
    points = {k: decomps[k].R for k in long}
    draws = {k: decomps[k].draws["doc"]["R"] for k in long}
    pairs = resolve_pairs(points, draws, long)
    i = de.most_influential(decomps["BOOKS"])
    R, d = R_draws_without(cells["BOOKS"], i, 400, 0)
    claims = cp.ordering_claims(pairs, decomps, {"BOOKS": {"title": "doc X", "R": R, "draws": d}})
    by_pair = {(p["a"], p["b"]): c for p, c in zip(pairs, claims)}
    assert by_pair[("BOOKS", "CODE")].status == ev.RESOLVED          # strongly correlated vs nearly not
    assert by_pair[("BOOKS", "CODE")].text.endswith("; this holds for these 8 BOOKS documents of 3 sources, not for "
                                                     "BOOKS text in general.")
    assert by_pair[("BOOKS", "PAPERS")].status == ev.NOT_RESOLVED     # two close profiles
    follow = [c for c in claims[3:] if c.text.startswith("Without doc X")]
    assert len(follow) == sum(p["resolved"] and "BOOKS" in (p["a"], p["b"]) and
                              (p["diff"] > 0) == (p["a"] == "BOOKS") for p in pairs)
    assert claims[-1].text.startswith("Without the source term") and "outside the Holm family" in claims[-1].text


def test_leave_one_out_draws_leave_the_document_out(study):
    cells, decomps, _ = study
    d = decomps["BOOKS"]
    R, draws = R_draws_without(cells["BOOKS"], 2, 200, 0)
    assert R == pytest.approx(d.loo["R"][2]) and draws.shape == (200,) and np.isfinite(draws).mean() > 0.9


def test_gate_claims_say_when_the_controls_interval_straddles_and_when_there_is_no_control(study):
    _, _, rep = study
    sub = rep.subset("o/m", "r", 2048, ["BOOKS", "WEB"])
    claims = de.gate_claims({"m": sub, "other": rep.subset("o/m", "r", 2048, ["BOOKS"])})
    assert len(claims) == 3 and claims[2].status == ev.NOT_MEASURED
    web = sub.cell("WEB").all
    lo, hi = web.R_16K_ci
    point_passes = web.R_16K < 1.2
    expected = ((ev.STRADDLES if point_passes else ev.FAILS) if lo < 1.2 < hi else
                (ev.PASSES if point_passes else ev.FAILS))
    assert claims[0].status == expected and claims[0].text.startswith("m: the control's R(16K) < 1.20")


def test_result_boxes_stay_within_their_word_limit(study):
    _, decomps, rep = study
    sub = rep.subset("o/m", "r", 2048, ["BOOKS", "CODE", "PAPERS", "WEB"])
    box = de.result_box({"m": sub, "m2": sub}, {"m": decomps, "m2": decomps})
    assert box.startswith("> **Result.**")
    books = decomps["BOOKS"]
    few = books.support["source"]["distinct"] < de.FEW_DISTINCT                 # BOOKS clusters by source
    assert few == de.few_clusters(books)
    assert (f"{books.n_sources} sources: no interval)" in box) == few
    assert ("sources resampled" in box) != few
    original = books.support["source"]["distinct"]
    try:                                                    # the fixture is shared: put its value back
        books.support["source"]["distinct"] = 3
        assert "sources resampled" not in de.result_box({"m": sub}, {"m": decomps})
        books.support["source"]["distinct"] = de.FEW_DISTINCT
        assert "sources resampled: [" in de.result_box({"m": sub}, {"m": decomps})
    finally:
        books.support["source"]["distinct"] = original
    assert len(box.split()) <= ev.RESULT_BOX_WORDS + 10 and "provisional" not in box
    note = "m's R(16K) moves with a start token: \u221266.2% [\u221282.7%, \u221245.4%] (BOOKS) (page 04d)"
    noted = de.result_box({"m": sub}, {"m": decomps}, regime_note=note)
    assert noted.endswith(f"**Caveat:** {note}.") and "chunks run alone" in noted    # the regime replaces the caveat
    short = de.result_box({"m": sub}, {"m": decomps}, incomplete={"m": {"CODE": (4, 6)}})
    assert "(provisional: m CODE 4 of 6)" in short
    shares = {k: 0.1 for k in decomps}
    box = de.drivers_box("m", decomps, shares, {}, [0.003, 0.014])
    assert "holds a source term" in box and "0.0030-0.014 in the published base checkpoints" in box
    assert "m 8 documents per corpus" in box


def test_page_04b_box_opens_with_what_b_simple_is_and_how_far_r_moves_without_the_norm_weights(study):
    _, decomps, _ = study
    shares = {"BOOKS": 0.15, "CODE": 0.12, "PAPERS": 0.18, "WEB": 0.5}        # WEB: not a long-document corpus
    wo = {k: {"mean_gradient_share": v / 2, "R": decomps[k].R * (1.02 if k == "CODE" else 1.0)}
          for k, v in shares.items()}
    first = ev.first_sentence(de.drivers_box("m", decomps, shares, wo, [0.003, 0.014]))
    assert first == ("B_simple from m describes this model, not a batch size for training: its mean gradient is "
                     "0.120-0.180 of a chunk gradient's squared norm on BOOKS, CODE, PAPERS (0.0600-0.0900 without "
                     "the norm weights), against 0.0030-0.014 in the published base checkpoints, while R(16K) moves "
                     "by at most 2.0% without them.")
    none = de.drivers_box("m", {"WEB": decomps["WEB"]}, {"WEB": 0.5}, {})
    assert ev.first_sentence(none) == "m has no long-document cell: nothing is said of B_simple or the mean gradient."


def test_page_04_box_opens_with_what_a_block_is_worth_in_independent_chunks_with_its_interval(study):
    """The first sentence is the practitioner's answer: m / R(16K) per corpus with the interval mapped through the
    same function ([m / hi, m / lo]); BOOKS, in 3 sources, gets its point and no interval; R follows as points."""
    _, decomps, rep = study
    sub = rep.subset("o/m", "r", 2048, ["BOOKS", "CODE", "PAPERS", "WEB"])
    box = de.result_box({"m": sub, "m2": sub}, {"m": decomps, "m2": decomps})
    first = ev.first_sentence(box)
    m = 16384 // 2048
    code, books = sub.cell("CODE").all, sub.cell("BOOKS").all
    lo, hi = code.R_16K_ci
    assert first.startswith("A 16K-token block of one document is worth about "
                            f"{ev.sig(m / code.R_16K, 2)} [{ev.sig(m / hi, 2)}, {ev.sig(m / lo, 2)}] independent "
                            "2048-token chunks of CODE, ")
    assert first.endswith(f"and {ev.sig(m / books.R_16K, 2)} of BOOKS (3 sources: no interval), "
                          "not 8 (m).")
    assert "WEB" not in first and "m2" not in first                       # the control and the second model: after
    assert f"R(16K) = 8 / worth: m BOOKS {ev.sig(books.R_16K)}, CODE {ev.sig(code.R_16K)}," in box
    web = sub.cell("WEB").all
    assert f"control {ev.interval(web.R_16K, web.R_16K_ci)}" in box


def test_block_worth_reads_no_cell_that_lacks_documents(study):
    _, decomps, rep = study
    sub = rep.subset("o/m", "r", 2048, ["CODE", "PAPERS", "WEB"])
    line = de.block_worth("m", sub, decomps, incomplete={"CODE": (4, 6)})
    assert "of CODE" not in line and line.endswith("not 8 (m); not read yet: CODE 4 of 6 documents.")
    none = de.block_worth("m", rep.subset("o/m", "r", 2048, ["WEB"]), decomps)
    assert none == "No long-document cell of m is read yet."


def test_forest_frame_gives_one_row_per_corpus_and_design_and_no_interval_where_the_rule_gives_none(study):
    from docgrad.results import published

    _, decomps, rep = study
    sub = rep.subset("o/m", "r", 2048, ["BOOKS", "CODE", "PAPERS", "WEB"])
    final = published.final_checkpoints()
    f = de.forest_frame([({"m": sub}, {"m": decomps}), ({"m": sub}, {"m": decomps})], final)  # same docs: once
    assert list(dict.fromkeys(f["corpus"])) == ["BOOKS", "CODE", "PAPERS", "WEB"]
    ours = f[f["kind"] == "ours"].set_index("corpus")
    assert list(ours.index) == ["BOOKS", "CODE", "PAPERS", "WEB"] and (ours["row"] == "m, 8 documents").all()
    code = sub.cell("CODE").all
    assert (ours.loc["CODE", ["R", "lo", "hi"]].tolist() == pytest.approx([code.R_16K, *code.R_16K_ci]))
    assert np.isnan(ours.loc["BOOKS", "lo"]) and ours.loc["BOOKS", "note"] == "3 sources: no interval over 3 clusters"
    src = f[f["kind"] == "by source"].set_index("row")
    assert list(src.index) == ["m: Austen alone, 4 documents", "m: Bible alone, 3 documents"]   # Melville: 1 document
    assert np.isfinite(src.iloc[0][["lo", "hi"]].astype(float)).all()
    assert np.isnan(src.iloc[1]["lo"]) and src.iloc[1]["note"] == "fewer than 4 documents: no interval"
    pub = f[f["kind"] == "published"]
    assert len(pub) == len(final) and (pub["lo"] < pub["R"]).all() and (pub["R"] < pub["hi"]).all()
    assert f.groupby("corpus", sort=False)["kind"].apply(list)["BOOKS"] == ["ours", "by source", "by source",
                                                                            "published", "published"]


def test_forest_chart_draws_a_point_per_row_and_a_bar_per_interval_in_one_panel_per_corpus(study):
    from docgrad.presentation import charts

    _, decomps, rep = study
    sub = rep.subset("o/m", "r", 2048, ["BOOKS", "CODE", "WEB"])
    spec = charts.forest_chart(de.forest_frame([({"m": sub}, {"m": decomps})])).to_dict()
    assert spec["facet"]["row"]["field"] == "corpus" and spec["resolve"]["scale"]["y"] == "independent"
    rule, bars, points = spec["spec"]["layer"]
    assert rule["encoding"]["x"]["datum"] == 1
    assert bars["encoding"]["x"]["field"] == "lo" and bars["encoding"]["x2"]["field"] == "hi"
    assert points["encoding"]["x"]["field"] == "R" and points["encoding"]["x"]["title"] == "R(16K)"
    assert spec["title"]["text"].startswith("R(16K) per corpus")
    short = de.forest_frame([({"m": sub}, {"m": decomps})]).assign(W=2048)       # a corpus of 2K spans
    spec = charts.forest_chart(short).to_dict()
    assert spec["title"]["text"].startswith("R at each row's headline window") and "16K" not in spec["title"]["text"]
    labels = {r["label"] for r in spec["datasets"][spec["data"]["name"]]}
    assert "m, 8 documents (3 sources: no interval over 3 clusters)" in labels


def test_clustered_means_more_than_five_percent_same_source_pairs(study):
    _, decomps, _ = study
    assert de.clustered(decomps["BOOKS"]) and not de.clustered(decomps["CODE"])


def test_comparison_box_reports_the_decision_and_the_resolved_model_differences():
    dec = {"m": {"point_order": ["A", "B", "C"], "status": "not established", "resolved": [],
                 "against_published": "not compared"}}
    claims = [ev.Claim(ev.RESOLVED, "PAPERS: R(16K) is lower ..."), ev.Claim(ev.NOT_RESOLVED, "BOOKS: ...")]
    box = cp.comparison_box(dec, claims, ev.Claim(ev.NOT_RESOLVED, "x"), ["C", "B", "A"])
    assert "m resolves no pair." in box and "published direction" not in box and "differs" not in box
    assert "1 of 2 corpora differ after Holm (PAPERS)" in box


def test_claims_and_orders_of_incomplete_cells_are_provisional(study):
    from docgrad.presentation import tables

    _, decomps, _ = study
    long = ["BOOKS", "CODE", "PAPERS"]
    pairs = resolve_pairs({k: decomps[k].R for k in long}, {k: decomps[k].draws["doc"]["R"] for k in long}, long)
    claims = cp.ordering_claims(pairs, decomps, incomplete={"CODE": (6, 8)})
    assert all(c.status == ev.PROVISIONAL and c.text.startswith("Provisional (CODE 6 of 8 documents): ")
               for c in claims)
    orders = tables.pair_order_frame({"m": pairs, "g": pairs}, {"m": {"incomplete": {"CODE": [6, 8]}},
                                                                "g": {"incomplete": {}}})
    assert orders.loc["BOOKS − CODE", "m"] == "provisional: BOOKS > CODE"
    assert orders.loc["BOOKS − CODE", "g"] == "BOOKS > CODE"


def test_comparison_box_reads_no_ordering_of_a_model_whose_cells_lack_documents():
    dec = {"m": {"point_order": ["A", "B"], "status": "not read (cells incomplete)", "resolved": ["A > B"],
                 "against_published": "not compared", "incomplete": {"A": [32, 48]}},
           "g": {"point_order": ["A", "B"], "status": "established", "resolved": ["A > B"],
                 "against_published": "same direction", "incomplete": {}}}
    box = cp.comparison_box(dec, [], ev.Claim(ev.NOT_RESOLVED, "x"), ["A", "B"],
                            n_docs={"m": {"A": 32, "B": 48}, "g": {"A": 16, "B": 16}})
    assert "m's ordering is not read until every cell holds its documents (A 32 of 48 measured" in box
    m_clause = box.split("models): ")[1].split("; g ")[0]
    assert "A > B" not in m_clause and "; g resolves A > B, in the published direction." in box
    assert "R(16K), m 32-48; g 16 documents per corpus; Holm" in box


def test_through_training_compares_only_the_corpora_measured_at_every_checkpoint():
    lines = cp.through_training_lines({"P 4.9%": "BOOKS > WEB", "P 100.0%": "CODE > BOOKS > WEB",
                                       "Q 1.0%": "A > B", "Q 100.0%": "B > A"})
    assert "P: BOOKS, WEB (measured at all 2 checkpoints) keep one ordering." in lines
    assert "Q: the ordering of A, B changes across its 2 checkpoints." in lines


def test_like_for_like_lines_give_the_factor_on_R_rel():
    lfl = pd.DataFrame([{"source": "ours", "corpus": "WEB", "control_R_16K": 1.0, "sigma2_ratio": 1.0},
                        {"source": "ours", "corpus": "BOOKS", "control_R_16K": 1.0, "sigma2_ratio": 1.1},
                        {"source": "P (published)", "corpus": "BOOKS", "control_R_16K": 1.4, "sigma2_ratio": 0.9}])
    lines = cp.like_for_like_lines(lfl, "ours", 1.0, [0.9, 1.1])
    assert "1.40-1.40 times larger" in lines[0] and "P: BOOKS 0.900" in lines[1]
    assert "no published control" in cp.like_for_like_lines(lfl[lfl.source == "ours"], "ours", 1.0, None)[0]


def test_decomposition_and_robustness_lines_name_the_source_term_only_where_sources_are_shared(study):
    _, decomps, _ = study
    lines = de.decomposition_lines(decomps)
    assert lines[0].startswith("**BOOKS**: documents from shared sources (Austen 4, Bible 3)")
    assert all(line.split(":")[1].strip().startswith("one document per source") for line in lines[1:])
    rob = de.robustness_lines(decomps, {"BOOKS": {0: "Emma"}})
    books = rob[0]
    assert "its 3 sources resampled" in books and "from only" in books       # 3 sources: few distinct draws
    assert "sources resampled" not in rob[1]


def test_mean_gradient_lines_give_the_share_without_the_norm_weights_and_the_confounds():
    lines = de.mean_gradient_lines({"m": {"BOOKS": 0.14, "CODE": 0.15, "WEB": 0.3}},
                                   {"m": {"BOOKS": {"mean_gradient_share": 0.1, "R": 4.0},
                                          "CODE": {"mean_gradient_share": 0.12, "R": 3.1}}},
                                   {"P BOOKS": 0.003}, {"m": {"BOOKS": 4.2, "CODE": 3.0, "WEB": 1.0}})
    assert lines[0] == ("**m**: mean-gradient share 0.140 to 0.150 on BOOKS, CODE and PAPERS; without the norm "
                        "weights 0.100 to 0.120, with R(16K) moving by at most 0.20.")
    assert "start token" in lines[-1] and "0.00300 to 0.00300" in lines[1]


def test_source_lines_name_a_clustered_corpus_by_its_sources_with_each_source_r(study):
    _, decomps, _ = study
    lines = de.source_lines(decomps)
    assert len(lines) == 1 and lines[0].startswith(f"BOOKS is {len(decomps['BOOKS'].doc_ids)} documents from "
                                                   f"{decomps['BOOKS'].n_sources} sources: ")
    for r in decomps["BOOKS"].by_source:
        if r["source"] != "all" and r["n_docs"] > 1:
            assert f"{r['source']} ({r['n_docs']} documents) R(16K) {ev.interval(r['R'], r['R_ci'])}" in lines[0]


def test_ours_against_each_published_r16k_is_resolved_only_without_overlap_at_the_familys_level():
    final = pd.DataFrame({"corpus": ["BOOKS", "BOOKS", "WEB"], "model_label": ["P1", "P2", "P1"],
                          "R_16K": [2.0, 3.5, 1.4], "lo": [1.9, 3.0, 1.1], "hi": [2.1, 4.0, 1.7]})
    rng = np.random.default_rng(0)
    draws = {"BOOKS": 3.8 + 0.3 * rng.standard_normal(4000), "WEB": 1.0 + 0.01 * rng.standard_normal(4000)}
    claims = cp.published_R_claims({"m": ({"BOOKS": 3.8, "WEB": 1.0}, draws)}, final)["m"]
    assert [c.status for c in claims] == [ev.RESOLVED, ev.NOT_RESOLVED, ev.RESOLVED]
    lo, hi = np.percentile(draws["BOOKS"], [100 * 0.05 / 6, 100 * (1 - 0.05 / 6)])   # Bonferroni over 3
    assert f"ours {ev.interval(3.8, [lo, hi])} against P1" in claims[0].text and "above" in claims[0].text
    assert "below" in claims[2].text and "P1 1.40 [1.10, 1.70]" in claims[2].text
    lines = cp.published_R_lines({"m": claims})
    assert lines[0].startswith("**m**: 2 of 3 comparisons resolved (ours at the Bonferroni level 98.33%")
    # a 95% interval would have resolved BOOKS against P2; the family's level does not
    narrow = cp.published_R_claims({"m": ({"BOOKS": 3.8}, {"BOOKS": 4.6 + 0.3 * rng.standard_normal(4000)})},
                                   final[final.corpus == "BOOKS"])["m"]
    assert [c.status for c in narrow] == [ev.RESOLVED, ev.NOT_RESOLVED]


def _pair(a, b, diff, ci, resolved, level=0.05):
    order = (f"{a} > {b}" if diff > 0 else f"{b} > {a}") if resolved else "not resolved"
    return {"a": a, "b": b, "diff": diff, "ci": ci, "level": level, "order": order}


def test_a_pooled_pair_is_replicated_only_when_resolved_in_the_same_direction_on_the_unseen_documents():
    pooled = {"decision": {"resolved": ["PAPERS > CODE"]},
              "pairs": [_pair("CODE", "PAPERS", -1.27, [-2.49, -0.17], True, 0.05 / 3),
                        _pair("BOOKS", "PAPERS", -1.1, [-2.7, 0.4], False)]}
    rep = {"decision": {"resolved": ["PAPERS > BOOKS"]},
           "pairs": [_pair("CODE", "PAPERS", -0.94, [-2.09, 0.28], False, 0.025),
                     _pair("BOOKS", "PAPERS", -1.49, [-2.52, -0.35], True, 0.05 / 3)]}
    lines = cp.replication_lines(pooled, rep, "0-47", "16-47", {"CODE": 32, "PAPERS": 32})
    assert "partly exploratory" in lines[0] and "PAPERS > CODE resolved" in lines[0]
    assert "16-47 alone" in lines[1] and "CODE 32, PAPERS 32 documents" in lines[1]
    code = next(ln for ln in lines if ln.startswith("- pooled PAPERS − CODE"))
    assert "PAPERS − CODE 1.27 [0.170, 2.49] (Holm 98.3%): resolved" in code      # written high minus low
    assert "replication PAPERS − CODE 0.940 [-0.280, 2.09] (Holm 97.5%): not resolved" in code
    assert code.endswith("→ not replicated")
    assert any(ln.endswith("→ not resolved (pooled)") for ln in lines)
    assert lines[-1].startswith("- resolved on the replication documents only: PAPERS > BOOKS")
    rep["pairs"][0] = _pair("CODE", "PAPERS", -0.94, [-2.0, -0.1], True)
    assert cp.replication_lines(pooled, rep, "0-47", "16-47", {})[2].endswith("→ replicated")
    rep["pairs"][0] = _pair("CODE", "PAPERS", 0.9, [0.1, 2.0], True)                 # resolved the other way
    assert cp.replication_lines(pooled, rep, "0-47", "16-47", {})[2].endswith("→ not replicated")


def test_the_comparison_box_says_whether_each_pooled_resolved_pair_replicated():
    pooled = {"decision": {"resolved": ["PAPERS > CODE"]},
              "pairs": [_pair("CODE", "PAPERS", -1.27, [-2.49, -0.17], True), _pair("BOOKS", "CODE", 0.1, [-1, 1], False)]}
    rep = {"decision": {"resolved": []}, "pairs": [_pair("CODE", "PAPERS", -0.94, [-2.09, 0.28], False),
                                                   _pair("BOOKS", "CODE", -0.5, [-1.4, 0.4], False)]}
    verdicts = cp.replication_verdicts(pooled, rep)
    assert verdicts == {"PAPERS > CODE": "not replicated", "BOOKS vs CODE": "not resolved (pooled)"}
    dec = {"point_order": ["PAPERS", "BOOKS", "CODE"], "status": "partly established", "resolved": ["PAPERS > CODE"],
           "against_published": "differs"}
    rho = ev.Claim(ev.NOT_RESOLVED, "x")
    box = cp.comparison_box({"M": dec}, [], rho, ["CODE", "PAPERS", "BOOKS"], replicated={"M": verdicts},
                            replication_docs="16-47")
    assert "; on documents 16-47 alone PAPERS > CODE is not replicated." in box
    assert " vs " not in ev.first_sentence(box)
    assert "16-47" not in cp.comparison_box({"M": dec}, [], rho, ["CODE", "PAPERS", "BOOKS"])


def test_page_04c_box_opens_with_what_to_do_and_each_resolved_pair_with_its_holm_interval_and_replication():
    pooled = [_pair("CODE", "PAPERS", -1.27, [-2.49, -0.167], True, 0.05 / 3),
              _pair("BOOKS", "CODE", 0.1, [-1, 1], False)]
    rep = [_pair("CODE", "PAPERS", -0.941, [-2.09, 0.276], False, 0.025)]
    dec = {"point_order": ["PAPERS", "BOOKS", "CODE"], "status": "partly established", "resolved": ["PAPERS > CODE"],
           "against_published": "differs"}
    none = {"point_order": ["A"], "status": "not established", "resolved": [], "against_published": "not compared"}
    box = cp.comparison_box({"M": dec, "G": none}, [], ev.Claim(ev.NOT_RESOLVED, "x"), ["CODE", "PAPERS", "BOOKS"],
                            replicated={"M": {"PAPERS > CODE": "not replicated"}}, replication_docs="16-47",
                            pairs={"M": pooled, "G": []}, replication_pairs={"M": rep})
    assert ev.first_sentence(box) == (
        "Measure R(16K) on your own corpus rather than borrow the published order CODE > PAPERS > BOOKS (untested "
        "point values, other corpora and models): M resolves only PAPERS > CODE by 1.27 [0.167, 2.49] (Holm 98.3%), "
        "which differs from the published order; on documents 16-47 alone PAPERS > CODE is not replicated (there "
        "0.941 [-0.276, 2.09], Holm 97.5%); G resolves no pair.")


def test_the_regime_line_names_each_model_and_how_far_r_and_b_simple_move_without_the_norm_gains():
    # share = S/(S+σ²); without the norm gains S halves and σ² stays: B_simple = Cσ²/S doubles
    shares = {"M": {"CODE": 0.2, "PAPERS": 0.25, "WEB": 0.9}}
    S = {"CODE": 0.2, "PAPERS": 0.25}                               # with σ² + S = 1
    wo = {"M": {k: {"S_cross": s / 2, "sigma2": 1 - s, "R": r} for (k, s), r in zip(S.items(), (4.2, 4.8))}}
    line = de.regime_line({"M": "instruction-tuned, 4-bit Q4_1, no start token"}, shares, wo, [0.003, 0.014],
                          {"M": {"CODE": 4.0, "PAPERS": 5.0}})
    assert line.startswith("**The models.** M: instruction-tuned, 4-bit Q4_1, no start token.")
    assert "M 20% to 25%" in line and "; the published base checkpoints 0.3% to 1.4%." in line
    assert "R(16K) moves by at most 5%" in line and "B_simple by a factor of 2.00 to 2.00" in line
    assert "page 04d" in line
    assert "without the norm gains" not in de.regime_line({"M": "x"}, shares, {}, [], {})


def test_shard_lines_put_the_headline_interval_beside_the_within_shard_one_and_size_the_fill():
    many = {"corpus": "BOOKS", "n_docs": 31, "n_shards": 2, "R": 3.809, "R_filled": 4.02, "fill_shift": 0.213,
            "per_shard": [{"documents": "0-15", "n": 16, "R": 4.3}, {"documents": "16-30", "n": 15, "R": 3.24}],
            "ci_doc": [2.747, 4.838], "ci_within_shard": [3.34, 4.305]}
    one = {"corpus": "WEB", "n_docs": 16, "n_shards": 1, "R": 1.02, "fill_shift": 0.0, "per_shard": []}
    books, web = de.shard_lines([many, one])
    assert books.startswith("- BOOKS (31 documents, 2 shards): R(16K) 3.81; per shard 4.30 (documents 0-15), "
                            "3.24 (documents 16-30)")
    assert "resampling documents [2.75, 4.84] (the headline's), within shards [3.34, 4.30]" in books
    assert books.endswith("move it by +0.21.")
    assert web == "- WEB (16 documents, 1 shard): R(16K) 1.02; every pair of documents was computed."
    many["fill_shift"] = -0.001
    assert de.shard_lines([many])[0].endswith("move it by 0.00.")


def test_the_headline_table_gives_no_source_interval_over_too_few_sources(study):
    """Page 04's table, like its box, prints no percentile over 3 clusters: the source column says why."""
    from docgrad.presentation import tables
    _, decomps, rep = study
    sub = rep.subset("o/m", "r", 2048, ["BOOKS", "CODE", "PAPERS", "WEB"])
    books = decomps["BOOKS"]
    original = books.support["source"]["distinct"]
    try:                                                    # the fixture is shared: put its value back
        for distinct, few in ((3, True), (de.FEW_DISTINCT, False)):
            books.support["source"]["distinct"] = distinct
            row = tables.headline_table(sub, sources={"m": decomps}).set_index("corpus").loc["BOOKS"]
            cell = row.filter(like="sources resampled").iloc[0]
            assert cell.startswith("no interval over") == few and cell.startswith("[") == (not few and
                                                                                          de.clustered(books))
    finally:
        books.support["source"]["distinct"] = original
