"""How often a page that follows something live polls the server: a run that trains (Train)
or a presented lesson (Learn's class). Each poll is a script run on the server, so a
lecture hall's pages ask for the server's CPU all together; past what the server can give,
every page would wait for every other, and the pages would freeze. `PollLoad` is the
backpressure: it counts the sessions that polled lately and what a poll costs the server,
and widens every page's interval so that their polls together take at most `POLL_SHARE` of
one core (the interpreter runs one script at a time). A page says so ("many students are
connected; updates every N s").

What a poll costs is measured two ways, and the larger is taken: the script's own CPU
with Streamlit's rerun of a fragment (`POLL_FLOOR_SECONDS`), and the whole server process's
CPU over the last seconds shared among the polls it served. The second sees what the
first cannot: a poll that reruns a whole page (the agent API's), and a server busy with
everything else (a class opening the link at once).

The policy is a pure function, `poll_interval`, so that it is tested without a server;
`PollLoad` feeds it what the server measured.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

POLL_SHARE = 0.7  # of one core: the most that the polls of every following page take together
# (the rest of the interpreter's time is for a class arriving, pressing and opening pages)
POLL_FLOOR_SECONDS = 0.004  # Streamlit's own rerun of a page and its transport, per poll
ANSWER_FLOOR_SECONDS = 0.0015  # the server's own HTTP answer of a watch endpoint's poll (no
# rerun: bench/request_costs.py's health check and a class's poll, 1.2 and 1.6 ms)
WINDOW_SECONDS = 10.0  # a session that polled within this long is following
CROWD = 20  # fewer following sessions are no crowd: their pages keep their own interval
RATE_SECONDS = 3.0  # the server's CPU per poll is measured over this long
HOLD_SECONDS = 10.0  # a widened interval narrows again only after this long (a changed
# interval reruns every following page once, so it must not flicker)
STEPS = (1, 1.5, 2, 3, 5, 8, 10, 15, 20, 30)  # s: widened intervals, few and round (a page says it)


def poll_interval(base: float, followers: int, poll_seconds: float,
                  share: float = POLL_SHARE) -> float:
    """The interval of a page that would poll every ``base`` s on its own, when
    ``followers`` sessions poll and each poll costs the server ``poll_seconds`` of CPU: the
    base while their polls fit in ``share`` of a core (or while they are fewer than
    `CROWD`: a busy server with a few pages is no hall), else the first of `STEPS` at
    which they do (the last step at most).

    >>> poll_interval(1.0, 30, 0.005)
    1.0
    >>> poll_interval(1.0, 300, 0.005)
    3
    """
    needed = followers * poll_seconds / share
    if needed <= base or followers < CROWD:
        return base
    return next((step for step in STEPS if step >= needed), STEPS[-1])


class PollLoad:
    """The server's following sessions and the CPU their polls cost, measured as they poll
    (one per server process, shared by every session's page)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 cpu_clock: Callable[[], float] = time.process_time,
                 floor_seconds: float = POLL_FLOOR_SECONDS):
        self._clock, self._cpu_clock, self._floor = clock, cpu_clock, floor_seconds
        self._lock = threading.Lock()
        self._seen: dict[str, float] = {}  # session -> when it last polled
        self._cost = 0.0  # the script's CPU per poll, a moving mean
        self._pruned = 0.0
        self._polls = 0  # polls served so far
        self._mark = (clock(), cpu_clock(), 0)  # (time, process CPU, polls) at the last rate
        self._rate = 0.0  # the process's CPU per poll over the last `RATE_SECONDS`
        self._held: dict[float, tuple[float, float]] = {}  # base -> (interval, since when)

    def polled(self, session: str, cpu_seconds: float, floor_seconds: float | None = None) -> None:
        """``session`` polled, and its script spent ``cpu_seconds`` of CPU on it, beside what
        the server spends on any such poll, ``floor_seconds`` (a rerun's, by default)."""
        now = self._clock()
        spent = (self._floor if floor_seconds is None else floor_seconds) + cpu_seconds
        with self._lock:
            self._seen[session] = now
            self._polls += 1
            self._cost = spent if self._cost == 0.0 else 0.9 * self._cost + 0.1 * spent
            if now - self._pruned > 1.0:  # at most once a second: a hall of 500 polls often
                self._pruned = now
                self._seen = {s: t for s, t in self._seen.items() if now - t <= WINDOW_SECONDS}
            since, cpu, polls = self._mark
            if now - since >= RATE_SECONDS:
                spent = self._cpu_clock()
                # the CPU of a window that a crowd's polls filled; in a longer gap (a
                # server started long before its first poll, a quiet hour), or among a few
                # polls (a teacher's page while the server starts), the CPU went to other work
                crowded = self._polls - polls >= CROWD and now - since <= 2 * RATE_SECONDS
                self._rate = (spent - cpu) / (self._polls - polls) if crowded else 0.0
                self._mark = (now, spent, self._polls)

    def followers(self) -> int:
        """Sessions that polled within `WINDOW_SECONDS`."""
        now = self._clock()
        with self._lock:
            return sum(1 for t in self._seen.values() if now - t <= WINDOW_SECONDS)

    def poll_seconds(self) -> float:
        """What one poll costs the server: the script's measured CPU and the server's own
        (a rerun's, or a watch endpoint's answer), or the server's CPU per poll lately,
        whichever is more."""
        return max(self._cost or self._floor, self._rate)

    def interval(self, base: float) -> float:
        """The interval a page that would poll every ``base`` s polls at now (`poll_interval`):
        wider at once, narrower only once the wider one has held `HOLD_SECONDS`."""
        wanted = poll_interval(base, self.followers(), self.poll_seconds())
        now = self._clock()
        with self._lock:
            held, since = self._held.get(base, (base, now))
            if wanted >= held or now - since >= HOLD_SECONDS:
                if wanted != held:
                    since = now
                held = wanted
            self._held[base] = (held, since)
            return held


def load_note(base: float, interval: float, followers: int) -> str | None:
    """What a page says when its interval was widened, else None."""
    if interval <= base:
        return None
    return (f"Many students are connected ({followers} following now), so this page "
            f"updates every {interval:g} s.")
