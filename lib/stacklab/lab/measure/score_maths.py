"""Scores of a position table: every picture has a number.

Each function takes the trained rows ``P`` of a table (``[T, D]``, rows ``0..T-1``) or a
``[T, T]`` matrix computed from them, and returns plain floats, so the same numbers come
out for a table trained here, a table read from a file, or its initial values.

Wang et al. ("On Position Embeddings in BERT", ICLR 2021) ask three things of a proximity
``phi(x, y)`` between positions; here ``phi`` is the dot product of rows x and y:

- **translation invariance**: ``phi(x, x+m)`` depends on the offset m only, not on x.
  Scored as the share of the variance of ``phi`` over all pairs ``x != y`` that the offset
  ``y - x`` alone explains (1: every diagonal of the matrix is constant);
- **monotonicity**: the further apart, the less alike. Scored as the Spearman correlation
  between the distance m and ``-phi(x, x+m)``, for every x looking forward and looking
  back, averaged (1: proximity falls strictly with distance; 0: no order);
- **symmetry**: ``phi(x, y) == phi(y, x)``. A dot product of rows is symmetric by
  construction, so this is scored on the attention's query-key scores of the rows when an
  attention follows the table (Pearson correlation of the score matrix with its transpose,
  1: symmetric), and is 1 otherwise.

>>> import torch
>>> round(period_contrast(torch.eye(8).repeat(4, 1), 8), 3)  # rows 8 apart identical
1.0
"""

from __future__ import annotations

import torch

__all__ = ["cosine_matrix", "centred_cosine_matrix", "cosine_by_distance",
           "translation_invariance", "monotonicity", "symmetry", "position_probe_error",
           "partner_attention", "period_contrast", "distance_rank", "rows_decoded", "spearman",
           "finite_score"]


def finite_score(value):
    """A score as JSON takes it: rounded, nan as None, lists element-wise."""
    if isinstance(value, list):
        return [finite_score(v) for v in value]
    if value is None or value != value or value in (float("inf"), float("-inf")):
        return None
    return round(float(value), 6)


def cosine_matrix(rows: torch.Tensor) -> torch.Tensor:
    """``[T, T]`` cosine similarity of the rows."""
    rows = torch.nn.functional.normalize(rows.detach().double(), dim=1)
    return rows @ rows.T


def centred_cosine_matrix(rows: torch.Tensor) -> torch.Tensor:
    """Cosine of the rows after subtracting their mean row: what is left once the part
    every row shares (e.g. the sinusoid's nearly constant low-frequency columns) is gone."""
    rows = rows.detach().double()
    return cosine_matrix(rows - rows.mean(0, keepdim=True))


def cosine_by_distance(rows: torch.Tensor) -> list[float]:
    """Mean cosine of the row pairs at distance 1, 2, ..., T-1 (a list of T-1 values)."""
    cosine = cosine_matrix(rows)
    return [cosine.diagonal(m).mean().item() for m in range(1, cosine.shape[0])]


def _ranks(values: torch.Tensor) -> torch.Tensor:
    """Ranks (0-based) of a 1-D tensor; tied values share their average rank."""
    unique, inverse, counts = values.unique(sorted=True, return_inverse=True, return_counts=True)
    first = counts.cumsum(0) - counts  # the rank of each unique value's first occurrence
    return (first + (counts - 1) / 2).double()[inverse]


