"""Plotly figures of what a position table learned (SPEC §9), for notebooks, the app and reports.

Every function returns a `plotly.graph_objects.Figure` built from plain tensors or a `Run`;
nothing here imports streamlit, so the same figures show in Jupyter (``fig.show()``), in the
app (``st.plotly_chart(fig)``) and in `stacklab.lab.report_html`. The trained length T is
marked wherever it matters: rows ``>= T`` of a table never take part in training.

Large tables are sent compactly: a similarity map is block-averaged down to at most
`MAX_CELLS` cells a side (the title and hover say which rows a cell covers) and every array
is float32, which plotly encodes as base64, so a 2048-row heatmap is well under 2 MB.

>>> import torch
>>> fig = similarity_heatmap(torch.randn(2048, 32), trained_len=1024)
>>> len(fig.to_json()) < 2_000_000
True
"""

from __future__ import annotations

import math
from typing import NamedTuple, Sequence

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from . import analysis
from ..core.errors import StackError

__all__ = ["similarity_heatmap", "query_key_heatmap", "snapshot_heatmaps", "grad_norm_plot",
           "drift_plot", "pca_plot", "length_probe_plot", "learned_vs_sinusoidal",
           "training_curves", "run_figures", "RunFigure", "MAX_CELLS"]

MAX_CELLS = 384  # heatmap cells per side: 384² float32 values are ~0.8 MB of JSON
ANIMATION_CELLS = 200_000  # cells over all frames of an animation (~1.1 MB of JSON)
MAX_FRAMES = 40  # snapshots shown by the training animation
MAX_TABLE_ROWS = 4096  # rows of a table the run figures look at (its first ones)
HEIGHT = 520  # px; also the height of the div in an HTML report

TRAINED_COLOR = "#1f77b4"
UNTRAINED_COLOR = "#d62728"
T_LINE = dict(color="black", width=1.5, dash="dash")
KIND_TEXT = {"cosine": "cosine similarity", "dot": "dot product"}


class RunFigure(NamedTuple):
    """One figure of a run's report: a title, a one-sentence caption and the figure."""

    title: str
    caption: str
    figure: go.Figure


# ---------------------------------------------------------------------------------------
# helpers: numpy conversion, block-averaging, position axes, the T marker


def _numpy(values) -> np.ndarray:
    """A float32 numpy copy of a tensor, array or list (plotly sends float32 as base64)."""
    if isinstance(values, torch.Tensor):
        values = values.detach().float().cpu().numpy()
    return np.asarray(values, dtype=np.float32)


def _as_table(table) -> torch.Tensor:
    table = torch.as_tensor(table).detach().float().cpu()
    if table.dim() != 2 or table.shape[0] == 0:
        raise ValueError(f"a position table must be [N, D] with N >= 1, not {list(table.shape)}")
    return table


def _check_kind(kind: str) -> None:
    if kind not in KIND_TEXT:
        raise ValueError(f"kind must be 'cosine' or 'dot', not {kind!r}")


def _bin_size(n: int, max_cells: int = MAX_CELLS) -> int:
    """Rows per heatmap cell so that ``n`` rows fit in ``max_cells`` cells."""
    return max(1, math.ceil(n / max_cells))


def _block_mean(matrix: np.ndarray, size: int) -> np.ndarray:
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


def _bin_labels(n: int, size: int) -> list[str]:
    """``["0-5", "6-11", ...]``: the rows each cell of a binned axis covers."""
    return [f"{start}-{min(start + size, n) - 1}" for start in range(0, n, size)]


def _axis_values(n: int, size: int):
    """Coordinates along a heatmap axis of ``n`` rows in cells of ``size``.

    Unbinned: the row numbers on a linear axis. Binned: the row ranges as categories, so
    the hover reads "rows 0-5"; in both cases cell ``i`` sits at ``x = i``.
    """
    if size == 1:
        return np.arange(n, dtype=np.int32), dict(type="linear")
    return _bin_labels(n, size), dict(type="category", nticks=8)


