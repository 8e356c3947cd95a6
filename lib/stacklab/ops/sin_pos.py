"""sin_pos: the fixed sinusoidal position encoding of the original transformer."""

from __future__ import annotations

import math

import torch
from torch import nn

from ..core.errors import StackError
from ..core.spec import Arg, Constraint, ErrorExample, Example, OpSpec, input_port, output_port, register


def sinusoidal_table(length: int, dim: int, *, dtype: torch.dtype = torch.float32,
                     device: torch.device | str | None = None) -> torch.Tensor:
    """The ``[length, dim]`` table ``sin(t / 10000^(2i/dim))`` (even cols), ``cos`` (odd cols)."""
    position = torch.arange(length, dtype=torch.float32, device=device)[:, None]  # (T, 1)
    inv_freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32, device=device)
                         * (-math.log(10000.0) / dim))  # (ceil(D/2),)
    angle = position * inv_freq  # (T, ceil(D/2))
    table = torch.empty(length, dim, dtype=torch.float32, device=device)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle[:, : dim // 2])
    return table.to(dtype)


class SinPos(nn.Module):
    """``out = x + table[:T]`` with a fixed sinusoidal table; no parameters.

    Only the ``T`` rows in use are computed (and cached), so a huge ``max_len`` costs nothing.
    """

    def __init__(self, max_len: int):
        super().__init__()
        self.max_len = max_len
        self.positions: torch.Tensor | None = None  # (T,) rows to use instead of 0..T-1
        self._table: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, D) -> (B, T, D)
        T, D = x.shape[-2], x.shape[-1]
        if T > self.max_len:
            raise StackError(
                "E_CONSTRAINT", f"the sequence has T={T} positions but max_len={self.max_len}",
                op="sin_pos", hint=f"use sin_pos({T}) or more, or feed shorter sequences")
        if self.positions is not None and self.positions.shape[0] == T:  # randomized positions
            rows = int(self.positions.max()) + 1
            return x + sinusoidal_table(rows, D, dtype=x.dtype, device=x.device)[
                self.positions.to(x.device)]
        table = self._table
        if table is None or table.shape != (T, D) or table.dtype != x.dtype or table.device != x.device:
            table = self._table = sinusoidal_table(T, D, dtype=x.dtype, device=x.device)
        return x + table  # (T, D) broadcasts over B

    def extra_repr(self) -> str:
        return f"max_len={self.max_len}"


SPEC = register(OpSpec(
    name="sin_pos",
    version=1,
    category="sequence",
    summary="Add the fixed sinusoidal position encoding (no parameters).",
    description=(
        "The position encoding of the original transformer, added to the sequence:\n\n"
        "    out[b, t, 2i]   = x[b, t, 2i]   + sin(t / 10000^(2i / D))\n"
        "    out[b, t, 2i+1] = x[b, t, 2i+1] + cos(t / 10000^(2i / D))\n\n"
        "Nothing is learned, so it is the baseline to compare a learned pos_embed with. "
        "max_len only bounds T (T <= max_len); the rows in use are computed on the fly."
    ),
    inputs=(input_port("x[B, T, D]"),),
    outputs=(output_port("out[B, T, D]"),),
    relation="out == x elementwise; T <= max_len",
    args=(Arg("max_len", int, "The longest sequence this layer accepts.", minimum=1,
              maximum=2_147_483_647),),
    constraints=(Constraint(
        "T", "<=", "max_len",
        message="the sequence has T={T} positions but sin_pos({max_len}) allows only {max_len}",
        hint="use sin_pos({T}) or more, or a shorter input",
    ),),
    encodes_positions=lambda args: "sin_pos",
    module=lambda env, dtype: SinPos(env["max_len"]),
    torch_code=lambda env: f"SinPos({env['max_len']})",
    torch_source=(sinusoidal_table, SinPos),
    examples=(Example("The fixed encoding adds no parameters.",
                      "embedding(500, 16)\nsin_pos(32)\nlinear(4)", ("B", 12), "int64"),),
    error_examples=(ErrorExample("sin_pos(4)", ("B", 12, 16), "E_CONSTRAINT", r"T=12"),),
))
