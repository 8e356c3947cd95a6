"""Heatmaps of positions against positions: row similarity (also during training, and
beside the sinusoidal table), attention weights (also during training), and what each row
alone says through the rest of the stack.

A table longer than `MAX_CELLS` rows is shown zoomed on its first rows (the title says
so), never averaged: each cell is one real pair of rows.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from .. import measure as analysis
from ..measure import score_maths
from .style import (ANIMATION_CELLS, HEIGHT, KIND_TEXT, MAX_CELLS, MAX_FRAMES, as_float32,
                    as_table, check_kind, has_untrained, heatmap_layout, heatmap_trace,
                    mark_trained_len, similarity_colors, zoom, zoom_note)


def similarity_heatmap(table, kind: str = "cosine", trained_len: int | None = None,
                       title: str | None = None) -> go.Figure:
    """Row-versus-row similarity of a ``[N, D]`` table, with the trained length T marked.

    Cell ``(i, j)`` is the ``cosine``, ``centred`` cosine (the mean row subtracted first)
    or ``dot`` similarity of rows i and j. A table of more than `MAX_CELLS` rows is shown
    zoomed on its first `MAX_CELLS`.

    >>> import torch
    >>> fig = similarity_heatmap(torch.eye(4))
    >>> fig.data[0].z.diagonal().tolist()
    [1.0, 1.0, 1.0, 1.0]
    """
    check_kind(kind)
    table = as_table(table)
    n = table.shape[0]
    shown = zoom(n)
    z = analysis.similarity(table[:shown], kind).numpy()  # (shown, shown)
    fig = go.Figure(heatmap_trace(z, x_title="row", y_title="row", value_text=KIND_TEXT[kind],
                                  colors=similarity_colors(kind, z)))
    if title is None:
        title = f"{KIND_TEXT[kind].capitalize()} of every pair of position rows"
    fig.update_layout(title=dict(text=title + zoom_note(shown, n)), height=HEIGHT)
    heatmap_layout(fig, x_title="row j", y_title="row i")
    if has_untrained(trained_len, shown):
        mark_trained_len(fig, trained_len, horizontal=True)
    return fig


# Attention weights on a fixed 0-1 scale, live and finished: an early, almost
# uniform map (every weight near 1/T) shows pale, never as a solid dark square that an
# auto-ranged scale (0 to 1/T) would make of it.
ATTENTION_COLORS = dict(colorscale="Blues", zmin=0.0, zmax=1.0,
                        colorbar=dict(title=dict(text="weight (0-1)")))


def _probability_heatmap(matrix, title: str, value_text: str, *, x_title: str = "key position",
                         y_title: str = "query position",
                         axes: tuple[str, str] = ("key position (attended to)",
                                                  "query position (attending)")) -> go.Figure:
    """A map of weights whose rows sum to 1 (attention), zoomed on its first rows."""
    weights = as_float32(matrix)
    n = weights.shape[0]
    shown = zoom(n)
    z = weights[:shown, :zoom(weights.shape[1])]
    colors = ATTENTION_COLORS
    fig = go.Figure(heatmap_trace(z, x_title=x_title, y_title=y_title, value_text=value_text,
                                  colors=colors))
    fig.update_layout(title=dict(text=title + zoom_note(shown, n)), height=HEIGHT)
    heatmap_layout(fig, x_title=axes[0], y_title=axes[1])
    return fig


def query_key_heatmap(run, node: str) -> go.Figure | None:
    """Where each position would attend by its position alone (``None`` without attention):
    `analysis.positional_attention` drawn by `positional_attention_heatmap`."""
    weights = analysis.positional_attention(run, node)
    return None if weights is None else positional_attention_heatmap(weights, node)


def positional_attention_heatmap(weights, node: str, title: str | None = None) -> go.Figure:
    """The attention-by-position map (``[T, T]``, rows sum to 1) of ``node``'s rows."""
    return _probability_heatmap(
        weights, title or f"Attention by position alone: {node}'s rows, T = {weights.shape[0]}",
        "attention weight")


