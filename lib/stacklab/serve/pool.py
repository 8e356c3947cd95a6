"""A bounded pool of training workers shared by many browser sessions.

Pages never train inside their script: they `JobPool.submit` a job and poll `Job.view`.
Jobs wait in one queue (each knows its place), at most ``workers`` run at once, a job
that fails or diverges frees its worker and says why, and every job belongs to one
owner (a browser session) that alone can see or stop it. Owners that stop polling (a
closed tab) are forgotten after ``ttl_seconds``: their jobs are stopped and dropped.

>>> pool = JobPool(workers=1)
>>> job = pool.submit("me", None, TrainConfig(task="position", steps=20))
>>> job.wait(timeout=60).status
'finished'
>>> pool.jobs_of("someone else")
[]
>>> pool.shutdown()
"""

from __future__ import annotations

import ctypes
import gc
import itertools
import os
import threading
import time
from collections import deque
from dataclasses import dataclass

import torch

from ..core.errors import StackError
from ..lab.trainer import Run, Status, TrainConfig, Trainer
from .classroom import (ACTIVATION_BUDGET_BYTES, MAX_QUEUED_RUNS, PARAM_BUDGET_BYTES,
                        RUNS_KEPT_PER_SESSION, SESSION_TTL_SECONDS)



@dataclass(frozen=True)
class JobView:
    """A consistent copy of a job's state for a page to draw."""

    id: int
    status: Status
    position: int | None  # 1-based place in the queue while queued
    step: int
    steps: int
    history: tuple[dict, ...]
    train_loss: tuple[tuple[int, float], ...]
    error: str | None
    seconds: float

    @property
    def active(self) -> bool:
        return self.status.active

    @property
    def progress(self) -> float:
        return self.step / self.steps if self.steps else 0.0


class Job:
    """One training run requested by one owner."""

    def __init__(self, job_id: int, owner: str, trainer: Trainer):
        self.id = job_id
        self.owner = owner
        self.trainer = trainer
        self.status = Status.QUEUED
        self.error: str | None = None
        self.run: Run | None = None
        self.started: float | None = None
        self.ended: float | None = None
        self._done = threading.Event()
        self._pool: JobPool | None = None

    @property
    def config(self) -> TrainConfig:
        return self.trainer.config

    def view(self) -> JobView:
        run = self.trainer.run_state
        if self.run is not None:
            run = self.run
        position = self._pool.position(self) if self._pool and self.status == Status.QUEUED else None
        return JobView(
            id=self.id,
            status=self.status,
            position=position,
            step=run.step if run else 0,
            steps=self.config.steps,
            history=tuple(run.history) if run else (),
            train_loss=tuple(run.train_loss) if run else (),
            error=self.error,
            seconds=(self.ended or time.monotonic()) - (self.started or time.monotonic()),
        )

    def wait(self, timeout: float | None = None) -> "Job":
        """Block until the job has ended (for scripts and tests; pages poll instead)."""
        self._done.wait(timeout)
        return self


