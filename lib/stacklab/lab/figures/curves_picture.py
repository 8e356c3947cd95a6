"""The training curves as a small still picture (SVG), for a page that follows a run live
without rerunning its script (the app's run watch: the browser draws what the server sent).

The interactive chart (`stacklab.lab.figures.curves.training_curves`) is plotly JSON that
a page's chart library draws; a page that watches a run through the server's watch
endpoint gets this picture instead, made once per evaluation for every watcher: the same
two plots (the losses above, log scale where they span a decade; the held-out accuracy
below), the same colours (held-out loss and accuracy in Okabe and Ito's colours, the
training loss grey), axes with their ticks, and a legend under the plots. Every text in it
is escaped. Once the run has ended, the page shows the interactive chart again.

>>> svg = curves_svg([{"step": 10, "loss": 2.0, "accuracy": 0.2},
...                   {"step": 20, "loss": 0.5, "accuracy": 0.9}], [(5, 2.3), (15, 1.0)])
>>> svg.startswith("<svg") and svg.count("<polyline") == 3
True
"""

from __future__ import annotations

import math
from typing import Sequence
from xml.sax.saxutils import quoteattr

from .curves import loss_axis, thinned
from .picture import FONT_FAMILY, TEXT, _text
from .picture_values import nice_ticks
from .style import TRAINED_COLOR, UNTRAINED_COLOR

MUTED = "rgb(90, 92, 105)"  # ticks: 6.4:1 on white
GRID = "rgb(225, 227, 232)"
CHAR_EM = 0.6  # a character's width in ems, at most (digits 0.56): room for text to fit
TRAIN_GREY = "rgb(130, 130, 130)"  # the batch loss, as the chart draws it (grey, thin)
LINES = (("training loss (one batch)", TRAIN_GREY, 1.0),
         ("held-out loss", UNTRAINED_COLOR, 2.0),
         ("held-out accuracy", TRAINED_COLOR, 2.0))


def curves_svg(history: Sequence[dict], train_loss: Sequence[tuple[int, float]] | None = None,
               width: int = 560, font: int = 14) -> str:
    """The training curves of ``history`` (held-out evaluations: step, loss, accuracy) and
    ``train_loss`` ((step, loss) of single batches) as SVG text ``width`` px wide, its text
    ``font`` px."""
    width, font = int(width), int(font)
    losses = [(int(s), float(v)) for s, v in thinned(list(train_loss or ()))]
    shown = thinned(list(history))
    held = [(int(e["step"]), float(e["loss"])) for e in shown]
    accuracy = [(int(e["step"]), float(e["accuracy"])) for e in shown]
    last = max([s for s, _ in held + losses] or [1])
    # the right margin holds half of the last step's tick ("1000" centred on the axis end)
    widest_step = max((len(label) for label in nice_ticks(0.0, float(last), 4)[1]), default=1)
    left, right = 6 * font * 0.56 + 14, width - max(14, widest_step * CHAR_EM * font / 2 + 4)
    top = 12 + 1.6 * font * 1.15
    panel = max(60.0, (width * 0.62 - top) / 2)  # two plots, one above the other
    gap = 2.2 * font
    loss_box = (left, top + 1.4 * font, right, top + 1.4 * font + panel)
    acc_box = (left, loss_box[3] + gap + 1.4 * font, right, loss_box[3] + gap + 1.4 * font + panel)
    height = acc_box[3] + 3.9 * font + 10 + 1.5 * font * 2
    parts = [_text(10, 12 + 1.15 * font, "Training curves", 1.15 * font, TEXT, weight="600")]
    axis = loss_axis([v for _, v in held + losses])
    log = axis.get("type") == "log"
    values = [v for _, v in held + losses if v > 0 or not log] or [1.0]
    low, high = (min(values + [0.0]) if not log else min(values)), max(values)
    if log:
        ticks = list(axis["tickvals"])
        low, high = math.log10(min(values + ticks)), math.log10(max(values + ticks))
        tick_labels = list(axis["ticktext"])
        ticks = [math.log10(t) for t in ticks]
    else:
        ticks, tick_labels = nice_ticks(low, high, 4)
    scale = (lambda v: math.log10(v)) if log else float
    parts += _panel(loss_box, f"loss: {axis['title_text']}", (low, high), ticks, tick_labels, last,
                    font, labels_below=False, width=width)
    for (name, colour, stroke), points in zip(LINES[:2], (losses, held)):
        parts.append(_line([(s, scale(v)) for s, v in points if v > 0 or not log],
                           loss_box, (low, high), last, colour, stroke))
    parts += _panel(acc_box, "held-out accuracy", (0.0, 1.05), [0.0, 0.5, 1.0],
                    ["0.0", "0.5", "1.0"], last, font, labels_below=True, width=width)
    parts.append(_line(accuracy, acc_box, (0.0, 1.05), last, LINES[2][1], LINES[2][2]))
    # the legend a line below the axis title ("training step", at 2.5 fonts)
    parts += _legend(acc_box[3] + 3.9 * font + 4, width, font, bool(losses))
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height:.0f}" '
            f'width="{width}" height="{height:.0f}" font-family={quoteattr(FONT_FAMILY)}>\n'
            f'<rect width="100%" height="100%" fill="white"/>\n' + "\n".join(parts) + "\n</svg>")


