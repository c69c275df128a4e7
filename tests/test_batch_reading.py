"""Page 05's sentences state no more than their intervals: each builder of docgrad.presentation.batch_reading has
its resolved, not resolved and not measured case pinned, and the tables keep 3 significant figures."""

import numpy as np
import pytest

from docgrad.presentation import batch_reading as BR
from docgrad.presentation import evidence as ev
from docgrad.results import batching as B


def _row(corpus, b, rule, g, lex, ci=(0.9, 1.1), lci=(None, None), excess=None, score="unigram"):
    return B.RuleRatio("t/m", "r0", corpus, b, rule, 0, score, g, ci, None, None, lex, lci, None, 1.0, 1.0,
                       1.0, 100, 16, same_document_excess=excess)


def _test(corpus, b, rule, against, diff, ci, resolved, level=0.05 / 4):
    return {"model": "t/m", "revision": "r0", "corpus": corpus, "b": b, "rule": rule, "against": against,
            "diff": diff, "ci": list(ci), "resolved": resolved, "level": level, "p": 0.0 if resolved else 0.5}


def _rows():
    return [_row("BOOKS", 8, "identity", 3.0, 8.0, (2.5, 3.5)),
            _row("BOOKS", 8, "balanced", 0.95, 0.05, (0.93, 0.97), (0.03, 0.08)),
            _row("BOOKS", 8, "coherent", 1.5, 8.0, (1.3, 1.7), (7.9, 8.1), excess=0.8),
            _row("WEB", 8, "identity", 1.02, 1.0, (0.99, 1.05)),
            _row("WEB", 8, "balanced", 0.995, 0.1, (0.99, 1.0), (0.08, 0.12)),
            _row("WEB", 8, "coherent", 1.05, 8.0, (1.01, 1.09), (7.9, 8.1), excess=0.1)]


def _tests():
    return [_test("BOOKS", 8, "identity", "random", 2.0, (1.5, 2.5), True),
            _test("BOOKS", 8, "balanced", "random", -0.05, (-0.07, -0.03), True),
            _test("BOOKS", 8, "coherent", "random", 0.5, (0.3, 0.7), True),
            _test("BOOKS", 8, "identity", "coherent", 1.5, (1.0, 2.0), True),
            _test("WEB", 8, "identity", "random", 0.02, (-0.01, 0.05), False),
            _test("WEB", 8, "balanced", "random", -0.005, (-0.01, 0.0005), False),
            _test("WEB", 8, "coherent", "random", 0.05, (0.01, 0.09), False),
            _test("WEB", 8, "identity", "coherent", -0.03, (-0.1, 0.04), False)]


def _summary(rows=None, tests=None):
    s = B.summary(rows or _rows(), tests if tests is not None else _tests())
    for rule, power, ci in (("balanced", 0.01, [0.005, 0.02]), ("coherent", 0.06, [0.03, 0.1])):
        s["rules"][rule]["power"], s["rules"][rule]["power_ci"] = power, ci
    return s


# --- comparisons and rules ------------------------------------------------------------------------------------

def test_comparison_claims_follow_holm_and_say_when_not_measured():
    tests = _tests() + [_test("CODE", 8, "coherent", "random", 0.2, (0.1, 0.3), False),    # Holm stopped earlier
                        _test("CODE", 8, "balanced", "random", float("nan"), (None, None), False)]
    claims = BR.comparison_claims(tests)
    assert claims[2].status == ev.RESOLVED and "higher for coherent than for random" in claims[2].text
    assert "Holm over 10 comparisons, interval at 98.75%" in claims[2].text
    assert claims[3].status == ev.RESOLVED and "paired halves" in claims[3].text
    assert "higher for document order than for coherent" in claims[3].text      # the rule named for what it is
    assert claims[5].status == ev.NOT_RESOLVED and "includes 0" in claims[5].text
    assert claims[8].status == ev.NOT_RESOLVED and "after Holm's step-down" in claims[8].text
    assert claims[9].status == ev.NOT_MEASURED


