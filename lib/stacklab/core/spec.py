"""Op specs: each op declared once, as data, and registered in the catalog.

The resolver, the builder, the CLI, the docs and the app's forms all read these specs;
the tests loop over every one of them (in the manner of PyTorch's OpInfo). An op lives in
one file under ``stacklab/ops/``: its torch module next to its `OpSpec`.
"""

from __future__ import annotations

import functools
import importlib
import math
import pkgutil
from dataclasses import dataclass, field
from typing import Callable, Mapping

from torch import nn

from .language import Reference
from .shapes import Pattern


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED = _Required()
# The type of an argument that reads another node: written as a bare name (``add(x0, h1)``),
# bound to that node's name. Ops with such arguments read those nodes, not the line above.
REFERENCE = Reference
_TYPE_NAMES = {int: "int", float: "float", bool: "bool", str: "str", REFERENCE: "reference"}


@dataclass(frozen=True)
class Arg:
    """One argument of an op: type, default, range and what it means."""

    name: str
    type: type
    description: str
    default: object = REQUIRED
    positional: bool = True  # may be passed by position (always also by keyword)
    minimum: float | None = None
    maximum: float | None = None
    min_inclusive: bool = True
    max_inclusive: bool = True
    choices: tuple[str, ...] = ()  # for a str argument: the values it may take
    # An argument added to an op after stacks were written with it: `Node.call_text` (the
    # text run keys hash) leaves it out at its default, so those stacks keep their keys.
    quiet: bool = False

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    @property
    def is_reference(self) -> bool:
        """Whether this argument names a node to read (type `REFERENCE`)."""
        return self.type is REFERENCE

    def format(self, value: object) -> str:
        """``value`` as it is written in a call: a reference as the bare node name."""
        return str(value) if self.is_reference else format_value(value)

    @property
    def type_name(self) -> str:
        return _TYPE_NAMES[self.type]

    @property
    def constraints(self) -> str:
        """The range as text: ``>= 1; <= 2147483647`` (or ``one of "none", "rope"``)."""
        if self.is_reference:
            return "the name of a node on an earlier line"
        if self.choices:
            return "one of " + ", ".join(format_value(c) for c in self.choices)
        parts = []
        if self.minimum is not None:
            parts.append(f"{'>=' if self.min_inclusive else '>'} {_number(self.minimum)}")
        if self.maximum is not None:
            parts.append(f"{'<=' if self.max_inclusive else '<'} {_number(self.maximum)}")
        return "; ".join(parts)

    @property
    def default_text(self) -> str:
        return "required" if self.required else format_value(self.default)

    def problem(self, value: object) -> str | None:
        """Why ``value`` is not acceptable, or ``None``. ``value`` already has the right type."""
        if isinstance(value, float) and not math.isfinite(value):
            return f"{self.name} must be a finite number"
        if self.choices and value not in self.choices:
            return f"{self.name} must be {self.constraints}"
        low, high = self.minimum, self.maximum
        if low is not None and (value < low or (value == low and not self.min_inclusive)):
            return f"{self.name} must be {self.constraints}"
        if high is not None and (value > high or (value == high and not self.max_inclusive)):
            return f"{self.name} must be {self.constraints}"
        return None


@dataclass(frozen=True)
class Port:
    """A named input or output with its shape pattern and dtype class."""

    pattern: Pattern
    direction: str  # "input" or "output"
    dtype: str = "compute"  # "compute" (floating) or "index" (integer)

    @property
    def name(self) -> str:
        return self.pattern.port


def input_port(pattern: str, dtype: str = "compute") -> Port:
    return Port(Pattern.parse(pattern), "input", dtype)


def output_port(pattern: str, dtype: str = "compute") -> Port:
    return Port(Pattern.parse(pattern), "output", dtype)


@dataclass(frozen=True)
class Constraint:
    """A relation between a pattern dim and an argument: ``T <= max_len`` or ``D % heads == 0``.

    ``message`` and ``hint`` are format strings over the dims and arguments; a ``<=``
    constraint on a symbolic dim becomes a requirement the built model checks at run time.
    """

    dim: str
    operator: str  # "<=" or "divides"
    arg: str
    message: str
    hint: str
    factor: int = 1  # the bound is factor * arg: "D % (2·heads) == 0" for a RoPE head width
    when: Callable[[Mapping[str, object]], bool] | None = None  # applies only if (args) holds
    when_text: str = ""  # what ``when`` asks, in the stack language: 'position="rope"'

    @property
    def text(self) -> str:
        bound = self.arg if self.factor == 1 else f"({self.factor}·{self.arg})"
        text = constraint_text(self.dim, self.operator, bound)
        return f"{text} when {self.when_text}" if self.when_text else text

    def bound(self, args: Mapping[str, object]) -> int:
        return self.factor * args[self.arg]

    def applies(self, args: Mapping[str, object]) -> bool:
        return self.when is None or self.when(args)

    def holds(self, dim: int, bound: int) -> bool:
        return dim <= bound if self.operator == "<=" else dim % bound == 0


@dataclass(frozen=True)
class Example:
    """A stack and an input for the docs; its output is rendered by the resolver."""

    caption: str
    stack: str
    input_shape: tuple
    input_dtype: str = "float32"


@dataclass(frozen=True)
class ErrorExample:
    """A stack and an input that must fail with ``code`` (and a message matching ``match``)."""

    stack: str
    input_shape: tuple
    code: str
    match: str = ""
    input_dtype: str = "float32"


