"""What every stacklab figure shares: sizes, colours, the T marker, and sending large
tables compactly (heatmaps zoomed on their first rows, float32 arrays that plotly encodes
as base64)."""

from __future__ import annotations

import html
import re

import numpy as np
import plotly.graph_objects as go
import torch

from . import plotly_private

MAX_CELLS = 384  # heatmap rows shown per side: 384² float32 values are ~0.8 MB of JSON
ANIMATION_CELLS = 200_000  # cells over all frames of an animation (~1.1 MB of JSON)
MAX_FRAMES = 40  # snapshots shown by the training animation
MAX_TABLE_ROWS = 4096  # rows of a table the run figures look at (its first ones)
HEIGHT = 520  # px; also the height of the div in an HTML report

# Okabe and Ito's blue and vermillion (figures/access.py): apart for colour-blind readers too
TRAINED_COLOR = "#0072B2"
UNTRAINED_COLOR = "#D55E00"
T_LINE = dict(color="black", width=1.5, dash="dash")
KIND_TEXT = {"cosine": "cosine similarity", "centred": "centred cosine similarity",
             "dot": "dot product"}


def as_float32(values) -> np.ndarray:
    """A float32 numpy copy of a tensor, array or list (plotly sends float32 as base64)."""
    if isinstance(values, torch.Tensor):
        values = values.detach().float().cpu().numpy()
    return np.asarray(values, dtype=np.float32)


def as_table(table) -> torch.Tensor:
    table = torch.as_tensor(table).detach().float().cpu()
    if table.dim() != 2 or table.shape[0] == 0:
        raise ValueError(f"a position table must be [N, D] with N >= 1, not {list(table.shape)}")
    return table


def check_kind(kind: str) -> None:
    if kind not in KIND_TEXT:
        raise ValueError(f"kind must be one of {', '.join(map(repr, KIND_TEXT))}, not {kind!r}")


def zoom(n: int, max_cells: int = MAX_CELLS) -> int:
    """How many of ``n`` rows a heatmap shows: all of them, or its first ``max_cells``.

    A long table is zoomed on its first rows, never averaged: every cell is one real pair
    of rows, so the diagonal stays 1 and a period of a few rows keeps its stripes."""
    return min(n, max_cells)


def zoom_note(shown: int, n: int) -> str:
    """What a title says when a heatmap shows fewer rows than there are."""
    return "" if shown == n else f" (zoomed on rows 0-{shown - 1} of {n:,})"


def has_untrained(trained_len: int | None, n: int) -> bool:
    return trained_len is not None and 0 < trained_len < n


def mark_trained_len(fig: go.Figure, trained_len: int, *, horizontal: bool, **where) -> None:
    """A dashed line at T (between row T-1 and row T, the first never trained), labelled."""
    at = trained_len - 0.5
    fig.add_vline(x=at, line=T_LINE, **where)
    if horizontal:
        fig.add_hline(y=at, line=T_LINE, **where)
    fig.add_annotation(x=at, y=1.0, yref="y domain", yanchor="bottom", showarrow=False,
                       text=f"T = {trained_len}", font=dict(size=12), **where)


def heatmap_trace(z: np.ndarray, *, x_title: str, y_title: str, value_text: str, colors: dict,
                  showscale: bool = True) -> go.Heatmap:
    """A heatmap of a position-by-position matrix (cell ``(i, j)`` at ``y = i, x = j``)."""
    coords = np.arange(z.shape[0], dtype=np.int32)
    return go.Heatmap(
        z=as_float32(z), x=np.arange(z.shape[1], dtype=np.int32), y=coords, **colors,
        showscale=showscale,
        hovertemplate=(f"{y_title} %{{y}} vs {x_title} %{{x}}<br>{value_text} %{{z:.3f}}"
                       "<extra></extra>"),
    )


