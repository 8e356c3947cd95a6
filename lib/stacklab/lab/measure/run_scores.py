"""Every score of a run, gathered from the score maths (`stacklab.lab.measure.score_maths`)
and the probes (`stacklab.lab.measure.probes`): the rows' own scores, the symmetry of the
attention's query-key logits, the task's pattern score, trained and at init, as JSON
takes them (rounded, nan as None), with the reason of every score a stack cannot give.

>>> rows_scores(torch.zeros(4, 2))["monotonicity"] is None  # rows all alike: no order
True
>>> score_text({"pattern": {"name": "partner_attention", "value": 0.714, "init": 0.06}},
...            "pattern")
'partner attention 0.71 (at init 0.06)'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from ...core.errors import StackError
from . import head_scores as heads, probes
from . import score_maths
from .score_maths import finite_score  # public here too: the score of a run as JSON takes it

__all__ = ["TABLE_SCORES", "PatternScore", "PATTERN_SCORES", "pattern_needs", "finite_score",
           "rows_scores", "pattern_score", "model_scores", "position_table_scores",
           "partner_attention_without_table", "attention_pattern_without_table", "score_text"]

TABLE_SCORES = ("cosine_by_distance", "translation_invariance", "monotonicity",
                "position_probe_error")


def rows_scores(rows: torch.Tensor) -> dict:
    """The scores that need only the rows (``[T, D]``): a table from anywhere. Rows that
    are all the same (or all zero) have no order to score: every score is None."""
    rows = rows.detach().float().cpu()
    exact = rows.double()  # one float64 copy: a wide table's rows are many bytes
    spread = (exact - exact.mean(0)).abs_().max().item()
    if spread <= 1e-6 * exact.abs().max().item() or spread == 0:
        return {"cosine_by_distance": [None] * max(rows.shape[0] - 1, 0),
                "translation_invariance": None, "monotonicity": None,
                "position_probe_error": None}
    return {"cosine_by_distance": finite_score(score_maths.cosine_by_distance(rows)),
            "translation_invariance": finite_score(score_maths.translation_invariance(rows)),
            "monotonicity": finite_score(score_maths.monotonicity(rows)),
            "position_probe_error": finite_score(score_maths.position_probe_error(rows))}


# what a pattern score reads, for the figures that show it (`PatternScore.needs`)
ROWS = "the rows alone"
ROWS_THROUGH_STACK = "each row alone through the rest of the stack"
ATTENTION = "an attention after the table"
HEADS = "every head on held-out sequences"


@dataclass(frozen=True)
class PatternScore:
    """A task's pattern score (`Task.pattern_score` names one), declared once:
    its label and definition, what it reads (`ROWS`, `ROWS_THROUGH_STACK`, `ATTENTION`,
    `HEADS`), the head score it is the largest of (for a stack without a table), and how
    it is measured: ``measure(task, model, node, T, rows [T, D])``."""

    name: str
    label: str
    definition: str
    needs: str
    measure: Callable[..., float | None]
    head_score: str | None = None  # `HEAD_SCORES` entry it is the largest of, if any


def _partner_attention(task, model, node: str, T: int, rows) -> float | None:
    weights = probes.positional_attention(model, node, T)
    if weights is None:
        raise StackError("E_SHAPE", f"no attention follows {node}, so no position can "
                         "look for its partner", node=node,
                         hint="add attention(...) after the position table")
    return finite_score(score_maths.partner_attention(weights, task.partner(T)))


def _induction(task, model, node: str, T: int, rows) -> float | None:
    found = heads.largest(heads.model_head_scores(model, task, T, chunk=heads.head_chunk(task, T)),
                          "induction", key=None)
    if found is None:
        raise StackError("E_SHAPE", "the stack has no attention, so no head can look back "
                         "at the earlier copy", node=node,
                         hint="add two attention(..., causal=true) layers")
    return found


PATTERN_SCORES: dict[str, PatternScore] = {score.name: score for score in (
    PatternScore("partner_attention", "partner attention", "the mean attention-by-position "
                 "weight from each position to its partner", ATTENTION, _partner_attention),
    PatternScore("induction", "induction", "the largest induction score of any head",
                 HEADS, _induction, head_score="induction"),
    PatternScore("period_contrast", "period contrast", "the mean cosine of rows a multiple "
                 "of the period apart, minus that of the other pairs", ROWS,
                 lambda task, model, node, T, rows: finite_score(
                     score_maths.period_contrast(rows, task.vocab))),
    PatternScore("distance_rank", "distance rank", "the Spearman correlation of a pair's "
                 "cosine with minus its distance", ROWS,
                 lambda task, model, node, T, rows: finite_score(score_maths.distance_rank(rows))),
    PatternScore("rows_decoded", "rows decoded", "the fraction of rows that, fed alone "
                 "through the rest of the stack, pick their own position", ROWS_THROUGH_STACK,
                 lambda task, model, node, T, rows: finite_score(score_maths.rows_decoded(
                     probes.rows_alone_scores(model, node, T)))),
)}


def pattern_needs(task) -> str:
    """What ``task``'s pattern score reads (`PatternScore.needs`)."""
    return PATTERN_SCORES[task.pattern_score].needs


