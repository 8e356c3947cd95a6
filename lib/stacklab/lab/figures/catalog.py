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
from .. import scores as S
from .curves import (cosine_by_distance_plot, length_generalization_plot, length_probe_plot,
                     offset_scores_plot, training_curves)
from .heatmaps import (attention_heatmap, attention_snapshot_heatmaps, learned_vs_sinusoidal,
                       positional_attention_heatmap, rows_alone_heatmap, similarity_heatmap,
                       sinusoidal_resemblance, snapshot_heatmaps)
from .rows import drift_plot, grad_norm_plot, pca_plot
from .style import MAX_TABLE_ROWS


class RunFigure(NamedTuple):
    """One figure of a run's report: a title, a one-sentence caption, the figure, and the
    number that goes with it ("partner attention 0.71 (at init 0.06)"; may be empty)."""

    title: str
    caption: str
    figure: go.Figure
    score: str = ""


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
    def scores(self) -> dict:
        """`analysis.position_table_scores` of the table shown."""
        return self.run.position_table_scores()[self.node]

    def score(self, name: str) -> str:
        if name == "pattern" and self.run.initial_scores:
            return analysis.score_text(self.pattern_only, name)  # the live figure: cheap
        return analysis.score_text(self.scores, name)

    @cached_property
    def pattern_only(self) -> dict:
        """The task's pattern score alone (trained and at init), in the form of `scores`:
        what the live pattern figure shows at each evaluation, without every other score."""
        init = self.run.initial_scores.get(self.node, {})
        entry = {"pattern": {"name": self.run.task.pattern_score, "value": None,
                             "init": init.get("pattern")}}
        try:
            entry["pattern"]["value"] = analysis.pattern_score(self.run.task, self.run.model,
                                                               self.node, self.T)
        except StackError as err:
            entry["skipped"] = {"pattern": err.message}
        return entry

    @cached_property
    def positional_attention(self):
        """`analysis.positional_attention` of the table (None when no attention follows);
        raises `StackError` when the rows cannot reach the attention."""
        return analysis.positional_attention(self.run, self.node)

    @property
    def has_attention(self) -> bool:
        return analysis.attention_after(self.run.model, self.node) is not None

    @cached_property
    def attention_map(self):
        """`analysis.attention_map`: (weights, number of sequences)."""
        return analysis.attention_map(self.run, self.node)

    @cached_property
    def without_table(self):
        """`analysis.attention_without_table` (for a stack with no position table)."""
        return analysis.attention_without_table(self.run)

    @property
    def position_markers(self) -> str:
        """What tells positions apart in a stack without a table, in words."""
        name = self.without_table[0]
        nodes = self.run.network.nodes
        earlier = nodes[:[n.name for n in nodes].index(name)]
        before = [n.op for n in earlier if n.spec.encodes_positions is not None
                  and n.spec.role != "position_table" and n.spec.encodes_positions(n.args)]
        found = [f"the {op} before the attention" for op in dict.fromkeys(before)]
        if self.attention_position != "none":
            found.append(f"position=\"{self.attention_position}\" inside it")
        if self.run.model.get_submodule(name).causal:
            found.append("the causal mask")
        return " and ".join(found) if found else "nothing (so every position looks alike)"

    @property
    def attention_position(self) -> str:
        name = self.without_table[0]
        return getattr(self.run.model.get_submodule(name), "position", "none")

    @cached_property
    def probe(self) -> analysis.LengthProbe:
        """The length probe (`analysis.length_probe`); `StackError` when it does not apply."""
        return analysis.length_probe(self.run)

    @property
    def spare_rows(self) -> bool:
        """Does every position table have rows past T (something for the length probe)?"""
        return all(self.run.model.get_submodule(n).max_len > self.T
                   for n in self.run.position_nodes)

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

    @property
    def table_pattern(self) -> bool:
        """Is the task's pattern score one of the rows alone (not of attention or the head)?"""
        return self.run.task.pattern_score in ("period_contrast", "distance_rank")


@dataclass(frozen=True)
class FigureSpec:
    """One figure: its title, when it applies, its caption, how it is drawn and its score.

    ``draw`` may raise `StackError` when the stack cannot give the figure (e.g. rows that
    cannot pass the ops before the attention): the figure is then skipped with its reason
    in words, in place."""

    title: str
    caption: Callable[[FigureContext], str]
    draw: Callable[[FigureContext], go.Figure]
    applies: Callable[[FigureContext], bool] = lambda ctx: True
    needs_table: bool = True  # only for runs with a learned position table
    score: Callable[[FigureContext], str] = lambda ctx: ""


