"""The geometry of a table's rows: how alike they are (`similarity`) and where they lie
on their leading principal components (`pca`). Plain functions of a ``[N, D]`` table,
from training or from a file; `stacklab.lab.figures` draws them.

>>> table = torch.eye(4)
>>> similarity(table).diagonal().tolist()
[1.0, 1.0, 1.0, 1.0]
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...core.errors import StackError

__all__ = ["similarity", "PCA", "pca"]


def similarity(table: torch.Tensor, kind: str = "cosine") -> torch.Tensor:
    """``[N, N]`` similarity of the rows of a ``[N, D]`` table: ``cosine``, ``centred``
    (the cosine after subtracting the mean row: what is left once the part every row
    shares is gone) or ``dot``."""
    table = table.detach().float()
    if kind == "centred":
        table = table - table.mean(0, keepdim=True)
    if kind in ("cosine", "centred"):
        table = torch.nn.functional.normalize(table, dim=1)
    elif kind != "dot":
        raise ValueError(f"kind must be 'cosine', 'centred' or 'dot', not {kind!r}")
    return table @ table.T  # (N, N)


@dataclass(frozen=True)
class PCA:
    """Rows projected on their top principal components."""

    coords: torch.Tensor  # (N, k)
    explained: torch.Tensor  # (k,) fraction of the variance each component explains


def pca(table: torch.Tensor, k: int = 2, fit_rows: int | None = None) -> PCA:
    """Project the rows of ``table`` on the ``k`` leading principal components of its first
    ``fit_rows`` rows (default: all): fitted on the trained rows, the untrained ones do not
    bend the axes."""
    table = table.detach().double()  # double: large rows do not overflow the SVD
    fitted = table[:fit_rows] if fit_rows else table
    mean = fitted.mean(0, keepdim=True)
    centred = fitted - mean
    try:
        top, variance, total = _leading_components(centred, k)
    except RuntimeError as err:  # torch's LinAlgError: the decomposition did not converge
        raise StackError("E_VALUE", f"the principal components of the rows cannot be "
                         f"computed ({str(err).splitlines()[0][:120]})",
                         hint="check the table for extreme values") from None
    k = top.shape[0]
    coords = ((table - mean) @ top.T).float()  # (N, k)
    explained = (variance[:k] / total).float() if total > 0 else torch.zeros(k)
    return PCA(coords=coords, explained=explained)


def _leading_components(centred: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(the k leading right singular vectors (k, D), their variances, the total)`` of a
    centred ``(N, D)`` matrix. A table much wider than its rows (a real model's 1024 x 3880)
    is decomposed through its ``N x N`` Gram matrix, a few times cheaper than the SVD and
    exact: ``X Xᵀ = U S² Uᵀ`` and ``V = Xᵀ U / S``."""
    rows, cols = centred.shape
    if cols <= 2 * rows or rows < 2:
        _, s, v = torch.linalg.svd(centred, full_matrices=False)
        variance = s.square()
        return v[:min(k, v.shape[0])], variance, variance.sum()
    eigenvalues, u = torch.linalg.eigh(centred @ centred.T)  # ascending
    variance = eigenvalues.flip(0).clamp(min=0)
    k = min(k, rows)
    lead = u[:, -k:].flip(1)  # (N, k), largest first
    scale = variance[:k].sqrt().clamp(min=torch.finfo(centred.dtype).tiny)
    return (centred.T @ lead / scale).T, variance, variance.sum()
