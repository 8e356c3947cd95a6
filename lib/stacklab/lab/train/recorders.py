"""Recorders: what a training run keeps besides the model, hooked into the trainer's events.

A recorder (`Recorder`) has an ``attach(trainer)`` that registers its callbacks, and a
``kept_bytes(network, config)`` that says, before the run, how many bytes it will keep:
the run's plan (`stacklab.lab.train.plan`) charges the sum over the recorders a trainer
attaches against `Budgets.kept_bytes`. The trainer attaches its recorders before any other
callback. `PositionTableRecorder` is the one every run has by default: for every layer
whose op declares the ``position_table`` role it keeps the initial table and its scores,
snapshots during training (with the attention-by-position map when an attention follows
the table), and the per-row gradient norm summed over steps, and it rolls back with the
model when a run diverges.

>>> import stacklab
>>> run = stacklab.train(task="position", steps=20)
>>> run.position_nodes, len(run.snapshots["n1"]), bool((run.row_grad_norm["n1"][16:] == 0).all())
(['n1'], 21, True)
"""

from __future__ import annotations

import math
from typing import Callable, Protocol, runtime_checkable

import torch

from ...core.errors import StackError
from ...core.network import Network
from ..measure import probes, run_scores
from ..settings import TrainConfig
from .record import Run

FLOAT32_BYTES = 4  # every tensor the recorder keeps is float32, whatever the model's dtype


class Events(Protocol):
    """What a recorder attaches to: the trainer's events (`stacklab.Trainer`)."""

    EVENTS: tuple[str, ...]

    def add_callback(self, event: str, fn: Callable[[Run], None]) -> None: ...


@runtime_checkable
class Recorder(Protocol):
    """What a run keeps besides its model, hooked into the trainer's events."""

    def attach(self, trainer: Events) -> None:
        """Register this recorder's callbacks with ``trainer.add_callback``."""

    def kept_bytes(self, network: Network, config: TrainConfig) -> int:
        """The most bytes this recorder keeps over a run of ``network`` with ``config``
        (filled), counted before anything is allocated (the budget charges it)."""


