"""A research page's opening call: one StudyPage from the parameters cell gives the models, the cells shown,
their decompositions and what they lack, reading the result files once."""

import json

from docgrad.results import cells as C
from docgrad.results import study as S
from docgrad.results.synthetic import Profile, write_synthetic_results
from docgrad.runtime import study_page
from docgrad.runtime.study_page import StudyPage

ONE_FILE = dict(n_docs=6, m=8, chunk=2048, shard_size=6, dim=32)


def test_a_study_page_answers_the_page_from_one_reading_of_the_files(tmp_path, monkeypatch):
    write_synthetic_results(tmp_path / "res", model="o/m", revision="r",
                            profiles={"CODE": Profile(exch=0.2), "WEB": Profile()}, **ONE_FILE)
    man = tmp_path / "m.json"
    man.write_text(json.dumps({"corpora": {"CODE": {"documents": [{"doc": d} for d in range(8)]},
                                           "WEB": {"documents": [{"doc": d} for d in range(6)]}}}))
    calls = []
    load = C.load_result
    monkeypatch.setattr(C, "load_result", lambda path, *a, **k: calls.append(path.name) or load(path, *a, **k))
    monkeypatch.setattr(study_page, "result_models",
                        lambda names: [S.ResultModel("o/m", "r", str(man), "m") for _ in names])
    monkeypatch.chdir(tmp_path)
    page = StudyPage(tmp_path / "res", ["m"], ["CODE", "WEB", "BOOKS"], "0:48", resamples=40, chunk=2048)
    assert page.label == "m" and [c.corpus for c in page.reports["m"].cells] == ["CODE", "WEB"]
    assert page.missing == {"m": ["BOOKS"]} and page.incomplete == {"m": {"CODE": (6, 8)}}
    assert set(page.decomps["m"]) == {"CODE", "WEB"} and page.decomps["m"]["CODE"].R == \
        page.reports["m"].cell("CODE").all.R_16K
    lines = page.inputs_lines()
    assert "(documents 0:48)" in lines[0] and any("CODE 6 of 8" in line for line in lines)
    files = sorted(p.name for p in (tmp_path / "res").rglob("*.npz"))
    assert sorted(calls) == files                                    # each result file was read once
    first = page.within("0:6")                                       # fewer documents: no file read again
    assert sorted(calls) == files and first.study.shards is page.study.shards
    assert [c.n_docs for c in first.reports["m"].cells] == [c.n_docs for c in page.reports["m"].cells]
