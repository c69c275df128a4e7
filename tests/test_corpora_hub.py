"""Loaders for the published corpora, on small local parquet files (the hub download is replaced)."""

import json

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
import pyarrow.parquet as pq  # noqa: E402
from docgrad.corpora import build as corpora  # noqa: E402
from docgrad.corpora import hub as hub_corpora  # noqa: E402
from docgrad.corpora.build import MIN_TOKENS  # noqa: E402
from docgrad.corpora.sources import SourceError  # noqa: E402
from test_corpora import TOK, text_of  # noqa: E402


@pytest.fixture
def fake_hub(tmp_path, monkeypatch):
    calls = []

    def download(repo, filename, revision, cache_dir=None):
        calls.append((repo, filename, revision))
        return str(tmp_path / filename.replace("/", "_"))

    monkeypatch.setattr(hub_corpora, "download", download)
    return tmp_path, calls


def write_parquet(path, **cols):
    pq.write_table(pa.table(cols), path)


def test_pg19_loader_selects_first_16_long_books_at_the_pinned_revision(fake_hub):
    tmp, calls = fake_hub
    texts = [text_of(MIN_TOKENS + i, f"b{i}") for i in range(17)]
    texts.insert(2, "too short")
    titles = [f"Book {i}" for i in range(len(texts))]
    write_parquet(tmp / "data_train-00000-of-00003.parquet", text=texts, short_book_title=titles)
    entry, spans = hub_corpora.build_hub_corpus("PG19", tok=TOK)
    pins = json.loads(hub_corpora.PINS_PATH.read_text())["datasets"]["pg19"]
    assert calls == [(pins["repo"], "data/train-00000-of-00003.parquet", pins["revision"])]
    assert spans.shape == (16, corpora.SPAN_TOKENS)
    assert [d["title"] for d in entry["documents"]][:3] == [
        "data_train-00000-of-00003.parquet row 0 (Book 0)", "data_train-00000-of-00003.parquet row 1 (Book 1)",
        "data_train-00000-of-00003.parquet row 3 (Book 3)"]
    assert "too short: 9 tokens" in entry["rejected"][0]["reason"]
    assert entry["source"]["revision"] == pins["revision"]


def test_fineweb_loader_packs_short_documents_with_the_separator(fake_hub, tmp_path):
    tmp, _ = fake_hub
    texts = [text_of(500 + i % 13, f"w{i}") for i in range(700)]
    write_parquet(tmp / "sample_10BT_000_00000.parquet", text=texts, id=[f"id{i}" for i in range(700)])
    entry, spans = hub_corpora.build_hub_corpus("FINEWEB", tok=TOK, revision="abc123", allow_unpinned=True,
                                                manifest_path=tmp_path / "m.json", spans_cache=tmp_path / "c")
    assert all(d["tokens"] >= MIN_TOKENS for d in entry["documents"])
    assert entry["packing"]["separator"]["id"] == 256
    loaded = corpora.load_spans("FINEWEB", tmp_path / "m.json", tmp_path / "c")   # same manifest format
    assert len(loaded) == 16 and np.array_equal(loaded[0].tokens, spans[0])


def test_hub_corpus_joins_a_manifest_only_for_the_same_tokenizer_and_offline_builds_keep_it(fake_hub, tmp_path):
    tmp, _ = fake_hub
    write_parquet(tmp / "sample_10BT_000_00000.parquet", text=[text_of(500 + i % 13, f"w{i}") for i in range(700)],
                  id=[f"id{i}" for i in range(700)])
    manifest = tmp_path / "m.json"
    offline = {"documents": [], "tokens": {}, "rejected": []}
    spans = np.zeros((16, corpora.SPAN_TOKENS), dtype=np.int32)
    corpora.store(corpora.open_manifest_for(manifest, TOK), manifest, tmp_path / "c", {"WEB": (offline, spans)})
    hub_corpora.build_hub_corpus("FINEWEB", tok=TOK, revision="abc123", allow_unpinned=True,
                                 manifest_path=manifest, spans_cache=tmp_path / "c")
    # an offline corpus stored later comes first and keeps the hub corpus after it
    corpora.store(corpora.open_manifest_for(manifest, TOK), manifest, tmp_path / "c", {"BOOKS": (offline, spans)})
    assert list(json.loads(manifest.read_text())["corpora"]) == ["BOOKS", "WEB", "FINEWEB"]

    class OtherTokenizer(type(TOK)):
        identity = {**TOK.identity, "gguf_sha256": "other"}

    with pytest.raises(corpora.CorpusError, match="recorded for the tokenizer of"):
        hub_corpora.build_hub_corpus("FINEWEB", tok=OtherTokenizer(), revision="abc123", allow_unpinned=True,
                                     manifest_path=manifest, spans_cache=tmp_path / "c")
    assert json.loads(manifest.read_text())["tokenizer"]["gguf_sha256"] == "fake"   # not relabelled


def test_unpinned_revision_is_refused():
    with pytest.raises(SourceError, match="not pinned"):
        hub_corpora.resolve_dataset("PG19", revision="main")
    with pytest.raises(SourceError, match="not pinned"):
        hub_corpora.resolve_dataset("FINEWEB")


def test_undecodable_bytes_in_a_parquet_row_are_named(fake_hub):
    tmp, _ = fake_hub
    write_parquet(tmp / "train.parquet", article=[b"fine", b"bad \xff"])
    rows = hub_corpora.parquet_rows(tmp / "train.parquet", "article", None)
    assert next(rows)[1] == "fine"
    with pytest.raises(Exception, match=r"train.parquet row 1 .*undecodable bytes"):
        next(rows)


def test_download_failure_names_the_file(monkeypatch):
    import huggingface_hub

    def boom(*a, **k):
        raise OSError("network unreachable")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", boom)
    with pytest.raises(SourceError, match=r"emozilla/pg19@rev: cannot download x.parquet: network unreachable"):
        hub_corpora.download("emozilla/pg19", "x.parquet", "rev")


def test_corpora_hub_command_writes_the_manifest_and_refuses_an_unpinned_revision(fake_hub, tmp_path, monkeypatch,
                                                                                    capsys):
    from docgrad.runtime.cli import main

    tmp, _ = fake_hub
    monkeypatch.setattr(corpora, "default_tokenizer", lambda: TOK)
    texts = [text_of(MIN_TOKENS + i, f"b{i}") for i in range(16)]
    write_parquet(tmp / "data_train-00000-of-00003.parquet", text=texts, short_book_title=[f"B{i}" for i in range(16)])
    man, cache = tmp_path / "m.json", tmp_path / "c"
    assert main(["corpora", "hub", "PG19", "--manifest", str(man), "--cache", str(cache)]) == 0
    assert "PG19: 16 documents" in capsys.readouterr().out
    assert len(corpora.load_spans("PG19", man, cache)) == 16
    assert main(["corpora", "hub", "PG19", "--revision", "other", "--manifest", str(man), "--cache", str(cache)]) == 2
    err = capsys.readouterr().err
    assert "is not pinned" in err and "Traceback" not in err


def test_the_hub_corpora_named_elsewhere_are_the_ones_hub_can_fetch():
    from docgrad.core.constants import HUB_CORPORA
    from docgrad.corpora.hub import HUB_SPECS

    assert tuple(HUB_SPECS) == HUB_CORPORA
