"""Runs side by side: their settings and scores in one table, and the same
figures aligned, for `stacklab compare`, `stacklab sweep` and the app's Compare page.

A run here is a `StoredRun` (a folder of the run store, or one written by ``stacklab
train --out DIR``): only its ``run.json``, ``metrics.json`` and ``figures.json`` are read,
never its tensors.

The table leads with what differs between the runs (the encoding, the accuracy inside T,
the accuracy past T at each longer length), each column named with what it measures
(`column_help`); the figures of several runs at once (`COMPARED_FIGURES`: every run's
length curve on one plot) come before the runs' own figures, aligned by key, and a
figure a run lacks comes with the reason (`aligned_rows`).

>>> import tempfile, stacklab
>>> from stacklab.lab.runs.store import RunStore
>>> store = RunStore(tempfile.mkdtemp())
>>> run = stacklab.train(task="position", steps=20)
>>> _ = store.save(run)
>>> [row["label"] for row in comparison([("learned", store.open(run.key))])["runs"]]
['learned']
"""

from __future__ import annotations

import html
import re
import statistics
from typing import NamedTuple, Sequence

from ...core.errors import StackError
from ..figures import (COMPARED_FIGURES, FIGURES, ComparedRun, RunFigure, absent_from_json,
                       compared_figures, figure_spec, figures_from_json, fit_title)
from ..figures.curves import past_trained
from ..figures.drawing import NO_TABLE
from ..measure.head_scores import head_score_label
from ..measure.run_scores import PATTERN_SCORES
from .html import figure_div, html_page

# Runs the Compare page (and a compare= link) puts side by side: four columns still read.
# `stacklab compare` takes up to 8, and a sweep's comparison.html shows every run it trained.
MAX_COMPARED = 4
HTML_COLUMN = 420  # px: the narrowest column of comparison.html's figures
WIDE = f"""
body {{ max-width: none; }}
div.scroll {{ overflow-x: auto; }}
table.runs td, table.runs th {{ padding: 0.2em 0.8em; text-align: left; border-bottom: 1px solid #ddd; white-space: nowrap; }}
table.runs th:first-child, table.runs td:first-child {{ position: sticky; left: 0; background: #fff; }}
.row {{ display: grid; grid-template-columns: repeat(auto-fit, minmax({HTML_COLUMN}px, 1fr)); gap: 1em; }}
"""
INSIDE = "accuracy inside T"
PAST = "accuracy past T at {length}"
HEAD = "layer {layer} {score}"  # the best head of an attention layer by one score
_HEAD = re.compile(r"layer (?P<layer>\d+) (?P<score>[a-z ]+)")
HELP = {
    "run": "the run: its task, encoding, seed, trained length T and key",
    "encoding": "the position encodings of the stack (a learned table, sin_pos, or "
                "attention's own position=, e.g. rope, xpos, kerple, fire, cope; "
                "'rope 25%': partial RoPE)",
    INSIDE: "held-out accuracy at the trained length T, over all its positions",
    PAST: "held-out accuracy at length {length} on the positions T and beyond only, which "
          "training never saw (the plot's 'overall' counts every position); 'beyond "
          "capacity': a table too short for {length}; '—': not evaluated there",
    "pattern score": "the task's pattern score of the trained run (at init in brackets)",
    HEAD: "the largest {score} score among the heads of attention layer {layer}, on held-out "
          "sequences (that head at init in brackets)",
    "T": "the trained length (seq_len)",
    "steps": "optimizer steps taken",
    "key": "the run's key (its first 12 characters)",
}
# the columns in their order when nothing differs; what differs between runs goes first
ORDER = ("encoding", INSIDE, PAST, "pattern score", HEAD, "task", "T", "seed", "steps", "status")
NOT_STORED = "not drawn when this run was stored (an older version drew fewer figures)"


def encoding(network) -> str:
    """The position encodings of a stack in a word or two: "pos_embed", "sin_pos",
    "rope", "rope 25%" (partial), "xpos", "kerple", "fire", "cope", "pos_embed + alibi",
    or "none"."""
    # what is added to the input first, then what attention layers do inside
    nodes = sorted((node for node in network.nodes if node.spec.encodes_positions is not None),
                   key=lambda node: node.spec.role == "attention")
    found = filter(None, (_encodes(node) for node in nodes))
    return " + ".join(dict.fromkeys(found)) or "none"


def _encodes(node) -> str | None:
    """One node's encoding; a partial rotation says how much it turns ("rope 25%"), so
    partial RoPE is not mistaken for RoPE beside it."""
    label = node.spec.encodes_positions(node.args)
    rotary = node.args.get("rotary", 1.0)
    return f"{label} {rotary:.0%}" if label and rotary != 1.0 else label


