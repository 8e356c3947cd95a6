"""relu and gelu: elementwise nonlinearities."""

from __future__ import annotations

from torch import nn

from ..core.spec import ErrorExample, Example, OpSpec, input_port, output_port, register


def _activation(name: str, module: type[nn.Module], formula: str, summary: str) -> OpSpec:
    return register(OpSpec(
        name=name,
        version=1,
        category="activation",
        summary=summary,
        description=(
            f"An elementwise nonlinearity with no parameters:\n\n    out = {formula}\n\n"
            "Any shape passes through unchanged."
        ),
        inputs=(input_port("x[...]"),),
        outputs=(output_port("out[...]"),),
        relation="out.shape == x.shape",
        args=(),
        module=lambda env, dtype: module(),
        torch_code=lambda env: f"nn.{module.__name__}()",
        examples=(Example("The shape is unchanged.", f"linear(32)\n{name}()", ("B", 12, 16)),),
        error_examples=(
            ErrorExample(f"{name}(1)", ("B", 16), "E_ARG", r"no arguments"),
            ErrorExample(f"{name}()", ("B", 12), "E_DTYPE", r"int64", input_dtype="int64"),
        ),
    ))


RELU = _activation("relu", nn.ReLU, "max(x, 0)", "Zero the negative values.")
GELU = _activation("gelu", nn.GELU, "x * Phi(x)   (Phi: the standard normal CDF)",
                   "The smooth ReLU of transformer MLPs.")
