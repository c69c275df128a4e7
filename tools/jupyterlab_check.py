"""Open a page in a real JupyterLab, headless, and check what a user sees: it opens without a dialog, its cells
run, and its charts are interactive (Vega views drawn by the live widget renderer, not the static PNG).

    .venv/bin/python tools/jupyterlab_check.py [--notebook notebooks/01_loss_reduction.ipynb] [--shot out.png]

Needs Debian's chromium (`apt-get install chromium`) and `pip install playwright` (its own browser download
does not work offline; the system Chromium is used). The check runs on a temporary git worktree of HEAD, so
the figures a live run rewrites are not the project's. Prints one line per check and exits 1 if any fails.
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--notebook", default="notebooks/01_loss_reduction.ipynb")
    ap.add_argument("--shot", default=None, help="save a screenshot of the executed page here")
    ap.add_argument("--timeout", type=float, default=240, help="seconds to wait for the cells to run")
    a = ap.parse_args()
    from playwright.sync_api import sync_playwright

    results = []

    def check(name, ok, detail=""):
        results.append(ok)
        print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)

    with tempfile.TemporaryDirectory(prefix="docgrad-lab-") as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), "HEAD"], check=True,
                       capture_output=True)
        port = free_port()
        lab = subprocess.Popen([sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}",
                                "--allow-root", "--IdentityProvider.token=", "--ServerApp.password=",
                                f"--ServerApp.root_dir={tree}"], stdout=subprocess.DEVNULL,
                               stderr=open(Path(tmp) / "lab.log", "w"))
        try:
            for _ in range(120):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    time.sleep(0.5)
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                page.goto(f"http://127.0.0.1:{port}/lab/tree/{a.notebook}", timeout=120_000)
                page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=120_000)
                time.sleep(3)
                dialogs = page.locator(".jp-Dialog").all_inner_texts()
                check("opens without a dialog", not dialogs, "; ".join(d[:120] for d in dialogs))
                page.locator(".jp-Notebook").first.click()
                page.get_by_role("menuitem", name="Run").first.click()
                page.get_by_text("Run All Cells", exact=True).first.click()
                t0 = time.time()
                while time.time() - t0 < a.timeout:
                    busy = page.locator(".jp-Notebook-ExecutionIndicator[data-status='busy'], "
                                        ".jp-InputPrompt:has-text('[*]')").count()
                    if not busy and time.time() - t0 > 10:
                        break
                    time.sleep(2)
                time.sleep(5)
                errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr'] "
                                      ":text('Error')").count()
                tracebacks = page.locator(".jp-OutputArea-output:has-text('Traceback')").count()
                check("cells run without errors", errors == 0 and tracebacks == 0,
                      f"{tracebacks} tracebacks" if tracebacks else "")
                live = page.locator(".jp-OutputArea-output .vega-embed").count()
                widget_errors = page.locator(":text('Model not found'), :text('Error displaying widget')").count()
                check("charts are live Vega views", live > 0, f"{live} interactive charts")
                check("no widget errors", widget_errors == 0)
                if a.shot:
                    if live:
                        page.locator(".jp-OutputArea-output .vega-embed").first.scroll_into_view_if_needed()
                        time.sleep(3)          # JupyterLab draws the cells around the new scroll position
                    page.screenshot(path=a.shot, full_page=False)
                browser.close()
        finally:
            lab.terminate()
            lab.wait(timeout=30)
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], capture_output=True)
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
