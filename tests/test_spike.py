"""Where a chunk's gradient comes from (docgrad.measure.spike): the attribution's tail(1) is the probe's squared
norm, the dropped-target and single-target norms are the gradients of those losses, float64 agrees with float32
on a tiny model, and the shifted chunk is the span's next (or, at its end, previous) C tokens."""

import numpy as np
import pytest
import torch
from docgrad.core.groups import named_parameter_groups
from docgrad.measure import gradients as GR
from docgrad.measure import spike as SP
from docgrad.models import tiny_model
from docgrad.runtime.spike_command import controls

torch.set_num_threads(1)
C = 16


def sqnorm_of(model, loss):
    params = [p for _, p, _ in named_parameter_groups(model)]
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    return float(sum((g.double() ** 2).sum() for g in grads if g is not None))


def test_tail_one_is_the_probes_squared_norm_and_each_part_its_own_gradient():
    model = tiny_model("llama", seed=1)
    ids = torch.as_tensor(np.random.default_rng(0).integers(5, 200, C))
    got = SP.chunk_attribution(model, ids, bos_id=3, starts=(1, 2, 5), singles=(1, 2))
    loss = GR.forward_backward(model, ids, 3)
    params = [p for _, p, _ in named_parameter_groups(model)]
    probe = float(sum((p.grad.double() ** 2).sum() for p in params))
    assert got["tail"][1] == pytest.approx(probe, rel=1e-5) and got["loss"] == pytest.approx(loss, rel=1e-6)
    ce = SP.target_losses(model, ids, 3)
    assert got["tail"][5] == pytest.approx(sqnorm_of(model, ce[4:].sum() / (C - 1)), rel=1e-5)
    ce = SP.target_losses(model, ids, 3)
    assert got["single"][2] == pytest.approx(sqnorm_of(model, ce[1] / (C - 1)), rel=1e-5)
    assert SP.chunk_sqnorm(model, ids, None) != pytest.approx(got["tail"][1], rel=1e-3)   # the start token matters


def test_float64_agrees_with_float32_on_a_tame_model():
    model = tiny_model("llama", seed=2)
    ids = torch.as_tensor(np.random.default_rng(1).integers(5, 200, C))
    assert SP.chunk_sqnorm(SP.float64_copy(model), ids, 3) == pytest.approx(SP.chunk_sqnorm(model, ids, 3), rel=1e-4)
    assert next(model.parameters()).dtype == torch.float32                  # the original is untouched


def test_the_shifted_chunk_is_one_token_later_or_earlier_at_the_spans_end():
    span = np.arange(4 * C)
    toks, shift = SP.shifted_tokens(span, C, 1)
    assert shift == 1 and list(toks) == list(range(C + 1, 2 * C + 1))
    toks, shift = SP.shifted_tokens(span, C, 3)
    assert shift == -1 and list(toks) == list(range(3 * C - 1, 4 * C - 1))


def test_each_spiking_chunk_gets_a_distinct_non_spiking_control_of_its_document():
    class Cell:
        m = 4
    rows = [{"doc": 2, "chunk": 3}, {"doc": 2, "chunk": 2}, {"doc": 5, "chunk": 0}]
    assert controls(Cell, rows) == [(2, 1), (2, 0), (5, 1)]
