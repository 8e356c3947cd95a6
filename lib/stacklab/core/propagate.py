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
        port = spec.inputs[0]
        _check_dtype(spec, port.dtype, current_dtype, call, name)
        binding = port.pattern.bind(current)
        if binding is None:
            raise _shape_mismatch(spec, current, call, name, nodes[-1] if nodes else None)
        for dim_name in spec.static:
            if isinstance(binding[dim_name], str):
                raise call.error(
                    "E_SHAPE", f"{spec.name} needs the size of {dim_name} in "
                    f"{port.pattern} to size its parameters, but it is the symbol "
                    f"{binding[dim_name]!r}", node=name,
                    hint="give that dim as a number in the input shape, e.g. "
                         + format_shape(tuple(16 if d == binding[dim_name] else d for d in shape)))
        env = {k: v for k, v in binding.items() if k != "..."}
        env.update(args)
        for constraint in spec.constraints:
            if not constraint.applies(args):
                continue
            dim, limit = env[constraint.dim], constraint.bound(args)
            if isinstance(dim, str):
                key = (dim, "<=") if constraint.op == "<=" else (dim, constraint.op, limit)
                kept = requires.get(key)
                if kept is None or limit < kept.bound:
                    requires[key] = Requirement(dim, constraint.op, limit, name)
            elif not constraint.holds(dim, limit):
                raise call.error("E_CONSTRAINT", constraint.message.format(**env), node=name,
                                 hint=constraint.hint.format(**env))
        lookup = dict(binding)
        lookup.update({dim: args[arg] for dim, arg in spec.dim_args.items()})
        lookup.update(args)
        out_port = spec.outputs[0]
        output = out_port.pattern.expand(lookup)
        params = tuple(spec.params(env).items())
        nodes.append(Node(
            index=index,
            name=name,
            spec=spec,
            args=args,
            call=call,
            env=MappingProxyType(env),
            inputs=((port.name, current),),
            outputs=((out_port.name, output),),
            input_dtype=current_dtype,
            output_dtype=dtype,
            params=params,
            param_count=sum(math.prod(p) for _, p in params),
        ))
        current, current_dtype = output, dtype
    return nodes, current, sorted(requires.values(), key=lambda r: (r.dim, r.op != "<=", r.bound))


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
