"""The settings of a training run, declared once: `TrainConfig`, one field per setting.

Each field carries its row of the settings table (`Setting`): type, the library's range,
the classroom's range (what a link or the app accepts), default, label and help text.
Everything else is derived from these rows: `TrainConfig.filled`'s checks, the
``stacklab train`` flags, the URL parser of `stacklab.serve.links.experiment`, the app's widgets
(``ui.controls.setting_control``) and the notebook `Panel`'s. A row is plain data: the front ends
turn it into their own widgets. Adding a setting is one field here.

>>> SETTINGS["steps"].check(0)
Traceback (most recent call last):
...
stacklab.core.errors.StackError: E_ARG at input: steps must be a whole number from 1 to 1,000,000, not 0
fix: set steps within range
>>> SETTINGS["lr"].parse_link("1e-9")
(None, "lr='1e-9' is not a number from 1e-06 to 10.0")
"""

from __future__ import annotations

import inspect
import math
import numbers
from dataclasses import dataclass, field, fields, replace
from typing import Callable

from ..core.build import DEVICES, available_devices
from ..core.errors import StackError, choice_problem, closest, shown
from ..core.shapes import COMPUTE_DTYPES
from ..ops.rotary import SCALINGS
from .tasks import TASKS, get_task

_ROW = "stacklab.setting"  # the metadata key of a field's `Setting` row


