"""Count sketch of per-chunk gradients, one sketch of B buckets per parameter group.
Definitions: docs/methods.md#count-sketch.

The maths. A count sketch maps a vector g in R^N to S g in R^B with (S g)_b = sum_{i: h(i)=b} s(i) g_i,
where h(i) is a bucket and s(i) = +-1 a sign. For two vectors

    <S g, S u> = <g, u> + sum_{i != j, h(i)=h(j)} s(i) s(j) g_i u_j .

If the signs are independent of each other and of h with mean 0, every cross term has mean 0, so the
sketched inner product is unbiased; its variance is sum_{i != j} P[h(i)=h(j)] (g_i^2 u_j^2 + g_i u_i g_j u_j),
about (|g|^2 |u|^2 + <g,u>^2) / B when every pair of coordinates collides with probability 1/B. So the
error of a sketched cosine is of order 1/sqrt(B) (0.0028 at B = 2^17), independent of N.

The hash used here ("rotated blocks"). Each parameter (flattened, row-major) is cut into consecutive blocks
of B coordinates; block k of parameter p is added into the B buckets rotated by an offset o(p, k):
coordinate t of the block goes to bucket (t + o(p, k)) mod B. Every coordinate has its own random sign.
Offsets and signs are a deterministic function of (seed, parameter name, shape): splitmix64 of a key made
from them (below), so they are identical for every chunk, run, process and device, and regenerated only
once per run (~1 s for 135M parameters), never per chunk.

Collision structure: two coordinates of the same block never collide; two coordinates in different blocks
collide iff their positions differ by the difference of the two offsets, which (offsets uniform) happens with
probability exactly 1/B. So every pair collides with probability <= 1/B, the same as a fully random hash,
and because the per-coordinate signs make all cross terms mean-zero, the variance formula above holds with
the same bound. What differs from a fully random hash is only that collisions come in runs: if (p,k,t)
meets (p',k',t') then (p,k,t+1) meets (p',k',t'+1). That leaves the mean and the variance averaged over
seeds unchanged, but one seed's error is a sum over fewer, larger independent pieces (one per pair of blocks:
~10^5-10^6 of them at 2^17 buckets on 135M parameters), so the error distribution has slightly heavier
tails; the G1 gate (measured in benchmarks/probe_overhead.py and notebook 02) checks fidelity on real
gradients.

Why this hash: it needs no scatter. Sketching is an in-place multiply by the sign table plus contiguous
slice-adds, all memory-bandwidth bound (~0.1 s for SmolLM2's 134.5M coordinates on 2 CPU cores), whereas a
scatter with a precomputed int32 bucket index (torch.index_add_) took ~0.36 s and the seed's per-chunk
regeneration of hashes ~11 s. Memory cost: the sign table, 4 bytes per parameter (float32 +-1, the same size
as the gradient itself: 538 MB for SmolLM2-135M), plus one int64 offset per block (~1000 for SmolLM2).
An int8 table would be 4x smaller but the int8 multiply is ~20x slower in torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, NamedTuple, Sequence

import numpy as np

from docgrad.study import DEFAULT_BUCKETS, G1_MEAN, G1_NORM, G1_SD, GROUPS, SKETCH_SEED

SKETCH_NAME = "count-sketch/rotated-blocks/splitmix64/v1"

_M64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_C1 = 0xBF58476D1CE4E5B9
_C2 = 0x94D049BB133111EB


def _mix_int(z: int) -> int:
    """splitmix64 finaliser on a Python int (exact 64-bit arithmetic)."""
    z &= _M64
    z = ((z ^ (z >> 30)) * _C1) & _M64
    z = ((z ^ (z >> 27)) * _C2) & _M64
    return z ^ (z >> 31)


def _stream(key: int, count: int) -> np.ndarray:
    """count pseudo-random uint64 words: splitmix64(key + (t+1) * golden) for t = 0..count-1."""
    with np.errstate(over="ignore"):
        z = np.arange(1, count + 1, dtype=np.uint64) * np.uint64(_GOLDEN) + np.uint64(key)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(_C1)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(_C2)
        return z ^ (z >> np.uint64(31))


def param_key(seed: int, name: str, shape: Sequence[int]) -> int:
    """64-bit key of one parameter: FNV-1a of 'name|d0xd1x...' mixed with the seed."""
    h = 0xCBF29CE484222325
    for byte in f"{name}|{'x'.join(str(int(d)) for d in shape)}".encode():
        h = ((h ^ byte) * 0x100000001B3) & _M64
    return _mix_int(h ^ _mix_int(int(seed) & _M64))


def signs_for(key: int, n: int) -> np.ndarray:
    """n signs +-1 (float32): the bits of ceil(n/64) splitmix64 words, least significant first."""
    words = _stream(_mix_int(key ^ 0x5157), (n + 63) // 64)
    bits = np.unpackbits(words.view(np.uint8), bitorder="little")[:n]
    return (1.0 - 2.0 * bits).astype(np.float32)


def offsets_for(key: int, nblocks: int, buckets: int) -> np.ndarray:
    """Rotation offset in [0, buckets) of each block."""
    return (_stream(_mix_int(key ^ 0x0FF5), nblocks) % np.uint64(buckets)).astype(np.int64)


def hash_of(seed: int, name: str, shape: Sequence[int], buckets: int) -> tuple[np.ndarray, np.ndarray]:
    """(bucket index, sign) of every coordinate of one parameter, explicitly (for tests and explanation)."""
    n = int(np.prod(shape, dtype=np.int64)) if len(shape) else 1
    key = param_key(seed, name, shape)
    t = np.arange(n, dtype=np.int64)
    off = offsets_for(key, (n + buckets - 1) // buckets, buckets)
    return (t % buckets + off[t // buckets]) % buckets, signs_for(key, n)


class SketchResult(NamedTuple):
    """What CountSketch.sketch returns (see there)."""

    sketch: object             # torch float32 (len(GROUPS), B): S g per group
    sqnorm: np.ndarray         # float64 (len(GROUPS),): |g|^2 per group, exact
    ref_dot: float | None      # <g_ref, g> exactly, when a ref was given
    signed: dict | None        # name -> flat s * g, when keep_signed (usable as a later ref)


@dataclass
class _Param:
    name: str
    group: int                 # index into GROUPS
    numel: int
    signs: object              # torch float32 tensor (numel,)
    segments: list             # (src_start, src_stop, dst_start) slice-adds into the group's buckets
    blocks: list               # (start, stop) of each block, for blockwise float32 dots


class CountSketch:
    """Count sketch with `buckets` buckets per group (GROUPS), fixed by (seed, parameter names and shapes).

    params: (name, shape, group) for every parameter. See the module docstring for the hash and its memory.
    """

    def __init__(self, params: Iterable[tuple[str, Sequence[int], str]], buckets: int = DEFAULT_BUCKETS,
                 seed: int = SKETCH_SEED, device="cpu", signs_from: "CountSketch | None" = None):
        import torch

        if buckets < 1:
            raise ValueError(f"buckets must be >= 1, got {buckets}")
        self.buckets, self.seed, self.device = int(buckets), int(seed), torch.device(device)
        self.params: dict[str, _Param] = {}
        self._shapes: dict[str, tuple] = {}
        B = self.buckets
        for name, shape, group in params:
            if group not in GROUPS:
                raise ValueError(f"parameter {name}: group {group!r} is not one of {GROUPS}")
            shape = tuple(int(d) for d in shape)
            self._shapes[name] = shape
            n = int(np.prod(shape, dtype=np.int64)) if shape else 1
            key = param_key(self.seed, name, shape)
            nb = (n + B - 1) // B
            offs = offsets_for(key, nb, B)
            segments, blocks = [], []
            for k in range(nb):
                a, b = k * B, min(n, (k + 1) * B)
                blocks.append((a, b))
                o = int(offs[k])
                first = min(b - a, B - o)
                segments.append((a, a + first, o))
                if b - a > first:
                    segments.append((a + first, b, 0))
            if signs_from is not None and signs_from.seed == self.seed and name in signs_from.params:
                signs = signs_from.params[name].signs     # signs depend on (seed, name, shape), not on B
            else:
                signs = torch.from_numpy(signs_for(key, n)).to(self.device)
            self.params[name] = _Param(name, GROUPS.index(group), n, signs, segments, blocks)
        self.memory_bytes = 4 * sum(p.numel for p in self.params.values())

    @classmethod
    def from_model(cls, model, buckets: int = DEFAULT_BUCKETS, seed: int = SKETCH_SEED, device=None) -> "CountSketch":
        from docgrad.models import named_parameter_groups

        named = named_parameter_groups(model)
        if device is None:
            device = next(model.parameters()).device
        return cls([(n, tuple(p.shape), g) for n, p, g in named], buckets, seed, device)

    def sketch(self, vectors: Mapping[str, object], inplace: bool = False, ref: Mapping | None = None,
               keep_signed: bool = False) -> SketchResult:
        """Sketch a set of named vectors (e.g. gradients), one sketch per group.

        Returns SketchResult(sketch, sqnorm, ref_dot, signed): sketch is a torch float32 tensor (len(GROUPS), B);
        sqnorm a float64 numpy array (len(GROUPS),) of exact squared norms (float32 dots over blocks of B
        coordinates, summed in float64); ref_dot the exact inner product with `ref` (a dict of sign-multiplied
        flat vectors as returned in `signed`), or None; signed (only if keep_signed) a dict name -> flat
        sign-multiplied copy, usable as a later `ref` (<s*g, s*u> = <g, u> since s^2 = 1).
        inplace=True lets the call overwrite the vectors (saves a copy; used for .grad tensors).
        Missing names count as zero vectors.
        """
        import torch

        out = torch.zeros(len(GROUPS), self.buckets, dtype=torch.float32, device=self.device)
        sq_parts = [[] for _ in GROUPS]
        ref_parts = []
        signed = {} if keep_signed else None
        for name, v in vectors.items():
            if v is None:
                continue
            p = self.params.get(name)
            if p is None:
                raise KeyError(f"sketch: no hash for parameter {name!r} (sketch built for {len(self.params)} others)")
            g = v.reshape(-1)
            if g.numel() != p.numel:
                raise ValueError(f"sketch: {name} has {g.numel()} elements, the hash was built for {p.numel}")
            if g.dtype != torch.float32:
                g = g.float()
            g = g.mul_(p.signs) if inplace and g.data_ptr() == v.data_ptr() else g * p.signs
            for a, b in p.blocks:
                blk = g[a:b]
                sq_parts[p.group].append(torch.dot(blk, blk))
                if ref is not None and name in ref:
                    ref_parts.append(torch.dot(ref[name][a:b], blk))
            acc = out[p.group]
            for a, b, d in p.segments:
                acc[d:d + (b - a)].add_(g[a:b])
            if keep_signed:
                signed[name] = g.clone()
        sqnorm = np.array([float(torch.stack(s).double().sum()) if s else 0.0 for s in sq_parts])
        ref_dot = None
        if ref is not None:
            ref_dot = float(torch.stack(ref_parts).double().sum()) if ref_parts else 0.0
        return SketchResult(out, sqnorm, ref_dot, signed)

    def with_buckets(self, buckets: int) -> "CountSketch":
        """The same hash family with another bucket count, sharing this sketch's sign tables (no extra memory)."""
        return CountSketch([(p.name, self._shapes[p.name], GROUPS[p.group]) for p in self.params.values()],
                           buckets, self.seed, self.device, signs_from=self)

    def fold(self, signed: Mapping[str, object]):
        """Sketch vectors that are already multiplied by their signs (e.g. .grad after an in-place sketch)."""
        import torch

        out = torch.zeros(len(GROUPS), self.buckets, dtype=torch.float32, device=self.device)
        for name, v in signed.items():
            p = self.params[name]
            g, acc = v.reshape(-1), out[p.group]
            for a, b, d in p.segments:
                acc[d:d + (b - a)].add_(g[a:b])
        return out

    def sketch_model_grads(self, model, ref=None, keep_signed=False) -> SketchResult:
        """Sketch the .grad of every (deduplicated) parameter in place; see `sketch`."""
        grads = {n: p.grad for n, p in model.named_parameters() if n in self.params}
        return self.sketch(grads, inplace=True, ref=ref, keep_signed=keep_signed)


