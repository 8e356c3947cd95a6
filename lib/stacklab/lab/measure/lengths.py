"""A trained run at other sequence lengths: the length probe (accuracy per position past
the trained length, trained and with the tables at init) and length generalization
(held-out accuracy at each length of ``eval_lengths``).

Both serve the longer input with the same module, its stack re-resolved for the length
(`run_at_length`), and evaluate in chunks of the training batch (no more memory than a
training step). The model comes back as it was.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

from ...core.errors import StackError
from ...core.resolve import resolve
from .probes import evaluating
from .score_maths import finite_score
from ..tasks import IGNORE

__all__ = ["LengthProbe", "length_probe", "length_generalization", "run_at_length"]


@dataclass(frozen=True)
class LengthProbe:
    """Held-out accuracy at every position of sequences longer than the trained ones, for
    the trained model and for the same model with its position tables at their initial
    values (the baseline: what the positions are worth untrained)."""

    trained_len: int
    probe_len: int
    accuracy: torch.Tensor  # (probe_len,)
    baseline: torch.Tensor  # (probe_len,) the same with every position table at init

    @staticmethod
    def _split(values: torch.Tensor, T: int) -> tuple[float, float]:
        def mean(part: torch.Tensor) -> float:  # a position never labelled is nan: skipped
            return (part.nanmean() if bool(part.isnan().any()) else part.mean()).item()

        rest = values[T:]
        return mean(values[:T]), mean(rest) if rest.numel() else float("nan")

    @property
    def inside(self) -> float:
        """Mean accuracy over the trained positions."""
        return self._split(self.accuracy, self.trained_len)[0]

    @property
    def beyond(self) -> float:
        """Mean accuracy past the trained length (nan when the probe is not longer)."""
        return self._split(self.accuracy, self.trained_len)[1]

    @property
    def baseline_inside(self) -> float:
        return self._split(self.baseline, self.trained_len)[0]

    @property
    def baseline_beyond(self) -> float:
        return self._split(self.baseline, self.trained_len)[1]


def length_probe(run, probe_len: int | None = None, size: int = 512) -> LengthProbe:
    """Re-resolve the run's stack for a longer T and measure accuracy per position, trained
    and with the position tables at their initial values.

    The same module serves the longer input (``T <= max_len``). ``probe_len`` defaults to
    the largest length every position table allows (at most twice the trained length).
    Raises `StackError` for a task whose labels change with the length
    (`Task.length_note`) and for a stack that cannot take the longer input. The model
    comes back in the mode it was in.
    """
    T = run.config.seq_len
    task = run.task
    if task.length_note is not None:
        raise StackError("E_VALUE", f"the length probe does not apply to {task.name}: "
                         f"{task.length_note}", hint="probe a task such as shift or modular")
    if probe_len is None:
        capacity = [run.model.get_submodule(n).max_len for n in run.position_nodes] or [2 * T]
        probe_len = min(min(capacity), 2 * T)
    with run_at_length(run, probe_len, size) as (x, y):
        chunk = run.config.eval_chunk(probe_len)
        accuracy = _accuracy_per_position(run.model, x, y, chunk)
        with _tables_at(run.model, run.initial_tables):
            baseline = _accuracy_per_position(run.model, x, y, chunk)
    return LengthProbe(trained_len=T, probe_len=probe_len, accuracy=accuracy, baseline=baseline)


def length_generalization(run, lengths, size: int = 512) -> dict[str, dict]:
    """Held-out accuracy of ``run``'s model on sequences of each length in ``lengths``:
    ``{"32": {"accuracy": x, "per_position": [...]}}``. A length the stack
    cannot take (past a table's ``max_len``, or a stack whose shapes need the trained
    length) gets ``{"error": why}`` instead; a task whose labels change with the length
    adds its ``note``. The model comes back as it was."""
    found: dict[str, dict] = {}
    for length in map(int, lengths):
        try:
            with run_at_length(run, length, size) as (x, y):
                per_position = _accuracy_per_position(run.model, x, y,
                                                      run.config.eval_chunk(length))
                accuracy = _overall(per_position, y)
        except StackError as err:  # the stack cannot take this length
            found[str(length)] = {"error": err.message}
            continue
        entry = {"accuracy": round(accuracy, 6),
                 "per_position": [finite_score(v) for v in per_position.tolist()]}
        if run.task.length_note and length != run.config.seq_len:
            entry["note"] = run.task.length_note
        found[str(length)] = entry
    return found


@contextlib.contextmanager
def run_at_length(run, length: int, size: int):
    """This run at another length: inside the block, ``run.model`` serves sequences of
    ``length`` (the stack re-resolved for it; `StackError` when it cannot be), and the
    block gets ``size`` held-out ``(x, y)`` of that length; after it, the model serves the
    trained length again."""
    network = resolve(run.network.source, ["B", length], input_dtype="int64",
                      dtype=run.network.dtype)
    model = run.model
    original = model.network
    model.use_network(network)
    try:
        yield run.task.eval_set(length, size=size, device=next(model.parameters()).device)
    finally:
        model.use_network(original)


def _accuracy_per_position(model, x: torch.Tensor, y: torch.Tensor, chunk: int) -> torch.Tensor:
    """Held-out accuracy at each position over its labelled sequences (a label `IGNORE`
    is left out; nan at a position never labelled), ``chunk`` sequences at a time (no
    more memory than a training step)."""
    correct = torch.zeros(x.shape[1], device=x.device)
    with torch.no_grad(), evaluating(model):
        for start in range(0, x.shape[0], chunk):
            logits = model(x[start:start + chunk])  # (chunk, P, classes)
            correct += (logits.argmax(-1) == y[start:start + chunk]).float().sum(0)
    labelled = (y != IGNORE).sum(0)  # (P,): every sequence, for most tasks
    if bool((labelled == x.shape[0]).all()):
        return (correct / x.shape[0]).cpu()
    return (correct / labelled).cpu()  # 0/0: nan where no sequence is labelled


def _overall(per_position: torch.Tensor, y: torch.Tensor) -> float:
    """The accuracy over every labelled position, from `_accuracy_per_position`."""
    if bool((y != IGNORE).all()):
        return per_position.mean().item()
    labelled = (y != IGNORE).sum(0).cpu()
    return float((per_position.nan_to_num() * labelled).sum() / max(int(labelled.sum()), 1))


@contextlib.contextmanager
def _tables_at(model, tables: dict[str, torch.Tensor]):
    """Every position table of ``model`` set to ``tables`` inside the block, restored after."""
    saved = {}
    with torch.no_grad():
        for node, table in tables.items():
            weight = model.get_submodule(node).weight
            saved[node] = weight.detach().clone()
            weight.copy_(table.to(weight.device, weight.dtype))
    try:
        yield model
    finally:
        with torch.no_grad():
            for node, table in saved.items():
                model.get_submodule(node).weight.copy_(table)
