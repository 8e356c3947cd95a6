"""Figures along steps, positions or distances: the training curves, the length probe
and the cosine by distance."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .. import analysis
from .style import HEIGHT, TRAINED_COLOR, UNTRAINED_COLOR, mark_trained_len, as_float32


def length_probe_plot(probe: analysis.LengthProbe) -> go.Figure:
    """Held-out accuracy at each position of longer sequences, trained and with the position
    tables at their initial values (the baseline), the trained length marked."""
    T = probe.trained_len
    x = np.arange(probe.probe_len, dtype=np.int32)
    fig = go.Figure([
        go.Scatter(x=x, y=as_float32(probe.baseline), mode="lines", name="tables at init",
                   line=dict(color="rgba(120,120,120,0.8)", dash="dot"),
                   hovertemplate="position %{x}<br>tables at init: %{y:.1%}<extra></extra>"),
        go.Scatter(x=x, y=as_float32(probe.accuracy), mode="lines+markers", name="trained",
                   line=dict(color=TRAINED_COLOR),
                   hovertemplate="position %{x}<br>accuracy %{y:.1%}<extra></extra>"),
    ])
    fig.update_layout(
        title=dict(text=f"Length probe: trained on T = {T}, tested on {probe.probe_len} positions"),
        xaxis_title="position in the sequence", yaxis=dict(title="held-out accuracy",
                                                           range=[0, 1.05], tickformat=".0%"),
        height=HEIGHT, legend=dict(orientation="h", y=-0.15))
    if probe.probe_len > T:
        fig.add_vrect(x0=T - 0.5, x1=probe.probe_len - 0.5, fillcolor=UNTRAINED_COLOR,
                      opacity=0.08, line_width=0)
        mark_trained_len(fig, T, horizontal=False)
        fig.add_annotation(
            x=(T + probe.probe_len) / 2 - 0.5, y=0.5, yref="paper", showarrow=False,
            text=(f"past T: {probe.beyond:.0%} (tables at init {probe.baseline_beyond:.0%})<br>"
                  f"inside T: {probe.inside:.0%} (tables at init {probe.baseline_inside:.0%})"),
            bgcolor="rgba(255,255,255,0.85)", bordercolor="#888")
    return fig


def length_generalization_plot(found: dict[str, dict], trained_len: int) -> go.Figure:
    """Held-out accuracy at each position, one line per evaluated length (`Run.length_generalization`),
    the trained length marked; lengths the stack could not take are named in the title."""
    fig = go.Figure()
    palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
               "#17becf"]
    measured = [(int(length), entry) for length, entry in found.items() if "per_position" in entry]
    for index, (length, entry) in enumerate(sorted(measured)):
        fig.add_trace(go.Scatter(
            x=np.arange(length, dtype=np.int32), y=as_float32(entry["per_position"]),
            mode="lines", name=f"length {length}: {entry['accuracy']:.0%}",
            line=dict(color=palette[index % len(palette)], width=3 if length == trained_len else 1.5),
            hovertemplate=f"length {length}<br>position %{{x}}<br>accuracy %{{y:.1%}}<extra></extra>"))
    refused = [length for length, entry in found.items() if "error" in entry]
    title = f"Accuracy per position at each length (trained on T = {trained_len})"
    if refused:
        title += f"; not measured at {', '.join(refused)} (see the caption)"
    fig.update_layout(title=dict(text=title), xaxis_title="position in the sequence",
                      yaxis=dict(title="held-out accuracy", range=[0, 1.05], tickformat=".0%"),
                      height=HEIGHT, legend=dict(orientation="h", y=-0.15))
    if any(length > trained_len for length, _ in measured):
        mark_trained_len(fig, trained_len, horizontal=False)
    return fig


def offset_scores_plot(by_offset, name: str, position: str) -> go.Figure:
    """The attention score each key-minus-query offset gets, one line per head
    (`analysis.attention_without_table`): RoPE's waves, ALiBi's straight penalties, the
    learned buckets of a relative bias, or flat lines without any encoding."""
    by_offset = as_float32(by_offset)  # (H, 2T-1)
    T = (by_offset.shape[1] + 1) // 2
    offsets = np.arange(-(T - 1), T, dtype=np.int32)
    fig = go.Figure([go.Scatter(x=offsets, y=row, mode="lines", name=f"head {head}",
                                hovertemplate=f"head {head}<br>offset %{{x}}<br>score %{{y:.3f}}"
                                              "<extra></extra>")
                     for head, row in enumerate(by_offset)])
    fig.add_vline(x=0, line=dict(color="#999", width=1))
    fig.update_layout(title=dict(text=f"Attention score by offset in {name} "
                                      f"(position=\"{position}\"), tokens averaged out"),
                      xaxis_title="key position minus query position (negative: to the left)",
                      yaxis_title="score before the softmax (mean over queries)",
                      height=HEIGHT, legend=dict(orientation="h", y=-0.15))
    return fig


def cosine_by_distance_plot(trained: Sequence[float], init: Sequence[float] | None = None,
                            node: str = "the table") -> go.Figure:
    """Mean cosine of row pairs at each distance 1..T-1 (`scores.cosine_by_distance`),
    trained and at init: a curve that reads the same at any table length."""
    distance = np.arange(1, len(trained) + 1, dtype=np.int32)
    traces = []
    if init is not None:
        traces.append(go.Scatter(x=distance, y=as_float32(init), mode="lines", name="at init",
                                 line=dict(color="rgba(120,120,120,0.8)", dash="dot"),
                                 hovertemplate="distance %{x}<br>at init %{y:.3f}<extra></extra>"))
    traces.append(go.Scatter(x=distance, y=as_float32(trained), mode="lines+markers",
                             name="trained", line=dict(color=TRAINED_COLOR),
                             hovertemplate="distance %{x}<br>mean cosine %{y:.3f}<extra></extra>"))
    fig = go.Figure(traces)
    fig.add_hline(y=0, line=dict(color="#999", width=1))
    fig.update_layout(title=dict(text=f"Mean cosine of {node}'s row pairs by their distance"),
                      xaxis_title="distance between the rows (positions)",
                      yaxis=dict(title="mean cosine", range=[-1.05, 1.05]), height=HEIGHT,
                      legend=dict(orientation="h", y=-0.15))
    return fig


def training_curves(history: Sequence[dict], train_loss: Sequence[tuple[int, float]] | None = None
                    ) -> go.Figure:
    """Held-out loss (log scale) and accuracy against the step; the training loss optionally."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08,
                        subplot_titles=("loss", "held-out accuracy"))
    if train_loss:
        steps, losses = zip(*train_loss)
        fig.add_trace(go.Scatter(x=np.asarray(steps, dtype=np.int32), y=as_float32(losses),
                                 mode="lines", name="training loss (one batch)",
                                 line=dict(color="rgba(150,150,150,0.7)", width=1),
                                 hovertemplate="step %{x}<br>training loss %{y:.4g}<extra></extra>"),
                      row=1, col=1)
    steps = np.asarray([entry["step"] for entry in history], dtype=np.int32)
    fig.add_trace(go.Scatter(x=steps, y=as_float32([entry["loss"] for entry in history]),
                             mode="lines+markers", name="held-out loss",
                             line=dict(color=UNTRAINED_COLOR),
                             hovertemplate="step %{x}<br>held-out loss %{y:.4g}<extra></extra>"),
                  row=1, col=1)
    fig.add_trace(go.Scatter(x=steps, y=as_float32([entry["accuracy"] for entry in history]),
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
