"""Training a stack on a toy task, recording what its position tables do.

    run = stacklab.train(task="reverse", seq_len=16)        # the task's preset stack
    run.history[-1]       # {"step": 400, "loss": 0.01, "accuracy": 0.998}
    run.row_grad_norm     # {"n1": tensor[max_len]}: zero beyond row T-1, exactly

The loop follows minGPT's trainer: a config dataclass (`TrainConfig`, the settings
table), events (``on_after_backward``, ``on_eval``, ... see `Trainer`) so recorders, the
CLI's progress bar, the app and notebooks hook in without touching the loop, and a
`Trainer.stop` that another thread may call. What the position tables do is recorded by
`stacklab.lab.train.recorders.PositionTableRecorder`, one such hook, into the `Run`
(`stacklab.lab.train.record`) that the trainer hands over. AdamW's weight
decay pulls *every* row of a table towards zero, the untrained rows included: with
``weight_decay > 0`` rows ``>= T`` drift although their gradient is exactly zero.
"""

from __future__ import annotations

import inspect
import math
import threading
import time
from dataclasses import dataclass
from typing import Callable

import torch
from torch.nn import functional as F

from torch import nn

from ...core.build import StackModule
from ...core.errors import StackError
from ...ops.position_settings import positions_at, random_positions, rope_scaled
from ..measure.lengths import length_generalization
from ..settings import TrainConfig, check_keywords, settings_signature
from ..tasks import IGNORE
from .budgets import Budgets
from .plan import RunPlan, default_recorders, plan_model, plan_run
from . import record
from .record import Run
from .recorders import Recorder

__all__ = ["Trainer", "train"]


