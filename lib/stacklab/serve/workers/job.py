"""One run of the pool (`stacklab.serve.workers.pool`) as its watchers see it: its state, the
progress its worker reports, and the figures every watcher shares.

A `Job` is made by the pool, which also moves its status on; pages read it through
`Job.view`, a frozen `JobView`. The worker's messages (`stacklab.serve.workers.worker`) arrive
through `Job.report`. Figures are drawn at most once per job (per evaluation while it
trains) and shared by every watcher: the pattern figure of the newest evaluation
(`Job.pattern_now`), the training curves (`Job.curves`) and a finished run's figures per
node (`Job.figures`), each under a lock of its own, so a page drawing a large run's
figures never holds up the progress view.
"""

from __future__ import annotations

import ctypes
import gc
import logging
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...core.errors import StackError
from ...lab.figures import (RunFigure, figure_from_entry, figures_from_json, pattern_figure,
                            run_figures, training_curves)
from ...lab.runs.store import StoredRun
from ...lab.settings import TrainConfig
from ...lab.train.record import Status
from ...lab.train.trainer import Trainer

if TYPE_CHECKING:
    from .pool import JobPool

log = logging.getLogger("stacklab.pool")

FIGURES_WAIT_SECONDS = 60.0  # a page waits this long for figures a worker is drawing
SHARED_FIGURES_BYTES = 2 << 20  # a finished run's parsed figures are kept up to this much JSON


@dataclass(frozen=True)
class JobView:
    """A consistent copy of a job's state, as one owner sees it, for a page to draw."""

    id: int
    key: str
    status: Status  # for an owner who stopped watching a run that goes on: stopped
    position: int | None  # 1-based place in the queue while queued
    step: int
    steps: int
    history: tuple[dict, ...]
    train_loss: tuple[tuple[int, float], ...]
    error: str | None
    seconds: float
    watchers: int  # owners watching the run (a shared run has more than one)
    pattern: RunFigure | None  # the task's pattern figure at the last evaluation

    @property
    def active(self) -> bool:
        return self.status.active

    @property
    def progress(self) -> float:
        return self.step / self.steps if self.steps else 0.0


