"""One run shared by two app servers on one real local Ray instance (SPEC §20): each app
server is a process of its own with its own `JobPool`, connected to the cluster through
STACKLAB_RAY_ADDRESS and sharing one STACKLAB_RUNS. A key that trains on one is followed
live by the other (never trained twice); a stop on one leaves the run the other watches;
a dead actor fails the run on both, never hangs. The actor's stream, read by several
readers at once, is tested on its own first."""

from __future__ import annotations

import functools
import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from stacklab.serve.workers import ray_runs  # noqa: E402 - after the skip: it imports Ray
from stacklab.serve.workers.messages import (Done, Evaluated, Pattern, Step,  # noqa: E402
                                             decode, encode)
from test_ray import wait_until as wait_until_in_time  # noqa: E402

STEPS = 2000  # a run of a second or two on an idle machine (the cheap reverse preset): followed live
ENDLESS = 100_000  # a run that ends only by a stop
LIB = str(Path(ray_runs.__file__).resolve().parents[2])

# One app server: a JobPool driven by JSON lines on stdin, as the Train page drives it
# (submit, open with run=KEY, stop, and a page polling `Job.view` until the run ends).
SERVER = r'''
import json, logging, sys, threading, time
from stacklab.lab.settings import TrainConfig
from stacklab.core.errors import StackError
from stacklab.serve.classroom import server_classes
from stacklab.serve.workers.pool import JobPool

logging.basicConfig(level=logging.INFO)  # the pool's log: the server's log file
pool = JobPool(workers=1)  # STACKLAB_RAY_ADDRESS and STACKLAB_RUNS: from the environment
classes = server_classes(600.0)  # the cluster's classes, as the Learn page gets them
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

def handle_class(cmd):
    """Learn's class as a teacher's or a student's page calls it."""
    try:
        if cmd["do"] == "class_open":
            opened = classes.open(cmd["lesson"], cmd["step"])
            return {"id": opened.id, "token": opened.token, "kind": type(classes).__name__}
        if cmd["do"] == "class_move":
            view = classes.move(cmd["class"], cmd["token"], cmd["step"])
        elif cmd["do"] == "class_call":  # the votes: any method of the classes, by name
            import dataclasses
            try:
                method = getattr(classes, cmd["method"])
            except AttributeError as err:  # not a public method of Classes: not forwarded
                return {"id": None, "refused": f"AttributeError: {err}"}
            found = method(*cmd["args"])
            plain = lambda x: dataclasses.asdict(x) if dataclasses.is_dataclass(x) else x
            return {"id": None, "kept": type(classes).outlives_restart,
                    "answer": [plain(x) for x in found] if isinstance(found, tuple)
                    else plain(found)}
        else:
            view = classes.follow(cmd["class"])
    except StackError as err:
        return {"id": None, "refused": f"{err.code}: {err.message}"}
    return {"id": None, "view": None if view is None else [view.lesson, view.step, view.version]}

def handle(cmd):
    if cmd["do"].startswith("class_"):
        return handle_class(cmd)
    if cmd["do"] == "submit":
        config = TrainConfig(task="position", steps=cmd["steps"], seed=cmd["seed"],
                             eval_every=10, target_accuracy=None)
        job = pool.submit(cmd["owner"], None, config)
    elif cmd["do"] == "open":
        job = pool.open(cmd["owner"], cmd["key"])
        if job is None:
            return {"id": None}
    elif cmd["do"] == "stop":
        return {"stopped": pool.stop(cmd["owner"], cmd["id"])}
    elif cmd["do"] == "stats":
        return pool.stats()
    elif cmd["do"] == "threads":  # for a failure's message: where every thread is
        import traceback
        return {"threads": "\n".join("".join(traceback.format_stack(frame))
                                      for frame in sys._current_frames().values())}
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
            "pattern": view.pattern is not None, "seen": seen.get(job.id),
            "watchers": view.watchers}

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

    def reply(self, timeout: float = 400.0) -> dict:
        try:
            reply = self.replies.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no reply; the server's log:\n{self.log.read_text()[-3000:]}")
        assert "error" not in reply or "id" in reply, reply
        return reply

    def ask(self, **cmd) -> dict:
        self.send(**cmd)
        return self.reply()

    def wait(self, job: dict, timeout: float = 300.0) -> dict:
        """The job once it has ended (a failure shows where this server's threads were)."""
        ended = self.ask(do="wait", id=job["id"], timeout=timeout)
        if ended["status"] in ("queued", "running"):
            raise AssertionError(f"still {ended['status']} at step {ended['step']}:\n"
                                 f"{self.ask(do='threads')['threads']}\n"
                                 f"{self.log.read_text()[-3000:]}")
        return ended

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


# test_ray's wait, more patient: these runs train in a second app server's actor
wait_until = functools.partial(wait_until_in_time, timeout=300.0)


def test_every_reader_gets_the_whole_stream_with_only_the_newest_figure():
    stream = ray_runs._Stream()

    def since(cursor):
        count, sent = stream.since(cursor)
        return count, [decode(raw) for raw in sent]

    stream.send(encode(Step(1, 2.0)))
    stream.send(encode(Evaluated(2, {"step": 2}, [(1, 2.0)], ("figure 1",))))
    stream.send(encode(Step(3, 1.5)))
    first_cursor, first = since(0)
    stream.send(encode(Evaluated(4, {"step": 4}, [(3, 1.5)], ("figure 2",))))
    stream.send(encode(Done("finished", None, None)))
    assert first == [Evaluated(2, {"step": 2}, [(1, 2.0)], None), Pattern(("figure 1",)),
                     Step(3, 1.5)]
    assert since(first_cursor)[1] == [Evaluated(4, {"step": 4}, [(3, 1.5)], None),
                                      Pattern(("figure 2",)), Done("finished", None, None)]
    late = since(0)[1]  # a reader that comes late: each evaluation, the newest figure
    assert [type(m) for m in late] == [Evaluated, Step, Evaluated, Pattern, Done]
    assert late[3] == Pattern(("figure 2",))
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


def test_each_reader_hears_how_many_watch_on_the_other_app_servers():
    readers = ray_runs._Readers()
    readers.add("a", hold=True), readers.add("b", hold=True)
    assert readers.saw("a", 3) == 0  # b has not said yet
    assert readers.saw("b", 2) == 3 and readers.saw("a", 3) == 2
    readers.leave("b", reading=True)  # b let go: nobody watches there any more
    assert readers.saw("a", 3) == 0
    readers.seen["c"] = 0.0  # a reader silent for longer than STALE_SECONDS
    readers.watching["c"] = 5
    assert readers.saw("a", 3) == 0


def test_a_second_app_server_follows_a_training_run_instead_of_training_it(servers):
    a, b = servers
    before = trainings(a), trainings(b)
    teacher = a.ask(do="submit", owner="teacher", seed=21, steps=STEPS)
    wait_until(lambda: a.ask(do="view", id=teacher["id"])["step"] > 0)
    # the teacher's run= link, opened on the other app server, and a Train press there
    student = b.ask(do="open", owner="student", key=teacher["key"])
    assert student["status"] == "running"
    assert b.ask(do="submit", owner="other", seed=21, steps=STEPS)["id"] == student["id"]
    trained = a.wait(teacher, 300)
    followed = b.wait(student, 300)
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
    left = a.wait(left, 300)
    right = b.wait(right, 300)
    assert left["status"] == right["status"] == "finished", (left["error"], right["error"])
    assert trainings(a) + trainings(b) == before + 1
    assert left["history"] == right["history"]


def test_a_stop_on_one_app_server_leaves_the_run_the_other_watches(servers):
    a, b = servers
    teacher = a.ask(do="submit", owner="teacher", seed=41, steps=ENDLESS)
    wait_until(lambda: a.ask(do="view", id=teacher["id"])["step"] > 0)
    student = b.ask(do="open", owner="student", key=teacher["key"])
    # the share dialog's count: one session on each server, each server sees both
    wait_until(lambda: (a.ask(do="view", id=teacher["id"])["watchers"],
                        b.ask(do="view", id=student["id"])["watchers"]) == (2, 2))
    assert a.ask(do="stop", owner="teacher", id=teacher["id"])["stopped"]
    wait_until(lambda: b.ask(do="view", id=student["id"])["watchers"] == 1)  # the teacher left
    at_stop = b.ask(do="view", id=student["id"])["step"]
    wait_until(lambda: b.ask(do="view", id=student["id"])["step"] > at_stop + 10)  # goes on
    assert a.ask(do="view", id=teacher["id"])["status"] == "running"  # for the others
    assert a.ask(do="view", id=teacher["id"], owner="teacher")["status"] == "stopped"
    assert b.ask(do="stop", owner="student", id=student["id"])["stopped"]  # the last watcher
    trained = a.wait(teacher, 60)
    followed = b.wait(student, 60)
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
        ended = server.wait(job, 90)
        assert ended["status"] == "failed" and "Ray actor" in ended["error"], ended["error"]


def test_a_class_opened_on_one_app_server_is_followed_and_moved_from_the_other(servers):
    """With a Ray address the classes are the cluster's: students on another app server
    follow the teacher's step, and only the teacher's token moves it."""
    a, b = servers
    opened = a.ask(do="class_open", lesson="positions", step=1)
    assert opened["kind"] == "ClusterClasses"
    assert b.ask(do="class_follow", **{"class": opened["id"]})["view"] == ["positions", 1, 0]
    moved = a.ask(do="class_move", step=3, token=opened["token"], **{"class": opened["id"]})
    assert moved["view"] == ["positions", 3, 1]
    assert b.ask(do="class_follow", **{"class": opened["id"]})["view"] == ["positions", 3, 1]
    refused = b.ask(do="class_move", step=0, token="a student's guess", **{"class": opened["id"]})
    assert refused["refused"].startswith("E_VALUE: only the teacher's session moves")
    assert b.ask(do="class_follow", **{"class": "00000000"})["view"] is None
    # one generic proxy: every public method of Classes is answered by the actor, by name ...
    call = functools.partial(b.ask, do="class_call")
    assert call(method="heartbeat", args=[opened["id"], opened["token"]])["answer"] is True
    assert call(method="is_voter", args=[opened["id"], "made-up"])["answer"] is False
    # ... and nothing else: a private method is refused here, never sent to the cluster
    hidden = call(method="_teachers_locked", args=[opened["id"], opened["token"]])
    assert hidden["refused"].startswith("AttributeError: ClusterClasses forwards only public")
    assert call(method="close", args=[opened["id"], opened["token"]])["answer"] is None
    assert a.ask(do="class_follow", **{"class": opened["id"]})["view"] is None


def test_the_cluster_classes_write_no_method_of_classes_by_hand():
    """`ClusterClasses` forwards `Classes`'s public methods through `ActorProxy` alone:
    neither defines one of them, so a method added to `Classes` needs nothing here."""
    from stacklab.serve.classroom.classes import Classes
    from stacklab.serve.classroom.cluster import ActorProxy, ClusterClasses, public_methods

    forwarded = public_methods(Classes)
    assert {"open", "move", "follow", "vote", "tally", "close"} <= forwarded
    assert not {name for name in Classes.__dict__ if name.startswith("_")} & forwarded
    written = {name for cls in (ActorProxy, ClusterClasses) for name in vars(cls)}
    assert not written & forwarded


def test_votes_on_two_app_servers_add_up_on_the_classes_actor_and_outlive_a_restart(servers,
                                                                                   cluster):
    """issue 36: students on both app servers vote on the teacher's step; the projector's
    count (on the teacher's server) holds every vote; a forged one counts nothing; an app
    server started after the votes (a restarted one) reads them all from the actor."""
    a, b = servers
    opened = a.ask(do="class_open", lesson="positions", step=2)
    klass, token = opened["id"], opened["token"]

    def call(server, method, *args):
        return server.ask(do="class_call", method=method, args=[*args])

    choices = ["below 0.9", "at least 0.9"]
    call(a, "open_vote", klass, token, choices)
    # issue 42: identities the cluster's actor issued (its secret), good on either server
    students = [call(a, "issue_voter", klass, f"10.0.0.{n}")["answer"] for n in range(3)]
    for n, server in enumerate((a, b, b)):
        call(server, "follow", klass, students[n])
        assert call(server, "vote", klass, students[n], 2, choices[n > 0])["answer"] == 1
    refused = call(b, "vote", klass, students[0], 1, choices[0])  # not the current step
    assert refused["refused"].startswith("E_VALUE: step 1 is not the class's current step")
    forged = call(b, "vote", klass, "student-0009", 2, choices[0])  # made up: nothing
    assert "not a voter this server issued" in forged["refused"]
    call(b, "follow", klass, "student-0009")
    tally = call(a, "tally", klass, token)
    assert tally["kept"] and tally["answer"]["following"] == 3
    assert tally["answer"]["rounds"][0]["counts"] == [1, 2]
    # the projector's watch: one votes version for the cluster, moved by a vote on either
    counted = call(b, "votes_version", klass)["answer"]
    assert counted == call(a, "votes_version", klass)["answer"] == tally["answer"]["version"]
    call(b, "vote", klass, students[1], 2, choices[1])
    assert call(a, "votes_version", klass)["answer"] != counted
    assert call(a, "votes_version", "00000000")["answer"] is None
    assert call(b, "reveal", klass, "a student's guess")["refused"].startswith("E_VALUE")
    env, folder = cluster
    restarted = AppServer(env, folder / "server-restarted.log")
    try:
        assert call(restarted, "tally", klass, token)["answer"]["rounds"][0]["counts"] == [1, 2]
        call(restarted, "reveal", klass, token)
        assert call(restarted, "vote_again", klass, token)["answer"]["round"] == 2
        call(b, "vote", klass, students[1], 2, choices[0])
        rounds = call(a, "rounds", klass, token)["answer"]
        assert [(r["round"], r["counts"], r["revealed"]) for r in rounds] == [
            (1, [1, 2], True), (2, [1, 0], False)]
    finally:
        restarted.close()


def _loadtest():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "loadtest", Path(__file__).parent.parent / "bench" / "loadtest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_class_split_over_two_streamlit_app_servers_trains_once(cluster):
    """Past one server (issue 38): two real Streamlit app servers on the cluster, one run
    store, and a class of agent-API students on the teacher's link split between them, as a
    load balancer with sticky sessions splits a hall. One training serves both servers'
    students. `make loadtest`'s ``ray_hall300`` runs the same with 300 students."""
    env, folder = cluster
    loadtest = _loadtest()
    apps = []
    try:
        for _ in range(2):
            apps.append(loadtest.Server(20, env={"STACKLAB_RAY_ADDRESS": env["STACKLAB_RAY_ADDRESS"],
                                                 "STACKLAB_WORKERS": "1"},
                                        runs=folder / "hall-runs"))
        report = loadtest.split_crowd(apps, loadtest.link_query(seed="4343"), 6, arrival=2.0)
        assert report["statuses"] == {"finished": 6}, report
        assert report["trainings"] == 1 and report["stored_runs"] == 1
        assert report["link_to_pattern_s"]["count"] == 6
    finally:
        for app in apps:
            app.close()
