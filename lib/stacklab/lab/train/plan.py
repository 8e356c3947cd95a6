"""A run's plan: everything decided before a trainer exists (`plan_run`).

Checking a submission needs what a run will be, not a trainer: its settings filled in, its
stack resolved and fitted to the task, its key and the budget's verdict. `plan_run` works
them out in that order, raising `StackError` at the first thing wrong, and returns a
frozen `RunPlan`: the server checks and remembers plans (`stacklab.serve.workers.pool`),
and a `stacklab.Trainer` trains one.

>>> import stacklab
>>> plan = plan_run(None, stacklab.TrainConfig(task="position", steps=20))
>>> plan.config.seq_len, plan.network.output_shape, len(plan.key)
(16, ('B', 16, 16), 32)
>>> stacklab.Trainer(plan).run().status
'finished'

A model built beforehand (a `StackModule`, e.g. with a table set by hand) is planned by
`plan_model` and trained as it is; its key counts its starting parameters.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace

import torch

from ...core.build import StackModule, pick_device
from ...core.errors import StackError
from ...core.network import Network
from ...core.resolve import DEFAULT_BUDGET_BYTES, resolve
from ..keys import run_key
from ..settings import TrainConfig
from ..tasks import Task, get_task
from .budgets import Budgets, run_flops
from .recorders import PositionTableRecorder, Recorder

__all__ = ["RunPlan", "plan_run", "plan_model", "fit_network", "default_recorders"]


@dataclass(frozen=True, eq=False)
class RunPlan:
    """One run, checked and ready to train; see the module docstring."""

    source: str  # the stack as given (the task's preset when none was)
    config: TrainConfig  # every setting filled in and checked
    network: Network  # resolved for [B, seq_len] and fitted to the task
    key: str  # the run key (`stacklab.lab.keys.run_key`)
    device: torch.device  # where it trains
    budgets: Budgets  # what it may cost; it fits them (the plan would not exist otherwise)
    kept_bytes: int  # what its recorders keep, charged against ``budgets.kept_bytes``
    flops: float  # the whole run's floating-point operations, within ``budgets.flops``
    model: StackModule | None = None  # a model built beforehand, trained as it is

    @property
    def task(self) -> Task:
        return get_task(self.config.task)

    def held_bytes(self) -> int:
        """An upper bound of the memory this plan holds: its stack's text and its
        resolved network (measured: up to about 3 KB per node, a byte or two per character
        of the stack; a test keeps the bound honest)."""
        return 16 * 1024 + 4 * len(self.source) + 4096 * len(self.network.nodes)

    def charged(self, recorders: tuple[Recorder, ...]) -> "RunPlan":
        """This plan with ``recorders``' bytes charged instead (``E_BUDGET`` when over)."""
        kept = recorded_bytes(recorders, self.network, self.config)
        if kept == self.kept_bytes:
            return self
        self.budgets.check_kept(kept)
        return replace(self, kept_bytes=kept)


def default_recorders() -> tuple[Recorder, ...]:
    """The recorders of a run that names none: its position tables' (`PositionTableRecorder`)."""
    return (PositionTableRecorder(),)


def recorded_bytes(recorders, network: Network, config: TrainConfig) -> int:
    """The bytes ``recorders`` keep over a run: the sum of their `Recorder.kept_bytes`."""
    return sum(recorder.kept_bytes(network, config) for recorder in recorders)


def plan_run(source: str | None, config: TrainConfig, *, budgets: Budgets = Budgets(),
             recorders: tuple[Recorder, ...] | None = None) -> RunPlan:
    """The plan of training ``source`` (None: the task's preset) with ``config``, its
    ``recorders`` (default `default_recorders`) charged; `StackError` when a setting is
    wrong, the stack does not fit the task or the run is over ``budgets``."""
    config = config.filled()
    task = get_task(config.task)
    source = source if source is not None else task.preset(config.seq_len)
    network = fit_network(source, task, config.seq_len, dtype=config.dtype,
                          budget_bytes=budgets.param_bytes)
    return _planned(source, config, network, budgets, recorders)


