"""The position encodings inside `attention`, declared once each: the ``position=`` choice,
its paper, its formula for the reference page, and the parameters it adds.

`attention`'s argument choices, description, parameter shapes and FLOP count are all
read from `ENCODINGS`; the torch code is in `rotary` and `relative_bias`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

FIRE_WIDTH = 32  # FIRE's MLP width (the reference code's default)


@dataclass(frozen=True)
class Encoding:
    """One ``position=`` choice of `attention`."""

    name: str
    paper: str  # who proposed it, for the reference page
    formula: str  # what it does, one paragraph for the reference page
    params: Callable[[Mapping[str, object]], dict[str, tuple[int, ...]]] = lambda env: {}
    rotates: bool = False  # turns queries and keys: needs an even rotated width
    adds_bias: bool = False  # adds a (heads, T, T) bias to the logits

    def text(self) -> str:
        return f"- \"{self.name}\" ({self.paper}): {self.formula}"


def _head_width(env) -> int:
    return env["D"] // env["heads"]


ENCODINGS: dict[str, Encoding] = {e.name: e for e in (
    Encoding("none", "no encoding inside attention", "bias = 0 (the default)."),
    Encoding("rope", "Su et al. 2021, RoFormer",
             "each head's query and key features are turned in pairs, pair i by the angle "
             "t·10000^(-2i/r) at position t, so q·k depends on the two positions only "
             "through their difference. rotary=0.25 turns only the first quarter of each "
             "head (r = 0.25·D/heads, GPT-NeoX's rotary_pct, its frequencies spread over "
             "those r features) and passes the rest unchanged; p-RoPE (Barbero et al. "
             "2024), which keeps the fastest pairs of the whole head's frequencies, is not "
             "offered. No "
             "parameters; r must be even.", rotates=True),
    Encoding("alibi", "Press et al. 2022, Train Short, Test Long",
             "a fixed penalty growing with distance, bias = -m·|i - j|, one slope m per "
             "head (1/2, 1/4, ... for 8 heads). No parameters. Without causal=true the "
             "penalty is the same to the left and to the right.", adds_bias=True),
    Encoding("relative", "Raffel et al. 2020, T5",
             "a learned bias per head and distance bucket: distances below buckets/4 "
             "(buckets/2 with causal=true) each have a bucket, longer ones share buckets on "
             "a log scale up to 128; without causal=true, left and right have buckets of "
             "their own. heads·buckets parameters.",
             params=lambda env: {"bias": (env["heads"], env["buckets"])}, adds_bias=True),
    Encoding("xpos", "Sun et al. 2022, A Length-Extrapolatable Transformer",
             "RoPE whose pair i is also scaled by ζ_i^(t/512) on queries and ζ_i^(-t/512) "
             "on keys, ζ_i = (2i/r + 0.4)/1.4, so a logit decays as ζ_i^((t_q - t_k)/512) "
             "with the distance (torchscale's XPOS, positions centred on the sequence). "
             "No parameters.", rotates=True),
    Encoding("kerple", "Chi et al. 2022, KERPLE",
             "a learned logarithmic bias -r1·log(1 + r2·|i - j|), r1, r2 > 0 per head. "
             "2·heads parameters.",
             params=lambda env: {"r1": (env["heads"],), "r2": (env["heads"],)},
             adds_bias=True),
    Encoding("kerple_power", "Chi et al. 2022, KERPLE (power variant)",
             "a learned bias -r1·|i - j|^r2, r1 > 0 and 0 < r2 <= 2 per head. 2·heads "
             "parameters.",
             params=lambda env: {"r1": (env["heads"],), "r2": (env["heads"],)},
             adds_bias=True),
    Encoding("fire", "Li et al. 2023, Functional Interpolation for Relative Positions",
             "bias = f(ψ(i - j) / ψ(max(i, L))), ψ(x) = log(c·|x| + 1), f a 1 -> 32 -> heads "
             "MLP with a ReLU, c learned (0.1 at init), L = 512 times a learned multiplier: "
             "ALiBi, T5 and Kerple are special cases of f. 66 + 33·heads parameters.",
             params=lambda env: {"fire.c": (), "fire.threshold_scale": (),
                                 "fire.mlp.0.weight": (FIRE_WIDTH, 1),
                                 "fire.mlp.0.bias": (FIRE_WIDTH,),
                                 "fire.mlp.2.weight": (env["heads"], FIRE_WIDTH),
                                 "fire.mlp.2.bias": (env["heads"],)},
             adds_bias=True),
    Encoding("cope", "Golovneva et al. 2024, Contextual Position Encoding",
             "positions are counted, not given: gate g_ij = σ(q_i·k_j/√d), the position of key "
             "j for query i is p_ij = Σ g_im over the keys m from j to i (clamped to "
             "buckets - 1), and the logit gains q_i·e[p_ij]/√d, e a learned [d, buckets] "
             "table shared by the heads, interpolated between floor(p) and ceil(p). "
             "(D/heads)·buckets parameters.",
             params=lambda env: {"cope": (_head_width(env), env["buckets"])}),
)}
POSITIONS = tuple(ENCODINGS)


def position_params(env) -> dict[str, tuple[int, ...]]:
    """The parameters ``env["position"]`` adds to an attention."""
    return ENCODINGS[env["position"]].params(env)


def position_flops(env, T: int) -> int:
    """Floating-point operations per position of the encoding (T unknown: 1)."""
    encoding = ENCODINGS[env["position"]]
    if encoding.rotates:
        return 6 * env["D"] * (2 if encoding.name == "xpos" else 1)
    if encoding.name == "fire":
        return env["heads"] * T + 4 * FIRE_WIDTH * (env["heads"] + 1) * T
    if encoding.name == "cope":
        return 4 * env["D"] * T + 2 * env["D"] * env["buckets"]
    return env["heads"] * T if encoding.adds_bias else 0


def reference_text() -> str:
    """Every choice, one paragraph each, for attention's reference page."""
    return "\n".join(encoding.text() for encoding in ENCODINGS.values())


assert {e.name for e in ENCODINGS.values() if e.rotates} == {"rope", "xpos"}  # Attention's
assert {e.name for e in ENCODINGS.values() if e.adds_bias} == {  # literals, kept in step
    "alibi", "relative", "kerple", "kerple_power", "fire"}
