"""A lesson as a Markdown file, read by a small hand-written parser (never eval, YAML or
pickle): a teacher writes one in any editor, the built-in lessons are such files.

The format (``docs/lessons.md`` has a complete example)::

    # The lesson's title
    ```lesson
    id: my-lesson
    ```
    The summary: what the lesson teaches.

    ## A step's title
    What to try (the step's text; Markdown, several paragraphs allowed).
    ```stack                 (optional: without it, the task's preset)
    embedding(16, 32)
    ...
    ```
    ```step
    task: reverse            (any setting a link carries, in a link's form)
    seed: 0
    figure: training_curves  (the figure that matters)
    claim: accuracy <= 0.3   (a condition on one named number of the run)
    ```
    Question: What held-out accuracy will it reach?
    Why: {accuracy}: ... (shown after the run; {name} is that number of the run)
    Try next: ...

Every input is bounded before it is read (`MAX_BYTES`, `MAX_STEPS`, `MAX_LINE_CHARS`, a
stack as long as a link carries); every problem is a `StackError` with the file's line, a
caret and a fix.

>>> lesson = parse_lesson(EXAMPLE, "example.md")
>>> lesson.id, len(lesson.steps), lesson.steps[0].expect.text
('example', 1, 'held-out accuracy at most 0.3')
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ...core.errors import StackError, choice_problem
from ..settings import SETTINGS
from .model import METRICS, OPS, Expect, Lesson, Step
from .text import check_placeholders

__all__ = ["parse_lesson", "read_lesson", "MAX_BYTES", "MAX_STEPS", "MAX_LINE_CHARS",
           "MAX_STACK_CHARS", "EXAMPLE"]

MAX_BYTES = 64 * 1024  # a lesson file: the built-in ones are under 10 KB
MAX_STEPS = 30  # steps of one lesson (a class hour holds far fewer)
MAX_LINE_CHARS = 2_000  # one line of a lesson file
MAX_STACK_CHARS = 8_000  # a step's stack opens as a link: as long as a link carries
FIELDS = {"question": "Question:", "answer": "Why:", "try_next": "Try next:"}
STEP_KEYS = ("figure", "claim")  # besides the settings a link carries
_CLAIM = re.compile(r"^([A-Za-z_]\w*)(?:\s+at\s+(\d{1,6}))?\s*(>=|<=|≥|≤)\s*(-?\d+(?:\.\d+)?)$")

EXAMPLE = """# An example
```lesson
id: example
```
Attention alone cannot reverse a sequence.

## Attention without positions
The stack has no position table.
```stack
embedding(8, 32)
attention(4)
linear(8)
```
```step
task: reverse
seq_len: 8
steps: 20
seed: 0
figure: training_curves
claim: accuracy <= 0.3
```
Question: What held-out accuracy will it reach?
Why: {accuracy}: without positions it can only guess.
Try next: Add pos_embed(8) after the embedding.
"""


@dataclass
class _Source:
    """The file being read: its name and lines, for errors that show a line and a caret."""

    name: str
    lines: list[str]

    def error(self, number: int, message: str, hint: str, col: int = 1,
              span: int = 1, code: str = "E_PARSE") -> StackError:
        text = self.lines[number - 1] if 1 <= number <= len(self.lines) else None
        return StackError(code, message, line=number, col=col, node=self.name, hint=hint,
                          source_line=text, span=span)


@dataclass
class _StepDraft:
    """What a step's section says, with the line of each part (for errors)."""

    title: str
    line: int
    text: list[str] = field(default_factory=list)
    stack: str | None = None
    stack_line: int = 0
    settings: dict[str, tuple[str, int]] = field(default_factory=dict)
    settings_line: int = 0
    fields: dict[str, tuple[list[str], int]] = field(default_factory=dict)


def read_lesson(path) -> Lesson:
    """The lesson in the file at ``path`` (a `pathlib.Path` or a package resource)."""
    with path.open("rb") as handle:
        data = handle.read(MAX_BYTES + 1)
    return parse_lesson(data, getattr(path, "name", str(path)))


