"""Runs side by side (SPEC §16): their settings and scores in one table, and the same
figures aligned, for `stacklab compare`, `stacklab sweep` and the app's Compare page.

A run here is a `StoredRun` (a folder of the run store, or one written by ``stacklab
train --out DIR``): only its ``run.json``, ``metrics.json`` and ``figures.json`` are read,
never its tensors.

>>> import tempfile, stacklab
>>> from stacklab.lab.store import RunStore
>>> store = RunStore(tempfile.mkdtemp())
>>> run = stacklab.train(task="position", steps=20)
>>> _ = store.save(run)
>>> [row["label"] for row in comparison([("learned", store.open(run.key))])["runs"]]
['learned']
"""

from __future__ import annotations

import html
import statistics
from typing import Sequence

from .figures import FIGURES, RunFigure, figure_spec, figures_from_json
from .report_html import figure_div, html_page

# Runs the Compare page (and a compare= link) puts side by side: four columns still read.
# `stacklab compare` takes up to 8, and a sweep's comparison.html shows every run it trained.
MAX_COMPARED = 4
WIDE = """
body { max-width: none; }
table.runs td, table.runs th { padding: 0.2em 0.8em; text-align: left; border-bottom: 1px solid #ddd; }
.row { display: grid; grid-template-columns: repeat(auto-fit, minmax(420px, 1fr)); gap: 1em; }
"""


def encoding(network) -> str:
    """The position encodings of a stack in a word or two: "pos_embed", "sin_pos",
    "rope", "pos_embed + alibi", or "none"."""
    # what is added to the input first, then what attention layers do inside
    nodes = sorted((node for node in network.nodes if node.spec.encodes_positions is not None),
                   key=lambda node: node.spec.role == "attention")
    found = filter(None, (node.spec.encodes_positions(node.args) for node in nodes))
    return " + ".join(dict.fromkeys(found)) or "none"


def summary(run) -> dict:
    """What one run says in numbers: settings, final accuracy, the pattern score (of its
    first position table, or of its attention when it has no table), every score, and
    the accuracy past the trained length at each evaluated length."""
    metrics = run.metrics()
    tables = metrics.get("position_tables", {})
    first = next(iter(tables.values()), None)
    if first is not None:
        pattern = first["scores"]["pattern"]
    else:
        pattern = metrics.get("attention_by_position", {}).get("pattern",
                                                               {"name": None, "value": None,
                                                                "init": None})
    T = run.config.seq_len
    lengths = {}
    for length, entry in metrics.get("length_generalization", {}).items():
        if "per_position" in entry:
            # positions no sequence labels (induction's last one) are null: left out
            past = [value for value in entry["per_position"][T:] if value is not None]
            lengths[length] = {"accuracy": entry["accuracy"],
                               "past_T": round(sum(past) / len(past), 6) if past else None}
        else:
            lengths[length] = {"error": entry["error"]}
    return {"key": run.key, "task": run.task.name, "status": str(run.status),
            "steps": run.step, "seq_len": T, "seed": run.config.seed,
            "source": run.network.source, "encoding": encoding(run.network),
            "final_accuracy": run.final["accuracy"],
            "pattern": pattern,
            "scores": {node: table["scores"] for node, table in tables.items()},
            "length_generalization": lengths}


def comparison(entries: Sequence[tuple[str, object]]) -> dict:
    """``comparison.json``: every run's label and `summary`, in order."""
    return {"runs": [{"label": label, **summary(run)} for label, run in entries]}


def _figures(run) -> list[RunFigure]:
    drawn = run.figures()
    found = figures_from_json(drawn) if drawn is not None else None
    if found is None:  # stored without figures: drawn from its tensors once
        from .figures import run_figures

        found = run_figures(run.load())
    return found


