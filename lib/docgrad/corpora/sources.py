"""Where the offline corpora come from: fetching (apt, PyPI), extraction and cleaning.

Each corpus is an ordered list of `Candidate`s; `docgrad.corpora.build` tokenizes them in order and keeps the
first 16 that are long enough (the rest are listed as rejected or spare). Candidate order is the
selection rule, so it is fixed here and documented per corpus:

- BOOKS: the six Austen novels in publication order, Moby-Dick, then the books of the King James Bible
  in canonical order (Debian `r-cran-janeaustenr`, `r-cran-tokenizers`, `bible-kjv`).
- CODE: pinned pure-Python projects of the project's own dependency tree (exact versions below), ordered by
  sha256(f"{seed}:{name}") (the first list, then its extension to 48 documents); one document per project: its `.py` files in sorted path order, each preceded by
  a `# ===== <path> =====` header; tests and vendored copies of other projects excluded.
- PAPERS: R package vignettes (Sweave `.Rnw` / R Markdown `.Rmd` sources of papers, mostly Journal of
  Statistical Software articles) from Debian `r-cran-*` packages, packages in the fixed order of
  `PAPER_PACKAGES`, then `PAPER_PACKAGES_EXTENSION`; per package its vignettes by size, largest first; at most
  one document per package.
- WEB: Debian long package descriptions (bookworm main Translation-en), deduplicated, ordered by
  sha256(f"{seed}:{package}"), packed back to back by `docgrad.corpora.build.pack_short_documents`.

Fetching prints what it does; every failure raises `SourceError` naming the package and the command.
"""

from __future__ import annotations

import glob
import hashlib
import importlib.metadata
import re
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from docgrad.corpora.rlazy import load_lazy_db
from docgrad.errors import DocgradError


class SourceError(DocgradError, RuntimeError):
    """A source cannot be fetched or read (apt/pip failure, missing file); names the package or path."""


class DocumentError(DocgradError, ValueError):
    """One candidate document is unusable (empty, undecodable, too short); names the document."""


@dataclass
class Candidate:
    """One candidate document: a title, where it comes from, and a function that returns its cleaned text."""

    title: str
    source: dict
    load: Callable[[], str] = field(repr=False)

    def text(self) -> str:
        text = self.load()
        if not text or not text.strip():
            raise DocumentError(f"{self.title}: empty text after cleaning (expected a long document)")
        return text


def say(msg: str) -> None:
    print(f"[corpora] {msg}", file=sys.stderr, flush=True)


