"""`docgrad probe`: its arguments, the model pin, the output path and the spans are checked before the model
loads; then docgrad.measure.probe.run_probe. Under torchrun, torch.distributed is initialised here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

from docgrad import models
from docgrad.core.constants import FLOAT32, GROUPS, STANDALONE, STANDALONE_BOS
from docgrad.corpora import build as corpora
from docgrad.errors import DocgradError
from docgrad.fileio import as_ranges, shown_path
from docgrad.measure import simex as sx
from docgrad.measure.gradients import model_chunk_context, resolve_device
from docgrad.measure.probe import run_probe
from docgrad.measure.probe_config import ProbeConfig, ProbeError, as_doc_spans
from docgrad.measure.resume import partial_dir
from docgrad.results.format import parse_docs, result_stem


NO_START_TOKEN = "none"     # --start-token none: no start token where the model's default puts its BOS first

_PATH_PART = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._+-]*")

def _path_parts(what: str, value: str) -> None:
    """Refuse a value that would not stay one (or, split at '/', several) plain folder names under --out."""
    if not all(_PATH_PART.fullmatch(p) and ".." not in p for p in str(value).split("/")):
        raise ProbeError(f"{what} {value!r} cannot be part of a result path under --out (it must be names of "
                         "letters, digits and '._+-', no '..'); pass a valid value, or an explicit --out FILE.npz")

def result_path(out: str | Path, model_id: str, revision: str, corpus: str, chunk: int, docs: tuple[int, int],
                context: str = "standalone", window: int | None = None, dtype: str = FLOAT32,
                regime: str = "") -> Path:
    """--out is an explicit .npz path, or the results root under which the standard stem goes (and stays);
    a causal run's stem names its window (`<CORPUS>_c512_w4096_causal_d0-16`), a bf16 run its dtype
    (`<CORPUS>_c512_d0-16_bfloat16`)."""
    out = Path(out)
    if out.suffix == ".npz":
        return out
    if out.suffix or (out.exists() and not out.is_dir()):
        raise ProbeError(f"--out {out}: give the results root directory or an explicit .npz path (a {out.suffix or 'file'} "
                         "path would become a directory tree)")
    _path_parts("model", model_id)
    _path_parts("revision", revision)
    if "/" in str(corpus):
        raise ProbeError(f"corpus {corpus!r} cannot be part of a result path (no '/'); pass a corpus name")
    _path_parts("corpus", corpus)
    path = out / (result_stem(model_id, revision, corpus, chunk, docs, context, window, dtype, regime) + ".npz")
    root = os.path.normpath(out)
    if os.path.commonpath([root, os.path.normpath(path)]) != root:
        raise ProbeError(f"{path}: would be written outside --out {out}")
    return path

def select_spans(spans, docs: tuple[int, int]) -> list:
    a, b = docs
    chosen = [s for s in spans if a <= int(s.doc) < b]
    have = {int(s.doc) for s in chosen}
    missing = [d for d in range(a, b) if d not in have]
    if missing:
        raise ProbeError(f"--docs {a}:{b}: documents {as_ranges(missing)} are not in the corpus (it has "
                         f"{as_ranges(int(s.doc) for s in spans)})")
    return sorted(chosen, key=lambda s: int(s.doc))

def _init_distributed(device: str) -> str:
    """Initialise torch.distributed under torchrun; returns this rank's device."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return device
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    local = int(os.environ.get("LOCAL_RANK", "0"))
    if device.startswith("cuda"):
        torch.cuda.set_device(local)
        device = f"cuda:{local}"
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.startswith("cuda") else "gloo", timeout=timedelta(hours=12))
    return device