def parse_lesson(data: bytes | str, name: str = "lesson.md") -> Lesson:
    """Parse a lesson file's text (or bytes, UTF-8) into a `Lesson`; ``E_PARSE`` (or
    ``E_ARG`` for a setting or claim) with the line, a caret and a fix otherwise."""
    text = _decoded(data, name)
    source = _Source(name, text.split("\n"))
    for number, line in enumerate(source.lines, start=1):
        if len(line) > MAX_LINE_CHARS:
            raise source.error(number, f"line {number} is {len(line):,} characters long; at "
                               f"most {MAX_LINE_CHARS:,} are read", "break the line",
                               col=MAX_LINE_CHARS + 1)
    title, lesson_id, summary, drafts = _sections(source)
    steps = tuple(_step(source, draft) for draft in drafts)
    try:
        return Lesson(id=lesson_id[0], title=title, summary=summary, steps=steps,
                      origin=name)
    except StackError as err:
        raise source.error(lesson_id[1] or 1, err.message, err.hint, code=err.code) from None


def _decoded(data: bytes | str, name: str) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    if len(data) > MAX_BYTES:
        raise StackError("E_PARSE", f"the lesson file is over {MAX_BYTES // 1024} KB; a lesson "
                         f"is read up to {MAX_BYTES // 1024} KB", node=name,
                         hint="split it into several lessons")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[:err.start].count(b"\n") + 1
        raise StackError("E_PARSE", "the lesson file is not UTF-8 text", line=line, node=name,
                         hint="save it as UTF-8 (plain text)") from None
    if "\x00" in text:
        raise StackError("E_PARSE", "the lesson file contains a NUL character", node=name,
                         line=text.count("\n", 0, text.index("\x00")) + 1,
                         hint="lessons are plain text")
    return text.removeprefix("\ufeff").replace("\r\n", "\n")


def _fence(source: _Source, start: int) -> tuple[str, list[str], int]:
    """The fenced block opening at line ``start`` (0-based): its kind, lines, next index."""
    kind = source.lines[start].strip()[3:].strip()
    end = start + 1
    while end < len(source.lines) and source.lines[end].strip() != "```":
        end += 1
    if end == len(source.lines):
        raise source.error(start + 1, f"the ```{kind} block is never closed",
                           "end it with a line of three backticks: ```")
    return kind, source.lines[start + 1:end], end + 1


def _sections(source: _Source):
    """The lesson's title, id (with its line), summary and its steps' drafts."""
    title, lesson_id, summary, drafts = None, (None, 0), [], []
    index = 0
    while index < len(source.lines):
        line, number = source.lines[index], index + 1
        stripped = line.strip()
        if stripped.startswith("```"):
            kind, body, index = _fence(source, index)
            _block(source, number, kind, body, drafts)
            if kind == "lesson":
                lesson_id = _lesson_block(source, number, body)
            continue
        index += 1
        if line.startswith("# ") and title is None:
            title = line[2:].strip()
        elif line.startswith("## "):
            if len(drafts) == MAX_STEPS:
                raise source.error(number, f"the lesson has more than {MAX_STEPS} steps",
                                   f"keep a lesson to at most {MAX_STEPS} steps; split it")
            drafts.append(_StepDraft(line[3:].strip(), number))
        elif drafts:
            _prose(drafts[-1], line, number)
        elif stripped and title is not None:
            summary.append(stripped)
    if title is None:
        raise source.error(1, "the lesson has no title", "start the file with '# Its title'")
    if lesson_id[0] is None:
        raise source.error(1, "the lesson has no id", "add a block ```lesson with 'id: "
                           "my-lesson' under the title")
    if not drafts:
        raise source.error(len(source.lines), "the lesson has no steps",
                           "add a step: a line '## Its title' and its ```step block")
    return title, lesson_id, " ".join(summary), drafts


