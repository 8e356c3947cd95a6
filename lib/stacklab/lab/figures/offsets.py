"""Figures of real models' positions: what an offset alone gives a query–key
pair in a rotary or ALiBi model (a real config's or a stacklab run's, side by side), the
cosine heatmap of every row at full resolution (on demand: the catalog's is zoomed), and
the share of variance the top principal components explain (GPT-2's helix)."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from .. import measure as analysis
from ..models.offsets import OffsetCurves, stack_offset_curves
from .curves import DASHES, PALETTE
from .style import (HEIGHT, KIND_TEXT, T_LINE, as_float32, as_table, check_kind, has_untrained,
                    heatmap_layout, heatmap_trace, mark_trained_len, similarity_colors)

MAX_FULL_ROWS = 2048  # a full heatmap of 2048² float32 cells is ~22 MB of JSON: on demand only
MAX_POINTS = 4096  # points per line: longer curves are sampled evenly (offset 0 kept)
OFFSET_TITLE = "What an offset alone gives (rotary and ALiBi)"
OFFSET_CAPTION = ("For rotary positions, the similarity a query and key with the same content "
                  "get from their offset alone (the mean over rotated feature pairs of "
                  "cos(offset·θ_i); 1 at offset 0); for ALiBi, the bias each head adds at each "
                  "offset. The dashed line marks the trained length: past it the model never saw "
                  "those offsets in training.")


def _sampled(offsets: np.ndarray) -> np.ndarray:
    step = max(1, -(-len(offsets) // MAX_POINTS))
    return np.arange(0, len(offsets), step)


def offset_encoding_plot(curves: Sequence[OffsetCurves]) -> go.Figure:
    """Every `OffsetCurves` on one figure: one colour per model, one dash per line of it
    (scaling, or head); each model's trained length a dashed line in its colour."""
    fig = go.Figure()
    kinds = {curve.kind for curve in curves}
    for number, curve in enumerate(curves):
        color = PALETTE[number % len(PALETTE)]
        keep = _sampled(curve.offsets)
        for line, (name, values) in enumerate(curve.lines.items()):
            fig.add_trace(go.Scatter(
                x=as_float32(curve.offsets[keep]), y=as_float32(values[keep]), mode="lines",
                name=f"{curve.label}: {name}", line=dict(color=color,
                                                         dash=DASHES[line % len(DASHES)]),
                hovertemplate=f"{curve.label}, {name}<br>offset %{{x}}<br>%{{y:.3f}}<extra></extra>"))
        if curve.trained_len:
            fig.add_vline(x=curve.trained_len, line=dict(T_LINE, color=color),
                          annotation_text=f"{curve.label}: trained {curve.trained_len:,}")
    value = (" / ".join(["similarity from the offset" if k == "rotary" else "ALiBi bias"
                         for k in sorted(kinds, reverse=True)]))
    fig.update_layout(title=dict(text="What an offset alone gives a query–key pair: "
                                      + "; ".join(f"{c.label} ({c.about})" for c in curves)),
                      xaxis_title="offset (key positions from the query)", yaxis_title=value,
                      height=HEIGHT, legend=dict(orientation="h", y=-0.2))
    return fig


def run_offset_curves(run) -> list[OffsetCurves]:
    """The `OffsetCurves` of each rotary or ALiBi attention of a stacklab ``run``."""
    found = []
    for name, layer in run.model.layers("attention"):
        if getattr(layer, "position", "none") in ("rope", "alibi"):
            width = layer.qkv.in_features
            found.append(stack_offset_curves(layer.heads, width // layer.heads, layer.position,
                                             run.config.seq_len, f"{name} ({layer.position})"))
    return found


def full_similarity_heatmap(table, kind: str = "cosine", trained_len: int | None = None,
                            title: str | None = None) -> go.Figure:
    """Every pair of rows (up to `MAX_FULL_ROWS`), not zoomed: the catalog's ``cosine``
    figure at full resolution, drawn on demand (``stacklab explore --full``)."""
    check_kind(kind)
    table = as_table(table)
    n = min(table.shape[0], MAX_FULL_ROWS)
    z = analysis.similarity(table[:n], kind).numpy()  # (n, n)
    fig = go.Figure(heatmap_trace(z, x_title="row", y_title="row", value_text=KIND_TEXT[kind],
                                  colors=similarity_colors(kind, z)))
    cut = "" if n == table.shape[0] else f" (the first {n:,} of {table.shape[0]:,} rows)"
    fig.update_layout(title=dict(text=(title or f"{KIND_TEXT[kind].capitalize()} of every "
                                       "pair of position rows, full resolution") + cut),
                      height=max(HEIGHT, 800))
    heatmap_layout(fig, x_title="row j", y_title="row i")
    if has_untrained(trained_len, n):
        mark_trained_len(fig, trained_len, horizontal=True)
    return fig


def variance_text(table, components: int = 3) -> str:
    """``"top 3 components explain 41%, 22%, 9% of the variance"``: how much of the rows'
    spread the PCA figures show (GPT-2's helix lives in its top three)."""
    shares = [float(v) for v in analysis.pca(as_table(table), components).explained]
    return (f"top {len(shares)} components explain "
            + ", ".join(f"{share:.0%}" for share in shares) + " of the variance")