def _probe_caption(ctx: FigureContext) -> str:
    probe = ctx.probe
    T, P = probe.trained_len, probe.probe_len
    return (f"Accuracy at each position of {P}-long sequences, trained on {T}, beside the same "
            f"model with its position tables at their initial values (dotted). Past T the "
            f"rows were never trained: {probe.beyond:.0%} there against {probe.inside:.0%} "
            f"inside T; the baseline gets {probe.baseline_beyond:.0%} and "
            f"{probe.baseline_inside:.0%}.")


def _probe_score(ctx: FigureContext) -> str:
    probe = ctx.probe
    return (f"accuracy inside T {probe.inside:.0%}, past T {probe.beyond:.0%} "
            f"(tables at init: {probe.baseline_inside:.0%}, {probe.baseline_beyond:.0%})")


def _attention_score(ctx: FigureContext) -> str:
    return ctx.score("pattern" if ctx.run.task.partner else "symmetry")


def _held_out_score(ctx: FigureContext) -> str:
    partner = ctx.run.task.partner
    if partner is None:
        return ""
    weights, _ = ctx.attention_map
    return f"partner attention on held-out data {S.partner_attention(weights, partner(ctx.T)):.2f}"


def _rows_alone_caption(ctx: FigureContext) -> str:
    table, initial = ctx.run.table(ctx.node)[:ctx.T], ctx.run.initial_tables[ctx.node][:ctx.T]
    return (f"Row t of {ctx.node} fed alone (no token) through the rest of the stack: the "
            "class it picks. A bright diagonal means each row alone says its own position. "
            f"Training grew the rows (mean norm {initial.norm(dim=1).mean():.2f} at init, "
            f"{table.norm(dim=1).mean():.2f} now) and turned them towards the head's class "
            "directions; their cosine map hardly changed.")


def _without_table_score(run) -> str:
    found = run.attention_pattern()
    if found is None:
        return ""
    pattern = found["pattern"]
    return (f"partner attention {pattern['value']:.2f} (at init {pattern['init']:.2f})"
            if pattern["value"] is not None else "")


def _lengths_caption(run) -> str:
    T = run.config.seq_len
    parts = [f"Held-out accuracy at each position of sequences of other lengths, trained on "
             f"T = {T} (the thick line): past T a learned table has only untrained rows, "
             "while encodings of distance (RoPE, ALiBi, relative) may carry on."]
    for length, entry in run.length_generalization.items():
        if "error" in entry:
            parts.append(f"Length {length} not measured: {entry['error'].rstrip('.')}.")
        elif "note" in entry:
            parts.append(f"At length {length} the labels change meaning: {entry['note']}.")
            break
    return " ".join(parts)


def _lengths_score(run) -> str:
    return "; ".join(f"length {length}: " + (f"{entry['accuracy']:.0%}" if "accuracy" in entry
                                               else "beyond capacity")
                     for length, entry in run.length_generalization.items())


def _drift_score(ctx: FigureContext) -> str:
    drift = ctx.run.row_drift(ctx.node)
    text = f"mean drift of the trained rows {drift[:ctx.T].mean():.3g}"
    return text + (f", of the rest {drift[ctx.T:].mean():.3g}" if drift.shape[0] > ctx.T else "")


def _grad_score(ctx: FigureContext) -> str:
    grad = ctx.run.row_grad_norm[ctx.node]
    if grad.shape[0] <= ctx.T:
        return ""
    beyond = grad[ctx.T:].abs().max().item()
    return "largest gradient past T: " + ("exactly 0" if beyond == 0 else f"{beyond:.3g}")


