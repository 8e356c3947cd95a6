"""What one request costs the server (the profile of a poll), on the real server
with the agent API on: the server process's CPU (all its threads, not the worker
processes that train) per request, for

- a poll of a run that two sessions share while it trains (the page and its fragment,
  with the training curves and the pattern figure; the drawing of each new evaluation's
  figures shared by its watchers is in it, so a class of 100 pays less per poll);
- a poll of a queued run;
- a new session opening the teacher's ``run=KEY`` link of a finished run.

    python bench/request_costs.py      # also run by `make loadtest`; writes bench/request_costs.json

/proc counts CPU in 10 ms ticks, so each figure is the mean over many requests.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("STACKLAB_WORKERS", "1")  # one run trains, the next one queues
sys.path.insert(0, str(Path(__file__).parent))

import loadtest  # noqa: E402

REQUESTS = 40  # of each kind
PAUSE = 0.15  # s between requests: one session at a time, as a poller


def cpu_ms(server: loadtest.Server, ask) -> float:
    before = server.cpu()
    ask()
    return (server.cpu() - before) * 1e3


def opened(server: loadtest.Server, query: dict) -> loadtest.AgentStudent:
    student = loadtest.AgentStudent(server.base, query, 0.0)
    student.ask(page="train", query_params={k: [v] for k, v in query.items()})
    return student


def polls(server: loadtest.Server, student: loadtest.AgentStudent, n: int) -> list[float]:
    samples = []
    for _ in range(n):
        samples.append(cpu_ms(server, student.ask))
        time.sleep(PAUSE)
    return samples


def measure() -> dict:
    server = loadtest.Server(max_sessions=REQUESTS + 20)
    try:
        loadtest.warm(server)
        long = loadtest.link_query(steps="20000", target_accuracy="")
        sharing = [opened(server, long) for _ in range(2)]
        for student in sharing:
            student.ask(trigger={"key": "train_train"})
        while "Status: **running**" not in loadtest.texts(sharing[1].ask()):
            time.sleep(0.3)
        time.sleep(2.0)  # a few evaluations in
        shared = polls(server, sharing[1], REQUESTS)
        assert "shared with" in loadtest.texts(sharing[1].snapshot)
        waiting = opened(server, loadtest.link_query(seed="9"))
        waiting.ask(trigger={"key": "train_train"})
        queued = polls(server, waiting, REQUESTS)
        assert "Status: **queued**" in loadtest.texts(waiting.snapshot)
        for student in (*sharing, waiting):
            student.ask(trigger={"key": "train_stop"})
        query = {**loadtest.link_query(), "run": loadtest.teacher_trains(server)}
        opens = []
        for _ in range(REQUESTS):
            opens.append(cpu_ms(server, lambda: opened(server, query)))
            time.sleep(PAUSE)
    finally:
        server.close()
    return {name: {"mean_ms": round(statistics.mean(samples), 1), "requests": len(samples)}
            for name, samples in (("shared_running_poll", shared), ("queued_poll", queued),
                                  ("run_link_open", opens))}


if __name__ == "__main__":
    result = measure()
    (Path(__file__).with_name("request_costs.json")).write_text(json.dumps(result, indent=2) + "\n")
    print("server CPU per request (mean):")
    for name, row in result.items():
        print(f"  {name:22} {row['mean_ms']:6.1f} ms  ({row['requests']} requests)")
