"""attention: multi-head self-attention with a residual connection."""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from ..core.shapes import COMPUTE_DTYPES
from ..core.spec import Arg, Constraint, ErrorExample, Example, OpSpec, input_port, output_port, register


def _known(dim) -> int:
    return dim if isinstance(dim, int) else 1


POSITIONS = ("none", "rope", "alibi", "relative")


def rope_rotate(x: torch.Tensor, offset: int = 0) -> torch.Tensor:
    """Rotary position encoding of queries or keys ``x`` (B, H, T, d), d even: the features
    are split in two halves, and pair i (x[i], x[i + d/2]) is turned by the angle
    ``t * 10000^(-2i/d)`` at position t. A query-key product then depends on the two
    positions only through their difference."""
    d, T = x.shape[-1], x.shape[-2]
    inverse = 10000.0 ** (-torch.arange(0, d // 2, device=x.device, dtype=torch.float32) / (d // 2))
    angle = torch.arange(offset, offset + T, device=x.device, dtype=torch.float32)[:, None] \
        * inverse[None, :]  # (T, d/2)
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    first, second = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)


def alibi_slopes(heads: int) -> torch.Tensor:
    """ALiBi's slope per head (Press et al.): the geometric sequence 2^(-8/n), 2^(-16/n), ...
    for n heads a power of two; otherwise those of the nearest smaller power of two and
    every other one of the next."""
    def powers(n: int) -> list[float]:
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]

    n = 2 ** int(math.floor(math.log2(heads)))
    slopes = powers(n) + powers(2 * n)[0::2][: heads - n]
    return torch.tensor(slopes)


