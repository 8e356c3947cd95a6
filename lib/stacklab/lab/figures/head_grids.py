"""Figures of every head of every attention: each head's attention on one
held-out sequence, a grid of layers by heads (`heads_attention_grid`), and each head score
as a layer × head heatmap, trained beside init (`head_scores_heatmaps`).

Both take plain data (`stacklab.lab.measure.head_scores`), so they draw for a one-layer stack as for
many; the grid keeps its JSON small by giving all its heatmaps together at most
`ANIMATION_CELLS` cells (each zoomed on its first positions, never averaged).
"""

from __future__ import annotations

import html
import math

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from ..measure.head_scores import HEAD_SCORES, head_score_label
from .style import ANIMATION_CELLS, HEIGHT, MAX_CELLS, as_float32, heatmap_layout, heatmap_trace


HEADS_PER_ROW = 4  # a layer of more heads goes on in the next row: each title keeps its room
TITLE_FONT = 11  # px of a head's title
_LINE = 15  # px a line of a subplot title takes
_TICKS = 64  # px under a map for its tick labels and axis title, with room to spare


def _head_title(node: str, layer: int, head: int, scores: dict) -> str:
    """A head's title, one short line each: which head, then each score it has."""
    found = [f"{head_score_label(name)} {value['value']:.2f}"
             for name, value in scores.items() if value["value"] is not None]
    return "<br>".join(html.escape(line, quote=False)
                       for line in [f"{node} (layer {layer}) head {head}", *found])


def _spaced(rows: int, row_px: int, gap_px: int, extra_px: int) -> tuple[float, int]:
    """The vertical spacing (a fraction of the plotting area) that leaves ``gap_px`` between
    ``rows`` rows of ``row_px``, and the figure's height with ``extra_px`` of margins."""
    area = rows * row_px + (rows - 1) * gap_px
    return (gap_px / area if rows > 1 else 0.0), area + extra_px


def heads_attention_grid(tokens: torch.Tensor, weights: dict[str, torch.Tensor],
                         scores: dict[str, dict], note: str = "") -> go.Figure:
    """Every head's attention weights (``weights``: ``{node: [H, T, T]}``) on the held-out
    sequence ``tokens`` (``[T]``): each attention node's heads in rows of at most
    `HEADS_PER_ROW`, each head's scores (`stacklab.lab.measure.head_scores.head_scores`)
    in its title, a line each, with room above every row for its titles."""
    nodes = list(weights)
    columns = min(HEADS_PER_ROW, max(w.shape[0] for w in weights.values()))
    places, rows = [], 0  # (node, head, row, col), rows used so far
    for node in nodes:
        heads = weights[node].shape[0]
        places += [(node, h, rows + h // columns + 1, h % columns + 1) for h in range(heads)]
        rows += math.ceil(heads / columns)
    T = int(tokens.shape[0])
    shown = min(T, MAX_CELLS, max(2, int(math.sqrt(ANIMATION_CELLS / len(places)))))
    titles = {(row, col): _head_title(node, scores[node]["layer"], h, scores[node]["heads"][h])
              for node, h, row, col in places}
    lines = max(title.count("<br>") + 1 for title in titles.values())
    spacing, height = _spaced(rows, 260, _TICKS + _LINE * lines, 180 + _LINE * lines)
    fig = make_subplots(rows=rows, cols=columns, horizontal_spacing=0.06,
                        vertical_spacing=spacing,
                        subplot_titles=[titles.get((row, col), "") for row in range(1, rows + 1)
                                        for col in range(1, columns + 1)])
    colors = dict(colorscale="Blues", zmin=0.0, zmax=1.0, colorbar=dict(title=dict(text="weight")))
    for node, head, row, col in places:
        z = as_float32(weights[node][head][:shown, :shown])
        fig.add_trace(heatmap_trace(z, x_title="key", y_title="query",
                                    value_text="attention weight", colors=colors,
                                    showscale=(row, col) == (1, 1)), row=row, col=col)
        heatmap_layout(fig, x_title="key", y_title="query" if col == 1 else "", row=row, col=col)
    words = " ".join(map(str, tokens[:32].tolist())) + (" ..." if T > 32 else "")
    zoomed = f" (zoomed on positions 0-{shown - 1} of {T})" if shown < T else ""
    fig.update_layout(title=dict(text=f"Attention of every head on one held-out sequence: "
                                      f"{words}{note}{zoomed}"),
                      height=height, margin=dict(b=80))
    fig.update_annotations(font_size=TITLE_FONT)
    return fig


def head_scores_heatmaps(scores: dict[str, dict]) -> go.Figure:
    """Each head score (`stacklab.lab.measure.head_scores.head_scores`) as a layer × head heatmap, the
    trained model beside the model at init; every cell a number from 0 to 1."""
    nodes = list(scores)
    names = scores_present(scores)
    columns = max(len(entry["heads"]) for entry in scores.values())
    # each row of maps: its title above, its head numbers and (last row) "head" below
    spacing, height = _spaced(len(names), 40 + 45 * len(nodes), _TICKS + 2 * _LINE, 180)
    fig = make_subplots(rows=len(names), cols=2, horizontal_spacing=0.05,
                        vertical_spacing=spacing,
                        subplot_titles=[f"{head_score_label(name)}, {when}" for name in names
                                        for when in ("trained", "at init")])
    rows = [html.escape(f"layer {scores[node]['layer']} ({node})", quote=False) for node in nodes]
    for row, name in enumerate(names, start=1):
        for col, key in enumerate(("value", "init"), start=1):
            z = _grid(scores, nodes, columns, name, key)
            fig.add_trace(go.Heatmap(
                z=z, x=np.arange(columns, dtype=np.int32), y=rows, zmin=0.0, zmax=1.0,
                colorscale="Viridis", showscale=row == 1 and col == 1,
                colorbar=dict(title=dict(text="score")), texttemplate="%{z:.2f}",
                hovertemplate="%{y}, head %{x}<br>score %{z:.3f}<extra></extra>"),
                row=row, col=col)
            # the layer names once, on the left; "head" once, under the last row
            fig.update_xaxes(title_text="head" if row == len(names) else None, dtick=1,
                             row=row, col=col)
            fig.update_yaxes(autorange="reversed", showticklabels=col == 1, row=row, col=col)
    fig.update_layout(title=dict(text="Head scores per layer and head: trained (left) and at "
                                      "init (right)"),
                      height=height, margin=dict(b=80))
    return fig


def _grid(scores: dict, nodes: list[str], columns: int, name: str, key: str):
    """``[layers, columns]`` of one score: float32 when every layer has every head and the
    score, else lists with None in the gaps (a null, never a nan)."""
    grid = [[(heads[h].get(name) or {}).get(key) if h < len(heads) else None
             for h in range(columns)] for heads in (scores[node]["heads"] for node in nodes)]
    if all(value is not None for line in grid for value in line):
        return as_float32(grid)
    return grid


def scores_present(scores: dict[str, dict]) -> list[str]:
    """The head scores some head of ``scores`` has: `HEAD_SCORES` order, then any a newer
    version stored."""
    found = dict.fromkeys(name for entry in scores.values() for head in entry["heads"]
                          for name in head)
    return [*(name for name in HEAD_SCORES if name in found),
            *(name for name in found if name not in HEAD_SCORES)]
