"""The stack language: one op call per line.

    # the usual transformer input stem
    tok = embedding(500, 16)
    pos_embed(32)          # unnamed nodes are called n0, n1, ... by index
    linear(4, bias=false)

A hand-written scanner and parser: user text is only ever matched and split, never run. The
input is bounded before any scanning, so hostile text (a 10 MB line, 200k lines, a
thousand-digit integer) is refused with ``E_PARSE`` instead of hanging. Results are frozen
dataclasses that keep their source spans for error messages.

>>> stack = parse("tok = embedding(500, 16)\\npos_embed(32)")
>>> [(c.name, c.op, [a.value.value for a in c.args]) for c in stack.calls]
[('tok', 'embedding', [500, 16]), (None, 'pos_embed', [32])]

A bare identifier as an argument is a `Reference` to a node on an earlier line, by its
name (``x0``) or its default name (``n1``):

>>> parse("x0 = relu()\\nh = gelu()\\nadd(x0, h)").calls[2].args[1].value.value
Reference(name='h')
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Callable

from .errors import StackError

# Input bounds, checked before scanning. They allow stacks well past 10,000 ops.
MAX_SOURCE_CHARS = 2_000_000
MAX_LINES = 50_000
MAX_LINE_CHARS = 1_000
MAX_OPS = 20_000
MAX_INT_DIGITS = 30
MAX_ARGS = 64  # arguments of one call (no op takes more than a few)



@dataclass(frozen=True)
class Reference:
    """A bare identifier written as an argument: the name of a node on an earlier line."""

    name: str


Scalar = int | float | bool | str | Reference
# Whether op ``op`` takes a reference at the argument ``key`` (None: a positional one, the
# ``position``-th): the resolver tells the parser from the op specs, so that a name nowhere
# defined is a bad value for a number but an unknown node for a reference argument.
TakesReference = Callable[[str, "str | None", int], bool]


@dataclass(frozen=True)
class Span:
    """A place in the source: 1-based line and column, ``end_col`` exclusive."""

    line: int
    col: int
    end_col: int

    @property
    def width(self) -> int:
        return max(1, self.end_col - self.col)


@dataclass(frozen=True)
class Value:
    """A literal: its Python value and the text it was written as."""

    value: Scalar
    text: str
    span: Span


@dataclass(frozen=True)
class Argument:
    """One argument of a call; ``key`` is ``None`` for a positional one."""

    key: str | None
    value: Value
    span: Span


@dataclass(frozen=True)
class Call:
    """One line of the stack: ``[name =] op(args)``."""

    name: str | None
    op: str
    args: tuple[Argument, ...]
    span: Span  # the whole call, name included
    op_span: Span
    name_span: Span | None
    line_text: str

    @property
    def call_source(self) -> str:
        """The call as written, without its name: ``pos_embed(32)``."""
        return self.line_text[self.op_span.col - 1:self.span.end_col - 1]

    def error(self, code: str, message: str, *, span: Span | None = None, **kw) -> StackError:
        """A `StackError` pointing at this call (or at ``span`` inside its line)."""
        where = span or self.span
        return StackError(
            code,
            message,
            line=where.line,
            col=where.col,
            span=where.width,
            op=self.op,
            source_line=self.line_text,
            **kw,
        )


@dataclass(frozen=True)
class Stack:
    """A parsed stack: its calls in order, and the source it came from."""

    source: str
    calls: tuple[Call, ...]


_TOKEN = re.compile(
    r"""
    (?P<ws>[ \t\f\v]+)
  | (?P<comment>\#.*)
  | (?P<float>(?:\d(?:_?\d)*)?\.\d(?:_?\d)*(?:[eE][+-]?\d+)?
             |\d(?:_?\d)*(?:\.)?[eE][+-]?\d+
             |\d(?:_?\d)*\.)
  | (?P<int>\d(?:_?\d)*)
  | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<punct>[(),=+-])
    """,
    re.VERBOSE | re.ASCII,  # ASCII digits only: "３２" is not 32
)
_ESCAPES = {"\\": "\\", '"': '"', "'": "'", "n": "\n", "t": "\t"}
_BOOLS = {"true": True, "false": False}
_EXAMPLE = "op(arg, ..., key=value), e.g. pos_embed(32)"


@dataclass(frozen=True)
class _Token:
    kind: str  # "int", "float", "string", "name", "punct", "end"
    text: str
    col: int  # 1-based
    end_col: int


def parse(source: str, takes_reference: TakesReference | None = None) -> Stack:
    """Parse stack text into a frozen `Stack`; raise `StackError` (``E_PARSE``) if invalid.

    A bare identifier as an argument is a `Reference` when it names a node on an earlier
    line, or when ``takes_reference`` says the argument reads a node (the resolver then
    explains an unknown name); anywhere else it is not a value (``E_PARSE``).
    """
    if not isinstance(source, str):
        raise StackError("E_PARSE", f"a stack is text, not {type(source).__name__}",
                         hint="pass the stack source as a str")
    _check_bounds(source)
    if source.startswith("\ufeff"):  # a byte-order mark, as some editors save UTF-8
        source = source[1:]
    calls: list[Call] = []
    defined: set[str] = set()  # the node names of the lines parsed so far
    for number, raw in enumerate(source.split("\n"), start=1):
        line_text = raw[:-1] if raw.endswith("\r") else raw
        tokens = _scan(line_text, number)
        if tokens:
            cursor = _Cursor(tokens, line_text, number, defined, takes_reference)
            calls.append(_parse_line(cursor))
            defined.add(node_name(calls[-1], len(calls) - 1))
            if len(calls) > MAX_OPS:
                raise StackError("E_PARSE", f"the stack has more than {MAX_OPS:,} ops",
                                 line=number, hint=f"keep a stack to at most {MAX_OPS:,} ops")
    if not calls:
        raise StackError("E_PARSE", "the stack is empty",
                         hint="write one op call per line, e.g. pos_embed(32)")
    _check_names(calls)
    return Stack(source=source, calls=tuple(calls))


def _check_bounds(source: str) -> None:
    if len(source) > MAX_SOURCE_CHARS:
        raise StackError("E_PARSE", f"the stack is {len(source):,} characters long; "
                         f"at most {MAX_SOURCE_CHARS:,} are accepted",
                         hint="shorten the stack")
    lines = source.count("\n") + 1
    if lines > MAX_LINES:
        raise StackError("E_PARSE", f"the stack has {lines:,} lines; at most {MAX_LINES:,} "
                         "are accepted", hint="remove blank lines and comments, or shorten the stack")
    if "\x00" in source:
        number = source.count("\n", 0, source.index("\x00")) + 1
        raise StackError("E_PARSE", "the stack contains a NUL character", line=number,
                         hint="stacks are plain text; remove the NUL byte")


def _fail(message: str, line_text: str, number: int, col: int, width: int = 1,
          hint: str = f"write {_EXAMPLE}") -> StackError:
    return StackError("E_PARSE", message, line=number, col=col, span=width,
                      source_line=line_text, hint=hint)


def _scan(line_text: str, number: int) -> list[_Token]:
    """Split one line into tokens, dropping blanks and comments."""
    if len(line_text) > MAX_LINE_CHARS:
        raise StackError("E_PARSE", f"line {number} is {len(line_text):,} characters long; "
                         f"at most {MAX_LINE_CHARS:,} are accepted", line=number,
                         source_line=line_text, col=MAX_LINE_CHARS + 1,
                         hint="put one op call per line")
    tokens = []
    pos, end = 0, len(line_text)
    while pos < end:
        match = _TOKEN.match(line_text, pos)
        if match is None:
            ch = line_text[pos]
            if ch in "\"'":
                raise _fail("unterminated string", line_text, number, pos + 1, end - pos,
                            hint=f"close the string with {ch}")
            raise _fail(f"unexpected character {ch!r}", line_text, number, pos + 1)
        kind = match.lastgroup
        if kind not in ("ws", "comment"):
            tokens.append(_Token(kind, match.group(), pos + 1, match.end() + 1))
        pos = match.end()
    return tokens


class _Cursor:
    """The tokens of one line and the place the parser has reached in them."""

    def __init__(self, tokens: list[_Token], line_text: str, number: int,
                 defined: set[str] = frozenset(), takes_reference: TakesReference | None = None):
        self.tokens = tokens + [_Token("end", "", tokens[-1].end_col, tokens[-1].end_col)]
        self.line_text, self.number, self.pos = line_text, number, 0
        self.defined, self.takes_reference = defined, takes_reference

    @property
    def token(self) -> _Token:
        return self.tokens[self.pos]

    def at(self, text: str, ahead: int = 0) -> bool:
        """Whether the token ``ahead`` of the current one is the punctuation ``text``."""
        token = self.tokens[self.pos + ahead]
        return token.kind == "punct" and token.text == text

    def fail(self, message: str, token: _Token, hint: str | None = None) -> StackError:
        """An ``E_PARSE`` error under ``token``; without a hint, the usual example call."""
        width = token.end_col - token.col
        if hint is None:
            return _fail(message, self.line_text, self.number, token.col, width)
        return _fail(message, self.line_text, self.number, token.col, width, hint=hint)

    def expect(self, kind: str, text: str | None, what: str) -> _Token:
        token = self.token
        if token.kind != kind or (text is not None and token.text != text):
            found = "the end of the line" if token.kind == "end" else repr(token.text)
            raise self.fail(f"expected {what}, found {found}", token)
        self.pos += 1
        return token


def _parse_line(cursor: _Cursor) -> Call:
    """``[name =] op ( [arg {, arg} [,]] )`` with positional arguments before keywords."""
    number, line_text = cursor.number, cursor.line_text
    name = name_span = None
    if cursor.token.kind == "name" and cursor.at("=", ahead=1):
        name = cursor.token.text
        name_span = Span(number, cursor.token.col, cursor.token.end_col)
        cursor.pos = 2
    op = cursor.expect("name", None, "an op name")
    if op.text in _BOOLS:
        raise cursor.fail(f"{op.text!r} is a value, not an op", op)
    cursor.expect("punct", "(", f"'(' after {op.text!r}")
    args = _parse_arguments(cursor, op.text)
    close = cursor.expect("punct", ")", "')'")
    if cursor.token.kind != "end":
        raise cursor.fail(f"unexpected {cursor.token.text!r} after the call", cursor.token,
                          hint="put one op call per line; start a comment with #")
    first_col = name_span.col if name_span else op.col
    return Call(
        name=name,
        op=op.text,
        args=tuple(args),
        span=Span(number, first_col, close.end_col),
        op_span=Span(number, op.col, op.end_col),
        name_span=name_span,
        line_text=line_text,
    )


def _parse_arguments(cursor: _Cursor, op: str) -> list[Argument]:
    """The arguments up to the closing ``)`` (left for the caller), keywords last."""
    args: list[Argument] = []
    seen_keyword = False
    while not cursor.at(")"):
        start = cursor.token
        if start.kind == "end":
            cursor.expect("punct", ")", "')'")
        key = None
        if start.kind == "name" and cursor.at("=", ahead=1):
            key = start.text
            cursor.pos += 2
            seen_keyword = True
        elif seen_keyword:
            raise cursor.fail("a positional argument follows a keyword argument", start,
                              hint="put positional arguments first, then key=value arguments")
        if _is_reference(cursor, op, key, len(args)):
            token = cursor.token
            value = Value(Reference(token.text), token.text,
                          Span(cursor.number, token.col, token.end_col))
            cursor.pos += 1
        else:
            value, cursor.pos = _parse_value(cursor.tokens, cursor.pos, cursor.line_text,
                                             cursor.number)
        args.append(Argument(key, value, Span(cursor.number, start.col, value.span.end_col)))
        if len(args) > MAX_ARGS:
            raise _fail(f"a call with more than {MAX_ARGS} arguments", cursor.line_text,
                        cursor.number, start.col, hint="no op takes that many; see `stacklab ops`")
        if cursor.at(","):
            cursor.pos += 1
        elif not cursor.at(")"):
            cursor.expect("punct", ")", "',' or ')'")
    return args


def _is_reference(cursor: _Cursor, op: str, key: str | None, position: int) -> bool:
    """Whether the current token is a bare identifier read as a node reference."""
    token = cursor.token
    if token.kind != "name" or token.text in _BOOLS or token.text in ("True", "False"):
        return False
    if token.text in cursor.defined:
        return True
    return cursor.takes_reference is not None and cursor.takes_reference(op, key, position)


def _parse_value(tokens: list[_Token], pos: int, line_text: str, number: int) -> tuple[Value, int]:
    token = tokens[pos]
    sign = ""
    if token.kind == "punct" and token.text in "+-":
        sign = token.text
        pos += 1
        token = tokens[pos]
        if token.kind not in ("int", "float"):
            raise _fail(f"expected a number after {sign!r}", line_text, number, token.col)
    start_col = token.col - len(sign)
    span = Span(number, start_col, token.end_col)
    text = sign + token.text
    if token.kind == "int":
        digits = token.text.replace("_", "")
        if len(digits) > MAX_INT_DIGITS:
            raise _fail(f"an integer of {len(digits):,} digits; at most {MAX_INT_DIGITS} "
                        "are accepted", line_text, number, start_col, span.width,
                        hint="use a smaller number")
        value: Scalar = int(sign + digits)
    elif token.kind == "float":
        value = float(sign + token.text.replace("_", ""))
    elif token.kind == "string":
        value = _unescape(token, line_text, number)
    elif token.kind == "name" and token.text in _BOOLS:
        value = _BOOLS[token.text]
    elif token.kind == "name" and token.text in ("True", "False"):
        raise _fail(f"{token.text} is written in lowercase here", line_text, number, token.col,
                    len(token.text), hint=f"write {token.text.lower()}")
    else:
        found = "the end of the line" if token.kind == "end" else repr(token.text)
        hint = "write a number, true or false"
        close = difflib.get_close_matches(token.text.lower(), list(_BOOLS), n=1, cutoff=0.6)
        if token.kind == "name" and close:
            hint = f"did you mean {close[0]}?"
        raise _fail(f"expected a value, found {found}", line_text, number, token.col,
                    token.end_col - token.col, hint=hint)
    return Value(value, text, span), pos + 1


def _unescape(token: _Token, line_text: str, number: int) -> str:
    body = token.text[1:-1]
    if "\\" not in body:
        return body
    out = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\":
            nxt = body[i + 1]
            if nxt not in _ESCAPES:
                raise _fail(f"unknown escape '\\{nxt}' in a string", line_text, number,
                            token.col + 1 + i, 2, hint="use \\\\, \\\", \\', \\n or \\t")
            out.append(_ESCAPES[nxt])
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def default_node_name(index: int) -> str:
    """The name of an unnamed node: its 0-based line index, ``n0``, ``n1``, …"""
    return f"n{index}"


def node_name(call: Call, index: int) -> str:
    """The name of the node that ``call``, on line ``index`` of the stack, makes."""
    return call.name if call.name is not None else default_node_name(index)


def _check_names(calls: list[Call]) -> None:
    """Node names are unique, and unnamed nodes take ``n{index}``, so those may not clash."""
    used: dict[str, int] = {}
    for index, call in enumerate(calls):
        name = node_name(call, index)
        if name in used:
            first = used[name] + 1
            where = call.name_span or call.op_span
            raise call.error("E_PARSE", f"the name {name!r} is already used by node {first - 1}",
                             span=where, node=name,
                             hint="give each node its own name (unnamed nodes are n0, n1, ...)")
        used[name] = index
