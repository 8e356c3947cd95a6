"""What a person does with a finished run's ``run=`` link, end to end: a new session opens
the link on a real Streamlit app server (Streamlit's agent API, as `loadtest.AgentStudent`
opens it) and the clock stops when the answer holds the finished run's pattern figure.
Three app servers are up at once, each warm (its pages imported, its pool started, as a
teacher's server is), and each opens every run once (a run a server opened before comes
from its memory, not from its store):

- ``local``: a server on a local store that holds the runs;
- ``s3_warm``: a server on the bucket whose cache (``STACKLAB_RUNS_CACHE``) holds the runs
  (the store that wrote them to the bucket wrote them there first);
- ``s3_cold``: a server on the bucket with an empty cache: each run exists only in the
  bucket (written by another store) and comes from it on its first open.

Part of `make bench`'s ``store`` section (bench/run.py), beside the store's own open.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import loadtest  # noqa: E402

PAUSE = 0.3  # s between two opens: the last session's own work, let finish
VARIANTS = ("local", "s3_warm", "s3_cold")


def stored_runs(stores, count: int) -> list[str]:
    """The keys of ``count`` finished runs (seeds no other part of the bench trains), saved
    with their figures in each of ``stores`` (a bucket's writer keeps them in its cache)."""
    import stacklab
    from stacklab.lab.figures import figures_json

    keys = []
    for seed in range(100, 100 + count):
        run = stacklab.train(task="reverse", steps=200, seed=seed)
        for store in stores:
            store.save(run, figures_json(run))
        keys.append(run.key)
    return keys


def open_link(server: loadtest.Server, key: str) -> tuple[float, float]:
    """A new session opens ``run=KEY`` (the run alone: it fixes the experiment) until the
    answer shows the finished run's pattern figure: wall seconds and server CPU seconds."""
    student = loadtest.AgentStudent(server.base, {"run": key}, 0.0)
    cpu, asked = server.cpu(), time.perf_counter()
    snapshot = student.ask(page="train", query_params={"run": [key]})
    while not loadtest.pattern_shown(snapshot):
        if time.perf_counter() - asked > 60:
            raise SystemExit(f"run={key} showed no finished pattern: {loadtest.texts(snapshot)[:300]}")
        snapshot = student.ask()
    return time.perf_counter() - asked, server.cpu() - cpu


def servers(folder: Path, url: str, local: Path, warm_cache: Path) -> dict[str, loadtest.Server]:
    """The three app servers, started one after another and each made warm."""
    plan = {"local": ({}, local), "s3_warm": ({"STACKLAB_RUNS_CACHE": str(warm_cache)}, url),
            "s3_cold": ({"STACKLAB_RUNS_CACHE": str(folder / "cold-cache")}, url)}
    started: dict[str, loadtest.Server] = {}
    try:
        for name, (env, runs) in plan.items():
            started[name] = loadtest.Server(64, env={"STACKLAB_WORKERS": "1", **env}, runs=runs)
            loadtest.warm(started[name])
    except BaseException:
        close(started)
        raise
    return started


def close(started: dict[str, loadtest.Server]) -> None:
    for server in started.values():
        server.close()


def page_opens(folder: Path, url: str, local: Path, warm_cache: Path, keys: list[str]) -> dict:
    """Each of ``keys`` (runs in the store at ``local``, in the bucket at ``url`` and in
    ``warm_cache``) opened once on each server, the servers taken in rotating order: per
    open, wall seconds and the server's CPU seconds."""
    started = servers(folder, url, local, warm_cache)
    wall = {name: [] for name in VARIANTS}
    cpu = {name: [] for name in VARIANTS}
    try:
        for rep, key in enumerate(keys):
            for name in VARIANTS[rep % 3:] + VARIANTS[: rep % 3]:
                seconds, spent = open_link(started[name], key)
                wall[name].append(seconds)
                cpu[name].append(spent)
                time.sleep(PAUSE)
    finally:
        close(started)
    return {"wall": wall, "cpu": cpu}


def summary(found: dict) -> dict:
    """Medians (ms; the server's CPU counted in 10 ms ticks), the per-repetition ratios over
    local, and the issue's targets; beside them each server's first open of a finished run
    (its one-off work: the finished run's page drawn once, on S3 the bucket's client made)."""
    wall, cpu = found["wall"], found["cpu"]

    def ratio(name: str) -> float:
        return statistics.median(a / b for a, b in zip(wall[name], wall["local"]))

    warm, cold = ratio("s3_warm"), ratio("s3_cold")
    return {"open_ms": {name: statistics.median(times) * 1e3 for name, times in wall.items()},
            "server_cpu_ms": {name: statistics.median(times) * 1e3 for name, times in cpu.items()},
            "first_open_ms": {name: times[0] * 1e3 for name, times in wall.items()},
            "s3_warm_over_local": warm, "s3_cold_over_local": cold, "opens": len(wall["local"]),
            "each_open_ms": {name: [round(t * 1e3, 1) for t in times] for name, times in wall.items()},
            "targets": {"s3_warm_within_1.5x": warm <= 1.5, "s3_cold_within_3x": cold <= 3.0}}