def heatmap_layout(fig: go.Figure, *, x_title: str, y_title: str,
                   row: int | None = None, col: int | None = None) -> None:
    """Square cells, row 0 at the top-left, axis titles."""
    where = {} if row is None else dict(row=row, col=col)
    x_axis = "x" if row is None else fig.get_subplot(row, col).xaxis.plotly_name.replace("axis", "")
    fig.update_xaxes(title_text=x_title, constrain="domain", **where)
    fig.update_yaxes(title_text=y_title, autorange="reversed", constrain="domain",
                     scaleanchor=x_axis, **where)


def similarity_colors(kind: str, z: np.ndarray, limit: float | None = None) -> dict:
    """Red for alike, blue for opposite, white for unrelated; cosine on a fixed -1..1 scale."""
    if kind in ("cosine", "centred"):
        return dict(colorscale="RdBu_r", zmin=-1.0, zmax=1.0,
                    colorbar=dict(title=dict(text="cosine")))
    if limit is None:
        limit = float(np.abs(z).max()) or 1.0
    return dict(colorscale="RdBu_r", zmin=-limit, zmax=limit, colorbar=dict(title=dict(text="dot")))


# Title wrapping. Plotly never wraps a title: one longer than its figure is cut at both
# edges. The app's pages are laid out in a wide page whose content is about PAGE_WIDTH px
# (Streamlit's layout="wide" in a 1400-px window), in one, two or four columns.
PAGE_WIDTH = 1100  # px of a page's content
DRAWN_WIDTH = 700  # px: a figure outside the app (plotly's default, Jupyter, report.html)
TITLE_FONT = 17  # px: plotly's default title size
_CHAR_WIDTH = 0.58  # an average character of the title font, in font sizes (wide side)
_TITLE_LINE = 24  # px a title line needs in the top margin
_ENTITY = re.compile(r"&(?:#\d+|#x[0-9a-fA-F]+|[A-Za-z]+);")
_TAG = re.compile(r"<[^>]*>")