def summary(run) -> dict:
    """What one run says in numbers: settings, final accuracy, the pattern score (of its
    first position table, or of its attention when it has no table), every score, and
    the accuracy past the trained length at each evaluated length. A damaged run (a file
    that does not read, `StackError` ``E_DAMAGED``) says so under ``"damaged"``, with its
    settings and no scores: it never costs the runs beside it."""
    try:
        damage = run.damage() if hasattr(run, "damage") else None  # a stored run's files
        if damage is not None:
            raise damage
        return _summary(run, run.metrics())
    except StackError as err:
        if err.code != "E_DAMAGED":
            raise
        return _summary(run, {}, damaged=err.message)
    except (KeyError, TypeError, AttributeError) as err:  # a metrics.json not shaped as one
        return _summary(run, {}, damaged=f"run {run.key[:12]} is damaged: its metrics.json "
                                         f"does not hold a run's metrics ({type(err).__name__})")


def _summary(run, metrics: dict, damaged: str | None = None) -> dict:
    tables = metrics.get("position_tables", {})
    first = next(iter(tables.values()), None)
    if first is not None:
        pattern = first["scores"]["pattern"]
    else:
        pattern = metrics.get("attention_by_position", {}).get("pattern",
                                                               {"name": None, "value": None,
                                                                "init": None})
    of_heads = getattr(PATTERN_SCORES.get(run.task.pattern_score), "head_score", None)
    if not pattern.get("name") and of_heads:  # no table: a per-head pattern score (induction's)
        pattern = _pattern_of_heads(metrics, of_heads) or pattern
    T = run.config.seq_len
    lengths = {}
    for length, entry in metrics.get("length_generalization", {}).items():
        if "per_position" in entry:
            past = past_trained(entry, T)  # positions no sequence labels are left out
            lengths[length] = {"accuracy": entry["accuracy"],
                               "past_T": None if past is None else round(past, 6)}
        else:
            lengths[length] = {"error": entry["error"]}
    return {"key": run.key, "task": run.task.name,
            "status": "damaged" if damaged else str(run.status),
            **({"damaged": damaged} if damaged else {}),
            "steps": run.step, "seq_len": T, "seed": run.config.seed,
            "source": run.network.source, "encoding": encoding(run.network),
            "final_accuracy": run.final["accuracy"],
            "pattern": pattern,
            "scores": {node: table["scores"] for node, table in tables.items()},
            "heads": best_heads(metrics),
            "length_generalization": lengths}


def comparison(entries: Sequence[tuple[str, object]]) -> dict:
    """``comparison.json``: every run's label and `summary`, in order."""
    return {"runs": [{"label": label, **summary(run)} for label, run in entries]}


def _figures(run) -> tuple[list[RunFigure], dict[str, str]]:
    """A run's figures and why each one left out is, as its worker stored them (drawn
    from its tensors, once, for a run stored without them)."""
    try:
        drawn = run.figures()
        found = figures_from_json(drawn) if drawn is not None else None
        if found is not None:
            return found, absent_from_json(drawn)
        from ..figures import absent_reasons, run_figures

        loaded = run.load()
        return run_figures(loaded), absent_reasons(loaded)
    except StackError as err:  # a damaged run: every figure says why, the other runs stay
        if err.code != "E_DAMAGED":
            raise
        return [], {spec.key: err.message for spec in FIGURES}


class AlignedRow(NamedTuple):
    """One figure across the runs: its key and title, each run's version (None where the
    run lacks it) and, where it lacks it, why."""

    key: str
    title: str
    versions: list[RunFigure | None]
    reasons: list[str | None]


def aligned_rows(entries: Sequence[tuple[str, object]]) -> list[AlignedRow]:
    """Figure by figure, in the catalog's order, matched by `FigureSpec.key`. A figure
    declared to line up with another (`FigureSpec.aligns_with`, e.g. a table-less stack's
    attention by position alone) shares that figure's row and title. A run that lacks a
    figure says why, as its worker stored it ("no attention in this stack")."""
    row_of = {spec.key: spec.aligns_with or spec.key for spec in FIGURES}
    found = [_figures(run) for _, run in entries]
    drawn = [{row_of.get(figure.key, figure.key): figure for figure in figures}
             for figures, _ in found]
    absent = [why for _, why in found]
    keys = [spec.key for spec in FIGURES if any(spec.key in d for d in drawn)]
    # keys this version's catalog lacks (a figures.json a newer version wrote) go last
    keys += sorted({key for d in drawn for key in d} - set(keys))
    return [AlignedRow(key, _row_title(key, drawn), [d.get(key) for d in drawn],
                       [None if key in d else _reason(key, run, why)
                        for d, (_, run), why in zip(drawn, entries, absent)])
            for key in keys]


