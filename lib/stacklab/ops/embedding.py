"""embedding: look up a learned vector for every token id."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from ..core.errors import StackError
from ..core.shapes import COMPUTE_DTYPES
from ..core.spec import Arg, ErrorExample, Example, OpSpec, input_port, output_port, register


class Embedding(nn.Module):
    """A ``[vocab, dim]`` table indexed by token ids; ids outside ``[0, vocab)`` are refused.

    ``check_values`` costs one host sync per call (min and max of the ids); a trainer whose
    data is known to be in range turns it off (`StackModule.set_value_checks`).
    """

    def __init__(self, vocab: int, dim: int, dtype: torch.dtype = torch.float32):
        super().__init__()
        self.vocab = vocab
        self.check_values = True
        self.weight = nn.Parameter(torch.empty(vocab, dim, dtype=dtype))
        nn.init.normal_(self.weight)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:  # (...) -> (..., dim)
        if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
            raise StackError("E_DTYPE", f"embedding takes integer token ids, not {ids.dtype}",
                             op="embedding", hint="pass a torch.long (int64) tensor of ids")
        if self.check_values and ids.numel():
            low, high = int(ids.min()), int(ids.max())
            if low < 0:
                raise StackError("E_VALUE", f"token id {low} is outside [0, {self.vocab})",
                                 op="embedding", hint="token ids are never negative")
            if high >= self.vocab:
                raise StackError(
                    "E_VALUE", f"token id {high} is outside [0, {self.vocab})", op="embedding",
                    hint=f"keep ids below {self.vocab}, or use embedding({high + 1}, "
                         f"{self.weight.shape[1]}) to make room for them")
        return F.embedding(ids, self.weight)

    def extra_repr(self) -> str:
        return f"vocab={self.vocab}, dim={self.weight.shape[1]}"


SPEC = register(OpSpec(
    name="embedding",
    version=1,
    category="embedding",
    summary="Turn each token id into a learned vector.",
    description=(
        "A lookup table: token id i becomes row i of weight, a [vocab, dim] parameter "
        "initialised from a standard normal distribution.\n\n"
        "    out[..., :] = weight[ids[...], :]\n\n"
        "The input holds integer ids (int64 or int32) and must be the first op of a stack "
        "that starts from tokens; the output is in the compute dtype. The built model checks "
        "at run time that every id lies in [0, vocab) and reports E_VALUE otherwise."
    ),
    inputs=(input_port("ids[...]", dtype="index"),),
    outputs=(output_port("out[..., dim]"),),
    relation="out[..., :] == weight[ids[...], :]; 0 <= ids < vocab",
    args=(
        Arg("vocab", int, "Number of distinct token ids; rows of the table.",
            minimum=1, maximum=2_147_483_647),
        Arg("dim", int, "Length of each token vector.", minimum=1, maximum=2_147_483_647),
    ),
    params=lambda env: {"weight": (env["vocab"], env["dim"])},
    flops=lambda env: env["dim"],  # a lookup copies one row
    torch_code=lambda env: f"nn.Embedding({env['vocab']}, {env['dim']})",
    module=lambda env, dtype: Embedding(env["vocab"], env["dim"], COMPUTE_DTYPES[dtype]),
    examples=(
        Example("Token ids of a batch of length-12 sequences become 16-wide vectors.",
                "embedding(500, 16)", ("B", 12), "int64"),
    ),
    error_examples=(
        ErrorExample("embedding(500, 16)", ("B", 12, 16), "E_DTYPE", r"float32"),
        ErrorExample("embedding(500)", ("B", 12), "E_ARG", r"dim", input_dtype="int64"),
        ErrorExample("embedding(500, 16, 3)", ("B", 12), "E_ARG", r"at most 2",
                     input_dtype="int64"),
    ),
))
