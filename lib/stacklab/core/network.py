"""The resolved network: the frozen record (`stacklab.core.resolved`) with its report and
its builder as methods."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .resolved import ResolvedNetwork

if TYPE_CHECKING:  # pragma: no cover
    import pandas
    import torch


@dataclass(frozen=True)
class Network(ResolvedNetwork):
    """A stack resolved for one input shape; build it with `build`.

    ``str(network)`` is the network report; `to_dict`, `dataframe` and
    ``_repr_html_`` give the same content for programs, pandas and notebooks. Its fields,
    `node`, `state_shapes`, `flops` and `activation_elements` come from `ResolvedNetwork`.
    """

    def table(self) -> str:
        """The text report, byte for byte (no trailing newline)."""
        from . import report  # imported where used: the builder's torch loads only when asked

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

    def build(self, seed: int | None = None, device: "str | torch.device | None" = None) -> "torch.nn.Module":
        """A `stacklab.StackModule` (a `torch.nn.Module`) for this network; node names become submodule names.

        With ``seed`` the initial parameters are reproducible (and the same on every device:
        they are drawn on the CPU without touching the global random state).
        """
        from .build import build

        return build(self, seed=seed, device=device)

