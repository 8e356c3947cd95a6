"""Where a checkpoint comes from: a ``.safetensors`` file, a Hugging Face model folder
(``config.json`` beside ``model.safetensors`` or a sharded ``model.safetensors.index.json``),
a model in the local Hugging Face cache by name (offline), or a model on the Hub
(``hf://org/name``), read through `huggingface_hub.HfFileSystem` by HTTP range requests.

Each is a `Files`: something that opens a file by its name inside the model, so the rest
reads a local folder and a remote repository alike.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable

from ...core.errors import StackError
from .header import Header, fail, read_header

MAX_JSON_BYTES = 64 << 20  # config.json and the shard index (a few MB at most in practice)
SINGLE, INDEX, CONFIG = "model.safetensors", "model.safetensors.index.json", "config.json"
HUB_PREFIX = "hf://"


@dataclass(frozen=True)
class Files:
    """The files of one model: ``open(name)`` gives a binary file object (``size`` known
    or None), ``exists(name)`` says whether it is there; ``where`` names the model."""

    where: str
    open: Callable[[str], tuple[BinaryIO, int | None]]
    exists: Callable[[str], bool]


def local_files(folder: Path) -> Files:
    def opened(name: str):
        path = folder / name
        return open(path, "rb"), path.stat().st_size

    return Files(str(folder), opened, lambda name: (folder / name).is_file())


def hub_files(repo: str, filesystem=None) -> Files:
    """The files of ``repo`` ("org/name") on the Hub, each opened without a read-ahead cache
    so every read is exactly one range request (``filesystem``: an `HfFileSystem`,
    default one for the configured endpoint)."""
    if filesystem is None:
        from huggingface_hub import HfFileSystem, constants

        if constants.HF_HUB_OFFLINE:  # the Hub is not asked at all (it would answer "no file")
            raise unreachable(repo, "HF_HUB_OFFLINE is set")
        filesystem = HfFileSystem()

    def opened(name: str):
        with _on_the_network(repo):
            handle = filesystem.open(f"{repo}/{name}", "rb", cache_type="none")
        return handle, handle.size

    def exists(name: str) -> bool:
        with _on_the_network(repo):
            return filesystem.isfile(f"{repo}/{name}")

    return Files(HUB_PREFIX + repo, opened, exists)


def unreachable(repo: str, why: str) -> StackError:
    """The Hub cannot be reached and ``repo`` is not in the local cache: what to run."""
    return StackError("E_VALUE", f"the Hugging Face Hub cannot be reached ({why}) and {repo} "
                      "is not in the local Hugging Face cache",
                      hint=f"download it once where the Hub is reachable: hf download {repo} "
                           f"(then stacklab explore {repo} reads it from the cache)")


@contextlib.contextmanager
def _on_the_network(repo: str):
    """A connection error (refused, timed out, DNS, offline mode) as `unreachable`; a
    missing file or any other answer of the Hub as it is."""
    try:
        yield
    except FileNotFoundError:
        raise
    except Exception as err:  # noqa: BLE001 - sorted by kind below
        kinds = {kind.__name__ for kind in type(err).__mro__}
        if isinstance(err, (ConnectionError, TimeoutError)) or kinds & _NETWORK_ERRORS:
            raise unreachable(repo, _first_line(err)) from None
        raise


_NETWORK_ERRORS = {"TransportError", "TimeoutException", "OfflineModeIsEnabled",
                   "ConnectionError", "ConnectTimeout", "ProxyError"}  # httpx's, requests'


def _first_line(err: Exception) -> str:
    text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return text[:100]


def cached_folder(name: str) -> Path | None:
    """The snapshot folder of model ``name`` in the local Hugging Face cache, offline; None
    when it is not cached (or `huggingface_hub` is missing)."""
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError
    except ImportError:
        return None
    try:
        return Path(snapshot_download(name, local_files_only=True))
    except (LocalEntryNotFoundError, ValueError, OSError):
        return None


def cached_models() -> list[str]:
    """The models in the local Hugging Face cache (for a page that offers them)."""
    try:
        from huggingface_hub import scan_cache_dir
        return sorted(repo.repo_id for repo in scan_cache_dir().repos if repo.repo_type == "model")
    except Exception:  # noqa: BLE001 - no cache, or one this version cannot read: none offered
        return []


def locate(where: str | os.PathLike, filesystem=None) -> tuple[Files, str | None]:
    """The model's `Files` and, for a single ``.safetensors`` file, its name (None for a
    folder or a model): a path, ``hf://org/name``, or a name in the local cache."""
    text = str(where)
    if text.startswith(HUB_PREFIX):
        repo = text[len(HUB_PREFIX):].strip("/")
        cached = cached_folder(repo) if filesystem is None else None
        if cached is not None:  # found in the cache, never fetched again (offline too)
            return local_files(cached), None
        return hub_files(repo, filesystem), None
    path = Path(text).expanduser()
    if path.is_file():
        if path.suffix.lower() != ".safetensors":
            raise fail(path.name, "is not a .safetensors file", "give a .safetensors file, a "
                       "model folder or a model name")
        return local_files(path.parent), path.name
    if path.is_dir():
        return local_files(path), None
    cached = cached_folder(text) if "/" in text.strip("/") or not path.suffix else None
    if cached is not None:
        return local_files(cached), None
    raise fail(text[:120], "is neither a file, a folder nor a model in the local Hugging Face "
               "cache", "check the path, or download the model first (hf download NAME), or "
               "read it from the Hub as hf://NAME")


