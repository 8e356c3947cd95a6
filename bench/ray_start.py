"""Seconds from the Train press to the first step, on an app server warm for a while: its
pool training in local worker processes (forked from the warm fork server), and on a Ray
cluster (a local Ray head, `stacklab.serve.workers.ray_runs`), side by side.

    python bench/ray_start.py            # results in bench/ray_start.json
    python bench/ray_start.py --runs 5

Both pools live in this process, each waits `WARM_SECONDS` after it is made (as a server
does between its start and a class's first Train press) and trains one run before the
timed ones (a teacher's). Then the timed runs, each a new key (another seed), take turns:
local, Ray, local, Ray... The clock runs from `JobPool.submit` (what the Train button
calls) to the first view of the job with a step done, polled every 10 ms, as a page that
asked all the time would see it (a real page asks every 0.5 s).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).parent.parent
sys.path.insert(0, str(ROOT / "lib"))

import ray  # noqa: E402

from stacklab.lab.runs.store import RunStore  # noqa: E402
from stacklab.lab.settings import TrainConfig  # noqa: E402
from stacklab.serve.workers.pool import JobPool  # noqa: E402

RESULTS = Path(__file__).with_name("ray_start.json")
WARM_SECONDS = 20.0
STEPS = 400  # a short run: each one ends before the next starts


def first_step(pool: JobPool, seed: int) -> float:
    """Seconds from submitting a new run to its first step; then waits for its end."""
    started = time.monotonic()
    job = pool.submit(f"bench-{seed}", None, TrainConfig(task="reverse", steps=STEPS, seed=seed))
    while job.view().step == 0:
        if not job.view().active:
            raise SystemExit(f"run {seed} ended before a step: {job.view().error}")
        time.sleep(0.01)
    seconds = time.monotonic() - started
    if job.wait(300).status != "finished":
        raise SystemExit(f"run {seed}: {job.view().status} {job.view().error}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    options = parser.parse_args()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    folder = Path(tempfile.mkdtemp(prefix="stacklab-ray-start-"))
    pools = {"local": JobPool(workers=2, store=RunStore(folder / "local")),
             "ray": JobPool(workers=2, store=RunStore(folder / "ray"), ray_address="auto")}
    try:
        time.sleep(WARM_SECONDS)
        for name, pool in pools.items():  # the teacher's run: not timed
            first_step(pool, 1 if name == "local" else 2)
        seconds: dict[str, list[float]] = {name: [] for name in pools}
        for run in range(options.runs):
            for name, pool in pools.items():
                seconds[name].append(round(first_step(pool, 100 + 2 * run + (name == "ray")), 3))
    finally:
        for pool in pools.values():
            pool.shutdown()
        ray.shutdown()
    median = {name: statistics.median(values) for name, values in seconds.items()}
    result = {"train_to_first_step_s": seconds, "median_s": median,
              "ray_over_local": round(median["ray"] / median["local"], 2),
              "load_average": os.getloadavg(), "cpus": os.cpu_count()}
    print(json.dumps(result, indent=1))
    RESULTS.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
