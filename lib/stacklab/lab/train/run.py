"""One training run as the trainer hands it over: its settings, its model, what was
recorded along the way (`Run`), and the words its state is told in (`Status`).

A `Run` also answers the questions the figures and ``metrics.json`` ask of it, each
computed once per step: every score of its position tables
(`Run.position_table_scores`) and, for a stack without a table, the attention's
partner score (`Run.attention_pattern`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

import torch

from ...core.build import StackModule
from ...core.network import Network
from ..measure import head_scores as heads, run_scores
from ..settings import TrainConfig
from ..tasks import Task


class Status(StrEnum):
    """The words a run's state is told in, everywhere (SPEC §10)."""

    QUEUED = "queued"  # waiting for a worker
    RUNNING = "running"
    FINISHED = "finished"  # ran all its steps, or reached target_accuracy
    STOPPED = "stopped"  # someone pressed Stop
    DIVERGED = "diverged"  # a non-finite loss; the model is back at its last good state
    FAILED = "failed"  # an error ended it; `Run.error` says which

    def __repr__(self) -> str:
        return repr(self.value)  # shown as the word it is: 'finished'

    @property
    def active(self) -> bool:
        """Queued or running: the run may still change."""
        return self in (Status.QUEUED, Status.RUNNING)


METRICS_ROWS = 4096  # rows listed per table in metrics.json (the longest T the settings allow)

# where `Run.initial_scores` keeps the partner score of the model as built, for a stack
# without a position table (stored with the run, so it is measured once per run)
INITIAL_ATTENTION_PATTERN = "attention_by_position"
# where it keeps the head scores of the model as built (`heads.model_head_scores`)
INITIAL_HEAD_SCORES = "attention_heads"


