"""`docgrad measure` (issue 35): one command from a model and a corpus to R(W), in a folder of its own."""

import json
from pathlib import Path

import pytest
from docgrad.presentation.design_effect import headline_window, measurement_lines, window_name
from docgrad.presentation.evidence import interval
from docgrad.results import synthetic as syn
from docgrad.results.stats import analyze
from docgrad.runtime.cli import main

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def mine_and_web(tmp_path_factory):
    root = tmp_path_factory.mktemp("measure")
    profiles = {"MINE": syn.DEFAULT_PROFILES["CODE"], "WEB": syn.DEFAULT_PROFILES["WEB"]}
    syn.write_synthetic_results(root, model="o/m", revision="r", profiles=profiles)
    return analyze(root, resamples=200, seed=1, docs=(0, 16))


def test_the_headline_is_r_at_16k_with_its_interval_and_r_rel_against_the_control(mine_and_web):
    a = mine_and_web
    lines = measurement_lines(a, "m", "MINE", "WEB")
    mine, web = a.cell("MINE").all, a.cell("WEB").all
    assert mine.R[16384] > 2 * web.R[16384]                           # the synthetic profiles' order
    assert lines[0].startswith(f"MINE under m: R(16K) = {interval(mine.R[16384], mine.interval('R', 16384))} "
                               "over 16 documents")
    assert lines[1].startswith(f"WEB under m: R(16K) = {interval(web.R[16384], web.interval('R', 16384))}")
    rel = next(r for r in a.R_rel if r.corpus == "MINE")
    assert lines[2] == f"R_rel(MINE / WEB) = {interval(rel.R_rel, rel.R_rel_ci)}" and rel.R_rel_ci[0] > 1


def test_a_span_shorter_than_16k_is_read_at_the_span_and_r_rel_is_not_claimed(mine_and_web):
    from dataclasses import replace

    a = mine_and_web
    cells = [replace(c, all=replace(c.all, R={w: r for w, r in c.all.R.items() if w <= 8192})) for c in a.cells]
    short = replace(a, cells=cells, R_rel=[])
    assert headline_window(cells[0].all) == 8192 and window_name(8192) == "8K" and window_name(1000) == "1000"
    lines = measurement_lines(short, "m", "MINE", "WEB")
    assert "R(8K) = " in lines[0] and "R at the span: the corpus's span is 8192 tokens" in lines[0]
    assert lines[2].startswith("R_rel(MINE / WEB): not computed")


def test_a_missing_cell_is_said_not_invented(mine_and_web):
    assert measurement_lines(mine_and_web, "m", "NOPE", "WEB")[0] == "NOPE under m: no cell (nothing measured)"


def test_measure_refuses_a_corpus_that_is_its_own_control(capsys):
    assert main(["measure", "--corpus", "web", "--no-page"]) == 2
    assert "is also the --control" in capsys.readouterr().err


def test_measure_names_corpora_add_for_a_corpus_the_manifest_does_not_hold(tmp_path, capsys):
    manifest = tmp_path / "manifest.json"
    manifest.write_text('{"format": "docgrad-corpora-manifest/1", "corpora": {}}')
    assert main(["measure", "--corpus", "mine", "--manifest", str(manifest), "--no-page"]) == 2
    err = capsys.readouterr().err
    assert "corpus MINE is not in" in err and "docgrad corpora add MINE --from PATH --model smollm2-135m" in err


# --- end to end: corpora add -> measure -> page 04, offline ------------------------------------------------

WORDS = "river stone window garden lantern harbor meadow candle forest bridge silver autumn orchard".split()


def text_folder(path: Path, n: int, seed: int) -> Path:
    import random

    path.mkdir(parents=True)
    for i in range(n):
        rng = random.Random(seed * 1000 + i)
        (path / f"{i:02d}.txt").write_text(" ".join(rng.choice(WORDS) for _ in range(80)))
    return path


