"""The worker pool: queue positions, isolation, stop, faults that free their slot, cleanup."""

from __future__ import annotations

import dataclasses
import time

import pytest

from stacklab import StackError
from stacklab.lab.runs.store import RunStore
from stacklab.serve.workers.pool import JobPool
from stacklab.lab.settings import TrainConfig

QUICK = TrainConfig(task="position", steps=20)
LONG = TrainConfig(task="reverse", steps=100_000)
DIVERGES = ("embedding(16, 32)\npos_embed(32)\nlinear(16)", TrainConfig(
    task="position", steps=200, lr=10.0, dtype="float16"))


@pytest.fixture
def pool(tmp_path):
    pool = JobPool(workers=1, store=RunStore(tmp_path))
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
    queued_c = pool.submit("c", None, dataclasses.replace(QUICK, seed=1))  # another run
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
    second = pool.submit("b", None, dataclasses.replace(LONG, seed=1))  # another run
    wait_until(lambda: first.status == "running" and first.view().step > 2)
    assert pool.stop("b", second.id) and second.status == "stopped"  # never started
    assert pool.stop("a", first.id)
    assert first.wait(30).status == "stopped"
    assert pool.stats()["running"] == 0


def test_a_killed_worker_process_fails_only_its_run(pool):
    """SIGKILL (as the system's out-of-memory killer sends) ends the process, not the pool."""
    import os
    import signal

    job = pool.submit("a", None, LONG)
    wait_until(lambda: job.process is not None and job.view().step > 2)
    os.kill(job.process.pid, signal.SIGKILL)
    assert job.wait(30).status == "failed"
    assert "signal 9" in job.view().error and "memory" in job.view().error
    assert pool.submit("b", None, QUICK).wait(60).status == "finished"  # a fresh process


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


def test_closed_tabs_are_forgotten_after_their_ttl(tmp_path):
    pool = JobPool(workers=1, ttl_seconds=0.2, store=RunStore(tmp_path))
    try:
        job = pool.submit("gone", None, LONG)
        wait_until(lambda: job.status == "running")
        time.sleep(0.3)
        assert pool.forget_idle() == 1
        assert job.wait(30).status == "stopped"
        assert pool.jobs_of("gone") == [] and pool.stats()["owners"] == 0
    finally:
        pool.shutdown()


def test_one_key_one_training_however_many_ask(pool):
    first = pool.submit("a", None, QUICK)
    second = pool.submit("b", None, QUICK)  # the same run: attaches
    assert second is first and first.watchers <= {"a", "b"}
    assert first.wait(60).status == "finished"
    third = pool.submit("c", None, QUICK)  # finished: at once, no training
    assert third is first and third.view("c").status == "finished"
    assert pool.stats()["trainings"] == 1
    for owner in "abc":
        assert pool.jobs_of(owner) == [first]
    assert pool.jobs_of("d") == [] and pool.get("d", first.id) is None


def test_stop_by_one_of_two_watchers_detaches_only_that_one(pool):
    job = pool.submit("a", None, LONG)
    assert pool.submit("b", None, LONG) is job
    wait_until(lambda: job.status == "running" and job.view().step > 2)
    assert pool.stop("a", job.id)
    assert job.view("a").status == "stopped"  # for a: stopped watching
    assert job.view("b").status == "running" and job.status == "running"
    time.sleep(0.2)
    assert job.status == "running" and job.view("b").watchers == 1
    assert pool.stop("b", job.id)  # the last watcher: the run stops
    assert job.wait(30).status == "stopped"
    again = pool.submit("c", None, LONG)  # a stopped run is not shared: it trains anew
    assert again is not job
    wait_until(lambda: pool.stats()["trainings"] == 2)
    pool.stop("c", again.id)


