"""Edits of stack text by layer: add, replace, move and remove calls, keeping everything else.

The app's layer list works through these, so the text stays the one source of truth:
comments and blank lines survive, and each edit is one parse away from being checked.

>>> source = "embedding(500, 16)  # tokens\\nlinear(4)"
>>> print(insert_call(source, 1, "pos_embed(32)"))
embedding(500, 16)  # tokens
pos_embed(32)
linear(4)
>>> print(move_call(source, 1, -1))
linear(4)
embedding(500, 16)  # tokens
>>> from .spec import get_op
>>> format_call(get_op("add"), example_values(get_op("add")), name="x1")
'x1 = add(x, m)'
"""

from __future__ import annotations

from .language import Call, parse
from .resolve import bind_args, example_call
from .spec import OpSpec


def calls(source: str) -> list[Call]:
    """The calls of ``source`` in order (raises `StackError` when it does not parse)."""
    return list(parse(source).calls)


def format_call(spec: OpSpec, values: dict[str, object], name: str | None = None) -> str:
    """``[name = ]op(...)``: required arguments by position, the others by keyword when they
    differ from their default."""
    parts = []
    for arg in spec.args:
        value = values.get(arg.name, arg.default)
        if arg.required and arg.positional:
            parts.append(arg.format(value))
        elif not arg.required and value != arg.default:
            parts.append(f"{arg.name}={arg.format(value)}")
    text = f"{spec.name}({', '.join(parts)})"
    return f"{name} = {text}" if name else text


def example_values(spec: OpSpec) -> dict[str, object]:
    """A sensible value for every argument: from the op's first example call, else defaults."""
    call = example_call(spec)
    if call is not None:
        return dict(bind_args(spec, call))
    return {arg.name: arg.default for arg in spec.args}


def _lines(source: str) -> list[str]:
    return source.split("\n")


def _line_of(source: str, index: int) -> int:
    """0-based line number of call ``index``."""
    found = calls(source)
    if not 0 <= index < len(found):
        raise IndexError(f"there is no layer {index}")
    return found[index].span.line - 1


def insert_call(source: str, index: int, text: str) -> str:
    """Insert ``text`` as a new line so that it becomes call ``index`` (the end if past it)."""
    if not source.strip():
        return text
    found = calls(source)
    lines = _lines(source)
    if index >= len(found):
        while lines and not lines[-1].strip():
            lines.pop()
        lines.append(text)
    else:
        lines.insert(found[index].span.line - 1, text)
    return "\n".join(lines)


def replace_call(source: str, index: int, text: str) -> str:
    """Replace call ``index`` with ``text``, keeping a comment that follows it on its line."""
    line = _line_of(source, index)
    lines = _lines(source)
    call = calls(source)[index]
    rest = lines[line][call.span.end_col - 1:]
    lines[line] = lines[line][: call.span.col - 1] + text + rest
    return "\n".join(lines)


def remove_call(source: str, index: int) -> str:
    """Delete the line of call ``index``."""
    line = _line_of(source, index)
    lines = _lines(source)
    del lines[line]
    return "\n".join(lines)


def move_call(source: str, index: int, delta: int) -> str:
    """Swap call ``index`` with the call ``delta`` (+1 or -1) places away; no-op at the ends."""
    found = calls(source)
    other = index + delta
    if not (0 <= index < len(found) and 0 <= other < len(found)):
        return source
    lines = _lines(source)
    a, b = found[index].span.line - 1, found[other].span.line - 1
    lines[a], lines[b] = lines[b], lines[a]
    return "\n".join(lines)
