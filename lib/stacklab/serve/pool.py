"""A bounded pool of training workers shared by many browser sessions, one run per key.

Pages never train inside their script: they `JobPool.submit` a run and poll `Job.view`.
A run is known by its key (`stacklab.lab.keys`): a submit whose key is already queued or
running **attaches** to that job, and one whose key has finished (in this pool, or in the
run store on disk) gets the finished run at once. So thirty students pressing Train on
one link cause one training.

Every session (an *owner*) sees only the jobs it asked for. A job ends early only when
nobody who asked for it still watches: ``stop`` detaches the owner, and stops the run
when it was the last watcher. Jobs wait in one queue (each knows its place), at most
``workers`` run at once, each in a process of its own (`stacklab.serve.worker`), so a
crash, an out-of-memory kill or a SIGKILL fails only that run; a job that fails or
diverges frees its worker and says why.
Owners that stop polling (a closed tab) are detached after ``ttl_seconds``.

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

import ctypes
import gc
import itertools
import logging
import multiprocessing
import multiprocessing.spawn
import os
import threading
import time
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Callable

import plotly.io

from ..core.errors import StackError
from ..lab.figures import RunFigure, figures_from_json, pattern_figure, run_figures
from ..lab.store import STORED_STATUSES, RunStore, StoredRun
from ..lab.trainer import Status, TrainConfig, Trainer
from . import worker
from ..lab.budgets import Budgets
from .classroom import (BUDGETS, FINISHED_RUNS_KEPT, MAX_QUEUED_RUNS, RUNS_KEPT_PER_SESSION,
                        SESSION_TTL_SECONDS)

log = logging.getLogger("stacklab.pool")

# Training runs in processes forked from a server that has torch and stacklab loaded.
_PROCESSES = multiprocessing.get_context("forkserver")
_PROCESSES.set_forkserver_preload(worker.PRELOAD)


def _without_main(get_preparation_data):
    """Worker processes never import the parent's ``__main__``: their code lives in
    `stacklab.serve.worker`. Streamlit runs the app script as ``__main__``, and multiprocessing
    would otherwise run it again in the fork server and in every worker (building pages, and
    a pool, in a process that only trains)."""
    def prepared(name):
        data = get_preparation_data(name)
        data.pop("init_main_from_path", None)
        data.pop("init_main_from_name", None)
        return data
    prepared.stacklab = True
    return prepared


if not getattr(multiprocessing.spawn.get_preparation_data, "stacklab", False):
    multiprocessing.spawn.get_preparation_data = _without_main(
        multiprocessing.spawn.get_preparation_data)


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
        self._pattern_json: tuple | None = None  # (title, caption, plotly JSON, score)
        self.pattern: RunFigure | None = None  # the task's pattern figure, shared by watchers
        self._pattern_drawn: object = None  # what `pattern` was made from
        self.started: float | None = None if run is None else time.monotonic()
        self.ended: float | None = self.started
        self.stop_event = None  # set by the pool to ask the worker process to stop
        self.process = None  # the worker process while it trains
        self._done = threading.Event()
        self._pool: JobPool | None = None
        self._pattern_lock = threading.Lock()
        self._figures: dict[str | None, list[RunFigure]] = {}  # node -> a finished run's figures
        if run is not None:
            self._done.set()

    @property
    def config(self) -> TrainConfig:
        return self.run.config if self.run is not None else self.trainer.config

    def report(self, message: tuple) -> None:
        """Take one progress message of the worker process (see `stacklab.serve.worker`)."""
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

    def pattern_now(self) -> RunFigure | None:
        """The task's pattern figure at the newest evaluation that has one; once the run
        has ended, the one its worker drew of the final model. Rebuilt at most once per
        figure, when a page first asks, and shared by everyone watching."""
        source = self._pattern_json
        if self.run is not None and not self.status.active:
            source = self.run
        if source is None or source is self._pattern_drawn:
            return self.pattern
        with self._pattern_lock:
            if source is not self._pattern_drawn:
                try:
                    if isinstance(source, tuple):
                        title, caption, figure, *score = source
                        self.pattern = RunFigure(title, caption, plotly.io.from_json(figure),
                                                 *score)
                    else:
                        self.pattern = next(iter(self._drawn("pattern")), None)
                except (RuntimeError, ValueError, StackError) as err:  # a figure never ends a run
                    log.warning("pattern figure of run %s: %s", self.key, err)
                self._pattern_drawn = source
        return self.pattern

    def figures(self, node: str | None = None) -> list[RunFigure]:
        """Every figure of the finished run (`run_figures`) for ``node``: as its worker drew
        them, else drawn here once; shared by every session that views it. Raises
        `StackError` when the run has left the store since."""
        with self._pattern_lock:
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
        """Block until the job has ended (for scripts and tests; pages poll instead)."""
        self._done.wait(timeout)
        return self


SHARED_FIGURES_BYTES = 2 << 20  # a finished run's parsed figures are kept up to this much JSON


def _json_bytes(run, node: str | None) -> int:
    """The JSON size of ``run``'s stored figures for ``node`` (0 when drawn here)."""
    drawn = run.figures() if run is not None else None
    if not drawn:
        return 0
    nodes = drawn.get("nodes", {})
    found = nodes.get(node) if node is not None else next(iter(nodes.values()), [])
    return sum(len(entry[2]) for entry in found or ())


