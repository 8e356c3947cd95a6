"""The catalog drawn: every figure of `FIGURES` that applies to a run (`run_figures`), its
pattern figure (`pattern_figure`), the figures a table from a file shows
(`figures_of_table`), and all of a run's figures as the JSON a worker stores with it
(`figures_json`, read back by `figures_from_json`)."""

from __future__ import annotations

import json
from typing import NamedTuple

import plotly.graph_objects as go

from ...core.errors import StackError
from .catalog import (COMPARED_FIGURES, FIGURES, GROUPS, ComparedRun, FigureContext, FigureSpec, OnTable,
                      RunFigure, TableContext, figure_spec)
from .style import fit_title, shared

# The pattern figure when the task's own does not apply or cannot be drawn, and the one of a
# stack without a position table (`pattern_figure`).
PATTERN_FALLBACK = "cosine"
PATTERN_WITHOUT_TABLE = "attention_without_table"
NO_TABLE = "no learned position table (pos_embed) in this stack"  # why its figures are left out


def _context(run, node: str | None) -> FigureContext:
    nodes = run.position_nodes
    return FigureContext(run, node if node in nodes else (nodes[0] if nodes else None))


def _applies(spec: FigureSpec, ctx: FigureContext) -> bool:
    return (ctx.node is not None or not spec.needs_table) and spec.applies(ctx)


def _skipped(title: str, reason: str) -> go.Figure:
    fig = go.Figure()
    fig.add_annotation(text=f"Not drawn: {reason}", x=0.5, y=0.5, xref="paper", yref="paper",
                       showarrow=False, font=dict(size=14))
    fig.update_layout(title=dict(text=f"{title}: not drawn"), height=160,
                      xaxis=dict(visible=False), yaxis=dict(visible=False))
    return fig


def _drawn(spec: FigureSpec, ctx, how: FigureSpec | OnTable | None = None) -> RunFigure:
    """``spec`` drawn for ``ctx`` the way ``how`` says (default: the spec's own caption,
    drawing and score; ``spec.on_table`` for a table from a file); skipped with its reason
    when the stack cannot give it."""
    how = how or spec
    try:
        figure = fit_title(how.draw(ctx))  # a long title wraps, at the width a notebook draws
        return RunFigure(spec.title, how.caption(ctx), figure, how.score(ctx), spec.key)
    except StackError as err:
        reason = err.message.rstrip(".")
        return RunFigure(spec.title, f"Skipped: {reason}. {err.hint}".strip(),
                         _skipped(spec.title, reason), "", spec.key, skipped=True)


def pattern_figure(run, node: str | None = None) -> RunFigure | None:
    """The figure where the run's task shows its pattern (``Task.pattern_figure``, a key of
    `FIGURES`), drawn from the model as it is now, so a page can show it forming; the
    cosine map when that figure does not apply or cannot be drawn; for a stack without a
    position table, the task's own figure if it needs no table, else its attention by
    position alone; None when there is nothing to show."""
    ctx = _context(run, node)
    own = run.task.pattern_figure
    wanted = ((own, PATTERN_FALLBACK) if ctx.node is not None
              else (own, PATTERN_WITHOUT_TABLE) if not figure_spec(own).needs_table
              else (PATTERN_WITHOUT_TABLE,))
    for key in dict.fromkeys(wanted):
        spec = figure_spec(key)
        if _applies(spec, ctx):
            drawn = _drawn(spec, ctx)
            if not drawn.skipped:
                return drawn
    return None


def run_figures(run, node: str | None = None) -> list[RunFigure]:
    """Every figure of `FIGURES` that applies to ``run``, in reading order, for ``node``
    (default: its first position table), each with its score.

    With no learned position table the figures of a table drop out, and what attention
    does by position and per head remains; the attention maps need an attention after the
    table; the length probe needs spare rows past T. A figure the stack cannot give is
    skipped in place, with its reason.
    """
    return _figures(_context(run, node))


