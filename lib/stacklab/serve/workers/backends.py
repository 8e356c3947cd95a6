"""Where the pool's work runs: each run in a local process forked from a warm fork server,
or, with a Ray address, on a Ray cluster (where a run another app server trains can be
followed), and the tables pages analyse (`TableJobs`). `Backends` starts what a pool needs
at construction (the fork server warms in the background; Ray's trainers warm there too),
gives each job its transport and takes the run a worker hands back.
"""

from __future__ import annotations

import logging
import os
import threading

from ...lab.keys import is_key
from ...lab.runs.store import RunStore
from ...lab.train.budgets import Budgets
from ...lab.train.record import Status
from .job import Job
from .messages import Done
from .table_jobs import TableJobs
from .transport import LocalProcess, RayActor, Transport, processes, warm_fork_server

log = logging.getLogger("stacklab.pool")


class Backends:
    """The local processes or the Ray cluster that train runs, and the table jobs."""

    def __init__(self, workers: int, *, budgets: Budgets, store: RunStore,
                 threads_per_job: int | None, worker_nice: int, ray_address: str | None):
        self.budgets = budgets
        self.store = store
        self.threads_per_job = threads_per_job
        self.worker_nice = worker_nice
        # set (here or in STACKLAB_RAY_ADDRESS): runs are Ray actors (`stacklab.serve.workers.ray_runs`)
        if ray_address is None:
            ray_address = os.environ.get("STACKLAB_RAY_ADDRESS") or None
        self.ray_address = ray_address
        if ray_address:
            from . import ray_runs

            ray_runs.connect(ray_address, trainers=workers)  # warmed in the background
        # tables pages analyse (uploads, real models): worker processes, the runs' budgets
        self.tables = TableJobs(workers, budgets=budgets, threads=threads_per_job,
                                nice=worker_nice)
        if not ray_address:
            processes()  # the forkserver context, set up by the first pool (never on import)
            threading.Thread(target=warm_fork_server, name="stacklab-warm", daemon=True).start()

    def transport(self, job: Job) -> Transport:
        """How ``job`` reaches its worker: a Ray actor with a Ray address, else a process."""
        args = (job.plan.source, job.config, self.budgets, self.store.location,
                self.store.max_bytes, self.threads_per_job, self.worker_nice)
        return (RayActor if self.ray_address else LocalProcess)(job.key, args)

    def follow(self, key: str) -> RayActor | None:
        """On Ray: a transport following the run of ``key`` that another app server trains
        (its ``setup`` says what run); None without Ray or such a run."""
        if not self.ray_address or not is_key(key):
            return None
        return RayActor.follow(key, self.store.location)

    def finish(self, job: Job, done: Done | None, why: str | None) -> None:
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


def _log_end(job: Job, status: str, run) -> None:
    log.info("run %s %s: %d steps in %.2f s (%.0f steps/s)", job.key, status, run.step,
             run.seconds, run.step / max(run.seconds, 1e-9))