def attention_heatmap(weights, sequences: int) -> go.Figure:
    """Attention weights measured on held-out sequences (`analysis.attention_map`)."""
    return _probability_heatmap(weights, f"Attention on {sequences} held-out sequences "
                                         "(average over sequences and heads)",
                                "mean attention weight")


def rows_alone_heatmap(scores, node: str) -> go.Figure:
    """What the rest of the stack answers for each row fed alone (`analysis.rows_alone_scores`,
    ``[T, classes]``), as probabilities: for ``position`` a bright diagonal when row t
    alone says "t"."""
    probabilities = torch.as_tensor(scores).float().softmax(-1)
    return _probability_heatmap(
        probabilities, f"Each row of {node} alone through the rest of the stack: the class "
                       "it picks", "probability", x_title="class", y_title="row",
        axes=("class the stack answers", "row fed alone (no token)"))


def _pick_frames(count: int, limit: int = MAX_FRAMES) -> list[int]:
    """At most ``limit`` evenly spaced indices of ``count``, first and last included."""
    if count <= limit:
        return list(range(count))
    return sorted({round(i) for i in np.linspace(0, count - 1, limit)})


def _animation(frames: list[tuple[int, np.ndarray]], n: int, *, title: str, value_text: str,
               colors: dict, axes: tuple[str, str], trained_len: int | None = None) -> go.Figure:
    """One heatmap per ``(step, z)`` frame, with a step slider and play/pause. It opens on
    the last frame (what training made; the first is a flat random start); Play runs
    every frame from the first."""
    fig = go.Figure(heatmap_trace(frames[-1][1], x_title="row", y_title="row",
                                  value_text=value_text, colors=colors))
    fig.frames = [go.Frame(data=[go.Heatmap(z=as_float32(z))], name=str(step))
                  for step, z in frames]
    animate = dict(mode="immediate", frame=dict(duration=0, redraw=True), transition=dict(duration=0))
    slider = dict(
        active=len(frames) - 1, x=0.22, len=0.78, y=0, yanchor="top", pad=dict(t=60),
        currentvalue=dict(prefix="training step ", font=dict(size=13), xanchor="right"),
        steps=[dict(label=str(step), method="animate", args=[[str(step)], animate])
               for step, _ in frames],
    )
    play = dict(type="buttons", direction="left", x=0.0, y=0, xanchor="left", yanchor="top",
                pad=dict(t=70, r=10), showactive=False, buttons=[
                    dict(label="▶ Play", method="animate",
                         args=[None, dict(frame=dict(duration=250, redraw=True),
                                          transition=dict(duration=0), fromcurrent=False)]),
                    dict(label="❚❚ Pause", method="animate", args=[[None], animate]),
                ])
    shown = frames[0][1].shape[0]
    fig.update_layout(title=dict(text=title + zoom_note(shown, n)), sliders=[slider],
                      updatemenus=[play], height=HEIGHT + 120, margin=dict(b=150))
    heatmap_layout(fig, x_title=axes[0], y_title=axes[1])
    if has_untrained(trained_len, shown):
        mark_trained_len(fig, trained_len, horizontal=True)
    return fig


def _frame_rows(n: int, frames: int) -> int:
    """Rows per side that `frames` frames of a heatmap can show within `ANIMATION_CELLS`."""
    return zoom(n, max(1, min(MAX_CELLS, int(math.sqrt(ANIMATION_CELLS / frames)))))


