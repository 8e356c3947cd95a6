"""Rotary encodings of queries and keys: RoPE, partial RoPE, xPos, and RoPE scaling at
evaluation (position interpolation, NTK-aware, YaRN).

Not an op of its own: `attention`'s ``position="rope"`` and ``"xpos"`` call these, and
the export copies them into a standalone file (so they use only ``math`` and ``torch``).
"""

from __future__ import annotations

import math

import torch

# (constants are default arguments, so the functions stand alone in an exported file)
SCALINGS = ("none", "linear", "ntk", "yarn")


def rotated_width(width: int, fraction: float) -> int:
    """How many of a head's ``width`` features turn: ``fraction`` of them, rounded down to
    an even count (GPT-NeoX's ``rotary_pct``); at least 2 when any turn."""
    return max(2, int(width * fraction) // 2 * 2) if fraction > 0 else 0


def rope_frequencies(width: int, scaling: str = "none", factor: float = 1.0,
                     trained_len: int = 0, base: float = 10000.0, ramp: tuple = (1.0, 32.0),
                     ) -> tuple[torch.Tensor, float]:
    """The angle per position of each of the ``width / 2`` rotated pairs, ``θ_i =
    10000^(-2i/width)``, and the factor the logits' temperature gets, for a RoPE
    evaluated at ``factor`` times the length ``trained_len`` it was trained at:

    - ``linear`` (position interpolation, Chen et al. 2023): θ_i / factor.
    - ``ntk`` (NTK-aware): the base becomes 10000·factor^(width/(width-2)).
    - ``yarn`` (Peng et al. 2023): pairs that turn more than β=32 times over
      ``trained_len`` keep θ_i, those turning fewer than α=1 times are interpolated
      (θ_i / factor), with a linear ramp over the pairs between (the ramp by pair index
      of the paper's code; the paper writes it over the turns); q and k are each scaled
      by 0.1·ln(factor) + 1.
    """
    half = width // 2
    exponent = torch.arange(half, dtype=torch.float32) / max(half, 1)  # 2i / width
    if scaling == "ntk" and factor > 1 and width > 2:
        return (base * factor ** (width / (width - 2))) ** -exponent, 1.0
    theta = base ** -exponent  # (width/2,)
    if scaling == "linear" and factor > 1:
        return theta / factor, 1.0
    if scaling == "yarn" and factor > 1:
        def pair_turning(turns: float) -> float:  # the (fractional) pair that turns `turns` times
            return width * math.log(trained_len / (turns * 2 * math.pi)) / (2 * math.log(base))

        low = max(math.floor(pair_turning(ramp[1])), 0)
        high = min(math.ceil(pair_turning(ramp[0])), width - 1)
        interpolated = ((torch.arange(half) - low) / max(high - low, 1e-3)).clamp(0, 1)
        return (theta / factor * interpolated + theta * (1 - interpolated),
                0.1 * math.log(factor) + 1.0)
    return theta, 1.0


def xpos_decay(width: int, positions: torch.Tensor, scale_base: float = 512.0) -> torch.Tensor:
    """xPos's (Sun et al. 2022) factor per position and pair: ``ζ_i^(n / 512)`` with
    ``ζ_i = (2i/width + 0.4) / 1.4``, positions ``n`` centred on the sequence as
    torchscale centres them; queries are multiplied by it, keys divided, so a logit decays
    as ζ^((m - n) / 512) with the distance. (T, width/2)."""
    zeta = (torch.arange(0, width, 2, dtype=torch.float32, device=positions.device)
            + 0.4 * width) / (1.4 * width)  # (width/2,)
    centred = positions.float() - (positions.shape[0] + 1) // 2  # torchscale: -ceil(T/2) ..
    return zeta[None, :] ** (centred[:, None] / scale_base)  # (T, width/2)


def rope_rotate(x: torch.Tensor, offset: int = 0, *, fraction: float = 1.0,
                positions: torch.Tensor | None = None, theta: torch.Tensor | None = None,
                gain: torch.Tensor | float = 1.0) -> torch.Tensor:
    """Rotary position encoding of queries or keys ``x`` (B, H, T, d): the first
    ``rotated_width(d, fraction)`` = r features are split in two halves, and pair i
    (x[i], x[i + r/2]) is turned by the angle ``position · θ_i`` (``θ`` from
    `rope_frequencies`; positions ``offset ..`` unless given) and multiplied by ``gain``
    (xPos's decay, YaRN's temperature; 1 for RoPE). The other d - r features pass
    unchanged. A query-key product then depends on the two positions only through their
    difference."""
    d, T = x.shape[-1], x.shape[-2]
    r = rotated_width(d, fraction)
    if positions is None:
        positions = torch.arange(offset, offset + T, device=x.device)
    if theta is None:
        theta = rope_frequencies(r)[0]
    angle = positions.float()[:, None] * theta.to(x.device)[None, :]  # (T, r/2)
    cos, sin = (angle.cos() * gain).to(x.dtype), (angle.sin() * gain).to(x.dtype)
    first, second, rest = x[..., : r // 2], x[..., r // 2: r], x[..., r:]
    return torch.cat([first * cos - second * sin, first * sin + second * cos, rest], dim=-1)
