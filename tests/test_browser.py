"""The HTML report built from the committed executed notebooks, and page 04 run in a real JupyterLab, opened in
headless Chromium as a reader would (the checks are in tools/browser_checks.py).

Needs Debian's chromium and Playwright's Python driver: `make browser` installs chromium, the dev extra the
driver. Where either is missing these tests are skipped with what to install, except under CI (CI=true), where
they fail, so CI cannot skip them silently. Deselect them with -m 'not browser'. DOCGRAD_LAB_SHOT=file.png saves
a screenshot of JupyterLab after the run.
"""

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import browser_checks as bc  # noqa: E402

# under xdist (--dist loadgroup) the report's tests share one worker, so the report is built once, and the
# JupyterLab test can run beside them on another
pytestmark = pytest.mark.browser
report_group = pytest.mark.xdist_group("browser-report")

LAB_PAGE = "04_design_effect"     # the page with the live explorer (sliders bound to a Vega chart)
LAB_TIMEOUT_S = 300               # for its cells to run in JupyterLab (about 30 s with a warm analysis cache)
LAB_RESAMPLES = 200               # the intervals' bootstrap, smaller than the page's 2,000: the lab run checks that
                                  # the page runs and its explorer redraws, not the intervals' last digit


def require_browser() -> None:
    """Skip (fail under CI=true) naming what is missing and how to install it."""
    gaps = bc.missing()
    if not gaps:
        return
    why = "the browser tests need " + " and ".join(gaps)
    if os.environ.get("CI", "").strip().lower() in ("true", "1", "yes"):
        pytest.fail(why + "; CI is set, so they fail instead of being skipped", pytrace=False)
    pytest.skip(why)


@pytest.fixture(scope="module")
def chromium():
    require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = bc.launch(pw)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def report(chromium, tmp_path_factory):
    """The HTML report of the committed executed notebooks (not re-executed)."""
    from docgrad.runtime.report import build_report, executed_notebooks

    out = tmp_path_factory.mktemp("report")
    build_report(ROOT / "notebooks", out)
    assert sorted(p.name for p in out.glob("*.html")) == sorted(
        ["index.html"] + [p.stem + ".html" for p in executed_notebooks(ROOT / "notebooks")])
    return out


@pytest.fixture(scope="module")
def reader_views(chromium, report):
    """{page: what it shows a reader on a FIRST_SCREEN viewport} for every page of the report, each with the
    requests refused while it loaded (every request outside the file system is refused)."""
    context = chromium.new_context(viewport=bc.FIRST_SCREEN)
    blocked = bc.block_network(context)
    views = {}
    for path in sorted(report.glob("*.html")):
        n = len(blocked)
        views[path.name] = bc.read_report_page(context, path) | {"requests": blocked[n:]}
    context.close()
    return views


@report_group
def test_report_pages_raise_no_script_error_and_draw_every_chart(reader_views):
    errors = {name: v["errors"] for name, v in reader_views.items() if v["errors"]}
    assert not errors, f"script errors: {errors}"
    undrawn = {name: v["charts_failed"] or "still drawing" for name, v in reader_views.items()
               if v["charts_failed"] or not v["charts_drawn"]}
    assert not undrawn, f"charts not drawn: {undrawn}"
    assert reader_views[f"{LAB_PAGE}.html"]["charts"] >= 2


@report_group
def test_report_pages_request_nothing_outside_the_file_system(reader_views):
    requests = {name: v["requests"] for name, v in reader_views.items() if v["requests"]}
    assert not requests, f"network requests (refused): {requests}"


@report_group
def test_report_pages_show_their_answer_box_on_the_first_screen(reader_views):
    boxed = {name: v for name, v in reader_views.items() if v["box_top"] is not None}
    assert {"index.html", f"{LAB_PAGE}.html"} <= boxed.keys(), f"pages with a Result box: {sorted(boxed)}"
    height = bc.FIRST_SCREEN["height"]
    below = {name: f"{v['box_top']:.0f}-{v['box_bottom']:.0f} px" for name, v in boxed.items()
             if v["box_bottom"] > height}
    assert not below, f"answer boxes not wholly on the first screen ({height} px high): {below}"


@report_group
def test_report_pages_fold_their_code(reader_views):
    unfolded = {name: v["code_shown"] for name, v in reader_views.items() if v["code_shown"] or v["opened"]}
    assert not unfolded, f"code shown unfolded (outside show-input and solution cells): {unfolded}"
    assert reader_views[f"{LAB_PAGE}.html"]["folded"] > 0


@report_group
def test_report_explorer_shows_the_librarys_R_and_redraws_it_when_a_control_moves(chromium, report):
    context = chromium.new_context(viewport={"width": 1280, "height": 1000})
    blocked = bc.block_network(context)
    page = context.new_page()
    page.goto((report / f"{LAB_PAGE}.html").as_uri())
    checks = bc.check_explorer(page, window=8192)
    context.close()
    failed = [f"{name}: {detail}" for name, ok, detail in checks if not ok]
    assert not failed and len(checks) >= 4, f"{failed or checks}"
    assert not blocked


@pytest.fixture
def lab(tmp_path):
    """JupyterLab serving a temporary folder that holds a copy of the executed page, its figures_dir set to a
    temporary folder (a live run writes nothing into the project) and LAB_RESAMPLES resamples; stopped at
    teardown."""
    figures = tmp_path / "figures"
    notebook = bc.working_copy(ROOT / "notebooks" / f"{LAB_PAGE}.ipynb", tmp_path / "work", figures_dir=str(figures),
                               resamples=LAB_RESAMPLES)
    with bc.lab_server(tmp_path / "work", tmp_path / "lab") as (url, token):
        yield url, token, notebook.name, figures


@pytest.mark.xdist_group("browser-lab")
def test_jupyterlab_runs_page_04_without_errors_and_its_live_explorer_redraws(chromium, lab):
    url, token, notebook, figures = lab
    project_figures = {p: p.stat().st_mtime_ns for p in (ROOT / "figures").glob(f"{LAB_PAGE[:2]}_*")}
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    blocked = bc.block_network(context, allowed=(url, "ws://127.0.0.1", "data:", "blob:", "about:"))
    page = context.new_page()
    try:
        checks = bc.run_in_lab(page, url, token, notebook, timeout_s=LAB_TIMEOUT_S,
                               shot=os.environ.get("DOCGRAD_LAB_SHOT"))
    finally:
        context.close()                                    # the server's teardown stops the kernel
    failed = [f"{name}: {detail}" for name, ok, detail in checks if not ok]
    assert not failed, f"{failed}; all checks: {checks}"
    assert any(name == "live sliders redraw their chart" for name, _, _ in checks), checks
    assert (figures / f"{LAB_PAGE}.json").is_file()          # the run wrote its figures into the temporary folder
    assert {p: p.stat().st_mtime_ns for p in project_figures} == project_figures
    assert not blocked, f"network requests (refused): {blocked}"
