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

Why this hash: it needs no scatter. Sketching is a multiply by the sign table plus contiguous adds, all
memory-bandwidth bound, whereas a scatter with a precomputed int32 bucket index (torch.index_add_) took ~0.36 s
on 2 CPU cores for SmolLM2's 134.5M coordinates and the seed's per-chunk regeneration of hashes ~11 s.

Two implementations of the same sums (CountSketch.fused chooses; default: fused on CUDA, blockwise on CPU):
  * blockwise (CPU): per parameter an in-place multiply of the gradient by its signs, then per block of B
    coordinates a float32 dot (and one with the reference) and one or two slice-adds into the rotated buckets:
    about 3 small operations per block (~3,000 per SmolLM2 chunk, ~33,000 for a 1.4B model), each a
    bandwidth-bound pass over 512 KiB, ~0.13 s per SmolLM2 chunk on one core. No memory beyond the signs.
  * fused (CUDA; any device when asked): a work buffer of `rows` x B float32 holds s * g with every parameter
    starting on a row (row r = block k of parameter p, the tail of its last block zero). Per chunk: one
    multiply per parameter into the buffer, then ONE index_add_ adds every row into the window
    [o(p,k), o(p,k) + B) of its group's line of 2B buckets (the windows are overlapping views of one tensor,
    line.unfold(0, B, 1)), bucket b of the group being line[b] + line[b + B] (= the rotation (t + o) mod B);
    the exact squared norms are one row-wise vector_norm plus one index_add_ into the groups, the reference dot a
    product and row sum per 64 MiB slab. So n_parameters + ~6 operations whatever the number of blocks. On
    CPU the index_add_ into overlapping windows runs torch's generic strided loop, ~6x slower than the slice-adds
    (measured: benchmarks/sketch_speed.py), hence blockwise there. CUDA's index_add_ adds with atomics, so the
    order of the float32 additions (not the result beyond rounding) varies from run to run.

Memory: the sign table, 4 bytes per parameter (float32 +-1, the same size as the gradient itself: 538 MB for
SmolLM2-135M), plus one int64 offset per block. The fused path adds its work buffer, 4 bytes per parameter plus
the padding of each parameter's last block to a whole row (SmolLM2 at B = 2^17: +11.8%, 574 MiB in all; the
1.4B GPT-NeoX shape: +1.8%), a 2 x B float32 line per group and, with a reference, a packed copy of it and a
64 MiB slab. An int8 sign table would be 4x smaller but the int8 multiply is ~20x slower in torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, NamedTuple, Sequence

import numpy as np

from docgrad.core.constants import DEFAULT_BUCKETS, G1_MEAN, G1_NORM, G1_SD, GROUPS, SKETCH_SEED
from docgrad.core.groups import named_parameter_groups

SKETCH_NAME = "count-sketch/rotated-blocks/splitmix64/v1"
DOT_SLAB_BYTES = 64 << 20         # temporary of the exact reference dot (CountSketch._dot)

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


class SignedVectors(dict):
    """name -> flat sign-multiplied vector (s * g), every one a view into `buffer`, a copy of a CountSketch's work
    buffer (rows of B coordinates, each parameter starting on a row); `layout` identifies the CountSketch layout,
    so a later sketch with this as `ref` takes its exact dot in one batched product."""

    buffer: object = None
    layout: object = None


@dataclass
class _Param:
    name: str
    group: int                 # index into GROUPS
    numel: int
    signs: object              # torch float32 tensor (numel,)
    row: int                   # first row of its blocks in the fused path's work buffer
    offsets: np.ndarray        # int64 rotation offset of each of its blocks
    segments: list = None      # blockwise path: (src_start, src_stop, dst_start) slice-adds into the buckets
    blocks: list = None        # blockwise path: (start, stop) of each block, for blockwise float32 dots

    @property
    def nblocks(self) -> int:
        return len(self.offsets)


