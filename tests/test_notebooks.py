"""Notebook machinery: parameter validation, pair sync, execution progress and errors, the HTML report."""

import io
import itertools
import json
import re
from pathlib import Path

import nbformat
import pytest
from docgrad.presentation.evidence import RESULT_BOX_WORDS
from docgrad.runtime import notebooks as N
from docgrad.runtime import pages
from docgrad.runtime import report as R
from docgrad.runtime.cli import main

ROOT = Path(__file__).resolve().parents[1]

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

TINY = HEADER + '''
# %% [markdown]
# # Tiny page
#
# A first paragraph that becomes the summary.

# %% tags=["parameters"]
lengths = [2, 8]  # valid positions per document
theta = 0.0  # the logit
label = "A"
verbose = False

# %%
total = sum(lengths) + theta
print("total", total)
'''

FAILING = HEADER + '''
# %% tags=["parameters"]
x = 1

# %%
y = x + 1

# %%
z = 1 / (x - 1)  # fails
'''


@pytest.fixture
def tiny(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "notebooks").mkdir()
    src = tmp_path / "notebooks" / "01_tiny.py"
    src.write_text(TINY)
    return src


# --- parameters ---------------------------------------------------------------------------------------

def test_read_parameters_gives_defaults_types_and_help(tiny):
    params = N.read_parameters(tiny)
    assert list(params) == ["lengths", "theta", "label", "verbose"]
    assert params["lengths"] == {"default": [2, 8], "type": "list[int]", "help": "valid positions per document"}
    assert params["theta"]["type"] == "float"


def test_unknown_parameter_is_rejected_with_the_parameter_list(tiny):
    with pytest.raises(N.ParameterError) as e:
        N.validate_parameters(tiny, {"lenghts": "[1, 2]"})
    msg = str(e.value)
    assert "unknown parameter 'lenghts'" in msg
    assert "lengths: list[int] = [2, 8]" in msg and "theta: float = 0.0" in msg


@pytest.mark.parametrize("name, raw", [("theta", "abc"), ("lengths", "3"), ("lengths", "[2.5, 8]"),
                                       ("verbose", "1"), ("theta", "True")])
def test_wrong_type_is_rejected(tiny, name, raw):
    with pytest.raises(N.ParameterError, match=f"parameter '{name}' expects"):
        N.validate_parameters(tiny, {name: raw})


def test_valid_values_are_parsed_and_coerced(tiny):
    out = N.validate_parameters(tiny, {"theta": "1", "lengths": "[3, 4, 5]", "label": "B", "verbose": "True"})
    assert out == {"theta": 1.0, "lengths": [3, 4, 5], "label": "B", "verbose": True}
    assert isinstance(out["theta"], float)


def test_cli_run_list_and_unknown_parameter(tiny, capsys, monkeypatch):
    from docgrad.runtime.cli import main

    monkeypatch.chdir(tiny.parent.parent)
    assert main(["run", str(tiny), "--list"]) == 0
    assert "theta: float = 0.0  # the logit" in capsys.readouterr().out
    assert main(["run", str(tiny), "-p", "nope", "1"]) == 2
    err = capsys.readouterr().err
    assert "unknown parameter 'nope'" in err and "lengths: list[int]" in err


def test_notebook_without_parameters_cell_is_an_error(tmp_path):
    src = tmp_path / "01_x.py"
    src.write_text(HEADER + "\n# %%\nx = 1\n")
    with pytest.raises(N.NotebookError, match="no code cell tagged 'parameters'"):
        N.read_parameters(src)


def test_find_notebooks_in_order_and_only(tmp_path):
    for name in ("02_b.py", "01_a.py", "10_c.py", "notes.py"):
        (tmp_path / name).write_text(HEADER)
    assert [p.name for p in N.find_notebooks(tmp_path)] == ["01_a.py", "02_b.py", "10_c.py"]
    assert [p.name for p in N.find_notebooks(tmp_path, ["10"])] == ["10_c.py"]
    with pytest.raises(N.NotebookError, match="no notebook 07"):
        N.find_notebooks(tmp_path, ["07"])


def test_a_page_that_follows_another_sorts_after_it_and_resolves_by_its_prefix(tmp_path):
    for name in ("02_b.py", "01b_pitfalls.py", "01_a.py", "10_c.py", "01x.py", "1_bad.py"):
        (tmp_path / name).write_text(HEADER)
    found = N.find_notebooks(tmp_path)
    assert [p.name for p in found] == ["01_a.py", "01b_pitfalls.py", "02_b.py", "10_c.py"]
    assert [N.page_prefix(p) for p in found] == ["01", "01b", "02", "10"]
    assert [p.name for p in N.find_notebooks(tmp_path, ["01"])] == ["01_a.py"]     # 01 is not 01b
    assert [p.name for p in N.find_notebooks(tmp_path, ["01b"])] == ["01b_pitfalls.py"]
    assert N.resolve_notebook("01b", tmp_path).name == "01b_pitfalls.py"
    assert N.resolve_notebook("01", tmp_path).name == "01_a.py"
    assert N.resolve_notebook("01b_pitfalls", tmp_path).name == "01b_pitfalls.py"
    with pytest.raises(N.NotebookError, match="no notebook matches '01c'"):
        N.resolve_notebook("01c", tmp_path)
    assert "docgrad run 01b" in N.pair_differences(tmp_path / "01b_pitfalls.py")[0]


def test_the_repository_pages_include_01a_and_01b_after_01(tmp_path):
    names = [p.stem for p in N.find_notebooks(ROOT / "notebooks")]
    assert names.index("01_loss_reduction") + 1 == names.index("01a_gradient_accumulation")
    assert names.index("01a_gradient_accumulation") + 1 == names.index("01b_real_trainers")
    assert N.resolve_notebook("01a", ROOT / "notebooks").stem == "01a_gradient_accumulation"
    assert N.resolve_notebook("01b", ROOT / "notebooks").stem == "01b_real_trainers"


def test_cli_run_takes_a_lettered_page_prefix(tiny, capsys, monkeypatch):
    from docgrad.runtime.cli import main

    (tiny.parent / "01b_more.py").write_text(TINY.replace("theta = 0.0  # the logit", "theta = 0.5  # another logit"))
    monkeypatch.chdir(tiny.parent.parent)
    assert main(["run", "01b", "--list"]) == 0
    out = capsys.readouterr().out
    assert "parameters of 01b_more.py" in out and "theta: float = 0.5  # another logit" in out
    assert main(["run", "01", "--list"]) == 0
    assert "parameters of 01_tiny.py" in capsys.readouterr().out


