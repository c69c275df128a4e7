"""Reading a `docgrad spikes` record (docgrad.results.spikes): each chunk's shares and tests against the cell's
median, the counts per kind, and a sentence that says no more than the counts."""

import pytest
from docgrad.results import spikes as SR


def chunk(kind, full, tail2, shifted, f64, plain, doc=0, k=0):
    tail = {"1": full, "2": tail2, "3": tail2 * 0.99, "5": tail2 * 0.98, "9": tail2 * 0.97, "17": tail2 * 0.9,
            "65": tail2 * 0.5}
    return {"kind": kind, "doc": doc, "chunk": k, "loss": 2.0, "tail": tail, "single": {"1": full * 0.8, "2": 1.0,
            "3": 1.0}, "shifted": {"shift": 1, "sqnorm": shifted}, "float64": f64, "no_start_token": plain,
            "cell_sqnorm": full, "first_tokens": [1, 2, 3, 4]}


RECORD = {"corpus": "CODE", "median": 20.0, "chunks": [
    chunk("spiking", 10000.0, 100.0, 25.0, 9990.0, 30.0, 1, 3),
    chunk("spiking", 5000.0, 400.0, 6000.0, 5001.0, 22.0, 2, 0),
    chunk("control", 20.0, 18.0, 21.0, 20.0, 19.0, 1, 4),
    chunk("control", 25.0, 24.0, 22.0, 25.0, 20.0, 2, 1)]}


def test_each_chunk_is_read_against_the_cells_median():
    rows = SR.spike_reading(RECORD)["chunks"]
    assert rows[0]["times_median"] == 500 and rows[0]["first_target_share"] == pytest.approx(0.99)
    assert rows[0]["carried_by_targets_before"] == 2                      # dropping target 1 removes 99%
    assert rows[1]["carried_by_targets_before"] == 2 and rows[2]["carried_by_targets_before"] is None
    assert rows[1]["shifted_times_median"] == 300 and rows[0]["float64_times_median"] == pytest.approx(499.5)


def test_the_counts_and_the_sentence_say_what_the_record_shows():
    r = SR.spike_reading(RECORD)
    s, c = r["spiking"], r["control"]
    assert (s["n"], s["carried_by_first_target"], s["shifted_still_spiking"], s["float64_still_spiking"],
            s["without_start_token_spiking"]) == (2, 2, 1, 2, 0)
    assert c["carried_by_first_target"] == 0
    text = SR.spike_sentence(r)
    assert text.startswith("In the 2 largest spiking CODE chunks, dropping the first target (x")
    assert "removes a median 96% of the squared gradient norm (the 2 non-spiking chunks beside them: 7%), at least " \
           "90% in 2 of 2" in text
    assert "moved one token later, 1 of 2 still spike, so the spike does not follow the chunk's first token" in text
    assert "without the start token 0 of 2 spike" in text and "in float64 2 of 2 still spike, so it is not rounding" in text


def test_the_first_tokens_of_spiking_chunks_are_counted_against_every_chunk_that_begins_with_them():
    from types import SimpleNamespace

    import numpy as np

    sq = np.ones((2, 3))
    sq[0, 1] = sq[1, 2] = 100.0
    cell = SimpleNamespace(sqnorm=sq, doc_ids=[4, 7], chunk=2, m=3)
    tokens = {4: [9, 1, 28, 1, 28, 1], 7: [5, 1, 6, 1, 28, 1]}     # chunks begin with 9, 28, 28 / 5, 6, 28
    got = SR.first_token_counts(cell, tokens)
    assert got == {"n_chunks": 6, "n_spiking": 2, "rows": [{"token": 28, "chunks": 3, "spiking": 2}]}
    text = SR.first_token_sentence({"CODE": got, "WEB": {"n_spiking": 1, "rows": [{"token": 5, "chunks": 1,
                                                                                   "spiking": 1}]}}, 28, ",")
    assert text == ("2 of the 3 spiking chunks of the 2 corpora begin with ',' (token 28; CODE 2 of 2, WEB 0 of 1), "
                    "and 2 of the 3 chunks that begin with it spike.")
