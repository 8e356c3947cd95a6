"""The pool on a real local Ray instance (STACKLAB_RAY_ADDRESS): runs are named actors,
progress comes back, runs are shared by key, Stop works, a killed actor fails its run."""

from __future__ import annotations

import dataclasses
import time

import pytest

from stacklab.lab.runs.store import RunStore
from stacklab.lab.settings import TrainConfig
from stacklab.serve.workers.pool import JobPool

ray = pytest.importorskip("ray")

from stacklab.serve.workers import ray_runs  # noqa: E402 - after the skip: it imports Ray
from stacklab.serve.workers.messages import Done, decode  # noqa: E402

QUICK = TrainConfig(task="position", steps=20)
LONG = TrainConfig(task="reverse", steps=100_000, target_accuracy=None)


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    pool = JobPool(workers=2, store=RunStore(tmp_path_factory.mktemp("runs")), ray_address="auto")
    yield pool
    pool.shutdown()
    ray.shutdown()


def wait_until(predicate, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("condition not reached")


def test_a_run_trains_as_a_named_actor_and_comes_back_whole(pool):
    job = pool.submit("a", None, dataclasses.replace(LONG, seed=1))
    wait_until(lambda: job.view().step > 5)  # progress comes back while it trains
    names = [actor["name"] for actor in ray.util.list_named_actors(all_namespaces=True)]
    assert ray_runs.actor_name(job.key) == f"stacklab-run-{job.key}"  # the whole key
    assert ray_runs.actor_name(job.key) in names
    assert pool.submit("b", None, dataclasses.replace(LONG, seed=1)) is job  # shared by key
    pool.stop("a", job.id)
    assert job.view("b").status == "running"
    pool.stop("b", job.id)  # the last watcher: Stop reaches the actor
    assert job.wait(60).status == "stopped" and job.run is not None and job.run.step > 5
    done = pool.submit("c", None, QUICK).wait(120)
    assert done.status == "finished" and done.run.history and done.view().pattern is not None


def test_a_killed_actor_fails_only_its_run(pool):
    job = pool.submit("a", None, dataclasses.replace(LONG, seed=2))
    wait_until(lambda: job.view().step > 5)
    ray.kill(ray.get_actor(ray_runs.actor_name(job.key), namespace="stacklab"), no_restart=True)
    assert job.wait(60).status == "failed" and "Ray actor" in job.view().error
    calls = list(ray_runs._TRAINERS.calls.values())  # its trainer stops and is free again
    wait_until(lambda: len(ray.wait(calls, num_returns=len(calls), timeout=0)[0]) == len(calls))
    assert pool.submit("b", None, dataclasses.replace(QUICK, seed=3)).wait(120).status == "finished"


def test_two_keys_that_begin_alike_train_as_two_actors(pool):
    """Two runs whose keys share their first 12 characters each get an actor of their own
    (named after the whole key, not its beginning, the second run once failed with
    "trains another run"); both train, and both actors end."""
    alike = ("ab12cd34ef56" + "0" * 20, "ab12cd34ef56" + "1" * 20)
    started = []
    try:
        for seed, key in enumerate(alike, start=7):
            args = (None, dataclasses.replace(QUICK, seed=seed), pool.budgets,
                    str(pool.store.root), pool.store.max_bytes, None, 0)
            started.append((*ray_runs.start(key, args, f"reader-{key}"), key))
        names = [actor["name"] for actor in ray.util.list_named_actors(all_namespaces=True)]
        assert all(ray_runs.actor_name(key) in names for key in alike)
        for actor, training, key in started:
            assert training is not None  # each one trains its own run
            assert ray.get(training, timeout=120) is None
            _, messages, over, _ = ray_runs.poll(actor, f"reader-{key}", 0)
            assert over and decode(messages[-1]) == Done("finished", None, None)
    finally:
        for actor, _, key in started:
            ray_runs.release(actor, f"reader-{key}", trained=True)
    wait_until(lambda: not {ray_runs.actor_name(key) for key in alike} & {
        actor["name"] for actor in ray.util.list_named_actors(all_namespaces=True)})


def test_sweep_runs_on_ray_when_the_address_is_set(pool, tmp_path, cli, monkeypatch):
    """`stacklab sweep` with STACKLAB_RAY_ADDRESS trains its runs as Ray actors."""
    import csv

    from stacklab.serve.workers import ray_runs

    monkeypatch.setenv("STACKLAB_RAY_ADDRESS", "auto")
    started, original = [], ray_runs.start
    monkeypatch.setattr(ray_runs, "start", lambda key, *args: started.append(key) or original(key, *args))
    (tmp_path / "rope.txt").write_text('embedding(16, 32)\nattention(2, causal=true, '
                                       'position="rope")\nlinear(16)')
    code, _, err = cli("sweep", "--task", "shift", "--stack", str(tmp_path / "rope.txt"),
                       "--seeds", "5,6", "--steps", "15", "--out", str(tmp_path / "sw"))
    assert code == 0, err
    with open(tmp_path / "sw" / "results.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["status"] for r in rows] == ["finished", "finished"]
    assert sorted(started) == sorted(r["key"] for r in rows)  # each one a Ray actor


def trainers_now() -> dict:
    """This process's trainers, once warm: pid -> (when it was warm, the keys it trained,
    the keys it let go)."""
    return {pid: rest for pid, *rest
            in ray.get([trainer.ready.remote() for trainer in ray_runs.trainers()], timeout=120)}


def test_a_run_trains_in_a_trainer_warm_before_the_train_press(pool):
    """The pool's connection started warm trainers (torch imported, two steps trained):
    a run trains in one of them, whose process was warm before the run was asked for, and
    the run's own actor never imports torch."""
    assert len(trainers_now()) == pool.workers  # ready: each answered from a warm process
    asked = time.time()
    job = pool.submit("a", None, dataclasses.replace(LONG, seed=4))
    wait_until(lambda: job.view().step > 5)
    trained_it = [(pid, warmed) for pid, (warmed, trained, _) in trainers_now().items()
                  if job.key in trained]
    assert len(trained_it) == 1 and trained_it[0][1] < asked
    actor = ray.get_actor(ray_runs.actor_name(job.key), namespace=ray_runs.NAMESPACE)
    in_actor = ray.get(actor.__ray_call__.remote(
        lambda _: (__import__("os").getpid(), "torch" in __import__("sys").modules)))
    assert in_actor[0] != trained_it[0][0] and not in_actor[1]
    pool.stop("a", job.id)
    assert job.wait(60).status == "stopped"


def test_with_no_trainer_free_the_run_trains_in_its_actor(pool, monkeypatch):
    monkeypatch.setattr(ray_runs._TRAINERS, "train", lambda *args: None)  # none free
    job = pool.submit("a", None, dataclasses.replace(QUICK, seed=11))
    assert job.wait(120).status == "finished" and job.view().pattern is not None
    assert not any(job.key in trained for _, trained, _ in trainers_now().values())


def test_a_trainer_started_for_a_reader_that_follows_lets_the_run_go(pool):
    """Each start takes a free trainer before it joins the run's actor: the second start
    of one key (another app server's reader) follows, and its trainer stops at its first
    delivery; the run trains once, in the first start's trainer."""
    assert len(trainers_now()) == pool.workers
    key = "cd34" * 8
    args = (None, dataclasses.replace(QUICK, seed=12), pool.budgets, str(pool.store.root),
            pool.store.max_bytes, None, 0)
    (actor, training), (_, following) = (ray_runs.start(key, args, f"reader-{n}")
                                         for n in (1, 2))
    try:
        assert training is not None and following is None
        assert ray.get(training, timeout=120) is None
        wait_until(lambda: sorted((key in trained, key in let_go) for _, trained, let_go
                                  in trainers_now().values()) == [(False, True), (True, False)])
        _, messages, over, _ = ray_runs.poll(actor, "reader-2", 0)
        assert over and [decode(raw) for raw in messages].count(Done("finished", None, None)) == 1
    finally:
        ray_runs.release(actor, "reader-2", trained=False)
        ray_runs.release(actor, "reader-1", trained=True)