@pytest.mark.parametrize("stem", ["01_loss_reduction", "01a_gradient_accumulation", "01b_real_trainers",
                                  "01c_packing_and_denominators", "01d_rl_normalisation"])
def test_every_exercise_of_a_teaching_page_has_a_solution_cell(stem):
    """Each markdown cell that poses an exercise is followed, before the next markdown cell, by a code cell tagged
    `solution` (rendered collapsed); a code exercise's own cell (its starting code and checker) comes first."""
    import jupytext

    nb = jupytext.read(ROOT / "notebooks" / f"{stem}.py")
    posed = [i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and "**Exercise " in c.source]
    assert len(posed) >= 4 if stem.startswith(("01_", "01a_")) else len(posed) >= 3
    for i in posed:
        block = list(itertools.takewhile(lambda c: c.cell_type == "code", nb.cells[i + 1:]))
        solutions = [c for c in block if "solution" in c.metadata.get("tags", [])]
        assert len(solutions) == 1, f"exercise at cell {i}: {len(solutions)} solution cells"
        after = solutions[0]
        # collapsed in JupyterLab too: code and output hidden until the student opens them
        assert after.metadata.get("jupyter") == {"outputs_hidden": True, "source_hidden": True}, f"cell {i + 1}"
    executed = nbformat.read(ROOT / "notebooks" / f"{stem}.ipynb", as_version=4)
    hidden = [c.metadata.get("jupyter", {}) for c in executed.cells if "solution" in c.metadata.get("tags", [])]
    assert hidden and all(h.get("source_hidden") and h.get("outputs_hidden") for h in hidden)


# A teaching page is one class of about 50 minutes with its exercises: at most this many words of markdown (its
# markdown cells, split on whitespace as `wc -w` counts; the text a code cell prints is not counted).
TEACHING_MARKDOWN_WORDS = 1200
# Pages still being cut to the limit (issue 52): none since 01d was rewritten.
TEACHING_PAGES_OVER_THE_LIMIT: set[str] = set()


def _markdown_words(source: Path) -> int:
    import jupytext

    return sum(len(c.source.split()) for c in jupytext.read(source).cells if c.cell_type == "markdown")


def test_no_teaching_page_carries_more_than_a_class_of_markdown():
    pages = sorted((ROOT / "notebooks").glob("01*.py"))
    assert {p.stem for p in pages} >= {"01_loss_reduction", "01a_gradient_accumulation", "01b_real_trainers",
                                      "01c_packing_and_denominators"}
    words = {p.stem: _markdown_words(p) for p in pages}
    assert {s: n for s, n in words.items()
            if n > TEACHING_MARKDOWN_WORDS and s not in TEACHING_PAGES_OVER_THE_LIMIT} == {}


@pytest.mark.parametrize("stem", ["01_loss_reduction", "01a_gradient_accumulation", "01b_real_trainers",
                                  "01c_packing_and_denominators"])
def test_a_teaching_page_opens_with_its_answer_in_a_short_box(stem):
    """The first cell holds the take-away box (a block quote) within a result box's word limit."""
    import jupytext

    first = jupytext.read(ROOT / "notebooks" / f"{stem}.py").cells[0]
    box = [line.lstrip(">") for line in first.source.splitlines() if line.startswith(">")]
    assert first.cell_type == "markdown" and box and "**What to take away.**" in box[0]
    assert len(" ".join(box).split()) <= RESULT_BOX_WORDS


# --- pairs ---------------------------------------------------------------------------------------------

def test_pair_sync_detects_an_edited_source(tiny):
    import jupytext

    jupytext.write(jupytext.read(tiny), tiny.with_suffix(".ipynb"))
    assert N.pair_differences(tiny) == []
    tiny.write_text(TINY.replace("print(\"total\", total)", "print(total)"))
    assert any("differs" in d for d in N.pair_differences(tiny))
    tiny.with_suffix(".ipynb").unlink()
    assert "missing" in N.pair_differences(tiny)[0]


@pytest.mark.parametrize("source", N.find_notebooks(ROOT / "notebooks"), ids=lambda p: p.name)
def test_every_notebook_pair_is_in_sync(source):
    assert N.pair_differences(source) == []


@pytest.mark.parametrize("executed", R.executed_notebooks(ROOT / "notebooks"), ids=lambda p: p.name)
def test_executed_pages_carry_no_progress_bars_or_tqdm_warnings(executed):
    nb = nbformat.read(executed, as_version=4)
    noise = [(i, o["text"][:80]) for i, cell in enumerate(nb.cells) for o in cell.get("outputs", [])
             if o.get("output_type") == "stream" and o.get("name") == "stderr"
             and ("%|" in o["text"] or "it/s" in o["text"] or "TqdmWarning" in o["text"])]
    assert noise == []


# --- execution -----------------------------------------------------------------------------------------

def test_execution_prints_one_line_per_notebook_and_failure_names_the_cell(tiny):
    bad = tiny.parent / "02_bad.py"
    bad.write_text(FAILING)
    old = bad.with_suffix(".ipynb")
    old.write_text("previous complete run")
    out = io.StringIO()
    with pytest.raises(N.NotebookError) as e:
        N.run_notebooks(N.find_notebooks(tiny.parent), cwd=tiny.parent.parent, out=out)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("[1/2] 01_tiny ... ok ") and lines[0].split()[-3] == "s"
    assert lines[1].startswith("[2/2] 02_bad ... FAILED after ")
    msg = str(e.value)
    assert "code cell 3" in msg and "z = 1 / (x - 1)" in msg and "ZeroDivisionError" in msg
    assert old.read_text() == "previous complete run"  # the failed run did not replace it
    assert (tiny.parent / "02_bad.failed.ipynb").exists()
    executed = nbformat.read(str(tiny.with_suffix(".ipynb")), as_version=4)
    assert "total 10.0" in executed.cells[2].outputs[0]["text"]
    assert [c.id for c in executed.cells] == ["cell-000", "cell-001", "cell-002"]  # same ids on every run
    assert executed.metadata.papermill.input_path == "notebooks/01_tiny.py"  # not papermill's temporary file
    assert executed.metadata.papermill.output_path == "notebooks/01_tiny.ipynb"


