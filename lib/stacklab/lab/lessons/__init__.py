"""Guided lessons: each a short sequence of steps, one Markdown file each (`files`): the
built-in ones are the package's ``builtin/*.md``, a teacher's come from the folder
``STACKLAB_LESSONS`` names (or an upload, which the app keeps to its teacher's session).

A step says what to try, asks for a prediction, runs one experiment, points at the figure
that matters and states what the run must show (`model.Expect`); the test suite trains
every step's experiment and checks it (`check`). Pages open a step from a link
(``lesson=ID&step=N``, `step_from_link`), the notebook `Panel` from `open_step`.

>>> lesson, step = step_from_link("positions", "2")
>>> step.title
'Add a position table'
>>> config, source = open_step("positions", 2)
>>> config.task, "pos_embed(32)" in source
('reverse', True)
"""

from __future__ import annotations

import logging
import os
from importlib.resources import files as package_files
from pathlib import Path

from ...core.errors import StackError, choice_problem
from ..settings import TrainConfig
from .files import parse_lesson, read_lesson
from .model import METRICS, Expect, Lesson, Metric, Step, check
from .text import fill

__all__ = ["LESSONS", "Lesson", "Step", "Expect", "Metric", "METRICS", "check", "fill",
           "get_lesson", "step_from_link", "step_in", "step_link", "open_step", "parse_lesson",
           "read_lesson", "BUILTIN", "FOLDER_ENV", "FOLDER_PROBLEMS", "folder_lessons"]

FOLDER_ENV = "STACKLAB_LESSONS"  # a folder of a teacher's lesson files (*.md)
MAX_FOLDER_LESSONS = 100
_log = logging.getLogger(__name__)


def _builtin() -> tuple[Lesson, ...]:
    """The built-in lessons, in the order a newcomer takes them (their files' numbers)."""
    folder = package_files(__package__) / "builtin"
    names = sorted((entry.name for entry in folder.iterdir() if entry.name.endswith(".md")),
                   key=lambda name: int(name.split("-", 1)[0]))
    return tuple(read_lesson(folder / name) for name in names)


def folder_lessons(folder: str | os.PathLike | None) -> tuple[tuple[Lesson, ...], list[str]]:
    """The lessons of ``folder``'s ``*.md`` files (unchecked: the suite never trained their
    claims) and a line per file refused (its error's first line); none without a folder."""
    if not folder:
        return (), []
    lessons, problems = [], []
    for path in sorted(Path(folder).glob("*.md"))[:MAX_FOLDER_LESSONS]:
        try:
            lesson = read_lesson(path)
        except (StackError, OSError) as err:
            problems.append(f"{path.name}: {str(err).splitlines()[0]}")
            continue
        lessons.append(Lesson(lesson.id, lesson.title, lesson.summary, lesson.steps,
                              origin=str(path), checked=False))
    return tuple(lessons), problems


BUILTIN: tuple[Lesson, ...] = _builtin()
_FOLDER, FOLDER_PROBLEMS = folder_lessons(os.environ.get(FOLDER_ENV))
LESSONS: dict[str, Lesson] = {lesson.id: lesson for lesson in BUILTIN}
assert len(LESSONS) == len(BUILTIN), "two lessons share an id"
for _lesson in _FOLDER:  # a teacher's lesson never replaces a built-in one
    if _lesson.id in LESSONS:
        FOLDER_PROBLEMS.append(f"{_lesson.origin}: the id {_lesson.id!r} is taken")
    else:
        LESSONS[_lesson.id] = _lesson
for _problem in FOLDER_PROBLEMS:
    _log.warning("a lesson of %s was not loaded: %s", FOLDER_ENV, _problem)


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
    return step_in(get_lesson(lesson_id), step)


def step_in(lesson: Lesson, step: str | int | None = None) -> tuple[Lesson, Step]:
    """``lesson``'s step ``step`` (from 1; none: the first), as `step_from_link` reads it."""
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
    """What the notebook `Panel` needs to open a step: its settings as a `TrainConfig` (the
    task's defaults where the step says none) and the stack's text."""
    _, found = step_from_link(lesson_id, step)
    return found.config, found.source