def _binned_note(size: int) -> str:
    return "" if size == 1 else f" (each cell averages {size} × {size} rows)"


def _boundary(trained_len: int, size: int) -> float:
    """The axis coordinate of the edge between row ``T-1`` and row ``T``."""
    return trained_len / size - 0.5


def _has_untrained(trained_len: int | None, n: int) -> bool:
    return trained_len is not None and 0 < trained_len < n


def _mark_trained_len(fig: go.Figure, trained_len: int, size: int, *, horizontal: bool) -> None:
    """A dashed line at T (between row T-1 and row T, the first never trained), labelled."""
    at = _boundary(trained_len, size)
    fig.add_vline(x=at, line=T_LINE)
    if horizontal:
        fig.add_hline(y=at, line=T_LINE)
    fig.add_annotation(x=at, y=1.0, yref="y domain", yanchor="bottom", showarrow=False,
                       text=f"T = {trained_len}", font=dict(size=12))


def _heatmap_trace(z: np.ndarray, size: int, n: int, *, x_title: str, y_title: str,
                   value_text: str, colors: dict, showscale: bool = True) -> go.Heatmap:
    """A heatmap of a (possibly binned) position-by-position matrix, with readable hover."""
    coords, _ = _axis_values(n, size)
    x_word, y_word = (x_title, y_title) if size == 1 else (x_title + "s", y_title + "s")
    return go.Heatmap(
        z=z, x=coords, y=coords, **colors, showscale=showscale,
        hovertemplate=(f"{y_word} %{{y}} vs {x_word} %{{x}}<br>{value_text} %{{z:.3f}}"
                       "<extra></extra>"),
    )


def _heatmap_layout(fig: go.Figure, n: int, size: int, *, x_title: str, y_title: str,
                    row: int | None = None, col: int | None = None) -> None:
    """Square cells, row 0 at the top-left, axis titles and categories for binned axes."""
    _, axis = _axis_values(n, size)
    where = {} if row is None else dict(row=row, col=col)
    x_axis = "x" if row is None else fig.get_subplot(row, col).xaxis.plotly_name.replace("axis", "")
    fig.update_xaxes(title_text=x_title, constrain="domain", **axis, **where)
    fig.update_yaxes(title_text=y_title, autorange="reversed", constrain="domain",
                     scaleanchor=x_axis, **axis, **where)


def _similarity_colors(kind: str, z: np.ndarray, limit: float | None = None) -> dict:
    """Red for alike, blue for opposite, white for unrelated; cosine on a fixed -1..1 scale."""
    if kind == "cosine":
        return dict(colorscale="RdBu_r", zmin=-1.0, zmax=1.0,
                    colorbar=dict(title=dict(text="cosine")))
    if limit is None:
        limit = float(np.abs(z).max()) or 1.0
    return dict(colorscale="RdBu_r", zmin=-limit, zmax=limit, colorbar=dict(title=dict(text="dot")))


# ---------------------------------------------------------------------------------------
# similarity heatmaps


def similarity_heatmap(table, kind: str = "cosine", trained_len: int | None = None,
                       title: str | None = None) -> go.Figure:
    """Row-versus-row similarity of a ``[N, D]`` table, with the trained length T marked.

    Cell ``(i, j)`` is the ``cosine`` (or ``dot``) similarity of rows i and j. Tables with
    more than `MAX_CELLS` rows are block-averaged so that each cell covers a few rows.

    >>> fig = similarity_heatmap(torch.eye(4))
    >>> fig.data[0].z.diagonal().tolist()
    [1.0, 1.0, 1.0, 1.0]
    """
    _check_kind(kind)
    table = _as_table(table)
    n = table.shape[0]
    size = _bin_size(n)
    z = _block_mean(analysis.similarity(table, kind).numpy(), size)  # (N/size, N/size)
    fig = go.Figure(_heatmap_trace(z, size, n, x_title="row", y_title="row",
                                   value_text=KIND_TEXT[kind], colors=_similarity_colors(kind, z)))
    if title is None:
        title = f"{KIND_TEXT[kind].capitalize()} of every pair of position rows"
    fig.update_layout(title=dict(text=title + _binned_note(size)), height=HEIGHT)
    _heatmap_layout(fig, n, size, x_title="row j", y_title="row i")
    if _has_untrained(trained_len, n):
        _mark_trained_len(fig, trained_len, size, horizontal=True)
    return fig


