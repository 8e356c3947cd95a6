"""The worker pool: queue positions, isolation, stop, faults that free their slot, cleanup."""

from __future__ import annotations

import time

import pytest

from stacklab import StackError
from stacklab.serve.pool import JobPool
from stacklab.lab.trainer import TrainConfig, Trainer

QUICK = TrainConfig(task="position", steps=20)
LONG = TrainConfig(task="reverse", steps=100_000)
DIVERGES = ("embedding(16, 32)\npos_embed(32)\nlinear(16)", TrainConfig(
    task="position", steps=200, lr=10.0, dtype="float16"))


@pytest.fixture
def pool():
    pool = JobPool(workers=1)
    yield pool
    pool.shutdown()


def wait_until(predicate, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError("condition not reached")


def test_queue_positions_and_one_active_job_per_owner(pool):
    running = pool.submit("a", None, LONG)
    wait_until(lambda: running.status == "running")
    queued_b = pool.submit("b", None, QUICK)
    queued_c = pool.submit("c", None, QUICK)
    assert (queued_b.view().status, queued_b.view().position) == ("queued", 1)
    assert queued_c.view().position == 2
    # a second submit by the same owner replaces its first job
    again = pool.submit("a", None, QUICK)
    wait_until(lambda: running.status == "stopped")
    assert again.wait(60).status == "finished"
    assert queued_b.wait(60).status == queued_c.wait(60).status == "finished"
    assert [j.id for j in pool.jobs_of("a")] == [again.id, running.id]


def test_owners_cannot_see_or_stop_each_others_jobs(pool):
    job = pool.submit("alice", None, QUICK)
    assert pool.get("bob", job.id) is None and pool.jobs_of("bob") == []
    assert pool.stop("bob", job.id) is False
    assert job.wait(60).status == "finished"
    assert pool.get("alice", job.id) is job


def test_stop_a_running_and_a_queued_job(pool):
    first = pool.submit("a", None, LONG)
    second = pool.submit("b", None, LONG)
    wait_until(lambda: first.status == "running" and first.view().step > 2)
    assert pool.stop("b", second.id) and second.status == "stopped"  # never started
    assert pool.stop("a", first.id)
    assert first.wait(30).status == "stopped"
    assert pool.stats()["running"] == 0


def test_a_job_that_raises_fails_and_frees_its_worker(pool, monkeypatch):
    def explode(self):
        raise MemoryError("simulated: the worker ran out of memory")

    monkeypatch.setattr(Trainer, "run", explode)
    bad = pool.submit("a", None, QUICK).wait(30)
    assert bad.status == "failed" and "MemoryError" in bad.view().error
    monkeypatch.undo()
    assert pool.submit("b", None, QUICK).wait(60).status == "finished"


def test_a_diverging_job_says_so_and_frees_its_worker(pool):
    source, config = DIVERGES
    job = pool.submit("a", source, config).wait(60)
    view = job.view()
    assert view.status == "diverged" and "smaller lr" in view.error
    assert pool.submit("b", None, QUICK).wait(60).status == "finished"


def test_bad_requests_are_refused_before_queueing(pool):
    with pytest.raises(StackError) as info:
        pool.submit("a", "embedding(16, 32)\npos_embed(32)\nlinear(4)", QUICK)
    assert info.value.code == "E_SHAPE"
    with pytest.raises(StackError) as info:  # the app's budget is smaller than the CLI's
        pool.submit("a", "embedding(16, 8_000_000)\npos_embed(32)\nlinear(16)", QUICK)
    assert info.value.code == "E_BUDGET"
    assert pool.stats()["queued"] == 0


def test_closed_tabs_are_forgotten_after_their_ttl():
    pool = JobPool(workers=1, ttl_seconds=0.2)
    try:
        job = pool.submit("gone", None, LONG)
        wait_until(lambda: job.status == "running")
        time.sleep(0.3)
        assert pool.forget_idle() == 1
        assert job.wait(30).status == "stopped"
        assert pool.jobs_of("gone") == [] and pool.stats()["owners"] == 0
    finally:
        pool.shutdown()
