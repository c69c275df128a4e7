"""Local models (`--model PATH`): a Hugging Face model directory saved with save_pretrained or a .gguf file on
disk, named local/<stem>, pinned by the sha256 of its weights (revision label sha256-<12 hex>), with its own corpus
manifest and the start-token default of its tokenizer; bad paths are one line and exit status 2. Offline: a tiny
Llama and a byte-level tokenizer are made here; the GGUF case reuses the default model's installed file."""

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from docgrad import models
from docgrad.corpora import build as corpora
from docgrad.corpora import sources as src
from docgrad.measure import probe_config as PC
from docgrad.measure.gradients import model_chunk_context
from docgrad.results.format import load_result, parse_stem
from docgrad.runtime import cli
from docgrad.runtime.probe_command import check_manifest_tokenizer, result_path

torch.set_num_threads(1)
BOS, EOS = 256, 257


def byte_tokenizer(bos: bool):
    """A byte-level tokenizer of 258 tokens (256 bytes, <s>, </s>) that adds <s> when encoding iff bos."""
    from tokenizers import Tokenizer, decoders, pre_tokenizers, processors
    from tokenizers import models as tm
    from transformers import PreTrainedTokenizerFast

    vocab = {c: i for i, c in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    vocab.update({"<s>": BOS, "</s>": EOS})
    tk = Tokenizer(tm.BPE(vocab=vocab, merges=[]))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    if bos:
        tk.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", BOS)])
    return PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<s>", eos_token="</s>")


def save_checkpoint(path: Path, seed: int = 0, bos: bool = True) -> Path:
    """A tiny Llama (vocabulary 258) and its tokenizer saved with save_pretrained into `path`."""
    from transformers import AutoModelForCausalLM, LlamaConfig

    cfg = LlamaConfig(vocab_size=EOS + 1, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                      tie_word_embeddings=True, bos_token_id=BOS, eos_token_id=EOS)
    torch.manual_seed(seed)
    AutoModelForCausalLM.from_config(cfg, dtype=torch.float32).save_pretrained(path)
    byte_tokenizer(bos).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    return save_checkpoint(tmp_path_factory.mktemp("a") / "ckpt", seed=1)


def sha(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def one_line_error(capsys, argv) -> str:
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    return err


# --- name, pin, label, manifest and results folder ---------------------------------------------------------

def test_a_model_directory_is_named_pinned_and_labelled_by_its_weights(ckpt):
    spec = models.local_model(str(ckpt))
    pin = models.model_pin(str(ckpt))
    assert pin == models.model_pin(str(ckpt)) and models.local_model(str(ckpt)) == spec      # stable
    want = hashlib.sha256(f"{sha(ckpt / 'model.safetensors')}  model.safetensors\n".encode()).hexdigest()
    assert spec.sha256 == pin["weights_sha256"] == want
    assert pin["weight_files"] == {"model.safetensors": sha(ckpt / "model.safetensors")}
    assert pin["model"] == "local/ckpt" and pin["revision"] == "sha256-" + want[:12] and pin["path"] == str(ckpt)
    assert pin["config_sha256"] == sha(ckpt / "config.json") and pin["local"] == "safetensors"
    assert spec.results_dir == f"local__ckpt/sha256-{want[:12]}"
    assert models.corpus_manifest(str(ckpt)) == f"data/corpora/local/ckpt-{want[:12]}/manifest.json"
    rm = models.result_model(str(ckpt))
    assert (rm.model, rm.revision, rm.manifest, rm.label) == ("local/ckpt", pin["revision"],
                                                              models.corpus_manifest(str(ckpt)), "ckpt")
    assert models.result_model(f"local/ckpt@{pin['revision']}") == rm          # as the result files name it
    assert models.result_model("EleutherAI/pythia-1.4b@step143000").manifest == models.DEFAULT_CORPUS_MANIFEST
    # where the files were is recorded, not part of the resume key
    cfg = PC.ProbeConfig(model=pin["model"], revision=pin["revision"], corpus="WEB", pin=pin)
    moved = PC.ProbeConfig(model=pin["model"], revision=pin["revision"], corpus="WEB",
                           pin={**pin, "path": "elsewhere", "resolved_path": "/elsewhere"})
    span = [PC.DocSpan(0, np.zeros(512, dtype=np.int64), "h")]
    assert cfg.bind(span, "cpu").fingerprint() == moved.bind(span, "cpu").fingerprint()
    assert "path" not in cfg.bind(span, "cpu").fingerprint()["pin"]
    with pytest.raises(models.ModelError, match="not --revision sha256-000000000000"):
        models.model_pin(str(ckpt), "sha256-000000000000")
    assert models.model_pin(str(ckpt), pin["revision"]) == pin


def test_docgrad_models_shows_how_a_local_model_is_named_pinned_and_where_its_files_go(ckpt, capsys):
    spec = models.local_model(str(ckpt))
    assert cli.main(["models", str(ckpt)]) == 0
    out = capsys.readouterr().out
    for part in (f"local/ckpt, revision {spec.revision}", f"sha256 {spec.sha256}", spec.corpora,
                 f"data/results/{spec.results_dir}/", "BOS + chunk (standalone-bos): the tokenizer adds '<s>'"):
        assert part in out, part
    assert cli.main(["models", str(ckpt), "--get", "results-dir"]) == 0
    assert capsys.readouterr().out.strip() == spec.results_dir


def test_another_checkpoint_gets_another_revision_results_folder_and_cell(tmp_path, ckpt):
    other = save_checkpoint(tmp_path / "b" / "ckpt", seed=2)             # same name, other weights
    a, b = models.local_model(str(ckpt)), models.local_model(str(other))
    assert a.name == b.name == "local/ckpt" and a.revision != b.revision and a.results_dir != b.results_dir
    assert models.corpus_manifest(str(ckpt)) != models.corpus_manifest(str(other))
    ra, rb = models.result_model(str(ckpt)), models.result_model(str(other))
    assert (ra.model, ra.revision) != (rb.model, rb.revision)
    pa = result_path(tmp_path, a.model, a.revision, "WEB", 512, (0, 1))
    pb = result_path(tmp_path, b.model, b.revision, "WEB", 512, (0, 1))
    assert pa != pb and pa.parent.name == a.revision
    # a weight changed in place: a new pin (the digest cache is keyed by size, times and inode)
    w = other / "model.safetensors"
    data = bytearray(w.read_bytes())
    data[-1] ^= 1
    w.write_bytes(bytes(data))
    os.utime(w, ns=(os.stat(w).st_atime_ns, os.stat(w).st_mtime_ns + 10**9))
    assert models.local_model(str(other)).sha256 != b.sha256


def test_sharded_weights_are_pinned_by_every_shard_and_not_the_index(tmp_path, ckpt):
    d = tmp_path / "sharded"
    d.mkdir()
    for f in ckpt.iterdir():
        if f.name != "model.safetensors":
            (d / f.name).write_bytes(f.read_bytes())
    (d / "model-00001-of-00002.safetensors").write_bytes(b"one")
    (d / "model-00002-of-00002.safetensors").write_bytes(b"two")
    index = {"metadata": {"total_size": 6}, "weight_map": {"a": "model-00001-of-00002.safetensors",
                                                           "b": "model-00002-of-00002.safetensors"}}
    (d / "model.safetensors.index.json").write_text(json.dumps(index))
    spec = models.local_model(str(d))
    lines = "".join(f"{hashlib.sha256(x).hexdigest()}  model-0000{i}-of-00002.safetensors\n"
                    for i, x in ((1, b"one"), (2, b"two")))
    assert spec.sha256 == hashlib.sha256(lines.encode()).hexdigest()
    index["metadata"]["total_size"] = 7
    (d / "model.safetensors.index.json").write_text(json.dumps(index))
    assert models.local_model(str(d)).sha256 == spec.sha256                 # the index is not part of the pin


# --- the start token ----------------------------------------------------------------------------------------

def test_the_start_token_default_comes_from_the_tokenizer(tmp_path, ckpt):
    with_bos = models.local_model(str(ckpt))
    assert models.local_bos(with_bos) == {"bos": True, "bos_token_id": BOS, "bos_token": "<s>",
                                          "bos_rule": "the tokenizer adds '<s>' (id 256) when encoding"}
    assert model_chunk_context(with_bos) == "standalone-bos"
    plain = models.local_model(str(save_checkpoint(tmp_path / "plain", seed=1, bos=False)))
    assert not plain.bos and model_chunk_context(plain) == "standalone"
    assert "adds no start token" in models.model_pin(plain.path)["bos_rule"]
    lm = models.load_model(str(ckpt))
    assert lm.config.bos_token_id == BOS and not lm.training


# --- corpora and probe through the command line ---------------------------------------------------------------

def descriptions(seed=None):
    rng = np.random.default_rng(0)
    words = ["alpha", "beta", "gamma", "delta", "tool", "library", "package", "data", "file", "server"]
    pairs = [(f"pkg{i}", " ".join(rng.choice(words, size=60))) for i in range(200)]
    return pairs, {"package": "synthetic descriptions", "records": len(pairs)}


@pytest.fixture(scope="module")
def web(ckpt, tmp_path_factory):
    """`docgrad corpora build --corpus WEB --model DIR --documents 1` under --root (descriptions made here)."""
    root = tmp_path_factory.mktemp("root")
    mp = pytest.MonkeyPatch()
    mp.setattr(src, "web_descriptions", descriptions)
    try:
        assert cli.main(["--root", str(root), "corpora", "build", "--corpus", "WEB", "--model", str(ckpt),
                         "--documents", "1"]) == 0
    finally:
        mp.undo()
    return root


def test_corpora_build_cuts_the_control_under_the_local_tokenizer_into_its_own_manifest(web, ckpt):
    spec = models.local_model(str(ckpt))
    man = json.loads((web / spec.corpora).read_text())
    assert man["tokenizer"]["model"] == "local/ckpt" and man["tokenizer"]["revision"] == spec.revision
    assert man["tokenizer"]["tokenizer_sha256"] == spec.tokenizer_sha256
    assert man["corpora"]["WEB"]["packing"]["separator"]["token"] == "</s>"   # no <|endoftext|>: its eos
    spans = corpora.load_spans("WEB", web / spec.corpora, web / "data" / "corpora" / "cache")
    assert (web / "data/corpora/cache" / spec.spans_dir / "WEB.npy").is_file()
    assert len(spans) == 1 and EOS in spans[0].tokens and spans[0].tokens.max() <= EOS
    check_manifest_tokenizer(web / spec.corpora, spec)                      # its own spans are accepted
    with pytest.raises(PC.ProbeError, match="spans were cut by the tokenizer of 'local/ckpt'"):
        check_manifest_tokenizer(web / spec.corpora, models.SMOLLM2)


def probe(root, model, *extra):
    return cli.main(["--root", str(root), "probe", "--model", str(model), "--corpus", "WEB", "--docs", "0:1",
                     "--buckets", "64", "--threads", "1", *extra])


def test_probe_writes_a_result_whose_pin_holds_the_sha256_and_the_start_token_choice(web, ckpt, capsys):
    spec = models.local_model(str(ckpt))
    assert probe(web, ckpt) == 0
    folder = web / "data" / "results" / spec.results_dir
    sh = load_result(folder / "WEB_c512_d0-1.npz")
    assert sh.meta["pin"]["weights_sha256"] == spec.sha256 and sh.meta["pin"]["path"] == str(ckpt)
    assert sh.args["model"] == "local/ckpt" and sh.args["revision"] == spec.revision
    assert sh.args["context"] == "standalone-bos" and sh.meta["pin"]["bos"] is True and sh.regime == ""
    assert sh.args["manifest"].endswith(spec.corpora)
    # the override: no start token, recorded and never in the default's file or cell
    assert probe(web, ckpt, "--start-token", "none") == 0
    off = load_result(folder / "WEB_c512_d0-1_nobos.npz")
    assert off.args["context"] == "standalone" and off.args["no_start_token"] is True and off.regime == "nobos"
    assert off.cell != sh.cell and not np.allclose(off.loss, sh.loss)
    assert parse_stem(off.path)["regime"] == "nobos" and parse_stem(sh.path)["regime"] == ""   # name = args
    assert sh.cell[:2] == off.cell[:2] == ("local/ckpt", spec.revision)
    with pytest.raises(SystemExit) as e:                                   # argparse's own refusal, status 2
        cli.main(["--root", str(web), "probe", "--model", str(ckpt), "--corpus", "WEB", "--start-token", "x"])
    assert e.value.code == 2 and "expected a token id (an integer) or 'none', got 'x'" in capsys.readouterr().err


def test_a_model_without_a_start_token_takes_one_only_as_a_regime(tmp_path, ckpt, capsys, monkeypatch):
    plain = save_checkpoint(tmp_path / "ckpt", seed=1, bos=False)        # same weights, tokenizer adds no BOS
    spec = models.local_model(str(plain))
    assert spec.revision == models.local_model(str(ckpt)).revision
    assert spec.tokenizer_sha256 != models.local_model(str(ckpt)).tokenizer_sha256
    monkeypatch.setattr(src, "web_descriptions", descriptions)
    where = ["--manifest", str(tmp_path / "manifest.json"), "--cache", str(tmp_path / "cache")]
    assert cli.main(["corpora", "build", "--corpus", "WEB", "--model", str(plain), "--documents", "1", *where]) == 0
    capsys.readouterr()
    err = one_line_error(capsys, ["probe", "--model", str(plain), "--corpus", "WEB", *where, "--start-token", "none"])
    assert "no start token: the model's own default already" in err
    out = tmp_path / "results"
    assert cli.main(["probe", "--model", str(plain), "--corpus", "WEB", "--docs", "0:1", "--buckets", "64",
                     "--threads", "1", *where, "--out", str(out), "--start-token", str(BOS)]) == 0
    sh = load_result(out / spec.results_dir / "WEB_c512_d0-1_bos256.npz")
    assert sh.args["context"] == "standalone-bos" and sh.args["start_token"] == BOS and sh.regime == "bos256"
    assert sh.meta["pin"]["bos"] is False
    # the other tokenizer's spans are refused before the model loads
    other = models.local_model(str(ckpt))
    with pytest.raises(PC.ProbeError, match="spans were cut by another tokenizer"):
        check_manifest_tokenizer(tmp_path / "manifest.json", other)


# --- a local GGUF file ----------------------------------------------------------------------------------------

def test_a_local_gguf_file_is_pinned_by_its_sha256(tmp_path):
    path = tmp_path / "my-smol.gguf"
    path.symlink_to(models.default_gguf_path())
    pin = models.model_pin(str(path))
    assert pin["gguf_sha256"] == pin["weights_sha256"] == models.sha256_file(path) == models.GGUF_SHA256
    assert pin["model"] == "local/my-smol" and pin["revision"] == "sha256-" + models.GGUF_SHA256[:12]
    assert pin["bos"] is False and pin["bos_rule"] == "the GGUF file's tokenizer.ggml.add_bos_token is false"
    assert pin["bos"] == models.SMOLLM2.bos                                   # the registry's choice for this file
    rm = models.result_model(str(path))
    assert rm.model == "local/my-smol" and rm.manifest == models.corpus_manifest(str(path)) == \
        f"data/corpora/local/my-smol-{models.GGUF_SHA256[:12]}/manifest.json"
    spec = models.local_model(str(path))
    assert model_chunk_context(spec) == "standalone"
    man = tmp_path / "manifest.json"                  # a manifest cut by the same file's tokenizer is accepted
    man.write_text(json.dumps({"tokenizer": {"model": models.DEFAULT_MODEL, "gguf_sha256": models.GGUF_SHA256}}))
    check_manifest_tokenizer(man, spec)
    assert models.local_model("smollm2-135m") is None                          # registry names come first


# --- bad inputs: one line, exit status 2 --------------------------------------------------------------------

def bad_inputs(tmp_path, ckpt):
    no_config = tmp_path / "no_config"
    no_config.mkdir()
    (no_config / "model.safetensors").write_bytes(b"x")
    no_weights = tmp_path / "no_weights"
    no_weights.mkdir()
    (no_weights / "config.json").write_text("{}")
    (no_weights / "adapter_model.safetensors").write_bytes(b"x")
    no_tok = tmp_path / "no_tokenizer"
    no_tok.mkdir()
    for f in ("config.json", "model.safetensors"):
        (no_tok / f).write_bytes((ckpt / f).read_bytes())
    shard = tmp_path / "missing_shard"
    shard.mkdir()
    (shard / "config.json").write_text("{}")
    (shard / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"a": "model-1.safetensors"}}))
    fake = tmp_path / "fake.gguf"
    fake.write_text("not a gguf file")
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    fifo = tmp_path / "pipe.gguf"
    os.mkfifo(fifo)
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "gone")
    return [
        (no_config, "config.json is missing"),
        (no_weights, "has config.json but no weights: expected model.safetensors"),
        (no_tok, "has no tokenizer files"),
        (shard, "names weight shards that are missing: model-1.safetensors"),
        (fake, "not a GGUF file (it starts with b'not '"),
        (text, "is a file, not a model"),
        (fifo, "the GGUF file is not a regular file"),
        (dangling, "a symbolic link to"),
        (tmp_path / "nope" / "model.gguf", "no such file or directory"),
    ]