def gram(sketches: np.ndarray) -> np.ndarray:
    """Gram matrix X X^T in float64 of sketches X (n x B)."""
    x = np.asarray(sketches, dtype=np.float64)
    return x @ x.T


# Gate G1 (docs/methods.md): |mean cosine error| <= G1_MEAN, its sd (ddof=1) <= G1_SD, |mean sketched/exact
# squared norm - 1| <= G1_NORM; the thresholds live in docgrad.study. g1_statistics is the one place that
# computes them: fidelity() (notebook 02, benchmarks) and gates.gate_g1 (result files) both call it.

def g1_passes(mean_cosine_error: float, sd_cosine_error: float, mean_sqnorm_ratio: float) -> bool:
    return (abs(mean_cosine_error) <= G1_MEAN and sd_cosine_error <= G1_SD
            and abs(mean_sqnorm_ratio - 1) <= G1_NORM)


def g1_statistics(errors, sqnorm_ratios=None) -> dict:
    """Gate G1 on cosine errors e_j (cosine_errors) and squared-norm ratios q_j = |S g_j|^2 / |g_j|^2.

    Returns pairs = #e, mean_cosine_error = mean e, sd_cosine_error = sd e (ddof=1; 0.0 for one pair),
    mean_sqnorm_ratio = mean q (None without ratios) and passes (g1_passes; without ratios only the
    cosine conditions count).
    """
    e = np.asarray(errors, dtype=np.float64).reshape(-1)
    if e.size == 0:
        raise ValueError("g1_statistics: no cosine errors (needs a reference chunk and at least one other)")
    mean = float(e.mean())
    sd = float(e.std(ddof=1)) if e.size > 1 else 0.0
    ratio = None if sqnorm_ratios is None else float(np.mean(np.asarray(sqnorm_ratios, dtype=np.float64)))
    return {"pairs": int(e.size), "mean_cosine_error": mean, "sd_cosine_error": sd, "mean_sqnorm_ratio": ratio,
            "passes": bool(g1_passes(mean, sd, 1.0 if ratio is None else ratio))}


