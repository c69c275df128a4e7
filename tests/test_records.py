"""Teaching records: read only for the settings they were made with, written only on request, with provenance."""

import json

from docgrad.teaching import records as T


def test_a_record_is_written_on_rerun_and_read_back_for_the_same_settings(tmp_path):
    calls = []

    def compute():
        calls.append(1)
        return {"x": 1.5}

    out, prov = T.recorded("r", {"a": [1, 2]}, compute, rerun=True, directory=tmp_path)
    assert out == {"x": 1.5} and prov["source"] == "computed now" and "torch" in prov["versions"]
    rec = json.loads((tmp_path / "r.json").read_text())
    assert rec["format"] == T.FORMAT and rec["settings"] == {"a": [1, 2]} and rec["command"]
    out2, prov2 = T.recorded("r", {"a": [1, 2]}, compute, directory=tmp_path)
    assert out2 == out and prov2["source"] == "record" and len(calls) == 1
    assert "from the committed record" in T.provenance_line("The Trainer step", prov2)


def test_other_settings_or_no_record_compute_live_and_leave_the_record_alone(tmp_path):
    T.recorded("r", {"a": 1}, lambda: {"x": 1}, rerun=True, directory=tmp_path)
    before = (tmp_path / "r.json").read_text()
    out, prov = T.recorded("r", {"a": 2}, lambda: {"x": 2}, directory=tmp_path)
    assert out == {"x": 2} and prov["source"] == "computed now"
    assert (tmp_path / "r.json").read_text() == before                 # a live run never rewrites the record
    out, prov = T.recorded("missing", {"a": 1}, lambda: {"y": 3}, directory=tmp_path)
    assert out == {"y": 3} and not (tmp_path / "missing.json").exists()
    (tmp_path / "bad.json").write_text("{not json")
    assert T.read_record("bad", {"a": 1}, tmp_path) is None


def test_a_record_read_back_names_the_command_that_recomputes_it_now(tmp_path):
    """A page split off another (01a from 01) reads the record the old page made: the line it shows names the
    command that recomputes it today, not the one stored when it was made."""
    T.recorded("r", {"a": 1}, lambda: {"x": 1}, rerun=True, command="docgrad run 01 -p rerun True",
               directory=tmp_path)
    _, prov = T.recorded("r", {"a": 1}, lambda: {"x": 2}, command="docgrad run 01a -p rerun True",
                         directory=tmp_path)
    assert prov["source"] == "record" and prov["command"] == "docgrad run 01a -p rerun True"
    assert "`docgrad run 01a -p rerun True` recomputes it" in T.provenance_line("The run", prov)