class PositionTableRecorder:
    """Initial tables, snapshots and summed row gradient norms of every position table.

    It fills ``run.initial_tables``, ``run.initial_scores`` (`run_scores.model_scores` of
    the model as built), ``run.snapshots`` (``[(step, table[:SNAPSHOT_ROWS])]``, at most
    `most_frames` of them, the first at step 0 and the last of the model the run ends
    with), ``run.attention_snapshots`` (the `probes.positional_attention` map at the same
    steps, for tables an attention follows) and, when the run ends, ``run.row_grad_norm``.
    `kept_bytes` says, before a run, how much of it that is.
    """

    MAX_SNAPSHOTS = 40  # snapshots spread over the run, besides step 0 and the last step
    SNAPSHOT_ROWS = 4096  # rows kept per snapshot: enough for any trained length plus spare rows

    @classmethod
    def snapshot_interval(cls, steps: int) -> int:
        """Steps between two snapshots: at most `MAX_SNAPSHOTS` over ``steps``."""
        return max(1, math.ceil(steps / cls.MAX_SNAPSHOTS))

    @classmethod
    def most_frames(cls, steps: int) -> int:
        """The most snapshots a run of ``steps`` keeps per table: step 0, one every
        `snapshot_interval` steps and the last step (a run of at most `MAX_SNAPSHOTS`
        steps keeps one fewer: step 0 and each step)."""
        return min(steps, cls.MAX_SNAPSHOTS) + 2

    @classmethod
    def kept_bytes(cls, network: Network, config: TrainConfig) -> int:
        """Bytes this recorder keeps for a run of ``network`` with ``config`` (filled),
        counted from the network before anything is allocated: per position table its
        initial copy and the summed row gradient norms (every row), `most_frames`
        snapshots of its first `SNAPSHOT_ROWS` rows and, when an attention follows it, a
        ``[T, T]`` attention map per snapshot.

        An upper bound. The slack is in the frames: a run that trains every step keeps
        one frame (a snapshot and its map) per table fewer than `most_frames` when its
        steps are at most `MAX_SNAPSHOTS` or a multiple of `MAX_SNAPSHOTS` (the defaults),
        and at worst about half of them otherwise (41 steps: 22 frames). That frame also
        covers the recorder's copy of the summed norms at the last good state."""
        frames = cls.most_frames(config.steps)
        T = config.seq_len
        total = 0
        for index, node in enumerate(network.nodes):
            if node.spec.role == "position_table":
                rows, dim = dict(node.params)["weight"]
                total += FLOAT32_BYTES * (rows * dim + rows
                                          + frames * min(rows, cls.SNAPSHOT_ROWS) * dim)
                if any(later.spec.role == "attention" for later in network.nodes[index + 1:]):
                    total += FLOAT32_BYTES * frames * T * T
        return total

    def __init__(self):
        self.tables: list = []  # (node name, layer) of every position table
        self.grad_sum: dict[str, torch.Tensor] = {}  # per node: (max_len,) summed row norms
        self.good_grad_sum: dict[str, torch.Tensor] = {}  # the sums at the last good state
        self.snapshot_every = 1

    def attach(self, trainer: Events) -> None:
        """Register a callback for every trainer event this recorder has a method for."""
        for event in trainer.EVENTS:
            if hasattr(self, event):
                trainer.add_callback(event, getattr(self, event))

    def on_start(self, run: Run) -> None:
        self.tables = run.model.layers("position_table")  # [(node name, module)]
        run.initial_tables = {name: layer.weight.detach().float().cpu().clone()
                              for name, layer in self.tables}
        device = next(run.model.parameters()).device
        self.grad_sum = {name: torch.zeros(layer.max_len, device=device)
                         for name, layer in self.tables}
        self.good_grad_sum = _copy(self.grad_sum)
        self.snapshot_every = self.snapshot_interval(run.config.steps)
        T = run.config.seq_len
        run.initial_scores = {name: run_scores.model_scores(run.model, name, T, run.task)
                              for name, _ in self.tables}
        run.snapshots = {name: [] for name, _ in self.tables}
        run.attention_snapshots = {}
        for name, _ in self.tables:
            try:
                if probes.attention_after(run.model, name) is not None:
                    probes.positional_attention(run.model, name, T)
                    run.attention_snapshots[name] = []
            except StackError:
                pass  # the rows cannot reach the attention: no map to animate
        self._snapshot(run, 0)

    def _snapshot(self, run: Run, step: int) -> None:
        for name, _ in self.tables:
            run.snapshots[name].append((step, run.table(name)[:self.SNAPSHOT_ROWS].clone()))
            if name in run.attention_snapshots:
                run.attention_snapshots[name].append(
                    (step, probes.positional_attention(run.model, name, run.config.seq_len)))

    def on_after_backward(self, run: Run) -> None:
        for name, layer in self.tables:
            self.grad_sum[name] += layer.weight.grad.float().norm(dim=1)  # (max_len,)

    def on_batch_end(self, run: Run) -> None:
        if run.step % self.snapshot_every == 0 or run.step == run.config.steps:
            self._snapshot(run, run.step)

    def on_eval(self, run: Run) -> None:
        self.good_grad_sum = _copy(self.grad_sum)

    def on_rollback(self, run: Run) -> None:
        """Back to the sums of the last good state; snapshots that hold nan or inf go."""
        self.grad_sum = self.good_grad_sum
        for frames in (run.snapshots, run.attention_snapshots):
            for name, snapshots in frames.items():
                frames[name] = [(step, table) for step, table in snapshots
                                if bool(torch.isfinite(table).all())]

    def on_end(self, run: Run) -> None:
        run.row_grad_norm = {name: total.cpu() for name, total in self.grad_sum.items()}
        last = next(iter(run.snapshots.values()), [])
        if last and last[-1][0] != run.step and all(bool(torch.isfinite(run.table(name)).all())
                                 for name, _ in self.tables):
            self._snapshot(run, run.step)  # the last frame is the table the run ends with


def _copy(sums: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {name: total.clone() for name, total in sums.items()}