def test_a_kernel_that_dies_mid_cell_is_a_notebook_failure_that_says_so(tiny):
    dies = tiny.parent / "02_dies.py"
    dies.write_text(FAILING.replace("z = 1 / (x - 1)", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"))
    with pytest.raises(N.NotebookFailure, match=r"02_dies.py: the kernel process died while a cell ran"):
        N.stage_notebook(dies)
    assert (tiny.parent / "02_dies.failed.ipynb").exists() and not dies.with_suffix(".ipynb").exists()


# --- HTML report ---------------------------------------------------------------------------------------

def _executed(path, title, chart=True):
    cells = [nbformat.v4.new_markdown_cell(f"# {title}\n\nSummary of {title}.\n\n## More")]
    cells.append(nbformat.v4.new_code_cell("secret_formatting_code()", metadata={"tags": ["hide-input"]},
                                           outputs=[nbformat.v4.new_output("stream", text="visible prose")]))
    code = nbformat.v4.new_code_cell("chart")
    if chart:
        spec = {"$schema": "https://vega.github.io/schema/vega-lite/v6.json", "mark": "point",
                "data": {"values": [{"a": 1, "b": "</script>"}]}, "encoding": {"x": {"field": "a"}}}
        code.outputs = [nbformat.v4.new_output("execute_result", data={pages.VEGALITE_MIME: spec,
                                                                       "text/plain": "<chart>"},
                                               execution_count=1)]
    cells.append(code)
    nb = nbformat.v4.new_notebook(cells=cells)
    nbformat.write(nb, str(path))
    path.with_suffix(".py").write_text(HEADER)


def test_report_has_index_pages_navigation_and_inlined_vega(tmp_path):
    nbdir = tmp_path / "notebooks"
    nbdir.mkdir()
    _executed(nbdir / "01_first.ipynb", "First page")
    _executed(nbdir / "02_second.ipynb", "Second page with $m$ chunks", chart=False)
    (nbdir / "03_unexecuted.py").write_text(HEADER)
    index = R.build_report(nbdir, tmp_path / "report")
    text = index.read_text()
    assert "Abstract" in text and "First page" in text and "Summary of First page." in text
    assert "$m$" not in text and "<math" in text  # TeX in a title or summary becomes MathML on the index too
    assert text.index("01_first.html") < text.index("02_second.html")
    assert "03_unexecuted" not in text
    first = (tmp_path / "report" / "01_first.html").read_text()
    second = (tmp_path / "report" / "02_second.html").read_text()
    assert 'href="02_second.html"' in first and 'href="01_first.html"' in second
    assert first.count('href="index.html"') == 2  # navigation at top and bottom
    assert "window.vegaEmbed=" in first and 'vegaEmbed("#docgrad-chart-1"' in first
    assert "<\\/script>" in first  # a spec cannot close the script tag early
    assert "window.vegaEmbed=" not in second  # bundle only where there are charts
    assert "visible prose" in first and "secret_formatting_code" not in first  # hide-input cells
    for page in (first, second):  # nothing fetched from the network
        assert "require.js" not in page and "mathjax" not in page.lower() and 'src="http' not in page


def test_report_drops_widget_outputs_whose_html_would_fetch_the_widget_manager_from_a_cdn(tmp_path):
    nbdir = tmp_path / "notebooks"
    nbdir.mkdir()
    _executed(nbdir / "01_first.ipynb", "First page")
    nb = nbformat.read(str(nbdir / "01_first.ipynb"), as_version=4)
    bar = {R.WIDGET_MIME: {"model_id": "abc", "version_major": 2, "version_minor": 0},
           "text/plain": "Converting tensors: 0%"}
    nb.cells[1].outputs.append(nbformat.v4.new_output("display_data", data=bar))
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}, "version_major": 2,
                                                                            "version_minor": 0}}
    nbformat.write(nb, str(nbdir / "01_first.ipynb"))
    R.build_report(nbdir, tmp_path / "report")
    page = (tmp_path / "report" / "01_first.html").read_text()
    assert "unpkg.com" not in page and "embed-amd.js" not in page and "Converting tensors" not in page
    assert "visible prose" in page                     # the cell's other output stays


def test_report_orders_a_lettered_page_after_its_number(tmp_path):
    nbdir = tmp_path / "notebooks"
    nbdir.mkdir()
    for stem, title in (("02_second", "Second"), ("01b_more", "More"), ("01_first", "First")):
        _executed(nbdir / f"{stem}.ipynb", title, chart=False)
    assert [p.stem for p in R.executed_notebooks(nbdir)] == ["01_first", "01b_more", "02_second"]
    text = R.build_report(nbdir, tmp_path / "report").read_text()
    assert text.index("01_first.html") < text.index("01b_more.html") < text.index("02_second.html")
    more = (tmp_path / "report" / "01b_more.html").read_text()
    assert 'href="01_first.html"' in more and 'href="02_second.html"' in more     # previous / next


def test_solution_cells_render_collapsed_in_details(tmp_path):
    nbdir = tmp_path / "notebooks"
    nbdir.mkdir()
    cells = [nbformat.v4.new_markdown_cell("# Exercises\n\nSome questions.\n\n**Exercise 1.** What is 6 x 7?"),
             nbformat.v4.new_code_cell("answer = 6 * 7\nprint(answer)", metadata={"tags": ["solution"]},
                                       outputs=[nbformat.v4.new_output("stream", text="the answer is 42")]),
             nbformat.v4.new_code_cell("hidden_formatting()", metadata={"tags": ["solution", "hide-input"]},
                                       outputs=[nbformat.v4.new_output("stream", text="prose only")]),
             nbformat.v4.new_code_cell("print('not a solution')",
                                       outputs=[nbformat.v4.new_output("stream", text="always open")])]
    nbformat.write(nbformat.v4.new_notebook(cells=cells), str(nbdir / "01_ex.ipynb"))
    (nbdir / "01_ex.py").write_text(HEADER)
    R.build_report(nbdir, tmp_path / "report")
    page = (tmp_path / "report" / "01_ex.html").read_text()
    opening = '<details class="docgrad-solution"><summary>Solution</summary>'
    assert page.count(opening) == 2 and page.count("</details>") == 3  # the third folds the plain cell's code
    assert page.count('<details class="docgrad-code">') == 1              # a solution's code is not folded twice
    first, second = (page.index(opening), page.index(opening, page.index(opening) + 1))
    closes = [i for i in range(len(page)) if page.startswith("</details>", i)]
    assert first < page.index("the answer is 42") < closes[0] < second     # code and output inside, collapsed
    assert "answer = 6" in page[first:closes[0]] or "answer</span>" in page[first:closes[0]]
    assert second < page.index("prose only") < closes[1]
    assert "hidden_formatting" not in page                                 # hide-input still applies
    assert page.index("always open") > closes[1]                            # other cells stay outside
    assert "<details open" not in page


