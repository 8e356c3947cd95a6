"""One run shared by two app servers on one real local Ray instance (SPEC §20): each app
server is a process of its own with its own `JobPool`, connected to the cluster through
STACKLAB_RAY_ADDRESS and sharing one STACKLAB_RUNS. A key that trains on one is followed
live by the other (never trained twice); a stop on one leaves the run the other watches;
a dead actor fails the run on both, never hangs. The actor's stream, read by several
readers at once, is tested on its own first; last, two real Streamlit servers in
Chromium (skipped without a browser)."""

from __future__ import annotations

import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

import pytest

ray = pytest.importorskip("ray")

from stacklab.serve import ray_runs  # noqa: E402 - after the skip: it imports Ray

STEPS = 600  # a run that finishes in a few seconds here, long enough to be followed live
ENDLESS = 100_000  # a run that ends only by a stop
LIB = str(Path(ray_runs.__file__).resolve().parents[2])
ROOT = Path(__file__).parent.parent
CHROMIUM = "/usr/bin/chromium"
BROWSER_STEPS = 3000  # long enough for the student to open the link while it trains

# One app server: a JobPool driven by JSON lines on stdin, as the Train page drives it
# (submit, open with run=KEY, stop, and a page polling `Job.view` until the run ends).
SERVER = r'''
import json, sys, threading, time
from stacklab.lab.trainer import TrainConfig
from stacklab.serve.pool import JobPool

pool = JobPool(workers=1)  # STACKLAB_RAY_ADDRESS and STACKLAB_RUNS: from the environment
jobs, seen = {}, {}

def record(job):
    """What a page polling the job shows, until the job ends."""
    mine = seen[job.id] = {"statuses": [], "live_steps": [], "live_pattern": False}
    while True:
        view = job.view()
        if not mine["statuses"] or mine["statuses"][-1] != str(view.status):
            mine["statuses"].append(str(view.status))
        if not view.active:
            return
        if view.step and view.step not in mine["live_steps"]:
            mine["live_steps"].append(view.step)
        mine["live_pattern"] |= view.pattern is not None
        time.sleep(0.02)

def handle(cmd):
    if cmd["do"] == "submit":
        config = TrainConfig(task="reverse", steps=cmd["steps"], seed=cmd["seed"],
                             target_accuracy=None)
        job = pool.submit(cmd["owner"], None, config)
    elif cmd["do"] == "open":
        job = pool.open(cmd["owner"], cmd["key"])
        if job is None:
            return {"id": None}
    elif cmd["do"] == "stop":
        return {"stopped": pool.stop(cmd["owner"], cmd["id"])}
    elif cmd["do"] == "stats":
        return pool.stats()
    else:
        job = jobs[cmd["id"]]
        if cmd["do"] == "wait":
            job.wait(cmd["timeout"])
            watcher = jobs.get(("watcher", job.id))
            watcher.join(5)
    if job.id not in jobs:
        jobs[job.id] = job
        jobs[("watcher", job.id)] = threading.Thread(target=record, args=(job,), daemon=True)
        jobs[("watcher", job.id)].start()
    view = job.view(cmd.get("owner"))
    return {"id": job.id, "key": job.key, "status": str(view.status), "step": view.step,
            "history": list(view.history), "error": view.error,
            "pattern": view.pattern is not None, "seen": seen.get(job.id)}

for line in sys.stdin:
    cmd = json.loads(line)
    if cmd["do"] == "quit":
        break
    try:
        reply = handle(cmd)
    except Exception as err:
        reply = {"error": f"{type(err).__name__}: {err}"}
    print(json.dumps(reply), flush=True)
pool.shutdown()
'''


