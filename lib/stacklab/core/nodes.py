"""The nodes of a resolved network: one per op call, and the requirements kept for run time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from .language import Call
from .shapes import Shape, format_shape
from .spec import OpSpec, constraint_text, format_value


@dataclass(frozen=True)
class Requirement:
    """A constraint on a symbolic dim, kept for run time: ``T <= 32`` or ``T % 4 == 0``."""

    dim: str
    operator: str  # "<=" or "divides"
    bound: int
    node: str

    @property
    def text(self) -> str:
        return constraint_text(self.dim, self.operator, self.bound)


@dataclass(frozen=True)
class Node:
    """One resolved op call."""

    index: int
    name: str
    spec: OpSpec
    args: Mapping[str, object]
    call: Call
    env: Mapping[str, object]  # pattern dims and arguments, as the spec's functions see them
    inputs: tuple[tuple[str, Shape], ...]
    outputs: tuple[tuple[str, Shape], ...]
    input_dtype: str
    output_dtype: str
    params: tuple[tuple[str, tuple[int, ...]], ...]  # parameter name -> shape
    param_count: int

    @property
    def op(self) -> str:
        return self.spec.name

    @property
    def call_text(self) -> str:
        """The call with every argument spelled out: ``linear(4, bias=true)``."""
        parts = [format_value(self.args[a.name]) if a.positional else
                 f"{a.name}={format_value(self.args[a.name])}" for a in self.spec.args]
        return f"{self.op}({', '.join(parts)})"

    def input_cell(self) -> str:
        return ", ".join(f"{port}={format_shape(shape)}" for port, shape in self.inputs)

    def output_cell(self) -> str:
        return ", ".join(f"{port}={format_shape(shape)}" for port, shape in self.outputs)