def _folds(page):
    """(start, end) of every <details class="docgrad-code"> element of a page."""
    opening = '<details class="docgrad-code"><summary>show code</summary>'
    spans, i = [], page.find(opening)
    while i >= 0:
        spans.append((i, page.index("</details>", i)))
        i = page.find(opening, i + 1)
    return spans


def _folding_page(path, headline=True):
    v4 = nbformat.v4
    out = [v4.new_output("stream", text="plain output")]
    table = v4.new_output("execute_result", execution_count=4,
                          data={"text/html": '<table class="dataframe"><tr><td>R16K_HEAD</td></tr></table>',
                                "text/plain": "R16K_HEAD"})
    cells = [v4.new_markdown_cell("# Design effect\n\n" + " ".join(f"word{i}" for i in range(60))),
             v4.new_code_cell("plain_code(1)", outputs=out, execution_count=1),
             v4.new_code_cell("secret_formatting_code()", metadata={"tags": ["hide-input"]}, execution_count=2,
                              outputs=[v4.new_output("stream", text="hidden-input prose")]),
             v4.new_code_cell("worked_example(2)", metadata={"tags": ["show-input"]}, execution_count=3,
                              outputs=[v4.new_output("stream", text="worked output")]),
             v4.new_markdown_cell("## Headline: R(16K)"),
             v4.new_code_cell("headline_frame", outputs=[table], execution_count=4,
                              metadata={"tags": ["headline"] if headline else []})]
    nbformat.write(v4.new_notebook(cells=cells), str(path))
    path.with_suffix(".py").write_text(HEADER)


def test_report_folds_code_behind_show_code_except_hide_and_show_input(tmp_path):
    nbdir = tmp_path / "notebooks"
    nbdir.mkdir()
    _folding_page(nbdir / "04_x.ipynb")
    R.build_report(nbdir, tmp_path / "report")
    page = (tmp_path / "report" / "04_x.html").read_text()
    folds = _folds(page)
    assert len(folds) == 2 and "<details open" not in page     # plain and headline cells, collapsed
    (start, end), _ = folds
    assert start < page.index("plain_code") < end < page.index("plain output")  # code folded, output outside
    assert "secret_formatting_code" not in page and "hidden-input prose" in page
    shown = page.index("worked_example")
    assert not any(a < shown < b for a, b in folds) and page.index("worked output") > shown
    assert "plain_code(1)" in nbformat.read(str(nbdir / "04_x.ipynb"), as_version=4).cells[1].source


def test_index_opens_with_the_headline_cells_outputs_and_short_contents(tmp_path):
    nbdir = tmp_path / "notebooks"
    nbdir.mkdir()
    _folding_page(nbdir / "04_x.ipynb")
    _executed(nbdir / "05_chart.ipynb", "Chart page")
    chart = nbformat.read(str(nbdir / "05_chart.ipynb"), as_version=4)
    chart.cells[2].metadata["tags"] = ["headline"]                 # a Vega-Lite chart as a second headline
    nbformat.write(chart, str(nbdir / "05_chart.ipynb"))
    text = R.build_report(nbdir, tmp_path / "report").read_text()
    assert text.index("<h2>Headline</h2>") < text.index("R16K_HEAD") < text.index('vegaEmbed("#docgrad-headline-1"')
    assert text.index('vegaEmbed("#docgrad-headline-1"') < text.index("<h2>Abstract</h2>") < text.index("Contents")
    assert text.count("window.vegaEmbed=") == 1                    # the Vega JavaScript inlined once
    assert 'href="04_x.html">Design effect</a>' in text[:text.index("<h2>Abstract</h2>")]  # links to its page
    assert "headline_frame" not in text                           # outputs only, no code
    assert "word39 …" in text and "word40" not in text            # contents: first paragraph cut at 40 words


def test_headline_cells_of_pages_numbering_their_cells_alike_keep_unique_ids():
    v4 = nbformat.v4
    cell = v4.new_code_cell("headline_frame", metadata={"tags": ["headline"]})
    cell.id = "cell-003"                               # every executed page numbers its cells cell-000, cell-001...
    nbs = [v4.new_notebook(cells=[cell]), v4.new_notebook(cells=[cell])]
    ids = [c.id for c in R.headline_cells(nbs)]
    assert len(set(ids)) == 2 and all("cell-003" in i for i in ids)
    assert nbs[0].cells[0].id == "cell-003"           # the pages themselves are left as they are


def test_index_without_headline_cells_has_no_headline_section(tmp_path):
    nbdir = tmp_path / "notebooks"
    nbdir.mkdir()
    _folding_page(nbdir / "04_x.ipynb", headline=False)
    text = R.build_report(nbdir, tmp_path / "report").read_text()
    assert "Headline" not in text and "R16K_HEAD" not in text and "window.vegaEmbed=" not in text
    assert "<h2>Abstract</h2>" in text and 'href="04_x.html"' in text


def test_report_without_executed_notebooks_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no executed notebooks"):
        R.build_report(tmp_path, tmp_path / "report")


def test_altair_renderer_emits_valid_vegalite_mime_and_png():
    import altair as alt
    import pandas as pd

    pages.enable_altair_renderer()
    chart = alt.Chart(pd.DataFrame({"a": [1, 2]})).mark_point().encode(x="a")
    bundle, _ = alt.renderers.get()(chart.to_dict())
    assert set(bundle) == {pages.VEGALITE_MIME, "image/png", "text/plain"}
    out = nbformat.v4.new_output("display_data", data=bundle)
    nbformat.validate(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(outputs=[out])]))
    json.dumps(bundle)


