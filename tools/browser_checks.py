"""Headless-Chromium checks of what a reader sees: the HTML report's pages (no script error, no network request,
the answer box on the first screen, code folded, the design-effect explorer showing the library's R(W)) and a
page run in a real JupyterLab. Used by tests/test_browser.py and by the command-line checks tools/report_check.py
and tools/jupyterlab_check.py.

Needs Debian's chromium (Playwright's own browser download does not work offline; `make browser` installs the
Debian package) and Playwright's Python driver (the dev extra, installed by `make venv`). Every wait has a
timeout.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]
LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:")     # what a report page may load: nothing from a network
FIRST_SCREEN = {"width": 1280, "height": 800}             # a laptop's first screen, in CSS pixels
R_LINE = re.compile(r"^(?P<corpus>[A-Z]+):\s+R\(W\) = (?P<R>[0-9.]+)")


# --- what is installed --------------------------------------------------------------------------------------

def chromium_path() -> str | None:
    """Debian's chromium: `chromium` on PATH, else /usr/bin/chromium; None when neither exists."""
    found = shutil.which("chromium")
    return found or ("/usr/bin/chromium" if os.access("/usr/bin/chromium", os.X_OK) else None)


def missing() -> list[str]:
    """What the browser checks need and this machine lacks, each with how to install it ([] when nothing)."""
    out = []
    if chromium_path() is None:
        out.append("Debian's chromium (`make browser`, or `apt-get install chromium`)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        out.append("Playwright's Python driver (the dev extra: `make venv`, or `pip install playwright`)")
    return out


def launch(pw):
    """Headless Debian chromium through Playwright (pw: a sync_playwright() instance)."""
    return pw.chromium.launch(executable_path=chromium_path(), args=FLAGS)


# --- the HTML report ----------------------------------------------------------------------------------------

# every chart a page embeds has drawn its SVG, or written why it could not (report.embed_charts)
CHARTS_DRAWN = ("() => [...document.querySelectorAll('.docgrad-chart')].every(d => d.querySelector('svg') ||"
                " d.textContent.includes('chart failed to render'))")
READER_VIEW = """() => {
  const box = [...document.querySelectorAll('blockquote')].find(b => b.innerText.trim().startsWith('Result.'));
  const r = box && box.getBoundingClientRect();
  let folded = 0, opened = 0; const shown = [];
  for (const cell of document.querySelectorAll('.jp-CodeCell')) {
    const input = cell.querySelector('.jp-InputArea');
    if (!input) continue;                                   // a hide-input cell: its code is not in the page
    const fold = input.closest('details.docgrad-code');
    if (fold) { folded += 1; if (fold.open) opened += 1; }
    if (input.checkVisibility() && !cell.matches('.celltag_show-input, .celltag_solution'))
      shown.push(input.innerText.trim().split('\\n')[0].slice(0, 80));
  }
  const failed = [...document.querySelectorAll('.docgrad-chart')].filter(
    d => d.textContent.includes('chart failed to render')).map(d => d.textContent.slice(0, 200));
  return {box_top: r ? r.top + window.scrollY : null, box_bottom: r ? r.bottom + window.scrollY : null,
          folded, opened, code_shown: shown, charts: document.querySelectorAll('.docgrad-chart').length,
          charts_failed: failed};
}"""


def block_network(context, allowed: tuple[str, ...] = LOCAL_SCHEMES) -> list[str]:
    """Abort every request of a browser context whose URL does not start with one of `allowed` (default: local
    files, file: data: blob:); return the list the refused URLs are appended to."""
    blocked: list[str] = []

    def route(r):
        if r.request.url.startswith(allowed):
            r.continue_()
        else:
            blocked.append(r.request.url)
            r.abort()

    context.route("**/*", route)
    context.on("request", lambda q: None if q.url.startswith(allowed) or q.url in blocked else blocked.append(q.url))
    return blocked


def read_report_page(context, path: Path, timeout_s: float = 60) -> dict:
    """Open one report page as a reader (first screen FIRST_SCREEN) and return what it shows: script errors
    (uncaught exceptions and console errors), requests that left the file system, whether every chart drew,
    where the answer box ("Result. ...", evidence.result_box) starts and ends (CSS pixels from the top), and
    how many code inputs are folded, open, or shown unfolded outside show-input / solution cells."""
    from playwright.sync_api import Error

    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(f"uncaught {e}"))
    page.on("console", lambda m: errors.append(f"console: {m.text}") if m.type == "error" else None)
    page.goto(path.as_uri(), wait_until="load", timeout=timeout_s * 1000)
    try:
        page.wait_for_function(CHARTS_DRAWN, timeout=timeout_s * 1000, polling=200)
        drawn = True
    except Error:
        drawn = False
    out = page.evaluate(READER_VIEW) | {"page": path.name, "errors": errors, "charts_drawn": drawn}
    page.close()
    return out