def test_a_restarted_server_serves_finished_runs_from_the_store(tmp_path):
    first = JobPool(workers=1, store=RunStore(tmp_path))
    try:
        trained = first.submit("a", None, QUICK).wait(60)
        assert trained.status == "finished"
    finally:
        first.shutdown()
    second = JobPool(workers=1, store=RunStore(tmp_path))  # a new server process
    try:
        job = second.submit("b", None, QUICK)
        assert job.status == "finished" and job.key == trained.key
        assert second.stats()["trainings"] == 0
        assert job.run.history == trained.run.history
        # the page says how long the run trained, not how long ago the store was read
        assert trained.run.seconds > 0
        assert job.view("b").seconds == pytest.approx(trained.run.seconds, abs=0.05)
        assert second.open("c", trained.key) is job
        assert second.open("c", "0" * 32) is None
    finally:
        second.shutdown()


def test_open_reattaches_to_a_live_run(pool):
    job = pool.submit("a", None, LONG)
    wait_until(lambda: job.status == "running")
    assert pool.open("a-after-reload", job.key) is job
    assert job.view("a-after-reload").status == "running" and len(job.watchers) == 2
    for owner in ("a", "a-after-reload"):
        pool.stop(owner, job.id)
    assert job.wait(30).status == "stopped"


def test_the_pattern_figure_is_drawn_at_evaluations_and_shared(pool):
    job = pool.submit("a", None, TrainConfig(task="reverse", steps=30, eval_every=10))
    assert job.wait(60).status == "finished"
    view = job.view("a")
    assert view.pattern.title == "Attention by position alone"
    assert pool.submit("b", None, TrainConfig(task="reverse", steps=30, eval_every=10)).view(
        "b").pattern is view.pattern  # one figure, not one per session
    modular = pool.submit("a", None, TrainConfig(task="modular", steps=20)).wait(60)
    assert modular.view("a").pattern.title == "Cosine similarity of the rows"