def _panel(box, title: str, span, ticks, labels, last: int, font: int,
           labels_below: bool, width: int) -> list[str]:
    """One plot's frame: its title above (smaller where the picture's ``width`` is too
    narrow for it), its value ticks and grid, its step ticks."""
    left, top, right, bottom = box
    size = min(font * 1.05, (width - 20) / (max(len(title), 1) * CHAR_EM))
    centre = min(max((left + right) / 2, 10 + len(title) * CHAR_EM * size / 2),
                 width - 10 - len(title) * CHAR_EM * size / 2)
    parts = [_text(centre, top - 0.4 * font, title, size, TEXT, anchor="middle"),
             f'<rect x="{left:.1f}" y="{top:.1f}" width="{right - left:.1f}" '
             f'height="{bottom - top:.1f}" fill="none" stroke="{GRID}"/>']
    for value, label in zip(ticks, labels):
        y = _y(value, box, span)
        if top - 0.5 <= y <= bottom + 0.5:
            parts.append(f'<line x1="{left:.1f}" y1="{y:.1f}" x2="{right:.1f}" y2="{y:.1f}" '
                         f'stroke="{GRID}"/>')
            parts.append(_text(left - 5, y + 0.35 * font, label, font, MUTED, anchor="end"))
    if labels_below:
        steps, step_labels = nice_ticks(0.0, float(last), 4)
        for value, label in zip(steps, step_labels):
            x = left + value / max(last, 1) * (right - left)
            parts.append(_text(x, bottom + 1.2 * font, label, font, MUTED, anchor="middle"))
        parts.append(_text((left + right) / 2, bottom + 2.5 * font, "training step", font, TEXT,
                           anchor="middle"))
    return parts


def _y(value: float, box, span) -> float:
    _, top, _, bottom = box
    low, high = span
    return bottom - (value - low) / ((high - low) or 1.0) * (bottom - top)


def _line(points, box, span, last: int, colour: str, stroke: float) -> str:
    left, _, right, _ = box
    xy = " ".join(f"{left + s / max(last, 1) * (right - left):.1f},{_y(v, box, span):.1f}"
                  for s, v in points if math.isfinite(v))
    return (f'<polyline points="{xy}" fill="none" stroke="{colour}" stroke-width="{stroke:g}" '
            'stroke-linejoin="round"/>')


def _legend(y: float, width: int, font: int, with_batches: bool) -> list[str]:
    """The lines' names under the plots, two to a row where they do not fit on one."""
    entries = [entry for entry in LINES if with_batches or entry[0] != LINES[0][0]]
    parts, x = [], 10.0
    for name, colour, stroke in entries:
        size = 28 + len(name) * 0.56 * font + 18
        if x + size > width and x > 10:
            x, y = 10.0, y + 1.5 * font
        parts.append(f'<line x1="{x:.1f}" y1="{y - 0.35 * font:.1f}" x2="{x + 22:.1f}" '
                     f'y2="{y - 0.35 * font:.1f}" stroke="{colour}" stroke-width="{max(stroke, 2):g}"/>')
        parts.append(_text(x + 28, y, name, font, TEXT))
        x += size
    return parts