def test_report_no_execute_rebuilds_html_only_and_refuses_stale_pairs(tiny, monkeypatch, capsys):
    import argparse

    import jupytext

    monkeypatch.chdir(tiny.parent.parent)
    args = argparse.Namespace(notebooks="notebooks", only=None, no_html=False, no_execute=True, out="report")
    assert N.cli_report(args) == 1  # no executed twin yet: refused, nothing executed
    assert "stale" in capsys.readouterr().err and not tiny.with_suffix(".ipynb").exists()
    jupytext.write(jupytext.read(tiny), tiny.with_suffix(".ipynb"))
    assert N.cli_report(args) == 0
    assert (tiny.parent.parent / "report" / "01_tiny.html").exists()


def test_math_becomes_mathml_outside_code_and_bad_tex_is_kept():
    page = ('<p>$$\\rho(\\Delta) = \\frac{a}{b}$$ and $\\sigma^2$ cost $5</p>'
            '<pre>$x$ stays</pre><code>$y$</code><p>$\\notamacro{$ and $a &lt; b$</p>')
    out = R.math_to_mathml(page)
    assert out.count('display="block"') == 1 and out.count('display="inline"') >= 2
    assert "<mfrac>" in out and "&#x003C3;" in out  # \frac and sigma were converted
    assert "<pre>$x$ stays</pre>" in out and "<code>$y$</code>" in out  # code is left alone
    assert "cost $5" in out  # a lone dollar is not math
    assert "&#x0003C;" in out  # HTML-escaped < inside math was unescaped before conversion


def test_readme_headline_numbers_match_the_executed_design_effect_pages():
    import re

    numbers = json.loads((ROOT / "figures" / "04_design_effect.json").read_text())
    readme = (ROOT / "README.md").read_text()
    quoted = {m["corpus"]: (m["r"], m["lo"], m["hi"]) for m in re.finditer(
        r"(?P<r>\d+\.\d\d) \[(?P<lo>\d+\.\d\d), (?P<hi>\d+\.\d\d)\] for (?:the )?(?P<corpus>[A-Z]+)", readme)}
    first, gemma = (numbers["by_model"][m["label"]] for m in numbers["models"])
    computed = {c["corpus"]: tuple(f"{x:.2f}" for x in (c["R_16K"], *c["R_16K_ci"])) for c in first["cells"]}
    books = computed.pop("BOOKS")               # 3 sources: page 04 gives BOOKS no interval, and neither does README
    assert quoted == computed
    assert f"R(16K) is {books[0]} for BOOKS (3 sources: no interval)" in " ".join(readme.split())
    books = first["sources"]["BOOKS"]
    assert f"a percentile over {books['n_sources']} sources is no 95% interval" in " ".join(readme.split())
    assert "(3 sources: no interval)" in numbers["result_box"] and "sources resampled" not in numbers["result_box"]
    second = readme.split("The second model's four cells")[1].split("\n\n")[0]
    quoted2 = {m[1]: m.groups()[1:] for m in re.finditer(r"([A-Z]+) (\d+\.\d\d) \[(\d+\.\d\d), (\d+\.\d\d)\]", second)}
    assert quoted2 == {c["corpus"]: tuple(f"{x:.2f}" for x in (c["R_16K"], *c["R_16K_ci"])) for c in gemma["cells"]}
    cmp = json.loads((ROOT / "figures" / "04c_beside_the_published_study.json").read_text())
    papers = cmp["model_comparison"]["between_models"][0]["by_corpus"]["PAPERS"]
    assert papers["paired"] and papers["resolved"]
    assert (f"by {-papers['diff']:.2f} (Holm-adjusted interval {-papers['ci'][1]:.3g} to {-papers['ci'][0]:.3g})"
            in " ".join(second.split()))
    assert all(d["status"] == "not established" for d in cmp["decisions"].values()) == ("none is resolved" in second)


def test_readme_model_regime_sentence_matches_the_executed_design_effect_page():
    """The README quotes page 04's line on the models; its numbers must be what the page computed."""
    line = json.loads((ROOT / "figures" / "04_design_effect.json").read_text())["regime_line"]
    text = " ".join((ROOT / "README.md").read_text().split())
    smol = line.split("SmolLM2-135M-Instruct ")[1].split(";")[0]      # '14% to 19% (without ... 1.16 to 1.54)'
    share, rest = smol.split(" (without the norm gains R(16K) moves by at most ")
    dR, factor = rest.rstrip(")").split(", B_simple by a factor of ")
    assert "SmolLM2-135M-Instruct: instruction-tuned, 4-bit Q4_1, no start token" in line
    assert f"Its mean gradient is {share} of a chunk's squared gradient norm" in text
    assert f"R(16K) moves by at most {dR} and B_simple by a factor of {factor}," in text
    published = line.split("the published base checkpoints ")[1].split(". ")[0]
    assert f"against {published} in the published base checkpoints" in text


def test_readme_states_the_model_regime_in_the_words_of_page_04s_result_box():
    """docs/methods.md, addendum 2026-12-07, section 6: README says what the regime does to R as page 04 does."""
    note = json.loads((ROOT / "figures" / "04_design_effect.json").read_text())["regime_note"]
    assert note and " ".join(note.split()) in " ".join((ROOT / "README.md").read_text().split())


def test_readme_replication_numbers_match_the_executed_comparison_page():
    """The README quotes page 04c's replication of PAPERS - CODE on documents 16-47; it must be what the page read."""
    cmp = json.loads((ROOT / "figures" / "04c_beside_the_published_study.json").read_text())
    lab, lines = next(iter(cmp["replication_lines"].items()))
    text = " ".join((ROOT / "README.md").read_text().split())
    line = next(ln for ln in lines if ln.startswith("- pooled PAPERS − CODE"))
    rep = line.split("; replication ")[1]
    d, lo, hi = (float(x) for x in rep.split(" (Holm")[0].replace("PAPERS − CODE ", "").replace("[", "")
                 .replace("]", "").replace(",", "").split())
    assert f"PAPERS − CODE is {d:.2f} (Holm interval {lo:.2f} to {hi:.2f}): **not replicated**" in text
    assert line.endswith("→ not replicated") and cmp["replicated"][lab]["PAPERS > CODE"] == "not replicated"


