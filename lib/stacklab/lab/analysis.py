"""What a position table learned: similarities, attention by position, PCA, the length
probe, and the scores of SPEC §14-15 (`scores`: one call returns them all).

All functions take plain tensors (a ``[max_len, D]`` table) or a `Run`, and return
tensors or small dataclasses; `stacklab.figures` turns them into plots.

>>> table = torch.eye(4)
>>> similarity(table).diagonal().tolist()
[1.0, 1.0, 1.0, 1.0]
"""

from __future__ import annotations

import contextlib
import types
from dataclasses import dataclass

import torch

from ..core.errors import StackError
from ..core.resolve import resolve
from ..ops.sin_pos import sinusoidal_table
from . import scores as S

__all__ = ["similarity", "positional_attention", "attention_map", "attention_scores",
           "rows_alone", "rows_alone_scores", "pca", "PCA", "length_probe", "LengthProbe",
           "sinusoidal_table", "scores", "model_scores", "rows_scores", "pattern_score",
           "score_text", "attention_without_table", "length_generalization",
           "attention_pattern_without_table"]


def similarity(table: torch.Tensor, kind: str = "cosine") -> torch.Tensor:
    """``[N, N]`` similarity of the rows of a ``[N, D]`` table: ``cosine``, ``centred``
    (the cosine after subtracting the mean row: what is left once the part every row
    shares is gone) or ``dot``."""
    table = table.detach().float()
    if kind == "centred":
        table = table - table.mean(0, keepdim=True)
    if kind in ("cosine", "centred"):
        table = torch.nn.functional.normalize(table, dim=1)
    elif kind != "dot":
        raise ValueError(f"kind must be 'cosine', 'centred' or 'dot', not {kind!r}")
    return table @ table.T  # (N, N)


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
    ops = {n.name: n.op for n in model.network.nodes}
    with torch.no_grad(), evaluating(model):
        x = table(x)  # (1, T, D): the rows themselves
        for name, layer in _layers_after(model, node):
            if name == until:
                break
            try:
                x = layer(x)
            except (StackError, RuntimeError, ValueError, TypeError, IndexError) as err:
                reason = err.message if isinstance(err, StackError) else str(err).split("\n")[0]
                raise StackError(
                    "E_SHAPE", f"the rows of {node} alone cannot pass {name} ({ops[name]}): "
                    f"{reason[:200]}", node=name, op=ops[name],
                    hint="this view needs every op between the table and its target to take "
                         "a [1, T, D] float sequence") from None
            if x.is_floating_point() and not bool(torch.isfinite(x).all()):
                raise StackError(
                    "E_VALUE", f"the rows of {node} alone become infinite or nan at {name} "
                    f"({ops[name]})", node=name, op=ops[name],
                    hint="the table or a layer on the way holds values too large to follow")
    return x


def _at_attention(model, node: str, T: int, what: str) -> torch.Tensor | None:
    """``what`` ("scores" or "weights") of the first attention after ``node`` on the rows of
    ``node`` alone, sent through every op between them, averaged over heads: ``[T, T]``."""
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


def attention_scores(model, node: str, T: int) -> torch.Tensor | None:
    """The query-key scores (before the softmax and any causal mask) that the rows of
    ``node`` alone give in the first attention after it, averaged over heads: ``[T, T]``;
    None when no attention follows. Raises `StackError` as `rows_alone`."""
    return _at_attention(model, node, T, "scores")


def positional_attention(run_or_model, node: str, T: int | None = None) -> torch.Tensor | None:
    """Where each position would attend if only the position table spoke: the softmax of
    the query-key scores of the table's first T rows, sent through every op between the
    table and the first attention after it (exactly as the model does), per head, averaged
    over heads (rows sum to 1). For ``reverse`` a bright anti-diagonal. None without an
    attention after the table; `StackError` (with the reason) when the rows cannot reach it.

    Takes a `Run` (its model, T = its seq_len) or a model and ``T``."""
    model, T = _model_and_length(run_or_model, T)
    return _at_attention(model, node, T, "weights")