def decode_utf8(data: bytes, what: str) -> str:
    """Strict UTF-8 decoding; undecodable bytes are an error naming the document and the byte offset."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DocumentError(f"{what}: undecodable bytes (not UTF-8) at byte {e.start}: "
                            f"{data[max(0, e.start - 10):e.end + 10]!r}") from None


def seeded_order(names, seed: int) -> list:
    """Names sorted by sha256(f"{seed}:{name}") -- a fixed pseudo-random order that no alphabet clusters."""
    return sorted(names, key=lambda n: hashlib.sha256(f"{seed}:{n}".encode()).hexdigest())


# --- apt ---------------------------------------------------------------------------------------------

_APT_UPDATED = False


def _run(cmd: list[str], what: str, cwd: Path | None = None) -> str:
    try:
        p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    except FileNotFoundError:
        raise SourceError(f"{what}: command not found: {cmd[0]} (a Debian/Ubuntu system with apt is needed)") from None
    if p.returncode != 0:
        tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
        raise SourceError(f"{what}: `{' '.join(cmd)}` failed (exit {p.returncode}): {' | '.join(tail)}")
    return p.stdout


def apt_update() -> None:
    """`apt-get update` with English long descriptions (once per process)."""
    global _APT_UPDATED
    if not _APT_UPDATED:
        say("apt-get update -o Acquire::Languages=en (package indexes + English long descriptions)")
        _run(["apt-get", "update", "-o", "Acquire::Languages=en"], "apt index update")
        _APT_UPDATED = True


def _retry_after_update(first: SourceError, what: str) -> None:
    """After a failed fetch of `what`: update the indexes (once) so the caller can retry."""
    if _APT_UPDATED:
        raise first
    try:
        apt_update()
    except SourceError as e:
        raise SourceError(f"{what}: cannot be fetched ({first}); `apt-get update` also failed: {e}") from None


def _run_apt(cmd: list[str], what: str, cwd: Path | None = None) -> str:
    """_run for an apt-get fetch: when it fails, update the package indexes (once) and try again."""
    try:
        return _run(cmd, what, cwd=cwd)
    except SourceError as first:
        _retry_after_update(first, what)
        return _run(cmd, what, cwd=cwd)


def deb_version(deb: Path) -> str:
    return _run(["dpkg-deb", "-f", str(deb), "Version"], f"{deb.name}").strip()


def apt_download(package: str, cache: Path, version: str | None = None) -> Path:
    """The .deb of `package` (optionally exactly `version`) in cache/apt/debs, downloaded if missing."""
    debs = cache / "apt" / "debs"
    debs.mkdir(parents=True, exist_ok=True)

    def cached() -> list[Path]:
        return [d for d in sorted(debs.glob(f"{package}_*.deb")) if version is None or deb_version(d) == version]

    if found := cached():
        return found[0]
    spec = f"{package}={version}" if version else package
    say(f"apt-get download {spec} -> {debs}")
    _run_apt(["apt-get", "download", spec], f"download of {spec}", cwd=debs)
    found = cached()
    if not found:
        raise SourceError(f"{spec}: apt-get download succeeded but no .deb appeared in {debs}")
    return found[-1]


def apt_extract(package: str, cache: Path, version: str | None = None) -> tuple[Path, str]:
    """(directory the .deb was extracted into, its version); extraction is cached."""
    deb = apt_download(package, cache, version)
    ver = deb_version(deb)
    out = cache / "apt" / "x" / f"{package}_{ver}"
    if not (out / ".done").exists():
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        _run(["dpkg-deb", "-x", str(deb), str(out)], f"extraction of {deb.name}")
        (out / ".done").write_text(ver)
    return out, ver


def apt_install(package: str, command: str) -> str:
    """Install `package` if `command` is missing; returns the installed version."""
    if shutil.which(command) is None:
        say(f"apt-get install -y {package} (provides `{command}`)")
        _run_apt(["apt-get", "install", "-y", package], f"install of {package}")
    return _run(["dpkg-query", "-W", "-f", "${Version}", package], f"version of {package}").strip()


# --- BOOKS -------------------------------------------------------------------------------------------

AUSTEN = [("sensesensibility", "Sense and Sensibility"), ("prideprejudice", "Pride and Prejudice"),
          ("mansfieldpark", "Mansfield Park"), ("emma", "Emma"), ("northangerabbey", "Northanger Abbey"),
          ("persuasion", "Persuasion")]
# every KJV book of at least ~70 KB of text is in this list (the 35 others are shorter: none reaches 18432 tokens)
KJV_BOOKS = [("Gen", "Genesis"), ("Exo", "Exodus"), ("Lev", "Leviticus"), ("Num", "Numbers"),
             ("Deu", "Deuteronomy"), ("Jos", "Joshua"), ("Jdg", "Judges"), ("Rut", "Ruth"), ("1Sa", "1 Samuel"),
             ("2Sa", "2 Samuel"), ("1Ki", "1 Kings"), ("2Ki", "2 Kings"), ("1Ch", "1 Chronicles"),
             ("2Ch", "2 Chronicles"), ("Ezr", "Ezra"), ("Neh", "Nehemiah"), ("Est", "Esther"), ("Job", "Job"),
             ("Psa", "Psalms"), ("Pro", "Proverbs"), ("Ecc", "Ecclesiastes"), ("Isa", "Isaiah"),
             ("Jer", "Jeremiah"), ("Eze", "Ezekiel"), ("Dan", "Daniel"), ("Mat", "Matthew"), ("Mar", "Mark"),
             ("Luk", "Luke"), ("Joh", "John"), ("Act", "Acts"), ("Rom", "Romans")]
_GUTENBERG_START = re.compile(r"^\*\*\* ?START OF (THIS|THE) PROJECT GUTENBERG.*$", re.M | re.I)
_GUTENBERG_END = re.compile(r"^\*\*\* ?END OF (THIS|THE) PROJECT GUTENBERG.*$", re.M | re.I)


def r_lines(lines: list) -> str:
    """An R character vector of lines as text (NA lines become empty), outer blank lines stripped."""
    return "\n".join(s or "" for s in lines).strip("\n") + "\n"


def strip_gutenberg(text: str, title: str) -> str:
    """The text between the `*** START OF ... PROJECT GUTENBERG` and `*** END OF ...` lines."""
    start, end = _GUTENBERG_START.search(text), _GUTENBERG_END.search(text)
    if not start or not end or end.start() <= start.end():
        raise DocumentError(f"{title}: Project Gutenberg START/END marker lines not found; cannot cut the "
                            "header and licence")
    return text[start.end():end.start()].strip("\n") + "\n"


def clean_kjv(raw: str) -> str:
    """`bible` output -> text: verse numbers dropped, wrapped lines of a verse joined, chapter heads kept.

    Input lines look like `  13 And the evening ...` (a verse starts) or `continuation` (wrapped) or
    `Genesis 2` (chapter head, after a blank line).
    """
    out: list[str] = []
    for line in raw.splitlines():
        m = re.match(r"^\s+\d+ (.*)$", line)
        if m:
            out.append(m.group(1).strip())
        elif not line.strip():
            if out and out[-1] != "":
                out.append("")
        elif out and out[-1] != "" and not re.match(r"^\S.* \d+$", line):
            out[-1] += " " + line.strip()
        else:
            out.append(line.strip())
    return "\n".join(out).strip("\n") + "\n"


def books_candidates(cache: Path, pins: dict | None = None) -> Iterator[Candidate]:
    pins = pins or {}
    jane, jver = apt_extract("r-cran-janeaustenr", cache, pins.get("r-cran-janeaustenr"))
    tokz, tver = apt_extract("r-cran-tokenizers", cache, pins.get("r-cran-tokenizers"))
    jpath = "usr/lib/R/site-library/janeaustenr/data/Rdata"
    tpath = "usr/lib/R/site-library/tokenizers/data/Rdata"
    jdb = load_lazy_db(jane / jpath)
    for key, title in AUSTEN:
        yield Candidate(title, {"package": "r-cran-janeaustenr", "version": jver, "path": f"/{jpath}.rdb",
                                "object": key, "author": "Jane Austen"},
                        lambda key=key: r_lines(jdb[key]))
    tdb = load_lazy_db(tokz / tpath)
    yield Candidate("Moby-Dick", {"package": "r-cran-tokenizers", "version": tver, "path": f"/{tpath}.rdb",
                                  "object": "mobydick", "author": "Herman Melville",
                                  "cleaning": "Project Gutenberg header and licence cut"},
                    lambda: strip_gutenberg(r_lines(tdb["mobydick"]), "Moby-Dick"))
    kver = apt_install("bible-kjv", "bible")
    for abbr, name in KJV_BOOKS:
        query = f"{abbr}1:1-150:200"
        yield Candidate(f"King James Bible: {name}",
                        {"package": "bible-kjv", "version": kver, "path": "/usr/lib/bible.data",
                         "command": f"bible '{query}'", "cleaning": "verse numbers dropped"},
                        lambda q=query: clean_kjv(_run(["bible", q], f"bible {q}")))


# --- CODE --------------------------------------------------------------------------------------------

# Pure-Python (py3-none-any) projects of docgrad's own dependency tree, pinned to the versions resolved in
# the project's environment; all permissively licensed (MIT, BSD, Apache-2.0, MPL-2.0/MIT for tqdm).
CODE_PROJECTS = {
    "accelerate": "1.15.0", "anyio": "4.16.0", "arrow": "1.4.0", "attrs": "26.1.0", "beautifulsoup4": "4.15.0",
    "bleach": "6.4.0", "click": "8.5.1", "gguf": "0.19.0", "h11": "0.16.0", "httpx": "0.28.1",
    "Jinja2": "3.1.6", "jsonschema": "4.26.0", "jupyter_client": "8.10.0", "jupytext": "1.19.6",
    "lark": "1.3.1", "markdown-it-py": "4.3.0", "mistune": "3.4.0", "nbconvert": "7.17.2",
    "nbformat": "5.11.1", "packaging": "26.4", "papermill": "2.7.0", "parso": "0.8.7",
    "pyparsing": "3.3.3", "python-dateutil": "4.0.0", "requests": "2.34.2", "rich": "15.0.0",
    "tqdm": "4.70.1", "traitlets": "5.16.1", "typer": "0.29.2", "urllib3": "2.8.0",
}
# The extension to 48 documents (issue 27): the other pure-Python distributions of the same environment with at
# least ~70 KB of non-test code, at the versions `make` installed on 2026-12-01 (httpx2/httpcore2, forks of
# httpx/httpcore, left out as near-copies). Tried after every project above, so the first 16 documents stay.
CODE_PROJECTS_EXTENSION = {
    "transformers": "5.24.0", "sympy": "1.14.0", "Pygments": "2.21.0", "networkx": "3.6.1", "altair": "6.3.0",
    "huggingface_hub": "2.4.0", "narwhals": "2.29.0", "ipython": "9.18.1", "pydantic": "2.14.4",
    "mpmath": "1.3.0", "setuptools": "84.2.1", "pytest": "9.2.0", "prompt_toolkit": "3.0.53", "pip": "26.3",
    "jedi": "0.20.1", "jupyter_server": "2.21.1", "fsspec": "2026.9.0", "filelock": "4.3.1", "babel": "2.19.0",
    "ipykernel": "7.4.0", "idna": "3.20", "jupyterlab": "4.6.6", "httpcore": "1.0.9", "pycparser": "3.12",
    "ipywidgets": "8.1.9", "soupsieve": "4.1.3", "prometheus_client": "0.26.0", "pexpect": "4.9.0",
    "platformdirs": "4.14.9", "typing_extensions": "4.16.0", "mdit-py-plugins": "0.7.0",
    "jupyterlab_server": "2.28.1", "websocket-client": "1.9.2", "jupyter_builder": "1.3.0", "tinycss2": "1.5.1",
}
_EXCLUDED_DIRS = {"test", "tests", "testing", "__pycache__", "_vendor", "vendor", "vendored"}
_TEST_FILE = re.compile(r"^(test_.*|.*_test|conftest)\.py$")


def is_code_source(path: str) -> bool:
    """A `.py` file of the project proper: not a test, not under tests/ or a vendored copy, not metadata."""
    parts = path.split("/")
    if not path.endswith(".py") or parts[0] == ".." or any(p.endswith((".dist-info", ".data")) for p in parts):
        return False
    return not (set(parts[:-1]) & _EXCLUDED_DIRS or _TEST_FILE.match(parts[-1]))


def path_header(path: str) -> str:
    """The line that precedes each file of a concatenated document (CODE, and user corpora of folders)."""
    return f"# ===== {path} ====="


def concat_files(texts: dict[str, str]) -> str:
    """{path: text} as one document: the files in sorted path order, each preceded by its path_header."""
    return "\n".join(f"{path_header(path)}\n{texts[path].rstrip()}\n" for path in sorted(texts))


def concat_sources(files: dict[str, bytes], project: str) -> str:
    """Files in sorted path order, each preceded by `# ===== <path> =====`; tests excluded."""
    return concat_files({path: decode_utf8(files[path], f"{project}: {path}")
                         for path in sorted(p for p in files if is_code_source(p))})


def project_files(name: str, version: str, cache: Path) -> tuple[dict[str, bytes], str]:
    """{path: bytes} of the project's wheel: the installed copy if it is exactly `version`, else the wheel
    from PyPI (`pip download --no-deps --only-binary=:all:`, cached)."""
    try:
        dist = importlib.metadata.distribution(name)
        if dist.version == version:
            files = {str(f): Path(dist.locate_file(f)).read_bytes() for f in (dist.files or [])
                     if is_code_source(str(f))}
            return files, f"installed {name}=={version}"
    except importlib.metadata.PackageNotFoundError:
        pass
    wheels = cache / "pypi"
    wheels.mkdir(parents=True, exist_ok=True)
    norm = re.sub(r"[-_.]+", "_", name).lower()

    def cached() -> list[Path]:
        return [w for w in wheels.glob("*.whl") if w.name.lower().startswith(f"{norm}-{version}-")]

    found = cached()
    if not found:
        say(f"pip download {name}=={version} -> {wheels}")
        _run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", str(wheels),
              f"{name}=={version}"], f"download of {name}=={version} from PyPI")
        found = cached()
        if not found:
            raise SourceError(f"{name}=={version}: pip download produced no wheel in {wheels}")
    with zipfile.ZipFile(found[0]) as z:
        return {n: z.read(n) for n in z.namelist() if is_code_source(n)}, found[0].name


def code_candidates(cache: Path, seed: int, projects: dict | None = None) -> Iterator[Candidate]:
    """CODE_PROJECTS in seeded order, then CODE_PROJECTS_EXTENSION in seeded order (given `projects`: only those)."""
    tiers = [projects] if projects else [CODE_PROJECTS, CODE_PROJECTS_EXTENSION]
    for name, version in [(n, tier[n]) for tier in tiers for n in seeded_order(tier, seed)]:

        def load(name=name, version=version):
            files, origin = project_files(name, version, cache)
            return concat_sources(files, f"{name}=={version}")

        yield Candidate(f"{name} {version}", {"package": name, "version": version, "registry": "PyPI",
                                              "path": "*.py (tests and vendored code excluded)"}, load)


# --- PAPERS ------------------------------------------------------------------------------------------

PAPER_PACKAGES = ["survival", "lme4", "rrcov", "ordinal", "plm", "systemfit", "vcd", "psych", "sandwich",
                  "effects", "rcppeigen", "partykit", "rpart", "flexmix", "mixtools", "rgenoud",
                  # slack, in case some of the above are too short under the tokenizer
                  "coin", "desolve", "glmnet", "pscl", "spacetime"]
# The extension to 48 documents (issue 27): every other Debian bookworm package whose largest vignette source
# under /usr/lib/R/site-library/*/doc/ was >= 55,000 bytes in a survey of all 610 packages that ship one
# (2026-12-01, `apt-file` + `apt-get download`), largest first, CRAN before Bioconductor; full package names.
# Left out: r-cran-libcoin (a literate program), r-cran-spatstat (its largest vignette is a change log),
# r-cran-sitmo (its largest is a random-number test transcript).
PAPER_PACKAGES_EXTENSION = [
    "r-cran-irace", "r-cran-psychtools", "r-cran-gnm", "r-cran-tgp", "r-cran-markovchain", "r-cran-surveillance",
    "r-cran-tikzdevice", "r-cran-mediana", "r-cran-rnexml", "r-cran-seriation", "r-cran-network",
    "r-cran-logcondens", "r-cran-rodbc", "r-cran-fitdistrplus", "r-cran-rcmdr", "r-cran-gwidgets", "r-cran-dbscan",
    "r-cran-rstanarm", "r-cran-bayesfactor", "r-cran-erm", "r-cran-bms", "r-cran-actuar", "r-cran-dimred",
    "r-cran-forecast", "r-cran-rockchalk", "r-cran-dendextend", "r-cran-clue", "r-cran-nmf", "r-cran-apcluster",
    "r-cran-robustbase", "r-cran-matchit", "r-cran-laeken", "r-cran-rgdal", "r-cran-pls", "r-cran-gstat",
    "r-cran-adegraphics", "r-cran-hsaur3", "r-cran-bayesm",
    "r-bioc-isoformswitchanalyzer", "r-bioc-gviz", "r-bioc-deseq2", "r-bioc-chemminer",
    "r-bioc-mutationalpatterns", "r-bioc-noiseq", "r-bioc-qusage", "r-bioc-deseq", "r-bioc-genomicalignments",
    "r-bioc-cummerbund",
]
PAPER_EXCLUDE = {"libcoin.Rnw"}  # a 700 KB literate program, not a paper


def vignettes(root: Path) -> list[Path]:
    """Vignette sources (`*.Rnw`, `*.Rmd`) under an extracted R package, largest first (ties by path)."""
    found = [Path(p) for p in glob.glob(str(root / "usr/lib/R/*/*/doc/*"))
             if p.endswith((".Rnw", ".Rmd")) and Path(p).name not in PAPER_EXCLUDE]
    return sorted(found, key=lambda p: (-p.stat().st_size, str(p)))


def papers_candidates(cache: Path, pins: dict | None = None) -> Iterator[Candidate]:
    """Per package (fixed order) its vignettes, largest first; `docgrad.corpora.build` keeps one per package."""
    pins = pins or {}
    for deb in [f"r-cran-{p}" for p in PAPER_PACKAGES] + PAPER_PACKAGES_EXTENSION:
        pkg = deb.removeprefix("r-cran-").removeprefix("r-bioc-")
        root, ver = apt_extract(deb, cache, pins.get(deb))
        for path in vignettes(root):
            rel = "/" + str(path.relative_to(root))
            yield Candidate(f"{path.parent.parent.name}: {path.name}",
                            {"package": deb, "version": ver, "path": rel, "group": pkg},
                            lambda p=path, rel=rel: decode_utf8(p.read_bytes(), f"{deb} {rel}"))


# --- WEB ---------------------------------------------------------------------------------------------

TRANSLATION_GLOB = "/var/lib/apt/lists/*_dists_bookworm_main_i18n_Translation-en*"


def translation_file(pattern: str = TRANSLATION_GLOB) -> Path:
    files = sorted(glob.glob(pattern))
    if not files:
        apt_update()
        files = sorted(glob.glob(pattern))
    if not files:
        raise SourceError(f"no Debian bookworm main Translation-en index matches {pattern}; run "
                          "`apt-get update -o Acquire::Languages=en` on a Debian 12 system")
    return Path(files[0])


def read_translation(path: Path) -> str:
    if path.suffix in (".lz4", ".gz", ".xz", ".bz2", ".zst"):
        return _run(["/usr/lib/apt/apt-helper", "cat-file", str(path)], f"decompression of {path}")
    return decode_utf8(path.read_bytes(), str(path))


def parse_descriptions(text: str) -> list[tuple[str, str]]:
    """(package, description) pairs of a Translation-en file: the summary line, then the long description
    with the one-space indent removed and ` .` lines as paragraph breaks."""
    out = []
    for record in text.split("\n\n"):
        pkg = re.search(r"^Package: *(\S+)", record, re.M)
        desc = re.search(r"^Description-en: ?(.*?)(?=\n\S|\Z)", record, re.S | re.M)
        if not (pkg and desc):
            continue
        lines = desc.group(1).split("\n")
        body = "\n".join("" if ln.strip() == "." else ln[1:] for ln in lines[1:])
        out.append((pkg.group(1), (lines[0].strip() + "\n" + body).strip()))
    return out


def dedupe_descriptions(pairs: list[tuple[str, str]]) -> tuple[list[tuple[str, str]], dict]:
    """Keep the first package (by name) of each group sharing a description or its first body paragraph
    (the -dev/-doc/-dbg siblings of one library repeat it)."""
    seen_text, seen_para, kept = set(), set(), []
    n_exact = n_sibling = 0
    for pkg, text in sorted(pairs):
        lines = text.split("\n", 1)
        para = lines[1].split("\n\n")[0].strip() if len(lines) > 1 and lines[1].strip() else lines[0]
        if text in seen_text:
            n_exact += 1
        elif para in seen_para:
            n_sibling += 1
        else:
            kept.append((pkg, text))
        seen_text.add(text)
        seen_para.add(para)
    return kept, {"records": len(pairs), "exact_duplicates_dropped": n_exact,
                  "sibling_duplicates_dropped": n_sibling, "unique": len(kept)}


def web_descriptions(seed: int, pattern: str = TRANSLATION_GLOB) -> tuple[list[tuple[str, str]], dict]:
    """Deduplicated descriptions in seeded hash order of package name, plus provenance."""
    path = translation_file(pattern)
    say(f"reading Debian long descriptions from {path}")
    raw = read_translation(path)
    kept, stats = dedupe_descriptions(parse_descriptions(raw))
    order = {p: i for i, p in enumerate(seeded_order([p for p, _ in kept], seed))}
    kept.sort(key=lambda pt: order[pt[0]])
    source = {"package": "Debian bookworm main Translation-en", "path": path.name,
              "sha256": hashlib.sha256(raw.encode()).hexdigest(), **stats}
    return kept, source