class CountSketch:
    """Count sketch with `buckets` buckets per group (GROUPS), fixed by (seed, parameter names and shapes).

    params: (name, shape, group) for every parameter. See the module docstring for the hash, how a chunk is
    sketched with a fixed number of vectorised operations, and the memory.
    """

    def __init__(self, params: Iterable[tuple[str, Sequence[int], str]], buckets: int = DEFAULT_BUCKETS,
                 seed: int = SKETCH_SEED, device="cpu", signs_from: "CountSketch | None" = None,
                 fused: bool | None = None):
        import torch

        if buckets < 1:
            raise ValueError(f"buckets must be >= 1, got {buckets}")
        self.buckets, self.seed, self.device = int(buckets), int(seed), torch.device(device)
        self.fused = self.device.type != "cpu" if fused is None else bool(fused)
        self._last_signed: dict = {}
        self.params: dict[str, _Param] = {}
        self._shapes: dict[str, tuple] = {}
        B = self.buckets
        rows, window, group_of_row = 0, [], []
        for name, shape, group in params:
            if group not in GROUPS:
                raise ValueError(f"parameter {name}: group {group!r} is not one of {GROUPS}")
            shape = tuple(int(d) for d in shape)
            self._shapes[name] = shape
            n = int(np.prod(shape, dtype=np.int64)) if shape else 1
            key = param_key(self.seed, name, shape)
            offs = offsets_for(key, (n + B - 1) // B, B)
            if signs_from is not None and signs_from.seed == self.seed and name in signs_from.params:
                signs = signs_from.params[name].signs     # signs depend on (seed, name, shape), not on B
            else:
                signs = torch.from_numpy(signs_for(key, n)).to(self.device)
            gi = GROUPS.index(group)
            segments, blocks = [], []
            for k, o in enumerate(offs.tolist()):
                a, b = k * B, min(n, (k + 1) * B)
                blocks.append((a, b))
                first = min(b - a, B - o)
                segments.append((a, a + first, o))
                if b - a > first:
                    segments.append((a + first, b, 0))
            self.params[name] = _Param(name, gi, n, signs, rows, offs, segments, blocks)
            rows += len(offs)
            window.append(gi * 2 * B + offs)             # block k of p -> window o(p,k) of its group's 2B line
            group_of_row.append(np.full(len(offs), gi))
        self.rows = rows
        cat = (lambda xs, dt: torch.from_numpy(np.concatenate(xs).astype(dt)) if xs
               else torch.zeros(0, dtype=torch.int64))
        self._window = cat(window, np.int64).to(self.device)
        self._row_group = cat(group_of_row, np.int64).to(self.device)
        self._work = None                                # (rows, B) float32, allocated on first use
        self._written: set[str] = set()                  # parameters whose rows hold data from an earlier call
        self._ref_cache = None                           # (ref mapping, its packed buffer)
        self._tmp = None                                 # slab temporary of _dot
        self.memory_bytes = 4 * sum(p.numel for p in self.params.values())     # the sign table
        self.work_bytes = 4 * rows * B                                         # the work buffer (allocated lazily)

    @classmethod
    def from_model(cls, model, buckets: int = DEFAULT_BUCKETS, seed: int = SKETCH_SEED, device=None,
                   fused: bool | None = None) -> "CountSketch":
        named = named_parameter_groups(model)
        if device is None:
            device = next(model.parameters()).device
        return cls([(n, tuple(p.shape), g) for n, p, g in named], buckets, seed, device, fused=fused)

    # --- the work buffer -------------------------------------------------------------------------------

    def _flat(self, name: str, v):
        """(the parameter's hash record, the vector flattened), refusing a name or a size the hash was not built for."""
        p = self.params.get(name)
        if p is None:
            raise KeyError(f"sketch: no hash for parameter {name!r} (sketch built for {len(self.params)} others)")
        g = v.reshape(-1)
        if g.numel() != p.numel:
            raise ValueError(f"sketch: {name} has {g.numel()} elements, the hash was built for {p.numel}")
        return p, g

    def _buffer(self):
        import torch

        if self._work is None:
            self._work = torch.zeros(self.rows, self.buckets, dtype=torch.float32, device=self.device)
        return self._work

    def _region(self, buf, p: _Param):
        """The flat view of parameter p's coordinates in a work-layout buffer (its rows, padding excluded)."""
        return buf.view(-1)[p.row * self.buckets: p.row * self.buckets + p.numel]

    def _load(self, vectors: Mapping[str, object], multiply: bool) -> list[str]:
        """Write every vector (times its signs if multiply) into the work buffer; zero the rows of parameters
        written by an earlier call but absent now. One multiply (or copy) per parameter. Returns the names."""
        import torch

        buf = self._buffer()
        names = []
        for name, v in vectors.items():
            if v is None:
                continue
            p, g = self._flat(name, v)
            if multiply:
                torch.mul(g, p.signs, out=self._region(buf, p))
            else:
                self._region(buf, p).copy_(g)
            names.append(name)
        for name in self._written.difference(names):
            self._region(buf, self.params[name]).zero_()
        self._written = set(names)
        return names

    def _fold_buffer(self, buf):
        """(len(GROUPS), B) sketch of a work-layout buffer: ONE index_add_ adds row r (block k of parameter p) into
        the window [o(p,k), o(p,k) + B) of its group's line of 2B buckets (the windows are overlapping views
        of one tensor, so rows of any parameters and groups go in the same call), then bucket b of the group is
        line[b] + line[b + B], which is the rotation (t + o) mod B."""
        import torch

        B, G = self.buckets, len(GROUPS)
        line = torch.zeros(G * 2 * B, dtype=torch.float32, device=self.device)
        if self.rows:
            line.unfold(0, B, 1).index_add_(0, self._window, buf)
        return line.view(G, 2, B).sum(1)

    def _sqnorms(self, buf) -> np.ndarray:
        """Per group, sum over rows of the float32 squared norm of each row of a work-layout buffer, in float64:
        one row-wise norm and one index_add_."""
        import torch

        out = torch.zeros(len(GROUPS), dtype=torch.float64, device=self.device)
        if self.rows:
            out.index_add_(0, self._row_group, torch.linalg.vector_norm(buf, dim=1).double() ** 2)
        return out.cpu().numpy()

    def _dot(self, a, b) -> float:
        """sum over rows of the float32 dot <a_r, b_r> of two work-layout buffers, in float64: a product and a
        row sum per slab of rows (a slab holds DOT_SLAB_BYTES; the temporary is reused)."""
        import torch

        rows = max(1, DOT_SLAB_BYTES // (4 * self.buckets))
        if self._tmp is None or self._tmp.shape[0] < min(rows, self.rows):
            self._tmp = torch.empty(min(rows, self.rows), self.buckets, dtype=torch.float32, device=self.device)
        total = torch.zeros((), dtype=torch.float64, device=self.device)
        for i in range(0, self.rows, rows):
            n = min(rows, self.rows - i)
            t = torch.mul(a[i:i + n], b[i:i + n], out=self._tmp[:n])
            total += t.sum(1).double().sum()
        return float(total)

    def _packed(self, ref: Mapping):
        """ref as a work-layout buffer: its own buffer if it came from this sketch (keep_signed), else a packed
        copy, made once and reused while the same mapping is passed again."""
        if isinstance(ref, SignedVectors) and ref.layout is self._window and ref.buffer is not None:
            return ref.buffer
        if self._ref_cache is not None and self._ref_cache[0] is ref:
            return self._ref_cache[1]
        import torch

        buf = torch.zeros(self.rows, self.buckets, dtype=torch.float32, device=self.device)
        for name, v in ref.items():
            p = self.params.get(name)
            if p is not None and v is not None:
                self._region(buf, p).copy_(v.reshape(-1))
        self._ref_cache = (ref, buf)
        return buf

    # --- sketching ---------------------------------------------------------------------------------------

    def sketch(self, vectors: Mapping[str, object], inplace: bool = False, ref: Mapping | None = None,
               keep_signed: bool = False) -> SketchResult:
        """Sketch a set of named vectors (e.g. gradients), one sketch per group.

        Returns SketchResult(sketch, sqnorm, ref_dot, signed): sketch is a torch float32 tensor (len(GROUPS), B);
        sqnorm a float64 numpy array (len(GROUPS),) of exact squared norms (float32 reductions over blocks of B
        coordinates, summed in float64); ref_dot the exact inner product with `ref` (a dict of sign-multiplied
        flat vectors as returned in `signed`), or None; signed (only if keep_signed) a dict name -> flat
        sign-multiplied copy, usable as a later `ref` (<s*g, s*u> = <g, u> since s^2 = 1).
        inplace=True lets the blockwise path overwrite the vectors with s * g (saves a copy; used for .grad
        tensors); the fused path never writes to them. Either way signed_views() gives s * g until the next
        call. Missing names count as zero vectors. Which path: self.fused (module docstring).
        """
        if self.fused:
            return self._sketch_fused(vectors, ref, keep_signed)
        return self._sketch_blockwise(vectors, inplace, ref, keep_signed)

    def _sketch_fused(self, vectors, ref, keep_signed) -> SketchResult:
        """One multiply per parameter into the work buffer, then a fixed handful of operations (module docstring)."""
        names = self._load(vectors, multiply=True)
        buf = self._work
        out = self._fold_buffer(buf)
        sqnorm = self._sqnorms(buf)
        ref_dot = None if ref is None else self._dot(self._packed(ref), buf)
        self._last_signed = {n: self._region(buf, self.params[n]) for n in names}
        signed = None
        if keep_signed:
            signed = SignedVectors()
            signed.buffer, signed.layout = buf.clone(), self._window
            signed.update({n: self._region(signed.buffer, self.params[n]) for n in names})
        return SketchResult(out, sqnorm, ref_dot, signed)

    def _sketch_blockwise(self, vectors, inplace, ref, keep_signed) -> SketchResult:
        """Per parameter a sign multiply (in place if allowed), per block a float32 dot (and one with the ref)
        and one or two contiguous slice-adds: about 3 small operations per block of B coordinates."""
        import torch

        out = torch.zeros(len(GROUPS), self.buckets, dtype=torch.float32, device=self.device)
        sq_parts = [[] for _ in GROUPS]
        ref_parts = []
        signed = {} if keep_signed else None
        self._last_signed = {}
        for name, v in vectors.items():
            if v is None:
                continue
            p, g = self._flat(name, v)
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
            self._last_signed[name] = g
            if keep_signed:
                signed[name] = g.clone()
        sqnorm = np.array([float(torch.stack(s).double().sum()) if s else 0.0 for s in sq_parts])
        ref_dot = None
        if ref is not None:
            ref_dot = float(torch.stack(ref_parts).double().sum()) if ref_parts else 0.0
        return SketchResult(out, sqnorm, ref_dot, signed)

    def signed_views(self) -> dict:
        """name -> flat s * g of the last sketch call's vectors (views of the work buffer, or the vectors themselves
        after an in-place blockwise sketch): valid until the next call; copy what must outlive it."""
        return dict(self._last_signed)

    def with_buckets(self, buckets: int) -> "CountSketch":
        """The same hash family with another bucket count, sharing this sketch's sign tables (no extra memory)."""
        return CountSketch([(p.name, self._shapes[p.name], GROUPS[p.group]) for p in self.params.values()],
                           buckets, self.seed, self.device, signs_from=self, fused=self.fused)

    def fold(self, signed: Mapping[str, object]):
        """Sketch vectors that are already multiplied by their signs (e.g. another sketch's signed_views())."""
        import torch

        if self.fused:
            self._load(signed, multiply=False)
            self._last_signed = {}
            return self._fold_buffer(self._work)
        out = torch.zeros(len(GROUPS), self.buckets, dtype=torch.float32, device=self.device)
        for name, v in signed.items():
            p = self.params[name]
            g, acc = v.reshape(-1), out[p.group]
            for a, b, d in p.segments:
                acc[d:d + (b - a)].add_(g[a:b])
        return out

    def sketch_model_grads(self, model, ref=None, keep_signed=False) -> SketchResult:
        """Sketch the .grad of every (deduplicated) parameter, in place on the blockwise path; see `sketch`."""
        grads = {n: p.grad for n, p in model.named_parameters() if n in self.params}
        return self.sketch(grads, inplace=True, ref=ref, keep_signed=keep_signed)


def reference_sketch(cs: CountSketch, vectors: Mapping[str, object], ref: Mapping | None = None,
                     keep_signed: bool = False) -> SketchResult:
    """The pre-fused implementation (until issue 11), kept as the oracle of tests/test_sketch_fused.py and the
    baseline of benchmarks/sketch_speed.py: per parameter a sign multiply, then per block of B coordinates a
    float32 dot (and one with the ref) and one or two contiguous slice-adds into the rotated buckets, so
    about 3 small operations per block. Same hash, same numbers to float rounding; the vectors are not modified."""
    import torch

    B = cs.buckets
    out = torch.zeros(len(GROUPS), B, dtype=torch.float32, device=cs.device)
    sq_parts = [[] for _ in GROUPS]
    ref_parts = []
    signed = {} if keep_signed else None
    for name, v in vectors.items():
        if v is None:
            continue
        p = cs.params[name]
        g = v.reshape(-1)
        if g.numel() != p.numel:
            raise ValueError(f"sketch: {name} has {g.numel()} elements, the hash was built for {p.numel}")
        g = g.float() * p.signs
        acc = out[p.group]
        for k, o in enumerate(p.offsets.tolist()):
            a, b = k * B, min(p.numel, (k + 1) * B)
            blk = g[a:b]
            sq_parts[p.group].append(torch.dot(blk, blk))
            if ref is not None and name in ref:
                ref_parts.append(torch.dot(ref[name][a:b], blk))
            first = min(b - a, B - o)
            acc[o:o + first].add_(g[a:a + first])
            if b - a > first:
                acc[0:b - a - first].add_(g[a + first:b])
        if keep_signed:
            signed[name] = g
    sqnorm = np.array([float(torch.stack(s).double().sum()) if s else 0.0 for s in sq_parts])
    ref_dot = None
    if ref is not None:
        ref_dot = float(torch.stack(ref_parts).double().sum()) if ref_parts else 0.0
    return SketchResult(out, sqnorm, ref_dot, signed)


def gram(sketches: np.ndarray) -> np.ndarray:
    """Gram matrix X X^T in float64 of sketches X (n x B)."""
    x = np.asarray(sketches, dtype=np.float64)
    return x @ x.T


# Gate G1 (docs/methods.md): |mean cosine error| <= G1_MEAN, its sd (ddof=1) <= G1_SD, |mean sketched/exact
# squared norm - 1| <= G1_NORM; the thresholds live in docgrad.core.constants. g1_statistics is the one place that
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
