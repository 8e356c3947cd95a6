"""What a training worker (`stacklab.serve.workers.worker`) tells the pool, one frozen
dataclass per kind, and the one codec both transports use on the wire: a local worker
process's pipe and a Ray actor's stream (`stacklab.serve.workers.ray_runs`) carry
``encode(message)``, a plain tuple ``(kind, *fields)``, and the pool reads ``decode(...)``.

>>> decode(encode(Step(step=3, train_loss=1.5)))
Step(step=3, train_loss=1.5)
>>> encode(Done(status="finished", error=None, folder=None))
('done', 'finished', None, None)
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar, Union


@dataclass(frozen=True)
class Step:
    """Progress, sent at most every `worker.PROGRESS_SECONDS`."""

    kind: ClassVar[str] = "step"
    step: int
    train_loss: float | None  # the newest batch's loss (None before the first)


@dataclass(frozen=True)
class Evaluated:
    """A held-out evaluation, the batch losses since the last message, and the task's
    pattern figure as a `figure_entry` tuple (drawn at most every `worker.PATTERN_SECONDS`,
    else None)."""

    kind: ClassVar[str] = "eval"
    step: int
    entry: dict  # the run's newest history entry
    train_losses: list  # (step, loss) pairs since the last message
    pattern: tuple | None


@dataclass(frozen=True)
class Pattern:
    """The newest pattern figure alone: a Ray stream keeps only the newest one, so an
    evaluation is relayed without its figure and this follows it."""

    kind: ClassVar[str] = "pattern"
    figure: tuple  # a `figure_entry` tuple


@dataclass(frozen=True)
class Stored:
    """A finished or diverged run is in the run store under its key, with the pattern
    figure of its final model; its worker now draws its other figures."""

    kind: ClassVar[str] = "stored"
    status: str
    error: str | None
    pattern: tuple | None


@dataclass(frozen=True)
class Done:
    """The run ended: a finished or diverged run is in the run store under its key, any
    other in ``folder`` (a private folder of the store; None when it is not there)."""

    kind: ClassVar[str] = "done"
    status: str
    error: str | None
    folder: str | None


@dataclass(frozen=True)
class Stage:
    """A table's analysis (`stacklab.serve.workers.table_worker`) has reached a stage: what
    it does now, in words, and about how much of the work is behind it (0 to 1)."""

    kind: ClassVar[str] = "stage"
    text: str
    done: float


@dataclass(frozen=True)
class Analysed:
    """A table's analysis ended: its ``result`` (a dict of plain data: name, what was read,
    shape, scores, `figure_entry` lists), or why not, as a `StackError`'s
    ``(code, place, message, hint)``."""

    kind: ClassVar[str] = "analysed"
    result: dict | None
    error: tuple | None


Message = Union[Step, Evaluated, Pattern, Stored, Done, Stage, Analysed]
KINDS: dict[str, type] = {kind.kind: kind for kind in (Step, Evaluated, Pattern, Stored, Done,
                                                       Stage, Analysed)}


def encode(message: Message) -> tuple:
    """``message`` as it travels: ``(kind, *fields)``, plain data any pickler carries."""
    return (message.kind, *(getattr(message, field.name) for field in fields(message)))


def decode(raw: tuple) -> Message:
    """The message that `encode` gave ``raw``; `ValueError` for anything else (a worker
    of another version), which fails that run, never the pool."""
    name, *values = raw if isinstance(raw, tuple) and raw else (None,)
    kind = KINDS.get(name) if isinstance(name, str) else None
    if kind is None or len(values) != len(fields(kind)):
        raise ValueError(f"not a worker message: {str(raw)[:80]}")
    return kind(*values)
