"""Probes through the real ops of a stack: what its layers do with a position table's rows
alone (`rows_alone`, attention by position, the class each row picks), and what its first
attention does on held-out sequences (`attention_map`, `attention_without_table`).

Nothing here re-implements a slice of the forward pass: the rows go through the built
model's own layers, and the held-out input of an attention is captured with a forward
hook (`held_out_attention_input`). Every probe runs in eval mode (dropout off) and gives
the model back in the mode it was in.

>>> import stacklab
>>> model = stacklab.resolve("pos_embed(8)\\nattention(2)", ["B", 4, 16]).build(seed=0)
>>> weights = positional_attention(model, "n0", 4)  # (T, T): where each position looks
>>> weights.shape, bool(torch.allclose(weights.sum(-1), torch.ones(4)))  # rows sum to 1
(torch.Size([4, 4]), True)
"""

from __future__ import annotations

import contextlib

import torch

from ...core.errors import StackError

__all__ = ["evaluating", "attention_after", "rows_alone", "attention_logits",
           "positional_attention", "rows_alone_scores", "attention_inputs",
           "held_out_attention_input",
           "attention_without_table", "attention_map"]


@contextlib.contextmanager
def evaluating(model):
    """``model`` in eval mode (dropout off) inside the block, in its former mode after."""
    was_training = model.training
    model.train(False)
    try:
        yield model
    finally:
        model.train(was_training)


def _layers_after(model, node: str | None) -> list[tuple[str, torch.nn.Module]]:
    names = [n.name for n in model.network.nodes]
    first = 0 if node is None else names.index(node) + 1
    return [(name, model.get_submodule(name)) for name in names[first:]]


def attention_after(model, node: str | None):
    """``(name, layer)`` of the first attention after ``node`` (from the start when None),
    or None."""
    attentions = {name for name, _ in model.layers("attention")}
    return next(((name, layer) for name, layer in _layers_after(model, node)
                 if name in attentions), None)


def rows_alone(model, node: str, T: int, until: str | None = None) -> torch.Tensor:
    """The first ``T`` rows of ``node``'s table as the model carries them when no token
    speaks: zeros go into the table's op, and what comes out passes every op after it, up
    to ``until`` (exclusive; None: the end of the stack). ``[1, T, ...]``.

    Raises `StackError` (with the op and the reason) when an op on the way cannot take
    them, e.g. an ``embedding`` that needs token ids or a ``mean_pool`` before the
    attention."""
    table = model.get_submodule(node)
    weight = table.weight
    x = torch.zeros(1, T, weight.shape[1], dtype=weight.dtype, device=weight.device)
    nodes = {n.name: n for n in model.network.nodes}
    with torch.no_grad(), evaluating(model):
        outputs = {node: table(x)}  # (1, T, D): the rows themselves
        last = node
        for name, layer in _layers_after(model, node):
            if name == until:
                break
            outputs[name] = _rows_through(layer, nodes[name], node, outputs)
            last = name
    return outputs[last]