def _warm_fork_server() -> None:
    try:
        process = _PROCESSES.Process(target=worker.ready, daemon=True)
        process.start()
        process.join(timeout=120)
    except OSError:
        pass  # the first run starts it instead


def _release_memory() -> None:
    """Collect the forgotten runs and hand freed heap pages back to the system (glibc)."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


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
        # set (here or in STACKLAB_RAY_ADDRESS): runs are Ray actors (`stacklab.serve.ray_runs`)
        if ray_address is None:
            ray_address = os.environ.get("STACKLAB_RAY_ADDRESS") or None
        self.ray_address = ray_address
        if ray_address:
            from . import ray_runs

            ray_runs.connect(ray_address)
        self.disconnect_grace_seconds = disconnect_grace_seconds
        self._gone_since: dict[str, float] = {}  # owner -> when it was first seen disconnected
        self._lock = threading.Condition()
        self._queue: deque[Job] = deque()
        self._jobs: dict[str, list[Job]] = {}  # owner -> the jobs it asked for, newest first
        self._seen: dict[str, float] = {}  # owner -> last time it polled
        self._live: dict[str, Job] = {}  # key -> its queued or running job
        self._done: OrderedDict[str, Job] = OrderedDict()  # key -> finished job, newest last
        self._ids = itertools.count(1)
        self._threads: list[threading.Thread] = []
        self._closed = False
        self.running = 0
        self.trainings = 0  # runs this pool has trained (attached and stored ones excluded)
        # Start the fork server now (it imports torch once), not when the first student
        # presses Train.
        if not ray_address:
            threading.Thread(target=_warm_fork_server, name="stacklab-warm", daemon=True).start()

    # -- used by pages --------------------------------------------------------------

    def submit(self, owner: str, source: str | None, config: TrainConfig) -> Job:
        """The job of this run for ``owner``: a running one with its key (attached), a
        finished one (at once), or a new one in the queue. Raises `StackError` at once if
        the stack or a setting is wrong.

        An owner watches at most one active job: submitting another detaches it from the
        previous one (which stops if nobody else watches it).
        """
        trainer = self.check(source, config)
        with self._lock:
            self._forget_idle_locked()
            if self._closed:
                raise StackError("E_BUDGET", "the server is shutting down", hint="try again later")
            job = self._known_locked(trainer.key)
        if job is None:
            job = self._from_store(trainer.key)
        with self._lock:
            job = self._known_locked(trainer.key) or job  # another session may have won
            if job is None:
                if len(self._queue) >= self.max_queued:
                    raise StackError("E_BUDGET", f"{len(self._queue)} runs are already waiting",
                                     hint="wait for a few runs to finish, then press Train again")
                job = Job(next(self._ids), trainer=trainer)
                job._pool = self
                self._live[job.key] = job
                self._queue.append(job)
                self._start_workers_locked()
                self._lock.notify()
            self._give_locked(owner, job)
        return job

    def open(self, owner: str, key: str) -> Job | None:
        """Attach ``owner`` to the run ``key`` (live, finished here, or in the store): a
        reload or a link with ``run=KEY``. None when no run has that key."""
        with self._lock:
            job = self._known_locked(key)
        if job is None:
            job = self._from_store(key)
        if job is None:
            return None
        with self._lock:
            job = self._known_locked(key) or job
            self._give_locked(owner, job)
        return job

    def check(self, source: str | None, config: TrainConfig) -> Trainer:
        """The trainer a submit would queue; raises `StackError` if the run is not allowed."""
        return Trainer(source, config, budgets=self.budgets)

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
        job = Job(next(self._ids), run=run)
        with self._lock:
            self._remember_locked(job)
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
            job.status = Status.STOPPED
            job.ended = time.monotonic()
            self._live.pop(job.key, None)
            job._done.set()
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
                self.trainings += 1
            log.info("training run %s (task %s, %d steps)", job.key, job.config.task,
                     job.config.steps)
            try:
                job.stop_event = threading.Event() if self.ray_address else _PROCESSES.Event()
                self._train(job)
            except BaseException as err:  # noqa: BLE001 - a worker must survive any job
                job.status = Status.FAILED
                job.error = f"{type(err).__name__}: {err}"
            finally:
                with self._lock:
                    self.running -= 1
                    job.ended = time.monotonic()
                    job.process = None
                    if self._live.get(job.key) is job:
                        del self._live[job.key]
                    if job.status in STORED_STATUSES:
                        self._remember_locked(job)
                    job.watchers.clear()
                    job._done.set()

    def _forget_idle_every(self, seconds: float, last: float) -> float:
        """While a worker waits on its run: forget closed tabs every ``seconds`` (when all
        workers are busy, nothing else does). Returns when it last did."""
        now = time.monotonic()
        if now - last <= seconds:
            return last
        self.forget_idle()
        return now

    def _train_on_ray(self, job: Job) -> None:
        """Train ``job`` in a Ray actor (`stacklab.serve.ray_runs`); as `_train` otherwise."""
        from . import ray_runs

        actor, reference = ray_runs.start(job.key, (
            job.trainer.source, job.config, self.budgets, str(self.store.root),
            self.store.max_bytes, self.threads_per_job, self.worker_nice))
        done, why, stopping, checked = None, None, False, time.monotonic()
        try:
            while done is None and why is None:
                checked = self._forget_idle_every(2.0, checked)
                if job.stop_event.is_set() and not stopping:
                    ray_runs.stop(actor)
                    stopping = True
                finished = ray_runs.ended(reference)
                for message in ray_runs.poll(actor) if not finished else ():
                    if message[0] == "done":
                        done = message
                    else:
                        job.report(message)
                if done is None and finished is not None:
                    why = finished or "the Ray actor ended without a word"
                elif done is None:
                    time.sleep(0.25)
        except Exception as err:  # noqa: BLE001 - the actor or the cluster went away
            why = f"the Ray actor could not be reached ({type(err).__name__}: {err})"
        finally:
            try:
                ray_runs.release(actor)
            except Exception:  # noqa: BLE001 - already gone
                pass
        self._finish(job, done, why)

    def _train(self, job: Job) -> None:
        """Train ``job`` in a worker process; relay its progress; take its run when it ends."""
        if self.ray_address:
            return self._train_on_ray(job)
        reader, writer = _PROCESSES.Pipe(duplex=False)
        process = _PROCESSES.Process(
            target=worker.train, name=f"stacklab-run-{job.key[:12]}", daemon=True,
            args=(writer, job.stop_event, job.trainer.source, job.config, self.budgets,
                  str(self.store.root), self.store.max_bytes, self.threads_per_job,
                  self.worker_nice))
        done = None
        checked = time.monotonic()
        try:
            process.start()
            writer.close()
            job.process = process
            while done is None:
                checked = self._forget_idle_every(2.0, checked)
                if reader.poll(0.25):
                    message = reader.recv()
                    if message[0] == "done":
                        done = message
                    else:
                        job.report(message)
                elif not process.is_alive() and not reader.poll():
                    break
        except (EOFError, OSError):
            pass  # the process went away mid-message
        finally:
            reader.close()
            writer.close()
            if process.pid is not None:
                process.join(timeout=30)
                if process.is_alive():
                    process.kill()
                    process.join(timeout=10)
        why = None
        if done is None:
            code = process.exitcode
            why = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
            if code == -9:
                why += ", as the system does when memory runs out"
            why = f"the training process ended unexpectedly ({why})"
        self._finish(job, done, why)

    def _finish(self, job: Job, done: tuple | None, why: str | None) -> None:
        """Take the run a worker handed over (its last message ``done``), or fail ``job``."""
        if done is None:
            job.error = why or "the worker ended without a word"
            job.status = Status.FAILED
            log.warning("run %s failed: %s", job.key, job.error)
            return
        _, status, error, folder = done
        run = self.store.open(job.key) if folder is None else self.store.hold_private(folder)
        if run is None and status != str(Status.FAILED):
            job.error = ("the run trained but could not be read back from the run store "
                         f"({self.store.root}); see the server's log")
            job.status = Status.FAILED
            log.warning("run %s: %s", job.key, job.error)
            return
        if run is not None:
            job.run, job.step = run, run.step
            job.history, job.train_loss = list(run.history), list(run.train_loss)
            log.info("run %s %s: %d steps in %.2f s (%.0f steps/s)", job.key, status, run.step,
                     run.seconds, run.step / max(run.seconds, 1e-9))
        job.error = error
        job.status = Status(status)

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
            threading.Thread(target=_release_memory, name="stacklab-release", daemon=True).start()
        return len(idle)
