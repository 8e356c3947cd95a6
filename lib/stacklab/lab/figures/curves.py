"""Figures along steps, positions or distances: the training curves, the length probe
and the cosine by distance."""

from __future__ import annotations

import copy
import functools
import html
import math
from typing import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .. import measure as analysis
from . import plotly_private
from .access import LINE_COLOURS as PALETTE
from .style import (HEIGHT, TRAINED_COLOR, UNTRAINED_COLOR, SharedFigure, as_float32,
                    mark_trained_len)


def length_probe_plot(probe: analysis.LengthProbe) -> go.Figure:
    """Held-out accuracy at each position of longer sequences, trained and with the position
    tables at their initial values (the baseline), the trained length marked."""
    T = probe.trained_len
    x = np.arange(probe.probe_len, dtype=np.int32)
    fig = go.Figure([
        go.Scatter(x=x, y=as_float32(probe.baseline), mode="lines", name="tables at init",
                   line=dict(color="rgba(120,120,120,0.8)", dash="dot"),
                   hovertemplate="position %{x}<br>tables at init: %{y:.2f}<extra></extra>"),
        go.Scatter(x=x, y=as_float32(probe.accuracy), mode="lines+markers", name="trained",
                   line=dict(color=TRAINED_COLOR),
                   hovertemplate="position %{x}<br>accuracy %{y:.2f}<extra></extra>"),
    ])
    fig.update_layout(
        title=dict(text=f"Length probe: trained on T = {T}, tested on {probe.probe_len} positions"),
        xaxis_title="position in the sequence", yaxis=dict(title="held-out accuracy",
                                                           range=[0, 1.05], tickformat=".1f"),
        height=HEIGHT, legend=dict(orientation="h", y=-0.15))
    if probe.probe_len > T:
        fig.add_vrect(x0=T - 0.5, x1=probe.probe_len - 0.5, fillcolor=UNTRAINED_COLOR,
                      opacity=0.08, line_width=0)
        mark_trained_len(fig, T, horizontal=False)
        fig.add_annotation(
            x=(T + probe.probe_len) / 2 - 0.5, y=0.5, yref="paper", showarrow=False,
            text=(f"past T: {probe.beyond:.2f} (tables at init {probe.baseline_beyond:.2f})<br>"
                  f"inside T: {probe.inside:.2f} (tables at init {probe.baseline_inside:.2f})"),
            bgcolor="rgba(255,255,255,0.85)", bordercolor="#888")
    return fig