class Trainer:
    """Trains a stack on a task; see the module docstring.

    Events, in the order they fire (each callback gets the `Run`):

    - ``on_start``: the model is built, nothing trained yet;
    - ``on_after_backward``: this step's gradients are in the parameters (on the CPU the
      loss was checked finite first; elsewhere it is checked every few steps, and a
      divergence found later rolls the recorders back);
    - ``on_batch_end``: the optimizer stepped; ``run.step`` is the step just done;
    - ``on_eval``: a held-out evaluation was appended to ``run.history``; the model is good;
    - ``on_rollback``: a non-finite loss sent the model back to its last good state;
    - ``on_end``: the run ended, whatever its status.

    The recorders hook in first, so a callback's ``on_batch_end`` already sees this step's
    snapshot. ``recorders`` replaces the default ``(PositionTableRecorder(),)``; the
    figures and ``metrics.json`` show the position tables that recorder recorded.

    >>> trainer = Trainer(None, TrainConfig(task="position", steps=20))
    >>> trainer.add_callback("on_eval", lambda run: None)
    >>> trainer.run().status
    'finished'
    """

    EVENTS = ("on_start", "on_after_backward", "on_batch_end", "on_eval", "on_rollback", "on_end")

    def __init__(self, source: str | RunPlan | StackModule | None,
                 config: TrainConfig | None = None, *, budgets: Budgets = Budgets(),
                 recorders: tuple[Recorder, ...] | None = None):
        """Train a plan (`stacklab.lab.train.plan.plan_run`), or plan one here: of a stack
        (``source``; None: the task's preset) or of a model built beforehand (a
        `StackModule`, trained as it is) with ``config`` and ``budgets``."""
        recorders = default_recorders() if recorders is None else tuple(recorders)
        self.plan = _plan_of(source, config, budgets, recorders)
        self.config, self.task, self.source = self.plan.config, self.plan.task, self.plan.source
        self.network, self.budgets = self.plan.network, self.plan.budgets
        self.device, self.key = self.plan.device, self.plan.key
        self.callbacks: dict[str, list[Callable[[Run], None]]] = {e: [] for e in self.EVENTS}
        self._stop = threading.Event()
        self.run_state: Run | None = None
        for recorder in recorders:
            recorder.attach(self)

    def add_callback(self, event: str, fn: Callable[[Run], None]) -> None:
        if event not in self.callbacks:
            raise ValueError(f"unknown event {event!r}; one of {', '.join(self.EVENTS)}")
        self.callbacks[event].append(fn)

    def stop(self) -> None:
        """Ask the loop to end after the current step (safe from any thread)."""
        self._stop.set()

    def _fire(self, event: str, run: Run) -> None:
        for fn in self.callbacks[event]:
            fn(run)

    def run(self) -> Run:
        """Train until ``steps``, a stop, a non-finite loss or ``target_accuracy``."""
        loop = self._start()
        run = loop.run
        try:
            self._fire("on_start", run)
            loop.model.train()
            self._train_steps(loop)
            if run.status == record.Status.RUNNING:
                run.status = record.Status.FINISHED
        except StackError as err:
            run.status, run.error = record.Status.FAILED, str(err)
        except (RuntimeError, ValueError, MemoryError) as err:
            run.status, run.error = record.Status.FAILED, f"{type(err).__name__}: {err}"
        finally:
            self._finish(loop)
        return run

    def _start(self) -> "_Loop":
        """A new `Run` with its model as built, and what the loop needs to train it."""
        config, task, device = self.config, self.task, self.device
        given = self.plan.model
        if given is None:
            model, start_state = self.network.build(seed=config.seed, device=device), None
        else:  # a model built beforehand: trained in place, from its parameters now
            model, start_state = given.to(device), copy_state(given)
        model.set_value_checks(False)  # task data is in range by construction: no host sync
        run = Run(config=config, task=task, network=self.network, model=model, device=device.type,
                  key=self.key, start_state=start_state)
        self.run_state = run
        generator = torch.Generator().manual_seed(config.seed)
        # dropout draws from the global CPU generator: seed it for this run, restore it after
        global_rng = torch.random.get_rng_state()
        torch.default_generator.manual_seed(config.seed)
        eval_x, eval_y = task.eval_set(config.seq_len, device=device)
        return _Loop(run=run, model=model, optimizer=adamw(model, config), generator=generator,
                     global_rng=global_rng, eval_x=eval_x, eval_y=eval_y,
                     classes=task.n_classes(config.seq_len),
                     check_every=1 if device.type == "cpu" else min(config.eval_every, 10),
                     good=(copy_state(model), 0), start=time.perf_counter())

    def _train_steps(self, loop: "_Loop") -> None:
        """Step after step until the last one, a stop, a time limit, a divergence or the
        target accuracy."""
        config = self.config
        for step in range(1, config.steps + 1):
            if self._stopped_before(loop, step) or not self._train_step(loop, step):
                break
            if step % config.eval_every == 0 or step == config.steps:
                if not self._evaluate_step(loop, step):
                    break

    def _stopped_before(self, loop: "_Loop", step: int) -> bool:
        """Ends the run as stopped, before ``step``, when someone asked or its time is up."""
        run, limit = loop.run, self.budgets.seconds
        if self._stop.is_set():
            run.status = record.Status.STOPPED
            return True
        if limit is not None and time.perf_counter() - loop.start > limit:
            run.status = record.Status.STOPPED
            run.error = (f"time limit: the run may train for {limit:g} s on this "
                         f"server; it stopped at step {step - 1}")
            return True
        return False

    def _train_step(self, loop: "_Loop", step: int) -> bool:
        """One optimizer step on a fresh batch; False when the loss is not finite (the run
        is then rolled back)."""
        config, run = self.config, loop.run
        x, y = self.task.batch(config.batch_size, config.seq_len, loop.generator,
                               self.device)  # (B, T)
        span = config.random_positions  # randomized positions (Ruoss et al.): or 0..T-1
        where = random_positions(config.seq_len, span, loop.generator) if span else None
        with positions_at(loop.model, where):
            logits = loop.model(x)  # (B, T, classes)
        loss = training_loss(logits, y)
        loop.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if step % loop.check_every == 0 or step == config.steps:
            value = loss.item()
            if not math.isfinite(value):
                self._roll_back(run, f"the training loss became {value} at step {step}", loop.good)
                return False
            run.train_loss.append((step, value))
        self._fire("on_after_backward", run)
        loop.optimizer.step()
        run.step = step
        self._fire("on_batch_end", run)
        return True

    def _evaluate_step(self, loop: "_Loop", step: int) -> bool:
        """The held-out evaluation after ``step``; a finite one becomes the last good state.
        False when the loop ends here: a non-finite loss (rolled back) or the target reached."""
        config, run = self.config, loop.run
        entry = self._evaluate(loop.model, loop.eval_x, loop.eval_y, loop.classes, step,
                               config.batch_size)
        if not math.isfinite(entry["loss"]):
            self._roll_back(run, f"the held-out loss became {entry['loss']} at step {step}",
                            loop.good)
            return False
        run.history.append(entry)
        loop.good = copy_state(loop.model), step
        self._fire("on_eval", run)
        target = config.target_accuracy
        return not (target is not None and entry["accuracy"] >= target)

    def _finish(self, loop: "_Loop") -> None:
        """Whatever ended the run: its time, the global generator back, a last evaluation of
        the model it hands over (unless it failed), the other lengths, and ``on_end``."""
        config, run = self.config, loop.run
        run.seconds = time.perf_counter() - loop.start
        torch.random.set_rng_state(loop.global_rng)
        # every run that did not fail ends with an evaluation of the model it hands over
        needs_eval = not run.history or run.history[-1]["step"] != run.step
        if run.status != record.Status.FAILED and needs_eval:
            run.history.append(self._evaluate(loop.model, loop.eval_x, loop.eval_y, loop.classes,
                                              run.step, config.batch_size))
        if run.status != record.Status.FAILED and config.lengths:
            with rope_scaled(loop.model, config.rope_scaling, config.rope_factor, config.seq_len):
                run.length_generalization = length_generalization(run, config.lengths)
        self._fire("on_end", run)

    def _roll_back(self, run: Run, what: str, good: tuple[dict, int]) -> None:
        """End ``run`` as diverged, back at its last good state (recorders roll back too)."""
        state, step = good
        run.model.load_state_dict(state)
        run.status, run.step = record.Status.DIVERGED, step
        run.error = (f"{what}; the model is back at its last good state (step {step}). "
                     "Try a smaller lr.")
        self._fire("on_rollback", run)

    @staticmethod
    def _evaluate(model, x, y, classes: int, step: int, chunk: int) -> dict:
        """Held-out loss and accuracy, in chunks of the training batch size (so evaluation
        never needs more memory than a training step), over the labelled positions (a
        label `IGNORE` is left out, as the training loss leaves it out)."""
        model.train(False)
        loss_sum, correct = 0.0, 0
        labelled = max(int((y != IGNORE).sum()), 1)  # every position, for most tasks
        with torch.no_grad():
            for start in range(0, x.shape[0], chunk):
                logits = model(x[start:start + chunk]).float()  # (chunk, T, classes)
                target = y[start:start + chunk]
                loss_sum += F.cross_entropy(logits.reshape(-1, classes), target.reshape(-1),
                                            reduction="sum", ignore_index=IGNORE).item()
                correct += int((logits.argmax(-1) == target).sum())
        model.train()
        return {"step": step, "loss": loss_sum / labelled, "accuracy": correct / labelled}