def shown_R(page) -> dict[str, float]:
    """The explorer's R(W) lines ('BOOKS:  R(W) = 3.809 [...]'), {corpus: R}."""
    texts = page.eval_on_selector_all("svg text", "els => els.map(e => e.textContent)")
    return {m["corpus"]: float(m["R"]) for m in (R_LINE.match(t or "") for t in texts) if m}


def library_R(label: str, window: int, twin: Path = ROOT / "figures" / "04_design_effect.json") -> dict[str, float]:
    """R(window) per corpus of the model labelled `label`, computed by the library from the result files page 04
    read (its JSON twin names them: results_dir, documents, chunk, models): the per-lag correlations of
    core.bootstrap.estimate, then R(mC) = 1 + (2/m) sum_{l<m} (m - l) rho(l) (core.bootstrap.R_from_rho)."""
    from docgrad import models as registry
    from docgrad.core import bootstrap as bs
    from docgrad.results.format import parse_docs
    from docgrad.results.study import Study

    t = json.loads(twin.read_text())
    entry = next((m for m in t["models"] if m["label"] == label), None)
    if entry is None:
        raise ValueError(f"{twin}: no model labelled {label!r}; it has {[m['label'] for m in t['models']]}")
    model = registry.result_models([f"{entry['model']}@{entry['revision']}"])[0]
    chunk = t["chunk"]
    study = Study(ROOT / t["results_dir"], resamples=0, chunk=chunk, docs=parse_docs(t["documents"]))
    out = {}
    for corpus in ("BOOKS", "CODE", "PAPERS", "WEB"):
        cell = study.cell(model, corpus)
        if cell is not None:
            rho = bs.estimate(cell.sums["all"], [1.0] * len(cell.doc_ids), chunk)["rho"][0]
            out[corpus] = float(bs.R_from_rho(rho, window // chunk))
    return out


def same_R(shown: dict[str, float], want: dict[str, float], rel: float = 5e-4) -> bool:
    """The explorer shows 4 significant digits: every corpus the library has, within rel."""
    return bool(want) and shown.keys() == want.keys() and all(abs(shown[k] / want[k] - 1) < rel for k in want)


def set_control(page, selector: str, value: str, timeout_s: float = 30) -> None:
    """Set a Vega binding (a range or a select) as a reader would and wait until the chart says it redrew
    (its title 'At W = ...' names the window; a model change waits for the lines to change)."""
    control = page.locator(selector)
    before = shown_R(page)
    control.scroll_into_view_if_needed(timeout=timeout_s * 1000)
    if control.evaluate("e => e.tagName") == "SELECT":
        control.select_option(value, timeout=timeout_s * 1000)
    else:
        control.evaluate("(e, v) => { e.value = v; e.dispatchEvent(new Event('input', {bubbles: true})); }", value)
    if "name=W" in selector:
        page.wait_for_function("w => [...document.querySelectorAll('svg text')].some("
                               "e => e.textContent.startsWith('At W = ' + w.toLocaleString('en-US')))",
                               arg=int(value), timeout=timeout_s * 1000)
    else:
        deadline = time.time() + timeout_s
        while shown_R(page) == before and time.time() < deadline:
            time.sleep(0.2)


def check_explorer(page, window: int = 8192, timeout_s: float = 60) -> list[tuple[str, bool, str]]:
    """Page 04's design-effect explorer as a reader uses it, as (name, ok, detail): it draws R(W) lines, they
    are the library's (library_R) at the window and model it opens with, and after the window slider moves to
    `window` and after the model menu switches to the next model, it redraws to the library's R(W) again."""
    from playwright.sync_api import Error

    slider, menu = "input[type=range][name=W]", "select[name=model]"
    try:
        page.locator(slider).wait_for(state="attached", timeout=timeout_s * 1000)
        page.wait_for_function("() => [...document.querySelectorAll('svg text')].some("
                               "e => /R\\(W\\) =/.test(e.textContent))", timeout=timeout_s * 1000)
    except Error as e:
        return [("the explorer draws its R(W) lines", False, f"not within {timeout_s:.0f} s ({type(e).__name__})")]
    out = []

    def compare(what: str) -> None:
        label, W = page.locator(menu).input_value(), int(page.locator(slider).input_value())
        shown, want = shown_R(page), library_R(label, W)
        out.append((f"{what}: the library's R(W) of {label} at W = {W:,}", same_R(shown, want),
                    f"shown {shown}, library { {k: round(v, 4) for k, v in want.items()} }"))

    compare("as it opens")
    before = shown_R(page)
    try:
        set_control(page, slider, str(window), timeout_s)
    except Error as e:
        return out + [(f"moving the window slider to {window:,} redraws", False, type(e).__name__)]
    out.append((f"moving the window slider to {window:,} changes the numbers", shown_R(page) != before, ""))
    compare("after the window slider moved")
    labels = page.locator(f"{menu} option").all_inner_texts()
    other = next((x for x in labels if x != page.locator(menu).input_value()), None)
    if other is not None:
        before = shown_R(page)
        set_control(page, menu, other, timeout_s)
        out.append((f"choosing {other} in the model menu changes the numbers", shown_R(page) != before, ""))
        compare("after the model menu changed")
    return out


# --- JupyterLab ---------------------------------------------------------------------------------------------

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
FIRST_ERROR = ("() => { for (const c of window.jupyterapp.shell.currentWidget.content.widgets) {"
               " if (c.model.type !== 'code') continue; for (const o of c.model.outputs.toJSON())"
               " if (o.output_type === 'error') return o.ename + ': ' + o.evalue; } return ''; }")
N_CHARTS = ("() => window.jupyterapp.shell.currentWidget.content.widgets.filter(c => c.model.type === 'code' &&"
            " /vegalite|vnd.jupyter.widget-view/.test(JSON.stringify(c.model.outputs.toJSON()))).length")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def working_copy(notebook: Path, folder: Path, **parameters) -> Path:
    """A copy of an executed notebook in folder, its parameters cell's assignments `name = ...` replaced by
    `name = repr(value)` (e.g. figures_dir into a temporary folder, so a live run writes nothing into the
    project) and its jupytext pairing dropped (the copy has no .py beside it). Unknown names are an error."""
    nb = json.loads(Path(notebook).read_text())
    cell = next((c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])), None)
    if cell is None and parameters:
        raise ValueError(f"{notebook}: no cell tagged 'parameters' to set {sorted(parameters)} in")
    lines = "".join(cell["source"]).splitlines(keepends=True) if cell else []
    for name, value in parameters.items():
        hit = [i for i, ln in enumerate(lines) if re.match(rf"{name}\s*=", ln)]
        if not hit:
            raise ValueError(f"{notebook}: parameter {name!r} is not in its parameters cell")
        lines[hit[0]] = f"{name} = {value!r}\n"
    if cell:
        cell["source"] = lines
    nb["metadata"].get("jupytext", {}).pop("formats", None)
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / Path(notebook).name
    out.write_text(json.dumps(nb, indent=1))
    return out


