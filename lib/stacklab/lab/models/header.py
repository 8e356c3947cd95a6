"""A safetensors file read lazily: its header checked, then one tensor read by seeking to
its bytes, so a 500 MB checkpoint costs the header and the table, never the rest.

Works on any binary file object with ``seek`` and ``read``: a local file, or a remote one
(`huggingface_hub.HfFileSystem`, which turns each read into an HTTP range request).
Nothing is parsed but the JSON header; hostile headers (too long, offsets that overlap,
run past the end or disagree with the shape) are refused before any tensor byte is read.

>>> import io, torch
>>> from safetensors.torch import save
>>> handle = io.BytesIO(save({"wpe.weight": torch.ones(4, 2), "other": torch.zeros(3)}))
>>> header = read_header(handle, "model.safetensors")
>>> header.tensors["wpe.weight"].shape, read_tensor(handle, header, "wpe.weight").sum().item()
((4, 2), 8.0)
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from typing import BinaryIO

import torch

from ...core.errors import StackError

MAX_HEADER_BYTES = 64 << 20  # real checkpoints with thousands of tensors have headers of a few MB
MAX_TABLE_BYTES = 2 << 30  # the largest single tensor read as a position table
DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16,
          "BF16": torch.bfloat16, "I64": torch.int64, "I32": torch.int32, "I16": torch.int16,
          "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool}
SAVE_HINT = "give a .safetensors file written by safetensors or transformers' save_pretrained"


def fail(name: str, message: str, hint: str = SAVE_HINT) -> StackError:
    return StackError("E_VALUE", f"{name}: {message}", hint=hint)


@dataclass(frozen=True)
class TensorEntry:
    """Where one tensor lies in the file: its dtype, shape and byte range after the header."""

    dtype: str
    shape: tuple[int, ...]
    start: int
    end: int


@dataclass(frozen=True)
class Header:
    """The checked header of one safetensors file: ``name`` (for messages), where the
    tensor bytes begin, and each tensor's `TensorEntry`."""

    name: str
    data_start: int
    tensors: dict[str, TensorEntry]


def read_header(handle: BinaryIO, name: str, size: int | None = None) -> Header:
    """The header of the safetensors file open in ``handle`` (``size`` bytes long, when
    known), checked: its length, JSON, each entry's dtype, shape and offsets, offsets that
    match the shape and neither overlap nor run past the end of the file."""
    head = handle.read(8)
    if len(head) < 8:
        raise fail(name, "the file is too short to be a safetensors file")
    (header_len,) = struct.unpack("<Q", head)
    if header_len > MAX_HEADER_BYTES or (size is not None and 8 + header_len > size):
        raise fail(name, f"the header claims {header_len:,} bytes: corrupt or truncated")
    raw = handle.read(header_len)
    if len(raw) < header_len:
        raise fail(name, "the header is truncated")
    try:
        parsed = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise fail(name, "the header is not valid JSON (or nests too deep, or holds a huge "
                   "number)") from None
    if not isinstance(parsed, dict):
        raise fail(name, "the header is not a JSON object")
    tensors = {key: _entry(name, key, value) for key, value in parsed.items()
               if key != "__metadata__"}
    _check_layout(name, tensors, None if size is None else size - 8 - header_len)
    return Header(name, 8 + header_len, tensors)


def _entry(name: str, key: str, value) -> TensorEntry:
    bad = fail(name, f"the header entry {str(key)[:60]!r} is malformed")
    if not isinstance(value, dict):
        raise bad
    dtype, shape, offsets = value.get("dtype"), value.get("shape"), value.get("data_offsets")

    def whole(number) -> bool:
        return isinstance(number, int) and not isinstance(number, bool) and number >= 0

    if (dtype not in DTYPES or not isinstance(shape, list) or not all(map(whole, shape))
            or not isinstance(offsets, list) or len(offsets) != 2 or not all(map(whole, offsets))):
        raise bad
    start, end = offsets
    count = 1
    for dim in shape:
        count *= dim
    if end - start != count * DTYPES[dtype].itemsize:
        raise fail(name, f"the tensor {str(key)[:60]!r} has {end - start:,} bytes, not the "
                   f"{count * DTYPES[dtype].itemsize:,} its shape {shape} needs")
    return TensorEntry(dtype, tuple(shape), start, end)


def _check_layout(name: str, tensors: dict[str, TensorEntry], data_bytes: int | None) -> None:
    """No two tensors share bytes, and none ends past the end of the file."""
    previous_end, previous = 0, None
    for key, entry in sorted(tensors.items(), key=lambda item: (item[1].start, item[1].end)):
        if entry.start < previous_end:
            raise fail(name, f"the tensors {str(previous)[:60]!r} and {str(key)[:60]!r} "
                       "overlap in the file")
        previous_end, previous = max(previous_end, entry.end), key
    if data_bytes is not None and previous_end > data_bytes:
        raise fail(name, "the file is truncated: tensor data ends past the end of the file")


def read_tensor(handle: BinaryIO, header: Header, key: str) -> torch.Tensor:
    """The tensor ``key`` of the file open in ``handle``, read alone: one seek and one read
    of its bytes (a range request on a remote file)."""
    entry = header.tensors[key]
    length = entry.end - entry.start
    if length > MAX_TABLE_BYTES:
        raise fail(header.name, f"the tensor {key[:60]!r} is {length:,} bytes, over the "
                   f"limit of {MAX_TABLE_BYTES:,} for a position table",
                   "name the position table with --key")
    handle.seek(header.data_start + entry.start)
    data = bytearray(length)
    view, got = memoryview(data), 0
    while got < length:  # a remote file may return fewer bytes than asked
        chunk = handle.read(length - got)
        if not chunk:
            raise fail(header.name, f"the file ended inside the tensor {key[:60]!r}")
        view[got:got + len(chunk)] = chunk
        got += len(chunk)
    if length == 0:
        return torch.zeros(entry.shape, dtype=DTYPES[entry.dtype])
    return torch.frombuffer(data, dtype=DTYPES[entry.dtype]).reshape(entry.shape)
