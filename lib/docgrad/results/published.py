"""The published study's numbers (data/published/*.csv) as tidy DataFrames, with our corpus names.

The published corpora correspond to ours: PG19 -> BOOKS, REPOS -> CODE, ARXIV -> PAPERS, WEB -> WEB
(packed web control). Every frame keeps the published name in `corpus_published` and our name in `corpus`.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

PUBLISHED_TO_OURS = {"PG19": "BOOKS", "REPOS": "CODE", "ARXIV": "PAPERS", "WEB": "WEB"}
OURS_TO_PUBLISHED = {v: k for k, v in PUBLISHED_TO_OURS.items()}
FINAL_1B = (("EleutherAI/pythia-1.4b", "step143000"), ("allenai/OLMo-2-0425-1B", "stage1-step1907359-tokens4001B"))
MODEL_LABELS = {"EleutherAI/pythia-410m": "Pythia-410M", "EleutherAI/pythia-1.4b": "Pythia-1.4B",
                "allenai/OLMo-2-0425-1B": "OLMo-2-1B"}
DEFAULT_DIR = Path(__file__).resolve().parents[3] / "data" / "published"


def _read(name: str, directory: Path | None) -> pd.DataFrame:
    path = Path(directory or DEFAULT_DIR) / name
    if not path.exists():
        raise FileNotFoundError(f"{path}: published reference table is missing (it is part of the repository: restore it with git checkout -- data/published)")
    df = pd.read_csv(path)
    unknown = sorted(set(df["corpus"]) - set(PUBLISHED_TO_OURS))
    if unknown:
        raise ValueError(f"{path}: unknown published corpus name(s) {unknown}; known: {sorted(PUBLISHED_TO_OURS)}")
    df = df.rename(columns={"corpus": "corpus_published"})
    df.insert(df.columns.get_loc("corpus_published") + 1, "corpus", df["corpus_published"].map(PUBLISHED_TO_OURS))
    df.insert(1, "model_label", df["model"].map(MODEL_LABELS).fillna(df["model"]))
    return df


def cells(directory: Path | None = None) -> pd.DataFrame:
    """One row per published cell: S_cross, sigma2, rho_long (+CI), R_512 ... R_8192, R_16K (+CI), B_simple, loss."""
    df = _read("published_cells.csv", directory)
    return df.rename(columns={"R_16384": "R_16K", "R_16K_ci_lo": "R_16K_lo", "R_16K_ci_hi": "R_16K_hi",
                              "rho_long_ci_lo": "rho_long_lo", "rho_long_ci_hi": "rho_long_hi"})


def R_by_window(directory: Path | None = None) -> pd.DataFrame:
    """Long form of the published R(W): model, revision, corpus, W_tokens, R."""
    df = _read("published_cells.csv", directory)
    rcols = [c for c in df.columns if c.startswith("R_") and c[2:].isdigit()]
    long = df.melt(id_vars=["model", "model_label", "revision", "corpus_published", "corpus", "chunk"],
                   value_vars=rcols, var_name="W", value_name="R")
    long["W_tokens"] = long.pop("W").str[2:].astype(int)
    return long.sort_values(["model", "revision", "corpus", "W_tokens"]).reset_index(drop=True)


def rho_by_lag(directory: Path | None = None) -> pd.DataFrame:
    """Published rho at every lag: model, revision, corpus, lag_tokens, rho."""
    return _read("published_rho.csv", directory)


def r_rel(directory: Path | None = None) -> pd.DataFrame:
    """Published R_rel (final 1B-class checkpoints) with 95% intervals as columns lo, hi."""
    return _read("published_r_rel.csv", directory).rename(columns={"ci_lo": "lo", "ci_hi": "hi"})


def beside_ours(ours: pd.DataFrame, published_frame: pd.DataFrame, our_label: str | None, x: str,
                models=FINAL_1B) -> pd.DataFrame:
    """Stack our curve rows (group 'all') over the published final-checkpoint rows with a `source` column.
    our_label None: the source of each of our rows is its model's short name (several models, one per source).

    ours: rows with corpus, x, value column and optional lo/hi (stats.rho_frame / R_frame); published_frame:
    rho_by_lag() or R_by_window(). The value column is whichever of 'rho'/'R' both have.
    """
    value = "rho" if "rho" in ours.columns else "R"
    mine = ours[ours["group"] == "all"] if "group" in ours.columns else ours
    src = our_label if our_label is not None else mine["model"].map(lambda m: m.split("/")[-1])
    mine = mine.assign(source=src)[["source", "corpus", x, value] + [c for c in ("lo", "hi") if c in mine]]
    keep = pd.Series(False, index=published_frame.index)
    for model, rev in models:
        keep |= (published_frame["model"] == model) & (published_frame["revision"] == rev)
    pub = published_frame[keep].assign(source=lambda d: d["model_label"] + " (published)")
    out = pd.concat([mine, pub[["source", "corpus", x, value]]], ignore_index=True)
    num = [c for c in (value, "lo", "hi") if c in out]
    return out.astype({c: float for c in num} | {x: int})   # numeric even when ours is empty (JSON nulls)


def through_training(directory: Path | None = None) -> pd.DataFrame:
    """The published cells by checkpoint, for the through-training chart: one row per (model, revision, corpus)
    with frac_training (fraction of the model's training run), n_docs, R_16K with its interval (lo, hi),
    rho_long, B_simple_shuf_tokens and mean_gradient_share = S_cross / (S_cross + sigma2); sorted by model,
    training fraction and corpus. Pythia-410M has four checkpoints, Pythia-1.4B and OLMo-2-1B two each; some
    early 1B-class cells hold fewer than 16 documents (n_docs)."""
    df = cells(directory)
    out = df[["model", "model_label", "revision", "frac_training", "corpus_published", "corpus", "n_docs",
              "R_16K", "R_16K_lo", "R_16K_hi", "rho_long", "B_simple_shuf_tokens", "S_cross", "sigma2"]].copy()
    out = out.rename(columns={"R_16K_lo": "lo", "R_16K_hi": "hi"})
    out["mean_gradient_share"] = out["S_cross"] / (out["S_cross"] + out["sigma2"])
    return out.sort_values(["model", "frac_training", "corpus"]).reset_index(drop=True)


def final_checkpoints(directory: Path | None = None, models=FINAL_1B) -> pd.DataFrame:
    """through_training() rows of the given (model, revision) checkpoints (default: the final 1B-class ones)."""
    df = through_training(directory)
    keep = pd.Series(False, index=df.index)
    for model, rev in models:
        keep |= (df["model"] == model) & (df["revision"] == rev)
    return df[keep].reset_index(drop=True)