@contextmanager
def lab_server(root_dir: Path, state_dir: Path, timeout_s: float = 90):
    """A JupyterLab server on 127.0.0.1 (a free port, a random token) serving root_dir, its settings, workspaces
    and runtime files in state_dir (nothing of the user's own). Yields the base URL with the token. Always
    stopped on exit: SIGTERM (the server shuts its kernels down), then SIGKILL to its process group."""
    port, token = free_port(), secrets.token_hex(16)
    state_dir.mkdir(parents=True, exist_ok=True)
    env = os.environ | {name: str(state_dir / folder) for name, folder in [
        ("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_RUNTIME_DIR", "run"), ("JUPYTERLAB_SETTINGS_DIR", "settings"),
        ("JUPYTERLAB_WORKSPACES_DIR", "workspaces"), ("IPYTHONDIR", "ipython")]}
    (state_dir / "config").mkdir(exist_ok=True)     # no news feed, update check or PyPI extension manager
    (state_dir / "config" / "jupyter_server_config.json").write_text(json.dumps({"LabApp": {
        "news_url": None, "check_for_updates_class": "jupyterlab.NeverCheckForUpdate",
        "extension_manager": "readonly"}}))
    ask = state_dir / "settings" / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    ask.parent.mkdir(parents=True, exist_ok=True)            # and no toast asking whether to fetch them
    ask.write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    log_path = state_dir / "lab.log"
    log = open(log_path, "w")
    lab = subprocess.Popen([sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
                            "--allow-root", f"--IdentityProvider.token={token}", "--ServerApp.password=",
                            "--LabApp.expose_app_in_browser=True", f"--ServerApp.root_dir={root_dir}"],
                           stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline, url = time.time() + timeout_s, f"http://127.0.0.1:{port}"
        while True:
            if lab.poll() is not None:
                raise RuntimeError(f"jupyter lab exited with {lab.returncode}: {log_path.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.time() > deadline:
                raise TimeoutError(f"jupyter lab did not answer on port {port} within {timeout_s:.0f} s: "
                                   f"{log_path.read_text()[-2000:]}")
            time.sleep(0.5)
        yield url, token
    finally:
        if lab.poll() is None:
            lab.send_signal(signal.SIGTERM)
            try:
                lab.wait(timeout=20)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(lab.pid, signal.SIGKILL)        # kernels it started and did not stop
        except ProcessLookupError:
            pass
        lab.wait(timeout=10)
        log.close()


def run_in_lab(page, url: str, token: str, notebook: str, timeout_s: float = 600,
               shot: str | None = None) -> list[tuple[str, bool, str]]:
    """Open notebook (a path under the server's root) in JupyterLab, run all its cells through the UI, and check
    what a user sees, as (name, ok, detail): it opens without a dialog, every cell runs, no cell has an error
    output, its charts are live Vega views with no widget error, and the first Vega slider redraws its chart.
    A wait that times out is a failed check."""
    from playwright.sync_api import Error

    out = []
    try:
        # ?reset: a fresh workspace, so no tab of an earlier page is restored beside this one
        page.goto(f"{url}/lab/tree/{notebook}?reset&token={token}", timeout=120_000)
        page.wait_for_function(KERNEL_IDLE, timeout=120_000)
    except Error as e:
        return [("opens with its kernel idle", False, f"not within 120 s ({type(e).__name__})")]
    dialogs = page.locator(".jp-Dialog").all_inner_texts()
    out.append(("opens without a dialog", not dialogs, "; ".join(d[:120] for d in dialogs)))
    t0 = time.time()
    try:
        page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
        time.sleep(2)
        while True:                                # settled twice, 2 s apart: not between two cells
            page.wait_for_function(SETTLED, timeout=max(1.0, timeout_s - (time.time() - t0)) * 1000, polling=500)
            time.sleep(2)
            if page.evaluate(SETTLED):
                break
    except Error as e:
        return out + [("every cell runs", False, f"not finished within {timeout_s:.0f} s ({type(e).__name__})")]
    done, total = page.evaluate(EXECUTED)
    out.append(("every cell runs", done == total, f"{done} of {total} code cells in {time.time() - t0:.0f} s"))
    try:                                           # outputs render after the kernel reports the last result
        page.locator(".jp-OutputArea-output .vega-embed").first.wait_for(timeout=30_000)
    except Error:
        pass
    first = page.evaluate(FIRST_ERROR)
    stderr = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"
                          ":has-text('Error')").count()
    out.append(("cells run without errors", not first and stderr == 0,
                f"first error: {' '.join(first.split())[:300]}; {stderr} stderr outputs naming an Error"
                if first or stderr else ""))
    live = page.locator(".jp-OutputArea-output .vega-embed").count()
    n_charts = page.evaluate(N_CHARTS)
    out.append(("charts are live Vega views", live > 0 and live >= n_charts,
                f"{live} live Vega views, {n_charts} chart outputs"))
    widget_errors = page.locator(":text('Model not found'), :text('Error displaying widget')").count()
    out.append(("no widget errors", widget_errors == 0, f"{widget_errors} widget errors" if widget_errors else ""))
    out += check_sliders(page)
    if shot:
        page.screenshot(path=shot)
    return out


def check_sliders(page) -> list[tuple[str, bool, str]]:
    """A page whose live charts bind sliders (page 04's explorer): moving the first slider to its other end
    (the minimum, or the maximum when it starts there) redraws its chart (its pixels before and after differ)
    and raises no error. None: no check."""
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
        time.sleep(1)
        after = chart.screenshot(timeout=30_000)
    except Error as e:
        return [("live sliders redraw their chart", False, f"{n} sliders; {type(e).__name__}: {str(e)[:120]}")]
    errors = page.locator(".jp-OutputArea-output .vega-embed :text('Error')").count()
    return [("live sliders redraw their chart", before != after and errors == 0,
             f"{n} sliders; the chart {'changed' if before != after else 'did not change'} when the first moved to "
             f"{sliders.first.input_value()}" + (f"; {errors} errors" if errors else ""))]


def stop_kernel(page) -> None:
    """Shut the current notebook's kernel down (a run that timed out is still busy)."""
    page.evaluate("async () => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;"
                  " if (w && w.sessionContext) await w.sessionContext.shutdown(); }")
