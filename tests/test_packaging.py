"""What the package declares matches what its code relies on: the version ranges in
pyproject.toml admit the installed releases, and the plotly hooks `SharedFigure` overrides
exist in the plotly that is installed (a release that drops one fails here, not in a class)."""

from __future__ import annotations

import os
import tomllib
from importlib import metadata
from pathlib import Path

import plotly.basedatatypes
import pytest

from stacklab.lab.figures import plotly_private
from stacklab.lab.figures.style import SharedFigure
from ui import private_api

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
    hooks = plotly_private.CHANGE_HOOKS
    assert len(hooks) == 7
    missing = [name for name in hooks if not hasattr(plotly.basedatatypes.BaseFigure, name)]
    assert not missing, f"plotly no longer has {missing}: SharedFigure would keep a stale dict"
    if not plotly_private.PUBLIC_ONLY:
        assert all(vars(SharedFigure)[name] is SharedFigure._changed for name in hooks)


@pytest.mark.skipif(os.environ.get("STACKLAB_PUBLIC_API_ONLY") == "1",
                    reason="STACKLAB_PUBLIC_API_ONLY=1 forces the public fallbacks")
def test_the_private_names_the_doors_use_are_all_there():
    """Each door chose its fast way at import: the installed releases have every name."""
    assert plotly_private.WATCHES_CHANGES and plotly_private.check_args(False)
    assert plotly_private.has_frames(plotly.graph_objects.Figure(frames=[{}]))
    assert private_api.BUILDS_CHARTS and private_api.READS_SESSIONS


def test_forcing_the_public_fallbacks_changes_no_figure():
    """With STACKLAB_PUBLIC_API_ONLY=1 the library's figures are the same, their dicts made
    afresh (nothing kept) and a subplot grid carried."""
    script = """
import json, sys
import plotly.graph_objects as go
from plotly.subplots import make_subplots
from stacklab.lab.figures import plotly_private, shared, training_curves, phone_figure
curves = training_curves([{"step": s, "loss": 1 / s, "accuracy": s / 10} for s in (1, 5, 10)])
grid = shared(make_subplots(rows=2, cols=1))
grid.add_trace(go.Scatter(x=[1], y=[2]), row=2, col=1)
kept = curves.to_dict() is curves.to_dict()
print(json.dumps({"public": plotly_private.PUBLIC_ONLY, "kept": kept,
                  "figures": [curves.to_plotly_json(), grid.to_plotly_json(),
                              phone_figure(curves).to_plotly_json()]},
                 cls=__import__("plotly").utils.PlotlyJSONEncoder, sort_keys=True))
"""
    import json
    import subprocess
    import sys

    def run(**env):
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                             check=True, env={**os.environ, **env}, cwd=ROOT).stdout
        return json.loads(out)

    fast, public = run(STACKLAB_PUBLIC_API_ONLY="0"), run(STACKLAB_PUBLIC_API_ONLY="1")
    assert (fast["public"], fast["kept"]) == (False, True)
    assert (public["public"], public["kept"]) == (True, False)
    assert public["figures"] == fast["figures"]
    assert public["figures"][1]["data"][0]["yaxis"] == "y2"  # row=2 found its subplot



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