def column_width(columns: int = 1, page: int = PAGE_WIDTH) -> int:
    """The width in px of one of ``columns`` equal columns of a page."""
    return max(200, page // max(1, columns) - 16 * (columns > 1))


def plain(text: str) -> str:
    """Plotly's text (HTML: tags, entities) as the characters it shows."""
    return html.unescape(_TAG.sub("", str(text)))


def _shown_length(word: str) -> int:
    """How many characters a word of a title shows: an entity (``&lt;``) is one, a tag none."""
    return len(_ENTITY.sub("x", _TAG.sub("", word)))


def wrap_title(text: str, width: int, font: int = TITLE_FONT) -> str:
    """``text`` with ``<br>`` between words wherever a line would pass ``width`` px.

    The text is plotly title text, already HTML-escaped: it breaks only at spaces, so
    an entity (``&amp;``) or a tag stays whole, and counts an entity as one character.
    A ``<br>`` already in it (one this function put there) is undone first, so wrapping
    again for another width gives the same result as wrapping once.

    >>> wrap_title("Attention by position alone in n1 (position=&quot;rope&quot;)", 300)
    'Attention by position alone<br>in n1 (position=&quot;rope&quot;)'
    """
    per_line = max(12, int(0.9 * width / (font * _CHAR_WIDTH)))
    lines, line, used = [], [], 0
    for word in text.replace("<br>", " ").split():
        size = _shown_length(word)
        if line and used + 1 + size > per_line:
            lines.append(" ".join(line))
            line, used = [], 0
        used += size + (1 if line else 0)
        line.append(word)
    return "<br>".join(lines + [" ".join(line)] if line else lines)


def fit_title(fig: go.Figure, width: int = DRAWN_WIDTH) -> go.Figure:
    """Wrap ``fig``'s title for a figure ``width`` px wide and give the lines room in the
    top margin (in place; idempotent). Returns ``fig``.

    Subplot titles of the top row stand in the top margin too, under the title: the
    margin then holds both, and the title is pinned to the top so that they never meet."""
    title = fig.layout.title.text
    if not title:
        return fig
    wrapped = wrap_title(title, width, fig.layout.title.font.size or TITLE_FONT)
    lines = wrapped.count("<br>") + 1
    if wrapped != title:
        fig.update_layout(title_text=wrapped)
    room = _top_titles_room(fig)
    if room:
        fig.update_layout(title=dict(yref="container", y=1.0, yanchor="top", pad_t=14))
    if lines > 2 or fig.layout.margin.t is not None or room:
        fig.update_layout(margin_t=40 + _TITLE_LINE * lines + room)
    return fig


_SUBTITLE_LINE = 16  # px a line of a subplot title takes (plotly's annotations: 11-14 px)


def _top_titles_room(fig: go.Figure) -> int:
    """The px that the subplot titles of the top row take above the plots (0 for none)."""
    lines = [str(note.text).count("<br>") + 1 for note in fig.layout.annotations or ()
             if note.text and note.yref == "paper" and (note.y or 0) >= 0.999
             and note.yanchor == "bottom"]
    return _SUBTITLE_LINE * max(lines) + 8 if lines else 0


def with_used_template(spec: dict) -> dict:
    """``spec`` (a figure's dict) with its template's trace defaults only for the kinds of
    trace it has: the template of the charts' theme carries defaults for ten kinds (tables,
    candlesticks, ...), a third of a small figure's bytes, sent again at each poll of a run
    followed live. What the figure draws is the same: a default for a kind of trace it
    lacks is never read."""
    template = (spec.get("layout") or {}).get("template")
    if not isinstance(template, dict) or not isinstance(template.get("data"), dict):
        return spec
    traces = [*(spec.get("data") or ()),
              *(trace for frame in spec.get("frames") or () for trace in frame.get("data") or ())]
    kinds = {trace.get("type", "scatter") for trace in traces}
    used = {kind: value for kind, value in template["data"].items() if kind in kinds}
    return {**spec, "layout": {**spec["layout"], "template": {**template, "data": used}}}


class SharedFigure(go.Figure):
    """A figure that many pages show as it is (a classroom's sessions, every poll): its
    `to_dict` is made once and handed out again, not deep-copied on every call, which is
    what `st.plotly_chart` asks each figure for on each script run. Its still pictures
    (`figure_svg`) are kept with the dict.

    Any change to the figure through plotly (``update_layout``, ``add_trace``, a property
    set) forgets the dict, so the next call makes it afresh; a figure with frames (an
    animation, whose frames plotly does not watch) is never kept. The dict handed out is
    shared: read it, never change it. Where plotly's change hooks are not used
    (`plotly_private`), nothing is kept: the dict is made on every call.
    """

    def __init__(self, *args, validate: bool = True, **kwargs):
        """As ``go.Figure(...)``; ``validate=False`` skips plotly's check of every property
        (for a dict a figure of ours made) where plotly allows it."""
        self._shared_dict = None
        # (width, font) -> its still picture (`figure_svg`); none where changes are not seen
        self._shared_pictures: dict | None = {} if plotly_private.WATCHES_CHANGES else None
        super().__init__(*args, **plotly_private.check_args(validate), **kwargs)

    def to_dict(self) -> dict:
        if not plotly_private.WATCHES_CHANGES or plotly_private.has_frames(self):
            return with_used_template(super().to_dict())
        if self._shared_dict is None:
            self._shared_dict = with_used_template(super().to_dict())
        return self._shared_dict

    def _changed(self, *_, **__) -> None:
        self._shared_dict = None
        self._shared_pictures = {}


plotly_private.watch_changes(SharedFigure, SharedFigure._changed)


def shared(fig: go.Figure | dict, *, validate: bool = True) -> SharedFigure:
    """``fig`` (a figure or its dict) as a `SharedFigure`. ``validate=False`` skips plotly's
    check of every property, a tenth of the time, for a dict that a figure of ours made
    (``to_dict`` or plotly JSON we wrote ourselves)."""
    if isinstance(fig, go.Figure):  # its subplot grid too (``row=, col=`` go on working)
        fig = plotly_private.with_grid(fig)
    return SharedFigure(fig, validate=validate)
