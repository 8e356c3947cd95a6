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

from ..core.resolve import resolve
from ..ops.sin_pos import sinusoidal_table

__all__ = ["similarity", "positional_attention", "attention_map", "pca",
           "PCA", "length_probe", "LengthProbe", "sinusoidal_table"]


def similarity(table: torch.Tensor, kind: str = "cosine") -> torch.Tensor:
    """``[N, N]`` similarity of the rows of a ``[N, D]`` table: ``cosine`` or ``dot``."""
    table = table.detach().float()
    if kind == "cosine":
        table = torch.nn.functional.normalize(table, dim=1)
    elif kind != "dot":
        raise ValueError(f"kind must be 'cosine' or 'dot', not {kind!r}")
    return table @ table.T  # (N, N)


def _attention_after(run, node: str | None):
    """The first attention layer after ``node`` (from the start when ``node`` is None)."""
    names = [n.name for n in run.network.nodes]
    first = 0 if node is None else names.index(node) + 1
    return next((layer for name, layer in run.model.layers("attention")
                 if names.index(name) >= first), None)


def _table_rows(run, node: str, attention, rows: int | None) -> torch.Tensor:
    """The table's first rows as a batch of one, where and in the dtype the attention runs."""
    weight = next(attention.parameters())
    return run.table(node)[: rows or run.config.seq_len].to(weight.device, weight.dtype)[None]


def positional_attention(run, node: str) -> torch.Tensor | None:
    """Where each position would attend if only the position table spoke: softmax of the
    query-key scores of the table's first T rows, per head, averaged over heads (rows sum
    to 1). For ``reverse`` this is a bright anti-diagonal. ``None`` without attention."""
    attention = _attention_after(run, node)
    if attention is None:
        return None
    with torch.no_grad():
        weights = attention.weights(_table_rows(run, node, attention, None))  # (1, H, T, T)
    return weights[0].mean(0).float().cpu()  # (T, T)


def attention_map(run, node: str | None = None, size: int = 256) -> torch.Tensor | None:
    """The attention weights of the first attention (after ``node``), measured on held-out
    sequences and averaged over sequences and heads: ``[T, T]``, rows sum to 1."""
    attention = _attention_after(run, node)
    if attention is None:
        return None
    captured = {}
    hook = attention.register_forward_pre_hook(lambda _, args: captured.setdefault("x", args[0]))
    size = min(size, run.config.batch_size)  # no more memory than a training step
    x, _ = run.task.eval_set(run.config.seq_len, size=size,
                             device=next(run.model.parameters()).device)
    was_training = run.model.training
    run.model.train(False)
    try:
        with torch.no_grad():
            run.model(x)
            weights = attention.weights(captured["x"])  # (N, H, T, T)
    finally:
        hook.remove()
        run.model.train(was_training)
    return weights.mean((0, 1)).float().cpu()


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
        model.train(False)
        correct = torch.zeros(probe_len, device=x.device)
        chunk = run.config.batch_size  # no more memory than a training step
        with torch.no_grad():
            for start in range(0, size, chunk):
                logits = model(x[start:start + chunk])  # (chunk, probe_len, classes)
                target = y[start:start + chunk]
                correct += ((logits.argmax(-1) == target) & (target < classes)).float().sum(0)
        model.train()
        accuracy = (correct / size).cpu()  # (probe_len,)
    finally:
        model.use_network(original)
    return LengthProbe(trained_len=T, probe_len=probe_len, accuracy=accuracy)
