"""layer_norm: normalise the features of every position."""

from __future__ import annotations

from torch import nn

from ..core.shapes import COMPUTE_DTYPES
from ..core.spec import Arg, ErrorExample, Example, OpSpec, input_port, output_port, register

SPEC = register(OpSpec(
    name="layer_norm",
    version=1,
    category="normalization",
    summary="Normalise each position's features to zero mean and unit variance, then scale and shift.",
    description=(
        "Layer normalisation over the last dim, with a learned scale and shift:\n\n"
        "    out = (x - mean(x)) / sqrt(var(x) + eps) * weight + bias\n\n"
        "mean and var are taken over the D features of each position. weight starts at 1 "
        "and bias at 0; together they are 2·D parameters."
    ),
    inputs=(input_port("x[..., D]"),),
    outputs=(output_port("out[..., D]"),),
    relation="out.shape == x.shape",
    args=(Arg("eps", float, "Added to the variance to avoid dividing by zero.",
              default=1e-5, minimum=0, min_inclusive=False, maximum=1),),
    static=("D",),
    params=lambda env: {"weight": (env["D"],), "bias": (env["D"],)},
    torch_code=lambda env: f"nn.LayerNorm({env['D']}, eps={env['eps']!r})",
    module=lambda env, dtype: nn.LayerNorm(env["D"], eps=env["eps"], dtype=COMPUTE_DTYPES[dtype]),
    examples=(Example("Scale and shift add 2 x 16 = 32 parameters.", "layer_norm()",
                      ("B", 12, 16)),),
    error_examples=(
        ErrorExample("layer_norm(0)", ("B", 12, 16), "E_ARG", r"> 0"),
        ErrorExample('layer_norm("small")', ("B", 12, 16), "E_ARG", r"float"),
    ),
))
