"""A stored run read without its tensors (`StoredRun`), and the whole `Run` read back from a
run folder: the run store's readers (`stacklab.lab.runs.store`), and ``stacklab train --out
DIR``'s."""

from __future__ import annotations

import json
import os
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING

from ...core.errors import StackError
from ...core.resolve import resolve
from .bucket import DAMAGE
from .checkpoint import load_state, read_metadata
from ..keys import run_key
from .files import (FIGURES, FORMAT, METRICS, MODEL, RECORD, RUN, damaged, read_object,
                    read_record, read_text, unreadable)
from ..settings import TrainConfig
from ..tasks import get_task
from ..train.record import Run, Status

if TYPE_CHECKING:
    from ...core.network import Network

_RUN_JSON_MAX_BYTES = 64 << 20


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
                                  "run key of the run store", where=str(folder)[:200]) from None

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
        write, is read by `load` alone.) Checked once: a stored run's files do not change."""
        if not hasattr(self, "_damage"):
            self._damage = self._first_damage()
        return self._damage

    def _first_damage(self) -> StackError | None:
        try:
            found = bucket_damage(self.folder, self.key)
            if found is not None:
                raise found
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
                             hint="train it again", where=f"run {self.key[:12]}")
        try:
            _touch(self.folder)
            return _read_run(self.folder, self.key, device)
        except Exception as err:  # noqa: BLE001 - any damage means: the run is damaged
            raise damaged(self.folder, self.key, "files", f"do not read back "
                          f"({type(err).__name__}: {str(err)[:120]})") from err


def bucket_damage(folder: Path, key: str) -> StackError | None:
    """``E_DAMAGED`` for the first file of a run copied from a bucket that did not match the
    bucket's manifest (`stacklab.lab.runs.bucket`), or None."""
    path = folder / DAMAGE
    try:
        name, what = next(iter(json.loads(path.read_text(encoding="utf-8")).items()))
    except (OSError, ValueError, StopIteration, AttributeError):
        return None
    return damaged(folder, key, str(name)[:80], f"{str(what)[:200]} in the bucket")


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
