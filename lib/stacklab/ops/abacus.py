"""abacus: token embeddings plus each digit's place within its number (McLeish et al. 2024)."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from ..core.errors import StackError
from ..core.shapes import COMPUTE_DTYPES
from ..core.spec import Arg, ErrorExample, Example, OpSpec, input_port, output_port, register


def digit_places(ids: torch.Tensor, digits: int) -> torch.Tensor:
    """The place of each token within its run of digits (ids below ``digits``), counting
    from 1 at the run's first token; 0 for every other token. (B, T) -> (B, T)."""
    is_digit = ids < digits  # (B, T)
    where = torch.arange(ids.shape[-1], device=ids.device).expand_as(ids)
    # the position of the last non-digit at or before each token (-1: none yet)
    last_break = torch.where(is_digit, torch.full_like(where, -1), where).cummax(-1).values
    return torch.where(is_digit, where - last_break, torch.zeros_like(where))


class Abacus(nn.Module):
    """``out = tokens[ids] + places[place + k]``: a token table and a place table, the
    place of each digit within its number (`digit_places`) and, while training, one random
    offset k per batch so the rows past the trained number length are trained too."""

    def __init__(self, vocab: int, dim: int, places: int, digits: int = 10,
                 dtype: torch.dtype = torch.float32):
        super().__init__()
        self.vocab, self.places, self.digits = vocab, places, digits
        self.check_values = True
        self.tokens = nn.Parameter(torch.randn(vocab, dim, dtype=dtype))
        self.place_table = nn.Parameter(torch.randn(places, dim, dtype=dtype) * 0.02)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:  # (B, T) -> (B, T, dim)
        if self.check_values and ids.numel() and int(ids.max()) >= self.vocab:
            raise StackError("E_VALUE", f"token id {int(ids.max())} is outside "
                             f"[0, {self.vocab})", op="abacus",
                             hint=f"keep ids below {self.vocab}")
        place = digit_places(ids, self.digits)  # (B, T)
        longest = int(place.max()) if place.numel() else 0
        if longest >= self.places:
            raise StackError("E_VALUE", f"a number has {longest} digits but the place table "
                             f"holds places up to {self.places - 1}", op="abacus",
                             hint=f"use abacus(..., places={longest + 1}) or more")
        if self.training and longest:
            k = int(torch.randint(0, self.places - longest, ()))  # the random offset
            place = torch.where(place > 0, place + k, place)
        return F.embedding(ids, self.tokens) + F.embedding(place, self.place_table)

    def extra_repr(self) -> str:
        return (f"vocab={self.vocab}, dim={self.tokens.shape[1]}, places={self.places}, "
                f"digits={self.digits}")


SPEC = register(OpSpec(
    name="abacus",
    version=1,
    category="embedding",
    summary="Token vectors plus Abacus positions: each digit gets the vector of its place "
            "within its number (McLeish et al. 2024).",
    description=(
        "An embedding for digit tasks such as addition. Token ids below digits count as "
        "digits; a run of them is a number, and each digit's place in it (1, 2, 3, ... from "
        "the run's first token; 0 for other tokens) picks a row of a learned place table:\n\n"
        "    out[b, t, :] = tokens[ids[b, t], :] + places[place[b, t] + k, :]\n\n"
        "While training, k is one random offset per batch, from 0 to places - 1 - the "
        "longest number (0 at evaluation), so the place rows past the trained length are "
        "trained too and a longer number at test time finds trained rows (McLeish et al., "
        "'Transformers Can Do Arithmetic with the Right Embeddings', 2024). With operands "
        "written lowest digit first, the digits of one column share a place. Replaces "
        "embedding and pos_embed at the start of a stack: it takes the token ids."
    ),
    inputs=(input_port("ids[B, T]", dtype="index"),),
    outputs=(output_port("out[B, T, dim]"),),
    relation="out[b, t] == tokens[ids[b, t]] + places[place(b, t) + k]; 0 <= ids < vocab",
    args=(
        Arg("vocab", int, "Number of distinct token ids.", minimum=1, maximum=2_147_483_647),
        Arg("dim", int, "Length of each vector.", minimum=1, maximum=2_147_483_647),
        Arg("places", int, "Rows of the place table: the longest number is places - 1 digits.",
            default=64, minimum=2, maximum=1_000_000),
        Arg("digits", int, "Token ids below this are digits (addition's 10: 0-9, 11: its "
            "answer slots too).", default=10, positional=False, minimum=1,
            maximum=2_147_483_647),
    ),
    params=lambda env: {"tokens": (env["vocab"], env["dim"]),
                        "place_table": (env["places"], env["dim"])},
    flops=lambda env: 2 * env["dim"],  # two lookups and an add
    torch_code=lambda env: (f"Abacus({env['vocab']}, {env['dim']}, {env['places']}, "
                            f"digits={env['digits']})"),
    torch_source=(digit_places, Abacus),
    module=lambda env, dtype: Abacus(env["vocab"], env["dim"], env["places"], env["digits"],
                                     COMPUTE_DTYPES[dtype]),
    examples=(
        Example("The addition preset's start with Abacus positions: 14 x 64 + 64 x 64 = "
                "4,992 parameters.", "abacus(14, 64, digits=11)", ("B", 16), "int64"),
    ),
    error_examples=(
        ErrorExample("abacus(14, 64)", ("B", 12, 16), "E_DTYPE", r"float32"),
        ErrorExample("abacus(14)", ("B", 12), "E_ARG", r"dim", input_dtype="int64"),
    ),
))
