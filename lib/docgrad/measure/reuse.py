"""A cell already measured is copied, not probed again: `docgrad measure` asks here before each probe.

A result file is the same cell as a planned probe when the fingerprint of the run that wrote it
(probe_config.result_fingerprint, rebuilt from its json) equals the planned run's (ProbeConfig.fingerprint, the
key under which `docgrad probe` resumes a run): model, revision and weights pin, corpus, chunk, chunks per
document, the span sha256 of every document, buckets, sketch and its seed, exact_ref, dtype, context (the start
token, a causal window) and the device type. What is only recorded (threads, timings, versions, the command, the
manifest path) is not compared. One file may hold the cell, or several shards whose documents tile the range
(the study's 48-document cells are three shards of 16), each the same cell over its own documents.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

from docgrad.fileio import file_sha256, shown_path
from docgrad.measure.probe_config import differences, result_fingerprint
from docgrad.results.format import NPZ_DIGEST, load_result, npz_matches_json, parse_stem, result_stem, write_result


def _docs(fp: dict) -> tuple[int, int] | None:
    """The contiguous document range [a, b) of a fingerprint's spans, or None when they are not contiguous."""
    docs = [d for d, _ in fp["spans"]]
    return (docs[0], docs[-1] + 1) if docs and docs == list(range(docs[0], docs[-1] + 1)) else None


def restricted(fp: dict, a: int, b: int) -> dict:
    """The fingerprint of the same run over documents [a, b) only (a shard of it)."""
    return {**fp, "spans": [s for s in fp["spans"] if a <= s[0] < b]}


def recorded_cells(root: Path, fp: dict):
    """(npz, json meta, its fingerprint, its document range) of every result file under root/<model>/<revision>/ of
    fingerprint `fp`'s model whose json records a fingerprint over contiguous documents (hidden and unreadable files
    skipped). Whether the npz is the one its json was written with (npz_matches_json) is left to the caller, after
    the cheap fingerprint test."""
    folder = Path(root) / Path(result_stem(fp["model"], fp["revision"], fp["corpus"], fp["chunk"], (0, 1))).parent
    if not folder.is_dir():
        return
    for js in sorted(folder.glob("*.json")):
        npz = js.with_suffix(".npz")
        if js.name.startswith(".") or not npz.is_file():
            continue
        try:
            meta = json.loads(js.read_text())
        except (OSError, ValueError):
            continue
        got = result_fingerprint(meta)
        rng = None if got is None else _docs(got)
        if rng is not None:
            yield npz, meta, got, rng


def same_cell_files(root: Path, fp: dict) -> list[Path] | None:
    """The result files (.npz, each with its json) under root/<model>/<revision>/ that together are exactly the cell
    of planned fingerprint `fp`: one file, or shards whose document ranges tile fp's, each equal to `fp` over its
    own documents (and each npz the one its json was written with). None when there are none."""
    want = _docs(fp)
    if want is None:
        return None
    found: dict[int, list[tuple[int, Path]]] = {}
    for npz, meta, got, rng in recorded_cells(root, fp):
        if want[0] <= rng[0] and rng[1] <= want[1] and got == restricted(fp, *rng) \
                and npz_matches_json(npz, meta) is not False:
            found.setdefault(rng[0], []).append((rng[1], npz))

    def tile(a: int) -> list[Path] | None:
        if a == want[1]:
            return []
        for b, npz in sorted(found.get(a, []), reverse=True):      # the longest file first
            rest = tile(b)
            if rest is not None:
                return [npz, *rest]
        return None

    return tile(want[0]) or None


def covering_file(root: Path, fp: dict) -> Path | None:
    """A result file under root/<model>/<revision>/ whose documents cover the planned range of fingerprint `fp` and
    that is fp's cell over its own documents (its npz the one its json was written with): documents are independent
    rows of a Gram, so the planned cell is that file's rows. With exact_ref the range must start at the file's first
    document (the G1 reference is chunk 0 of it). None when there is none."""
    want = _docs(fp)
    if want is None:
        return None
    for npz, meta, got, rng in recorded_cells(root, fp):
        if not (rng[0] <= want[0] and want[1] <= rng[1]) or rng == want or (fp["exact_ref"] and want[0] != rng[0]):
            continue
        if restricted(got, *want) == fp and npz_matches_json(npz, meta) is not False:
            return npz
    return None


