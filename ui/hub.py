"""The server's state, owned by one object: the `Hub`. One per server process, which the
pages (through `ui.session`, `ui.polls`, `ui.live_run`, `ui.browsers`, `ui.navigation`)
and the watch endpoints (`ui.endpoints`) both read:

- ``pool()``: the training pool (`JobPool`), made at its first need (a page that trains,
  lists runs or opens a link; an endpoint asked about a run), not at start-up: its
  workers and its warmed fork server cost seconds that an import must not;
- ``classes()``: the open classes (`Classes`, or the Ray cluster's), made at first need;
- ``load``: the following sessions and what their polls cost (`PollLoad`), which sets
  every following page's interval (`ui.pace`);
- ``pictures``: the live runs' newest pictures, written once per frame (`ui.pictures`);
- ``browsers``: which Streamlit session each owner's browser tab is (`BrowserSessions`),
  which the pool asks to detach a closed tab's runs soon;
- ``pages``: app.py's pages, made once per server (`ui.navigation`);
- ``presented``: a teacher's uploaded lesson, kept under the id of the class it was
  presented to, for that class's students (`ui.lessons`);
- ``assets``: Streamlit's static files, gzipped once (`ui.compression`'s cache).

server.py makes it at start-up (`Hub.start`) and hands it to the compression middleware
and the watch endpoints. Under a plain ``streamlit run app.py``, and in AppTest, nothing
starts it: the first page that needs it makes the same one (`Hub.current`, process-wide
and thread-safe). Tests put parts of it back as new with `Hub.reset`.

This module does not import streamlit (tests/test_architecture.py checks it, with all that
the endpoints import): whatever needs Streamlit (a browser session's liveness, the pages)
is handed in by the page code that has it.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable

from ui.library import SESSION_TTL_SECONDS, Classes, JobPool, PollLoad, server_classes
from ui.pictures import Pictures

PAGES_KEPT = 8  # versions of app.py's pages kept (an edited app.py declares them anew)
PRESENTED_KEPT = 256  # teachers' uploads presented to a class (the oldest goes first beyond it)
SESSIONS_KEPT = 10_000  # browser sessions remembered before a gone one's entry is dropped


class BrowserSessions:
    """Which Streamlit session each owner's browser tab is (served pages only: AppTest has
    none), and whether it is still connected. ``alive(session)`` is Streamlit's answer,
    handed in with each session by the page code that knows Streamlit (`ui.browsers`)."""

    def __init__(self):
        self._sessions: dict[str, str] = {}  # owner -> its Streamlit session
        self._alive: Callable[[str], bool] | None = None

    def register(self, owner: str, session: str, alive: Callable[[str], bool]) -> None:
        self._sessions[owner] = session
        self._alive = alive

    def connected(self, owner: str) -> bool:
        """Whether the browser session of ``owner`` is still connected (a closed or
        reloaded tab is not); an owner with no known session is."""
        session = self._sessions.get(owner)
        if session is None or self._alive is None:
            return True
        alive = self._alive(session)
        if not alive and len(self._sessions) > SESSIONS_KEPT:
            self._sessions.pop(owner, None)  # bounded: a gone session's entry can go
        return alive


class Made:
    """Values made once per key and kept, all dropped once `PAGES_KEPT` keys are."""

    def __init__(self, kept: int = PAGES_KEPT):
        self._kept, self._made, self._lock = kept, {}, threading.Lock()

    def get(self, key: Hashable, make: Callable[[], object]):
        """The value kept for ``key``, made by ``make()`` the first time (outside the lock:
        two first askers may both make it, and one is kept)."""
        with self._lock:
            made = self._made.get(key)
        if made is None:
            made = make()
            with self._lock:
                if len(self._made) >= self._kept:
                    self._made.clear()
                self._made[key] = made
        return made


class Recent:
    """The values last kept by key, at most ``kept`` of them, the oldest dropped first."""

    def __init__(self, kept: int):
        self._kept, self._values, self._lock = kept, OrderedDict(), threading.Lock()

    def put(self, key: Hashable, value) -> None:
        with self._lock:
            self._values[key] = value
            self._values.move_to_end(key)
            while len(self._values) > self._kept:
                self._values.popitem(last=False)

    def get(self, key: Hashable):
        with self._lock:
            return self._values.get(key)


def _log_to_stderr() -> None:
    """The library's log lines (a run trained, a run from the store, a damaged store entry)
    in the server's output, once."""
    logger = logging.getLogger("stacklab")
    if not logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)


