"""The figures of a run, declared as data: one `FigureSpec` per figure, in reading order.

`run_figures` loops over `FIGURES`; the Explore page and ``report.html`` show what it
returns. Adding a figure is one declaration here: a title, when it applies, a caption
and the function that draws it, each given the run's `FigureContext`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Callable, NamedTuple

import plotly.graph_objects as go
import plotly.io as pio

from ...core.errors import StackError
from .. import analysis
from .curves import length_probe_plot, training_curves
from .heatmaps import (attention_heatmap, learned_vs_sinusoidal, positional_attention_heatmap,
                       similarity_heatmap, snapshot_heatmaps)
from .rows import drift_plot, grad_norm_plot, pca_plot
from .style import MAX_TABLE_ROWS


class RunFigure(NamedTuple):
    """One figure of a run's report: a title, a one-sentence caption and the figure."""

    title: str
    caption: str
    figure: go.Figure


class FigureContext:
    """What the figures of one run share, each part computed once (on first use)."""

    def __init__(self, run, node: str | None):
        self.run = run
        self.node = node  # the position table shown (None: the run has none)
        self.T = run.config.seq_len

    @cached_property
    def table(self):
        """The table's first rows (a huge table is cut to `MAX_TABLE_ROWS`): ``[N, D]``."""
        return self.run.table(self.node)[:MAX_TABLE_ROWS]

    @cached_property
    def positional_attention(self):
        """`analysis.positional_attention` of the table (None when no attention follows)."""
        return analysis.positional_attention(self.run, self.node)

    @cached_property
    def probe(self) -> analysis.LengthProbe | None:
        """The length probe, when the stack takes longer inputs, the table has spare rows and
        the task's labels past T mean the same as within it."""
        try:
            probe = analysis.length_probe(self.run)
        except StackError:  # the stack cannot take longer sequences (e.g. a linear over T)
            return None
        task = self.run.task
        if task.n_classes(probe.probe_len) != task.n_classes(self.T):
            return None  # e.g. `position`: labels past T do not exist for the trained head
        return probe if probe.probe_len > self.T else None

    @property
    def untrained_note(self) -> str:
        return (f"; rows ≥ {self.T} (past the dashed lines) were never trained"
                if self.table.shape[0] > self.T else "")

    @property
    def look_for(self) -> str:
        task = self.run.task
        if not task.mixing:
            return f"What to look for: {task.pattern}"
        return ("In this task positions must find each other, so the pattern shows in the "
                "attention maps below; the rows themselves need not look alike.")


@dataclass(frozen=True)
class FigureSpec:
    """One figure: its title, when it applies, its caption and how it is drawn."""

    title: str
    caption: Callable[[FigureContext], str]
    draw: Callable[[FigureContext], go.Figure]
    applies: Callable[[FigureContext], bool] = lambda ctx: True
    needs_table: bool = True  # only for runs with a learned position table


def _probe_caption(ctx: FigureContext) -> str:
    """Say what the probe shows: a cliff at T, or (e.g. for reverse) a collapse everywhere."""
    probe, trained_accuracy = ctx.probe, ctx.run.final["accuracy"]
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


def _has_attention(ctx: FigureContext) -> bool:
    return ctx.positional_attention is not None