def _probability_heatmap(matrix, title: str, value_text: str) -> go.Figure:
    """A [T, T] map of attention weights (rows sum to 1), query positions down the side."""
    weights = _numpy(matrix)  # (T, T)
    n = weights.shape[0]
    size = _bin_size(n)
    z = _block_mean(weights, size)
    colors = dict(colorscale="Blues", zmin=0.0, zmax=float(z.max()) or 1.0,
                  colorbar=dict(title=dict(text="weight")))
    fig = go.Figure(_heatmap_trace(z, size, n, x_title="key position", y_title="query position",
                                   value_text=value_text, colors=colors))
    fig.update_layout(title=dict(text=title + _binned_note(size)), height=HEIGHT)
    _heatmap_layout(fig, n, size, x_title="key position (attended to)",
                    y_title="query position (attending)")
    return fig


def query_key_heatmap(run, node: str) -> go.Figure | None:
    """Where each position would attend by its position alone (``None`` without attention).

    `analysis.positional_attention`: the softmax of the query-key scores of ``node``'s
    first T rows, through the first attention after it. For ``reverse`` a bright
    anti-diagonal; for ``shift`` the diagonal just below the main one.
    """
    weights = analysis.positional_attention(run, node)
    if weights is None:
        return None
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
    _check_kind(kind)
    snapshots = run.snapshots[node]
    chosen = [snapshots[i] for i in _pick_frames(len(snapshots))]
    n = chosen[0][1].shape[0]
    side = max(1, min(MAX_CELLS, int(math.sqrt(ANIMATION_CELLS / len(chosen)))))
    size = _bin_size(n, side)
    frames_z = [_block_mean(analysis.similarity(table, kind).numpy(), size) for _, table in chosen]
    limit = max(float(np.abs(z).max()) for z in frames_z) or 1.0
    colors = _similarity_colors(kind, frames_z[-1], limit)
    value_text = KIND_TEXT[kind]
    fig = go.Figure(_heatmap_trace(frames_z[0], size, n, x_title="row", y_title="row",
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
                        f"{_binned_note(size)}"),
        sliders=[slider], updatemenus=[play], height=HEIGHT + 120, margin=dict(b=150),
    )
    _heatmap_layout(fig, n, size, x_title="row j", y_title="row i")
    if _has_untrained(run.config.seq_len, n):
        _mark_trained_len(fig, run.config.seq_len, size, horizontal=True)
    return fig


def learned_vs_sinusoidal(table, trained_len: int) -> go.Figure:
    """The learned table's cosine heatmap beside the fixed sinusoidal table's, first T rows each."""
    table = _as_table(table)
    if not 1 <= trained_len <= table.shape[0]:
        raise ValueError(f"trained_len must be 1..{table.shape[0]}, not {trained_len}")
    learned = table[:trained_len]  # (T, D)
    sinusoidal = analysis.sinusoidal_table(trained_len, table.shape[1])  # (T, D)
    size = _bin_size(trained_len)
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12, subplot_titles=(
        f"learned (pos_embed), rows 0-{trained_len - 1}",
        f"sinusoidal (sin_pos), D = {table.shape[1]}"))
    for col, rows in ((1, learned), (2, sinusoidal)):
        z = _block_mean(analysis.similarity(rows).numpy(), size)
        fig.add_trace(_heatmap_trace(z, size, trained_len, x_title="row", y_title="row",
                                     value_text="cosine similarity",
                                     colors=_similarity_colors("cosine", z), showscale=col == 2),
                      row=1, col=col)
        _heatmap_layout(fig, trained_len, size, x_title="row j", y_title="row i", row=1, col=col)
    fig.update_layout(title=dict(text="Learned vs sinusoidal positions: cosine similarity of "
                                      f"the rows{_binned_note(size)}"), height=HEIGHT)
    return fig


