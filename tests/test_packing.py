"""Pins page 01c's packing numbers (docgrad.teaching.packing): the weights, the boundary targets, the four
layouts against standalone documents, the installed collators on the same documents, and the code exercise's
checker."""

import numpy as np
import pytest
import torch
from docgrad.models import tiny_model
from docgrad.teaching import packing as K
from docgrad.teaching import reduction as R

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def llama():
    return tiny_model("llama")


def test_packed_target_counts_and_weights():
    c = K.packed_target_counts([11, 31, 61])
    assert c == {"tokens": 103, "targets": 102, "boundary_targets": 2, "targets_without_boundaries": 100}
    tok = K.packed_weights([10, 30, 60])
    doc = K.packed_weights([10, 30, 60], per_document=True)
    assert tok["document_weights"] == pytest.approx([0.1, 0.3, 0.6]) and tok["target_weights"] == pytest.approx([0.01] * 3)
    assert doc["document_weights"] == pytest.approx([1 / 3] * 3)
    assert doc["target_weights"] == pytest.approx([1 / 30, 1 / 90, 1 / 180])        # the short document's weigh more
    with pytest.raises(R.NoValidPositionsError):
        K.packed_weights([3, 0])


def test_flattening_collator_resets_positions_and_drops_each_documents_first_label():
    rows = [[[5, 6, 7], [8, 9]], [[1, 2], [3, 4, 5]]]
    b = K.flattening_batch(rows, eos_id=0)
    pk = K.pack_documents(rows[0], eos_id=0)
    assert b["input_ids"][0].tolist() == pk["input_ids"] == [5, 6, 7, 0, 8, 9, 0]
    assert b["position_ids"][0].tolist() == [0, 1, 2, 3, 0, 1, 2]
    assert b["labels"][0].tolist() == [-100, 6, 7, 0, -100, 9, 0]
    kept = int((b["labels"][0, 1:] != -100).sum())
    assert kept == K.packed_target_counts(pk["lengths"])["targets_without_boundaries"]


def _packed_rows():
    g = torch.Generator().manual_seed(0)
    return [[torch.randint(1, 256, (n,), generator=g).tolist() for n in (12, 5, 9)] for _ in range(2)]


@pytest.fixture(scope="module")
def packed():
    model = tiny_model("llama")               # a fresh model: no Trainer has switched its cache off
    assert model.config.use_cache is True
    return K.packed_target_losses(model, _packed_rows(), eos_id=0)


def test_a_cache_switches_the_per_document_mask_off(llama):
    """Position ids that restart give the per-document mask only without a cache: with the config's default
    use_cache=True the packed row attends across documents although the position ids restart."""
    model = tiny_model("llama")
    rows = _packed_rows()
    ids = torch.tensor([K.pack_documents(d, 0)["input_ids"] for d in rows])
    pos = torch.tensor([K.pack_documents(d, 0)["position_ids"] for d in rows])
    with torch.no_grad():
        cached = model(input_ids=ids, position_ids=pos).logits
        masked = model(input_ids=ids, position_ids=pos, use_cache=False).logits
        alone = model(input_ids=torch.tensor([rows[0][1] + [0]]), use_cache=False).logits
    a, n = 13, len(rows[0][1]) + 1                # the second document of row 0 starts after 12 tokens + EOS
    assert torch.allclose(masked[0, a:a + n], alone[0], atol=1e-5)
    assert not torch.allclose(cached[0, a:a + n], alone[0], atol=1e-3)


def test_document_mask_and_position_reset_reproduce_standalone_documents(packed):
    s = K.packing_summary(packed)
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
    obj = K.packed_row_objectives(packed)
    assert obj["targets_per_document"] == [12, 5, 9, 12, 5, 9]
    by_hand = np.mean(obj["document_mean_losses"])
    assert obj["document_mean"] == pytest.approx(by_hand)
    weighted = np.average(obj["document_mean_losses"], weights=obj["targets_per_document"])
    assert obj["token_mean"] == pytest.approx(weighted)
    assert obj["token_mean"] != pytest.approx(obj["document_mean"], abs=1e-6)


def test_packed_rows_of_different_lengths_are_refused(llama):
    with pytest.raises(R.ReductionError, match="differ in length"):
        K.packed_target_losses(llama, [[[1, 2, 3]], [[1, 2]]], eos_id=0)


# --- the installed collators --------------------------------------------------------------------------------

def test_both_collators_flatten_restart_positions_and_mask_each_documents_first_label():
    out = K.collate_both([[5, 6, 7, 0], [8, 9, 0]])
    hf, trl = out["transformers"], out["trl"]
    for b in (hf, trl):
        assert b["input_ids"] == [[5, 6, 7, 0, 8, 9, 0]]
        assert b["position_ids"] == [[0, 1, 2, 3, 0, 1, 2]]
        assert b["labels"] == [[-100, 6, 7, 0, -100, 9, 0]]
        assert b["cu_seq_lens_q"] == [0, 4, 7] and b["max_length_q"] == 4
        assert b["seq_idx"] == [[0, 0, 0, 0, 1, 1, 1]]


def test_trl_padding_to_a_multiple_makes_every_padding_position_a_sequence_of_its_own():
    trl = K.collate_both([[1, 2, 3], [4, 5]], pad_to_multiple_of=8)["trl"]
    assert trl["position_ids"] == [[0, 1, 2, 0, 1, 0, 0, 0]]
    assert trl["labels"] == [[-100, 2, 3, -100, 5, -100, -100, -100]]
    assert trl["cu_seq_lens_q"] == [0, 3, 5, 6, 7, 8]


