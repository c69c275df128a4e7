"""The self-contained HTML report: report/index.html plus one page per executed notebook.

Each page is the executed notebook exported by nbconvert's `lab` template, with
  * navigation (contents, previous, next) at the top and bottom;
  * every Altair chart (a Vega-Lite MIME output, see pages.setup) turned into a vega-embed call (SVG renderer,
    so the text a chart computes is in the page: tests/test_browser.py reads it), with
    the Vega, Vega-Lite and vega-embed JavaScript inlined once per page (from vl_convert), so the charts
    are interactive with no network;
  * the code of every code cell folded behind a "show code" control (a closed <details class="docgrad-code">,
    as Jupyter Book's hide-input), its output visible; the executed .ipynb keeps its code, only the HTML folds;
  * the code of cells tagged `hide-input` removed (their output stays);
  * the code of cells tagged `show-input` (worked code that is there to be read) shown, not folded;
  * cells tagged `solution` (worked solutions of a page's exercises) collapsed in <details>, opened by a click
    on "Solution"; their code is not folded a second time inside;
  * no CDN scripts (require.js, MathJax, Mermaid are dropped; Jupyter widget outputs, such as a library's
    progress bar, are removed with the notebook's widget state, whose HTML would load the widget manager from a
    CDN), so the page makes no network request; the TeX math of markdown ($...$, $$...$$) is converted to
    MathML at build time (latex2mathml), which the browser renders natively.
The index opens with the headline: the outputs of every code cell tagged `headline`, from all pages in page
order (no such cell: no headline section), then a short abstract and a table of contents with each notebook's
title and the start of its first paragraph.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from pathlib import Path

from docgrad.fileio import atomic_write_bytes
from docgrad.runtime.pages import is_page, page_order

ABSTRACT = (
    "How much gradient noise do whole-document long-context batches add? Sequences drawn from one document "
    "carry correlated gradients, so a batch of whole documents averages fewer independent directions than its "
    "token count suggests. These notebooks measure that correlation on real language-model gradients (per-chunk "
    "gradients, count-sketched Gram matrices, document bootstrap), and start with the loss-reduction arithmetic "
    "underneath: what a mean over tokens actually weights, how padding masks and gradient accumulation change "
    "the objective. Every number on these pages is computed by a tested function of the docgrad library and "
    "can be recomputed with `docgrad run NN -p name value`."
)

HIDE_INPUT_TAG = "hide-input"
HEADLINE_TAG = "headline"
SUMMARY_WORDS = 40  # contents entries: the first paragraph cut to about this many words
VEGALITE_MIME = re.compile(r"^application/vnd\.vegalite\.v\d+[+.]json$")
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
_PAGE_TEMPLATE = r"""{%- extends 'lab/index.html.j2' -%}
{%- block html_head_js_requirejs -%}
{%- if resources.docgrad_vega_js -%}
<script type="text/javascript">
// vega, vega-lite and vega-embed, inlined from vl_convert.javascript_bundle()
{{ resources.docgrad_vega_js }}
</script>
{%- endif -%}
{%- endblock html_head_js_requirejs -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block extra_css -%}<style type="text/css">{{ resources.docgrad_css }}</style>{%- endblock extra_css -%}
{%- block any_cell scoped -%}
{%- if 'solution' in cell.metadata.get('tags', []) -%}
<details class="docgrad-solution"><summary>Solution</summary>
{{ super() }}
</details>
{%- else -%}
{{ super() }}
{%- endif -%}
{%- endblock any_cell -%}
{%- block input_group -%}
{%- set tags = cell.metadata.get('tags', []) -%}
{%- if 'show-input' in tags or 'solution' in tags -%}
{{ super() }}
{%- else -%}
<details class="docgrad-code"><summary>show code</summary>
{{ super() }}
</details>
{%- endif -%}
{%- endblock input_group -%}
{%- block body_header -%}
{{ super() }}
{{ resources.docgrad_nav }}
{%- endblock body_header -%}
{% block body_footer %}
{{ resources.docgrad_nav }}
{{ super() }}
{% endblock body_footer %}
"""

_CSS = """
nav.docgrad-nav { display: flex; justify-content: space-between; gap: 1em; padding: 0.6em 1em;
  margin: 0.5em 0; background: #f3f5f8; border-radius: 6px; font-family: system-ui, sans-serif; font-size: 14px; }
nav.docgrad-nav a { color: #1f5fa8; text-decoration: none; }
nav.docgrad-nav a:hover { text-decoration: underline; }
nav.docgrad-nav .disabled { color: #aaa; }
.docgrad-chart { width: 100%; }
details.docgrad-solution { margin: 0.4em 0 1em 0; padding: 0.3em 0.8em; border: 1px solid #d0d7de;
  border-radius: 6px; background: #fbfcfd; }
details.docgrad-solution > summary { cursor: pointer; color: #1f5fa8; font-family: system-ui, sans-serif;
  font-weight: 600; }
details.docgrad-code { margin: 0.1em 0; }
details.docgrad-code > summary { cursor: pointer; color: #5a7a9a; font-family: system-ui, sans-serif;
  font-size: 12px; padding: 0.1em 0; user-select: none;
  margin-left: calc(var(--jp-cell-collapser-width, 8px) + var(--jp-cell-prompt-width, 64px)); }
details.docgrad-code > summary:hover { color: #1f5fa8; }
details.docgrad-code[open] > summary { margin-bottom: 0.3em; }
"""

_INDEX_TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>{title}</title>
{vega_js}
<style>
body {{ font-family: system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 52em; margin: 2em auto;
  padding: 0 1em; line-height: 1.55; color: #222; }}
h1 {{ font-size: 1.9em; margin-bottom: 0.2em; }}
.abstract {{ background: #f6f8fa; border-left: 4px solid #1f5fa8; padding: 0.8em 1.2em; }}
ol.toc li {{ margin: 0.9em 0; }}
ol.toc a {{ font-weight: 600; font-size: 1.1em; color: #1f5fa8; text-decoration: none; }}
ol.toc p {{ margin: 0.2em 0 0 0; color: #444; }}
.headline {{ margin: 1em 0 1.5em 50%; width: min(84em, calc(100vw - 2em)); transform: translateX(-50%);
  overflow-x: auto; }}
.headline .source {{ color: #777; font-size: 0.85em; margin: 0.3em 0 1em 0; }}
.headline .docgrad-chart {{ width: 100%; }}
.headline table {{ border: none; border-collapse: collapse; font-size: 0.9em; margin: 0.5em 0; }}
.headline th, .headline td {{ border: none; border-bottom: 1px solid #d0d7de; padding: 0.25em 0.6em;
  text-align: right; }}
.headline thead th {{ border-bottom: 2px solid #888; }}
.headline pre {{ white-space: pre-wrap; }}
.meta {{ color: #777; font-size: 0.85em; margin-top: 3em; }}
code {{ background: #f0f0f0; padding: 0 0.2em; border-radius: 3px; }}
</style>
</head>
<body>
<h1>{title}</h1>
{headline}
<h2>Abstract</h2>
<div class="abstract"><p>{abstract}</p></div>
<h2>Contents</h2>
<ol class="toc">
{toc}
</ol>
<p class="meta">Built from the executed notebooks in <code>notebooks/</code> by <code>docgrad report</code>.
Charts are interactive (Vega-Lite, JavaScript inlined; no network needed).</p>
</body>
</html>
"""


_PROTECTED = re.compile(r"(<(pre|code|script|style)\b.*?</\2>)", re.S | re.I)
_MATH = re.compile(r"(?<![\\$])\$\$(.+?)\$\$|(?<![\\$])\$(?!\s)([^$\n]+?)(?<!\s)\$(?!\d)", re.S)


def math_to_mathml(page_html: str) -> str:
    """Replace the TeX math that nbconvert leaves verbatim in rendered markdown ($$...$$ display, $...$ inline)
    by MathML, outside <pre>, <code>, <script> and <style>. Math that does not parse is left as it was."""
    from latex2mathml.converter import convert

    def one(m: re.Match) -> str:
        display = m.group(1) is not None
        tex = html.unescape(m.group(1) if display else m.group(2))
        try:
            return convert(tex.strip(), display="block" if display else "inline")
        except Exception:  # noqa: BLE001 - unknown macro etc.: keep the source text rather than fail the build
            return m.group(0)

    parts = _PROTECTED.split(page_html)
    out, i = [], 0
    while i < len(parts):
        out.append(_MATH.sub(one, parts[i]))
        if i + 1 < len(parts):
            out.append(parts[i + 1])  # the protected element itself, unchanged
        i += 3                        # split() also returns the inner tag-name group
    return "".join(out)


@dataclass
class Page:
    source: Path  # executed .ipynb
    html_name: str
    title: str
    summary: str


def _markdown_to_text(md: str) -> str:
    text = re.sub(r"`([^`]*)`", r"\1", md)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[*_]{1,2}([^*_]+)[*_]{1,2}", r"\1", text)
    return " ".join(text.split())


def page_info(nb, stem: str) -> tuple[str, str]:
    """(title, summary): the first markdown heading and the first paragraph after it (plain text)."""
    title, summary = stem, ""
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        lines = cell.source.strip().splitlines()
        if title == stem:
            for i, ln in enumerate(lines):
                if ln.startswith("#"):
                    title = ln.lstrip("#").strip()
                    lines = lines[i + 1:]
                    break
        paragraph = []
        for ln in lines:
            if not ln.strip():
                if paragraph:
                    break
                continue
            if ln.startswith("#"):
                if paragraph:
                    break
                continue
            paragraph.append(ln)
        if paragraph:
            summary = _markdown_to_text(" ".join(paragraph))
            break
    return _markdown_to_text(title), summary


def executed_notebooks(notebooks_dir: str | Path) -> list[Path]:
    """Executed NN_*.ipynb / NNx_*.ipynb that have a .py source, in page order (01_, 01b_, 02_, ...; failed runs,
    *.failed.ipynb, excluded)."""
    d = Path(notebooks_dir)
    return sorted((p for p in d.glob("[0-9][0-9]*_*.ipynb") if is_page(p) and p.with_suffix(".py").exists()),
                  key=page_order)


def embed_charts(nb, prefix: str = "chart") -> int:
    """Replace every Vega-Lite output with an HTML div + vegaEmbed call (in place); return how many."""
    n = 0
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            data = out.get("data")
            if not data:
                continue
            mime = next((m for m in data if VEGALITE_MIME.match(m)), None)
            if mime is None:
                continue
            spec = data[mime]
            if isinstance(spec, str):
                spec = json.loads(spec)
            n += 1
            div = f"docgrad-{prefix}-{n}"
            spec_js = json.dumps(spec).replace("</", "<\\/")
            out["data"] = {
                "text/html": (f'<div id="{div}" class="docgrad-chart"></div>\n'
                              f'<script type="text/javascript">vegaEmbed("#{div}", {spec_js}, '
                              f'{{"renderer": "svg", "actions": {{"export": true, "source": false, '
                              f'"compiled": false, "editor": false}}}}).catch(function (e) {{ document.getElementById("{div}")'
                              f'.textContent = "chart failed to render: " + e; }});</script>'),
                "text/plain": data.get("text/plain", "<chart>"),
            }
            out.get("metadata", {}).pop(mime, None)
    return n


def drop_widgets(nb) -> int:
    """Remove the Jupyter widget outputs (in place; return how many) and the notebook's saved widget state: a
    widget (e.g. a progress bar a library drew) needs a kernel, or nbconvert's widget manager fetched from a CDN,
    which a page that makes no network request cannot load."""
    nb.metadata.pop("widgets", None)
    n = 0
    for cell in nb.cells:
        outputs = cell.get("outputs", [])
        kept = [out for out in outputs if WIDGET_MIME not in out.get("data", {})]
        n += len(outputs) - len(kept)
        if outputs:
            cell["outputs"] = kept
    return n


def headline_cells(nbs) -> list:
    """Copies of the code cells tagged `headline`, from the notebooks in order, each with `docgrad_page`
    (the notebook's index in nbs) in its metadata and an id prefixed by that index (pages number their cells
    alike, and one notebook's ids are unique)."""
    import copy

    cells = []
    for i, nb in enumerate(nbs):
        for cell in nb.cells:
            if cell.cell_type == "code" and HEADLINE_TAG in cell.metadata.get("tags", []):
                cell = copy.deepcopy(cell)
                cell.metadata["docgrad_page"] = i
                cell.id = f"page{i}-{cell.get('id', len(cells))}"
                cells.append(cell)
    return cells


def output_html(out) -> str:
    """One notebook output as HTML for the index (charts already turned into HTML by embed_charts)."""
    from nbconvert.filters import markdown2html

    if out.get("output_type") == "stream":
        return f"<pre>{html.escape(out.get('text', ''))}</pre>"
    data = out.get("data", {})
    if "text/html" in data:
        return "".join(data["text/html"])
    for mime in ("image/png", "image/jpeg"):
        if mime in data:
            return f'<img src="data:{mime};base64,{"".join(data[mime]).strip()}" alt="headline figure">'
    if "image/svg+xml" in data:
        return "".join(data["image/svg+xml"])
    if "text/markdown" in data:
        return markdown2html("".join(data["text/markdown"]))
    if "text/plain" in data:
        return f"<pre>{html.escape(''.join(data['text/plain']))}</pre>"
    return ""


def truncate_words(text: str, n: int = SUMMARY_WORDS) -> str:
    """text cut to its first n words, with an ellipsis where it was cut."""
    words = text.split()
    return text if len(words) <= n else " ".join(words[:n]).rstrip(".,;:") + " …"


def vega_javascript() -> str:
    """The vega + vega-lite + vega-embed bundle matching altair's Vega-Lite version (works offline)."""
    import vl_convert as vlc
    from altair.utils._importers import vl_version_for_vl_convert

    return vlc.javascript_bundle(vl_version=vl_version_for_vl_convert())


def _nav(pages: list[Page], i: int) -> str:
    """Previous / contents / next links for page i."""
    prev = (f'<a href="{pages[i - 1].html_name}">&larr; {html.escape(pages[i - 1].title)}</a>'
            if i > 0 else '<span class="disabled">&larr;</span>')
    nxt = (f'<a href="{pages[i + 1].html_name}">{html.escape(pages[i + 1].title)} &rarr;</a>'
           if i + 1 < len(pages) else '<span class="disabled">&rarr;</span>')
    return f'<nav class="docgrad-nav">{prev}<a href="index.html">Contents</a>{nxt}</nav>'


def build_report(notebooks_dir: str | Path = "notebooks", out_dir: str | Path = "report",
                 title: str = "docgrad: gradient noise of whole-document batches",
                 executed: dict[str, Path] | None = None) -> Path:
    """Export every executed notebook to out_dir/<stem>.html and write out_dir/index.html; return the index.
    executed: {stem: executed notebook} read instead of (or beside) notebooks_dir/<stem>.ipynb (staged runs)."""
    import nbformat
    from jinja2 import DictLoader
    from nbconvert import HTMLExporter
    from nbconvert.preprocessors import TagRemovePreprocessor

    out_dir = Path(out_dir)
    executed = {stem: Path(p) for stem, p in (executed or {}).items()}
    found = {p.stem: p for p in executed_notebooks(notebooks_dir)}
    stems = sorted({*found, *executed}, key=lambda stem: page_order(Path(stem)))
    if not stems:
        raise FileNotFoundError(f"no executed notebooks (NN_name.ipynb beside NN_name.py) in {notebooks_dir}")
    nbs, pages = [], []
    for stem in stems:
        nb = nbformat.read(str(executed.get(stem, found.get(stem))), as_version=4)
        drop_widgets(nb)
        title_, summary = page_info(nb, stem)
        nbs.append(nb)
        pages.append(Page(Path(notebooks_dir) / f"{stem}.ipynb", stem + ".html", title_, summary))
    headline = nbformat.v4.new_notebook(cells=headline_cells(nbs))  # copied before the pages' charts are embedded

    exporter = HTMLExporter(template_name="lab", extra_loaders=[DictLoader({"docgrad.html.j2": _PAGE_TEMPLATE})],
                            template_file="docgrad.html.j2")
    # cells tagged `hide-input` (e.g. ones that only format prose from computed numbers) show their output only
    exporter.register_preprocessor(TagRemovePreprocessor(remove_input_tags={HIDE_INPUT_TAG}), enabled=True)
    vega_js = None
    for i, (nb, page) in enumerate(zip(nbs, pages)):
        n_charts = embed_charts(nb)
        if n_charts and vega_js is None:
            vega_js = vega_javascript()
        nb.metadata["title"] = page.title
        resources = {"docgrad_nav": _nav(pages, i), "docgrad_css": _CSS,
                     "docgrad_vega_js": vega_js if n_charts else "",
                     "metadata": {"name": page.source.stem}}
        body, _ = exporter.from_notebook_node(nb, resources=resources)
        atomic_write_bytes(out_dir / page.html_name, math_to_mathml(body).encode("utf-8"))

    toc = "\n".join(f'<li><a href="{p.html_name}">{html.escape(p.title)}</a>'
                    f'<p>{html.escape(truncate_words(p.summary))}</p></li>' for p in pages)
    index = out_dir / "index.html"
    abstract = re.sub(r"`([^`]*)`", r"<code>\1</code>", html.escape(ABSTRACT))
    n_charts = embed_charts(headline, prefix="headline")
    if n_charts and vega_js is None:
        vega_js = vega_javascript()
    index_js = ('<script type="text/javascript">\n// vega, vega-lite and vega-embed, inlined from vl_convert\n'
                f'{vega_js}\n</script>' if n_charts else "")
    text = _INDEX_TEMPLATE.format(title=html.escape(title), abstract=abstract, toc=toc,
                                  headline=_headline_section(headline.cells, pages), vega_js=index_js)
    atomic_write_bytes(index, math_to_mathml(text).encode("utf-8"))
    return index


def _headline_section(cells, pages: list[Page]) -> str:
    """The index's "Headline" section: each tagged cell's outputs and a link to its page; "" without any."""
    if not cells:
        return ""
    parts = ['<h2>Headline</h2>\n<div class="headline">']
    for k, cell in enumerate(cells):
        parts.extend(output_html(out) for out in cell.get("outputs", []))
        i = cell.metadata["docgrad_page"]
        if k + 1 == len(cells) or cells[k + 1].metadata["docgrad_page"] != i:  # after a page's last tagged cell
            parts.append(f'<p class="source">From <a href="{pages[i].html_name}">{html.escape(pages[i].title)}</a>'
                         '.</p>')
    parts.append("</div>")
    return "\n".join(parts)
