"""Resolve a stack against an input shape: every shape, dtype and parameter, before anything runs.

>>> net = resolve("pos_embed(64)\\nlinear(8)", ["B", 6, 4])
>>> net.output_shape, net.param_count
(('B', 6, 8), 296)

Resolving allocates nothing: parameter counts are exact integer arithmetic, and the
memory budget is checked on those counts.
"""

from __future__ import annotations

import contextlib
import difflib
import gc
import keyword
from types import MappingProxyType
from typing import Collection

from torch import nn

from .errors import StackError, closest
from .language import Argument, Call, Reference, node_name, parse
from .network import Network
from .propagate import propagate
from .shapes import DTYPE_BYTES, check_dtype, parse_input_shape
from .spec import Arg, OpSpec, catalog, format_value

GiB = 1 << 30
DEFAULT_BUDGET_BYTES = 4 * GiB  # parameter bytes; the app sets a smaller one
# Node names become submodule names, so they may not shadow what a torch module already has.
RESERVED_NAMES = frozenset(dir(nn.Module())) | {"network", "nodes", "use_network"}


def resolve(source: str, input_shape, *, input_dtype: str = "float32", dtype: str = "float32",
            budget_bytes: int = DEFAULT_BUDGET_BYTES) -> Network:
    """Resolve stack ``source`` for inputs of ``input_shape``; return a frozen `Network`.

    Args:
        source: the stack text, one op call per line.
        input_shape: dims as sizes and symbols, e.g. ``["B", 12]`` or ``"B,12"``.
        input_dtype: dtype of the input tensor (``int64``/``int32`` for token ids).
        dtype: compute dtype of the parameters and activations.
        budget_bytes: the most parameter bytes allowed (``E_BUDGET`` beyond).

    Raises:
        StackError: with a code from `stacklab.core.errors.CODES`, a place and a fix.
    """
    with _gc_paused():
        return _resolve(source, input_shape, input_dtype, dtype, budget_bytes)


@contextlib.contextmanager
def _gc_paused():
    """Resolving makes many small acyclic objects; the cyclic collector would rescan them
    over and over and make a 10,000-op stack cost more per op than a 100-op one."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _resolve(source, input_shape, input_dtype, dtype, budget_bytes) -> Network:
    if isinstance(budget_bytes, bool) or not isinstance(budget_bytes, int) or budget_bytes < 0:
        raise StackError("E_BUDGET", f"budget_bytes must be a whole number of bytes, not "
                         f"{budget_bytes!r}", hint="pass e.g. budget_bytes=2**30")
    ops = catalog()
    stack = parse(source, takes_reference=lambda op, key, position: (
        op in ops and ops[op].takes_reference(key, position)))
    shape = parse_input_shape(input_shape)
    dtype = check_dtype(dtype, role="compute dtype", allow_index=False)
    input_dtype = check_dtype(input_dtype, role="input dtype", allow_index=True)
    bound = []
    names = [node_name(call, index) for index, call in enumerate(stack.calls)]
    lines = {}  # name -> the first line that defines it (names are unique by now)
    for index, name in enumerate(names):
        lines.setdefault(name, index)
    for index, call in enumerate(stack.calls):
        spec = ops.get(call.op)
        if spec is None:
            raise _unknown_op(call, ops)
        name = names[index]
        if keyword.iskeyword(name):  # `self.class = ...` in exported code is a SyntaxError
            raise call.error("E_ARG", f"the name {name!r} is a Python keyword, and node names "
                             "become attribute names of the built module", span=call.name_span,
                             node=name, hint=f"choose another name, e.g. {name}_ or my_{name}")
        if name in RESERVED_NAMES or name.startswith("_"):
            raise call.error("E_PARSE", f"the name {name!r} is reserved", span=call.name_span,
                             node=name, hint="choose another name for this node, e.g. tok or pos")
        args = bind_args(spec, call, name, defined=_Above(names, lines, index),
                         later=_Above(names, lines, index, later=True))
        bound.append((index, name, spec, args, call))
    check_all_read(bound)
    nodes, output_shape, requires = propagate(bound, shape, input_dtype, dtype)
    param_count = sum(node.param_count for node in nodes)
    param_bytes = param_count * DTYPE_BYTES[dtype]
    if param_bytes > budget_bytes:
        raise _over_budget(nodes, param_count, param_bytes, budget_bytes, dtype)
    return Network(
        source=source,
        input_shape=shape,
        output_shape=output_shape,
        dtype=dtype,
        input_dtype=input_dtype,
        nodes=tuple(nodes),
        requires=tuple(requires),
        param_count=param_count,
        param_bytes=param_bytes,
    )


class _Above:
    """The node names above line ``index`` (or, with ``later``, from it on), as a resolver
    asks of them: a look-up per reference, and the names in order only for an error, so a
    long stack is not copied name by name for each of its lines."""

    def __init__(self, names: list[str], lines: dict[str, int], index: int, later: bool = False):
        self.names, self.lines, self.index, self.later = names, lines, index, later

    def __contains__(self, name: object) -> bool:
        line = self.lines.get(name)
        return line is not None and (line >= self.index if self.later else line < self.index)

    def __iter__(self):
        return iter(self.names[self.index:] if self.later else self.names[:self.index])

    def __len__(self) -> int:
        return len(self.names) - self.index if self.later else self.index


def bind_args(spec: OpSpec, call: Call, node: str | None = None,
              defined: Collection[str] | None = None,
              later: Collection[str] = ()) -> MappingProxyType:
    """Match a call's arguments to the spec's: positional first, then keywords, then defaults.

    A reference argument binds to the name of the node it reads; with ``defined`` (the node
    names above the call) that name must be one of them (``later``: the names from the call
    on, to say so when it names one of those).
    """
    values: dict[str, object] = {}
    positional = [a for a in spec.args if a.positional]
    for position, argument in enumerate(call.args):
        if argument.key is None:
            if position >= len(positional):
                raise _arg_error(call, node, _too_many(spec, len(positional)), span=argument.span,
                                 hint=f"call it as {spec.signature}")
            arg = positional[position]
        else:
            arg = spec.arg(argument.key)
            if arg is None:
                raise _arg_error(call, node, f"{spec.name} has no argument {argument.key!r}",
                                 span=argument.span, hint=_arg_hint(spec, argument.key))
        if arg.name in values:
            raise _arg_error(call, node, f"argument {arg.name!r} is given twice", span=argument.span,
                             hint=f"give each argument once: {spec.signature}")
        values[arg.name] = _convert(spec, arg, argument, call, node, (defined, later))
    for arg in spec.args:
        if arg.name not in values:
            if arg.required:
                raise _arg_error(call, node, f"{spec.name} is missing its argument {arg.name!r} "
                                 f"({arg.description[0].lower()}{arg.description[1:-1]})",
                                 span=call.span, hint=f"call it as {spec.signature}, e.g. "
                                 f"{_example_call(spec)}")
            values[arg.name] = arg.default
    return MappingProxyType(values)


_WANTED = {int: "an int", float: "a float", bool: "a bool (true or false)",
           str: "a quoted string"}


def _arg_error(call: Call, node: str | None, message: str, **kw) -> StackError:
    return call.error("E_ARG", message, node=node, **kw)


def _too_many(spec: OpSpec, allowed: int) -> str:
    if not spec.args:
        return f"{spec.name} takes no arguments"
    return f"{spec.name} takes at most {allowed} positional argument{'s' * (allowed != 1)}"


def _arg_hint(spec: OpSpec, key: str) -> str:
    names = [a.name for a in spec.args]
    close = difflib.get_close_matches(key, names, n=1)
    if close:
        return f"did you mean {close[0]}? {spec.name} takes {spec.signature}"
    return f"{spec.name} takes {spec.signature}"


def example_call(spec: OpSpec) -> Call | None:
    """The first call of ``spec``'s op in its documented examples, or None."""
    for example in spec.examples:
        for call in parse(example.stack).calls:
            if call.op == spec.name:
                return call
    return None


