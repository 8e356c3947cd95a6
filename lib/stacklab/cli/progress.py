"""A one-line progress bar on stderr: a run's steps (``train``) or finished runs (``sweep``)."""

from __future__ import annotations

import sys
import time


class ProgressBar:
    """A one-line progress bar on stderr, redrawn at most ten times a second."""

    def __init__(self, label: str, total: int, stream=None, width: int = 24):
        self.label, self.total, self.width = label, total, width
        self.stream = stream or sys.stderr
        self._last = 0.0

    def update(self, done: int, force: bool = False) -> None:
        """Show ``done`` of the total (a sweep's finished runs)."""
        if self._due(done, force):
            self._draw(done, "")

    def show_run(self, run, force: bool = False) -> None:
        """Show a training run's step, its last loss and its held-out accuracy."""
        if not self._due(run.step, force):
            return
        detail = ""
        if run.train_loss:
            detail += f"  loss {run.train_loss[-1][1]:.4f}"
        if run.history:
            detail += f"  held-out acc {run.history[-1]['accuracy']:.3f}"
        self._draw(run.step, detail)

    def close(self) -> None:
        self.stream.write("\n")
        self.stream.flush()

    def _due(self, done: int, force: bool) -> bool:
        """Whether to redraw now: forced, at the end, or 0.1 s after the last drawing."""
        now = time.perf_counter()
        if now - self._last < 0.1 and done < self.total and not force:
            return False
        self._last = now
        return True

    def _draw(self, done: int, detail: str) -> None:
        filled = int(self.width * done / self.total)
        bar = "#" * filled + "-" * (self.width - filled)
        self.stream.write(f"\r{self.label} [{bar}] {done}/{self.total}{detail}")
        self.stream.flush()
