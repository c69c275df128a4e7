"""Where each document comes from, as the analysis needs it: its *source* (author, work, project owner, package:
`source_label`; docs/methods.md#decomposition) and what the packed control is (`control_boundaries`,
`control_facts`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np

from docgrad.corpora import build as corpora

# --- sources -------------------------------------------------------------------------------------------

# GitHub owner of each pinned CODE project's source repository, as its PyPI metadata (Project-URL / Home-page
# of the version in the manifest) records it. The manifest records package and version only, so the owners
# are listed here; tests/test_decomposition.py checks them against the installed distributions' metadata.
REPOSITORY_OWNERS = {
    "jupytext": "jupytext", "arrow": "arrow-py", "httpx": "encode", "requests": "psf", "gguf": "ggml-org",
    "mistune": "lepture", "python-dateutil": "dateutil", "nbformat": "jupyter", "accelerate": "huggingface",
    "rich": "Textualize", "jupyter_client": "jupyter", "click": "pallets", "anyio": "agronholm",
    "markdown-it-py": "executablebooks", "traitlets": "ipython", "attrs": "python-attrs",
    # docs 16-47 (nbconvert and beautifulsoup4 name no GitHub repository: each is its own source)
    "tqdm": "tqdm", "urllib3": "urllib3", "lark": "lark-parser", "typer": "fastapi", "h11": "python-hyper",
    "packaging": "pypa", "papermill": "nteract", "Jinja2": "pallets", "jsonschema": "python-jsonschema",
    "parso": "davidhalter", "pyparsing": "pyparsing", "narwhals": "narwhals-dev", "pytest": "pytest-dev",
    "pexpect": "pexpect", "pip": "pypa", "mdit-py-plugins": "executablebooks", "mpmath": "fredrik-johansson",
    "jupyter_builder": "jupyterlab", "sympy": "sympy", "ipykernel": "ipython", "pycparser": "eliben",
    "huggingface_hub": "huggingface", "platformdirs": "tox-dev", "jupyterlab": "jupyterlab", "networkx": "networkx",
    "jedi": "davidhalter", "soupsieve": "facelessuser", "filelock": "tox-dev", "ipython": "ipython",
    "Pygments": "pygments",
}


def source_label(corpus: str, doc: dict) -> str:
    """The source of one manifest document record (`corpora[corpus]["documents"][i]`), first rule that applies:

    1. a packed pseudo-document (its source lists `members`, the WEB control): its own source,
       "<corpus> <doc>" (its short descriptions are unrelated packages);
    2. a recorded `author` (BOOKS: "Jane Austen", "Herman Melville");
    3. a PyPI project (CODE): "github.com/<owner>", the owner of its source repository (REPOSITORY_OWNERS;
       a project not listed there is its own source, "pypi:<package>");
    4. a recorded `group` (PAPERS: the R package, one vignette per package);
    5. a title "<work>: <part>" (BOOKS: "King James Bible: Genesis" -> "King James Bible");
    6. else the package name.
    """
    src = doc.get("source", {}) or {}
    if "members" in src:
        return f"{corpus} {doc['doc']}"
    if src.get("author"):
        return str(src["author"])
    if src.get("registry") == "PyPI":
        pkg = str(src.get("package", ""))
        return f"github.com/{REPOSITORY_OWNERS[pkg]}" if pkg in REPOSITORY_OWNERS else f"pypi:{pkg}"
    if src.get("group"):
        return str(src["group"])
    title = str(doc.get("title", ""))
    if ": " in title:
        return title.split(": ", 1)[0]
    return str(src.get("package", f"{corpus} {doc['doc']}"))


def document_sources(manifest: dict, corpus: str, doc_ids: Sequence[int] | None = None) -> list[str]:
    """Source labels of a corpus's documents (manifest dict as read from data/corpora/manifest.json), in the
    order of doc_ids (default: the manifest's order). An id missing from the manifest is its own source."""
    docs = {int(d["doc"]): d for d in manifest["corpora"][corpus]["documents"]}
    ids = list(docs) if doc_ids is None else [int(i) for i in doc_ids]
    return [source_label(corpus, docs[i]) if i in docs else f"{corpus} {i}" for i in ids]


# --- what was measured ------------------------------------------------------------------------------------

def control_boundaries(tokens: np.ndarray, separator_id: int, chunk: int) -> dict:
    """Document boundaries in a packed control: tokens (D, L) span token ids, cut into chunks of `chunk`.

    Returns: per_chunk (mean, median, min, max separators per chunk), frac_chunks_without (chunks with no
    separator: inside one long description), continued_tokens_mean (tokens at the start of a chunk up to and
    including its first separator: the part of the description that began in the previous chunk, chunk
    itself when there is no separator; first chunks of a span excluded) and its fraction of the chunk."""
    t = np.asarray(tokens)
    D, L = t.shape
    m = L // chunk
    x = t[:, : m * chunk].reshape(D, m, chunk) == separator_id
    n = x.sum(axis=2)
    first = np.where(x.any(axis=2), x.argmax(axis=2) + 1, chunk)[:, 1:]
    return {"per_chunk": {"mean": float(n.mean()), "median": float(np.median(n)), "min": int(n.min()),
                          "max": int(n.max())},
            "frac_chunks_without": float(np.mean(n == 0)), "continued_tokens_mean": float(first.mean()),
            "continued_frac": float(first.mean() / chunk), "chunks": int(D * m)}


def control_facts(manifest_path: str | Path = "data/corpora/manifest.json", corpus: str = "WEB",
                  chunk: int = 512, cache_dir: str | Path | None = None, doc_ids: Sequence[int] | None = None) -> dict:
    """What the packed control is, for the pages: the manifest's packing record (separator, descriptions per
    pseudo-document, description length in tokens including the separator, the expected boundaries per
    chunk) and, when the span cache is there (checked against the manifest by corpora.load_spans), the
    boundaries counted in the measured spans (control_boundaries); `boundaries_from` says which.

    doc_ids: the pseudo-documents measured (default: all of the manifest's). Descriptions used, descriptions per
    pseudo-document, the expected boundaries per chunk (chunk / mean description length, separator included) and
    the counted boundaries are over those; the description-length summary is the manifest's, over the corpus."""
    man = json.loads(Path(manifest_path).read_text())
    entry = man["corpora"][corpus]
    packing = entry.get("packing", {})
    sep = packing.get("separator") or man.get("tokenizer", {}).get("separator", {})
    docs = entry.get("documents", [])
    ids = [int(d["doc"]) for d in docs] if doc_ids is None else [int(i) for i in doc_ids]
    chosen = [d for d in docs if int(d["doc"]) in set(ids)]
    members = [int(d["n_members"]) for d in chosen if "n_members" in d]
    expected = packing.get(f"expected_boundaries_per_{chunk}_token_chunk")
    if members and len(members) == len(chosen):
        expected = round(chunk / (sum(int(d["tokens"]) for d in chosen) / sum(members)), 2)
    out = {"corpus": corpus, "selection": entry.get("selection"), "source": entry.get("source", {}),
           "separator": sep, "documents": ids,
           "descriptions_used": sum(members) if members else packing.get("short_documents_used"),
           "description_tokens": packing.get("short_document_tokens_incl_separator"),
           "descriptions_per_document": corpora.summary(members) if members else packing.get("short_documents_per_pseudo_document"),
           "expected_boundaries_per_chunk": expected, "boundaries": None, "boundaries_from": "manifest"}
    try:
        kw = {} if cache_dir is None else {"cache_dir": cache_dir}
        spans = [sp for sp in corpora.load_spans(corpus, manifest_path, **kw) if sp.doc in set(ids)]
    except (corpora.CorpusError, OSError) as e:
        out["boundaries_note"] = f"span cache not available ({type(e).__name__}); expected value from the manifest"
        return out
    out["boundaries"] = control_boundaries(np.stack([sp.tokens for sp in spans]), int(sep["id"]), chunk)
    out["boundaries_from"] = "span cache"
    return out