def test_rule_claim_counts_only_what_holm_resolves():
    s = _summary()
    bal = BR.rule_claim("balanced", s["rules"]["balanced"], 8)
    assert bal.status == ev.RESOLVED
    assert bal.text == ("Balanced: gradient noise below random's in 1 of 2 cells, not resolved in 1 (Holm over 8 "
                        "comparisons); 0.950 [0.930, 0.970] (BOOKS, b = 8) to 0.995 [0.990, 1.00] (WEB, b = 8).")
    none = BR.rule_claim("balanced", {**s["rules"]["balanced"], "below": 0}, 8)
    assert none.status == ev.NOT_RESOLVED and "not resolved from random's in any of 2 cells" in none.text
    assert "below" not in none.text
    assert BR.rule_claim("coherent", None, 8).status == ev.NOT_MEASURED
    assert BR.rule_claim("coherent", {**s["rules"]["coherent"], "tested": 0}, 8).status == ev.NOT_MEASURED


def test_identity_claim_adds_the_paired_comparison_with_coherent_and_the_control():
    s = _summary()
    c = BR.identity_claim(s["rules"]["identity"], s["identity_vs_coherent"], 8, "WEB")
    assert c.status == ev.RESOLVED
    assert c.text.startswith("Document order: gradient noise above random's")
    assert "above coherent in 1 of 2 cells (paired halves)" in c.text
    assert "in the WEB control (short texts packed together) 1.02–1.02" in c.text
    rec = {**s["rules"]["identity"], "above": 0}
    flat = BR.identity_claim(rec, {"tested": 2, "above": 0, "below": 0}, 8, "WEB")
    assert flat.status == ev.NOT_RESOLVED and "not resolved from coherent in any of 2 cells" in flat.text
    assert BR.identity_claim(None, None, 8, "WEB").status == ev.NOT_MEASURED


# --- lexical against gradient noise, and where coherent's cost comes from --------------------------------------

def test_lexical_claim_is_a_gate_decided_with_its_interval():
    rules = _summary()["rules"]
    c = BR.lexical_claim(rules)
    assert c.status == ev.RESOLVED and "both intervals below 0.5: the lexical ratio does not predict" in c.text
    assert "0.0100 [0.00500, 0.0200] (balanced)" in c.text
    straddle = {**rules, "coherent": {**rules["coherent"], "power": 0.45, "power_ci": [0.3, 0.6]}}
    c = BR.lexical_claim(straddle)
    assert c.status == ev.NOT_RESOLVED and "straddles 0.5" in c.text and "does not predict" not in c.text
    high = {**rules, "coherent": {**rules["coherent"], "power": 0.7, "power_ci": [0.6, 0.8]}}
    c = BR.lexical_claim(high)
    assert c.status == ev.NOT_RESOLVED and "at least 0.5 for coherent" in c.text
    assert BR.lexical_claim({"balanced": rules["balanced"]}).status == ev.NOT_MEASURED


def test_document_pairs_claim_says_most_only_when_every_studied_corpus_is_above_half():
    coh = {"highest": {"b": 8}, "same_document_excess_at_largest_b": {"BOOKS": 0.8, "CODE": 1.09, "WEB": 0.1}}
    c = BR.document_pairs_claim(coh, "WEB")
    assert c.status == BR.DESCRIBED
    assert c.text.startswith("Pairs of chunks of one document carry 80.0% (BOOKS), 109% (CODE) of coherent's noise "
                             "above random's at b = 8, 10.0% in WEB (over 100%")
    assert "most of coherent's cost" in c.text
    low = BR.document_pairs_claim({**coh, "same_document_excess_at_largest_b": {"BOOKS": 0.4, "WEB": 0.1}}, "WEB")
    assert "most" not in low.text and "over 100%" not in low.text
    assert BR.document_pairs_claim({}, "WEB").status == ev.NOT_MEASURED


# --- the batch-composition study, scoped to the measured range -------------------------------------------------

def _scope(b_range=(4, 32), lexical=(4.0, 33.0), bal_lexical=(0.015, 0.23)):
    rows = []
    for corpus, g in (("BOOKS", 3.0), ("WEB", 1.2)):
        for b, lx, bl in ((b_range[0], lexical[0], bal_lexical[1]), (b_range[1], lexical[1], bal_lexical[0])):
            rows += [_row(corpus, b, "coherent", g if b == b_range[1] else 1 + (g - 1) / 4, lx),
                     _row(corpus, b, "balanced", 0.95, bl)]
    return B.study_scope(rows, "WEB")


