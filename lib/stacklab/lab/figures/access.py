"""Figures that everyone can read: line colours that stay apart for the common colour-vision
deficiencies, a text alternative that carries a figure's numbers (for a screen reader, and
for anyone who cannot see the chart), and a copy of a figure laid out for a phone's column.

The colour scales of the heatmaps stay as they are: "Blues" and "Viridis" are sequential
scales whose lightness rises steadily (readable in grey and under every common deficiency),
and "RdBu_r" is ColorBrewer's red-blue diverging scale, which is safe for both red-green
deficiencies; `tests/test_access.py` checks all of them under simulated deuteranopia and
protanopia.
"""

from __future__ import annotations

import copy
import math

import plotly.graph_objects as go

from .style import SharedFigure, plain, wrap_title

# Okabe and Ito's eight colours ("Color Universal Design", 2002), in the order the figures
# use them: distinguishable under deuteranopia, protanopia and tritanopia, and in print.
OKABE_ITO = ("#0072B2", "#D55E00", "#009E73", "#E69F00", "#CC79A7", "#56B4E9", "#000000",
             "#F0E442")
LINE_COLOURS = OKABE_ITO[:7]  # yellow last and left out: too light on white for a thin line

PHONE_WIDTH = 340  # px: a figure's width in a phone's column (390 px less the page's margins)
PHONE_FONT = 12  # px: the least size of a figure's numbers on a phone
_LEGEND_CHARS = 36  # a legend entry longer than this is wrapped on a phone
_MAX_LINES = 4  # lines a text alternative names one by one (then: "and N more")


def _numbers(values) -> list[float]:
    found = []
    for value in values if values is not None else ():
        try:
            number = float(value)
        except (TypeError, ValueError):
            continue
        if math.isfinite(number):
            found.append(number)
    return found


def _trace_words(trace) -> str | None:
    """What one trace shows, with its numbers: a heatmap's size and range, a line's last
    value (the end of a curve is what a reader of it looks for first)."""
    name = plain(trace.name) if trace.name else ""
    if trace.type == "heatmap":
        rows = [_numbers(row) for row in trace.z if row is not None] if trace.z is not None else []
        values = [value for row in rows for value in row]
        if not values:
            return None
        return (f"a {len(rows)} by {max(map(len, rows))} heatmap, values from "
                f"{min(values):.2f} to {max(values):.2f}")
    if trace.type in ("scatter", "bar"):
        ys = _numbers(trace.y)
        if not ys:
            return None
        if trace.type == "bar":
            return (f"{name + ': ' if name else ''}{len(ys)} bars from {min(ys):.3g} "
                    f"to {max(ys):.3g}")
        return f"{name or 'a line'} ending at {ys[-1]:.3g}"
    return None


def describe(figure: go.Figure, score: str | None = None) -> str:
    """A text alternative of ``figure`` that carries its numbers: its title, the score the
    page gives it (``score``), and what each trace shows (a heatmap's size and range of
    values, each line's last value). The page names the chart with it (Streamlit gives the
    chart the role "figure", so the text does not say "figure" again).

    >>> fig = go.Figure(go.Heatmap(z=[[0.1, 0.9], [0.93, 0.2]]), layout=dict(title="Attention"))
    >>> describe(fig, "anti-diagonal score 0.93")
    'Attention; anti-diagonal score 0.93. Shows a 2 by 2 heatmap, values from 0.10 to 0.93.'
    """
    title = plain(str(figure.layout.title.text or "").replace("<br>", " ")).strip()
    words = [(title or "A chart") + (f"; {plain(score).strip()}" if score else "")]
    parts = [part for part in map(_trace_words, figure.data) if part]
    if parts:
        shown = parts[:_MAX_LINES]
        more = f", and {len(parts) - len(shown)} more" if len(parts) > len(shown) else ""
        words.append("Shows " + "; ".join(shown) + more)
    return ". ".join(words) + "."


def phone_figure(figure: go.Figure) -> go.Figure:
    """A copy of ``figure`` for a phone's column (`PHONE_WIDTH`): its title wrapped to fit,
    the legend a row below the plot, thin colour bars with their title beside them, and no
    text under `PHONE_FONT` px. A `SharedFigure`'s copy is kept with it (many phones show
    one figure), and made again once the figure changes."""
    cache = getattr(figure, "_shared_pictures", None)
    if cache is not None and "phone" in cache:
        return cache["phone"]
    # a deep copy: a SharedFigure's dict is the one every page shows, never to be changed;
    # the copy is a SharedFigure too, its dict and still pictures kept with it
    fig = SharedFigure(copy.deepcopy(figure.to_dict()), validate=False)
    title = fig.layout.title.text
    top = 40
    if title:
        wrapped = wrap_title(title, PHONE_WIDTH)
        top = 36 + 22 * (wrapped.count("<br>") + 1)
        fig.update_layout(title=dict(text=wrapped, x=0.02, xanchor="left"), margin=dict(t=top))
    square = (len(list(fig.select_xaxes())) == 1 == len(list(fig.select_yaxes()))
              and fig.layout.yaxis.scaleanchor == "x")
    if square:  # a square map is as wide as the column allows: no empty band above and below
        fig.update_layout(height=top + PHONE_WIDTH - 40)
    fig.update_layout(legend=dict(orientation="h", font=dict(size=PHONE_FONT)))
    if fig.layout.legend.y is None:
        fig.update_layout(legend=dict(x=0.0, y=-0.2, yanchor="top"))
    fig.update_annotations(selector=lambda note: (note.font.size or PHONE_FONT) < PHONE_FONT,
                           font=dict(size=PHONE_FONT))
    for trace in fig.data:
        if trace.name and len(plain(trace.name)) > _LEGEND_CHARS:  # an entry wider than the phone
            trace.name = wrap_title(trace.name, PHONE_WIDTH - 60, PHONE_FONT)
        if "colorbar" in trace and trace.showscale is not False:
            trace.update(colorbar=dict(thickness=10, xpad=4, title=dict(side="right"),
                                       tickfont=dict(size=PHONE_FONT)))
    if cache is not None:
        cache["phone"] = fig
    return fig
