"""The layers of the package, checked from the source: each imports only the layers below it,
no module-level import cycle, the library never imports streamlit, only the two doors name
Streamlit's or plotly's private names, and size caps named as warnings (ARCHITECTURE.md)."""

from __future__ import annotations

import ast
import warnings
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
    # the classroom (classes, votes, voters, the cluster's classes actor) reaches the pool's
    # side only for the Ray cluster's connection; links and workers know no classroom
    "serve": {"base": (), "links": ("base",), "workers": ("base",),
              "classroom": ("base", "workers")},
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


@pytest.mark.parametrize("module, source, caught", [
    # a figure module reading the run store
    ("stacklab.lab.figures.bad", "from ..runs.store import RunStore\n",
     r"lab.figures.*stacklab.lab.runs.store"),
    # the pool reaching into the classroom (the classroom builds on the workers, not back)
    ("stacklab.serve.workers.bad", "from ..classroom.classes import Classes\n",
     r"serve.workers.*stacklab.serve.classroom.classes")])
def test_the_checker_sees_a_sub_layer_import_it_does_not_build_on(tmp_path, monkeypatch, module,
                                                                   source, caught):
    """The sub-layer rule can fail, in lab and in serve."""
    fake = tmp_path / "bad.py"
    fake.write_text(source)
    monkeypatch.setitem(MODULES, module, fake)
    with pytest.raises(AssertionError, match=caught):
        test_each_module_imports_only_its_sub_layer_and_those_it_builds_on(module)


