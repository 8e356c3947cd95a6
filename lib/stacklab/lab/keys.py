r"""Run keys: a run's identity is a hash of everything that decides its result.

Comments and layout of the stack do not count (the key hashes the stack as the resolver
sees it), every setting of the settings table does, and so do the kind of device and the
stacklab and torch versions.

>>> import stacklab
>>> a = stacklab.Trainer("embedding(16, 32)  # tokens\npos_embed(32)\nlinear(16)",
...                      stacklab.TrainConfig(task="position"))
>>> b = stacklab.Trainer("embedding(16,32)\n\npos_embed( 32 )\nlinear(16)",
...                      stacklab.TrainConfig(task="position"))
>>> a.key == b.key, is_key(a.key)
(True, True)
"""

from __future__ import annotations

import hashlib
import json
import re

import torch

from ..core import __version__
from ..core.build import pick_device
from ..core.network import Network
from .settings import SETTINGS, TrainConfig

KEY_LENGTH = 32  # hex digits of sha256 kept: 128 bits
_KEY = re.compile(f"[0-9a-f]{{{KEY_LENGTH}}}\\Z")


def canonical_stack(network: Network) -> str:
    """The stack as the resolver sees it: ``name = op(every argument)``, one per line."""
    return "\n".join(f"{node.name} = {node.call_text}" for node in network.nodes)


def run_key(network: Network, config: TrainConfig, device_kind: str | None = None, *,
            start: str | None = None) -> str:
    """The key of training ``network`` with ``config`` (a filled config) on a device of
    ``device_kind`` (default: the kind ``config.device`` picks here). ``start``: a digest of
    the parameters a model built beforehand starts from (None: the network built with the
    seed, as every run of a stack starts)."""
    record = {
        "stack": canonical_stack(network),
        "input_shape": list(network.input_shape),
        "input_dtype": network.input_dtype,
        "dtype": network.dtype,
        **{name: _plain(row, getattr(config, name)) for name, row in SETTINGS.items()
           if name != "device"},
        "device": device_kind or pick_device(config.device).type,  # cpu, cuda or mps
        "stacklab": __version__,
        "torch": torch.__version__,
        **({"start": start} if start is not None else {}),
    }
    digest = hashlib.sha256(json.dumps(record, sort_keys=True).encode("utf-8"))
    return digest.hexdigest()[:KEY_LENGTH]


def is_key(text: object) -> bool:
    """Whether ``text`` is written like a run key (32 lowercase hex digits)."""
    return isinstance(text, str) and bool(_KEY.match(text))


def _plain(row, value):
    """One spelling per value: 1 and 1.0 (and -0.0) hash alike for a float setting."""
    if value is None or row.type is not float:
        return value
    return float(value) + 0.0  # + 0.0 turns -0.0 into 0.0