# ---------------------------------------------------------------------------------------
# per-row bar charts


def _row_bars(values: np.ndarray, trained_len: int | None, name: str, hover: str) -> go.Bar:
    n = values.shape[0]
    colors = [TRAINED_COLOR if trained_len is None or i < trained_len else UNTRAINED_COLOR
              for i in range(n)]
    return go.Bar(x=np.arange(n, dtype=np.int32), y=values, marker=dict(color=colors,
                  line=dict(width=0)), name=name,
                  hovertemplate=f"row %{{x}}<br>{hover} %{{y:.4g}}<extra></extra>")


def _untrained_summary(values: np.ndarray, trained_len: int) -> tuple[bool, float]:
    beyond = values[trained_len:]
    return bool((beyond == 0).all()), float(np.abs(beyond).max()) if beyond.size else 0.0


def grad_norm_plot(row_grad_norm, trained_len: int) -> go.Figure:
    """Per-row gradient norm summed over training, with T marked: rows ``>= T`` get exactly 0."""
    values = _numpy(row_grad_norm)  # (max_len,)
    n = values.shape[0]
    fig = go.Figure(_row_bars(values, trained_len, "summed gradient norm", "summed ‖grad‖"))
    fig.update_layout(title=dict(text="Gradient reaching each row of the position table, "
                                      "summed over training steps"),
                      xaxis_title="row (position)", yaxis_title="Σ over steps of ‖grad of row‖",
                      height=HEIGHT, showlegend=False, bargap=0.1)
    if _has_untrained(trained_len, n):
        _mark_trained_len(fig, trained_len, 1, horizontal=False)
        all_zero, largest = _untrained_summary(values, trained_len)
        text = (f"rows ≥ {trained_len} got exactly zero gradient:<br>training sequences have "
                f"only {trained_len} positions" if all_zero else
                f"rows ≥ {trained_len} got some gradient (largest {largest:.3g})")
        fig.add_annotation(x=(trained_len + n) / 2 - 0.5, y=0.5, yref="paper", showarrow=False,
                           text=text, bgcolor="rgba(255,255,255,0.85)", bordercolor="#888")
    return fig


def drift_plot(row_drift, trained_len: int, weight_decay: float = 0.0) -> go.Figure:
    """How far each row moved from its initial value, ``‖W_now[i] - W_init[i]‖``, with T marked.

    Without weight decay rows ``>= T`` stay exactly where they started; AdamW's weight
    decay shrinks every row, so with it the untrained rows move although no gradient reaches them.
    """
    values = _numpy(row_drift)  # (max_len,)
    n = values.shape[0]
    fig = go.Figure(_row_bars(values, trained_len, "drift", "‖W_now − W_init‖"))
    fig.update_layout(title=dict(text="How far each row moved from its initial value "
                                      f"(weight decay {weight_decay:g})"),
                      xaxis_title="row (position)", yaxis_title="‖W_now[i] − W_init[i]‖",
                      height=HEIGHT, showlegend=False, bargap=0.1)
    if _has_untrained(trained_len, n):
        _mark_trained_len(fig, trained_len, 1, horizontal=False)
        all_zero, largest = _untrained_summary(values, trained_len)
        if weight_decay > 0:
            text = (f"rows ≥ {trained_len} get no gradient, yet weight decay {weight_decay:g} "
                    f"shrinks them<br>towards zero every step (largest drift {largest:.3g})")
        elif all_zero:
            text = f"no weight decay: rows ≥ {trained_len} never moved (drift exactly 0)"
        else:
            text = f"rows ≥ {trained_len} moved (largest drift {largest:.3g})"
        fig.add_annotation(x=(trained_len + n) / 2 - 0.5, y=0.5, yref="paper", showarrow=False,
                           text=text, bgcolor="rgba(255,255,255,0.85)", bordercolor="#888")
    return fig


