"""Carrying a shape through bound op calls: the heart of resolving, also run by the built
model on the concrete shape of each new input."""

from __future__ import annotations

import math
from types import MappingProxyType

from .errors import StackError
from .language import Call
from .nodes import Node, Requirement
from .shapes import Shape, dtype_class, format_shape
from .spec import OpSpec


def propagate(bound, shape: Shape, input_dtype: str, dtype: str):
    """Carry ``shape`` through the bound calls: nodes, output shape and kept requirements.

    ``bound`` holds ``(index, name, spec, args, call)`` per node. A node reads the line
    above, or, when its op has reference arguments, the nodes they name. Also used at run
    time by the built model, with the concrete shape of the tensor it is given.
    """
    nodes: list[Node] = []
    by_name: dict[str, Node] = {}
    requires: dict[tuple, Requirement] = {}  # one "<=" per dim (the tightest); each divisor
    for index, name, spec, args, call in bound:
        if spec.references:
            reads = tuple(args[arg.name] for arg in spec.references)
            sources = [by_name[read] for read in reads]
        else:  # the line above, or the stack's input on the first line
            sources = [nodes[-1] if nodes else None]
            reads = (sources[0].name if nodes else None,)
        incoming = [(shape, input_dtype) if source is None else
                    (source.outputs[0][1], source.output_dtype) for source in sources]
        for port, (_, have_dtype) in zip(spec.inputs, incoming):
            _check_dtype(spec, port.dtype, have_dtype, call, name)
        binding = _bind_inputs(spec, [s for s, _ in incoming], sources, call, name, shape)
        env = MappingProxyType({**{k: v for k, v in binding.items() if k != "..."}, **args})
        _check_constraints(spec, args, env, call, name, requires)
        output = spec.outputs[0].pattern.expand(
            {**binding, **{dim: args[arg] for dim, arg in spec.dim_args.items()}, **args})
        params = tuple(spec.params(env).items())
        node = Node(
            index=index,
            name=name,
            spec=spec,
            args=args,
            call=call,
            env=env,
            inputs=tuple((port.name, s) for port, (s, _) in zip(spec.inputs, incoming)),
            outputs=((spec.outputs[0].name, output),),
            input_dtype=incoming[0][1],
            output_dtype=dtype,
            params=params,
            param_count=sum(math.prod(p) for _, p in params),
            reads=reads,
        )
        nodes.append(node)
        by_name[name] = node
    kept = sorted(requires.values(), key=lambda r: (r.dim, r.operator != "<=", r.bound))
    return nodes, (nodes[-1].outputs[0][1] if nodes else shape), kept


def _bind_inputs(spec: OpSpec, shapes: list[Shape], sources: list, call: Call, name: str,
                 stack_input: Shape) -> dict:
    """The dims of ``spec``'s input patterns bound to the incoming ``shapes`` (a dim named by
    two ports must agree); the dims that size parameters must be numbers."""
    binding: dict = {}
    for number, (port, current, source) in enumerate(zip(spec.inputs, shapes, sources)):
        bound = port.pattern.bind(current)
        if bound is None:
            raise _shape_mismatch(spec, port, current, call, name, source)
        if binding and any(binding.get(dim, size) != size for dim, size in bound.items()):
            raise _unequal_inputs(spec, shapes[:number + 1], sources[:number + 1], call, name)
        binding.update(bound)
    for dim_name in spec.static:
        if isinstance(binding[dim_name], str):
            example = tuple(16 if d == binding[dim_name] else d for d in stack_input)
            raise call.error(
                "E_SHAPE", f"{spec.name} needs the size of {dim_name} in "
                f"{spec.inputs[0].pattern} to size its parameters, but it is the symbol "
                f"{binding[dim_name]!r}", node=name,
                hint="give that dim as a number in the input shape, e.g. " + format_shape(example))
    return binding


def _unequal_inputs(spec: OpSpec, shapes: list[Shape], sources: list, call: Call,
                    name: str) -> StackError:
    """Two inputs of one op whose shapes must be equal, and are not: name both."""
    (first, second), (a, b) = shapes[-2:], sources[-2:]
    a_name, b_name = (s.name if s else "the input" for s in (a, b))
    hint = "read two nodes of the same shape"
    if len(first) == len(second) and first[:-1] == second[:-1] and isinstance(first[-1], int):
        hint = (f"make {b_name} output {format_shape(first)} too, e.g. end its branch with "
                f"linear({first[-1]}), or read two nodes of the same shape")
    ports = [p.name for p in spec.inputs]
    return call.error("E_SHAPE", f"{spec.name} needs inputs of one shape, but {ports[-2]}={a_name} "
                      f"is {format_shape(first)} and {ports[-1]}={b_name} is "
                      f"{format_shape(second)}", node=name, hint=hint)


def _check_constraints(spec: OpSpec, args, env, call: Call, name: str,
                       requires: dict[tuple, Requirement]) -> None:
    """Check ``spec``'s constraints on known sizes; keep those on symbols in ``requires``
    (the tightest ``<=`` per dim, each divisor once) for the built model to check."""
    for constraint in spec.constraints:
        if not constraint.applies(args):
            continue
        dim, limit = env[constraint.dim], constraint.bound(args)
        if isinstance(dim, str):
            operator = constraint.operator
            key = (dim, "<=") if operator == "<=" else (dim, operator, limit)
            kept = requires.get(key)
            if kept is None or limit < kept.bound:
                requires[key] = Requirement(dim, operator, limit, name)
        elif not constraint.holds(dim, limit):
            raise call.error("E_CONSTRAINT", constraint.message.format(**env), node=name,
                             hint=constraint.hint.format(**env))


def _check_dtype(spec: OpSpec, wanted: str, current: str, call: Call, name: str) -> None:
    have = dtype_class(current)
    if have == wanted:
        return
    if wanted == "index":
        raise call.error("E_DTYPE", f"{spec.name} takes integer token ids, but its input is "
                         f"{current}", node=name,
                         hint='resolve with input_dtype="int64" (--input-dtype int64), or '
                         f"remove {spec.name}: only a stack that starts from token ids needs it")
    raise call.error("E_DTYPE", f"{spec.name} takes floating-point values, but its input holds "
                     f"{current} token ids", node=name,
                     hint="turn ids into vectors first: put embedding(vocab, dim) before it")


def _shape_mismatch(spec: OpSpec, port, shape: Shape, call: Call, name: str,
                    source) -> StackError:
    pattern = port.pattern
    rank = pattern.fixed_rank
    wanted = f"at least {rank}" if pattern.has_ellipsis else f"{rank}"
    hint = f"give {spec.name} an input of {wanted} dims, like {pattern}"
    if source is not None:
        hint += f"; the op before it, {source.call_text}, outputs {format_shape(shape)}"
    elif len(shape) < rank:
        hint += "; for a sequence of token ids, put embedding(vocab, dim) first"
    return call.error("E_SHAPE", f"{spec.name} expects {pattern} ({wanted} dims), but its input "
                      f"is {format_shape(shape)} ({len(shape)} dims)", node=name, hint=hint)