def check_manifest_tokenizer(manifest, spec) -> None:
    """Refuse to probe an offline or local model on spans cut by another tokenizer (the manifest records its
    tokenizer's GGUF sha256, or a local model directory's tokenizer_sha256). Hub models and a manifest that is not
    there yet are left to load_spans."""
    path = Path(manifest)
    if spec is None or not path.is_file():
        return
    try:
        recorded = json.loads(path.read_text()).get("tokenizer", {})
    except (OSError, ValueError, AttributeError, RecursionError):
        return                                  # load_spans reports an unreadable manifest
    if not isinstance(recorded, dict):
        return                                  # load_spans names the malformed field, before the model loads
    key = recorded.get("gguf_sha256") or recorded.get("tokenizer_sha256")
    if key != spec.tokenizer_key:
        whose = (f"another tokenizer of {spec.model} (sha256 {str(key)[:12]}.., this one's {spec.tokenizer_key[:12]}..)"
                 if recorded.get("model") == spec.model else
                 f"the tokenizer of {recorded.get('model')!r}, not {spec.model}'s")
        raise ProbeError(f"{path}: its spans were cut by {whose}; leave out --manifest (default: {spec.corpora}) or "
                         f"build one with `docgrad corpora build --model {getattr(spec, 'path', spec.name)}`")

def causal_arguments(args, context: str) -> tuple[str, int | None]:
    """(context, window) from --context / --window, given the context the model needs when standalone."""
    if getattr(args, "context", "standalone") != "causal":
        window = getattr(args, "window", None)
        if window is not None:
            raise ProbeError(f"--window {window}: a window is for --context causal; drop --window or pass "
                             "--context causal")
        return context, None
    if context != "standalone":
        raise ProbeError(f"--context causal: this model's chunks are probed as {context} (a BOS token first), and "
                         "a causal window with a BOS token is not implemented; probe it without --context causal")
    if getattr(args, "window", None) is None:
        raise ProbeError(f"--context causal needs --window W, a multiple of --chunk {args.chunk} "
                         f"(e.g. --window {8 * args.chunk})")
    return "causal", args.window

def regime_arguments(args, spec, context: str) -> tuple[int | str | None, dict | None]:
    """(start_token, simex) from --start-token / --simex-lambda / --simex-seed, refused before the model loads
    where they cannot apply (docs/methods.md#model-regime). start_token NO_START_TOKEN ('none'): no start token
    where the model's own default puts its BOS first (context standalone-bos)."""
    start = getattr(args, "start_token", None)
    lam, seed = getattr(args, "simex_lambda", None), getattr(args, "simex_seed", None)
    if start == NO_START_TOKEN:
        if context != STANDALONE_BOS:
            raise ProbeError("--start-token none: drops the start token of a model whose default puts its BOS ahead "
                             f"of every chunk; this run's chunks are {context} "
                             + ("(a causal window)" if context == "causal" else "(no start token: the model's own "
                                "default already); leave out --start-token"))
    elif start is not None and context not in (STANDALONE, "causal"):
        raise ProbeError(f"--start-token {start}: goes ahead of standalone chunks or at the head of a causal window; "
                         f"this run's chunks are {context} (the model's own BOS token first)")
    if (lam is None) != (seed is None):
        raise ProbeError("--simex-lambda and --simex-seed go together: the noise's size and its seed are both "
                         "recorded (e.g. --simex-lambda 1 --simex-seed 1)")
    if lam is not None and not isinstance(spec, models.OfflineModel):
        raise ProbeError("--simex-lambda: SIMEX noise needs the rounding steps of an offline GGUF model "
                         "(`docgrad models`); a hub checkpoint is not rounded, and a local model is not supported")
    return start, (None if lam is None else {"lambda": lam, "seed": seed})

def simex_noise(model, spec, simex: dict) -> dict:
    """Add SIMEX noise to the loaded model (docgrad.measure.simex), the steps first checked against the file."""
    path = models.model_file(spec)
    tensors = sx.rounded_tensors(model, path)
    checked = sx.check_steps(model, path, tensors)
    record = sx.add_rounding_noise(model, tensors, simex["lambda"], simex["seed"])
    return {**record, "steps_checked_against_file": len(checked), "steps_max_relative_difference":
            max(checked.values(), default=None)}