def cosine_errors(exact_ref_dot, sketched_ref_row, sqnorm, ref: int = 0) -> np.ndarray:
    """(sketched_ref_row[j] - exact_ref_dot[j]) / (|g_ref| |g_j|) for every j != ref: the error, in cosine
    units, of the off-diagonal Gram entries <S g_ref, S g_j> the analysis uses (sqnorm[j] = |g_j|^2 exactly)."""
    ex = np.asarray(exact_ref_dot, dtype=np.float64)
    sq = np.asarray(sqnorm, dtype=np.float64)
    keep = np.arange(ex.size) != ref
    return (np.asarray(sketched_ref_row, dtype=np.float64)[keep] - ex[keep]) / np.sqrt(sq[ref] * sq[keep])


def fidelity(exact_ref_dot, sketched_ref_row, sqnorm, ref: int = 0, sketched_diag=None) -> dict:
    """G1 statistics (g1_statistics) of one reference chunk against every other chunk, plus descriptions.

    exact_ref_dot[j] = <g_ref, g_j> exactly, sketched_ref_row[j] = <S g_ref, S g_j>, sqnorm[j] = |g_j|^2
    exactly (all summed over groups). With sketched_diag (|S g_j|^2): the norm ratio sqrt(|S g_j|^2 / |g_j|^2)
    and the squared-norm ratio gate G1 tests.
    """
    ex = np.asarray(exact_ref_dot, dtype=np.float64)
    sq = np.asarray(sqnorm, dtype=np.float64)
    keep = np.arange(ex.size) != ref
    err = cosine_errors(ex, sketched_ref_row, sq, ref)
    sq_ratios = None if sketched_diag is None else np.asarray(sketched_diag, dtype=np.float64) / sq
    g1 = g1_statistics(err, sq_ratios)
    out = {"pairs": g1["pairs"], "mean_cosine_error": g1["mean_cosine_error"], "sd_cosine_error": g1["sd_cosine_error"],
           "max_abs_cosine_error": float(np.abs(err).max()),
           "mean_exact_cosine": float((ex[keep] / np.sqrt(sq[ref] * sq[keep])).mean())}
    if sq_ratios is not None:
        ratio = np.sqrt(sq_ratios)
        out["mean_norm_ratio"] = float(ratio.mean())
        out["sd_norm_ratio"] = float(ratio.std(ddof=1)) if ratio.size > 1 else 0.0
        out["mean_sqnorm_ratio"] = g1["mean_sqnorm_ratio"]
    out["passes"] = g1["passes"]
    return out


