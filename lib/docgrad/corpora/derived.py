"""A control at the span of the corpus it is measured beside: the first N tokens of another corpus's spans.

A corpus of your own with a span of N tokens is read at W = N. Its control (WEB: 16K-token spans) only needs its
first N tokens there, and probing the rest costs (16K / N - 1) times the chunks for nothing. `prefix_corpus`
writes a corpus `<CONTROL>S<N>` into the same manifest whose document d is tokens [start, start + N) of the
control's document d (the same documents, the same start), recorded with where it came from.
"""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np

from docgrad.corpora import build
from docgrad.corpora.build import CorpusError
from docgrad.fileio import locked


def prefix_name(control: str, tokens: int) -> str:
    """The derived corpus's name: 'WEBS2048' for the first 2,048 tokens of WEB's spans."""
    return f"{control}S{int(tokens)}"


def prefix_corpus(control: str, tokens: int, chunk: int, manifest_path, cache_dir, command: str = "") -> str:
    """Write (or find, when already there and the same) the corpus of the first `tokens` tokens of every span of
    `control` into its manifest and span cache; returns its name. A corpus of that name that is not this
    derivation is refused (CorpusError): it is never replaced."""
    name = prefix_name(control, tokens)
    manifest_path, cache_dir = Path(manifest_path), Path(cache_dir)
    with locked(manifest_path):
        man = build.read_manifest(manifest_path)
        src = build.corpus_entry(man, control, manifest_path)
        rule = build.span_rule(src)
        if not 0 < tokens < rule.tokens or tokens % chunk:
            raise CorpusError(f"{control}: a prefix of {tokens} tokens of its {rule.tokens}-token spans in whole "
                              f"chunks of {chunk} is not a shorter span")
        spans = np.stack([s.tokens[:tokens].astype(np.int32)
                          for s in build.load_spans(control, manifest_path, cache_dir)])
        derived = {"corpus": control, "span_tokens": int(tokens)}
        docs = [{**copy.deepcopy(d), "span_sha256": build.span_sha256(row)}          # the same start: the same
                for d, row in zip(src["documents"], spans)]                          # first words
        held = man["corpora"].get(name)
        if held is not None:
            same = held.get("derived_from") == derived and [d["span_sha256"] for d in held["documents"]] == \
                [d["span_sha256"] for d in docs]
            if not same:
                raise CorpusError(f"{manifest_path}: holds a corpus {name} that is not the first {tokens} tokens of "
                                  f"{control}'s spans; rename it, or measure with another --control")
            return name
        entry = {k: copy.deepcopy(v) for k, v in src.items() if k not in ("documents", "rejected", "command",
                                                                          "span")}
        entry.update({"selection": f"The first {tokens} tokens of every span of {control} (the same documents and "
                                   f"start): a control at the span of the corpus it is measured beside.",
                      "derived_from": derived,
                      "span": build.SpanRule(rule.start, tokens, chunk).record(),
                      **({"command": command} if command else {})})
        entry = build.finish_entry(entry, docs, [])
        build.store(man, manifest_path, cache_dir, {name: (entry, spans)})
    return name