def _example_call(spec: OpSpec) -> str:
    """A valid call for a hint: the op's example call (or one made up from its required
    arguments, when the example leaves out the arguments the op takes)."""
    call = example_call(spec)
    if call is not None and (call.args or not spec.args):
        return call.call_source
    return f"{spec.name}({', '.join('16' for arg in spec.args if arg.required)})"


def check_all_read(bound) -> None:
    """Every node's output is read by a later one (the line below, or a reference), except
    the last line's, which is the network's output: a dangling branch is a mistake."""
    read = {name for _, _, spec, args, _ in bound for name in
            (args[arg.name] for arg in spec.references)}
    for (_, name, _, _, call), (_, _, below, _, _) in zip(bound, bound[1:]):
        if name not in read and below.references:
            raise call.error("E_ARG", f"the output of {name} is never used", node=name,
                             span=call.name_span or call.op_span,
                             hint=f"read it with a reference, e.g. add(..., {name}) below it, "
                                  "or remove the line")


def _convert(spec: OpSpec, arg: Arg, argument: Argument, call: Call, node: str | None,
             names: tuple = (None, ())) -> object:
    value = argument.value.value
    if arg.is_reference or isinstance(value, Reference):
        return _convert_reference(spec, arg, argument, call, node, *names)
    if arg.type is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if type(value) is not arg.type:
        written = argument.value.text
        raise _arg_error(call, node, f"{arg.name} of {spec.name} must be {_WANTED[arg.type]}, "
                         f"not {written}",
                         span=argument.value.span, hint=_fix_value(spec, arg, value, call, argument))
    problem = arg.problem(value)
    if problem:
        raise _arg_error(call, node, f"{problem}, not {argument.value.text}", span=argument.value.span,
                         hint=_range_hint(spec, arg, value, call, argument))
    return value


