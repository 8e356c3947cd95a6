"""Tables analysed for pages: each in a worker process under a run's budgets, once per file.

A page that shows an uploaded table (or a real model's) `TableJobs.submit`s a
`TableRequest` and polls the `TableJob` it gets, as it polls a run: queued, running (with
the stage the worker reached), then finished with its result or failed with a
`StackError`. The work itself runs in `stacklab.serve.workers.table_worker`, in a process
forked from the pool's fork server, at most ``workers`` at once, at the pool's priority,
with the run budgets' memory (`limits.TABLE_MEMORY_BYTES`) and seconds
(`limits.TABLE_SECONDS`): past them it ends with ``E_BUDGET``.

Results are kept by what they depend on (an upload's SHA-256, a model's files), so a class
that uploads the same file computes it once, and bounded by the bytes of their figures
(`limits.TABLE_RESULTS_BYTES`), least recently asked for dropped first. A refusal is kept
too (the same file is refused the same way); an analysis whose process was lost is not.

>>> import io, numpy as np
>>> buffer = io.BytesIO(); np.save(buffer, np.random.default_rng(0).normal(size=(32, 8)))
>>> jobs = TableJobs(workers=1)
>>> job = jobs.submit(upload_request("wpe.npy", buffer.getvalue()))
>>> view = job.wait(timeout=120)
>>> str(view.status), view.result.shape, jobs.submit(upload_request("wpe.npy", buffer.getvalue())) is job
('finished', [32, 8], True)
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, replace
from pathlib import Path

from ...core.errors import StackError
from ...lab.figures import RunFigure, figure_from_entry
from ...lab.models.source import CONFIG, INDEX, SINGLE, cached_folder
from ...lab.train.budgets import Budgets
from ...lab.train.record import Status
from ..limits import (BUDGETS, MAX_QUEUED_TABLES, TABLE_MEMORY_BYTES, TABLE_RESULTS_BYTES,
                      TABLE_SECONDS)
from . import table_worker
from .messages import Analysed, Stage, decode
from .table_worker import CACHED, FOLDER, UPLOAD, TableRequest
from .transport import POLL_SECONDS, processes

__all__ = ["TableJob", "TableJobs", "TableRequest", "TableResult", "TableView",
           "model_request", "upload_request"]

log = logging.getLogger("stacklab.pool")
MAX_TABLES_KEPT = 256  # results and refusals kept, whatever their bytes


def upload_request(name: str, data: bytes, key: str | None = None) -> TableRequest:
    """The request for an uploaded file ``name`` holding ``data`` (its SHA-256 its identity)."""
    return TableRequest(UPLOAD, name, key, hashlib.sha256(data).hexdigest(), data)


def model_request(where: str | Path, key: str | None = None, *, cached: bool = False
                  ) -> TableRequest:
    """The request for a model: a name in the Hugging Face cache (``cached``) or a path
    (checked by the caller to lie in the allowed folder); its identity names its files'
    sizes and times, so a replaced checkpoint is analysed anew."""
    path = cached_folder(str(where)) if cached else Path(where)
    stamps = [str(path)]
    for name in ([""] if path is not None and path.is_file() else [CONFIG, SINGLE, INDEX]):
        try:
            found = (path / name) if name else path
            stat = found.stat()
            stamps.append(f"{name}:{stat.st_size}:{stat.st_mtime_ns}")
        except (OSError, TypeError):
            stamps.append(f"{name}:-")
    return TableRequest(CACHED if cached else FOLDER, str(where), key,
                        hashlib.sha256("\n".join(stamps).encode()).hexdigest())


@dataclass(frozen=True)
class TableResult:
    """An analysed table as a page shows it: its name, what was read (checkpoint, layout,
    rows; None for an upload), its shape (None for a rotary or ALiBi model), its scores
    and its figures (read once from the worker's JSON, shared by every page)."""

    name: str
    read: str | None
    shape: list | None
    scores: dict
    figures: tuple[RunFigure, ...]
    bytes: int  # the figures' JSON: what keeping this result costs
    cpu_seconds: float | None = None  # the worker's CPU time for it


@dataclass(frozen=True)
class TableView:
    """A consistent copy of a table job for a page: status, the worker's stage in words and
    how far it got (0 to 1), seconds so far, and its result or error once it has ended."""

    status: Status
    stage: str
    done: float
    seconds: float
    result: TableResult | None
    error: StackError | None

    @property
    def active(self) -> bool:
        return self.status.active

    @property
    def version(self) -> str:
        """What changes as the analysis moves on (its status, the worker's stage): what a
        page that waits for it follows (its watch endpoint's version); not its seconds."""
        return f"{self.status.value}:{self.done:.2f}:{self.stage}"


class TableJob:
    """One table's analysis, shared by every page that asked for the same file; its
    status is written by its own methods only, from its `TableJobs` thread."""

    def __init__(self, request: TableRequest):
        self.request = request
        self.id = secrets.token_hex(16)  # what its page's watch endpoint names it by
        self._lock = threading.Lock()
        self._ended = threading.Event()
        self._status, self._stage, self._done = Status.QUEUED, "waiting for a worker", 0.0
        self._started: float | None = None
        self._seconds = 0.0
        self.result: TableResult | None = None
        self.error: StackError | None = None
        self.lost = False  # its process went away: not kept, a new submit tries again

    def view(self) -> TableView:
        with self._lock:
            seconds = self._seconds if self._ended.is_set() or self._started is None \
                else time.monotonic() - self._started
            return TableView(self._status, self._stage, self._done, seconds, self.result,
                             self.error)

    def wait(self, timeout: float | None = None) -> TableView:
        self._ended.wait(timeout)
        return self.view()

    def start(self) -> None:
        with self._lock:
            self._status, self._stage, self._started = Status.RUNNING, "starting", time.monotonic()

    def reached(self, stage: Stage) -> None:
        with self._lock:
            self._stage, self._done = stage.text[:200], min(max(float(stage.done), 0.0), 1.0)

    def end(self, result: TableResult | None, error: StackError | None) -> None:
        with self._lock:
            self.result, self.error = result, error
            self._status = Status.FINISHED if error is None else Status.FAILED
            self._stage, self._done = ("done", 1.0) if error is None else ("failed", self._done)
            self._seconds = time.monotonic() - (self._started or time.monotonic())
            self.request = replace(self.request, data=None)  # an upload's bytes: not kept
        self._ended.set()


class TableJobs:
    """The tables a server analyses for its pages; see the module docstring."""

    def __init__(self, workers: int = 1, *, budgets: Budgets = BUDGETS,
                 threads: int | None = None, nice: int = 0,
                 kept_bytes: int = TABLE_RESULTS_BYTES, max_queued: int = MAX_QUEUED_TABLES):
        self.memory_bytes = min(TABLE_MEMORY_BYTES, budgets.activation_bytes + budgets.kept_bytes)
        self.seconds = budgets.seconds or TABLE_SECONDS
        self.threads, self.nice = threads, nice
        self.kept_bytes, self.max_queued = kept_bytes, max_queued
        self.analyses = 0  # processes started: a file asked for by many is analysed once
        self._slots = threading.BoundedSemaphore(max(1, workers))
        self._lock = threading.Lock()
        self._jobs: OrderedDict[tuple, TableJob] = OrderedDict()  # newest asked for last

    def submit(self, request: TableRequest) -> TableJob:
        """The job of ``request``: the one kept or running for the same file and tensor,
        or a new one queued; `StackError` ``E_BUDGET`` when too many wait."""
        with self._lock:
            job = self._jobs.get(request.cache_key)
            if job is not None and not job.lost:
                self._jobs.move_to_end(request.cache_key)
                return job
            waiting = sum(1 for kept in self._jobs.values() if kept.view().status == Status.QUEUED)
            if waiting >= self.max_queued:
                raise StackError("E_BUDGET", f"{waiting} tables are already waiting to be "
                                 "analysed", hint="wait a minute, then open the table again")
            job = self._jobs[request.cache_key] = TableJob(request)
        threading.Thread(target=self._run, args=(job,), daemon=True,
                         name="stacklab-table").start()
        return job

    def find(self, job_id: str) -> TableJob | None:
        """The job kept under ``job_id`` (`TableJob.id`), or None."""
        with self._lock:
            return next((job for job in self._jobs.values() if job.id == job_id), None)

    def kept(self) -> int:
        """The bytes of the results kept now."""
        with self._lock:
            return sum(job.result.bytes for job in self._jobs.values() if job.result)

    def _run(self, job: TableJob) -> None:
        try:
            with self._slots:
                job.start()
                with self._lock:
                    self.analyses += 1
                self._analyse(job)
        except BaseException as err:  # noqa: BLE001 - a thread of the server must not die
            job.lost = True
            job.end(None, StackError("E_VALUE", f"the analysis could not start ({type(err).__name__}:"
                                     f" {str(err)[:200]})", hint="try again in a minute"))
        finally:
            if job.lost:
                log.warning("table %s: %s", job.request.name[:80], job.error)
            self._trim()

    def _analyse(self, job: TableJob) -> None:
        """Run ``job`` in a worker process to its end, within `seconds`."""
        context = processes()
        reader, writer = context.Pipe(duplex=False)
        process = context.Process(target=table_worker.analyse, daemon=True,
                                  name="stacklab-table", args=(writer, job.request,
                                                               self.memory_bytes, self.threads,
                                                               self.nice))
        analysed, timed_out = None, False
        try:
            process.start()
            writer.close()
            analysed, timed_out = self._relay(job, process, reader)
        finally:
            reader.close()
            writer.close()
            if process.pid is not None:
                process.join(timeout=0 if timed_out else 10)
                if process.is_alive():
                    process.kill()
                    process.join(timeout=10)
        job.end(*self._outcome(job, analysed, timed_out, process.exitcode))

    def _relay(self, job: TableJob, process, reader) -> tuple[Analysed | None, bool]:
        """The worker's `Analysed`, its `Stage`s passed to ``job`` meanwhile; None when it
        ended without one; ``True`` when it ran past `seconds`."""
        deadline = time.monotonic() + self.seconds
        try:
            while time.monotonic() < deadline:
                alive = process.is_alive()  # asked first: what it sent before it ended is read
                if reader.poll(POLL_SECONDS):
                    message = decode(reader.recv())
                    if isinstance(message, Analysed):
                        return message, False
                    if isinstance(message, Stage):
                        job.reached(message)
                elif not alive:
                    return None, False
        except (EOFError, OSError):
            return None, False
        return None, True

    def _outcome(self, job: TableJob, analysed: Analysed | None, timed_out: bool,
                 exitcode: int | None) -> tuple[TableResult | None, StackError | None]:
        name = job.request.name[:120]
        if timed_out:
            return None, StackError("E_BUDGET", f"{name}: analysing the table took more than "
                                    f"{self.seconds:g} s, a run's time limit on this server",
                                    hint="give a narrower table or fewer rows")
        if analysed is None:
            job.lost = exitcode != -9  # out of memory is the file's doing: kept as refused
            why = f"killed by signal {-exitcode}" if exitcode and exitcode < 0 \
                else f"exit code {exitcode}"
            if exitcode == -9:
                return None, StackError("E_BUDGET", f"{name}: the analysis was killed ({why}), "
                                        "as the system does when memory runs out",
                                        hint="give a narrower table or fewer rows")
            return None, StackError("E_VALUE", f"{name}: the analysis process ended unexpectedly "
                                    f"({why})", hint="try again; if it happens again, report it")
        if analysed.error is not None:
            code, message, hint = analysed.error
            return None, StackError(code, message, hint=hint)
        return _result(analysed.result), None

    def _trim(self) -> None:
        """Drop lost jobs, then the least recently asked for results past `kept_bytes`."""
        with self._lock:
            for key in [key for key, job in self._jobs.items() if job.lost]:
                del self._jobs[key]
            kept = sum(job.result.bytes for job in self._jobs.values() if job.result)
            for key in list(self._jobs)[:-1]:  # the newest asked for stays, whatever its size
                if kept <= self.kept_bytes and len(self._jobs) <= MAX_TABLES_KEPT:
                    break
                job = self._jobs[key]
                if not job.view().active:
                    kept -= job.result.bytes if job.result is not None else 0
                    del self._jobs[key]


def _result(raw: dict) -> TableResult:
    """The worker's plain result as a `TableResult`, its figures read from JSON once."""
    entries = raw.get("figures") or []
    drawn = tuple(figure for figure in map(figure_from_entry, entries) if figure is not None)
    return TableResult(str(raw.get("name")), raw.get("read"), raw.get("shape"),
                       dict(raw.get("scores") or {}), drawn,
                       sum(len(entry[2]) for entry in entries), raw.get("cpu_seconds"))
