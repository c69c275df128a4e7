"""The synthetic generator follows its stated model (so tests and notebooks built on it mean something)."""

import numpy as np
import pytest
from docgrad.results.format import GROUPS, load_result
from docgrad.results.synthetic import (
    DEFAULT_PROFILES,
    Profile,
    population_gram,
    sample_gradients,
    write_cell,
    write_synthetic_results,
)


def test_profile_rho_R_and_validity():
    p = Profile(exch=0.1, ar=0.4, phi=0.5)
    assert p.rho([0, 1, 2]) == pytest.approx([1.0, 0.3, 0.2])
    assert p.R(1) == 1.0 and p.R(2) == pytest.approx(1.3)
    assert Profile(exch=0.25).R(32) == pytest.approx(1 + 31 * 0.25)
    assert np.linalg.eigvalsh(p.corr(32)).min() > 0
    for bad in (dict(exch=-0.1), dict(exch=0.6, ar=0.5), dict(ar=0.2, phi=1.0)):
        with pytest.raises(ValueError, match="Profile needs"):
            Profile(**bad)


def test_population_gram_is_mu2_across_and_sigma2_corr_within_documents():
    K = population_gram(3, 4, Profile(ar=0.5, phi=0.5), sigma2=2.0, mu2=0.3)
    assert K[0, 4] == 0.3 and K[0, 0] == pytest.approx(2.3) and K[0, 1] == pytest.approx(0.3 + 2 * 0.25)
    assert np.allclose(K, K.T)


def test_sampled_gradients_have_the_stated_covariance():
    """Empirical Cov over many coordinates: sd of each entry ~ sqrt(2/p); 6 sd tolerance."""
    rng = np.random.default_rng(0)
    p, m = 20000, 6
    prof = Profile(exch=0.2, ar=0.3, phi=0.6)
    X = sample_gradients(rng, 1, m, p, prof, sigma2=1.0)
    cov = X @ X.T
    assert np.abs(cov - prof.corr(m)).max() < 6 * np.sqrt(2 / p)


def test_written_cells_load_with_all_groups_exact_norms_and_exact_ref(tmp_path):
    paths = write_cell(tmp_path, model="o/m", revision="r", corpus="CODE", profile=DEFAULT_PROFILES["CODE"],
                       n_docs=4, m=8, shard_size=2, dim=16, exact_ref=True)
    assert [p.name for p in paths] == ["CODE_c512_d0-2.npz", "CODE_c512_d2-4.npz"]
    a, b = load_result(paths[0], groups=GROUPS), load_result(paths[1], groups=GROUPS)
    assert a.meta["synthetic"] is True and a.cell == ("o/m", "r", "CODE", 512)
    assert a.exact_ref_dot.size == 16 and b.exact_ref_dot.size == 0
    assert a.exact_ref_dot[0] == pytest.approx(sum(a.sqnorm[g][0] for g in GROUPS))
    assert np.allclose(np.diag(a.gram["attn"]), a.sqnorm["attn"], rtol=0.05)
    assert b.index[:, 0].min() == 2


def test_write_synthetic_results_one_cell_per_corpus(tmp_path):
    paths = write_synthetic_results(tmp_path, n_docs=2, m=4, shard_size=2, dim=8)
    assert sorted(p.stem.split("_")[0] for p in paths) == sorted(DEFAULT_PROFILES)
