"""A run's live view prepared once per evaluation and handed to every watcher (a lecture
hall's 300 sessions poll the same run): the training curves and the pattern figure as the
plotly JSON a chart element carries, and still pictures of both (the pattern figure's, an
SVG holding a PNG; the curves', `stacklab.lab.figures.curves_picture`), which a page that
watches the run through the server's watch endpoint shows without rerunning its script.

Without it, each session's poll built its own chart element of both figures: plotly's
``to_dict`` and ``to_json`` of each, per session and per poll. With it, a poll hands the
page two strings it already has (`ui.figures.prepared_chart` puts them in the page as
they are), so a poll costs about what Streamlit's own rerun of a page costs.

`Job.frame` (`stacklab.serve.workers.job`) keeps the newest frame in the job's
`JobFigures`; a frame is made again only when the run has a new evaluation, a new pattern
figure, or a page asks for another width.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import plotly.io

from ...lab.figures import PHONE_WIDTH, RunFigure, describe, figure_svg, fit_title, phone_figure
from ...lab.figures.curves_picture import curves_svg

FRAME_SECONDS = 0.5  # a live run's watchers get a new frame at most this often


@dataclass(frozen=True)
class PreparedFigure:
    """One figure as every page shows it: its plotly JSON (what ``st.plotly_chart`` would
    serialise for each session, its title fitted to the column), its height in px, its
    still picture (SVG of a heatmap-only figure, else None), and its text alternative
    (`stacklab.figures.describe`: what a screen reader says of it, with its numbers)."""

    spec: str
    height: int | None
    still: str | None = None
    alt: str | None = None


@dataclass(frozen=True)
class LiveFrame:
    """A run's live view at one evaluation (``evaluations`` of them so far): the training
    curves and the pattern figure (with its words), prepared for a column ``width`` px wide
    (a phone's copies of them when ``phone``); ``curves_still``: the curves' still picture
    (SVG), as a watch endpoint sends it."""

    evaluations: int
    width: int
    curves: PreparedFigure | None
    pattern: RunFigure | None
    pattern_figure: PreparedFigure | None
    phone: bool = False
    curves_still: str | None = None
    made: float = field(default_factory=time.monotonic)  # when (time.monotonic)


def prepare(figure, width: int, still_font: int | None = None, score: str | None = None,
            phone: bool = False) -> PreparedFigure:
    """``figure`` (a plotly figure; a `SharedFigure` keeps its dict) prepared for a column
    ``width`` px wide, or as a phone's copy (`phone_figure`, `PHONE_WIDTH` px); with
    ``still_font``, its still picture too (ticks that many px); its text alternative with
    the page's ``score``."""
    alt = describe(figure, score)
    if phone:
        figure, width = phone_figure(figure), PHONE_WIDTH  # kept with a shared figure
    else:
        fit_title(figure, width)  # in place and idempotent: a shared figure is fitted once
    spec = figure.to_dict()
    height = (spec.get("layout") or {}).get("height")
    still = figure_svg(figure, width=width, font=still_font) if still_font else None
    return PreparedFigure(plotly.io.to_json(spec, validate=False),
                          int(height) if isinstance(height, (int, float)) else None, still, alt)


def make_frame(evaluations: int, width: int, curves, pattern: RunFigure | None,
               still_font: int, phone: bool = False, points: tuple | None = None) -> LiveFrame:
    """The frame of a run with ``evaluations`` so far: ``curves`` (a figure, or None before
    the first) and ``pattern`` prepared for a column ``width`` px wide, or for a phone;
    with ``points`` (the history and batch losses the curves show), the curves' still
    picture too."""
    still_width = PHONE_WIDTH if phone else width
    return LiveFrame(
        evaluations=evaluations, width=width,
        curves=prepare(curves, width, phone=phone) if curves is not None else None,
        pattern=pattern,
        pattern_figure=(prepare(pattern.figure, width, still_font, pattern.score, phone)
                        if pattern is not None else None),
        phone=phone,
        curves_still=(curves_svg(*points, width=still_width, font=max(still_font - 1, 14))
                      if points is not None and points[0] else None))