def test_readme_bf16_numbers_match_the_executed_sketching_page():
    """The README quotes page 02's bf16 record and cell check; they must be what the page computed."""
    prec = json.loads((ROOT / "figures" / "02_sketching.json").read_text())["precision"]
    text = " ".join((ROOT / "README.md").read_text().split("For SmolLM2 (`make probe-bf16`)")[1].split("\n- ")[0].split())
    g, c = prec["gate"], prec["cell_checks"]["BOOKS"]
    assert f"median cosine over {g['chunks']} chunks is {g['median_cosine']:.4f}" in text
    assert f"{len(g['tail_rows'])} chunks fall below {g['tail_cosine']}" in text
    assert f"up to {g['max_sqnorm_ratio']:.2f} times" in text
    assert (f"R(16K) {c['R']:.2f} against {c['R_reference']:.2f} in float32, paired difference {c['diff']:.2f} "
            f"(95% interval {c['diff_ci'][0]:.2f} to {c['diff_ci'][1]:+.2f})") in text
    assert g["passes"] and c["within"]
    im, eot = prec["contexts"]                    # <|im_start|>, <|endoftext|> ahead of every chunk
    assert (im["other_label"].startswith("<|im_start|>") and eot["other_label"].startswith("<|endoftext|>"))
    back = "; ".join(" and ".join(f"{t['cosine_other']:.4f}" for t in x["tail"]) for x in (im, eot))
    assert f"both tail chunks are faithful again (cosines {back})" in text
    assert all(t["cosine_other"] >= g["tail_cosine"] for x in (im, eot) for t in x["tail"])
    worst = [min(t["cosine"] for t in x["other_tail"]) for x in (im, eot)]
    assert f"another chunk fails instead, at cosine {worst[0]:.2f} and at {worst[1]:.2f}" in text
    assert [len(x["other_tail"]) for x in (im, eot)] == [1, 1]
    f = [v for x in (im, eot) for v in x["spike_factors"]]
    assert min(f) > 1 and f"at {min(f):.1f} to {max(f):.1f} times the squared norm" in text


def test_readme_causal_numbers_match_the_executed_causal_page():
    """The README quotes page 06's Holm family for the causal cells and its check; it must be what the page
    computed."""
    twin = json.loads((ROOT / "figures" / "06_causal_context.json").read_text())
    fam, check = twin["family"], twin["check"]
    text = " ".join((ROOT / "README.md").read_text().split("The causal-context results")[1].split("```")[0].split())
    res = {(r["corpus"], r["quantity"], r["at"]): r for r in fam["rows"] if r["resolved"]}
    assert f"{fam['size']} causal − standalone comparisons of the gradients" in text
    assert f"and {len(res)} are resolved" in text
    R = res[("PAPERS", "R", 4096)]
    assert (f"lower R(4,096), by {-R['value']:.3f} (Holm-level interval {-R['ci'][1]:.3f} to {-R['ci'][0]:.3f})"
            in text)
    assert f"{res[('PAPERS', 'window_noise', 4096)]['value']:.3f} times the window noise" in text
    g, G = res[("WEB", "sqnorm_last", 3584)], res[("WEB", "mean_norm_last", 3584)]
    assert f"larger |g|², by {g['value']:.3g} (Holm-level interval {g['ci'][0]:.3g} to {g['ci'][1]:.3g})" in text
    assert f"larger |G_k|², by {G['value']:.3g} ({G['ci'][0]:.3g} to {G['ci'][1]:.3g})" in text
    assert not any(k[0] in ("BOOKS", "CODE") for k in res) and "nothing is resolved for BOOKS and CODE" in text
    assert not any(k[1] == "loss_last" for k in res)                          # the loss is the check, apart
    loss = sorted(-r["value"] for r in check["rows"] if r["resolved"])
    assert len(loss) == check["size"] == 4 and f"by {loss[0]:.3f} to {loss[-1]:.3f} nats per token" in text


@pytest.mark.parametrize("figure", sorted((ROOT / "figures").glob("*.png")), ids=lambda p: p.name)
def test_committed_figures_draw_marks_not_just_axes_and_legend(figure):
    """An invalid encoding (e.g. stacked bars on a log scale) renders an empty frame with its legend: the
    coloured pixels are then only the legend swatches (~0.1% of the image; real charts here have >= 1%)."""
    import numpy as np
    from PIL import Image

    rgb = np.asarray(Image.open(figure).convert("RGB")).astype(int)
    coloured = (rgb.max(axis=-1) - rgb.min(axis=-1) > 40).mean()
    assert coloured > 0.005, f"{figure.name}: only {coloured:.2%} of pixels coloured - are the marks drawn?"


# --- nothing half-done is published ----------------------------------------------------------------------

STAGED = HEADER + '''
# %% tags=["parameters"]
fail = False  # fail after the numbers are saved

# %%
from docgrad.runtime.pages import save_numbers

_ = save_numbers("01_staged", {"x": 1})

# %%
assert not fail, "asked to fail"
'''


@pytest.fixture
def staged(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "figures").mkdir()
    src = tmp_path / "notebooks" / "01_staged.py"
    src.write_text(STAGED)
    return src


def test_a_failed_run_publishes_none_of_its_figures_and_a_successful_run_all(staged):
    root = staged.parent.parent
    twin = root / "figures" / "01_staged.json"
    twin.write_text("numbers of the last complete run")
    with pytest.raises(N.NotebookError, match="nothing was published"):
        N.execute_notebook(staged, parameters={"fail": True}, cwd=root)
    assert twin.read_text() == "numbers of the last complete run"
    N.execute_notebook(staged, cwd=root)
    assert json.loads(twin.read_text()) == {"x": 1}


def test_an_output_path_that_cannot_be_written_is_refused_before_the_kernel_starts(staged):
    from docgrad.errors import DocgradError

    (staged.parent / "plain").write_text("x")
    with pytest.raises(DocgradError, match="is a file, not a directory"):
        N.execute_notebook(staged, output=staged.parent / "plain" / "out.ipynb", cwd=staged.parent.parent)


def test_a_page_executed_with_parameters_is_not_in_sync_with_its_source(staged):
    N.execute_notebook(staged, cwd=staged.parent.parent)
    assert N.pair_differences(staged) == []
    N.execute_notebook(staged, parameters={"fail": False}, cwd=staged.parent.parent)
    (diff,) = N.pair_differences(staged)
    assert "executed with parameters {'fail': False}" in diff


