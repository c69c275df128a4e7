"""Pins every number of notebook 01 (seed 003's scalar model, PyTorch objectives, accumulation on a tiny LM)."""

import math

import pytest
import torch
from docgrad.models import tiny_model
from docgrad.teaching import reduction as R

torch.set_num_threads(1)
LOG2 = math.log(2.0)


@pytest.fixture(scope="module")
def seed_batch():
    """Document A: 2 positions labelled 1; B: 8 positions labelled 0; A padded with 6 positions."""
    return R.make_batch([2, 8], [1, 0])


def test_seed_batch_pads_shorter_document_to_the_longest(seed_batch):
    assert seed_batch.valid_counts == [2, 8]
    assert seed_batch.n_positions == 16
    assert seed_batch.n_valid == 10


@pytest.mark.parametrize("objective, expected_loss, expected_grad", [
    ("token_mean", LOG2, 0.3),
    ("document_mean", LOG2, 0.0),
    ("padding_as_class0", LOG2, 0.375),
    ("padding_in_denominator", 0.433217, 0.1875),
    ("label0_as_padding", LOG2, -0.5),
])
def test_losses_and_gradients_at_theta_zero(seed_batch, objective, expected_loss, expected_grad):
    assert R.loss(0.0, seed_batch, objective) == pytest.approx(expected_loss, abs=5e-7)
    assert R.gradient(0.0, seed_batch, objective) == pytest.approx(expected_grad, abs=1e-12)


def test_log2_value_is_0_693147(seed_batch):
    assert round(R.loss(0.0, seed_batch, "token_mean"), 6) == 0.693147


def test_wrong_denominator_is_ten_sixteenths_of_the_token_mean(seed_batch):
    for th in (-2.0, 0.0, 0.3, 4.0):
        assert R.loss(th, seed_batch, "padding_in_denominator") == pytest.approx(
            10 / 16 * R.loss(th, seed_batch, "token_mean"), rel=1e-13)


@pytest.mark.parametrize("objective, p", [
    ("token_mean", 0.2), ("document_mean", 0.5), ("padding_as_class0", 0.125), ("padding_in_denominator", 0.2)])
def test_finite_optima(seed_batch, objective, p):
    opt = R.optimum(seed_batch, objective)
    assert opt.finite and opt.p == pytest.approx(p, abs=1e-15)
    assert R.gradient(opt.theta, seed_batch, objective) == pytest.approx(0.0, abs=1e-15)


def test_label0_as_padding_has_no_finite_optimum(seed_batch):
    opt = R.optimum(seed_batch, "label0_as_padding")
    assert not opt.finite and opt.p == 1.0 and opt.theta == math.inf
    assert "no finite optimum" in opt.describe()
    # the loss keeps decreasing as theta grows
    assert R.loss(10.0, seed_batch, "label0_as_padding") < R.loss(5.0, seed_batch, "label0_as_padding")


def test_document_weights_token_vs_document_mean(seed_batch):
    rows = {r["objective"]: r for r in R.objectives_table(seed_batch)}
    assert rows["token_mean"]["document_weights"] == pytest.approx([0.2, 0.8])
    assert rows["document_mean"]["document_weights"] == pytest.approx([0.5, 0.5])


def test_stable_loss_at_extreme_logits(seed_batch):
    assert math.isfinite(R.loss(800.0, seed_batch, "token_mean"))
    assert math.isfinite(R.loss(-800.0, seed_batch, "token_mean"))
    assert R.position_loss(-800.0, 1) == pytest.approx(800.0)


def test_masked_padding_leaves_loss_and_gradient_unchanged():
    rows = R.padding_invariance([2, 8], [1, 0], added=(0, 1, 6, 20), thetas=(-1.0, 0.0, 0.3))
    assert len(rows) == 2 * 4 * 3
    assert {r["added"] for r in rows} == {0, 1, 6, 20}
    assert max(max(r["abs_loss_diff"], r["abs_grad_diff"]) for r in rows) < 1e-15


def test_unmasked_padding_does_change_the_objective():
    a = R.make_batch([2, 8], [1, 0], padding=[0, 0])
    b = R.make_batch([2, 8], [1, 0], padding=[20, 20])
    assert R.gradient(0.0, a, "padding_as_class0") != pytest.approx(R.gradient(0.0, b, "padding_as_class0"))


