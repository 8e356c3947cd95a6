"""pos_embed: a learned absolute position table added to a sequence."""

from __future__ import annotations

import torch
from torch import nn

from ..core.errors import StackError
from ..core.shapes import COMPUTE_DTYPES
from ..core.spec import Arg, Constraint, ErrorExample, Example, OpSpec, input_port, output_port, register

class PosEmbed(nn.Module):
    """``out[b, t, :] = x[b, t, :] + weight[t, :]`` for a ``[max_len, D]`` table.

    The add broadcasts ``weight[:T]`` over the batch: no index tensor, no expand, no
    gather. Rows ``>= T`` take no part, so their gradient is exactly zero.
    """

    init_std = 0.02  # the transformer convention for position tables

    def __init__(self, max_len: int, dim: int, dtype: torch.dtype = torch.float32):
        super().__init__()
        self.max_len = max_len
        self.positions: torch.Tensor | None = None  # (T,) rows to use instead of 0..T-1
        self.weight = nn.Parameter(torch.empty(max_len, dim, dtype=dtype))
        nn.init.normal_(self.weight, mean=0.0, std=self.init_std)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, D) -> (B, T, D)
        T = x.shape[-2]
        if T > self.max_len:
            raise StackError(
                "E_CONSTRAINT",
                f"the sequence has T={T} positions but the table holds max_len={self.max_len}",
                op="pos_embed",
                hint=f"use pos_embed({T}) or more, or feed sequences of at most {self.max_len}",
            )
        rows = self.weight[:T]  # (T, D): a view, so rows >= T get no gradient at all
        if self.positions is not None and self.positions.shape[0] == T:
            rows = self.weight[self.positions.to(self.weight.device)]  # randomized positions
        if rows.dtype != x.dtype:
            rows = rows.to(x.dtype)
        return x + rows  # (T, D) broadcasts over B

    def extra_repr(self) -> str:
        return f"max_len={self.max_len}, dim={self.weight.shape[1]}"


SPEC = register(OpSpec(
    name="pos_embed",
    version=1,
    category="sequence",
    summary="Add a learned position vector to every position of a sequence.",
    description=(
        "A learned absolute position encoding, added to the sequence:\n\n"
        "    out[b, t, :] = x[b, t, :] + weight[t, :]\n\n"
        "x is a [B, T, D] sequence of T positions with D features; the same position vector "
        "is added to every example in the batch. The parameter weight has shape "
        "[max_len, D] and is initialised from a normal distribution with standard deviation "
        "0.02, the convention for transformer position tables. Only the first T rows take "
        "part in the forward pass, so only those rows receive a gradient; the other rows "
        "are kept so that the same module can encode longer sequences after a re-resolve.\n\n"
        "max_len is a capacity, not a shape: the resolver only requires T <= max_len and "
        "reports E_CONSTRAINT when a resolved sequence is longer than the table. Train and "
        "eval behave identically, and the addition is performed in the input dtype."
    ),
    inputs=(input_port("x[B, T, D]"),),
    outputs=(output_port("out[B, T, D]"),),
    relation="out == x elementwise; T <= max_len",
    args=(Arg("max_len", int, "Rows in the position table; the longest sequence this "
              "layer can encode.", minimum=1, maximum=2_147_483_647),),
    static=("D",),
    constraints=(Constraint(
        "T", "<=", "max_len",
        message="the sequence has T={T} positions but pos_embed({max_len}) holds only {max_len}",
        hint="use pos_embed({T}) or more, or a shorter input",
    ),),
    params=lambda env: {"weight": (env["max_len"], env["D"])},
    role="position_table",
    flops=lambda env: env["D"],  # one add per feature
    torch_code=lambda env: f"PosEmbed({env['max_len']}, {env['D']})",
    torch_source=(PosEmbed,),
    encodes_positions=lambda args: "pos_embed",
    module=lambda env, dtype: PosEmbed(env["max_len"], env["D"], COMPUTE_DTYPES[dtype]),
    examples=(
        Example("Positions 0..5 of the table are added; rows 6..63 stay unused.",
                "pos_embed(64)\nlinear(8)", ("B", 6, 4)),
        Example("The usual transformer input stem: token embeddings plus learned positions.",
                "embedding(500, 16)\npos_embed(32)\nlinear(4)", ("B", 12), "int64"),
        Example("With a symbolic length the requirement T <= 32 is kept and checked at run time.",
                "pos_embed(32)", ("B", "T", 16)),
    ),
    error_examples=(
        ErrorExample("pos_embed(8)", ("B", 12, 16), "E_CONSTRAINT", r"T=12"),
        ErrorExample("pos_embed(0)", ("B", 12, 16), "E_ARG", r">= 1"),
        ErrorExample("pos_embed(32)", ("B", 16), "E_SHAPE", r"x\[B, T, D\]"),
        ErrorExample("pos_embed(32)", ("B", 12), "E_DTYPE", r"int64", input_dtype="int64"),
        ErrorExample("pos_embed(2147483647)", ("B", 12, 64), "E_BUDGET", r"budget"),
    ),
))
