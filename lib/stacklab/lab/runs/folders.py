"""The run store's folders by size and by last use, for eviction (`stacklab.lab.runs.store`):
the least recently used go first until the rest fit a bound in bytes."""

from __future__ import annotations

from pathlib import Path


def drop_until(bound: int, sized: list[tuple[str, int]], keep: str | None, drop) -> list[str]:
    """``drop`` keys of ``sized`` (key, bytes), in order, until the rest fit ``bound``."""
    total, dropped = sum(size for _, size in sized), []
    for key, size in sized:
        if total <= bound:
            break
        if key != keep:
            drop(key)
            total -= size
            dropped.append(key)
    return dropped


def last_used(folder: Path) -> float:
    try:
        return folder.stat().st_mtime
    except OSError:
        return 0.0


def folder_bytes(folder: Path) -> int:
    total = 0
    try:
        for path in folder.iterdir():
            total += path.stat().st_size
    except OSError:
        pass
    return total