def test_microbatch_accumulation():
    acc = R.microbatch_accumulation([2, 8], [1, 0], theta=0.0)
    assert acc["microbatch_mean_gradients"] == [-0.5, 0.5]
    assert acc["unweighted_average"] == 0.0
    assert acc["count_weighted_average"] == pytest.approx(0.3, abs=1e-15)
    assert acc["unweighted_average"] == pytest.approx(acc["full_batch_document_mean"], abs=1e-15)
    assert acc["count_weighted_average"] == pytest.approx(acc["full_batch_token_mean"], abs=1e-15)


def test_equal_counts_make_both_accumulations_agree():
    acc = R.microbatch_accumulation([5, 5], [1, 0], theta=0.7)
    assert acc["unweighted_average"] == pytest.approx(acc["count_weighted_average"], abs=1e-15)


def test_zero_valid_positions_raise_instead_of_returning_zero():
    empty = R.make_batch([0, 0], [1, 0], padding=[4, 4])
    with pytest.raises(R.NoValidPositionsError, match="zero valid positions"):
        R.loss(0.0, empty, "token_mean")
    with pytest.raises(R.NoValidPositionsError, match="document"):
        R.loss(0.0, R.make_batch([0, 3], [1, 0]), "document_mean")


def test_negative_lengths_are_rejected():
    with pytest.raises(R.ReductionError, match=r"lengths\[1\] = -3"):
        R.make_batch([2, -3], [1, 0])


@pytest.mark.parametrize("bad", [2, -1])
def test_labels_outside_0_1_are_rejected(bad):
    with pytest.raises(R.ReductionError, match="labels must be 0 or 1"):
        R.make_batch([2, 8], [1, bad])


def test_mismatched_lists_and_negative_padding_are_rejected():
    with pytest.raises(R.ReductionError, match="one entry per document"):
        R.make_batch([2, 8], [1])
    with pytest.raises(R.ReductionError, match="padding"):
        R.make_batch([2, 8], [1, 0], padding=[-1, 0])


def test_central_finite_difference_at_0_3(seed_batch):
    for obj in R.OBJECTIVES:
        fd = R.finite_difference_check(seed_batch, obj, theta=0.3)
        assert 0 <= fd["abs_error"] < 1e-8
    assert R.finite_difference_check(seed_batch, "token_mean", theta=0.3)["abs_error"] < 1e-10


# --- PyTorch ----------------------------------------------------------------------------------------

def test_torch_cross_entropy_reproduces_every_objective(seed_batch):
    for theta in (0.0, 0.3, -1.2):
        ours = {r["objective"]: r for r in R.objectives_table(seed_batch, theta)}
        for row in R.torch_objectives(seed_batch, theta):
            assert row["loss"] == pytest.approx(ours[row["objective"]]["loss"], abs=1e-12)
            assert row["gradient"] == pytest.approx(ours[row["objective"]]["gradient"], abs=1e-12)


def test_torch_mean_over_all_ignored_targets_is_nan_ours_raises():
    out = R.all_ignored_comparison()
    assert math.isnan(out["torch_mean"]) and out["torch_mean_is_nan"]
    assert out["torch_sum"] == 0.0
    assert out["docgrad"].startswith("NoValidPositionsError")


def test_targets_counted_after_causal_shift_and_prompt_mask():
    docs = R.make_documents([10, 6, 9], prompt_lengths=[0, 1, 4])
    assert [d["n_targets"] for d in docs] == [9, 5, 5]
    with pytest.raises(R.ReductionError, match="at least 2 tokens"):
        R.make_documents([1])
    with pytest.raises(R.ReductionError, match="prompt_length"):
        R.causal_lm_labels(torch.arange(4), 5)


