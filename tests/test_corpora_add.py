"""`docgrad corpora add NAME --from PATH`: user corpora from a folder of files, a folder of folders, JSON Lines,
Parquet and CSV, with their own span rule; determinism, seeded selection, the manifest's other corpora kept,
load_spans and probe reading them, and every bad input one line with exit status 2 and nothing written.

Offline: the SmolLM2 tokenizer from its installed GGUF file (loaded once for the module) and small span
parameters (--span-start 8 --span-tokens 64 --chunk 16: a document qualifies with 72 tokens)."""

import csv
import hashlib
import json
import random
from pathlib import Path

import numpy as np
import pytest
from docgrad.corpora import build as corpora
from docgrad.corpora import sources as src
from docgrad.corpora import user
from docgrad.corpora.build import SpanRule
from docgrad.runtime.cli import main

SPAN = ["--span-start", "8", "--span-tokens", "64", "--chunk", "16"]
RULE = SpanRule(8, 64, 16)
WORDS = ("river stone window garden lantern harbor meadow candle forest bridge silver autumn orchard "
         "valley thunder compass library feather mirror canyon").split()


@pytest.fixture(scope="module")
def tok():
    return corpora.model_tokenizer("smollm2-135m")


@pytest.fixture(autouse=True)
def offline_tokenizer(tok, monkeypatch):
    """The CLI loads the model's tokenizer through build.model_tokenizer: hand it SmolLM2's, loaded already."""
    load = corpora.model_tokenizer
    monkeypatch.setattr(corpora, "model_tokenizer", lambda name="smollm2-135m": tok if name == "smollm2-135m"
                        else load(name))


