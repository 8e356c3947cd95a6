"""The figures of one job (`stacklab.serve.workers.job`) that all its watchers share.

A classroom's sessions all look at one run: each figure is drawn once, on the first page
that asks, and handed to every other. `JobFigures` holds a job's three kinds, each in a
`FigureCache` of its own (one lock each, so a page drawing a large run's figures never
holds up the progress view): the task's pattern figure of the newest evaluation, the
training curves up to it, and a finished run's figures per node, as its worker drew them
(``figures.json``) or, when it drew none, drawn here from the run's tensors.

A run whose stored figures do not read (a damaged ``figures.json``) is *damaged*: asking
for its figures raises a `StackError` that says so (logged once), and its pattern figure
is left out; neither is ever a page error.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable, TypeVar

from ...core.errors import StackError
from ...lab.figures import (RunFigure, figure_from_entry, figures_from_json, pattern_figure,
                            run_figures, training_curves)
from ..limits import FIGURES_WAIT_SECONDS, SHARED_FIGURES_BYTES
from .job_frame import FRAME_SECONDS, LiveFrame, make_frame

log = logging.getLogger("stacklab.pool")

T = TypeVar("T")
DAMAGE = (ValueError, TypeError, AttributeError, KeyError, IndexError, OSError)  # a bad file


class FigureCache:
    """Figures by name, each drawn at most once per what it is drawn from (its *source*:
    an evaluation's figure entry, a run, a count of evaluations) and shared by everyone
    who asks; one lock, held while one is drawn, so a second page waits for it instead of
    drawing it again."""

    def __init__(self):
        self._lock = threading.Lock()
        self._drawn: dict[object, tuple[object, object]] = {}  # name -> (source, figure)

    def get(self, name: object, source: object, draw: Callable[[], T],
            keep: Callable[[], bool] = lambda: True) -> T:
        """The figure ``name`` of ``source``: the one drawn already, else ``draw()``, kept
        for the next page unless ``keep()`` says no once it is drawn."""
        found = self._drawn.get(name)  # no lock: a figure drawn already is read at once
        if found is not None and _same(found[0], source):
            return found[1]
        with self._lock:
            found = self._drawn.get(name)
            if found is not None and _same(found[0], source):
                return found[1]
            figure = draw()
            if keep():
                self._drawn[name] = (source, figure)
            return figure

    def names(self) -> list:
        """The names of the figures kept."""
        return list(self._drawn)

    def last(self, name: object):
        """The figure ``name`` drawn last (of whatever source), or None."""
        found = self._drawn.get(name)
        return None if found is None else found[1]


def _same(drawn_from: object, source: object) -> bool:
    return drawn_from is source or (type(drawn_from) is type(source) and drawn_from == source)


class JobFigures:
    """The shared figures of the job of run ``key``; see the module docstring."""

    def __init__(self, key: str):
        self.key = key
        self._pattern = FigureCache()
        self._curves = FigureCache()
        self._nodes = FigureCache()
        self._frames = FigureCache()
        self._ready = threading.Event()  # set unless the worker is drawing them
        self._ready.set()
        self._pending = False  # its worker draws them after the job has ended
        self._damage_logged = False

    # -- the worker drawing a finished run's figures ------------------------------------

    def drawing(self) -> None:
        """The worker stored the run and now draws its figures: a page waits for them."""
        self._ready.clear()

    def pending(self) -> None:
        """The job ends before its figures are drawn: `ended` leaves them drawing."""
        self._pending = True

    def ended(self) -> None:
        """The job ended: its figures are drawn, or never will be by its worker (a page
        draws them itself), unless they are `pending`."""
        if not self._pending:
            self._ready.set()

    def done(self) -> None:
        """Its worker has stored its figures, or never will."""
        self._pending = False
        self._ready.set()

    def wait(self, timeout: float | None) -> bool:
        return self._ready.wait(timeout)

    # -- the figures ---------------------------------------------------------------------

    def pattern(self, source, run) -> RunFigure | None:
        """The pattern figure of ``source`` (a `figure_entry` tuple, or ``run``, whose
        stored one is read): drawn once per source; a figure never ends a run, so one that
        cannot be drawn leaves the last one in place."""
        if source is None:
            return self._pattern.last("pattern")

        def draw() -> RunFigure | None:
            try:
                if isinstance(source, tuple):
                    return figure_from_entry(source)
                return next(iter(self._stored(run, "pattern")), None)
            except (RuntimeError, StackError, *DAMAGE) as err:
                if not (isinstance(err, StackError) and self._damage_logged):  # said once
                    log.warning("pattern figure of run %s: %s: %s", self.key,
                                type(err).__name__, err)
                return self._pattern.last("pattern")

        return self._pattern.get("pattern", source, draw)

    def curves(self, history: tuple[dict, ...], train_loss: tuple[tuple[int, float], ...]):
        """The training curves up to the newest evaluation in ``history``: drawn once per
        evaluation, however many watch."""
        def draw():
            last_eval = history[-1]["step"]
            losses = [(step, loss) for step, loss in train_loss if step <= last_eval]
            return training_curves(list(history), losses)

        return self._curves.get("curves", len(history), draw)

    def frame(self, history: tuple[dict, ...], train_loss: tuple[tuple[int, float], ...],
              pattern: RunFigure | None, width: int, still_font: int,
              live: bool = False, phone: bool = False) -> LiveFrame:
        """The live view of ``history`` (its curves) and ``pattern`` for a column ``width``
        px wide (`stacklab.serve.workers.job_frame`): prepared once per evaluation, pattern
        figure and width, and handed to every watcher's page. While the run is ``live``,
        at most one new frame every `FRAME_SECONDS` (a small run evaluates ten times a
        second; pages poll every second or two), so the hall's polls share each one. A
        phone's frame (its copies of the figures) is kept beside the laptops' one."""
        name = ("frame", phone)
        kept = self._frames.last(name)
        if (live and kept is not None and kept.width == width
                and time.monotonic() - kept.made < FRAME_SECONDS):
            return kept

        def draw() -> LiveFrame:
            curves = self.curves(history, train_loss) if history else None
            last = history[-1]["step"] if history else 0
            points = (history, [(step, loss) for step, loss in train_loss if step <= last])
            return make_frame(len(history), width, curves, pattern, still_font, phone, points)

        # the frame holds ``pattern``, so its id names no other figure while it is kept
        return self._frames.get(name, (len(history), id(pattern), width, still_font), draw)

    def of_node(self, run, node: str | None) -> list[RunFigure]:
        """Every figure of the finished ``run`` for ``node``: as its worker drew them, else
        drawn here once. Kept for every viewer unless large: parsed, a million-row table's
        figures hold 30 MiB (their 4 MB of JSON stays with the run, parsed again per view).
        Raises `StackError` for a run that has left the store or is damaged."""
        return self._nodes.get(node, node, lambda: self._stored(run, node),
                               keep=lambda: _json_bytes(run, node) <= SHARED_FIGURES_BYTES)

    def kept_nodes(self) -> list[str | None]:
        """The nodes whose figures are kept for every viewer (`of_node`)."""
        return self._nodes.names()

    def _stored(self, run, node: str | None) -> list[RunFigure]:
        """The figures the worker stored (``"pattern"``: the pattern figure); drawn from
        the run's tensors, read for this and let go, when it stored none."""
        self._ready.wait(FIGURES_WAIT_SECONDS)  # a worker still drawing them
        if run is None:
            raise StackError("E_VALUE", f"run {self.key} has no figures: it has not finished",
                             hint="wait for the run to end, then look again")
        try:
            stored = run.figures()
            found = figures_from_json(stored, node) if stored is not None else None
        except DAMAGE as err:
            raise self._damaged(err) from None
        if found is not None:
            return found
        log.info("drawing the figures of run %s (%s) in the server", self.key, node)
        whole = run.load()
        if node == "pattern":
            pattern = pattern_figure(whole)
            return [pattern] if pattern is not None else []
        return run_figures(whole, node)

    def _damaged(self, err: BaseException) -> StackError:
        """The run's damage as the page shows it; logged once (the store logs its own)."""
        said_by_store = isinstance(err, StackError) and err.message.startswith("run ")
        if not self._damage_logged and not said_by_store:
            log.warning("run %s is damaged: its figures.json does not read (%s: %s)", self.key,
                        type(err).__name__, str(err)[:200])
        self._damage_logged = True
        return StackError("E_DAMAGED", f"run {self.key} is damaged: its stored figures do not "
                          "read", hint="train it again (press Train), or open another run",
                          where=f"figures.json of run {self.key[:12]}")


def _json_bytes(run, node: str | None) -> int:
    """The JSON size of ``run``'s stored figures for ``node`` (0 when drawn here, or when
    they do not read: `_stored` says so)."""
    try:
        drawn = run.figures() if run is not None else None
        if not drawn:
            return 0
        nodes = drawn.get("nodes", {})
        found = nodes.get(node) if node is not None else next(iter(nodes.values()), [])
        return sum(len(entry[2]) for entry in found or ())
    except (StackError, *DAMAGE):
        return 0
