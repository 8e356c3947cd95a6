"""A short fine-tune at a new length: what position interpolation (Chen et al. 2023) and YaRN
(Peng et al. 2023) add to RoPE scaling before a model is used past its trained length.

`fine_tuned_at` trains a finished run's model for a few steps on the task's sequences of
the new length, its rotations stretched by a RoPE scaling the whole time; inside the block
the model is the fine-tuned one (evaluate it there, e.g. with `length_generalization`),
and after the block it is the run's model again, weights and settings as they were.

>>> import stacklab
>>> run = stacklab.train("embedding(11, 16)\\nattention(2, position=\\"rope\\")\\nlinear(11)",
...                      task="copy", steps=5, seq_len=8, seed=0, target_accuracy=None)
>>> before = run.model.state_dict()["n1.qkv.weight"].clone()
>>> with fine_tuned_at(run, 16, steps=3, scaling="linear") as losses:
...     len(losses), bool((run.model.state_dict()["n1.qkv.weight"] != before).any())
(3, True)
>>> bool((run.model.state_dict()["n1.qkv.weight"] == before).all())
True
"""

from __future__ import annotations

import contextlib
import dataclasses

import torch

from ...core.errors import StackError
from ...ops.position_settings import rope_scaled
from ..measure.lengths import run_at_length
from .trainer import adamw, copy_state, training_loss


@contextlib.contextmanager
def fine_tuned_at(run, length: int, steps: int, scaling: str = "none",
                  lr: float | None = None):
    """Inside the block ``run.model`` is fine-tuned for ``steps`` AdamW steps on ``run``'s
    task at ``length``, with every rotating attention scaled by ``scaling`` (`SCALINGS`;
    the factor is ``length`` over the trained length) while it trains and while the block
    runs. The block gets the training losses, one per step. ``lr`` defaults to the run's.
    After the block the model, its mode and its RoPE settings are as before."""
    if steps < 1:
        raise StackError("E_ARG", f"a fine-tune takes at least one step, not {steps}",
                         hint="e.g. steps=50")
    model, config = run.model, run.config
    saved, was_training = copy_state(model), model.training
    generator = torch.Generator().manual_seed(config.seed * 7919 + length)
    device = next(model.parameters()).device
    optimizer = adamw(model, config if lr is None else dataclasses.replace(config, lr=lr))
    losses: list[float] = []
    try:
        with rope_scaled(model, scaling, None, config.seq_len), \
                run_at_length(run, length, size=1):
            model.train()
            for _ in range(steps):
                x, y = run.task.batch(config.batch_size, length, generator, device)  # (B, L)
                logits = model(x)  # (B, L, classes)
                loss = training_loss(logits, y)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                losses.append(loss.item())
            model.train(was_training)
            yield losses
    finally:
        model.load_state_dict(saved)
        model.train(was_training)
