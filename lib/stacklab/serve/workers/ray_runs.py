"""Runs on a Ray cluster: with ``STACKLAB_RAY_ADDRESS`` set (``auto``,
``local`` or ``ray://HOST:PORT``), the pool trains each run in a Ray actor named
``stacklab-run-<the run key>`` (`actor_name`) instead of a local process.

The actor runs the same `stacklab.serve.workers.worker.train` as a local worker process. The
actors live in one namespace (`NAMESPACE`), so every app server connected to the cluster
finds a key's actor by its name: one app server trains a key, any other **follows** it
(`follow`) instead of training it again (the pool's side of this is
`stacklab.serve.workers.transport.RayActor`). The run comes back through the run store, which
must then be a path every node can reach. Ray is imported only here, so a server without
``STACKLAB_RAY_ADDRESS`` never imports it.

- **Readers.** Each app server's transport is a *reader* of the actor's stream and polls
  it from a cursor of its own (`RunActor.poll`), so several readers each get the whole
  stream: the held-out evaluations in full (the pool keeps them too), the newest step
  and the newest pattern figure (only the newest: the actor's memory grows with the
  evaluations only), and the run's last message. Each poll also says how many sessions
  watch the run on the reader's app server and gets back how many watch it on the others,
  so the share dialog counts a class spread over several app servers.
- **Stop** as in the local pool: a reader *holds* the run while a session of its app
  server watches it; `stop` lets go, and the run stops after its current step once
  nobody holds it, or once no holder has polled for `STALE_SECONDS` (its server went
  away). A stop from one server's students never stops a run others still watch; a
  reader that let go still reads the stream to its end.
- **Ending.** The reader that trains the run waits, when it is over, until the other
  readers have read the end (at most `LINGER_SECONDS`), then ends the actor; the name
  is free again. A non-detached actor also ends with the app server that made it: its
  readers then report the run as failed, or take it from the run store when it was
  stored in time.
- **Races.** Two app servers starting one key at once get one actor
  (``get_if_exists``); the first to join trains it, the other follows. A run that
  stopped, or failed, while its actor still lingers is not followed: a new start waits
  for the name to be free and trains anew, as a new Train press does locally. An actor
  gone between lookup and join, or one that does not answer for `CALL_SECONDS`, is
  reported (`follow` gives None; a poll raises), never waited on forever.
"""

from __future__ import annotations

import bisect
import threading
import time
from dataclasses import replace

import ray

from ...lab.runs.store import STORED_STATUSES
from . import worker
from .messages import Done, Evaluated, Message, Pattern, Step, decode, encode

NAMESPACE = "stacklab"
STALE_SECONDS = 30.0  # a holder silent this long no longer keeps the run going
LINGER_SECONDS = 10.0  # how long a finished run's actor waits for its other readers
CALL_SECONDS = 60.0  # an actor that does not answer a call in this long is lost
RETRY_SECONDS = 0.25


def connect(address: str) -> None:
    """Join the cluster at ``address`` (``local``: start one on this machine) once."""
    if not ray.is_initialized():
        ray.init(address=None if address == "local" else address, namespace=NAMESPACE,
                 include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)


class _Stream:
    """What `worker.train` sends (`messages.encode`d), kept for every reader: each message
    gets the next index; the evaluations (without their figure) and the end are kept, of
    the steps and the pattern figures only the newest."""

    def __init__(self):
        self.lock = threading.Lock()
        self.count = 0  # messages sent so far: the next message's index
        self.kept: list[tuple[int, Message]] = []  # (index, message), oldest first
        self.step: tuple[int, Step] | None = None
        self.pattern: tuple[int, Pattern] | None = None
        self.done: Done | None = None

    def send(self, raw: tuple) -> None:
        message = decode(raw)
        with self.lock:
            index, self.count = self.count, self.count + 1
            if isinstance(message, Step):
                self.step = (index, message)
                return
            if isinstance(message, Evaluated) and message.pattern is not None:
                self.pattern = (index, Pattern(message.pattern))  # read after its evaluation
                message = replace(message, pattern=None)
            elif isinstance(message, Done):
                self.done = message
            self.kept.append((index, message))

    def close(self) -> None:
        pass

    def since(self, start: int) -> tuple[int, list[tuple]]:
        """The next index, and every kept message from index ``start`` on, in order, as
        `messages.encode` sends them."""
        with self.lock:
            first = bisect.bisect_left(self.kept, start, key=lambda item: item[0])
            found = self.kept[first:] + [item for item in (self.step, self.pattern)
                                         if item is not None and item[0] >= start]
            return self.count, [encode(message) for _, message in sorted(found, key=lambda i: i[0])]