def probe_settings(args) -> tuple[ProbeConfig, Path]:
    """The run `docgrad probe` with these arguments would make, before any span or weight is read: its ProbeConfig
    (not yet bound to the spans) and its result path. Every refusal of the arguments happens here."""
    docs = parse_docs(args.docs)
    corpus = args.corpus.upper()
    pin = models.model_pin(args.model, args.revision, args.allow_unpinned)
    spec = models.model_spec(args.model)
    check_manifest_tokenizer(args.manifest, spec)
    context, window = causal_arguments(args, model_chunk_context(spec))
    start_token, simex = regime_arguments(args, spec, context)
    no_start_token = start_token == NO_START_TOKEN
    if no_start_token:
        context, start_token = STANDALONE, None
    elif start_token is not None and context != "causal":
        context = STANDALONE_BOS
    config = ProbeConfig(model=pin["model"], revision=pin["revision"], corpus=corpus, chunk=args.chunk,
                         buckets=args.buckets, seed=args.seed, exact_ref=args.exact_ref, context=context, pin=pin,
                         dtype=getattr(args, "dtype", FLOAT32),
                         window=window, docs=docs, device=args.device, manifest=shown_path(args.manifest),
                         command=" ".join(sys.argv), start_token=start_token, simex=simex,
                         no_start_token=no_start_token)
    out = result_path(args.out, config.model, config.revision, corpus, config.chunk, docs, context, window,
                      config.dtype, config.regime)
    return config, out

def planned_config(args) -> ProbeConfig:
    """probe_settings bound to the spans the corpus manifest records (their sha256s and length) and the device
    type, without reading the span cache or loading the model: its fingerprint() is the cell the probe would
    write (load_spans checks the cached spans against these same sha256s before a probe starts)."""
    import torch

    config, _ = probe_settings(args)
    a, b = config.docs
    entry = corpora.corpus_entry(corpora.read_manifest(args.manifest), config.corpus, args.manifest)
    hashes = sorted((int(d["doc"]), str(d["span_sha256"])) for d in entry["documents"] if a <= int(d["doc"]) < b)
    missing = sorted(set(range(a, b)) - {d for d, _ in hashes})
    if missing:
        raise ProbeError(f"--docs {a}:{b}: documents {as_ranges(missing)} are not in {config.corpus} of {args.manifest}")
    device = torch.device(resolve_device(args.device)).type
    return config.bind_hashes(hashes, corpora.span_rule(entry).tokens, device)

def weights_signature(paths: list[Path]) -> dict:
    """{path: (size, mtime_ns, inode)} of the weight files: a copy over them, or a rename onto them, changes it."""
    out = {}
    for p in paths:
        try:
            st = os.stat(p)
            out[str(p)] = (st.st_size, st.st_mtime_ns, st.st_ino)
        except OSError:
            out[str(p)] = None
    return out


