"""What the package declares matches what its code relies on: the version ranges in
pyproject.toml admit the installed releases, and the plotly hooks `SharedFigure` overrides
exist in the plotly that is installed (a release that drops one fails here, not in a class)."""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

import plotly.basedatatypes
import pytest

from stacklab.lab.figures.style import SharedFigure

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _requirement(name: str) -> str:
    return next(dep for dep in PYPROJECT["project"]["dependencies"] if dep.startswith(name))


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".")[:2] if part.isdigit())


@pytest.mark.parametrize("name, low, high", [("streamlit", "1.67", "1.68"),
                                             ("plotly", "6.0", "8")])
def test_the_ranges_admit_what_is_installed_and_nothing_older(name, low, high):
    requirement = _requirement(name)
    assert f">={low},<{high}" in requirement, requirement
    low, high = _release(low), _release(high + ".0")
    assert low <= _release(metadata.version(name)) < high


def test_every_plotly_hook_shared_figure_overrides_exists():
    hooks = [name for name in vars(SharedFigure) if name.startswith("_send_")]
    assert len(hooks) == 7
    missing = [name for name in hooks if not hasattr(plotly.basedatatypes.BaseFigure, name)]
    assert not missing, f"plotly no longer has {missing}: SharedFigure would keep a stale dict"


def test_the_wheel_carries_the_built_in_lessons(tmp_path):
    """The lessons are package data (Markdown files): a built wheel has every one of them."""
    import subprocess
    import sys
    import zipfile

    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(tmp_path), str(ROOT)], check=True, timeout=300,
                   cwd=tmp_path)
    wheel = next(tmp_path.glob("stacklab-*.whl"))
    names = {name for name in zipfile.ZipFile(wheel).namelist()
             if name.startswith("stacklab/lab/lessons/builtin/")}
    expected = {f"stacklab/lab/lessons/builtin/{path.name}"
                for path in (ROOT / "lib/stacklab/lab/lessons/builtin").glob("*.md")}
    assert len(expected) == 7 and names == expected