class _Readers:
    """Who reads a run's stream and who of them holds it (see the module docstring).
    Also `worker.train`'s stop event: set, for good, once somebody held the run and
    nobody (fresh) does any more."""

    def __init__(self):
        self.lock = threading.Lock()
        self.seen: dict[str, float] = {}  # reader -> when it last polled
        self.watching: dict[str, int] = {}  # reader -> sessions watching on its app server
        self.holding: set[str] = set()
        self.held = False
        self.stopped = False

    def add(self, reader: str, hold: bool) -> bool:
        """``reader`` reads (and holds, with ``hold``) the run; False once it has stopped."""
        with self.lock:
            if hold and self._stopped_locked():
                return False
            self.seen[reader] = time.monotonic()
            if hold:
                self.holding.add(reader)
                self.held = True
            return True

    def saw(self, reader: str, watching: int = 0) -> int:
        """``reader`` polled, with ``watching`` sessions on its app server; how many watch
        on the other fresh readers' servers."""
        with self.lock:
            if reader in self.seen:
                self.seen[reader] = time.monotonic()
                self.watching[reader] = watching
            now = time.monotonic()
            return sum(count for other, count in self.watching.items() if other != reader
                       and now - self.seen.get(other, -STALE_SECONDS) < STALE_SECONDS)

    def leave(self, reader: str, reading: bool) -> int:
        """``reader`` lets go of the run (and stops reading unless ``reading``); how many
        fresh readers are left."""
        with self.lock:
            self.holding.discard(reader)
            self.watching.pop(reader, None)  # a reader that let go has nobody watching
            if not reading:
                self.seen.pop(reader, None)
            self._stopped_locked()
            return self._fresh_locked(self.seen)

    def reading(self) -> int:
        with self.lock:
            return self._fresh_locked(self.seen)

    def is_set(self) -> bool:
        with self.lock:
            return self._stopped_locked()

    def _fresh_locked(self, readers) -> int:
        now = time.monotonic()
        return sum(1 for reader in readers if now - self.seen.get(reader, -STALE_SECONDS)
                   < STALE_SECONDS)

    def _stopped_locked(self) -> bool:
        if not self.stopped and self.held and not self._fresh_locked(self.holding):
            self.stopped = True
        return self.stopped


@ray.remote(max_concurrency=16)  # train runs while every reader polls
class RunActor:
    """One run on the cluster, read by one or more app servers."""

    def __init__(self, key: str, args: tuple):
        """``args``: `worker.train`'s arguments after its pipe and stop event."""
        self.key, self.args = key, args
        self.stream = _Stream()
        self.readers = _Readers()
        self.born = time.monotonic()
        self.trainer: str | None = None  # the reader that trains it
        self.over = False  # `train` has returned
        self.lock = threading.Lock()

    def join(self, reader: str, train: bool) -> tuple:
        """``reader`` reads the run: ``(role, key, source, config, seconds)``, role
        ``"train"`` (the first reader that offers to: call `train`), ``"watch"``,
        ``"pending"`` (nobody trains it yet) or ``"ended"`` (not to be followed)."""
        with self.lock:
            role = self._role_locked(reader, train)
        return role, self.key, self.args[0], self.args[1], time.monotonic() - self.born

    def _role_locked(self, reader: str, train: bool) -> str:
        if self.over:  # a stored run reads as today; any other trains anew
            done = self.stream.done
            if done is None or done.status not in STORED_STATUSES:
                return "ended"
            self.readers.add(reader, hold=False)
            return "watch"
        if self.trainer is None and not train:
            return "pending"
        if not self.readers.add(reader, hold=True):
            return "ended"  # stopping: nobody held it
        if self.trainer is None:
            self.trainer = reader
            return "train"
        return "watch"

    def train(self) -> None:
        try:
            worker.train(self.stream, self.readers, *self.args, figures_nice=0)
        finally:
            self.over = True

    def poll(self, reader: str, since: int, watching: int = 0
             ) -> tuple[int, list[tuple], bool, int]:
        """The next cursor, the messages from ``since`` on, whether `train` returned, and
        how many sessions watch the run on the other app servers (``watching``: on this
        reader's)."""
        elsewhere = self.readers.saw(reader, watching)
        over = self.over  # read first: once over, the messages below include the end
        count, messages = self.stream.since(since)
        return count, messages, over, elsewhere

    def leave(self, reader: str) -> None:
        self.readers.leave(reader, reading=True)

    def release(self, reader: str) -> int:
        return self.readers.leave(reader, reading=False)

    def reading(self) -> int:
        return self.readers.reading()


