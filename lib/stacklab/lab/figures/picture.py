"""A still picture (SVG) of a figure made of heatmaps, for a browser that must show it before
plotly has loaded.

A fresh browser spends about 2.7 s here loading and starting plotly before it draws a
chart; an ``<img>`` of the same heatmap is on screen as soon as the page's first message
arrives. So a student opening the teacher's link sees the pattern figure at once, and can
still ask for the interactive chart (values on hover).

`figure_svg` reads the figure's own dict (what ``st.plotly_chart`` sends): every heatmap
trace on its axes' domains, its colour scale and range, cell text (``texttemplate``), the
colour bar, the axis and subplot titles, and the dashed lines and labels that mark the
trained length T. It returns None for a figure with any other trace: that one is only
ever a chart. Small maps are drawn cell by cell; a map of more than `RECT_CELLS` cells is
one PNG, a pixel a cell, drawn without smoothing.

>>> from stacklab.lab.figures import similarity_heatmap
>>> import torch
>>> svg = figure_svg(similarity_heatmap(torch.eye(4)))
>>> svg.startswith("<svg") and svg.count("<rect") >= 16
True
"""

from __future__ import annotations

import html
import math
import re
from urllib.parse import quote
from xml.sax.saxutils import escape, quoteattr

import numpy as np

from .picture_values import (colour_scale, colours, is_number, labels, nice_ticks, png, tick_steps,
                             z_values)
from .style import plain, wrap_title

RECT_CELLS = 64  # cells drawn one <rect> each; a larger map is one image (a 16 x 16 map
# as rects is 20 KB a picture, sent again at each poll of a run followed live; as a PNG,
# under 1 KB)
FONT_FAMILY = "'Source Sans Pro', 'Source Sans 3', 'Segoe UI', Helvetica, Arial, sans-serif"
TEXT = "rgb(49, 51, 63)"  # Streamlit's text colour, as the charts' theme uses it
MUTED = "rgb(110, 112, 128)"
_CHAR = 0.56  # an average character, in font sizes
_PLOTLY_TEMPLATE_HEIGHT = 450
_FORMAT = re.compile(r"%\{z(?::([^}]*))?\}")


def figure_svg(figure, *, width: int = 700, font: int = 13) -> str | None:
    """The figure as SVG text, ``width`` px wide and as high as its layout says, its ticks
    ``font`` px (titles larger); None if it has a trace that is not a heatmap, frames (an
    animation), an empty map, or anything else this drawing cannot show as plotly would.

    ``figure`` is a plotly figure, a `SharedFigure` (whose picture is kept with its dict
    until the figure changes) or a figure's dict."""
    cache = getattr(figure, "_shared_pictures", None)
    if cache is not None and (width, font) in cache:
        return cache[width, font]
    spec = figure if isinstance(figure, dict) else figure.to_dict()
    try:
        svg = _Drawing(spec, width, font).svg()
    except (ValueError, TypeError, KeyError, IndexError, ZeroDivisionError):
        svg = None  # something this drawing does not know (a colour name, a d3 format): the chart
    if cache is not None and getattr(figure, "_shared_dict", None) is spec:
        cache[width, font] = svg  # kept only while the dict it was drawn from is
    return svg


def svg_img(svg: str, alt: str) -> str:
    """An HTML ``<img>`` of ``svg`` (a data URI) as wide as its container, ``alt`` escaped.
    The SVG's text is written into the URI with only the characters that would end the
    attribute or the URI escaped: a quarter smaller than base64, and sent again at each
    poll of a run followed live."""
    data = quote(svg, safe=' ,.:;=/()-"')  # its double quotes kept: the attribute is in single
    return (f"<img src='data:image/svg+xml,{data}' alt=\"{html.escape(alt)}\" "
            'style="width: 100%; height: auto; display: block">')


