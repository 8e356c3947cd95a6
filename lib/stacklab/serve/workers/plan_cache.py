"""The plans the pool has checked (`JobPool.check`), remembered within a bound in bytes.

Every script run of the Train page checks its run, and a classroom's sessions all check the
same one, so the pool remembers each plan (`stacklab.lab.train.plan.RunPlan`). A plan of a
long stack holds its resolved network: megabytes for a stack of thousands of ops. So the
cache is bounded by the bytes its plans hold (`RunPlan.held_bytes`), the least recently
used going first, and a stack is remembered by its calls: a change to its comments, blank
lines or trailing spaces finds the plan already there, not a new entry's worth of memory.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from ...lab.settings import TrainConfig
from ...lab.train.plan import RunPlan

PLAN_CACHE_BYTES = 64 * 2**20  # what the remembered plans may hold, together


class PlanCache:
    """Plans by (stack without comments, settings), at most ``max_bytes`` of them."""

    def __init__(self, max_bytes: int = PLAN_CACHE_BYTES):
        self.max_bytes = max_bytes
        self.bytes = 0  # what the plans kept hold, by `RunPlan.held_bytes`
        self._plans: OrderedDict[tuple, tuple[RunPlan, int]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._plans)

    @staticmethod
    def key(source: str | None, config: TrainConfig) -> tuple:
        return (None if source is None else stack_calls(source), config)

    def get(self, source: str | None, config: TrainConfig) -> RunPlan | None:
        """The plan remembered for ``source`` and ``config`` (now the most recently used)."""
        key = self.key(source, config)
        with self._lock:
            found = self._plans.get(key)
            if found is None:
                return None
            self._plans.move_to_end(key)
            return found[0]

    def put(self, source: str | None, config: TrainConfig, plan: RunPlan) -> None:
        """Remember ``plan``, forgetting the least recently used ones over the bound (a plan
        larger than the bound alone is not remembered)."""
        size = plan.held_bytes()
        if size > self.max_bytes:
            return
        key = self.key(source, config)
        with self._lock:
            old = self._plans.pop(key, None)
            self.bytes -= old[1] if old else 0
            self._plans[key] = (plan, size)
            self.bytes += size
            while self.bytes > self.max_bytes:
                _, (_, freed) = self._plans.popitem(last=False)
                self.bytes -= freed


def stack_calls(source: str) -> str:
    """``source`` without its comments, blank lines and trailing spaces: what the resolver
    reads of it, line by line (a ``#`` inside a quoted string stays)."""
    lines = (_without_comment(line).rstrip() for line in source.splitlines())
    return "\n".join(line for line in lines if line)


def _without_comment(line: str) -> str:
    if "#" not in line:
        return line
    quote, escaped = None, False
    for index, char in enumerate(line):
        if escaped:
            escaped = False
        elif quote:
            escaped = char == "\\"
            quote = None if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char == "#":
            return line[:index]
    return line
