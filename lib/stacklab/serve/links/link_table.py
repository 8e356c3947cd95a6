"""The link table: every query parameter of the app's address, declared once.

As TensorFlow Playground's ``PROPS``: each row names one parameter, how a link's text
becomes its value (``parse``: the value, or a problem in words) and how a value is written
back (``write``: its text, or None when the link leaves it out). Reading a link
(`experiment.read_link`), writing the page's address (`experiment.write_link`), the
classroom link (`share.classroom_link`) and the CLI's ``stacklab share`` all go through
these rows, so a new link value is one row here.

Two kinds of row: an experiment's (``field``: the `Experiment` field it sets; the stack,
its input, every link setting of `stacklab.lab.settings`, and ``hide``/``pin``, the
controls a classroom link pins) and a session's (``run``, ``compare``, ``view``, and the
Learn page's ``lesson``, ``step`` and ``class``: what the page shows, not the experiment).

>>> LINK_VALUES["view"].parse("present"), LINK_VALUES["view"].parse("big")
(('present', None), (None, "view='big' is not one of present"))
>>> LINK_VALUES["compare"].write(["a" * 32, "b" * 32]) == "a" * 32 + "," + "b" * 32
True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from ...core.errors import choice_problem, closest, shown
from ...core.shapes import DTYPES
from ...lab.keys import is_key
from ...lab.lessons import LESSONS
from ...lab.settings import SETTINGS
from ..limits import MAX_STACK_CHARS

UI_CONTROLS = ("presets", "layers")  # Build page controls a link may hide besides the fields
VIEWS = ("present",)  # view=present: the projector view

Parse = Callable[[str], "tuple[object, str | None]"]  # raw -> (value or None, problem)


@dataclass(frozen=True)
class LinkValue:
    """One query parameter: its ``name``, the Python ``type`` of its value, how a link's
    text becomes the value (``parse``) and how the value becomes text (``write``; None:
    left out). ``field`` is the `Experiment` field it sets (None: a session's value);
    ``instead`` is what the page does when a session's value is refused."""

    name: str
    type: type
    parse: Parse
    write: Callable[[object], "str | None"]
    field: str | None = None
    instead: str = ""

    @property
    def hideable(self) -> bool:
        """Whether a classroom link may pin (hide) its control: every experiment field's."""
        return self.field == self.name and self.name != "hide"


def _text(name: str, limit: int) -> Parse:
    def parse(raw: str):
        if len(raw) > limit:
            return None, f"{name} is {len(raw):,} characters long; at most {limit:,}"
        return raw, None
    return parse


def _choice(name: str, options: Sequence[str]) -> Parse:
    def parse(raw: str):
        if raw in options:
            return raw, None
        return None, choice_problem(name, raw, options)
    return parse


def _setting_text(value: object) -> str:
    """A setting's value as a link writes it: ``none`` for an optional setting that is off."""
    if value is None:
        return "none"
    return repr(value) if isinstance(value, float) else str(value)


def _names(name: str) -> Parse:
    """``hide=`` (and ``pin=``): control names, comma-separated, in the order given; an
    unknown name is dropped with a problem that says what was meant."""
    def parse(raw: str):
        names = tuple(dict.fromkeys(n.strip() for n in raw.split(",") if n.strip()))
        unknown = [n for n in names if n not in HIDEABLE]
        if not unknown:
            return names, None
        meant = {n: closest(n, HIDEABLE) for n in unknown}
        fixed = [meant.get(n, n) for n in names if meant.get(n, n)]
        guess = (f"; did you mean {', '.join(m for m in meant.values() if m)}? e.g. "
                 f"{name}={','.join(dict.fromkeys(fixed))}" if any(meant.values()) else "")
        return (tuple(n for n in names if n in HIDEABLE),
                f"{name}: unknown control(s) {', '.join(shown(n) for n in unknown[:5])}{guess}; "
                f"known: {', '.join(HIDEABLE)}")
    return parse


SHORTEST_KEY = 8  # a key's start, as the app shows keys, names a run when it is unique


def is_key_start(text: object) -> bool:
    """A whole run key, or its first `SHORTEST_KEY` or more hex digits (what the app
    shows); which run a start names is for the server to resolve."""
    text = str(text)
    return is_key(text) or (SHORTEST_KEY <= len(text) < 32
                            and all(c in "0123456789abcdef" for c in text))


def parse_run(raw: str) -> tuple[str | None, str | None]:
    """A link's ``run=KEY`` (or its first 8 or more digits): the key as given, or a
    problem in words."""
    if is_key_start(raw):
        return raw, None
    return None, f"run={shown(raw)} is not a run key (32 hex digits)"


def parse_compare(raw: str) -> tuple[list[str], str | None]:
    """The run keys of a ``compare=K1,K2`` link value (at most ``MAX_COMPARED``, each once;
    whole keys or their first 8 or more digits, as the app shows them), and a problem in
    words for what was dropped."""
    from ...lab.reports.compare import MAX_COMPARED  # the figures' module: loaded when used

    parts = [part.strip() for part in str(raw).split(",") if part.strip()]
    keys = list(dict.fromkeys(part for part in parts if is_key_start(part)))[:MAX_COMPARED]
    dropped = [part for part in parts if not is_key_start(part)]
    if dropped:
        return keys, (f"compare: {', '.join(shown(d) for d in dropped[:4])} "
                      f"{'is not a run key' if len(dropped) == 1 else 'are not run keys'}")
    if len(parts) > len(keys):
        return keys, f"compare: at most {MAX_COMPARED} runs; the first {len(keys)} are shown"
    return keys, None


def parse_view(raw: str) -> tuple[str | None, str | None]:
    """A link's ``view=``: the view, or a problem in words."""
    if raw in VIEWS:
        return raw, None
    return None, f"view={shown(raw)} is not one of {', '.join(VIEWS)}"


CLASS_ID_CHARS = 8  # a class's id (`serve.classroom.classes.CLASS_ID_CHARS`), short for a QR code


def parse_class(raw: str) -> tuple[str | None, str | None]:
    """A link's ``class=ID``: the id of a class a teacher presents (8 hex digits), or a
    problem in words. Whether the class is open is for the page to find out."""
    if len(raw) == CLASS_ID_CHARS and all(c in "0123456789abcdef" for c in raw):
        return raw, None
    return None, f"class={shown(raw)} is not a class id ({CLASS_ID_CHARS} hex digits)"


def _joined(values) -> str | None:
    return ",".join(values) if values else None


def _as_text(value) -> str | None:
    return None if value is None else str(value)


_NETWORK = (
    LinkValue("stack", str, _text("stack", MAX_STACK_CHARS), str, "stack"),
    LinkValue("input", str, _text("input", 200), str, "input"),
    LinkValue("input_dtype", str, _choice("input_dtype", list(DTYPES)), str, "input_dtype"),
)
_SETTINGS = tuple(LinkValue(row.name, row.type, row.parse_link, _setting_text, row.name)
                  for row in SETTINGS.values() if row.link)
_PINS = (
    LinkValue("hide", tuple, _names("hide"), _joined, "hide"),
    # pin= is read as hide= (a teacher's word for it); a link is written with hide= only
    LinkValue("pin", tuple, _names("pin"), lambda value: None, "hide"),
)
_SESSION = (
    LinkValue("run", str, parse_run, _as_text, instead="showing the link's settings"),
    LinkValue("compare", list, parse_compare, _joined),
    LinkValue("view", str, parse_view, _as_text, instead="showing the usual view"),
    # the Learn page's lesson and step (lesson=positions&step=2): the step is checked
    # against its lesson's steps where the page opens it (`lessons.step_from_link`)
    LinkValue("lesson", str, _choice("lesson", tuple(LESSONS)), _as_text,
              instead="showing the list of lessons"),
    LinkValue("step", int, lambda raw: (int(raw), None) if raw.isascii() and raw.isdigit()
              and 1 <= int(raw) <= 99 else (None, f"step={shown(raw)} is not a step number "
                                                  "(1, 2, ...)"), _as_text,
              instead="opening the lesson's first step"),
    # a class's students' link (learn?class=ID): follow the teacher's lesson step
    LinkValue("class", str, parse_class, _as_text, instead="showing the list of lessons"),
)

LINK_TABLE: tuple[LinkValue, ...] = _NETWORK + _SETTINGS + _PINS + _SESSION
LINK_VALUES: dict[str, LinkValue] = {value.name: value for value in LINK_TABLE}
EXPERIMENT_VALUES = tuple(value for value in LINK_TABLE if value.field is not None)
SESSION_VALUES = tuple(value for value in LINK_TABLE if value.field is None)
HIDEABLE = tuple(value.name for value in LINK_TABLE if value.hideable) + UI_CONTROLS


def parse_values(params: Mapping[str, object], rows: Sequence[LinkValue] = LINK_TABLE
                 ) -> tuple[dict[str, object], list[tuple[LinkValue, str, bool]]]:
    """The values of ``params`` (names to strings, or lists of strings: the last one wins)
    for ``rows``, by parameter name, and ``(row, problem, was the value dropped)`` for each
    refused one. Never raises: a mangled classroom link still opens."""
    values: dict[str, object] = {}
    refused: list[tuple[LinkValue, str, bool]] = []
    for row in rows:
        raw = params.get(row.name)
        if isinstance(raw, (list, tuple)):
            raw = raw[-1] if raw else None
        if raw is None:
            continue
        value, problem = row.parse(str(raw))
        if value is not None or problem is None:  # None is a value of an optional setting
            values[row.name] = value
        if problem:
            refused.append((row, problem, value is None))
    return values, refused


def write_values(values: Mapping[str, object], rows: Sequence[LinkValue] = LINK_TABLE
                 ) -> dict[str, str]:
    """The query parameters of ``values`` (parameter name -> value), in the table's order;
    a value its row leaves out (an empty ``hide``, no run) is not written."""
    query = {}
    for row in rows:
        if row.name in values:
            text = row.write(values[row.name])
            if text is not None:
                query[row.name] = text
    return query
