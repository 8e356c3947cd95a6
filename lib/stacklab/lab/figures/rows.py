"""Figures with one mark per row of a position table: gradient and drift bars, PCA."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from .. import measure as analysis
from .style import (HEIGHT, TRAINED_COLOR, UNTRAINED_COLOR, as_table, has_untrained,
                    mark_trained_len, as_float32)


MAX_BARS = 2048  # bars per chart: a longer table shows the largest value of each bin of rows


def _row_bars(values: np.ndarray, trained_len: int | None, name: str, hover: str) -> go.Bar:
    """One bar per row, or (past `MAX_BARS` rows) one per bin of rows showing the bin's
    largest value; bins never straddle T, so "exactly zero past T" stays exact."""
    n = values.shape[0]
    size = max(1, -(-n // MAX_BARS))
    if size == 1:
        colors = [TRAINED_COLOR if trained_len is None or i < trained_len else UNTRAINED_COLOR
                  for i in range(n)]
        return go.Bar(x=np.arange(n, dtype=np.int32), y=values, marker=dict(color=colors,
                      line=dict(width=0)), name=name,
                      hovertemplate=f"row %{{x}}<br>{hover} %{{y:.4g}}<extra></extra>")
    split = trained_len if trained_len is not None and 0 < trained_len < n else n
    starts = np.concatenate([np.arange(0, split, size), np.arange(split, n, size)])
    ends = np.append(starts[1:], n)
    peaks = np.maximum.reduceat(np.abs(values), starts)  # (bins,)
    colors = [TRAINED_COLOR if start < split else UNTRAINED_COLOR for start in starts]
    return go.Bar(x=(starts + ends - 1) / 2, y=peaks.astype(np.float32), width=ends - starts,
                  marker=dict(color=colors, line=dict(width=0)), name=name,
                  customdata=np.stack([starts, ends - 1], axis=1).astype(np.int32),
                  hovertemplate=(f"rows %{{customdata[0]}}-%{{customdata[1]}}<br>largest {hover} "
                                 "%{y:.4g}<extra></extra>"))


def _bins_note(n: int) -> str:
    size = -(-n // MAX_BARS)
    return "" if size <= 1 else f" (each bar: the largest of up to {size:,} rows)"


def _untrained_summary(values: np.ndarray, trained_len: int) -> tuple[bool, float]:
    beyond = values[trained_len:]
    return bool((beyond == 0).all()), float(np.abs(beyond).max()) if beyond.size else 0.0


def grad_norm_plot(row_grad_norm, trained_len: int) -> go.Figure:
    """Per-row gradient norm summed over training, with T marked: rows ``>= T`` get exactly 0."""
    values = as_float32(row_grad_norm)  # (max_len,)
    n = values.shape[0]
    fig = go.Figure(_row_bars(values, trained_len, "summed gradient norm", "summed ‖grad‖"))
    fig.update_layout(title=dict(text="Gradient reaching each row of the position table, "
                                      "summed over training steps" + _bins_note(n)),
                      xaxis_title="row (position)", yaxis_title="Σ over steps of ‖grad of row‖",
                      height=HEIGHT, showlegend=False, bargap=0.1)
    if has_untrained(trained_len, n):
        mark_trained_len(fig, trained_len, horizontal=False)
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
    values = as_float32(row_drift)  # (max_len,)
    n = values.shape[0]
    fig = go.Figure(_row_bars(values, trained_len, "drift", "‖W_now − W_init‖"))
    fig.update_layout(title=dict(text="How far each row moved from its initial value "
                                      f"(weight decay {weight_decay:g})" + _bins_note(n)),
                      xaxis_title="row (position)", yaxis_title="‖W_now[i] − W_init[i]‖",
                      height=HEIGHT, showlegend=False, bargap=0.1)
    if has_untrained(trained_len, n):
        mark_trained_len(fig, trained_len, horizontal=False)
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


def pca_plot(table, trained_len: int | None = None, dims: int = 2) -> go.Figure:
    """The rows projected on their 2 or 3 leading principal components, coloured by position.

    The components are those of the trained rows (``< trained_len``); the untrained rows
    are projected on them. A thin line joins consecutive positions; trained rows are dots,
    untrained rows open diamonds. Axis titles give each component's share of the trained
    rows' variance.
    """
    if dims not in (2, 3):
        raise ValueError(f"dims must be 2 or 3, not {dims!r}")
    table = as_table(table)
    n = table.shape[0]
    fit = trained_len if has_untrained(trained_len, n) else None
    result = analysis.pca(table, dims, fit_rows=fit)
    coords = as_float32(result.coords)  # (N, k)
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
    split = trained_len if has_untrained(trained_len, n) else n
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
