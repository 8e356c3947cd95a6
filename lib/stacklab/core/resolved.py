"""The record of a resolved stack: every node's shapes, dtypes and parameters, frozen.

The builder (`stacklab.core.build`) and the report (`stacklab.core.report`) read this
record; `stacklab.core.network.Network` is the same record with the report and the builder
as its methods. So neither the builder nor the report imports `network.py`, and nothing
imports in a circle.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .nodes import Node, Requirement
from .shapes import Shape


@dataclass(frozen=True)
class ResolvedNetwork:
    """The fields of a `stacklab.Network` and what is computed from them alone."""

    source: str
    input_shape: Shape
    output_shape: Shape
    dtype: str
    input_dtype: str
    nodes: tuple[Node, ...]
    requires: tuple[Requirement, ...]
    param_count: int
    param_bytes: int

    def node(self, name: str) -> Node:
        """The node called ``name`` (``KeyError`` if none)."""
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)

    def activation_elements(self, batch: int = 1) -> int:
        """Elements every node's output (and an op's scratch, such as attention's scores)
        holds for one forward pass, with each symbol taken as ``batch``: an estimate of a
        training step's activation memory, computed without allocating anything."""
        total = 0
        for node in self.nodes:
            for _, shape in node.outputs:
                total += math.prod(d if isinstance(d, int) else batch for d in shape)
            scratch = node.spec.scratch
            if scratch is not None:
                total += batch * scratch(node.env)
        return total

    def flops(self, batch: int = 1) -> int:
        """Floating-point operations of one forward pass of ``batch`` items (symbols taken as
        ``batch``): each op's cost per position (`OpSpec.flops`; by default two per
        parameter, as a matrix product costs) times its positions."""
        total = 0
        for node in self.nodes:
            _, shape = node.inputs[0]
            dims = [d if isinstance(d, int) else batch for d in shape]
            port_dtype = node.spec.inputs[0].dtype
            positions = math.prod(dims[:-1] if port_dtype == "compute" else dims)
            cost = node.spec.flops(node.env) if node.spec.flops else 2 * node.param_count
            total += positions * cost
        return total

    def state_shapes(self) -> dict[str, tuple[int, ...]]:
        """Every parameter's state_dict key and shape: ``{"n1.weight": (32, 16), ...}``."""
        return {f"{node.name}.{key}": shape for node in self.nodes for key, shape in node.params}
