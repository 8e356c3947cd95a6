"""Every attention, every head: the real attention weights of each head of each
attention node on held-out sequences (token content included), and three scores per head:

- ``previous_token``: the mean weight from position t to t-1 (t = 1..T-1);
- ``induction``, for a task whose sequences repeat (`Task.copy_lengths`): the mean weight
  from each position t of the second copy (t = L..2L-1) to t-L+1, the token after the
  first occurrence of the current one;
- ``partner``, for a task with partners (`Task.partner`): the mean weight from t
  to its partner.

Each is declared once in `HEAD_SCORES` (its label, its definition, what the task needs and
the (query, key) pairs it averages over): the scores here, ``metrics.json``, the figures,
their captions and Compare all read that table, so adding a head score is one entry there.
Each is a mean over every (sequence, position) pair it looks at, pooled. A score that does
not apply to the task is left out of a head's entry (never null). The weights come from
`Attention.weights` on the input each attention gets in the built model, captured by
`probes.attention_inputs` (nothing re-implements the forward pass). Layers count the
attention nodes from 1 in stack order.

>>> weights = torch.zeros(1, 1, 4, 4)
>>> weights[0, 0, 0, 0] = 1.0
>>> weights[0, 0, 1:, :3] = torch.eye(3)  # every position looks one back
>>> head_score(weights, previous_token_pairs(4)).tolist()
[1.0]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from . import probes
from .score_maths import finite_score

__all__ = ["HeadScore", "HEAD_SCORES", "head_score_label", "head_score", "previous_token_pairs",
           "induction_pairs", "partner_pairs", "score_pairs", "model_head_scores",
           "head_scores", "one_sequence_attention", "largest", "head_sequences", "head_chunk"]


@dataclass(frozen=True)
class HeadScore:
    """One head score, declared once: its name (the key in ``metrics.json``), its label and
    definition (the figures' titles and captions), what a task needs for it, and the
    (query, key) pairs it averages the weights over."""

    name: str
    label: str  # "previous token"
    definition: str  # "the weight from t to t-1": how a caption words it
    needs: str  # what the task needs for it, in words ("every task")
    # (task, ids [N, T]) -> bool pairs [N or 1, T, T], or None when the task lacks what it needs
    pairs: Callable[[object, torch.Tensor], torch.Tensor | None]
    of_every_task: bool = False  # a caption names a task's own scores before these


HELD_OUT_SEQUENCES = 256  # held-out sequences the head scores average over


def head_score(weights: torch.Tensor, pairs: torch.Tensor) -> torch.Tensor:
    """The mean weight of each head over the (query, key) ``pairs``: ``weights`` is
    ``[N, H, T, T]`` (query down the side), ``pairs`` a bool ``[N or 1, T, T]``; ``[H]``
    (nan where ``pairs`` is empty)."""
    total, count = _pair_sums(weights, pairs)
    return total / count if count else torch.full_like(total, float("nan"))


def _pair_sums(weights: torch.Tensor, pairs: torch.Tensor) -> tuple[torch.Tensor, int]:
    """``(sum of each head's weights over pairs [H], number of pairs)``: what `head_score`
    divides, kept apart so chunks of sequences add up."""
    pairs = pairs.to(weights.device).expand(weights.shape[0], -1, -1)  # (N, T, T)
    total = (weights.double() * pairs[:, None]).sum((0, 2, 3))  # (H,)
    return total.cpu(), int(pairs.sum())


def previous_token_pairs(T: int) -> torch.Tensor:
    """``[1, T, T]``: (t, t-1) for t = 1..T-1."""
    return torch.ones(T - 1, dtype=torch.bool).diag(-1)[None] if T > 1 else \
        torch.zeros(1, T, T, dtype=torch.bool)


def induction_pairs(lengths: torch.Tensor, T: int) -> torch.Tensor:
    """``[N, T, T]``: (t, t-L+1) for the positions t = L..2L-1 (below T) of the second
    copy of each sequence, whose copy length L is ``lengths`` (``[N]``)."""
    L = lengths.reshape(-1, 1, 1).cpu()  # (N, 1, 1)
    t = torch.arange(T).reshape(1, T, 1)
    key = torch.arange(T).reshape(1, 1, T)
    return (t >= L) & (t <= 2 * L - 1) & (key == t - L + 1)


def partner_pairs(partners: list[int | None]) -> torch.Tensor:
    """``[1, T, T]``: (t, partner of t) for every t with a partner."""
    T = len(partners)
    pairs = torch.zeros(1, T, T, dtype=torch.bool)
    for t, partner in enumerate(partners):
        if partner is not None and 0 <= partner < T:
            pairs[0, t, partner] = True
    return pairs


def _declare(*scores: HeadScore) -> dict[str, HeadScore]:
    return {score.name: score for score in scores}


HEAD_SCORES: dict[str, HeadScore] = _declare(
    HeadScore("previous_token", "previous token", "the weight from t to t-1", "every task",
              lambda task, x: previous_token_pairs(x.shape[1]), of_every_task=True),
    HeadScore("induction", "induction", "the weight from each position of the second copy "
              "to the token after the first occurrence of its own (t-L+1)",
              "a task whose sequences repeat (Task.copy_lengths)",
              lambda task, x: (induction_pairs(task.copy_lengths(x), x.shape[1])
                               if task.copy_lengths is not None else None)),
    HeadScore("partner", "partner", "the weight on the task's partner",
              "a task with partners (Task.partner)",
              lambda task, x: (partner_pairs(task.partner(x.shape[1]))
                               if task.partner is not None else None)),
)


def head_score_label(name: str) -> str:
    """The words for head score ``name`` (its `HeadScore.label`; a name a newer version
    stored, unknown here, with spaces for underscores)."""
    found = HEAD_SCORES.get(name)
    return found.label if found is not None else name.replace("_", " ")


def score_pairs(task, x: torch.Tensor) -> dict[str, torch.Tensor]:
    """The (query, key) pairs of every head score that applies to ``task`` on held-out ids
    ``x`` (``[N, T]``): ``{score: bool [N or 1, T, T]}`` in `HEAD_SCORES` order."""
    found = {name: score.pairs(task, x) for name, score in HEAD_SCORES.items()}
    return {name: pairs for name, pairs in found.items() if pairs is not None}


def head_sequences(config) -> int:
    """Held-out sequences a run's head scores average over: at most one training batch."""
    return min(HELD_OUT_SEQUENCES, config.batch_size)


def head_chunk(task, T: int) -> int:
    """Sequences at once at length T when no run says (the task's own batch at its own
    length: a training step's worth of attention weights)."""
    return max(1, task.batch_size * task.default_seq_len ** 2 // T ** 2)


def model_head_scores(model, task, T: int, size: int = HELD_OUT_SEQUENCES,
                      chunk: int | None = None) -> dict[str, dict]:
    """Every head score of every attention node of ``model`` on ``size`` held-out sequences
    of length ``T``, ``chunk`` at a time: ``{node: {"layer": i, "heads": [{score: value}]}}``
    (values rounded, as JSON takes them). Empty for a stack without attention."""
    layers = model.layers("attention")
    if not layers:
        return {}
    x, _ = task.eval_set(T, size=size, device=next(model.parameters()).device)
    chunk = chunk or head_chunk(task, T)
    sums: dict[str, dict[str, list]] = {name: {} for name, _ in layers}
    for start in range(0, x.shape[0], chunk):
        part = x[start:start + chunk]  # (n, T)
        pairs = score_pairs(task, part)
        for name, weights in _weights(model, layers, part).items():
            for score, where in pairs.items():
                total, count = _pair_sums(weights, where)
                found = sums[name].setdefault(score, [0, 0])
                found[0], found[1] = found[0] + total, found[1] + count
    return {name: {"layer": index, "heads": _per_head(sums[name])}
            for index, (name, _) in enumerate(layers, start=1)}


def _weights(model, layers, x: torch.Tensor) -> dict[str, torch.Tensor]:
    """Each attention's weights on ids ``x``: ``{name: [N, H, T, T]}``."""
    inputs = probes.attention_inputs(model, layers, x)
    with torch.no_grad(), probes.evaluating(model):
        return {name: layer.weights(inputs[name]) for name, layer in layers}


def _per_head(sums: dict[str, list]) -> list[dict]:
    heads = len(next(iter(sums.values()))[0])
    return [{score: finite_score(float(total[h] / count) if count else None)
             for score, (total, count) in sums.items()} for h in range(heads)]


def head_scores(run) -> dict[str, dict]:
    """The ``attention`` block of ``metrics.json``: every head of every attention
    node, trained and at init (`Run.initial_head_scores`):
    ``{node: {"layer": i, "heads": [{score: {"value": x, "init": y}}]}}``."""
    now = model_head_scores(run.model, run.task, run.config.seq_len, head_sequences(run.config),
                            run.config.eval_chunk(run.config.seq_len))
    init = run.initial_head_scores()
    return {name: {"layer": entry["layer"], "heads": [
        {score: {"value": value, "init": init[name]["heads"][h].get(score)}
         for score, value in head.items()} for h, head in enumerate(entry["heads"])]}
        for name, entry in now.items()}


def largest(scores: dict[str, dict], score: str, key: str = "value") -> float | None:
    """The largest ``score`` of any head in `head_scores`' (``key``: "value" or "init") or
    `model_head_scores`' (``key=None``) entries; None when no head has it."""
    values = [head[score] if key is None else head[score][key]
              for entry in scores.values() for head in entry["heads"] if score in head]
    values = [value for value in values if value is not None]
    return max(values) if values else None


def one_sequence_attention(run, index: int = 0) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Held-out sequence ``index`` of ``run`` and every attention's weights on it:
    ``(ids [T], {node: [H, T, T]})``, on the CPU."""
    model = run.model
    layers = model.layers("attention")
    x, _ = run.task.eval_set(run.config.seq_len, size=index + 1,
                             device=next(model.parameters()).device)
    found = _weights(model, layers, x[index:index + 1])
    return x[index].cpu(), {name: weights[0].float().cpu() for name, weights in found.items()}
