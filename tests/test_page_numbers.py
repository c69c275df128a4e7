"""Every number the generated prose of pages 03 to 06 states is in the page's JSON twin (figures/NN_name.json):
no typed numbers, and a re-execution with other parameters can be diffed on what the page says."""

import bisect
import json
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = ("03_correlation_by_lag", "03b_documents_and_sources", "04_design_effect", "04b_what_drives_R",
         "04c_beside_the_published_study", "04e_your_documents", "05_batch_composition", "06_causal_context",
         "07_does_R_predict_learning")

# a decimal (with a point), a percentage, or an integer with thousands separators; not part of a word, a
# version string ("0.28.1") or a name ("SmolLM2-135M", "16K", "Q4_1")
NUMBER = re.compile(r"(?<![\w.\-/])([+\-−]?)(\d+(?:\.\d+)?%|\d{1,3}(?:,\d{3})+|\d+\.\d+)(?![\w.]|\.\d)")


def stated_numbers(text: str) -> list[tuple[str, float, float, bool]]:
    """(token, value, half a unit of its last digit, is a percentage) for every checkable number in text."""
    out = []
    for m in NUMBER.finditer(text):
        sign, tok = m.group(1), m.group(2)
        pct = tok.endswith("%")
        body = tok.rstrip("%").replace(",", "")
        digits = len(body.split(".")[1]) if "." in body else 0
        val = float(body) * (-1 if sign in "-−" and sign else 1)
        out.append((m.group(0), val, 0.5 * 10.0 ** -digits, pct))
    return out


def json_numbers(obj) -> list[float]:
    """Every number in a JSON document, including numbers written inside its strings."""
    out = []

    def walk(x):
        if isinstance(x, bool) or x is None:
            return
        if isinstance(x, (int, float)):
            out.append(float(x))
        elif isinstance(x, str):
            for m in re.finditer(r"[+\-]?\d+(?:,\d{3})*(?:\.\d+)?", x):
                out.append(float(m.group(0).replace(",", "")))
        elif isinstance(x, dict):
            for k, v in x.items():
                walk(k)
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(obj)
    return sorted(out)


def _found(values: list[float], x: float, tol: float) -> bool:
    i = bisect.bisect_left(values, x - tol * 1.0001 - 1e-12)
    return i < len(values) and values[i] <= x + tol * 1.0001 + 1e-12


def generated_prose(nb) -> list[str]:
    """The markdown a page's code writes (display(Markdown(...)) outputs), not its typed markdown cells."""
    return [o["data"]["text/markdown"] for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
            if "text/markdown" in o.get("data", {})]


def test_number_pattern_skips_names_and_versions():
    got = [t for t, *_ in stated_numbers("SmolLM2-135M R(16K) = 4.30, 16% of 1,087 (httpx 0.28.1, Q4_1) -0.25")]
    assert got == ["4.30", "16%", "1,087", "-0.25"]
    (tok, value, tol, pct), = stated_numbers("falls by −66.2% of it")       # a decimal percentage is a percentage
    assert (tok, value, tol, pct) == ("−66.2%", -66.2, 0.05, True)


@pytest.mark.parametrize("page", PAGES)
def test_every_number_in_the_generated_prose_is_in_the_json_twin(page):
    nb = nbformat.read(ROOT / "notebooks" / f"{page}.ipynb", as_version=4)
    values = json_numbers(json.loads((ROOT / "figures" / f"{page}.json").read_text()))
    missing = []
    for text in generated_prose(nb):
        for tok, x, tol, pct in stated_numbers(text):
            if not (_found(values, x / 100, tol / 100) if pct else False) and not _found(values, x, tol):
                missing.append(tok)
    assert not missing, f"{page}: numbers stated but not in figures/{page}.json: {sorted(set(missing))}"