def available_memory() -> int | None:
    """MemAvailable of /proc/meminfo in bytes (None where there is none)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def resource_needs(config: ProbeConfig) -> dict:
    """What a bound probe run needs beyond the model: its partial state on disk (each chunk's sketch: groups x
    buckets float32) and, when it assembles the cell, the sketches plus one float64 Gram per group and their sum
    (n chunks x n chunks)."""
    n = len(config.spans) * config.chunks_per_document
    sketches = n * len(GROUPS) * config.buckets * 4
    return {"chunks": n, "disk": sketches, "memory": sketches + (len(GROUPS) + 1) * n * n * 8}


def check_resources(config: ProbeConfig, out: Path) -> None:
    """Refuse a run whose partial state does not fit on the disk of `out`, or whose Gram matrices do not fit in the
    memory available now, before the model loads (one line with the sizes and what to change)."""
    need = resource_needs(config)
    where = next((p for p in (Path(out).parent, *Path(out).parents) if p.exists()), Path("."))
    free = shutil.disk_usage(where).free
    mem = available_memory()
    gib = lambda b: f"{b / 2**30:.1f} GiB"
    what = (f"{len(config.spans)} documents x {config.chunks_per_document} chunks of {config.chunk} tokens = "
            f"{need['chunks']} chunks")
    if need["disk"] > free:
        raise ProbeError(f"{what} need {gib(need['disk'])} of partial state under {where}, which has {gib(free)} free; "
                         "probe fewer documents (--docs) or a longer --chunk")
    if mem is not None and need["memory"] > mem:
        raise ProbeError(f"{what} need {gib(need['memory'])} of memory for their Gram matrices, and {gib(mem)} is "
                         "available; probe fewer documents (--docs) or a longer --chunk")


class WeightsChangedError(ProbeError):
    """The weight files changed while a probe ran (cli_probe removes the cell's partial state)."""


def remove_partial(out_npz: Path) -> None:
    """A cell's partial state, and .partial/ itself when no other cell's state is there."""
    shutil.rmtree(partial_dir(out_npz), ignore_errors=True)
    parent = partial_dir(out_npz).parent
    for lock in parent.glob("*.lock") if parent.is_dir() else []:
        if lock.stem == partial_dir(out_npz).name:
            lock.unlink(missing_ok=True)
    try:
        parent.rmdir()
    except OSError:
        pass


def weights_guard(paths: list[Path], before: dict, out_npz: Path):
    """on_document for run_probe: refuse (WeightsChangedError) once the weight files differ from `before`, the
    signature taken before the weights were pinned and loaded."""
    def check(doc=None) -> None:
        now = weights_signature(paths)
        if now != before:
            changed = next(p for p in now if now[p] != before.get(p))
            raise WeightsChangedError(f"{changed}: the model's weights changed while the probe ran"
                             + (f" (noticed after document {doc})" if doc is not None else "")
                             + "; no cell is written, since its chunks would come from two models; probe again once "
                             "the weights are settled")
    return check


def cli_probe(args) -> int:
    """`docgrad probe`: arguments, pin, output path and spans are checked before the model loads."""
    import torch

    threads = getattr(args, "threads", None)
    if threads is not None and threads < 1:
        raise ProbeError(f"--threads {threads}: need at least 1 (or leave it out for torch's choice)")
    try:
        paths = models.weight_paths(args.model, args.revision)
    except DocgradError:                              # a bad model or revision: probe_settings says which
        paths = []
    before = weights_signature(paths)                 # before the pin is taken and the weights are loaded
    config, out = probe_settings(args)
    docs, corpus = config.docs, config.corpus
    if not args.overwrite and (out.exists() or out.with_suffix(".json").exists()):
        print(f"{out}: a complete result already exists; pass --overwrite to replace it", file=sys.stderr)
        return 2
    if threads:
        torch.set_num_threads(int(threads))
    device = _init_distributed(resolve_device(args.device))
    spans = as_doc_spans(select_spans(corpora.load_spans(corpus, args.manifest,
                                                           getattr(args, "cache", corpora.DEFAULT_CACHE)), docs))
    config = config.bind(spans, torch.device(device).type)
    check_resources(config, out)                      # before the model loads, not after hours
    t0 = time.perf_counter()
    model = models.load_model(args.model, args.revision, args.allow_unpinned, device=device)
    simex_record = None
    if config.simex is not None:
        simex_record = simex_noise(model, models.model_spec(args.model), config.simex)
    load_s = time.perf_counter() - t0
    guard = weights_guard(paths, before, out)
    try:
        guard()                                       # the weights loaded are the weights pinned
        path = run_probe(model, spans, out, config, overwrite=args.overwrite, load_seconds=load_s, on_document=guard,
                         extra_meta={"simex_noise": simex_record} if simex_record else None)
    except WeightsChangedError:
        remove_partial(out)                           # its documents came from the old weights
        raise
    if path is not None:
        print(path)
    try:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
    except ImportError:
        pass
    return 0
