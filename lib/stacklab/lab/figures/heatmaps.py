"""Heatmaps of positions against positions: row similarity (also during training, and
beside the sinusoidal table) and attention weights."""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .. import analysis
from .style import (ANIMATION_CELLS, HEIGHT, KIND_TEXT, MAX_CELLS, MAX_FRAMES, as_table,
                    bin_size, binned_note, block_mean, check_kind, has_untrained,
                    heatmap_layout, heatmap_trace, mark_trained_len, as_float32,
                    similarity_colors)


def similarity_heatmap(table, kind: str = "cosine", trained_len: int | None = None,
                       title: str | None = None) -> go.Figure:
    """Row-versus-row similarity of a ``[N, D]`` table, with the trained length T marked.

    Cell ``(i, j)`` is the ``cosine`` (or ``dot``) similarity of rows i and j. Tables with
    more than `MAX_CELLS` rows are block-averaged so that each cell covers a few rows.

    >>> import torch
    >>> fig = similarity_heatmap(torch.eye(4))
    >>> fig.data[0].z.diagonal().tolist()
    [1.0, 1.0, 1.0, 1.0]
    """
    check_kind(kind)
    table = as_table(table)
    n = table.shape[0]
    size = bin_size(n)
    z = block_mean(analysis.similarity(table, kind).numpy(), size)  # (N/size, N/size)
    fig = go.Figure(heatmap_trace(z, size, n, x_title="row", y_title="row",
                                   value_text=KIND_TEXT[kind], colors=similarity_colors(kind, z)))
    if title is None:
        title = f"{KIND_TEXT[kind].capitalize()} of every pair of position rows"
    fig.update_layout(title=dict(text=title + binned_note(size)), height=HEIGHT)
    heatmap_layout(fig, n, size, x_title="row j", y_title="row i")
    if has_untrained(trained_len, n):
        mark_trained_len(fig, trained_len, size, horizontal=True)
    return fig


def _probability_heatmap(matrix, title: str, value_text: str) -> go.Figure:
    """A [T, T] map of attention weights (rows sum to 1), query positions down the side."""
    weights = as_float32(matrix)  # (T, T)
    n = weights.shape[0]
    size = bin_size(n)
    z = block_mean(weights, size)
    colors = dict(colorscale="Blues", zmin=0.0, zmax=float(z.max()) or 1.0,
                  colorbar=dict(title=dict(text="weight")))
    fig = go.Figure(heatmap_trace(z, size, n, x_title="key position", y_title="query position",
                                   value_text=value_text, colors=colors))
    fig.update_layout(title=dict(text=title + binned_note(size)), height=HEIGHT)
    heatmap_layout(fig, n, size, x_title="key position (attended to)",
                    y_title="query position (attending)")
    return fig


def query_key_heatmap(run, node: str) -> go.Figure | None:
    """Where each position would attend by its position alone (``None`` without attention).

    `analysis.positional_attention`: the softmax of the query-key scores of ``node``'s
    first T rows, through the first attention after it. For ``reverse`` a bright
    anti-diagonal; for ``shift`` the diagonal just below the main one.
    """
    weights = analysis.positional_attention(run, node)
    return None if weights is None else positional_attention_heatmap(weights, node)


def positional_attention_heatmap(weights, node: str) -> go.Figure:
    """The heatmap of `query_key_heatmap` from already computed ``[T, T]`` weights."""
    return _probability_heatmap(
        weights, f"Attention by position alone: {node}'s rows through the attention's query "
                 f"and key, first T = {weights.shape[0]} positions", "attention weight")


def attention_heatmap(run) -> go.Figure | None:
    """The attention weights measured on held-out sequences, averaged (``None`` without attention)."""
    weights = analysis.attention_map(run)
    if weights is None:
        return None
    return _probability_heatmap(weights, "Attention on held-out sequences (average over "
                                         "sequences and heads)", "mean attention weight")


def _pick_frames(count: int, limit: int = MAX_FRAMES) -> list[int]:
    """At most ``limit`` evenly spaced indices of ``count``, first and last included."""
    if count <= limit:
        return list(range(count))
    return sorted({round(i) for i in np.linspace(0, count - 1, limit)})