def snapshot_heatmaps(run, node: str, kind: str = "cosine") -> go.Figure:
    """The similarity heatmap at each training snapshot, with a step slider and play/pause.

    At most `MAX_FRAMES` snapshots are shown (evenly spaced, first and last kept), all
    zoomed on the same first rows so that the frames together stay small. Colours keep one
    scale across frames, so brightening means the rows really became more alike.
    """
    check_kind(kind)
    snapshots = run.snapshots[node]
    chosen = [snapshots[i] for i in _pick_frames(len(snapshots))]
    n = chosen[0][1].shape[0]
    shown = _frame_rows(n, len(chosen))
    frames = [(step, analysis.similarity(table[:shown], kind).numpy()) for step, table in chosen]
    limit = max(float(np.abs(z).max()) for _, z in frames) or 1.0
    return _animation(frames, n, title=f"{KIND_TEXT[kind].capitalize()} of {node}'s rows "
                      "during training", value_text=KIND_TEXT[kind],
                      colors=similarity_colors(kind, frames[-1][1], limit),
                      axes=("row j", "row i"), trained_len=run.config.seq_len)


def attention_snapshot_heatmaps(run, node: str) -> go.Figure:
    """The attention-by-position map at each training snapshot (`Run.attention_snapshots`):
    the partner pattern of ``reverse`` or ``shift`` forming, step by step."""
    snapshots = run.attention_snapshots[node]
    chosen = [snapshots[i] for i in _pick_frames(len(snapshots))]
    n = chosen[0][1].shape[0]
    shown = _frame_rows(n, len(chosen))
    frames = [(step, as_float32(weights)[:shown, :shown]) for step, weights in chosen]
    return _animation(frames, n, title=f"Attention by position alone during training ({node})",
                      value_text="attention weight", colors=ATTENTION_COLORS,
                      axes=("key position (attended to)", "query position (attending)"))


def learned_vs_sinusoidal(table, trained_len: int) -> go.Figure:
    """The first T learned rows beside the sinusoidal table of the same size, each as the
    *centred* cosine of its rows (the mean row subtracted: the sinusoid's nearly constant
    low-frequency columns would otherwise make every pair look alike), with the
    correlation between the two maps off the diagonal in the title."""
    table = as_table(table)
    if not 1 <= trained_len <= table.shape[0]:
        raise ValueError(f"trained_len must be 1..{table.shape[0]}, not {trained_len}")
    learned = table[:trained_len]  # (T, D)
    sinusoidal = analysis.sinusoidal_table(trained_len, table.shape[1])  # (T, D)
    resemblance = sinusoidal_resemblance(learned)
    shown = zoom(trained_len)
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12, subplot_titles=(
        f"learned (pos_embed), rows 0-{trained_len - 1}",
        f"sinusoidal (sin_pos), D = {table.shape[1]}"))
    for col, rows in ((1, learned), (2, sinusoidal)):
        z = analysis.similarity(rows, "centred").numpy()[:shown, :shown]
        fig.add_trace(heatmap_trace(z, x_title="row", y_title="row",
                                    value_text=KIND_TEXT["centred"],
                                    colors=similarity_colors("centred", z), showscale=col == 2),
                      row=1, col=col)
        heatmap_layout(fig, x_title="row j", y_title="row i", row=1, col=col)
    fig.update_layout(title=dict(text="Learned vs sinusoidal: centred cosine of the rows; "
                                      f"resemblance r = {resemblance:.2f}"
                                      f"{zoom_note(shown, trained_len)}"), height=HEIGHT)
    return fig


def sinusoidal_resemblance(rows) -> float:
    """Pearson correlation, off the diagonal, between the centred cosine map of ``rows``
    (``[T, D]``) and that of the sinusoidal table of the same size: 1 when the learned rows
    relate to each other as the sinusoid's do, about 0 for unrelated rows."""
    rows = as_table(rows)
    T = rows.shape[0]
    mine = score_maths.centred_cosine_matrix(rows)
    theirs = score_maths.centred_cosine_matrix(analysis.sinusoidal_table(T, rows.shape[1]))
    off = ~torch.eye(T, dtype=torch.bool)
    return score_maths.pearson(mine[off], theirs[off]) if T > 2 else float("nan")