def rows_alone_scores(run_or_model, node: str, T: int | None = None) -> torch.Tensor:
    """What the rest of the stack answers for each row of ``node`` fed alone (no token):
    ``[T, classes]`` scores (for the ``position`` task, row t should pick class t).
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


def _attention_input(run, attention, size: int = 256) -> torch.Tensor:
    """What ``attention`` gets as input on held-out sequences: ``[N, T, D]``, N at most one
    training batch (``size`` or fewer, so no more memory than a training step)."""
    captured = {}
    hook = attention.register_forward_pre_hook(lambda _, args: captured.setdefault("x", args[0]))
    x, _ = run.task.eval_set(run.config.seq_len, size=min(size, run.config.batch_size),
                             device=next(run.model.parameters()).device)
    try:
        with torch.no_grad(), evaluating(run.model):
            run.model(x)
    finally:
        hook.remove()
    return captured["x"]


def _mean_attention_input(run, attention) -> torch.Tensor:
    """The input the attention gets at each position, averaged over held-out sequences:
    ``[T, D]``. The tokens average out; what a position op added before the attention
    (a fixed ``sin_pos``) stays."""
    return _attention_input(run, attention).mean(0)  # (T, D)


def attention_without_table(run) -> tuple[str, torch.Tensor, torch.Tensor] | None:
    """For a stack with no position table: what the first attention does by position
    alone: each position holds its input averaged over held-out sequences, so the tokens
    average out and only positions tell them apart: a fixed encoding added before the
    attention (``sin_pos``), the one inside it (RoPE, ALiBi, relative bias), or just the
    causal mask.
    ``(attention's name, weights [T, T] averaged over heads, scores by offset [H, 2T-1])``,
    offsets key minus query from -(T-1) to T-1; None without an attention."""
    found = attention_after(run.model, None)
    if found is None:
        return None
    name, attention = found
    T = run.config.seq_len
    x = _mean_attention_input(run, attention)[None]  # (1, T, D)
    with torch.no_grad(), evaluating(run.model):
        weights = attention.weights(x)[0].mean(0).float().cpu()  # (T, T)
        scores = attention.scores(x)[0].float().cpu()  # (H, T, T)
    by_offset = torch.stack([torch.stack([head.diagonal(offset).mean() for offset in range(-(T - 1), T)])
                             for head in scores])  # (H, 2T-1)
    return name, weights, by_offset


def attention_map(run, node: str | None = None, size: int = 256) -> tuple[torch.Tensor, int] | None:
    """The attention weights of the first attention (after ``node``), measured on held-out
    sequences and averaged over sequences and heads: ``([T, T]`` rows sum to 1, the number
    of sequences averaged``)``. At most one training batch of sequences (``size`` or fewer)."""
    found = attention_after(run.model, node)
    if found is None:
        return None
    _, attention = found
    x = _attention_input(run, attention, size)
    with torch.no_grad(), evaluating(run.model):
        weights = attention.weights(x)  # (N, H, T, T)
    return weights.mean((0, 1)).float().cpu(), x.shape[0]


@dataclass(frozen=True)
class PCA:
    """Rows projected on their top principal components."""

    coords: torch.Tensor  # (N, k)
    explained: torch.Tensor  # (k,) fraction of the variance each component explains


def pca(table: torch.Tensor, k: int = 2, fit_rows: int | None = None) -> PCA:
    """Project the rows of ``table`` on the ``k`` leading principal components of its first
    ``fit_rows`` rows (default: all): fitted on the trained rows, the untrained ones do not
    bend the axes."""
    table = table.detach().double()  # double: large rows do not overflow the SVD
    fitted = table[:fit_rows] if fit_rows else table
    mean = fitted.mean(0, keepdim=True)
    try:
        _, s, v = torch.linalg.svd(fitted - mean, full_matrices=False)
    except RuntimeError as err:  # torch's LinAlgError: the SVD did not converge
        raise StackError("E_VALUE", f"the principal components of the rows cannot be "
                         f"computed ({str(err).splitlines()[0][:120]})",
                         hint="check the table for extreme values") from None
    k = min(k, v.shape[0])
    coords = ((table - mean) @ v[:k].T).float()  # (N, k)
    variance = s.square()
    total = variance.sum()
    explained = (variance[:k] / total).float() if total > 0 else torch.zeros(k)
    return PCA(coords=coords, explained=explained)


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
        rest = values[T:]
        return values[:T].mean().item(), rest.mean().item() if rest.numel() else float("nan")

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
    with _at_length(run, probe_len, size) as (x, y):
        chunk = run.config.eval_chunk(probe_len)
        accuracy = _accuracy_per_position(run.model, x, y, chunk)
        with _tables_at(run.model, run.initial_tables):
            baseline = _accuracy_per_position(run.model, x, y, chunk)
    return LengthProbe(trained_len=T, probe_len=probe_len, accuracy=accuracy, baseline=baseline)


def length_generalization(run, lengths, size: int = 512) -> dict[str, dict]:
    """Held-out accuracy of ``run``'s model on sequences of each length in ``lengths``
    (SPEC §16): ``{"32": {"accuracy": x, "per_position": [...]}}``. A length the stack
    cannot take (past a table's ``max_len``, or a stack whose shapes need the trained
    length) gets ``{"error": why}`` instead; a task whose labels change with the length
    adds its ``note``. The model comes back as it was."""
    found: dict[str, dict] = {}
    for length in map(int, lengths):
        try:
            with _at_length(run, length, size) as (x, y):
                per_position = _accuracy_per_position(run.model, x, y,
                                                      run.config.eval_chunk(length))
        except StackError as err:  # the stack cannot take this length
            found[str(length)] = {"error": err.message}
            continue
        entry = {"accuracy": round(per_position.mean().item(), 6),
                 "per_position": [round(v, 6) for v in per_position.tolist()]}
        if run.task.length_note and length != run.config.seq_len:
            entry["note"] = run.task.length_note
        found[str(length)] = entry
    return found


@contextlib.contextmanager
def _at_length(run, length: int, size: int):
    """Inside the block, ``run.model`` serves sequences of ``length`` (the stack re-resolved
    for it; `StackError` when it cannot be), and the block gets that length's held-out
    ``(x, y)``; after it, the model serves the trained length again."""
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
    """Held-out accuracy at each position, ``chunk`` sequences at a time (no more memory
    than a training step)."""
    correct = torch.zeros(x.shape[1], device=x.device)
    with torch.no_grad(), evaluating(model):
        for start in range(0, x.shape[0], chunk):
            logits = model(x[start:start + chunk])  # (chunk, P, classes)
            correct += (logits.argmax(-1) == y[start:start + chunk]).float().sum(0)
    return (correct / x.shape[0]).cpu()


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


# -- scores (SPEC §14-15) ----------------------------------------------------------------

TABLE_SCORES = ("cosine_by_distance", "translation_invariance", "monotonicity",
                "position_probe_error")


def _finite(value):
    """A score as JSON takes it: rounded, nan as None, lists element-wise."""
    if isinstance(value, list):
        return [_finite(v) for v in value]
    if value is None or value != value or value in (float("inf"), float("-inf")):
        return None
    return round(float(value), 6)


def rows_scores(rows: torch.Tensor) -> dict:
    """The scores that need only the rows (``[T, D]``): a table from anywhere. Rows that
    are all the same (or all zero) have no order to score: every score is None."""
    rows = rows.detach().float().cpu()
    spread = (rows.double() - rows.double().mean(0)).abs().max().item()
    if spread <= 1e-6 * rows.double().abs().max().item() or spread == 0:
        return {"cosine_by_distance": [None] * max(rows.shape[0] - 1, 0),
                "translation_invariance": None, "monotonicity": None,
                "position_probe_error": None}
    return {"cosine_by_distance": _finite(S.cosine_by_distance(rows)),
            "translation_invariance": _finite(S.translation_invariance(rows)),
            "monotonicity": _finite(S.monotonicity(rows)),
            "position_probe_error": _finite(S.position_probe_error(rows))}


def pattern_score(task, model, node: str, T: int) -> float | None:
    """The task's pattern score (SPEC §15) of ``node``'s first T rows in ``model``. Raises
    `StackError` with the reason when the model cannot give it (no attention after the
    table, or a path the rows cannot pass)."""
    rows = model.get_submodule(node).weight[:T].detach().float().cpu()
    kind = task.pattern_score
    if kind == "partner_attention":
        weights = positional_attention(model, node, T)
        if weights is None:
            raise StackError("E_SHAPE", f"no attention follows {node}, so no position can "
                             "look for its partner", node=node,
                             hint="add attention(...) after the position table")
        return _finite(S.partner_attention(weights, task.partner(T)))
    if kind == "period_contrast":
        return _finite(S.period_contrast(rows, task.vocab))
    if kind == "distance_rank":
        return _finite(S.distance_rank(rows))
    if kind == "rows_decoded":
        return _finite(S.rows_decoded(rows_alone_scores(model, node, T)))
    raise ValueError(f"unknown pattern score {kind!r}")


def model_scores(model, node: str, T: int, task) -> dict:
    """Every score of ``node``'s first T rows as ``model`` has them: the rows' own, the
    symmetry of the attention's query-key scores, the task's pattern; a score the model
    cannot give is None, with its reason under ``"skipped"``."""
    rows = model.get_submodule(node).weight[:T]
    values = rows_scores(rows)
    skipped = {}
    try:
        values["symmetry"] = _finite(S.symmetry(attention_scores(model, node, T)))
    except StackError as err:
        values["symmetry"], skipped["symmetry"] = None, err.message
    try:
        values["pattern"] = pattern_score(task, model, node, T)
    except StackError as err:
        values["pattern"], skipped["pattern"] = None, err.message
    if skipped:
        values["skipped"] = skipped
    return values


def scores(run) -> dict[str, dict]:
    """Every score of every position table of ``run``, trained and at init (SPEC §14):
    ``{node: {score: {"value", "init"}, "pattern": {"name", "value", "init"}}}``, with
    ``"skipped": {score: reason}`` for scores the stack cannot give."""
    T = run.config.seq_len
    found = {}
    for node in run.position_nodes:
        now = model_scores(run.model, node, T, run.task)
        init = run.initial_scores.get(node, {})
        entry = {name: {"value": now.get(name), "init": init.get(name)}
                 for name in (*TABLE_SCORES, "symmetry")}
        entry["pattern"] = {"name": run.task.pattern_score, "value": now.get("pattern"),
                            "init": init.get("pattern")}
        if "skipped" in now:
            entry["skipped"] = now["skipped"]
        found[node] = entry
    return found


def attention_pattern_without_table(run) -> dict | None:
    """For a stack with no position table and an attention (NoPE, RoPE, ALiBi, relative):
    the task's partner attention of `attention_without_table`, trained and at init
    (``{"node", "position", "pattern": {"name", "value", "init"}}``); None otherwise."""
    if run.position_nodes or run.task.partner is None:
        return None
    found = attention_without_table(run)
    if found is None:
        return None
    name, weights, _ = found
    partners = run.task.partner(run.config.seq_len)
    init = run.initial_scores.get("attention_by_position")  # the model as built: once a run
    if init is None:
        initial = types.SimpleNamespace(model=run.network.build(seed=run.config.seed,
                                                                device=run.device),
                                        config=run.config, task=run.task)
        init = _finite(S.partner_attention(attention_without_table(initial)[1], partners))
        run.initial_scores["attention_by_position"] = init
    return {"node": name, "position": getattr(run.model.get_submodule(name), "position", "none"),
            "pattern": {"name": "partner_attention",
                        "value": _finite(S.partner_attention(weights, partners)),
                        "init": init}}


def score_text(entry: dict, name: str, digits: int = 2) -> str:
    """``"partner attention 0.71 (at init 0.06)"`` for one score of `scores`' ``entry``."""
    score = entry[name]
    label = (score.get("name") or name).replace("_", " ")
    if score["value"] is None:
        reason = entry.get("skipped", {}).get(name)
        return f"{label}: not measured" + (f" ({reason})" if reason else "")
    text = f"{label} {score['value']:.{digits}f}"
    return text + (f" (at init {score['init']:.{digits}f})" if score.get("init") is not None else "")