def test_the_cycle_check_counts_type_checking_imports(tmp_path, monkeypatch):
    (tmp_path / "a.py").write_text("from . import b\n")
    (tmp_path / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n")
    for name in ("a", "b"):
        monkeypatch.setitem(MODULES, f"stacklab.core.{name}", tmp_path / f"{name}.py")
    with pytest.raises(AssertionError, match="cycle"):
        test_no_module_level_import_cycle()


MODULE_CAP, FUNCTION_CAP = 450, 60  # lines: guidance, not a wall (code is shaped, not squeezed)


class SizeWarning(UserWarning):
    """A module or function past its size cap: a reason to split it by job, not a failure."""


def _over_caps(paths: list[Path]) -> list[str]:
    """``name: lines`` for every module over `MODULE_CAP` and ``name:function: lines`` for
    every function over `FUNCTION_CAP` among ``paths``."""
    over = [f"{p.name}: {n}" for p in paths
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MODULE_CAP]
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > FUNCTION_CAP:
                    over.append(f"{path.name}:{node.name}: {length}")
    return over


def _warn_over_caps(paths: list[Path]) -> None:
    for over in _over_caps(paths):
        warnings.warn(f"past its size cap (split it by job): {over}", SizeWarning, stacklevel=2)


def test_modules_and_functions_past_their_size_caps_are_named():
    """No module of the library or the app over 450 lines, no function over 60: each one
    past its cap is named in a warning (the run's warning summary), never a failure."""
    _warn_over_caps(_app_and_library())


def test_the_size_check_names_what_is_too_long_and_does_not_fail(tmp_path):
    """A long module and a long function are each named, as a warning; a short one is not."""
    long = tmp_path / "long.py"
    long.write_text("def f():\n" + "    x = 1\n" * FUNCTION_CAP + "\n" * MODULE_CAP)
    short = tmp_path / "short.py"
    short.write_text("def g():\n    return 1\n")
    assert _over_caps([long, short]) == [f"long.py: {MODULE_CAP + FUNCTION_CAP + 1}",
                                         f"long.py:f: {FUNCTION_CAP + 1}"]
    with pytest.warns(SizeWarning) as caught:
        _warn_over_caps([long, short])
    assert [str(w.message) for w in caught] == [
        f"past its size cap (split it by job): long.py: {MODULE_CAP + FUNCTION_CAP + 1}",
        f"past its size cap (split it by job): long.py:f: {FUNCTION_CAP + 1}"]


# -- the app: pages, their parts, ui ---------------------------------------------------------

APP = Path(__file__).resolve().parents[1]
# The app's folders, each with what it may import of them: a page (views/) stands on the
# pages' parts and ui; a part (parts/, parts/classroom/) on ui and other parts, never on a
# page; ui on itself alone (it is what every page stands on).
APP_LAYERS = {"views": ("parts", "ui"), "parts": ("parts", "ui"), "ui": ("ui",)}


def _app_files() -> list[Path]:
    return [*APP.glob("views/*.py"), *APP.glob("parts/**/*.py"), *APP.glob("ui/*.py")]


def _app_layer_problems(path: Path, app: Path = APP) -> list[str]:
    """The imports of ``path`` (a file of ``app``'s views/, parts/ or ui/) of an app folder
    that its folder may not import."""
    allowed = APP_LAYERS[path.relative_to(app).parts[0]]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            found.append(node.module or "")
    return sorted(m for m in found if m.split(".")[0] in APP_LAYERS and m.split(".")[0] not in allowed)


def test_pages_stand_on_parts_and_parts_on_ui():
    """pages (views/) -> parts (parts/) -> ui: no page imports a page, no part a page, and
    ui neither."""
    assert APP.joinpath("parts", "classroom").is_dir()
    wrong = {str(path.relative_to(APP)): found for path in _app_files()
             if (found := _app_layer_problems(path))}
    assert not wrong, f"imports against pages -> parts -> ui: {wrong}"


def test_views_holds_the_pages_app_py_registers_and_nothing_else():
    """views/ is the pages (app.py's ``st.Page`` lines); a page's part lives in parts/."""
    import re

    registered = set(re.findall(r"st\.Page\(\"(views/\w+\.py)\"", (APP / "app.py").read_text()))
    held = {f"views/{path.name}" for path in APP.joinpath("views").iterdir()
            if path.name != "__pycache__"}
    assert len(registered) == 8 and held == registered, sorted(held ^ registered)


def test_the_app_check_sees_a_part_importing_a_page_and_ui_a_part(tmp_path):
    """The app's layer rule can fail: a part that imports a page, or ui a part, is caught."""
    for folder, text, wrong in (("parts", "from views import learn\nfrom ui import session\n",
                                 ["views"]),
                                ("ui", "import parts.share_panel\nfrom ui.library import LESSONS\n",
                                 ["parts.share_panel"])):
        planted = tmp_path / folder / "bad.py"
        planted.parent.mkdir()
        planted.write_text(text)
        assert _app_layer_problems(planted, tmp_path) == wrong


# -- private APIs behind one door ----------------------------------------------------------

# The only modules that name Streamlit's or plotly's private names: each use there has a
# public fallback (STACKLAB_PUBLIC_API_ONLY=1 forces them all; tests/test_public_api.py).
PRIVATE_DOORS = {APP / "ui" / "private_api.py", ROOT / "lab" / "figures" / "plotly_private.py"}
PRIVATE_NAMES = {
    # Streamlit's: a chart's element built by hand, the script run and the server runtime
    "DeltaGenerator", "agent_spec", "current_form_id", "LayoutConfig", "_plotly_data",
    "compute_and_register_element_id", "PlotlyChart_pb2", "_main", "_enqueue",
    "Runtime", "get_script_run_ctx", "pages_manager",
    # plotly's: the change hooks, frames, the subplot grid, the property check
    "_frame_objs", "_grid_str", "_grid_ref", "_validate"}
PUBLIC_STREAMLIT = {"streamlit", "streamlit.starlette", "streamlit.components.v1",
                    "streamlit.testing.v1", "streamlit.column_config"}


def _private_names(path: Path) -> list[str]:
    """Every private name of Streamlit or plotly that ``path``'s code names (an import, an
    attribute, a keyword, a name or a string), and every import of a Streamlit module that
    is not public, as ``line: name``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or "", *(alias.name for alias in node.names)]
        elif isinstance(node, ast.Attribute):
            names = [node.attr]
        elif isinstance(node, ast.Name):
            names = [node.id]
        elif isinstance(node, ast.keyword) and node.arg:
            names = [node.arg]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names = [node.value]
        for name in names:
            streamlit_module = name.split(".")[0] == "streamlit" and name not in PUBLIC_STREAMLIT
            if (name in PRIVATE_NAMES or name.startswith("_send_") or streamlit_module
                    or any(part in PRIVATE_NAMES for part in name.split(".")[1:])):
                found.append(f"{getattr(node, 'lineno', 0)}: {name}")
    return found


def _app_and_library() -> list[Path]:
    return [*MODULES.values(), *APP.glob("*.py"), *_app_files()]


def test_only_the_doors_name_streamlits_or_plotlys_private_names():
    """Nothing but `ui/private_api.py` and `stacklab.lab.figures.plotly_private` names a
    private name of Streamlit or plotly (bench/ measures Streamlit's insides on purpose)."""
    assert PRIVATE_DOORS <= set(_app_and_library())
    wrong = {str(path.relative_to(APP)): found for path in _app_and_library()
             if path not in PRIVATE_DOORS and (found := _private_names(path))}
    assert not wrong, f"private names outside their doors: {wrong}"


def test_the_door_check_sees_a_private_name(tmp_path):
    """The rule can fail: each way of naming a private name is caught, a public one is not."""
    bad = tmp_path / "bad.py"
    bad.write_text("import streamlit as st\nfrom streamlit.runtime import Runtime\n"
                   "st._main.markdown('x')\nfig._send_relayout_msg()\n"
                   "go.Figure({}, _validate=False)\nspec['_grid_ref']\n"
                   "from streamlit.starlette import App\n")
    assert sorted(_private_names(bad)) == ["2: Runtime", "2: streamlit.runtime", "3: _main",
                                           "4: _send_relayout_msg", "5: _validate",
                                           "6: _grid_ref"]


def test_the_apps_package_lists_every_module_it_holds():
    """ui/__init__.py's docstring names each module of ui/ (ARCHITECTURE.md points there)."""
    import re

    listed = set(re.findall(r"`ui\.(\w+)`", (APP / "ui" / "__init__.py").read_text(encoding="utf-8")))
    held = {path.stem for path in (APP / "ui").glob("*.py")} - {"__init__"}
    assert listed == held, {"not listed": sorted(held - listed), "no such module": sorted(listed - held)}


@pytest.mark.parametrize("package", ["parts", "parts/classroom"])
def test_the_parts_packages_list_every_module_they_hold(package):
    """parts/__init__.py and parts/classroom/__init__.py name each module (and sub-package)
    they hold, as ui/__init__.py does (ARCHITECTURE.md's "where to add" table points there)."""
    import re

    folder = APP / package
    dotted = package.replace("/", ".")
    listed = set(re.findall(rf"`{re.escape(dotted)}\.(\w+)`", (folder / "__init__.py").read_text()))
    held = {path.stem for path in folder.glob("*.py")} - {"__init__"}
    held |= {path.name for path in folder.iterdir() if (path / "__init__.py").exists()}
    assert listed == held, {"not listed": sorted(held - listed), "no such module": sorted(listed - held)}


# -- the watch endpoints: server code, no page code ----------------------------------------

def _app_imports(path: Path, root: Path) -> set[str]:
    """Every module that ``path`` (a module of the app in ``root``) imports, at any level,
    with ``from ui import x`` read as the module ``ui.x`` when it is one."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names
                         if (root / node.module.replace(".", "/")
                             / f"{alias.name}.py").is_file())
    return found


def _streamlit_below(module: str, root: Path) -> list[str]:
    """Each chain of imports from ``module`` (``ui.endpoints``, a file under ``root``),
    through the app's own ``ui`` modules, that ends in streamlit."""
    chains, seen, todo = [], {module}, [[module]]
    while todo:
        chain = todo.pop()
        for target in sorted(_app_imports(root / (chain[-1].replace(".", "/") + ".py"), root)):
            if target.split(".")[0] == "streamlit":
                chains.append(" -> ".join([*chain, target]))
            elif target.startswith("ui.") and target not in seen and (
                    root / (target.replace(".", "/") + ".py")).is_file():
                seen.add(target)
                todo.append([*chain, target])
    return sorted(chains)


def test_the_endpoints_and_all_they_import_never_import_streamlit():
    """The watch endpoints (ui/endpoints.py, mounted by server.py) answer from the hub with
    server code only: neither they nor any module of ``ui`` they reach imports streamlit
    (no page code, no script run's caches outside a script run)."""
    assert not _streamlit_below("ui.endpoints", APP)


def test_the_endpoint_check_sees_streamlit_imported_below(tmp_path):
    """The rule can fail: streamlit imported two modules down, even inside a function."""
    (tmp_path / "ui").mkdir()
    (tmp_path / "ui" / "endpoints.py").write_text("from ui import answers\nimport json\n")
    (tmp_path / "ui" / "answers.py").write_text("from ui.page import x\n")
    (tmp_path / "ui" / "page.py").write_text("def x():\n    import streamlit as st\n")
    assert _streamlit_below("ui.endpoints", tmp_path) == [
        "ui.endpoints -> ui.answers -> ui.page -> streamlit"]
    (tmp_path / "ui" / "page.py").write_text("def x():\n    return 1\n")
    assert _streamlit_below("ui.endpoints", tmp_path) == []


# -- one live mechanism: nothing follows the server on a timer -------------------------------

# a fragment that reruns on a timer for a reason other than following the server (allowed)
TIMERS = {"parts/classroom/room.py": "the teacher's heartbeat: once a minute the page says it "
          "is still there (a server-side act with the class's token, which no page holds)"}


def _on_a_timer(path: Path) -> bool:
    """Whether ``path`` passes ``run_every`` to anything (a fragment rerun on a timer)."""
    return any(isinstance(node, ast.keyword) and node.arg == "run_every"
               for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))))


