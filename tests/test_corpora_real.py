"""Real-data checks of the corpora against the committed manifest (slow / opt-in)."""

import importlib.metadata
import shutil
from pathlib import Path

import pytest
from docgrad.corpora import build as corpora
from docgrad.corpora import sources as src

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / "data" / "corpora" / "manifest.json"


@pytest.mark.slow
def test_code_document_0_reproduces_its_span_hash_with_the_real_tokenizer():
    doc = corpora.read_manifest(MANIFEST)["corpora"]["CODE"]["documents"][0]
    name, version = doc["source"]["package"], doc["source"]["version"]
    try:
        if importlib.metadata.version(name) != version:
            pytest.skip(f"{name} {version} not installed")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip(f"{name} not installed")
    tok = corpora.default_tokenizer()
    files, _ = src.project_files(name, version, ROOT / "data" / "corpora" / "cache")
    text = src.concat_sources(files, name)
    entry, span = corpora.document_entry(tok, 0, doc["title"], doc["source"], text, tok.encode(text))
    assert (entry["text_sha256"], entry["span_sha256"], entry["tokens"]) == (
        doc["text_sha256"], doc["span_sha256"], doc["tokens"])
    assert tok.separator_id == 0 and tok.separator == "<|endoftext|>"


@pytest.mark.full_corpora
def test_full_build_reproduces_the_committed_manifest(tmp_path):
    """Fetches ~50 MB of Debian packages (cached under data/corpora/cache) and rebuilds all four corpora."""
    man = tmp_path / "manifest.json"
    shutil.copy(MANIFEST, man)
    corpora.build(None, man, ROOT / "data" / "corpora" / "cache")   # raises on any hash difference
    for name in corpora.CORPORA:
        assert len(corpora.load_spans(name, man, ROOT / "data" / "corpora" / "cache")) == 16
