"""How a job's run reaches the worker that trains it, and how its messages come back.

A transport starts one run of `stacklab.serve.workers.worker.train` somewhere, relays the
worker's messages (`stacklab.serve.workers.messages`, decoded here from the one wire form
both transports carry), passes a Stop on, says whether the worker has ended and, when it
ended without its last message, why. There are two: `LocalProcess`, a process forked
from this server's fork server, talking over a pipe, and `RayActor`, a Ray actor
(`stacklab.serve.workers.ray_runs`) when the pool has a Ray address, which may also follow a run
that another app server trains (`RayActor.follow`). `relay` is the one loop that drives
any of them for a job, from start to release.

The local processes come from a ``forkserver`` context that `processes` sets up the first
time a pool asks (importing this module changes nothing in `multiprocessing`).
"""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.context
import multiprocessing.spawn
import os
import shutil
import threading
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Protocol

from ...lab.runs.store import local_folder
from ..limits import FIGURES_WAIT_SECONDS  # a stored run's worker has as long to draw its figures
from . import worker
from .messages import Done, Message, decode

if TYPE_CHECKING:
    from .job import Job

log = logging.getLogger("stacklab.pool")

POLL_SECONDS = 0.25  # how long one `receive` waits for news
DRAWING = threading.BoundedSemaphore(max(1, os.cpu_count() or 1))  # processes drawing figures
# after their slot was freed: more wait in their slot, as before, so they never pile up

_context: multiprocessing.context.BaseContext | None = None
_context_lock = threading.Lock()


def processes() -> multiprocessing.context.BaseContext:
    """The ``forkserver`` context that worker processes start from, set up on the first
    call (later calls return it as it is): the fork server preloads torch and stacklab
    (`worker.PRELOAD`), and no child process imports the parent's ``__main__``
    (`_without_main`)."""
    global _context
    with _context_lock:
        if _context is None:
            if not getattr(multiprocessing.spawn.get_preparation_data, "stacklab", False):
                multiprocessing.spawn.get_preparation_data = _without_main(
                    multiprocessing.spawn.get_preparation_data)
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload(worker.PRELOAD)
            _context = context
        return _context


def _without_main(get_preparation_data):
    """Worker processes never import the parent's ``__main__``: their code lives in
    `stacklab.serve.workers.worker`. Streamlit runs the app script as ``__main__``, and multiprocessing
    would otherwise run it again in the fork server and in every worker (building pages, and
    a pool, in a process that only trains)."""
    def prepared(name):
        data = get_preparation_data(name)
        data.pop("init_main_from_path", None)
        data.pop("init_main_from_name", None)
        return data
    prepared.stacklab = True
    return prepared


def warm_fork_server() -> None:
    """Start the fork server now (it imports torch once), not when the first student
    presses Train."""
    try:
        process = processes().Process(target=worker.ready, daemon=True)
        process.start()
        process.join(timeout=120)
    except OSError:
        pass  # the first run starts it instead


class Transport(Protocol):
    """One run of `worker.train` on its way; see the module docstring."""

    stop_event: object  # set (by the pool) to ask the run to stop after its current step
    process: object  # the local worker process once started, else None
    lost: tuple[type[BaseException], ...]  # errors that mean the worker went away
    watching: int  # set by `relay` before each `receive`: sessions watching on this server
    elsewhere: int  # after each `receive`: sessions watching on other app servers (Ray)

    def start(self) -> None:
        """Start the run; an error here fails the job with that error."""

    def receive(self) -> list[Message]:
        """The worker's messages since the last call, waiting up to `POLL_SECONDS`."""

    def stop(self) -> None:
        """Pass the Stop on to the worker (once ``stop_event`` is set)."""

    def ended(self) -> bool:
        """Whether the worker has ended (what it sent before is still received)."""

    def why(self, failure: BaseException | None) -> str:
        """Why the run ended without its last message (``failure``: one of `lost`)."""

    def release(self) -> None:
        """Let go of the worker and whatever it holds; it is ended by now."""


