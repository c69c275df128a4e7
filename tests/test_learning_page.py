"""What page 07 says (presentation.learning) from the training test's reading (results.learning.read_page): nothing
decided before every run and R are committed, then one sentence per corpus built from the reading."""

import json

import numpy as np
import pytest
from docgrad.presentation import learning as pl
from docgrad.results import learning as lr


def write_runs(folder, corpus, S_of_b, contiguous, T=100, E=10, seeds=(0, 1, 2)):
    """Run files whose held-out loss falls from 5 by 1 every S steps; L* (b = 2 at T/2) = 5 - 50 / S(2)."""
    for seed in seeds:
        for arm, b, S in [*(("shuffled", b, S) for b, S in S_of_b.items()), ("contiguous", 32, contiguous[seed])]:
            steps = list(range(0, T + 1, E))
            rec = {"config": {"corpus": corpus, "arm": arm, "b": b, "seed": seed, "steps": T, "chunk": 128},
                   "eval_steps": steps, "held_out": [5.0 - s / S for s in steps]}
            (folder / f"{corpus}_{arm}_b{b}_s{seed}.json").write_text(json.dumps(rec))


def write_R(folder, corpus, R):
    draws = list(np.linspace(0.9 * R, 1.1 * R, 400))
    rec = {"corpus": corpus, "R": R, "ci": [0.9 * R, 1.1 * R], "draws": draws, "checkpoint_steps": [10, 50, 100],
           "checkpoints": [{"R": R, "ci": [0.9 * R, 1.1 * R], "B_simple_tokens": 1000.0}] * 3}
    (folder / f"R_{corpus}.json").write_text(json.dumps(rec))


def test_nothing_is_decided_until_every_run_and_r_are_committed(tmp_path):
    S = {b: 100 * (1 + 16 / b) for b in (2, 4, 8, 16, 32)}          # L* at step 50 of b = 2: S(2) = 900 -> 4.944
    write_runs(tmp_path, "CODE", S, [S[32]] * 3)
    page = lr.read_page(tmp_path, ["CODE", "WEB"])
    assert page["complete"] is False and page["present"] == {"CODE": 18, "WEB": 0}
    box = pl.result_box(page)
    assert "Not measured yet" in box and "CODE 18 of 18, WEB 0 of 18" in box and "missing for CODE, WEB" in box
    assert pl.ladder_rows(page) == [] == pl.prediction_rows(page) and len(pl.loss_rows(page["runs"])) == 18 * 11
    assert pl.arm_order(pl.loss_rows(page["runs"])) == ["shuffled b=2", "shuffled b=4", "shuffled b=8",
                                                         "shuffled b=16", "shuffled b=32", "contiguous b=32"]


def test_a_complete_test_states_each_corpus_decision_with_b_eff_against_b_over_r(tmp_path):
    S = {b: 100 * (1 + 16 / b) for b in (2, 4, 8, 16, 32)}
    S_R = 100 * (1 + 3.0 * 16 / 32)
    write_runs(tmp_path, "CODE", S, [S_R - 2, S_R, S_R + 2])
    write_R(tmp_path, "CODE", 3.0)
    page = lr.read_page(tmp_path, ["CODE"], controls=())
    assert page["complete"] and page["T"] == 100
    r = page["readings"]["CODE"]
    assert r["decision"] == lr.PREDICTS and r["level"] == pytest.approx(0.95)     # one corpus: no Holm step
    sentence = pl.corpus_answer("CODE", r)
    assert sentence.startswith("**CODE**: a batch of 32 consecutive chunks of one document trained like 10.")
    assert "predicted 32 / R = 10.7 [9.7, 11.8]: R predicts learning (14 steps to L* against 14 [13, 15]" in sentence
    assert "95% intervals)." in sentence
    assert pl.result_box(page).startswith("> **Result.** CODE: R predicts learning; b_eff 10.")
    kinds = {row["kind"] for row in pl.ladder_rows(page)}
    assert kinds == {"shuffled", "contiguous", "fit"}
    pred = {row["what"]: row for row in pl.prediction_rows(page)}
    assert pred["predicted with R"]["value"] == pytest.approx(r["S_R"]) and pred["predicted with R = 1"]["lo"] == \
        pytest.approx(r["S_1_ci"][0])
    contiguous = page["steps"]["CODE"]["contiguous"]
    assert pred["measured: contiguous b=32"]["value"] == pytest.approx(sum(contiguous) / 3)   # mean of the seeds
    assert pred["predicted: 32 / R"]["value"] == pytest.approx(32 / 3.0) and pred["measured: b_eff"]["hi"] > 10
    assert [row["step"] for row in pl.R_rows(page["R"])] == [10, 50, 100]


