"""Pins the numbers of pages 01b and 01c (docgrad.teaching.pitfalls): data parallelism, Trainer accumulation, packing, cross-entropy
denominators, optimisers and loss scales, policy-gradient weights, effective sample sizes, and the exercises."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from docgrad.models import tiny_model
from docgrad.teaching import pitfalls as P
from docgrad.teaching import reduction as R

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[1]
TWINS = {"01b": ROOT / "figures" / "01b_real_trainers.json", "01c": ROOT / "figures" / "01c_packing_and_denominators.json"}


@pytest.fixture(scope="module")
def llama():
    return tiny_model("llama")


@pytest.fixture(scope="module")
def docs():
    return R.make_documents([40, 10, 17], seed=1)


# --- data parallelism ------------------------------------------------------------------------------------

def test_global_count_times_world_size_reproduces_the_full_batch(llama, docs):
    dp = P.data_parallel_step(llama, docs, [[0], [1, 2]])
    assert dp["targets_per_rank"] == [39, 25] and dp["n_targets_total"] == 64
    assert dp["rank_weights_global_count"] == pytest.approx([39 / 64, 25 / 64])
    assert dp["rank_weights_local_mean"] == [0.5, 0.5]
    assert dp["rel_discrepancy_global_count"] < 1e-5
    assert dp["rel_discrepancy_local_mean"] > 0.05            # a mean of rank means is another objective
    assert dp["logged_loss_global_count"] == pytest.approx(dp["loss_full"], rel=1e-5)
    # the rank losses carry the factor W: their average is the full-batch loss
    assert sum(dp["rank_losses_global_count"]) / 2 == pytest.approx(dp["loss_full"], rel=1e-5)


def test_one_document_per_rank_is_the_microbatch_average_of_page_01(llama, docs):
    dp = P.data_parallel_step(llama, docs, [[0], [1], [2]])
    acc = R.lm_accumulation(llama, docs)
    assert dp["rel_discrepancy_local_mean"] == pytest.approx(acc["rel_discrepancy_averaged"], rel=1e-4)


def test_equal_rank_counts_make_the_mean_of_means_exact(llama):
    even = R.make_documents([12, 12], seed=3)
    assert P.data_parallel_step(llama, even, [[0], [1]])["rel_discrepancy_local_mean"] < 1e-5


def test_a_rank_without_documents_is_refused(llama, docs):
    with pytest.raises(P.PitfallError, match="at least one document"):
        P.data_parallel_step(llama, docs, [[0, 1, 2], []])
    with pytest.raises(P.PitfallError, match="every document once"):
        P.data_parallel_step(llama, docs, [[0, 1], [1]])


def test_the_real_trainer_accumulates_with_num_items_in_batch(llama, docs):
    ref = P.full_batch_gradient(llama, docs)
    before = [p.detach().clone() for p in llama.parameters()]
    items = P.trainer_accumulation(llama, docs, reference=ref)
    assert items["model_accepts_loss_kwargs"] is True
    assert items["num_items_in_batch_passed"] == [64, 64, 64]     # targets after the shift, all microbatches
    assert items["rel_discrepancy"] < 1e-5
    means = P.trainer_accumulation(llama, docs, use_num_items=False, reference=ref)
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
        out = P.trainer_accumulation(llama, docs[:2])
        assert out["rel_discrepancy"] < 1e-5
        assert llama.hf_quantizer is marker and llama.is_quantized is True     # put back
    finally:
        llama.hf_quantizer, llama.is_quantized = None, False


def test_transformers_source_excerpts_are_found_in_the_installed_version(monkeypatch):
    import transformers

    ex = P.transformers_excerpts()
    assert ex["version"] == transformers.__version__
    assert set(ex["claims"]) == set(P.TRANSFORMERS_CLAIMS)
    assert all(c["found"] and c["lines"] for c in ex["claims"].values())
    monkeypatch.setitem(P.TRANSFORMERS_CLAIMS, "absent", ("fixed_cross_entropy", r"no such line", "x"))
    assert P.transformers_excerpts()["claims"]["absent"] == {"where": "fixed_cross_entropy", "meaning": "x",
                                                             "found": False, "lines": []}


# --- packing ---------------------------------------------------------------------------------------------

def test_packed_target_counts_and_weights():
    c = P.packed_target_counts([11, 31, 61])
    assert c == {"tokens": 103, "targets": 102, "boundary_targets": 2, "targets_without_boundaries": 100}
    tok = P.packed_weights([10, 30, 60])
    doc = P.packed_weights([10, 30, 60], per_document=True)
    assert tok["document_weights"] == pytest.approx([0.1, 0.3, 0.6]) and tok["n_eff"] == pytest.approx(100)
    assert doc["document_weights"] == pytest.approx([1 / 3] * 3) and doc["n_eff"] == pytest.approx(60)
    with pytest.raises(R.NoValidPositionsError):
        P.packed_weights([3, 0])


def test_flattening_collator_resets_positions_and_drops_each_documents_first_label():
    rows = [[[5, 6, 7], [8, 9]], [[1, 2], [3, 4, 5]]]
    b = P.flattening_batch(rows, eos_id=0)
    pk = P.pack_documents(rows[0], eos_id=0)
    assert b["input_ids"][0].tolist() == pk["input_ids"] == [5, 6, 7, 0, 8, 9, 0]
    assert b["position_ids"][0].tolist() == [0, 1, 2, 3, 0, 1, 2]
    assert b["labels"][0].tolist() == [-100, 6, 7, 0, -100, 9, 0]
    kept = int((b["labels"][0, 1:] != -100).sum())
    assert kept == P.packed_target_counts(pk["lengths"])["targets_without_boundaries"]


def _packed_rows():
    g = torch.Generator().manual_seed(0)
    return [[torch.randint(1, 256, (n,), generator=g).tolist() for n in (12, 5, 9)] for _ in range(2)]


@pytest.fixture(scope="module")
def packed():
    model = tiny_model("llama")               # a fresh model: no Trainer has switched its cache off
    assert model.config.use_cache is True
    return P.packed_target_losses(model, _packed_rows(), eos_id=0)


def test_a_cache_switches_the_per_document_mask_off(llama):
    """Position ids that restart give the per-document mask only without a cache: with the config's default
    use_cache=True the packed row attends across documents although the position ids restart."""
    model = tiny_model("llama")
    rows = _packed_rows()
    ids = torch.tensor([P.pack_documents(d, 0)["input_ids"] for d in rows])
    pos = torch.tensor([P.pack_documents(d, 0)["position_ids"] for d in rows])
    with torch.no_grad():
        cached = model(input_ids=ids, position_ids=pos).logits
        masked = model(input_ids=ids, position_ids=pos, use_cache=False).logits
        alone = model(input_ids=torch.tensor([rows[0][1] + [0]]), use_cache=False).logits
    a, n = 13, len(rows[0][1]) + 1                # the second document of row 0 starts after 12 tokens + EOS
    assert torch.allclose(masked[0, a:a + n], alone[0], atol=1e-5)
    assert not torch.allclose(cached[0, a:a + n], alone[0], atol=1e-3)


def test_document_mask_and_position_reset_reproduce_standalone_documents(packed):
    s = P.packing_summary(packed)
    assert s["max_abs_diff_vs_standalone"]["packed_document_mask"] < 1e-5
    assert s["max_abs_diff_vs_standalone"]["packed_causal"] > 1e-3      # cross-document context changes losses
    assert s["max_abs_diff_vs_standalone"]["packed_positions_reset"] > 1e-3
    lay = s["layouts"]
    assert lay["standalone"]["n_targets"] == 2 * (12 + 5 + 9)           # n_i tokens + EOS give n_i targets
    assert lay["packed_causal"]["n_targets"] == 2 * (12 + 5 + 9 + 3 - 1)
    assert lay["packed_causal"]["n_boundary_targets"] == 2 * 2
    assert lay["packed_document_mask"]["token_mean_flattening_labels"] == pytest.approx(
        lay["standalone"]["token_mean_all_targets"], abs=1e-5)
    zero = [r for r in s["by_offset"] if r["offset"] == 0]
    assert {r["layout"] for r in zero} == {"packed_causal", "packed_positions_reset", "packed_document_mask"}
    assert all(r["mean_diff_vs_standalone"] is None for r in zero)


def test_packed_row_objectives_weigh_documents_differently(packed):
    obj = P.packed_row_objectives(packed)
    assert obj["targets_per_document"] == [12, 5, 9, 12, 5, 9]
    by_hand = np.mean(obj["document_mean_losses"])
    assert obj["document_mean"] == pytest.approx(by_hand)
    weighted = np.average(obj["document_mean_losses"], weights=obj["targets_per_document"])
    assert obj["token_mean"] == pytest.approx(weighted)
    assert obj["token_mean"] != pytest.approx(obj["document_mean"], abs=1e-6)


def test_packed_rows_of_different_lengths_are_refused(llama):
    with pytest.raises(P.PitfallError, match="differ in length"):
        P.packed_target_losses(llama, [[[1, 2, 3]], [[1, 2]]], eos_id=0)


# --- cross-entropy denominators ------------------------------------------------------------------------

@pytest.mark.parametrize("weight", [None, [1.0, 2.0, 0.5, 3.0]])
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_cross_entropy_by_hand_matches_torch(weight, smoothing):
    rng = np.random.default_rng(7)
    x = rng.normal(size=(9, 4))
    y = rng.integers(0, 4, size=9)
    y[[0, 5]] = -100
    hand = P.cross_entropy_by_hand(x, y, weight=weight, label_smoothing=smoothing)
    kw = {} if weight is None else {"weight": torch.tensor(weight, dtype=torch.float64)}
    ref = float(torch.nn.functional.cross_entropy(torch.from_numpy(x), torch.from_numpy(y),
                                                  label_smoothing=smoothing, **kw))
    assert hand["loss"] == pytest.approx(ref, abs=1e-12)
    w = np.ones(4) if weight is None else np.asarray(weight)
    assert hand["denominator"] == pytest.approx(w[y[y != -100]].sum())
    assert hand["n_valid"] == 7 and hand["n_ignored"] == 2


def test_cross_entropy_cases_denominators():
    rows = {r["case"]: r for r in P.cross_entropy_cases()}
    assert rows["plain"]["denominator"] == rows["plain"]["n_valid"] == 6
    assert rows["weight"]["denominator"] == 10.0             # sum of the targets' class weights, not 6
    assert rows["weight"]["divided_by_count"] == pytest.approx(rows["weight"]["torch"] * 10 / 6)
    assert max(r["abs_diff"] for r in rows.values() if r["case"] != "transformers LabelSmoother") < 1e-12
    assert rows["transformers LabelSmoother"]["abs_diff"] < 1e-6     # float32 smoothing sum


def test_cross_entropy_by_hand_refuses_bad_shapes():
    with pytest.raises(P.PitfallError, match="weight"):
        P.cross_entropy_by_hand(np.zeros((2, 3)), [0, 1], weight=[1.0, 2.0])
    with pytest.raises(P.PitfallError, match="targets outside"):
        P.cross_entropy_by_hand(np.zeros((2, 3)), [0, 3])


# --- optimisers --------------------------------------------------------------------------------------------

def test_adam_absorbs_a_constant_scale_except_through_eps_and_sgd_does_not():
    g = np.random.default_rng(0).normal(size=(15, 50)) * 1e-3
    out = P.adam_scale_check(g, 0.25)
    assert out["rel_diff_adam_scaled_vs_eps_over_scale"] < 1e-12
    assert 0 < out["rel_diff_adam_scaled"] < 1e-3
    assert out["sgd_step_ratio"] == pytest.approx(0.25) and out["rel_diff_sgd_scaled"] == pytest.approx(0.75)


def test_training_batches_and_scales():
    streams = [np.arange(1000) % 200, np.arange(1000) % 150]
    b = P.training_batches(streams, steps=3, batch_size=4, min_len=4, max_len=20, seed=0)
    assert len(b) == 3 and all(x.input_ids.shape[0] == 4 for x in b)
    for x, c in zip(b, P.batch_scales(b)):
        T = x.input_ids.shape[1]
        assert x.n_padded == 4 * (T - 1)
        assert x.n_valid == int(x.attention_mask.sum()) - 4
        assert c == x.n_valid / x.n_padded and 0 < c <= 1
    summed = torch.tensor(12.0)
    assert float(P.scheme_loss(summed, b[0], "padded_denominator", 0.5)) == pytest.approx(12.0 / b[0].n_padded)
    assert float(P.scheme_loss(summed, b[0], "constant_scale", 0.5)) == pytest.approx(6.0 / b[0].n_valid)
    with pytest.raises(P.PitfallError):
        P.scheme_loss(summed, b[0], "nope", 0.5)
    with pytest.raises(P.PitfallError):
        P.training_batches(streams, 1, 1, 1, 5)


def test_top_layers_from_the_frozen_input_give_the_full_models_logits():
    model = tiny_model("llama", layers=4)
    b = P.training_batches([np.arange(300) % 256], steps=1, batch_size=3, min_len=5, max_len=12, seed=1)[0]
    with torch.no_grad():
        full = model(input_ids=b.input_ids, attention_mask=b.attention_mask).logits
        hidden = P.frozen_input(model, b, 2)
        with P.top_layers_only(model, 2):
            top = model(inputs_embeds=hidden, attention_mask=b.attention_mask).logits
    assert len(model.model.layers) == 4                                  # restored
    valid = b.attention_mask.bool()
    assert float((top - full)[valid].abs().max()) < 1e-5
    assert P.trainable_top_layers(model, 2) == [n for n, _ in model.named_parameters()
                                                if ".layers.2." in n or ".layers.3." in n or n == "model.norm.weight"]


def test_a_varying_denominator_drifts_under_both_optimisers_a_constant_one_only_under_sgd():
    model = tiny_model("llama", layers=3)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    streams = [np.asarray(torch.randint(0, 256, (400,), generator=torch.Generator().manual_seed(s))) for s in range(3)]
    b = P.training_batches(streams, steps=8, batch_size=4, min_len=4, max_len=32, seed=0)
    out = P.training_drift(model, b, optimizers=(("sgd", 0.5), ("adam", 1e-3)), train_top_layers=2)
    fin = {(r["optimizer"], r["scheme"]): r for r in out["final"]}
    assert out["constant"] == pytest.approx(np.mean(P.batch_scales(b)))
    assert fin[("sgd", "token_mean")]["drift"] == 0 and fin[("adam", "token_mean")]["drift"] == 0
    adam_const, adam_var = fin[("adam", "constant_scale")]["drift"], fin[("adam", "padded_denominator")]["drift"]
    assert adam_const < 0.01 and adam_var > 10 * adam_const
    assert fin[("sgd", "constant_scale")]["drift"] > 0.1                  # a smaller learning rate, in effect
    assert fin[("sgd", "padded_denominator")]["drift_from_constant"] > 0.01
    assert all(torch.equal(before[n], p) and p.requires_grad for n, p in model.named_parameters())  # restored
    with pytest.raises(P.PitfallError, match="train_top_layers"):
        P.training_drift(model, b, train_top_layers=9)


# --- policy gradient -----------------------------------------------------------------------------------------

def test_policy_gradient_weights_are_page_01s_objectives():
    assert P.policy_gradient_weights([2, 8], "sequence_mean") == pytest.approx([0.25, 0.0625])
    assert P.policy_gradient_weights([2, 8], "token_mean") == pytest.approx([0.1, 0.1])
    assert P.policy_gradient_weights([2, 8], "constant", max_length=10) == pytest.approx([0.05, 0.05])
    batch = R.make_batch([2, 8], [1, 0], padding=[0, 0])
    per_position = [float(w[0]) for w in R.objective_weights(batch, "document_mean")]
    assert P.policy_gradient_weights([2, 8], "sequence_mean") == pytest.approx(per_position)
    rows = {r["scheme"]: r for r in P.policy_gradient_table([2, 8, 4, 16], [1, -1, 1, -1])}
    assert rows["sequence_mean"]["sequence_weight"] == pytest.approx([0.25] * 4)
    assert rows["sequence_mean"]["short_over_long_per_token"] == pytest.approx(8.0)
    assert rows["token_mean"]["n_eff"] == pytest.approx(30) and rows["token_mean"]["total_weight"] == pytest.approx(1)
    assert rows["constant"]["total_weight"] == pytest.approx(30 / 64)
    with pytest.raises(P.PitfallError):
        P.policy_gradient_weights([2, 8], "constant", max_length=4)
    with pytest.raises(P.PitfallError):
        P.policy_gradient_table([2, 8], [1.0])


# --- effective sample size --------------------------------------------------------------------------------

def test_kish_effective_sizes_of_page_01s_objectives():
    rows = {r["objective"]: r for r in P.objective_effective_sizes(R.make_batch([2, 8], [1, 0], [6, 0]))}
    assert [rows[k]["n"] for k in R.OBJECTIVES] == [10, 10, 16, 10, 2]
    assert rows["token_mean"]["n_eff"] == pytest.approx(10)
    assert rows["document_mean"]["n_eff"] == pytest.approx(6.4)               # 1 / (2/16 + 8/256)
    assert rows["document_mean"]["design_effect"] == pytest.approx(1.5625)
    assert rows["label0_as_padding"]["n_eff"] == pytest.approx(2)


def test_design_effect_generalises_kish_weighting_and_clustering():
    w = [0.25, 0.25, 0.0625, 0.0625, 0.0625, 0.0625]
    assert P.design_effect(w, np.eye(6)) == pytest.approx(P.kish_design_effect(w))
    C = P.block_correlation([8], 0.3)
    assert P.design_effect(np.ones(8), C) == pytest.approx(P.equicorrelated_design_effect(8, 0.3))
    assert P.flat_rho(P.equicorrelated_design_effect(32, 0.1), 32) == pytest.approx(0.1)
    mc = P.weighted_mean_variance(w, corr=P.block_correlation([2, 4], 0.2), draws=40000, seed=1)
    assert mc["simulated"] == pytest.approx(mc["exact"], rel=0.05)
    with pytest.raises(P.PitfallError):
        P.design_effect([1, 1], [[1, 0.5], [0.2, 1]])
    with pytest.raises(R.NoValidPositionsError):
        P.kish_n_eff([0, 0])


def test_design_effects_come_from_the_result_files_not_from_another_page(tmp_path):
    from docgrad.models import ResultModel
    from docgrad.results.study import Study
    from docgrad.results.synthetic import write_synthetic_results

    write_synthetic_results(tmp_path / "res", model="o/m", revision="r", n_docs=4, m=8, chunk=2048, shard_size=4, dim=32)
    shown, _ = Study(tmp_path / "res", resamples=40, chunk=2048, cache_dir=tmp_path / "c").page(
        ResultModel("o/m", "r", "none.json", "m"), ["BOOKS", "CODE"])
    rows = P.design_effects(shown, 8)
    assert [r["corpus"] for r in rows] == ["BOOKS", "CODE"]
    for r, c in zip(rows, shown.cells):
        assert r["R_16K"] == c.all.R_16K and r["effective_chunks"] == pytest.approx(8 / c.all.R_16K)
        assert r["R_16K_ci"] == list(c.all.R_16K_ci) and r["flat_rho"] == pytest.approx(P.flat_rho(r["R_16K"], 8))
    empty = shown.subset("o/m", "r", 2048, ["PAPERS"])
    with pytest.raises(P.PitfallError, match="no R\\(16K\\)"):
        P.design_effects(empty, 8)


# --- the exercises of pages 01b and 01c: the values the worked solutions state ----------------------------------

# the exercises as numbered here, and where each page numbers them
EXERCISES = {"1": ("01b", "1"), "2": ("01c", "1"), "3": ("01c", "2"), "4": ("01b", "2"), "5": ("01c", "3"),
             "6": ("01c", "4"), "7": ("01b", "3"), "8": ("01b", "4")}


def _twins() -> dict:
    if not all(p.exists() for p in TWINS.values()):
        pytest.skip("pages 01b and 01c have not been executed")
    return {k: json.loads(p.read_text()) for k, p in TWINS.items()}


@pytest.fixture(scope="module")
def exercises():
    t = _twins()
    return {k: t[page]["exercises"][n] for k, (page, n) in EXERCISES.items()}


def test_exercise_1_data_parallel_weights(exercises):
    e = exercises["1"]
    w = R.microbatch_weights(e["counts"])
    assert e["counts"] == [120, 480, 200, 200]
    assert e["averaged"] == w["averaged"] == [0.25] * 4
    assert e["token_mean"] == pytest.approx(w["token_mean"]) and w["token_mean"] == pytest.approx([0.12, 0.48, 0.2, 0.2])
    assert e["per_target_weight_ratio"] == w["per_target_weight_ratio"] == 4.0
    assert e["total_variation"] == pytest.approx(0.23) and w["total_variation"] == pytest.approx(0.23)
    assert e["rank0_loss_factor"] == pytest.approx(4 / 1000)


def test_exercise_2_packing(exercises):
    e = exercises["2"]
    assert e["counts"] == P.packed_target_counts([n + 1 for n in e["lengths"]])
    assert e["counts"] == {"tokens": 103, "targets": 102, "boundary_targets": 2, "targets_without_boundaries": 100}
    assert e["n_eff_token_mean"] == pytest.approx(100) and e["n_eff_per_document"] == pytest.approx(60)


def test_exercise_3_class_weight_denominator(exercises):
    e = exercises["3"]
    logits = np.random.default_rng(e["seed"]).normal(size=(len(e["targets"]), len(e["weight"])))
    hand = P.cross_entropy_by_hand(logits, e["targets"], weight=e["weight"])
    assert e["denominator"] == hand["denominator"] == 6.0 and e["n_valid"] == 4
    assert e["loss"] == pytest.approx(hand["loss"], rel=1e-5) and e["torch"] == pytest.approx(hand["loss"], rel=1e-5)


def test_exercise_4_adam_eps(exercises):
    e = exercises["4"]
    out = P.adam_scale_check(np.full((10, 1), 1e-4), 1e-4)
    assert e["step_ratio"] == pytest.approx(1 - out["rel_diff_adam_scaled"], rel=1e-5)
    assert e["step_ratio"] == pytest.approx(0.5 / (1e-4 / (1e-4 + 1e-8)), rel=1e-6)    # 0.50005
    assert e["sgd_step_ratio"] == pytest.approx(1e-4)


def test_exercise_5_policy_gradient(exercises):
    e = exercises["5"]
    assert e["per_token_weight"]["sequence_mean"] == pytest.approx([1 / 6, 1 / 24], rel=1e-5)
    assert e["per_token_weight"]["token_mean"] == pytest.approx([1 / 15, 1 / 15], rel=1e-5)
    assert e["short_over_long_per_token"] == pytest.approx(4.0)
    rows = {r["scheme"]: r for r in P.policy_gradient_table(e["lengths"], e["advantages"])}
    assert rows["sequence_mean"]["per_token_weight"] == pytest.approx(e["per_token_weight"]["sequence_mean"], rel=1e-5)


def test_exercise_6_effective_sample_size(exercises):
    e = exercises["6"]
    rows = {r["objective"]: r for r in P.objective_effective_sizes(R.make_batch([1, 1, 98], [1, 0, 1], [0, 0, 0]))}
    exact = 1 / (2 / 9 + 98 / 294 ** 2)
    assert rows["document_mean"]["n_eff"] == pytest.approx(exact)
    assert e["document_mean"] == pytest.approx(exact, rel=1e-5) and e["token_mean"] == pytest.approx(100)


def test_the_page_twins_state_the_fixes_within_float_rounding(exercises):
    tw = _twins()
    t = {**tw["01c"], **tw["01b"]}
    assert exercises["7"]["passed"] and exercises["8"]["passed"]          # the code exercises' solutions
    # with its defaults the page reads the committed records of its expensive runs (seconds, not minutes)
    assert {k: v["source"] for k, v in tw["01b"]["provenance"].items()} == dict.fromkeys(
        ("trainer", "torchrun", "drift"), "record")
    assert t["data_parallel"]["rel_discrepancy_global_count"] < 1e-4
    assert t["trainer"]["num_items"]["rel_discrepancy"] < 1e-4
    assert t["trainer"]["per_microbatch_mean"]["rel_discrepancy"] > 0.01
    assert t["packing"]["max_abs_diff_vs_standalone"]["packed_document_mask"] < 1e-3
    assert all(c["found"] for c in t["transformers"]["claims"].values())
    assert t["ddp_torchrun"]["average_tokens"]["rel_discrepancy"] < 1e-4
    assert t["ddp_torchrun"]["per_rank_count"]["rel_discrepancy"] > 0.01
    adam = {r["scheme"]: r for r in t["training"]["final"] if r["optimizer"] == "adam"}
    assert adam["constant_scale"]["drift"] < 0.1 * adam["padded_denominator"]["drift"]


# --- the default model (slow) -----------------------------------------------------------------------------

@pytest.mark.slow
def test_trainer_accumulation_on_the_default_model():
    from docgrad.models import SMOLLM2, installed, load_model

    if not installed(SMOLLM2):
        pytest.skip("the default model's wheel is not installed")
    model = load_model("smollm2-135m")
    real = R.make_documents([12, 6], tokens=np.arange(100, 118))
    out = P.trainer_accumulation(model, real)
    assert out["num_items_in_batch_passed"] == [16, 16] and out["rel_discrepancy"] < 1e-4
    assert model.hf_quantizer is not None                          # put back after the Trainer ran
    assert math.isfinite(out["loss_full_token_mean"])


@pytest.mark.slow
def test_a_real_two_process_trainer_step_with_and_without_average_tokens_across_devices():
    """torchrun, two CPU processes (gloo), transformers' Trainer: the all-reduced gradient of one step."""
    on = P.ddp_trainer_step([40, 12], average_tokens=True)
    assert on["world_size"] == 2 and sorted(on["rank_docs"]) == [0, 1]
    assert on["num_items_in_batch"] == [[50], [50]]                      # 39 + 11 targets, gathered
    assert on["rel_discrepancy"] < 1e-5
    assert sum(on["rank_losses"]) / 2 == pytest.approx(on["loss_full"], rel=1e-5)    # S_r / N × W, averaged
    off = P.ddp_trainer_step([40, 12], average_tokens=False)
    assert sorted(x for r in off["num_items_in_batch"] for x in r) == [11, 39]     # each rank's own count
    assert off["rel_discrepancy"] > 0.05                                   # a mean of rank means
    with pytest.raises(P.PitfallError, match="one document per process"):
        P.ddp_trainer_step([40, 12, 5], average_tokens=True)


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

    bad, good = P.check_accumulation(buggy), P.check_accumulation(fixed)
    assert not bad["passed"] and bad["rel_diff"] > 0.1 and bad["message"].startswith("not yet")
    assert good["passed"] and good["rel_diff"] < P.CHECK_TOLERANCE and good["message"].startswith("correct")


def test_the_data_parallel_checker_fails_rank_means_and_passes_the_all_reduced_count():
    assert not P.check_rank_loss(lambda s, n_local, n_global, world: s / n_local)["passed"]
    assert not P.check_rank_loss(lambda s, n_local, n_global, world: s / n_global)["passed"]   # DDP divides by W
    assert P.check_rank_loss(lambda s, n_local, n_global, world: s * world / n_global)["passed"]