def _rows_through(layer, at, node: str, outputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """One op on the outputs it reads, as `rows_alone` sends ``node``'s rows on: a clear
    `StackError` when it reads something from before the table or cannot take them."""
    def fail(code: str, reason: str, hint: str) -> StackError:
        return StackError(code, f"the rows of {node} alone {reason}", node=at.name, op=at.op,
                          hint=hint)

    missing = [read for read in at.reads if read not in outputs]
    if missing:
        raise fail("E_SHAPE", f"cannot pass {at.name} ({at.op}): it also reads "
                   f"{missing[0] or 'the input'}, from before {node}",
                   "this view follows the rows through the nodes after the table only")
    try:
        x = layer(*(outputs[read] for read in at.reads))
    except (StackError, RuntimeError, ValueError, TypeError, IndexError) as err:
        reason = err.message if isinstance(err, StackError) else str(err).split("\n")[0]
        raise fail("E_SHAPE", f"cannot pass {at.name} ({at.op}): {reason[:200]}",
                   "this view needs every op between the table and its target to take "
                   "a [1, T, D] float sequence") from None
    if x.is_floating_point() and not bool(torch.isfinite(x).all()):
        raise fail("E_VALUE", f"become infinite or nan at {at.name} ({at.op})",
                   "the table or a layer on the way holds values too large to follow")
    return x


def _at_attention(model, node: str, T: int, what: str) -> torch.Tensor | None:
    """``what`` ("qk_logits" or "weights") of the first attention after ``node`` on the rows
    of ``node`` alone, sent through every op between them, averaged over heads: ``[T, T]``."""
    found = attention_after(model, node)
    if found is None:
        return None
    name, attention = found
    x = rows_alone(model, node, T, until=name)
    if x.dim() != 3 or not x.is_floating_point():
        raise StackError("E_SHAPE", f"the rows of {node} reach {name} as "
                         f"{list(x.shape)}, not a [1, T, D] sequence", node=name,
                         hint="this view needs the sequence to reach the attention whole")
    with torch.no_grad():
        return getattr(attention, what)(x)[0].mean(0).float().cpu()  # (T, T)


def attention_logits(model, node: str, T: int) -> torch.Tensor | None:
    """The query-key logits (before the softmax and any causal mask) that the rows of
    ``node`` alone give in the first attention after it, averaged over heads: ``[T, T]``;
    None when no attention follows. Raises `StackError` as `rows_alone`."""
    return _at_attention(model, node, T, "qk_logits")


def positional_attention(run_or_model, node: str, T: int | None = None) -> torch.Tensor | None:
    """Where each position would attend if only the position table spoke: the softmax of
    the query-key logits of the table's first T rows, sent through every op between the
    table and the first attention after it (exactly as the model does), per head, averaged
    over heads (rows sum to 1). For ``reverse`` a bright anti-diagonal. None without an
    attention after the table; `StackError` (with the reason) when the rows cannot reach it.

    Takes a `Run` (its model, T = its seq_len) or a model and ``T``."""
    model, T = _model_and_length(run_or_model, T)
    return _at_attention(model, node, T, "weights")


def rows_alone_scores(run_or_model, node: str, T: int | None = None) -> torch.Tensor:
    """What the rest of the stack answers for each row of ``node`` fed alone (no token):
    ``[T, classes]`` class scores (for the ``position`` task, row t should pick class t).
    Raises `StackError` as `rows_alone`."""
    model, T = _model_and_length(run_or_model, T)
    out = rows_alone(model, node, T)
    if out.dim() != 3 or out.shape[1] != T:
        raise StackError("E_SHAPE", f"the rows of {node} alone come out as {list(out.shape)}, "
                         f"not one score vector per position", node=node,
                         hint="this view needs a stack that answers per position")
    return out[0].float().cpu()


def _model_and_length(run_or_model, T: int | None):
    if T is None:
        return run_or_model.model, run_or_model.config.seq_len
    return run_or_model, T


def attention_inputs(model, layers: list[tuple[str, torch.nn.Module]],
                     x: torch.Tensor) -> dict[str, torch.Tensor]:
    """What each of ``layers`` (``(name, layer)`` of ``model``) gets as input when ``model``
    runs on the ids ``x`` (in eval mode, no gradient): ``{name: [N, T, D]}``. The one
    capture helper of the analysis: forward pre-hooks on the built model, so every op
    and branch on the way runs as the model runs it."""
    captured: dict[str, torch.Tensor] = {}
    hooks = [layer.register_forward_pre_hook(
        lambda _, args, name=name: captured.setdefault(name, args[0])) for name, layer in layers]
    try:
        with torch.no_grad(), evaluating(model):
            model(x)
    finally:
        for hook in hooks:
            hook.remove()
    return captured


def held_out_attention_input(run, attention, size: int = 256, model=None) -> torch.Tensor:
    """What ``attention`` (a layer of ``model``, default the run's) gets as input on the
    run's held-out sequences: ``[N, T, D]``, N at most one training batch (``size`` or
    fewer, so no more memory than a training step)."""
    model = run.model if model is None else model
    x, _ = run.task.eval_set(run.config.seq_len, size=min(size, run.config.batch_size),
                             device=next(model.parameters()).device)
    return attention_inputs(model, [("attention", attention)], x)["attention"]


def attention_without_table(run, model=None) -> tuple[str, torch.Tensor, torch.Tensor] | None:
    """For a stack with no position table: what the first attention does by position
    alone: each position holds its input averaged over held-out sequences, so the tokens
    average out and only positions tell them apart: a fixed encoding added before the
    attention (``sin_pos``), the one inside it (RoPE, ALiBi, relative bias), or just the
    causal mask.
    ``(attention's name, weights [T, T] averaged over heads, logits by offset [H, 2T-1])``,
    offsets key minus query from -(T-1) to T-1; None without an attention. ``model``
    (default: the run's) is another model of the run's stack, e.g. the model as built."""
    model = run.model if model is None else model
    found = attention_after(model, None)
    if found is None:
        return None
    name, attention = found
    T = run.config.seq_len
    # the tokens average out; what a position op added before the attention stays
    x = held_out_attention_input(run, attention, model=model).mean(0)[None]  # (1, T, D)
    with torch.no_grad(), evaluating(model):
        weights = attention.weights(x)[0].mean(0).float().cpu()  # (T, T)
        logits = attention.qk_logits(x)[0].float().cpu()  # (H, T, T)
    by_offset = torch.stack([torch.stack([head.diagonal(offset).mean() for offset in range(-(T - 1), T)])
                             for head in logits])  # (H, 2T-1)
    return name, weights, by_offset


def attention_map(run, node: str | None = None, size: int = 256) -> tuple[torch.Tensor, int] | None:
    """The attention weights of the first attention (after ``node``), measured on held-out
    sequences and averaged over sequences and heads: ``([T, T]`` rows sum to 1, the number
    of sequences averaged``)``. At most one training batch of sequences (``size`` or fewer)."""
    found = attention_after(run.model, node)
    if found is None:
        return None
    _, attention = found
    x = held_out_attention_input(run, attention, size)
    with torch.no_grad(), evaluating(run.model):
        weights = attention.weights(x)  # (N, H, T, T)
    return weights.mean((0, 1)).float().cpu(), x.shape[0]