def actor_name(key: str) -> str:
    """The name of the actor of the run ``key``: the whole key, so that two keys that
    begin alike never meet at one name."""
    return f"stacklab-run-{key}"


def _join(actor, reader: str, key: str, train: bool) -> tuple:
    """`RunActor.join`, with ``"gone"`` for an actor that ended meanwhile."""
    try:
        joined = ray.get(actor.join.remote(reader, train), timeout=CALL_SECONDS)
    except ray.exceptions.RayActorError:  # killed between lookup and join
        return ("gone",)
    if joined[1] != key:
        raise RuntimeError(f"the Ray actor {actor_name(key)} trains another run ({joined[1]})")
    return joined


def start(key: str, args: tuple, reader: str):
    """The run's actor and the reference to its training call; the reference is None when
    another app server trains it already (``reader`` then follows it). An earlier run of
    the key still ending holds the name: waited for, up to `CALL_SECONDS`."""
    deadline = time.monotonic() + CALL_SECONDS
    while True:
        try:
            actor = RunActor.options(name=actor_name(key), namespace=NAMESPACE,
                                     get_if_exists=True).remote(key, args)
        except ValueError:  # made by another app server, and gone again, meanwhile
            actor, role = None, "gone"
        else:
            role = _join(actor, reader, key, train=True)[0]
        if role == "train":
            return actor, actor.train.remote()
        if role == "watch":
            return actor, None
        if time.monotonic() > deadline:
            raise RuntimeError(f"an earlier run of key {key[:12]} is still ending on the Ray "
                               "cluster")
        time.sleep(RETRY_SECONDS)


def follow(key: str, reader: str) -> tuple | None:
    """``(actor, source, config, seconds)`` of the run of ``key`` that an app server trains
    (or trained, and stored) on the cluster, with ``reader`` following it; None when
    there is none to follow."""
    try:
        actor = ray.get_actor(actor_name(key), namespace=NAMESPACE)
    except ValueError:
        return None
    role, *setup = _join(actor, reader, key, train=False)
    return (actor, *setup[1:]) if role == "watch" else None


def poll(actor, reader: str, since: int, watching: int = 0
         ) -> tuple[int, list[tuple], bool, int]:
    return ray.get(actor.poll.remote(reader, since, watching), timeout=CALL_SECONDS)


def ended(reference) -> str | None:
    """None while the actor trains; else why it ended without a word ("" when it simply
    returned: its last message says the rest)."""
    ready, _ = ray.wait([reference], timeout=0)
    if not ready:
        return None
    try:
        ray.get(reference)
    except ray.exceptions.RayError as err:  # the actor died, or its process was killed
        return f"the Ray actor ended unexpectedly ({type(err).__name__})"
    return ""


def stop(actor, reader: str) -> None:
    actor.leave.remote(reader)


def release(actor, reader: str, trained: bool) -> None:
    """``reader`` has read the run; the one that ``trained`` it waits for the others (up
    to `LINGER_SECONDS`), then ends the actor."""
    try:
        reading = ray.get(actor.release.remote(reader), timeout=CALL_SECONDS)
        deadline = time.monotonic() + LINGER_SECONDS
        while trained and reading and time.monotonic() < deadline:
            time.sleep(RETRY_SECONDS)
            reading = ray.get(actor.reading.remote(), timeout=CALL_SECONDS)
    except ray.exceptions.RayError:
        pass  # gone, or not answering: nobody reads it any more
    if trained:
        ray.kill(actor, no_restart=True)
