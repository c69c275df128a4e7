"""Page 02 in words (the count sketch and bf16 arithmetic), from the committed G1 results and the precision
records, by the rules of docgrad.presentation.evidence: the result box (sketch_box), a record described
(describe, also what `docgrad precision` prints), bf16's fidelity (fidelity_reading) and the same chunks in two
chunk contexts (context_reading, context_rows)."""

from __future__ import annotations

from typing import Mapping

from docgrad.core.constants import BF16_R_EQUIVALENCE_MARGIN, BF16_TAIL_COSINE
from docgrad.presentation import evidence as ev
from docgrad.presentation.evidence import sig
from docgrad.results.precision_checks import context_label


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


def describe(record: dict) -> str:
    """A few lines on a `docgrad precision` record: the gate, per corpus and per group."""
    g = record["gate"]
    lines = [f"{record['dtype']} vs float32, {record['model']}: {g['chunks']} chunks, {context_label(record)}; "
             "median gradient cosine "
             f"{g['median_cosine']:.5f} (min {g['min_cosine']:.5f}), median squared-norm ratio "
             f"{g['median_sqnorm_ratio']:.4f}, mean loss difference {g['mean_loss_difference']:+.4f} nats -> "
             f"{'PASSES' if g['passes'] else 'FAILS'} the gate (median cosine >= {g['threshold']})",
             f"forward+backward CPU time, float32 / {record['dtype']} (median): {record['median_cpu_speedup']:.2f}x"]
    for t in record["tail"]:
        lines.append(f"  tail: {t['corpus']} document {t['document']} chunk {t['chunk']}: cosine {t['cosine']:.4f}, "
                     f"squared-norm ratio {t['sqnorm_ratio']:.3f}"
                     + (f", float32 squared norm {t['sqnorm_fp32']:.1f}" if t.get("sqnorm_fp32") is not None else ""))
    for c, r in record["by_corpus"].items():
        gc = r["gate"]
        groups = ", ".join(f"{k} {v:.4f}" for k, v in gc["median_cosine_by_group"].items() if v is not None)
        lines.append(f"  {c}: median cosine {gc['median_cosine']:.5f}; by group {groups}")
    return "\n".join(lines)


def context_reading(comparison: dict) -> list[str]:
    """Sentences on tail_across_contexts: where the tail chunks go in the other context, the chunks that fail
    only there, and whether every failure comes with a float32 gradient larger than in the other context."""
    c, g = comparison, comparison["other_gate"]
    if not c["tail"]:
        return [f"No chunk falls below a cosine of {g['tail_cosine']} with {c['label_markdown']}, so there is no tail to "
                "follow into another context."]
    norm = lambda t: (f" (float32 squared norm {t['sqnorm_fp32']:.1f} to {t['sqnorm_fp32_other']:.1f})"   # noqa: E731
                      if t["sqnorm_fp32"] is not None and t["sqnorm_fp32_other"] is not None else "")
    moves = "; ".join(f"{t['corpus']} document {t['document']} chunk {t['chunk']} from {t['cosine']:.4f} to "
                      f"{t['cosine_other']:.4f}{norm(t)}" for t in c["tail"])
    out = [f"With {c['other_label_markdown']}, the same {g['chunks']} chunks give a median cosine of {g['median_cosine']:.4f} "
           f"(smallest {g['min_cosine']:.4f}); the tail chunks go {moves}."]
    gone = all(t["cosine_other"] >= g["tail_cosine"] for t in c["tail"])
    own = c["other_own_tail"]
    if own:
        names = "; ".join(f"{t['corpus']} document {t['document']} chunk {t['chunk']} ({t['cosine']:.4f}, squared-norm "
                          f"ratio {t['sqnorm_ratio']:.2f}"
                          + (f"; float32 squared norm {t['sqnorm_fp32']:.1f}, against {t['sqnorm_fp32_other']:.1f} for "
                             f"{c['label_markdown']}" if t["sqnorm_fp32"] is not None else "") + ")" for t in own)
        out.append(f"But {len(own)} other chunk{' falls' if len(own) == 1 else 's fall'} below {g['tail_cosine']} "
                   f"there: {names}. The tail {'moves' if gone else 'grows'} with what stands at the first position; "
                   "it does not go away.")
    elif gone:
        out.append(f"No chunk falls below {g['tail_cosine']} there: the tail sits at the chunk's first position, which "
                   "the chunk alone fills with an arbitrary token.")
    f = c["spike_factors"]
    if f and min(f) > 1:
        out.append(f"Each failing chunk fails in the context where its float32 gradient is the larger ({min(f):.1f} to "
                   f"{max(f):.1f} times the squared norm it has in the other): bf16 goes astray where the float32 "
                   "gradient itself spikes.")
    return out


def context_rows(record: dict, comparisons: list[dict]) -> list[dict]:
    """A table row per chunk input, `record`'s first, then each tail_across_contexts(record, other)'s other:
    median and smallest cosine, the number of chunks below BF16_TAIL_COSINE, and the cosine of each of `record`'s
    tail chunks."""
    tail = [(t["corpus"], t["document"], t["chunk"]) for t in record["tail"]]
    name = lambda k: f"{k[0]} d{k[1]} c{k[2]}"                                    # noqa: E731

    def row(label, gate, n_tail, cosines):
        return {"chunk input": label, "median cosine": gate["median_cosine"], "smallest cosine": gate["min_cosine"],
                f"chunks below {BF16_TAIL_COSINE}": n_tail, **{name(k): v for k, v in zip(tail, cosines)}}

    return [row(context_label(record), record["gate"], len(record["tail"]), [t["cosine"] for t in record["tail"]]),
            *[row(c["other_label"], c["other_gate"], len(c["other_tail"]), [t["cosine_other"] for t in c["tail"]])
              for c in comparisons]]


