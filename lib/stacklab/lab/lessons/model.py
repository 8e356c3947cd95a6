"""What a lesson is made of: a `Lesson` is a few `Step`s; a step runs one experiment and
states what the run must show as an `Expect`, a condition on one number of the run.

The numbers (`METRICS`) are read from the run's ``metrics.json`` record (`Run.metrics`),
so a step is checked the same way on a run just trained, a stored run or the record alone.
Every step is validated when it is declared (its settings against the settings table, its
condition against `METRICS`), so a typo fails on import, and the test suite trains each
step's experiment and checks its condition, so no lesson says what is not true.

>>> Expect("accuracy", ">=", 0.9).text
'held-out accuracy at least 0.9'
>>> Expect("past_T", "<=", 0.2, length=32).text
'held-out accuracy past T at length 32 at most 0.2'
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Callable, Mapping

from ...core.errors import StackError
from ..settings import SETTINGS, TrainConfig
from ..tasks import get_task

__all__ = ["Metric", "METRICS", "Expect", "Step", "Lesson", "check"]


@dataclass(frozen=True)
class Metric:
    """One number of a run a step can state a condition on: its name in words, and how it
    is read from the ``metrics.json`` record (given the `Expect`, for a length)."""

    label: str
    read: Callable[[dict, "Expect"], float | None]
    needs_length: bool = False  # read at one of the run's eval_lengths (`Expect.length`)
    names: tuple[str, ...] = ()  # words a question names it by (the checker wants one)


def _first_table(record: dict) -> dict | None:
    tables = record.get("position_tables") or {}
    return next(iter(tables.values()), None)


def _pattern(record: dict, expect: "Expect") -> float | None:
    """The task's pattern score of the first position table; for a stack without one, the
    partner attention of its attention by position alone."""
    table = _first_table(record)
    if table is not None:
        return table["scores"]["pattern"]["value"]
    without = record.get("attention_by_position")
    return without["pattern"]["value"] if without else None


def _untrained(record: dict, name: str) -> list[float] | None:
    """``name`` (row_grad_norm, row_drift) of the first table's rows past T; None when the
    run has no table or the table no spare rows."""
    table = _first_table(record)
    if table is None:
        return None
    values = table[name][record["seq_len"]:]
    return values or None


def _untrained_grad(record: dict, expect: "Expect") -> float | None:
    values = _untrained(record, "row_grad_norm")
    return max(values) if values else None


def _untrained_drift(record: dict, expect: "Expect") -> float | None:
    values = _untrained(record, "row_drift")
    return sum(values) / len(values) if values else None


def _at_length(record: dict, expect: "Expect") -> dict | None:
    entry = (record.get("length_generalization") or {}).get(str(expect.length))
    return entry if entry and "error" not in entry else None


def _accuracy_at(record: dict, expect: "Expect") -> float | None:
    entry = _at_length(record, expect)
    return entry["accuracy"] if entry else None


def _past_T(record: dict, expect: "Expect") -> float | None:
    """The mean accuracy over the positions T.. of sequences of ``expect.length``: the
    positions training never reached."""
    entry = _at_length(record, expect)
    if entry is None:
        return None
    values = [v for v in entry["per_position"][record["seq_len"]:] if v is not None]
    return sum(values) / len(values) if values else None


def _largest_head(score: str, layer: int | None = None):
    """The largest ``score`` of a head of attention layer ``layer`` (counted from 1; None:
    the last layer)."""
    def read(record: dict, expect: "Expect") -> float | None:
        layers = (record.get("attention") or {}).values()
        wanted = layer if layer is not None else max((e["layer"] for e in layers), default=0)
        values = [head[score]["value"] for entry in layers if entry["layer"] == wanted
                  for head in entry["heads"] if score in head]
        values = [value for value in values if value is not None]
        return max(values) if values else None
    return read


METRICS: dict[str, Metric] = {
    "accuracy": Metric("held-out accuracy",
                       lambda record, expect: record["final"]["accuracy"],
                       names=("held-out accuracy",)),
    "pattern": Metric("the task's pattern score", _pattern, names=("pattern score",)),
    "untrained_grad": Metric("the largest summed gradient of a row past T", _untrained_grad,
                             names=("summed gradient", "gradient")),
    "untrained_drift": Metric("the mean drift of the rows past T", _untrained_drift,
                              names=("drift",)),
    "accuracy_at": Metric("held-out accuracy", _accuracy_at, needs_length=True,
                          names=("held-out accuracy",)),
    "past_T": Metric("held-out accuracy past T", _past_T, needs_length=True,
                     names=("accuracy past T",)),
    "induction": Metric("the largest induction score of a last-layer head",
                        _largest_head("induction"), names=("induction score",)),
    "previous_token": Metric("the largest previous-token score of a layer-1 head",
                             _largest_head("previous_token", layer=1),
                             names=("previous-token score",)),
}

OPS = {">=": ("at least", lambda value, bound: value >= bound),
       "<=": ("at most", lambda value, bound: value <= bound)}


@dataclass(frozen=True)
class Expect:
    """A condition on one number of a run: ``metric`` (a key of `METRICS`) ``op`` (">=" or
    "<=") ``bound``; ``length`` for a metric read at one of the run's ``eval_lengths``."""

    metric: str
    op: str
    bound: float
    length: int | None = None

    def __post_init__(self):
        if self.metric not in METRICS:
            raise StackError("E_ARG", f"there is no lesson metric {self.metric!r}",
                             hint="one of " + ", ".join(METRICS))
        if self.op not in OPS:
            raise StackError("E_ARG", f"an expectation compares with >= or <=, not {self.op!r}",
                             hint="use \">=\" or \"<=\"")
        if METRICS[self.metric].needs_length != (self.length is not None):
            raise StackError("E_ARG", f"{self.metric} needs a length" if self.length is None
                             else f"{self.metric} is not read at a length",
                             hint="give length= for accuracy_at and past_T, and only for them")

    @property
    def label(self) -> str:
        """``held-out accuracy past T at length 32``."""
        at = f" at length {self.length}" if self.length is not None else ""
        return METRICS[self.metric].label + at

    @property
    def text(self) -> str:
        """``held-out accuracy at least 0.9``."""
        return f"{self.label} {OPS[self.op][0]} {self.bound:g}"

    def measure(self, record: dict) -> float | None:
        """The number in ``record`` (a ``metrics.json`` record); None when the run has none."""
        value = METRICS[self.metric].read(record, self)
        return None if value is None or not math.isfinite(value) else float(value)

    def holds(self, value: float | None) -> bool:
        return value is not None and OPS[self.op][1](value, self.bound)


