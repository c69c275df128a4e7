"""The library's layout is its architecture: packages import only the ones below them, the kernel package
imports nothing else of docgrad, no module imports another inside a function, and no private name crosses a
module boundary."""

import ast
from pathlib import Path

LIB = Path(__file__).resolve().parents[1] / "lib"
PKG = LIB / "docgrad"
# lowest first; a package may import itself and any package before it
LAYERS = ["errors", "fileio", "publication", "core", "models", "corpora", "results", "measure", "presentation", "teaching",
          "runtime", "page", "__main__"]
PAGES = sorted((LIB.parent / "notebooks").glob("*.py"))


def _modules():
    for f in sorted(PKG.rglob("*.py")):
        name = ".".join(f.relative_to(LIB).with_suffix("").parts).removesuffix(".__init__")
        yield name, ast.parse(f.read_text(), str(f))


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(tree, top_level_only=False):
    nodes = tree.body if top_level_only else ast.walk(tree)
    for n in nodes:
        if isinstance(n, ast.ImportFrom) and n.module and n.module.split(".")[0] == "docgrad":
            for a in n.names:
                yield n, (f"{n.module}.{a.name}" if n.module == "docgrad" else n.module), a.name


def test_every_package_imports_only_the_packages_below_it():
    bad = []
    for mod, tree in _modules():
        here = _package(mod)
        for _, target, _ in _imports(tree):
            there = _package(target)
            if there != here and here in LAYERS and there in LAYERS and LAYERS.index(there) > LAYERS.index(here):
                bad.append(f"{mod} -> {target}")
    assert bad == []


def test_the_kernel_package_imports_nothing_else_of_docgrad():
    bad = [f"{mod} -> {target}" for mod, tree in _modules() if _package(mod) == "core"
           for _, target, _ in _imports(tree) if _package(target) != "core"]
    assert bad == []


def test_no_module_imports_docgrad_inside_a_function():
    """One exception: the page namespace's PEP 562 __getattr__ gathers page 01d's modules (rl_losses, rl_trl,
    rl_worked) on first use (they need torch and TRL, seconds of import in every page kernel that does not use
    them); page is the top layer, nothing imports it."""
    lazy = {("docgrad.page", "docgrad.teaching")}
    bad = []
    for mod, tree in _modules():
        top = {id(n) for n, _, _ in _imports(tree, top_level_only=True)}
        bad += [f"{mod}:{n.lineno} {target}" for n, target, _ in _imports(tree) if id(n) not in top
                and (mod, target) not in lazy]
    assert bad == []


def test_no_private_name_is_imported_or_used_across_modules():
    bad = []
    for mod, tree in _modules():
        aliases = {a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) and n.module
                   and n.module.startswith("docgrad") for a in n.names}
        for _, target, name in _imports(tree):
            if name.startswith("_"):
                bad.append(f"{mod} imports {target}.{name}")
        for n in ast.walk(tree):
            if isinstance(n, ast.Attribute) and n.attr.startswith("_") and not n.attr.startswith("__") \
                    and isinstance(n.value, ast.Name) and n.value.id in aliases:
                bad.append(f"{mod}:{n.lineno} uses {n.value.id}.{n.attr}")
    assert bad == []


def test_a_page_imports_one_name_from_docgrad_and_the_page_namespace_holds_only_what_pages_use():
    from docgrad import page as dg

    imported, used = {}, set()
    for f in PAGES:
        tree = ast.parse(f.read_text(), str(f))
        imported[f.name] = [f"{n.module}.{a.name}" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                            and (n.module or "").split(".")[0] == "docgrad" for a in n.names]
        imported[f.name] += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import)
                             for a in n.names if a.name.split(".")[0] == "docgrad"]
        used |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                 and n.value.id == "dg"}
    assert len(PAGES) >= 11
    assert {name: got for name, got in imported.items() if got != ["docgrad.page"]} == {}
    assert sorted(set(dg.__all__) - used) == []                       # nothing gathered that no page calls
    assert sorted(used - set(dg.__all__)) == []                       # nothing called that is not gathered
