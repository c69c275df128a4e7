"""Page 06 (standalone chunks vs real context) executed on small result files: with a measured corpus it draws
its figures and every number its prose states is in its JSON twin; with no causal result it still runs and says
that nothing is measured (no figures); parameters it cannot use stop it at the cell that reads them (the calls
that refuse them are tested directly, the page itself once)."""

import json
import shutil
from pathlib import Path

import nbformat
import pytest
from docgrad import models
from docgrad.errors import AnalysisError
from docgrad.models import ModelError
from docgrad.results import positions
from docgrad.runtime import notebooks as N
from test_page_numbers import _found, generated_prose, json_numbers, stated_numbers
from test_positions import C, gradients, rows_of, write

ROOT = Path(__file__).resolve().parents[1]
PAGE = "06_causal_context"


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A project root holding page 06, standalone BOOKS and WEB cells (6 documents x 16 chunks) of the default
    model and a causal BOOKS cell of the same documents at W = 8C = 4096."""
    root = tmp_path_factory.mktemp("page06")
    (root / "pyproject.toml").write_text("")
    (root / "notebooks").mkdir()
    (root / "figures").mkdir()
    shutil.copy(ROOT / "notebooks" / f"{PAGE}.py", root / "notebooks")
    n, mf, m = 6, 16, 8
    Xs = gradients(1, n, mf)
    write(root / "res", "BOOKS", Xs, n, mf, shard_size=3)
    write(root / "res", "WEB", gradients(2, n, mf), n, mf)
    write(root / "res", "BOOKS", 0.7 * Xs[rows_of(n, mf, m)] + 0.6 * gradients(3, n, m), n, m, "causal", m * C)
    return root


def _run(project, out, **params):
    return N.execute_notebook(project / "notebooks" / f"{PAGE}.py", output=project / out,
                              parameters={"resamples": 100, **params}, cwd=project)


def test_page_06_compares_the_measured_corpus_and_its_twin_holds_every_stated_number(project):
    _run(project, "measured.ipynb", causal_dir=str(project / "res"), standalone_dir=str(project / "res"))
    twin = json.loads((project / "figures" / f"{PAGE}.json").read_text())
    assert twin["measured"] == ["BOOKS"] and twin["nothing_measured"] is False
    assert set(twin["not_measured"]) == {"CODE", "PAPERS", "WEB"}
    assert twin["comparisons"]["BOOKS"]["chunks_per_window"] == 8
    for fig in ("06_rho_by_mode", "06_R_by_mode", "06_loss_norm_by_position"):
        assert (project / "figures" / f"{fig}.png").stat().st_size > 10_000
    assert twin["family"]["size"] == 13 and twin["family"]["method"] == "Holm"   # 7 lags, 3 windows, noise, |g|², |G_k|²
    assert len(twin["family"]["claims"]) == 13
    assert set(twin["corpus_readings"]) == {"BOOKS", "CODE", "PAPERS", "WEB", "check"}       # the loss check, apart
    assert twin["readings"]["BOOKS"]["R_causal"] == twin["comparisons"]["BOOKS"]["causal"]["R"]["4096"]
    nb = nbformat.read(project / "measured.ipynb", as_version=4)
    prose = generated_prose(nb)
    assert any("not measured yet: CODE" in t for t in prose) and any("BOOKS (6 documents)" in t for t in prose)
    assert any(t.startswith("- **BOOKS**: ") and "of 13 resolved" in t for t in prose)
    box = _result_box(nb)
    assert "of the page's 13 causal − standalone comparisons" in box and "6 documents per corpus" in box
    values = json_numbers(twin)
    missing = [tok for text in prose for tok, x, tol, pct in stated_numbers(text)
               if not (pct and _found(values, x / 100, tol / 100)) and not _found(values, x, tol)]
    assert not missing


def test_page_06_without_causal_results_runs_and_says_nothing_is_measured(project, tmp_path):
    for f in (project / "figures").glob("06_*"):
        f.unlink()
    _run(project, "empty.ipynb", standalone_dir=str(project / "res"), causal_dir=str(tmp_path))
    twin = json.loads((project / "figures" / f"{PAGE}.json").read_text())
    assert twin["measured"] == [] and twin["nothing_measured"] is True and twin["comparisons"] == {}
    assert not list((project / "figures").glob("06_*.png"))
    nb = nbformat.read(project / "empty.ipynb", as_version=4)
    prose = "\n".join(generated_prose(nb))
    assert "**Nothing is measured yet.**" in prose and "not measured yet: BOOKS" in prose
    assert "Nothing is measured yet: no causal result at W = 4,096" in _result_box(nb)
    assert twin["family"]["size"] == 0 and twin["result_box"]["status"] == "not measured"


def _result_box(nb) -> str:
    """The page's result box: the Markdown output of the first code cell after the setup, tagged hide-input, at
    most 120 words."""
    code = [c for c in nb.cells if c.cell_type == "code"]
    setup = next(i for i, c in enumerate(code) if "setup()" in c.source)
    cell = code[setup + 1]
    assert "hide-input" in cell.metadata.get("tags", [])
    (text,) = [o["data"]["text/markdown"] for o in cell.outputs if "text/markdown" in o.get("data", {})]
    assert text.startswith("> **Result.**") and len(text.split()) <= 120 + 6          # + the Markdown markers
    return text


def _page_defaults() -> dict:
    """The values of page 06's parameters cell."""
    import jupytext

    nb = jupytext.read(ROOT / "notebooks" / f"{PAGE}.py")
    (cell,) = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    values: dict = {}
    exec(cell.source, {}, values)
    return values


@pytest.mark.parametrize("params, error, match", [
    ({"window": 1000}, AnalysisError, "window must be a positive multiple of chunk"),
    ({"corpora": ["NOPE"]}, AnalysisError, "unknown corpus 'NOPE'"),
    ({"model": "nobody"}, ModelError, "model 'nobody': expected an offline model"),
])
def test_page_06s_first_calls_refuse_parameters_it_cannot_use_before_reading_a_result(project, params, error, match):
    """The two calls page 06's first code cell makes, before it draws anything, with the page's parameters and one
    bad value: the model's identity, then the comparisons (which check chunk, window and resamples before they
    read a file, and corpus names against the cells found). The notebook-level test below runs the page itself."""
    p = {**_page_defaults(), "causal_dir": str(project / "res"), "standalone_dir": str(project / "res"),
         "resamples": 100, **params}
    with pytest.raises(error, match=match):
        page_model = models.result_model(p["model"])
        positions.page_comparisons(p["causal_dir"], p["standalone_dir"], page_model.model, page_model.revision,
                                   p["chunk"], p["window"], p["corpora"], p["resamples"], p["seed"])


def test_page_06_stops_at_the_cell_after_its_parameters_on_a_parameter_it_cannot_use(project):
    stopped = (r"failed in code cell 2 \(cell \d+ of \d+\): from docgrad import page as dg"
               r"\s+AnalysisError: window must be a positive multiple of chunk")
    with pytest.raises(N.NotebookError, match=stopped):
        _run(project, "bad.ipynb", causal_dir=str(project / "res"), standalone_dir=str(project / "res"), window=1000)
