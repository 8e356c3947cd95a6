"""The still image every figure of a report carries under its interactive chart, for a
reader whose browser runs no JavaScript (a mail client's or a sandboxed preview, a page
with scripts off) or where plotly.js fails: the page shows the stills, and once plotly
has drawn a chart it hides that chart's still.

Which picture, and why:

- **plotly's own, through kaleido** (`stacklab.lab.figures.export.image`, kaleido 1.5.0
  driving the system's Chromium, as the notebook's stills and ``--format`` use it) where
  kaleido and a Chromium are installed (``stacklab[notebook]``): the still shows exactly
  what the chart shows, every kind of trace included. SVG first (sharp at any size, its
  text selectable); a figure whose SVG is over `STILL_BYTES` (many points) is a PNG at
  scale 1 instead, and one still over it as a PNG gets no still (said in its place).
- **the project's own SVG pictures** where kaleido is not installed (the app's default
  install): `figure_svg` for a figure of heatmaps, `curves_svg` for the training curves
  (from the run's history). A figure neither can draw says "no still" in its place.

So a report holds at most `STILL_BYTES` of still per figure (base64 adds a third), and
at most one figure per entry of the figure catalog. Measured on a 60-step ``shift`` run
(16 figures, a busy 2-core machine): the report is 5.80 MB, 0.55 MB of it stills (5.25 MB
without them: plotly.js is most of a report), drawn in 7.5 s (10.5 s with kaleido's own
start); without kaleido, 0.7 s. ``comparison.html`` (every figure of every run of a sweep)
carries none: hundreds of stills would cost minutes and megabytes.
"""

from __future__ import annotations

import base64
import html

from ..figures.export import exports, image
from ..figures.picture import figure_svg

__all__ = ["STILL_BYTES", "still", "still_tag", "NO_SCRIPT_STYLE", "STILL_CSS", "HIDE_WHEN_DRAWN"]

STILL_BYTES = 400_000  # one figure's still at most (a heatmap's SVG is 20-150 KB)
# with scripts off no chart is drawn: its empty box would stand under the still
NO_SCRIPT_STYLE = "<noscript><style>.plotly-graph-div { display: none; }</style></noscript>"
STILL_CSS = "img.still { display: block; max-width: 100%; height: auto; margin: 0.5em 0; }\n"
# plotly's post_script, run once the chart is drawn ({plot_id}: the chart's div)
HIDE_WHEN_DRAWN = ("var still = document.getElementById('still-{plot_id}');"
                   " if (still) { still.style.display = 'none'; }")


def still(figure, fallback=None, plotly: bool = True) -> tuple[str, bytes] | None:
    """``figure``'s still as ``(MIME type, bytes)``: plotly's own SVG (a PNG where the SVG
    is over `STILL_BYTES`) where kaleido runs and ``plotly`` asks for it (the app does not:
    a server starts no Chromium for a download), else ``fallback()`` (SVG text: the
    training curves' picture) or the project's heatmap drawing; None if nothing within
    `STILL_BYTES` can draw it."""
    if plotly and exports():
        for format, mime, scale in (("svg", "image/svg+xml", 1), ("png", "image/png", 1)):
            try:
                data = image(figure, format, scale=scale)
            except Exception:  # noqa: BLE001 - a still never costs the chart or the report
                break
            if len(data) <= STILL_BYTES:
                return mime, data
    svg = fallback() if fallback is not None else figure_svg(figure)
    if svg and len(svg.encode("utf-8")) <= STILL_BYTES:
        return "image/svg+xml", svg.encode("utf-8")
    return None


def still_tag(figure, plot_id: str, title: str, fallback=None, plotly: bool = True) -> str:
    """The ``<img>`` of ``figure``'s still, with the id plotly's `HIDE_WHEN_DRAWN` finds
    (``still-PLOT_ID``) and the figure's title as its text; a line saying so when there
    is none."""
    found = still(figure, fallback, plotly)
    if found is None:
        return "<p class='caption'>(no still image of this chart: it needs JavaScript)</p>"
    mime, data = found
    return (f"<img class='still' id='still-{plot_id}' alt='{html.escape(title, quote=True)}'"
            f" src='data:{mime};base64,{base64.b64encode(data).decode('ascii')}'>")