def test_bad_local_models_are_one_line_with_status_2(tmp_path, ckpt, capsys):
    for path, message in bad_inputs(tmp_path, ckpt):
        for argv in (["probe", "--model", str(path), "--corpus", "WEB", "--out", str(tmp_path / "r")],
                     ["corpora", "build", "--model", str(path), "--corpus", "WEB", "--manifest",
                      str(tmp_path / "m.json"), "--cache", str(tmp_path / "c")]):
            err = one_line_error(capsys, argv)
            assert message in err, (path, err)
    assert not (tmp_path / "r").exists() and not (tmp_path / "m.json").exists()


def test_an_unreadable_model_directory_is_one_line(tmp_path, ckpt, capsys, monkeypatch):
    real = os.access
    monkeypatch.setattr(models.os, "access", lambda p, mode: False if Path(p) == ckpt else real(p, mode))
    err = one_line_error(capsys, ["probe", "--model", str(ckpt), "--corpus", "WEB", "--out", str(tmp_path)])
    assert "the directory is not readable (permission denied)" in err


def test_weights_changed_while_a_probe_runs_leave_no_cell_and_no_partial_state(web, ckpt, capsys, monkeypatch):
    """A checkpoint copied over the model folder mid-probe gave a cell whose chunks came from two models."""
    import os

    from docgrad.runtime import probe_command as PCMD

    real = PCMD.weights_guard

    def copied_over_after_the_first_document(paths, before, out):
        check = real(paths, before, out)

        def on_document(doc=None):
            if doc is not None:
                for p in paths:                               # stands for a checkpoint copied over the folder
                    os.utime(p, ns=(os.stat(p).st_atime_ns, os.stat(p).st_mtime_ns + 10**9))
            check(doc)
        return on_document

    monkeypatch.setattr(PCMD, "weights_guard", copied_over_after_the_first_document)
    out = web / "mid"
    assert cli.main(["--root", str(web), "probe", "--model", str(ckpt), "--corpus", "WEB", "--docs", "0:1",
                     "--buckets", "64", "--threads", "1", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "the model's weights changed while the probe ran (noticed after document 0); no cell is written" in err
    assert not list(out.rglob("*.npz")) and not list(out.rglob(".partial"))
