"""The position table of a real model: found by its family's layout (or named with
``key``), read alone from a checkpoint of any size, its unused rows dropped, and checked.

>>> import tempfile, torch, pathlib
>>> from safetensors.torch import save_file
>>> path = pathlib.Path(tempfile.mkdtemp()) / "model.safetensors"
>>> save_file({"transformer.wpe.weight": torch.randn(16, 4), "lm_head.weight": torch.randn(50, 4)}, path)
>>> found = read_position_table(path)
>>> found.key, found.layout, found.first_row, list(found.table.shape)
('transformer.wpe.weight', 'gpt2', 0, [16, 4])
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Callable

import torch

from .header import fail, read_header, read_tensor
from .layouts import match_layout
from .source import CONFIG, Files, header_of, locate, read_json, shard_map

MAX_VALUE = 1e8  # products of rows of larger values overflow float32
LISTED = 12  # candidate tables an unknown layout lists


@dataclass(frozen=True)
class ModelTable:
    """A position table read from a real model: the ``[rows, D]`` float32 table (its unused
    rows dropped), the tensor's key, the layout that found it ("key" when named), the
    first row kept, the rows the tensor has, where it came from, and the model's config."""

    table: torch.Tensor
    key: str
    layout: str
    first_row: int
    tensor_rows: int
    where: str
    config: dict = field(default_factory=dict)

    @property
    def summary(self) -> str:
        """What was read, in one line: where, which tensor, which layout and rows."""
        rows = (f"rows {self.first_row}-{self.tensor_rows - 1} of {self.tensor_rows} (the first "
                f"{self.first_row} dropped: {self.layout})" if self.first_row else
                f"all {self.tensor_rows} rows")
        how = "named with --key" if self.layout == "key" else f"layout {self.layout}"
        return f"{self.where}: {self.key} [{self.tensor_rows}, {self.table.shape[1]}], {how}, {rows}"


def extract_snippet(key: str = "wpe.weight", checkpoint: str = "model.safetensors",
                    out: str = "wpe.safetensors") -> str:
    """One line of Python that saves the table ``key`` of ``checkpoint`` alone in ``out``:
    a file small enough to upload where a whole checkpoint is not (GPT-2's ``wpe`` is
    3 MB of its 500)."""
    return (f"from safetensors.torch import load_file, save_file; "
            f"save_file({{'wpe': load_file({checkpoint!r})[{key!r}]}}, {out!r})")


def model_config(where: str | os.PathLike, filesystem=None) -> dict:
    """The ``config.json`` of a model folder, cached model or Hub model ({} for a file)."""
    files, single = locate(where, filesystem)
    return {} if single is not None or not files.exists(CONFIG) else read_json(files, CONFIG)


def read_position_table(where: str | os.PathLike, key: str | None = None, *,
                        filesystem=None,
                        check: Callable[[str, tuple[int, ...]], None] | None = None
                        ) -> ModelTable:
    """The position table of the model at ``where`` (a ``.safetensors`` file, a model folder,
    a name in the local Hugging Face cache, or ``hf://org/name``), reading only the
    header(s) and the table's bytes. ``filesystem`` replaces the `HfFileSystem` for
    ``hf://`` (tests point one at a local server). ``check(where, shape)``, when given,
    sees the tensor's shape as its header declares it before any of its bytes are read
    (a server refuses a table too large to score there). Raises `StackError` for an unknown
    layout (listing the 2-D tensors that could be the table), a model whose positions are
    not a table (rotary, ALiBi: see `stacklab.lab.models.offsets`), or a bad table."""
    files, single = locate(where, filesystem)
    config = {} if single is not None or not files.exists(CONFIG) else read_json(files, CONFIG)
    where_name = files.where if single is None else os.path.join(files.where, single)
    shards = shard_map(files, single)
    if key is not None:
        if key not in shards:
            raise fail(where_name, f"has no tensor {key[:80]!r}",
                       "its 2-D tensors: " + _candidates(files, shards))
        layout, first = "key", 0
    else:
        found = match_layout(shards, config)
        if found is not None:
            chosen, key = found
            layout, first = chosen.name, chosen.first_row(config)
        elif len(shards) == 1 and not config:  # a file of the table alone
            (key,), layout, first = shards, "only tensor", 0
        else:
            raise _unknown(files, where_name, shards, config)
    table = _read(files, shards[key], key, check and (lambda shape: check(where_name, shape)))
    if table.dim() != 2 or table.shape[0] - first < 2 or table.shape[1] < 1:
        raise fail(where_name, f"the tensor {key[:80]!r} has shape {list(table.shape)}, not "
                   f"[rows, D] with 2 or more rows past row {first}", "name a 2-D table with --key")
    kept = _checked(where_name, key, table[first:].float())
    return ModelTable(kept, key, layout, first, table.shape[0], where_name, config)


def _read(files: Files, name: str, key: str, check=None) -> torch.Tensor:
    handle, size = files.open(name)
    with handle:
        header = read_header(handle, name, size)
        if check is not None:
            check(tuple(header.tensors[key].shape))
        return read_tensor(handle, header, key)


def _checked(where: str, key: str, table: torch.Tensor) -> torch.Tensor:
    if not bool(torch.isfinite(table).all()):
        raise fail(where, f"the table {key[:80]!r} holds non-finite values (nan or inf)",
                   "give a checkpoint of finite numbers")
    largest = table.abs().max().item()
    if largest > MAX_VALUE:
        raise fail(where, f"the table {key[:80]!r} holds values as large as {largest:.3g}",
                   f"position tables hold values well below {MAX_VALUE:g}")
    return table


def _two_dim(files: Files, shards: dict[str, str]) -> list[tuple[str, tuple[int, ...]]]:
    """Every 2-D tensor of the checkpoint with its shape, largest first (headers only)."""
    found = []
    for name in dict.fromkeys(shards.values()):
        found += [(key, entry.shape) for key, entry in header_of(files, name).tensors.items()
                  if len(entry.shape) == 2]
    return sorted(found, key=lambda item: (-math.prod(item[1]), item[0]))


def _candidates(files: Files, shards: dict[str, str]) -> str:
    found = _two_dim(files, shards)
    listed = ", ".join(f"{key} {list(shape)}" for key, shape in found[:LISTED])
    more = f" and {len(found) - LISTED} more" if len(found) > LISTED else ""
    return (listed + more) or "none"


def _unknown(files: Files, where: str, shards: dict[str, str], config: dict):
    from .offsets import encoding_of

    kind = encoding_of(config)
    if kind is not None:
        return fail(where, f"a {config.get('model_type', 'model')} has no position table: its "
                    f"positions are {kind}, given by its config", "draw them with "
                    "`stacklab explore` on the folder (it draws the offset figure) or "
                    "stacklab.lab.models.offset_curves(config)")
    return fail(where, "no known position table layout (GPT-2, BERT, RoBERTa, OPT)",
                "name the table with --key; the 2-D tensors, largest first: "
                + _candidates(files, shards))