def test_no_page_follows_the_server_on_a_timer():
    """Every page follows what it follows through the one polling loop (`ui.follow`):
    no ``run_every`` is left in the app but the allowed timers."""
    timed = {str(path.relative_to(APP)) for path in [*APP.glob("*.py"), *_app_files()]
             if _on_a_timer(path)}
    assert timed == set(TIMERS)


def test_the_timer_check_sees_run_every(tmp_path):
    page = tmp_path / "page.py"
    page.write_text("import streamlit as st\n@st.fragment(run_every=0.5)\ndef f():\n    pass\n")
    assert _on_a_timer(page)
    page.write_text("import streamlit as st\n# run_every=0.5, as before\n@st.fragment\n"
                    "def f():\n    pass\n")
    assert not _on_a_timer(page)


# -- the app's modules import in no circle, as the library's ---------------------------------

def _app_module_name(path: Path, root: Path) -> str:
    return ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")


def _app_circle(root: Path) -> list[str] | None:
    """A circle of imports among the app's modules under ``root`` (ui, parts and the pages),
    at any level and under ``if TYPE_CHECKING:`` alike, or None."""
    files = [*root.glob("views/*.py"), *root.glob("parts/**/*.py"), *root.glob("ui/*.py")]
    names = {_app_module_name(path, root): path for path in files}
    graph = {name: sorted(t for t in _app_imports(path, root) if t in names and t != name)
             for name, path in names.items()}
    state: dict[str, int] = {}

    def visit(name: str, path: list[str]) -> list[str] | None:
        state[name] = 1
        for target in graph[name]:
            if state.get(target) == 1:
                return path[path.index(target):] + [target]
            if target not in state and (found := visit(target, [*path, target])):
                return found
        state[name] = 2
        return None

    for name in sorted(graph):
        if name not in state and (found := visit(name, [name])):
            return found
    return None


def test_the_apps_modules_import_in_no_circle():
    assert _app_circle(APP) is None, " -> ".join(_app_circle(APP))


def test_the_app_circle_check_sees_a_circle_of_type_hints(tmp_path):
    (tmp_path / "ui").mkdir()
    (tmp_path / "ui" / "hub.py").write_text("from ui.answers import Pictures\n")
    (tmp_path / "ui" / "answers.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ui.hub import Hub\n")
    assert _app_circle(tmp_path) == ["ui.answers", "ui.hub", "ui.answers"]
    (tmp_path / "ui" / "hub.py").write_text("import json\n")
    assert _app_circle(tmp_path) is None
