"""The watch endpoints' request costs of two checkouts, side by side in one session: the
shared running poll and the finished ``run=`` poll of `request_costs` (server CPU per
request, less the server's own work while nobody asks), each checkout's own server.py
started in turn, A/B/A/B, so that both see the same machine. A change to the server's
insides (issue 45's hub) is within 10% of the code before it when its means are.

    python bench/side_by_side.py BEFORE AFTER [ROUNDS]   # e.g. a worktree of main, and .

Each checkout runs with its own ``lib`` and ``ui`` and this environment's packages. The
finished run is opened by `request_costs.SHARING` students (request_costs opens 40: the
endpoint's answer is the same for each). Prints each round, the means, and the load
average around each measurement; writes bench/side_by_side.json.
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
import request_costs  # noqa: E402

ROWS = ("shared_running_poll", "run_link_poll")


def costs(root: Path) -> dict:
    """The two endpoint rows on a server of the checkout ``root``: CPU ms per request."""
    own, loadtest.ROOT = loadtest.ROOT, root  # the server's lib, its cwd (and so its ui)
    server = loadtest.Server(max_sessions=80, script=root / "server.py")
    try:
        loadtest.warm(server)
        teacher, sharing = request_costs.sharing_run(server)
        running = request_costs.endpoint(server, sharing, "url")[0][0]
        teacher.ask(trigger={"key": "train_stop"})
        query = {**loadtest.link_query(), "run": loadtest.teacher_trains(server)}
        students = [request_costs.opened(server, query) for _ in range(request_costs.SHARING)]
        assert loadtest.live_watch(students[-1].snapshot) is None  # nothing live to watch
        finished = request_costs.endpoint(server, students, "url")[0][0]
        return {"shared_running_poll": running, "run_link_poll": finished}
    finally:
        server.close()
        loadtest.ROOT = own


def main(before: Path, after: Path, rounds: int) -> dict:
    found = {"before": [], "after": []}
    for round_ in range(rounds):
        for side, root in (("before", before), ("after", after)):
            load = os.getloadavg()[0]
            row = costs(root)
            row["load"] = (round(load, 2), round(os.getloadavg()[0], 2))
            found[side].append(row)
            print(f"round {round_ + 1} {side:6} " + "  ".join(
                f"{name} {row[name]:.3f} ms" for name in ROWS) + f"  load {row['load']}",
                  flush=True)
    means = {side: {name: round(statistics.mean(r[name] for r in rows), 3) for name in ROWS}
             for side, rows in found.items()}
    for name in ROWS:
        change = means["after"][name] / means["before"][name] - 1 if means["before"][name] else 0
        print(f"{name:20} before {means['before'][name]:.3f} ms  after "
              f"{means['after'][name]:.3f} ms  ({change:+.0%})")
    return {"rounds": found, "means": means, "before": str(before), "after": str(after)}


if __name__ == "__main__":
    result = main(Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve(),
                  int(sys.argv[3]) if len(sys.argv) > 3 else 2)
    (Path(__file__).with_name("side_by_side.json")).write_text(json.dumps(result, indent=2) + "\n")
