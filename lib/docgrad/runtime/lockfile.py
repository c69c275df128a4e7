"""The locked environment: requirements.lock (made by `make relock` with uv, one `name==version` and its sha256
hashes per package) plus the two pins the Makefile installs outside it, TORCH_SPEC (so that a CUDA build can
replace the CPU one) and MODEL_WHEEL (installed without its dependencies).

    locked_versions(root)          {name: version} the pages are meant to execute with
    matches_lock(installed, lock)  PEP 440 `==`: 2.13.0+cpu is torch 2.13.0 as locked
    lock_changes(before, after)    the lines `make relock` prints: added, removed, moved
    conda_environment(root)        environment.yml: the same pins for conda's pip (no hashes)

    python -m docgrad.runtime.lockfile changes OLD NEW    prints lock_changes of two lock files
    python -m docgrad.runtime.lockfile environment-yml    writes environment.yml from the lock
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from docgrad.errors import DocgradError
from docgrad.fileio import atomic_write_bytes, project_root

LOCK_FILE = "requirements.lock"
MAKEFILE_PINS = ("TORCH_SPEC", "MODEL_WHEEL")   # Makefile variables `NAME ?= package==version`
PIN = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==(?P<version>[^\s;\\]+)")


def canonical(name: str) -> str:
    """PEP 503 name: lower case, runs of `-_.` as one `-` (PyYAML and pyyaml, typing_extensions and -)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_lock(path: str | Path) -> dict[str, str]:
    """{canonical name: version} of a pip requirements file with one `name==version` per package (hash and
    comment lines skipped). Anything else (a range, an option, a package twice) is an error naming the line."""
    path = Path(path)
    if not path.is_file():
        raise DocgradError(f"{path}: no lock file; `make relock` writes it")
    pins: dict[str, str] = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.startswith((" ", "\t", "#")):
            continue
        m = PIN.match(line)
        if m is None:
            raise DocgradError(f"{path}:{n}: expected `name==version`, got {line.strip()!r}")
        name = canonical(m["name"])
        if name in pins:
            raise DocgradError(f"{path}:{n}: {name} is pinned twice ({pins[name]} and {m['version']})")
        pins[name] = m["version"]
    return pins


def makefile_pins(path: str | Path) -> dict[str, str]:
    """{canonical name: version} of the Makefile's defaults `TORCH_SPEC ?= torch==V` and `MODEL_WHEEL ?= ...`."""
    path = Path(path)
    text = path.read_text()
    pins = {}
    for var in MAKEFILE_PINS:
        m = re.search(rf"^{var} \?= '?(\S+?)'?$", text, re.M)
        pin = PIN.match(m[1]) if m else None
        if pin is None:
            raise DocgradError(f"{path}: expected a line `{var} ?= package==version`, got "
                               f"{m[0] if m else 'none'!r}")
        pins[canonical(pin["name"])] = pin["version"]
    return pins


def locked_versions(root: str | Path) -> dict[str, str]:
    """What the project's pages are meant to execute with: requirements.lock and the Makefile's two pins."""
    root = Path(root)
    return read_lock(root / LOCK_FILE) | makefile_pins(root / "Makefile")


def matches_lock(installed: str | None, locked: str) -> bool:
    """True when `installed` satisfies `==locked` (PEP 440: a local label such as +cpu or +cu128 is ignored)."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        return Version(installed) in SpecifierSet(f"=={locked}")
    except (InvalidVersion, TypeError):
        return False


def lock_changes(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """One line per package whose pin changed: `+ name==v` added, `- name==v` removed, `name a -> b` moved."""
    lines = []
    for name in sorted(before.keys() | after.keys()):
        a, b = before.get(name), after.get(name)
        if a is None:
            lines.append(f"+ {name}=={b}")
        elif b is None:
            lines.append(f"- {name}=={a}")
        elif a != b:
            lines.append(f"  {name} {a} -> {b}")
    return lines


CONDA_HEADER = """\
# Conda equivalent of the locked pip environment, written from requirements.lock and the Makefile's TORCH_SPEC
# and MODEL_WHEEL by `make relock` (python -m docgrad.runtime.lockfile environment-yml); tests/test_environment.py
# fails when they differ. The same versions as `make venv`, without the lock's hashes.
# conda env create -f environment.yml && conda activate docgrad && pip install -e . --no-deps
name: docgrad
channels:
  - conda-forge
