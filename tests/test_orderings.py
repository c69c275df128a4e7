"""The decision rule of the 48-document cells: bootstrap p-values, Holm's step-down, the ordering status."""

import numpy as np
import pytest
from docgrad.core.orderings import (
    DIFFERS,
    ESTABLISHED,
    NOT_COMPARED,
    NOT_ESTABLISHED,
    NOT_READ,
    PARTLY,
    SAME_DIRECTION,
    bootstrap_p,
    holm,
    ordering_decision,
    resolve_pairs,
)


def test_bootstrap_p_is_twice_the_smaller_tail_over_finite_draws():
    d = np.array([-1.0, 0.5, 1.0, 2.0, np.nan, 3.0])
    assert bootstrap_p(d) == pytest.approx(2 * 1 / 5)
    assert bootstrap_p(np.ones(100)) == 0.0
    assert bootstrap_p(np.r_[-np.ones(50), np.ones(50)]) == 1.0
    assert np.isnan(bootstrap_p([np.nan]))


def test_holm_steps_down_and_stops_at_the_first_failure():
    out = holm([0.04, 0.01, 0.03])             # sorted 0.01 <= .05/3 yes; 0.03 <= .05/2 no -> stop
    assert [o["rank"] for o in out] == [3, 1, 2]
    assert [o["resolved"] for o in out] == [False, True, False]
    assert out[1]["level"] == pytest.approx(0.05 / 3) and out[0]["level"] == pytest.approx(0.05)
    assert [o["resolved"] for o in holm([0.001, 0.02, 0.049])] == [True, True, True]
    assert [o["resolved"] for o in holm([np.nan, 0.0])] == [False, True]


def test_holm_matches_the_adjusted_p_value_oracle():
    rng = np.random.default_rng(0)
    for _ in range(200):
        p = rng.uniform(0, 0.1, rng.integers(1, 6))
        k, order = len(p), np.argsort(p)
        adj = np.maximum.accumulate([(k - r) * p[i] for r, i in enumerate(order)])   # Holm-adjusted p-values
        expect = np.empty(k, bool)
        expect[order] = np.minimum(adj, 1) <= 0.05
        assert [o["resolved"] for o in holm(p)] == list(expect)


def _draws(mean, sd=0.1, n=2000, seed=0):
    return np.random.default_rng(seed).normal(mean, sd, n)


def test_resolve_pairs_orders_resolved_pairs_and_widens_intervals_with_holm_rank():
    points = {"CODE": 5.0, "PAPERS": 4.0, "BOOKS": 3.95}
    draws = {c: _draws(v, seed=i) for i, (c, v) in enumerate(points.items())}
    pairs = resolve_pairs(points, draws, ["CODE", "PAPERS", "BOOKS"])
    by = {(p["a"], p["b"]): p for p in pairs}
    assert by["CODE", "PAPERS"]["order"] == "CODE > PAPERS" and by["CODE", "BOOKS"]["resolved"]
    assert by["PAPERS", "BOOKS"]["order"] == "not resolved" and by["PAPERS", "BOOKS"]["sign"] == 0
    rank1 = min(pairs, key=lambda p: p["rank"])
    assert rank1["level"] == pytest.approx(0.05 / 3)
    d = draws[rank1["a"]] - draws[rank1["b"]]
    assert rank1["ci"] == pytest.approx([np.quantile(d, 0.05 / 6), np.quantile(d, 1 - 0.05 / 6)])


def test_ordering_decision_established_partly_not_and_against_the_published_order():
    corpora = ["CODE", "PAPERS", "BOOKS"]
    pub = ["CODE", "PAPERS", "BOOKS"]

    def decide(points, sd=0.1):
        draws = {c: _draws(v, sd, seed=i) for i, (c, v) in enumerate(points.items())}
        return ordering_decision(points, resolve_pairs(points, draws, corpora), pub)

    d = decide({"CODE": 5.0, "PAPERS": 4.0, "BOOKS": 3.0})
    assert d["status"] == ESTABLISHED and d["against_published"] == SAME_DIRECTION and d["point_order"] == pub
    d = decide({"CODE": 3.0, "PAPERS": 5.0, "BOOKS": 4.98})
    assert d["status"] == PARTLY and d["against_published"] == DIFFERS
    assert "PAPERS > CODE" in d["resolved"] and "BOOKS > CODE" in d["resolved"]
    d = decide({"CODE": 4.0, "PAPERS": 4.01, "BOOKS": 3.99}, sd=1.0)
    assert d["status"] == NOT_ESTABLISHED and d["against_published"] == NOT_COMPARED and d["resolved"] == []


def test_an_incomplete_cell_leaves_the_ordering_unread_and_uncompared():
    points = {"CODE": 5.0, "PAPERS": 4.0, "BOOKS": 3.0}
    draws = {c: _draws(v, seed=i) for i, (c, v) in enumerate(points.items())}
    pairs = resolve_pairs(points, draws, list(points))
    complete = ordering_decision(points, pairs, ["CODE", "PAPERS", "BOOKS"], incomplete={})
    assert complete["status"] == ESTABLISHED and complete["against_published"] == SAME_DIRECTION
    d = ordering_decision(points, pairs, ["CODE", "PAPERS", "BOOKS"], incomplete={"CODE": (32, 48)})
    assert d["status"] == NOT_READ and d["against_published"] == NOT_COMPARED
    assert d["incomplete"] == {"CODE": [32, 48]} and d["resolved"] == complete["resolved"]
