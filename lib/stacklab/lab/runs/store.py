"""The run store: one folder per run key, so one link trains once.

The store makes no key: it files a run under the one it carries (`Run.key`, from
`stacklab.lab.keys.run_key`), 32 hex digits of a hash of everything that decides the
result: the stack as the resolver sees it (not its comments or layout), the input shape
and dtype, the dtype, every setting but ``device``, which counts by its kind (cpu, cuda or
mps), and the stacklab and torch versions. Training is deterministic on CPU, so two runs
with one key end with bitwise-identical parameters: a server trains a key once and hands
the stored result to everyone who asks. A folder reads back only if its stored settings
give its key again.

One folder per key under ``STACKLAB_RUNS`` (default ``~/.cache/stacklab/runs``), for
finished and diverged runs: ``model.safetensors``, ``metrics.json``, ``record.safetensors``
(initial tables, snapshots, attention maps, summed gradients), ``run.json`` (settings,
status, curves) and, for runs a worker trained, ``figures.json`` (every figure, drawn by
the worker); a stopped run leaves its worker in a private folder (`save_private`).
`RunStore.open` reads a run without its tensors (`StoredRun`), for a server to show it.
A folder is written under a temporary name and renamed into place, so a crash never
leaves a half-written run under a key; one that does not read back completely is skipped
with a log line. The store holds at most ``STACKLAB_RUNS_MAX_BYTES`` (default 2 GiB): the
least recently used runs go first.

>>> import tempfile, stacklab
>>> store = RunStore(tempfile.mkdtemp())
>>> run = stacklab.train(task="position", steps=20)
>>> store.save(run) is not None, store.load(run.key).final == run.final
(True, True)
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
import uuid
import weakref
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING

from ...core.errors import StackError
from ...core.resolve import resolve
from .checkpoint import load_state, read_metadata
from ..keys import KEY_LENGTH, is_key, run_key
from .files import (FIGURES, FORMAT, METRICS, MODEL, RECORD, RUN, damaged, read_object,
                    read_record, read_text, unreadable, write_run, write_text)
from ..settings import TrainConfig
from ..tasks import get_task
from ..train.record import Run, Status

if TYPE_CHECKING:
    from ...core.network import Network

log = logging.getLogger("stacklab.store")

DEFAULT_MAX_BYTES = 2 << 30
STORED_STATUSES = ("finished", "diverged")  # complete and deterministic; a stopped run is not
_RUN_JSON_MAX_BYTES = 64 << 20
_STALE_TMP_SECONDS = 3600


def default_root() -> Path:
    return Path(os.environ.get("STACKLAB_RUNS") or Path.home() / ".cache" / "stacklab" / "runs")


def default_max_bytes() -> int:
    raw = os.environ.get("STACKLAB_RUNS_MAX_BYTES", "")
    return int(raw) if raw.strip().isdigit() else DEFAULT_MAX_BYTES


class RunStore:
    """Finished runs by key, on disk; see the module docstring. Safe across processes:
    every write is a rename, and a reader only ever sees whole folders."""

    def __init__(self, root: str | Path | None = None, max_bytes: int | None = None):
        self.root = Path(root) if root is not None else default_root()
        self.max_bytes = default_max_bytes() if max_bytes is None else max_bytes

    def path(self, key: str) -> Path:
        if not is_key(key):
            raise StackError("E_VALUE", f"{str(key)[:40]!r} is not a run key",
                             hint=f"a run key is {KEY_LENGTH} hex digits, as in run=... of a link")
        return self.root / key

    def __contains__(self, key: str) -> bool:
        try:
            return is_key(key) and (self.root / key / RUN).is_file()
        except OSError:
            return False

    def touch(self, key: str) -> None:
        """Count ``key`` as just used (a run served from memory), for eviction."""
        if is_key(key):
            _touch(self.root / key)

    def keys(self) -> list[str]:
        """Every stored key, least recently used first."""
        try:
            found = [p for p in self.root.iterdir() if is_key(p.name) and p.is_dir()]
        except OSError:
            return []
        return [p.name for p in sorted(found, key=_last_used)]

    def find(self, prefix: str) -> str | None:
        """The one stored key starting with ``prefix`` (8 or more hex digits, as the app and
        the comparison tables show keys), or None (no match, or more than one)."""
        prefix = str(prefix).strip().lower()
        if is_key(prefix):
            return prefix if prefix in self else None
        if len(prefix) < 8 or len(prefix) > KEY_LENGTH or any(c not in "0123456789abcdef"
                                                               for c in prefix):
            return None
        found = [key for key in self.keys() if key.startswith(prefix)]
        return found[0] if len(found) == 1 else None

    def size(self) -> int:
        return sum(_folder_bytes(self.root / key) for key in self.keys())

    # -- writing ----------------------------------------------------------------------

    def save(self, run, figures: dict | None = None) -> Path | None:
        """Store ``run`` under its key (a finished or diverged run; others are not kept),
        with its ``figures`` (`stacklab.lab.figures.figures_json`) when they are drawn.

        Returns the folder, or None when the run is not kept (its status, or it alone is
        larger than the store). An existing folder for the key is left as it is.
        """
        if run.status not in STORED_STATUSES:
            return None
        final = self.path(run.key)
        if final.exists():
            if self.load(run.key, device="cpu") is not None and self._whole(run.key):
                return final  # stored already (and now the most recently used)
            aside = self.root / f".tmp-damaged-{run.key}-{uuid.uuid4().hex[:8]}"
            os.rename(final, aside)  # a damaged folder must not block its key; cleared later
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.root / f".tmp-{run.key}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir()
        try:
            write_run(tmp, run, figures)
            if _folder_bytes(tmp) > self.max_bytes:
                log.warning("not storing run %s: it alone is larger than the store", run.key)
                return None
            try:
                os.rename(tmp, final)  # atomic: the key appears whole or not at all
            except OSError:
                if not final.exists():
                    raise
                return final  # another process stored the same run first
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        self.evict(keep=run.key)
        return final

    def add_figures(self, key: str, figures: dict) -> bool:
        """Write ``figures`` into the stored run ``key`` (stored without them: a worker draws
        them after storing the run), whole or not at all; False when it is not stored."""
        folder = self.path(key)
        if not (folder / RUN).is_file():
            return False
        part = folder / f".figures-{uuid.uuid4().hex[:8]}.json"
        write_text(part, json.dumps(figures) + "\n")
        os.replace(part, folder / FIGURES)
        return True

    def save_private(self, run, figures: dict | None = None) -> Path:
        """Write ``run`` (whatever its status) to a private folder of the store, for one
        reader to take back (`take_private`, `hold_private`): how a stopped run leaves a
        worker process."""
        self.root.mkdir(parents=True, exist_ok=True)
        folder = self.root / f".private-{run.key}-{uuid.uuid4().hex[:8]}"
        folder.mkdir()
        write_run(folder, run, figures)
        return folder

    def hold_private(self, folder: str | Path) -> StoredRun | None:
        """The run in a private folder written by `save_private`, read without its tensors;
        the folder goes when the returned `StoredRun` is dropped (or, untouched for an
        hour, at the next eviction)."""
        folder = Path(folder)
        held = self._read_private(folder, StoredRun)
        if held is not None:
            weakref.finalize(held, shutil.rmtree, folder, True)
        return held

    def take_private(self, folder: str | Path, device: str | None = "cpu") -> Run | None:
        """The run in a private folder written by `save_private`; the folder is removed."""
        folder = Path(folder)
        run = self._read_private(folder, lambda folder, key: _read_run(folder, key, device))
        if run is not None:
            shutil.rmtree(folder, ignore_errors=True)
        return run

    def _read_private(self, folder: Path, read):
        """``read(folder, key)`` of a private folder of this store, or None: not one (left
        alone), or damaged (logged and removed)."""
        name = folder.name
        if folder.parent != self.root or not name.startswith(".private-"):
            return None
        try:
            return read(folder, name.split("-")[1])
        except Exception as err:  # noqa: BLE001 - damage means: no run
            log.warning("ignoring the private run folder %s: %s: %s", name, type(err).__name__,
                        err)
            shutil.rmtree(folder, ignore_errors=True)
            return None

    def evict(self, keep: str | None = None) -> list[str]:
        """Remove least recently used runs until the store fits ``max_bytes``."""
        removed = []
        keys = self.keys()
        sizes = {key: _folder_bytes(self.root / key) for key in keys}
        total = sum(sizes.values())
        for key in keys:
            if total <= self.max_bytes:
                break
            if key == keep:
                continue
            shutil.rmtree(self.root / key, ignore_errors=True)
            total -= sizes[key]
            removed.append(key)
        self._clear_stale_tmp()
        return removed

    def _clear_stale_tmp(self) -> None:
        now = time.time()
        for path in [*self.root.glob(".tmp-*"), *self.root.glob(".private-*")]:  # held: touched
            try:
                if now - path.stat().st_mtime > _STALE_TMP_SECONDS:
                    shutil.rmtree(path, ignore_errors=True)
            except OSError:
                pass

    # -- reading ----------------------------------------------------------------------

    def open(self, key: str) -> StoredRun | None:
        """The stored run of ``key`` without its tensors, or None (as `load`)."""
        return self._read(key, lambda folder: StoredRun(folder, key))

    def _whole(self, key: str) -> bool:
        """Does the stored run of ``key`` read back whole, its JSON files included?"""
        stored = self.open(key)
        return stored is not None and stored.damage() is None

    def load(self, key: str, device: str | None = "cpu") -> Run | None:
        """The stored `Run` of ``key``, or None (unknown key, or a folder that does not read
        back completely: logged and skipped, never shown as finished)."""
        return self._read(key, lambda folder: _read_run(folder, key, device))

    def _read(self, key: str, read):
        """``read(folder)`` of a whole stored run of ``key`` (then counted as used), or None."""
        if not is_key(key):
            return None
        folder = self.root / key
        try:
            if not (folder / RUN).is_file():
                return None
            found = read(folder)
        except Exception as err:  # noqa: BLE001 - any damage means: not a stored run
            log.warning("ignoring the stored run %s: %s: %s", key, type(err).__name__, err)
            return None
        _touch(folder)
        return found


class StoredRun:
    """A run in the store, read without its tensors: its settings, status and curves (the
    attributes of a `Run` that need no tensor), the figures its worker drew, and its files.
    `load` reads the model and the record, for drawing what ``figures.json`` lacks."""

    def __init__(self, folder: Path, key: str):
        record, config, network = _read_record(folder, key)  # the one place it is parsed
        self.folder, self.key = folder, key
        self.config, self.network, self.task = config, network, get_task(config.task)
        self.device = record["device"]
        self.status = Status(record["status"])
        self.step = int(record["step"])
        self.seconds = float(record["seconds"])
        self.error = record["error"]
        self.history = [dict(entry) for entry in record["history"]]
        self.train_loss = [(int(step), float(loss)) for step, loss in record["train_loss"]]
        self.position_nodes = list(record["snapshot_steps"])
        self._figures: dict | None = None
        # for `_read_run`, which pairs these steps with their tensors
        self._snapshot_steps = record["snapshot_steps"]
        self._attention_steps = record.get("attention_steps", {})
        self._initial_scores = record.get("initial_scores", {})
        self._initial_measures = record.get("initial_measures", {})
        self._length_generalization = record.get("length_generalization", {})

    final = Run.final

    @classmethod
    def of_folder(cls, folder: str | Path) -> "StoredRun":
        """The run in any folder holding a ``run.json`` (a store's, or ``stacklab train
        --out DIR``'s); raises `StackError` when there is none or it does not read."""
        folder = Path(folder)
        try:
            return cls(folder, str(_run_json(folder)["key"]))
        except Exception as err:  # noqa: BLE001 - any damage: not a run folder
            raise StackError("E_VALUE", f"{str(folder)[:200]} is not a stacklab run folder "
                             f"({type(err).__name__}: {str(err)[:120]})",
                             hint="give a folder written by `stacklab train --out DIR`, or a "
                                  "run key of the run store") from None

    def metrics(self) -> dict:
        """The run's ``metrics.json``; `StackError` ``E_DAMAGED`` when it does not read."""
        return read_object(self.folder, self.key, METRICS, self.metrics_text())

    def figures(self) -> dict | None:
        """What `stacklab.lab.figures.figures_json` gave when the run was stored (None for
        a run stored without them); `StackError` ``E_DAMAGED`` when it does not read."""
        if self._figures is None:
            path = self.folder / FIGURES
            if not path.is_file():
                return None
            self._figures = read_object(self.folder, self.key, FIGURES)
        return self._figures

    def metrics_text(self) -> str:
        """The run's ``metrics.json``, as stored."""
        _touch(self.folder)
        return read_text(self.folder, self.key, METRICS)

    def checkpoint_bytes(self) -> bytes:
        """The run's ``model.safetensors``, as stored; `StackError` ``E_DAMAGED`` when it
        is missing (a download would otherwise do nothing)."""
        _touch(self.folder)
        try:
            return (self.folder / MODEL).read_bytes()
        except OSError as err:
            raise damaged(self.folder, self.key, MODEL, unreadable(err)) from None

    def damage(self) -> StackError | None:
        """Why this run is damaged (its first file that does not read: ``metrics.json``,
        ``figures.json``, ``model.safetensors``' header), or None: a page asks before
        offering the run's files. (``record.safetensors``, which `train --out` does not
        write, is read by `load` alone.)"""
        try:
            self.metrics()
            self.figures()
            if not (self.folder / MODEL).is_file():
                raise damaged(self.folder, self.key, MODEL, "is missing")
            read_metadata(self.folder / MODEL, max_data_bytes=self.network.param_bytes)
        except StackError as err:
            if err.code == "E_DAMAGED":
                return err
            return damaged(self.folder, self.key, MODEL,
                           f"is not a checkpoint ({err.message.split(': ', 1)[-1]})")
        return None

    def load(self, device: str | None = "cpu") -> Run:
        """The whole `Run`, tensors included; raises `StackError` when the files are gone
        (evicted from the store, or a stopped run's folder cleared: ``E_VALUE``) or do not
        read back (``E_DAMAGED``)."""
        if not (self.folder / RUN).is_file():
            raise StackError("E_VALUE", f"run {self.key} is no longer in the run store",
                             hint="train it again")
        try:
            _touch(self.folder)
            return _read_run(self.folder, self.key, device)
        except Exception as err:  # noqa: BLE001 - any damage means: the run is damaged
            raise damaged(self.folder, self.key, "files", f"do not read back "
                          f"({type(err).__name__}: {str(err)[:120]})") from err


def _run_json(folder: Path) -> dict:
    """``run.json`` of ``folder``, parsed (refused when too large to be one)."""
    if (folder / RUN).stat().st_size > _RUN_JSON_MAX_BYTES:
        raise ValueError("run.json is too large")
    return json.loads((folder / RUN).read_text(encoding="utf-8"))


def _read_record(folder: Path, key: str) -> tuple[dict, TrainConfig, "Network"]:
    """``run.json`` of ``folder``, checked to be a whole run of ``key`` (its settings give
    ``key`` again), with its settings and resolved network; `StoredRun` reads the rest."""
    record = _run_json(folder)
    if record.get("format") != FORMAT or record.get("key") != key:
        raise ValueError("run.json is not a stored run of this key")
    names = {f.name for f in fields(TrainConfig)}
    config = TrainConfig(**{k: v for k, v in record["config"].items() if k in names}).filled()
    network = resolve(record["source"], record["input_shape"], input_dtype=record["input_dtype"],
                      dtype=config.dtype)
    if run_key(network, config, record["device"]) != key:
        raise ValueError("the stored settings do not give this key")
    return record, config, network


def _read_run(folder: Path, key: str, device: str | None) -> Run:
    """The whole `Run` in ``folder``: the `StoredRun` there with its model and tensors."""
    stored = StoredRun(folder, key)
    model = stored.network.build(device=device)
    model.load_state_dict(load_state(folder / MODEL, stored.network))
    run = Run(config=stored.config, task=stored.task, network=stored.network, model=model,
              device=stored.device, key=key, status=stored.status, step=stored.step,
              seconds=stored.seconds, error=stored.error, history=stored.history,
              train_loss=stored.train_loss, initial_scores=stored._initial_scores,
              initial_measures=stored._initial_measures,
              length_generalization=stored._length_generalization)
    read_record(folder / RECORD, run, stored._snapshot_steps, stored._attention_steps)
    if set(run.initial_tables) != {name for name, _ in model.layers("position_table")}:
        raise ValueError("the record does not hold every position table")
    return run


def _touch(folder: Path) -> None:
    try:
        os.utime(folder)  # the folder's mtime is its last use, for eviction
    except OSError:
        pass


def _last_used(folder: Path) -> float:
    try:
        return folder.stat().st_mtime
    except OSError:
        return 0.0


def _folder_bytes(folder: Path) -> int:
    total = 0
    try:
        for path in folder.iterdir():
            total += path.stat().st_size
    except OSError:
        pass
    return total
