"""An experiment as a link: every setting of the app, to and from URL query parameters.

>>> exp, problems = from_query({"stack": "pos_embed(8)", "seq_len": "12", "steps": "many"})
>>> exp.seq_len, exp.steps, problems
(12, 400, ["steps='many' is not a whole number from 1 to 20,000; using 400"])
>>> to_query(exp)["seq_len"]
'12'

Bad values never raise: each is reported in words and replaced by its default, so a
mangled classroom link still opens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Mapping

from ..core.language import MAX_SOURCE_CHARS
from ..core.shapes import COMPUTE_DTYPES, DTYPES
from ..lab.tasks import TASKS

# What a link (and the app's controls) accept: a classroom server's ranges, tighter than
# the library's. A value outside is reported and replaced by its default, never clamped.
APP_LIMITS = {"seq_len": (1, 512), "steps": (1, 20_000), "batch_size": (1, 1024),
              "seed": (0, 2**31 - 1), "lr": (1e-6, 10.0), "weight_decay": (0.0, 10.0)}
DEVICES = ("auto", "cpu", "cuda", "mps")

REFERENCE_STEM = "embedding(500, 16)\npos_embed(32)\nlinear(4)"
HIDEABLE = ("stack", "input", "input_dtype", "dtype", "task", "seq_len", "steps", "batch_size",
            "lr", "weight_decay", "seed", "device", "presets", "layers")


@dataclass(frozen=True)
class Experiment:
    """Everything a link pins: the stack, its input, and the training settings."""

    stack: str = TASKS["reverse"].preset(16)  # so that Train works from the first visit
    input: str = "B,16"
    input_dtype: str = "int64"
    dtype: str = "float32"
    task: str = "reverse"
    seq_len: int = 16
    steps: int = 400
    batch_size: int = 64
    lr: float = 3e-3
    weight_decay: float = 0.0
    seed: int = 0
    device: str = "auto"
    hide: tuple[str, ...] = ()

    def with_task_preset(self, task: str | None = None, seq_len: int | None = None) -> "Experiment":
        """This experiment switched to ``task``'s preset stack and default settings."""
        spec = TASKS[task or self.task]
        T = seq_len or spec.default_seq_len
        return replace(self, task=spec.name, seq_len=T, stack=spec.preset(T), input=f"B,{T}",
                       input_dtype="int64", steps=spec.steps, batch_size=spec.batch_size,
                       lr=spec.lr)


DEFAULT = Experiment()


def presets() -> dict[str, dict[str, object]]:
    """Named starting points for the Build page: the reference page's two examples and
    every task's preset. Each maps experiment fields to their new values."""
    found: dict[str, dict[str, object]] = {
        "Reference: the transformer input stem": {
            "stack": REFERENCE_STEM, "input": "B,12", "input_dtype": "int64"},
        "Reference: pos_embed(64), linear(8) on [B, 6, 4]": {
            "stack": "pos_embed(64)\nlinear(8)", "input": "B,6,4", "input_dtype": "float32"},
    }
    for task in TASKS.values():
        preset = DEFAULT.with_task_preset(task.name)
        found[f"Task {task.name}: {task.description}"] = {
            name: getattr(preset, name) for name in ("stack", "input", "input_dtype", "task",
                                                     "seq_len", "steps", "batch_size", "lr")}
    return found


def _text(name: str, limit: int):
    def parse(raw: str):
        if len(raw) > limit:
            return None, f"{name} is {len(raw):,} characters long; at most {limit:,}"
        return raw, None
    return parse


def _choice(name: str, options):
    def parse(raw: str):
        if raw in options:
            return raw, None
        return None, f"{name}={raw!r} is not one of {', '.join(options)}"
    return parse


def _int(name: str):
    low, high = APP_LIMITS[name]

    def parse(raw: str):
        text = raw.strip().replace("_", "")
        if text.isascii() and text.lstrip("+").isdigit() and len(text) <= 20 and low <= int(text) <= high:
            return int(text), None
        return None, f"{name}={raw!r} is not a whole number from {low:,} to {high:,}"
    return parse


def _float(name: str):
    low, high = APP_LIMITS[name]

    def parse(raw: str):
        try:
            value = float(raw) if len(raw) <= 40 else math.nan
        except ValueError:
            value = math.nan
        if math.isfinite(value) and low <= value <= high:
            return value, None
        return None, f"{name}={raw!r} is not a number from {low} to {high}"
    return parse


def _hide(raw: str):
    names = tuple(dict.fromkeys(n.strip() for n in raw.split(",") if n.strip()))
    unknown = [n for n in names if n not in HIDEABLE]
    if unknown:
        return (tuple(n for n in names if n in HIDEABLE),
                f"hide: unknown control(s) {', '.join(unknown[:5])}; known: {', '.join(HIDEABLE)}")
    return names, None


PARSERS = {
    "stack": _text("stack", MAX_SOURCE_CHARS),
    "input": _text("input", 200),
    "input_dtype": _choice("input_dtype", list(DTYPES)),
    "dtype": _choice("dtype", list(COMPUTE_DTYPES)),
    "task": _choice("task", list(TASKS)),
    "seq_len": _int("seq_len"),
    "steps": _int("steps"),
    "batch_size": _int("batch_size"),
    "lr": _float("lr"),
    "weight_decay": _float("weight_decay"),
    "seed": _int("seed"),
    "device": _choice("device", list(DEVICES)),
    "hide": _hide,
}


def from_query(params: Mapping[str, object]) -> tuple[Experiment, list[str]]:
    """The experiment a link describes, and a message for every value that was refused.

    ``params`` maps names to strings (or lists of strings, the last one wins). A link
    that names a task but no stack gets that task's preset.
    """
    values: dict[str, object] = {}
    refused: list[tuple[str, str, bool]] = []  # (field, problem, was the value dropped)
    for name, parse in PARSERS.items():
        raw = params.get(name)
        if isinstance(raw, (list, tuple)):
            raw = raw[-1] if raw else None
        if raw is None:
            continue
        value, problem = parse(str(raw))
        if value is not None:
            values[name] = value
        if problem:
            refused.append((name, problem, value is None))
    experiment = DEFAULT
    if "task" in values and "stack" not in values:
        experiment = experiment.with_task_preset(values["task"], values.get("seq_len"))
    experiment = replace(experiment, **values)
    problems = [problem + (f"; using {getattr(experiment, name)!r}" if dropped else "")
                for name, problem, dropped in refused]
    return experiment, problems


def to_query(experiment: Experiment) -> dict[str, str]:
    """The query parameters of a link that reproduces ``experiment``."""
    query = {}
    for field in fields(Experiment):
        value = getattr(experiment, field.name)
        if field.name == "hide":
            if value:
                query["hide"] = ",".join(value)
        elif isinstance(value, float):
            query[field.name] = repr(value)
        else:
            query[field.name] = str(value)
    return query
