"""The publication rule (issue 39): every output of a run or a report is staged, then published together, or not at
all; an interrupted publication is completed by the next command; a report is one consistent set of pages."""

import argparse
import errno
import json
import os
import signal
import shutil
from pathlib import Path

import nbformat
import pytest
from docgrad import publication as P
from docgrad.runtime import notebooks as N
from docgrad.runtime.cli import main

HEADER = """# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---
"""

PAGE = HEADER + '''
# %% [markdown]
# # Page {n}
#
# What the page says first.

# %% tags=["parameters"]
steps = 3  # steps of the recorded run
rerun = False  # recompute the record

# %%
from docgrad.runtime.pages import save_chart, save_numbers
from docgrad.teaching.records import recorded
import altair as alt
import pandas as pd

result, prov = recorded("{n}_record", {{"steps": steps}}, lambda: {{"sum": steps * 2}}, rerun=rerun)
_ = save_numbers("{stem}", {{"sum": result["sum"]}})
_ = save_chart(alt.Chart(pd.DataFrame({{"x": [1, 2]}})).mark_point().encode(x="x"), "{n}_chart")
'''


def make_project(root: Path, pages=("01", "02")) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text("")
    for d in ("notebooks", "figures", "data/teaching"):
        (root / d).mkdir(parents=True, exist_ok=True)
    for n in pages:
        (root / "notebooks" / f"{n}_page.py").write_text(PAGE.format(n=n, stem=f"{n}_page"))
    return root


