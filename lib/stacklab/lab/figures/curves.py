"""Figures along steps or positions: the training curves and the length probe."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .. import analysis
from .style import HEIGHT, TRAINED_COLOR, UNTRAINED_COLOR, mark_trained_len, as_float32


def length_probe_plot(probe: analysis.LengthProbe) -> go.Figure:
    """Held-out accuracy at each position of longer sequences: the cliff past the trained length."""
    accuracy = as_float32(probe.accuracy)  # (probe_len,)
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
        mark_trained_len(fig, T, 1, horizontal=False)
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
