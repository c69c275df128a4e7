"""Pins page 01b's optimiser numbers (docgrad.teaching.optimisers): Adam absorbs a constant loss factor except
through eps, SGD does not, and a denominator that varies by batch drifts under both."""

import numpy as np
import pytest
import torch
from docgrad.models import tiny_model
from docgrad.teaching import optimisers as O
from docgrad.teaching import reduction as R

torch.set_num_threads(1)


def test_adam_absorbs_a_constant_scale_except_through_eps_and_sgd_does_not():
    g = np.random.default_rng(0).normal(size=(15, 50)) * 1e-3
    out = O.adam_scale_check(g, 0.25)
    assert out["rel_diff_adam_scaled_vs_eps_over_scale"] < 1e-12
    assert 0 < out["rel_diff_adam_scaled"] < 1e-3
    assert out["sgd_step_ratio"] == pytest.approx(0.25) and out["rel_diff_sgd_scaled"] == pytest.approx(0.75)


def test_training_batches_and_scales():
    streams = [np.arange(1000) % 200, np.arange(1000) % 150]
    b = O.training_batches(streams, steps=3, batch_size=4, min_len=4, max_len=20, seed=0)
    assert len(b) == 3 and all(x.input_ids.shape[0] == 4 for x in b)
    for x, c in zip(b, O.batch_scales(b)):
        T = x.input_ids.shape[1]
        assert x.n_padded == 4 * (T - 1)
        assert x.n_valid == int(x.attention_mask.sum()) - 4
        assert c == x.n_valid / x.n_padded and 0 < c <= 1
    summed = torch.tensor(12.0)
    assert float(O.scheme_loss(summed, b[0], "padded_denominator", 0.5)) == pytest.approx(12.0 / b[0].n_padded)
    assert float(O.scheme_loss(summed, b[0], "constant_scale", 0.5)) == pytest.approx(6.0 / b[0].n_valid)
    with pytest.raises(R.ReductionError):
        O.scheme_loss(summed, b[0], "nope", 0.5)
    with pytest.raises(R.ReductionError):
        O.training_batches(streams, 1, 1, 1, 5)


def test_top_layers_from_the_frozen_input_give_the_full_models_logits():
    model = tiny_model("llama", layers=4)
    b = O.training_batches([np.arange(300) % 256], steps=1, batch_size=3, min_len=5, max_len=12, seed=1)[0]
    with torch.no_grad():
        full = model(input_ids=b.input_ids, attention_mask=b.attention_mask).logits
        hidden = O.frozen_input(model, b, 2)
        with O.top_layers_only(model, 2):
            top = model(inputs_embeds=hidden, attention_mask=b.attention_mask).logits
    assert len(model.model.layers) == 4                                  # restored
    valid = b.attention_mask.bool()
    assert float((top - full)[valid].abs().max()) < 1e-5
    assert O.trainable_top_layers(model, 2) == [n for n, _ in model.named_parameters()
                                                if ".layers.2." in n or ".layers.3." in n or n == "model.norm.weight"]


def test_a_varying_denominator_drifts_under_both_optimisers_a_constant_one_only_under_sgd():
    model = tiny_model("llama", layers=3)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    streams = [np.asarray(torch.randint(0, 256, (400,), generator=torch.Generator().manual_seed(s))) for s in range(3)]
    b = O.training_batches(streams, steps=8, batch_size=4, min_len=4, max_len=32, seed=0)
    out = O.training_drift(model, b, optimizers=(("sgd", 0.5), ("adam", 1e-3)), train_top_layers=2)
    fin = {(r["optimizer"], r["scheme"]): r for r in out["final"]}
    assert out["constant"] == pytest.approx(np.mean(O.batch_scales(b)))
    assert fin[("sgd", "token_mean")]["drift"] == 0 and fin[("adam", "token_mean")]["drift"] == 0
    adam_const, adam_var = fin[("adam", "constant_scale")]["drift"], fin[("adam", "padded_denominator")]["drift"]
    assert adam_const < 0.01 and adam_var > 10 * adam_const
    assert fin[("sgd", "constant_scale")]["drift"] > 0.1                  # a smaller learning rate, in effect
    assert fin[("sgd", "padded_denominator")]["drift_from_constant"] > 0.01
    assert all(torch.equal(before[n], p) and p.requires_grad for n, p in model.named_parameters())  # restored
    with pytest.raises(R.ReductionError, match="train_top_layers"):
        O.training_drift(model, b, train_top_layers=9)