@dataclass(frozen=True)
class Setting:
    """One row of the settings table."""

    name: str
    type: type  # int, float or str
    label: str  # the app's label for its control
    help: str  # one line, for the CLI's --help and the control's tooltip
    default: object = None  # None: the task decides (its preset's value)
    low: float | None = None  # the library's range (None: unbounded)
    high: float | None = None
    low_open: bool = False  # the range excludes `low` (lr must be above 0)
    classroom: tuple[float, float] | None = None  # the range a link or the app accepts
    choices: tuple[str, ...] = ()  # the accepted words of a str setting
    offered: Callable[[], list[str]] | None = None  # the choices this machine can serve
    link: bool = True  # part of an experiment's link (and the app's controls)
    page: str = "train"  # the app page whose controls show it
    cli: bool = True  # a flag of `stacklab train`
    step: float = 1  # a number control's step
    metavar: str = ""  # the value's name in the CLI's usage (default N for ints, X for floats)
    optional: bool = False  # None is a value of its own ("none" in a link: the setting is off)
    items: int = 0  # > 0: a list of at most this many whole numbers within the ranges, given
    #                 as text ("16,32,64"; "" for none) or as Python values ([16, 32, 64]);
    #                 a filled config keeps the text
    example: str = ""  # a value as written, for a list's hints ("16,32,64")

    @property
    def flag(self) -> str:
        """``--batch-size``."""
        return "--" + self.name.replace("_", "-")

    @property
    def value_name(self) -> str:
        return self.metavar or ("N" if self.whole else "X")

    @property
    def whole(self) -> bool:
        return self.type is int

    def _range_text(self, low, high, low_open: bool = False) -> str:
        if self.whole:
            return f"a whole number from {low:,} to {high:,}"
        return f"a number {'above' if low_open else 'from'} {low} to {high}"

    def _in_range(self, value, low, high, low_open: bool = False) -> bool:
        if isinstance(value, bool) or not isinstance(value, int if self.whole else (int, float)):
            return False
        if not self.whole and not math.isfinite(value):
            return False
        return (value > low if low_open else value >= low) and value <= high

    def _library_range(self) -> tuple:
        return self.low, self.high, self.low_open

    def _list(self, value: object, low, high) -> tuple[str | None, str | None]:
        """A list setting's canonical text ("16,32,64") of ``value``, written as a link
        writes it ("16,32") or as Python values (``[16, 32]``, ``(16, 32)``), or
        (None, why not)."""
        if isinstance(value, (list, tuple)):
            parts = list(value)
            numbers = [_whole(part) if isinstance(part, str) else _integer(part)
                       for part in parts]
        else:
            parts = [part.strip() for part in str(value).split(",") if part.strip()]
            numbers = [_whole(part) for part in parts]
        if len(parts) > self.items or any(n is None or not low <= n <= high for n in numbers):
            return None, (f"{self.name}={shown(str(value))} is not a list of at most "
                          f"{self.items} whole numbers from {low:,} to {high:,}")
        return ",".join(str(n) for n in dict.fromkeys(numbers)), None

    def check(self, value: object) -> None:
        """Raise ``E_ARG`` unless ``value`` lies in the library's range."""
        if self.items:
            _, problem = self._list(value, self.low, self.high)
            if problem:
                raise StackError("E_ARG", f"{self.name} must be a list of at most {self.items} "
                                 f"whole numbers from {self.low:,} to {self.high:,}, not "
                                 f"{shown(str(value))}",
                                 hint=f"e.g. {self.name}=[{self.example.replace(',', ', ')}] "
                                      f"or {self.name}=\"{self.example}\"")
            return
        if self.low is not None and not self._in_range(value, *self._library_range()):
            raise StackError("E_ARG", f"{self.name} must be "
                             f"{self._range_text(*self._library_range())}, not {value!r}",
                             hint=f"set {self.name} within range")

    def parse_link(self, raw: str) -> tuple[object, str | None]:
        """A value from a link (classroom range): ``(value, None)``, or ``(None, problem)``."""
        if self.choices:
            if raw in self.choices:
                return raw, None
            return None, choice_problem(self.name, raw, self.choices)
        if self.optional and raw.strip().lower() in ("", "none"):
            return None, None
        if self.items:
            return self._list(raw, *self.classroom)
        low, high = self.classroom
        low_open = self.low_open and low == self.low
        value = _whole(raw) if self.whole else _number(raw)
        if value is not None and self._in_range(value, low, high, low_open):
            return value, None
        return None, f"{self.name}={shown(raw)} is not {self._range_text(low, high, low_open)}"

    def parse_flag(self, text: str):
        """A value from the command line (library range); ``ValueError`` says why not. An
        optional setting takes "" or "none" (any case) for off, as its help and a link say."""
        if self.optional and text.strip().lower() in ("", "none"):
            return None
        if self.items:
            value, problem = self._list(text, self.low, self.high)
            if problem:
                raise ValueError(problem)
            return value
        value = _whole(text) if self.whole else _number(text)
        if value is None or (self.low is not None
                             and not self._in_range(value, *self._library_range())):
            raise ValueError(f"{text!r} is not {self._range_text(*self._library_range())}")
        return value

    def options(self) -> list[str]:
        """The words a control offers: the choices this machine can serve (``offered``), else
        every choice."""
        return list(self.offered() if self.offered else self.choices)

    @property
    def empty_hint(self) -> str:
        """What an empty text box of the setting says: ``none`` (an optional setting is then
        off), or an example of a list."""
        if self.optional:
            return "none"
        return f"e.g. {self.example}" if self.example else ""

    def canonical(self, value: object) -> object:
        """A checked value as the library keeps it: a list in its one written form
        ("32, 16,16" is "32,16"); any other value as it is."""
        if self.items:
            return self._list(value, self.low, self.high)[0]
        return value


def _whole(text: str) -> int | None:
    """``"1_000"`` -> 1000; ``None`` for anything but ASCII digits (an optional + sign)."""
    text = text.strip().replace("_", "")
    if text.isascii() and text.lstrip("+").isdigit() and text.count("+") <= 1 and len(text) <= 20:
        return int(text)
    return None