def test_runs_of_two_lengths_are_refused(tmp_path):
    S = {b: 100 * (1 + 16 / b) for b in (2, 4, 8, 16, 32)}
    write_runs(tmp_path, "CODE", S, [200] * 3)
    write_runs(tmp_path, "CODE", S, [200] * 4, T=200, seeds=(3,))
    with pytest.raises(ValueError, match="runs of different T"):
        lr.read_page(tmp_path, ["CODE"])


def test_the_decision_is_described_through_its_parts_each_checkpoint_and_the_loss_at_step_t(tmp_path):
    S = {b: 100 * (1 + 16 / b) for b in (2, 4, 8, 16, 32)}             # held-out loss 5 - step / S
    S_R = 100 * (1 + 3.0 * 16 / 32)                                      # 250: contiguous loss at T = 100 is 4.6
    write_runs(tmp_path, "CODE", S, [S_R - 2, S_R, S_R + 2])
    write_R(tmp_path, "CODE", 3.0)
    page = lr.read_page(tmp_path, ["CODE"], controls=())
    (line,) = pl.described_lines(page)
    r = page["readings"]["CODE"]
    numerator, rest = line.split("b_eff = S_min b_noise / (S − S_min) = ")[1].split(" / (", 1)
    S, S_min = (float(x) for x in rest.split(")")[0].split(" − "))
    assert float(numerator) / (S - S_min) == pytest.approx(r["b_eff"], rel=0.02)    # the parts give b_eff back
    assert "evaluations 10 steps apart" in line
    assert line.count("10.7 [9.7, 11.9] at step") == 3                          # 32 / 3.0 in 32 / [3.3, 2.7]
    assert "alone gives 32 / R = 10.7 [9.7, 11.9] at step 10," in line
    assert "the rule's R, their mean, gives 10.7" in line
    assert "lies between the shuffled b = 8 (4.667) and b = 16 (4.500) arms" in line                   # 4.600
    assert pl.described_lines(lr.read_page(tmp_path, ["CODE", "WEB"])) == []                           # incomplete


def test_a_loss_off_the_ladder_is_said_to_be_above_or_below_every_shuffled_arm():
    means = {2: 6.0, 8: 5.5, 32: 5.0}
    assert pl._where_on_ladder(6.2, means) == "above every shuffled arm (b = 2: 6.000)"
    assert pl._where_on_ladder(4.9, means) == "below every shuffled arm (b = 32: 5.000)"
    assert pl._where_on_ladder(5.2, means).startswith("between the shuffled b = 8 (5.500) and b = 32")


def test_a_legend_limited_to_two_corpora_keeps_each_corpus_colour_of_the_other_pages():
    from docgrad.presentation.charts import corpus_color

    full, shown = corpus_color().to_dict(), corpus_color(shown=["CODE", "WEB"]).to_dict()
    assert shown["scale"] == full["scale"] and full["scale"]["domain"][0] != "CODE"   # CODE keeps its place
    assert shown["legend"] == {"values": ["CODE", "WEB"]} and "legend" not in full


def test_a_missing_folder_a_file_or_an_unknown_corpus_is_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match="no such folder"):
        lr.read_page(tmp_path / "nope", ["CODE"])
    (tmp_path / "run.json").write_text("{}")
    with pytest.raises(ValueError, match="run.json: a file"):
        lr.read_page(tmp_path / "run.json", ["CODE"])
    with pytest.raises(ValueError, match="NOPE is neither one of BOOKS, CODE, PAPERS, WEB nor a corpus with runs"):
        lr.read_page(tmp_path, ["CODE", "NOPE"])
    write_runs(tmp_path, "MINE", {b: 100 * (1 + 16 / b) for b in (2, 4, 8, 16, 32)}, [200] * 3)
    assert lr.read_page(tmp_path, ["MINE", "CODE"])["present"] == {"MINE": 18, "CODE": 0}   # a user's own corpus
