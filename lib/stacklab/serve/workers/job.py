"""One run of the pool (`stacklab.serve.workers.pool`) as its watchers see it.

A `Job` is made by the pool, which moves it on through its own methods (`Job.start`,
`Job.stop`, `Job.fail`, `Job.finish`: the only writers of its status); pages read it
through `Job.view`, a frozen `JobView`. It is given what it needs of the pool, never the
pool: a reader of the run store (for a run its worker has stored) and its place in the
queue. The worker's messages (`stacklab.serve.workers.messages`) arrive through
`Job.report`; the live progress they carry is the job's `Progress`, and the figures every
watcher shares are its `JobFigures` (`stacklab.serve.workers.job_figures`).
"""

from __future__ import annotations

import ctypes
import gc
import threading
import time
from dataclasses import dataclass
from typing import Callable

from ...lab.figures import RunFigure
from ...lab.runs.store import StoredRun
from ...lab.settings import TrainConfig
from ...lab.train.record import Status
from ...lab.train.plan import RunPlan
from .job_figures import JobFigures
from .job_frame import LiveFrame
from .messages import Evaluated, Message, Pattern, Step, Stored


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
    watchers: int  # owners watching the run (a shared run has more than one; while it
    # trains on Ray, those of every app server that reads it)
    pattern: RunFigure | None  # the task's pattern figure at the last evaluation

    @property
    def active(self) -> bool:
        return self.status.active

    @property
    def progress(self) -> float:
        return self.step / self.steps if self.steps else 0.0


class Progress:
    """What a job's worker has reported so far, or what its run holds once handed over:
    the newest step, the held-out evaluations, the batch losses, and the newest pattern
    figure (a `figure_entry` tuple; ``final`` once it is the final model's)."""

    def __init__(self, run: StoredRun | None = None):
        self.step = 0
        self.history: list[dict] = []
        self.train_loss: list[tuple[int, float]] = []
        self.pattern: tuple | None = None
        self.final = False
        if run is not None:
            self.take_run(run)

    def take(self, message: Message) -> None:
        """Take one progress message (`Step`, `Evaluated`, `Pattern`); others say nothing
        about progress."""
        if isinstance(message, Step):
            self.step = message.step
        elif isinstance(message, Evaluated):
            self.step = message.step
            self.train_loss.extend(tuple(item) for item in message.train_losses)
            self.history.append(message.entry)
            if message.pattern is not None:
                self.pattern = message.pattern
        elif isinstance(message, Pattern) and message.figure is not None:
            self.pattern = message.figure

    def take_final(self, pattern: tuple | None) -> None:
        """The pattern figure of the final model, once its worker has stored the run."""
        if pattern is not None:
            self.pattern, self.final = pattern, True

    def take_run(self, run: StoredRun) -> None:
        """The run as its worker handed it over, in place of the live progress."""
        self.step, self.history, self.train_loss = run.step, list(run.history), list(run.train_loss)


