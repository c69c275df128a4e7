"""Pins page 01b's data-parallel and Trainer numbers (docgrad.teaching.trainers): the simulated ranks, the installed
Trainer's accumulated step, the real two-process torchrun step, and the code exercises' checkers."""

import math

import numpy as np
import pytest
import torch
from docgrad.models import tiny_model
from docgrad.teaching import optimisers as O
from docgrad.teaching import reduction as R
from docgrad.teaching import trainers as T

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def llama():
    return tiny_model("llama")


@pytest.fixture(scope="module")
def docs():
    return R.make_documents([40, 10, 17], seed=1)


# --- data parallelism ------------------------------------------------------------------------------------

def test_global_count_times_world_size_reproduces_the_full_batch(llama, docs):
    dp = T.data_parallel_step(llama, docs, [[0], [1, 2]])
    assert dp["targets_per_rank"] == [39, 25] and dp["n_targets_total"] == 64
    assert dp["rank_weights_global_count"] == pytest.approx([39 / 64, 25 / 64])
    assert dp["rank_weights_local_mean"] == [0.5, 0.5]
    assert dp["rel_discrepancy_global_count"] < 1e-5
    assert dp["rel_discrepancy_local_mean"] > 0.05            # a mean of rank means is another objective
    assert dp["logged_loss_global_count"] == pytest.approx(dp["loss_full"], rel=1e-5)
    # the rank losses carry the factor W: their average is the full-batch loss
    assert sum(dp["rank_losses_global_count"]) / 2 == pytest.approx(dp["loss_full"], rel=1e-5)


def test_one_document_per_rank_is_the_microbatch_average_of_page_01(llama, docs):
    dp = T.data_parallel_step(llama, docs, [[0], [1], [2]])
    acc = R.lm_accumulation(llama, docs)
    assert dp["rel_discrepancy_local_mean"] == pytest.approx(acc["rel_discrepancy_averaged"], rel=1e-4)


def test_equal_rank_counts_make_the_mean_of_means_exact(llama):
    even = R.make_documents([12, 12], seed=3)
    assert T.data_parallel_step(llama, even, [[0], [1]])["rel_discrepancy_local_mean"] < 1e-5


def test_a_rank_without_documents_is_refused(llama, docs):
    with pytest.raises(R.ReductionError, match="at least one document"):
        T.data_parallel_step(llama, docs, [[0, 1, 2], []])
    with pytest.raises(R.ReductionError, match="every document once"):
        T.data_parallel_step(llama, docs, [[0, 1], [1]])


def test_the_real_trainer_accumulates_with_num_items_in_batch(llama, docs):
    ref = R.full_batch_gradient(llama, docs)
    before = [p.detach().clone() for p in llama.parameters()]
    items = T.trainer_accumulation(llama, docs, reference=ref)
    assert items["model_accepts_loss_kwargs"] is True
    assert items["num_items_in_batch_passed"] == [64, 64, 64]     # targets after the shift, all microbatches
    assert items["rel_discrepancy"] < 1e-5
    means = T.trainer_accumulation(llama, docs, use_num_items=False, reference=ref)
    assert means["num_items_in_batch_passed"] == [None, None, None]
    acc = R.lm_accumulation(llama, docs)                  # the mean of microbatch means, computed by hand
    assert means["rel_discrepancy"] == pytest.approx(acc["rel_discrepancy_averaged"], rel=1e-4)
    assert all(torch.equal(a, b) for a, b in zip(before, llama.parameters()))   # lr 0: weights unchanged
    assert not llama.training


def test_trainer_runs_a_dequantised_model_that_keeps_its_quantizer(llama, docs):
    """load_model's GGUF model keeps hf_quantizer although its weights are float32; Trainer would refuse it."""
    marker = object()
    llama.hf_quantizer, llama.is_quantized = marker, True
    try:
        out = T.trainer_accumulation(llama, docs[:2])
        assert out["rel_discrepancy"] < 1e-5
        assert llama.hf_quantizer is marker and llama.is_quantized is True     # put back
    finally:
        llama.hf_quantizer, llama.is_quantized = None, False



# --- the default model (slow) -----------------------------------------------------------------------------

@pytest.mark.slow
def test_trainer_accumulation_on_the_default_model():
    from docgrad.models import SMOLLM2, installed, load_model

    if not installed(SMOLLM2):
        pytest.skip("the default model's wheel is not installed")
    model = load_model("smollm2-135m")
    real = R.make_documents([12, 6], tokens=np.arange(100, 118))
    out = T.trainer_accumulation(model, real)
    assert out["num_items_in_batch_passed"] == [16, 16] and out["rel_discrepancy"] < 1e-4
    assert model.hf_quantizer is not None                          # put back after the Trainer ran
    assert math.isfinite(out["loss_full_token_mean"])


