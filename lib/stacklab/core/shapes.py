"""Shapes, port patterns and dtypes.

A shape is a tuple of dims; a dim is an ``int`` (known size) or a ``str`` (a symbol such
as ``"B"`` that stays symbolic through the whole stack). A port pattern such as
``x[B, T, D]`` or ``x[..., I]`` names the dims an op expects; binding a pattern to a shape
gives each name its dim, and ``...`` takes any number of leading dims.

>>> Pattern.parse("x[..., I]").bind(("B", 12, 16))
{'...': ('B', 12), 'I': 16}
>>> format_shape(("B", 12, 16))
'[B, 12, 16]'
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass

import torch

from .errors import StackError

Dim = int | str
Shape = tuple[Dim, ...]

MAX_RANK = 8
MAX_DIM = 2_147_483_647
_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,31}\Z", re.ASCII)

COMPUTE_DTYPES = {
    "float32": torch.float32,
    "float64": torch.float64,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}
INDEX_DTYPES = {"int64": torch.int64, "int32": torch.int32}
DTYPES = {**COMPUTE_DTYPES, **INDEX_DTYPES}
DTYPE_NAMES = {dtype: name for name, dtype in DTYPES.items()}
DTYPE_BYTES = {name: torch.empty((), dtype=dtype).element_size() for name, dtype in DTYPES.items()}


def dtype_class(name: str) -> str:
    """``"compute"`` for floating dtypes, ``"index"`` for integer ones."""
    return "index" if name in INDEX_DTYPES else "compute"


def format_dim(dim: Dim) -> str:
    return str(dim)


def format_shape(shape: Shape) -> str:
    """``("B", 12, 16)`` -> ``"[B, 12, 16]"``."""
    return "[" + ", ".join(map(format_dim, shape)) + "]"


@dataclass(frozen=True)
class Pattern:
    """A port pattern: the port name and its dim names, ``...`` for any leading dims."""

    port: str
    dims: tuple[str, ...]

    @classmethod
    def parse(cls, text: str) -> "Pattern":
        match = re.fullmatch(r"(\w+)\[(.*)\]", text.replace(" ", ""))
        assert match, f"bad port pattern {text!r}"
        dims = tuple(d for d in match.group(2).split(",") if d)
        assert dims.count("...") <= 1 and ("..." not in dims or dims[0] == "..."), text
        return cls(match.group(1), dims)

    @property
    def fixed_rank(self) -> int:
        """How many dims the pattern names (``...`` excluded)."""
        return len(self.dims) - (1 if self.has_ellipsis else 0)

    @property
    def has_ellipsis(self) -> bool:
        return bool(self.dims) and self.dims[0] == "..."

    def __str__(self) -> str:
        return f"{self.port}[{', '.join(self.dims)}]"

    def bind(self, shape: Shape) -> dict[str, object] | None:
        """Each dim name's dim in ``shape`` (``...`` maps to a tuple); ``None`` if it does not fit."""
        named = self.dims[1:] if self.has_ellipsis else self.dims
        if len(shape) < len(named) or (not self.has_ellipsis and len(shape) != len(named)):
            return None
        lead = len(shape) - len(named)
        binding: dict[str, object] = {}
        if self.has_ellipsis:
            binding["..."] = tuple(shape[:lead])
        for name, dim in zip(named, shape[lead:]):
            if name in binding and binding[name] != dim:
                return None
            binding[name] = dim
        return binding

    def expand(self, binding: dict[str, object]) -> Shape:
        """The shape this pattern describes under ``binding``."""
        out: list[Dim] = []
        for name in self.dims:
            if name == "...":
                out.extend(binding["..."])
            else:
                out.append(binding[name])
        return tuple(out)


def parse_input_shape(value) -> Shape:
    """An input shape from ``["B", 12]``, ``("B", "T", 16)`` or the text ``"B,12"``.

    Sizes are integers from 1 to 2,147,483,647; symbols are identifiers such as ``B``.
    """
    hint = 'give dims as sizes or symbols, e.g. ["B", 12] or "B,12"'
    if isinstance(value, str):
        if len(value) > 400:
            raise StackError("E_SHAPE", "the input shape text is too long", hint=hint)
        parts = [p.strip() for p in value.split(",")] if value.strip() else []
        items: list[object] = [int(p) if re.fullmatch(r"[+-]?[0-9]{1,30}", p) else p for p in parts]
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        raise StackError("E_SHAPE", f"an input shape is a list of dims, not {type(value).__name__}",
                         hint=hint)
    if not items:
        raise StackError("E_SHAPE", "the input shape is empty", hint=hint)
    if len(items) > MAX_RANK:
        raise StackError("E_SHAPE", f"the input shape has {len(items)} dims; at most {MAX_RANK}",
                         hint=hint)
    shape: list[Dim] = []
    for position, item in enumerate(items):
        if not isinstance(item, (bool, str)):
            try:
                item = operator.index(item)  # numpy and torch integers too
            except TypeError:
                pass
        if isinstance(item, bool) or not isinstance(item, (int, str)):
            raise StackError("E_SHAPE", f"input dim {position} is {item!r}, not a size or symbol",
                             hint=hint)
        if isinstance(item, int) and not 1 <= item <= MAX_DIM:
            raise StackError("E_SHAPE", f"input dim {position} is {item}; sizes run from 1 to "
                             f"{MAX_DIM:,}", hint=hint)
        if isinstance(item, str) and not _SYMBOL.match(item):
            raise StackError("E_SHAPE", f"input dim {position} is {item!r}, not a size or a "
                             "symbol name", hint=hint)
        shape.append(item)
    return tuple(shape)


def check_dtype(name: object, *, role: str, allow_index: bool) -> str:
    """Validate a dtype name given by the user; return it."""
    allowed = list(DTYPES) if allow_index else list(COMPUTE_DTYPES)
    if isinstance(name, torch.dtype):
        name = DTYPE_NAMES.get(name, str(name))
    if name not in allowed:
        raise StackError("E_DTYPE", f"{role} {name!r} is not supported",
                         hint="use one of " + ", ".join(allowed))
    return name
