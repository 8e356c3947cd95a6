"""The pool's schedule: one queue of jobs waiting for a worker, the queued or running job
of each run key, and the finished jobs kept for sharing (newest last, at most
``FINISHED_RUNS_KEPT``). `Schedule` keeps the book under the pool's lock, which every
method here expects to be held; the pool's worker threads take its jobs in order.
"""

from __future__ import annotations

from collections import OrderedDict, deque

from ...core.errors import StackError
from ...lab.runs.store import STORED_STATUSES, RunStore
from ...lab.train.record import Status
from ..limits import FINISHED_RUNS_KEPT
from .job import Job


class Schedule:
    """The queue, the live jobs by key, the finished ones, and how many run now."""

    def __init__(self, max_queued: int, store: RunStore):
        self.max_queued = max_queued
        self.store = store
        self.queue: deque[Job] = deque()
        self.live: dict[str, Job] = {}  # key -> its queued or running job
        self.done: OrderedDict[str, Job] = OrderedDict()  # key -> finished job, newest last
        self.running = 0
        self.trainings = 0  # runs trained here (attached and stored ones excluded)

    def enqueue(self, job: Job) -> None:
        """``job`` at the end of the queue, live under its key."""
        self.live[job.key] = job
        self.queue.append(job)

    def room_check(self) -> None:
        """`StackError` when the queue is full."""
        if len(self.queue) >= self.max_queued:
            raise StackError("E_BUDGET", f"{len(self.queue)} runs are already waiting",
                             hint="wait for a few runs to finish, then press Train again")

    def position(self, job: Job) -> int | None:
        """1-based place of a queued job in the queue."""
        for place, queued in enumerate(self.queue, start=1):
            if queued is job:
                return place
        return None

    def held(self, key: str) -> Job | None:
        """The job of ``key`` held here, live or ended."""
        return self.live.get(key) or self.done.get(key)

    def known(self, key: str) -> Job | None:
        """The live job of ``key``, or its finished job when that one can be shared."""
        job = self.live.get(key)
        if job is not None:
            return job
        job = self.done.get(key)
        if job is not None and job.status in STORED_STATUSES:
            self.done.move_to_end(key)
            self.store.touch(key)  # in use: last to be evicted
            return job
        return None

    def remember(self, job: Job) -> None:
        """``job`` ended: kept for sharing, the oldest dropped past the bound."""
        self.done[job.key] = job
        self.done.move_to_end(job.key)
        while len(self.done) > FINISHED_RUNS_KEPT:
            self.done.popitem(last=False)

    def stop(self, job: Job) -> None:
        """Stop ``job``: a queued one never starts, a running one stops after its step."""
        if job.status == Status.QUEUED:
            try:
                self.queue.remove(job)
            except ValueError:
                pass
            job.stop()
            self.live.pop(job.key, None)
        elif job.status == Status.RUNNING and job.stop_event is not None:
            job.stop_event.set()  # the worker process stops after its current step
            self.forget_live(job)  # a new Train press for this key trains anew

    def take(self) -> Job:
        """The next queued job, now running."""
        job = self.queue.popleft()
        job.start()
        self.running += 1
        self.trainings += 1
        return job

    def forget_live(self, job: Job) -> None:
        if self.live.get(job.key) is job:
            del self.live[job.key]

    def ended(self, job: Job) -> None:
        """``job`` reached its end: no longer live, kept when it can be shared."""
        self.forget_live(job)
        if job.status in STORED_STATUSES:
            self.remember(job)
