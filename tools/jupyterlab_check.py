"""Open pages in a real JupyterLab, headless, and check what a user sees: each opens without a dialog, its cells
run to the end without an error, its charts are interactive (Vega views drawn by the live widget renderer,
not the static PNG), and a chart with sliders (page 04's explorer) redraws when one moves. tests/test_browser.py
runs the same checks (tools/browser_checks.py) on page 04; this runs them on any page, or all.

    .venv/bin/python tools/jupyterlab_check.py [--notebook notebooks/01_loss_reduction.ipynb | --all] [--shot out.png]

Needs Debian's chromium and Playwright's Python driver (`make browser`, and the dev extra). The check runs on a
temporary git worktree of HEAD (with the ignored caches it needs linked in), so the figures a live run rewrites are
not the project's. Prints one line per check (and, with --all, one summary line per page); exits 1 if any check
fails.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import browser_checks as bc

ROOT = bc.ROOT
CACHES = ("data/corpora/cache", "cache")      # ignored folders a page reads (span caches, the analysis cache)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--notebook", default="notebooks/01_loss_reduction.ipynb")
    ap.add_argument("--all", action="store_true", help="check every executed page, in page order")
    ap.add_argument("--shot", default=None, help="save a screenshot of the (last) executed page here")
    ap.add_argument("--timeout", type=float, default=600, help="seconds a page's cells may take to run")
    a = ap.parse_args()
    if bc.missing():
        print("needs " + " and ".join(bc.missing()))
        return 1
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
        try:
            for c in CACHES:
                if (ROOT / c).exists() and not (tree / c).exists():
                    (tree / c).parent.mkdir(parents=True, exist_ok=True)
                    (tree / c).symlink_to(ROOT / c)
            with bc.lab_server(tree, Path(tmp) / "lab") as (url, token), sync_playwright() as pw:
                browser = bc.launch(pw)
                for nb in pages:
                    page = browser.new_page(viewport={"width": 1400, "height": 1000})
                    results = bc.run_in_lab(page, url, token, nb, a.timeout, a.shot)
                    for name, ok, detail in results:
                        print(f"{'ok  ' if ok else 'FAIL'} {Path(nb).stem}: {name}{': ' + detail if detail else ''}",
                              flush=True)
                    summary.append((nb, all(ok for _, ok, _ in results)))
                    try:
                        bc.stop_kernel(page)
                    except Exception as e:     # noqa: BLE001 - the page is closed next either way
                        print(f"note {Path(nb).stem}: kernel shutdown failed ({type(e).__name__})", flush=True)
                    page.close()
                browser.close()
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], capture_output=True)
    if a.all:
        for nb, ok in summary:
            print(f"{'PASS' if ok else 'FAIL'} {nb}")
    return 0 if all(ok for _, ok in summary) else 1


if __name__ == "__main__":
    sys.exit(main())
