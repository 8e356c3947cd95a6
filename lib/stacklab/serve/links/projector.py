"""What present mode shows of a run: for a task whose pattern is a head score
(``induction``), the best head's own attention pattern first, the grid of head scores one
step away.

>>> import stacklab
>>> run = stacklab.train(task="induction", steps=4, eval_every=2)
>>> figure, words = best_head_figure(run)
>>> figure.data[0].zmin, figure.data[0].zmax, words.startswith("largest induction score")
(0.0, 1.0, True)
"""

from __future__ import annotations

import html

import plotly.graph_objects as go

from ...core.errors import StackError
from ...lab.figures.heatmaps import ATTENTION_COLORS
from ...lab.figures.style import HEIGHT, as_float32, heatmap_layout, heatmap_trace
from ...lab.measure import head_scores as head_analysis
from ...lab.measure.head_scores import head_score_label


def best_head(scores: dict, name: str) -> tuple[float, str, int, int] | None:
    """``(value, node, layer, head)`` of the head with the largest ``name`` score, or None."""
    found = [(head[name]["value"], node, entry["layer"], h)
             for node, entry in scores.items() for h, head in enumerate(entry["heads"])
             if name in head and head[name]["value"] is not None]
    return max(found) if found else None


def best_head_figure(run, name: str | None = None) -> tuple[go.Figure, str] | None:
    """The attention of the head with the largest ``name`` score (default: the task's pattern
    score) on the first held-out sequence, on the fixed 0-1 scale, and the score in words;
    None for a stack without that head score (or a stored run that no longer reads). A
    stored run (`StoredRun`) is loaded for it."""
    if not hasattr(run, "head_scores"):
        try:
            run = run.load()
        except StackError:
            return None
    name = name or run.task.pattern_score
    best = best_head(run.head_scores(), name)
    if best is None:
        return None
    value, node, layer, head = best
    tokens, weights = head_analysis.one_sequence_attention(run)  # [T], {node: [H, T, T]}
    z = as_float32(weights[node][head])
    fig = go.Figure(heatmap_trace(z, x_title="key", y_title="query",
                                  value_text="attention weight", colors=ATTENTION_COLORS))
    words = " ".join(map(str, tokens[:16].tolist()))
    fig.update_layout(title=dict(text=html.escape(
        f"The best {head_score_label(name)} head (layer {layer}, head {head}) on: {words}",
        quote=False)), height=HEIGHT)
    heatmap_layout(fig, x_title="key position (attended to)", y_title="query position (attending)")
    return fig, f"largest {head_score_label(name)} score {value:.2f} (layer {layer}, head {head})"