def aligned(entries: Sequence[tuple[str, object]]
            ) -> list[tuple[str, str, list[RunFigure | None]]]:
    """Figure by figure, in the catalog's order: ``(key, title, [each run's figure or
    None])``, matched by `FigureSpec.key`. A figure declared to line up with another
    (`FigureSpec.aligns_with`, e.g. a table-less stack's attention by position alone)
    shares that figure's row and title."""
    row_of = {spec.key: spec.aligns_with or spec.key for spec in FIGURES}
    drawn = [{row_of.get(figure.key, figure.key): figure for figure in _figures(run)}
             for _, run in entries]
    keys = [spec.key for spec in FIGURES if any(spec.key in d for d in drawn)]
    # keys this version's catalog lacks (a figures.json a newer version wrote) go last
    keys += sorted({key for d in drawn for key in d} - set(keys))
    return [(key, _row_title(key, drawn), [d.get(key) for d in drawn]) for key in keys]


def _row_title(key: str, drawn: list[dict[str, RunFigure]]) -> str:
    try:
        return figure_spec(key).title
    except KeyError:  # the title it was drawn with
        return next(d[key].title for d in drawn if key in d)


def _percent(value) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def _number(value, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def table_rows(entries: Sequence[tuple[str, object]]) -> list[dict[str, str]]:
    """One row of words per run: its label, settings and scores (the Compare page's table)."""
    rows = []
    for label, run in entries:
        found = summary(run)
        pattern = found["pattern"]
        row = {"run": label, "encoding": found["encoding"], "task": found["task"],
               "T": str(found["seq_len"]),
               "seed": str(found["seed"]), "steps": str(found["steps"]),
               "status": found["status"], "accuracy": _percent(found["final_accuracy"]),
               "pattern": (f"{pattern['name'].replace('_', ' ')} {_number(pattern['value'])} "
                           f"(init {_number(pattern['init'])})" if pattern.get("name") else "—")}
        for length, entry in found["length_generalization"].items():
            if int(length) > found["seq_len"]:  # positions past the trained length exist
                row[f"accuracy past T at {length}"] = ("beyond capacity" if "error" in entry
                                                       else _percent(entry["past_T"]))
        row["key"] = found["key"][:12]
        rows.append(row)
    return rows


def spread(values: Sequence[float]) -> str:
    """``"0.85 ± 0.03"``: the mean and the standard deviation (± 0 for one value)."""
    values = [v for v in values if v is not None]
    if not values:
        return "—"
    deviation = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.2f} ± {deviation:.2f}"


def comparison_html(entries: Sequence[tuple[str, object]], title: str = "stacklab comparison",
                    preface: str = "") -> str:
    """One self-contained page: the table of `table_rows`, then every figure with the runs'
    versions side by side (plotly.js inlined once). ``preface``: HTML put before the table."""
    esc = html.escape
    rows = table_rows(entries)
    columns = list(dict.fromkeys(name for row in rows for name in row))
    head = "".join(f"<th>{esc(name)}</th>" for name in columns)
    body = "".join("<tr>" + "".join(f"<td>{esc(row.get(name, ''))}</td>" for name in columns)
                   + "</tr>" for row in rows)
    parts = [f"<h1>{esc(title)}</h1>", preface,
             f"<table class='runs'><tr>{head}</tr>{body}</table>"]
    for label, run in entries:
        parts.append(f"<details><summary>{esc(label)}: the stack</summary>"
                     f"<pre class='source'>{esc(run.network.source)}</pre></details>")
    first = True
    for _, figure_title, versions in aligned(entries):
        cells = []
        for (label, _), version in zip(entries, versions):
            if version is None:
                cells.append(f"<div><p><strong>{esc(label)}</strong>: not drawn for this run"
                             "</p></div>")
                continue
            div = figure_div(version.figure, with_plotlyjs=first)
            first = False
            score = f"<p class='score'>{esc(version.score)}</p>" if version.score else ""
            cells.append(f"<div><p><strong>{esc(label)}</strong></p>{score}{div}</div>")
        parts.append(f"<section class='figure'><h2>{esc(figure_title)}</h2>"
                     f"<div class='row'>{''.join(cells)}</div></section>")
    return html_page(title, parts, style=WIDE)
