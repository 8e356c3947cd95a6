"""The two run settings that reach position encodings from outside a stack: randomized
positions while training (Ruoss et al. 2023) and RoPE scaling while evaluating.

The modules that take them (`attention`, `pos_embed`, `sin_pos`) have a ``positions``
attribute, and `attention` a ``rope_scaling`` one; these context managers set them on
every such module of a model for the block and put them back after.

>>> from stacklab import resolve
>>> model = resolve("pos_embed(64)", ["B", 4, 8]).build(seed=0)
>>> where = random_positions(4, 64, torch.Generator().manual_seed(0))
>>> bool((where.diff() > 0).all()) and int(where.max()) < 64
True
"""

from __future__ import annotations

import contextlib

import torch
from torch import nn

from ..core.errors import StackError
from .rotary import SCALINGS


def random_positions(length: int, span: int, generator: torch.Generator) -> torch.Tensor:
    """A sorted random subset of ``length`` positions out of 0 .. span-1 (Ruoss et al.'s
    randomized positional encoding; ``span`` at least ``length``). (length,) int64."""
    return torch.randperm(max(span, length), generator=generator)[:length].sort().values


@contextlib.contextmanager
def positions_at(model: nn.Module, positions: torch.Tensor | None):
    """Inside the block every position-taking module of ``model`` reads ``positions``
    (T,) instead of 0..T-1 (None: nothing changes). A position past a table's ``max_len``
    is ``E_ARG``."""
    takers = [m for m in model.modules() if hasattr(m, "positions")]
    if positions is None or not takers:
        yield model
        return
    for module in takers:
        capacity = getattr(module, "max_len", None)
        if capacity is not None and int(positions.max()) >= capacity:
            raise StackError("E_ARG", f"random_positions draws positions up to "
                             f"{int(positions.max())}, past the table's max_len={capacity}",
                             hint=f"set random_positions to at most {capacity}, or give the "
                                  "table more rows")
    for module in takers:
        module.positions = positions
    try:
        yield model
    finally:
        for module in takers:
            module.positions = None


@contextlib.contextmanager
def rope_scaled(model: nn.Module, method: str, factor: float | None, trained_len: int):
    """Inside the block every rotating attention of ``model`` stretches its rotations by
    ``method`` (`SCALINGS`: linear, ntk, yarn; none changes nothing) and ``factor`` (None:
    each evaluated length over ``trained_len``)."""
    if method not in SCALINGS:
        raise StackError("E_ARG", f"rope_scaling must be one of {', '.join(SCALINGS)}, "
                         f"not {method!r}", hint="e.g. rope_scaling=yarn")
    takers = [m for m in model.modules() if hasattr(m, "rope_scaling")]
    for module in takers:
        module.rope_scaling = (method, factor, trained_len)
    try:
        yield model
    finally:
        for module in takers:
            module.rope_scaling = ("none", None, 0)