class _Drawing:
    """One figure's picture: the layout worked out once, then the parts written in order."""

    def __init__(self, spec: dict, width: int, font: int):
        self.layout = spec.get("layout") or {}
        self.traces = [] if spec.get("frames") else list(spec.get("data") or ())
        self.width, self.font = int(width), int(font)
        self.height = int(self.layout.get("height") or _PLOTLY_TEMPLATE_HEIGHT)
        self.parts: list[str] = []

    def svg(self) -> str | None:
        if not self.traces or any(trace.get("type") != "heatmap" for trace in self.traces):
            return None
        maps = [_Map(trace, self.layout) for trace in self.traces]
        if any(m.z.size == 0 for m in maps):
            return None
        title = self._title_lines()
        font = self.font
        left = max((m.y_label_chars() for m in maps if m.y_labels_shown), default=0)
        left = left * _CHAR * font + 10 + (1.5 * font if any(m.y_title for m in maps) else 0)
        bar = next((m for m in maps if m.show_scale), None)
        right = 24 + (bar.bar_chars() * _CHAR * font + 22 if bar else 0)
        top = 12 + len(title) * 1.35 * self._title_font() + (8 if title else 0)
        notes = self.layout.get("annotations") or ()
        top += 1.3 * font if any(note.get("yanchor") == "bottom" for note in notes) else 0
        bottom = 1.3 * font + 8 + (1.5 * font if any(m.x_title for m in maps) else 0)
        area = (left, top, self.width - right, self.height - bottom)
        for m in maps:
            m.place(area, font)
        self._text_block(title, 10, 12, self._title_font(), TEXT, weight="600")
        for m in maps:
            self.parts.extend(m.cells(font))
        for m in maps:
            self.parts.extend(m.axes(font))
        self._shapes(maps)
        self._annotations(maps, area)
        if bar is not None:
            self.parts.extend(bar.colour_bar(maps, font))
        body = "\n".join(self.parts)
        return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {self.width} {self.height}"'
                f' width="{self.width}" height="{self.height}" font-family={quoteattr(FONT_FAMILY)}'
                f' fill="{TEXT}">\n<rect width="100%" height="100%" fill="white"/>\n{body}\n</svg>')

    def _title_font(self) -> float:
        return round(self.font * 1.15, 1)

    def _title_lines(self) -> list[str]:
        text = ((self.layout.get("title") or {}).get("text")) or ""
        if not text:
            return []
        return [plain(line) for line in wrap_title(text, self.width - 20,
                                                   int(self._title_font())).split("<br>")]

    def _text_block(self, lines, x, y, size, colour, *, weight="normal", anchor="start") -> None:
        for index, line in enumerate(lines):
            self.parts.append(_text(x, y + size * (1 + 1.35 * index), line, size, colour,
                                    anchor=anchor, weight=weight))

    def _shapes(self, maps) -> None:
        """Lines in data or domain coordinates (plotly's add_vline / add_hline)."""
        for shape in self.layout.get("shapes") or ():
            if shape.get("type", "line") != "line":
                continue
            m = _map_of(maps, shape.get("xref", "x"), shape.get("yref", "y"))
            if m is None:
                continue
            x0, x1 = (m.x_at(shape.get(k, 0), shape.get("xref", "x")) for k in ("x0", "x1"))
            y0, y1 = (m.y_at(shape.get(k, 0), shape.get("yref", "y")) for k in ("y0", "y1"))
            line = shape.get("line") or {}
            dash = ' stroke-dasharray="6 4"' if line.get("dash") in ("dash", "dot", "dashdot") else ""
            self.parts.append(f'<line x1="{x0:.1f}" y1="{y0:.1f}" x2="{x1:.1f}" y2="{y1:.1f}" '
                              f'stroke={quoteattr(line.get("color") or "black")} '
                              f'stroke-width="{float(line.get("width") or 2):g}"{dash}/>')

    def _annotations(self, maps, area) -> None:
        """Subplot titles (paper coordinates) and labels on a map (data or domain)."""
        left, top, right, bottom = area
        for note in self.layout.get("annotations") or ():
            xref, yref = note.get("xref", "x"), note.get("yref", "y")
            size = float((note.get("font") or {}).get("size") or self.font)
            size = self.font * 1.15 if size > self.font else self.font
            if xref == "paper" and yref == "paper":
                x = left + float(note.get("x", 0.5)) * (right - left)
                y = bottom - float(note.get("y", 0.5)) * (bottom - top)
            else:
                m = _map_of(maps, xref, yref)
                if m is None:
                    continue
                x, y = m.x_at(note.get("x", 0), xref), m.y_at(note.get("y", 0), yref)
            anchor = {"left": "start", "right": "end"}.get(note.get("xanchor"), "middle")
            lines = [plain(line) for line in str(note.get("text", "")).split("<br>")]
            if note.get("yanchor") == "bottom":
                y -= 4 + size * 1.35 * len(lines)
            self._text_block(lines, x, y - size * 0.2, size, TEXT, anchor=anchor)


