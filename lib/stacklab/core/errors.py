"""The one error type of stacklab.

Every problem a user can cause (a typo in the stack, a shape that does not fit, a token
id outside the vocabulary) is a `StackError` with a code from a small fixed table, the
place it happened and a fix. The message shows the offending source line with a caret,
in the manner of lark's and einops' parse errors.
"""

from __future__ import annotations

import difflib

CODES = {
    "E_PARSE": "the text is not a valid stack, or exceeds an input bound",
    "E_UNKNOWN_OP": "no op by that name",
    "E_ARG": "a missing, extra, duplicated or mistyped argument, or one outside its range",
    "E_SHAPE": "the incoming shape does not fit the op's port pattern",
    "E_DTYPE": "the incoming dtype does not fit the port",
    "E_CONSTRAINT": "a relation between shapes and arguments fails",
    "E_BUDGET": "the network would exceed the memory budget",
    "E_VALUE": "run-time data is invalid",
    "E_DAMAGED": "a stored run's files are damaged or missing",
}


class StackError(ValueError):
    """A user-facing error: a code, a place, the op involved and a fix.

    Attributes:
        code: one of `CODES` (``"E_PARSE"``, ``"E_SHAPE"``, ...).
        message: what went wrong, in one sentence.
        line, col: 1-based position in the source, or ``None`` when not tied to it.
        node: the node name (``"n1"``) or ``None``.
        op: the op name (``"pos_embed"``) or ``None``.
        hint: how to fix it.
        source_line: the text of the offending line, for the caret display.
        span: how many characters the caret underlines.
        where: the place in words when it is no place in a source (a run's file, a run
            store), or ``None``.
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        line: int | None = None,
        col: int | None = None,
        node: str | None = None,
        op: str | None = None,
        hint: str = "",
        source_line: str | None = None,
        span: int = 1,
        where: str | None = None,
    ):
        assert code in CODES, code
        self.code = code
        self.message = message
        self.line = line
        self.col = col
        self.node = node
        self.op = op
        self.hint = hint
        self.source_line = source_line
        self.span = max(1, span)
        self.where = where
        super().__init__(self._render())

    def __reduce__(self):
        """Pickled with every field, so a worker process or a Ray actor can raise it to the
        app server as it is (the default pickling of an exception passes only ``args``)."""
        fields = {name: getattr(self, name)
                  for name in ("line", "col", "node", "op", "hint", "source_line", "span", "where")}
        return _rebuilt, (self.code, self.message, fields)

    @property
    def place(self) -> str:
        """Where the error is, in words: ``line 2, col 1 (n1 pos_embed)``, a run's file
        (``metrics.json of run 2f79848c0000``), or ``input`` when nothing says more."""
        parts = []
        if self.line is not None:
            parts.append(f"line {self.line}, col {self.col}" if self.col else f"line {self.line}")
        who = " ".join(p for p in (self.node, self.op) if p)
        if who:
            parts.append(f"({who})" if parts else who)
        return " ".join(parts) or self.where or "input"

    def _render(self) -> str:
        # message, place and fix may quote user text: no terminal escape reaches a terminal
        text = f"{self.code} at {_escaped(self.place)}: {_escaped(self.message)}"
        if self.source_line is not None and self.line is not None:
            gutter = f"{self.line:>5} | "
            shown = _printable(self.source_line)
            text += f"\n{gutter}{shown}"
            if self.col:
                caret_at = len(_printable(self.source_line[: self.col - 1]))
                width = len(_printable(self.source_line[self.col - 1 : self.col - 1 + self.span]))
                text += "\n" + " " * (len(gutter) + caret_at) + "^" * max(1, width)
        if self.hint:
            text += f"\nfix: {_escaped(self.hint)}"
        return text

    def to_dict(self) -> dict:
        """A JSON-able form, for the CLI's ``--json`` and the app."""
        return {
            "code": self.code,
            "message": self.message,
            "line": self.line,
            "col": self.col,
            "node": self.node,
            "op": self.op,
            "hint": self.hint,
        }


_SHOWN_LINE_CHARS = 200


def annotate(source: str, err: StackError, *, context: int = 50) -> str:
    """``source`` with line numbers, the error's line marked with ``>`` and a caret under it.

    >>> print(annotate("relu()\\nlinear(4", StackError("E_PARSE", "x", line=2, col=9)))
      1 | relu()
    > 2 | linear(4
        |         ^
    """
    lines = source.split("\n")
    width = len(str(len(lines)))
    first = 0 if err.line is None else max(0, err.line - 1 - context)
    last = len(lines) if err.line is None else min(len(lines), err.line + context)
    out = []
    for number in range(first + 1, last + 1):
        text = _printable(lines[number - 1].rstrip("\r"))
        mark = ">" if number == err.line else " "
        out.append(f"{mark} {number:>{width}} | {text}".rstrip())
        if number == err.line and err.col:
            caret_at = len(_printable(lines[number - 1][: err.col - 1]))
            out.append(f"  {' ' * width} | " + " " * caret_at + "^" * err.span)
    return "\n".join(out)


def shown(value: object, limit: int = 40) -> str:
    """A value a user gave, quoted and shortened for a message: ``'aaaa…'`` (40 characters)."""
    text = str(value)
    return repr(text if len(text) <= limit else text[:limit] + "…")


def _escaped(text: str) -> str:
    """Control characters (terminal escapes, bells) written out as ``\\x1b``; newlines kept."""
    return "\n".join("".join(ch if ch.isprintable() or ch == " " else repr(ch)[1:-1] for ch in line)
                     for line in text.split("\n"))


def _printable(text: str) -> str:
    """The line as it can be shown in a terminal: control characters escaped, long lines cut."""
    text = text[:_SHOWN_LINE_CHARS]
    return "".join(ch if ch.isprintable() or ch == " " else repr(ch)[1:-1] for ch in text)


def closest(word: object, options) -> str | None:
    """The option a mistyped ``word`` most likely meant, or None: the same word in another
    case ("ALiBi"), a near spelling ("relativ", "nope"), or the one option that shares its
    first letters ("rotary" for "rope", "rel_bias" for "relative").

    >>> closest("rotary", ["none", "rope", "alibi", "relative"])
    'rope'
    >>> closest("ALiBi", ["none", "rope", "alibi"]), closest("xyz", ["none", "rope"])
    ('alibi', None)
    """
    text = str(word).strip().lower()
    options = [str(option) for option in options]
    lowered = {option.lower(): option for option in options}
    if text in lowered:
        return lowered[text]
    close = difflib.get_close_matches(text, list(lowered), n=1, cutoff=0.6)
    if close:
        return lowered[close[0]]
    for length in range(min(len(text), 4), 1, -1):  # the longest shared start, if one option has it
        sharing = [option for low, option in lowered.items() if low[:length] == text[:length]]
        if len(sharing) == 1:
            return sharing[0]
        if sharing:
            return None
    return None


def choice_problem(name: str, raw: object, options) -> str:
    """A link value that is not one of ``options``, in words, with the closest option and
    the value corrected: ``task='shfit' is not one of reverse, shift; did you mean shift?
    e.g. task=shift``."""
    options = [str(option) for option in options]
    problem = f"{name}={shown(raw)} is not one of {', '.join(options)}"
    close = closest(raw, options)
    return problem + (f"; did you mean {close}? e.g. {name}={close}" if close else "")


def _rebuilt(code: str, message: str, fields: dict) -> StackError:
    """A pickled `StackError` again (`StackError.__reduce__`)."""
    return StackError(code, message, **fields)