def _release_memory() -> None:
    """Collect the forgotten runs and hand freed heap pages back to the system (glibc)."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


class JobPool:
    """Runs training jobs on ``workers`` threads; see the module docstring."""

    def __init__(self, workers: int | None = None, *, budget_bytes: int = PARAM_BUDGET_BYTES,
                 activation_budget_bytes: int = ACTIVATION_BUDGET_BYTES,
                 ttl_seconds: float = SESSION_TTL_SECONDS, max_queued: int = MAX_QUEUED_RUNS,
                 threads_per_job: int | None = None, worker_nice: int = 0):
        self.workers = max(1, workers or os.cpu_count() or 1)
        self.threads_per_job = threads_per_job
        self.worker_nice = worker_nice
        self.budget_bytes = budget_bytes
        self.activation_budget_bytes = activation_budget_bytes
        self.ttl_seconds = ttl_seconds
        self.max_queued = max_queued
        self._lock = threading.Condition()
        self._queue: deque[Job] = deque()
        self._jobs: dict[str, list[Job]] = {}  # owner -> jobs, newest first
        self._seen: dict[str, float] = {}  # owner -> last time it polled
        self._ids = itertools.count(1)
        self._threads: list[threading.Thread] = []
        self._closed = False
        self.running = 0

    # -- used by pages --------------------------------------------------------------

    def submit(self, owner: str, source: str | None, config: TrainConfig) -> Job:
        """Queue a run; raises `StackError` at once if the stack or a setting is wrong.

        An owner has at most one active job: submitting again stops the previous one.
        """
        trainer = self.check(source, config)
        with self._lock:
            self._forget_idle_locked()
            if self._closed:
                raise StackError("E_BUDGET", "the server is shutting down", hint="try again later")
            if len(self._queue) >= self.max_queued:
                raise StackError("E_BUDGET", f"{len(self._queue)} runs are already waiting",
                                 hint="wait for a few runs to finish, then press Train again")
            for job in self._jobs.get(owner, []):
                if job.status.active:
                    self._stop_locked(job)
            job = Job(next(self._ids), owner, trainer)
            job._pool = self
            jobs = self._jobs.setdefault(owner, [])
            jobs.insert(0, job)
            del jobs[RUNS_KEPT_PER_SESSION:]
            self._seen[owner] = time.monotonic()
            self._queue.append(job)
            self._start_workers_locked()
            self._lock.notify()
        return job

    def check(self, source: str | None, config: TrainConfig) -> Trainer:
        """The trainer a submit would queue; raises `StackError` if the run is not allowed."""
        return Trainer(source, config, budget_bytes=self.budget_bytes,
                       activation_budget_bytes=self.activation_budget_bytes)

    def stop(self, owner: str, job_id: int) -> bool:
        """Stop one of ``owner``'s jobs (a queued one never starts); False if not theirs."""
        with self._lock:
            job = self._find(owner, job_id)
            if job is None:
                return False
            self._stop_locked(job)
            return True

    def get(self, owner: str, job_id: int) -> Job | None:
        """``owner``'s job ``job_id``, or ``None`` (other owners' jobs are invisible)."""
        with self._lock:
            self._seen[owner] = time.monotonic()
            return self._find(owner, job_id)

    def jobs_of(self, owner: str) -> list[Job]:
        """``owner``'s jobs, newest first."""
        with self._lock:
            self._seen[owner] = time.monotonic()
            return list(self._jobs.get(owner, []))

    def position(self, job: Job) -> int | None:
        """1-based place of a queued job in the queue."""
        with self._lock:
            for place, queued in enumerate(self._queue, start=1):
                if queued is job:
                    return place
        return None

    def stats(self) -> dict:
        with self._lock:
            return {"workers": self.workers, "running": self.running, "queued": len(self._queue),
                    "owners": len(self._jobs)}

    def forget_idle(self, now: float | None = None) -> int:
        """Stop and drop the jobs of owners that have not polled for ``ttl_seconds``."""
        with self._lock:
            return self._forget_idle_locked(time.monotonic() if now is None else now)

    def shutdown(self, timeout: float = 10.0) -> None:
        """Stop every job and end the workers."""
        with self._lock:
            self._closed = True
            for jobs in self._jobs.values():
                for job in jobs:
                    self._stop_locked(job)
            self._lock.notify_all()
        for thread in self._threads:
            thread.join(timeout)

    # -- internals ----------------------------------------------------------------------

    def _find(self, owner: str, job_id: int) -> Job | None:
        return next((j for j in self._jobs.get(owner, []) if j.id == job_id), None)

    def _stop_locked(self, job: Job) -> None:
        if job.status == Status.QUEUED:
            try:
                self._queue.remove(job)
            except ValueError:
                pass
            job.status = Status.STOPPED
            job.ended = time.monotonic()
            job._done.set()
        elif job.status == Status.RUNNING:
            job.trainer.stop()

    def _start_workers_locked(self) -> None:
        while len(self._threads) < self.workers:
            thread = threading.Thread(target=self._work, name=f"stacklab-worker-{len(self._threads)}",
                                      daemon=True)
            self._threads.append(thread)
            thread.start()

    def _work(self) -> None:
        if self.threads_per_job:
            # OpenMP's thread count is per calling thread: set it in the worker itself
            torch.set_num_threads(self.threads_per_job)
        if self.worker_nice:
            # Training yields the CPU to page scripts: a busy classroom stays responsive.
            try:
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), self.worker_nice)
            except (OSError, AttributeError):
                pass
        while True:
            with self._lock:
                while not self._queue and not self._closed:
                    self._lock.wait(timeout=5.0)
                    self._forget_idle_locked()
                if self._closed:
                    return
                job = self._queue.popleft()
                job.status = Status.RUNNING
                job.started = time.monotonic()
                self.running += 1
            try:
                run = job.trainer.run()
                job.run = run
                job.status = run.status
                job.error = run.error
            except BaseException as err:  # noqa: BLE001 - a worker must survive any job
                job.status = Status.FAILED
                job.error = f"{type(err).__name__}: {err}"
            finally:
                with self._lock:
                    self.running -= 1
                    job.ended = time.monotonic()
                    job._done.set()

    def _forget_idle_locked(self, now: float | None = None) -> int:
        now = time.monotonic() if now is None else now
        idle = [owner for owner, seen in self._seen.items() if now - seen > self.ttl_seconds]
        for owner in idle:
            for job in self._jobs.pop(owner, []):
                self._stop_locked(job)
            del self._seen[owner]
        if idle:  # outside the lock: polls and submits never wait for a collection
            threading.Thread(target=_release_memory, name="stacklab-release", daemon=True).start()
        return len(idle)