def relay(transport: Transport, job: Job,
          every_poll: Callable[[], None]) -> tuple[Done | None, str | None]:
    """Run ``job`` on ``transport`` to its end, handing the worker's progress to
    `Job.report` (a `Stored` run among them: it ends for its watchers there, while its
    worker draws its figures) and ``job.stop_event`` on to the worker; ``every_poll()``
    runs between polls. Returns the worker's last message (`Done`), or None and why there
    was none; ``(None, None)`` for a run handed over at `Stored` (`_hand_over`), whose
    worker is released once its figures are in."""
    transport.start()
    job.process = transport.process
    done, failure, stopping, handed = None, None, False, False
    try:
        while done is None:
            every_poll()
            if job.stop_event.is_set() and not stopping:
                transport.stop()
                stopping = True
            ended = transport.ended()  # asked first: what it said before it ended is read
            transport.watching = len(job.watchers)
            messages = transport.receive()
            job.elsewhere = transport.elsewhere
            for message in messages:
                if isinstance(message, Done):
                    done = message
                else:
                    job.report(message)
            if done is None and (handed := _hand_over(transport, job)):
                return None, None  # stored: its figures follow, in the background
            if done is None and ended and not messages:
                break
    except transport.lost as err:
        failure = err
    finally:
        if not handed:
            transport.release()
    return done, None if done is not None else transport.why(failure)


def _hand_over(transport: Transport, job: Job) -> bool:
    """For a run stored early (`Stored`) whose local worker now draws its figures: free
    the worker's slot, so the next run starts while they are drawn (at a lower priority),
    and let a thread wait for the worker's `Done` (the figures stored), then release it."""
    if job.run is None or job.status.active or not getattr(transport, "drains", False):
        return False
    if not DRAWING.acquire(blocking=False):
        return False  # as many draw already as there are cores: this one keeps its slot
    job.figures_pending()
    try:
        threading.Thread(target=_drain, args=(transport, job), daemon=True,
                         name=f"stacklab-figures-{job.key[:12]}").start()
    except BaseException:
        DRAWING.release()
        job.figures_done()
        raise
    return True


def _drain(transport: Transport, job: Job) -> None:
    """Wait (at most as long as a page waits for the figures) for the worker's `Done`, then
    let it go."""
    deadline = time.monotonic() + FIGURES_WAIT_SECONDS
    try:
        while time.monotonic() < deadline:
            ended = transport.ended()
            messages = transport.receive()
            if any(isinstance(message, Done) for message in messages) or (ended and not messages):
                break
    except transport.lost:
        pass  # the figures are not stored: a page that asks draws them in the server
    finally:
        try:
            transport.release()
        finally:
            DRAWING.release()
            job.figures_done()


class LocalProcess:
    """The run in a worker process forked from this server's fork server, reporting over
    a pipe; a Stop is an event the process checks after every step."""

    lost = (EOFError, OSError)  # the process went away mid-message
    drains = True  # a stored run's process may draw its figures after its slot is freed
    watching = elsewhere = 0  # one app server: nobody watches from another

    def __init__(self, key: str, args: tuple):
        """``args``: `worker.train`'s arguments after its pipe and stop event."""
        context = processes()
        self.stop_event = context.Event()
        self._reader, self._writer = context.Pipe(duplex=False)
        self.process = context.Process(target=worker.train, name=f"stacklab-run-{key[:12]}",
                                       daemon=True, args=(self._writer, self.stop_event, *args))

    def start(self) -> None:
        try:
            self.process.start()
            self._writer.close()  # the child holds the writer now: its end reads as EOF
        except OSError:
            pass  # no process: it has ended at once, and `why` says how
        except BaseException:
            self.release()
            raise

    def receive(self) -> list[Message]:
        return [decode(self._reader.recv())] if self._reader.poll(POLL_SECONDS) else []

    def stop(self) -> None:
        pass  # the process reads `stop_event` itself

    def ended(self) -> bool:
        return not self.process.is_alive()

    def why(self, failure: BaseException | None) -> str:
        """The process's exit code says how it ended (a SIGKILL: most likely memory)."""
        code = self.process.exitcode
        why = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        if code == -9:
            why += ", as the system does when memory runs out"
        return f"the training process ended unexpectedly ({why})"

    def release(self) -> None:
        self._reader.close()
        self._writer.close()
        if self.process.pid is not None:
            self.process.join(timeout=30)
            if self.process.is_alive():
                self.process.kill()
                self.process.join(timeout=10)