dependencies:
  - python=3.11
  - pip
  - pip:
"""


def conda_environment(root: str | Path) -> str:
    """The text of environment.yml: torch at TORCH_SPEC, every package of the lock, then the model wheel."""
    root = Path(root)
    lock = read_lock(root / LOCK_FILE)
    (torch, torch_version), (wheel, wheel_version) = makefile_pins(root / "Makefile").items()   # MAKEFILE_PINS
    lines = [f"{torch}=={torch_version}"] + [f"{name}=={version}" for name, version in lock.items()]
    lines.append(f"{wheel}=={wheel_version}  # default model file; install with --no-deps (see README)")
    return CONDA_HEADER + "".join(f"      - {line}\n" for line in lines)


def installed_differences(lock: dict[str, str]) -> list[str]:
    """'name locked V, installed W' (or 'not installed') for every locked package this Python does not have at its
    locked version."""
    from importlib.metadata import PackageNotFoundError, version

    out = []
    for name, locked in lock.items():
        try:
            got = version(name)
        except PackageNotFoundError:
            got = None
        if not matches_lock(got, locked):
            out.append(f"{name} locked {locked}, installed {got or 'nothing'}")
    return out


def check_environment(root: str | Path, stamp: str | Path) -> list[str]:
    """Why the installed environment is not the lock's: the lock's sha256 differs from the one `make venv`
    recorded in `stamp` when it installed (the lock was edited or replaced since), and each locked package whose
    installed version differs. [] when it is the lock's."""
    root, stamp = Path(root), Path(stamp)
    lock_path = root / LOCK_FILE
    problems = []
    recorded = stamp.read_text().split()[:1] if stamp.is_file() else []
    if recorded:
        import hashlib

        now = hashlib.sha256(lock_path.read_bytes()).hexdigest()
        if recorded[0] != now:
            problems.append(f"{LOCK_FILE} is not the file this environment was installed from (sha256 "
                            f"{now[:12]}.., installed from {recorded[0][:12]}..)")
    problems += installed_differences(read_lock(lock_path))
    return problems


def main(argv: list[str] | None = None) -> int:
    """`changes OLD NEW`: print the version changes between two lock files. `environment-yml [ROOT]`: write
    ROOT/environment.yml (default: the project root) from ROOT's lock. Errors: one line, exit status 2."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        if len(argv) == 3 and argv[0] == "changes":
            after = read_lock(argv[2])
            lines = lock_changes(read_lock(argv[1]), after)
            print("\n".join(lines) if lines else f"no version changed ({len(after)} packages locked)")
            return 0
        if len(argv) in (1, 2) and argv[0] == "environment-yml":
            root = project_root(Path(argv[1]) if len(argv) == 2 else None)
            atomic_write_bytes(root / "environment.yml", conda_environment(root).encode())
            print(f"wrote {root / 'environment.yml'}")
            return 0
        if len(argv) == 2 and argv[0] == "check":
            root = project_root()
            problems = check_environment(root, argv[1])
            if problems:
                print(f"lockfile: the installed environment is not {LOCK_FILE}'s: {'; '.join(problems[:4])}"
                      f"{f'; and {len(problems) - 4} more' if len(problems) > 4 else ''}. If you changed the lock, "
                      f"reinstall with `make venv`; if not, restore it with `git checkout {LOCK_FILE}`",
                      file=sys.stderr)
                return 1
            return 0
    except DocgradError as e:
        print(f"lockfile: error: {e}", file=sys.stderr)
        return 2
    print("usage: python -m docgrad.runtime.lockfile changes OLD_LOCK NEW_LOCK | environment-yml [ROOT] | check STAMP",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
