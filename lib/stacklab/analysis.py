"""What a position table learned: similarities, PCA, gradients, drift and the length probe.

All functions take plain tensors (a ``[max_len, D]`` table) or a `Run`, and return
tensors or small dataclasses; `stacklab.figures` turns them into plots.

>>> table = torch.eye(4)
>>> similarity(table).diagonal().tolist()
[1.0, 1.0, 1.0, 1.0]
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .ops.attention import Attention
from .ops.sin_pos import sinusoidal_table
from .resolve import resolve

__all__ = ["similarity", "query_key_similarity", "pca", "PCA", "length_probe", "LengthProbe",
           "sinusoidal_table"]


def similarity(table: torch.Tensor, kind: str = "cosine") -> torch.Tensor:
    """``[N, N]`` similarity of the rows of a ``[N, D]`` table: ``cosine`` or ``dot``."""
    table = table.detach().float()
    if kind == "cosine":
        table = torch.nn.functional.normalize(table, dim=1)
    elif kind != "dot":
        raise ValueError(f"kind must be 'cosine' or 'dot', not {kind!r}")
    return table @ table.T  # (N, N)


def query_key_similarity(run, node: str, rows: int | None = None) -> torch.Tensor | None:
    """How strongly position i's query matches position j's key, from the table alone.

    For the first attention after ``node``: ``(p Wq + bq)(p Wk + bk)^T / sqrt(D/heads)``,
    averaged over heads. ``None`` when no attention follows. This is the map attention
    reads the positions through, so patterns (an anti-diagonal for ``reverse``) show
    more plainly here than in the raw cosine map.
    """
    names = [n.name for n in run.network.nodes]
    after = names[names.index(node) + 1:]
    attention = next((run.model.get_submodule(n) for n in after
                      if isinstance(run.model.get_submodule(n), Attention)), None)
    if attention is None:
        return None
    table = run.table(node)[: rows or run.config.seq_len]  # (T, D)
    weight = attention.qkv.weight.detach().float().cpu()
    bias = attention.qkv.bias.detach().float().cpu()
    D = table.shape[1]
    q = table @ weight[:D].T + bias[:D]  # (T, D)
    k = table @ weight[D:2 * D].T + bias[D:2 * D]  # (T, D)
    H = attention.heads
    q = q.view(-1, H, D // H).transpose(0, 1)  # (H, T, D/H)
    k = k.view(-1, H, D // H).transpose(0, 1)
    scores = q @ k.transpose(1, 2) / (D // H) ** 0.5  # (H, T, T)
    return scores.mean(0)


@dataclass(frozen=True)
class PCA:
    """Rows projected on their top principal components."""

    coords: torch.Tensor  # (N, k)
    explained: torch.Tensor  # (k,) fraction of the variance each component explains


def pca(table: torch.Tensor, k: int = 2) -> PCA:
    """Project the rows of ``table`` on their ``k`` leading principal components."""
    table = table.detach().float()
    centered = table - table.mean(0, keepdim=True)
    _, s, v = torch.linalg.svd(centered, full_matrices=False)
    k = min(k, v.shape[0])
    coords = centered @ v[:k].T  # (N, k)
    variance = s.square()
    total = variance.sum()
    explained = variance[:k] / total if total > 0 else torch.zeros(k)
    return PCA(coords=coords, explained=explained)


@dataclass(frozen=True)
class LengthProbe:
    """Held-out accuracy at every position of sequences longer than the trained ones."""

    trained_len: int
    probe_len: int
    accuracy: torch.Tensor  # (probe_len,)

    @property
    def inside(self) -> float:
        """Mean accuracy over the trained positions."""
        return self.accuracy[: self.trained_len].mean().item()

    @property
    def beyond(self) -> float:
        """Mean accuracy past the trained length (nan when the probe is not longer)."""
        rest = self.accuracy[self.trained_len:]
        return rest.mean().item() if rest.numel() else float("nan")


def length_probe(run, probe_len: int | None = None, size: int = 512) -> LengthProbe:
    """Re-resolve the run's stack for a longer T and measure accuracy per position.

    The same module serves the longer input (``T <= max_len``): rows past the trained
    length were never trained, so accuracy falls off a cliff there. ``probe_len`` defaults
    to the largest length every position table allows (at most twice the trained length).
    """
    T = run.config.seq_len
    if probe_len is None:
        capacity = [run.model.get_submodule(n).max_len for n in run.position_nodes] or [2 * T]
        probe_len = min(min(capacity), 2 * T)
    task = run.task
    if task.n_classes(probe_len) != task.n_classes(T):
        # e.g. `position`: more positions would need more classes; probe what the head can say
        classes = task.n_classes(T)
    else:
        classes = task.n_classes(probe_len)
    network = resolve(run.network.source, ["B", probe_len], input_dtype="int64",
                      dtype=run.network.dtype)
    model = run.model
    original = model.network
    model.use_network(network)
    try:
        x, y = task.eval_set(probe_len, size=size, device=next(model.parameters()).device)
        model.eval()
        with torch.no_grad():
            logits = model(x)  # (N, probe_len, classes)
        model.train()
        correct = (logits.argmax(-1) == y) & (y < classes)
        accuracy = correct.float().mean(0).cpu()  # (probe_len,)
    finally:
        model.use_network(original)
    return LengthProbe(trained_len=T, probe_len=probe_len, accuracy=accuracy)
