"""Issue 39: bad manifests, non-UTF-8 terminals and unusable output paths in the corpora verbs (and `probe`,
which reads the same manifest). Each is refused with one line naming the file, the entry, the field and what
was expected, exit 2, before anything is fetched, built or loaded. A byte-level fake tokenizer and a 2-document
synthetic corpus keep these fast; no apt, no network."""

import json
import os
import subprocess
import sys

import pytest

from docgrad import models
from docgrad.corpora import build as corpora
from docgrad.corpora import hub
from docgrad.corpora import sources as src
from docgrad.corpora.build import MIN_TOKENS
from docgrad.corpora.sources import Candidate
from docgrad.runtime.cli import main
from test_hostile_inputs import one_line


class ByteTokenizer:
    """One token per UTF-8 byte; recorded as the default model's tokenizer so `probe` accepts its spans."""

    separator, separator_id = "<SEP>", 256
    identity = {"model": models.SMOLLM2.model, "gguf_sha256": models.SMOLLM2.sha256,
                "separator": {"token": "<SEP>", "id": 256}}

    def encode(self, text):
        return list(text.encode("utf-8"))

    def decode(self, ids):
        return bytes(i for i in ids if i < 256).decode("utf-8", "replace")


def _text(n, word):
    return ((word + " ") * (n // (len(word) + 1) + 1))[:n]


@pytest.fixture
def built(tmp_path, monkeypatch):
    """(manifest, cache) of a 2-document CODE corpus whose span cache matches the manifest."""
    def candidates(cache, seed, projects=None):
        for i in range(3):
            yield Candidate(f"proj{i} 1.0", {"package": f"proj{i}", "version": "1.0"},
                            lambda i=i: _text(MIN_TOKENS + 10 * i, f"tok{i}"))

    monkeypatch.setattr(src, "code_candidates", candidates)
    man, cache = tmp_path / "manifest.json", tmp_path / "cache"
    corpora.build(["CODE"], man, cache, tok=ByteTokenizer(), documents=2)
    return man, cache


def _edit(path, fn):
    man = json.loads(path.read_text())
    fn(man)
    path.write_text(json.dumps(man))


@pytest.fixture
def nothing_heavy(monkeypatch):
    """Fail the test if a tokenizer or model loads, a corpus is fetched or built, or a hub file downloads."""
    def fail(what):
        def f(*a, **k):
            raise AssertionError(f"{what} started before the inputs were checked")
        return f

    monkeypatch.setattr(corpora, "build", fail("the build"))
    monkeypatch.setattr(corpora, "build_corpus", fail("a corpus build"))
    monkeypatch.setattr(corpora, "model_tokenizer", fail("the tokenizer load"))
    monkeypatch.setattr(corpora, "default_tokenizer", fail("the tokenizer load"))
    monkeypatch.setattr(models, "load_model", fail("the model load"))
    monkeypatch.setattr(hub, "download", fail("a hub download"))


def _doc(i):
    return lambda m: m["corpora"]["CODE"]["documents"][i]


# --- 1. null or missing manifest fields: one line naming file, entry, field, expected vs got ---------------

BAD_FIELDS = {
    "tokenizer null": (lambda m: m.update(tokenizer=None),
                       ["top level", "'tokenizer'", "expected an object", "got null"]),
    "span_sha256 null": (lambda m: _doc(1)(m).update(span_sha256=None),
                         ["corpus CODE document 1", "'span_sha256'", "expected a string", "got null"]),
    "documents missing": (lambda m: m["corpora"]["CODE"].pop("documents"),
                          ["corpus CODE", "'documents'", "missing", "expected an array"]),
    "title missing": (lambda m: _doc(0)(m).pop("title"),
                      ["corpus CODE document 0", "'title'", "missing", "expected a string"]),
    "source null": (lambda m: _doc(0)(m).update(source=None),
                    ["corpus CODE document 0", "'source'", "expected an object", "got null"]),
}

VERBS = {
    "corpora show": lambda man, cache, tmp: ["corpora", "show", "--manifest", str(man)],
    "corpora build --missing-only": lambda man, cache, tmp: ["corpora", "build", "--missing-only", "--corpus", "CODE",
                                                             "--manifest", str(man), "--cache", str(cache)],
    "probe": lambda man, cache, tmp: ["probe", "--corpus", "CODE", "--docs", "0:2", "--manifest", str(man),
                                      "--cache", str(cache), "--out", str(tmp / "results")],
}


@pytest.mark.parametrize("verb", list(VERBS))
@pytest.mark.parametrize("case", list(BAD_FIELDS))
def test_a_null_or_missing_manifest_field_is_one_line_naming_file_entry_field_and_types(
        built, tmp_path, capsys, nothing_heavy, verb, case):
    man, cache = built
    edit, needles = BAD_FIELDS[case]
    _edit(man, edit)
    before = man.read_text()
    assert main(VERBS[verb](man, cache, tmp_path)) == 2
    one_line(capsys, str(man), *needles)
    assert man.read_text() == before and not (tmp_path / "results").exists()


def test_read_manifest_checks_the_types_of_every_recorded_field(built):
    man, _ = built
    _edit(man, lambda m: _doc(1)(m).update(tokens="many"))
    with pytest.raises(corpora.CorpusError, match=r"corpus CODE document 1: field 'tokens' expected an integer, "
                                                  r"got a string \('many'\)"):
        corpora.read_manifest(man)


# --- 2. a terminal that cannot show the titles -------------------------------------------------------------

def test_corpora_show_on_an_ascii_stdout_escapes_what_it_cannot_encode(built):
    man, _ = built
    _edit(man, lambda m: _doc(0)(m).update(title="Émile Zola – Germinal", first_words="ça va — très bien"))
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    r = subprocess.run([sys.executable, "-m", "docgrad", "corpora", "show", "--manifest", str(man)],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    assert "\\xc9mile Zola \\u2013 Germinal" in r.stdout and "\\xe7a va" in r.stdout


# --- 3. unusable output paths are refused before anything is fetched or built --------------------------------

def test_corpora_build_into_a_cache_that_is_a_file_fails_before_building(tmp_path, capsys, nothing_heavy):
    cache = tmp_path / "cache.txt"
    cache.write_text("not a directory\n")
    assert main(["corpora", "build", "--corpus", "CODE", "--manifest", str(tmp_path / "m.json"),
                 "--cache", str(cache)]) == 2
    one_line(capsys, f"--cache {cache} is a file, not a directory")
    assert not (tmp_path / "m.json").exists()


@pytest.mark.parametrize("where", ["cache under a file", "manifest is a directory", "manifest under a file",
                                   "span file is a directory"])
def test_corpora_build_refuses_unwritable_outputs_before_building(tmp_path, capsys, nothing_heavy, where):
    blocker = tmp_path / "file.txt"
    blocker.write_text("x\n")
    man, cache = tmp_path / "m.json", tmp_path / "cache"
    if where == "cache under a file":
        cache, needle = blocker / "cache", f"--cache {blocker / 'cache'}: {blocker} is a file, not a directory"
    elif where == "manifest is a directory":
        man.mkdir()
        needle = f"--manifest {man} is a directory"
    elif where == "manifest under a file":
        man, needle = blocker / "m.json", f"--manifest {blocker / 'm.json'}: {blocker} is a file, not a directory"
    else:
        (cache / "spans" / "CODE.npy").mkdir(parents=True)
        needle = f"--cache {cache}: {cache / 'spans' / 'CODE.npy'} is a directory"
    assert main(["corpora", "build", "--corpus", "CODE", "--manifest", str(man), "--cache", str(cache)]) == 2
    one_line(capsys, needle)


def test_corpora_hub_into_a_cache_that_is_a_file_fails_before_downloading(tmp_path, capsys, nothing_heavy):
    cache = tmp_path / "cache.txt"
    cache.write_text("x\n")
    assert main(["corpora", "hub", "PG19", "--manifest", str(tmp_path / "m.json"), "--cache", str(cache)]) == 2
    one_line(capsys, f"--cache {cache} is a file, not a directory")


# --- more hostile inputs -------------------------------------------------------------------------------------

def test_a_manifest_that_is_not_utf8_is_one_line(tmp_path, capsys):
    man = tmp_path / "m.json"
    man.write_bytes(b'{"format": "\xff\xfe"}')
    assert main(["corpora", "show", "--manifest", str(man)]) == 2
    one_line(capsys, str(man), "not UTF-8 text")


@pytest.mark.parametrize("content,needle", [("[]", "got an array"), ('"manifest"', "got a string"),
                                            ("null", "got null")])
def test_a_manifest_that_is_not_a_json_object_is_one_line(tmp_path, capsys, content, needle):
    man = tmp_path / "m.json"
    man.write_text(content)
    assert main(["corpora", "show", "--manifest", str(man)]) == 2
    one_line(capsys, str(man), "expected a JSON object", needle)


@pytest.mark.parametrize("verb", ["corpora show", "probe"])
def test_a_manifest_nested_too_deeply_is_one_line(tmp_path, capsys, nothing_heavy, verb):
    man = tmp_path / "m.json"
    man.write_text("[" * 200_000 + "]" * 200_000)
    assert main(VERBS[verb](man, tmp_path / "cache", tmp_path)) == 2
    one_line(capsys, str(man), "not valid JSON (nested too deeply)")


def test_show_with_a_manifest_that_is_a_directory_says_so_instead_of_not_found(tmp_path, capsys):
    assert main(["corpora", "show", "--manifest", str(tmp_path)]) == 2
    err = one_line(capsys, f"{tmp_path}: is a directory, not a corpus manifest file")
    assert "not found" not in err


@pytest.mark.parametrize("spans_dir", ["../../outside", "/tmp/outside", ""])
def test_a_spans_dir_outside_the_cache_is_refused(built, tmp_path, capsys, spans_dir, nothing_heavy):
    man, cache = built
    _edit(man, lambda m: m.update(spans_dir=spans_dir))
    argv = ["probe", "--corpus", "CODE", "--docs", "0:2", "--manifest", str(man), "--cache", str(cache),
            "--out", str(tmp_path / "results")]
    assert main(argv) == 2
    one_line(capsys, str(man), "'spans_dir'", "a relative folder under the cache")


def test_documents_out_of_order_are_refused_naming_the_entry(built, capsys, nothing_heavy):
    man, cache = built
    _edit(man, lambda m: _doc(1)(m).update(doc=0))
    assert main(["corpora", "show", "--manifest", str(man)]) == 2
    one_line(capsys, str(man), "corpus CODE document 1", "'doc' is 0", "expected 1")


def test_show_of_a_corpus_name_that_does_not_exist_does_not_advise_building_it(built, capsys):
    man, _ = built
    assert main(["corpora", "show", "--manifest", str(man), "--corpus", "NOPE"]) == 2
    err = one_line(capsys, "corpus 'NOPE' not recorded", "has: CODE")
    assert "corpora build" not in err
