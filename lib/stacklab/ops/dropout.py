"""dropout: randomly zero features while training."""

from __future__ import annotations

from torch import nn

from ..core.spec import Arg, ErrorExample, Example, OpSpec, input_port, output_port, register

SPEC = register(OpSpec(
    name="dropout",
    version=1,
    category="regularization",
    summary="While training, zero each value with probability p and scale the rest by 1/(1-p).",
    description=(
        "Inverted dropout: in training mode each value is zeroed with probability p and the "
        "survivors are multiplied by 1/(1-p), so the expected value is unchanged; in eval "
        "mode the input passes through untouched. No parameters."
    ),
    inputs=(input_port("x[...]"),),
    outputs=(output_port("out[...]"),),
    relation="out.shape == x.shape",
    args=(Arg("p", float, "Probability of zeroing each value.", minimum=0, maximum=1,
              max_inclusive=False),),
    module=lambda env, dtype: nn.Dropout(env["p"]),
    torch_code=lambda env: f"nn.Dropout({env['p']!r})",
    examples=(Example("Drop a tenth of the features while training.", "dropout(0.1)",
                      ("B", 12, 16)),),
    error_examples=(
        ErrorExample("dropout(1.5)", ("B", 12, 16), "E_ARG", r"< 1"),
        ErrorExample("dropout()", ("B", 12, 16), "E_ARG", r"missing"),
    ),
))
