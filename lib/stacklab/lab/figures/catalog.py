"""The figures of a run, declared as data: one `FigureSpec` per figure, in reading order.

`stacklab.lab.figures.drawing` loops over `FIGURES` (`run_figures`, and `figures_of_table`
for a table from a file); the Explore page, ``report.html`` and Compare show what it returns.
Adding a figure is one declaration here: a key, a title, its group (one of `GROUPS`, the
tab of Explore and the part of ``report.html`` it shows in), when it applies, a caption and
the function that draws it, each given the run's `FigureContext`, and, when the figure
needs only the table, how a table from a file shows it (`OnTable`, given a `TableContext`).
Tasks, Compare and pages name a figure by its key (`figure_spec`), never by its title.
A figure that does not apply says why (`FigureSpec.why_not`), so Compare can say it
where another run has it. A figure of several runs at once is a `ComparedFigureSpec` in
`COMPARED_FIGURES`, given the runs as `ComparedRun`s (the Compare page and
``comparison.html`` both show it). What the functions are given lives in `context`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, NamedTuple, Sequence

import plotly.graph_objects as go

from .. import measure as analysis
from ..measure import run_scores
from ..tasks import TASKS
from .captions import (attention_score, drift_score, grad_score, head_scores_caption,
                       heads_caption, held_out_score, largest_head_score, lengths_caption,
                       lengths_score, probe_caption, probe_score, rows_alone_caption,
                       without_table_score)
from .curves import (cosine_by_distance_plot, length_generalization_plot, length_probe_plot,
                     lengths_compared_plot, offset_scores_plot, training_curves)
from .heatmaps import (attention_heatmap, attention_snapshot_heatmaps, learned_vs_sinusoidal,
                       positional_attention_heatmap, rows_alone_heatmap, similarity_heatmap,
                       sinusoidal_resemblance, snapshot_heatmaps)
from .head_grids import head_scores_heatmaps, heads_attention_grid
from .rows import drift_plot, grad_norm_plot, pca_plot
from .offsets import OFFSET_CAPTION, OFFSET_TITLE, offset_encoding_plot, run_offset_curves, variance_text
from .context import FigureContext, TableContext


class RunFigure(NamedTuple):
    """One figure of a run's report: a title, a one-sentence caption, the figure, and the
    number that goes with it ("partner attention 0.71 (at init 0.06)"; may be empty);
    the `FigureSpec.key` it was drawn from, and whether the stack could not give it (then
    the figure only says why, and so does the caption)."""

    title: str
    caption: str
    figure: go.Figure
    score: str = ""
    key: str = ""  # empty for a figure not drawn from the catalog
    skipped: bool = False


@dataclass(frozen=True)
class OnTable:
    """How a figure that needs only the table shows a table from a file: its caption, how
    it is drawn and its score, each given the table's `TableContext`."""

    caption: Callable[[TableContext], str]
    draw: Callable[[TableContext], go.Figure]
    score: Callable[[TableContext], str] = lambda table: ""


# The groups a page shows the figures in (Explore's tabs), in their order; each figure
# names its own (`FigureSpec.group`).
GROUPS: tuple[str, ...] = ("The pattern", "The position table", "Attention by layer and head",
                           "Gradients", "Lengths", "Training")


@dataclass(frozen=True)
class FigureSpec:
    """One figure: its key, title, when it applies, its caption, how it is drawn, its score.

    ``key`` is the short stable name that tasks, Compare and pages use (`figure_spec`);
    the title may be reworded freely. ``draw`` may raise `StackError` when the stack cannot
    give the figure (e.g. rows that cannot pass the ops before the attention): the figure
    is then skipped with its reason in words, in place. ``group``: one of `GROUPS`, where
    a page shows it."""

    key: str
    title: str
    caption: Callable[[FigureContext], str]
    draw: Callable[[FigureContext], go.Figure]
    group: str = field(kw_only=True)
    applies: Callable[[FigureContext], bool] = lambda ctx: True
    # why the figure is left out when it does not apply, in words ("no attention in this
    # stack"); a figure that needs a table and meets a stack without one says so itself
    why_not: Callable[[FigureContext], str] = lambda ctx: "it does not apply to this run"
    needs_table: bool = True  # only for runs with a learned position table
    score: Callable[[FigureContext], str] = lambda ctx: ""
    aligns_with: str | None = None  # Compare shows it in the row of this key (default: its own)
    on_table: OnTable | None = None  # also drawn for a table from a file