def _frozen(settings: Mapping[str, object]) -> Mapping[str, object]:
    return MappingProxyType(dict(settings))


@dataclass(frozen=True)
class Step:
    """One step of a lesson: what to try, a question asking for a prediction (``answer``
    shown after the run), the experiment (``settings``: `TrainConfig` fields, as a link
    carries them; ``stack``: the stack's text, None for the task's preset), the key of the
    figure that matters (`stacklab.lab.figures.FIGURES`), the condition the run meets, and
    what to try next."""

    title: str
    text: str
    question: str
    answer: str
    settings: Mapping[str, object]
    figure: str
    expect: Expect
    try_next: str
    stack: str | None = None
    line: int = field(default=0, compare=False)  # where its section starts in its file

    def __post_init__(self):
        object.__setattr__(self, "settings", _frozen(self.settings))
        for name, value in self.settings.items():
            row = SETTINGS.get(name)
            if row is None or not row.link:
                raise StackError("E_ARG", f"step {self.title!r}: {name!r} is not a setting a "
                                 "link carries", hint="one of " + ", ".join(
                                     r.name for r in SETTINGS.values() if r.link))
            _, problem = row.parse_link("none" if value is None else str(value))
            if problem:
                raise StackError("E_ARG", f"step {self.title!r}: {problem}",
                                 hint=f"set {name} within what a link accepts")
        config = self.config.filled()  # the library's checks too
        if self.expect.length is not None and self.expect.length not in config.lengths:
            raise StackError("E_ARG", f"step {self.title!r} reads length {self.expect.length}, "
                             f"which its eval_lengths {config.eval_lengths!r} leave out",
                             hint=f"add {self.expect.length} to eval_lengths")

    @property
    def config(self) -> TrainConfig:
        """The step's settings as a `TrainConfig` (the task's defaults where it says none)."""
        return TrainConfig(**self.settings)

    @property
    def source(self) -> str:
        """The stack the step trains: its own, or the task's preset at its length."""
        if self.stack is not None:
            return self.stack
        config = self.config.filled()
        return get_task(config.task).preset(config.seq_len)


@dataclass(frozen=True)
class Lesson:
    """A short sequence of steps on one idea: ``id`` names it in a link (``lesson=ID``)."""

    id: str
    title: str
    summary: str  # what the lesson teaches, in a sentence or two
    steps: tuple[Step, ...] = field(default_factory=tuple)
    origin: str = field(default="", compare=False)  # the file it was read from
    checked: bool = field(default=True, compare=False)  # its claims trained on seeds 0-2

    def __post_init__(self):
        if not self.id or not all(c.islower() or c.isdigit() or c == "-" for c in self.id):
            raise StackError("E_ARG", f"lesson id {self.id!r} must be lower-case letters, "
                             "digits and hyphens", hint="e.g. train-short-test-long")
        if not self.steps:
            raise StackError("E_ARG", f"lesson {self.id!r} has no steps",
                             hint="give it at least one Step")


def check(step: Step, run) -> tuple[bool, float | None, str]:
    """Whether ``run`` (a `Run`, or its ``metrics.json`` record as a dict) meets ``step``'s
    condition: ``(ok, the measured value, a sentence saying both)``, e.g. ``(True, 0.186,
    'held-out accuracy 0.19: expected at most 0.3')``; a run without the number (a length
    it was not evaluated at) is ``(False, None, '...: not measured by this run ...')``.
    """
    record = run if isinstance(run, dict) else run.metrics()
    expect = step.expect
    value = expect.measure(record)
    if value is None:
        return False, None, f"{expect.label}: not measured by this run (expected {expect.text})"
    ok = expect.holds(value)
    return ok, value, (f"{expect.label} {value:.2f}: expected {OPS[expect.op][0]} "
                       f"{expect.bound:g}" + ("" if ok else " (not met)"))
