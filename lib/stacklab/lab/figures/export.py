"""Figures as files and as stills: PNG, SVG and PDF for a paper, and the still image every
figure in a notebook carries beside its interactive chart.

The images are plotly's own (kaleido 1.x driving the system's Chromium, found at
``$BROWSER_PATH`` or /usr/bin/chromium), so a still shows exactly what the chart shows,
every trace kind included. Kaleido is started once per process and kept (its first image
takes seconds, each later one a fraction of one), with MathJax off so that nothing is
fetched from the network. Where kaleido or a browser is missing, a still falls back to
the project's own SVG drawing of heatmap figures (`figure_svg`, no browser), and an export
asks for what is missing.

    from stacklab.figures import export
    export(fig, "fig.pdf")                  # the format from the name: png, svg or pdf
    export(fig, "fig", format="svg")        # fig.svg
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
from pathlib import Path

from ...core.errors import StackError
from .curves_picture import curves_svg
from .picture import figure_svg

__all__ = ["FORMATS", "export", "exports", "image", "still_svg", "mimebundle",
           "use_stills_in_notebooks", "in_kernel", "live_frames"]

FORMATS = ("png", "svg", "pdf")
PLOTLY_MIME = "application/vnd.plotly.v1+json"
WIDTH, HEIGHT = 900, 500  # an image's size when the figure's layout gives none
_LOCK = threading.Lock()
_started: list[bool] = []  # [True] once kaleido's server runs; [False] when it cannot


def _browser() -> str | None:
    """The Chromium kaleido drives: ``$BROWSER_PATH``, else the system's."""
    found = os.environ.get("BROWSER_PATH") or shutil.which("chromium") \
        or shutil.which("chromium-browser") or shutil.which("google-chrome")
    return found if found and Path(found).exists() else None


def _kaleido():
    """kaleido with its server running, or None where kaleido or a browser is missing."""
    with _LOCK:
        if _started:
            return sys.modules["kaleido"] if _started[0] else None
        try:
            import kaleido
        except ImportError:
            _started.append(False)
            return None
        browser = _browser()
        if browser is None:
            _started.append(False)
            return None
        os.environ.setdefault("BROWSER_PATH", browser)
        kaleido.start_sync_server(mathjax=False, silence_warnings=True)  # nothing fetched
        _started.append(True)
        return kaleido


def exports() -> bool:
    """Whether plotly's own images can be drawn here (kaleido and a Chromium; kaleido's
    server is started on the first call)."""
    return _kaleido() is not None


def image(figure, format: str = "png", *, width: int | None = None,
          height: int | None = None, scale: float = 2) -> bytes:
    """The figure as PNG, SVG or PDF bytes, drawn by plotly.js itself (kaleido).

    ``E_VALUE`` when kaleido or a browser is missing (with the fix), ``E_ARG`` for another
    format."""
    if format not in FORMATS:
        raise StackError("E_ARG", f"a figure exports as {', '.join(FORMATS)}, not {format!r}",
                         hint="e.g. export(fig, 'figure.pdf') or --format pdf")
    kaleido = _kaleido()
    if kaleido is None:
        raise StackError("E_VALUE", "exporting a figure needs kaleido and a Chromium",
                         hint="pip install 'stacklab[notebook]' (kaleido); apt-get install "
                              "chromium, or set BROWSER_PATH to a Chrome")
    spec = _spec(figure)
    layout = spec.get("layout", {})
    opts = {"format": format, "scale": scale if format == "png" else 1,
            "width": width or layout.get("width") or WIDTH,
            "height": height or layout.get("height") or HEIGHT}
    return kaleido.calc_fig_sync(spec, opts=opts)


def export(figure, path, format: str | None = None, **size) -> Path:
    """Write ``figure`` to ``path`` as PNG, SVG or PDF (``format``, else the file's
    suffix; a path without one gets the format's); the path written."""
    path = Path(path)
    format = (format or path.suffix.lstrip(".") or "png").lower()
    if path.suffix.lstrip(".").lower() != format:
        path = path.with_name(path.name + "." + format)
    data = image(figure, format, **size)
    path.write_bytes(data)
    return path


def still_svg(figure) -> str | None:
    """The still SVG of ``figure`` that a notebook keeps beside the chart: plotly's own
    where kaleido runs, else the project's heatmap drawing; None if neither can draw it."""
    if exports():
        try:
            return image(figure, "svg").decode("utf-8")
        except Exception:  # noqa: BLE001 - a still never costs the chart; the drawing below
            pass
    return figure_svg(figure)


def mimebundle(figure, still: bool = True) -> dict:
    """The notebook output of ``figure``: the interactive chart, its title as text, and
    (``still``) an SVG that GitHub, nbviewer and a notebook without plotly show."""
    spec = _spec(figure)
    title = (spec.get("layout", {}).get("title") or {}).get("text") or "figure"
    bundle = {PLOTLY_MIME: spec, "text/plain": f"<figure: {title}>"}
    if still:
        svg = still_svg(figure)
        if svg:
            bundle["image/svg+xml"] = svg
    return bundle


def live_frames(figures: list, history: list[dict], train_loss: list, final: bool) -> list[dict]:
    """The outputs of the live ``figures`` (the curves of ``history`` and ``train_loss``,
    then the pattern figure): while the run trains, still pictures drawn without a browser
    (JupyterLab's plotly renderer draws a chart once and ignores its updates, so a live
    chart would stay at its first frame); once it has ended, the interactive charts, each
    with its still."""
    if final:
        return [mimebundle(figure) for figure in figures]
    stills = [curves_svg(history, train_loss),
              *(figure_svg(figure) for figure in figures[1:])]
    return [{"image/svg+xml": svg, "text/plain": f"<{figure.layout.title.text}>"} if svg
            else mimebundle(figure, still=False) for figure, svg in zip(figures, stills)]


def use_stills_in_notebooks() -> None:
    """Make plotly show every figure in a notebook as `mimebundle` does: the chart and its
    still (plotly's renderer ``stacklab``, made the default)."""
    import plotly.io as pio
    from plotly.io._base_renderers import MimetypeRenderer

    class StillRenderer(MimetypeRenderer):
        def to_mimebundle(self, fig_dict):
            return mimebundle(fig_dict)

    pio.renderers["stacklab"] = StillRenderer()
    pio.renderers.default = "stacklab"


def in_kernel() -> bool:
    """Whether this runs in a Jupyter kernel (asked without importing IPython)."""
    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    return type(shell).__name__ == "ZMQInteractiveShell"


def _spec(figure) -> dict:
    """A figure's plain dict (numbers as JSON has them: no numpy arrays, no typed arrays'
    objects), as a notebook stores it."""
    if isinstance(figure, dict):
        return json.loads(json.dumps(figure, default=_plain))
    return json.loads(figure.to_json())


def _plain(value):
    tolist = getattr(value, "tolist", None)
    if tolist is not None:
        return tolist()
    raise TypeError(f"not JSON: {type(value).__name__}")