def subset_cell(npz: Path, docs: tuple[int, int], source: Path, target: Path) -> Path:
    """Write the rows of documents [a, b) of result file `npz` (under `source`) as their own result file at the same
    relative folder under `target`, named for those documents; its json says which file (and npz sha256) it was
    taken from. The Gram entries are those of the file (the same sketched gradients)."""
    sh = load_result(npz)
    a, b = docs
    rows = np.flatnonzero((sh.index[:, 0] >= a) & (sh.index[:, 0] < b))
    meta = {k: v for k, v in sh.meta.items() if k != NPZ_DIGEST}
    meta["args"] = {**meta["args"], "docs": [a, b]}
    meta["spans_sha256"] = {d: h for d, h in meta["spans_sha256"].items() if a <= int(d) < b}
    meta["n_chunks"] = int(len(rows))
    meta["subset_of"] = {"file": shown_path(npz), "npz_sha256": file_sha256(npz), "documents": [a, b]}
    p = parse_stem(npz)
    name = result_stem(sh.args["model"], sh.args["revision"], sh.args["corpus"], int(sh.args["chunk"]), (a, b),
                       p["context"], p["window"], p["dtype"], p["regime"])
    dest = Path(target) / f"{name}.npz"
    write_result(dest, index=sh.index[rows], loss=sh.loss[rows],
                 gram={g: np.asarray(K)[np.ix_(rows, rows)] for g, K in sh.gram.items()},
                 sqnorm={g: np.asarray(v)[rows] for g, v in sh.sqnorm.items()},
                 exact_ref_dot=sh.exact_ref_dot[rows] if sh.exact_ref_dot.size else None, meta=meta)
    return dest


def why_not(root: Path, fp: dict, stem: str) -> str | None:
    """Why the file the planned probe would write, found under root, is not the same cell: 'key: value there, value
    now; ...' (probe_config.differences); None when root has no such file."""
    js = Path(root) / f"{stem}.json"
    if not js.is_file():
        return None
    try:
        meta = json.loads(js.read_text())
        got = result_fingerprint(meta)
        if js.with_suffix(".npz").is_file() and npz_matches_json(js.with_suffix(".npz"), meta) is False:
            return "its npz, which is not the one its json was written with (sha256 differs)"
    except (OSError, ValueError) as e:
        return f"its json is unreadable ({e})"
    return "it does not record every setting of a probe run" if got is None else differences(got, fp)


def copy_cell(files: list[Path], source: Path, target: Path) -> list[Path]:
    """Copy result files (npz, then json: a copy cut short reads as incomplete) from source to the same relative
    paths under target, never linked: a measurement folder is self-contained. Returns the copies' npz paths."""
    out = []
    for npz in files:
        dest = Path(target) / Path(npz).relative_to(source)
        dest.parent.mkdir(parents=True, exist_ok=True)
        for suffix in (".npz", ".json"):
            shutil.copyfile(Path(npz).with_suffix(suffix), dest.with_suffix(suffix))
        out.append(dest)
    return out


def agreed(fp: dict) -> str:
    """The settings two same-cell runs agree on, in words, for the line that says a cell was reused."""
    a, b = _docs(fp)
    regime = (f", start token {fp['start_token']}" if "start_token" in fp else ", no start token"
              if fp.get("no_start_token") else "")
    window = f", window {fp['window']}" if "window" in fp else ""
    pin = fp["pin"]
    weights = pin.get("weights_sha256") or pin.get("gguf_sha256") or pin.get("commit")
    return (f"model {fp['model']} at {fp['revision']}{f' (weights {str(weights)[:12]}..)' if weights else ''}, "
            f"corpus {fp['corpus']} documents {a}:{b} with the same span sha256s, chunk {fp['chunk']} x "
            f"{fp['chunks_per_document']}, {fp['buckets']} buckets, sketch seed {fp['seed']}, exact_ref "
            f"{fp['exact_ref']}, {fp['dtype']}, context {fp['context']}{window}{regime}, device {fp['device_type']}")