def test_report_only_one_page_refuses_to_publish_a_stale_other_page(tiny, monkeypatch, capsys):
    import argparse

    monkeypatch.chdir(tiny.parent.parent)
    second = tiny.parent / "02_tiny.py"
    second.write_text(TINY)
    N.run_notebooks(N.find_notebooks(tiny.parent), cwd=tiny.parent.parent, out=io.StringIO())
    tiny.write_text(TINY.replace("print(\"total\", total)", "print(\"sum\", total)"))   # page 01 is now stale
    args = argparse.Namespace(notebooks=str(tiny.parent), only=["02"], no_html=False, no_execute=False,
                              out=str(tiny.parent.parent / "report"))
    assert N.cli_report(args) == 1
    assert "01_tiny.py" in capsys.readouterr().err and not (tiny.parent.parent / "report").exists()


def test_an_optional_parameter_takes_none_or_a_string_only(tmp_path):
    src = tmp_path / "01_opt.py"
    src.write_text(HEADER + '\n# %% tags=["parameters"]\nrevision = None  # hub revision\n')
    assert N.validate_parameters(src, {"revision": "step143000"}) == {"revision": "step143000"}
    assert N.validate_parameters(src, {"revision": "None"}) == {"revision": None}
    with pytest.raises(N.ParameterError, match="parameter 'revision' expects"):
        N.validate_parameters(src, {"revision": "[1, 2]"})


def test_json_twins_keep_six_significant_digits():
    out = pages.round_significant({"a": 4.3014658526706375, "b": [1.0000000000000002, -0.00026123456789, 0.0],
                                   "c": 3, "d": "x", "e": None, "f": 12345678.9})
    assert out == {"a": 4.30147, "b": [1.0, -0.000261235, 0.0], "c": 3, "d": "x", "e": None, "f": 12345700.0}


@pytest.mark.parametrize("twin", sorted((ROOT / "figures").glob("[0-9][0-9]*_*.json")), ids=lambda p: p.name)
def test_committed_json_twins_are_rounded(twin):
    data = json.loads(twin.read_text())
    assert pages.round_significant(data) == data


# --- the notebooks in JupyterLab (jupytext's contents manager, as JupyterLab uses it) ------------------------

SOURCES = N.find_notebooks(ROOT / "notebooks")


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_a_source_saved_unchanged_by_jupytext_is_byte_identical(source):
    """Opening and saving a page in JupyterLab must not rewrite its header (kernel name, jupytext version)."""
    import jupytext

    assert jupytext.writes(jupytext.read(source), fmt="py:percent") == source.read_text()


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_a_committed_pair_opens_in_jupyterlab_even_when_the_ipynb_is_newer(source, tmp_path):
    """JupyterLab's jupytext refuses a pair whose .ipynb is newer than the .py unless their inputs match; a
    checkout can leave either file newer, so the inputs must match."""
    import os
    import shutil

    from jupyter_server.services.contents.largefilemanager import LargeFileManager
    from jupytext.sync_contentsmanager import build_sync_jupytext_contents_manager_class

    for f in (source, source.with_suffix(".ipynb")):
        shutil.copy(f, tmp_path / f.name)
    os.utime(tmp_path / source.name, (1_000_000_000, 1_000_000_000))       # the .py much older
    cm = build_sync_jupytext_contents_manager_class(LargeFileManager)(root_dir=str(tmp_path))
    for name in (source.name, source.with_suffix(".ipynb").name):
        model = cm.get(name, content=True)
        assert model["type"] == "notebook" and len(model["content"]["cells"]) > 3


def test_docgrad_run_leaves_a_pair_jupyterlab_opens_also_after_a_parameterised_run(staged):
    from jupyter_server.services.contents.largefilemanager import LargeFileManager
    from jupytext.sync_contentsmanager import build_sync_jupytext_contents_manager_class

    cm = build_sync_jupytext_contents_manager_class(LargeFileManager)(root_dir=str(staged.parent))
    for params in ({}, {"fail": False}):
        N.execute_notebook(staged, parameters=params, cwd=staged.parent.parent)
        assert staged.with_suffix(".ipynb").stat().st_mtime <= staged.stat().st_mtime
        assert cm.get(staged.with_suffix(".ipynb").name, content=True)["type"] == "notebook"


# --- legend interaction: every legend-bound selection lives where the legend comes from ------------------------

LEGEND_CHANNELS = ("color", "fill", "stroke", "shape", "opacity", "size", "strokeDash")


def _encodes(view: dict, field: str) -> bool:
    enc = view.get("encoding", {})
    return any(isinstance(enc.get(ch), dict) and enc[ch].get("field") == field for ch in LEGEND_CHANNELS)


def legend_selection_problems(spec: dict) -> list[str]:
    """A selection bound to a legend must be defined on the view that draws that legend: in a layer, Vega-Lite
    builds the legend from the first layer that encodes the field, so the selection must live on that layer
    (a selection on another layer, or on a layer without the field, makes legend clicks do nothing)."""
    named, layer_lists, found = {}, [], []

    def walk(node, owner=None):
        if isinstance(node, dict):
            if "name" in node and ("mark" in node or "layer" in node):
                named[node["name"]] = node
            if isinstance(node.get("layer"), list):
                layer_lists.append(node["layer"])
            for p in node.get("params", []) or []:
                if p.get("bind") == "legend":
                    found.append((p, node))
            for k, v in node.items():
                if k != "params":
                    walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(spec)
    out = []
    for p, owner in found:
        views = [named[v] for v in p.get("views", []) if v in named] or [owner.get("spec", owner)]
        for f in (p.get("select") or {}).get("fields", []):
            if not any(_encodes(v, f) for v in views):
                out.append(f"{p['name']}: legend of {f!r} bound on a view that does not encode {f!r}")
            for layers in layer_lists:
                first = next((v for v in layers if _encodes(v, f)), None)
                if first is not None and any(v in layers for v in views) and not any(v is first for v in views):
                    out.append(f"{p['name']}: legend of {f!r} bound on a later layer, not the first that encodes it")
    return out


