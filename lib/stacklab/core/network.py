"""The resolved network: a frozen record of every node's shapes, dtypes and parameters."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .nodes import Node, Requirement
from .shapes import Shape

if TYPE_CHECKING:  # pragma: no cover
    import pandas
    import torch



@dataclass(frozen=True)
class Network:
    """A stack resolved for one input shape; build it with `build`.

    ``str(network)`` is the network report; `to_dict`, `dataframe` and
    ``_repr_html_`` give the same content for programs, pandas and notebooks.
    """

    source: str
    input_shape: Shape
    output_shape: Shape
    dtype: str
    input_dtype: str
    nodes: tuple[Node, ...]
    requires: tuple[Requirement, ...]
    param_count: int
    param_bytes: int

    def table(self) -> str:
        """The text report, byte for byte (no trailing newline)."""
        from . import report  # the report and the builder read a Network: imported where used

        return report.network_table(self)

    def __str__(self) -> str:
        return self.table()

    def to_dict(self) -> dict:
        """A JSON-able description of the network."""
        from . import report

        return report.network_dict(self)

    def dataframe(self) -> "pandas.DataFrame":
        """The report's rows as a pandas DataFrame (plus each node's parameter count)."""
        from . import report

        return report.network_dataframe(self)

    def _repr_html_(self) -> str:
        from . import report

        return report.network_html(self)

    def dot(self) -> str:
        """The network as a Graphviz graph (nodes, and the shapes on the edges)."""
        from . import report

        return report.network_dot(self)

    def node(self, name: str) -> Node:
        """The node called ``name`` (``KeyError`` if none)."""
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)

    def build(self, seed: int | None = None, device: "str | torch.device | None" = None) -> "torch.nn.Module":
        """A `stacklab.StackModule` (a `torch.nn.Module`) for this network; node names become submodule names.

        With ``seed`` the initial parameters are reproducible (and the same on every device:
        they are drawn on the CPU without touching the global random state).
        """
        from .build import build

        return build(self, seed=seed, device=device)

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