def _figures(ctx: FigureContext) -> list[RunFigure]:
    return [_drawn(spec, ctx) for spec in FIGURES if _applies(spec, ctx)]


class Arranged(NamedTuple):
    """A run's figures as a page leads with them (`arrange`): the task's own pattern
    figure first, the others by `GROUPS` (only the groups that have one, in order), and
    those the stack could not give, once each as ``(title, reason)``."""

    lead: RunFigure | None
    groups: dict[str, list[RunFigure]]
    not_drawn: list[tuple[str, str]]


OTHER_GROUP = "Other"  # a figure not of `FIGURES` (a key a newer version stored, none)


def arrange(drawn: list[RunFigure], pattern_key: str) -> Arranged:
    """``drawn`` (`run_figures`, or as stored) arranged to lead with the figure of
    ``pattern_key`` (a task's ``pattern_figure``; the cosine map, or the attention by
    position of a table-less stack, when it was not drawn)."""
    shown = [figure for figure in drawn if not figure.skipped]
    keys = [figure.key for figure in shown]
    lead_key = next((key for key in (pattern_key, PATTERN_FALLBACK, PATTERN_WITHOUT_TABLE)
                     if key in keys), None)
    lead = shown[keys.index(lead_key)] if lead_key is not None else None
    groups: dict[str, list[RunFigure]] = {}
    for figure in shown:
        if figure is not lead:
            spec = _BY_KEY.get(figure.key)
            groups.setdefault(spec.group if spec else OTHER_GROUP, []).append(figure)
    order = [*GROUPS, OTHER_GROUP]
    return Arranged(lead, dict(sorted(groups.items(), key=lambda item: order.index(item[0]))),
                    [(figure.title, _reason(figure.caption)) for figure in drawn
                     if figure.skipped])


def _reason(caption: str) -> str:
    """What a skipped figure's caption (``Skipped: why. fix``) says, without the word."""
    return caption.removeprefix("Skipped: ")


_BY_KEY = {spec.key: spec for spec in FIGURES}


def figures_of_table(table: TableContext) -> list[RunFigure]:
    """Every figure of `FIGURES` that a table from a file shows (those with an
    `FigureSpec.on_table`), in reading order, each with its score."""
    return [_drawn(spec, table, spec.on_table) for spec in FIGURES if spec.on_table is not None]


def figures_json(run) -> dict:
    """Every figure of ``run``, for each of its position tables, and its pattern figure, as
    plotly JSON (``{"pattern": entry | None, "nodes": {node: [entry, ...]}}``, each entry
    ``[title, caption, json, score, key, skipped]``, node ``""`` for a run without a
    table), and why each figure left out is (``"absent": {node: {key: reason}}``): what a
    worker stores with a run, so the server that shows it draws nothing and reads none of
    its tensors (`figures_from_json`, `absent_from_json`)."""

    pattern = pattern_figure(run)
    stored = {"pattern": figure_entry(pattern) if pattern is not None else None, "nodes": {},
              "absent": {}}
    for node in run.position_nodes or [""]:
        ctx = _context(run, node)  # one context per table: what its figures share, computed once
        stored["nodes"][node] = [figure_entry(figure) for figure in _figures(ctx)]
        stored["absent"][node] = _absent(ctx)
    return stored


def figure_entry(figure: RunFigure) -> list:
    """``figure`` as plotly JSON in a list, ``[title, caption, json, score, key, skipped]``:
    how `figures_json` stores it and a worker sends its live pattern figure."""
    return [figure.title, figure.caption, figure.figure.to_json(), figure.score, figure.key,
            figure.skipped]