def test_legend_selection_check_catches_a_selection_on_the_wrong_layer():
    import altair as alt
    import pandas as pd

    df = pd.DataFrame({"x": [1, 2], "y": [1, 2], "corpus": ["A", "B"]})
    pick = alt.selection_point(fields=["corpus"], bind="legend")
    base = alt.Chart(df)
    bad = alt.layer(base.mark_rule().encode(x="x"), base.mark_line().encode(x="x", y="y", color="corpus")).add_params(pick)
    late = alt.layer(base.mark_point().encode(x="x", y="y", color="corpus"),
                     base.mark_line().encode(x="x", y="y", color="corpus").add_params(pick))
    good = alt.layer(base.mark_point().encode(x="x", y="y", color="corpus").add_params(pick),
                     base.mark_line().encode(x="x", y="y", color="corpus"))
    assert legend_selection_problems(bad.to_dict()) and legend_selection_problems(late.to_dict())
    assert legend_selection_problems(good.to_dict()) == []


@pytest.mark.parametrize("executed", R.executed_notebooks(ROOT / "notebooks"), ids=lambda p: p.name)
def test_every_legend_selection_of_a_page_is_bound_where_its_legend_is_drawn(executed):
    nb = nbformat.read(executed, as_version=4)
    problems = [f"cell {i}: {p}" for i, cell in enumerate(nb.cells) for o in cell.get("outputs", [])
                for mime, data in o.get("data", {}).items() if "vegalite" in mime
                for p in legend_selection_problems(data)]
    assert problems == []


def test_a_successful_run_leaves_none_of_its_pages_earlier_figures_behind(staged):
    """A run with other parameters (page 06 with another window) must not leave figures of the earlier run
    beside its new twin; other pages' figures are untouched, and a failed run removes nothing."""
    root = staged.parent.parent
    stale, other = root / "figures" / "01_old_window.png", root / "figures" / "01b_other_page.png"
    stale.write_bytes(b"png of an earlier run")
    other.write_bytes(b"another page")
    with pytest.raises(N.NotebookError):
        N.execute_notebook(staged, parameters={"fail": True}, cwd=root)
    assert stale.exists()
    N.execute_notebook(staged, cwd=root)
    assert not stale.exists() and other.exists() and (root / "figures" / "01_staged.json").exists()


@pytest.mark.parametrize("name,value,needle", [("seed", -5, "a seed is a non-negative integer"),
                                               ("resamples", 7, "resamples is 0 (no intervals) or 40"),
                                               ("chunk", 1, "at least 2 tokens"),
                                               ("documents", "5:2", "A:B with 0 <= A < B"),
                                               ("documents", "0-16", "A:B with 0 <= A < B"),
                                               ("corpora", [], "name at least one")])
def test_page_parameters_out_of_range_are_refused_before_the_kernel_starts(name, value, needle):
    source = ROOT / "notebooks" / "03_correlation_by_lag.py"
    with pytest.raises(N.ParameterError, match=re.escape(needle)):
        N.validate_parameters(source, {name: value})


def test_page_04s_published_documents_range_is_checked_before_the_kernel_starts():
    source = ROOT / "notebooks" / "04_design_effect.py"
    with pytest.raises(N.ParameterError, match=re.escape("parameter 'published_documents' = '16:0'")):
        N.validate_parameters(source, {"published_documents": "16:0"})
    assert N.validate_parameters(source, {"published_documents": "0:8"}) == {"published_documents": "0:8"}


def test_page_02_sketch_buckets_are_range_checked_before_the_kernel_starts():
    source = ROOT / "notebooks" / "02_sketching.py"
    with pytest.raises(N.ParameterError, match="16 to 4194304 buckets"):
        N.validate_parameters(source, {"buckets": "[3, 1024]"})
    assert N.validate_parameters(source, {"buckets": "[1024, 2048]"}) == {"buckets": [1024, 2048]}


def test_docgrad_run_refuses_a_reversed_document_range_without_starting_a_kernel(capsys, monkeypatch):
    def no_kernel(*a, **k):
        raise AssertionError("a kernel was started")

    monkeypatch.setattr(N, "execute_notebook", no_kernel)
    assert main(["run", "04c", "-p", "documents", "5:2"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "parameter 'documents' = '5:2'" in err.splitlines()[0]


def test_readme_states_the_rounding_reading_page_04d_read_with_its_draws():
    """README's rounding sentence quotes page 04d's common-random-number reading: each corpus's change with its
    interval and CODE's draws alone, as the page computed them."""
    line = json.loads((ROOT / "figures" / "04d_model_regime.json").read_text())["crn_line"]
    text = " ".join((ROOT / "README.md").read_text().split())
    for corpus in ("CODE", "WEB"):
        said = line.split(f"{corpus} ")[1].split(" (")[0]                  # '−39.9% [−93.0%, +1.9%]'
        assert f"{corpus} (R(16K)" in text or f"for {corpus}" in text
        assert said in text, (corpus, said)
    assert line.split("CODE ")[1].split("each draw alone ")[1].split(")")[0] in text


def test_readme_states_the_training_test_decision_as_page_07_computed_it():
    """README lists page 07's decision: its per-corpus sentences, and the checkpoints' b / R and the contiguous CODE
    runs' steps to L* it quotes, as the executed page read them."""
    numbers = json.loads((ROOT / "figures" / "07_does_R_predict_learning.json").read_text())
    text = " ".join((ROOT / "README.md").read_text().split())
    assert numbers["complete"] and len(numbers["answers"]) == 2
    for answer in numbers["answers"]:
        assert f"- {answer}" in text
    code = numbers["R"]["CODE"]
    alone = [f"{32 / cp['R']:.1f}" for cp in code["checkpoints"]]
    steps = ", ".join(str(s) for s in code["checkpoint_steps"][:-1]) + " and " + str(code["checkpoint_steps"][-1])
    assert f"alone give 32 / R = {alone[0]}, {alone[1]} and {alone[2]} at steps {steps}" in text
    contiguous = numbers["steps"]["CODE"]["contiguous"]
    assert f"reach L* at steps {min(contiguous):.0f} to {max(contiguous):.0f}" in text
    decisions = {c: r["decision"] for c, r in numbers["readings"].items()}
    row = next(line for line in (ROOT / "README.md").read_text().splitlines() if line.startswith("| `07_"))
    assert ("for CODE, R predicts learning" in row) == (decisions["CODE"] == "R predicts learning")
    assert ("the WEB control is consistent" in row) == (decisions["WEB"] == "consistent")
