"""Pins page 01c's cross-entropy denominators (docgrad.teaching.cross_entropy): PyTorch's mean divides by the sum
of the targets' class weights, written out by hand."""

import numpy as np
import pytest
import torch
from docgrad.teaching import cross_entropy as C
from docgrad.teaching import reduction as R


@pytest.mark.parametrize("weight", [None, [1.0, 2.0, 0.5, 3.0]])
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_cross_entropy_by_hand_matches_torch(weight, smoothing):
    rng = np.random.default_rng(7)
    x = rng.normal(size=(9, 4))
    y = rng.integers(0, 4, size=9)
    y[[0, 5]] = -100
    hand = C.cross_entropy_by_hand(x, y, weight=weight, label_smoothing=smoothing)
    kw = {} if weight is None else {"weight": torch.tensor(weight, dtype=torch.float64)}
    ref = float(torch.nn.functional.cross_entropy(torch.from_numpy(x), torch.from_numpy(y),
                                                  label_smoothing=smoothing, **kw))
    assert hand["loss"] == pytest.approx(ref, abs=1e-12)
    w = np.ones(4) if weight is None else np.asarray(weight)
    assert hand["denominator"] == pytest.approx(w[y[y != -100]].sum())
    assert hand["n_valid"] == 7 and hand["n_ignored"] == 2


def test_cross_entropy_cases_denominators():
    rows = {r["case"]: r for r in C.cross_entropy_cases()}
    assert rows["plain"]["denominator"] == rows["plain"]["n_valid"] == 6
    assert rows["weight"]["denominator"] == 10.0             # sum of the targets' class weights, not 6
    assert rows["weight"]["divided_by_count"] == pytest.approx(rows["weight"]["torch"] * 10 / 6)
    # equal class weights are not the count, but they cancel: the plain mean
    assert rows["equal weights"]["denominator"] == 2.5 * 6
    assert rows["equal weights"]["torch"] == pytest.approx(rows["plain"]["torch"], abs=1e-12)
    assert max(r["abs_diff"] for r in rows.values() if r["case"] != "transformers LabelSmoother") < 1e-12
    assert rows["transformers LabelSmoother"]["abs_diff"] < 1e-6     # float32 smoothing sum


def test_cross_entropy_by_hand_refuses_bad_shapes():
    with pytest.raises(R.ReductionError, match="weight"):
        C.cross_entropy_by_hand(np.zeros((2, 3)), [0, 1], weight=[1.0, 2.0])
    with pytest.raises(R.ReductionError, match="targets outside"):
        C.cross_entropy_by_hand(np.zeros((2, 3)), [0, 3])


def test_page_01c_exercise_2_class_weight_denominator():
    import json
    from pathlib import Path

    twin = Path(__file__).resolve().parents[1] / "figures" / "01c_packing_and_denominators.json"
    if not twin.exists():
        pytest.skip("page 01c has not been executed")
    e = json.loads(twin.read_text())["exercises"]["2"]
    logits = np.random.default_rng(e["seed"]).normal(size=(len(e["targets"]), len(e["weight"])))
    hand = C.cross_entropy_by_hand(logits, e["targets"], weight=e["weight"])
    assert e["denominator"] == hand["denominator"] == 6.0 and e["n_valid"] == 4
    assert e["loss"] == pytest.approx(hand["loss"], rel=1e-5) and e["torch"] == pytest.approx(hand["loss"], rel=1e-5)
