"""attention: multi-head self-attention with a residual connection."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from ..core.shapes import COMPUTE_DTYPES
from ..core.spec import Arg, Constraint, ErrorExample, Example, OpSpec, input_port, output_port, register
from .encodings import ENCODINGS, POSITIONS, position_flops, position_params, reference_text
from .relative_bias import Fire, alibi_slopes, cope_logits, kerple_bias, relative_bucket
from .rotary import rope_frequencies, rope_rotate, rotated_width, xpos_decay


def _known(dim) -> int:
    return dim if isinstance(dim, int) else 1


class Attention(nn.Module):
    """``out = x + proj(MHSA(x))``: Q, K and V from one fused projection, all with bias;
    ``position`` (one of `ENCODINGS`) adds where the positions are: rotated queries and
    keys (``rope``, ``xpos``; ``rotary`` the fraction of each head turned), a bias on the
    logits (``alibi``, ``relative``, ``kerple``, ``kerple_power``, ``fire``) or counted
    contextual positions (``cope``). With ``residual=False`` the output is
    ``proj(MHSA(x))`` alone.

    Two settings reach the module from outside, per forward pass: ``positions`` (T,), the
    position of each token when not 0..T-1 (randomized positions in training), and
    ``rope_scaling`` (method, factor or None for length / ``trained_len``, trained_len),
    how rotations stretch at evaluation."""

    def __init__(self, dim: int, heads: int, causal: bool = False, position: str = "none",
                 buckets: int = 32, dtype: torch.dtype = torch.float32, residual: bool = True,
                 rotary: float = 1.0):
        super().__init__()
        self.heads = heads
        self.residual = residual
        self.causal = causal
        self.position = position
        self.buckets = buckets
        self.rotary = rotary
        self.positions: torch.Tensor | None = None
        self.rope_scaling: tuple[str, float | None, int] = ("none", None, 0)
        self.qkv = nn.Linear(dim, 3 * dim, dtype=dtype)  # Q, K and V stacked: 3·D² + 3·D
        self.proj = nn.Linear(dim, dim, dtype=dtype)  # D² + D
        if position == "relative":
            self.bias = nn.Parameter(torch.zeros(heads, buckets, dtype=dtype))  # heads·buckets
        if position == "alibi":
            self.register_buffer("slopes", alibi_slopes(heads).to(dtype), persistent=False)
        if position in ("kerple", "kerple_power"):
            self.r1 = nn.Parameter(torch.rand(heads, dtype=dtype) * 2)  # the paper's init
            self.r2 = nn.Parameter(torch.rand(heads, dtype=dtype) * (2 if "power" in position else 1))
        if position == "fire":
            self.fire = Fire(heads, dtype=dtype)
        if position == "cope":
            self.cope = nn.Parameter(torch.zeros(dim // heads, buckets, dtype=dtype))  # (d, P)

    def where(self, T: int, device=None) -> torch.Tensor:
        """The position of each of the T tokens: ``positions`` when set for T, else 0..T-1."""
        if self.positions is not None and self.positions.shape[0] == T:
            return self.positions.to(device)
        return torch.arange(T, device=device)

    def rotate(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``rope`` and ``xpos``: queries and keys (B, H, T, d) turned by their positions
        (stretched by ``rope_scaling``; decayed by xPos)."""
        T, d = q.shape[-2], q.shape[-1]
        r = rotated_width(d, self.rotary)
        method, factor, trained = self.rope_scaling
        if factor is None:
            factor = max(1.0, T / trained) if trained else 1.0
        theta, gain = rope_frequencies(r, method, factor, trained)
        where = self.where(T, q.device)
        q_gain = k_gain = gain
        if self.position == "xpos":
            decay = xpos_decay(r, where)  # (T, r/2)
            q_gain, k_gain = decay * gain, gain / decay
        return (rope_rotate(q, fraction=self.rotary, positions=where, theta=theta, gain=q_gain),
                rope_rotate(k, fraction=self.rotary, positions=where, theta=theta, gain=k_gain))

    def heads_qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Queries, keys and values of ``x`` (B, T, D), split into heads: each (B, H, T, D/H);
        with ``rope`` or ``xpos`` the queries and keys are rotated by their position."""
        B, T, D = x.shape
        q, k, v = self.qkv(x).split(D, dim=-1)  # each (B, T, D)
        q, k, v = (t.view(B, T, self.heads, D // self.heads).transpose(1, 2) for t in (q, k, v))
        if self.position in ("rope", "xpos"):
            q, k = self.rotate(q, k)
        return q, k, v

    def position_bias(self, T: int, device=None) -> torch.Tensor | None:
        """What a bias encoding adds to the scores: (H, T, T), query down the side; None for
        the other encodings (CoPE's depends on the queries: `qk_logits`)."""
        if self.position not in ("alibi", "relative", "kerple", "kerple_power", "fire"):
            return None
        where = self.where(T, device)
        offset = where[None, :] - where[:, None]  # key minus query: (T, T)
        distance = offset.abs() if not self.causal else (-offset).clamp(min=0)
        if self.position == "alibi":
            return -self.slopes[:, None, None] * distance.to(self.slopes.dtype)  # (H, T, T)
        if self.position in ("kerple", "kerple_power"):
            return kerple_bias(distance, self.r1, self.r2, power=self.position == "kerple_power")
        if self.position == "fire":
            return self.fire(where)  # (H, T, T)
        bucket = relative_bucket(offset, self.buckets, self.causal)  # (T, T)
        return self.bias[:, bucket]  # (H, T, T)

    def logit_bias(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor | None:
        """Everything the encoding adds to ``q k^T / √d``: (H, T, T), or (B, H, T, T) for
        CoPE; None for none."""
        if self.position == "cope":
            return cope_logits(q, k, self.cope, self.causal) / q.shape[-1] ** 0.5
        return self.position_bias(q.shape[-2], q.device)

    def qk_logits(self, x: torch.Tensor) -> torch.Tensor:
        """The query-key logits of each head on ``x`` (B, T, D): what goes into the softmax,
        before any causal mask, position biases included: (B, H, T, T)."""
        q, k, _ = self.heads_qkv(x)
        logits = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5  # (B, H, T, T)
        bias = self.logit_bias(q, k)
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
        bias = self.logit_bias(q, k)  # (H, T, T), (B, H, T, T) or None
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
                + (f", buckets={self.buckets}" if self.position in ("relative", "cope") else "")
                + (f", rotary={self.rotary}" if self.rotary != 1.0 else "")
                + ("" if self.residual else ", residual=False"))


SPEC = register(OpSpec(
    name="attention",
    version=1,
    category="mixing",
    summary="Multi-head self-attention added to its input: out = x + MHSA(x); optionally with "
            "positions inside it (RoPE, xPos, ALiBi, T5 buckets, Kerple, FIRE, CoPE).",
    description=(
        "Every position looks at every position (or, with causal=true, at itself and the "
        "earlier ones) and takes a weighted mix of their values:\n\n"
        "    q, k, v = x @ Wq + bq, x @ Wk + bk, x @ Wv + bv      (split into heads)\n"
        "    out = x + (softmax(q k^T / sqrt(D / heads) + bias) v) @ Wo + bo\n\n"
        "The four projections are D x D with a bias each: 4·D² + 4·D parameters (Q, K and V "
        "are stored as one fused qkv matrix). D must be divisible by heads. Attention by "
        "itself ignores order; a position encoding tells positions apart, either added to "
        "the sequence before it (pos_embed, sin_pos) or inside it, with position=:\n\n"
        + reference_text() + "\n\n"
        "Two settings of a run reach the position encodings: random_positions (train with "
        "each batch's positions a sorted random subset of a larger range, Ruoss et al. 2023) "
        "and rope_scaling with rope_factor (stretch rope and xpos rotations when evaluating "
        "past the trained length: linear position interpolation, NTK-aware base scaling or "
        "YaRN).\n\n"
        "With residual=false the input is not added: out = (softmax(...) v) @ Wo + bo alone, "
        "the branch of a pre-LN block that add(x, h) joins back into the residual stream."
    ),
    inputs=(input_port("x[B, T, D]"),),
    outputs=(output_port("out[B, T, D]"),),
    relation="out.shape == x.shape; D % heads == 0; D % (2·heads) == 0 for rope and xpos",
    args=(
        Arg("heads", int, "Number of attention heads; each sees D / heads features.",
            minimum=1, maximum=4096),
        Arg("causal", bool, "Let each position attend only to itself and earlier positions.",
            default=False, positional=False),
        Arg("position", str, "Where positions come in inside the attention: "
            + ", ".join(POSITIONS) + " (each described above).", default="none",
            positional=False, choices=POSITIONS),
        Arg("buckets", int, "Distance buckets of position=\"relative\", positions CoPE counts "
            "to with position=\"cope\" (ignored otherwise).",
            default=32, positional=False, minimum=2, maximum=1024),
        Arg("rotary", float, "The fraction of each head that rope or xpos turns (partial "
            "RoPE: 0.25 as GPT-NeoX); the rest passes unchanged.", default=1.0,
            positional=False, minimum=0.0, maximum=1.0, min_inclusive=False, quiet=True),
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
            when=lambda args: ENCODINGS[args["position"]].rotates and args["rotary"] == 1.0,
            when_text='position="rope" or "xpos"',
            message="position=\"rope\" or \"xpos\" turns pairs of features, so each head needs an even "
                    "width, but D={D} / heads={heads} is odd",
            hint="choose heads so that {D} / heads is even (e.g. heads=1 or 2 for D=2·odd), or "
                 "make D a multiple of 2·heads",
        ),
    ),
    params=lambda env: {"qkv.weight": (3 * env["D"], env["D"]), "qkv.bias": (3 * env["D"],),
                        "proj.weight": (env["D"], env["D"]), "proj.bias": (env["D"],),
                        **position_params(env)},
    # q, k, v and the mixed values (4·T·D), and scores and weights per head (2·heads·T²);
    # T stands for the symbol when it is not known.
    scratch=lambda env: (4 * _known(env["T"]) * env["D"] + 2 * env["heads"] * _known(env["T"]) ** 2),
    role="attention",
    encodes_positions=lambda args: None if args["position"] == "none" else args["position"],
    # the four projections, then scores and the mix against every position (T unknown: 1),
    # the rotation of q and k, or a bias per head and key
    flops=lambda env: (8 * env["D"] ** 2 + 4 * _known(env["T"]) * env["D"]
                       + position_flops(env, _known(env["T"]))),
    torch_code=lambda env: (
        f"Attention({env['D']}, {env['heads']}, causal={env['causal']}, "
        f"position={env['position']!r}, buckets={env['buckets']}"
        + ("" if env["residual"] else ", residual=False")
        + ("" if env["rotary"] == 1.0 else f", rotary={env['rotary']!r}") + ")"),
    torch_source=(rotated_width, rope_frequencies, xpos_decay, rope_rotate, alibi_slopes,
                  relative_bucket, kerple_bias, Fire, cope_logits, Attention),
    module=lambda env, dtype: Attention(env["D"], env["heads"], env["causal"], env["position"],
                                        env["buckets"], COMPUTE_DTYPES[dtype],
                                        residual=env["residual"], rotary=env["rotary"]),
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
        Example("xPos: RoPE with a decay per pair, no parameters.",
                'attention(4, causal=true, position="xpos")', ("B", 16, 64)),
        Example("Partial RoPE: only the first quarter of each 16-wide head turns (GPT-NeoX).",
                'attention(4, causal=true, position="rope", rotary=0.25)', ("B", 16, 64)),
        Example("Kerple, logarithmic: r1 and r2 per head, 2 x 4 = 8 more parameters "
                "(16,640 + 8 = 16,648).",
                'attention(4, causal=true, position="kerple")', ("B", 16, 64)),
        Example("Kerple, power: the same 8 more parameters.",
                'attention(4, causal=true, position="kerple_power")', ("B", 16, 64)),
        Example("FIRE: an MLP of the normalised log offset, 66 + 33 x 4 = 198 more parameters "
                "(16,838).",
                'attention(4, causal=true, position="fire")', ("B", 16, 64)),
        Example("CoPE: a learned logit per head-width feature and counted position, "
                "16 x 32 = 512 more parameters (17,152).",
                'attention(4, causal=true, position="cope")', ("B", 16, 64)),
    ),
    error_examples=(
        ErrorExample("attention(3)", ("B", 12, 16), "E_CONSTRAINT", r"heads"),
        ErrorExample("attention(2)", ("B", 16), "E_SHAPE", r"3 dims"),
        ErrorExample('attention(2, position="rope")', ("B", 12, 6), "E_CONSTRAINT", r"even"),
        ErrorExample('attention(2, position="sinusoidal")', ("B", 12, 16), "E_ARG", r"one of"),
    ),
))