def _block(source: _Source, number: int, kind: str, body: list[str], drafts: list) -> None:
    """A fenced block of the step under way: its stack, or its settings."""
    if kind == "lesson":
        return
    if kind not in ("stack", "step"):
        raise source.error(number, f"a lesson has ```lesson, ```stack and ```step blocks, not "
                           f"```{kind[:30]}", "name the block stack or step", col=4,
                           span=max(1, len(kind)))
    if not drafts:
        raise source.error(number, f"a ```{kind} block before the first step",
                           "put it under a step's '## title'")
    draft = drafts[-1]
    if kind == "stack":
        stack = "\n".join(body)
        if len(stack) > MAX_STACK_CHARS:
            raise source.error(number, f"the stack is {len(stack):,} characters long; a step's "
                               f"stack is at most {MAX_STACK_CHARS:,} (what a link carries)",
                               "shorten the stack: a lesson step should train in seconds")
        draft.stack, draft.stack_line = stack, number
        return
    draft.settings_line = number
    for offset, line in enumerate(body, start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, colon, value = line.partition(":")
        if not colon or not key.strip():
            raise source.error(number + offset, "a setting is 'name: value'",
                               "e.g. 'task: reverse' or 'claim: accuracy >= 0.9'")
        draft.settings[key.strip()] = (value.strip(), number + offset)


def _lesson_block(source, number, body) -> tuple[str, int]:
    for offset, line in enumerate(body, start=1):
        key, _, value = line.partition(":")
        if key.strip() == "id":
            return value.strip(), number + offset
        if line.strip():
            raise source.error(number + offset, f"the ```lesson block takes only id, not "
                               f"{key.strip()[:30]!r}", "write 'id: my-lesson'")
    raise source.error(number, "the ```lesson block has no id", "write 'id: my-lesson'")


def _prose(draft: _StepDraft, line: str, number: int) -> None:
    """A prose line of a step: it starts a field (``Question:``) or continues the last one."""
    for name, label in FIELDS.items():
        if line.startswith(label):
            draft.fields[name] = ([line[len(label):].strip()], number)
            return
    if draft.fields:
        last = list(draft.fields.values())[-1][0]
        if line.strip():
            last.append(line.strip())
        elif last and last[-1] != "":
            last.append("")
    elif line.strip() or (draft.text and draft.text[-1] != ""):
        draft.text.append(line.strip())


def _joined(lines: list[str]) -> str:
    """Lines of prose as Markdown paragraphs (a blank line between two)."""
    return "\n\n".join(" ".join(part.split("\n")) for part in
                       "\n".join(lines).strip().split("\n\n"))


def _step(source: _Source, draft: _StepDraft) -> Step:
    if not draft.settings_line:
        raise source.error(draft.line, f"step {draft.title!r} has no ```step block",
                           "add a ```step block with its task, figure and claim")
    texts = {"text": _joined(draft.text)}
    for name, label in FIELDS.items():
        if name not in draft.fields:
            raise source.error(draft.line, f"step {draft.title!r} has no {label[:-1]!r} line",
                               f"add a paragraph starting '{label}'")
        texts[name] = _joined(draft.fields[name][0])
    settings = _settings(source, draft)
    figure, figure_line = draft.settings.get("figure", (None, draft.settings_line))
    if not figure:
        raise source.error(draft.settings_line, "the step names no figure",
                           "add 'figure: training_curves' (the figure that matters)")
    expect = _claim(source, draft)
    for name, (lines, number) in draft.fields.items():
        check_placeholders(source.error, texts[name], number, name, expect)
    check_placeholders(source.error, texts["text"], draft.line, "text", expect)
    try:
        return Step(title=draft.title, settings=settings, figure=figure, expect=expect,
                    stack=draft.stack, line=draft.line, **texts)
    except StackError as err:
        raise source.error(draft.settings_line, err.message, err.hint, code=err.code) from None


def _settings(source: _Source, draft: _StepDraft) -> dict:
    settings = {}
    for key, (raw, number) in draft.settings.items():
        if key in STEP_KEYS:
            continue
        row = SETTINGS.get(key)
        if row is None or not row.link:
            names = tuple(r.name for r in SETTINGS.values() if r.link) + STEP_KEYS
            raise source.error(number, choice_problem("setting", key, names),
                               "one of " + ", ".join(names), span=len(key), code="E_ARG")
        value, problem = row.parse_link(raw)
        if problem:
            raise source.error(number, problem, f"set {key} within what a link accepts",
                               col=len(key) + 3, span=max(1, len(raw)), code="E_ARG")
        settings[key] = value
    settings.setdefault("seed", 0)  # a step's run is the same for every learner
    return settings


def _claim(source: _Source, draft: _StepDraft) -> Expect:
    raw, number = draft.settings.get("claim", ("", draft.settings_line))
    found = _CLAIM.match(raw)
    col = len("claim: ") + 1
    if not found:
        raise source.error(number, f"the claim {raw[:60]!r} is not 'NUMBER >= BOUND' or "
                           "'NUMBER <= BOUND'", "e.g. 'claim: accuracy >= 0.9' or "
                           "'claim: past_T at 32 <= 0.2'", col=col, span=max(1, len(raw)))
    metric, length, op, bound = found.groups()
    if metric not in METRICS:
        raise source.error(number, choice_problem("the claim's number", metric, tuple(METRICS)),
                           "one of " + ", ".join(METRICS), col=col, span=len(metric),
                           code="E_ARG")
    op = {"≥": ">=", "≤": "<="}.get(op, op)
    assert op in OPS
    try:
        return Expect(metric, op, float(bound), int(length) if length else None)
    except StackError as err:
        raise source.error(number, err.message, err.hint, col=col, span=len(raw),
                           code=err.code) from None