def plan_model(model: StackModule, config: TrainConfig | None = None, *,
               budgets: Budgets = Budgets(),
               recorders: tuple[Recorder, ...] | None = None) -> RunPlan:
    """The plan of training ``model`` (a built stack) as it is, from its parameters now:
    ``seq_len`` and ``dtype`` are the model's; its key counts its starting parameters."""
    network = model.network
    built_for = network.input_shape[1]
    config = config or TrainConfig()
    if config.seq_len not in (None, built_for):
        raise StackError("E_ARG", f"the model was built for sequences of {built_for}, not "
                         f"seq_len={config.seq_len}",
                         hint=f"leave seq_len out, or build the stack for [B, {config.seq_len}]")
    config = replace(config, seq_len=built_for, dtype=network.dtype).filled()
    check_fits(network, get_task(config.task), config.seq_len)
    return _planned(network.source, config, network, budgets, recorders, model)


def _planned(source: str, config: TrainConfig, network: Network, budgets: Budgets,
             recorders, model: StackModule | None = None) -> RunPlan:
    """The plan, once the budget's verdict is in (``E_BUDGET`` when over)."""
    recorders = default_recorders() if recorders is None else tuple(recorders)
    kept = recorded_bytes(recorders, network, config)
    budgets.check(network, config, kept)
    device = pick_device(config.device)
    start = None if model is None else parameters_digest(model)
    return RunPlan(source=source, config=config, network=network,
                   key=run_key(network, config, device.type, start=start), device=device,
                   budgets=budgets, kept_bytes=kept, flops=run_flops(network, config)[0],
                   model=model)


def parameters_digest(model: torch.nn.Module) -> str:
    """A hash of ``model``'s parameters and buffers as they are now."""
    digest = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        digest.update(name.encode("utf-8"))
        digest.update(tensor.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def fit_network(source: str, task: Task, seq_len: int, *, dtype: str = "float32",
                budget_bytes: int = DEFAULT_BUDGET_BYTES) -> Network:
    """Resolve ``source`` for ``task`` and check it fits: ids in, one class score per position out."""
    network = resolve(source, ["B", seq_len], input_dtype="int64", dtype=dtype,
                      budget_bytes=budget_bytes)
    check_fits(network, task, seq_len)
    return network


def check_fits(network: Network, task: Task, seq_len: int) -> None:
    """Raise `StackError` unless ``network`` takes ``task``'s ids and gives one class score
    per position."""
    classes = task.n_classes(seq_len)
    first, last = network.nodes[0], network.nodes[-1]
    if isinstance(first.args.get("vocab"), int) and first.args["vocab"] < task.vocab:
        raise first.call.error(
            "E_ARG", f"task {task.name} uses token ids 0..{task.vocab - 1}, but "
            f"{first.call_text} only has {first.args['vocab']} rows", node=first.name,
            hint=f"use embedding({task.vocab}, {first.args.get('dim', 32)}) or more")
    wanted = ("B", seq_len, classes)
    if network.output_shape != wanted:
        if len(network.output_shape) == 3 and network.output_shape[:2] == ("B", seq_len):
            message = (f"the last op must output {classes} classes for task {task.name}, but "
                       f"it outputs {network.output_shape[-1]}")
            hint = f"use linear({classes}) as the last op"
        else:
            message = (f"task {task.name} predicts a class at every position: the output must "
                       f"be [B, {seq_len}, {classes}], but the stack gives "
                       f"[{', '.join(map(str, network.output_shape))}]")
            pooled = next((node for node in network.nodes if node.spec.merges_positions), None)
            hint = (f"remove {pooled.op}(), which merges the positions, and end with "
                    f"linear({classes})" if pooled else f"end the stack with linear({classes})")
        raise last.call.error("E_SHAPE", message, node=last.name, hint=hint)
