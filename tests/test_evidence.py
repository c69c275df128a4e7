"""The sentence builders state no more than their intervals: each has its resolved, not resolved and not measured
case pinned (docs/methods.md#evidence-rules)."""

import numpy as np
import pytest

from docgrad.core.orderings import resolve_pairs
from docgrad.presentation import evidence as ev


def test_sig_rounds_to_three_significant_figures():
    assert ev.sig(4.3012) == "4.30"
    assert ev.sig(0.065987) == "0.0660"
    assert ev.sig(1530.4) == "1,530"
    assert ev.sig(float("nan")) == "–"
    assert ev.interval(4.3012, [3.5511, 5.04]) == "4.30 [3.55, 5.04]"
    assert ev.interval(4.3, [None, None]) == "4.30"


def test_difference_is_resolved_only_when_its_interval_excludes_zero():
    up = ev.difference("R(16K)", "PAPERS", "CODE", 1.9, [0.25, 3.88])
    assert up.status == ev.RESOLVED and "higher for PAPERS than for CODE" in up.text
    down = ev.difference("R(16K)", "A", "B", -0.5, [-0.9, -0.1])
    assert down.status == ev.RESOLVED and "lower for A" in down.text
    straddle = ev.difference("R(16K)", "PAPERS", "CODE", 1.03, [-0.13, 2.10])
    assert straddle.status == ev.NOT_RESOLVED and "includes 0" in straddle.text
    assert "higher" not in straddle.text
    assert ev.difference("R(16K)", "A", "B", 1.0, None).status == ev.NOT_MEASURED
    assert ev.difference("R(16K)", "A", "B", float("nan"), [0.1, 0.2]).status == ev.NOT_MEASURED


def test_pair_claims_follow_holm_not_the_raw_interval():
    rng = np.random.default_rng(0)
    draws = {"A": rng.normal(3.0, 0.2, 2000), "B": rng.normal(2.0, 0.2, 2000), "C": rng.normal(1.95, 0.2, 2000)}
    points = {k: float(np.mean(v)) for k, v in draws.items()}
    pairs = resolve_pairs(points, draws, ["A", "B", "C"])
    claims = {(p["a"], p["b"]): c for p, c in zip(pairs, ev.pair_claims("R", pairs))}
    assert claims[("A", "C")].status == ev.RESOLVED and "Holm over 3 pairs" in claims[("A", "C")].text
    assert claims[("B", "C")].status == ev.NOT_RESOLVED
    # an interval that excludes 0 does not count when Holm stopped earlier
    fake = [dict(pairs[0], resolved=False, ci=[0.1, 0.5], diff=0.3)]
    assert ev.pair_claims("R", fake)[0].status == ev.NOT_RESOLVED


def test_no_difference_needs_a_margin_stated_in_advance():
    none = ev.equivalence("bf16 minus float32 R(16K)", -0.09, [-0.26, 0.01], None)
    assert none.status == ev.NOT_RESOLVED and "not evidence of no difference" in none.text
    wide = ev.equivalence("x", -0.09, [-0.26, 0.01], 0.2)
    assert wide.status == ev.NOT_RESOLVED and "beyond the margin" in wide.text
    inside = ev.equivalence("x", -0.09, [-0.26, 0.01], 0.3)
    assert inside.status == ev.EQUIVALENT
    differs = ev.equivalence("x", 0.5, [0.2, 0.8], 0.3)
    assert differs.status == ev.RESOLVED
    assert ev.equivalence("x", None, None, 0.3).status == ev.NOT_MEASURED


def test_a_gate_on_a_point_estimate_says_when_its_interval_straddles_the_threshold():
    g = ev.threshold_gate("R(16K) of the control", 1.128, [1.01, 1.28], 1.2)
    assert g.status == ev.STRADDLES and "straddles 1.20" in g.text
    assert ev.threshold_gate("R", 1.007, [0.92, 1.12], 1.2).status == ev.PASSES
    assert ev.threshold_gate("R", 1.3, [1.21, 1.4], 1.2).status == ev.FAILS
    assert ev.threshold_gate("R", 1.25, [1.1, 1.4], 1.2).status == ev.FAILS
    assert ev.threshold_gate("S", 0.5, [0.1, 0.9], 0.0, below=False).status == ev.PASSES
    assert ev.threshold_gate("R", None, None, 1.2).status == ev.NOT_MEASURED


