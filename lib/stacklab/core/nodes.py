"""The nodes of a resolved network: one per op call, and the requirements kept for run time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from .language import Call
from .shapes import Shape, format_shape
from .spec import OpSpec, constraint_text


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
    # The node each input port reads, in the order of ``inputs``; None: the network input.
    # An op with reference arguments reads the nodes they name, any other the line above.
    reads: tuple[str | None, ...] = ()

    @property
    def op(self) -> str:
        return self.spec.name

    @property
    def call_text(self) -> str:
        """The call with every argument spelled out: ``linear(4, bias=true)`` (a quiet
        argument only when it differs from its default, see `Arg.quiet`)."""
        parts = [a.format(self.args[a.name]) if a.positional else
                 f"{a.name}={a.format(self.args[a.name])}" for a in self.spec.args
                 if not (a.quiet and self.args[a.name] == a.default)]
        return f"{self.op}({', '.join(parts)})"

    @property
    def reads_text(self) -> str:
        """What the node reads, for the report's ``inputs`` column: ``input`` or ``x0, h1``."""
        return ", ".join("input" if name is None else name for name in self.reads)

    def input_cell(self) -> str:
        return ", ".join(f"{port}={format_shape(shape)}" for port, shape in self.inputs)

    def output_cell(self) -> str:
        return ", ".join(f"{port}={format_shape(shape)}" for port, shape in self.outputs)


def is_chain(nodes) -> bool:
    """Whether every node reads the line above (the first: the network input); a network
    that is not a chain branches, and its report gains an ``inputs`` column."""
    above = None
    for node in nodes:
        if node.reads != (above,):
            return False
        above = node.name
    return True
