"""attention: multi-head self-attention with a residual connection."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from ..core.shapes import COMPUTE_DTYPES
from ..core.spec import Arg, Constraint, ErrorExample, Example, OpSpec, input_port, output_port, register


def _known(dim) -> int:
    return dim if isinstance(dim, int) else 1


class Attention(nn.Module):
    """``out = x + proj(MHSA(x))``: Q, K and V from one fused projection, all with bias."""

    def __init__(self, dim: int, heads: int, causal: bool = False,
                 dtype: torch.dtype = torch.float32):
        super().__init__()
        self.heads = heads
        self.causal = causal
        self.qkv = nn.Linear(dim, 3 * dim, dtype=dtype)  # Q, K and V stacked: 3·D² + 3·D
        self.proj = nn.Linear(dim, dim, dtype=dtype)  # D² + D

    def heads_qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Queries, keys and values of ``x`` (B, T, D), split into heads: each (B, H, T, D/H)."""
        B, T, D = x.shape
        q, k, v = self.qkv(x).split(D, dim=-1)  # each (B, T, D)
        return tuple(t.view(B, T, self.heads, D // self.heads).transpose(1, 2) for t in (q, k, v))

    def scores(self, x: torch.Tensor) -> torch.Tensor:
        """The query-key scores of each head on ``x`` (B, T, D), before the softmax and any
        causal mask: (B, H, T, T)."""
        q, k, _ = self.heads_qkv(x)
        return q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5  # (B, H, T, T)

    def weights(self, x: torch.Tensor) -> torch.Tensor:
        """The attention weights of each head on ``x`` (B, T, D): (B, H, T, T), rows sum to 1.

        ``forward`` computes the same inside a fused kernel; this spells it out for analysis.
        """
        scores = self.scores(x)  # (B, H, T, T)
        if self.causal:
            T = x.shape[1]
            future = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
            scores = scores.masked_fill(future, float("-inf"))
        return scores.softmax(-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, D) -> (B, T, D)
        B, T, D = x.shape
        q, k, v = self.heads_qkv(x)  # each (B, H, T, D/H)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)  # (B, H, T, D/H)
        y = y.transpose(1, 2).reshape(B, T, D)  # (B, T, D)
        return x + self.proj(y)

    def extra_repr(self) -> str:
        return f"heads={self.heads}, causal={self.causal}"


SPEC = register(OpSpec(
    name="attention",
    version=1,
    category="mixing",
    summary="Multi-head self-attention added to its input: out = x + MHSA(x).",
    description=(
        "Every position looks at every position (or, with causal=true, at itself and the "
        "earlier ones) and takes a weighted mix of their values:\n\n"
        "    q, k, v = x @ Wq + bq, x @ Wk + bk, x @ Wv + bv      (split into heads)\n"
        "    out = x + (softmax(q k^T / sqrt(D / heads)) v) @ Wo + bo\n\n"
        "The four projections are D x D with a bias each: 4·D² + 4·D parameters (Q, K and V "
        "are stored as one fused qkv matrix). D must be divisible by heads. Attention by "
        "itself ignores order; it is the position encoding added before it that lets a "
        "model tell positions apart."
    ),
    inputs=(input_port("x[B, T, D]"),),
    outputs=(output_port("out[B, T, D]"),),
    relation="out.shape == x.shape; D % heads == 0",
    args=(
        Arg("heads", int, "Number of attention heads; each sees D / heads features.",
            minimum=1, maximum=4096),
        Arg("causal", bool, "Let each position attend only to itself and earlier positions.",
            default=False, positional=False),
    ),
    static=("D",),
    constraints=(Constraint(
        "D", "divides", "heads",
        message="D={D} features cannot be split evenly into {heads} heads",
        hint="choose heads that divide {D}, or change D",
    ),),
    params=lambda env: {"qkv.weight": (3 * env["D"], env["D"]), "qkv.bias": (3 * env["D"],),
                        "proj.weight": (env["D"], env["D"]), "proj.bias": (env["D"],)},
    # q, k, v and the mixed values (4·T·D), and scores and weights per head (2·heads·T²);
    # T stands for the symbol when it is not known.
    scratch=lambda env: (4 * _known(env["T"]) * env["D"] + 2 * env["heads"] * _known(env["T"]) ** 2),
    role="attention",
    # the four projections, then scores and the mix against every position (T unknown: 1)
    flops=lambda env: 8 * env["D"] ** 2 + 4 * _known(env["T"]) * env["D"],
    torch_code=lambda env: f"Attention({env['D']}, {env['heads']}, causal={env['causal']})",
    torch_source=(Attention,),
    module=lambda env, dtype: Attention(env["D"], env["heads"], env["causal"],
                                        COMPUTE_DTYPES[dtype]),
    examples=(
        Example("Two heads of 8 features each: 4 x 16² + 4 x 16 = 1,088 parameters.",
                "attention(2)", ("B", 12, 16)),
        Example("A small causal encoder over token ids.",
                "embedding(16, 32)\npos_embed(64)\nattention(4, causal=true)\nlayer_norm()\n"
                "linear(16)", ("B", 12), "int64"),
    ),
    error_examples=(
        ErrorExample("attention(3)", ("B", 12, 16), "E_CONSTRAINT", r"heads"),
        ErrorExample("attention(2)", ("B", 16), "E_SHAPE", r"3 dims"),
    ),
))