FIGURES: tuple[FigureSpec, ...] = (
    FigureSpec(
        "Training curves",
        lambda ctx: "Held-out loss and accuracy (and the loss of each training batch) as "
                    "training went on.",
        lambda ctx: training_curves(ctx.run.history, ctx.run.train_loss),
        applies=lambda ctx: bool(ctx.run.history), needs_table=False,
        score=lambda ctx: f"final held-out accuracy {ctx.run.final['accuracy']:.1%}"),
    FigureSpec(
        "Length generalization",
        lambda ctx: _lengths_caption(ctx.run),
        lambda ctx: length_generalization_plot(ctx.run.length_generalization, ctx.T),
        applies=lambda ctx: bool(ctx.run.length_generalization), needs_table=False,
        score=lambda ctx: _lengths_score(ctx.run)),
    FigureSpec(
        "Attention by position alone (no table)",
        lambda ctx: "This stack has no learned position table, so each position gets its input "
                    "averaged over held-out sequences: the tokens average out, and only "
                    f"{ctx.position_markers} can tell the positions apart. What to look for: "
                    f"{ctx.run.task.pattern}",
        lambda ctx: positional_attention_heatmap(
            ctx.without_table[1], ctx.without_table[0],
            title=f"Attention by position alone in {ctx.without_table[0]} (position="
                  f"\"{ctx.attention_position}\"), tokens averaged out"),
        applies=lambda ctx: not ctx.run.position_nodes and ctx.without_table is not None,
        needs_table=False,
        score=lambda ctx: _without_table_score(ctx.run)),
    FigureSpec(
        "Attention score by offset",
        lambda ctx: "The score a key gets for being a given distance to the left or right of the "
                    "query, per head, with each position's input averaged over held-out "
                    "sequences: what the position encodings add (flat without any).",
        lambda ctx: offset_scores_plot(ctx.without_table[2], ctx.without_table[0],
                                       ctx.attention_position),
        applies=lambda ctx: not ctx.run.position_nodes and ctx.without_table is not None,
        needs_table=False),
    FigureSpec(
        "Cosine similarity of the rows",
        lambda ctx: f"How alike each pair of rows of {ctx.node}'s table points"
                    f"{ctx.untrained_note}. {ctx.look_for}",
        lambda ctx: similarity_heatmap(ctx.table, "cosine", ctx.T, title=(
            f"Cosine similarity of {ctx.node}'s rows (task {ctx.run.task.name})")),
        score=lambda ctx: ctx.score("pattern" if ctx.table_pattern else "translation_invariance")),
    FigureSpec(
        "Cosine by distance",
        lambda ctx: "The mean cosine of all row pairs the same distance apart, trained and at "
                    "init: the heatmap's diagonals as one curve, readable at any length. "
                    "Monotonicity: how steadily it falls with distance (1: always).",
        lambda ctx: cosine_by_distance_plot(ctx.scores["cosine_by_distance"]["value"],
                                            ctx.scores["cosine_by_distance"]["init"], ctx.node),
        applies=lambda ctx: ctx.T > 2,
        score=lambda ctx: ctx.score("monotonicity")),
    FigureSpec(
        "Dot-product similarity of the rows",
        lambda ctx: "The same comparison without normalising, so rows that grew long during "
                    "training stand out. Translation invariance: how much of it depends only on "
                    "the distance between the rows (1: all of it).",
        lambda ctx: similarity_heatmap(ctx.table, "dot", ctx.T,
                                       title=f"Dot product of {ctx.node}'s rows"),
        score=lambda ctx: ctx.score("translation_invariance")),
    FigureSpec(
        "Each row alone through the rest of the stack",
        _rows_alone_caption,
        lambda ctx: rows_alone_heatmap(analysis.rows_alone_scores(ctx.run, ctx.node), ctx.node),
        applies=lambda ctx: ctx.run.task.pattern_score == "rows_decoded",
        score=lambda ctx: ctx.score("pattern")),
    FigureSpec(
        "Attention by position alone",
        lambda ctx: "Each row is a position asking \"where should I look?\" using only its row "
                    "of the table, sent through the ops before the attention and its query and "
                    f"key projections (rows sum to 1). What to look for: {ctx.run.task.pattern}",
        lambda ctx: positional_attention_heatmap(ctx.positional_attention, ctx.node),
        applies=lambda ctx: ctx.has_attention,
        score=_attention_score),
    FigureSpec(
        "Attention by position during training",
        lambda ctx: "The map above at snapshots taken during training: press play or drag the "
                    "slider to watch the positions find their partners.",
        lambda ctx: attention_snapshot_heatmaps(ctx.run, ctx.node),
        applies=lambda ctx: len(ctx.run.attention_snapshots.get(ctx.node, ())) > 1,
        score=_attention_score),
    FigureSpec(
        "Attention on held-out data",
        lambda ctx: f"Where attention actually looked, averaged over {ctx.attention_map[1]} "
                    "held-out sequences: when it matches the map by position, the model finds "
                    "its partner by position.",
        lambda ctx: attention_heatmap(*ctx.attention_map),
        applies=lambda ctx: ctx.has_attention,
        score=_held_out_score),
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
        lambda ctx: grad_norm_plot(ctx.run.row_grad_norm[ctx.node], ctx.T),
        score=_grad_score),
    FigureSpec(
        "Drift from initialisation",
        lambda ctx: "How far each row moved from its random start; " + (
            f"weight decay ({ctx.run.config.weight_decay:g}) also pulls the untrained rows "
            "towards zero." if ctx.run.config.weight_decay > 0 else
            "without weight decay the untrained rows do not move at all."),
        lambda ctx: drift_plot(ctx.run.row_drift(ctx.node), ctx.T, ctx.run.config.weight_decay),
        score=_drift_score),
    FigureSpec(
        "PCA of the rows (2D)",
        lambda ctx: "Each row as a point on the two directions along which the trained rows "
                    "differ most (the untrained rows projected on them), coloured by position "
                    "and joined in order. The probe error: how far, in positions, a linear "
                    "read-out of the index from a row is off.",
        lambda ctx: pca_plot(ctx.table, ctx.T, 2),
        score=lambda ctx: ctx.score("position_probe_error")),
    FigureSpec(
        "PCA of the rows (3D)",
        lambda ctx: "The same on three principal components: drag to rotate.",
        lambda ctx: pca_plot(ctx.table, ctx.T, 3),
        applies=lambda ctx: ctx.table.shape[1] >= 3),
    FigureSpec(
        "Length probe",
        _probe_caption,
        lambda ctx: length_probe_plot(ctx.probe),
        applies=lambda ctx: ctx.spare_rows,
        score=_probe_score),
    FigureSpec(
        "Learned vs sinusoidal",
        lambda ctx: f"The first {ctx.T} learned rows beside the fixed sinusoidal encoding of "
                    "the same size, each as the centred cosine of its rows (the mean row "
                    "subtracted, or the sinusoid's nearly constant slow columns make every pair "
                    "look alike). r: how alike the two maps are (1: the same pattern).",
        lambda ctx: learned_vs_sinusoidal(ctx.table, ctx.T),
        applies=lambda ctx: ctx.T > 2,
        score=lambda ctx: f"resemblance to the sinusoid r = "
                          f"{sinusoidal_resemblance(ctx.table[:ctx.T]):.2f}"),
)