@dataclass
class _Loop:
    """What one call of `Trainer.run` trains with, besides the settings."""

    run: Run
    model: StackModule
    optimizer: torch.optim.Optimizer
    generator: torch.Generator  # the training batches
    global_rng: torch.Tensor  # the global CPU generator's state before the run, restored after
    eval_x: torch.Tensor  # the held-out set: (N, T)
    eval_y: torch.Tensor
    classes: int
    check_every: int  # steps between checks that the loss is finite (each costs a host sync)
    good: tuple[dict, int]  # the last evaluated state and its step: where a divergence goes back
    start: float  # perf_counter at the start


def training_loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """What a training step minimises: cross-entropy in float32 over the labelled positions
    of ``logits`` (B, T, classes) against ``y`` (B, T), `IGNORE` left out."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), y.reshape(-1),
                           ignore_index=IGNORE)


def adamw(model, config: TrainConfig) -> torch.optim.AdamW:
    """AdamW with its fused kernel where torch has one (one kernel for all parameters)."""
    try:
        return torch.optim.AdamW(model.parameters(), lr=config.lr,
                                 weight_decay=config.weight_decay, fused=True)
    except (RuntimeError, ValueError):
        return torch.optim.AdamW(model.parameters(), lr=config.lr,
                                 weight_decay=config.weight_decay)


def copy_state(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _plan_of(source, config: TrainConfig | None, budgets: Budgets, recorders) -> RunPlan:
    """The plan a `Trainer` trains: ``source`` itself, or the plan of a model or a stack."""
    if isinstance(source, RunPlan):
        return source.charged(recorders)
    if isinstance(source, StackModule):
        return plan_model(source, config, budgets=budgets, recorders=recorders)
    if isinstance(source, nn.Module):
        raise StackError("E_VALUE", f"a {type(source).__name__} is not a built stack: the "
                         "trainer records and scores layers by the role their op declares",
                         hint="build the model from a stack: stacklab.resolve(...).build()")
    if config is None:
        raise StackError("E_ARG", "a stack needs its settings to train",
                         hint="e.g. Trainer(source, TrainConfig(task=\"reverse\"))")
    return plan_run(source, config, budgets=budgets, recorders=recorders)


def train(source: str | None = None, **settings) -> Run:
    """Train ``source`` (default: the task's preset) with `TrainConfig` ``settings``; return the `Run`.

    Raises `StackError` before training when a setting is invalid or the stack does not fit
    the task; a run that fails later ends with ``status`` ``failed`` or ``diverged``.
    """
    callbacks = settings.pop("callbacks", None) or {}
    check_keywords(settings)
    trainer = Trainer(source, TrainConfig(**settings))
    for event, fns in callbacks.items():
        for fn in fns if isinstance(fns, (list, tuple)) else [fns]:
            trainer.add_callback(event, fn)
    return trainer.run()


# what help() and an editor show: every setting of the table with its type and default
train.__signature__ = settings_signature(
    inspect.Parameter("callbacks", inspect.Parameter.KEYWORD_ONLY, default=None,
                      annotation=dict | None), returns=Run)