def seed_style_sketch(vectors: Mapping[str, np.ndarray], groups: Mapping[str, str], buckets: int = DEFAULT_BUCKETS,
                      seed: int = 0) -> np.ndarray:
    """The published probe's approach, re-implemented in numpy for the speed comparison (notebook 02).

    For every chunk it regenerates each parameter's hash from a seeded numpy RNG — a bucket index and a sign per
    coordinate, drawn afresh (same seed, so the same values) — and scatters with np.bincount. Same
    estimator as CountSketch (a count sketch with independent uniform buckets), but the per-chunk regeneration
    of 2 x N random numbers dominates its cost. Returns (len(GROUPS), buckets) float64.
    """
    out = np.zeros((len(GROUPS), buckets))
    for name, v in vectors.items():
        rng = np.random.default_rng([seed, param_key(0, name, np.shape(v)) & 0xFFFFFFFF])
        x = np.asarray(v, dtype=np.float32).reshape(-1)
        h = rng.integers(0, buckets, size=x.size)
        s = rng.integers(0, 2, size=x.size, dtype=np.int8) * 2 - 1
        out[GROUPS.index(groups[name])] += np.bincount(h, weights=x * s, minlength=buckets)
    return out


def storage_bytes(n_chunks: int, n_params: int, buckets: int = DEFAULT_BUCKETS, groups: int = len(GROUPS)) -> dict:
    """Memory to hold n_chunks gradients exactly (float32) vs as count sketches (float32, `groups` x buckets each),
    and the float64 Gram matrix either way."""
    return {"exact_gradients": 4 * n_chunks * n_params, "sketches": 4 * n_chunks * groups * buckets,
            "gram_per_group": 8 * n_chunks * n_chunks, "compression": n_params / (groups * buckets)}
