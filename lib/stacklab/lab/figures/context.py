"""What the figures of one run share (`FigureContext`, each part computed once), and what
the figures of a table from a file share (`TableContext`): the ``ctx`` every function of
a `stacklab.lab.figures.catalog.FigureSpec` is given."""

from __future__ import annotations

import html
from dataclasses import dataclass
from functools import cached_property

import torch

from ...core.errors import StackError
from .. import measure as analysis
from ..measure import head_scores as head_analysis, run_scores
from .style import MAX_TABLE_ROWS


class FigureContext:
    """What the figures of one run share, each part computed once (on first use)."""

    def __init__(self, run, node: str | None):
        self.run = run
        self.node = node  # the position table shown (None: the run has none)
        self.T = run.config.seq_len

    @cached_property
    def table(self):
        """The table's first rows (a huge table is cut to `MAX_TABLE_ROWS`): ``[N, D]``."""
        return self.run.table(self.node)[:MAX_TABLE_ROWS]

    @cached_property
    def scores(self) -> dict:
        """`analysis.position_table_scores` of the table shown."""
        return self.run.position_table_scores()[self.node]

    def score(self, name: str) -> str:
        if name == "pattern" and self.run.initial_scores:
            return analysis.score_text(self.pattern_only, name)  # the live figure: cheap
        return analysis.score_text(self.scores, name)

    @cached_property
    def pattern_only(self) -> dict:
        """The task's pattern score alone (trained and at init), in the form of `scores`:
        what the live pattern figure shows at each evaluation, without every other score."""
        init = self.run.initial_scores.get(self.node, {})
        entry = {"pattern": {"name": self.run.task.pattern_score, "value": None,
                             "init": init.get("pattern")}}
        try:
            entry["pattern"]["value"] = analysis.pattern_score(self.run.task, self.run.model,
                                                               self.node, self.T)
        except StackError as err:
            entry["skipped"] = {"pattern": err.message}
        return entry

    @cached_property
    def positional_attention(self):
        """`analysis.positional_attention` of the table (None when no attention follows);
        raises `StackError` when the rows cannot reach the attention."""
        return analysis.positional_attention(self.run, self.node)

    @property
    def has_attention(self) -> bool:
        return analysis.attention_after(self.run.model, self.node) is not None

    @cached_property
    def attention_map(self):
        """`analysis.attention_map`: (weights, number of sequences)."""
        return analysis.attention_map(self.run, self.node)

    @property
    def has_any_attention(self) -> bool:
        return bool(self.run.model.layers("attention"))

    @cached_property
    def head_scores(self) -> dict:
        """`Run.head_scores`: every head of every attention, trained and at init."""
        return self.run.head_scores()

    @property
    def head_sequences(self) -> int:
        return head_analysis.head_sequences(self.run.config)

    @cached_property
    def one_sequence(self):
        """`heads.one_sequence_attention`: the first held-out sequence and every head's
        weights on it."""
        return head_analysis.one_sequence_attention(self.run)

    @property
    def copy_note(self) -> str:
        """The copy length of the sequence shown, for a task whose sequences repeat."""
        lengths = self.run.task.copy_lengths
        return f" (copy length L = {int(lengths(self.one_sequence[0][None])[0])})" if lengths else ""

    @cached_property
    def without_table(self):
        """`analysis.attention_without_table` (for a stack with no position table)."""
        return analysis.attention_without_table(self.run)

    @property
    def position_markers(self) -> str:
        """What tells positions apart in a stack without a table, in words."""
        name = self.without_table[0]
        nodes = self.run.network.nodes
        earlier = nodes[:[n.name for n in nodes].index(name)]
        before = [n.op for n in earlier if n.spec.encodes_positions is not None
                  and n.spec.role != "position_table" and n.spec.encodes_positions(n.args)]
        found = [f"the {op} before the attention" for op in dict.fromkeys(before)]
        if self.attention_position != "none":
            found.append(f"position=\"{self.attention_position}\" inside it")
        if self.run.model.get_submodule(name).causal:
            found.append("the causal mask")
        return " and ".join(found) if found else "nothing (so every position looks alike)"

    @property
    def attention_position(self) -> str:
        name = self.without_table[0]
        return getattr(self.run.model.get_submodule(name), "position", "none")

    @cached_property
    def probe(self) -> analysis.LengthProbe:
        """The length probe (`analysis.length_probe`); `StackError` when it does not apply."""
        return analysis.length_probe(self.run)

    @property
    def spare_rows(self) -> bool:
        """Does every position table have rows past T (something for the length probe)?"""
        return all(self.run.model.get_submodule(n).max_len > self.T
                   for n in self.run.position_nodes)

    @property
    def untrained_note(self) -> str:
        return (f"; rows ≥ {self.T} (past the dashed lines) were never trained"
                if self.table.shape[0] > self.T else "")

    @property
    def look_for(self) -> str:
        task = self.run.task
        if not task.mixing:
            return f"What to look for: {task.pattern}"
        return ("In this task positions must find each other, so the pattern shows in the "
                "attention maps below; the rows themselves need not look alike.")

    @property
    def table_pattern(self) -> bool:
        """Is the task's pattern score one of the rows alone (not of attention or the head)?"""
        return run_scores.pattern_needs(self.run.task) == run_scores.ROWS


@dataclass(frozen=True)
class TableContext:
    """What the figures of a table from a file share (`stacklab.lab.reports.table_file`): no model, no
    task, no training; its scores come from `stacklab.lab.reports.table_file.table_scores`."""

    name: str  # what the figures call the table ("wpe")
    values: torch.Tensor  # the whole table, [N, D]
    scores: dict  # `table_scores` of it

    @property
    def rows(self) -> int:
        """The rows scored (the first ones), which the PCA and the sinusoid look at."""
        return self.scores["rows_scored"]

    @property
    def shown(self) -> torch.Tensor:
        """The table's first rows (a huge table is cut to `MAX_TABLE_ROWS`)."""
        return self.values[:MAX_TABLE_ROWS]

    @property
    def title_name(self) -> str:
        """The name as a plotly title shows it: plotly reads tags (<a href>, <b>) there."""
        return html.escape(self.name, quote=False)

    def score(self, name: str, label: str) -> str:
        """``"monotonicity 0.85"``; empty when the score does not apply (too few rows)."""
        value = self.scores[name]
        return f"{label} {value:.2f}" if value is not None else ""


