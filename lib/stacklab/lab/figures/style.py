"""What every stacklab figure shares: sizes, colours, the T marker, and sending large
tables compactly (block-averaged heatmaps, float32 arrays that plotly encodes as base64)."""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
import torch

MAX_CELLS = 384  # heatmap cells per side: 384² float32 values are ~0.8 MB of JSON
ANIMATION_CELLS = 200_000  # cells over all frames of an animation (~1.1 MB of JSON)
MAX_FRAMES = 40  # snapshots shown by the training animation
MAX_TABLE_ROWS = 4096  # rows of a table the run figures look at (its first ones)
HEIGHT = 520  # px; also the height of the div in an HTML report

TRAINED_COLOR = "#1f77b4"
UNTRAINED_COLOR = "#d62728"
T_LINE = dict(color="black", width=1.5, dash="dash")
KIND_TEXT = {"cosine": "cosine similarity", "dot": "dot product"}


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
        raise ValueError(f"kind must be 'cosine' or 'dot', not {kind!r}")


def bin_size(n: int, max_cells: int = MAX_CELLS) -> int:
    """Rows per heatmap cell so that ``n`` rows fit in ``max_cells`` cells."""
    return max(1, math.ceil(n / max_cells))


def block_mean(matrix: np.ndarray, size: int) -> np.ndarray:
    """Average ``size x size`` blocks of a 2-D matrix (the last block may be smaller)."""
    if size == 1:
        return matrix.astype(np.float32)
    row_starts = np.arange(0, matrix.shape[0], size)
    col_starts = np.arange(0, matrix.shape[1], size)
    sums = np.add.reduceat(np.add.reduceat(matrix.astype(np.float64), row_starts, axis=0),
                           col_starts, axis=1)  # (ceil(N/size), ceil(M/size))
    counts = np.outer(np.diff(np.append(row_starts, matrix.shape[0])),
                      np.diff(np.append(col_starts, matrix.shape[1])))
    return (sums / counts).astype(np.float32)


def bin_labels(n: int, size: int) -> list[str]:
    """``["0-5", "6-11", ...]``: the rows each cell of a binned axis covers."""
    return [f"{start}-{min(start + size, n) - 1}" for start in range(0, n, size)]


def axis_values(n: int, size: int):
    """Coordinates along a heatmap axis of ``n`` rows in cells of ``size``.

    Unbinned: the row numbers on a linear axis. Binned: the row ranges as categories, so
    the hover reads "rows 0-5"; in both cases cell ``i`` sits at ``x = i``.
    """
    if size == 1:
        return np.arange(n, dtype=np.int32), dict(type="linear")
    return bin_labels(n, size), dict(type="category", nticks=8)


def binned_note(size: int) -> str:
    return "" if size == 1 else f" (each cell averages {size} × {size} rows)"


def boundary(trained_len: int, size: int) -> float:
    """The axis coordinate of the edge between row ``T-1`` and row ``T``."""
    return trained_len / size - 0.5


def has_untrained(trained_len: int | None, n: int) -> bool:
    return trained_len is not None and 0 < trained_len < n


def mark_trained_len(fig: go.Figure, trained_len: int, size: int, *, horizontal: bool) -> None:
    """A dashed line at T (between row T-1 and row T, the first never trained), labelled."""
    at = boundary(trained_len, size)
    fig.add_vline(x=at, line=T_LINE)
    if horizontal:
        fig.add_hline(y=at, line=T_LINE)
    fig.add_annotation(x=at, y=1.0, yref="y domain", yanchor="bottom", showarrow=False,
                       text=f"T = {trained_len}", font=dict(size=12))


def heatmap_trace(z: np.ndarray, size: int, n: int, *, x_title: str, y_title: str,
                   value_text: str, colors: dict, showscale: bool = True) -> go.Heatmap:
    """A heatmap of a (possibly binned) position-by-position matrix, with readable hover."""
    coords, _ = axis_values(n, size)
    x_word, y_word = (x_title, y_title) if size == 1 else (x_title + "s", y_title + "s")
    return go.Heatmap(
        z=z, x=coords, y=coords, **colors, showscale=showscale,
        hovertemplate=(f"{y_word} %{{y}} vs {x_word} %{{x}}<br>{value_text} %{{z:.3f}}"
                       "<extra></extra>"),
    )


def heatmap_layout(fig: go.Figure, n: int, size: int, *, x_title: str, y_title: str,
                    row: int | None = None, col: int | None = None) -> None:
    """Square cells, row 0 at the top-left, axis titles and categories for binned axes."""
    _, axis = axis_values(n, size)
    where = {} if row is None else dict(row=row, col=col)
    x_axis = "x" if row is None else fig.get_subplot(row, col).xaxis.plotly_name.replace("axis", "")
    fig.update_xaxes(title_text=x_title, constrain="domain", **axis, **where)
    fig.update_yaxes(title_text=y_title, autorange="reversed", constrain="domain",
                     scaleanchor=x_axis, **axis, **where)


def similarity_colors(kind: str, z: np.ndarray, limit: float | None = None) -> dict:
    """Red for alike, blue for opposite, white for unrelated; cosine on a fixed -1..1 scale."""
    if kind == "cosine":
        return dict(colorscale="RdBu_r", zmin=-1.0, zmax=1.0,
                    colorbar=dict(title=dict(text="cosine")))
    if limit is None:
        limit = float(np.abs(z).max()) or 1.0
    return dict(colorscale="RdBu_r", zmin=-limit, zmax=limit, colorbar=dict(title=dict(text="dot")))
