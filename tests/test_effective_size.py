"""Pins page 01's effective sample sizes (docgrad.teaching.effective_size): Kish's n_eff of each objective and
the design effect of a weighting, with and without correlated units."""

import numpy as np
import pytest
from docgrad.teaching import effective_size as E
from docgrad.teaching import reduction as R


def test_kish_effective_sizes_of_page_01s_objectives():
    rows = {r["objective"]: r for r in E.objective_effective_sizes(R.make_batch([2, 8], [1, 0], [6, 0]))}
    assert [rows[k]["n"] for k in R.OBJECTIVES] == [10, 10, 16, 10, 2]
    assert rows["token_mean"]["n_eff"] == pytest.approx(10)
    assert rows["document_mean"]["n_eff"] == pytest.approx(6.4)               # 1 / (2/16 + 8/256)
    assert rows["document_mean"]["design_effect"] == pytest.approx(1.5625)
    assert rows["label0_as_padding"]["n_eff"] == pytest.approx(2)


def test_design_effect_generalises_kish_weighting_and_clustering():
    w = [0.25, 0.25, 0.0625, 0.0625, 0.0625, 0.0625]
    assert E.design_effect(w, np.eye(6)) == pytest.approx(E.kish_design_effect(w))
    C = E.block_correlation([8], 0.3)
    assert E.design_effect(np.ones(8), C) == pytest.approx(E.equicorrelated_design_effect(8, 0.3))
    mc = E.weighted_mean_variance(w, corr=E.block_correlation([2, 4], 0.2), draws=40000, seed=1)
    assert mc["simulated"] == pytest.approx(mc["exact"], rel=0.05)
    with pytest.raises(R.ReductionError):
        E.design_effect([1, 1], [[1, 0.5], [0.2, 1]])
    with pytest.raises(R.NoValidPositionsError):
        E.kish_n_eff([0, 0])
