"""The checker's reading of a lesson, before anything trains: each step's stack resolved for
its task, and the lint (a question that does not name the quantity its choices are about, a
term used before the lesson says what it is, a literal number where the run's number
belongs, a figure whose caption contradicts the stack). Each problem is a `StackError`
with the file's line, a caret and a fix; `claim_line` says how a step's claim came out on
each seed.

>>> from .model import Expect
>>> claim_line(Expect("pattern", ">=", 0.6), [0.72, 0.75, 0.78])
'needs ≥ 0.6; seeds 0.72 0.75 0.78; margin 0.12'
"""

from __future__ import annotations

import re
from typing import Mapping, Protocol

from ...core.errors import StackError
from ...core.language import parse as parse_stack
from ..glossary import terms_in
from ..tasks import get_task
from ..train.plan import fit_network
from .files import parse_lesson
from .model import METRICS, Expect, Lesson, Step
from .text import literal_numbers

__all__ = ["FigureFacts", "quick_check", "lint", "claim_line", "margin", "TABLE_OPS"]

TABLE_OPS = ("pos_embed", "sin_pos")  # ops that add a position table to the tokens
LEARNED_TABLE_OPS = ("pos_embed",)


class FigureFacts(Protocol):
    """What the lint needs of a figure (a `FigureSpec` of the catalog, which the caller
    passes): its title, and whether it shows a learned table (its caption speaks of one)."""

    title: str
    needs_table: bool


def quick_check(data: bytes | str, name: str,
                figures: Mapping[str, FigureFacts]) -> tuple[Lesson | None, list[StackError]]:
    """Parse, resolve and lint a lesson file: the lesson (None when it does not parse) and
    its problems (the parse error alone, when it does not)."""
    try:
        lesson = parse_lesson(data, name)
    except StackError as err:
        return None, [err]
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    return lesson, lint(lesson, text, name, figures)


def margin(expect: Expect, value: float) -> float:
    """How far ``value`` is inside the claim's bound (negative: the claim fails)."""
    return value - expect.bound if expect.op == ">=" else expect.bound - value


def claim_line(expect: Expect, values: list[float | None]) -> str:
    """``needs ≥ 0.6; seeds 0.72 0.75 0.78; margin 0.12`` (a seed without the number:
    ``-``, and no margin)."""
    sign = "≥" if expect.op == ">=" else "≤"
    seeds = " ".join("-" if value is None else f"{value:.2f}" for value in values)
    if any(value is None for value in values):
        return f"needs {sign} {expect.bound:g}; seeds {seeds}; not measured on every seed"
    return (f"needs {sign} {expect.bound:g}; seeds {seeds}; margin "
            f"{min(margin(expect, value) for value in values):.2f}")


class _Finder:
    """Places in the file: the first line at or after a step's heading holding a text."""

    def __init__(self, name: str, text: str):
        self.name, self.lines = name, text.replace("\r\n", "\n").split("\n")

    def problem(self, step: Step, needle: str, message: str, hint: str) -> StackError:
        """A problem at ``needle``'s first place in the step's section (a text wrapped over
        two lines: its first word's; not there: the step's question)."""
        number, col = step.line or 1, 1
        end = next((index for index in range(step.line, len(self.lines))
                    if self.lines[index].startswith("## ")), len(self.lines))
        for wanted in (needle[:40], needle.split(" ")[0], "Question:"):
            found = next(((index, self.lines[index].find(wanted))
                          for index in range(max(0, step.line - 1), end)
                          if wanted and self.lines[index].find(wanted) >= 0), None)
            if found is not None:
                number, col = found[0] + 1, found[1] + 1
                break
        text = self.lines[number - 1] if number <= len(self.lines) else None
        return StackError("E_ARG", message, line=number, col=col, node=self.name, hint=hint,
                          source_line=text, span=max(1, min(len(needle), 40)))


def lint(lesson: Lesson, text: str, name: str,
         figures: Mapping[str, FigureFacts]) -> list[StackError]:
    """Every problem of ``lesson`` (read from ``text``, the file ``name``), in file order:
    its stacks resolved for their tasks first (a stack that does not fit is a problem)."""
    finder = _Finder(name, text)
    problems: list[StackError] = []
    introduced = {term.term for term in terms_in(lesson.summary)}
    for step in lesson.steps:
        problems += _stack_problems(finder, step, figures)
        introduced |= {term.term for term in terms_in(step.title + " " + step.text)}
        problems += _question_problems(finder, step)
        problems += _term_problems(finder, step, introduced)
        problems += _number_problems(finder, step)
    return problems


def _stack_problems(finder: _Finder, step: Step, figures) -> list[StackError]:
    config = step.config.filled()
    try:
        fit_network(step.source, get_task(config.task), config.seq_len)
    except StackError as err:
        return [finder.problem(step, "```stack", f"the stack does not fit task {config.task}: "
                               f"{err.message}", err.hint or "fix the stack")]
    facts = figures.get(step.figure)
    if facts is None:
        return [finder.problem(step, f"figure: {step.figure}", f"there is no figure "
                               f"{step.figure!r}", "one of " + ", ".join(figures))]
    ops = {call.op for call in parse_stack(step.source).calls}
    if "no table" in facts.title and ops & set(TABLE_OPS):
        table = sorted(ops & set(TABLE_OPS))[0]
        return [finder.problem(step, f"figure: {step.figure}", f"the figure {facts.title!r} "
                               f"is captioned for a stack without a position table, and this "
                               f"stack has {table}", "choose a figure that fits the stack, "
                               "e.g. training_curves")]
    if facts.needs_table and not ops & set(LEARNED_TABLE_OPS):
        return [finder.problem(step, f"figure: {step.figure}", f"the figure {facts.title!r} "
                               "shows a learned position table, and this stack has none",
                               "choose a figure that fits the stack, e.g. training_curves")]
    return []


def _question_problems(finder: _Finder, step: Step) -> list[StackError]:
    names = METRICS[step.expect.metric].names
    if any(word.lower() in step.question.lower() for word in names):
        return []
    return [finder.problem(step, "Question:", f"the question does not name "
                           f"{step.expect.label!r}, the number its choices are about",
                           f"name it in the question, e.g. 'What will the {names[0]} be?'")]


def _term_problems(finder: _Finder, step: Step, introduced: set[str]) -> list[StackError]:
    later = " ".join((step.question, step.expect.label, step.answer, step.try_next))
    problems = []
    for term in terms_in(later):
        if term.term in introduced:
            continue
        word = next((w for w in term.words if re.search(re.escape(w), later, re.I)), term.term)
        problems.append(finder.problem(
            step, word, f"{term.term!r} is used before the lesson says what it is",
            f"say what it is in this step's text or an earlier one (its glossary entry: "
            f"{term.definition[:80]}...)"))
        introduced.add(term.term)
    return problems


def _number_problems(finder: _Finder, step: Step) -> list[StackError]:
    problems = []
    for field in ("text", "question", "answer", "try_next"):
        for found in literal_numbers(getattr(step, field)):
            shown = found.group(0)
            if shown.rstrip().endswith("%"):
                message, hint = (f"{shown!r} writes a share as a percentage",
                                 "write shares as decimals (0.17), as the app shows a run's")
            else:
                message, hint = (f"{shown!r}: a literal number where the run's number "
                                 "belongs", "write the run's number as a placeholder, e.g. "
                                 "{" + step.expect.metric + "}, in 'Why:'")
            problems.append(finder.problem(step, shown, message, hint))
    return problems