def _integer(value: object) -> int | None:
    """A Python whole number as an int (``True`` and 16.0 are not one); None otherwise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        return None
    return int(value)


def _number(text: str) -> float | None:
    try:
        value = float(text) if len(text) <= 40 else math.nan
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def setting(type_: type, default: object = None, **row) -> object:
    """A `TrainConfig` field with its row of the settings table (``row``: `Setting`'s fields)."""
    return field(default=default, metadata={_ROW: dict(type=type_, default=default, **row)})


@dataclass(frozen=True)
class TrainConfig:
    """Settings of one training run; ``None`` takes the task's default (its preset's value)."""

    task: str = setting(str, "reverse", label="Task", metavar="NAME", choices=tuple(TASKS),
                        help="the toy task (see `stacklab tasks`)")
    seq_len: int | None = setting(int, label="seq_len (T)", metavar="T", low=1, high=4096, classroom=(1, 512),
                                  help="length T of the training sequences (default: the task's)")
    steps: int | None = setting(int, label="Steps", low=1, high=1_000_000,
                                classroom=(1, 20_000), step=50,
                                help="optimizer steps (default: the task's)")
    batch_size: int | None = setting(int, label="Batch size", low=1, high=65_536,
                                     classroom=(1, 1024), step=16,
                                     help="sequences per step (default: the task's)")
    lr: float | None = setting(float, label="Learning rate", low=0.0, high=10.0, low_open=True,
                               classroom=(1e-6, 10.0), step=1e-3,
                               help="AdamW learning rate (default: the task's)")
    weight_decay: float = setting(float, 0.0, label="Weight decay", low=0.0, high=10.0,
                                  classroom=(0.0, 10.0), step=0.01,
                                  help="AdamW weight decay; it pulls every row towards zero, "
                                       "the untrained rows too")
    seed: int = setting(int, 0, label="Seed", metavar="S", low=0, high=2**63 - 1, classroom=(0, 2**31 - 1),
                        help="seeds the parameters, the dropout and the training batches")
    device: str = setting(str, "auto", label="Device", choices=DEVICES, offered=available_devices,
                          help="where to train (auto: cuda, then mps, then cpu)")
    dtype: str = setting(str, "float32", label="Compute dtype", choices=tuple(COMPUTE_DTYPES),
                         page="build", cli=False, help="dtype of the parameters and activations")
    eval_every: int = setting(int, 25, label="Evaluate every", low=1, high=1_000_000, link=False,
                              cli=False, help="steps between held-out evaluations")
    target_accuracy: float | None = setting(
        float, label="Target accuracy", low=0.0, high=1.0, low_open=True, classroom=(0.0, 1.0),
        optional=True, step=0.01,
        help="stop at the first held-out evaluation that reaches this held-out accuracy "
             "(steps is then a ceiling); empty or none: train every step")
    eval_lengths: str | tuple[int, ...] = setting(
        str, "", label="Evaluate at lengths", metavar="LENGTHS", low=1, high=65_536,
        classroom=(1, 2048), items=8, example="16,32,64",
        help="after training, held-out accuracy at each of these sequence lengths, e.g. "
             "16,32,64 (length generalization; a length past a table's max_len is reported "
             "as such)")
    random_positions: int | None = setting(
        int, label="Randomized positions up to", metavar="N", low=1, high=65_536,
        classroom=(1, 4096), optional=True,
        help="train with each batch's positions a sorted random subset of 0..N-1 (Ruoss et "
             "al. 2023), so the positions past T are trained too; empty or none: 0..T-1")
    rope_scaling: str = setting(
        str, "none", label="RoPE scaling at evaluation", choices=SCALINGS,
        help="how rope and xpos stretch their rotations at the eval_lengths: linear "
             "(position interpolation), ntk (base scaling) or yarn")
    rope_factor: float | None = setting(
        float, label="RoPE scaling factor", low=1.0, high=1024.0, classroom=(1.0, 1024.0),
        optional=True, step=0.5,
        help="the stretch of rope_scaling; empty or none: each evaluated length over T")

    def __post_init__(self):
        # a list setting given as Python values is kept as a tuple (a config is hashable);
        # `filled` checks it and writes it as the link does ("16,32")
        for row in _LIST_ROWS:
            value = getattr(self, row)
            if isinstance(value, list):
                object.__setattr__(self, row, tuple(value))

    @property
    def lengths(self) -> tuple[int, ...]:
        """``eval_lengths`` as numbers (of a filled config)."""
        return tuple(int(part) for part in str(self.eval_lengths).split(",") if part.strip())

    def eval_chunk(self, length: int) -> int:
        """Sequences evaluated at once at ``length`` (filled config): a training batch's
        worth of attention scores, which grow as length², and at least one."""
        return max(1, self.batch_size * self.seq_len ** 2 // length ** 2)

    def filled(self) -> "TrainConfig":
        """The config with the task's defaults filled in, every value checked (``E_ARG``)."""
        task = get_task(self.task)
        defaults = task.defaults()
        config = replace(self, **{name: defaults[name] for name in defaults
                                  if getattr(self, name) is None})
        for row in SETTINGS.values():
            value = getattr(config, row.name)
            if value is not None:
                row.check(value)
            if row.items:
                config = replace(config, **{row.name: row.canonical(value)})
        return config


SETTINGS: dict[str, Setting] = {
    f.name: Setting(name=f.name, **f.metadata[_ROW]) for f in fields(TrainConfig)}
_LIST_ROWS = tuple(row.name for row in SETTINGS.values() if row.items)
for _row in SETTINGS.values():  # a row a link carries needs what links and controls use
    assert not _row.link or _row.choices or _row.classroom, f"{_row.name}: no classroom range"
    assert _row.page in ("train", "build"), f"{_row.name}: no page {_row.page!r}"


def keyword_parameters(required: tuple[str, ...] = ("task",)) -> list[inspect.Parameter]:
    """Every setting as a keyword-only parameter, with its type and default, for the
    signature of a function that takes ``**settings`` (``stacklab.train``): what `help()`
    and an editor show is the table itself, so it cannot drift. A setting whose default is
    the task's shows None; one in ``required`` has no default."""
    parameters = []
    for row in SETTINGS.values():
        annotation = row.type | None if row.default is None else row.type
        if row.items:
            annotation = str | tuple[int, ...]
        default = inspect.Parameter.empty if row.name in required else row.default
        parameters.append(inspect.Parameter(row.name, inspect.Parameter.KEYWORD_ONLY,
                                            default=default, annotation=annotation))
    return parameters


def check_keywords(given, extra: tuple[str, ...] = (), required: tuple[str, ...] = ("task",),
                   call: str = "train") -> None:
    """``E_ARG`` for a keyword of ``given`` that is not a setting (nor one of ``extra``),
    with the setting it most likely meant, and for a ``required`` setting left out.

    >>> check_keywords({"task": "shift", "step": 10})
    Traceback (most recent call last):
    ...
    stacklab.core.errors.StackError: E_ARG at input: train() has no setting 'step'; did you mean steps?
    fix: e.g. train(..., steps=10); the settings: task, seq_len, steps, ...
    """
    known = [*SETTINGS, *extra]
    for name in given:
        if name not in known:
            close = closest(name, known)
            example = f"e.g. {call}(..., {close}={given[name]!r})" if close else \
                f"see help(stacklab.{call})"
            raise StackError("E_ARG", f"{call}() has no setting {shown(name)}"
                             + (f"; did you mean {close}?" if close else ""),
                             hint=f"{example}; the settings: {', '.join(list(SETTINGS)[:3])}, ...")
    for name in required:
        if given.get(name) is None:
            raise StackError("E_ARG", f"{call}() needs a {name}",
                             hint=f"e.g. {call}({name}={SETTINGS[name].default!r}); "
                                  f"one of {', '.join(SETTINGS[name].choices)}"
                             if SETTINGS[name].choices else f"set {name}")


def settings_signature(*extra: inspect.Parameter, returns: object = inspect.Signature.empty
                       ) -> inspect.Signature:
    """``(source=None, *, task, seq_len=None, ..., *extra)``: the signature of a function
    that trains ``source`` with ``**settings`` (`keyword_parameters`)."""
    source = inspect.Parameter("source", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None,
                               annotation=str | None)
    return inspect.Signature([source, *keyword_parameters(), *extra], return_annotation=returns)
