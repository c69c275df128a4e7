"""The explorer's numbers are the library's: what the Vega runtime computes in the chart (vl-convert's scenegraph of
the compiled spec) equals docgrad.core.bootstrap.R_from_rho on the committed data, for every model, corpus and W.
The 64 (model, W) settings render the chart's table of numbers alone (the text the test reads, with the chart's
data, parameters and transforms); the whole chart is rendered by the published-value test."""

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

vlc = pytest.importorskip("vl_convert")

from docgrad import models as registry  # noqa: E402
from docgrad.core import bootstrap as bs  # noqa: E402
from docgrad.presentation.explorer import explorer_chart, published_text  # noqa: E402
from docgrad.results import published  # noqa: E402
from docgrad.results.profiles import cell_profile  # noqa: E402
from docgrad.results.study import Study  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LINE = re.compile(r"^(?P<corpus>[A-Z]+):  R\(W\) = (?P<R>[0-9.]+) .*effective chunks (?P<eff>[0-9,.]+) of")


def _texts(node, out):
    if isinstance(node, dict):
        if node.get("marktype") == "text":
            out += [it.get("text") for it in node.get("items", []) if isinstance(it.get("text"), str)]
        for v in node.values():
            _texts(v, out)
    elif isinstance(node, list):
        for v in node:
            _texts(v, out)
    return out


def _table(spec):
    """The explorer's spec with only its table of numbers (the text marks: one line per corpus at W) kept."""
    (table,) = [v for v in spec["vconcat"] if isinstance(v, dict) and (v.get("mark") or {}).get("type") == "text"]
    return dict(spec, vconcat=[table])


def _shown(spec, **params):
    spec = dict(spec, params=[dict(p, value=params.get(p["name"], p.get("value"))) for p in spec["params"]])
    return {m["corpus"]: m for m in (LINE.match(t) for t in _texts(vlc.vegalite_to_scenegraph(spec), [])) if m}


@pytest.fixture(scope="module")
def committed():
    study = Study(ROOT / "data" / "results", resamples=0, chunk=512, docs=(0, 16))
    models = [m for m in registry.result_models(["smollm2-135m", "gemma3-270m"]) if study.cell(m, "BOOKS")]
    if not models:
        pytest.skip("no committed result files")
    parts = [cell_profile(study.cell(m, k), m.label, 0, 0) for m in models for k in ("BOOKS", "CODE", "PAPERS", "WEB")
             if study.cell(m, k) is not None]
    rho = pd.concat([p[0] for p in parts], ignore_index=True)
    R = pd.concat([p[1] for p in parts], ignore_index=True)
    spec = explorer_chart(rho, R, published_text(published.R_by_window())).to_dict()
    return rho, spec, [m.label for m in models]


def test_the_browser_computes_R_and_the_effective_chunks_as_the_library_does(committed):
    rho, spec, labels = committed
    table = _table(spec)
    batch = 1_048_576
    for label in labels:
        for m in range(1, 33):
            shown = _shown(table, W=m * 512, model=label, batch=batch)
            assert set(shown) == set(rho[rho.label == label].corpus), (label, m)
            for corpus, line in shown.items():
                profile = rho[(rho.label == label) & (rho.corpus == corpus)].sort_values("lag")["rho"].to_numpy()
                R = float(bs.R_from_rho(profile, m))
                assert float(line["R"]) == pytest.approx(R, rel=5e-4), (label, corpus, m)
                eff = float(line["eff"].replace(",", ""))
                assert eff == pytest.approx(batch / 512 / R, rel=5e-3, abs=0.05), (label, corpus, m)


def test_the_explorer_says_the_published_value_where_there_is_one(committed):
    _, spec, labels = committed
    texts = _texts(vlc.vegalite_to_scenegraph(spec), [])
    code = next(t for t in texts if t.startswith("CODE:"))
    assert code.endswith("published: Pythia-1.4B 6.91, OLMo-2-1B 4.73")      # final checkpoints only, once each
    books = next(t for t in texts if t.startswith("BOOKS:"))
    assert books.endswith("published: Pythia-1.4B 2.2, OLMo-2-1B 1.75")
    odd = _shown(spec, W=3 * 512, model=labels[0])
    texts = _texts(vlc.vegalite_to_scenegraph(dict(spec, params=[dict(p, value=1536) if p["name"] == "W" else p
                                                                  for p in spec["params"]])), [])
    assert odd and not any("published:" in t for t in texts)        # no published value at 1,536 tokens
