"""The answer of page 02 (the count sketch and bf16 arithmetic), from the committed G1 results and the
precision records, by the rules of docgrad.presentation.evidence."""

from __future__ import annotations

from typing import Mapping

from docgrad.presentation import evidence as ev
from docgrad.presentation.evidence import sig


def sketch_box(g1_by_model: Mapping[str, dict], precision_record: dict, cell_checks: Mapping[str, dict],
               margin: float | None = None) -> str:
    """G1 per model (mean and sd of the sketched cosine's error over the --exact-ref pairs), then bf16: the
    per-chunk gate and its tail, and whether R(16K) is shown equivalent (only within a margin stated in advance)."""
    answer = []
    for label, g in g1_by_model.items():
        if g.get("pass") is None:
            answer.append(f"{label}: G1 not evaluated ({g.get('summary', 'no --exact-ref file')}).")
            continue
        answer.append(f"{label}: the sketch {'passes' if g['pass'] else 'fails'} G1, cosine error "
                      f"{sig(g['mean_cos_diff'], 2)} ± {sig(g['sd_cos_diff'], 2)} over {g['n_pairs']} pairs.")
    gate, tail = precision_record["gate"], precision_record.get("tail", [])
    answer.append(f"bf16 forward passes: median gradient cosine {gate['median_cosine']:.4f} over {gate['chunks']} "
                  f"chunks, {len(tail)} below {gate.get('tail_cosine', 0.99)}.")
    for corpus, d in cell_checks.items():
        c = ev.equivalence(f"{corpus}'s R(16K), bf16 minus float32", d["diff"], d["diff_ci"], margin)
        answer.append(c.text)
    measured = "committed --exact-ref cells of both models; one bf16 record and cell of SmolLM2-135M-Instruct."
    caveat = "float32 stays the study's arithmetic: bf16 is not shown equivalent at the level of R(16K)." if not (
        cell_checks and all(ev.equivalence("", d["diff"], d["diff_ci"], margin).status == ev.EQUIVALENT
                            for d in cell_checks.values())) else "bf16 is equivalent within the stated margin."
    return ev.result_box(answer, measured, caveat)