@pytest.mark.parametrize("arch", ["llama", "gpt_neox"])
def test_num_items_normalisation_matches_full_batch_on_tiny_lm(arch):
    model = tiny_model(arch)
    docs = R.make_documents([40, 10, 17], prompt_lengths=[3, 0, 5], seed=1)
    acc = R.lm_accumulation(model, docs, microbatches=[[0], [1, 2]])
    assert acc["targets_per_microbatch"] == [37, 9 + 12]
    assert acc["n_targets_total"] == 58
    assert acc["rel_discrepancy_num_items"] < 1e-5
    assert acc["loss_num_items"] == pytest.approx(acc["loss_full_token_mean"], rel=1e-5)
    assert acc["rel_discrepancy_averaged"] > 0.05  # averaging means is a different objective


def test_equal_target_counts_make_averaged_means_exact_on_tiny_lm():
    acc = R.lm_accumulation(tiny_model("llama"), R.make_documents([20, 20], seed=2))
    assert acc["rel_discrepancy_averaged"] < 1e-5


def test_accumulation_discrepancy_grows_with_length_inequality():
    rows = R.accumulation_growth(tiny_model("llama"), total_tokens=64, ratios=(1, 3, 15))
    tv = [r["total_variation"] for r in rows]
    disc = [r["rel_discrepancy_averaged"] for r in rows]
    assert tv[0] == 0 and tv[0] < tv[1] < tv[2]
    assert disc[0] < 1e-5 < disc[1] < disc[2]
    assert max(r["rel_discrepancy_num_items"] for r in rows) < 1e-5


def test_microbatch_weights():
    w = R.microbatch_weights([2, 8])
    assert w["token_mean"] == pytest.approx([0.2, 0.8])
    assert w["per_target_weight_ratio"] == 4.0
    assert w["total_variation"] == pytest.approx(0.3)
    with pytest.raises(R.NoValidPositionsError):
        R.microbatch_weights([0, 3])


def test_documents_cut_from_real_tokens_keep_their_order():
    tokens = torch.arange(100, 140)
    docs = R.make_documents([10, 5], prompt_lengths=[2, 0], tokens=tokens)
    assert docs[0]["input_ids"].tolist() == list(range(100, 110))
    assert docs[1]["input_ids"].tolist() == list(range(110, 115))
    assert [d["n_targets"] for d in docs] == [8, 4]
    with pytest.raises(R.ReductionError, match="cannot be cut"):
        R.make_documents([30, 20], tokens=tokens)


def test_accumulation_growth_on_given_tokens_uses_them():
    model = tiny_model("llama")
    tokens = torch.randint(0, 256, (64,), generator=torch.Generator().manual_seed(5))
    a = R.accumulation_growth(model, total_tokens=64, ratios=(1, 7), tokens=tokens)
    b = R.accumulation_growth(model, total_tokens=64, ratios=(1, 7))
    assert a[1]["lengths"] == b[1]["lengths"] == [56, 8]
    assert a[1]["rel_discrepancy_averaged"] != pytest.approx(b[1]["rel_discrepancy_averaged"])
    assert max(r["rel_discrepancy_num_items"] for r in a) < 1e-5


# --- the exercises of pages 01 and 01a: the values their worked solutions state ------------------------------

def _exercises(stem):
    import json
    from pathlib import Path

    twin = Path(__file__).resolve().parents[1] / "figures" / f"{stem}.json"
    data = json.loads(twin.read_text()) if twin.exists() else {}
    if "exercises" not in data:
        pytest.skip(f"page {stem} has not been executed with its exercises")
    return data["exercises"]


@pytest.fixture(scope="module")
def page01_exercises():
    return _exercises("01_loss_reduction")


@pytest.fixture(scope="module")
def page01a_exercises():
    return _exercises("01a_gradient_accumulation")


def test_page01_exercise_1_optima(page01_exercises):
    b = R.make_batch([3, 30], [1, 0], padding=[0, 0])
    assert R.optimum(b, "token_mean").p == pytest.approx(3 / 33)
    assert R.optimum(b, "document_mean").p == pytest.approx(0.5)
    assert page01_exercises["1"] == pytest.approx({"token_mean": 3 / 33, "document_mean": 0.5}, rel=1e-5)


