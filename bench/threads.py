"""Torch threads for training, measured: every task's preset trained to its target in a
fresh process (so each variant gets its own OpenMP start-up), on a quiet machine and under
a background load that keeps every core busy, variants interleaved pair by pair.

    python bench/threads.py            # all tasks; results in bench/threads.json
    python bench/threads.py reverse    # one task

Variants: ``default`` (what `stacklab train` and `stacklab.train` do: core/threads.py),
``one`` (one thread), ``two spinning`` (two threads, OpenMP's own spinning waits) and
``two passive`` (two threads, ``OMP_WAIT_POLICY=PASSIVE``). Each figure is the training's
own seconds (imports and start-up left out), the median over repetitions; beside it the
ratio to the best variant of that row.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).with_name("threads.json")
REPS = int(os.environ.get("BENCH_THREAD_REPS", "3"))
VARIANTS = {
    "default": {},  # what the CLI and stacklab.train do (core/threads.py): one thread
    "one": {"STACKLAB_THREADS": "1"},
    "two spinning": {"STACKLAB_THREADS": "2", "OMP_WAIT_POLICY": "ACTIVE"},
    "two passive": {"STACKLAB_THREADS": "2", "OMP_WAIT_POLICY": "PASSIVE"},
}
CHILD = """
import sys, time
import stacklab
from stacklab.core.threads import use_training_threads
import torch
threads = use_training_threads()
start = time.perf_counter()
run = stacklab.lab.train.trainer.train(task=sys.argv[1], seed=0)
print(time.perf_counter() - start, threads, run.final["accuracy"], len(run.history))
"""


def train_once(task: str, env: dict) -> float:
    """Seconds one training of ``task``'s preset took in a fresh process with ``env``."""
    clean = {k: v for k, v in os.environ.items()
             if k not in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "STACKLAB_THREADS")}
    child = "import stacklab.lab.train.trainer\n" + CHILD
    done = subprocess.run([sys.executable, "-c", child, task], env={**clean, **env},
                          capture_output=True, text=True, timeout=900, check=True)
    return float(done.stdout.split()[0])


def _spin() -> None:  # pragma: no cover - a background load
    while True:
        pass


def measure(tasks: list[str], loaded: bool) -> dict:
    """Median seconds of each variant for each task, with ``loaded`` background spinners."""
    load = [multiprocessing.Process(target=_spin, daemon=True)
            for _ in range(os.cpu_count() or 1)] if loaded else []
    for process in load:
        process.start()
    try:
        rows = {}
        for task in tasks:
            samples: dict[str, list[float]] = {name: [] for name in VARIANTS}
            names = list(VARIANTS)
            for rep in range(REPS):
                for name in names[rep % len(names):] + names[:rep % len(names)]:
                    samples[name].append(train_once(task, VARIANTS[name]))
            medians = {name: statistics.median(values) for name, values in samples.items()}
            best = min(medians.values())
            rows[task] = {name: {"seconds": round(seconds, 3), "of_best": round(seconds / best, 2)}
                          for name, seconds in medians.items()}
            print(f"{'loaded' if loaded else 'quiet':6} {task:10} " + "  ".join(
                f"{name} {row['seconds']:.2f}s ({row['of_best']:.2f}x)"
                for name, row in rows[task].items()), file=sys.stderr)
        return rows
    finally:
        for process in load:
            process.terminate()


def main(argv: list[str]) -> int:
    from stacklab.lab.tasks import TASKS

    tasks = argv or [name for name in TASKS if name not in ("induction",)]
    started = time.time()
    results = {"quiet": measure(tasks, loaded=False), "loaded": measure(tasks, loaded=True),
               "reps": REPS, "cores": os.cpu_count()}
    worst = {variant: max(rows[task][variant]["of_best"] for rows in (results["quiet"],
                                                                      results["loaded"])
                          for task in tasks) for variant in VARIANTS}
    results["worst_of_best"] = worst
    results["seconds"] = round(time.time() - started, 1)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print("worst ratio to the best variant, over tasks and loads:", worst)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