class _Map:
    """One heatmap trace: its values, its colours, and where it lands on the picture."""

    def __init__(self, trace: dict, layout: dict):
        self.xref = trace.get("xaxis", "x")
        self.yref = trace.get("yaxis", "y")
        self.x_axis = layout.get("xaxis" + self.xref[1:]) or {}
        self.y_axis = layout.get("yaxis" + self.yref[1:]) or {}
        self.z = z_values(trace.get("z"))  # (rows, columns), nan where there is no value
        rows, columns = self.z.shape
        self.x = labels(trace.get("x"), columns)
        self.y = labels(trace.get("y"), rows)
        finite = self.z[np.isfinite(self.z)]
        self.zmin = float(trace["zmin"]) if trace.get("zmin") is not None else (
            float(finite.min()) if finite.size else 0.0)
        self.zmax = float(trace["zmax"]) if trace.get("zmax") is not None else (
            float(finite.max()) if finite.size else 1.0)
        self.scale = colour_scale(trace.get("colorscale"))
        self.show_scale = trace.get("showscale", True) is not False
        bar_title = (trace.get("colorbar") or {}).get("title") or {}
        self.bar_title = plain(bar_title.get("text", ""))
        self.bar_title_beside = bar_title.get("side") == "right"  # turned, beside the ticks
        self.text_format = trace.get("texttemplate")
        self.reversed = self.y_axis.get("autorange") == "reversed"
        self.x_title = plain((self.x_axis.get("title") or {}).get("text", ""))
        self.y_title = plain((self.y_axis.get("title") or {}).get("text", ""))
        self.y_labels_shown = self.y_axis.get("showticklabels", True) is not False
        self.box = (0.0, 0.0, 1.0, 1.0)  # left, top, cell width, cell height: set by `place`

    def y_label_chars(self) -> int:
        return max((len(label) for label in self._ticks(self.y, 10**6)[1]), default=1)

    def bar_chars(self) -> int:
        ticks = max((len(label) for label in nice_ticks(self.zmin, self.zmax)[1]), default=1)
        if self.bar_title_beside:
            return ticks + 2.5 * bool(self.bar_title)  # a turned line of text: one line's room
        return max(ticks, len(self.bar_title) * 0.8)

    def place(self, area, font: int) -> None:
        """Its cells inside its axes' domains of the plotting ``area``: square ones when the
        figure asks for square cells (``scaleanchor``), centred in the domain."""
        left, top, right, bottom = area
        x0, x1 = self.x_axis.get("domain") or (0.0, 1.0)
        y0, y1 = self.y_axis.get("domain") or (0.0, 1.0)
        box_left, box_right = left + x0 * (right - left), left + x1 * (right - left)
        box_top = top + (1 - y1) * (bottom - top)
        box_bottom = top + (1 - y0) * (bottom - top)
        rows, columns = self.z.shape
        cell_w = (box_right - box_left) / columns
        cell_h = (box_bottom - box_top) / rows
        if self.y_axis.get("scaleanchor"):
            cell_w = cell_h = min(cell_w, cell_h)
        width, height = cell_w * columns, cell_h * rows
        self.box = (box_left + (box_right - box_left - width) / 2,
                    box_top + (box_bottom - box_top - height) / 2, cell_w, cell_h)

    @property
    def edges(self) -> tuple[float, float, float, float]:
        left, top, cell_w, cell_h = self.box
        rows, columns = self.z.shape
        return left, top, left + cell_w * columns, top + cell_h * rows

    def x_at(self, value, ref: str) -> float:
        """A pixel column: ``value`` in data units (column centres at the x values) or, for
        a ``domain`` reference, as a fraction of the map's width."""
        left, _, right, _ = self.edges
        if ref.endswith("domain") or ref == "paper":
            return left + float(value) * (right - left)
        return left + (self._index(value, self.x) + 0.5) * self.box[2]

    def y_at(self, value, ref: str) -> float:
        _, top, _, bottom = self.edges
        if ref.endswith("domain") or ref == "paper":
            return bottom - float(value) * (bottom - top)
        row = self._index(value, self.y) + 0.5
        return top + row * self.box[3] if self.reversed else bottom - row * self.box[3]

    @staticmethod
    def _index(value, labels: list[str]) -> float:
        """Where ``value`` falls among the labels: its index, or, for a number between
        numeric labels, the fraction between them (0 at the first label)."""
        try:
            start = float(labels[0]) if labels else 0.0
            step = float(labels[1]) - start if len(labels) > 1 else 1.0
            return (float(value) - start) / (step or 1.0)
        except (TypeError, ValueError):  # named labels: a name, or a number as its index
            if str(value) in labels:
                return float(labels.index(str(value)))
            return float(value) if is_number(str(value)) else 0.0

    def cells(self, font: int) -> list[str]:
        """The coloured cells, with their text where the trace has a template and it fits."""
        left, top, cell_w, cell_h = self.box
        rows, columns = self.z.shape
        rgba = colours(self.scale, self.z, self.zmin, self.zmax)  # (rows, columns, 4)
        z = self.z
        if not self.reversed:  # row 0 at the bottom
            rgba, z = rgba[::-1], z[::-1]
        if rows * columns > RECT_CELLS:
            return [f'<image x="{left:.2f}" y="{top:.2f}" width="{cell_w * columns:.2f}" '
                    f'height="{cell_h * rows:.2f}" preserveAspectRatio="none" '
                    f'style="image-rendering: pixelated" '
                    f'href="data:image/png;base64,{png(rgba)}"/>']
        parts = []
        for (i, j), alpha in np.ndenumerate(rgba[..., 3]):
            if alpha:
                r, g, b = (int(c) for c in rgba[i, j, :3])
                parts.append(f'<rect x="{left + j * cell_w:.2f}" y="{top + i * cell_h:.2f}" '
                             f'width="{cell_w + 0.4:.2f}" height="{cell_h + 0.4:.2f}" '
                             f'fill="rgb({r},{g},{b})"/>')
        if self.text_format:
            parts.extend(self._cell_text(z, rgba, font))
        return parts

    def _cell_text(self, z, rgba, font: int) -> list[str]:
        left, top, cell_w, cell_h = self.box
        size = min(font, cell_h * 0.6)
        parts = []
        for (i, j), value in np.ndenumerate(z):
            if not math.isfinite(value):
                continue
            text = _FORMAT.sub(lambda m: format(float(value), m[1] or "g"), self.text_format)
            if len(text) * _CHAR * size > cell_w * 0.9 or size < 7:
                return []  # every cell's text or none
            r, g, b = rgba[i, j, :3]
            ink = "black" if 0.299 * r + 0.587 * g + 0.114 * b > 140 else "white"
            parts.append(_text(left + (j + 0.5) * cell_w, top + (i + 0.5) * cell_h + size * 0.35,
                               plain(text), size, ink, anchor="middle"))
        return parts

    def _ticks(self, labels: list[str], room: float) -> tuple[list[int], list[str]]:
        """The labels shown on an axis with ``room`` labels' worth of space: every one, or
        every 2nd, 5th, 10th... of a numeric axis (at most every one of a named axis)."""
        count = len(labels)
        numeric = all(is_number(label) for label in labels)
        if not numeric or count <= room:
            return list(range(count)), labels
        step = next(s for s in tick_steps() if count / s <= max(room, 1))
        indices = list(range(0, count, step))
        return indices, [labels[i] for i in indices]

    def axes(self, font: int) -> list[str]:
        """Tick labels under and left of the map, and the axis titles."""
        left, top, right, bottom = self.edges
        _, _, cell_w, cell_h = self.box
        parts = []
        x_room = (right - left) / (font * 2.6)
        for index, label in zip(*self._ticks(self.x, x_room)):
            parts.append(_text(left + (index + 0.5) * cell_w, bottom + font * 1.2, label, font,
                               MUTED, anchor="middle"))
        if self.y_labels_shown:
            y_room = (bottom - top) / (font * 1.8)
            for index, label in zip(*self._ticks(self.y, y_room)):
                row = (index + 0.5) * cell_h
                y = top + row if self.reversed else bottom - row
                parts.append(_text(left - 6, y + font * 0.35, label, font, MUTED, anchor="end"))
        if self.x_title:
            parts.append(_text((left + right) / 2, bottom + font * 2.6, self.x_title,
                               font * 1.05, TEXT, anchor="middle"))
        if self.y_title:
            width = self.y_label_chars() * _CHAR * font
            x, y = left - 10 - width - font * 0.5, (top + bottom) / 2
            parts.append(f'<text x="{x:.1f}" y="{y:.1f}" font-size="{font * 1.05:.1f}" '
                         f'text-anchor="middle" transform="rotate(-90 {x:.1f} {y:.1f})">'
                         f'{escape(self.y_title)}</text>')
        return parts

    def colour_bar(self, maps, font: int) -> list[str]:
        """The colour bar right beside the maps, as tall as they are, with its ticks and title."""
        top = min(m.edges[1] for m in maps)
        bottom = max(m.edges[3] for m in maps)
        x = max(m.edges[2] for m in maps) + 14
        if self.bar_title and not self.bar_title_beside:
            top += font * 1.5
        stops = "".join(f'<stop offset="{1 - position:.4f}" stop-color={quoteattr(colour)}/>'
                        for position, colour in reversed(self.scale))
        parts = [f'<defs><linearGradient id="bar" x1="0" y1="0" x2="0" y2="1">{stops}'
                 f'</linearGradient></defs>',
                 f'<rect x="{x:.1f}" y="{top:.1f}" width="16" height="{bottom - top:.1f}" '
                 f'fill="url(#bar)"/>']
        values, labels = nice_ticks(self.zmin, self.zmax)
        if self.bar_title and self.bar_title_beside:
            beside = x + 23 + max(map(len, labels), default=1) * _CHAR * font + font
            parts.append(f'<text x="{beside:.1f}" y="{(top + bottom) / 2:.1f}" '
                         f'font-size="{font:.1f}" fill="{TEXT}" text-anchor="middle" '
                         f'transform="rotate(90 {beside:.1f} {(top + bottom) / 2:.1f})">'
                         f'{escape(self.bar_title)}</text>')
        elif self.bar_title:
            parts.append(_text(x, top - font * 0.6, self.bar_title, font, TEXT))
        span = (self.zmax - self.zmin) or 1.0
        for value, label in zip(values, labels):
            y = bottom - (value - self.zmin) / span * (bottom - top)
            parts.append(f'<line x1="{x + 16:.1f}" y1="{y:.1f}" x2="{x + 20:.1f}" y2="{y:.1f}" '
                         f'stroke="{MUTED}"/>')
            parts.append(_text(x + 23, y + font * 0.35, label, font, MUTED))
        return parts


# -- text -----------------------------------------------------------------------------------

def _text(x: float, y: float, text: str, size: float, colour: str, *, anchor: str = "start",
          weight: str = "normal") -> str:
    weight_attr = f' font-weight="{weight}"' if weight != "normal" else ""
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size:.1f}" fill="{colour}" '
            f'text-anchor="{anchor}"{weight_attr}>{escape(text)}</text>')


def _map_of(maps: list[_Map], xref: str, yref: str) -> _Map | None:
    """The map whose axes a shape or annotation refers to (``x2``, ``y2 domain``...)."""
    x_axis, y_axis = xref.split()[0], yref.split()[0]
    for m in maps:
        if (x_axis == "paper" or m.xref == x_axis) and (y_axis == "paper" or m.yref == y_axis):
            return m
    return None
