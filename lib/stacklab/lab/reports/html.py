"""A run as one self-contained HTML page: the task, the stack, the network report and every figure.

plotly.js is inlined once, with the first figure, so the page opens offline; every figure
also carries a still image (`stills`), shown where no script runs:

    from pathlib import Path
    run = stacklab.train(task="modular", steps=300)
    Path("report.html").write_text(report_html(run), encoding="utf-8")
"""

from __future__ import annotations

import html
import uuid

import plotly.io as pio

from ..figures import arrange, run_figures
from ..figures.curves_picture import curves_svg
from .stills import HIDE_WHEN_DRAWN, NO_SCRIPT_STYLE, STILL_CSS, still_tag

STYLE = """
body { font-family: system-ui, sans-serif; max-width: 980px; margin: 2em auto; padding: 0 1em;
       color: #222; line-height: 1.45; }
pre { background: #f6f6f6; padding: 0.8em; overflow-x: auto; font-size: 0.9em; }
table.settings td { padding: 0.1em 1.2em 0.1em 0; }
section.figure { margin: 2.5em 0; }
p.caption { color: #444; }
p.score { font-weight: 600; margin: 0.2em 0; }
p.error { color: #a00; }
div.group { font-size: 1.6em; font-weight: 700; margin: 2em 0 0; padding-top: 0.4em;
            border-top: 3px solid #ddd; }
""" + STILL_CSS


def html_page(title: str, body: list[str], style: str = "") -> str:
    """A whole self-contained page: ``title`` in its head, `STYLE` (and ``style`` after it),
    and the ``body`` parts one to a line: the skeleton of ``report.html``, the table report
    and ``comparison.html``."""
    return "\n".join(["<!DOCTYPE html>", "<html lang='en'><head><meta charset='utf-8'>",
                      f"<title>{html.escape(title)}</title>",
                      f"<style>{STYLE}{style}</style>{NO_SCRIPT_STYLE}</head><body>", *body,
                      "</body></html>"]) + "\n"


def _settings_rows(run) -> str:
    config = run.config
    final = run.final
    rows = [
        ("status", run.status),
        ("trained length T", config.seq_len),
        ("steps", f"{run.step} of {config.steps}"),
        ("batch size", config.batch_size),
        ("learning rate", f"{config.lr:g}"),
        ("weight decay", f"{config.weight_decay:g}"),
        ("seed", config.seed),
        ("device", run.device),
        ("time", f"{run.seconds:.1f} s"),
        ("final held-out accuracy", f"{final['accuracy']:.1%}"),
        ("final held-out loss", f"{final['loss']:.4f}"),
    ]
    return "".join(f"<tr><td>{html.escape(name)}</td><td>{html.escape(str(value))}</td></tr>"
                   for name, value in rows)


def report_html(run, drawn=None, *, plotly_stills: bool = True) -> str:
    """The whole report of ``run`` as an HTML page that needs no network to view;
    ``drawn``: its `run_figures`, when they are already drawn; ``plotly_stills``: the
    stills drawn by plotly's own export where kaleido runs (`stills`), else always the
    project's own pictures (the app's downloads: a server starts no Chromium for them)."""
    esc = html.escape
    task = run.task
    parts = [
        f"<h1>stacklab run: task <code>{esc(task.name)}</code></h1>",
        f"<p>{esc(task.description)}</p>",
        f"<p><strong>What the position table should learn:</strong> {esc(task.pattern)}</p>",
    ]
    if run.error:
        parts.append(f"<p class='error'>{esc(run.error)}</p>")
    parts += [
        f"<table class='settings'>{_settings_rows(run)}</table>",
        "<h2>Stack</h2>",
        f"<pre class='source'>{esc(run.network.source)}</pre>",
        "<h2>Network</h2>",
        f"<pre class='network'>{esc(run.network.table())}</pre>",
    ]
    # without kaleido, the curves' still is the project's own picture of the run's history
    fallbacks = {"training_curves": lambda: curves_svg(run.history, run.train_loss)}
    parts += arranged_sections(arrange(drawn or run_figures(run), task.pattern_figure),
                               fallbacks, plotly_stills)
    return html_page(f"stacklab run: {task.name}", parts)