def _no_attention_or(reason: str, ctx: FigureContext) -> str:
    """Why a figure of a table-less stack is left out: ``reason`` when the stack has a table."""
    return reason if ctx.run.position_nodes else "no attention in this stack"


FIGURES: tuple[FigureSpec, ...] = (
    FigureSpec(
        "training_curves", "Training curves",
        lambda ctx: "Held-out loss and accuracy (and the loss of each training batch) as "
                    "training went on.",
        lambda ctx: training_curves(ctx.run.history, ctx.run.train_loss),
        group="Training",
        applies=lambda ctx: bool(ctx.run.history), needs_table=False,
        why_not=lambda ctx: "no held-out evaluation was recorded",
        score=lambda ctx: f"final held-out accuracy {ctx.run.final['accuracy']:.2f}"),
    FigureSpec(
        "length_generalization", "Length generalization",
        lambda ctx: lengths_caption(ctx.run),
        lambda ctx: length_generalization_plot(ctx.run.length_generalization, ctx.T),
        group="Lengths",
        applies=lambda ctx: bool(ctx.run.length_generalization), needs_table=False,
        why_not=lambda ctx: "the run was not evaluated at other lengths (eval_lengths empty)",
        score=lambda ctx: lengths_score(ctx.run)),
    FigureSpec(
        "attention_without_table", "Attention by position alone (no table)",
        lambda ctx: "This stack has no learned position table, so each position gets its input "
                    "averaged over held-out sequences: the tokens average out, and only "
                    f"{ctx.position_markers} can tell the positions apart. What to look for: "
                    f"{ctx.run.task.pattern}",
        lambda ctx: positional_attention_heatmap(
            ctx.without_table[1], ctx.without_table[0],
            title=f"Attention by position alone in {ctx.without_table[0]} (position="
                  f"\"{ctx.attention_position}\"), tokens averaged out"),
        group="The pattern",
        applies=lambda ctx: not ctx.run.position_nodes and ctx.without_table is not None,
        why_not=lambda ctx: _no_attention_or("this stack has a learned position table", ctx),
        needs_table=False,
        score=lambda ctx: without_table_score(ctx.run),
        aligns_with="attention_by_position"),  # Compare: beside the other runs' map
    FigureSpec(
        "offset_scores", "Attention score by offset",
        lambda ctx: "The score a key gets for being a given distance to the left or right of the "
                    "query, per head, with each position's input averaged over held-out "
                    "sequences: what the position encodings add (flat without any).",
        lambda ctx: offset_scores_plot(ctx.without_table[2], ctx.without_table[0],
                                       ctx.attention_position),
        group="The pattern",
        applies=lambda ctx: not ctx.run.position_nodes and ctx.without_table is not None,
        why_not=lambda ctx: _no_attention_or("only for a stack without a learned position table",
                                             ctx),
        needs_table=False),
    FigureSpec(
        "offset_encoding", OFFSET_TITLE, lambda ctx: OFFSET_CAPTION,
        lambda ctx: offset_encoding_plot(run_offset_curves(ctx.run)),
        group="The position table",
        applies=lambda ctx: bool(run_offset_curves(ctx.run)), needs_table=False,
        why_not=lambda ctx: "no rotary or ALiBi attention in this stack"),
    FigureSpec(
        "cosine", "Cosine similarity of the rows",
        lambda ctx: f"How alike each pair of rows of {ctx.node}'s table points"
                    f"{ctx.untrained_note}. {ctx.look_for}",
        lambda ctx: similarity_heatmap(ctx.table, "cosine", ctx.T, title=(
            f"Cosine similarity of {ctx.node}'s rows (task {ctx.run.task.name})")),
        group="The position table",
        score=lambda ctx: ctx.score("pattern" if ctx.table_pattern else "translation_invariance"),
        on_table=OnTable(
            lambda table: f"How alike each pair of rows of {table.name} points.",
            lambda table: similarity_heatmap(table.shown, "cosine",
                                             title=f"Cosine similarity of {table.title_name}'s rows"),
            lambda table: table.score("distance_rank", "distance rank"))),
    FigureSpec(
        "cosine_by_distance", "Cosine by distance",
        lambda ctx: "The mean cosine of all row pairs the same distance apart, trained and at "
                    "init: the heatmap's diagonals as one curve, readable at any length. "
                    "Monotonicity: how steadily it falls with distance (1: always).",
        lambda ctx: cosine_by_distance_plot(ctx.scores["cosine_by_distance"]["value"],
                                            ctx.scores["cosine_by_distance"]["init"], ctx.node),
        group="The position table",
        applies=lambda ctx: ctx.T > 2,
        why_not=lambda ctx: f"T = {ctx.T} is too short for distances",
        score=lambda ctx: ctx.score("monotonicity"),
        on_table=OnTable(
            lambda table: "The mean cosine of all row pairs the same distance apart.",
            lambda table: cosine_by_distance_plot(table.scores["cosine_by_distance"], None,
                                                  table.title_name),
            lambda table: table.score("monotonicity", "monotonicity"))),
    FigureSpec(
        "dot", "Dot-product similarity of the rows",
        lambda ctx: "The same comparison without normalising, so rows that grew long during "
                    "training stand out. Translation invariance: how much of it depends only on "
                    "the distance between the rows (1: all of it).",
        lambda ctx: similarity_heatmap(ctx.table, "dot", ctx.T,
                                       title=f"Dot product of {ctx.node}'s rows"),
        group="The position table",
        score=lambda ctx: ctx.score("translation_invariance"),
        on_table=OnTable(
            lambda table: "The same without normalising: long rows stand out.",
            lambda table: similarity_heatmap(table.shown, "dot",
                                             title=f"Dot product of {table.title_name}'s rows"),
            lambda table: table.score("translation_invariance", "translation invariance"))),
    FigureSpec(
        "rows_alone", "Each row alone through the rest of the stack",
        rows_alone_caption,
        lambda ctx: rows_alone_heatmap(analysis.rows_alone_scores(ctx.run, ctx.node), ctx.node),
        group="The pattern",
        applies=lambda ctx: (run_scores.pattern_needs(ctx.run.task)
                             == run_scores.ROWS_THROUGH_STACK),
        why_not=lambda ctx: f"only for a task read from each row alone (not {ctx.run.task.name})",
        score=lambda ctx: ctx.score("pattern")),
    FigureSpec(
        "attention_by_position", "Attention by position alone",
        lambda ctx: "Each row is a position asking \"where should I look?\" using only its row "
                    "of the table, sent through the ops before the attention and its query and "
                    f"key projections (rows sum to 1). What to look for: {ctx.run.task.pattern}",
        lambda ctx: positional_attention_heatmap(ctx.positional_attention, ctx.node),
        group="The pattern",
        applies=lambda ctx: ctx.has_attention,
        why_not=lambda ctx: "no attention after the position table",
        score=attention_score),
    FigureSpec(
        "attention_during_training", "Attention by position during training",
        lambda ctx: "The map above at snapshots taken during training: press play or drag the "
                    "slider to watch the positions find their partners.",
        lambda ctx: attention_snapshot_heatmaps(ctx.run, ctx.node),
        group="The pattern",
        applies=lambda ctx: len(ctx.run.attention_snapshots.get(ctx.node, ())) > 1,
        why_not=lambda ctx: "fewer than two snapshots of the attention were kept (a short run)",
        score=attention_score),
    FigureSpec(
        "attention_held_out", "Attention on held-out data",
        lambda ctx: f"Where attention actually looked, averaged over {ctx.attention_map[1]} "
                    "held-out sequences: when it matches the map by position, the model finds "
                    "its partner by position.",
        lambda ctx: attention_heatmap(*ctx.attention_map),
        group="The pattern",
        applies=lambda ctx: ctx.has_attention,
        why_not=lambda ctx: "no attention after the position table",
        score=held_out_score),
    FigureSpec(
        "heads_attention", "Attention by layer and head",
        heads_caption,
        lambda ctx: heads_attention_grid(*ctx.one_sequence, ctx.head_scores, ctx.copy_note),
        group="Attention by layer and head",
        applies=lambda ctx: ctx.has_any_attention, needs_table=False,
        why_not=lambda ctx: "no attention in this stack",
        score=largest_head_score),
    FigureSpec(
        "head_scores", "Head scores",
        head_scores_caption,
        lambda ctx: head_scores_heatmaps(ctx.head_scores),
        group="Attention by layer and head",
        applies=lambda ctx: ctx.has_any_attention, needs_table=False,
        why_not=lambda ctx: "no attention in this stack",
        score=largest_head_score),
    FigureSpec(
        "similarity_during_training", "Similarity during training",
        lambda ctx: "The cosine heatmap at snapshots taken during training: press play or drag "
                    "the slider to watch the pattern form from random rows.",
        lambda ctx: snapshot_heatmaps(ctx.run, ctx.node),
        group="The position table",
        applies=lambda ctx: len(ctx.run.snapshots.get(ctx.node, ())) > 1,
        why_not=lambda ctx: "fewer than two snapshots of the table were kept (a short run)"),
    FigureSpec(
        "gradient", "Gradient per row",
        lambda ctx: "The gradient norm each row received, summed over all steps: only the "
                    f"first {ctx.T} rows are used by training sequences, so the rest receive "
                    "exactly zero.",
        lambda ctx: grad_norm_plot(ctx.run.row_grad_norm[ctx.node], ctx.T),
        group="Gradients",
        score=grad_score),
    FigureSpec(
        "drift", "Drift from initialisation",
        lambda ctx: "How far each row moved from its random start; " + (
            f"weight decay ({ctx.run.config.weight_decay:g}) also pulls the untrained rows "
            "towards zero." if ctx.run.config.weight_decay > 0 else
            "without weight decay the untrained rows do not move at all."),
        lambda ctx: drift_plot(ctx.run.row_drift(ctx.node), ctx.T, ctx.run.config.weight_decay),
        group="Gradients",
        score=drift_score),
    FigureSpec(
        "pca_2d", "PCA of the rows (2D)",
        lambda ctx: "Each row as a point on the two directions along which the trained rows "
                    "differ most (the untrained rows projected on them), coloured by position "
                    "and joined in order. The probe error: how far, in positions, a linear "
                    "read-out of the index from a row is off.",
        lambda ctx: pca_plot(ctx.table, ctx.T, 2),
        group="The position table",
        score=lambda ctx: ctx.score("position_probe_error"),
        on_table=OnTable(
            lambda table: "Each row on the two directions along which the rows differ most.",
            lambda table: pca_plot(table.shown[:table.rows], None, 2),
            lambda table: table.score("position_probe_error", "position probe error"))),
    FigureSpec(
        "pca_3d", "PCA of the rows (3D)",
        lambda ctx: "The same on three principal components: drag to rotate.",
        lambda ctx: pca_plot(ctx.table, ctx.T, 3),
        group="The position table",
        applies=lambda ctx: ctx.table.shape[1] >= 3,
        why_not=lambda ctx: "the table has fewer than 3 columns",
        on_table=OnTable(lambda table: "The same on three principal components.",
                         lambda table: pca_plot(table.shown[:table.rows], None, 3),
                         lambda table: variance_text(table.shown[:table.rows]))),
    FigureSpec(
        "length_probe", "Length probe",
        probe_caption,
        lambda ctx: length_probe_plot(ctx.probe),
        group="Lengths",
        applies=lambda ctx: ctx.spare_rows,
        why_not=lambda ctx: f"the table has no rows past T = {ctx.T}: nothing to probe",
        score=probe_score),
    FigureSpec(
        "learned_vs_sinusoidal", "Learned vs sinusoidal",
        lambda ctx: f"The first {ctx.T} learned rows beside the fixed sinusoidal encoding of "
                    "the same size, each as the centred cosine of its rows (the mean row "
                    "subtracted, or the sinusoid's nearly constant slow columns make every pair "
                    "look alike). r: how alike the two maps are (1: the same pattern).",
        lambda ctx: learned_vs_sinusoidal(ctx.table, ctx.T),
        group="The position table",
        applies=lambda ctx: ctx.T > 2,
        why_not=lambda ctx: f"T = {ctx.T} is too short to compare",
        score=lambda ctx: f"resemblance to the sinusoid r = "
                          f"{sinusoidal_resemblance(ctx.table[:ctx.T]):.2f}",
        on_table=OnTable(
            lambda table: "The table's centred cosine beside the sinusoidal table of the same "
                          "size.",
            lambda table: learned_vs_sinusoidal(table.values[:table.rows], table.rows),
            lambda table: table.score("sinusoid_resemblance", "resemblance to the sinusoid r ="))),
)