def snapshot_heatmaps(run, node: str, kind: str = "cosine") -> go.Figure:
    """The similarity heatmap at each training snapshot, with a step slider and play/pause.

    At most `MAX_FRAMES` snapshots are shown (evenly spaced, first and last kept), each
    block-averaged so that all frames together stay small. Colours keep one scale across
    frames, so brightening means the rows really became more alike.
    """
    check_kind(kind)
    snapshots = run.snapshots[node]
    chosen = [snapshots[i] for i in _pick_frames(len(snapshots))]
    n = chosen[0][1].shape[0]
    side = max(1, min(MAX_CELLS, int(math.sqrt(ANIMATION_CELLS / len(chosen)))))
    size = bin_size(n, side)
    frames_z = [block_mean(analysis.similarity(table, kind).numpy(), size) for _, table in chosen]
    limit = max(float(np.abs(z).max()) for z in frames_z) or 1.0
    colors = similarity_colors(kind, frames_z[-1], limit)
    value_text = KIND_TEXT[kind]
    fig = go.Figure(heatmap_trace(frames_z[0], size, n, x_title="row", y_title="row",
                                   value_text=value_text, colors=colors))
    fig.frames = [go.Frame(data=[go.Heatmap(z=z)], name=str(step))
                  for (step, _), z in zip(chosen, frames_z)]
    animate = dict(mode="immediate", frame=dict(duration=0, redraw=True), transition=dict(duration=0))
    slider = dict(
        active=0, x=0.22, len=0.78, y=0, yanchor="top", pad=dict(t=60),
        currentvalue=dict(prefix="training step ", font=dict(size=13), xanchor="right"),
        steps=[dict(label=str(step), method="animate", args=[[str(step)], animate])
               for step, _ in chosen],
    )
    play = dict(type="buttons", direction="left", x=0.0, y=0, xanchor="left", yanchor="top",
                pad=dict(t=70, r=10), showactive=False, buttons=[
                    dict(label="▶ Play", method="animate",
                         args=[None, dict(frame=dict(duration=250, redraw=True),
                                          transition=dict(duration=0), fromcurrent=True)]),
                    dict(label="❚❚ Pause", method="animate", args=[[None], animate]),
                ])
    fig.update_layout(
        title=dict(text=f"{value_text.capitalize()} of {node}'s rows during training"
                        f"{binned_note(size)}"),
        sliders=[slider], updatemenus=[play], height=HEIGHT + 120, margin=dict(b=150),
    )
    heatmap_layout(fig, n, size, x_title="row j", y_title="row i")
    if has_untrained(run.config.seq_len, n):
        mark_trained_len(fig, run.config.seq_len, size, horizontal=True)
    return fig


def learned_vs_sinusoidal(table, trained_len: int) -> go.Figure:
    """The learned table's cosine heatmap beside the fixed sinusoidal table's, first T rows each."""
    table = as_table(table)
    if not 1 <= trained_len <= table.shape[0]:
        raise ValueError(f"trained_len must be 1..{table.shape[0]}, not {trained_len}")
    learned = table[:trained_len]  # (T, D)
    sinusoidal = analysis.sinusoidal_table(trained_len, table.shape[1])  # (T, D)
    size = bin_size(trained_len)
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12, subplot_titles=(
        f"learned (pos_embed), rows 0-{trained_len - 1}",
        f"sinusoidal (sin_pos), D = {table.shape[1]}"))
    for col, rows in ((1, learned), (2, sinusoidal)):
        z = block_mean(analysis.similarity(rows).numpy(), size)
        fig.add_trace(heatmap_trace(z, size, trained_len, x_title="row", y_title="row",
                                     value_text="cosine similarity",
                                     colors=similarity_colors("cosine", z), showscale=col == 2),
                      row=1, col=col)
        heatmap_layout(fig, trained_len, size, x_title="row j", y_title="row i", row=1, col=col)
    fig.update_layout(title=dict(text="Learned vs sinusoidal positions: cosine similarity of "
                                      f"the rows{binned_note(size)}"), height=HEIGHT)
    return fig