def pearson(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double() - a.double().mean(), b.double() - b.double().mean()
    denominator = (a.norm() * b.norm()).item()
    return (a @ b).item() / denominator if denominator > 0 else 0.0


def spearman(a: torch.Tensor, b: torch.Tensor) -> float:
    """Spearman rank correlation of two 1-D tensors (0 when either is constant)."""
    return pearson(_ranks(a.double().flatten()), _ranks(b.double().flatten()))


def translation_invariance(rows: torch.Tensor) -> float:
    """Share of the variance of the rows' dot products (pairs ``x != y``) explained by the
    offset ``y - x`` alone; 1 for a table whose dot products depend only on the offset."""
    dots = rows.detach().double() @ rows.detach().double().T
    T = dots.shape[0]
    if T < 3:
        return float("nan")
    off = ~torch.eye(T, dtype=torch.bool)
    total = (dots[off] - dots[off].mean()).square().sum().item()
    within = sum((dots.diagonal(m) - dots.diagonal(m).mean()).square().sum().item()
                 for m in range(-(T - 1), T) if m != 0)
    return 1.0 - within / total if total > 0 else float("nan")  # all alike: nothing to explain


def monotonicity(rows: torch.Tensor) -> float:
    """Mean Spearman correlation between the distance m and ``-phi(x, x±m)``, over every x
    and both directions that reach at least three positions."""
    dots = rows.detach().double() @ rows.detach().double().T
    T = dots.shape[0]
    found = []
    for x in range(T):
        for ahead in (dots[x, x + 1:], dots[x, :x].flip(0)):
            if ahead.numel() >= 3:
                distance = torch.arange(1, ahead.numel() + 1, dtype=torch.double)
                found.append(spearman(distance, -ahead))
    return sum(found) / len(found) if found else float("nan")


def symmetry(scores: torch.Tensor | None) -> float:
    """Pearson correlation of a ``[T, T]`` score matrix with its transpose (off the
    diagonal); 1 for None (a dot product of rows, symmetric by construction)."""
    if scores is None:
        return 1.0
    T = scores.shape[0]
    off = ~torch.eye(T, dtype=torch.bool)
    return pearson(scores[off], scores.T[off])


def position_probe_error(rows: torch.Tensor) -> float:
    """Mean absolute error, in positions, of a linear probe from a row to its index, fitted
    on the even rows (least squares with a small ridge) and tested on the odd ones, each
    guess clipped to ``0..T-1``. 0: the index is a linear function of the row; about T/3:
    no better than a guess.

    A table wider than its even rows is solved in the dual form (the same ridge solution
    through the rows' ``[T/2, T/2]`` Gram matrix instead of the ``[D+1, D+1]`` one), so the
    cost is at most ``T² · D``, never ``D³``: an upload's width cannot take the server."""
    rows = rows.detach().double()
    T = rows.shape[0]
    if T < 4:
        return float("nan")
    scale = rows.std()
    if scale > 0:
        rows = rows / scale  # the same table at any scale gets the same probe
    index = torch.arange(T, dtype=torch.double)
    features = torch.cat([rows, torch.ones(T, 1, dtype=torch.double)], dim=1)  # (T, D+1)
    train, test = features[0::2], features[1::2]
    # the ridge: a thousandth of the mean diagonal of train.T @ train (its trace / (D+1))
    ridge = 1e-3 * train.square().sum() / train.shape[1]
    if train.shape[1] <= train.shape[0]:  # primal: (D+1, D+1)
        gram = train.T @ train
        eye = torch.eye(gram.shape[0], dtype=torch.double)
        guess = test @ torch.linalg.solve(gram + ridge * eye, train.T @ index[0::2])
    else:  # dual: w = train.T @ (train @ train.T + ridge I)^-1 y, (T/2, T/2)
        gram = train @ train.T
        eye = torch.eye(gram.shape[0], dtype=torch.double)
        guess = (test @ train.T) @ torch.linalg.solve(gram + ridge * eye, index[0::2])
    return (guess.clamp(0, T - 1) - index[1::2]).abs().mean().item()


def partner_attention(weights: torch.Tensor, partners: list[int | None]) -> float:
    """Mean attention-by-position weight from each position t to ``partners[t]`` (positions
    whose partner is None are left out)."""
    rows = [t for t, partner in enumerate(partners) if partner is not None]
    columns = [partners[t] for t in rows]
    return weights[torch.tensor(rows), torch.tensor(columns)].double().mean().item()


def period_contrast(rows: torch.Tensor, period: int) -> float:
    """Mean cosine of row pairs whose distance is a multiple of ``period``, minus the mean
    cosine of all other pairs (pairs ``x != y``)."""
    cosine = cosine_matrix(rows)
    T = cosine.shape[0]
    index = torch.arange(T)
    distance = (index[:, None] - index[None, :]).abs()
    off = distance > 0
    same = off & (distance % period == 0)
    other = off & (distance % period != 0)
    if not same.any() or not other.any():
        return float("nan")
    return cosine[same].mean().item() - cosine[other].mean().item()


def distance_rank(rows: torch.Tensor) -> float:
    """Spearman correlation between a pair's cosine and minus its distance (pairs x < y)."""
    cosine = cosine_matrix(rows)
    T = cosine.shape[0]
    upper = torch.triu_indices(T, T, offset=1)
    if upper.shape[1] < 2:
        return float("nan")
    distance = (upper[1] - upper[0]).double()
    return spearman(cosine[upper[0], upper[1]], -distance)


def rows_decoded(logits: torch.Tensor) -> float:
    """Fraction of rows t whose scores (``[T, classes]``, each row fed alone through the
    rest of the stack) pick class t."""
    T = logits.shape[0]
    return (logits.argmax(-1) == torch.arange(T, device=logits.device)).double().mean().item()