class Job:
    """One training run (one key), watched by the owners who asked for it."""

    def __init__(self, job_id: int, trainer: Trainer | None = None, run: StoredRun | None = None):
        """A job that will train with ``trainer``, or one whose ``run`` is already done."""
        self.id = job_id
        self.key = trainer.key if trainer is not None else run.key
        self.trainer = trainer  # checked here; the training itself runs in a worker process
        self.run: StoredRun | None = run  # the run once it has ended, tensors left on disk
        self.status = Status.QUEUED if run is None else run.status
        self.error: str | None = None if run is None else run.error
        self.watchers: set[str] = set()  # owners who asked for it and still watch
        # live progress, as the worker process reports it
        self.step = 0 if run is None else run.step
        self.history: list[dict] = [] if run is None else list(run.history)
        self.train_loss: list[tuple[int, float]] = [] if run is None else list(run.train_loss)
        # a run from the store: its own training time (the page says "in 2.1 s", not 0.0)
        self.ended: float | None = None if run is None else time.monotonic()
        self.started: float | None = None if run is None else self.ended - run.seconds
        self.stop_event = None  # set by the pool to ask the worker to stop
        self.process = None  # the worker process while it trains (None on Ray)
        self._done = threading.Event()
        self._pool: JobPool | None = None
        # the pattern figure, shared by watchers
        self._pattern_json: tuple | None = None  # (title, caption, plotly JSON, score)
        self.pattern: RunFigure | None = None
        self._pattern_drawn: object = None  # what `pattern` was made from
        self._pattern_final = False  # `_pattern_json` is of the final model ("stored")
        self._figures_ready = threading.Event()  # set unless the worker is drawing them
        self._figures_pending = False  # its worker draws them after the job has ended
        self._pattern_lock = threading.Lock()
        self._curves: tuple | None = None  # (evaluations drawn, the training curves figure)
        self._curves_lock = threading.Lock()
        # a finished run's figures, shared by viewers
        self._figures: dict[str | None, list[RunFigure]] = {}  # node -> figures
        self._figures_lock = threading.Lock()
        if run is not None:
            self._done.set()
        self._figures_ready.set()

    @property
    def config(self) -> TrainConfig:
        return self.run.config if self.run is not None else self.trainer.config

    def report(self, message: tuple) -> None:
        """Take one progress message of the worker process (see `stacklab.serve.workers.worker`)."""
        if message[0] == "step":
            _, self.step, loss = message
        elif message[0] == "eval":
            _, self.step, entry, losses, pattern = message
            self.train_loss.extend(tuple(item) for item in losses)
            self.history.append(entry)
            if pattern is not None:
                self._pattern_json = pattern
        elif message[0] == "pattern" and message[1] is not None:
            self._pattern_json = message[1]
        elif message[0] == "stored":
            self._stored(*message[1:])

    def _stored(self, status: str, error: str | None, pattern: tuple | None) -> None:
        """The worker stored the run and draws its figures now: its watchers see it end at
        once (with the pattern figure of its final model); a page asking for the other
        figures waits for them (`figures`)."""
        run = self._pool.store.open(self.key) if self._pool is not None else None
        if run is None:
            return  # taken at "done" instead
        self._figures_ready.clear()
        if pattern is not None:
            self._pattern_json, self._pattern_final = pattern, True
        self.take(run)
        self.ended = time.monotonic()
        self.error, self.status = error, Status(status)

    def take(self, run: StoredRun) -> None:
        """Show ``run``, the run the worker handed over, in place of its live progress."""
        self.run, self.step = run, run.step
        self.history, self.train_loss = list(run.history), list(run.train_loss)

    def end(self) -> None:
        """The job has ended (its status says how): `wait` returns."""
        if self.ended is None:  # a run stored early ("stored") ended then
            self.ended = time.monotonic()
        self._done.set()
        if not self._figures_pending:
            self._figures_ready.set()  # drawn, or never to be: a page draws them itself

    def figures_pending(self) -> None:
        """The job ends before its figures are drawn: its worker goes on drawing them, and
        a page that asks waits for `figures_done`."""
        self._figures_pending = True

    def figures_done(self) -> None:
        """Its worker has stored its figures, or never will."""
        self._figures_pending = False
        self._figures_ready.set()

    def pattern_now(self) -> RunFigure | None:
        """The task's pattern figure at the newest evaluation that has one; once the run
        has ended, the one its worker drew of the final model. Rebuilt at most once per
        figure, when a page first asks, and shared by everyone watching."""
        source = self._pattern_json
        if self.run is not None and not self.status.active and not self._pattern_final:
            source = self.run
        if source is None or source is self._pattern_drawn:
            return self.pattern
        with self._pattern_lock:
            if source is not self._pattern_drawn:
                try:
                    if isinstance(source, tuple):
                        self.pattern = figure_from_entry(source)
                    else:
                        self.pattern = next(iter(self._drawn("pattern")), None)
                except (RuntimeError, ValueError, StackError) as err:  # a figure never ends a run
                    log.warning("pattern figure of run %s: %s", self.key, err)
                self._pattern_drawn = source
        return self.pattern

    def curves(self, view: JobView):
        """The training curves of ``view`` (a view of this job) up to its newest evaluation:
        drawn once per evaluation, on the first page that asks, and shared by every watcher
        (a classroom's sessions would otherwise each build the same figure)."""
        drawn = self._curves
        if drawn is not None and drawn[0] == len(view.history):
            return drawn[1]
        with self._curves_lock:
            if self._curves is None or self._curves[0] != len(view.history):
                last_eval = view.history[-1]["step"]
                losses = [(step, loss) for step, loss in view.train_loss if step <= last_eval]
                self._curves = (len(view.history), training_curves(list(view.history), losses))
            return self._curves[1]

    def figures(self, node: str | None = None) -> list[RunFigure]:
        """Every figure of the finished run (`run_figures`) for ``node``: as its worker drew
        them, else drawn here once; shared by every session that views it. Raises
        `StackError` when the run has left the store since."""
        with self._figures_lock:
            if node in self._figures:
                return self._figures[node]
            drawn = self._drawn(node)
            # Kept for every viewer unless large: parsed, a million-row table's figures hold
            # 30 MiB (their 4 MB of JSON stays with the run and is parsed again on a view).
            if _json_bytes(self.run, node) <= SHARED_FIGURES_BYTES:
                self._figures[node] = drawn
            return drawn

    def _drawn(self, node: str | None) -> list[RunFigure]:
        """The figures the worker stored (``"pattern"``: the pattern figure); drawn from
        the run's tensors, read for this and let go, when it stored none."""
        self._figures_ready.wait(FIGURES_WAIT_SECONDS)  # a worker still drawing them
        drawn = self.run.figures()
        found = figures_from_json(drawn, node) if drawn is not None else None
        if found is not None:
            return found
        log.info("drawing the figures of run %s (%s) in the server", self.key, node)
        run = self.run.load()
        if node == "pattern":
            pattern = pattern_figure(run)
            return [pattern] if pattern is not None else []
        return run_figures(run, node)

    def view(self, owner: str | None = None) -> JobView:
        """The job as ``owner`` sees it (stopped, once they stopped watching a run that
        goes on for others)."""
        position = self._pool.position(self) if self._pool and self.status == Status.QUEUED else None
        status = self.status
        if owner is not None and status.active and owner not in self.watchers:
            status = Status.STOPPED  # this owner stopped watching; the run goes on for others
        return JobView(
            id=self.id,
            key=self.key,
            status=status,
            position=position,
            step=self.step,
            steps=self.config.steps,
            history=tuple(self.history),
            train_loss=tuple(self.train_loss),
            error=self.error,
            seconds=(self.ended or time.monotonic()) - (self.started or time.monotonic()),
            watchers=len(self.watchers),
            pattern=self.pattern_now(),
        )

    def wait(self, timeout: float | None = None) -> "Job":
        """Block until the job has ended and its worker has stored its figures, which it
        draws after the run ends for its watchers (for scripts and tests; pages poll)."""
        start = time.monotonic()
        if self._done.wait(timeout):
            left = None if timeout is None else max(0.0, timeout - (time.monotonic() - start))
            self._figures_ready.wait(left)
        return self


def _json_bytes(run, node: str | None) -> int:
    """The JSON size of ``run``'s stored figures for ``node`` (0 when drawn here)."""
    drawn = run.figures() if run is not None else None
    if not drawn:
        return 0
    nodes = drawn.get("nodes", {})
    found = nodes.get(node) if node is not None else next(iter(nodes.values()), [])
    return sum(len(entry[2]) for entry in found or ())


def release_memory() -> None:
    """Collect the runs a pool forgot and hand freed heap pages back to the system (glibc)."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
