"""The inputs and labels of the length-generalization tasks (issue 32): ``addition``,
``copy`` and ``selective_copy``, declared as `Task` rows in `stacklab.lab.tasks`.

Each is the same rule at any length, so a model trained at T can be evaluated at 2T and
4T (``eval_lengths``): more digits to add, a longer string to copy, more noise between
the tokens to pick out.

>>> x = torch.tensor([[4, 9, PLUS, 3, 8, EQUALS, ANSWER, ANSWER, ANSWER]])
>>> [DIGIT_TEXT[int(i)] for i in x[0]]  # 94 + 83, lowest digit first, 3 answer slots
['4', '9', '+', '3', '8', '=', '?', '?', '?']
>>> [int(v) for v in addition_rule(x)[0, 6:]]  # 177, lowest digit first
[7, 7, 1]
"""

from __future__ import annotations

import torch

IGNORE = -100  # as `stacklab.lab.tasks.IGNORE`: a position left out of the loss

# addition's tokens: the digits 0-9, then the answer slot, plus, equals and padding
ANSWER, PLUS, EQUALS, ADD_PAD = 10, 11, 12, 13
DIGIT_TEXT = [str(d) for d in range(10)] + ["?", "+", "=", "_"]
# copy's tokens: 10 symbols, then the blank that stands where the copy goes
COPY_SYMBOLS = 10
COPY_BLANK = COPY_SYMBOLS
# selective_copy's tokens: noise 0, the tokens to pick out 1..8, the query slot 9
NOISE, PICKED, QUERY = 0, 8, 9
SELECT_COUNT = 4  # how many tokens selective_copy picks out, at any length


def addition_digits(T: int) -> int:
    """How many digits each operand has at length T: a + b = c takes 3n + 3 positions."""
    return max(1, (T - 3) // 3)


def addition_inputs(batch: int, T: int, generator: torch.Generator) -> torch.Tensor:
    """``a + b =`` with n-digit operands written lowest digit first (reversed, as the
    length-generalization papers write them), then n + 1 answer slots and padding."""
    n = addition_digits(T)
    a = torch.randint(0, 10, (batch, n), generator=generator)  # (B, n) lowest digit first
    b = torch.randint(0, 10, (batch, n), generator=generator)
    column = lambda token: torch.full((batch, 1), token)  # noqa: E731
    return torch.cat([a, column(PLUS), b, column(EQUALS), torch.full((batch, n + 1), ANSWER),
                      torch.full((batch, T - 3 * n - 3), ADD_PAD)], dim=1)  # (B, T)


def addition_rule(x: torch.Tensor) -> torch.Tensor:
    """The label of answer slot i is digit i of a + b (lowest first, the schoolbook sum);
    every other position is `IGNORE`."""
    n = addition_digits(x.shape[1])
    a, b = x[:, :n], x[:, n + 1: 2 * n + 1]  # (B, n) each
    carry = torch.zeros_like(x[:, 0])
    digits = []
    for place in range(n):
        total = a[:, place] + b[:, place] + carry
        digits.append(total % 10)
        carry = total // 10
    y = torch.full_like(x, IGNORE)
    y[:, 2 * n + 2: 3 * n + 3] = torch.stack(digits + [carry], dim=1)  # (B, n + 1)
    return y


def addition_partner(T: int) -> list[int | None]:
    """Answer digit i (at 2n + 2 + i) finds a's digit i (at i), the column it adds; the
    last answer digit (the final carry) and every other position have none."""
    n = addition_digits(T)
    return [t - 2 * n - 2 if 2 * n + 2 <= t < 3 * n + 2 else None for t in range(T)]


def copy_inputs(batch: int, T: int, generator: torch.Generator) -> torch.Tensor:
    """A string of T/2 random symbols, then T - T/2 blanks."""
    L = max(1, T // 2)
    string = torch.randint(0, COPY_SYMBOLS, (batch, L), generator=generator)
    return torch.cat([string, torch.full((batch, T - L), COPY_BLANK)], dim=1)  # (B, T)


def copy_rule(x: torch.Tensor) -> torch.Tensor:
    """Each blank's label is the symbol T/2 places back (the string again); the string's
    own positions are `IGNORE`."""
    T = x.shape[1]
    L = max(1, T // 2)
    y = torch.full_like(x, IGNORE)
    y[:, L:] = x[:, : T - L]
    return y


def copy_partner(T: int) -> list[int | None]:
    """A blank at t >= T/2 finds t - T/2, the symbol it copies."""
    L = max(1, T // 2)
    return [t - L if t >= L else None for t in range(T)]


def selective_copy_inputs(batch: int, T: int, generator: torch.Generator) -> torch.Tensor:
    """Four tokens (1..8) at random places among noise (0) in the first T - 4 positions,
    then 4 query slots."""
    k = SELECT_COUNT
    room = max(T - k, k)
    places = torch.rand(batch, room, generator=generator).argsort(1)[:, :k]  # (B, k)
    tokens = torch.randint(1, PICKED + 1, (batch, k), generator=generator)
    x = torch.full((batch, room), NOISE).scatter(1, places, tokens)
    return torch.cat([x, torch.full((batch, k), QUERY)], dim=1)[:, -T:]  # (B, T)


def selective_copy_rule(x: torch.Tensor) -> torch.Tensor:
    """Query slot i's label is the i-th token (not noise) in order of place; every other
    position is `IGNORE`."""
    k = SELECT_COUNT
    picked = (x > NOISE) & (x < QUERY)  # (B, T): exactly k per sequence
    order = torch.where(picked, torch.arange(x.shape[1], device=x.device), x.shape[1])
    first = order.sort(1).values[:, :k].clamp(max=x.shape[1] - 1)  # (B, k) places in order
    y = torch.full_like(x, IGNORE)
    y[:, -k:] = x.gather(1, first)
    return y