@pytest.mark.slow
def test_a_real_two_process_trainer_step_with_and_without_average_tokens_across_devices():
    """torchrun, two CPU processes (gloo), transformers' Trainer: the all-reduced gradient of one step."""
    on = T.ddp_trainer_step([40, 12], average_tokens=True)
    assert on["world_size"] == 2 and sorted(on["rank_docs"]) == [0, 1]
    assert on["num_items_in_batch"] == [[50], [50]]                      # 39 + 11 targets, gathered
    assert on["rel_discrepancy"] < 1e-5
    assert sum(on["rank_losses"]) / 2 == pytest.approx(on["loss_full"], rel=1e-5)    # S_r / N × W, averaged
    off = T.ddp_trainer_step([40, 12], average_tokens=False)
    assert sorted(x for r in off["num_items_in_batch"] for x in r) == [11, 39]     # each rank's own count
    assert off["rel_discrepancy"] > 0.05                                   # a mean of rank means
    with pytest.raises(R.ReductionError, match="one document per process"):
        T.ddp_trainer_step([40, 12, 5], average_tokens=True)


# --- the code exercises' checkers: they fail the bug and pass the fix ------------------------------------------

def test_the_accumulation_checker_fails_a_mean_of_means_and_passes_the_total_count():
    def buggy(model, microbatches):
        for mb in microbatches:
            n = sum(R.count_targets(d["labels"]) for d in mb)
            (R.summed_loss(model, mb) / n / len(microbatches)).backward()

    def fixed(model, microbatches):
        total = sum(R.count_targets(d["labels"]) for mb in microbatches for d in mb)
        for mb in microbatches:
            (R.summed_loss(model, mb) / total).backward()

    bad, good = T.check_accumulation(buggy), T.check_accumulation(fixed)
    assert not bad["passed"] and bad["rel_diff"] > 0.1 and bad["message"].startswith("not yet")
    assert good["passed"] and good["rel_diff"] < R.CHECK_TOLERANCE and good["message"].startswith("correct")


def test_the_data_parallel_checker_fails_rank_means_and_passes_the_all_reduced_count():
    assert not T.check_rank_loss(lambda s, n_local, n_global, world: s / n_local)["passed"]
    assert not T.check_rank_loss(lambda s, n_local, n_global, world: s / n_global)["passed"]   # DDP divides by W
    assert T.check_rank_loss(lambda s, n_local, n_global, world: s * world / n_global)["passed"]


# --- the page's twin: the values its exercises and sections state ------------------------------------------------

@pytest.fixture(scope="module")
def twin():
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "figures" / "01b_real_trainers.json"
    if not path.exists():
        pytest.skip("page 01b has not been executed")
    return json.loads(path.read_text())


def test_page_01b_exercise_1_data_parallel_weights(twin):
    e = twin["exercises"]["1"]
    w = R.microbatch_weights(e["counts"])
    assert e["counts"] == [120, 480, 200, 200]
    assert e["averaged"] == w["averaged"] == [0.25] * 4
    assert e["token_mean"] == pytest.approx(w["token_mean"]) and w["token_mean"] == pytest.approx([0.12, 0.48, 0.2, 0.2])
    assert e["per_target_weight_ratio"] == w["per_target_weight_ratio"] == 4.0
    assert e["total_variation"] == pytest.approx(0.23) and w["total_variation"] == pytest.approx(0.23)
    assert e["rank0_loss_factor"] == pytest.approx(4 / 1000)


def test_page_01b_exercise_2_adam_eps(twin):
    e = twin["exercises"]["2"]
    out = O.adam_scale_check(np.full((10, 1), 1e-4), 1e-4)
    assert e["step_ratio"] == pytest.approx(1 - out["rel_diff_adam_scaled"], rel=1e-5)
    assert e["step_ratio"] == pytest.approx(0.5 / (1e-4 / (1e-4 + 1e-8)), rel=1e-6)    # 0.50005
    assert e["sgd_step_ratio"] == pytest.approx(1e-4)


def test_page_01b_states_the_fixes_within_float_rounding(twin):
    t = twin
    assert t["exercises"]["3"]["passed"] and t["exercises"]["4"]["passed"]      # the code exercises' solutions
    # with its defaults the page reads the committed records of its expensive runs (seconds, not minutes)
    assert {k: v["source"] for k, v in t["provenance"].items()} == dict.fromkeys(
        ("data_parallel", "trainer", "torchrun", "drift"), "record")
    assert t["data_parallel"]["rel_discrepancy_global_count"] < 1e-4
    assert t["trainer"]["num_items"]["rel_discrepancy"] < 1e-4
    assert t["trainer"]["num_items"]["num_items_in_batch_passed"] == [117, 117, 117]     # 63 + 15 + 39 targets
    assert t["trainer"]["per_microbatch_mean"]["rel_discrepancy"] > 0.01
    assert t["ddp_torchrun"]["average_tokens"]["rel_discrepancy"] < 1e-4
    assert t["ddp_torchrun"]["per_rank_count"]["rel_discrepancy"] > 0.01
    adam = {r["scheme"]: r for r in t["training"]["final"] if r["optimizer"] == "adam"}
    assert adam["constant_scale"]["drift"] < 0.1 * adam["padded_denominator"]["drift"]