def aligned(entries: Sequence[tuple[str, object]]
            ) -> list[tuple[str, str, list[RunFigure | None]]]:
    """`aligned_rows` without the reasons: ``(key, title, [each run's figure or None])``."""
    return [(row.key, row.title, row.versions) for row in aligned_rows(entries)]


def _reason(key: str, run, absent: dict[str, str]) -> str:
    """Why ``run`` has no figure in row ``key``: the reason of the figure of that row that
    fits the run (one for a table, when it has a table; one for a stack without)."""
    has_table = bool(run.position_nodes)
    row = [spec for spec in FIGURES if (spec.aligns_with or spec.key) == key]
    row.sort(key=lambda spec: spec.needs_table != has_table)
    found = next((absent[spec.key] for spec in row if spec.key in absent), None)
    if found is not None:
        return found
    if row and not has_table and all(spec.needs_table for spec in row):
        return NO_TABLE
    return NOT_STORED


def _row_title(key: str, drawn: list[dict[str, RunFigure]]) -> str:
    try:
        return figure_spec(key).title
    except KeyError:  # the title it was drawn with
        return next(d[key].title for d in drawn if key in d)


def compared(entries: Sequence[tuple[str, object]]) -> list[RunFigure]:
    """The figures of all the runs at once (`COMPARED_FIGURES`), from their metrics."""
    return compared_figures([ComparedRun(label, run.config.seq_len, _metrics(run))
                             for label, run in entries])


def _metrics(run) -> dict:
    """``run.metrics()``, or none for a damaged run (`summary` says why)."""
    try:
        return run.metrics()
    except StackError as err:
        if err.code != "E_DAMAGED":
            raise
        return {}


def replaced(figures: Sequence[RunFigure]) -> set[str]:
    """The keys of the runs' own figures that the drawn figures of all runs stand for."""
    return {spec.replaces for spec in COMPARED_FIGURES for figure in figures
            if figure.key == spec.key and not figure.skipped and spec.replaces}


def _percent(value) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def _number(value, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _pattern_of_heads(metrics: dict, score: str) -> dict | None:
    """The pattern score ``score`` as the largest of every head's ,
    or None when no head has that score."""
    heads = [head[score] for block in metrics.get("attention", {}).values()
             for head in block["heads"] if score in head]
    best = max(heads, key=lambda found: found["value"], default=None)
    return None if best is None else {"name": score, **best}


def best_heads(metrics: dict) -> dict[str, dict]:
    """The best head of each attention layer by each per-head score, from
    ``metrics["attention"]``: ``{"layer 2 induction": {"value", "init", "head"}, ...}``."""
    found = {}
    for block in metrics.get("attention", {}).values():
        heads = block["heads"]
        for score in dict.fromkeys(name for head in heads for name in head):
            best = max(range(len(heads)), key=lambda h: heads[h].get(score, {}).get("value", -1))
            name = HEAD.format(layer=block["layer"], score=head_score_label(score))
            found[name] = {**heads[best][score], "head": best}
    return found


def _row(label: str, found: dict) -> dict[str, str]:
    pattern = found["pattern"]
    row = {"run": label, "encoding": found["encoding"], INSIDE: _percent(found["final_accuracy"]),
           "pattern score": (f"{pattern['name'].replace('_', ' ')} {_number(pattern['value'])} "
                             f"(init {_number(pattern['init'])})" if pattern.get("name") else "—"),
           "task": found["task"], "T": str(found["seq_len"]), "seed": str(found["seed"]),
           "steps": str(found["steps"]), "status": found["status"]}
    for name, best in found["heads"].items():
        row[name] = f"{_number(best['value'])} (init {_number(best['init'])})"
    for length, entry in found["length_generalization"].items():
        if int(length) > found["seq_len"]:  # positions past the trained length exist
            row[PAST.format(length=length)] = ("beyond capacity" if "error" in entry
                                               else _percent(entry["past_T"]))
    return row


def table_rows(entries: Sequence[tuple[str, object]]) -> list[dict[str, str]]:
    """One row of words per run (the Compare page's table): the run, then the columns that
    differ between the runs (the encoding, the accuracy inside T and past T at each length,
    ...), then those that are the same, and the key last; every row has every column."""
    found = [_row(label, summary(run)) for label, run in entries]
    keys = [run.key[:12] for _, run in entries]
    past = sorted({name for row in found for name in row if name.startswith("accuracy past")},
                  key=lambda name: int(name.rsplit(" ", 1)[1]))
    heads = sorted({name for row in found for name in row if _HEAD.fullmatch(name)},
                   key=lambda name: (int(name.split()[1]), name))
    grouped = {PAST: past, HEAD: heads}
    names = [name for column in ORDER for name in grouped.get(column, [column])]
    differ = [name for name in names if len({row.get(name, "—") for row in found}) > 1]
    order = ["run", *differ, *(name for name in names if name not in differ), "key"]
    return [{name: row.get(name, key if name == "key" else "—") for name in order}
            for row, key in zip(found, keys)]


def column_help(rows: Sequence[dict[str, str]]) -> dict[str, str]:
    """What each column of `table_rows` measures, for a header's tooltip."""
    names = dict.fromkeys(name for row in rows for name in row)
    def meaning(name: str) -> str:
        if name.startswith("accuracy past"):
            return HELP[PAST].format(length=name.rsplit(" ", 1)[1])
        head = _HEAD.fullmatch(name)
        return HELP[HEAD].format(**head.groupdict()) if head else HELP.get(name, "")
    return {name: meaning(name) for name in names}


TABLE_NOTE = ("accuracy inside T: held-out, at the trained length. accuracy past T at L: at "
              "length L, only the positions the training never reached (T and beyond); the "
              "plot's \"overall\" counts every position of a length.")


def spread(values: Sequence[float]) -> str:
    """``"0.85 ± 0.03"``: the mean and the standard deviation (± 0 for one value)."""
    values = [v for v in values if v is not None]
    if not values:
        return "—"
    deviation = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.2f} ± {deviation:.2f}"


