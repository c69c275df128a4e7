"""Published reference tables load with our corpus names and agree with their own stated identities."""

import numpy as np
import pandas as pd
import pytest
from docgrad.results import published


def test_corpus_mapping_is_one_to_one_and_covers_ours():
    assert published.PUBLISHED_TO_OURS == {"PG19": "BOOKS", "REPOS": "CODE", "ARXIV": "PAPERS", "WEB": "WEB"}
    assert published.OURS_TO_PUBLISHED["CODE"] == "REPOS"


def test_cells_table_has_our_corpus_names_and_headline_values():
    df = published.cells()
    assert len(df) == 29 and set(df["corpus"]) == {"BOOKS", "CODE", "PAPERS", "WEB"}
    row = df[(df.model == "EleutherAI/pythia-1.4b") & (df.revision == "step143000") & (df.corpus == "CODE")].iloc[0]
    assert row["corpus_published"] == "REPOS" and row["model_label"] == "Pythia-1.4B"
    assert row["R_16K"] == pytest.approx(6.9117895739232456)
    assert row["R_16K_lo"] < row["R_16K"] < row["R_16K_hi"]


def test_published_R16K_matches_kish_identity_of_published_rho():
    rho = published.rho_by_lag()
    cells = published.cells().set_index(["model", "revision", "corpus"])
    for (model, rev, corpus), g in rho.groupby(["model", "revision", "corpus"]):
        r = g.sort_values("lag_tokens")["rho"].to_numpy()
        lags = np.arange(1, len(r) + 1)
        assert len(r) == 31
        assert 1 + 2 / 32 * np.sum((32 - lags) * r) == pytest.approx(cells.loc[(model, rev, corpus), "R_16K"], rel=1e-9)


def test_R_by_window_long_form_and_r_rel():
    R = published.R_by_window()
    assert sorted(R["W_tokens"].unique()) == [512, 1024, 2048, 4096, 8192, 16384]
    assert (R[R.W_tokens == 512]["R"] == 1.0).all()
    rel = published.r_rel()
    assert list(rel.columns[:5]) == ["model", "model_label", "revision", "corpus_published", "corpus"]
    assert len(rel) == 6 and (rel["lo"] < rel["R_rel"]).all() and (rel["R_rel"] < rel["hi"]).all()


def test_unknown_corpus_name_is_an_error(tmp_path):
    pd.DataFrame({"model": ["m"], "revision": ["r"], "corpus": ["NEWS"], "R_rel": [1.0], "ci_lo": [1.0],
                  "ci_hi": [1.0]}).to_csv(tmp_path / "published_r_rel.csv", index=False)
    with pytest.raises(ValueError, match="NEWS"):
        published.r_rel(tmp_path)
    with pytest.raises(FileNotFoundError, match="published_cells.csv"):
        published.cells(tmp_path)


def test_beside_ours_stacks_our_curve_over_the_final_published_checkpoints():
    ours = pd.DataFrame({"corpus": ["CODE", "CODE", "CODE"], "group": ["all", "attn", "all"],
                         "lag_tokens": [512, 512, 1024], "rho": [0.3, 0.9, 0.2], "lo": [0.1, 0.1, 0.1],
                         "hi": [0.5, 0.5, 0.5]})
    df = published.beside_ours(ours, published.rho_by_lag(), "SmolLM2", "lag_tokens")
    assert set(df["source"]) == {"SmolLM2", "Pythia-1.4B (published)", "OLMo-2-1B (published)"}
    assert len(df[df.source == "SmolLM2"]) == 2                     # only the 'all' group
    assert len(df[df.source == "Pythia-1.4B (published)"]) == 4 * 31
    assert df[df.source != "SmolLM2"]["lo"].isna().all()


def test_beside_ours_with_no_cells_of_ours_keeps_numeric_columns():
    from docgrad.presentation import tables
    from docgrad.results import stats

    empty = tables.rho_frame(stats.Analysis("none", 0, 0, [], [], {}, "", []))
    df = published.beside_ours(empty, published.rho_by_lag(), "ours", "lag_tokens")
    assert len(df) == 2 * 4 * 31 and df["lo"].dtype == float and df["rho"].dtype == float


def test_through_training_rows_and_mean_gradient_share():
    df = published.through_training()
    assert len(df) == 29
    p410 = df[df.model == "EleutherAI/pythia-410m"]
    assert sorted(p410["frac_training"].unique()) == pytest.approx([1000 / 143000, 7000 / 143000, 36000 / 143000, 1.0])
    assert (p410.groupby("frac_training")["corpus"].apply(set) == {"BOOKS", "CODE", "PAPERS", "WEB"}).all()
    assert (df["lo"] <= df["R_16K"]).all() and (df["R_16K"] <= df["hi"]).all()
    row = df[(df.model == "EleutherAI/pythia-1.4b") & (df.revision == "step143000") & (df.corpus == "BOOKS")].iloc[0]
    assert row["mean_gradient_share"] == pytest.approx(0.32708085321330144 / (0.32708085321330144 + 110.9888097830683))
    fin = published.final_checkpoints()
    assert len(fin) == 8 and set(fin["model_label"]) == {"Pythia-1.4B", "OLMo-2-1B"} and (fin.frac_training == 1).all()