# ---------------------------------------------------------------------------------------
# PCA, length probe, training curves


def pca_plot(table, trained_len: int | None = None, dims: int = 2) -> go.Figure:
    """The rows projected on their 2 or 3 leading principal components, coloured by position.

    A thin line joins consecutive positions; trained rows are dots, untrained rows
    (``>= trained_len``) open diamonds. Axis titles give each component's share of variance.
    """
    if dims not in (2, 3):
        raise ValueError(f"dims must be 2 or 3, not {dims!r}")
    table = _as_table(table)
    n = table.shape[0]
    result = analysis.pca(table, dims)
    coords = _numpy(result.coords)  # (N, k)
    if coords.shape[1] < dims:  # fewer columns than components: pad with zeros
        coords = np.pad(coords, ((0, 0), (0, dims - coords.shape[1])))
    explained = [float(v) for v in result.explained] + [0.0] * (dims - len(result.explained))
    titles = [f"PC{i + 1} ({explained[i]:.1%} of variance)" for i in range(dims)]
    rows = np.arange(n, dtype=np.int32)
    scatter = go.Scatter if dims == 2 else go.Scatter3d
    axes = ["x", "y", "z"][:dims]
    hover = "row %{customdata}<br>" + "<br>".join(
        f"PC{i + 1} %{{{axis}:.3f}}" for i, axis in enumerate(axes)) + "<extra></extra>"

    def points(index: np.ndarray) -> dict:
        return {axis: coords[index, i] for i, axis in enumerate(axes)}

    fig = go.Figure(scatter(**points(rows), mode="lines", name="consecutive positions",
                            line=dict(color="rgba(120,120,120,0.5)", width=1.5),
                            hoverinfo="skip"))
    split = trained_len if _has_untrained(trained_len, n) else n
    marker = dict(color=rows, colorscale="Viridis", cmin=0, cmax=max(n - 1, 1),
                  size=7 if dims == 2 else 4)
    groups = [(rows[:split], "trained rows" if split < n else "rows", "circle", True)]
    if split < n:
        groups.append((rows[split:], f"untrained rows (≥ {split})", "diamond-open", False))
    for index, name, symbol, colorbar in groups:
        style = dict(marker, color=index, symbol=symbol)
        if colorbar:
            style["colorbar"] = dict(title=dict(text="position"))
        fig.add_trace(scatter(**points(index), mode="markers", name=name, marker=style,
                              customdata=index, hovertemplate=hover))
    fig.update_layout(title=dict(text=f"Position rows on their top {dims} principal components"),
                      height=HEIGHT, legend=dict(orientation="h", y=-0.15))
    if dims == 2:
        fig.update_layout(xaxis_title=titles[0], yaxis_title=titles[1])
    else:
        fig.update_layout(scene=dict(xaxis_title=titles[0], yaxis_title=titles[1],
                                     zaxis_title=titles[2]))
    return fig


def length_probe_plot(probe: analysis.LengthProbe) -> go.Figure:
    """Held-out accuracy at each position of longer sequences: the cliff past the trained length."""
    accuracy = _numpy(probe.accuracy)  # (probe_len,)
    T = probe.trained_len
    fig = go.Figure(go.Scatter(
        x=np.arange(probe.probe_len, dtype=np.int32), y=accuracy, mode="lines+markers",
        name="accuracy", line=dict(color=TRAINED_COLOR),
        hovertemplate="position %{x}<br>accuracy %{y:.1%}<extra></extra>"))
    fig.update_layout(
        title=dict(text=f"Length probe: trained on T = {T}, tested on {probe.probe_len} positions"),
        xaxis_title="position in the sequence", yaxis=dict(title="held-out accuracy",
                                                           range=[0, 1.05], tickformat=".0%"),
        height=HEIGHT, showlegend=False)
    if probe.probe_len > T:
        fig.add_vrect(x0=T - 0.5, x1=probe.probe_len - 0.5, fillcolor=UNTRAINED_COLOR,
                      opacity=0.08, line_width=0)
        _mark_trained_len(fig, T, 1, horizontal=False)
        fig.add_annotation(
            x=(T + probe.probe_len) / 2 - 0.5, y=0.5, yref="paper", showarrow=False,
            text=(f"never trained: mean accuracy {probe.beyond:.0%}<br>"
                  f"(positions < {T}: {probe.inside:.0%})"),
            bgcolor="rgba(255,255,255,0.85)", bordercolor="#888")
    return fig