def _ttl() -> float:
    return float(os.environ.get("STACKLAB_SESSION_TTL", SESSION_TTL_SECONDS))


class Hub:
    """The server's state (see the module docstring). ``Hub()`` makes a hub of one's own
    (a test's); the server's is `Hub.start` or `Hub.current`."""

    _current: Hub | None = None
    _making = threading.Lock()
    PARTS = ("pool", "classes", "load", "pictures", "browsers", "pages", "presented", "assets")

    def __init__(self):
        self._lock = threading.Lock()
        self._pool: JobPool | None = None
        self._classes: Classes | None = None
        self.load = PollLoad()
        self.pictures = Pictures()
        self.browsers = BrowserSessions()
        self.pages = Made()
        self.presented = Recent(PRESENTED_KEPT)  # class id -> the uploaded lesson it presents
        self.assets: OrderedDict = OrderedDict()  # path -> (headers, body) or None

    @classmethod
    def start(cls) -> Hub:
        """The server's hub, made now (server.py, at start-up), or the one already made."""
        return cls.current()

    @classmethod
    def current(cls) -> Hub:
        """The server's hub: the one server.py started, or (``streamlit run app.py``,
        AppTest) the one made by the first to ask."""
        hub = cls._current
        if hub is None:
            with cls._making:
                if cls._current is None:
                    cls._current = cls()
                hub = cls._current
        return hub

    def pool(self) -> JobPool:
        """The server's training pool, made at its first need: one worker per CPU core, each
        torch op on one thread (classroom budgets are the pool's default). Training runs at
        the page scripts' priority unless ``STACKLAB_WORKER_NICE`` says otherwise: a class
        waits for its runs, and in the load test a nice of 10 cost one link's 100 students
        about 1.7 s at p95 (README)."""
        pool = self._pool
        if pool is None:
            with self._lock:
                if self._pool is None:
                    _log_to_stderr()
                    self._pool = JobPool(
                        workers=int(os.environ.get("STACKLAB_WORKERS", os.cpu_count() or 1)),
                        ttl_seconds=_ttl(), threads_per_job=1,
                        worker_nice=int(os.environ.get("STACKLAB_WORKER_NICE", 0)),
                        owner_alive=lambda owner: self.browsers.connected(owner))
                pool = self._pool
        return pool

    def classes(self) -> Classes:
        """The server's open classes (Learn's "Present this lesson to a class"), made at
        first need: one per server, like the pool, or with ``STACKLAB_RAY_ADDRESS`` the
        cluster's, shared by every app server. A class ends when its teacher's session has
        not been seen for the session TTL (`Classes`'s own, so a long lesson is not cut
        short: a ``ttl=`` here would drop every open class that long after the first)."""
        classes = self._classes
        if classes is None:
            with self._lock:
                if self._classes is None:
                    self._classes = server_classes(_ttl())
                classes = self._classes
        return classes

    def reset(self, *parts: str) -> None:
        """Put ``parts`` (of `PARTS`; all of them when none is named) back as new, for a
        test: the pool is shut down and, like the classes, made again at its next need."""
        unknown = set(parts) - set(self.PARTS)
        if unknown:
            raise ValueError(f"a hub has no {sorted(unknown)}; its parts are {self.PARTS}")
        parts = parts or self.PARTS
        with self._lock:
            pool, self._pool = (self._pool, None) if "pool" in parts else (None, self._pool)
            if "classes" in parts:
                self._classes = None
        if pool is not None:
            pool.shutdown()
        if "assets" in parts:
            self.assets.clear()  # the compression middleware holds this one
        fresh = {"load": PollLoad, "pictures": Pictures, "browsers": BrowserSessions,
                 "pages": Made, "presented": lambda: Recent(PRESENTED_KEPT)}
        for part in parts:
            if part in fresh:
                setattr(self, part, fresh[part]())
