"""The files of a run folder, as the run store (`stacklab.lab.runs.store`) and ``stacklab train
--out DIR`` write them: ``model.safetensors``, ``record.safetensors``, ``metrics.json``,
``figures.json`` (when drawn) and ``run.json``, written last."""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path

from safetensors.torch import save_file

from .checkpoint import run_metadata, save_checkpoint

FORMAT = "stacklab-run-1"


def write_run(folder: Path, run, figures: dict | None = None) -> None:
    save_checkpoint(folder / "model.safetensors", run.model, run_metadata(run))
    tensors = {}
    for node in run.position_nodes:
        tensors[f"initial.{node}"] = run.initial_tables[node].contiguous()
        tensors[f"grad.{node}"] = run.row_grad_norm[node].contiguous()
        for index, (_, table) in enumerate(run.snapshots.get(node, ())):
            tensors[f"snapshot.{node}.{index}"] = table.contiguous()
        for index, (_, weights) in enumerate(run.attention_snapshots.get(node, ())):
            tensors[f"attention.{node}.{index}"] = weights.contiguous()
    save_file(tensors, str(folder / "record.safetensors"), metadata={"format": FORMAT})
    write_summary(folder, run, figures)


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
    write_text(folder / "metrics.json", json.dumps(run.metrics(), indent=2) + "\n")
    if figures is not None:
        write_text(folder / "figures.json", json.dumps(figures) + "\n")
    write_text(folder / "run.json", json.dumps(record) + "\n")  # last: it marks the run whole


def write_text(path: Path, text: str) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