def _context(run, node: str | None) -> FigureContext:
    nodes = run.position_nodes
    return FigureContext(run, node if node in nodes else (nodes[0] if nodes else None))


def _skipped(title: str, reason: str) -> go.Figure:
    fig = go.Figure()
    fig.add_annotation(text=f"Not drawn: {reason}", x=0.5, y=0.5, xref="paper", yref="paper",
                       showarrow=False, font=dict(size=14))
    fig.update_layout(title=dict(text=f"{title}: not drawn"), height=160,
                      xaxis=dict(visible=False), yaxis=dict(visible=False))
    return fig


def _drawn(spec: FigureSpec, ctx: FigureContext) -> RunFigure:
    """``spec`` drawn for ``ctx``; skipped with its reason when the stack cannot give it."""
    try:
        figure = spec.draw(ctx)
        return RunFigure(spec.title, spec.caption(ctx), figure, spec.score(ctx))
    except StackError as err:
        reason = err.message.rstrip(".")
        return RunFigure(spec.title, f"Skipped: {reason}. {err.hint}".strip(),
                         _skipped(spec.title, reason))


def pattern_figure(run, node: str | None = None) -> RunFigure | None:
    """The figure where the run's task shows its pattern (``Task.pattern_figure``), drawn
    from the model as it is now, so a page can show it forming; the cosine map when that
    figure does not apply or cannot be drawn; for a stack without a position table, its
    attention by position alone; None when there is nothing to show."""
    ctx = _context(run, node)
    wanted = ((run.task.pattern_figure, "Cosine similarity of the rows") if ctx.node is not None
              else ("Attention by position alone (no table)",))
    for title in wanted:
        spec = next(s for s in FIGURES if s.title == title)
        if (ctx.node is not None or not spec.needs_table) and spec.applies(ctx):
            drawn = _drawn(spec, ctx)
            if not drawn.caption.startswith("Skipped"):
                return drawn
    return None


def run_figures(run, node: str | None = None) -> list[RunFigure]:
    """Every figure of `FIGURES` that applies to ``run``, in reading order, for ``node``
    (default: its first position table), each with its score.

    With no learned position table only the training curves remain; the attention maps
    need an attention after the table; the length probe needs spare rows past T. A figure
    the stack cannot give is skipped in place, with its reason.
    """
    ctx = _context(run, node)
    return [_drawn(spec, ctx) for spec in FIGURES
            if (ctx.node is not None or not spec.needs_table) and spec.applies(ctx)]


def figures_json(run) -> dict:
    """Every figure of ``run``, for each of its position tables, and its pattern figure, as
    plotly JSON (``{"pattern": [title, caption, json] | None, "nodes": {node: [...]}}``, node
    ``""`` for a run without a table): what a worker stores with a run, so the server that
    shows it draws nothing and reads none of its tensors (`figures_from_json`)."""

    def encoded(figures):
        return [[f.title, f.caption, f.figure.to_json(), f.score] for f in figures]

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
    return [RunFigure(title, caption, pio.from_json(figure), *score)
            for title, caption, figure, *score in found]