class ComparedRun(NamedTuple):
    """One run as a figure of several runs sees it (Compare): its label, its trained length
    and its ``metrics.json``."""

    label: str
    seq_len: int
    metrics: dict


@dataclass(frozen=True)
class ComparedFigureSpec:
    """A figure of several runs at once, for the Compare page and ``comparison.html``: its
    key, title, caption and drawing, each given the `ComparedRun`s; when it applies and why
    not; and the figure of one run that it stands for there (``replaces``: Compare shows
    this one in place of that figure's row of panels)."""

    key: str
    title: str
    caption: Callable[[Sequence[ComparedRun]], str]
    draw: Callable[[Sequence[ComparedRun]], go.Figure]
    applies: Callable[[Sequence[ComparedRun]], bool]
    why_not: Callable[[Sequence[ComparedRun]], str]
    replaces: str | None = None


COMPARED_FIGURES: tuple[ComparedFigureSpec, ...] = (
    ComparedFigureSpec(
        "lengths_compared", "Length generalization: every run on one plot",
        lambda runs: "Held-out accuracy at each position of each evaluated length, every run "
                     "in its colour and each length in its dash. Positions past the dashed "
                     "line at T were never trained; the legend gives a longer length's "
                     "accuracy past T (the table's \"past T\" columns) and over all of its "
                     "positions (\"overall\").",
        lambda runs: lengths_compared_plot([(run.label, run.seq_len,
                                             run.metrics.get("length_generalization", {}))
                                            for run in runs]),
        applies=lambda runs: any(run.metrics.get("length_generalization") for run in runs),
        why_not=lambda runs: "no run was evaluated at other lengths (eval_lengths empty)",
        replaces="length_generalization"),
)

_BY_KEY = {spec.key: spec for spec in FIGURES}
assert len(_BY_KEY) == len(FIGURES), "two figures share a key"
assert all(spec.group in GROUPS for spec in FIGURES), "a figure's group is not one of GROUPS"


def figure_spec(key: str) -> FigureSpec:
    """The figure of `FIGURES` named ``key``; a `KeyError` that lists the keys otherwise."""
    try:
        return _BY_KEY[key]
    except KeyError:
        raise KeyError(f"no figure {key!r} in FIGURES; the figures: {', '.join(_BY_KEY)}") from None


def _check_tasks() -> None:
    """Every task's pattern figure is a key of `FIGURES`: a wrong one fails on import, not
    in the middle of a run."""
    for task in TASKS.values():
        figure_spec(task.pattern_figure)


_check_tasks()

