"""Worked solutions of the teaching pages: the algebra's numbers agree with the general library functions, and
every number in the text is formatted from them (docgrad.teaching.worked)."""

import numpy as np
import pytest
import torch

from docgrad.teaching import cross_entropy as C
from docgrad.teaching import effective_size as E
from docgrad.teaching import optimisers as O
from docgrad.teaching import packing as K
from docgrad.teaching import reduction as R
from docgrad.teaching import worked as W


def test_sig_gives_three_significant_figures_and_keeps_counts_exact():
    assert W.sig(0.090909) == "0.0909" and W.sig(12345.6) == "12,300" and W.sig(999.9) == "1,000"
    assert W.sig(1.2345e-7) == "1.23e-07" and W.sig(4.0) == "4" and W.sig(0.30000000000000004) == "0.3"
    assert W.sig(1234) == "1,234" and W.sig(None) == "–" and W.sig(float("nan")) == "–"
    assert W.sig([0.123456, 2.0]) == "[0.123, 2]" and W.sig("text") == "text" and W.sig(True) == "True"


def test_sig_table_formats_every_number_and_renames():
    t = W.sig_table([{"a": "x", "b": 0.123456, "c": [1.23456, 7]}], {"a": "name", "b": "B"}, index="a")
    assert list(t.columns) == ["B"] and t.index.tolist() == ["x"] and t.loc["x", "B"] == "0.123"


def test_page01_solutions_agree_with_the_library():
    ex1 = W.optima(3, 30)
    b = R.make_batch([3, 30], [1, 0], [0, 0])
    assert ex1.values == pytest.approx({k: R.optimum(b, k).p for k in ("token_mean", "document_mean")})
    assert r"\frac{3}{33} = 0.0909" in ex1.markdown
    ex2 = W.padding_factor(3, 30, 27)
    b2 = R.make_batch([3, 30], [1, 0], [27, 0])
    assert ex2.values["factor"] == pytest.approx(R.loss(0.0, b2, "padding_in_denominator") / R.loss(0.0, b2, "token_mean"))
    assert ex2.values["padding_as_class0_p"] == pytest.approx(R.optimum(b2, "padding_as_class0").p)
    assert r"\frac{33}{60} = 0.55" in ex2.markdown and r"\frac{3}{60} = 0.05" in ex2.markdown
    ex3 = W.microbatch_weights([20, 80])
    assert ex3.values == R.microbatch_weights([20, 80]) and "= 0.3$" in ex3.markdown
    ex4 = W.target_count(50, 12)
    assert ex4.values == {"with_prompt": R.count_targets(R.causal_lm_labels(torch.arange(50), 12)),
                          "without_prompt": R.count_targets(R.causal_lm_labels(torch.arange(50), 0))}
    assert W.target_count(50, 0).values["with_prompt"] == 49 and "$q$ prompt labels" in ex4.markdown
    ne = W.n_eff_documents([1, 1, 98])
    eff = {r["objective"]: r["n_eff"] for r in E.objective_effective_sizes(R.make_batch([1, 1, 98], [1, 0, 1], [0, 0, 0]))}
    assert ne.values["document_mean"] == pytest.approx(eff["document_mean"]) and ne.values["token_mean"] == pytest.approx(eff["token_mean"])

    pe = W.pad_eos_targets([5, 2])
    run = R.pad_is_eos(["a b c d e", "f g"])
    assert run["trl"]["targets"] == run["targets_by_position"]                  # TRL masks by position
    assert pe.values == {"targets_by_position": run["targets_by_position"],
                         "targets_masked_by_id": run["transformers"]["targets"],
                         "real_eos_lost": run["n_real_eos"] - run["transformers"]["real_eos_labels_kept"]}
    assert "$5 + 2 = 7$" in pe.markdown and "$7 - 2 = 5$" in pe.markdown
    with pytest.raises(R.ReductionError):
        W.pad_eos_targets([3, 0])


def test_page01b_solutions_agree_with_the_library():
    ex = W.rank_weights([120, 480, 200, 200])
    assert {k: v for k, v in ex.values.items() if k != "rank0_loss_factor"} == R.microbatch_weights([120, 480, 200, 200])
    assert ex.values["rank0_loss_factor"] == pytest.approx(4 / 1000) and "1/W" in ex.markdown and "n_r/N" in ex.markdown
    adam = W.adam_eps(1e-4, 1e-4, 1e-8)
    run = O.adam_scale_check(np.full((10, 1), 1e-4), 1e-4)
    assert adam.values["step_ratio"] == pytest.approx(1 - run["rel_diff_adam_scaled"], rel=1e-6)
    assert adam.values["step_ratio"] == pytest.approx(0.50005) and adam.values["sgd_step_ratio"] == run["sgd_step_ratio"]


def test_page01c_solutions_agree_with_the_library():
    pk = W.packing([10, 30, 60])
    assert pk.values["counts"] == K.packed_target_counts([11, 31, 61])
    assert pk.values["token_mean_weights"] == pytest.approx(K.packed_weights([10, 30, 60])["document_weights"])
    assert pk.values["per_document_weights"] == pytest.approx(
        K.packed_weights([10, 30, 60], per_document=True)["document_weights"])
    assert pk.values["short_over_long_per_target"] == 6.0 and r"\frac{60}{100}" in pk.markdown
    logits = np.random.default_rng(0).normal(size=(5, 3))
    ce = W.class_weight_mean(logits, [0, 2, 2, -100, 1], [1.0, 4.0, 0.5])
    hand = C.cross_entropy_by_hand(logits, [0, 2, 2, -100, 1], weight=[1.0, 4.0, 0.5])
    assert ce.values["denominator"] == hand["denominator"] == 6.0 and ce.values["loss"] == pytest.approx(hand["loss"])
    torch_loss = torch.nn.functional.cross_entropy(torch.from_numpy(logits), torch.tensor([0, 2, 2, -100, 1]),
                                                   weight=torch.tensor([1.0, 4.0, 0.5], dtype=torch.float64))
    assert ce.values["loss"] == pytest.approx(float(torch_loss))


def test_worked_solutions_refuse_empty_inputs():
    with pytest.raises(R.ReductionError):
        W.optima(0, 30)
    with pytest.raises(R.ReductionError):
        W.microbatch_weights([20, 0])
    with pytest.raises(R.ReductionError):
        W.target_count(1, 0)
