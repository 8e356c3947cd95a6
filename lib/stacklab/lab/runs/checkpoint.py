"""Checkpoints as safetensors files, checked against the resolved network before use.

Only safetensors, never a loader that can run code: a safetensors file is a JSON header and raw
tensor bytes, so reading one cannot run code.
Loading checks, before any tensor is used: the file size, the header, the keys, every
shape and dtype against the network, and that all values are finite.

>>> import tempfile, os
>>> net = resolve("pos_embed(8)\\nlinear(2)", ["B", 4, 3])
>>> path = os.path.join(tempfile.mkdtemp(), "model.safetensors")
>>> save_checkpoint(path, net.build(seed=0), {"seed": 0})
>>> load_checkpoint(path).network.param_count
32
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save, save_file

from ...core.build import StackModule
from ...core.errors import StackError
from ...core.network import Network
from ...core.resolve import DEFAULT_BUDGET_BYTES, resolve
from ...core.shapes import DTYPE_NAMES

__all__ = ['Checkpoint', 'FORMAT', 'run_metadata', 'checkpoint_bytes', 'save_checkpoint', 'read_metadata', 'load_state', 'load_checkpoint']

FORMAT = "stacklab-1"
MAX_HEADER_BYTES = 16 * 2**20


@dataclass(frozen=True)
class Checkpoint:
    network: Network
    model: StackModule
    metadata: dict[str, str]


def run_metadata(run) -> dict[str, object]:
    """The settings of a training run that a checkpoint records."""
    return {"task": run.task.name, "seq_len": run.config.seq_len, "seed": run.config.seed,
            "device": run.device, "steps": run.step, "status": run.status}


def checkpoint_bytes(model: StackModule, extra: dict | None = None) -> bytes:
    """The bytes `save_checkpoint` would write (for downloads)."""
    tensors, metadata = _contents(model, extra)
    return save(tensors, metadata=metadata)


def save_checkpoint(path: str | Path, model: StackModule, extra: dict | None = None) -> None:
    """Write every parameter by its state_dict key, with the stack and settings as metadata."""
    tensors, metadata = _contents(model, extra)
    save_file(tensors, str(path), metadata=metadata)


def _contents(model: StackModule, extra: dict | None) -> tuple[dict, dict[str, str]]:
    network = model.network
    metadata = {
        "format": FORMAT,
        "source": network.source,
        "input_shape": json.dumps(list(network.input_shape)),
        "input_dtype": network.input_dtype,
        "dtype": network.dtype,
        "torch": torch.__version__,
    }
    metadata.update({key: str(value) for key, value in (extra or {}).items()})
    tensors = {key: value.detach().contiguous().cpu() for key, value in model.state_dict().items()}
    return tensors, metadata


def _fail(message: str, path, hint: str = "use a model.safetensors written by stacklab") -> StackError:
    return StackError("E_VALUE", f"{Path(path).name}: {message}", hint=hint,
                      where=Path(path).name)


def read_metadata(path: str | Path, *, max_data_bytes: int = DEFAULT_BUDGET_BYTES) -> dict[str, str]:
    """The metadata of a safetensors file, after checking its size and header.

    ``max_data_bytes`` bounds the tensor bytes (the file minus its header).
    """
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as handle:
            head = handle.read(8)
            if len(head) < 8:
                raise _fail("the file is too short to be a safetensors file", path)
            (header_len,) = struct.unpack("<Q", head)
            if header_len > MAX_HEADER_BYTES or 8 + header_len > size:
                raise _fail("the header is corrupt or truncated", path)
            header_bytes = handle.read(header_len)
    except OSError as err:
        raise _fail(f"cannot read the file ({err.strerror or err})", path) from None
    data_bytes = size - 8 - header_len
    if data_bytes > max_data_bytes:
        raise _fail(f"the file holds {data_bytes:,} bytes of tensors, over the limit of "
                    f"{max_data_bytes:,} for this network", path,
                    hint="load it with the stack it was saved from")
    try:
        header = json.loads(header_bytes.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):  # also: 5,000-digit numbers
        raise _fail("the header is not valid JSON (or nests too deep, or holds a huge number)",
                    path) from None
    if not isinstance(header, dict):
        raise _fail("the header is not a JSON object", path)
    ends = []
    for key, entry in header.items():
        if key == "__metadata__":
            continue
        offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
        if not (isinstance(offsets, list) and len(offsets) == 2
                and all(isinstance(o, int) and not isinstance(o, bool) and o >= 0 for o in offsets)):
            raise _fail(f"the header entry {str(key)[:60]!r} is malformed", path)
        ends.append(offsets[1])
    if 8 + header_len + max(ends, default=0) > size:
        raise _fail("the file is truncated: tensor data ends past the end of the file", path)
    metadata = header.get("__metadata__") or {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise _fail("the metadata is not a string map", path)
    return metadata


def load_state(path: str | Path, network: Network) -> dict[str, torch.Tensor]:
    """The tensors of ``path``, checked against ``network``: keys, shapes, dtypes, finite values."""
    read_metadata(path, max_data_bytes=network.param_bytes)
    expected = network.state_shapes()
    dtype = network.dtype
    try:
        with safe_open(str(path), framework="pt") as handle:
            keys = set(handle.keys())
            missing, extra = sorted(set(expected) - keys), sorted(keys - set(expected))
            if missing or extra:
                parts = ([f"missing {', '.join(missing[:5])}"] if missing else []) + \
                        ([f"unexpected {', '.join(extra[:5])}"] if extra else [])
                raise StackError("E_SHAPE", f"{Path(path).name} does not match the network: "
                                 + "; ".join(parts), hint="load it with the stack it was saved from")
            state = {}
            for key, shape in expected.items():
                piece = handle.get_slice(key)
                if tuple(piece.get_shape()) != tuple(shape):
                    raise StackError("E_SHAPE", f"{key} has shape {list(piece.get_shape())} in "
                                     f"the file but {list(shape)} in the network",
                                     hint="load it with the stack and input it was saved from")
                tensor = handle.get_tensor(key)
                if DTYPE_NAMES.get(tensor.dtype) != dtype:
                    raise StackError("E_DTYPE", f"{key} is {tensor.dtype} in the file but the "
                                     f"network computes in {dtype}",
                                     hint=f"resolve with dtype={DTYPE_NAMES.get(tensor.dtype)!r}")
                if not bool(torch.isfinite(tensor).all()):
                    raise _fail(f"{key} holds non-finite values (nan or inf)", path,
                                hint="the run that wrote it diverged; train again with a smaller lr")
                state[key] = tensor
    except StackError:
        raise
    except Exception as err:  # safetensors raises its own error types for corrupt files
        raise _fail(f"not a valid safetensors file ({type(err).__name__}: {err})", path) from None
    return state


def load_checkpoint(path: str | Path, network: Network | None = None, *,
                    device: str | torch.device | None = None) -> Checkpoint:
    """Rebuild the model saved at ``path`` (from its own metadata unless ``network`` is given)."""
    metadata = read_metadata(path)
    if network is None:
        try:
            source = metadata["source"]
            input_shape = json.loads(metadata["input_shape"])
            input_dtype, dtype = metadata["input_dtype"], metadata["dtype"]
            if not (isinstance(input_shape, list)
                    and all(isinstance(d, (int, str)) for d in input_shape)):
                raise ValueError("input_shape is not a flat list")
        except (KeyError, ValueError, RecursionError):
            raise _fail("the metadata lacks the stack it was saved from (or holds a malformed "
                        "input shape)", path,
                        hint="pass the resolved network to load_checkpoint") from None
        network = resolve(source, input_shape, input_dtype=input_dtype, dtype=dtype)
    state = load_state(path, network)
    model = network.build(device=device)
    model.load_state_dict(state)
    return Checkpoint(network=network, model=model, metadata=metadata)