class RayActor:
    """The run in a Ray actor (`stacklab.serve.workers.ray_runs`): trained through this transport,
    or followed (`follow`, or a start that finds another app server training the key)
    where another app server trains it. Each transport reads the actor's messages from a
    cursor of its own; a Stop lets go of the run, which stops once nobody holds it."""

    lost = (Exception,)  # the actor or the cluster went away
    process = None
    watching = elsewhere = 0  # this server's watchers, told; the other servers', heard

    def __init__(self, key: str, args: tuple | None = None, store_root: str | None = None):
        """``args``: `worker.train`'s arguments after its pipe and stop event; None (and
        this pool's ``store_root``) for a transport that only follows."""
        from . import ray_runs  # Ray is imported only for a pool that uses it

        self._runs = ray_runs
        self._key, self._args = key, args
        # `worker.train`'s store_root: a folder, or a bucket's URL (then this machine's cache)
        self._root = local_folder(store_root if args is None else args[3])
        self.stop_event = threading.Event()
        self._reader = uuid.uuid4().hex  # this transport, among the actor's readers
        self._actor = self._reference = None
        self._cursor, self._over = 0, False
        self._ended: str | None = None  # once ended: "" if it returned, else why not
        self.following = False  # another app server trains the run
        self.setup: tuple | None = None  # a followed run's (source, config, seconds so far)

    @classmethod
    def follow(cls, key: str, store_root: str) -> RayActor | None:
        """A transport following the run of ``key`` that an app server trains on the
        cluster (its ``setup`` says what run), or None when there is none to follow."""
        transport = cls(key, store_root=store_root)
        try:
            found = transport._runs.follow(key, transport._reader)
        except Exception as err:  # noqa: BLE001 - an actor that cannot be asked is not followed
            log.warning("run %s: its Ray actor cannot be followed: %s: %s", key,
                        type(err).__name__, err)
            return None
        if found is None:
            return None
        transport._actor, *setup = found
        transport.setup, transport.following = tuple(setup), True
        return transport

    def start(self) -> None:
        if self._actor is None:
            self._actor, self._reference = self._runs.start(self._key, self._args, self._reader)
            self.following = self._reference is None

    def receive(self) -> list[Message]:
        if self._ended:
            return []  # the actor died: there is nobody left to ask
        self._cursor, sent, self._over, self.elsewhere = self._runs.poll(
            self._actor, self._reader, self._cursor, self.watching)
        messages = [decode(raw) for raw in sent]
        if self.following:
            messages = [_own_copy(message, self._root) for message in messages]
        if self._ended is None and not any(isinstance(message, Done) for message in messages):
            time.sleep(POLL_SECONDS)
        return messages

    def stop(self) -> None:
        self._runs.stop(self._actor, self._reader)

    def ended(self) -> bool:
        if self._reference is not None:
            self._ended = self._runs.ended(self._reference)
        elif self._over:  # a followed run's training call returned: its end is read
            self._ended = ""
        return self._ended is not None

    def why(self, failure: BaseException | None) -> str:
        if failure is not None:
            return f"the Ray actor could not be reached ({type(failure).__name__}: {failure})"
        return self._ended or "the Ray actor ended without a word"

    def release(self) -> None:
        if self._actor is None:
            return
        try:
            self._runs.release(self._actor, self._reader, trained=self._reference is not None)
        except Exception:  # noqa: BLE001 - already gone
            pass


def _own_copy(message: Message, root: Path) -> Message:
    """A followed run's last message, pointing to a copy of its private folder (a stopped
    run's: `RunStore.save_private`), since the app server that trained it removes its
    own once read; the copy, in this server's store at ``root`` (the same folder, maybe
    mounted elsewhere), is private to this server's pool in the same way."""
    if not isinstance(message, Done) or not message.folder:
        return message
    folder = root / Path(message.folder).name
    copy = folder.with_name(f"{folder.name.rsplit('-', 1)[0]}-{uuid.uuid4().hex[:8]}")
    try:
        shutil.copytree(folder, copy)
    except OSError as err:
        log.warning("the run in %s cannot be copied: %s", folder, err)
        shutil.rmtree(copy, ignore_errors=True)
        return replace(message, folder=None)
    return replace(message, folder=str(copy))


def every(seconds: float, action: Callable[[], object]) -> Callable[[], None]:
    """``action``, called at most once per ``seconds`` however often the result is called:
    a worker waiting on its run forgets closed tabs this way (when all workers are busy,
    nothing else does)."""
    last = time.monotonic()

    def throttled() -> None:
        nonlocal last
        now = time.monotonic()
        if now - last > seconds:
            action()
            last = now
    return throttled