def test_a_store_that_cannot_be_written_fails_the_run_with_a_reason(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    pool = JobPool(workers=1, store=RunStore(blocked / "runs"))
    try:
        job = pool.submit("a", None, QUICK).wait(60)
        assert job.status == "failed" and "run store" in job.view().error
        assert pool.submit("b", None, QUICK) is not job  # a failed run is not shared
    finally:
        pool.shutdown()


def test_a_closed_tab_stops_watching_at_once(tmp_path):
    connected = {"a", "b"}
    pool = JobPool(workers=1, store=RunStore(tmp_path), owner_alive=lambda o: o in connected,
                   disconnect_grace_seconds=0.5)
    try:
        job = pool.submit("a", None, LONG)
        assert pool.submit("b", None, LONG) is job
        wait_until(lambda: job.status == "running")
        connected.discard("a")  # a's tab closed (or reloaded: a new session took its place)
        wait_until(lambda: job.watchers == {"b"}, timeout=10)
        assert job.status == "running"
        connected.discard("b")
        assert job.wait(15).status == "stopped"  # nobody watches: the run stops
        assert pool.jobs_of("a") == [] and pool.stats()["owners"] <= 1
    finally:
        pool.shutdown()


def test_the_server_reads_no_tensor_of_a_run_it_only_shows(pool, monkeypatch):
    """The worker draws every figure; the pool reads the run without its tensors, so a
    finished run costs the server its curves and figures, not its model and snapshots."""
    from stacklab.lab.runs.store import StoredRun

    def no_tensors(self, device="cpu"):
        raise AssertionError("the server read a run's tensors")

    monkeypatch.setattr(StoredRun, "load", no_tensors)
    job = pool.submit("a", None, QUICK)
    assert job.wait(60).status == "finished"
    assert isinstance(job.run, StoredRun) and not hasattr(job.run, "model")
    titles = [f.title for f in job.figures()]
    assert "Cosine similarity of the rows" in titles and job.view().pattern is not None
    assert job.run.checkpoint_bytes()[8:9] == b"{" and "accuracy" in job.run.metrics_text()
    # a stopped run is held in its private folder, which goes with the run
    stopped = pool.submit("b", None, LONG)
    wait_until(lambda: stopped.step > 3)
    pool.stop("b", stopped.id)
    assert stopped.wait(60).status == "stopped" and stopped.figures()
    folder = stopped.run.folder
    assert folder.name.startswith(".private-") and folder.is_dir()
    stopped.run = None
    import gc
    gc.collect()
    assert not folder.exists()


def test_a_run_stored_without_figures_is_drawn_once_from_its_tensors(tmp_path):
    import stacklab

    store = RunStore(tmp_path)
    run = stacklab.train(task="position", steps=20)
    store.save(run)  # as the library saves it: no figures.json
    pool = JobPool(workers=1, store=store)
    try:
        job = pool.open("a", run.key)
        assert job.run.figures() is None
        assert [f.title for f in job.figures()] == [f.title for f in stacklab.figures.run_figures(run)]
        assert job.view().pattern.title == stacklab.figures.pattern_figure(run).title
    finally:
        pool.shutdown()


def test_importing_the_pool_leaves_multiprocessing_as_it_is():
    """Only a pool sets up worker processes (once, however many pools): a plain import
    changes nothing in `multiprocessing` for the program that imports stacklab."""
    import subprocess
    import sys

    code = "\n".join([
        "import multiprocessing.spawn as spawn",
        "before = spawn.get_preparation_data",
        "import stacklab.serve.workers.pool",
        "assert spawn.get_preparation_data is before, 'changed by the import'",
        "from stacklab.serve.workers import transport",
        "context = transport.processes()",
        "patched = spawn.get_preparation_data",
        "assert patched is not before and patched.stacklab",
        "assert context.get_start_method() == 'forkserver'",
        "assert transport.processes() is context and spawn.get_preparation_data is patched",
    ])
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr


def test_a_stored_run_ends_for_its_watchers_before_its_figures_are_drawn(pool, caplog):
    """The worker stores a finished run, says "stored" with its final pattern figure, then
    draws the other figures: watchers see the end at once, a page asking for the figures
    waits for the worker's (and never draws them in the server)."""
    import threading

    from stacklab.lab.figures import figure_entry, figures_json, pattern_figure
    from stacklab.lab.train.trainer import train
    from stacklab.serve.workers.job import Job
    from stacklab.serve.workers.messages import Stored

    config = TrainConfig(task="reverse", steps=40, eval_every=20)
    run = train(**dataclasses.asdict(config))
    assert pool.store.save(run) is not None  # as the worker stores it: without figures
    job = Job(1, plan=pool.check(None, config), open_stored=pool.store.open)
    job.start()
    assert job.status == "running"
    final = tuple(figure_entry(pattern_figure(run)))
    job.report(Stored("finished", None, final))
    assert job.view().status == "finished" and job.run.step == 40
    assert job.view().pattern.title == final[0]  # the final model's, not drawn here
    seen = []
    asking = threading.Thread(target=lambda: seen.append(job.figures()))
    with caplog.at_level("INFO", logger="stacklab.pool"):
        asking.start()
        time.sleep(0.3)
        assert asking.is_alive() and not seen  # waiting for the worker's figures
        assert pool.store.add_figures(run.key, figures_json(run))
        job.end()
        asking.join(30)
    assert [f.key for f in seen[0]][:2] == ["training_curves", "cosine"]
    assert "in the server" not in caplog.text
    assert not pool.store.add_figures("0" * 32, {})  # not stored: nothing written


def test_the_pool_hands_over_a_finished_run_with_its_figures(pool, caplog):
    with caplog.at_level("INFO", logger="stacklab.pool"):
        job = pool.submit("a", None, QUICK)
        assert job.wait(60).status == "finished"
        figures = job.figures()
    assert figures and job.run.figures() is not None  # figures.json, drawn by the worker
    assert "in the server" not in caplog.text and job.pattern_now() is not None


def test_the_next_run_starts_while_a_stored_runs_figures_are_drawn(pool, caplog):
    """One worker: the queued run starts as soon as the first is stored, while the first
    one's process still draws its figures (at a lower priority); those still reach its
    page, drawn by that worker, never by the server."""
    first = pool.submit("a", None, TrainConfig(task="reverse", steps=60, eval_every=20))
    second = pool.submit("b", None, QUICK)
    drawn_at = []
    done = first.figures_done  # called once the first run's worker has stored its figures

    def figures_landed():
        drawn_at.append(time.monotonic())
        done()

    first.figures_done = figures_landed
    with caplog.at_level("INFO", logger="stacklab.pool"):
        assert first.wait(60).status == "finished"
        wait_until(lambda: drawn_at)
        assert second.started is not None and second.started < drawn_at[0]
        assert [f.key for f in first.figures()][:1] == ["training_curves"]
        assert second.wait(60).status == "finished"
    assert first.run.figures() is not None and "in the server" not in caplog.text
    assert f"run {first.key} finished: 60 steps in" in caplog.text  # as every run's end
    assert pool.running == 0


@pytest.fixture
def small_disk(tmp_path):
    """A folder on a file system of 64 KiB, smaller than one run: a tmpfs mounted by a
    holder process in a user and mount namespace of its own (no privilege needed), reached
    from here, and from the pool's worker processes, through the holder's /proc/PID/root."""
    import subprocess
    from pathlib import Path

    mount = tmp_path / "small"
    mount.mkdir()
    try:
        holder = subprocess.Popen(
            ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
             f'mount -t tmpfs -o size=64k tmpfs "{mount}" && echo mounted && exec sleep 600'],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except FileNotFoundError:
        pytest.skip("no unshare here to mount a small file system")
    try:
        if holder.stdout.readline().strip() != "mounted":
            pytest.skip("no user namespace here for a small file system: "
                        f"{holder.stderr.read()[:200]}")
        yield Path(f"/proc/{holder.pid}/root") / mount.relative_to("/")
    finally:
        holder.kill()
        holder.wait(10)


# more parameters than the small file system's 64 KiB holds, whatever the presets cost
TOO_BIG = "embedding(16, 128)\npos_embed(32)\nlinear(128)\nrelu()\nlinear(16)"


def test_a_full_disk_fails_the_run_with_a_reason_logged_once(small_disk, caplog):
    """The review's full disk: the run's tensors do not fit (safetensors says
    ``SafetensorError ... No space left on device``). The run fails with a `StackError`'s
    text that says the store is full and what to do, the pool logs it once, and a stopped
    run (written to a private folder) fails the same way."""
    pool = JobPool(workers=1, store=RunStore(small_disk / "runs"))
    try:
        with caplog.at_level("WARNING", logger="stacklab.pool"):
            job = pool.submit("a", TOO_BIG, QUICK).wait(60)
            stopped = pool.submit("b", TOO_BIG, TrainConfig(task="position", steps=100_000))
            wait_until(lambda: stopped.step > 3)
            pool.stop("b", stopped.id)
            assert stopped.wait(60).status == "failed"
        for failed in (job, stopped):
            error = failed.view().error
            assert failed.status == "failed" and failed.run is None
            assert error.startswith("E_BUDGET") and "the run store at" in error
            assert "is full (No space left on device)" in error and "\nfix: " in error
            assert "SafetensorError" not in error and "Traceback" not in error
            logged = [r.getMessage() for r in caplog.records if failed.key in r.getMessage()]
            assert len(logged) == 1 and "failed" in logged[0] and "is full" in logged[0]
        assert "finished, step 20" in job.view().error and "stopped, step" in stopped.view().error
        assert pool.submit("c", None, QUICK) is not job  # a failed run is not shared
    finally:
        pool.shutdown()


@pytest.mark.parametrize("damage", ['{"nodes": {"n1": [["Cosine', "[]",
                                    '{"nodes": [1], "pattern": 5}',
                                    '{"nodes": {"n1": [1]}, "pattern": [1]}'])
def test_a_damaged_figures_file_makes_the_run_damaged_never_a_page_error(tmp_path, caplog, damage):
    """The review's damaged figures.json (truncated, or JSON of the wrong shape): the run's
    view still reads (the Train page of a student link), its pattern figure is left out,
    and asking for its figures (Explore) gives a `StackError` saying the run is damaged,
    logged once however often a page asks."""
    import stacklab
    from stacklab.serve.workers.job import Job

    store = RunStore(tmp_path)
    run = stacklab.train(task="position", steps=20)
    folder = store.save(run, stacklab.figures.figures_json(run))
    (folder / "figures.json").write_text(damage)
    job = Job(1, run=store.open(run.key))
    with caplog.at_level("WARNING", logger="stacklab.pool"):
        view = job.view("a")
        assert view.status == "finished" and view.pattern is None and view.step == 20
        assert job.curves(view) is not None
        for _ in range(2):
            with pytest.raises(StackError) as caught:
                job.figures()
            assert caught.value.code == "E_DAMAGED"
            assert f"run {run.key} is damaged" in caught.value.message and caught.value.hint
    assert sum("is damaged" in r.getMessage() for r in caplog.records) == 1


# --- tables analysed for pages (issue 28): in worker processes, under a run's budgets -------

import io  # noqa: E402
import os  # noqa: E402
import threading  # noqa: E402

import numpy as np  # noqa: E402

from stacklab.lab.train.budgets import Budgets  # noqa: E402
from stacklab.serve.workers.table_jobs import TableJobs, upload_request  # noqa: E402


def npy(rows: int, width: int, seed: int = 0, dtype="float32") -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.random.default_rng(seed).normal(size=(rows, width)).astype(dtype))
    return buffer.getvalue()


