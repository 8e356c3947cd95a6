"""Guided lessons: each a short sequence of steps, declared once in its own file.

A step says what to try, asks for a prediction, runs one experiment, points at the figure
that matters and states what the run must show (`model.Expect`); the test suite trains
every step's experiment and checks it (`check`). Pages open a step from a link
(``lesson=ID&step=N``, `step_from_link`), the notebook Lab from `open_step`.

>>> lesson, step = step_from_link("positions", "2")
>>> step.title
'Add a position table'
>>> config, source = open_step("positions", 2)
>>> config.task, "pos_embed(32)" in source
('reverse', True)
"""

from __future__ import annotations

from ...core.errors import StackError, choice_problem
from ..settings import TrainConfig
from . import abacus, induction_heads, lengths, papers, positions, table_patterns, untrained_rows
from .model import METRICS, Expect, Lesson, Metric, Step, check

__all__ = ["LESSONS", "Lesson", "Step", "Expect", "Metric", "METRICS", "check",
           "get_lesson", "step_from_link", "step_link", "open_step"]

# In the order a newcomer takes them.
_IN_ORDER = (positions.LESSON, table_patterns.LESSON, untrained_rows.LESSON, lengths.LESSON,
              induction_heads.LESSON, papers.LESSON, abacus.LESSON)
LESSONS: dict[str, Lesson] = {lesson.id: lesson for lesson in _IN_ORDER}
assert len(LESSONS) == len(_IN_ORDER), "two lessons share an id"


def get_lesson(lesson_id: str) -> Lesson:
    """The lesson called ``lesson_id``; an unknown id is ``E_ARG`` naming the closest."""
    lesson = LESSONS.get(lesson_id)
    if lesson is None:
        raise StackError("E_ARG", choice_problem("lesson", lesson_id, tuple(LESSONS)),
                         hint="one of " + ", ".join(LESSONS))
    return lesson


def step_from_link(lesson_id: str, step: str | int | None = None) -> tuple[Lesson, Step]:
    """The lesson and step a link names (``lesson=ID&step=N``; steps count from 1; no step:
    the first). An unknown lesson or a step out of range is ``E_ARG`` that says which."""
    lesson = get_lesson(lesson_id)
    if step is None or (isinstance(step, str) and not step.strip()):
        return lesson, lesson.steps[0]
    text = str(step).strip()
    count = len(lesson.steps)
    if not (text.isascii() and text.isdigit() and 1 <= int(text) <= count):
        raise StackError("E_ARG", f"lesson {lesson.id!r} has steps 1 to {count}, not "
                         f"{text[:20]!r}", hint=f"use step=1 to step={count}")
    return lesson, lesson.steps[int(text) - 1]


def step_link(lesson: Lesson, step: Step) -> str:
    """The query of a link to ``step`` of ``lesson``: ``lesson=positions&step=2``."""
    return f"lesson={lesson.id}&step={lesson.steps.index(step) + 1}"


def open_step(lesson_id: str, step: str | int = 1) -> tuple[TrainConfig, str]:
    """What the notebook Lab needs to open a step: its settings as a `TrainConfig` (the
    task's defaults where the step says none) and the stack's text."""
    _, found = step_from_link(lesson_id, step)
    return found.config, found.source
