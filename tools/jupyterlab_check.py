"""Open pages in a real JupyterLab, headless, and check what a user sees: each opens without a dialog, its cells
run to the end without an error, its charts are interactive (Vega views drawn by the live widget renderer,
not the static PNG), and a chart with sliders (page 04's explorer) redraws when one moves.

    .venv/bin/python tools/jupyterlab_check.py [--notebook notebooks/01_loss_reduction.ipynb | --all] [--shot out.png]

Needs Debian's chromium (`apt-get install chromium`) and `pip install playwright` (its own browser download
does not work offline; the system Chromium is used). The check runs on a temporary git worktree of HEAD (with the
ignored caches it needs linked in), so the figures a live run rewrites are not the project's. It waits on what a
user waits on: the kernel idle and every code cell executed; every wait has a timeout that ends in a failed
check, never a traceback. Prints one line per check (and, with --all, one summary line per page); exits 1 if any
check fails.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
CACHES = ("data/corpora/cache", "cache")      # ignored folders a page reads (span caches, the analysis cache)

KERNEL_IDLE = ("() => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;"
               " const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;"
               " return !!k && k.status === 'idle'; }")
# finished: the kernel is idle and no cell is queued or running (a run stops at the first error, leaving the
# cells after it unexecuted, so "every cell has an execution count" alone would wait forever)
SETTLED = ("() => { const w = window.jupyterapp.shell.currentWidget;"
           " const queued = [...document.querySelectorAll('.jp-InputPrompt')].some(e => e.textContent.includes('*'));"
           " return w.sessionContext.session.kernel.status === 'idle' && !queued; }")
EXECUTED = ("() => { const code = window.jupyterapp.shell.currentWidget.content.widgets.filter("
            "c => c.model.type === 'code'); return [code.filter(c => c.model.executionCount !== null).length,"
            " code.length]; }")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check_page(page, port: int, notebook: str, timeout: float, shot: str | None) -> list[tuple[str, bool, str]]:
    """The checks of one page, as (name, ok, detail); a wait that times out is a failed check."""
    from playwright.sync_api import Error

    out = []
    try:
        # ?reset: a fresh workspace, so no tab of an earlier page is restored beside this one (its outputs
        # would be counted by the checks below)
        page.goto(f"http://127.0.0.1:{port}/lab/tree/{notebook}?reset", timeout=120_000)
        page.wait_for_function(KERNEL_IDLE, timeout=120_000)
    except Error as e:
        return [("opens with its kernel idle", False, f"not within 120 s ({type(e).__name__})")]
    dialogs = page.locator(".jp-Dialog").all_inner_texts()
    out.append(("opens without a dialog", not dialogs, "; ".join(d[:120] for d in dialogs)))
    t0 = time.time()
    try:
        page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
        time.sleep(5)
        while True:                                # settled twice, 5 s apart: not between two cells
            page.wait_for_function(SETTLED, timeout=max(1.0, timeout - (time.time() - t0)) * 1000, polling=1000)
            time.sleep(5)
            if page.evaluate(SETTLED):
                break
    except Error as e:
        out.append(("every cell runs", False, f"not finished within {timeout:.0f} s ({type(e).__name__})"))
        return out
    done, total = page.evaluate(EXECUTED)
    out.append(("every cell runs", done == total, f"{done} of {total} code cells in {time.time() - t0:.0f} s"))
    time.sleep(3)                                  # outputs render after the kernel reports the last result
    tracebacks = page.locator(".jp-OutputArea-output:has-text('Traceback')").count()
    errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"
                          ":has-text('Error')").count()
    first = page.evaluate("() => { for (const c of window.jupyterapp.shell.currentWidget.content.widgets) {"
                          " if (c.model.type !== 'code') continue; for (const o of c.model.outputs.toJSON())"
                          " if (o.output_type === 'error') return o.ename + ': ' + o.evalue; } return ''; }")
    out.append(("cells run without errors", errors == 0 and tracebacks == 0,
                f"{tracebacks} tracebacks, {errors} error outputs; last lines: {' '.join(first.split())}"
                if errors or tracebacks else ""))
    live = page.locator(".jp-OutputArea-output .vega-embed").count()
    widget_errors = page.locator(":text('Model not found'), :text('Error displaying widget')").count()
    n_charts = page.evaluate("() => window.jupyterapp.shell.currentWidget.content.widgets.filter(c =>"
                             " c.model.type === 'code' && JSON.stringify(c.model.outputs.toJSON()).includes("
                             "'vnd.vegalite')).length")
    out.append(("charts are live Vega views", live > 0 or n_charts == 0, f"{live} interactive charts"))
    out.append(("no widget errors", widget_errors == 0, ""))
    out += check_sliders(page)
    if shot:
        page.screenshot(path=shot, full_page=False)
    return out


def check_sliders(page) -> list[tuple[str, bool, str]]:
    """A page whose live charts bind sliders (page 04's explorer): moving the first slider to its other end
    (the minimum, or the maximum when it starts there) redraws its chart (the chart's pixels before and after differ) and raises no error. None: no check."""
    from playwright.sync_api import Error

    sliders = page.locator(".jp-NotebookPanel:visible .jp-OutputArea-output .vega-embed .vega-bindings "
                           "input[type=range]")
    n = sliders.count()
    if n == 0:
        return []
    chart = sliders.first.locator("xpath=ancestor::div[contains(concat(' ', @class, ' '), ' vega-embed ')][1]")
    try:
        chart.scroll_into_view_if_needed(timeout=30_000)
        before = chart.screenshot(timeout=30_000)
        sliders.first.evaluate("e => { e.value = e.value === e.min ? e.max : e.min;"
                               " e.dispatchEvent(new Event('input', {bubbles: true}));"
                               " e.dispatchEvent(new Event('change', {bubbles: true})); }")
        time.sleep(2)
        after = chart.screenshot(timeout=30_000)
    except Error as e:
        return [("live sliders redraw their chart", False, f"{n} sliders; {type(e).__name__}: {str(e)[:120]}")]
    errors = page.locator(".jp-OutputArea-output .vega-embed :text('Error')").count()
    return [("live sliders redraw their chart", before != after and errors == 0,
             f"{n} sliders; the chart {'changed' if before != after else 'did not change'} when the first moved to "
             f"{sliders.first.input_value()}"
             + (f"; {errors} errors" if errors else ""))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--notebook", default="notebooks/01_loss_reduction.ipynb")
    ap.add_argument("--all", action="store_true", help="check every executed page, in page order")
    ap.add_argument("--shot", default=None, help="save a screenshot of the (last) executed page here")
    ap.add_argument("--timeout", type=float, default=600, help="seconds a page's cells may take to run")
    a = ap.parse_args()
    from playwright.sync_api import sync_playwright

    sys.path.insert(0, str(ROOT / "lib"))
    from docgrad.runtime.report import executed_notebooks

    pages = ([str(p.relative_to(ROOT)) for p in executed_notebooks(ROOT / "notebooks")] if a.all
             else [a.notebook])
    summary = []
    with tempfile.TemporaryDirectory(prefix="docgrad-lab-") as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), "HEAD"], check=True,
                       capture_output=True)
        for c in CACHES:
            if (ROOT / c).exists() and not (tree / c).exists():
                (tree / c).parent.mkdir(parents=True, exist_ok=True)
                (tree / c).symlink_to(ROOT / c)
        port = free_port()
        lab = subprocess.Popen([sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}",
                                "--allow-root", "--IdentityProvider.token=", "--ServerApp.password=",
                                "--LabApp.expose_app_in_browser=True", f"--ServerApp.root_dir={tree}"],
                               stdout=subprocess.DEVNULL, stderr=open(Path(tmp) / "lab.log", "w"))
        try:
            for _ in range(120):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    time.sleep(0.5)
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
                for nb in pages:
                    page = browser.new_page(viewport={"width": 1400, "height": 1000})
                    results = check_page(page, port, nb, a.timeout, a.shot)
                    for name, ok, detail in results:
                        print(f"{'ok  ' if ok else 'FAIL'} {Path(nb).stem}: {name}{': ' + detail if detail else ''}",
                              flush=True)
                    summary.append((nb, all(ok for _, ok, _ in results)))
                    try:                       # stop this page's kernel (a run that timed out is still busy)
                        page.evaluate("async () => { const w = window.jupyterapp && "
                                      "window.jupyterapp.shell.currentWidget; if (w && w.sessionContext) "
                                      "await w.sessionContext.shutdown(); }")
                    except Exception as e:     # noqa: BLE001 - the page is closed next either way
                        print(f"note {Path(nb).stem}: kernel shutdown failed ({type(e).__name__})", flush=True)
                    page.close()
                browser.close()
        finally:
            lab.terminate()
            lab.wait(timeout=30)
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], capture_output=True)
    if a.all:
        for nb, ok in summary:
            print(f"{'PASS' if ok else 'FAIL'} {nb}")
    return 0 if all(ok for _, ok in summary) else 1


if __name__ == "__main__":
    sys.exit(main())
