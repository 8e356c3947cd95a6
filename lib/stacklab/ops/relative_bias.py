"""Encodings that add to attention's logits: ALiBi, T5's relative buckets, Kerple, FIRE
and CoPE.

Not an op of its own: `attention`'s ``position=`` calls these, and the export copies them
into a standalone file (so they use only ``math``, ``torch`` and ``nn``).
"""

from __future__ import annotations

import math

import torch
from torch import nn


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


def kerple_bias(distance: torch.Tensor, r1: torch.Tensor, r2: torch.Tensor,
                power: bool = False) -> torch.Tensor:
    """Kerple's (Chi et al. 2022) bias per head of each distance |i - j| (T, T) -> (H, T, T):
    logarithmic ``-r1·log(1 + r2·|i-j|)``, or with ``power`` ``-r1·|i-j|^r2``; r1, r2 > 0
    per head (r2 <= 2 for the power variant), clamped there as the paper's code does."""
    r1 = r1.clamp(min=1e-2)[:, None, None]
    if power:
        return -r1 * distance[None].float() ** r2.clamp(1e-2, 2.0)[:, None, None]
    return -r1 * torch.log1p(r2.clamp(min=1e-2)[:, None, None] * distance[None].float())


class Fire(nn.Module):
    """FIRE (Li et al. 2023): a bias per head that an MLP computes from the log-transformed
    offset, normalised by the query's position:
    ``b(i, j) = f(ψ(i - j) / ψ(max(i, L)))`` with ``ψ(x) = log(c·|x| + 1)``, ``f`` a
    1 → width → heads MLP, c learned (0.1 at init) and L = 512 times a learned multiplier
    (so below 512 positions the normaliser is fixed)."""

    def __init__(self, heads: int, width: int = 32, threshold: float = 512.0,
                 dtype: torch.dtype = torch.float32):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(1, width, dtype=dtype), nn.ReLU(),
                                 nn.Linear(width, heads, dtype=dtype))
        self.c = nn.Parameter(torch.tensor(0.1, dtype=dtype))
        self.threshold_scale = nn.Parameter(torch.tensor(1.0, dtype=dtype))
        self.threshold = threshold

    def forward(self, positions: torch.Tensor) -> torch.Tensor:  # (T,) -> (H, T, T)
        where = positions.to(self.c.dtype)
        offset = where[:, None] - where[None, :]  # query minus key: (T, T)
        normaliser = torch.maximum(where, (self.threshold_scale * self.threshold).abs())
        distance = torch.log(torch.abs(self.c * offset) + 1)
        normaliser = torch.log(torch.abs(self.c * normaliser) + 1)[:, None]  # (T, 1)
        return self.mlp((distance / (normaliser + 1e-6))[..., None]).permute(2, 0, 1)


def cope_logits(q: torch.Tensor, k: torch.Tensor, position_logits: torch.Tensor,
                causal: bool) -> torch.Tensor:
    """CoPE's (Golovneva et al. 2024) addition to the logits, before the division by
    √d: gates ``g_ij = σ(q_i·k_j / √d)``; the contextual position of key j for query i
    counts the gates between them, ``p_ij = Σ_{m=j..i} g_im`` (with no causal mask, the
    keys between i and j on either side); clamped to the last of the P learned positions,
    it is a fractional index into ``q_i·E`` (E: (d, P)), interpolated between floor and
    ceil. q, k (B, H, T, d) -> (B, H, T, T)."""
    d, P = q.shape[-1], position_logits.shape[-1]
    gates = torch.sigmoid(q @ k.transpose(-1, -2) / math.sqrt(d))  # (B, H, T, T)
    T = gates.shape[-1]
    if causal:
        gates = gates * torch.ones(T, T, device=q.device, dtype=gates.dtype).tril()
    running = gates.cumsum(-1)  # Σ_{m<=j} g_im
    where = torch.arange(T, device=q.device)
    low, high = torch.minimum(where[:, None], where[None, :]), torch.maximum(where[:, None],
                                                                            where[None, :])
    between = running.gather(-1, high.expand_as(running)) - running.gather(
        -1, low.expand_as(running)) + gates.gather(-1, low.expand_as(running))
    positions = between.clamp(max=P - 1)  # (B, H, T, T)
    fixed = q @ position_logits.to(q.dtype)  # (B, H, T, P): q_i·E[:, p] for whole p
    floor, ceil = positions.floor().long(), positions.ceil().long()
    weight = positions - floor
    return fixed.gather(-1, ceil) * weight + fixed.gather(-1, floor) * (1 - weight)