def test_study_claim_is_never_more_than_not_measured_and_says_what_lies_outside():
    lexical = ev.Claim(ev.RESOLVED, "")
    c = BR.study_claim(_scope(), lexical)
    assert c.status == ev.NOT_MEASURED
    assert ("b = 64 rows outside b = 4–32; coherent lexical ratio 58.5 outside 4.00–33.0; balanced lexical ratio "
            "0.0670 inside 0.0150–0.230") in c.text
    assert "do say that on these chunks a lexical ratio overstates the change in gradient noise" in c.text
    assert "(WEB) to" in c.text and "(BOOKS) times random's noise" in c.text
    assert "WEB (short texts packed like its 2,048-token rows) being the closest analogue" in c.text
    assert "do not say whether that noise changes a trained model's loss" in c.text
    assert "do say" not in BR.study_claim(_scope(), ev.Claim(ev.NOT_RESOLVED, "")).text
    inside = BR.study_claim(_scope(b_range=(16, 128), lexical=(4.0, 70.0)), lexical)
    assert "b = 64 rows inside b = 16–128" in inside.text and "58.5 inside 4.00–70.0" in inside.text
    empty = {"study": B.COMPOSITION_STUDY, "closest": "WEB", "measured_b": [4, 32], "b_inside": False, "rules": {}}
    assert BR.study_claim(empty).status == ev.NOT_MEASURED and "not measured here" in BR.study_claim(empty).text


def test_study_implied_values_are_the_study_ratio_at_each_corpus_power():
    scope = _scope()
    books = scope["rules"]["coherent"]["corpora"]["BOOKS"]
    p = np.median([np.log(1.5) / np.log(4.0), np.log(3.0) / np.log(33.0)])
    assert books["power"] == pytest.approx(p) and books["implied"] == pytest.approx(58.4895 ** p)
    assert books["implied_ci"] == [None, None]                       # no draws: no interval, said as a bare value


def test_reading_leaves_the_surprise_study_out_of_a_loss_sort():
    s = _summary()
    texts = [c.text for c in BR.reading(s)]
    assert any(t.startswith("For the batch-composition study") for t in texts)
    s["score"] = "loss"
    assert not any("batch-composition study" in c.text for c in BR.reading(s))


# --- the box and the tables -----------------------------------------------------------------------------------

def test_result_box_states_the_ranges_with_intervals_within_its_word_limit():
    box = BR.result_box(_summary(), ["org/SmolLM2-135M-Instruct"], 16, [4, 8, 16, 32])
    assert "Sorting by surprise moves gradient noise far less than its batch variance (×8.00–8.00 coherent, " \
           "×0.0500–0.100 balanced)" in box
    assert "coherent up to 1.50 [1.30, 1.70] (BOOKS, b = 8), higher in 1 of 2;" in box
    assert "balanced down to 0.950 [0.930, 0.970] (BOOKS, b = 8), lower in 1 of 2." in box
    assert "SmolLM2-135M-Instruct (4-bit), 16 documents per corpus" in box and "Holm over 8 comparisons" in box
    assert sum(len(x.split()) for x in box.replace(">", " ").split("\n")) <= ev.RESULT_BOX_WORDS + 3   # the markers
    none = BR.result_box({"rules": {}, "family": 0}, ["m"], 16, [4])
    assert ev.first_sentence(none) == "No batching rule was measured, so nothing is said about composing batches."


