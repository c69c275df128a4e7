"""presentation.measurement: what `docgrad measure` prints and page 04e shows, built by one reading."""

from dataclasses import replace

import numpy as np
import pytest
from docgrad.presentation import measurement as ms
from docgrad.presentation.evidence import interval
from docgrad.results import synthetic as syn
from docgrad.results.stats import analyze


@pytest.fixture(scope="module")
def cells(tmp_path_factory):
    """MINE (CODE's profile) over 16 and over 4 documents, with an 8K span, and a 16K control CTRL."""
    root = tmp_path_factory.mktemp("measurement")
    syn.write_cell(root, model="o/m", revision="r", corpus="MINE", profile=syn.DEFAULT_PROFILES["CODE"], m=16)
    syn.write_cell(root, model="o/m", revision="r", corpus="CTRL", profile=syn.DEFAULT_PROFILES["WEB"], m=32,
                   exact_ref=True)
    few = tmp_path_factory.mktemp("few")
    for corpus, profile, m in (("MINE", "CODE", 16), ("CTRL", "WEB", 32)):
        syn.write_cell(few, model="o/m", revision="r", corpus=corpus, profile=syn.DEFAULT_PROFILES[profile], m=m,
                       n_docs=4, shard_size=4)
    return analyze(root, resamples=200, seed=1, docs=(0, 16)), analyze(few, resamples=200, seed=1, docs=(0, 4))


def test_the_reading_is_at_the_window_both_spans_reach_and_its_gates_name_the_control(cells):
    a, _ = cells
    m = ms.read_measurement(a, "m", "MINE", "CTRL")
    assert m.window == 8192 and m.corpus_window == 8192
    mine, ctrl = a.cell("MINE").all, a.cell("CTRL").all
    assert m.R_rel == pytest.approx(mine.R[8192] / ctrl.R[8192])
    assert m.R("CTRL") == (ctrl.R[8192], ctrl.interval("R", 8192))             # not the control's R(16K)
    g2 = m.gates["G2"]
    assert g2["summary"].startswith("control needs R(8K) < 1.2") and g2["pass"] is (ctrl.R[8192] < 1.2 and
                                                                                 ctrl.rho_long < 0.01)
    assert m.verdict.startswith("MEASURED") and "more design effect than the control" in m.verdict_detail[0]


def test_a_missing_control_is_an_incomplete_verdict_naming_it(cells):
    a, _ = cells
    m = ms.read_measurement(a, "m", "MINE", "WEB")
    assert m.verdict == "INCOMPLETE (no WEB cell)" and m.R_rel is None
    assert ms.r_rel_line(m) == "R_rel(MINE / WEB): not computed (it needs R of both cells)"


def test_a_thin_sample_is_cautioned_beside_its_numbers_and_the_control_near_1_is_not(cells):
    a, few = cells
    assert not [c for c in ms.caution_lines(ms.read_measurement(a, "m", "MINE", "CTRL"))
                if "CTRL's R" in c]                                      # the control's R near 1 is G2, no caution
    lines = ms.measurement_lines(few, "m", "MINE", "CTRL")
    assert "Caution: MINE has 4 documents (fewer than 8): its interval is rough" in "\n".join(lines)
    assert "Caution: CTRL has 4 documents" in "\n".join(lines)
    m = ms.read_measurement(a, "m", "MINE", "CTRL")
    low = replace(m, cell=replace(m.cell, all=replace(m.cell.all, ci={**m.cell.all.ci, "R": {
        **m.cell.all.ci["R"], 8192: (0.9, 2.0)}, "S_cross": (-0.1, 1.0)})))
    said = ms.caution_lines(low)
    assert "Caution: MINE's R(8K) interval reaches below 1 (0.900)" in said[0]
    assert said[1].startswith("Caution: MINE's mean-gradient interval (S_cross) reaches −0.100") or \
        said[1].startswith("Caution: MINE's mean-gradient interval (S_cross) reaches -0.100")


def test_the_decision_sentence_turns_r_and_b_simple_into_a_batch_size(cells):
    a, _ = cells
    m = ms.read_measurement(a, "m", "MINE", "CTRL")
    e = m.cell.all
    R = e.R[8192]
    s = ms.decision_sentence(m)
    assert s.startswith(f"A batch of B tokens in 8K-token blocks of MINE documents carries the gradient noise of "
                        f"about B/{ms.sig(R, 2)} shuffled tokens (R(8K) = {interval(R, e.interval('R', 8192))})")
    assert f"Below a batch of about {ms.rounded(R * e.B_simple_shuf_tokens)} tokens" in s
    unresolved = replace(m, cell=replace(m.cell, all=replace(e, ci={**e.ci, "S_cross": (-1.0, 1.0)})))
    assert ms.decision_sentence(unresolved).endswith("the mean gradient is not resolved (gate G3).")
    assert "Below a batch" not in ms.decision_sentence(unresolved)


@pytest.mark.parametrize("x,text", [(10_813, "11,000"), (3_139, "3,100"), (58.4, "58"), (1.234, "1.2")])
def test_a_batch_size_to_act_on_is_rounded_to_two_figures(x, text):
    assert ms.rounded(x) == text


def test_the_page_box_carries_the_printed_r_rel_verdict_and_decision_within_its_word_limit(cells):
    _, few = cells
    m = ms.read_measurement(few, "m", "MINE", "CTRL")
    box = ms.measurement_box(m, "the regime line")
    assert ms.decision_sentence(m) in box and ms.r_rel_line(m, short=True) in box and m.verdict in box
    assert "**Caveat:** MINE has 4 documents" in box and "more cautions below" in box


def test_a_caveat_too_long_for_the_box_points_below_it_instead(cells):
    a, _ = cells
    m = ms.read_measurement(a, "m", "MINE", "CTRL")
    box = ms.measurement_box(m, "word " * 100)
    assert box.endswith("**Caveat:** cautions and the model's regime are below the box; read them before acting on "
                        "the numbers.")


def test_another_models_regime_is_said_unknown_and_the_studied_one_quotes_page_04d():
    other = ms.regime_lines("ckpt", "no start token, float32, weights as stored", "", False)
    assert other[0] == "ckpt ran with no start token, float32, weights as stored." and "not known" in other[1]
    assert ms.regime_lines("S", "x", "S: it falls (page 04d)", True)[1] == \
        "In other regimes (page 04d): S: it falls (page 04d)."


def test_a_control_whose_span_has_no_long_lag_is_gated_on_its_r_alone(tmp_path):
    """Found measuring /usr/share/common-licenses: a 1,536-token control has no lag of 2,048 tokens, so rho_long is
    NaN, and `NaN < 0.01` failed gate G2 for a control with R(1536) = 0.987."""
    from docgrad.core import gates

    syn.write_cell(tmp_path, model="o/m", revision="r", corpus="CTRL", profile=syn.DEFAULT_PROFILES["WEB"], m=3)
    c = analyze(tmp_path, resamples=100, seed=1, docs=(0, 16)).cell("CTRL")
    assert not np.isfinite(c.all.rho_long) and c.all.R[1536] < 1.2
    g = gates.gate_g2([c], "CTRL", 1536)
    assert g["pass"] is True and "no rho_long (the span has no lag of 2,048 tokens or more: R decides alone)" in \
        g["summary"]
