"""What a worker process (a run's or a table's) does to itself as it starts: it gives the
page scripts the CPU first (`lower_priority`) and, for a table, holds its memory to a
budget (`limit_memory`)."""

from __future__ import annotations

import os
import resource
from pathlib import Path


def lower_priority(by: int) -> None:
    """Lower this process's CPU priority by ``by`` (``os.nice``); where that is not allowed,
    the work goes on at its priority."""
    try:
        if by:
            os.nice(by)
    except OSError:
        pass


def limit_memory(extra: int) -> None:
    """Allow this process ``extra`` bytes of data beyond what it holds now (its heap and
    private mappings: ``RLIMIT_DATA``; torch's shared libraries do not count)."""
    try:
        held = next(int(line.split()[1]) * 1024 for line in
                    Path("/proc/self/status").read_text().splitlines()
                    if line.startswith("VmData:"))
        resource.setrlimit(resource.RLIMIT_DATA, (held + extra, held + extra))
    except (OSError, ValueError, StopIteration):
        pass  # no /proc or no limit allowed: the pool's time limit still holds