def training_curves(history: Sequence[dict], train_loss: Sequence[tuple[int, float]] | None = None
                    ) -> go.Figure:
    """Held-out loss (log scale) and accuracy against the step; the training loss optionally."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08,
                        subplot_titles=("loss", "held-out accuracy"))
    if train_loss:
        steps, losses = zip(*train_loss)
        fig.add_trace(go.Scatter(x=np.asarray(steps, dtype=np.int32), y=_numpy(losses),
                                 mode="lines", name="training loss (one batch)",
                                 line=dict(color="rgba(150,150,150,0.7)", width=1),
                                 hovertemplate="step %{x}<br>training loss %{y:.4g}<extra></extra>"),
                      row=1, col=1)
    steps = np.asarray([entry["step"] for entry in history], dtype=np.int32)
    fig.add_trace(go.Scatter(x=steps, y=_numpy([entry["loss"] for entry in history]),
                             mode="lines+markers", name="held-out loss",
                             line=dict(color=UNTRAINED_COLOR),
                             hovertemplate="step %{x}<br>held-out loss %{y:.4g}<extra></extra>"),
                  row=1, col=1)
    fig.add_trace(go.Scatter(x=steps, y=_numpy([entry["accuracy"] for entry in history]),
                             mode="lines+markers", name="held-out accuracy",
                             line=dict(color=TRAINED_COLOR),
                             hovertemplate="step %{x}<br>accuracy %{y:.1%}<extra></extra>"),
                  row=2, col=1)
    fig.update_yaxes(title_text="cross-entropy (log scale)", type="log", exponentformat="e",
                     row=1, col=1)
    fig.update_yaxes(title_text="accuracy", range=[0, 1.05], tickformat=".0%", row=2, col=1)
    fig.update_xaxes(title_text="training step", row=2, col=1)
    fig.update_layout(title=dict(text="Training curves"), height=HEIGHT,
                      legend=dict(orientation="h", y=-0.15))
    return fig


# ---------------------------------------------------------------------------------------
# everything for one run


def run_figures(run, node: str | None = None) -> list[RunFigure]:
    """Every figure that applies to ``run``, in reading order, for its first position table.

    Figures that do not apply are left out: with no learned position table only the
    training curves remain; the query-key map needs an attention after the table; the
    length probe needs spare rows past the trained length.
    """
    T = run.config.seq_len
    figures: list[RunFigure] = []
    if run.history:
        figures.append(RunFigure(
            "Training curves",
            "Held-out loss and accuracy (and the loss of each training batch) as training went on.",
            training_curves(run.history, run.train_loss)))
    if not run.position_nodes:
        return figures
    node = node if node in run.position_nodes else run.position_nodes[0]
    table = run.table(node)[:MAX_TABLE_ROWS]  # (max_len, D), the first rows of a huge table
    n = table.shape[0]
    untrained = f"; rows ≥ {T} (past the dashed lines) were never trained" if n > T else ""
    look_for = (f"What to look for: {run.task.pattern}" if not run.task.mixing else
                "In this task positions must find each other, so the pattern shows in the "
                "attention maps below; the rows themselves need not look alike.")
    figures.append(RunFigure(
        "Cosine similarity of the rows",
        f"How alike each pair of rows of {node}'s table points{untrained}. {look_for}",
        similarity_heatmap(table, "cosine", T,
                           title=f"Cosine similarity of {node}'s rows (task {run.task.name})")))
    figures.append(RunFigure(
        "Dot-product similarity of the rows",
        "The same comparison without normalising, so rows that grew long during training "
        "stand out.",
        similarity_heatmap(table, "dot", T, title=f"Dot product of {node}'s rows")))
    query_key = query_key_heatmap(run, node)
    if query_key is not None:
        figures.append(RunFigure(
            "Attention by position alone",
            "Each row is a position asking \"where should I look?\" using only its row of the "
            "table, through the attention's query and key projections (rows sum to 1). "
            f"What to look for: {run.task.pattern}",
            query_key))
        figures.append(RunFigure(
            "Attention on held-out data",
            "Where attention actually looked, averaged over 256 held-out sequences: when "
            "it matches the map above, the model finds its partner by position.",
            attention_heatmap(run)))
    if len(run.snapshots.get(node, ())) > 1:
        figures.append(RunFigure(
            "Similarity during training",
            "The cosine heatmap at snapshots taken during training: press play or drag the "
            "slider to watch the pattern form from random rows.",
            snapshot_heatmaps(run, node)))
    figures.append(RunFigure(
        "Gradient per row",
        "The gradient norm each row received, summed over all steps: only the first "
        f"{T} rows are used by training sequences, so the rest receive exactly zero.",
        grad_norm_plot(run.row_grad_norm[node], T)))
    decay = run.config.weight_decay
    figures.append(RunFigure(
        "Drift from initialisation",
        "How far each row moved from its random start; " + (
            f"weight decay ({decay:g}) also pulls the untrained rows towards zero."
            if decay > 0 else "without weight decay the untrained rows do not move at all."),
        drift_plot(run.row_drift(node), T, decay)))
    figures.append(RunFigure(
        "PCA of the rows (2D)",
        "Each row as a point on the two directions along which the rows differ most, "
        "coloured by position and joined in order.",
        pca_plot(table, T, 2)))
    if table.shape[1] >= 3:
        figures.append(RunFigure(
            "PCA of the rows (3D)",
            "The same on three principal components: drag to rotate.",
            pca_plot(table, T, 3)))
    try:
        probe = analysis.length_probe(run)
    except StackError:  # the stack cannot take longer sequences (e.g. a linear over T)
        probe = None
    if probe is not None and run.task.n_classes(probe.probe_len) != run.task.n_classes(T):
        probe = None  # e.g. `position`: labels past T do not exist for the trained head
    if probe is not None and probe.probe_len > T:
        figures.append(RunFigure("Length probe", _probe_caption(probe, run.final["accuracy"]),
                                 length_probe_plot(probe)))
    figures.append(RunFigure(
        "Learned vs sinusoidal",
        f"The first {T} learned rows beside the fixed sinusoidal encoding of the same size: "
        "the sinusoidal table is alike for nearby positions by construction.",
        learned_vs_sinusoidal(table, T)))
    return figures


def _probe_caption(probe: analysis.LengthProbe, trained_accuracy: float) -> str:
    """Say what the probe shows: a cliff at T, or (e.g. for reverse) a collapse everywhere."""
    T, P = probe.trained_len, probe.probe_len
    if probe.inside >= trained_accuracy - 0.1:
        return (f"Accuracy at each position of {P}-long sequences, trained on {T}: positions "
                f"< {T} keep {probe.inside:.0%}, but the rows past T were never trained and "
                f"accuracy falls off a cliff to {probe.beyond:.0%}.")
    return (f"Accuracy at each position of {P}-long sequences, trained on {T}: even the "
            f"trained positions (< {T}) drop to {probe.inside:.0%} (from {trained_accuracy:.0%}), "
            f"because in a "
            f"longer sequence this task asks every position for something new (such as a "
            f"different partner), and past T the untrained rows give {probe.beyond:.0%}.")
