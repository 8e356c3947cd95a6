"""The actor of one run on a Ray cluster (`RunActor`, named after the run's key by
`stacklab.serve.workers.ray_runs`): the run's stream of messages, its readers and who holds
it. See `ray_runs` for how app servers find, read, stop and end it.

The actor is light: `ray_runs` ships this module's code to the cluster by value, and the
code here uses only the standard library and plain data (the messages as `messages.encode`
sends them, the constants below), so a new actor's process imports Ray and nothing of
stacklab (whose package imports torch: seconds on a busy machine). The training itself
runs in an app server's warm trainer (`ray_runs.Trainer`), which `deliver`s the messages
here; only when no trainer is free does the actor train the run itself (`RunActor.train`),
importing torch then.
"""

from __future__ import annotations

import bisect
import threading
import time

from ...lab.runs.store import STORED_STATUSES
from .messages import Done, Evaluated, Pattern, Step

STALE_SECONDS = 30.0  # a holder silent this long no longer keeps the run going
JOIN_SECONDS = 60.0  # how long a trainer's first delivery waits for its reader's join
# The kinds of the encoded messages (``(kind, *fields)``), as plain strings here: the
# classes stay in the app servers.
STEP, EVALUATED, PATTERN, DONE = Step.kind, Evaluated.kind, Pattern.kind, Done.kind


class _Stream:
    """What `worker.train` sends (`messages.encode`d), kept for every reader: each message
    gets the next index; the evaluations (without their figure) and the end are kept, of
    the steps and the pattern figures only the newest."""

    def __init__(self):
        self.lock = threading.Lock()
        self.count = 0  # messages sent so far: the next message's index
        self.kept: list[tuple[int, tuple]] = []  # (index, message), oldest first
        self.step: tuple[int, tuple] | None = None
        self.pattern: tuple[int, tuple] | None = None
        self.done: tuple | None = None  # the encoded `Done`: (kind, status, error, folder)

    def send(self, raw: tuple) -> None:
        with self.lock:
            index, self.count = self.count, self.count + 1
            kind = raw[0]
            if kind == STEP:
                self.step = (index, raw)
                return
            if kind == EVALUATED and raw[-1] is not None:  # its pattern, read after it
                self.pattern = (index, (PATTERN, raw[-1]))
                raw = (*raw[:-1], None)
            elif kind == DONE:
                self.done = raw
            self.kept.append((index, raw))

    def close(self) -> None:
        pass

    def since(self, start: int) -> tuple[int, list[tuple]]:
        """The next index, and every kept message from index ``start`` on, in order, as
        `messages.encode` sends them."""
        with self.lock:
            first = bisect.bisect_left(self.kept, start, key=lambda item: item[0])
            found = self.kept[first:] + [item for item in (self.step, self.pattern)
                                         if item is not None and item[0] >= start]
            return self.count, [raw for _, raw in sorted(found, key=lambda i: i[0])]

    def stored(self) -> bool:
        """Whether the run ended and is in the run store (finished or diverged)."""
        return self.done is not None and self.done[1] in STORED_STATUSES


class _Readers:
    """Who reads a run's stream and who of them holds it (see `ray_runs`). Also
    `worker.train`'s stop event: set, for good, once somebody held the run and nobody
    (fresh) does any more."""

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


class RunActor:
    """One run on the cluster, read by one or more app servers (made a Ray actor by
    `ray_runs`)."""

    def __init__(self, key: str, setup: list):
        """``setup``: one Ray object reference, to `worker.train`'s arguments after its
        pipe and stop event (in a list, so that Ray hands the reference over unread: the
        arguments are stacklab's classes, which this process never imports)."""
        self.key, self.setup = key, setup
        self.stream = _Stream()
        self.readers = _Readers()
        self.born = time.monotonic()
        self.trainer: str | None = None  # the reader that trains it
        self.over = False  # the training has returned
        self.lock = threading.Lock()
        self.joined = threading.Condition(self.lock)  # notified when a reader trains it

    def join(self, reader: str, train: bool) -> tuple:
        """``reader`` reads the run: ``(role, key, setup, seconds)``, role ``"train"`` (the
        first reader that offers to: it has the run trained), ``"watch"``, ``"pending"``
        (nobody trains it yet) or ``"ended"`` (not to be followed)."""
        with self.joined:
            role = self._role_locked(reader, train)
            self.joined.notify_all()
        return role, self.key, self.setup, time.monotonic() - self.born

    def _role_locked(self, reader: str, train: bool) -> str:
        if self.over:  # a stored run reads as today; any other trains anew
            if not self.stream.stored():
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

    def deliver(self, reader: str, messages: list[tuple]) -> bool | None:
        """A trainer's messages of the run, in order, for ``reader``; whether the run is to
        stop, or None when ``reader`` does not train it (the trainer started before its
        reader joined, and another reader trains the run, or trained it): the messages
        are dropped. The first delivery waits for the first reader to join (at most
        `JOIN_SECONDS`)."""
        with self.joined:
            self.joined.wait_for(lambda: self.trainer is not None, timeout=JOIN_SECONDS)
            if self.trainer != reader:
                return None
        for raw in messages:
            self.stream.send(raw)
        return self.readers.is_set()

    def finish(self) -> None:
        """The trainer's training call has returned (after its last `deliver`)."""
        self.over = True

    def train(self) -> None:
        """Train the run here (no trainer was free): imports torch and stacklab now."""
        import ray

        from stacklab.serve.workers import worker
        try:
            args = ray.get(self.setup[0])
            worker.train(self.stream, self.readers, *args, figures_nice=0)
        finally:
            self.over = True

    def poll(self, reader: str, since: int, watching: int = 0
             ) -> tuple[int, list[tuple], bool, int]:
        """The next cursor, the messages from ``since`` on, whether the training returned,
        and how many sessions watch the run on the other app servers (``watching``: on this
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