def fidelity_reading(record: dict, checks: dict, margin: float | None = BF16_R_EQUIVALENCE_MARGIN) -> list[str]:
    """Sentences on bf16's fidelity, from a precision record and cell_checks: the gate, the cell-level check
    per corpus (or that none was run), and what the project does with it. "No difference" needs an equivalence
    margin stated before the check (docs/methods.md#evidence-rules): bf16 is called equivalent at the level of
    R(16K) only when every paired interval lies inside (-margin, +margin); without a margin an interval that
    contains 0 leaves the question open, and float32 stays the arithmetic of new cells."""
    g = record["gate"]
    dt = record["dtype"]
    out = [f"Per chunk, over {g['chunks']} chunks of real text, the {dt} gradient has a median cosine of "
           f"{g['median_cosine']:.4f} with the float32 one (smallest {g['min_cosine']:.4f}) and a median squared-norm "
           f"ratio of {g['median_sqnorm_ratio']:.4f}: it {'passes' if g['passes'] else 'fails'} the gate "
           f"(median cosine at least {g['threshold']})."]
    tail = record.get("tail", [])
    if tail:
        worst = max(t["sqnorm_ratio"] for t in tail)
        names = ", ".join(f"{t['corpus']} document {t['document']} chunk {t['chunk']}" for t in tail)
        out.append(f"The median hides a tail: {len(tail)} of the {g['chunks']} chunks ({names}) fall below a cosine of "
                   f"{g['tail_cosine']}, with bf16 squared norms up to {worst:.2f} times the float32 ones, so only "
                   "the check on a whole cell can say whether the study's numbers move.")
    equivalent = []
    for c, d in checks.items():
        if d["diff_ci"] is None:
            out.append(f"{c}: R(16K) is {d['R']:.2f} in {dt} against {d['R_reference']:.2f} in float32 (no interval).")
            continue
        lo, hi = d["diff_ci"]
        inside = margin is not None and -margin < lo and hi < margin
        equivalent.append(inside)
        out.append(f"{c} ({d['documents']} documents): R(16K) is {d['R']:.2f} in {dt} against {d['R_reference']:.2f} "
                   f"in float32; the paired difference {d['diff']:+.2f} [{lo:+.2f}, {hi:+.2f}] "
                   + (f"lies inside the margin ±{margin} stated in advance: equivalent." if inside else
                      "excludes 0: bf16 moves R(16K)." if not d["within"] else
                      "contains 0, but no equivalence margin was stated before the check, so it does not show that "
                      "bf16 leaves R(16K) unchanged: not resolved." if margin is None else
                      f"contains 0 but reaches beyond the margin ±{margin} stated in advance: not resolved."))
    if not checks:
        out.append(f"No {dt} cell has been probed, so the check at the level of R(16K) has not been made.")
    if g["passes"] and equivalent and all(equivalent):
        out.append(f"{dt} passes the per-chunk gate and is equivalent at the level of R(16K): new cells may be "
                   f"probed with --dtype {dt}. The committed cells stay float32, and float32 stays the default.")
    else:
        out.append(f"{dt} is not shown equivalent to float32, so float32 stays the default and every committed "
                   "cell is float32.")
    return out


def g1_scope_lines(by_documents: Mapping[str, Mapping[str, dict]]) -> list[str]:
    """Why G1's pair count differs between pages. G1 pools the pairs of every --exact-ref result file a page
    reads (each file: one reference chunk against every other chunk of its documents), so a page that reads more
    documents states the same gate over more pairs. by_documents: {documents read (e.g. '0:16', '0:48'): {model
    label: G1 record with n_pairs and files}}; one sentence per model whose count changes with the documents,
    then one for the models whose count does not."""
    ranges = list(by_documents)
    models = list(dict.fromkeys(lab for per in by_documents.values() for lab in per))
    out, same = [], []
    for lab in models:
        got = [(docs, by_documents[docs].get(lab) or {}) for docs in ranges]
        counts = [(docs, g.get("n_pairs"), len(g.get("files", []))) for docs, g in got if g.get("n_pairs")]
        if len({n for _, n, _ in counts}) <= 1:
            same.append(lab)
            continue
        out.append(f"{lab}: " + "; ".join(f"documents {docs}: {n:,} pairs from {k} file{'s' if k != 1 else ''}"
                                           for docs, n, k in counts) + ".")
    if not out:
        return [f"G1 pools the --exact-ref pairs of every result file read; here every model has the same pairs "
                f"whichever documents ({', '.join(ranges)}) are read."]
    lead = ("G1 pools the --exact-ref pairs of every result file a page reads (one reference chunk against every "
            "other chunk of the file's documents), so a page that reads more documents states the same gate over "
            "more pairs:")
    tail = [f"{', '.join(same)}: the same pairs whichever documents are read (one --exact-ref file)."] if same else []
    return [lead, *out, *tail]
