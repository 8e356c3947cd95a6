"""The pool's owners (browser sessions): which jobs each asked for, when it last polled,
and whether it is still connected, so that a closed tab lets go of its runs.

An owner that has not polled for ``ttl_seconds``, or that ``owner_alive`` has said is
disconnected for longer than ``disconnect_grace_seconds`` (a closed or reloaded tab, not a
network blip), is idle. `Owners` keeps the book; the pool decides what an idle owner's
jobs do (`stacklab.serve.workers.pool`), under its own lock, which every method here
expects to be held.
"""

from __future__ import annotations

import time
from typing import Callable

from ..limits import RUNS_KEPT_PER_SESSION
from .job import Job


class Owners:
    """Owner -> the jobs it asked for (newest first), when it last polled, and since when it
    has been disconnected."""

    def __init__(self, ttl_seconds: float, owner_alive: Callable[[str], bool] | None,
                 disconnect_grace_seconds: float):
        self.ttl_seconds = ttl_seconds
        self.owner_alive = owner_alive
        self.disconnect_grace_seconds = disconnect_grace_seconds
        self._jobs: dict[str, list[Job]] = {}  # owner -> the jobs it asked for, newest first
        self._seen: dict[str, float] = {}  # owner -> last time it polled
        self._gone_since: dict[str, float] = {}  # owner -> when it was first seen disconnected

    def __len__(self) -> int:
        return len(self._jobs)

    def seen(self, owner: str) -> None:
        """``owner`` polled now."""
        self._seen[owner] = time.monotonic()

    def jobs_of(self, owner: str) -> list[Job]:
        return list(self._jobs.get(owner, []))

    def find(self, owner: str, job_id: int) -> Job | None:
        return next((j for j in self._jobs.get(owner, []) if j.id == job_id), None)

    def watching(self, owner: str, besides: Job) -> list[Job]:
        """The jobs other than ``besides`` that ``owner`` still watches."""
        return [other for other in self._jobs.get(owner, [])
                if other is not besides and owner in other.watchers]

    def give(self, owner: str, job: Job) -> None:
        """``owner`` watches ``job`` (while it is active) and has it as its newest."""
        if job.status.active:
            job.watchers.add(owner)
        jobs = self._jobs.setdefault(owner, [])
        if job in jobs:
            jobs.remove(job)
        jobs.insert(0, job)
        del jobs[RUNS_KEPT_PER_SESSION:]
        self.seen(owner)

    def viewers(self, key: str) -> int:
        """Owners whose current run (newest asked for or opened) is ``key``."""
        return sum(1 for jobs in self._jobs.values() if jobs and jobs[0].key == key)

    def idle(self, now: float) -> list[str]:
        """The owners that have not polled for ``ttl_seconds`` or are gone past the grace."""
        return [owner for owner, seen in self._seen.items()
                if now - seen > self.ttl_seconds or self._gone_for(owner, now)
                > self.disconnect_grace_seconds]

    def drop(self, owner: str) -> list[Job]:
        """Forget ``owner``; the jobs it had asked for."""
        self._seen.pop(owner, None)
        self._gone_since.pop(owner, None)
        return self._jobs.pop(owner, [])

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