def test_ours_against_published_is_resolved_only_without_overlap():
    overlap = ev.against_published("CODE's rho_long", 0.066, [0.041, 0.092],
                                   {"Pythia-1.4B": (0.159, [0.076, 0.244]), "OLMo-2-1B": (0.101, [0.060, 0.157])})
    assert overlap.status == ev.NOT_RESOLVED and "overlaps" in overlap.text
    below = ev.against_published("rho", 0.066, [0.041, 0.092], {"P": (0.159, [0.12, 0.2]), "Q": (0.3, None)})
    assert below.status == ev.RESOLVED and "below" in below.text
    one_side = ev.against_published("rho", 0.066, [0.041, 0.092], {"P": (0.01, None), "Q": (0.3, None)})
    assert one_side.status == ev.NOT_RESOLVED
    assert ev.against_published("rho", 0.066, None, {"P": (0.1, None)}).status == ev.NOT_MEASURED


def test_clustered_interval_shows_the_source_interval_only_when_sources_are_shared():
    books = ev.clustered_interval(4.30, [3.55, 5.04], [1.75, 4.30], 16, 8)
    assert books == "4.30 [3.55, 5.04] over 16 documents; resampling its 8 sources, [1.75, 4.30]"
    assert "sources" not in ev.clustered_interval(5.36, [4.2, 6.1], [4.2, 6.1], 16, 16)


def test_result_box_refuses_more_than_its_word_limit():
    box = ev.result_box(["R(16K) is 4.30 [3.55, 5.04]."], "two small models", "one caveat")
    assert box.startswith("> **Result.**") and "**Caveat:** one caveat" in box
    with pytest.raises(ValueError, match="more than 10"):
        ev.result_box(["word " * 20], "m", "c", limit=10)


def test_sketch_box_calls_bf16_equivalent_only_within_a_margin():
    from docgrad.presentation.sketching import sketch_box

    g1 = {"m": {"pass": True, "mean_cos_diff": -0.00026, "sd_cos_diff": 0.0011, "n_pairs": 511},
          "x": {"pass": None, "summary": "no WEB cell"}}
    rec = {"gate": {"median_cosine": 0.9996, "chunks": 32, "tail_cosine": 0.99}, "tail": [{}, {}]}
    checks = {"BOOKS": {"diff": -0.09, "diff_ci": [-0.26, 0.01]}}
    box = sketch_box(g1, rec, checks)
    assert "passes G1" in box and "G1 not evaluated (no WEB cell)" in box and "2 below 0.99" in box
    assert "not resolved" in box and "not shown equivalent" in box
    assert "equivalent within the stated margin" in sketch_box(g1, rec, checks, margin=0.3)


def test_documents_per_corpus_gives_each_model_its_range_and_names_provisional_cells():
    assert ev.documents_per_corpus({"S": [31, 48, 48], "G": [16, 16]}) == "S 31-48; G 16 documents per corpus"
    assert ev.documents_per_corpus({"S": [32]}, {"S": {"CODE": (32, 48)}, "G": {}}) == \
        "S 32 documents per corpus (provisional: S CODE 32 of 48)"


def test_effective_count_maps_the_interval_through_n_over_R_and_swaps_its_ends():
    assert ev.effective_count(32, 4.0, [2.0, 8.0]) == (8.0, [4.0, 16.0])
    assert ev.effective_count(32, 4.0, [-0.5, 8.0]) == (8.0, None)          # an end at or below 0: no interval
    assert ev.effective_count(32, 0.0, [1.0, 2.0]) == (None, None)


def test_first_sentence_is_the_box_answers_opening_sentence():
    box = ev.result_box(["A block is worth about 8.7 [7.5, 10] chunks, not 32 (m).", "R(16K) 3.68."], "x", "y")
    assert ev.first_sentence(box) == "A block is worth about 8.7 [7.5, 10] chunks, not 32 (m)."
