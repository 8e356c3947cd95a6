"""One training run as the trainer hands it over: its settings, its model, what was
recorded along the way (`Run`), and the words its state is told in (`Status`).

The record is data. What is asked of it lives beside it, each in a module of its own:
`stacklab.lab.train.analysis` (`RunAnalysis`: every score of the run, measured once per
step), `stacklab.lab.train.metrics` (the ``metrics.json`` record) and
`stacklab.lab.train.rebuild` (the model as it was built, for the scores at init). The
methods of `Run` that answer with them (`Run.metrics`, `Run.position_table_scores`, …)
only hand the question on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from html import escape

import torch

from ...core.build import StackModule
from ...core.network import Network
from ..settings import TrainConfig
from ..tasks import Task
from .analysis import RunAnalysis
from .metrics import metrics_record


class Status(StrEnum):
    """The words a run's state is told in, everywhere."""

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
    # `run_scores.model_scores` of each position table at init, by node name (the recorder)
    initial_scores: dict[str, dict] = field(default_factory=dict)
    # what `RunAnalysis` measured on the model as built, by measure name
    # (`analysis.INITIAL_MEASURES`); never by node name, so a node may be called anything
    initial_measures: dict[str, object] = field(default_factory=dict)
    # held-out accuracy at the lengths of ``config.eval_lengths`` (`lengths.length_generalization`)
    length_generalization: dict[str, dict] = field(default_factory=dict)
    row_grad_norm: dict[str, torch.Tensor] = field(default_factory=dict)  # sum over steps
    # the parameters of a model built beforehand as the run got it (None: the run started
    # from the network built with its seed); `stacklab.lab.train.rebuild` starts from them
    start_state: dict[str, torch.Tensor] | None = field(default=None, repr=False, compare=False)
    _analysis: RunAnalysis | None = field(default=None, init=False, repr=False, compare=False)

    def __repr__(self) -> str:
        """One line: a notebook cell that ends with a run shows this, not its tensors."""
        accuracy = self.final["accuracy"]
        shown = "none yet" if accuracy is None else f"{accuracy:.3f}"
        return (f"Run(key={self.key[:12] or '-'!s}, task={self.task.name}, "
                f"status={self.status}, steps={self.step}, accuracy={shown})")

    def _repr_html_(self) -> str:
        """A small card for notebooks: the task, the status, the steps, the accuracy and
        the key (every value escaped)."""
        accuracy = self.final["accuracy"]
        rows = {"task": self.task.name, "status": str(self.status),
                "steps": f"{self.step:,} of {self.config.steps:,}" if self.config.steps
                else f"{self.step:,}",
                "held-out accuracy": "none yet" if accuracy is None else f"{accuracy:.1%}",
                "key": self.key or "-"}
        if self.error:
            rows["error"] = self.error
        cells = "".join(f"<tr><th style='text-align:left;padding-right:1em'>{escape(name)}</th>"
                        f"<td><code>{escape(value)}</code></td></tr>"
                        for name, value in rows.items())
        return (f"<div class='stacklab-run'><b>stacklab Run</b><table>{cells}</table>"
                f"<small>run.history, run.metrics(), stacklab.figures.run_figures(run)</small></div>")

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

    @property
    def analysis(self) -> RunAnalysis:
        """The run's scores, measured once per step (`RunAnalysis`)."""
        if self._analysis is None:
            self._analysis = RunAnalysis(self)
        return self._analysis

    def metrics(self) -> dict:
        """The ``metrics.json`` record ."""
        return metrics_record(self)

    def position_table_scores(self) -> dict[str, dict]:
        """`RunAnalysis.position_table_scores`."""
        return self.analysis.position_table_scores()

    def attention_pattern(self) -> dict | None:
        """`RunAnalysis.attention_pattern`."""
        return self.analysis.attention_pattern()

    def head_scores(self) -> dict[str, dict]:
        """`RunAnalysis.head_scores`."""
        return self.analysis.head_scores()

    def initial_attention_partner(self) -> float | None:
        """`RunAnalysis.initial_attention_partner`."""
        return self.analysis.initial_attention_partner()

    def initial_head_scores(self) -> dict[str, dict]:
        """`RunAnalysis.initial_head_scores`."""
        return self.analysis.initial_head_scores()