def words(n: int, seed: int) -> str:
    rng = random.Random(seed)
    lines = [" ".join(rng.choice(WORDS) for _ in range(10)) for _ in range(max(1, n // 10))]
    return "\n".join(lines) + "\n"


def add(tmp_path, name, source, *extra):
    """`docgrad corpora add` into tmp_path's manifest and cache; returns the exit status."""
    return main(["corpora", "add", name, "--from", str(source), *SPAN, "--manifest", str(tmp_path / "m.json"),
                 "--cache", str(tmp_path / "cache"), *extra])


def span_file(tmp_path, name):
    """Where `add` put corpus `name`'s spans: <cache>/<the manifest's spans_dir>/<name>.npy (spans/m-<key> for a
    manifest corpora add created)."""
    return corpora.spans_path(tmp_path / "cache", name, json.loads((tmp_path / "m.json").read_text())["spans_dir"])


def entry_of(tmp_path, name):
    return json.loads((tmp_path / "m.json").read_text())["corpora"][name]


def expected_span(tok, text):
    return np.asarray(tok.encode(text)[RULE.start:RULE.min_tokens], dtype=np.int64)


# --- the three kinds of source ----------------------------------------------------------------------------

def test_a_folder_of_text_files_is_one_document_per_file_in_sorted_order(tmp_path, tok):
    folder = tmp_path / "docs"
    folder.mkdir()
    texts = {f"d{i}.txt": words(120 + 20 * i, i) for i in range(4)}
    texts["a_short.txt"] = words(10, 99)
    for name, text in texts.items():
        (folder / name).write_text(text)
    (folder / "b_image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    (folder / "c_latin1.txt").write_bytes("caf\xe9 ".encode("latin-1") * 50)
    (folder / ".hidden").write_text(words(200, 7))
    assert add(tmp_path, "MYDOCS", folder, "--docs", "3") == 0
    e = entry_of(tmp_path, "MYDOCS")
    assert [d["title"] for d in e["documents"]] == ["d0.txt", "d1.txt", "d2.txt"]
    assert e["origin"] == {"path": str(folder), "kind": "files", "candidates": 7}
    assert e["span"] == {"start": 8, "tokens": 64, "chunk": 16, "min_tokens": 72}
    assert e["order"] == "source" and "seed" not in e and e["documents_requested"] == 3
    reasons = {r["title"]: r["reason"] for r in e["rejected"]}
    assert list(reasons) == ["a_short.txt", "b_image.png", "c_latin1.txt"]           # tried in sorted order
    assert "too short" in reasons["a_short.txt"] and "< 72 required (span [8, 72))" in reasons["a_short.txt"]
    assert "b_image.png: a binary file (NUL byte" in reasons["b_image.png"]
    assert "c_latin1.txt: undecodable bytes (not UTF-8) at byte 3" in reasons["c_latin1.txt"]
    assert e["rejected"][0]["tokens"] == len(tok.encode(texts["a_short.txt"]))
    d0 = e["documents"][0]
    assert d0["text_sha256"] == hashlib.sha256(texts["d0.txt"].encode()).hexdigest()
    assert d0["tokens"] == len(tok.encode(texts["d0.txt"])) and d0["source"] == {"path": "d0.txt"}
    spans = corpora.load_spans("MYDOCS", tmp_path / "m.json", tmp_path / "cache")
    assert [s.doc for s in spans] == [0, 1, 2] and all(s.tokens.shape == (64,) for s in spans)
    for s, name in zip(spans, ["d0.txt", "d1.txt", "d2.txt"]):
        assert np.array_equal(s.tokens, expected_span(tok, texts[name]))
        assert s.sha256 == corpora.span_sha256(s.tokens)
    assert span_file(tmp_path, "MYDOCS").is_file()


def test_a_folder_of_folders_concatenates_each_folders_files_with_codes_path_headers(tmp_path, tok):
    root = tmp_path / "repos"
    files = {}
    for i in range(3):
        repo = root / f"repo{i}"
        (repo / "src").mkdir(parents=True)
        (repo / ".git").mkdir()
        files[i] = {"src/main.py": words(50, 10 * i), "README.md": words(40, 10 * i + 1)}
        for rel, text in files[i].items():
            (repo / rel).write_text(text)
        (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
        (repo / "logo.png").write_bytes(b"\x89PNG\x00\x01")
    assert add(tmp_path, "REPOS", root, "--docs", "2") == 0
    e = entry_of(tmp_path, "REPOS")
    assert e["origin"]["kind"] == "directories" and [d["title"] for d in e["documents"]] == ["repo0", "repo1"]
    doc = e["documents"][0]
    assert doc["source"] == {"path": "repo0", "files": 2, "skipped_binary": 1, "skipped_binary_first": ["logo.png"]}
    text = src.concat_files(files[0])
    assert text.startswith("# ===== README.md =====\n") and "\n# ===== src/main.py =====\n" in text
    assert doc["text_sha256"] == hashlib.sha256(text.encode()).hexdigest()
    span = corpora.load_spans("REPOS", tmp_path / "m.json", tmp_path / "cache")[0]
    assert np.array_equal(span.tokens, expected_span(tok, text))


def test_a_folder_of_files_and_folders_gives_one_document_per_entry(tmp_path):
    root = tmp_path / "lib"
    (root / "pkg" / "sub").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("A = 1\n")
    (root / "pkg" / "sub" / "m.py").write_text("B = 2\n")
    (root / "mod.py").write_text("C = 3\n")
    (root / "empty").mkdir()
    s = user.open_source(str(root))
    assert s.kind == "mixed" and [c.title for c in s.candidates] == ["empty", "mod.py", "pkg"]
    with pytest.raises(src.DocumentError, match="empty: no UTF-8 text files .the folder is empty"):
        s.candidates[0].text()
    assert s.candidates[1].text() == "C = 3\n"
    assert s.candidates[2].text() == "# ===== __init__.py =====\nA = 1\n\n# ===== sub/m.py =====\nB = 2\n"


def test_code_documents_are_concatenated_exactly_as_before():
    files = {"pkg/b.py": b"x = 1\n\n", "pkg/a.py": b"y = 2", "tests/test_a.py": b"z"}
    assert src.concat_sources(files, "p") == "# ===== pkg/a.py =====\ny = 2\n\n# ===== pkg/b.py =====\nx = 1\n"


def table_rows():
    rows = [{"id": f"doc-{i}", "text": words(100 + 15 * i, 100 + i)} for i in range(4)]
    rows.insert(1, {"id": "tiny", "text": "too short, with a comma and \"quotes\"\nover two lines"})
    return rows


def write_tables(folder, rows):
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(exist_ok=True)
    with open(folder / "docs.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps({**r, "meta": 1 if r["id"] == "tiny" else "mixed"}) + "\n")   # a messy other column
    pq.write_table(pa.table({"id": [r["id"] for r in rows], "text": [r["text"] for r in rows]}),
                   folder / "docs.parquet")
    with open(folder / "docs.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["id", "text"])
        w.writeheader()
        w.writerows(rows)
    return folder


@pytest.mark.parametrize("fmt", ["jsonl", "parquet", "csv"])
def test_a_table_file_gives_one_document_per_row_read_with_pyarrow(tmp_path, tok, fmt):
    rows = table_rows()
    path = write_tables(tmp_path / "t", rows) / f"docs.{fmt}"
    assert add(tmp_path, "TABLE", path, "--id-field", "id", "--docs", "3") == 0
    e = entry_of(tmp_path, "TABLE")
    assert e["origin"] == {"path": str(path), "kind": fmt, "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
                           "text_field": "text", "id_field": "id", "candidates": 5}
    assert [d["title"] for d in e["documents"]] == ["doc-0", "doc-1", "doc-2"]
    assert e["documents"][1]["source"] == {"row": 2, "id": "doc-1"}
    assert [r["title"] for r in e["rejected"]] == ["tiny"] and "too short" in e["rejected"][0]["reason"]
    by_id = {r["id"]: r["text"] for r in rows}
    for d in e["documents"]:
        assert d["text_sha256"] == hashlib.sha256(by_id[d["title"]].encode()).hexdigest()
        assert d["span_sha256"] == corpora.span_sha256(expected_span(tok, by_id[d["title"]]))
    assert e["command"] == (f"docgrad corpora add TABLE --from {path} --id-field id --span-start 8 --span-tokens 64 "
                            "--chunk 16 --docs 3")


def test_the_three_table_formats_give_the_same_documents_and_titles_default_to_the_row(tmp_path):
    folder = write_tables(tmp_path / "t", table_rows())
    hashes = []
    for fmt in ("jsonl", "parquet", "csv"):
        out = tmp_path / fmt
        assert add(out, "TABLE", folder / f"docs.{fmt}", "--docs", "2") == 0
        e = entry_of(out, "TABLE")
        assert [d["title"] for d in e["documents"]] == ["row 0", "row 2"] and "id_field" not in e["origin"]
        hashes.append([(d["text_sha256"], d["span_sha256"]) for d in e["documents"]])
    assert hashes[0] == hashes[1] == hashes[2]


def test_a_compressed_json_lines_file_and_a_tsv_file_are_read(tmp_path):
    import gzip

    rows = table_rows()
    with gzip.open(tmp_path / "docs.jsonl.gz", "wt") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    with open(tmp_path / "docs.tsv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["id", "text"], delimiter="\t")
        w.writeheader()
        w.writerows(rows)
    a = user.open_source(str(tmp_path / "docs.jsonl.gz"))
    b = user.open_source(str(tmp_path / "docs.tsv"), id_field="id")
    assert (a.kind, b.kind) == ("jsonl", "tsv")
    assert [c.text() for c in a.candidates] == [c.text() for c in b.candidates] == [r["text"] for r in rows]
    assert [c.title for c in b.candidates] == [r["id"] for r in rows]


def test_a_row_longer_than_pyarrows_first_block_is_read(tmp_path):
    long = "word " * 400_000                                # 2 MB, more than the 1 MiB first block
    (tmp_path / "long.jsonl").write_text(json.dumps({"text": "short"}) + "\n" + json.dumps({"text": long}) + "\n")
    s = user.open_source(str(tmp_path / "long.jsonl"))
    assert s.candidates[1].text() == long


# --- determinism and selection ----------------------------------------------------------------------------

def make_folder(path, n=8, base=100):
    path.mkdir()
    for i in range(n):
        (path / f"doc{i:02d}.txt").write_text(words(base + 10 * i, i))
    return path


def test_the_same_inputs_give_the_same_entry_and_spans(tmp_path):
    folder = make_folder(tmp_path / "docs")
    for out in ("a", "b"):
        assert main(["corpora", "add", "MYDOCS", "--from", str(folder), *SPAN, "--docs", "4", "--seed", "7",
                     "--manifest", str(tmp_path / out / "m.json"), "--cache", str(tmp_path / out / "cache")]) == 0
    a, b = entry_of(tmp_path / "a", "MYDOCS"), entry_of(tmp_path / "b", "MYDOCS")
    assert a == b
    spans = [next((tmp_path / out / "cache").rglob("MYDOCS.npy")).read_bytes() for out in ("a", "b")]
    assert spans[0] == spans[1]


def test_two_manifests_naming_a_corpus_alike_never_share_its_span_file(tmp_path):
    """Two manifests, one cache: the second `corpora add` of the same name with another span rule broke the first
    ("shape (3, 1024), expected (2, 2048)"). A manifest corpora add creates keys its span folder by its path."""
    folder, cache = make_folder(tmp_path / "docs", base=300), tmp_path / "cache"
    for out, n, span in (("a", "4", SPAN), ("b", "2", ["--span-start", "0", "--span-tokens", "32", "--chunk", "16"])):
        assert main(["corpora", "add", "MYDOCS", "--from", str(folder), *span, "--docs", n,
                     "--manifest", str(tmp_path / out / "m.json"), "--cache", str(cache)]) == 0
    a = corpora.load_spans("MYDOCS", tmp_path / "a" / "m.json", cache)
    b = corpora.load_spans("MYDOCS", tmp_path / "b" / "m.json", cache)
    assert len(a) == 4 and len(b) == 2 and len(a[0].tokens) == 64 and len(b[0].tokens) == 32
    dirs = {json.loads((tmp_path / out / "m.json").read_text())["spans_dir"] for out in ("a", "b")}
    assert len(dirs) == 2 and all(d.startswith("spans/m-") for d in dirs)


def test_a_seed_shuffles_the_candidates_deterministically(tmp_path):
    folder = make_folder(tmp_path / "docs")
    titles = {}
    for run, seed in enumerate((None, 1, 2, 1)):
        out = tmp_path / f"run{run}"
        assert add(out, "MYDOCS", folder, "--docs", "4", *([] if seed is None else ["--seed", str(seed)])) == 0
        e = entry_of(out, "MYDOCS")
        got = [d["title"] for d in e["documents"]]
        assert titles.setdefault(seed, got) == got
        if seed is not None:
            assert e["order"] == "seeded" and e["seed"] == seed and f"seed {seed}" in e["selection"]
            assert got == src.seeded_order([f"doc{i:02d}.txt" for i in range(8)], seed)[:4]
    assert titles[None] == [f"doc{i:02d}.txt" for i in range(4)]
    assert titles[1] != titles[None] and titles[1] != titles[2]


def test_a_corpus_is_added_beside_the_manifests_other_corpora(tmp_path, tok, monkeypatch):
    long = [words(20_000, 1000 + i) for i in range(16)]              # >= 18432 tokens each under SmolLM2
    monkeypatch.setattr(src, "code_candidates", lambda cache, seed: (
        src.Candidate(f"proj{i} 1.0", {"package": f"proj{i}", "version": "1.0"}, lambda t=t: t)
        for i, t in enumerate(long)))
    man, cache = tmp_path / "m.json", tmp_path / "cache"
    corpora.build(["CODE"], man, cache, tok=tok)
    code = json.loads(man.read_text())["corpora"]["CODE"]
    assert "span" not in code and corpora.span_rule(code) == corpora.STUDY_SPAN    # built-ins: the study's rule
    folder = make_folder(tmp_path / "docs")
    assert add(tmp_path, "MYDOCS", folder, "--docs", "3") == 0
    after = json.loads(man.read_text())
    assert list(after["corpora"]) == ["CODE", "MYDOCS"] and after["corpora"]["CODE"] == code
    assert after["span"] == {**after["span"], "start": 2048, "tokens": 16384}
    assert [len(s.tokens) for s in corpora.load_spans("CODE", man, cache)] == [16384] * 16
    assert [len(s.tokens) for s in corpora.load_spans("MYDOCS", man, cache)] == [64] * 3
    corpora.build(["CODE"], man, cache, tok=tok)                      # rebuilding a built-in keeps the user corpus
    again = json.loads(man.read_text())
    assert again["corpora"]["MYDOCS"] == after["corpora"]["MYDOCS"] and again["corpora"]["CODE"] == code
    assert main(["corpora", "add", "MYDOCS", "--from", str(folder), *SPAN, "--docs", "5", "--manifest", str(man),
                 "--cache", str(cache), "--overwrite"]) == 0
    assert len(entry_of(tmp_path, "MYDOCS")["documents"]) == 5 and entry_of(tmp_path, "CODE") == code


def test_show_lists_a_user_corpus_with_its_span(tmp_path, capsys):
    folder = make_folder(tmp_path / "docs")
    assert add(tmp_path, "MYDOCS", folder, "--docs", "3") == 0
    capsys.readouterr()
    assert main(["corpora", "show", "--manifest", str(tmp_path / "m.json")]) == 0
    out = capsys.readouterr().out
    assert "== MYDOCS: 3 documents" in out and "(span [8, 72), chunk 16: 4 chunks)" in out
    assert f"from {folder} (files)" in out and "doc00.txt" in out
    rows = write_tables(tmp_path / "t", table_rows()) / "docs.parquet"
    assert add(tmp_path, "TABLE", rows, "--docs", "2") == 0
    capsys.readouterr()
    assert main(["corpora", "show", "--manifest", str(tmp_path / "m.json"), "--corpus", "TABLE"]) == 0
    out = capsys.readouterr().out
    assert "== TABLE: 2 documents" in out and "(parquet, sha256 " in out and "row 2" in out and "MYDOCS" not in out


def test_tokenizing_shows_a_progress_bar_on_a_terminal(tmp_path, tok, monkeypatch):
    import io
    import sys

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    err = Terminal()
    monkeypatch.setattr(sys, "stderr", err)
    source = user.open_source(str(make_folder(tmp_path / "docs", n=3)))
    sel = user.select(source.candidates, tok, "MYDOCS", 2, RULE)
    assert len(sel.documents) == 2 and sel.tried == 2
    assert "MYDOCS: tokenizing" in err.getvalue() and "kept=2" in err.getvalue()


def test_the_probe_measures_a_user_corpus_unchanged(tmp_path, monkeypatch):
    from docgrad import models
    from docgrad.results.format import load_result

    folder = make_folder(tmp_path / "docs")
    assert main(["corpora", "add", "MYDOCS", "--from", str(folder), "--span-start", "8", "--span-tokens", "32",
                 "--chunk", "16", "--docs", "2", "--manifest", str(tmp_path / "m.json"),
                 "--cache", str(tmp_path / "cache")]) == 0
    # a tiny random Llama with SmolLM2's vocabulary stands in for the model file
    monkeypatch.setattr(models, "load_model", lambda *a, **k: models.tiny_model("llama", seed=1, vocab_size=49152,
                                                                              hidden=16, layers=1))
    assert main(["probe", "--corpus", "MYDOCS", "--docs", "0:2", "--chunk", "16", "--buckets", "16",
                 "--manifest", str(tmp_path / "m.json"), "--cache", str(tmp_path / "cache"),
                 "--out", str(tmp_path / "results")]) == 0
    [path] = (tmp_path / "results").rglob("MYDOCS_c16_d0-2.npz")
    result = load_result(path)
    assert result.documents.tolist() == [0, 1]
    hashes = [d["span_sha256"] for d in entry_of(tmp_path, "MYDOCS")["documents"]]
    meta = json.dumps(result.meta)
    assert all(h in meta for h in hashes)                                # the result records the corpus's spans


def test_a_malformed_span_record_is_refused_when_the_manifest_is_read(tmp_path):
    folder = make_folder(tmp_path / "docs")
    assert add(tmp_path, "MYDOCS", folder, "--docs", "3") == 0
    man = json.loads((tmp_path / "m.json").read_text())
    man["corpora"]["MYDOCS"]["span"]["tokens"] = 60
    (tmp_path / "m.json").write_text(json.dumps(man))
    with pytest.raises(corpora.CorpusError, match=r"corpus MYDOCS: field 'span' does not describe a span .*multiple"):
        corpora.load_spans("MYDOCS", tmp_path / "m.json", tmp_path / "cache")


def test_a_missing_span_cache_names_the_command_that_adds_the_corpus_again(tmp_path):
    folder = make_folder(tmp_path / "docs")
    assert add(tmp_path, "MYDOCS", folder, "--docs", "3") == 0
    span_file(tmp_path, "MYDOCS").unlink()
    with pytest.raises(corpora.CorpusError, match=rf"`docgrad corpora add MYDOCS --from {folder} .* --overwrite`"):
        corpora.load_spans("MYDOCS", tmp_path / "m.json", tmp_path / "cache")


# --- bad inputs: one line, exit 2, nothing written ----------------------------------------------------------

def bad_sources(tmp_path):
    """name -> (PATH, extra arguments, text the error line must hold)."""
    t = tmp_path / "src"
    t.mkdir()
    (t / "empty").mkdir()
    (t / "hidden_only").mkdir()
    (t / "hidden_only" / ".DS_Store").write_bytes(b"\x00")
    (t / "binary_only").mkdir()
    (t / "binary_only" / "a.bin").write_bytes(b"\x00\x01\x02")
    (t / "binary_only" / "b.txt").write_bytes(b"\xff\xfe\xfd text")
    (t / "one.txt").write_text(words(200, 1))
    (t / "bin.jsonl").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    (t / "latin1.csv").write_bytes("text\ncaf\xe9\n".encode("latin-1"))
    (t / "empty.jsonl").write_text("")
    (t / "array.json").write_text(json.dumps([{"text": "a"}]))
    (t / "fake.parquet").write_text("not parquet")
    (t / "numbers.jsonl").write_text('{"text": 5}\n{"text": 6}\n')
    (t / "changing.jsonl").write_text('{"text": "a"}\n{"text": 6}\n')
    (t / "nested.jsonl").write_text('{"text": ["a", "b"]}\n')
    (t / "body.jsonl").write_text('{"body": "a", "title": "t"}\n')
    (t / "short.jsonl").write_text("".join(json.dumps({"text": words(n, n)}) + "\n" for n in (30, 60, 40, 50)))
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"body": ["a"]}), t / "body.parquet")
    pq.write_table(pa.table({"text": [1, 2]}), t / "ints.parquet")
    (t / "body.csv").write_text("body,x\na,b\n")
    docs = make_folder(tmp_path / "docs", n=4)
    return {
        "missing path": (t / "nope", [], "no such file or folder"),
        "empty folder": (t / "empty", [], "the folder is empty"),
        "only hidden files": (t / "hidden_only", [], "the folder is empty"),
        "no text files": (t / "binary_only", [], "holds no text documents: none of its 2 candidates is UTF-8 text "
                                                 "(first: a.bin: a binary file (NUL byte at byte 0)"),
        "a single text file": (t / "one.txt", [], "a file of type '.txt' is not a source of documents"),
        "binary json lines": (t / "bin.jsonl", [], "a binary file (NUL byte at offset 8), not JSON Lines text"),
        "non-UTF-8 csv": (t / "latin1.csv", [], "not UTF-8 text (undecodable byte at offset 8)"),
        "empty json lines": (t / "empty.jsonl", [], "the file is empty"),
        "a JSON array": (t / "array.json", [], "(expected one JSON object per line)"),
        "not parquet": (t / "fake.parquet", [], "not a readable Parquet file"),
        "numbers as text": (t / "numbers.jsonl", [], "column 'text' holds int64 values, not text; row 0: '5'"),
        "a number among texts": (t / "changing.jsonl", [], "changed from string to number in row 1 (every value of "
                                                           "the column must be a string)"),
        "lists as text": (t / "nested.jsonl", [], "column 'text' holds list<item: string> values, not text"),
        "parquet ints": (t / "ints.parquet", [], "column 'text' holds int64 values, not text"),
        "missing text column (jsonl)": (t / "body.jsonl", [], "no column 'text' (--text-field); its columns are "
                                                             "'body', 'title'"),
        "missing text column (parquet)": (t / "body.parquet", [],
                                          "no column 'text' (--text-field); its columns are 'body'"),
        "missing text column (csv)": (t / "body.csv", [],
                                      "no column 'text' (--text-field); its columns are 'body', 'x'"),
        "missing id column": (t / "body.jsonl", ["--text-field", "body", "--id-field", "id"],
                              "no column 'id' (--id-field); its columns are 'body', 'title'"),
        "too few qualify": (t / "short.jsonl", ["--docs", "3"], None),
        "text field for a folder": (docs, ["--text-field", "body"], "--text-field: columns of a JSON Lines"),
        "span not a multiple of chunk": (docs, ["--span-tokens", "60"], "--span-tokens 60 is not a multiple of --chunk "
                                                                       "16: a span is measured in whole chunks; use "
                                                                       "--span-tokens 64 or 48"),
        "zero span tokens": (docs, ["--span-tokens", "0"], "--span-tokens 0: expected an integer >= 1"),
        "zero chunk": (docs, ["--chunk", "0"], "--chunk 0: expected an integer >= 1"),
        "negative span start": (docs, ["--span-start", "-1"], "--span-start -1: expected an integer >= 0"),
        "one document": (docs, ["--docs", "1"], "--docs 1: need at least 2 documents"),
        "negative seed": (docs, ["--seed", "-3"], "--seed -3: the selection seed is a non-negative integer"),
    }


BAD = ["missing path", "empty folder", "only hidden files", "no text files",
       "a single text file", "binary json lines", "non-UTF-8 csv", "empty json lines", "a JSON array", "not parquet",
       "numbers as text", "a number among texts", "lists as text", "parquet ints", "missing text column (jsonl)",
       "missing text column (parquet)", "missing text column (csv)", "missing id column", "too few qualify",
       "text field for a folder", "span not a multiple of chunk", "zero span tokens", "zero chunk",
       "negative span start", "one document", "negative seed"]


def assert_refused(capsys, status, expected, before, tmp_path, name="MYDOCS"):
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if not ln.startswith("[corpora]")]
    assert status == 2, err
    assert len(lines) == 1 and lines[0].startswith("docgrad corpora: error: "), err
    assert "Traceback" not in err
    if expected is not None:
        assert expected in lines[0], lines[0]
    man = tmp_path / "m.json"
    assert (man.read_text() if man.exists() else None) == before
    assert not list((tmp_path / "cache").rglob(f"{name}.npy"))
    return lines[0]


@pytest.mark.parametrize("case", BAD)
def test_a_bad_input_is_one_line_with_exit_status_2_and_nothing_written(tmp_path, capsys, case):
    path, extra, expected = bad_sources(tmp_path)[case]
    capsys.readouterr()
    line = assert_refused(capsys, add(tmp_path, "MYDOCS", path, *extra), expected, None, tmp_path)
    if case == "too few qualify":       # token counts of the four rows: 30, 60, 40, 50 words
        lengths = [len(corpora.model_tokenizer().encode(words(n, n))) for n in (30, 60, 40, 50)]
        third = sorted(lengths, reverse=True)[2]
        assert (f"MYDOCS: only 0 of 4 documents qualify and --docs 3 are needed: a document needs at least 72 tokens "
                f"under the smollm2-135m tokenizer (span [8, 72)); the longest has {max(lengths)} tokens; "
                f"--span-tokens {16 * 2 ** (((third - 8) // 16).bit_length() - 1)} would keep 3") in line


def test_the_suggested_span_makes_the_corpus(tmp_path, capsys):
    path, extra, _ = bad_sources(tmp_path)["too few qualify"]
    assert add(tmp_path, "MYDOCS", path, *extra) == 2
    suggested = capsys.readouterr().err.split("; --span-tokens ")[1].split()[0]
    assert add(tmp_path, "MYDOCS", path, "--docs", "3", "--span-tokens", suggested) == 0
    assert len(entry_of(tmp_path, "MYDOCS")["documents"]) == 3


@pytest.mark.parametrize("name,expected", [("mydocs", "expected an upper-case identifier"),
                                           ("1DOCS", "expected an upper-case identifier"),
                                           ("MY-DOCS", "e.g. MY_DOCS"),
                                           ("BOOKS", "that is a built-in corpus"),
                                           ("WEB", "that is a built-in corpus"),
                                           ("PG19", "that is a hub corpus")])
def test_a_bad_corpus_name_is_refused(tmp_path, capsys, name, expected):
    folder = make_folder(tmp_path / "docs", n=4)
    capsys.readouterr()
    assert_refused(capsys, add(tmp_path, name, folder), expected, None, tmp_path, name)


def test_a_corpus_already_in_the_manifest_is_replaced_only_with_overwrite(tmp_path, capsys):
    folder = make_folder(tmp_path / "docs")
    assert add(tmp_path, "MYDOCS", folder, "--docs", "3") == 0
    before = (tmp_path / "m.json").read_text()
    spans = span_file(tmp_path, "MYDOCS").read_bytes()
    capsys.readouterr()
    status = add(tmp_path, "MYDOCS", folder, "--docs", "4")
    err = capsys.readouterr().err
    assert status == 2 and f"already has a corpus MYDOCS (3 documents from {folder}); pass --overwrite" in err
    assert (tmp_path / "m.json").read_text() == before
    assert span_file(tmp_path, "MYDOCS").read_bytes() == spans


def test_a_manifest_of_another_tokenizer_is_refused(tmp_path, capsys):
    folder = make_folder(tmp_path / "docs")
    (tmp_path / "m.json").write_text(json.dumps({"format": corpora.MANIFEST_FORMAT, "corpora": {},
                                                  "tokenizer": {"model": "other", "gguf_sha256": "0" * 64}}))
    before = (tmp_path / "m.json").read_text()
    capsys.readouterr()
    assert_refused(capsys, add(tmp_path, "MYDOCS", folder), "its spans were cut by the tokenizer of 'other'", before,
                   tmp_path)


def test_a_local_model_directory_cuts_the_spans_with_its_own_tokenizer(tmp_path, capsys):
    """--model PATH: a tiny Llama and a byte-level tokenizer saved with save_pretrained."""
    from tokenizers import Tokenizer, decoders, pre_tokenizers
    from tokenizers import models as tm
    from transformers import AutoModelForCausalLM, LlamaConfig, PreTrainedTokenizerFast

    ckpt = tmp_path / "ckpt"
    vocab = {c: i for i, c in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    vocab.update({"<s>": 256, "</s>": 257})
    tk = Tokenizer(tm.BPE(vocab=vocab, merges=[]))
    tk.pre_tokenizer, tk.decoder = pre_tokenizers.ByteLevel(add_prefix_space=False), decoders.ByteLevel()
    cfg = LlamaConfig(vocab_size=258, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=4,
                      num_key_value_heads=2, max_position_embeddings=256, bos_token_id=256, eos_token_id=257)
    AutoModelForCausalLM.from_config(cfg).save_pretrained(ckpt)
    PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<s>", eos_token="</s>").save_pretrained(ckpt)
    folder = make_folder(tmp_path / "docs", n=3, base=20)
    assert add(tmp_path, "MYDOCS", folder, "--docs", "2", "--model", str(ckpt)) == 0
    man = json.loads((tmp_path / "m.json").read_text())
    assert man["tokenizer"]["model"] == "local/ckpt" and man["spans_dir"].startswith("spans/local/ckpt-")
    text = (folder / "doc00.txt").read_text()
    span = corpora.load_spans("MYDOCS", tmp_path / "m.json", tmp_path / "cache")[0]
    ids = PreTrainedTokenizerFast.from_pretrained(ckpt)(text, add_special_tokens=False)["input_ids"]
    assert len(ids) == len(text.encode()) and span.tokens.tolist() == ids[8:72]     # one token per byte
    assert man["corpora"]["MYDOCS"]["command"].endswith(f"--model {ckpt} --span-start 8 --span-tokens 64 "
                                                        "--chunk 16 --docs 2")
    before = (tmp_path / "m.json").read_text()
    capsys.readouterr()
    assert_refused(capsys, add(tmp_path, "OTHER", folder, "--docs", "2"), "its spans were cut by the tokenizer of "
                   "'local/ckpt'", before, tmp_path, "OTHER")


def test_a_full_disk_while_storing_replaces_neither_the_spans_nor_the_manifest(tmp_path, capsys, monkeypatch):
    """`corpora add --overwrite` on a full disk replaced the span file, kept the old manifest and said only
    '[Errno 28] No space left on device'."""
    import errno
    import os

    from docgrad import fileio

    assert add(tmp_path, "MYDOCS", make_folder(tmp_path / "docs"), "--docs", "4") == 0
    before = {p: p.read_bytes() for p in [tmp_path / "m.json", span_file(tmp_path, "MYDOCS")]}
    real, calls = os.fsync, []

    def full(fd):
        calls.append(fd)
        if len(calls) == 2:                           # the manifest, after the new spans were written
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd)

    monkeypatch.setattr(fileio.os, "fsync", full)
    capsys.readouterr()
    other = tmp_path / "other"
    other.mkdir()
    for i in range(4):
        (other / f"d{i}.txt").write_text(words(200, 100 + i))       # other words: a new span file to write
    assert add(tmp_path, "MYDOCS", other, "--docs", "3", "--overwrite") == 2
    err = capsys.readouterr().err
    assert "No space left on device); nothing was replaced, the manifest and its spans are as they were" in err
    assert {p: p.read_bytes() for p in before} == before
    assert not [p for p in tmp_path.rglob("*.tmp")]


def test_two_adds_into_one_manifest_keep_both_corpora(tmp_path):
    """Two concurrent `corpora add` into one manifest both said 'written' and one corpus was lost: the manifest is
    held while it is read, built and written."""
    import threading

    from docgrad import fileio

    folder = make_folder(tmp_path / "docs")
    held = threading.Event()
    with fileio.locked(tmp_path / "m.json"):              # the first add, still writing
        t = threading.Thread(target=lambda: (held.set(), add(tmp_path, "SECOND", folder, "--docs", "4")))
        t.start()
        held.wait()
        t.join(3)
        assert t.is_alive() and not (tmp_path / "m.json").exists()     # the second waits for the manifest
    t.join(120)
    assert add(tmp_path, "FIRST", folder, "--docs", "4") == 0
    assert set(json.loads((tmp_path / "m.json").read_text())["corpora"]) == {"FIRST", "SECOND"}


def test_a_copy_of_a_document_is_not_kept_as_another_and_a_one_chunk_span_is_refused(tmp_path, capsys):
    """Byte-identical documents and one-chunk spans passed corpora add and were refused only after probing."""
    folder = make_folder(tmp_path / "docs", n=5)
    (folder / "doc00b.txt").write_text((folder / "doc00.txt").read_text())    # a copy, sorted second
    assert add(tmp_path, "MYDOCS", folder, "--docs", "5") == 0
    entry = entry_of(tmp_path, "MYDOCS")
    assert [d["title"] for d in entry["documents"]] == [f"doc{i:02d}.txt" for i in range(5)]
    assert any("doc00b.txt: its span is byte-identical to document 0 (doc00.txt)" in r["reason"]
               for r in entry["rejected"])
    assert main(["corpora", "add", "TWINS", "--from", str(folder), "--span-start", "8", "--span-tokens", "16",
                 "--chunk", "16", "--manifest", str(tmp_path / "n.json"), "--cache", str(tmp_path / "c2")]) == 2
    assert "--span-tokens 16 is one chunk of --chunk 16: R and the correlation by lag need at least two chunks" in \
        capsys.readouterr().err


def test_corpora_add_ends_with_the_measure_command_to_run_next_and_it_names_this_manifest(tmp_path, capsys):
    """The hint ran verbatim wrote into the committed manifest: it omitted --manifest and --cache."""
    import shlex

    from docgrad.runtime.cli import build_parser

    assert add(tmp_path, "MYDOCS", make_folder(tmp_path / "docs"), "--docs", "4") == 0
    lines = capsys.readouterr().out.splitlines()
    hint = next(ln for ln in lines if ln.startswith("measure it next"))
    argv = shlex.split(hint.split(": ", 1)[1])
    assert argv[:4] == ["docgrad", "measure", "--corpus", "MYDOCS"]
    args = build_parser().parse_args(argv[1:])
    assert (args.docs, Path(args.manifest), Path(args.cache)) == ("0:4", tmp_path / "m.json", tmp_path / "cache")
    assert any(ln.startswith("or only its result file: docgrad probe --corpus MYDOCS --docs 0:4 --chunk 16")
               for ln in lines)


def test_copies_never_count_towards_the_span_that_would_keep_enough_documents(tmp_path, capsys):
    """Found trying /usr/share/common-licenses (GPL is a copy of GPL-3): the line said '--span-tokens 2048 would
    keep 8' for the --span-tokens given, counting copies that can never be kept."""
    folder = tmp_path / "licences"
    folder.mkdir()
    for i in range(3):
        (folder / f"{i}.txt").write_text(words(200, i))
    for i in range(2):
        (folder / f"copy{i}.txt").write_text(words(200, i))          # byte-identical to 0.txt and 1.txt
    capsys.readouterr()
    assert add(tmp_path, "MYDOCS", folder, "--docs", "4") == 2
    line = capsys.readouterr().err
    assert "only 3 of 5 documents qualify" in line and "only 3 documents are distinct texts" in line
    assert "pass --docs 3 or fewer" in line and "would keep 4" not in line


@pytest.mark.parametrize("chunks,window", [(1, 1), (3, 2), (4, 4), (31, 16), (32, 32)])
def test_the_suggested_span_is_a_power_of_two_chunks_a_window_the_study_controls_have(chunks, window):
    from docgrad.corpora.user import whole_window

    assert whole_window(chunks) == window
