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

    ``bound`` holds ``(index, name, spec, args, call)`` per node. Also used at run time
    by the built model, with the concrete shape of the tensor it is given.
    """
    nodes = []
    requires: dict[tuple, Requirement] = {}  # one "<=" per dim (the tightest); each divisor
    current, current_dtype = shape, input_dtype
    for index, name, spec, args, call in bound:
        _check_dtype(spec, spec.inputs[0].dtype, current_dtype, call, name)
        binding = _bind_input(spec, current, call, name, nodes[-1] if nodes else None, shape)
        env = MappingProxyType({**{k: v for k, v in binding.items() if k != "..."}, **args})
        _check_constraints(spec, args, env, call, name, requires)
        output = spec.outputs[0].pattern.expand(
            {**binding, **{dim: args[arg] for dim, arg in spec.dim_args.items()}, **args})
        params = tuple(spec.params(env).items())
        nodes.append(Node(
            index=index,
            name=name,
            spec=spec,
            args=args,
            call=call,
            env=env,
            inputs=((spec.inputs[0].name, current),),
            outputs=((spec.outputs[0].name, output),),
            input_dtype=current_dtype,
            output_dtype=dtype,
            params=params,
            param_count=sum(math.prod(p) for _, p in params),
        ))
        current, current_dtype = output, dtype
    kept = sorted(requires.values(), key=lambda r: (r.dim, r.operator != "<=", r.bound))
    return nodes, current, kept


def _bind_input(spec: OpSpec, current: Shape, call: Call, name: str, previous,
                stack_input: Shape) -> dict:
    """The dims of ``spec``'s input pattern bound to the shape ``current``; the dims that
    size parameters must be numbers."""
    port = spec.inputs[0]
    binding = port.pattern.bind(current)
    if binding is None:
        raise _shape_mismatch(spec, current, call, name, previous)
    for dim_name in spec.static:
        if isinstance(binding[dim_name], str):
            example = tuple(16 if d == binding[dim_name] else d for d in stack_input)
            raise call.error(
                "E_SHAPE", f"{spec.name} needs the size of {dim_name} in "
                f"{port.pattern} to size its parameters, but it is the symbol "
                f"{binding[dim_name]!r}", node=name,
                hint="give that dim as a number in the input shape, e.g. " + format_shape(example))
    return binding


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


def _shape_mismatch(spec: OpSpec, shape: Shape, call: Call, name: str, previous) -> StackError:
    pattern = spec.inputs[0].pattern
    rank = pattern.fixed_rank
    wanted = f"at least {rank}" if pattern.has_ellipsis else f"{rank}"
    hint = f"give {spec.name} an input of {wanted} dims, like {pattern}"
    if previous is not None:
        hint += f"; the op before it, {previous.call_text}, outputs {format_shape(shape)}"
    elif len(shape) < rank:
        hint += "; for a sequence of token ids, put embedding(vocab, dim) first"
    return call.error("E_SHAPE", f"{spec.name} expects {pattern} ({wanted} dims), but its input "
                      f"is {format_shape(shape)} ({len(shape)} dims)", node=name, hint=hint)