def relative_bucket(offset: torch.Tensor, buckets: int, causal: bool,
                    max_distance: int = 128) -> torch.Tensor:
    """T5's bucket of each key-minus-query offset: exact for small distances, then on a log
    scale up to ``max_distance``; without a causal mask half the buckets are for keys to
    the right, so left and right differ."""
    bucket = torch.zeros_like(offset)
    if not causal:
        buckets //= 2
        bucket = bucket + (offset > 0).long() * buckets
        distance = offset.abs()
    else:
        distance = (-offset).clamp(min=0)
    exact = max(1, buckets // 2)
    far = exact + (torch.log(distance.float().clamp(min=1) / exact)
                   / math.log(max(max_distance / exact, 1.0 + 1e-6))
                   * (buckets - exact)).long()
    far = far.clamp(max=buckets - 1)
    return bucket + torch.where(distance < exact, distance, far)


class Attention(nn.Module):
    """``out = x + proj(MHSA(x))``: Q, K and V from one fused projection, all with bias;
    ``position`` adds where the positions are: rotary queries and keys (``rope``), a fixed
    distance penalty per head (``alibi``) or a learned bias per head and distance bucket
    (``relative``). With ``residual=False`` the output is ``proj(MHSA(x))`` alone."""

    def __init__(self, dim: int, heads: int, causal: bool = False, position: str = "none",
                 buckets: int = 32, dtype: torch.dtype = torch.float32, residual: bool = True):
        super().__init__()
        self.heads = heads
        self.residual = residual
        self.causal = causal
        self.position = position
        self.buckets = buckets
        self.qkv = nn.Linear(dim, 3 * dim, dtype=dtype)  # Q, K and V stacked: 3·D² + 3·D
        self.proj = nn.Linear(dim, dim, dtype=dtype)  # D² + D
        if position == "relative":
            self.bias = nn.Parameter(torch.zeros(heads, buckets, dtype=dtype))  # heads·buckets
        if position == "alibi":
            self.register_buffer("slopes", alibi_slopes(heads).to(dtype), persistent=False)

    def heads_qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Queries, keys and values of ``x`` (B, T, D), split into heads: each (B, H, T, D/H);
        with ``position="rope"`` the queries and keys are rotated by their position."""
        B, T, D = x.shape
        q, k, v = self.qkv(x).split(D, dim=-1)  # each (B, T, D)
        q, k, v = (t.view(B, T, self.heads, D // self.heads).transpose(1, 2) for t in (q, k, v))
        if self.position == "rope":
            q, k = rope_rotate(q), rope_rotate(k)
        return q, k, v

    def position_bias(self, T: int, device=None) -> torch.Tensor | None:
        """What ``alibi`` or ``relative`` adds to the scores: (H, T, T), query down the side;
        None for the other encodings."""
        if self.position not in ("alibi", "relative"):
            return None
        where = torch.arange(T, device=device)
        offset = where[None, :] - where[:, None]  # key minus query: (T, T)
        if self.position == "alibi":
            distance = offset.abs() if not self.causal else (-offset).clamp(min=0)
            return -self.slopes[:, None, None] * distance.to(self.slopes.dtype)  # (H, T, T)
        bucket = relative_bucket(offset, self.buckets, self.causal)  # (T, T)
        return self.bias[:, bucket]  # (H, T, T)

    def qk_logits(self, x: torch.Tensor) -> torch.Tensor:
        """The query-key logits of each head on ``x`` (B, T, D): what goes into the softmax,
        before any causal mask, position biases included: (B, H, T, T)."""
        q, k, _ = self.heads_qkv(x)
        logits = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5  # (B, H, T, T)
        bias = self.position_bias(x.shape[1], x.device)
        return logits if bias is None else logits + bias

    def weights(self, x: torch.Tensor) -> torch.Tensor:
        """The attention weights of each head on ``x`` (B, T, D): (B, H, T, T), rows sum to 1.

        ``forward`` computes the same inside a fused kernel; this spells it out for analysis.
        """
        logits = self.qk_logits(x)  # (B, H, T, T)
        if self.causal:
            T = x.shape[1]
            future = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
            logits = logits.masked_fill(future, float("-inf"))
        return logits.softmax(-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, D) -> (B, T, D)
        B, T, D = x.shape
        q, k, v = self.heads_qkv(x)  # each (B, H, T, D/H)
        bias = self.position_bias(T, x.device)  # (H, T, T) or None
        if bias is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)  # (B, H, T, D/H)
        else:
            if self.causal:
                future = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
                bias = bias.masked_fill(future, float("-inf"))
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias.to(q.dtype))
        y = y.transpose(1, 2).reshape(B, T, D)  # (B, T, D)
        return x + self.proj(y) if self.residual else self.proj(y)

    def extra_repr(self) -> str:
        return (f"heads={self.heads}, causal={self.causal}, position={self.position!r}"
                + (f", buckets={self.buckets}" if self.position == "relative" else "")
                + ("" if self.residual else ", residual=False"))


def _bias_params(env) -> dict:
    return {"bias": (env["heads"], env["buckets"])} if env["position"] == "relative" else {}


SPEC = register(OpSpec(
    name="attention",
    version=1,
    category="mixing",
    summary="Multi-head self-attention added to its input: out = x + MHSA(x); optionally with "
            "rotary (RoPE), ALiBi or relative-bias positions.",
    description=(
        "Every position looks at every position (or, with causal=true, at itself and the "
        "earlier ones) and takes a weighted mix of their values:\n\n"
        "    q, k, v = x @ Wq + bq, x @ Wk + bk, x @ Wv + bv      (split into heads)\n"
        "    out = x + (softmax(q k^T / sqrt(D / heads) + bias) v) @ Wo + bo\n\n"
        "The four projections are D x D with a bias each: 4·D² + 4·D parameters (Q, K and V "
        "are stored as one fused qkv matrix). D must be divisible by heads. Attention by "
        "itself ignores order; a position encoding tells positions apart, either added to "
        "the sequence before it (pos_embed, sin_pos) or inside it, with position=:\n\n"
        "- \"none\" (the default): no position inside the attention; bias = 0.\n"
        "- \"rope\": rotary positions (Su et al.). Each head's query and key features are "
        "turned in pairs by an angle proportional to the position, so q·k depends on the "
        "two positions only through their difference. No parameters; each head's width "
        "D / heads must be even.\n"
        "- \"alibi\": a fixed penalty growing with distance (Press et al.): bias = -m·|i - j|, "
        "one slope m per head (1/2, 1/4, ... for 8 heads). No parameters. Without "
        "causal=true the penalty is the same to the left and to the right.\n"
        "- \"relative\": a learned bias per head and distance bucket (T5): distances below "
        "buckets/4 (buckets/2 with causal=true) each have a bucket, longer ones share "
        "buckets on a log scale up to 128; without causal=true, left and right have buckets "
        "of their own. heads·buckets parameters.\n\n"
        "With residual=false the input is not added: out = (softmax(...) v) @ Wo + bo alone, "
        "the branch of a pre-LN block that add(x, h) joins back into the residual stream."
    ),
    inputs=(input_port("x[B, T, D]"),),
    outputs=(output_port("out[B, T, D]"),),
    relation="out.shape == x.shape; D % heads == 0; D % (2·heads) == 0 for rope",
    args=(
        Arg("heads", int, "Number of attention heads; each sees D / heads features.",
            minimum=1, maximum=4096),
        Arg("causal", bool, "Let each position attend only to itself and earlier positions.",
            default=False, positional=False),
        Arg("position", str, "Where positions come in inside the attention: none, rope, alibi "
            "or relative.", default="none", positional=False, choices=POSITIONS),
        Arg("buckets", int, "Distance buckets of position=\"relative\" (ignored otherwise).",
            default=32, positional=False, minimum=2, maximum=1024),
        Arg("residual", bool, "Add the input to the output (out = x + MHSA(x)); false: "
            "MHSA(x) alone, for add() to join.", default=True, positional=False, quiet=True),
    ),
    static=("D",),
    constraints=(
        Constraint(
            "D", "divides", "heads",
            message="D={D} features cannot be split evenly into {heads} heads",
            hint="choose heads that divide {D}, or change D",
        ),
        Constraint(
            "D", "divides", "heads", factor=2,
            when=lambda args: args["position"] == "rope", when_text='position="rope"',
            message="position=\"rope\" turns pairs of features, so each head needs an even "
                    "width, but D={D} / heads={heads} is odd",
            hint="choose heads so that {D} / heads is even (e.g. heads=1 or 2 for D=2·odd), or "
                 "make D a multiple of 2·heads",
        ),
    ),
    params=lambda env: {"qkv.weight": (3 * env["D"], env["D"]), "qkv.bias": (3 * env["D"],),
                        "proj.weight": (env["D"], env["D"]), "proj.bias": (env["D"],),
                        **_bias_params(env)},
    # q, k, v and the mixed values (4·T·D), and scores and weights per head (2·heads·T²);
    # T stands for the symbol when it is not known.
    scratch=lambda env: (4 * _known(env["T"]) * env["D"] + 2 * env["heads"] * _known(env["T"]) ** 2),
    role="attention",
    encodes_positions=lambda args: None if args["position"] == "none" else args["position"],
    # the four projections, then scores and the mix against every position (T unknown: 1),
    # the rotation of q and k, or a bias per head and key
    flops=lambda env: (8 * env["D"] ** 2 + 4 * _known(env["T"]) * env["D"]
                       + (6 * env["D"] if env["position"] == "rope" else 0)
                       + (env["heads"] * _known(env["T"])
                          if env["position"] in ("alibi", "relative") else 0)),
    torch_code=lambda env: (
        f"Attention({env['D']}, {env['heads']}, causal={env['causal']}, "
        f"position={env['position']!r}, buckets={env['buckets']}"
        + ("" if env["residual"] else ", residual=False") + ")"),
    torch_source=(rope_rotate, alibi_slopes, relative_bucket, Attention),
    module=lambda env, dtype: Attention(env["D"], env["heads"], env["causal"], env["position"],
                                        env["buckets"], COMPUTE_DTYPES[dtype],
                                        residual=env["residual"]),
    examples=(
        Example("Two heads of 8 features each: 4 x 16² + 4 x 16 = 1,088 parameters.",
                "attention(2)", ("B", 12, 16)),
        Example("A small causal encoder over token ids.",
                "embedding(16, 32)\npos_embed(64)\nattention(4, causal=true)\nlayer_norm()\n"
                "linear(16)", ("B", 12), "int64"),
        Example("Rotary positions instead of a table: no position parameters at all.",
                'embedding(16, 64)\nattention(4, causal=true, position="rope")\nlinear(16)',
                ("B", 16), "int64"),
        Example("ALiBi: a fixed distance penalty per head, no parameters.",
                'attention(4, causal=true, position="alibi")', ("B", 16, 64)),
        Example("A learned bias per head and distance bucket: 4 x 32 = 128 more parameters "
                "(4 x 64² + 4 x 64 + 128 = 16,768).",
                'attention(4, position="relative")', ("B", 16, 64)),
    ),
    error_examples=(
        ErrorExample("attention(3)", ("B", 12, 16), "E_CONSTRAINT", r"heads"),
        ErrorExample("attention(2)", ("B", 16), "E_SHAPE", r"3 dims"),
        ErrorExample('attention(2, position="rope")', ("B", 12, 6), "E_CONSTRAINT", r"even"),
        ErrorExample('attention(2, position="sinusoidal")', ("B", 12, 16), "E_ARG", r"one of"),
    ),
))