def rss_bytes() -> int:
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_a_class_uploading_one_file_analyses_it_once_outside_the_server_process():
    """Three students upload the same file at once: one analysis, in a worker process (the
    server's own memory hardly moves), its figures shared; another file is a second one."""
    jobs = TableJobs(workers=2)
    data = npy(512, 1024)
    before = rss_bytes()
    got = []
    threads = [threading.Thread(target=lambda: got.append(jobs.submit(
        upload_request("wpe.npy", data)))) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert got[0] is got[1] is got[2]
    view = got[0].wait(timeout=180)
    assert str(view.status) == "finished" and view.result.shape == [512, 1024]
    assert "cosine" in [figure.key for figure in view.result.figures]
    assert jobs.analyses == 1 and got[0].request.data is None  # the upload's bytes let go
    assert rss_bytes() - before < 150 << 20  # the scores' Gram matrices lived in the worker
    other = jobs.submit(upload_request("wpe.npy", npy(64, 8, seed=1)))
    assert other is not got[0] and str(other.wait(timeout=120).status) == "finished"
    assert jobs.analyses == 2


def test_a_table_over_a_bound_is_refused_with_a_fix():
    jobs = TableJobs(workers=1)
    wide = jobs.submit(upload_request("wide.npy", npy(4, 9000))).wait(timeout=120)
    assert str(wide.status) == "failed" and wide.error.code == "E_BUDGET"
    assert "9,000 wide" in wide.error.message and "principal components" in wide.error.hint
    nan = npy(16, 8)
    nan = nan[:-4] + np.array([np.nan], dtype="float32").tobytes()
    bad = jobs.submit(upload_request("nan.npy", nan)).wait(timeout=120)
    assert bad.error.code == "E_VALUE" and "non-finite" in bad.error.message
    assert jobs.submit(upload_request("nan.npy", nan)).view().error is bad.error  # kept


def test_an_analysis_past_a_runs_memory_or_seconds_ends_with_e_budget():
    """The worker may allocate a run's memory and take a run's seconds, no more."""
    tight = TableJobs(workers=1, budgets=Budgets(activation_bytes=8 << 20, kept_bytes=0))
    memory = tight.submit(upload_request("wpe.npy", npy(1024, 1024))).wait(timeout=180)
    assert memory.error is not None and memory.error.code == "E_BUDGET", memory.error
    assert "memory" in memory.error.message
    slow = TableJobs(workers=1, budgets=Budgets(seconds=0.5))
    late = slow.submit(upload_request("wpe.npy", npy(1024, 2048))).wait(timeout=180)
    assert late.error is not None and late.error.code == "E_BUDGET"
    assert "took more than 0.5 s" in late.error.message


def test_kept_results_are_bounded_by_their_bytes():
    jobs = TableJobs(workers=1, kept_bytes=1)
    first = jobs.submit(upload_request("a.npy", npy(32, 8, seed=2)))
    first.wait(timeout=120)
    second = jobs.submit(upload_request("b.npy", npy(32, 8, seed=3)))
    second.wait(timeout=120)
    wait_until(lambda: jobs.kept() <= second.view().result.bytes)
    assert jobs.submit(upload_request("b.npy", npy(32, 8, seed=3))) is second  # the newest stays
    assert jobs.submit(upload_request("a.npy", npy(32, 8, seed=2))) is not first
