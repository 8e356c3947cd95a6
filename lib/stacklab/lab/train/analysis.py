"""What a run's figures and ``metrics.json`` ask of it, measured once per step (`RunAnalysis`).

Every score of its position tables (`RunAnalysis.position_table_scores`), the head scores
of its attentions (`RunAnalysis.head_scores`) and, for a stack without a table, the
attention's partner score (`RunAnalysis.attention_pattern`). Each is measured on first use
at a step and kept until the run's step or status changes, so the figures and
``metrics.json`` share one measurement.

The scores at init of the head scores and of the partner score are measured on the model
as built again (`stacklab.lab.train.rebuild`) and kept in the run's ``initial_measures``
under the names in `INITIAL_MEASURES`, so a stored run keeps them. They are kept apart from
``initial_scores`` (per position table, by node name): a node may have any name.
"""

from __future__ import annotations

from typing import Callable

from ..measure import head_scores as heads, run_scores
from .rebuild import model_as_built

# where `Run.initial_measures` keeps the partner score of the model as built, for a stack
# without a position table
INITIAL_ATTENTION_PATTERN = "attention_by_position"
# where it keeps the head scores of the model as built (`heads.model_head_scores`)
INITIAL_HEAD_SCORES = "attention_heads"
INITIAL_MEASURES = (INITIAL_ATTENTION_PATTERN, INITIAL_HEAD_SCORES)


class RunAnalysis:
    """The scores of one run (a `stacklab.Run`), each measured once per step and status."""

    def __init__(self, run):
        self.run = run
        self._kept: dict[str, tuple] = {}  # name -> ((step, status), value)

    def _current(self, name: str, measure: Callable[[], object]):
        """The value of ``name`` measured at the run's step and status (measured now when
        the one kept is older)."""
        now = (self.run.step, self.run.status)
        kept = self._kept.get(name)
        if kept is None or kept[0] != now:
            kept = self._kept[name] = (now, measure())
        return kept[1]

    def position_table_scores(self) -> dict[str, dict]:
        """Every score of every position table, trained and at init
        (`run_scores.position_table_scores`)."""
        return self._current("tables", lambda: run_scores.position_table_scores(self.run))

    def attention_pattern(self) -> dict | None:
        """For a stack without a position table: the attention's partner score, trained
        and at init (`run_scores.attention_pattern_without_table`); None for other stacks."""
        return self._current("attention_pattern", self._measure_attention_pattern)

    def _measure_attention_pattern(self) -> dict | None:
        found = run_scores.partner_attention_without_table(self.run)
        if found is None:
            return None
        return run_scores.attention_pattern_without_table(
            self.run.model, *found, init=self.initial_attention_partner())

    def head_scores(self) -> dict[str, dict]:
        """Every head score of every attention node, trained and at init
        (`heads.head_scores`); empty without attention."""
        return self._current("heads", lambda: heads.head_scores(self.run))

    def initial_attention_partner(self) -> float | None:
        """The partner score of the model as built
        (`run_scores.partner_attention_without_table`), for a stack without a position
        table. Measured on first use and kept in ``initial_measures``."""
        measures = self.run.initial_measures
        if measures.get(INITIAL_ATTENTION_PATTERN) is None:
            found = run_scores.partner_attention_without_table(self.run,
                                                               model_as_built(self.run))
            measures[INITIAL_ATTENTION_PATTERN] = found[1]
        return measures[INITIAL_ATTENTION_PATTERN]

    def initial_head_scores(self) -> dict[str, dict]:
        """`heads.model_head_scores` of the model as built. Measured on first use and kept
        in ``initial_measures``."""
        measures, config = self.run.initial_measures, self.run.config
        if measures.get(INITIAL_HEAD_SCORES) is None:
            measures[INITIAL_HEAD_SCORES] = heads.model_head_scores(
                model_as_built(self.run), self.run.task, config.seq_len,
                heads.head_sequences(config), config.eval_chunk(config.seq_len))
        return measures[INITIAL_HEAD_SCORES]