def _convert_reference(spec: OpSpec, arg: Arg, argument: Argument, call: Call,
                       node: str | None, defined: Collection[str] | None, later) -> str:
    """A reference argument's node name; a name where a value belongs, or a value where a
    name belongs, or a name not defined above, is ``E_ARG`` with the names to choose from."""
    value, span = argument.value.value, argument.value.span
    if not arg.is_reference:
        readers = " or ".join(s.signature for s in catalog().values() if s.references)
        fix = (_fix_value(spec, arg, value.name, call, argument) if arg.type is bool or arg.choices
               else f"write a value, e.g. {_example_call(spec)}")
        raise _arg_error(call, node, f"{arg.name} of {spec.name} must be {_WANTED[arg.type]}, "
                         f"not {value.name}, which names a node", span=span,
                         hint=f"{fix}; only an argument that reads a node takes a name, as in "
                              f"{readers}")
    if not isinstance(value, Reference):
        above = ", ".join(defined or ()) or "none"
        raise _arg_error(call, node, f"{arg.name} of {spec.name} names the node it reads, not "
                         f"the value {argument.value.text}", span=span,
                         hint=f"write the name of a node above it (defined above: {above}), "
                              f"e.g. {_example_call(spec)}")
    if defined is not None and value.name not in defined:
        above = ", ".join(defined)
        defined = list(defined)
        if value.name in later:
            problem = f"{value.name!r}, which is defined on a later line"
        else:
            problem = f"{value.name!r}, but no node is called {value.name}"
        close = difflib.get_close_matches(value.name, defined, n=1, cutoff=0.5)
        hint = f"did you mean {close[0]}? " if close else ""
        hint += (f"a node reads only nodes on earlier lines; defined above: {above}" if defined
                 else f"a node reads only nodes on earlier lines, and none is above this one: "
                      f"put {spec.name} after the nodes it reads")
        raise _arg_error(call, node, f"{arg.name} of {spec.name} reads {problem}", span=span,
                         hint=hint)
    return value.name


def _fix_value(spec: OpSpec, arg: Arg, value: object, call: Call | None = None,
               argument: Argument | None = None) -> str:
    if arg.choices and call is not None:
        return _choice_fix(arg, value, call, argument)
    if arg.type is int and isinstance(value, float) and value.is_integer():
        return f"write {int(value)}"
    if arg.type in (int, float) and isinstance(value, str) and _is_number(value):
        return f"write {value.strip()} without quotes"
    if arg.type is bool:
        return f"write {arg.name}=true or {arg.name}=false"
    return f"{arg.name}: {arg.description}"


def _range_hint(spec: OpSpec, arg: Arg, value: object, call: Call, argument: Argument) -> str:
    """How to fix a value outside its range: the call corrected, for a choice (what
    was meant, when it is clear); an example in range otherwise. Both say what it means."""
    meaning = f"({arg.name}: {arg.description[0].lower()}{arg.description[1:]})"
    if arg.choices:
        return f"{_choice_fix(arg, value, call, argument)} {meaning}"
    return f"use a value {arg.constraints}, e.g. {_example_call(spec)} {meaning}"


def _choice_fix(arg: Arg, value: object, call: Call, argument: Argument) -> str:
    """``did you mean "rope"? e.g. attention(4, position="rope")``: the closest choice and
    this very call with it, the other arguments as written (the list when none is close)."""
    close = closest(value, arg.choices) if isinstance(value, str) else None
    fixed = close or next((c for c in arg.choices if c != arg.default), arg.choices[0])
    line, start, end = call.line_text, argument.value.span.col - 1, argument.value.span.end_col - 1
    example = (line[call.op_span.col - 1:start] + format_value(fixed)
               + line[end:call.span.end_col - 1])
    lead = (f"did you mean {format_value(close)}?" if close
            else f"use one of {', '.join(map(format_value, arg.choices))},")
    return f"{lead} e.g. {example}"


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _unknown_op(call: Call, ops: dict[str, OpSpec]) -> StackError:
    close = difflib.get_close_matches(call.op, list(ops), n=1, cutoff=0.5)
    hint = f"did you mean {close[0]}?" if close else "see `stacklab ops` for the list"
    return call.error("E_UNKNOWN_OP", f"there is no op called {call.op!r}", span=call.op_span,
                      hint=hint + " Ops: " + ", ".join(sorted(ops)))


def _over_budget(nodes, param_count: int, param_bytes: int, budget: int, dtype: str) -> StackError:
    biggest = max(nodes, key=lambda n: n.param_count)
    what = biggest.spec.args[0].name if biggest.spec.args else "input"
    return biggest.call.error(
        "E_BUDGET",
        f"the network needs {param_count:,} parameters ({_bytes(param_bytes)} of {dtype}), over "
        f"the memory budget of {_bytes(budget)}; {biggest.call_text} alone holds "
        f"{biggest.param_count:,}",
        node=biggest.name,
        hint=f"make {biggest.name} smaller (a smaller {what}); from Python, "
             "resolve(..., budget_bytes=N) sets another budget",
    )


def _bytes(count: int) -> str:
    for unit, size in (("TiB", 1 << 40), ("GiB", GiB), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size:
            return f"{count / size:,.1f} {unit}"
    return f"{count} bytes"
