"""The keys a bucket held a moment ago, for short keys that name no run (issue 46): each
unknown 8-digit start of a ``run=`` link would otherwise list the whole bucket. One listing
answers every start for `LISTING_SECONDS`; a run this process stores forgets it at once,
and a run another server stored is found at the latest that long after. A listing of more
than `LISTING_MAX_KEYS` keys is not kept (its memory would be unbounded), so such a bucket
is listed per start as before."""

from __future__ import annotations

import threading
import time
from typing import Callable

LISTING_SECONDS = 10.0
LISTING_MAX_KEYS = 100_000  # 32 hex digits each: a few MB at most


class RecentListing:
    """The keys of one listing, reused while it is younger than `LISTING_SECONDS`."""

    def __init__(self, seconds: float = LISTING_SECONDS, max_keys: int = LISTING_MAX_KEYS):
        self.seconds, self.max_keys = seconds, max_keys
        self._keys: tuple[str, ...] | None = None
        self._at = 0.0
        self._lock = threading.Lock()

    def keys(self, listing: Callable[[], list[str]]) -> tuple[str, ...]:
        """The kept keys, or ``listing()``'s (kept when small enough) when none are fresh;
        its `StackError` passes through (nothing is kept)."""
        with self._lock:
            if self._keys is not None and time.monotonic() - self._at < self.seconds:
                return self._keys
        listed = tuple(listing())
        with self._lock:
            if len(listed) <= self.max_keys:
                self._keys, self._at = listed, time.monotonic()
        return listed

    def forget(self) -> None:
        """Drop the kept keys: the bucket changed (a run stored here)."""
        with self._lock:
            self._keys = None