class AppServer:
    """One app server process (`SERVER`), asked one JSON line at a time."""

    def __init__(self, env: dict, log: Path):
        self.log = log
        self.process = subprocess.Popen([sys.executable, "-c", SERVER], env=env, text=True,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=log.open("w"))
        self.replies: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.replies.put(json.loads(line))

    def send(self, **cmd) -> None:
        self.process.stdin.write(json.dumps(cmd) + "\n")
        self.process.stdin.flush()

    def reply(self, timeout: float = 150.0) -> dict:
        try:
            reply = self.replies.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no reply; the server's log:\n{self.log.read_text()[-3000:]}")
        assert "error" not in reply or "id" in reply, reply
        return reply

    def ask(self, **cmd) -> dict:
        self.send(**cmd)
        return self.reply()

    def close(self) -> None:
        try:
            self.send(do="quit")
            self.process.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            pass
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A local Ray instance (this test process is its head, stopped by ``ray.shutdown``):
    the environment of an app server connected to it, and a folder (with the run store
    that app servers share)."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             namespace=ray_runs.NAMESPACE)
    try:
        folder = tmp_path_factory.mktemp("share")
        path = os.pathsep.join(filter(None, [LIB, os.environ.get("PYTHONPATH")]))
        env = {**os.environ, "STACKLAB_RAY_ADDRESS": ray.get_runtime_context().gcs_address,
               "STACKLAB_RUNS": str(folder / "runs"), "STACKLAB_WORKERS": "1",
               "PYTHONPATH": path}
        yield env, folder
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def servers(cluster):
    """Two app servers (`AppServer`) on the cluster."""
    env, folder = cluster
    started: list[AppServer] = []
    try:
        for name in ("a", "b"):
            started.append(AppServer(env, folder / f"server-{name}.log"))
        yield started
    finally:
        for server in started:
            server.close()


def trainings(server: AppServer) -> int:
    return server.ask(do="stats")["trainings"]


