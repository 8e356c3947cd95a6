"""mean_pool: average a sequence over its positions."""

from __future__ import annotations

import torch
from torch import nn

from ..core.spec import ErrorExample, Example, OpSpec, input_port, output_port, register


class MeanPool(nn.Module):
    """``out[b, :] = mean over t of x[b, t, :]``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, D) -> (B, D)
        return x.mean(dim=-2)


SPEC = register(OpSpec(
    name="mean_pool",
    version=1,
    category="sequence",
    summary="Average over the positions of a sequence: one vector per example.",
    description=(
        "Averages the T positions of each sequence:\n\n"
        "    out[b, :] = (x[b, 0, :] + ... + x[b, T-1, :]) / T\n\n"
        "The result no longer depends on the order of the positions, unless position "
        "information was added before (pos_embed, sin_pos) and mixed in by later layers. "
        "No parameters."
    ),
    inputs=(input_port("x[B, T, D]"),),
    outputs=(output_port("out[B, D]"),),
    relation="out[b, :] == mean(x[b, :, :], over T)",
    args=(),
    merges_positions=True,
    module=lambda env, dtype: MeanPool(),
    torch_code=lambda env: "MeanPool()",
    torch_source=(MeanPool,),
    examples=(Example("A [B, 12, 16] sequence becomes one 16-wide vector per example.",
                      "mean_pool()\nlinear(2)", ("B", 12, 16)),),
    error_examples=(ErrorExample("mean_pool()", ("B", 16), "E_SHAPE", r"3 dims"),),
))
