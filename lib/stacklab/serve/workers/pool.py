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
Owners that stop polling (a closed tab) are detached after ``ttl_seconds``. A job and its
shared figures are `job`; how a run reaches its process or Ray actor is `transport`.

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
from collections import OrderedDict, deque
from typing import Callable

from ...core.errors import StackError
from ...lab.train.budgets import Budgets
from ...lab.keys import is_key
from ...lab.runs.store import STORED_STATUSES, RunStore
from ...lab.settings import TrainConfig
from ...lab.train.record import Status
from ...lab.train.plan import RunPlan, plan_run
from ..limits import (BUDGETS, FINISHED_RUNS_KEPT, MAX_QUEUED_RUNS, RUNS_KEPT_PER_SESSION,
                      SESSION_TTL_SECONDS)
from .job import Job, JobView, release_memory
from .messages import Done
from .plan_cache import PlanCache
from .table_jobs import TableJobs
from .transport import LocalProcess, RayActor, Transport, every, processes, relay, warm_fork_server

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
        self.threads_per_job = threads_per_job
        self.worker_nice = worker_nice
        self.budgets = budgets
        self.ttl_seconds = ttl_seconds
        self.max_queued = max_queued
        self.store = store if store is not None else RunStore()
        self.owner_alive = owner_alive
        # set (here or in STACKLAB_RAY_ADDRESS): runs are Ray actors (`stacklab.serve.workers.ray_runs`)
        if ray_address is None:
            ray_address = os.environ.get("STACKLAB_RAY_ADDRESS") or None
        self.ray_address = ray_address
        if ray_address:
            from . import ray_runs

            ray_runs.connect(ray_address, trainers=self.workers)  # warmed in the background
        self.disconnect_grace_seconds = disconnect_grace_seconds
        self._gone_since: dict[str, float] = {}  # owner -> when it was first seen disconnected
        self._lock = threading.Condition()
        self._queue: deque[Job] = deque()
        self._jobs: dict[str, list[Job]] = {}  # owner -> the jobs it asked for, newest first
        self._seen: dict[str, float] = {}  # owner -> last time it polled
        self._live: dict[str, Job] = {}  # key -> its queued or running job
        self._done: OrderedDict[str, Job] = OrderedDict()  # key -> finished job, newest last
        self._checked = PlanCache()  # the plans `check` made, bounded in bytes
        # tables pages analyse (uploads, real models): worker processes, the runs' budgets
        self.tables = TableJobs(self.workers, budgets=budgets, threads=threads_per_job,
                                nice=worker_nice)
        self._ids = itertools.count(1)
        self._threads: list[threading.Thread] = []
        self._closed = False
        self.running = 0
        self.trainings = 0  # runs this pool has trained (attached and stored ones excluded)
        if not ray_address:
            processes()  # the forkserver context, set up by the first pool (never on import)
            threading.Thread(target=warm_fork_server, name="stacklab-warm", daemon=True).start()

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
            return self._live.get(key) or self._done.get(key)

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
            job = self._find(owner, job_id)
            if job is None:
                return False
            self._detach_locked(owner, job)
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
                    "owners": len(self._jobs), "trainings": self.trainings}

    def live_keys(self) -> list[str]:
        """The keys of the runs queued, running or finished here (a link's key start names one)."""
        with self._lock:
            return [*self._live, *self._done]

    def viewers(self, key: str) -> int:
        """Sessions whose current run (newest asked for or opened) is ``key``, live or ended."""
        with self._lock:
            return sum(1 for jobs in self._jobs.values() if jobs and jobs[0].key == key)

    def forget_idle(self, now: float | None = None) -> int:
        """Detach and drop the owners that have not polled for ``ttl_seconds``."""
        with self._lock:
            return self._forget_idle_locked(time.monotonic() if now is None else now)

    def shutdown(self, timeout: float = 10.0) -> None:
        """Stop every job and end the workers."""
        with self._lock:
            self._closed = True
            for job in list(self._live.values()):
                job.watchers.clear()
                self._stop_locked(job)
            self._lock.notify_all()
        for thread in self._threads:
            thread.join(timeout)

    # -- internals ----------------------------------------------------------------------

    def _gone_for(self, owner: str, now: float) -> float:
        """Seconds ``owner`` has been disconnected (-1 while connected or unknown)."""
        try:
            alive = self.owner_alive is None or bool(self.owner_alive(owner))
        except Exception:  # noqa: BLE001 - when in doubt, an owner is alive
            alive = True
        if alive:
            self._gone_since.pop(owner, None)
            return -1.0
        return now - self._gone_since.setdefault(owner, now)

    def _find(self, owner: str, job_id: int) -> Job | None:
        return next((j for j in self._jobs.get(owner, []) if j.id == job_id), None)

    def _attach(self, owner: str, key: str,
                new_locked: Callable[[], Job] | None = None) -> Job | None:
        """``owner`` watches the job of ``key``: one known here, else one from the store,
        then looked up again under the lock (another session may have won meanwhile). With
        none, ``new_locked()`` makes one (under the lock); without it, None."""
        with self._lock:
            job = self._known_locked(key)
        if job is None:
            job = self._from_store(key)
        if job is None and self.ray_address:
            job = self._from_cluster(key)
        if job is None and new_locked is None:
            return None
        with self._lock:
            job = self._known_locked(key) or job
            if job is None:
                job = new_locked()
            self._give_locked(owner, job)
        return job

    def _queue_locked(self, plan: RunPlan) -> Job:
        """A new job for ``plan``, at the end of the queue; `StackError` when full."""
        if len(self._queue) >= self.max_queued:
            raise StackError("E_BUDGET", f"{len(self._queue)} runs are already waiting",
                             hint="wait for a few runs to finish, then press Train again")
        job = Job(next(self._ids), plan=plan, **self._job_needs())
        self._live[job.key] = job
        self._queue.append(job)
        self._start_workers_locked()
        self._lock.notify()
        return job

    def _known_locked(self, key: str) -> Job | None:
        """The live job of ``key``, or its finished job when that one can be shared."""
        job = self._live.get(key)
        if job is not None:
            return job
        job = self._done.get(key)
        if job is not None and job.status in STORED_STATUSES:
            self._done.move_to_end(key)
            self.store.touch(key)  # in use: last to be evicted
            return job
        return None

    def _from_store(self, key: str) -> Job | None:
        """A finished job from the run store (read outside the lock: it resolves the stack)."""
        run = self.store.open(key)
        if run is None:
            return None
        log.info("run %s from the store", key)
        job = Job(next(self._ids), run=run, **self._job_needs())
        with self._lock:
            self._remember_locked(job)
        return job

    def _from_cluster(self, key: str) -> Job | None:
        """On Ray: a job following the run of ``key`` that another app server trains on
        the cluster, live at once and never queued here; None when the cluster
        has none (or it ended meanwhile: it is then in the store)."""
        follow = RayActor.follow(key, self.store.location) if is_key(key) else None
        if follow is None:
            return self._from_store(key)
        source, config, seconds = follow.setup
        try:
            plan = self.check(source, config)
        except StackError as err:  # the run is not one this server would start
            log.warning("run %s on the cluster is not followed: %s", key, err)
            plan = None
        with self._lock:
            job = self._known_locked(key)
            if job is None and plan is not None and plan.key == key and not self._closed:
                job = Job(next(self._ids), plan=plan, **self._job_needs())
                job.stop_event = follow.stop_event
                job.start(seconds_ago=seconds)
                self._live[key] = job
                log.info("following run %s, trained by another app server", key)
                threading.Thread(target=self._drive, args=(job, follow), daemon=True,
                                 name=f"stacklab-follow-{key[:12]}").start()
                return job
        follow.release()
        return job

    def _remember_locked(self, job: Job) -> None:
        self._done[job.key] = job
        self._done.move_to_end(job.key)
        while len(self._done) > FINISHED_RUNS_KEPT:
            self._done.popitem(last=False)

    def _give_locked(self, owner: str, job: Job) -> None:
        """``owner`` watches ``job`` (and no other active job)."""
        for other in self._jobs.get(owner, []):
            if other is not job and owner in other.watchers:
                self._detach_locked(owner, other)
        if job.status.active:
            job.watchers.add(owner)
        jobs = self._jobs.setdefault(owner, [])
        if job in jobs:
            jobs.remove(job)
        jobs.insert(0, job)
        del jobs[RUNS_KEPT_PER_SESSION:]
        self._seen[owner] = time.monotonic()

    def _detach_locked(self, owner: str, job: Job) -> None:
        job.watchers.discard(owner)
        if not job.watchers:
            self._stop_locked(job)

    def _stop_locked(self, job: Job) -> None:
        if job.status == Status.QUEUED:
            try:
                self._queue.remove(job)
            except ValueError:
                pass
            job.stop()
            self._live.pop(job.key, None)
        elif job.status == Status.RUNNING and job.stop_event is not None:
            job.stop_event.set()  # the worker process stops after its current step
            if self._live.get(job.key) is job:
                del self._live[job.key]  # a new Train press for this key trains anew

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
                transport = self._transport(job)
                job.stop_event = transport.stop_event
            self._finish(job, *relay(transport, job, every(2.0, self.forget_idle)))
        except BaseException as err:  # noqa: BLE001 - a worker must survive any job
            job.fail(f"{type(err).__name__}: {err}")
        finally:
            if job.status == Status.FAILED:  # the one log line of a failed run
                log.warning("run %s failed: %s", job.key, job.error)
            with self._lock:
                if followed is None:
                    self.running -= 1
                    if getattr(transport, "following", False):
                        self.trainings -= 1  # another app server trains it: followed here
                job.process = None
                if self._live.get(job.key) is job:
                    del self._live[job.key]
                if job.status in STORED_STATUSES:
                    self._remember_locked(job)
                job.watchers.clear()
                job.end()

    def _next_job(self) -> Job | None:
        """The next queued job, now running (waiting for one); None once the pool closes."""
        with self._lock:
            while not self._queue and not self._closed:
                self._lock.wait(timeout=5.0)
                self._forget_idle_locked()
            if self._closed:
                return None
            job = self._queue.popleft()
            job.start()
            self.running += 1
            self.trainings += 1
            return job

    def _transport(self, job: Job) -> Transport:
        """How ``job`` reaches its worker: a Ray actor with a Ray address, else a process."""
        args = (job.plan.source, job.config, self.budgets, self.store.location,
                self.store.max_bytes, self.threads_per_job, self.worker_nice)
        return (RayActor if self.ray_address else LocalProcess)(job.key, args)

    def _finish(self, job: Job, done: Done | None, why: str | None) -> None:
        """Take the run a worker handed over (its last message ``done``), or fail ``job``."""
        if done is None and job.run is not None and not job.status.active:
            _log_end(job, str(job.status), job.run)  # stored (`Stored`): figures to follow
            return
        if done is None and self.ray_address and (run := self.store.open(job.key)) is not None:
            done = Done(str(run.status), run.error, None)  # on Ray: stored as it ended
        if done is None:
            job.fail(why or "the worker ended without a word")
            return
        folder = done.folder
        run = self.store.open(job.key) if folder is None else self.store.hold_private(folder)
        if run is None and done.status != str(Status.FAILED):
            job.fail("the run trained but could not be read back from the run store "
                     f"({self.store.location}); see the server's log")
            return
        if run is not None:
            _log_end(job, done.status, run)
        job.finish(done.status, done.error, run)

    def _job_needs(self) -> dict:
        """What a job asks of its pool: a reader of the run store and its queue place."""
        return {"open_stored": self.store.open, "queue_place": self.position}

    def _forget_idle_locked(self, now: float | None = None) -> int:
        now = time.monotonic() if now is None else now
        idle = [owner for owner, seen in self._seen.items()
                if now - seen > self.ttl_seconds or self._gone_for(owner, now)
                > self.disconnect_grace_seconds]
        for owner in idle:
            for job in self._jobs.pop(owner, []):
                if owner in job.watchers:
                    self._detach_locked(owner, job)
            del self._seen[owner]
            self._gone_since.pop(owner, None)
        if idle:  # outside the lock: polls and submits never wait for a collection
            threading.Thread(target=release_memory, name="stacklab-release", daemon=True).start()
        return len(idle)


def _log_end(job: Job, status: str, run) -> None:
    log.info("run %s %s: %d steps in %.2f s (%.0f steps/s)", job.key, status, run.step,
             run.seconds, run.step / max(run.seconds, 1e-9))