def length_generalization_plot(found: dict[str, dict], trained_len: int) -> go.Figure:
    """Held-out accuracy at each position, one line per evaluated length (`Run.length_generalization`),
    the trained length marked; lengths the stack could not take are named in the title."""
    fig = go.Figure()
    measured = [(int(length), entry) for length, entry in found.items() if "per_position" in entry]
    for index, (length, entry) in enumerate(sorted(measured)):
        fig.add_trace(go.Scatter(
            x=np.arange(length, dtype=np.int32), y=as_float32(entry["per_position"]),
            mode="lines", name=_length_words(length, entry, trained_len),
            line=dict(color=PALETTE[index % len(PALETTE)], width=3 if length == trained_len else 1.5),
            hovertemplate=f"length {length}<br>position %{{x}}<br>accuracy %{{y:.2f}}<extra></extra>"))
    refused = [length for length, entry in found.items() if "error" in entry]
    title = f"Accuracy per position at each length (trained on T = {trained_len})"
    if refused:
        title += f"; not measured at {', '.join(refused)} (see the caption)"
    fig.update_layout(title=dict(text=title), xaxis_title="position in the sequence",
                      yaxis=dict(title="held-out accuracy", range=[0, 1.05], tickformat=".1f"),
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
                                line=dict(color=PALETTE[head % len(PALETTE)]),
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


def loss_axis(values: Sequence[float]) -> dict:
    """A loss axis whose labels read: log scale with ticks at 1, 10, 100 (and 2, 5 between
    them when the losses span two decades or less), or a linear axis when they span less
    than one; plotly's own log ticks label every digit ("1 9 8 7 6 5 4 3 2")."""
    positive = [float(v) for v in values if v is not None and v > 0 and math.isfinite(v)]
    if not positive or max(positive) < 10 * min(positive):
        return dict(title_text="cross-entropy", type="linear", rangemode="tozero")
    low, high = math.floor(math.log10(min(positive))), math.ceil(math.log10(max(positive)))
    steps = (1, 2, 5) if high - low <= 2 else (1,)
    ticks = [step * 10.0 ** power for power in range(low, high + 1) for step in steps]
    ticks = [tick for tick in ticks if min(positive) / 2 <= tick <= max(positive) * 2]
    return dict(title_text="cross-entropy (log scale)", type="log", tickvals=ticks,
                ticktext=[f"{tick:g}" for tick in ticks])


# the training curves' two rows of plots, sharing one step axis
CURVES_GRID = dict(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08,
                   subplot_titles=("loss", "held-out accuracy"))


@functools.cache
def _curves_grid() -> dict:
    """`CURVES_GRID` made by make_subplots once: a figure per evaluation of every run the
    server follows would spend half its time there."""
    return plotly_private.dict_with_grid(make_subplots(**CURVES_GRID))


CURVE_POINTS = 200  # a curve drawn at most at this many steps: a chart is 300-700 px wide


def thinned(points: Sequence, most: int = CURVE_POINTS) -> Sequence:
    """``points`` at an even stride, at most ``most`` of them, the last one kept: a run's
    loss at every step would make its curves 200 KB by step 20,000, sent again at each poll
    of a run followed live.

    >>> [p for p in thinned(list(range(10)), 4)]
    [0, 3, 6, 9]
    """
    if len(points) <= most:
        return points
    stride = -(-(len(points) - 1) // (most - 1))  # ceil: at most `most` points
    kept = list(points[::stride])
    return kept if kept[-1] == points[-1] else kept + [points[-1]]


def training_curves(history: Sequence[dict], train_loss: Sequence[tuple[int, float]] | None = None
                    ) -> go.Figure:
    """Held-out loss (log scale) and accuracy against the step; the training loss optionally.

    Drawn once per evaluation of a run that pages follow, so written as the figure's dict
    (about 0.3 ms, where plotly's own calls took 9) and read without plotly's check of every
    property, as a `SharedFigure`, which every watcher's page shows; `tests/test_figures.py`
    checks it against the figure plotly's calls make, and plotly's check of it."""
    grid = _curves_grid()
    layout = {name: copy.deepcopy(value) if name != "template" else value  # the template read only
              for name, value in grid["layout"].items()}
    spec = {**grid, "layout": layout}
    traces = []
    if train_loss:
        steps, losses = zip(*thinned(train_loss))
        traces.append(dict(type="scatter", x=np.asarray(steps, dtype=np.int32),
                           y=as_float32(losses), mode="lines", name="training loss (one batch)",
                           line=dict(color="rgba(150,150,150,0.7)", width=1),
                           hovertemplate="step %{x}<br>training loss %{y:.4g}<extra></extra>",
                           xaxis="x", yaxis="y"))
    shown = thinned(history)  # the losses below still set the axis from every evaluation
    steps = np.asarray([entry["step"] for entry in shown], dtype=np.int32)
    traces.append(dict(type="scatter", x=steps, y=as_float32([entry["loss"] for entry in shown]),
                       mode="lines+markers", name="held-out loss", line=dict(color=UNTRAINED_COLOR),
                       hovertemplate="step %{x}<br>held-out loss %{y:.4g}<extra></extra>",
                       xaxis="x", yaxis="y"))
    traces.append(dict(type="scatter", x=steps,
                       y=as_float32([entry["accuracy"] for entry in shown]),
                       mode="lines+markers", name="held-out accuracy",
                       line=dict(color=TRAINED_COLOR),
                       hovertemplate="step %{x}<br>accuracy %{y:.2f}<extra></extra>",
                       xaxis="x2", yaxis="y2"))
    losses = [entry["loss"] for entry in history] + [loss for _, loss in train_loss or ()]
    axis = loss_axis(losses)
    layout["yaxis"].update({name: value for name, value in axis.items() if name != "title_text"},
                           title={"text": axis["title_text"]})
    layout["yaxis2"].update(title={"text": "accuracy"}, range=[0, 1.05], tickformat=".1f")
    layout["xaxis2"].update(title={"text": "training step"})
    layout.update(title={"text": "Training curves"}, height=HEIGHT,
                  legend={"orientation": "h", "y": -0.15})
    spec["data"] = traces
    return plotly_private.regridded(SharedFigure(spec, validate=False), CURVES_GRID)


DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")


def past_trained(entry: dict, trained_len: int) -> float | None:
    """The mean accuracy of one length's positions ``>= trained_len`` (positions no
    sequence labels, null, left out); None when there are none."""
    past = [value for value in entry.get("per_position", ())[trained_len:] if value is not None]
    return sum(past) / len(past) if past else None


def lengths_compared_plot(series: Sequence[tuple[str, int, dict[str, dict]]]) -> go.Figure:
    """Every run's accuracy per position at each evaluated length on one plot: one colour
    per run, one dash per length, each run's trained length marked. ``series``: (label,
    trained length T, `Run.length_generalization`) per run. A legend entry says both numbers
    of a longer length: the accuracy past T and over all its positions."""
    fig = go.Figure()
    lengths = sorted({int(length) for _, _, found in series for length in found})
    for index, (label, T, found) in enumerate(series):
        color, shown = PALETTE[index % len(PALETTE)], html.escape(label, quote=False)
        for length, entry in sorted((int(k), v) for k, v in found.items() if "per_position" in v):
            fig.add_trace(go.Scatter(
                x=np.arange(length, dtype=np.int32), y=as_float32(entry["per_position"]),
                mode="lines", name=f"{shown} · {_length_words(length, entry, T)}",
                line=dict(color=color, dash=DASHES[lengths.index(length) % len(DASHES)],
                          width=2.5 if length == T else 1.8),
                hovertemplate=f"run {index + 1}, length {length}<br>position %{{x}}<br>accuracy "
                              "%{y:.2f}<extra></extra>"))
    for T in sorted({T for _, T, found in series if any(int(k) > T for k in found)}):
        mark_trained_len(fig, T, horizontal=False)
    fig.update_layout(title=dict(text="Accuracy per position at each length, every run "
                                      "(colour: run; dash: length)"),
                      xaxis_title="position in the sequence",
                      yaxis=dict(title="held-out accuracy", range=[0, 1.05], tickformat=".1f"),
                      height=HEIGHT + 60, legend=dict(orientation="h", y=-0.18))
    return fig


def _length_words(length: int, entry: dict, trained_len: int) -> str:
    """A legend entry: ``length 32: 0.80 past T, 0.87 overall`` (overall alone at T or less)."""
    past = past_trained(entry, trained_len) if length > trained_len else None
    overall = f"{entry['accuracy']:.2f} overall"
    return f"length {length}: " + (f"{past:.2f} past T, {overall}" if past is not None else overall)
