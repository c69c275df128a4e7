"""Result files: one shard of one cell (model, revision, corpus, chunk) as `<stem>.npz` + `<stem>.json`.
Definitions: docs/methods.md#gram-matrices-and-result-files.

Layout (shared with the published doc-batch-gradients `results/`, so its files load unchanged):
  data/results/<org>__<model>/<revision>/<CORPUS>_c<chunk>_d<a>-<b>.npz
  data/results/<org>__<model>/<revision>/<CORPUS>_c<chunk>_w<W>_causal_d<a>-<b>.npz   (--context causal --window W)
  data/results/<org>__<model>/<revision>/<CORPUS>_c<chunk>_d<a>-<b>_bfloat16.npz       (--dtype bfloat16)
npz keys: index (n x 2 int32: document, chunk), loss (n), gram_<group> (n x n float64, the sketched Gram,
diagonal included), sqnorm_<group> (n, exact squared norms), exact_ref_dot (n, or empty).
json: {"args": {model, revision, corpus, chunk, docs, ..., context, window}, timings, versions, spans_sha256, ...}.
args.context says how each chunk's gradient was taken: "standalone" (also when absent: the committed and
published files predate it), "standalone-bos", or "causal" with args.window the window W in tokens. A causal
file's cell includes ("causal", W) (Shard.cell), and its name says so (`_w<W>_causal`). args.dtype is the
arithmetic of the forward passes, "float32" (also when absent) or "bfloat16" (docgrad.measure.precision); a bf16
file's cell ends in "bfloat16" and its name says so (`_bfloat16`), so it is never pooled with float32 files.
The model regime (docs/methods.md#model-regime): args.start_token (a token id put ahead of every standalone chunk
beyond the model's own default) and args.simex ({"lambda", "seed"}: noise added to the rounded weights) make the
file's regime label (`bos0`, `simex1-s1`, `bos0_simex1-s1`; "" for the model as loaded), which ends its name
(`..._d0-16_bos0`) and its cell key, so regimes never pool with each other or with the model as loaded.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import re
import stat
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from docgrad.core.constants import CAUSAL, CONTEXTS, DEFAULT_BUCKETS, DTYPES, FLOAT32, GROUPS, STANDALONE
from docgrad.errors import DocgradError
from docgrad.fileio import atomic_write_json, atomic_write_npz, file_sha256
from docgrad.models import offline_model

_STEM = re.compile(r"^(?P<corpus>[A-Za-z0-9]+)_c(?P<chunk>\d+)(?:_w(?P<window>\d+)_(?P<context>causal))?"
                   r"_d(?P<a>\d+)-(?P<b>\d+)(?:_(?P<dtype>bfloat16))?(?:_(?P<regime>(?:bos\d+|nobos)(?:_simex[0-9.]+-s\d+)?|simex[0-9.]+-s\d+))?$")


def regime_label(start_token: int | None = None, simex: dict | None = None, no_start_token: bool = False) -> str:
    """The model regime of a result as a name part: '' (the model as loaded), 'bos<id>' (that token ahead of
    every chunk), 'nobos' (no start token where the model's own default puts its BOS first), 'simex<lambda>-s<seed>'
    (rounding noise of variance lambda times the rounding error's), or both joined by '_'. lambda is written
    without a trailing '.0' (1, 2, 0.5)."""
    parts = []
    if no_start_token:
        parts.append("nobos")
    if start_token is not None:
        parts.append(f"bos{int(start_token)}")
    if simex:
        lam = float(simex["lambda"])
        parts.append(f"simex{int(lam) if lam.is_integer() else lam}-s{int(simex['seed'])}")
    return "_".join(parts)


SYMMETRY_RTOL = 1e-9   # |K - K^T| allowed, relative to max |K| (float64 rounding of X X^T is ~1e-16)
MAX_CHUNK = 2**20      # no model reads a chunk of more tokens
CAUCHY_SCHWARZ_RTOL = 1e-6   # |K_ij| <= sqrt(K_ii K_jj) (1 + this): exact for inner products, up to rounding
DIAGONAL_SDS = 30      # |sketched K_ii / exact squared norm - 1| allowed, in sd sqrt(2/B) (diagonal_bound)
REF_DOT_RTOL = 1e-3    # exact_ref_dot against the exact squared norms: both are float32 sums (same order of rounding)


def diagonal_bound(buckets: int) -> float:
    """The largest relative error |(|Sg|^2 / |g|^2) - 1| a file's sketched Gram diagonal may show against the exact
    squared norms: DIAGONAL_SDS standard deviations of a count sketch of B buckets per group.

    |Sg|^2 - |g|^2 = sum_{i != j, h(i) = h(j)} s_i s_j g_i g_j has mean 0 and, with independent signs and every pair
    colliding with probability at most 1/B, variance sum_{i<j} P[h(i) = h(j)] (2 g_i g_j)^2 <= 2 |g|^4 / B: the
    relative error has sd at most sqrt(2/B) (0.0039 at B = 2^17). The rotated-block hash makes collisions come in
    runs, so a group whose gradient lies in a few blocks (`other`, `embed`) has heavier tails: the committed cells
    reach 4.4 sd (attn), 3.7 (mlp), 9.0 (embed) and 11.1 (other). 30 sd (11.7% at 2^17) leaves them 2.7 times that
    room and still refuses a Gram whose diagonal is off by more than that, e.g. every gram_* scaled by 1.45
    (docs/methods.md, "Gram matrices and result files")."""
    return DIAGONAL_SDS * math.sqrt(2.0 / buckets)


class ResultFileError(DocgradError, ValueError):
    """A result file is missing, corrupt, or inconsistent; the message names the file."""


@dataclass
class Shard:
    """One loaded result file. `gram` / `sqnorm` map group name -> array."""

    path: Path
    meta: dict
    index: np.ndarray
    loss: np.ndarray
    gram: dict[str, np.ndarray]
    sqnorm: dict[str, np.ndarray]
    exact_ref_dot: np.ndarray = field(default_factory=lambda: np.zeros(0))
    sha256: str = ""       # result_digest of the bytes as read: the analysis cache's key (results.stats.inputs_key)

    @property
    def args(self) -> dict:
        return self.meta.get("args", {})

    @property
    def context(self) -> str:
        """How each chunk's gradient was taken: "standalone" (also for files without args.context) or "causal"."""
        return str(self.args.get("context") or STANDALONE)

    @property
    def window(self) -> int | None:
        """The causal window W in tokens (None unless the file is causal)."""
        w = self.args.get("window")
        return None if self.context != CAUSAL or w is None else int(w)

    @property
    def dtype(self) -> str:
        """The arithmetic of the forward passes: "float32" (also for files without args.dtype) or "bfloat16"."""
        return str(self.args.get("dtype") or FLOAT32)

    @property
    def cell(self) -> tuple:
        """The file's cell: (model, revision, corpus, chunk), the published key; for a causal file
        ("causal", W) follows, and for a bf16 file "bfloat16" last, so causal shards are never pooled with
        standalone ones nor bf16 with float32 (docgrad.results.cells.pool_cell also refuses such mixtures)."""
        a = self.args
        key = (a["model"], str(a["revision"]), a["corpus"], int(a["chunk"]))
        if self.context == CAUSAL:
            key = (*key, CAUSAL, self.window)
        key = key if self.dtype == FLOAT32 else (*key, self.dtype)
        return (*key, self.regime) if self.regime else key

    @property
    def regime(self) -> str:
        """The model regime (regime_label of args.start_token and args.simex): '' for the model as loaded."""
        a = self.args
        return regime_label(a.get("start_token"), a.get("simex"), a.get("no_start_token") is True)

    @property
    def documents(self) -> np.ndarray:
        return np.unique(self.index[:, 0])


def result_stem(model: str, revision: str, corpus: str, chunk: int, docs: tuple[int, int],
                context: str = STANDALONE, window: int | None = None, dtype: str = FLOAT32,
                regime: str = "") -> str:
    """Relative path (without suffix) of a result file, e.g. `HuggingFaceTB__SmolLM2-135M-Instruct/gguf-q8/BOOKS_c512_d0-16`;
    a causal run's stem names its window (`.../BOOKS_c512_w4096_causal_d0-16`), a bf16 run its dtype
    (`.../BOOKS_c512_d0-16_bfloat16`), a model regime its label (`.../BOOKS_c512_d0-16_bos0`, regime_label)."""
    a, b = docs
    mode = f"_w{int(window)}_{CAUSAL}" if context == CAUSAL else ""
    tail = ("" if dtype == FLOAT32 else f"_{dtype}") + (f"_{regime}" if regime else "")
    return f"{model.replace('/', '__')}/{revision}/{corpus}_c{chunk}{mode}_d{a}-{b}{tail}"






NPZ_DIGEST = "npz_sha256"    # the json's record of its own npz: a reused or resumed cell is checked against it


def npz_matches_json(npz_path: Path, meta: dict) -> bool | None:
    """Whether the npz beside a result json is the one it was written with: True or False where the json records
    its digest (NPZ_DIGEST), None for a file written before the digest was recorded (it cannot be checked)."""
    want = meta.get(NPZ_DIGEST)
    return None if want is None else file_sha256(npz_path) == want


def write_result(npz_path: Path, *, index, loss, gram: dict, sqnorm: dict, exact_ref_dot=None,
                 meta: dict, overwrite: bool = False) -> None:
    """Validate and write one result (npz first, then json; each atomically).

    The json is written last (and, on overwrite, the old json removed first), so a crash between the two leaves
    an npz without its json, which `load_result` reports as incomplete rather than reading it as a finished
    result: never a new npz beside the old json.
    """
    npz_path = Path(npz_path)
    json_path = npz_path.with_suffix(".json")
    if not overwrite and (npz_path.exists() or json_path.exists()):
        raise FileExistsError(f"{npz_path}: a result already exists; pass overwrite=True (--overwrite) to replace it")
    arrays = {"index": np.asarray(index, dtype=np.int32), "loss": np.asarray(loss, dtype=np.float64),
              "exact_ref_dot": np.asarray([] if exact_ref_dot is None else exact_ref_dot, dtype=np.float64)}
    for g in gram:
        arrays[f"gram_{g}"] = np.asarray(gram[g], dtype=np.float64)
        arrays[f"sqnorm_{g}"] = np.asarray(sqnorm[g], dtype=np.float64)
    _validate_arrays(npz_path, arrays, file_buckets(npz_path, meta))
    json_path.unlink(missing_ok=True)   # overwrite: the old pair reads as incomplete until the new one is whole
    atomic_write_npz(npz_path, arrays, compressed=True)
    atomic_write_json(json_path, {**meta, NPZ_DIGEST: file_sha256(npz_path)})


def _real(path: Path, name: str, a: np.ndarray, integer: bool = False) -> None:
    """Refuse an array that is not real numbers (complex, boolean, strings, objects) or, for integer=True, not
    integers."""
    kinds = "iu" if integer else "iuf"
    if a.dtype.kind not in kinds:
        want = "integers" if integer else "real numbers"
        raise ResultFileError(f"{path}: '{name}' must hold {want}, got dtype {a.dtype}")


def file_buckets(path: Path, meta: dict) -> int:
    """The count sketch's buckets per group B of a result file: args.buckets, or sketch.buckets (they must agree
    where both are recorded); DEFAULT_BUCKETS (2^17, the study's) for files that record neither (synthetic ones)."""
    args = meta.get("args") if isinstance(meta.get("args"), dict) else {}
    sk = meta.get("sketch") if isinstance(meta.get("sketch"), dict) else {}
    recorded = {k: v for k, v in (("args.buckets", args.get("buckets")), ("sketch.buckets", sk.get("buckets")))
                if v is not None}
    for key, b in recorded.items():
        if isinstance(b, bool) or not isinstance(b, int) or b < 1:
            raise ResultFileError(f"{path}: {key} must be the sketch's bucket count (an integer >= 1), got {b!r}")
    if len(set(recorded.values())) > 1:
        raise ResultFileError(f"{path}: args.buckets is {args['buckets']} but sketch.buckets is {sk['buckets']}; "
                              "one sketch has one bucket count")
    return next(iter(recorded.values()), DEFAULT_BUCKETS)


def _validate_arrays(path: Path, z: dict, buckets: int = DEFAULT_BUCKETS) -> None:
    """What the arrays of one file can be: every array finite real numbers; index n x 2 non-negative integers
    without repeats; loss (n) >= 0 (a mean cross-entropy); per group a symmetric n x n gram_<group> and an n-vector
    sqnorm_<group> >= 0 that are inner products of one set of vectors (_check_inner_products, with the count
    sketch's diagonal bound for B = buckets); exact_ref_dot empty or n. Refusals name the file and the array."""
    for key in ("index", "loss"):
        if key not in z:
            raise ResultFileError(f"{path}: missing array '{key}'")
    index, loss = z["index"], z["loss"]
    for k in z:
        _real(path, k, z[k], integer=k == "index")
        if not np.all(np.isfinite(z[k])):
            bad = int(np.sum(~np.isfinite(z[k])))
            raise ResultFileError(f"{path}: {k} has {bad} non-finite entries (NaN or infinite): a corrupt file")
    if index.ndim != 2 or index.shape[1] != 2:
        raise ResultFileError(f"{path}: 'index' must be n x 2 (document, chunk), got shape {index.shape}")
    if index.size and index.min() < 0:
        r = int(np.argmin(index.min(axis=1)))
        raise ResultFileError(f"{path}: 'index' row {r} is {index[r].tolist()}: document and chunk numbers are >= 0")
    n = index.shape[0]
    if n == 0:
        raise ResultFileError(f"{path}: 'index' has no rows: the file holds no chunks")
    if loss.shape != (n,):
        raise ResultFileError(f"{path}: 'loss' has shape {loss.shape}, expected ({n},) to match 'index'")
    if loss.min() < 0:
        r = int(np.argmin(loss))
        raise ResultFileError(f"{path}: loss[{r}] = {loss[r]:.6g} (index {index[r].tolist()}): a chunk's loss is a "
                              "mean cross-entropy, >= 0")
    groups = sorted(k[5:] for k in z if k.startswith("gram_"))
    if not groups:
        raise ResultFileError(f"{path}: no gram_<group> arrays (expected groups {', '.join(GROUPS)})")
    for g in groups:
        K = z[f"gram_{g}"]
        if f"sqnorm_{g}" not in z:
            raise ResultFileError(f"{path}: gram_{g} has no matching sqnorm_{g}")
        if K.shape != (n, n):
            raise ResultFileError(f"{path}: gram_{g} has shape {K.shape}, expected ({n}, {n}) to match 'index'")
        if z[f"sqnorm_{g}"].shape != (n,):
            raise ResultFileError(f"{path}: sqnorm_{g} has shape {z[f'sqnorm_{g}'].shape}, expected ({n},)")
        asym = float(np.max(np.abs(K - K.T))) if n else 0.0
        scale = float(np.max(np.abs(K))) if n else 0.0
        if asym > SYMMETRY_RTOL * scale:
            i, j = np.unravel_index(int(np.argmax(np.abs(K - K.T))), K.shape)
            raise ResultFileError(f"{path}: gram_{g} is not symmetric (K[{i},{j}] = {K[i, j]:.6g} but K[{j},{i}] = "
                                  f"{K[j, i]:.6g}; max |K - K^T| / max |K| = {asym / scale:.2g} > {SYMMETRY_RTOL:g}); "
                                  "a Gram matrix of inner products must be symmetric")
        neg = np.flatnonzero(z[f"sqnorm_{g}"] < 0)
        if neg.size:
            raise ResultFileError(f"{path}: sqnorm_{g} has {neg.size} negative squared norm(s) (first at row {neg[0]}: "
                                  f"{z[f'sqnorm_{g}'][neg[0]]:.6g}); squared norms are >= 0")
        _check_inner_products(path, g, np.asarray(K, dtype=float), np.asarray(z[f"sqnorm_{g}"], dtype=float), buckets)
    total = sum(z[f"sqnorm_{g}"] for g in groups)
    zero = np.flatnonzero(total <= 0)
    if zero.size:
        raise ResultFileError(f"{path}: {zero.size} chunk(s) have a zero gradient (squared norm summed over groups "
                              f"is 0, first at row {zero[0]}, index {index[zero[0]].tolist()}); every chunk has "
                              "targets, so its gradient cannot vanish")
    ex = z.get("exact_ref_dot")
    if ex is not None and ex.size not in (0, n):
        raise ResultFileError(f"{path}: exact_ref_dot has {ex.size} entries, expected 0 or {n}")
    pairs = {tuple(r) for r in index.tolist()}
    if len(pairs) != n:
        raise ResultFileError(f"{path}: 'index' repeats a (document, chunk) pair")


def _check_inner_products(path: Path, g: str, K: np.ndarray, sqnorm: np.ndarray,
                          buckets: int = DEFAULT_BUCKETS) -> None:
    """What a Gram of (sketched) inner products must satisfy: a diagonal >= 0 within diagonal_bound(buckets) of the
    exact squared norms (what a count sketch of B buckets can do), and Cauchy-Schwarz, |K_ij| <= sqrt(K_ii K_jj),
    which holds exactly for the sketched vectors."""
    d = np.diag(K)
    if d.size and d.min() < 0:
        i = int(np.argmin(d))
        raise ResultFileError(f"{path}: gram_{g} has a negative diagonal entry (K[{i},{i}] = {d[i]:.6g}); the diagonal "
                              "holds squared norms")
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(sqnorm > 0, np.abs(d / np.where(sqnorm > 0, sqnorm, 1) - 1), 0.0)
    bound = diagonal_bound(buckets)
    if rel.size and rel.max() > bound:
        i = int(np.argmax(rel))
        raise ResultFileError(f"{path}: group {g}, row {i}: the sketched squared norm gram_{g}[{i},{i}] = {d[i]:.6g} "
                              f"and the exact one sqnorm_{g}[{i}] = {sqnorm[i]:.6g} differ by {rel[i]:.1%}, more than "
                              f"a count sketch of B = {buckets} buckets can ({DIAGONAL_SDS} sd of sqrt(2/B) = "
                              f"{bound:.1%}); the Gram and the squared norms do not belong together")
    cs = np.sqrt(np.outer(d, d)) * (1 + CAUCHY_SCHWARZ_RTOL) + 1e-300
    over = np.abs(K) > cs
    if over.any():
        i, j = (int(x) for x in np.argwhere(over)[0])
        raise ResultFileError(f"{path}: gram_{g}[{i},{j}] = {K[i, j]:.6g} exceeds sqrt(K[{i},{i}] K[{j},{j}]) = "
                              f"{np.sqrt(d[i] * d[j]):.6g} ({int(over.sum())} entries do): impossible for inner products "
                              "(Cauchy-Schwarz)")


def check_regular(path: Path) -> None:
    """Refuse a path that is not a regular file (after following symbolic links) before anything opens it: a FIFO
    would block the reader forever, a directory or device is no result file."""
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        kind = ("a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a directory" if stat.S_ISDIR(mode)
                else "a socket" if stat.S_ISSOCK(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                else "not a regular file")
        raise ResultFileError(f"{path}: is {kind}, not a regular file; a result file is a regular file (remove it "
                              "or move it out of the results directory)")


def load_result(npz_path: Path, groups: tuple[str, ...] | None = None) -> Shard:
    """Load and validate one result file (npz + json). Every problem raises ResultFileError naming the file.

    groups: require these groups (default: whichever the file has, at least one).
    """
    npz_path = Path(npz_path)
    json_path = npz_path.with_suffix(".json")
    if not npz_path.exists():
        raise ResultFileError(f"{npz_path}: no such result file")
    if not json_path.exists():
        raise ResultFileError(f"{npz_path}: metadata {json_path.name} is missing (incomplete or partial result)")
    for p in (npz_path, json_path):
        check_regular(p)
    json_bytes = json_path.read_bytes()
    try:
        meta = json.loads(json_bytes.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ResultFileError(f"{json_path}: not valid JSON ({type(e).__name__}: {e})") from None
    if not isinstance(meta, dict):
        raise ResultFileError(f"{json_path}: expected a JSON object with 'args', got a JSON {type(meta).__name__}")
    args = meta.get("args")
    if not isinstance(args, dict) or not {"model", "revision", "corpus", "chunk"} <= set(args):
        raise ResultFileError(f"{json_path}: 'args' must name model, revision, corpus and chunk")
    try:
        if not 2 <= int(args["chunk"]) <= MAX_CHUNK:
            raise ValueError
    except (TypeError, ValueError, OverflowError):
        raise ResultFileError(f"{json_path}: args.chunk must be an integer from 2 to {MAX_CHUNK}, got "
                              f"{args['chunk']!r}") from None
    context = args.get("context") or STANDALONE
    if context not in CONTEXTS:
        raise ResultFileError(f"{json_path}: args.context must be one of {', '.join(CONTEXTS)}, got {context!r}")
    if context == CAUSAL:
        w = args.get("window")
        if isinstance(w, bool) or not isinstance(w, int) or w < int(args["chunk"]) or w % int(args["chunk"]):
            raise ResultFileError(f"{json_path}: a causal file needs args.window, a positive multiple of args.chunk "
                                  f"({args['chunk']}), got {w!r}")
    dtype = args.get("dtype") or FLOAT32
    if dtype not in DTYPES:
        raise ResultFileError(f"{json_path}: args.dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    try:
        npz_bytes = npz_path.read_bytes()           # read once: loaded and hashed from the same bytes
        with np.load(io.BytesIO(npz_bytes), allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as e:
        raise ResultFileError(f"{npz_path}: cannot read npz (truncated or corrupt: {e})") from e
    _validate_arrays(npz_path, arrays, file_buckets(json_path, meta))
    have = sorted(k[5:] for k in arrays if k.startswith("gram_"))
    listed = meta.get("groups")
    if isinstance(listed, list) and sorted(map(str, listed)) != have:
        raise ResultFileError(f"{npz_path}: holds groups {have} but its json lists {sorted(map(str, listed))}; "
                              "an unlisted group would be summed into the total")
    _check_index_complete(npz_path, arrays["index"])
    _check_meta_against_arrays(json_path, meta, arrays)
    _check_regime(json_path, args)
    shard = Shard(
        path=npz_path,
        meta=meta,
        index=arrays["index"].astype(np.int64),
        loss=arrays["loss"].astype(np.float64),
        gram={g: arrays[f"gram_{g}"] for g in have},
        sqnorm={g: arrays[f"sqnorm_{g}"] for g in have},
        exact_ref_dot=arrays.get("exact_ref_dot", np.zeros(0)),
        sha256=result_digest(npz_bytes, json_bytes),
    )
    if groups is not None:
        check_groups(shard, groups)
    return shard


def _check_regime(json_path: Path, args: dict) -> None:
    """args.start_token (a token id) and args.simex ({"lambda": > 0, "seed": >= 0}) when present."""
    t = args.get("start_token")
    if t is not None and (isinstance(t, bool) or not isinstance(t, int) or t < 0):
        raise ResultFileError(f"{json_path}: args.start_token must be a token id (an integer >= 0), got {t!r}")
    if args.get("no_start_token") not in (None, True) or (args.get("no_start_token") and t is not None):
        raise ResultFileError(f"{json_path}: args.no_start_token must be true (and no start_token beside it), got "
                              f"{args.get('no_start_token')!r}")
    sx = args.get("simex")
    if sx is None:
        return
    lam = sx.get("lambda") if isinstance(sx, dict) else None
    seed = sx.get("seed") if isinstance(sx, dict) else None
    if (isinstance(lam, bool) or not isinstance(lam, (int, float)) or not lam > 0
            or isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise ResultFileError(f"{json_path}: args.simex must be {{\"lambda\": a number > 0, \"seed\": an integer "
                              f">= 0}}, got {sx!r}")


def check_groups(shard: Shard, groups: tuple[str, ...]) -> None:
    """The file holds every group of `groups` (a ResultFileError naming the file and what it has, if not)."""
    missing = [g for g in groups if g not in shard.gram]
    if missing:
        raise ResultFileError(f"{shard.path}: missing group(s) {missing}; file has {sorted(shard.gram)}")


def result_digest(npz_bytes: bytes, json_bytes: bytes) -> str:
    """sha256 of one result file's npz and json bytes, each length-prefixed."""
    h = hashlib.sha256()
    for b in (npz_bytes, json_bytes):
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()


def _check_meta_against_arrays(json_path: Path, meta: dict, z: dict) -> None:
    """The json describes the npz beside it: its documents (args.docs), chunks per document, and the row of the
    exact reference."""
    index = z["index"]
    docs = sorted({int(d) for d in index[:, 0]})
    rng = meta["args"].get("docs")
    if rng is not None:
        if isinstance(rng, str):                   # "a:b", as the published study's files and --docs write it
            try:
                rng = list(parse_docs(rng))
            except ResultFileError:
                rng = None
        if not (isinstance(rng, (list, tuple)) and len(rng) == 2 and all(isinstance(x, int) for x in rng)):
            raise ResultFileError(f"{json_path}: args.docs must be [a, b] or 'a:b' (integers), got "
                                  f"{meta['args'].get('docs')!r}")
        if docs != list(range(rng[0], rng[1])):
            raise ResultFileError(f"{json_path}: args.docs is {list(rng)} but the npz holds documents "
                                  f"{docs[:3]}{'...' if len(docs) > 3 else ''} ({len(docs)} of them)")
    m = int(np.sum(index[:, 0] == index[0, 0]))          # chunks per document (every document has 0..m-1)
    for key, want, what in (("chunks_per_document", m, "chunks per document"), ("chunks_per_doc", m,
                            "chunks per document"), ("n_chunks", len(index), "rows"), ("chunks", len(index), "rows")):
        got = meta.get(key)
        if got is not None and (isinstance(got, bool) or not isinstance(got, int) or got != want):
            raise ResultFileError(f"{json_path}: {key} is {got!r} but the npz has {want} {what} ({len(index)} rows "
                                  f"for {len(docs)} documents)")
    pin, args = meta.get("pin"), meta["args"]
    if (args.get("context") or STANDALONE) == CAUSAL and m * int(args["chunk"]) != args["window"]:
        raise ResultFileError(f"{json_path}: a causal file holds the window's chunks, args.window / args.chunk = "
                              f"{args['window']} / {args['chunk']} = {args['window'] // int(args['chunk'])} per "
                              f"document, but the npz has {m}")
    if isinstance(pin, dict):
        for key in ("model", "revision"):
            if key in pin and pin[key] != args.get(key):
                raise ResultFileError(f"{json_path}: args.{key} is {args.get(key)!r} but the model pin records "
                                      f"{pin[key]!r}; the label does not name the weights that were probed")
        spec = offline_model(str(args.get("model")))
        if spec is not None and pin.get("gguf_sha256") not in (None, spec.sha256):
            raise ResultFileError(f"{json_path}: args.model is {spec.model} but the pinned file's sha256 "
                                  f"{str(pin['gguf_sha256'])[:12]}.. is not its ({spec.sha256[:12]}..)")
    ex = z.get("exact_ref_dot")
    row = meta.get("exact_ref_row")
    if ex is None or not ex.size:
        return
    if row is not None and not (isinstance(row, int) and not isinstance(row, bool) and 0 <= row < len(index)):
        raise ResultFileError(f"{json_path}: exact_ref_row is {row!r}, outside the file's {len(index)} rows")
    r = 0 if row is None else row
    label = meta.get("exact_ref_chunk")
    if label is not None and label != index[r].tolist():
        raise ResultFileError(f"{json_path}: exact_ref_chunk is {label!r} but row {r} of 'index' is "
                              f"{index[r].tolist()} (document, chunk)")
    _check_exact_ref(json_path, r, np.asarray(ex, dtype=float),
                     sum(np.asarray(z[k], dtype=float) for k in z if k.startswith("sqnorm_")))


def _check_index_complete(npz_path: Path, index: np.ndarray) -> None:
    """Every document of the file has the same chunks 0..m-1: the probe writes whole documents."""
    docs, counts = np.unique(index[:, 0], return_counts=True)
    m = int(counts[0])
    for d, c in zip(docs.tolist(), counts.tolist()):
        got = np.sort(index[index[:, 0] == d, 1])
        if c != m or not np.array_equal(got, np.arange(m)):
            raise ResultFileError(f"{npz_path}: 'index' gives document {d} the chunks {got.tolist()[:5]}"
                                  f"{'...' if c > 5 else ''} ({c} of them), expected chunks 0..{m - 1} like document "
                                  f"{docs[0]}: a file holds whole documents")


def _check_exact_ref(json_path: Path, r: int, ex: np.ndarray, sqnorm: np.ndarray) -> None:
    """exact_ref_dot[i] = <g_r, g_i> exactly, so <g_r, g_r> = |g_r|^2 (the exact squared norms summed over groups)
    and |<g_r, g_i>| <= |g_r| |g_i| (Cauchy-Schwarz), each to REF_DOT_RTOL (float32 sums)."""
    if abs(ex[r] - sqnorm[r]) > REF_DOT_RTOL * sqnorm[r]:
        raise ResultFileError(f"{json_path}: exact_ref_dot[{r}] = {ex[r]:.6g} is the reference chunk's inner product "
                              f"with itself, so it must equal its exact squared norm {sqnorm[r]:.6g} (sqnorm_* "
                              f"summed over groups, row {r}); the arrays do not belong together")
    over = np.flatnonzero(np.abs(ex) > np.sqrt(sqnorm[r] * sqnorm) * (1 + REF_DOT_RTOL))
    if over.size:
        i = int(over[0])
        raise ResultFileError(f"{json_path}: exact_ref_dot[{i}] = {ex[i]:.6g} exceeds |g_ref| |g_{i}| = "
                              f"{np.sqrt(sqnorm[r] * sqnorm[i]):.6g} ({over.size} entries do): impossible for "
                              "inner products (Cauchy-Schwarz)")


def find_results(root: Path) -> list[Path]:
    """Every result file (*.npz) under root, sorted, skipping hidden files and folders (a running or killed
    probe's .partial/). Symbolic links are followed, to folders as to files; a folder reached twice (a link loop,
    or two links to one folder) is a ResultFileError naming both paths. An npz without its json is kept, and so
    is an entry that is not a regular file: load_result reports both (check_regular), without opening them."""
    root = Path(root)
    seen: dict[tuple[int, int], str] = {}
    found = []
    for folder, dirs, files in os.walk(root, followlinks=True):
        st = os.stat(folder)
        key = (st.st_dev, st.st_ino)
        if key in seen:
            raise ResultFileError(f"{folder}: is the folder {seen[key]} again (a symbolic link loop, or two links to "
                                  f"one folder under {root}); its results would be read twice")
        seen[key] = folder
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found += [Path(folder) / f for f in files if f.endswith(".npz") and not f.startswith(".")]
    return sorted(found)


def parse_stem(npz_path: Path) -> dict:
    """corpus, chunk, docs (a, b), context, window and dtype from a file name like BOOKS_c512_d0-16.npz
    (standalone, window None, float32), BOOKS_c512_w4096_causal_d0-16.npz or BOOKS_c512_d0-16_bfloat16.npz."""
    m = _STEM.match(Path(npz_path).stem)
    if not m:
        raise ResultFileError(f"{npz_path}: name does not match "
                              "<CORPUS>_c<chunk>[_w<W>_causal]_d<a>-<b>[_bfloat16][_<regime>].npz")
    return {"corpus": m["corpus"], "chunk": int(m["chunk"]), "docs": (int(m["a"]), int(m["b"])),
            "context": m["context"] or STANDALONE, "window": None if m["window"] is None else int(m["window"]),
            "dtype": m["dtype"] or FLOAT32, "regime": m["regime"] or ""}


def parse_docs(text: str) -> tuple[int, int]:
    """A document range "A:B" (the `_dA-B` of a result file name: documents A..B-1) as (A, B)."""
    try:
        a, b = (int(x) for x in str(text).split(":"))
    except ValueError:
        raise ResultFileError(f"--docs must be A:B (e.g. 0:16), got {text!r}") from None
    if not 0 <= a < b:
        raise ResultFileError(f"--docs {text}: need 0 <= A < B")
    return a, b
