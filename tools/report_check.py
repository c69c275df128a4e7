"""Open the built HTML report in headless Chromium as a reader would and check the design-effect explorer: the
page draws it, moving the window slider changes the numbers it shows, and they are the library's.

    .venv/bin/python tools/report_check.py [--report report] [--window 8192]

Builds the report from the executed notebooks into a temporary folder when --report is not given. Needs Debian's
chromium (`apt-get install chromium`) and `pip install playwright` (its own browser download does not work
offline; the system Chromium is used). Prints one line per check and exits 1 if any fails; every wait has a
timeout that ends in a failed check, not a traceback.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
LINE = re.compile(r"^(?P<corpus>[A-Z]+):\s+R\(W\) = (?P<R>[0-9.]+)")


def expected(window: int, chunk: int = 512) -> dict[str, float]:
    """R(window) of the page's first model per corpus, from the committed profiles (core.bootstrap.R_from_rho), over
    the documents page 04 read (its numbers file says which)."""
    sys.path.insert(0, str(ROOT / "lib"))
    from docgrad import models as registry
    from docgrad.core import bootstrap as bs
    from docgrad.results.format import parse_docs
    from docgrad.results.study import Study

    documents = json.loads((ROOT / "figures" / "04_design_effect.json").read_text())["documents"]
    study = Study(ROOT / "data" / "results", resamples=0, chunk=chunk, docs=parse_docs(documents))
    model = registry.result_models(["smollm2-135m"])[0]
    out = {}
    for k in ("BOOKS", "CODE", "PAPERS", "WEB"):
        cell = study.cell(model, k)
        if cell is not None:
            rho = bs.estimate(cell.sums["all"], [1.0] * len(cell.doc_ids), chunk)["rho"][0]
            out[k] = float(bs.R_from_rho(rho, window // chunk))
    return out


def shown(page) -> dict[str, float]:
    texts = page.eval_on_selector_all("svg text", "els => els.map(e => e.textContent)")
    return {m["corpus"]: float(m["R"]) for m in (LINE.match(t or "") for t in texts) if m}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--report", default=None, help="a built report folder (default: build one in a temporary folder)")
    ap.add_argument("--window", type=int, default=8192, help="tokens to move the window slider to")
    ap.add_argument("--timeout", type=float, default=60, help="seconds to wait for the page and for each change")
    ap.add_argument("--shot", default=None, help="save a screenshot of the explorer here")
    a = ap.parse_args()
    from playwright.sync_api import Error, sync_playwright

    failed = []

    def check(ok: bool, what: str) -> None:
        print(f"{'ok  ' if ok else 'FAIL'} {what}", flush=True)
        if not ok:
            failed.append(what)

    with tempfile.TemporaryDirectory(prefix="docgrad-report-") as tmp:
        report = Path(a.report).resolve() if a.report else Path(tmp)     # a file URI needs an absolute path
        if not a.report:
            sys.path.insert(0, str(ROOT / "lib"))
            from docgrad.runtime.report import build_report

            build_report(ROOT / "notebooks", report)
        page_file = report / "04_design_effect.html"
        check(page_file.is_file(), f"the report has {page_file.name}")
        if failed:
            return 1
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.goto(page_file.as_uri())
            slider = page.locator("input[type=range][name=W]")
            try:
                slider.wait_for(state="attached", timeout=a.timeout * 1000)
                page.wait_for_function("() => [...document.querySelectorAll('svg text')].some("
                                       "e => /R\\(W\\) =/.test(e.textContent))", timeout=a.timeout * 1000)
            except Error as e:
                check(False, f"the explorer is drawn within {a.timeout:.0f} s ({type(e).__name__})")
                browser.close()
                return 1
            before = shown(page)
            want0 = expected(int(slider.input_value()))
            check(bool(before) and all(abs(before[k] / want0[k] - 1) < 5e-4 for k in want0),
                  f"at W = {slider.input_value()} it shows the library's R(W): {before}")
            slider.scroll_into_view_if_needed()
            slider.evaluate("(el, v) => { el.value = v; el.dispatchEvent(new Event('input', {bubbles: true})); }",
                            str(a.window))
            want = expected(a.window)
            try:
                page.wait_for_function("w => [...document.querySelectorAll('svg text')].some("
                                       "e => e.textContent.startsWith('At W = ' + w.toLocaleString('en-US')))",
                                       arg=a.window, timeout=a.timeout * 1000)
            except Error as e:
                check(False, f"moving the slider to {a.window} redraws the numbers ({type(e).__name__})")
                browser.close()
                return 1
            after = shown(page)
            check(after != before, "moving the window slider changes the numbers shown")
            check(bool(after) and all(abs(after[k] / want[k] - 1) < 5e-4 for k in want),
                  f"at W = {a.window} it shows the library's R(W): shown {after}, library "
                  f"{ {k: round(v, 4) for k, v in want.items()} }")
            if a.shot:
                slider.screenshot(path=a.shot)
            browser.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