# What a layer is to the lab, beyond its shapes: the trainer, the recorders and the analysis
# find layers by the role their op declares, never by their class.
ROLES = {
    "position_table": "a learned [max_len, D] table of position rows: the module has "
                      "`weight` (the table) and `max_len`",
    "attention": "self-attention: the module has `weights(x)`, its softmax attention "
                 "weights [B, heads, T, T] for an input x [B, T, D]",
}


@dataclass(frozen=True)
class OpSpec:
    """Everything stacklab knows about one op."""

    name: str
    version: int
    category: str
    summary: str  # one line
    description: str  # paragraphs, for the docs
    inputs: tuple[Port, ...]
    outputs: tuple[Port, ...]
    relation: str
    args: tuple[Arg, ...]
    module: Callable[[Mapping[str, object], str], nn.Module]  # (env, dtype) -> module
    params: Callable[[Mapping[str, object]], dict[str, tuple[int, ...]]] = lambda env: {}
    static: tuple[str, ...] = ()  # dims that must be known sizes (parameters depend on them)
    dim_args: Mapping[str, str] = field(default_factory=dict)  # output dim -> argument
    constraints: tuple[Constraint, ...] = ()
    examples: tuple[Example, ...] = ()
    error_examples: tuple[ErrorExample, ...] = ()
    # Extra elements per batch item a forward pass keeps besides the output (for the
    # activation estimate of `Network.activation_elements`).
    scratch: Callable[[Mapping[str, object]], int] | None = None
    role: str | None = None  # one of `ROLES`, or None
    # The position encoding a node of this op brings, named as the lab compares encodings
    # ("pos_embed", "sin_pos", "rope"), from its arguments; None: it marks no positions.
    encodes_positions: Callable[[Mapping[str, object]], str | None] | None = None
    merges_positions: bool = False  # the output no longer has a position axis (a pooling)
    # Floating-point operations per position of one forward pass (for the run's FLOP
    # budget); None: two per parameter, as a matrix product costs.
    flops: Callable[[Mapping[str, object]], int] | None = None
    # Plain PyTorch for `stacklab.core.export`: a constructor expression over the env, and
    # the classes and functions it needs, whose source the export copies (inspect.getsource).
    torch_code: Callable[[Mapping[str, object]], str] | None = None
    torch_source: tuple[object, ...] = ()

    @property
    def identity(self) -> str:
        return f"{self.name}@{self.version}"

    @property
    def signature(self) -> str:
        """``linear(out, bias=true)``."""
        parts = [a.name if a.required else f"{a.name}={a.default_text}" for a in self.args]
        return f"{self.name}({', '.join(parts)})"

    @property
    def shape_text(self) -> str:
        """``x[B, T, D] -> out[B, T, D]``."""
        ins = ", ".join(str(p.pattern) for p in self.inputs)
        outs = ", ".join(str(p.pattern) for p in self.outputs)
        return f"{ins} -> {outs}"

    def arg(self, name: str) -> Arg | None:
        return next((a for a in self.args if a.name == name), None)

    @functools.cached_property  # asked for each line of every resolve
    def references(self) -> tuple[Arg, ...]:
        """The arguments that name the nodes this op reads (one input port each, in order);
        empty for an op that reads the line above."""
        return tuple(arg for arg in self.args if arg.is_reference)

    def takes_reference(self, key: str | None, position: int) -> bool:
        """Whether the argument ``key`` (or, for None, the ``position``-th positional one)
        is a reference."""
        if key is not None:
            arg = self.arg(key)
        else:
            positional = [a for a in self.args if a.positional]
            arg = positional[position] if position < len(positional) else None
        return arg is not None and arg.is_reference


def constraint_text(dim: str, operator: str, bound: object) -> str:
    """``T <= max_len`` or ``D % heads == 0``; the same form with a number for a requirement."""
    return f"{dim} <= {bound}" if operator == "<=" else f"{dim} % {bound} == 0"


def format_value(value: object) -> str:
    """A value as it is written in the stack language."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, float):
        text = repr(value)
        if "e" in text:  # 1e-05 -> 1e-5, as a person writes it
            mantissa, exponent = text.split("e")
            text = f"{mantissa}e{int(exponent)}"
        return text
    return str(value)


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(value)


# The catalog is a registry: each module of the `stacklab.ops` package calls `register` once
# for its op. `catalog()` loads that package by name on first use: the one place where core
# reaches the layer above it, as a plugin point, never through an import statement.
OPS_PACKAGE = "stacklab.ops"
_CATALOG: dict[str, OpSpec] = {}
_loaded = False


def register(spec: OpSpec) -> OpSpec:
    """Add an op to the catalog (each op module calls this once for its `SPEC`)."""
    assert spec.name not in _CATALOG, f"op {spec.name} declared twice"
    assert spec.role is None or spec.role in ROLES, f"op {spec.name}: unknown role {spec.role!r}"
    _CATALOG[spec.name] = spec
    return spec


def catalog() -> dict[str, OpSpec]:
    """Every registered op by name, in alphabetical order (ops in ``stacklab/ops`` load on first use)."""
    global _loaded
    if not _loaded:
        ops = importlib.import_module(OPS_PACKAGE)  # by name: ops sit above core, not below
        for info in sorted(pkgutil.iter_modules(ops.__path__), key=lambda m: m.name):
            importlib.import_module(f"{ops.__name__}.{info.name}")
        ordered = sorted(_CATALOG.items())
        _CATALOG.clear()
        _CATALOG.update(ordered)
        _loaded = True
    return _CATALOG


def get_op(name: str) -> OpSpec | None:
    return catalog().get(name)