def wait_until(predicate, timeout=90.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("condition not reached")


def test_every_reader_gets_the_whole_stream_with_only_the_newest_figure():
    stream = ray_runs._Stream()
    stream.send(("step", 1, 2.0))
    stream.send(("eval", 2, {"step": 2}, [(1, 2.0)], "figure 1"))
    stream.send(("step", 3, 1.5))
    first_cursor, first = stream.since(0)
    stream.send(("eval", 4, {"step": 4}, [(3, 1.5)], "figure 2"))
    stream.send(("done", "finished", None, None))
    assert first == [("eval", 2, {"step": 2}, [(1, 2.0)], None), ("pattern", "figure 1"),
                     ("step", 3, 1.5)]
    assert stream.since(first_cursor)[1] == [("eval", 4, {"step": 4}, [(3, 1.5)], None),
                                             ("pattern", "figure 2"),
                                             ("done", "finished", None, None)]
    late = stream.since(0)[1]  # a reader that comes late: every evaluation, the newest figure
    assert [m[0] for m in late] == ["eval", "eval", "pattern", "done"] and late[2][1] == "figure 2"
    assert len(stream.kept) == 3  # the steps and the older figure are not kept


def test_the_run_stops_once_nobody_holds_it():
    readers = ray_runs._Readers()
    assert not readers.is_set()  # nobody has come yet
    assert readers.add("a", hold=True) and readers.add("b", hold=True)
    readers.leave("a", reading=True)
    assert not readers.is_set()  # b still watches
    assert readers.leave("b", reading=True) == 2 and readers.is_set()  # both still read it
    assert not readers.add("c", hold=True)  # a stopping run is not followed
    assert readers.leave("a", reading=False) == 1


def test_a_second_app_server_follows_a_training_run_instead_of_training_it(servers):
    a, b = servers
    before = trainings(a), trainings(b)
    teacher = a.ask(do="submit", owner="teacher", seed=21, steps=STEPS)
    wait_until(lambda: a.ask(do="view", id=teacher["id"])["step"] > 0)
    # the teacher's run= link, opened on the other app server, and a Train press there
    student = b.ask(do="open", owner="student", key=teacher["key"])
    assert student["status"] == "running"
    assert b.ask(do="submit", owner="other", seed=21, steps=STEPS)["id"] == student["id"]
    trained = a.ask(do="wait", id=teacher["id"], timeout=120)
    followed = b.ask(do="wait", id=student["id"], timeout=120)
    assert trained["status"] == followed["status"] == "finished", (trained, followed)
    assert (trainings(a), trainings(b)) == (before[0] + 1, before[1])  # one training in all
    assert len(followed["seen"]["live_steps"]) > 1 and followed["seen"]["live_pattern"]
    assert followed["seen"]["statuses"] == ["running", "finished"]
    assert followed["history"] == trained["history"]
    assert followed["step"] == trained["step"] == STEPS
    assert followed["pattern"] and trained["pattern"]
    late = b.ask(do="open", owner="late", key=teacher["key"])  # finished: from the run store
    assert late["status"] == "finished" and late["history"] == trained["history"]


def test_two_app_servers_pressing_train_at_once_train_once(servers):
    a, b = servers
    before = trainings(a) + trainings(b)
    a.send(do="submit", owner="left", seed=31, steps=STEPS)
    b.send(do="submit", owner="right", seed=31, steps=STEPS)
    left, right = a.reply(), b.reply()
    assert left["key"] == right["key"]
    left = a.ask(do="wait", id=left["id"], timeout=120)
    right = b.ask(do="wait", id=right["id"], timeout=120)
    assert left["status"] == right["status"] == "finished", (left["error"], right["error"])
    assert trainings(a) + trainings(b) == before + 1
    assert left["history"] == right["history"]


def test_a_stop_on_one_app_server_leaves_the_run_the_other_watches(servers):
    a, b = servers
    teacher = a.ask(do="submit", owner="teacher", seed=41, steps=ENDLESS)
    wait_until(lambda: a.ask(do="view", id=teacher["id"])["step"] > 0)
    student = b.ask(do="open", owner="student", key=teacher["key"])
    assert a.ask(do="stop", owner="teacher", id=teacher["id"])["stopped"]
    at_stop = b.ask(do="view", id=student["id"])["step"]
    wait_until(lambda: b.ask(do="view", id=student["id"])["step"] > at_stop + 50)  # goes on
    assert a.ask(do="view", id=teacher["id"])["status"] == "running"  # for the others
    assert a.ask(do="view", id=teacher["id"], owner="teacher")["status"] == "stopped"
    assert b.ask(do="stop", owner="student", id=student["id"])["stopped"]  # the last watcher
    trained = a.ask(do="wait", id=teacher["id"], timeout=60)
    followed = b.ask(do="wait", id=student["id"], timeout=60)
    assert trained["status"] == followed["status"] == "stopped", (trained, followed)
    assert followed["step"] == trained["step"] > at_stop  # the same run, read back on both


def test_a_followed_run_whose_actor_dies_fails_on_both_servers(servers):
    a, b = servers
    teacher = a.ask(do="submit", owner="teacher", seed=51, steps=ENDLESS)
    wait_until(lambda: a.ask(do="view", id=teacher["id"])["step"] > 0)
    student = b.ask(do="open", owner="student", key=teacher["key"])
    assert student["status"] == "running"
    ray.kill(ray.get_actor(ray_runs.actor_name(teacher["key"]), namespace=ray_runs.NAMESPACE),
             no_restart=True)
    for server, job in ((a, teacher), (b, student)):
        ended = server.ask(do="wait", id=job["id"], timeout=90)
        assert ended["status"] == "failed" and "Ray actor" in ended["error"], ended["error"]


def _streamlit(env: dict, log: Path) -> tuple[subprocess.Popen, str]:
    """A real app server (`streamlit run app.py`) on a free port, and its address."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.port",
         str(port), "--server.headless", "true", "--browser.gatherUsageStats", "false"],
        cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                return process, url
        except OSError:
            time.sleep(0.3)
    process.kill()
    raise AssertionError(f"the Streamlit server did not start:\n{log.read_text()[-3000:]}")


def test_the_teachers_link_on_a_second_streamlit_server_follows_the_run(cluster):
    """Two real app servers in Chromium: the teacher trains on one, and the run= link
    opened on the other shows the run live, then finished with its heatmap, with no
    second training."""
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed")
    sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright
    env, folder = cluster
    servers = []
    try:
        for name in ("a", "b"):
            servers.append((*_streamlit(env, folder / f"streamlit-{name}.log"),
                            folder / f"streamlit-{name}.log"))
        (_, teacher_url, teacher_log), (_, student_url, student_log) = servers
        with sync_playwright() as playwright:
            chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox",
                                                  "--disable-gpu", "--no-first-run"])
            try:
                teacher, student = (chromium.new_page(viewport={"width": 1400, "height": 1000})
                                    for _ in range(2))
                teacher.goto(f"{teacher_url}/train?" + urlencode(
                    {"task": "reverse", "seed": 91, "steps": BROWSER_STEPS,
                     "target_accuracy": "none"}))
                teacher.get_by_role("button", name="Train", exact=True).click(timeout=60_000)
                teacher.wait_for_function("() => location.search.includes('run=')",
                                          timeout=30_000)
                key = teacher.evaluate("new URLSearchParams(location.search).get('run')")
                student.goto(f"{student_url}/train?run={key}")
                student.get_by_text("Status: running").wait_for(timeout=60_000)  # live
                student.get_by_text("Status: finished").wait_for(timeout=120_000)
                student.locator(".js-plotly-plot").nth(1).wait_for(timeout=30_000)
            finally:
                chromium.close()
        assert teacher_log.read_text().count(f"training run {key}") == 1
        assert f"training run {key}" not in student_log.read_text()
        assert f"following run {key}" in student_log.read_text()
    finally:
        for process, _, _ in servers:
            process.terminate()
            process.wait(timeout=20)
