"""The files of a run folder, as the run store (`stacklab.lab.runs.store`) and ``stacklab train
--out DIR`` write them: ``model.safetensors``, ``record.safetensors``, ``metrics.json``,
``figures.json`` (when drawn) and ``run.json``, written last."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict
from pathlib import Path

from safetensors import safe_open
from safetensors.torch import save_file

from ...core.errors import StackError
from .checkpoint import run_metadata, save_checkpoint

log = logging.getLogger("stacklab.store")

FORMAT = "stacklab-run-1"
# the files of a run folder, by job
MODEL, RECORD, METRICS, FIGURES, RUN = ("model.safetensors", "record.safetensors",
                                        "metrics.json", "figures.json", "run.json")


class RecordNames:
    """The names of ``record.safetensors``' tensors, declared once: `write_record` writes
    them and `read_record` reads them back."""

    @staticmethod
    def initial(node: str) -> str:  # the table at init, [max_len, D]
        return f"initial.{node}"

    @staticmethod
    def grad(node: str) -> str:  # the gradient norm of each row, summed over steps, [max_len]
        return f"grad.{node}"

    @staticmethod
    def snapshot(node: str, index: int) -> str:  # the table at a kept step, [max_len, D]
        return f"snapshot.{node}.{index}"

    @staticmethod
    def attention(node: str, index: int) -> str:  # attention by position at a kept step, [T, T]
        return f"attention.{node}.{index}"


def write_run(folder: Path, run, figures: dict | None = None) -> None:
    save_checkpoint(folder / MODEL, run.model, run_metadata(run))
    write_record(folder / RECORD, run)
    write_summary(folder, run, figures)


def write_record(path: Path, run) -> None:
    """``record.safetensors``: every tensor a `Run` recorded (`RecordNames`)."""
    tensors = {}
    for node in run.position_nodes:
        tensors[RecordNames.initial(node)] = run.initial_tables[node].contiguous()
        tensors[RecordNames.grad(node)] = run.row_grad_norm[node].contiguous()
        for index, (_, table) in enumerate(run.snapshots.get(node, ())):
            tensors[RecordNames.snapshot(node, index)] = table.contiguous()
        for index, (_, weights) in enumerate(run.attention_snapshots.get(node, ())):
            tensors[RecordNames.attention(node, index)] = weights.contiguous()
    save_file(tensors, str(path), metadata={"format": FORMAT})


def read_record(path: Path, run, snapshot_steps: dict[str, list],
                attention_steps: dict[str, list]) -> None:
    """Fill ``run`` with the tensors of ``record.safetensors`` at ``path``, pairing the
    snapshots with the steps ``run.json`` lists (`write_record` wrote them)."""
    with safe_open(str(path), framework="pt") as handle:
        for node, steps in snapshot_steps.items():
            run.initial_tables[node] = handle.get_tensor(RecordNames.initial(node))
            run.row_grad_norm[node] = handle.get_tensor(RecordNames.grad(node))
            run.snapshots[node] = [(int(step), handle.get_tensor(RecordNames.snapshot(node, index)))
                                   for index, step in enumerate(steps)]
        for node, steps in attention_steps.items():
            run.attention_snapshots[node] = [
                (int(step), handle.get_tensor(RecordNames.attention(node, index)))
                for index, step in enumerate(steps)]


def write_summary(folder: Path, run, figures: dict | None = None) -> None:
    """``metrics.json``, ``figures.json`` (when drawn) and ``run.json`` (settings, status and
    curves; written last, it marks the folder whole) of ``run`` in ``folder``: what
    `StoredRun` reads. `stacklab train --out DIR` writes them too, so a run folder of the
    CLI opens like a stored run (`StoredRun.of_folder`)."""
    network = run.network
    record = {
        "format": FORMAT,
        "key": run.key,
        "source": network.source,
        "input_shape": list(network.input_shape),
        "input_dtype": network.input_dtype,
        "config": asdict(run.config),
        "status": str(run.status),
        "error": run.error,
        "step": run.step,
        "seconds": run.seconds,
        "device": run.device,
        "history": run.history,
        "train_loss": run.train_loss,
        "snapshot_steps": {node: [step for step, _ in run.snapshots.get(node, ())]
                           for node in run.position_nodes},
        "attention_steps": {node: [step for step, _ in frames]
                            for node, frames in run.attention_snapshots.items()},
        "initial_scores": run.initial_scores,
        "initial_measures": run.initial_measures,
        "length_generalization": run.length_generalization,
    }
    write_text(folder / METRICS, json.dumps(run.metrics(), indent=2) + "\n")
    if figures is not None:
        write_text(folder / FIGURES, json.dumps(figures) + "\n")
    write_text(folder / RUN, json.dumps(record) + "\n")  # last: it marks the run whole


def write_text(path: Path, text: str) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())


# -- reading damaged files: each a `StackError` E_DAMAGED, logged once -----------------------

MAX_JSON_BYTES = 64 << 20  # a run's JSON file larger than this is not one
_LOGGED: set[tuple[str, str]] = set()  # (folder, file): each damage is logged once
_LOGGED_MAX = 4096


def damaged(folder: Path, key: str, name: str, what: str) -> StackError:
    """The `StackError` ``E_DAMAGED`` of the run ``key`` in ``folder``, whose file ``name``
    ``what`` ("is missing"), logged once per run and file: a page shows it in place of that
    run, and every other run stays."""
    if (str(folder), name) not in _LOGGED:
        if len(_LOGGED) >= _LOGGED_MAX:
            _LOGGED.clear()
        _LOGGED.add((str(folder), name))
        log.warning("run %s is damaged: its %s %s", key, name, what)
    return StackError("E_DAMAGED", f"run {key[:12]} is damaged: its {name} {what}",
                      hint="train it again: the store replaces a damaged run",
                      where=f"{name} of run {key[:12]}")


def unreadable(err: OSError) -> str:
    """How a file that raised ``err`` is damaged, in words."""
    return ("is missing" if isinstance(err, FileNotFoundError) else
            f"cannot be read ({err.strerror or type(err).__name__})")


def read_text(folder: Path, key: str, name: str) -> str:
    """The text of the file ``name`` of the run ``key`` in ``folder``; ``E_DAMAGED`` when it
    is missing, too large or not text."""
    path = folder / name
    try:
        if path.stat().st_size > MAX_JSON_BYTES:
            raise damaged(folder, key, name, "is too large to be one")
        return path.read_text(encoding="utf-8")
    except OSError as err:
        raise damaged(folder, key, name, unreadable(err)) from None
    except UnicodeDecodeError:
        raise damaged(folder, key, name, "is not text") from None


def read_object(folder: Path, key: str, name: str, text: str | None = None) -> dict:
    """The JSON object in the file ``name`` (or its ``text``, read already) of the run
    ``key`` in ``folder``; ``E_DAMAGED`` when it is not one (truncated, ``[]``, garbage)."""
    text = read_text(folder, key, name) if text is None else text
    try:
        found = json.loads(text)
    except (ValueError, RecursionError) as err:
        raise damaged(folder, key, name, f"is not valid JSON ({str(err)[:80]})") from None
    if not isinstance(found, dict):
        raise damaged(folder, key, name, f"holds a JSON {type(found).__name__}, not an object")
    return found
