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


def _head_title(node: str, layer: int, head: int, scores: dict) -> str:
    found = ", ".join(f"{head_score_label(name)} {value['value']:.2f}"
                      for name, value in scores.items() if value["value"] is not None)
    return html.escape(f"{node} (layer {layer}) head {head}" + (f": {found}" if found else ""),
                       quote=False)


def heads_attention_grid(tokens: torch.Tensor, weights: dict[str, torch.Tensor],
                         scores: dict[str, dict], note: str = "") -> go.Figure:
    """Every head's attention weights (``weights``: ``{node: [H, T, T]}``) on the held-out
    sequence ``tokens`` (``[T]``), one row of subplots per attention node, with each head's
    scores (`stacklab.lab.measure.head_scores.head_scores`) in its title."""
    nodes = list(weights)
    columns = max(w.shape[0] for w in weights.values())
    T = int(tokens.shape[0])
    total = sum(w.shape[0] for w in weights.values())
    shown = min(T, MAX_CELLS, max(2, int(math.sqrt(ANIMATION_CELLS / total))))
    titles = [_head_title(node, scores[node]["layer"], h, scores[node]["heads"][h])
              if h < weights[node].shape[0] else "" for node in nodes for h in range(columns)]
    fig = make_subplots(rows=len(nodes), cols=columns, subplot_titles=titles,
                        horizontal_spacing=0.04, vertical_spacing=0.12 / max(len(nodes), 1))
    colors = dict(colorscale="Blues", zmin=0.0, zmax=1.0, colorbar=dict(title=dict(text="weight")))
    for row, node in enumerate(nodes, start=1):
        for head in range(weights[node].shape[0]):
            z = as_float32(weights[node][head][:shown, :shown])
            fig.add_trace(heatmap_trace(z, x_title="key", y_title="query",
                                        value_text="attention weight", colors=colors,
                                        showscale=row == 1 and head == 0), row=row, col=head + 1)
            heatmap_layout(fig, x_title="key" if row == len(nodes) else "",
                           y_title="query" if head == 0 else "", row=row, col=head + 1)
    words = " ".join(map(str, tokens[:32].tolist())) + (" ..." if T > 32 else "")
    zoomed = f" (zoomed on positions 0-{shown - 1} of {T})" if shown < T else ""
    fig.update_layout(title=dict(text=f"Attention of every head on one held-out sequence: "
                                      f"{words}{note}{zoomed}"),
                      height=max(HEIGHT, 300 * len(nodes) + 120))
    fig.update_annotations(font_size=11)
    return fig


def head_scores_heatmaps(scores: dict[str, dict]) -> go.Figure:
    """Each head score (`stacklab.lab.measure.head_scores.head_scores`) as a layer × head heatmap, the
    trained model beside the model at init; every cell a number from 0 to 1."""
    nodes = list(scores)
    names = scores_present(scores)
    columns = max(len(entry["heads"]) for entry in scores.values())
    fig = make_subplots(rows=len(names), cols=2, horizontal_spacing=0.05,
                        vertical_spacing=0.3 / max(len(names), 1),
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
                      height=max(HEIGHT // 2, (110 + 45 * len(nodes)) * len(names) + 100))
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