def test_page_05_box_opens_with_shuffling_across_documents_and_document_orders_interval():
    s = _summary()
    first = ev.first_sentence(BR.result_box(s, ["org/SmolLM2-135M-Instruct"], 16, [4, 8, 16, 32]))
    assert first == ("Shuffle chunks across documents: consecutive chunks of one document carry up to 3.00 [2.50, "
                     "3.50] (BOOKS, b = 8) times random batches' gradient noise, above random in 1 of 2 cells (Holm).")
    s["rules"]["identity"]["above"] = 0                                    # Holm resolves no cell: no advice
    quiet = BR.batching_lead(s)
    assert quiet.startswith("Whether batching consecutive chunks of one document adds gradient noise is not "
                            "resolved: no cell of 2 separates it") and "Shuffle" not in quiet
    del s["rules"]["identity"]
    assert BR.batching_lead(s) == ("Sorting chunks by unigram surprise before batching: coherent batches "
                                   "carry up to 1.50 [1.30, 1.70] (BOOKS, b = 8) times random batches', balanced ones "
                                   "down to 0.950 [0.930, 0.970] (BOOKS, b = 8).")


def test_interval_note_names_the_delete_half_jackknife_not_a_re_centred_bootstrap():
    note = BR.interval_note(500, 16)
    assert note == ("Brackets: 95% intervals from the delete-half jackknife: the rule recomputed on 500 random halves "
                    "of each cell's documents (8 of 16), no document twice, and the estimate × exp(±1.96 standard "
                    "errors) (Shao & Wu 1989).")
    assert "centred" not in note and "(8 of 16)" not in BR.interval_note(500)
    assert BR.interval_note(0, 16).startswith("No intervals")


def test_refused_line_names_the_refused_cells_or_says_none_was():
    none = BR.refused_line({}, 4)
    assert none.endswith("none was refused here (each of the 4 cells measured is one file).")
    assert "listed above" not in none
    some = BR.refused_line({"m r BOOKS c512": "3 result files"}, 3)
    assert some.endswith("refused here: m r BOOKS c512 (reasons in the inputs above).")


def test_table_keeps_three_significant_figures_marks_holm_and_drops_empty_lexical_columns():
    t = BR.table(_rows(), _tests())
    assert t.loc[("BOOKS", 8), ("balanced", "gradient noise")] == "0.950 [0.930, 0.970]*"
    assert t.loc[("WEB", 8), ("coherent", "gradient noise")] == "1.05 [1.01, 1.09]"
    assert t.loc[("BOOKS", 8), ("coherent", "lexical")] == "8.00 [7.90, 8.10]"
    assert not t.isna().any().any()
    bare = BR.table([_row("CODE", 8, "identity", 2.0, None)])
    assert list(bare.columns) == [("document order", "gradient noise")]
    noted = BR.table([_row("CODE", 8, "identity", 2.0, None), _row("BOOKS", 8, "identity", 2.0, 3.0)],
                     lexical_note={"CODE": "not available (span cache missing)"})
    assert noted.loc[("CODE", 8), ("document order", "lexical")] == "not available (span cache missing)"


def test_identity_table_is_at_three_significant_figures():
    t = BR.identity_table([{"corpus": "BOOKS", "b": 4, "identity": 1.41305, "R_bC": 1.42654, "rel_diff": -0.0094707,
                            "R_from_identity": 1.426543}])
    assert t.iloc[0].tolist() == ["BOOKS", 4, "1.41", "1.43", "-0.947%", "1.43"]
    assert list(t.columns)[2] == "document order"


def test_inputs_lines_name_what_was_read_and_what_is_missing():
    measured = [{"corpus": "BOOKS", "synthetic": False}]
    lines = BR.inputs_lines("data/results", ["org/m"], [4, 8], 0, "unigram", 7, 500, measured, ["BOOKS", "CODE"],
                            {"x": "two files"}, {"BOOKS": "not available (cache missing)"})
    assert lines[0] == ("- `data/results`, m: BOOKS; b = 4, 8 chunks; window the whole cell; sorted by mean unigram "
                        "surprise; seed 7; 500 random halves of the documents")
    assert "- corpora without a cell: CODE" in lines and "- refused: x: two files" in lines
    assert "- BOOKS: unigram surprise not available (cache missing)" in lines
    synthetic = BR.inputs_lines("d", ["m"], [4], 64, "loss", 7, 0, [{"corpus": "B", "synthetic": True}], ["B"], {}, {})
    assert "window 64 chunks; sorted by the model loss" in synthetic[0] and "SYNTHETIC" in synthetic[-1]