@dataclass
class Run:
    """One training run: settings, model, and everything recorded along the way."""

    config: TrainConfig
    task: Task
    network: Network
    model: StackModule
    device: str
    key: str = ""  # the run key (`stacklab.lab.keys.run_key`)
    status: Status = Status.RUNNING
    step: int = 0
    seconds: float = 0.0
    error: str | None = None  # why a run failed or diverged, in words
    history: list[dict] = field(default_factory=list)  # held-out {"step", "loss", "accuracy"}
    train_loss: list[tuple[int, float]] = field(default_factory=list)  # (step, batch loss)
    # filled by `PositionTableRecorder`, per position table node:
    initial_tables: dict[str, torch.Tensor] = field(default_factory=dict)
    snapshots: dict[str, list[tuple[int, torch.Tensor]]] = field(default_factory=dict)
    # the attention-by-position map ([T, T]) at the same steps, for tables an attention follows
    attention_snapshots: dict[str, list[tuple[int, torch.Tensor]]] = field(default_factory=dict)
    # `run_scores.model_scores` of each table at init (the recorder), and under
    # INITIAL_ATTENTION_PATTERN the partner score at init of a stack without a table
    initial_scores: dict[str, dict] = field(default_factory=dict)
    # held-out accuracy at the lengths of ``config.eval_lengths`` (`lengths.length_generalization`)
    length_generalization: dict[str, dict] = field(default_factory=dict)
    # ((step, status), value): the answers computed for the model at that step
    _table_scores: tuple | None = field(default=None, repr=False, compare=False)
    _attention_pattern: tuple | None = field(default=None, repr=False, compare=False)
    _head_scores: tuple | None = field(default=None, repr=False, compare=False)
    row_grad_norm: dict[str, torch.Tensor] = field(default_factory=dict)  # sum over steps

    @property
    def position_nodes(self) -> list[str]:
        """Names of the nodes holding a learned position table."""
        return list(self.initial_tables)

    @property
    def final(self) -> dict:
        """Held-out accuracy and loss of the last evaluation (``None`` before any)."""
        last = self.history[-1] if self.history else {"accuracy": None, "loss": None}
        return {"accuracy": last["accuracy"], "loss": last["loss"]}

    def table(self, node: str) -> torch.Tensor:
        """The current ``[max_len, D]`` position table of ``node``, on the CPU, as float32."""
        return self.model.get_submodule(node).weight.detach().float().cpu()

    def row_drift(self, node: str) -> torch.Tensor:
        """``||W_now[i] - W_init[i]||`` per row: exactly zero where nothing moved a row."""
        return (self.table(node) - self.initial_tables[node]).norm(dim=1)

    def metrics(self) -> dict:
        """The ``metrics.json`` record (SPEC §8). A table longer than `METRICS_ROWS` rows
        lists its first `METRICS_ROWS` (every trained row among them) and summarises the
        rest (``rows_listed``, ``rest``), so the file stays small for any table."""
        scores = self.position_table_scores() if self.position_nodes else {}
        return {
            "task": self.task.name,
            "seq_len": self.config.seq_len,
            "steps": self.step,
            "seconds": round(self.seconds, 4),
            "device": self.device,
            "final": self.final,
            "history": list(self.history),
            "position_tables": {node: self._table_metrics(node, scores)
                                for node in self.position_nodes},
            **({"length_generalization": self.length_generalization}
               if self.length_generalization else {}),
            **({"attention_by_position": without} if (without := self.attention_pattern())
               else {}),
            **({"attention": attention} if (attention := self.head_scores()) else {}),
        }

    def _current(self, cached: tuple | None, compute) -> tuple:
        """``cached`` when it was computed at this step and status, else a fresh one."""
        if cached is None or cached[0] != (self.step, self.status):
            cached = ((self.step, self.status), compute(self))
        return cached

    def position_table_scores(self) -> dict[str, dict]:
        """Every score of every position table, trained and at init
        (`run_scores.position_table_scores`); computed once per step of a run (figures
        and ``metrics.json`` share them)."""
        self._table_scores = self._current(self._table_scores, run_scores.position_table_scores)
        return self._table_scores[1]

    def attention_pattern(self) -> dict | None:
        """For a stack without a position table: the attention's partner score, trained
        and at init (`run_scores.attention_pattern_without_table`), once per step; None
        for other stacks."""
        self._attention_pattern = self._current(self._attention_pattern,
                                                Run._measure_attention_pattern)
        return self._attention_pattern[1]

    def _measure_attention_pattern(self) -> dict | None:
        found = run_scores.partner_attention_without_table(self)
        if found is None:
            return None
        return run_scores.attention_pattern_without_table(
            self.model, *found, init=self.initial_attention_partner())

    def initial_attention_partner(self) -> float | None:
        """The partner score of the model as built (`run_scores.partner_attention_without_table`),
        for a stack without a position table. Measured on first use and kept in
        ``initial_scores`` under `INITIAL_ATTENTION_PATTERN`, so a stored run keeps it."""
        init = self.initial_scores.get(INITIAL_ATTENTION_PATTERN)
        if init is None:
            as_built = self.network.build(seed=self.config.seed, device=self.device)
            found = run_scores.partner_attention_without_table(self, as_built)
            init = self.initial_scores[INITIAL_ATTENTION_PATTERN] = found[1]
        return init

    def head_scores(self) -> dict[str, dict]:
        """Every head score of every attention node, trained and at init
        (`heads.head_scores`; SPEC §19), once per step; empty without attention."""
        self._head_scores = self._current(self._head_scores, heads.head_scores)
        return self._head_scores[1]

    def initial_head_scores(self) -> dict[str, dict]:
        """`heads.model_head_scores` of the model as built. Measured on first use, from the
        model built again with the run's seed (as `initial_attention_partner`), and kept in
        ``initial_scores`` under `INITIAL_HEAD_SCORES`, so a stored run keeps it."""
        init = self.initial_scores.get(INITIAL_HEAD_SCORES)
        if init is None:
            as_built = self.network.build(seed=self.config.seed, device=self.device)
            init = self.initial_scores[INITIAL_HEAD_SCORES] = heads.model_head_scores(
                as_built, self.task, self.config.seq_len, heads.head_sequences(self.config),
                self.config.eval_chunk(self.config.seq_len))
        return init

    def _table_metrics(self, node: str, scores: dict) -> dict:
        grad, drift = self.row_grad_norm[node], self.row_drift(node)
        listed = {"max_len": int(grad.shape[0]), "row_grad_norm": grad[:METRICS_ROWS].tolist(),
                  "row_drift": drift[:METRICS_ROWS].tolist(), "scores": scores[node]}
        if grad.shape[0] > METRICS_ROWS:
            listed["rows_listed"] = METRICS_ROWS
            listed["rest"] = {name: {"min": float(values[METRICS_ROWS:].min()),
                                     "max": float(values[METRICS_ROWS:].max()),
                                     "mean": float(values[METRICS_ROWS:].mean())}
                              for name, values in (("row_grad_norm", grad), ("row_drift", drift))}
        return listed