class Job:
    """One training run (one key), watched by the owners who asked for it."""

    def __init__(self, job_id: int, plan: RunPlan | None = None, run: StoredRun | None = None,
                 *, open_stored: Callable[[str], StoredRun | None] = lambda key: None,
                 queue_place: Callable[[Job], int | None] = lambda job: None):
        """A job that will train ``plan`` (checked; the training runs in a worker process), or
        one whose ``run`` is already done.
        ``open_stored(key)`` reads a run of the store (its worker stored it: `Stored`);
        ``queue_place(job)`` is its 1-based place in the queue while queued."""
        self.id = job_id
        self.key = plan.key if plan is not None else run.key
        self.plan = plan
        self.run: StoredRun | None = run  # the run once it has ended, tensors left on disk
        self._status = Status.QUEUED if run is None else run.status
        self._error: str | None = None if run is None else run.error
        self.watchers: set[str] = set()  # owners who asked for it and still watch
        self.elsewhere = 0  # sessions watching it on other app servers (a run on Ray)
        self.progress = Progress(run)  # live, as the worker process reports it
        self.shared = JobFigures(self.key)
        # a run from the store: its own training time (the page says "in 2.1 s", not 0.0)
        self.ended: float | None = None if run is None else time.monotonic()
        self.started: float | None = None if run is None else self.ended - run.seconds
        self.stop_event = None  # set by the pool to ask the worker to stop
        self.process = None  # the worker process while it trains (None on Ray)
        self._done = threading.Event()
        self._open_stored = open_stored
        self._queue_place = queue_place
        if run is not None:
            self._done.set()

    @property
    def status(self) -> Status:
        return self._status

    @property
    def error(self) -> str | None:
        return self._error

    @property
    def config(self) -> TrainConfig:
        return self.run.config if self.run is not None else self.plan.config

    @property
    def step(self) -> int:
        return self.progress.step

    # -- its status: these four are the only writers ---------------------------------------

    def start(self, seconds_ago: float = 0.0) -> None:
        """A worker trains it now (one that another app server trains: for ``seconds_ago``)."""
        self.started = time.monotonic() - seconds_ago
        self._status = Status.RUNNING

    def stop(self) -> None:
        """Stopped before it started: it never will (`wait` returns)."""
        self._status = Status.STOPPED
        self.end()

    def fail(self, why: str) -> None:
        """It failed, for ``why`` (a worker that ended without a word, or could not start)."""
        self._error, self._status = why, Status.FAILED

    def finish(self, status: str, error: str | None, run: StoredRun | None) -> None:
        """Its worker ended it as ``status`` (``error`` says why, where it did not finish)
        and handed over ``run``, shown from now on in place of its live progress."""
        if run is not None:
            self.run = run
            self.progress.take_run(run)
        self._error, self._status = error, Status(status)

    # -- what its worker says ------------------------------------------------------------

    def report(self, message: Message) -> None:
        """Take one message of the worker process (`stacklab.serve.workers.messages`)."""
        if isinstance(message, Stored):
            self._stored(message)
        else:
            self.progress.take(message)

    def _stored(self, message: Stored) -> None:
        """The worker stored the run and draws its figures now: its watchers see it end at
        once (with the pattern figure of its final model); a page asking for the other
        figures waits for them (`figures`)."""
        run = self._open_stored(self.key)
        if run is None:
            return  # taken at `Done` instead
        self.shared.drawing()
        self.progress.take_final(message.pattern)
        self.ended = time.monotonic()
        self.finish(message.status, message.error, run)

    def end(self) -> None:
        """The job has ended (its status says how): `wait` returns."""
        if self.ended is None:  # a run stored early (`Stored`) ended then
            self.ended = time.monotonic()
        self._done.set()
        self.shared.ended()

    def figures_pending(self) -> None:
        """The job ends before its figures are drawn: its worker goes on drawing them, and
        a page that asks waits for `figures_done`."""
        self.shared.pending()

    def figures_done(self) -> None:
        """Its worker has stored its figures, or never will."""
        self.shared.done()

    # -- what pages read -----------------------------------------------------------------

    def pattern_now(self) -> RunFigure | None:
        """The task's pattern figure at the newest evaluation that has one; once the run
        has ended, the one its worker drew of the final model. Rebuilt at most once per
        figure, when a page first asks, and shared by everyone watching."""
        source = self.progress.pattern
        if self.run is not None and not self.status.active and not self.progress.final:
            source = self.run
        return self.shared.pattern(source, self.run)

    def curves(self, view: JobView):
        """The training curves of ``view`` (a view of this job) up to its newest evaluation:
        drawn once per evaluation, on the first page that asks, and shared by every watcher
        (a classroom's sessions would otherwise each build the same figure)."""
        return self.shared.curves(view.history, view.train_loss)

    def frame(self, view: JobView, width: int, still_font: int = 15,
              phone: bool = False) -> LiveFrame:
        """``view``'s curves and pattern figure as every watcher's page shows them in a
        column ``width`` px wide, or on a phone (the pattern figure's still picture with
        ticks of ``still_font`` px): prepared once per evaluation and shared
        (`stacklab.serve.workers.job_frame`), so a watcher's poll builds no figure."""
        return self.shared.frame(view.history, view.train_loss, view.pattern, width, still_font,
                                 live=view.active, phone=phone)

    def figures(self, node: str | None = None) -> list[RunFigure]:
        """Every figure of the finished run (`run_figures`) for ``node``: as its worker drew
        them, else drawn here once; shared by every session that views it. Raises
        `StackError` when the run has left the store since, or is damaged."""
        return self.shared.of_node(self.run, node)

    def view(self, owner: str | None = None) -> JobView:
        """The job as ``owner`` sees it (stopped, once they stopped watching a run that
        goes on for others)."""
        status = self.status
        position = self._queue_place(self) if status == Status.QUEUED else None
        if owner is not None and status.active and owner not in self.watchers:
            status = Status.STOPPED  # this owner stopped watching; the run goes on for others
        progress = self.progress
        return JobView(
            id=self.id,
            key=self.key,
            status=status,
            position=position,
            step=progress.step,
            steps=self.config.steps,
            history=tuple(progress.history),
            train_loss=tuple(progress.train_loss),
            error=self.error,
            seconds=(self.ended or time.monotonic()) - (self.started or time.monotonic()),
            watchers=len(self.watchers) + (self.elsewhere if status.active else 0),
            pattern=self.pattern_now(),
        )

    def wait(self, timeout: float | None = None) -> "Job":
        """Block until the job has ended and its worker has stored its figures, which it
        draws after the run ends for its watchers (for scripts and tests; pages poll)."""
        start = time.monotonic()
        if self._done.wait(timeout):
            left = None if timeout is None else max(0.0, timeout - (time.monotonic() - start))
            self.shared.wait(left)
        return self


def release_memory() -> None:
    """Collect the runs a pool forgot and hand freed heap pages back to the system (glibc)."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