def test_trl_packing_keeps_documents_whole_and_restarts_positions_from_seq_lengths():
    out = K.trl_packed([[1, 2, 3, 4, 5], [6, 7, 8], [9, 10, 11, 12], [13, 14]], seq_length=8)
    assert [r["seq_lengths"] for r in out["rows"]] == [[5, 3], [4, 2]]
    c = out["collated"]
    assert c["position_ids"] == [[0, 1, 2, 3, 4, 0, 1, 2, 0, 1, 2, 3, 0, 1]]
    assert c["cu_seq_lens_q"] == [0, 5, 8, 12, 14]
    assert [i for i, v in enumerate(c["labels"][0]) if v == -100] == [0, 5, 8, 12]
    with pytest.raises(R.ReductionError, match="longer than seq_length"):
        K.trl_packed([[1] * 9], seq_length=8)


def test_the_installed_trainer_counts_a_flattened_row_like_the_standalone_documents(llama):
    out = K.counts_of_a_packed_batch(llama, [[5, 6, 7], [8, 9], [1, 2, 3, 4]], eos_id=0)
    assert out["standalone_targets"] == 3 + 2 + 4
    assert out["flattened"] == {"installed_trainer": 9, "shifted": 9, "unshifted": 9}
    assert out["padded"]["shifted"] == 9 and out["padded"]["unshifted"] == 12       # one more per row
    assert out["padded"]["installed_trainer"] == out["padded"]["shifted"]          # transformers >= 5.10.1


# --- the code exercise: the per-document mean of a packed batch ---------------------------------------------------

def test_the_per_document_mean_leaves_out_documents_without_a_target():
    losses = torch.tensor([[9.0, 1.0, 3.0, 9.0, 2.0, 9.0, 9.0]], dtype=torch.float64)
    labels = torch.tensor([[-100, 1, 1, -100, 1, -100, -100]])
    pos = torch.tensor([[0, 1, 2, 0, 1, 0, 0]])
    assert float(K.per_document_mean(losses, labels, pos)) == pytest.approx((2.0 + 2.0) / 2)
    with pytest.raises(R.NoValidPositionsError):
        K.per_document_mean(losses, torch.full_like(labels, -100), pos)
    with pytest.raises(R.ReductionError, match="first position id"):
        K.per_document_mean(losses, labels, pos + 1)


def test_the_per_document_checker_fails_the_token_mean_and_passes_the_fix():
    def token_mean(losses, labels, position_ids):
        m = labels != -100
        return (losses * m).sum() / m.sum()

    def per_document(losses, labels, position_ids):
        doc = torch.cumsum((position_ids == 0).reshape(-1).long(), 0) - 1
        m, losses = (labels != -100).reshape(-1).double(), losses.reshape(-1)
        means = [(losses * m)[doc == d].sum() / m[doc == d].sum() for d in range(int(doc[-1]) + 1)
                 if m[doc == d].sum() > 0]
        return sum(means) / len(means)

    bad, good = K.check_per_document_mean(token_mean), K.check_per_document_mean(per_document)
    assert not bad["passed"] and bad["message"].startswith("not yet") and "token mean" in bad["message"]
    assert good["passed"] and good["message"].startswith("correct") and all(r["ok"] for r in good["rows"])


def test_the_per_document_checker_names_padding_counted_as_empty_documents():
    def zeros_for_empty(losses, labels, position_ids):
        doc = torch.cumsum((position_ids == 0).reshape(-1).long(), 0) - 1
        m, losses = (labels != -100).reshape(-1).double(), losses.reshape(-1)
        means = [(losses * m)[doc == d].sum() / max(float(m[doc == d].sum()), 1.0) for d in range(int(doc[-1]) + 1)]
        return sum(means) / len(means)

    out = K.check_per_document_mean(zeros_for_empty)
    assert not out["passed"] and "padded to a multiple of 8" in out["message"]
    assert "count as 0" in out["message"]
    assert K.check_per_document_mean(lambda *a: 1 / 0)["message"].startswith("not yet")


# --- the page's twin: the values its exercises and sections state ------------------------------------------------

@pytest.fixture(scope="module")
def twin():
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "figures" / "01c_packing_and_denominators.json"
    if not path.exists():
        pytest.skip("page 01c has not been executed")
    return json.loads(path.read_text())


def test_page_01c_exercise_1_packing(twin):
    e = twin["exercises"]["1"]
    assert e["counts"] == K.packed_target_counts([n + 1 for n in e["lengths"]])
    assert e["counts"] == {"tokens": 103, "targets": 102, "boundary_targets": 2, "targets_without_boundaries": 100}
    assert e["token_mean_weights"] == pytest.approx([0.1, 0.3, 0.6]) and e["per_document_weights"] == pytest.approx([1 / 3] * 3)


def test_page_01c_code_exercise_passes_with_its_solution(twin):
    assert twin["exercises"]["3"]["passed"] and all(r["ok"] for r in twin["exercises"]["3"]["rows"])


def test_page_01c_states_that_packing_with_the_mask_changes_nothing_but_the_weights(twin):
    assert twin["packing"]["max_abs_diff_vs_standalone"]["packed_document_mask"] < 1e-3
    assert twin["packing"]["max_abs_diff_vs_standalone"]["packed_causal"] > 1e-2
    assert twin["collators"]["transformers"]["labels"] == twin["collators"]["trl"]["labels"]