def snapshot(root: Path) -> dict:
    """Every file under root (but the notebook sources) -> its bytes."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def reported(tmp_path_factory) -> Path:
    """A project of pages 01 and 02 after one `docgrad report` (three tests start from it; each gets a copy)."""
    root = make_project(tmp_path_factory.mktemp("reported") / "p")
    assert N.cli_report(report_args(root)) == 0
    return root


def reported_copy(reported: Path, tmp_path: Path) -> Path:
    """A copy of the reported project (file times kept) that a test may change."""
    return Path(shutil.copytree(reported, tmp_path / "p"))


def report_args(root: Path, **kw) -> argparse.Namespace:
    return argparse.Namespace(root=str(root), notebooks=str(root / "notebooks"), out=str(root / "report"),
                              only=kw.get("only"), no_html=kw.get("no_html", False),
                              no_execute=kw.get("no_execute", False))


def disk_full_at_copy(n: int, monkeypatch) -> None:
    """The n-th file publication copies fails with ENOSPC, as on a full disk."""
    real, calls = shutil.copyfile, []

    def copy(src, dst):
        calls.append(dst)
        if len(calls) == n:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(src, dst)

    monkeypatch.setattr(P.shutil, "copyfile", copy)


# --- the transaction -------------------------------------------------------------------------------

def _staged_files(tmp_path, n=3):
    stage, dest = tmp_path / "stage", tmp_path / "dest"
    stage.mkdir(parents=True), dest.mkdir()
    moves = []
    for i in range(n):
        (stage / f"f{i}").write_text(f"new {i}")
        (dest / f"f{i}").write_text(f"old {i}")
        moves.append((stage / f"f{i}", dest / f"f{i}"))
    return moves, dest


def test_publish_replaces_every_destination_and_leaves_no_copies_or_journal(tmp_path):
    moves, dest = _staged_files(tmp_path)
    (dest / "gone").write_text("a figure the run no longer makes")
    P.publish(moves, tmp_path, removals=[dest / "gone"])
    assert sorted(p.name for p in dest.iterdir()) == ["f0", "f1", "f2"]
    assert [(dest / f"f{i}").read_text() for i in range(3)] == ["new 0", "new 1", "new 2"]
    assert not (tmp_path / P.JOURNAL).exists()


def test_a_copy_that_fails_for_space_publishes_nothing(tmp_path, monkeypatch):
    moves, dest = _staged_files(tmp_path)
    disk_full_at_copy(3, monkeypatch)
    with pytest.raises(P.PublicationError, match="No space left.*nothing was published"):
        P.publish(moves, tmp_path, removals=[])
    assert sorted(p.name for p in dest.iterdir()) == ["f0", "f1", "f2"]      # no .docgrad-new left behind
    assert [(dest / f"f{i}").read_text() for i in range(3)] == ["old 0", "old 1", "old 2"]


def test_a_publication_killed_in_its_rename_step_is_completed_by_the_next_command(tmp_path, monkeypatch):
    moves, dest = _staged_files(tmp_path)
    real, renames = os.replace, []

    def killed_after_one_rename(src, dst):
        if str(dst).startswith(str(dest)):
            renames.append(dst)
            if len(renames) == 2:
                raise SystemExit("killed")          # stands for kill -9 between two renames
        return real(src, dst)

    monkeypatch.setattr(P.os, "replace", killed_after_one_rename)
    with pytest.raises(SystemExit):
        P.publish(moves, tmp_path)
    monkeypatch.setattr(P.os, "replace", real)
    assert (dest / "f0").read_text() == "new 0" and (dest / "f1").read_text() == "old 1"   # the mix a kill leaves
    note = P.finish_interrupted(tmp_path)
    assert "completed an interrupted publication (2 file(s)" in note
    assert [(dest / f"f{i}").read_text() for i in range(3)] == ["new 0", "new 1", "new 2"]
    assert P.finish_interrupted(tmp_path) is None


def _interrupted(tmp_path, monkeypatch, after=1):
    """A publication of three files killed after `after` renames: (its destination folder, its journal)."""
    moves, dest = _staged_files(tmp_path)
    real, renames = os.replace, []

    def killed(src, dst):
        if str(dst).startswith(str(dest)):
            renames.append(dst)
            if len(renames) == after + 1:
                raise SystemExit("killed")
        return real(src, dst)

    monkeypatch.setattr(P.os, "replace", killed)
    with pytest.raises(SystemExit):
        P.publish(moves, tmp_path)
    monkeypatch.setattr(P.os, "replace", real)
    return dest, tmp_path / P.JOURNAL


def test_a_journal_listing_a_file_outside_the_project_is_refused_touching_nothing(tmp_path, monkeypatch):
    """A journal that lists a destination or a removal outside its root replaced and deleted files there."""
    dest, journal = _interrupted(tmp_path / "project", monkeypatch)
    outside = tmp_path / "elsewhere.txt"
    outside.write_text("not the project's")
    todo = json.loads(journal.read_text())
    for bad in ({**todo, "removals": [str(outside)]},
                {**todo, "renames": todo["renames"] + [[str(outside.with_name(".elsewhere.txt.docgrad-new")),
                                                        str(outside), "0" * 64]]}):
        journal.write_text(json.dumps(bad))
        with pytest.raises(P.PublicationError, match="nothing was touched"):
            P.finish_interrupted(tmp_path / "project")
        assert outside.read_text() == "not the project's" and (dest / "f1").read_text() == "old 1"


def test_another_checkouts_journal_is_refused_touching_nothing(tmp_path, monkeypatch):
    dest, journal = _interrupted(tmp_path / "a", monkeypatch)
    other = tmp_path / "b"
    other.mkdir()
    (other / P.JOURNAL).write_text(journal.read_text())
    with pytest.raises(P.PublicationError, match="names the root .* not .*nothing was touched"):
        P.finish_interrupted(other)
    assert (dest / "f1").read_text() == "old 1" and (other / P.JOURNAL).exists()


def test_a_journal_whose_staged_copy_is_missing_does_not_publish_half(tmp_path, monkeypatch):
    """A copy already renamed (its destination holds its bytes) is fine; one that vanished is refused."""
    dest, journal = _interrupted(tmp_path, monkeypatch)
    (dest / ".f2.docgrad-new").unlink()
    with pytest.raises(P.PublicationError, match="staged copy .*f2.docgrad-new is missing .*nothing was touched"):
        P.finish_interrupted(tmp_path)
    assert (dest / "f1").read_text() == "old 1" and (dest / ".f1.docgrad-new").exists()


def test_sigterm_during_the_rename_step_arrives_after_it(tmp_path):
    got = []
    old = signal.signal(signal.SIGTERM, lambda *a: got.append("term"))
    try:
        with P._signals_held():
            os.kill(os.getpid(), signal.SIGTERM)
            assert got == []                       # held back while renaming
        assert got == ["term"]
    finally:
        signal.signal(signal.SIGTERM, old)


# --- a page run ----------------------------------------------------------------------------------

def test_a_run_whose_publication_fails_leaves_every_file_as_it_was_and_says_where_its_outputs_are(
        tmp_path, monkeypatch, capsys):
    root = make_project(tmp_path)
    assert main(["--root", str(root), "run", "01"]) == 0
    before = snapshot(root)
    disk_full_at_copy(3, monkeypatch)
    assert main(["--root", str(root), "run", "01", "-p", "steps", "4"]) == 1
    err = capsys.readouterr().err
    assert "nothing was published" in err and "staged outputs are kept in" in err
    assert snapshot(root) == before            # no figure, twin or notebook replaced, no .failed.ipynb
    kept = Path(err.split("kept in ")[1].split()[0])
    assert (kept / "staged").is_dir()
    shutil.rmtree(kept)


def test_an_output_outside_the_project_is_published_and_a_full_one_publishes_nothing(tmp_path, capsys):
    root, elsewhere = make_project(tmp_path / "p", ["01"]), tmp_path / "scratch"
    assert main(["--root", str(root), "run", "01", "--output", str(elsewhere / "01.ipynb")]) == 0
    assert (elsewhere / "01.ipynb").exists() and (root / "figures" / "01_page.json").exists()
    before = snapshot(root)
    full = tmp_path / "full"
    full.mkdir()
    import subprocess
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(full)]).returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (not root)")
    try:
        fd = os.open(full / "fill", os.O_WRONLY | os.O_CREAT)  # fill it to the last byte (unbuffered)
        try:
            while os.write(fd, b"\0" * 512):
                pass
        except OSError:
            pass
        finally:
            os.close(fd)
        assert main(["--root", str(root), "run", "01", "-p", "steps", "4", "--output", str(full / "01.ipynb")]) == 1
        assert "nothing was published" in capsys.readouterr().err
        assert snapshot(root) == before                        # the page's figures and twin stay as they were
    finally:
        subprocess.run(["umount", str(full)])


def test_a_teaching_record_made_with_other_settings_is_not_replaced_without_overwrite(tmp_path, capsys):
    root = make_project(tmp_path)
    assert main(["--root", str(root), "run", "01", "-p", "rerun", "True"]) == 0
    record = root / "data" / "teaching" / "01_record.json"
    committed = record.read_bytes()
    assert json.loads(committed)["settings"] == {"steps": 3}
    before = snapshot(root)
    assert main(["--root", str(root), "run", "01", "-p", "rerun", "True", "-p", "steps", "5"]) == 1
    err = capsys.readouterr().err
    assert "other settings (differ in: steps)" in err and "--overwrite" in err
    assert snapshot(root) == before            # the record and the page's figures all stay
    shutil.rmtree(err.split("kept in ")[1].split()[0])
    assert main(["--root", str(root), "run", "01", "-p", "rerun", "True", "-p", "steps", "5", "--overwrite"]) == 0
    assert json.loads(record.read_text())["settings"] == {"steps": 5}


def test_a_failed_rerun_writes_no_teaching_record(tmp_path, capsys):
    root = make_project(tmp_path)
    src = root / "notebooks" / "01_page.py"
    src.write_text(src.read_text() + "\n# %%\nraise ValueError('after the record')\n")
    assert main(["--root", str(root), "run", "01", "-p", "rerun", "True"]) == 1
    assert "nothing was published" in capsys.readouterr().err
    assert not (root / "data" / "teaching" / "01_record.json").exists()


def test_root_names_the_project_a_run_reads_and_writes(tmp_path, monkeypatch):
    here, there = make_project(tmp_path / "here", ["01"]), make_project(tmp_path / "there", ["01"])
    monkeypatch.chdir(here)
    assert main(["--root", str(there), "run", "01"]) == 0
    assert (there / "figures" / "01_page.json").exists() and (there / "notebooks" / "01_page.ipynb").exists()
    assert not (here / "figures" / "01_page.json").exists() and not (here / "notebooks" / "01_page.ipynb").exists()


# --- the report ----------------------------------------------------------------------------------

def test_report_with_root_publishes_into_that_project_and_relative_out_is_from_the_current_directory(
        tmp_path, monkeypatch):
    here, there = make_project(tmp_path / "here", ["01"]), make_project(tmp_path / "there", ["01"])
    monkeypatch.chdir(here)
    assert main(["--root", str(there), "report", "--out", "mine"]) == 0
    assert (there / "figures" / "01_chart.png").exists() and not (here / "figures" / "01_chart.png").exists()
    assert (here / "mine" / "index.html").exists() and not (there / "mine").exists()


def test_report_refuses_a_page_holding_an_error_output(reported, tmp_path, capsys):
    root = reported_copy(reported, tmp_path)
    twin = root / "notebooks" / "02_page.ipynb"
    nb = nbformat.read(str(twin), as_version=4)
    code = next(c for c in nb.cells if c.cell_type == "code" and "parameters" not in c.metadata.get("tags", []))
    code.outputs.append(nbformat.v4.new_output("error", ename="ZeroDivisionError", evalue="division by zero",
                                               traceback=[]))
    nbformat.write(nb, str(twin))
    before = snapshot(root)
    assert N.cli_report(report_args(root, no_execute=True)) == 1
    err = capsys.readouterr().err
    assert "02_page: cell" in err and "error output (ZeroDivisionError" in err
    assert snapshot(root) == before


def test_report_refuses_pages_that_read_different_result_files(reported, tmp_path, capsys):
    root = reported_copy(reported, tmp_path)
    for n, files in (("01", 32), ("02", 48)):          # a shard landed between the two pages' runs
        twin = root / "figures" / f"{n}_page.json"
        numbers = json.loads(twin.read_text())
        numbers["inputs_read"] = {"data/results": {"files": files, "sha256": f"{files:064d}"}}
        twin.write_text(json.dumps(numbers))
    before = snapshot(root)
    assert N.cli_report(report_args(root, no_execute=True)) == 1
    err = capsys.readouterr().err
    assert "pages read different results: 02_page read data/results as 48 file(s)" in err and "01_page" in err
    assert snapshot(root) == before


def test_a_page_that_reads_results_records_which_files(tmp_path, monkeypatch):
    from docgrad.results.study import files_digest
    from docgrad.runtime import pages

    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "notebooks").mkdir()
    monkeypatch.setattr(P, "INPUTS_READ", {})
    monkeypatch.setattr(pages, "INPUTS_READ", P.INPUTS_READ)
    P.note_inputs(tmp_path / "data" / "results", 3, "ab" * 32)
    pages.save_numbers("03_x", {"y": 1}, tmp_path / "figures")
    assert json.loads((tmp_path / "figures" / "03_x.json").read_text())["inputs_read"] == {
        "data/results": {"files": 3, "sha256": "ab" * 32}}
    assert files_digest([], tmp_path) != ""


def test_an_interrupted_report_leaves_the_previous_report_and_pages_intact(reported, tmp_path, monkeypatch):
    root = reported_copy(reported, tmp_path)
    before = snapshot(root)
    real = N.report.build_report

    def interrupted_while_writing_pages(nb_dir, out_dir, **kw):
        (Path(out_dir) / "01_page.html").write_text("half of a new report")
        raise KeyboardInterrupt

    monkeypatch.setattr(N.report, "build_report", interrupted_while_writing_pages)
    with pytest.raises(KeyboardInterrupt):
        N.cli_report(report_args(root, only=["02"]))
    monkeypatch.setattr(N.report, "build_report", real)
    assert snapshot(root) == before


SLOW = HEADER + '''
# %% tags=["parameters"]
wait = 60  # seconds

# %%
import time
from pathlib import Path
Path("started").write_text("yes")
time.sleep(wait)
'''


@pytest.mark.parametrize("sig,code,word", [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")])
def test_an_interrupted_run_says_one_word_and_leaves_no_kernel_files_or_staging(tmp_path, sig, code, word):
    import subprocess
    import sys
    import time

    root = make_project(tmp_path / "p", [])
    (root / "notebooks" / "01_slow.py").write_text(SLOW)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "JUPYTER_RUNTIME_DIR": str(tmp / "runtime")}
    # the run takes SIGINT as a terminal gives it, whatever this suite inherited (`make test &` ignores SIGINT)
    proc = subprocess.Popen([sys.executable, "-m", "docgrad", "--root", str(root), "run", "01"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 120
    while not (root / "started").exists() and time.time() < deadline:
        time.sleep(0.5)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == code and err.strip() == word, err     # no kernel or asyncio traceback
    time.sleep(1)
    assert [p.name for p in tmp.rglob("*") if p.is_file()] == []      # no connection file, no staged outputs
    assert not (root / "notebooks" / "01_slow.ipynb").exists()
