"""The layers of the package, checked from the source: each imports only the layers below it,
no module-level import cycle, and the library never imports streamlit (ARCHITECTURE.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import stacklab

ROOT = Path(stacklab.__file__).parent
# Lower layers first; a module may import its own layer and those before it.
LAYERS = ("core", "ops", "lab", "serve", "top")
# Inside `lab` and `serve`, the sub-layers and what each may import besides itself (ARCHITECTURE.md):
# the figures draw what `measure` computed and never read the run store or the trainer.
SUBLAYERS = {
    "lab": {"base": (), "measure": ("base",), "models": ("base", "measure"),
            "figures": ("base", "measure", "models"),
            "train": ("base", "measure"), "runs": ("base", "measure", "train"),
            "reports": ("base", "measure", "models", "figures", "train", "runs"),
            "lessons": ("base", "measure", "train")},
    "serve": {"base": (), "links": ("base",), "workers": ("base",)},
}


def _module_name(path: Path) -> str:
    parts = ["stacklab", *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) >= 2 and parts[1] in LAYERS else "top"


def _sublayer(module: str) -> str:
    """``measure``, ``train``, ... for a module of a layer that has sub-layers; ``base`` for
    the modules beside them (``lab.tasks``, ``lab.settings``, ``serve.limits``)."""
    parts = module.split(".")
    inner = SUBLAYERS.get(_layer(module), {})
    return parts[2] if len(parts) >= 3 and parts[2] in inner else "base"


MODULES = {_module_name(path): path for path in sorted(ROOT.rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(module: str) -> list[tuple[str, bool]]:
    """``(imported module, at module level)`` for every import in ``module``'s source;
    imports under ``if TYPE_CHECKING:`` count as module level: a circle of type hints is
    still a circle of meaning."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found: list[tuple[str, bool]] = []

    def visit(node: ast.AST, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                found.extend((alias.name, top) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                for alias in child.names:
                    full = f"{base}.{alias.name}"
                    found.append((full if full in MODULES else base, top))
            is_scope = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            visit(child, top and not is_scope)

    visit(ast.parse(path.read_text(encoding="utf-8")), True)
    return found


def test_every_module_sits_in_a_known_layer():
    assert {_layer(m) for m in MODULES} == set(LAYERS)
    assert _layer("stacklab.core.resolve") == "core" and _layer("stacklab.cli") == "top"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_each_module_imports_only_its_layer_and_those_below(module):
    rank = LAYERS.index(_layer(module))
    above = sorted({target for target, _ in _imports(module)
                    if target.startswith("stacklab.") and LAYERS.index(_layer(target)) > rank})
    assert not above, f"{module} ({_layer(module)}) imports from a higher layer: {above}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_each_module_imports_only_its_sub_layer_and_those_it_builds_on(module):
    layer = _layer(module)
    if layer not in SUBLAYERS:
        return
    mine = _sublayer(module)
    allowed = {mine, *SUBLAYERS[layer][mine]}
    wrong = sorted({target for target, _ in _imports(module)
                    if target in MODULES and _layer(target) == layer
                    and _sublayer(target) not in allowed})
    assert not wrong, f"{module} ({layer}.{mine}) imports from {wrong}, outside {sorted(allowed)}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_the_library_never_imports_streamlit(module):
    assert not [t for t, _ in _imports(module) if t.split(".")[0] == "streamlit"]


def test_no_module_level_import_cycle():
    graph = {m: {t for t, top in _imports(m) if top and t in MODULES and t != m} for m in MODULES}
    # Importing a package's submodule runs the package's __init__ first; that is not an edge.
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                cycle = path[path.index(target):] + [target]
                raise AssertionError("module-level import cycle: " + " -> ".join(cycle))
            if target not in state:
                visit(target)
        path.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)


def test_the_catalog_is_the_only_place_core_loads_a_module_by_name():
    """`spec.catalog()` loads the ops package by name (a plugin point); nothing else in core
    reaches around the layer rule that way."""
    by_name = sorted(module for module in MODULES if _layer(module) == "core"
                     and "importlib" in MODULES[module].read_text(encoding="utf-8"))
    assert by_name == ["stacklab.core.spec"]


def test_the_checker_sees_a_higher_layer_import(tmp_path, monkeypatch):
    """The layer rule can fail: a core module importing the lab is caught."""
    fake = tmp_path / "bad.py"
    fake.write_text("from ..lab.train.trainer import train\n")
    monkeypatch.setitem(MODULES, "stacklab.core.bad", fake)
    assert ("stacklab.lab.train.trainer", True) in _imports("stacklab.core.bad")
    with pytest.raises(AssertionError, match="higher layer"):
        test_each_module_imports_only_its_layer_and_those_below("stacklab.core.bad")


def test_the_checker_sees_a_cycle(tmp_path, monkeypatch):
    for name, other in (("a", "b"), ("b", "a")):
        (tmp_path / f"{name}.py").write_text(f"from . import {other}\n")
        monkeypatch.setitem(MODULES, f"stacklab.core.{name}", tmp_path / f"{name}.py")
    with pytest.raises(AssertionError, match="cycle: stacklab.core.a -> stacklab.core.b -> stacklab.core.a"):
        test_no_module_level_import_cycle()


def test_the_checker_sees_figures_reading_the_run_store(tmp_path, monkeypatch):
    """The sub-layer rule can fail: a figure module importing the store is caught."""
    fake = tmp_path / "bad.py"
    fake.write_text("from ..runs.store import RunStore\n")
    monkeypatch.setitem(MODULES, "stacklab.lab.figures.bad", fake)
    with pytest.raises(AssertionError, match=r"lab.figures.*stacklab.lab.runs.store"):
        test_each_module_imports_only_its_sub_layer_and_those_it_builds_on("stacklab.lab.figures.bad")


def test_the_cycle_check_counts_type_checking_imports(tmp_path, monkeypatch):
    (tmp_path / "a.py").write_text("from . import b\n")
    (tmp_path / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n")
    for name in ("a", "b"):
        monkeypatch.setitem(MODULES, f"stacklab.core.{name}", tmp_path / f"{name}.py")
    with pytest.raises(AssertionError, match="cycle"):
        test_no_module_level_import_cycle()


def test_no_module_or_function_too_long():
    """No module of the library or the app over 450 lines, no function over 60."""
    app = Path(__file__).resolve().parents[1]
    paths = [*MODULES.values(), *app.glob("*.py"), *app.glob("views/*.py"), *app.glob("ui/*.py")]
    long_modules = [f"{p.name}: {n}" for p in paths
                    if (n := len(p.read_text(encoding="utf-8").splitlines())) > 450]
    long_functions = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > 60:
                    long_functions.append(f"{path.name}:{node.name}: {length}")
    assert not long_modules and not long_functions, (long_modules, long_functions)
