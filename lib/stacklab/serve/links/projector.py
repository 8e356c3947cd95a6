"""What present mode shows of a run, and how a projector shows it: for a task whose pattern
is a head score (``induction``), the best head's own attention pattern first, the grid of
head scores one step away (`best_head_figure`); any figure made readable from the back of a
room (`present_figure`: large text, a short title, a square map).

>>> import stacklab
>>> run = stacklab.train(task="induction", steps=4, eval_every=2)
>>> figure, words = best_head_figure(run)
>>> figure.data[0].zmin, figure.data[0].zmax, words.startswith("largest induction score")
(0.0, 1.0, True)
"""

from __future__ import annotations

import html

import plotly.graph_objects as go

from ...core.errors import StackError
from ...lab.figures.heatmaps import ATTENTION_COLORS
from ...lab.figures.style import HEIGHT, as_float32, heatmap_layout, heatmap_trace
from ...lab.measure import head_scores as head_analysis
from ...lab.measure.head_scores import head_score_label


def best_head(scores: dict, name: str) -> tuple[float, str, int, int] | None:
    """``(value, node, layer, head)`` of the head with the largest ``name`` score, or None."""
    found = [(head[name]["value"], node, entry["layer"], h)
             for node, entry in scores.items() for h, head in enumerate(entry["heads"])
             if name in head and head[name]["value"] is not None]
    return max(found) if found else None


def best_head_figure(run, name: str | None = None) -> tuple[go.Figure, str] | None:
    """The attention of the head with the largest ``name`` score (default: the task's pattern
    score) on the first held-out sequence, on the fixed 0-1 scale, and the score in words;
    None for a stack without that head score (or a stored run that no longer reads). A
    stored run (`StoredRun`) is loaded for it."""
    if not hasattr(run, "head_scores"):
        try:
            run = run.load()
        except StackError:
            return None
    name = name or run.task.pattern_score
    best = best_head(run.head_scores(), name)
    if best is None:
        return None
    value, node, layer, head = best
    tokens, weights = head_analysis.one_sequence_attention(run)  # [T], {node: [H, T, T]}
    z = as_float32(weights[node][head])
    fig = go.Figure(heatmap_trace(z, x_title="key", y_title="query",
                                  value_text="attention weight", colors=ATTENTION_COLORS))
    words = " ".join(map(str, tokens[:16].tolist()))
    fig.update_layout(title=dict(text=html.escape(
        f"The best {head_score_label(name)} head (layer {layer}, head {head}) on: {words}",
        quote=False)), height=HEIGHT)
    heatmap_layout(fig, x_title="key position (attended to)", y_title="query position (attending)")
    return fig, f"largest {head_score_label(name)} score {value:.2f} (layer {layer}, head {head})"


# --- the projector's sizing ------------------------------------------------------------

PRESENT_FONT_PX = 20  # tick labels, axis titles and the colour bar: readable across a room
PRESENT_TITLE_PX = 26
PRESENT_SIDE_PX = 660  # the map's side: at 1920x1080 the figure fits under the page title
_PRESENT_MARGIN = dict(l=120, r=170, b=100)  # room for the tick labels and the colour bar
PRESENT_LEGEND_PX = 170  # a projector's foot: ticks, the axis title, two rows of legend
_TITLE_LINE_PX = 36
_TITLE_CHARS = 48  # a line of the title at PRESENT_TITLE_PX over the map's width


def _wrapped(title: str, width: int = _TITLE_CHARS) -> list[str]:
    """The title's words in lines of at most `_TITLE_CHARS` (broken at spaces only, so
    the HTML-escaped text plotly shows keeps its entities whole)."""
    lines: list[str] = []
    for word in title.split(" "):
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines or [""]


def present_figure(figure: go.Figure, columns: int = 1) -> go.Figure:
    """A copy of ``figure`` for a projector: every text `PRESENT_FONT_PX` or more, its title
    on at most two lines, and a single square map sized so that its colour bar sits right
    beside it; with ``columns`` > 1 (runs side by side) it fills its column instead."""
    fig = go.Figure(figure)
    text = dict(font=dict(size=PRESENT_FONT_PX))
    fig.update_layout(font=dict(size=PRESENT_FONT_PX), legend=text)
    fig.update_xaxes(tickfont=dict(size=PRESENT_FONT_PX), title=text)
    fig.update_yaxes(tickfont=dict(size=PRESENT_FONT_PX), title=text)
    fig.update_annotations(font=dict(size=PRESENT_FONT_PX))
    for trace in fig.data:
        if "colorbar" in trace:
            trace.update(colorbar=dict(tickfont=dict(size=PRESENT_FONT_PX), title=text,
                                       thickness=26, xpad=14))
    lines = _wrapped(fig.layout.title.text or "",
                     _TITLE_CHARS if columns <= 1 else _TITLE_CHARS // columns + 12)
    if len(lines) > 2:  # at most two lines: a projector's title is read, not studied
        lines = [lines[0], lines[1][:-1] + "…" if len(lines[1]) > 2 else lines[1] + "…"]
    top = 40 + _TITLE_LINE_PX * len(lines)
    fig.update_layout(title=dict(text="<br>".join(lines), font=dict(size=PRESENT_TITLE_PX),
                                 x=0.0, xanchor="left", xref="paper", y=1.0, yanchor="top",
                                 yref="container", pad=dict(t=20)))
    square = (len(list(fig.select_xaxes())) == 1 == len(list(fig.select_yaxes()))
              and fig.layout.yaxis.scaleanchor == "x")
    if square and columns == 1:  # the plot area exactly square: no gap before the colour bar
        margin = {**_PRESENT_MARGIN, "t": top}
        fig.update_layout(autosize=False, margin=margin,
                          width=margin["l"] + PRESENT_SIDE_PX + margin["r"],
                          height=top + PRESENT_SIDE_PX + margin["b"])
    elif columns > 1:
        fig.update_layout(autosize=True, width=None, margin=dict(t=top, l=110, r=40, b=90),
                          height=top + PRESENT_SIDE_PX - 60 + 90)
    else:
        fig.update_layout(height=int((fig.layout.height or 520) * 1.4), margin=dict(t=top))
    for axis in fig.select_yaxes():  # a long title beside a short panel: on two lines
        said = axis.title.text or ""
        if len(said) > 16 and " " in said and "<br>" not in said:
            cut = min((i for i, c in enumerate(said) if c == " "), key=lambda i: abs(i - len(said) / 2))
            axis.title.text = said[:cut] + "<br>" + said[cut + 1:]
    if fig.layout.legend.orientation == "h":  # a legend below: under the axis title, which
        # grew with the text, pinned to the figure's foot rather than the plot's
        fig.update_layout(legend=dict(yref="container", y=0.0, yanchor="bottom", x=0.0,
                                      xanchor="left"), margin=dict(b=PRESENT_LEGEND_PX))
    return fig
