"""What a `docgrad spikes` record says about the spiking chunks of a start-token cell: docs/methods.md, Model
regime, addendum 2026-12-07, section 3 (the measurements: docgrad.measure.spike).

Per chunk, with tail(s) the squared norm of the gradient with targets before s dropped (tail(1) = the probe's
|g|^2) and M the cell's median |g|^2:
  * dropped(s) = 1 - tail(s)/tail(1): the share of |g|^2 that targets 1 .. s-1 carry (with their interference);
    the spike is *carried by its first targets* when dropping targets 1 .. s-1 removes at least CARRIED (90%)
    of it, reported as the smallest such s;
  * single(t)/tail(1): target t alone;
  * shifted / M, float64 / M, without the start token / M: the spike *follows the chunk's first token* if the
    shifted chunk falls within SPIKE_FACTOR x M, *is arithmetic* if the float64 value does, and *needs the start
    token* if the chunk without it does.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from docgrad.results.regime_parts import SPIKE_FACTOR

CARRIED = 0.9


def read_record(path: str | Path) -> dict | None:
    """A spike record (docgrad.runtime.spike_command), or None when there is none."""
    path = Path(path)
    return json.loads(path.read_text()) if path.is_file() else None


def chunk_reading(rec: dict, median: float) -> dict:
    """One chunk's numbers (module docstring)."""
    tail = {int(s): v for s, v in rec["tail"].items()}
    full = tail[1]
    carried_by = next((s for s in sorted(tail) if s > 1 and 1 - tail[s] / full >= CARRIED), None)
    return {"kind": rec["kind"], "doc": rec["doc"], "chunk": rec["chunk"], "loss": rec["loss"],
            "times_median": full / median, "check": full / rec["cell_sqnorm"],
            "first_target_share": 1 - tail[2] / full,
            "single_1_share": {int(t): v for t, v in rec["single"].items()}[1] / full,
            "carried_by_targets_before": carried_by,
            "shifted_times_median": rec["shifted"]["sqnorm"] / median,
            "float64_times_median": rec["float64"] / median if "float64" in rec else None,
            "no_start_token_times_median": rec["no_start_token"] / median,
            "first_tokens": rec["first_tokens"]}


def spike_reading(record: dict, factor: float = SPIKE_FACTOR) -> dict:
    """Every chunk of the record read (chunk_reading), and per kind (spiking, control) how many chunks meet each
    test of the module docstring: {"chunks": [...], "spiking": {...}, "control": {...}, "median", "corpus"}."""
    median = float(record["median"])
    rows = [chunk_reading(r, median) for r in record["chunks"]]
    out = {"corpus": record["corpus"], "median": median, "chunks": rows}
    for kind in ("spiking", "control"):
        rs = [r for r in rows if r["kind"] == kind]
        f64 = [r["float64_times_median"] for r in rs if r["float64_times_median"] is not None]
        out[kind] = {
            "n": len(rs),
            "first_target_share": float(np.median([r["first_target_share"] for r in rs])) if rs else None,
            "carried_by_first_target": sum(r["carried_by_targets_before"] == 2 for r in rs),
            "carried_by_first_targets": sum(r["carried_by_targets_before"] is not None for r in rs),
            "shifted_still_spiking": sum(r["shifted_times_median"] > factor for r in rs),
            "float64_still_spiking": sum(x > factor for x in f64), "float64_checked": len(f64),
            "without_start_token_spiking": sum(r["no_start_token_times_median"] > factor for r in rs),
            "largest_check_error": max((abs(r["check"] - 1) for r in rs), default=None),
        }
    return out


def spike_sentence(reading: dict) -> str:
    """The cause of the spikes in one sentence, no further than the record's counts go."""
    s, c = reading["spiking"], reading["control"]
    n = s["n"]
    parts = [f"In the {n} largest spiking {reading['corpus']} chunks, dropping the first target (x\u2081, predicted "
             f"from <|endoftext|> and x\u2080) removes a median {s['first_target_share']:.0%} of the squared "
             f"gradient norm (the {c['n']} non-spiking chunks beside them: {c['first_target_share']:.0%}), at least "
             f"{CARRIED:.0%} in {s['carried_by_first_target']} of {n}"]
    parts.append(f"moved one token later, {s['shifted_still_spiking']} of {n} still spike, so the spike "
                 + ("follows the chunk's first token, not the text as a whole" if s["shifted_still_spiking"] < n / 2
                    else "does not follow the chunk's first token"))
    parts.append(f"without the start token {s['without_start_token_spiking']} of {n} spike")
    if s["float64_checked"]:
        parts.append(f"in float64 {s['float64_still_spiking']} of {s['float64_checked']} still spike, so it is "
                     + ("not rounding" if s["float64_still_spiking"] > s["float64_checked"] / 2 else "rounding"))
    return "; ".join(parts) + "."


def first_token_counts(cell, tokens_by_doc: dict, factor: float = SPIKE_FACTOR) -> dict:
    """Which first token the spiking chunks of a cell begin with: {"n_chunks", "n_spiking", "rows"}, rows (token,
    chunks beginning with it, how many of them spike) for every first token of a spiking chunk, most spiking first.
    tokens_by_doc: {document: its span's token ids}."""
    sq = np.asarray(cell.sqnorm, dtype=float)
    spike = sq > factor * np.median(sq)
    first = np.array([[int(tokens_by_doc[int(d)][k * cell.chunk]) for k in range(cell.m)] for d in cell.doc_ids])
    rows = [{"token": int(t), "chunks": int((first == t).sum()), "spiking": int((spike & (first == t)).sum())}
            for t in np.unique(first[spike])]
    rows.sort(key=lambda r: (-r["spiking"], r["token"]))
    return {"n_chunks": int(spike.size), "n_spiking": int(spike.sum()), "rows": rows}


def first_token_sentence(by_corpus: dict, token: int, text: str) -> str:
    """How many spiking chunks of every corpus begin with `token` (shown as `text`), and how many of the chunks that
    begin with it spike, from first_token_counts per corpus."""
    spiking = sum(v["n_spiking"] for v in by_corpus.values())
    rows = [r for v in by_corpus.values() for r in v["rows"] if r["token"] == token]
    with_it = sum(r["spiking"] for r in rows)
    chunks = sum(r["chunks"] for r in rows)
    per = ", ".join(f"{c} {sum(r['spiking'] for r in v['rows'] if r['token'] == token)} of {v['n_spiking']}"
                    for c, v in by_corpus.items())
    return (f"{with_it} of the {spiking} spiking chunks of the {len(by_corpus)} corpora begin with {text!r} "
            f"(token {token}; {per}), and {with_it} of the {chunks} chunks that begin with it spike.")


def most_common_first_token(by_corpus: dict) -> int | None:
    """The token most spiking chunks begin with over every corpus of first_token_counts, or None with no spike."""
    total: dict[int, int] = {}
    for v in by_corpus.values():
        for r in v["rows"]:
            total[r["token"]] = total.get(r["token"], 0) + r["spiking"]
    return max(sorted(total), key=total.get) if total else None
