"""linear: an affine map of the last dim."""

from __future__ import annotations

from torch import nn

from ..core.shapes import COMPUTE_DTYPES
from ..core.spec import Arg, ErrorExample, Example, OpSpec, input_port, output_port, register

SPEC = register(OpSpec(
    name="linear",
    version=1,
    category="dense",
    summary="Map the last dim to `out` features with a learned matrix (and bias).",
    description=(
        "An affine map of the feature dim, applied at every position:\n\n"
        "    out[..., :] = x[..., :] @ weight.T + bias\n\n"
        "weight has shape [out, I] and bias [out]; both use PyTorch's default "
        "initialisation (uniform in ±1/sqrt(I)). With bias=false there is no bias. The "
        "leading dims pass through unchanged, so the same op serves [B, T, D] sequences and "
        "pooled [B, D] vectors."
    ),
    inputs=(input_port("x[..., I]"),),
    outputs=(output_port("out[..., O]"),),
    relation="O == out",
    args=(
        Arg("out", int, "Number of output features.", minimum=1, maximum=2_147_483_647),
        Arg("bias", bool, "Whether to learn an additive bias.", default=True, positional=False),
    ),
    static=("I",),
    dim_args={"O": "out"},
    params=lambda env: ({"weight": (env["out"], env["I"]), "bias": (env["out"],)}
                        if env["bias"] else {"weight": (env["out"], env["I"])}),
    torch_code=lambda env: (f"nn.Linear({env['I']}, {env['out']}"
                            + ("" if env["bias"] else ", bias=False") + ")"),
    module=lambda env, dtype: nn.Linear(env["I"], env["out"], bias=env["bias"],
                                        dtype=COMPUTE_DTYPES[dtype]),
    examples=(
        Example("Every position's 16 features are mapped to 4 class scores.",
                "linear(4)", ("B", 12, 16)),
        Example("Without a bias the layer is a plain matrix: 16 x 4 = 64 parameters.",
                "linear(4, bias=false)", ("B", 12, 16)),
    ),
    error_examples=(
        ErrorExample("linear(4)", ("B", 12), "E_DTYPE", r"int64", input_dtype="int64"),
        ErrorExample("linear(4, bias=1)", ("B", 16), "E_ARG", r"bool"),
        ErrorExample("linear(4, bias=true, bias=false)", ("B", 16), "E_ARG", r"twice"),
        ErrorExample("linear(4, scale=2)", ("B", 16), "E_ARG", r"scale"),
        ErrorExample("linear(4.5)", ("B", 16), "E_ARG", r"int"),
        ErrorExample("linear(4)", ("B", "D"), "E_SHAPE", r"size"),
        ErrorExample("lienar(4)", ("B", 16), "E_UNKNOWN_OP", r"linear"),
        ErrorExample("linear(4", ("B", 16), "E_PARSE", r"expected"),
    ),
))
