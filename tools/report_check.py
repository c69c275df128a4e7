"""Open the built HTML report in headless Chromium as a reader would: every page runs its scripts without an
error, draws its charts and requests nothing outside the file system, shows its answer box on the first screen
and folds its code; page 04's design-effect explorer shows the library's R(W) and redraws to it when its window
slider and model menu move. The same checks as tests/test_browser.py (tools/browser_checks.py), printed.

    .venv/bin/python tools/report_check.py [--report report] [--window 8192] [--shot first_screen.png]

Builds the report from the executed notebooks into a temporary folder when --report is not given. Needs Debian's
chromium and Playwright's Python driver (`make browser`, and the dev extra). Prints one line per check and exits 1
if any fails.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import browser_checks as bc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--report", default=None, help="a built report folder (default: build one in a temporary folder)")
    ap.add_argument("--window", type=int, default=8192, help="tokens to move the explorer's window slider to")
    ap.add_argument("--shot", default=None, help="save page 04's first screen here")
    a = ap.parse_args()
    if bc.missing():
        print("needs " + " and ".join(bc.missing()))
        return 1
    from playwright.sync_api import sync_playwright

    checks = []
    with tempfile.TemporaryDirectory(prefix="docgrad-report-") as tmp, sync_playwright() as pw:
        report = Path(a.report).resolve() if a.report else Path(tmp)     # a file URI needs an absolute path
        if not a.report:
            sys.path.insert(0, str(bc.ROOT / "lib"))
            from docgrad.runtime.report import build_report

            build_report(bc.ROOT / "notebooks", report)
        browser = bc.launch(pw)
        context = browser.new_context(viewport=bc.FIRST_SCREEN)
        blocked = bc.block_network(context)
        for path in sorted(report.glob("*.html")):
            n = len(blocked)
            v = bc.read_report_page(context, path)
            top, bottom = v["box_top"], v["box_bottom"]
            box = "no answer box" if top is None else f"answer box at {top:.0f}-{bottom:.0f} px"
            checks += [(f"{path.name}: no script error", not v["errors"], "; ".join(v["errors"])),
                       (f"{path.name}: {v['charts']} charts drawn", v["charts_drawn"] and not v["charts_failed"],
                        "; ".join(v["charts_failed"])),
                       (f"{path.name}: no network request", len(blocked) == n, " ".join(blocked[n:])),
                       (f"{path.name}: {box}", top is None or bottom <= bc.FIRST_SCREEN["height"], ""),
                       (f"{path.name}: {v['folded']} code inputs folded", not v["code_shown"] and not v["opened"],
                        "; ".join(v["code_shown"]))]
        page = context.new_page()
        page.goto((report / "04_design_effect.html").as_uri())
        if a.shot:
            page.screenshot(path=a.shot)
        checks += [(f"04_design_effect.html explorer {name}", ok, detail)
                   for name, ok, detail in bc.check_explorer(page, a.window)]
        browser.close()
    for name, ok, detail in checks:
        print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)
    return 0 if all(ok for _, ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