def test_corpora_add_then_measure_runs_page_04_into_its_own_folder_and_never_pools_two_checkpoints(
        tmp_path, capsys):
    from docgrad import models
    from test_local_model import save_checkpoint

    ckpt = save_checkpoint(tmp_path / "a" / "ckpt", seed=1)
    manifest, cache, out = tmp_path / "manifest.json", tmp_path / "cache", tmp_path / "out"
    where = ["--manifest", str(manifest), "--cache", str(cache)]
    span = ["--span-start", "8", "--span-tokens", "64", "--chunk", "16", "--docs", "4"]
    for name, seed in (("MINE", 1), ("CTRL", 2)):
        folder = text_folder(tmp_path / name.lower(), 4, seed)
        assert main(["corpora", "add", name, "--from", str(folder), "--model", str(ckpt), *span, *where]) == 0
    measure = ["measure", "--corpus", "MINE", "--control", "CTRL", "--docs", "0:4",   # the chunk: MINE's own 16
               "--resamples", "100", "--out", str(out), *where]
    capsys.readouterr()
    assert main([*measure, "--model", str(ckpt)]) == 0
    lines = capsys.readouterr().out.splitlines()                  # the probes print their files first
    printed = lines[next(i for i, ln in enumerate(lines) if ln.startswith("MINE under")):]

    rm = models.result_model(str(ckpt))
    a = analyze(out / "results", resamples=100, seed=20261007, docs=(0, 4)).subset(rm.model, rm.revision, 16)
    assert printed[:3] == measurement_lines(a, rm.label, "MINE", "CTRL")        # what the library computes
    assert printed[0].startswith("MINE under ckpt: R(64) = ") and "R at the span" in printed[0]
    page = out / "html" / "04_design_effect.html"
    assert printed[-1] == f"page: {page}" and page.exists()
    twin = json.loads((out / "figures" / "04_design_effect.json").read_text())
    assert "MINE R(64) " in twin["result_box"] and "16-token chunks" in twin["result_box"]
    assert (out / "04_design_effect.ipynb").exists() and not (ROOT / "figures" / "04_R_by_window.png").samefile(
        out / "figures" / "04_R_by_window.png")

    other = save_checkpoint(tmp_path / "b" / "ckpt", seed=2)                     # same name, other weights
    assert main([*measure, "--model", str(other), "--no-page"]) == 0
    again = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("MINE under")]
    revisions = sorted(p.name for p in (out / "results" / "local__ckpt").iterdir())
    assert revisions == sorted([rm.revision, models.result_model(str(other)).revision]) and len(set(revisions)) == 2
    cells = analyze(out / "results", resamples=0, docs=(0, 4)).cells
    assert sorted((c.revision, c.corpus, c.n_docs) for c in cells) == sorted(
        (r, k, 4) for r in revisions for k in ("MINE", "CTRL"))                  # four cells, none pooled
    assert again[0] != printed[0]


@pytest.mark.parametrize("extra,needle", [(["--resamples", "7"], "resamples must be 0"),
                                          (["--seed", "-1"], "--seed -1: the bootstrap seed"),
                                          (["--docs", "5:2"], "--docs 5:2"),
                                          (["--model", "/nonexistent"], "no such file or directory")])
def test_measure_refuses_bad_arguments_before_any_probe(extra, needle, capsys, monkeypatch):
    from docgrad.runtime import measure_command

    monkeypatch.setattr(measure_command, "run_verb", lambda argv: pytest.fail(f"ran {argv}"))
    assert main(["measure", "--corpus", "CODE", "--no-page", *extra]) == 2
    assert needle in capsys.readouterr().err


def test_measure_refuses_an_out_that_is_a_file_before_any_probe(tmp_path, capsys, monkeypatch):
    from docgrad.runtime import measure_command

    monkeypatch.setattr(measure_command, "run_verb", lambda argv: pytest.fail(f"ran {argv}"))
    (tmp_path / "plain").write_text("x")
    assert main(["measure", "--corpus", "CODE", "--no-page", "--out", str(tmp_path / "plain" / "m")]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err


def test_a_page_asked_for_a_cell_that_does_not_exist_names_the_probe_that_makes_it(tmp_path):
    from docgrad.errors import AnalysisError
    from docgrad.models import result_model
    from docgrad.results.study import Study

    syn.write_synthetic_results(tmp_path, profiles={"CODE": syn.DEFAULT_PROFILES["CODE"]})
    for spec, option in (("smollm2-135m", "--model smollm2-135m"), ("o/m@r", "--model o/m --revision r")):
        with pytest.raises(AnalysisError) as e:
            Study(tmp_path, resamples=0, chunk=256, docs=(0, 16)).page(result_model(spec), ["CODE"])
        assert f"make one with: docgrad probe {option} --corpus CODE --chunk 256 --docs 0:16 --out {tmp_path}" \
            in str(e.value)
