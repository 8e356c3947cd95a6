"""add: the sum of two earlier nodes, the join of a residual connection."""

from __future__ import annotations

import torch
from torch import nn

from ..core.spec import REFERENCE, Arg, ErrorExample, Example, OpSpec, input_port, output_port, register


class Add(nn.Module):
    """``out = a + b`` elementwise; the resolver has checked that the shapes are equal."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:  # (..., D) twice
        return a + b


# A pre-LN transformer block, attention and MLP each around a residual stream.
PRE_LN_BLOCK = """tok = embedding(32, 32)
x0 = pos_embed(64)
layer_norm()
h1 = attention(2, causal=true, residual=false)   # attn(ln(x0)) alone
x1 = add(x0, h1)                                 # pre-LN: x0 + attn(ln(x0))
layer_norm()
linear(128)
gelu()
m1 = linear(32)
x2 = add(x1, m1)                                 # x1 + mlp(ln(x1))
linear(32)                                       # the network's output is the last line's"""

SPEC = register(OpSpec(
    name="add",
    version=1,
    category="merge",
    summary="Add the outputs of two earlier nodes: the join of a residual connection.",
    description=(
        "Reads two nodes by name, not the line above, and adds them elementwise:\n\n"
        "    out = a + b\n\n"
        "a and b are references: bare names of nodes on earlier lines, by the name given "
        "with `name = ` or by the default name n0, n1, ... Their shapes must be equal "
        "(E_SHAPE names both otherwise). No parameters. With attention(..., residual=false) "
        "it writes a pre-LN block: `x1 = add(x0, h1)` is x0 + attn(ln(x0)). Every node's "
        "output must be read by a later line (the line below, or a reference), except the "
        "last line's, which is the network's output."
    ),
    inputs=(input_port("a[..., D]"), input_port("b[..., D]")),
    outputs=(output_port("out[..., D]"),),
    relation="out == a + b elementwise; a.shape == b.shape",
    args=(
        Arg("a", REFERENCE, "The node whose output is the first term (e.g. the residual "
            "stream)."),
        Arg("b", REFERENCE, "The node whose output is added to it (e.g. a branch's output)."),
    ),
    flops=lambda env: env["D"],  # one add per feature
    module=lambda env, dtype: Add(),
    torch_code=lambda env: "Add()",
    torch_source=(Add,),
    examples=(
        Example("A residual connection around an MLP: x + linear(gelu(linear(x))).",
                "x = linear(16)\nlinear(64)\ngelu()\nm = linear(16)\nadd(x, m)", ("B", 12, 8)),
        Example("A pre-LN transformer block: the report gains an `inputs` column "
                "naming what each row reads.", PRE_LN_BLOCK, ("B", 64), "int64"),
    ),
    error_examples=(
        ErrorExample("add(x0, x0)", ("B", 12, 16), "E_ARG", r"no node is called x0"),
        ErrorExample("add(1, 2)", ("B", 12, 16), "E_ARG", r"names the node it reads"),
    ),
))