def arranged_sections(arranged, fallbacks: dict | None = None,
                      plotly_stills: bool = True) -> list[str]:
    """A run's figures as Explore shows them (`arrange`): the pattern figure first, then
    each group under its name, and the figures the stack could not give listed once;
    ``fallbacks``: `figure_sections`'."""
    esc = html.escape
    parts = figure_sections([arranged.lead] if arranged.lead is not None else [],
                            fallbacks=fallbacks, plotly_stills=plotly_stills)
    inlined = bool(parts)  # plotly.js goes with the first figure of the page
    for group, found in arranged.groups.items():
        parts.append(f"<div class='group'>{esc(group)}</div>")
        parts += figure_sections(found, with_plotlyjs=not inlined, fallbacks=fallbacks,
                                 plotly_stills=plotly_stills)
        inlined = True
    if arranged.not_drawn:
        parts.append("<div class='group'>Not drawn for this run</div><ul>" + "".join(
            f"<li><strong>{esc(title)}</strong>: {esc(reason)}</li>"
            for title, reason in arranged.not_drawn) + "</ul>")
    return parts


def figure_sections(figures, with_plotlyjs: bool = True,
                    fallbacks: dict | None = None, plotly_stills: bool = True) -> list[str]:
    """One ``<section>`` per `RunFigure` (title, score, caption, the figure over its still);
    plotly.js is inlined once, with the first (unless ``with_plotlyjs`` is false: inlined
    already). ``fallbacks``: by figure key, the still's SVG where kaleido is missing (see
    `stills`); ``plotly_stills``: `report_html`'s."""
    esc = html.escape
    sections = []
    for index, drawn_figure in enumerate(figures):
        plot_id = str(uuid.uuid4())
        fallback = (fallbacks or {}).get(drawn_figure.key)
        div = still_tag(drawn_figure.figure, plot_id, drawn_figure.title, fallback,
                        plotly_stills) + figure_div(
            drawn_figure.figure, with_plotlyjs=with_plotlyjs and index == 0, plot_id=plot_id)
        score = (f"<p class='score'>{esc(drawn_figure.score)}</p>" if drawn_figure.score else "")
        sections.append(f"<section class='figure'><h2>{esc(drawn_figure.title)}</h2>{score}"
                        f"<p class='caption'>{esc(drawn_figure.caption)}</p>{div}</section>")
    return sections


def figure_div(figure, with_plotlyjs: bool, plot_id: str | None = None) -> str:
    """``figure`` as a ``<div>`` of the page; ``with_plotlyjs``: plotly.js inlined with it
    (the first figure of a page), so the page needs no network; ``plot_id``: the div's id,
    whose still (``still-PLOT_ID``) is hidden once plotly has drawn the chart."""
    return pio.to_html(figure, include_plotlyjs=with_plotlyjs, full_html=False,
                       config={"displaylogo": False}, div_id=plot_id,
                       post_script=HIDE_WHEN_DRAWN if plot_id else None)


def table_report_html(name: str, scores: dict, figures, *, plotly_stills: bool = True) -> str:
    """The report of a position table read from a file (`stacklab.lab.reports.table_file`): its scores
    and every figure that needs only the table; ``plotly_stills``: `report_html`'s."""
    esc = html.escape
    rows = "".join(f"<tr><td>{esc(key.replace('_', ' '))}</td><td>{esc(_shown(value))}</td></tr>"
                   for key, value in scores.items() if key != "cosine_by_distance")
    return html_page(f"stacklab table: {name}", [
        f"<h1>Position table <code>{esc(name)}</code></h1>",
        "<p>A table that was not trained here: the figures and scores that need only the "
        "table (no model, no task).</p>",
        f"<table class='settings'>{rows}</table>",
        *figure_sections(figures, plotly_stills=plotly_stills)])


def _shown(value) -> str:
    if value is None:
        return "— (too few rows)"
    return f"{value:.4f}" if isinstance(value, float) else str(value)