def figure_from_entry(entry) -> RunFigure | None:
    """The figure of one `figure_entry` (or of an older four-field entry, keyed by its
    title); None when an older entry's title is no longer in `FIGURES`.

    The figure is a `SharedFigure`, read without plotly's property check: the JSON is what
    `figure_entry` wrote of a figure plotly had checked (a tenth of the time; a classroom
    reads one per evaluation of a shared run)."""
    entry = list(entry) if len(entry) >= 6 else _keyed(*entry)
    if entry is None:
        return None
    title, caption, figure, score, key, skipped, *_ = entry
    return RunFigure(title, caption, shared(json.loads(figure), validate=False), score, key,
                     bool(skipped))


def figures_from_json(drawn: dict, node: str | None = None) -> list[RunFigure] | None:
    """The figures of ``node`` (default: the first) in ``figures_json``'s ``drawn``; the
    pattern figure for ``node="pattern"``; None when ``drawn`` lacks them. Entries an older
    version stored (``[title, caption, json, score]``, no key) get their keys from their
    titles; None when one of those titles is no longer in `FIGURES`. A ``drawn`` that is
    not what `figures_json` writes (a damaged file) raises `StackError` ``E_DAMAGED``."""
    try:
        if node == "pattern":
            found = [drawn["pattern"]] if drawn.get("pattern") else []
        else:
            nodes = drawn.get("nodes", {})
            found = nodes.get(node) if node is not None else next(iter(nodes.values()), None)
        if found is None:
            return None
        figures = [figure_from_entry(entry) for entry in found]
    except (AttributeError, KeyError, TypeError, ValueError) as err:
        raise _damaged(err) from None
    return None if None in figures else figures


def _damaged(err: Exception) -> StackError:
    return StackError("E_DAMAGED", f"the stored figures are damaged ({type(err).__name__}: "
                      f"{str(err)[:80]})", hint="train the run again: the store replaces a "
                                                "damaged run")


_KEY_OF_TITLE = {spec.title: spec.key for spec in FIGURES}


def _keyed(title: str, caption: str, figure: str, score: str = "") -> list | None:
    """An entry of an older ``figures.json`` as `figures_json` writes it now: the key of
    its title, and skipped as those versions said it, by the start of the caption."""
    key = _KEY_OF_TITLE.get(title)
    return (None if key is None else
            [title, caption, figure, score, key, caption.startswith("Skipped: ")])


def absent_reasons(run, node: str | None = None) -> dict[str, str]:
    """Why each figure of `FIGURES` that `run_figures` leaves out for ``node`` is left out,
    by key ("no attention in this stack"): Compare says so where another run has it."""
    return _absent(_context(run, node))


def _absent(ctx: FigureContext) -> dict[str, str]:
    return {spec.key: NO_TABLE if spec.needs_table and ctx.node is None else spec.why_not(ctx)
            for spec in FIGURES if not _applies(spec, ctx)}


def absent_from_json(drawn: dict, node: str | None = None) -> dict[str, str]:
    """The `absent_reasons` that `figures_json` stored for ``node`` (default: the first);
    empty for figures an older version stored without them."""
    try:
        found = drawn.get("absent", {})
        absent = (found.get(node) if node is not None else next(iter(found.values()), None)) or {}
        return {str(key): str(reason) for key, reason in absent.items()}
    except (AttributeError, TypeError, ValueError) as err:
        raise _damaged(err) from None


def compared_figures(runs: list[ComparedRun]) -> list[RunFigure]:
    """Every figure of `COMPARED_FIGURES` for ``runs``, in order; one that does not apply
    is skipped in place with its reason (`RunFigure.skipped`)."""
    drawn = []
    for spec in COMPARED_FIGURES:
        if spec.applies(runs):
            figure = fit_title(spec.draw(runs))
            drawn.append(RunFigure(spec.title, spec.caption(runs), figure, "", spec.key))
        else:
            reason = spec.why_not(runs)
            drawn.append(RunFigure(spec.title, f"Skipped: {reason}.", _skipped(spec.title, reason),
                                   "", spec.key, skipped=True))
    return drawn