def pattern_score(task, model, node: str, T: int) -> float | None:
    """The task's pattern score of ``node``'s first T rows in ``model``. Raises
    `StackError` with the reason when the model cannot give it (no attention after the
    table, or a path the rows cannot pass)."""
    rows = model.get_submodule(node).weight[:T].detach().float().cpu()
    return PATTERN_SCORES[task.pattern_score].measure(task, model, node, T, rows)


def model_scores(model, node: str, T: int, task) -> dict:
    """Every score of ``node``'s first T rows as ``model`` has them: the rows' own, the
    symmetry of the attention's query-key logits, the task's pattern; a score the model
    cannot give is None, with its reason under ``"skipped"``."""
    rows = model.get_submodule(node).weight[:T]
    values = rows_scores(rows)
    skipped = {}
    try:
        values["symmetry"] = finite_score(
            score_maths.symmetry(probes.attention_logits(model, node, T)))
    except StackError as err:
        values["symmetry"], skipped["symmetry"] = None, err.message
    try:
        values["pattern"] = pattern_score(task, model, node, T)
    except StackError as err:
        values["pattern"], skipped["pattern"] = None, err.message
    if skipped:
        values["skipped"] = skipped
    return values


def position_table_scores(run) -> dict[str, dict]:
    """Every score of every position table of ``run``, trained and at init:
    ``{node: {score: {"value", "init"}, "pattern": {"name", "value", "init"}}}``, with
    ``"skipped": {score: reason}`` for scores the stack cannot give. `Run.position_table_scores`
    keeps them for the step."""
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


def partner_attention_without_table(run, model=None) -> tuple[str, float | None] | None:
    """For a stack with no position table and an attention (NoPE, RoPE, ALiBi, relative)
    on a task with partners: ``(attention's name, partner attention)`` of
    `probes.attention_without_table` on ``model`` (default: the run's; the model as built
    gives the score at init). None for other stacks and tasks."""
    if run.position_nodes or run.task.partner is None:
        return None
    found = probes.attention_without_table(run, model)
    if found is None:
        return None
    name, weights, _ = found
    return name, finite_score(score_maths.partner_attention(weights,
                                                            run.task.partner(run.config.seq_len)))


def attention_pattern_without_table(model, name: str, value: float | None,
                                    init: float | None) -> dict:
    """The ``attention_by_position`` entry of ``metrics.json`` for attention ``name`` of
    ``model``, whose partner score is ``value`` trained and ``init`` at init:
    ``{"node", "position", "pattern": {"name", "value", "init"}}``. `Run.attention_pattern`
    measures both (`partner_attention_without_table`)."""
    return {"node": name, "position": getattr(model.get_submodule(name), "position", "none"),
            "pattern": {"name": "partner_attention", "value": value, "init": init}}


def score_text(entry: dict, name: str, digits: int = 2) -> str:
    """``"partner attention 0.71 (at init 0.06)"`` for one score of an entry of
    `position_table_scores`."""
    score = entry[name]
    label = (score.get("name") or name).replace("_", " ")
    if score["value"] is None:
        reason = entry.get("skipped", {}).get(name)
        return f"{label}: not measured" + (f" ({reason})" if reason else "")
    text = f"{label} {score['value']:.{digits}f}"
    return text + (f" (at init {score['init']:.{digits}f})" if score.get("init") is not None else "")


def _check_tasks() -> None:
    """Every task's pattern score is declared in `PATTERN_SCORES`: a wrong one fails on
    import, not in the middle of a run."""
    from ..tasks import TASKS

    for task in TASKS.values():
        assert task.pattern_score in PATTERN_SCORES, (task.name, task.pattern_score)


_check_tasks()