def test_page01_exercise_2_padding(page01_exercises):
    b = R.make_batch([3, 30], [1, 0], padding=[27, 0])
    factor = R.loss(0.0, b, "padding_in_denominator") / R.loss(0.0, b, "token_mean")
    assert factor == pytest.approx(33 / 60) and R.optimum(b, "padding_as_class0").p == pytest.approx(3 / 60)
    assert page01_exercises["2"] == pytest.approx({"factor": 0.55, "padding_as_class0_p": 0.05}, rel=1e-5)


def test_page01_exercise_3_pad_is_eos(page01_exercises):
    out = R.pad_is_eos(["a b c d e", "f g"])
    assert (out["targets_by_position"], out["transformers"]["targets"], out["trl"]["targets"]) == (7, 5, 7)
    assert page01_exercises["3"] == {"words": [5, 2], "targets_by_position": 7, "targets_masked_by_id": 5,
                                     "real_eos_lost": 2}


def test_page01a_exercise_1_accumulation(page01a_exercises):
    w = R.microbatch_weights([20, 80])
    assert w["per_target_weight_ratio"] == 4.0 and w["total_variation"] == pytest.approx(0.3)
    e = page01a_exercises["1"]
    assert e["averaged"] == [0.5, 0.5] and e["token_mean"] == pytest.approx([0.2, 0.8])
    assert e["per_target_weight_ratio"] == 4.0 and e["total_variation"] == pytest.approx(0.3)


def test_page01a_exercise_2_target_counts(page01a_exercises):
    assert R.count_targets(R.causal_lm_labels(torch.arange(50), 12)) == 38
    assert R.count_targets(R.causal_lm_labels(torch.arange(50), 0)) == 49
    e = page01a_exercises["2"]
    assert (e["with_prompt"], e["without_prompt"]) == (38, 49)
    assert (e["installed_count"]["shifted_count"], e["installed_count"]["unshifted_count"]) == (49, 50)


def test_page01a_exercise_3_effective_sample_size(page01a_exercises):
    from docgrad.teaching import effective_size as E

    rows = {r["objective"]: r for r in E.objective_effective_sizes(R.make_batch([1, 1, 98], [1, 0, 1], [0, 0, 0]))}
    exact = 1 / (2 / 9 + 98 / 294 ** 2)
    assert rows["document_mean"]["n_eff"] == pytest.approx(exact)
    assert page01a_exercises["3"] == pytest.approx({"token_mean": 100, "document_mean": exact}, rel=1e-5)


def test_the_code_exercises_of_pages_01_and_01a_pass_with_their_solutions(page01_exercises, page01a_exercises):
    assert page01_exercises["4"]["passed"] and page01_exercises["4"]["message"].startswith("correct")
    assert page01a_exercises["4"]["passed"] and page01a_exercises["4"]["divisors"] == [76.0, 76.0, 76.0]


def test_probability_targets_divide_by_the_rows_and_class_indices_by_the_targets_weights():
    w = [1.0, 4.0, 0.5]
    out = R.probability_targets_mean([[2.0, 0.0, -1.0], [0.5, 1.0, 0.0], [0.0, 0.0, 3.0]], [1, 1, 2], w)
    assert out["indices"] == pytest.approx(out["weighted_sum"] / (4.0 + 4.0 + 0.5))
    assert out["probabilities"] == pytest.approx(out["weighted_sum"] / 3)
    plain = R.probability_targets_mean([[2.0, 0.0, -1.0], [0.5, 1.0, 0.0]], [1, 2])
    assert plain["indices"] == pytest.approx(plain["probabilities"])     # no weights: both divide by N


def test_growth_bias_rows_say_which_way_the_loss_moves_only_as_measured():
    row = {"lengths": [120, 8], "loss_averaged_means": 5.6, "loss_token_mean": 5.2, "loss_short": 6.0,
           "loss_long": 5.1}
    out = R.growth_bias_rows([row])[0]
    assert out["effect"] == "raises" and out["bias"] == pytest.approx(0.4)
    assert (out["long_tokens"], out["short_tokens"]) == (120, 8)
    low = dict(row, loss_averaged_means=5.0, loss_short=4.0)
    assert R.growth_bias_rows([low])[0]["effect"] == "lowers"
    assert R.growth_bias_rows([dict(row, loss_short=4.0)])[0]["effect"] == ""   # a positive bias, a lower loss
    assert R.growth_bias_rows([dict(row, lengths=[64, 64])]) == []


