"""What one run may cost, checked before anything is allocated.

A run is refused with ``E_BUDGET`` (the figure and the limit in the message) when its
parameters (the resolver's check), one training step's activations, everything the run
keeps while it trains (snapshots, initial tables, statistics) or the floating-point
operations of the whole run (training and held-out evaluations) are over budget. A run
that passes can still end at a wall-clock limit (``stopped``, "time limit").

The library's budgets are generous; a classroom server sets tight ones
(`stacklab.serve.limits`).

>>> import stacklab
>>> network = stacklab.resolve("embedding(16, 64)\\npos_embed(32)\\nlinear(16)", ["B", 16],
...                            input_dtype="int64")
>>> config = stacklab.TrainConfig(task="reverse").filled()
>>> Budgets(flops=1e9).check(network, config)
Traceback (most recent call last):
...
stacklab.core.errors.StackError: E_BUDGET at input: the run would take about 3.3e+09 floating-point operations (400 steps of batch 64, and 17 held-out evaluations), over the budget of 1e+09
fix: use fewer steps, a smaller batch_size or seq_len, or a smaller stack
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...core.errors import StackError
from ...core.network import Network
from ...core.resolve import DEFAULT_BUDGET_BYTES, resolve
from ...core.shapes import DTYPE_BYTES
from ..settings import TrainConfig
from ..tasks import EVAL_SIZE

GiB = 1 << 30


@dataclass(frozen=True)
class Budgets:
    """The most one run may cost; see the module docstring."""

    param_bytes: int = DEFAULT_BUDGET_BYTES  # parameters (checked by the resolver)
    activation_bytes: int = 8 * GiB  # one training step's activations and their gradients
    kept_bytes: int = 16 * GiB  # snapshots, initial tables and statistics kept while training
    flops: float = 1e18  # the whole run: training steps and held-out evaluations
    seconds: float | None = None  # wall-clock limit: the run stops ("time limit")

    def check(self, network: Network, config: TrainConfig, kept: int = 0) -> None:
        """Raise ``E_BUDGET`` when the run of ``config`` (filled) would cost too much;
        ``kept``: the bytes its recorders keep (the sum of their `Recorder.kept_bytes`)."""
        step_bytes = 3 * network.activation_elements(batch=1) * config.batch_size \
            * DTYPE_BYTES[network.dtype]
        if step_bytes > self.activation_bytes:
            raise StackError(
                "E_BUDGET", f"one training step at batch_size={config.batch_size}, "
                f"seq_len={config.seq_len} would hold about {step_bytes / GiB:.1f} GiB of "
                f"activations, over the budget of {self.activation_bytes / GiB:.1f} GiB",
                hint="use a smaller batch_size or seq_len")
        self.check_kept(kept)
        for length in config.lengths:  # evaluating at another length: one chunk at a time
            longer = _network_for_length_or_none(network, length)
            if longer is None:
                continue  # past a table's capacity: reported as such, nothing allocated
            chunk = config.eval_chunk(length)
            need = longer.activation_elements(batch=1) * chunk * DTYPE_BYTES[network.dtype]
            if need > self.activation_bytes:
                raise StackError(
                    "E_BUDGET", f"evaluating at length {length} would hold about "
                    f"{_size(need)} of activations for {chunk} sequence"
                    f"{'s' * (chunk != 1)}, over the budget of {_size(self.activation_bytes)}",
                    hint="use shorter eval_lengths")
        flops, evaluations = run_flops(network, config)
        if flops > self.flops:
            raise StackError(
                "E_BUDGET", f"the run would take about {flops:.2g} floating-point operations "
                f"({config.steps} steps of batch {config.batch_size}, and {evaluations} "
                f"held-out evaluations), over the budget of {self.flops:.2g}",
                hint="use fewer steps, a smaller batch_size or seq_len, or a smaller stack")


    def check_kept(self, kept: int) -> None:
        """Raise ``E_BUDGET`` when a run's recorders would keep more than ``kept_bytes``."""
        if kept > self.kept_bytes:
            raise StackError(
                "E_BUDGET", f"the run would keep about {_size(kept)} of snapshots, initial "
                f"tables and statistics of its position tables, over the budget of "
                f"{_size(self.kept_bytes)}",
                hint="use a position table with fewer rows or a smaller dim, or fewer steps")


def _network_for_length_or_none(network: Network, length: int) -> Network | None:
    """``network`` re-resolved for sequences of ``length``; None when it cannot take them."""
    try:
        return resolve(network.source, ["B", length], input_dtype=network.input_dtype,
                       dtype=network.dtype)
    except StackError:
        return None


def run_flops(network: Network, config: TrainConfig) -> tuple[float, int]:
    """Floating-point operations of the whole run, and its number of evaluations: forward,
    backward and update of every training step (about three forward passes), and a forward
    pass over the held-out set at each evaluation."""
    per_sequence = network.flops(batch=1)
    evaluations = config.steps // config.eval_every + 1
    flops = 3 * per_sequence * config.batch_size * config.steps \
        + per_sequence * EVAL_SIZE * evaluations
    # each length of eval_lengths: one pass over its held-out set, attention growing as T²
    flops += sum(per_sequence * EVAL_SIZE * (length / config.seq_len) ** 2
                 for length in config.lengths)
    return float(flops), evaluations + len(config.lengths)


def _size(count: int) -> str:
    return f"{count / GiB:.1f} GiB" if count >= GiB else f"{math.ceil(count / 2**20):,} MiB"