def _table_html(entries: Sequence[tuple[str, object]]) -> str:
    esc = html.escape
    rows = table_rows(entries)
    helps = column_help(rows)
    head = "".join(f"<th title='{esc(helps[name])}'>{esc(name)}</th>" for name in helps)
    body = "".join("<tr>" + "".join(f"<td>{esc(row[name])}</td>" for name in helps) + "</tr>"
                   for row in rows)
    return (f"<div class='scroll'><table class='runs'><tr>{head}</tr>{body}</table></div>"
            f"<p class='note'>{esc(TABLE_NOTE)}</p>")


def comparison_html(entries: Sequence[tuple[str, object]], title: str = "stacklab comparison",
                    preface: str = "") -> str:
    """One self-contained page: the table of `table_rows`, the figures of all runs at once,
    then every figure with the runs' versions side by side, and the reason where a run
    lacks one (plotly.js inlined once). ``preface``: HTML put before the table."""
    esc = html.escape
    parts = [f"<h1>{esc(title)}</h1>", preface, _table_html(entries)]
    for label, run in entries:
        parts.append(f"<details><summary>{esc(label)}: the stack</summary>"
                     f"<pre class='source'>{esc(run.network.source)}</pre></details>")
    together = compared(entries)
    first = True
    for figure in together:
        body = f"<p>{esc(figure.caption)}</p>"
        if not figure.skipped:
            body += figure_div(fit_title(figure.figure, 1000), with_plotlyjs=first)
            first = False
        parts.append(f"<section class='figure'><h2>{esc(figure.title)}</h2>{body}</section>")
    for row in aligned_rows(entries):
        if row.key in replaced(together):
            continue
        cells = []
        for (label, _), version, reason in zip(entries, row.versions, row.reasons):
            if version is None or version.skipped:
                why = reason or version.caption.removeprefix("Skipped: ")
                cells.append(f"<div><p><strong>{esc(label)}</strong>: not drawn for this run: "
                             f"{esc(why)}</p></div>")
                continue
            div = figure_div(fit_title(version.figure, HTML_COLUMN), with_plotlyjs=first)
            first = False
            score = f"<p class='score'>{esc(version.score)}</p>" if version.score else ""
            cells.append(f"<div><p><strong>{esc(label)}</strong></p>{score}{div}</div>")
        parts.append(f"<section class='figure'><h2>{esc(row.title)}</h2>"
                     f"<div class='row'>{''.join(cells)}</div></section>")
    return html_page(title, parts, style=WIDE)


def length_rows(run) -> list[dict[str, str]]:
    """One run's length generalization as rows of words, one per evaluated length: its
    held-out accuracy over every position and past T alone (the Train page's table)."""
    T = run.config.seq_len
    found = run.metrics().get("length_generalization", {})
    rows = []
    for length, entry in sorted(found.items(), key=lambda item: int(item[0])):
        if "error" in entry:
            rows.append({"length": length, "accuracy overall": "—", "accuracy past T": "—",
                         "note": f"not measured: {entry['error']}"})
            continue
        past = past_trained(entry, T) if int(length) > T else None
        rows.append({"length": length, "accuracy overall": _percent(entry["accuracy"]),
                     "accuracy past T": _percent(past),
                     "note": "the trained length" if int(length) == T else
                             "shorter than T: no positions past it" if int(length) < T else
                             f"positions {T}-{int(length) - 1} were never trained"})
    return rows
