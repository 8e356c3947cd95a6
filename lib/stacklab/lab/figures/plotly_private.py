"""The one door to plotly's private names, which the figures use for speed only.

`SharedFigure` (`style.py`) keeps its dict until plotly's change hooks (``_send_*_msg``,
which plotly calls for its widgets on every change of a figure) say it changed; it reads
a figure's frames (``_frame_objs``), carries a subplot grid in a figure's dict
(``_grid_str``, ``_grid_ref``) and skips plotly's property check (``_validate``).

Each has a public fallback, chosen here at import time when plotly lacks the name, or for
all of them when ``STACKLAB_PUBLIC_API_ONLY=1`` (the suite runs the app's journeys so):
a figure's dict is made afresh on every call (nothing kept that a change could leave
stale), frames are read as ``figure.frames``, a grid is carried by handing plotly the
figure itself, and properties are checked. A plotly release without the private names
costs speed, never a figure. `tests/test_architecture.py` checks that no other module
names them.
"""

from __future__ import annotations

import os

import plotly.graph_objects as go
from plotly.basedatatypes import BaseFigure

PUBLIC_ONLY = os.environ.get("STACKLAB_PUBLIC_API_ONLY") == "1"

# every change to a figure reaches one of the hooks plotly keeps for its widgets
CHANGE_HOOKS = ("_send_addTraces_msg", "_send_moveTraces_msg", "_send_deleteTraces_msg",
                "_send_restyle_msg", "_send_relayout_msg", "_send_update_msg",
                "_send_animate_msg")
WATCHES_CHANGES = not PUBLIC_ONLY and all(hasattr(BaseFigure, name) for name in CHANGE_HOOKS)


def _skips_check() -> bool:
    """Whether plotly's constructor takes ``_validate=False`` and then checks nothing (a
    property plotly does not know passes)."""
    try:
        go.Figure({"layout": {"height": "not a number"}}, _validate=False)
    except Exception:  # noqa: BLE001 - any refusal: the keyword is not what it was
        return False
    return True


_SKIPS_CHECK = not PUBLIC_ONLY and _skips_check()
_READS_FRAMES = not PUBLIC_ONLY and hasattr(go.Figure(), "_frame_objs")
_CARRIES_GRID = not PUBLIC_ONLY and all(hasattr(go.Figure(), name)
                                        for name in ("_grid_str", "_grid_ref"))


def watch_changes(cls: type, on_change) -> None:
    """Make ``on_change(self, ...)`` run on every change plotly makes to a figure of class
    ``cls``: set on each of plotly's change hooks (nothing where they are not used)."""
    if WATCHES_CHANGES:
        for name in CHANGE_HOOKS:
            setattr(cls, name, on_change)


def has_frames(figure: go.Figure) -> bool:
    """Whether ``figure`` has animation frames."""
    return bool(figure._frame_objs if _READS_FRAMES else figure.frames)


def check_args(validate: bool) -> dict:
    """The keyword a figure's constructor takes to skip plotly's property check when
    ``validate`` is False (none in the public fallback: properties are checked)."""
    return {} if validate or not _SKIPS_CHECK else {"_validate": False}


def with_grid(figure: go.Figure) -> go.Figure | dict:
    """What to build a copy of ``figure`` from, its subplot grid included (``row=, col=``
    go on working on the copy): its dict with the grid, or the figure itself, which plotly's
    constructor copies (the public fallback: a deep copy of the figure's properties)."""
    if not _CARRIES_GRID:
        return figure
    return {**figure.to_dict(), "_grid_str": figure._grid_str, "_grid_ref": figure._grid_ref}


def dict_with_grid(figure: go.Figure) -> dict:
    """``figure``'s dict, with its subplot grid where plotly keeps one (the public fallback:
    the dict alone; traces then name their axes, as ``xaxis="x2"``)."""
    spec = with_grid(figure)
    return spec if isinstance(spec, dict) else figure.to_dict()


def regridded(figure: go.Figure, subplots: dict) -> go.Figure:
    """``figure``, built from a dict of `dict_with_grid`, with the subplot grid that
    ``make_subplots(**subplots)`` makes, so that ``row=, col=`` work on it: the dict carried
    it already, or (the public fallback) plotly's ``set_subplots`` lays it out again and
    the figure's own layout goes back over the grid's."""
    if _CARRIES_GRID:
        return figure
    layout = figure.layout.to_plotly_json()
    figure.set_subplots(**subplots)
    figure.update_layout(layout)
    return figure