FIGURES: tuple[FigureSpec, ...] = (
    FigureSpec(
        "Training curves",
        lambda ctx: "Held-out loss and accuracy (and the loss of each training batch) as "
                    "training went on.",
        lambda ctx: training_curves(ctx.run.history, ctx.run.train_loss),
        applies=lambda ctx: bool(ctx.run.history), needs_table=False),
    FigureSpec(
        "Cosine similarity of the rows",
        lambda ctx: f"How alike each pair of rows of {ctx.node}'s table points"
                    f"{ctx.untrained_note}. {ctx.look_for}",
        lambda ctx: similarity_heatmap(ctx.table, "cosine", ctx.T, title=(
            f"Cosine similarity of {ctx.node}'s rows (task {ctx.run.task.name})"))),
    FigureSpec(
        "Dot-product similarity of the rows",
        lambda ctx: "The same comparison without normalising, so rows that grew long during "
                    "training stand out.",
        lambda ctx: similarity_heatmap(ctx.table, "dot", ctx.T,
                                       title=f"Dot product of {ctx.node}'s rows")),
    FigureSpec(
        "Attention by position alone",
        lambda ctx: "Each row is a position asking \"where should I look?\" using only its row "
                    "of the table, through the attention's query and key projections (rows "
                    f"sum to 1). What to look for: {ctx.run.task.pattern}",
        lambda ctx: positional_attention_heatmap(ctx.positional_attention, ctx.node),
        applies=_has_attention),
    FigureSpec(
        "Attention on held-out data",
        lambda ctx: "Where attention actually looked, averaged over 256 held-out sequences: "
                    "when it matches the map above, the model finds its partner by position.",
        lambda ctx: attention_heatmap(ctx.run),
        applies=_has_attention),
    FigureSpec(
        "Similarity during training",
        lambda ctx: "The cosine heatmap at snapshots taken during training: press play or drag "
                    "the slider to watch the pattern form from random rows.",
        lambda ctx: snapshot_heatmaps(ctx.run, ctx.node),
        applies=lambda ctx: len(ctx.run.snapshots.get(ctx.node, ())) > 1),
    FigureSpec(
        "Gradient per row",
        lambda ctx: "The gradient norm each row received, summed over all steps: only the "
                    f"first {ctx.T} rows are used by training sequences, so the rest receive "
                    "exactly zero.",
        lambda ctx: grad_norm_plot(ctx.run.row_grad_norm[ctx.node], ctx.T)),
    FigureSpec(
        "Drift from initialisation",
        lambda ctx: "How far each row moved from its random start; " + (
            f"weight decay ({ctx.run.config.weight_decay:g}) also pulls the untrained rows "
            "towards zero." if ctx.run.config.weight_decay > 0 else
            "without weight decay the untrained rows do not move at all."),
        lambda ctx: drift_plot(ctx.run.row_drift(ctx.node), ctx.T, ctx.run.config.weight_decay)),
    FigureSpec(
        "PCA of the rows (2D)",
        lambda ctx: "Each row as a point on the two directions along which the rows differ "
                    "most, coloured by position and joined in order.",
        lambda ctx: pca_plot(ctx.table, ctx.T, 2)),
    FigureSpec(
        "PCA of the rows (3D)",
        lambda ctx: "The same on three principal components: drag to rotate.",
        lambda ctx: pca_plot(ctx.table, ctx.T, 3),
        applies=lambda ctx: ctx.table.shape[1] >= 3),
    FigureSpec(
        "Length probe",
        _probe_caption,
        lambda ctx: length_probe_plot(ctx.probe),
        applies=lambda ctx: ctx.probe is not None),
    FigureSpec(
        "Learned vs sinusoidal",
        lambda ctx: f"The first {ctx.T} learned rows beside the fixed sinusoidal encoding of "
                    "the same size: the sinusoidal table is alike for nearby positions by "
                    "construction.",
        lambda ctx: learned_vs_sinusoidal(ctx.table, ctx.T)),
)


def _context(run, node: str | None) -> FigureContext:
    nodes = run.position_nodes
    return FigureContext(run, node if node in nodes else (nodes[0] if nodes else None))


def pattern_figure(run, node: str | None = None) -> RunFigure | None:
    """The figure where the run's task shows its pattern (``Task.pattern_figure``), drawn
    from the model as it is now, so a page can show it forming; the cosine map when that
    figure does not apply (no attention after the table); None without a position table."""
    ctx = _context(run, node)
    if ctx.node is None:
        return None
    wanted = (run.task.pattern_figure, "Cosine similarity of the rows")
    for title in wanted:
        spec = next(s for s in FIGURES if s.title == title)
        if spec.applies(ctx):
            return RunFigure(spec.title, spec.caption(ctx), spec.draw(ctx))
    return None


def run_figures(run, node: str | None = None) -> list[RunFigure]:
    """Every figure of `FIGURES` that applies to ``run``, in reading order, for ``node``
    (default: its first position table).

    With no learned position table only the training curves remain; the attention maps
    need an attention after the table; the length probe needs spare rows past T.
    """
    ctx = _context(run, node)
    return [RunFigure(spec.title, spec.caption(ctx), spec.draw(ctx)) for spec in FIGURES
            if (ctx.node is not None or not spec.needs_table) and spec.applies(ctx)]


def figures_json(run) -> dict:
    """Every figure of ``run``, for each of its position tables, and its pattern figure, as
    plotly JSON (``{"pattern": [title, caption, json] | None, "nodes": {node: [...]}}``, node
    ``""`` for a run without a table): what a worker stores with a run, so the server that
    shows it draws nothing and reads none of its tensors (`figures_from_json`)."""

    def encoded(figures):
        return [[title, caption, figure.to_json()] for title, caption, figure in figures]

    pattern = pattern_figure(run)
    return {"pattern": encoded([pattern])[0] if pattern is not None else None,
            "nodes": {node: encoded(run_figures(run, node))
                      for node in run.position_nodes or [""]}}


def figures_from_json(drawn: dict, node: str | None = None) -> list[RunFigure] | None:
    """The figures of ``node`` (default: the first) in ``figures_json``'s ``drawn``; the
    pattern figure for ``node="pattern"``; None when ``drawn`` lacks them."""
    if node == "pattern":
        found = [drawn["pattern"]] if drawn.get("pattern") else []
    else:
        nodes = drawn.get("nodes", {})
        found = nodes.get(node) if node is not None else next(iter(nodes.values()), None)
    if found is None:
        return None
    return [RunFigure(title, caption, pio.from_json(figure)) for title, caption, figure in found]