def read_json(files: Files, name: str) -> dict:
    handle, size = files.open(name)
    with handle:
        raw = handle.read(MAX_JSON_BYTES + 1)
    if len(raw) > MAX_JSON_BYTES:
        raise fail(name, f"is over {MAX_JSON_BYTES:,} bytes", f"give a real {name}")
    try:
        parsed = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise fail(name, "is not valid JSON", f"give the model's own {name}") from None
    if not isinstance(parsed, dict):
        raise fail(name, "is not a JSON object", f"give the model's own {name}")
    return parsed


def shard_map(files: Files, single: str | None) -> dict[str, str]:
    """Which file holds each tensor: from the shard index when there is one; otherwise
    every tensor of the one checkpoint file (read from its header)."""
    if single is None and files.exists(INDEX):
        weight_map = read_json(files, INDEX).get("weight_map")
        if not isinstance(weight_map, dict) or not all(
                isinstance(v, str) and "/" not in v and v.endswith(".safetensors")
                for v in weight_map.values()):
            raise fail(INDEX, "has no weight_map of tensor names to .safetensors files",
                       "give the index save_pretrained wrote")
        return weight_map
    name = single or SINGLE
    if single is None and not files.exists(name):
        raise fail(files.where, f"has neither {SINGLE} nor {INDEX}", "give a folder written "
                   "by save_pretrained (with safetensors), or a .safetensors file")
    return {key: name for key in header_of(files, name).tensors}


def header_of(files: Files, name: str) -> Header:
    handle, size = files.open(name)
    with handle:
        return read_header(handle, name, size)


# --- models an operator allows a server to read (STACKLAB_MODELS_DIR) ----------------------

MAX_MODELS_LISTED = 200  # entries a folder of models offers (a page lists them all)


def _is_model(path: Path) -> bool:
    return (path.is_file() and path.suffix.lower() == ".safetensors") or (
        path.is_dir() and any((path / name).is_file() for name in (SINGLE, INDEX)))


def models_under(root: str | os.PathLike) -> list[str]:
    """The models under the folder ``root`` an operator allows a server to read, as names
    relative to it (``gpt2``, ``org/name``, ``tables/wpe.safetensors``): a model folder
    (``model.safetensors`` or its shard index) or a ``.safetensors`` file, two levels deep
    at most, never one whose real path (links followed) leaves ``root``; at most
    `MAX_MODELS_LISTED`, sorted. [] when ``root`` is not a folder."""
    base = Path(root)
    if not base.is_dir():
        return []
    real = base.resolve()
    found: list[str] = []
    level = [base]
    for _ in range(2):
        deeper = []
        for folder in level:
            try:
                entries = sorted(folder.iterdir())
            except OSError:
                continue
            for entry in entries:
                if entry.name.startswith(".") or not entry.resolve().is_relative_to(real):
                    continue
                if _is_model(entry):
                    found.append(entry.relative_to(base).as_posix())
                elif entry.is_dir():
                    deeper.append(entry)
                if len(found) >= MAX_MODELS_LISTED:
                    return sorted(found)
        level = deeper
    return sorted(found)


def model_under(root: str | os.PathLike, name: str) -> Path:
    """The model ``name`` (as `models_under` lists it) under ``root``, or `StackError`
    ``E_VALUE`` for anything that could reach outside it: an absolute path, a ``..``
    part, a link that leads out, or a name that is not a model there."""
    base = Path(root)
    parts = Path(name).parts
    if not name or Path(name).is_absolute() or ".." in parts or "\\" in name or "\x00" in name:
        raise fail(name[:120] or "(no name)", "is not a model name under the server's models "
                   "folder (an absolute path or '..' is refused)",
                   "pick one of the models the page lists")
    path = base / name
    if not base.is_dir() or not path.resolve().is_relative_to(base.resolve()) \
            or not _is_model(path):
        raise fail(name[:120], "is not one of the models in the server's models folder",
                   "pick one of the models the page lists")
    return path
