"""A bounded pool of training workers shared by many browser sessions, one run per key.

Pages never train inside their script: they `JobPool.submit` a run and poll `Job.view`.
A run is known by its key (`stacklab.lab.keys`): a submit whose key is already queued or
running **attaches** to that job, and one whose key has finished (in this pool, or in the
run store on disk) gets the finished run at once. So thirty students pressing Train on
one link cause one training. On Ray this holds across app servers: a key that another
app server trains is followed live from its actor (`stacklab.serve.workers.ray_runs`).

Every session (an *owner*) sees only the jobs it asked for. A job ends early only when
nobody who asked for it still watches: ``stop`` detaches the owner, and stops the run
when it was the last watcher. Jobs wait in one queue (each knows its place), at most
``workers`` run at once, each in a process of its own (`stacklab.serve.workers.worker`):
a crash, an out-of-memory kill or a SIGKILL fails only that run, which says why.
Owners that stop polling (a closed tab) are detached after ``ttl_seconds``.

The pool is split by job: `scheduling` (the queue, the live and finished jobs by key),
`owners` (who watches what, and liveness) and `backends` (local processes from a warm fork
server, Ray, the table jobs); `JobPool` holds the one lock and ties them together. A job
and its shared figures are `job`; how a run reaches its process or Ray actor is `transport`.

>>> import tempfile
>>> pool = JobPool(workers=1, store=RunStore(tempfile.mkdtemp()))
>>> job = pool.submit("me", None, TrainConfig(task="position", steps=20))
>>> job.wait(timeout=60).status
'finished'
>>> pool.submit("you", None, TrainConfig(task="position", steps=20)) is job  # no new training
True
>>> pool.jobs_of("someone else")
[]
>>> pool.shutdown()
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
from typing import Callable

from ...core.errors import StackError
from ...lab.runs.store import RunStore
from ...lab.settings import TrainConfig
from ...lab.train.budgets import Budgets
from ...lab.train.plan import RunPlan, plan_run
from ...lab.train.record import Status
from ..limits import BUDGETS, MAX_QUEUED_RUNS, SESSION_TTL_SECONDS
from .backends import Backends
from .job import Job, JobView, release_memory
from .owners import Owners
from .plan_cache import PlanCache
from .scheduling import Schedule
from .transport import Transport, every, relay

__all__ = ["Job", "JobPool", "JobView"]

log = logging.getLogger("stacklab.pool")


class JobPool:
    """Runs training jobs, one per run key, at most ``workers`` at once, each in a worker
    process; see the module docstring."""

    def __init__(self, workers: int | None = None, *, budgets: Budgets = BUDGETS,
                 ttl_seconds: float = SESSION_TTL_SECONDS, max_queued: int = MAX_QUEUED_RUNS,
                 threads_per_job: int | None = None, worker_nice: int = 0,
                 store: RunStore | None = None,
                 owner_alive: Callable[[str], bool] | None = None,
                 disconnect_grace_seconds: float = 10.0,
                 ray_address: str | None = None):
        """``owner_alive(owner)``, when given, says whether an owner (a browser session) is
        still connected: one that has not been for ``disconnect_grace_seconds`` (a closed
        or reloaded tab, not a network blip) is detached then, not after ``ttl_seconds``."""
        self.workers = max(1, workers or os.cpu_count() or 1)
        self.budgets = budgets
        self.store = store if store is not None else RunStore()
        self.backends = Backends(self.workers, budgets=budgets, store=self.store,
                                 threads_per_job=threads_per_job, worker_nice=worker_nice,
                                 ray_address=ray_address)
        self.ray_address = self.backends.ray_address
        self.tables = self.backends.tables
        self.owners = Owners(ttl_seconds, owner_alive, disconnect_grace_seconds)
        self.schedule = Schedule(max_queued, self.store)
        self._lock = threading.Condition()  # guards the schedule and the owners
        self._checked = PlanCache()  # the plans `check` made, bounded in bytes
        self._ids = itertools.count(1)
        self._threads: list[threading.Thread] = []
        self._closed = False

    @property
    def running(self) -> int:
        return self.schedule.running

    @property
    def trainings(self) -> int:
        """Runs this pool has trained (attached and stored ones excluded)."""
        return self.schedule.trainings

    # -- used by pages --------------------------------------------------------------

    def submit(self, owner: str, source: str | None, config: TrainConfig) -> Job:
        """The job of this run for ``owner``: a running one with its key (attached), a
        finished one (at once), or a new one in the queue. Raises `StackError` at once if
        the stack or a setting is wrong.

        An owner watches at most one active job: submitting another detaches it from the
        previous one (which stops if nobody else watches it).
        """
        plan = self.check(source, config)
        with self._lock:
            self._forget_idle_locked()
            if self._closed:
                raise StackError("E_BUDGET", "the server is shutting down", hint="try again later")
        return self._attach(owner, plan.key, lambda: self._queue_locked(plan))

    def open(self, owner: str, key: str) -> Job | None:
        """Attach ``owner`` to the run ``key`` (live, finished here, or in the store): a
        reload or a link with ``run=KEY``. None when no run has that key."""
        return self._attach(owner, key)

    def watched(self, key: str) -> Job | None:
        """The job of ``key`` held here (live or ended), attaching no one (a watch's read)."""
        with self._lock:
            return self.schedule.held(key)

    def check(self, source: str | None, config: TrainConfig) -> RunPlan:
        """The plan a submit would queue (`stacklab.lab.train.plan.plan_run`); raises
        `StackError` if the run is not allowed. Remembered per stack and settings within a
        bound in bytes (`PlanCache`): every script run of the Train page checks its run,
        and a classroom's sessions all check the same one (the worker trains the plan's
        source and settings again)."""
        plan = self._checked.get(source, config)
        if plan is None:
            plan = plan_run(source, config, budgets=self.budgets)
            self._checked.put(source, config, plan)
        return plan

    def stop(self, owner: str, job_id: int) -> bool:
        """Stop watching one of ``owner``'s jobs; the run itself stops (a queued one never
        starts) when nobody else watches it. False if the job is not theirs."""
        with self._lock:
            job = self.owners.find(owner, job_id)
            if job is None:
                return False
            self._detach_locked(owner, job)
            return True

    def get(self, owner: str, job_id: int) -> Job | None:
        """``owner``'s job ``job_id``, or ``None`` (other owners' jobs are invisible)."""
        with self._lock:
            self.owners.seen(owner)
            return self.owners.find(owner, job_id)

    def jobs_of(self, owner: str) -> list[Job]:
        """``owner``'s jobs, newest first."""
        with self._lock:
            self.owners.seen(owner)
            return self.owners.jobs_of(owner)

    def position(self, job: Job) -> int | None:
        """1-based place of a queued job in the queue."""
        with self._lock:
            return self.schedule.position(job)

    def stats(self) -> dict:
        with self._lock:
            return {"workers": self.workers, "running": self.running,
                    "queued": len(self.schedule.queue), "owners": len(self.owners),
                    "trainings": self.trainings}

    def live_keys(self) -> list[str]:
        """The keys of the runs queued, running or finished here (a link's key start names one)."""
        with self._lock:
            return [*self.schedule.live, *self.schedule.done]

    def viewers(self, key: str) -> int:
        """Sessions whose current run (newest asked for or opened) is ``key``, live or ended."""
        with self._lock:
            return self.owners.viewers(key)

    def forget_idle(self, now: float | None = None) -> int:
        """Detach and drop the owners that have not polled for ``ttl_seconds``."""
        with self._lock:
            return self._forget_idle_locked(time.monotonic() if now is None else now)

    def shutdown(self, timeout: float = 10.0) -> None:
        """Stop every job and end the workers."""
        with self._lock:
            self._closed = True
            for job in list(self.schedule.live.values()):
                job.watchers.clear()
                self.schedule.stop(job)
            self._lock.notify_all()
        for thread in self._threads:
            thread.join(timeout)

    # -- internals ----------------------------------------------------------------------

    def _attach(self, owner: str, key: str,
                new_locked: Callable[[], Job] | None = None) -> Job | None:
        """``owner`` watches the job of ``key``: one known here, else one from the store,
        then looked up again under the lock (another session may have won meanwhile). With
        none, ``new_locked()`` makes one (under the lock); without it, None."""
        with self._lock:
            job = self.schedule.known(key)
        if job is None:
            job = self._from_store(key)
        if job is None and self.ray_address:
            job = self._from_cluster(key)
        if job is None and new_locked is None:
            return None
        with self._lock:
            job = self.schedule.known(key) or job
            if job is None:
                job = new_locked()
            self._give_locked(owner, job)
        return job

    def _queue_locked(self, plan: RunPlan) -> Job:
        """A new job for ``plan``, at the end of the queue; `StackError` when full."""
        self.schedule.room_check()
        job = self._new_job(plan=plan)
        self.schedule.enqueue(job)
        self._start_workers_locked()
        self._lock.notify()
        return job

    def _new_job(self, **run) -> Job:
        """A job for a plan or a stored run, with what it asks of its pool: a reader of the
        run store and its queue place."""
        return Job(next(self._ids), **run, open_stored=self.store.open,
                   queue_place=self.position)

    def _from_store(self, key: str) -> Job | None:
        """A finished job from the run store (read outside the lock: it resolves the stack)."""
        run = self.store.open(key)
        if run is None:
            return None
        log.info("run %s from the store", key)
        job = self._new_job(run=run)
        with self._lock:
            self.schedule.remember(job)
        return job

    def _from_cluster(self, key: str) -> Job | None:
        """On Ray: a job following the run of ``key`` that another app server trains on
        the cluster, live at once and never queued here; None when the cluster
        has none (or it ended meanwhile: it is then in the store)."""
        follow = self.backends.follow(key)
        if follow is None:
            return self._from_store(key)
        source, config, seconds = follow.setup
        try:
            plan = self.check(source, config)
        except StackError as err:  # the run is not one this server would start
            log.warning("run %s on the cluster is not followed: %s", key, err)
            plan = None
        with self._lock:
            job = self.schedule.known(key)
            if job is None and plan is not None and plan.key == key and not self._closed:
                job = self._new_job(plan=plan)
                job.stop_event = follow.stop_event
                job.start(seconds_ago=seconds)
                self.schedule.live[key] = job
                log.info("following run %s, trained by another app server", key)
                threading.Thread(target=self._drive, args=(job, follow), daemon=True,
                                 name=f"stacklab-follow-{key[:12]}").start()
                return job
        follow.release()
        return job

    def _give_locked(self, owner: str, job: Job) -> None:
        """``owner`` watches ``job`` (and no other active job)."""
        for other in self.owners.watching(owner, besides=job):
            self._detach_locked(owner, other)
        self.owners.give(owner, job)

    def _detach_locked(self, owner: str, job: Job) -> None:
        job.watchers.discard(owner)
        if not job.watchers:
            self.schedule.stop(job)

    def _start_workers_locked(self) -> None:
        while len(self._threads) < self.workers:
            thread = threading.Thread(target=self._work, name=f"stacklab-worker-{len(self._threads)}",
                                      daemon=True)
            self._threads.append(thread)
            thread.start()

    def _work(self) -> None:
        """A worker thread: train the queued jobs, one at a time, until the pool closes."""
        while (job := self._next_job()) is not None:
            log.info("training run %s (task %s, %d steps)", job.key, job.config.task,
                     job.config.steps)
            self._drive(job)

    def _drive(self, job: Job, followed: Transport | None = None) -> None:
        """Train ``job`` in a worker's thread, or follow it on ``followed`` (a run that
        another app server trains), to its end."""
        transport = followed
        try:
            if transport is None:
                transport = self.backends.transport(job)
                job.stop_event = transport.stop_event
            self.backends.finish(job, *relay(transport, job, every(2.0, self.forget_idle)))
        except BaseException as err:  # noqa: BLE001 - a worker must survive any job
            job.fail(f"{type(err).__name__}: {err}")
        finally:
            if job.status == Status.FAILED:  # the one log line of a failed run
                log.warning("run %s failed: %s", job.key, job.error)
            with self._lock:
                if followed is None:
                    self.schedule.running -= 1
                    if getattr(transport, "following", False):
                        self.schedule.trainings -= 1  # another app server trains it: followed here
                job.process = None
                self.schedule.ended(job)
                job.watchers.clear()
                job.end()

    def _next_job(self) -> Job | None:
        """The next queued job, now running (waiting for one); None once the pool closes."""
        with self._lock:
            while not self.schedule.queue and not self._closed:
                self._lock.wait(timeout=5.0)
                self._forget_idle_locked()
            if self._closed:
                return None
            return self.schedule.take()

    def _forget_idle_locked(self, now: float | None = None) -> int:
        idle = self.owners.idle(time.monotonic() if now is None else now)
        for owner in idle:
            for job in self.owners.drop(owner):
                if owner in job.watchers:
                    self._detach_locked(owner, job)
        if idle:  # outside the lock: polls and submits never wait for a collection
            threading.Thread(target=release_memory, name="stacklab-release", daemon=True).start()
        return len(idle)