# --- pad == EOS: a mask from a token id ---------------------------------------------------------------------------

def test_a_pad_token_that_is_the_eos_token_drops_every_real_eos_label_when_masked_by_id():
    out = R.pad_is_eos(["the cat sat", "a dog ran far away"])
    assert out["pad_token_id"] == out["eos_token_id"] and out["lengths"] == [4, 6]
    assert out["tokens"][0] == ["the", "cat", "sat", "<eos>", "<eos>", "<eos>"]
    hf, trl = out["transformers"], out["trl"]
    assert hf["real_eos_labels_kept"] == 0 and trl["real_eos_labels_kept"] == 2
    assert hf["labels"][0][3:] == [-100, -100, -100] and trl["labels"][0][3:] == [0, -100, -100]
    assert trl["targets"] == out["targets_by_position"] == 3 + 5 and hf["targets"] == 8 - 2
    with pytest.raises(R.ReductionError, match="two non-empty texts"):
        R.pad_is_eos(["only one"])


# --- the code exercises' checkers: they fail the bug and pass the fix ---------------------------------------------

def _token_mean(losses, labels):
    mask = (labels != -100).to(losses.dtype)
    if mask.sum() == 0:
        raise ValueError("no supervised position")
    return (losses * mask).sum() / mask.sum()


def test_the_token_mean_checker_passes_the_masked_mean_and_names_each_usual_mistake():
    assert R.check_token_mean(_token_mean)["passed"]
    padding_as_data = R.check_token_mean(lambda losses, labels: losses.mean())
    assert not padding_as_data["passed"] and "padding counted as data" in padding_as_data["message"]
    numerator_only = R.check_token_mean(lambda l, lab: (l * (lab != -100)).sum() / l.numel())
    assert not numerator_only["passed"] and "numerator only" in numerator_only["message"]
    rows = R.check_token_mean(lambda l, lab: ((l * (lab != -100)).sum(1) / (lab != -100).sum(1)).mean())
    assert not rows["passed"] and "document mean" in rows["message"]


def test_the_token_mean_checker_fails_a_zero_or_nan_for_a_batch_without_a_target():
    no_error = R.check_token_mean(lambda l, lab: (l * (lab != -100)).sum() / (lab != -100).sum())
    assert not no_error["passed"] and "no supervised position" in no_error["message"]
    assert "raise an error" in no_error["message"] and [r["ok"] for r in no_error["rows"]] == [True, True, True, False]


def test_the_normaliser_checker_passes_the_total_shifted_count_and_names_each_usual_mistake():
    def total(labels, k):
        return sum(int((lab[..., 1:] != -100).sum()) for lab in labels)

    good = R.check_normaliser(total)
    assert good["passed"] and good["rel_diff"] < R.CHECK_TOLERANCE and good["divisors"] == [76.0] * 3
    assert good["targets_per_microbatch"] == [43, 20, 13]
    unshifted = R.check_normaliser(lambda labels, k: sum(int((lab != -100).sum()) for lab in labels))
    assert not unshifted["passed"] and "position 0 of every row included" in unshifted["message"]
    means = R.check_normaliser(lambda labels, k: int((labels[k][..., 1:] != -100).sum()) * len(labels))
    assert not means["passed"] and "mean of microbatch means" in means["message"] and means["rel_diff"] > 0.1
    own = R.check_normaliser(lambda labels, k: int((labels[k][..., 1:] != -100).sum()))
    assert not own["passed"] and "own target count" in own["message"]
    assert R.check_normaliser(lambda labels, k: 0)["message"].startswith("not yet: microbatch 0's divisor is 0")


def test_the_full_batch_gradient_is_the_models_own_token_mean():
    model = tiny_model("llama")
    docs = R.make_documents([12, 7], [3, 0], seed=4)
    g, loss = R.full_batch_gradient(model, docs)
    model.zero_grad(set_to_none=True)
    (R.summed_loss(model, docs) / sum(d["n_targets"] for d in docs)).backward()
    assert float((R.flat_grad(model) - g).norm() / g.norm()) < 1e-5
    assert all(p.grad is None for p in model.parameters()) is False
