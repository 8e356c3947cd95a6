"""A live run's newest pictures, written once per frame and kind (phone or laptop) and
kept for every asker (`Pictures`, the hub's): the curves and the pattern figure as still
markup, the caption "title at step N — score" as markup. No Streamlit here; the watch
endpoints send them (`ui.live_answers`), the page's component shows them (`ui.live_run`)."""

from __future__ import annotations

import gzip
import itertools
import threading
from html import escape

from stacklab import figures

__all__ = ["KEPT", "Pictures", "caption_html", "figures_html", "frame_of", "last_step"]

KEPT = 64  # live runs' newest pictures kept (a run and kind each; an ended run's go at its
# first answer, the oldest first beyond this)


class Pictures:
    """The live runs' newest pictures: for each run and kind (phone or laptop), the frame
    they were written from, their number (for the page's ``have``), the markup and its gzip."""

    def __init__(self, kept: int = KEPT):
        self._kept = kept
        self._made: dict[tuple[str, bool], tuple] = {}  # (key, phone) -> frame, number,
        # markup, gzip
        self._lock = threading.Lock()
        self._numbers = itertools.count(1)

    def of(self, job, view, phone: bool) -> tuple[int, str, bytes]:
        """The number of the newest frame's markup, that markup, and its gzip: written and
        compressed once per frame and kind, whoever asks."""
        frame = frame_of(job, view, phone)
        if frame is None:
            return 0, "", b""
        with self._lock:
            kept = self._made.get((job.key, phone))
            if kept is not None and kept[0] is frame:
                return kept[1:]
        markup = figures_html(frame, view)
        made = (frame, next(self._numbers), markup, gzip.compress(markup.encode(), compresslevel=6))
        with self._lock:
            self._made[job.key, phone] = made
            while len(self._made) > self._kept:
                self._made.pop(next(iter(self._made)))
        return made[1:]

    def drop(self, key: str) -> None:
        """Forget run ``key``'s pictures: they are no longer asked for."""
        with self._lock:
            self._made.pop((key, False), None), self._made.pop((key, True), None)


def last_step(view) -> int:
    """The step of the run's newest evaluation (0 before its first)."""
    return view.history[-1]["step"] if view.history else 0


def caption_html(pattern, step: int, *, caption: bool = False) -> str:
    """The caption of a run's pattern figure as it forms, as markup with the texts escaped:
    "<strong>title</strong> at step N — score" (and ``: caption`` with ``caption``)."""
    score = f" — {escape(pattern.score)}" if pattern.score else ""
    words = f": {escape(pattern.caption)}" if caption else ""
    return f"<strong>{escape(pattern.title)}</strong> at step {step}{score}{words}"


def figures_html(frame, view) -> str:
    """The frame's pictures as markup: the curves, and the pattern figure with its words."""
    parts = []
    if frame.curves_still and frame.curves is not None:
        parts.append(f"<figure class='live-run-curves'>"
                     f"{figures.svg_img(frame.curves_still, frame.curves.alt or '')}</figure>")
    prepared, pattern = frame.pattern_figure, frame.pattern
    if prepared is not None and prepared.still and pattern is not None:
        parts.append(f"<figure class='live-run-pattern'>{figures.svg_img(prepared.still, prepared.alt or '')}"
                     f"<figcaption>{caption_html(pattern, last_step(view), caption=True)}"
                     "</figcaption></figure>")
    return "".join(parts)


def frame_of(job, view, phone: bool):
    """The run's frame for a phone or a laptop's two columns (`Job.frame`), or None."""
    if not view.history:
        return None
    return job.frame(view, figures.PHONE_WIDTH if phone else figures.column_width(2), phone=phone)
