"""The run store on a bucket (``STACKLAB_RUNS=s3://BUCKET/PREFIX``), against a real S3 server:
SeaweedFS, started here on free loopback ports with a key pair and a bucket of its own
(`seaweed.SeaweedFS`), behind a relay that counts every request (`seaweed.Counter`).

Each "app server" here is a `RunStore` with a cache folder of its own: two of them share
nothing but the bucket. One SeaweedFS serves the module; each test writes under a prefix
of its own."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest

from seaweed import BUCKET, Counter, SeaweedFS, free_port, s3_environment
from stacklab import StackError, train
from stacklab.lab.runs.bucket import MANIFEST, Bucket
from stacklab.lab.runs.store import RunStore

QUICK = dict(task="position", steps=30, eval_every=10)


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """The S3 server and its counting relay, with this process's AWS variables set to them."""
    server = SeaweedFS(tmp_path_factory.mktemp("seaweedfs"))
    server.start()
    counter = Counter(server.ports["s3"][0], server)
    with pytest.MonkeyPatch.context() as patch:
        for name, value in s3_environment(counter.endpoint, server).items():
            patch.setenv(name, value)
        try:
            yield server, counter
        finally:
            counter.close()
            server.kill()  # its data is the test's: nothing to close


@pytest.fixture(scope="module")
def runs():
    """Three small runs, trained once for the module (each its own key)."""
    return [train(**QUICK, seed=seed) for seed in (1, 2, 3)]


@pytest.fixture
def url(s3):
    return f"s3://{BUCKET}/{uuid.uuid4().hex[:10]}"  # a prefix of this test's own


def app_server(url, cache, monkeypatch, **options) -> RunStore:
    """The run store of one app server: the bucket, and a cache folder of its own."""
    monkeypatch.setenv("STACKLAB_RUNS_CACHE", str(cache))
    return RunStore(url, **options)


def objects(url: str) -> list[str]:
    bucket = Bucket(url)
    return sorted(name for path in bucket.fs.find(bucket.prefix)
                  if (name := path[len(bucket.prefix) + 1:]))  # not the prefix's own entry


def test_a_run_stored_on_one_app_server_opens_on_another(url, runs, tmp_path, monkeypatch):
    a = app_server(url, tmp_path / "a", monkeypatch)
    b = app_server(url, tmp_path / "b", monkeypatch)
    run = runs[0]
    assert run.key not in b and b.open(run.key) is None
    assert a.save(run) == tmp_path / "a" / run.key
    names = objects(url)
    [writer] = {name.split("/")[1] for name in names if name.count("/") == 2}
    assert names == sorted([f"{run.key}/{MANIFEST}"] + [
        f"{run.key}/{writer}/{name}" for name in
        ("metrics.json", "model.safetensors", "record.safetensors", "run.json")])
    assert run.key in b and b.keys() == [run.key] and b.find(run.key[:8]) == run.key
    stored = b.open(run.key)
    assert stored.damage() is None and stored.history == run.history
    loaded = b.load(run.key)
    assert loaded.final == run.final
    assert (tmp_path / "b" / run.key / "run.json").is_file()  # B's own copy now
    bucket = Bucket(url)
    manifest = bucket.fs.cat_file(f"{bucket.prefix}/{run.key}/{MANIFEST}")
    files = sum(path.stat().st_size for path in (tmp_path / "a" / run.key).iterdir())
    assert b.size() == files + len(manifest)


def test_figures_drawn_after_storing_reach_the_other_app_server(url, runs, tmp_path, monkeypatch):
    from stacklab.lab.figures import figures_json

    a = app_server(url, tmp_path / "a", monkeypatch)
    run = runs[0]
    a.save(run)
    assert a.add_figures(run.key, figures_json(run))
    b = app_server(url, tmp_path / "b", monkeypatch)
    assert b.open(run.key).figures() == a.open(run.key).figures() is not None


def test_a_hundred_students_cost_one_read_of_each_object_per_app_server(
        s3, url, runs, tmp_path, monkeypatch):
    _, counter = s3
    run = runs[1]
    app_server(url, tmp_path / "teacher", monkeypatch).save(run)
    bucket_prefix = Bucket(url).prefix
    stored = {f"{bucket_prefix}/{name}" for name in objects(url)}  # the manifest, four files
    assert len(stored) == 5
    for server in ("a", "b"):
        store = app_server(url, tmp_path / server, monkeypatch)
        before = counter.counts.copy()
        students = [threading.Thread(target=lambda: store.open(run.key).metrics())
                    for _ in range(100)]
        for student in students:
            student.start()
        for student in students:
            student.join()
        made = counter.counts - before
        assert made == {("GET", path): 1 for path in stored}, made  # nothing else
        again = counter.counts.copy()
        assert store.open(run.key).damage() is None and store.load(run.key) is not None
        assert store.find(run.key[:8]) == run.key  # a share link's short key: no listing
        assert counter.counts == again  # from this app server's copy from now on


def test_two_servers_finishing_one_key_at_once_leave_one_complete_run(
        url, runs, tmp_path, monkeypatch):
    run = runs[2]
    stores = [app_server(url, tmp_path / name, monkeypatch) for name in ("a", "b", "c", "d")]
    start = threading.Barrier(len(stores))
    saved = []

    def finish(store):
        start.wait()
        saved.append(store.save(run))

    threads = [threading.Thread(target=finish, args=(store,)) for store in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(saved) == 4 and None not in saved
    writers = {name.split("/")[1] for name in objects(url) if name.count("/") == 2}
    assert len(writers) == 1  # every other writer removed its own files
    reader = app_server(url, tmp_path / "reader", monkeypatch)
    assert reader.open(run.key).damage() is None and reader.load(run.key).final == run.final


def test_a_writer_that_loses_the_race_to_the_manifest_removes_its_files(
        url, runs, tmp_path, monkeypatch):
    """The server refuses a second manifest of a key (``If-None-Match: *``): the writer who
    checked just before the first one landed leaves the first run as it is."""
    run = runs[0]
    first = app_server(url, tmp_path / "a", monkeypatch)
    first.save(run)
    manifest = objects(url)
    late = Bucket(url)
    monkeypatch.setattr(late, "has", lambda key, answers=iter([False, True]): next(answers))
    assert late.put(run.key, tmp_path / "a" / run.key) is False
    assert objects(url) == manifest


def test_a_damaged_object_damages_that_run_alone(s3, url, runs, tmp_path, monkeypatch):
    a = app_server(url, tmp_path / "a", monkeypatch)
    damaged_run, sound_run = runs[0], runs[1]
    a.save(damaged_run), a.save(sound_run)
    bucket = Bucket(url)
    [model] = [name for name in objects(url)
               if name.startswith(damaged_run.key) and name.endswith("model.safetensors")]
    data = bucket.fs.cat_file(f"{bucket.prefix}/{model}")
    bucket.fs.pipe_file(f"{bucket.prefix}/{model}", data[: len(data) // 2])  # truncated
    b = app_server(url, tmp_path / "b", monkeypatch)
    err = b.open(damaged_run.key).damage()
    assert err.code == "E_DAMAGED" and "model.safetensors is truncated" in err.message
    with pytest.raises(StackError) as raised:
        b.open(damaged_run.key).load()
    assert raised.value.code == "E_DAMAGED"
    assert b.open(sound_run.key).damage() is None  # the other run stays
    # training the key again replaces the damaged run, for every app server
    assert b.save(damaged_run) is not None
    c = app_server(url, tmp_path / "c", monkeypatch)
    assert c.open(damaged_run.key).damage() is None
    assert c.load(damaged_run.key).final == damaged_run.final


def test_a_damaged_run_json_means_no_run(url, runs, tmp_path, monkeypatch):
    run = runs[0]
    app_server(url, tmp_path / "a", monkeypatch).save(run)
    bucket = Bucket(url)
    [record] = [name for name in objects(url) if name.endswith("/run.json")]
    bucket.fs.pipe_file(f"{bucket.prefix}/{record}", b'{"format": "damaged')
    b = app_server(url, tmp_path / "b", monkeypatch)
    assert b.open(run.key) is None and b.load(run.key) is None


def test_a_server_killed_mid_write_leaves_nothing_half_visible(s3, url, runs, tmp_path,
                                                               monkeypatch):
    server, counter = s3
    run = runs[1]
    a = app_server(url, tmp_path / "a", monkeypatch)
    counter.kill_on = re.compile(rf"^PUT .*{run.key}/{MANIFEST}$")  # after the files, before it
    try:
        with pytest.raises(StackError) as raised:
            a.save(run)
    finally:
        counter.kill_on = None
        server.start()  # the same data, after a crash
    assert "cannot write" in raised.value.message
    assert not (tmp_path / "a" / run.key).exists()  # nothing kept here either
    assert len([name for name in objects(url) if name.startswith(run.key)]) >= 1  # its files
    b = app_server(url, tmp_path / "b", monkeypatch)
    assert run.key not in b and b.open(run.key) is None and b.keys() == []
    assert a.save(run) is not None and b.open(run.key).damage() is None  # trained again: kept


def test_the_bucket_keeps_its_byte_bound_oldest_first(url, runs, tmp_path, monkeypatch):
    """STACKLAB_RUNS_MAX_BYTES is the bucket's quota for runs: past it the oldest go."""
    probe = app_server(url, tmp_path / "probe", monkeypatch)
    probe.save(runs[0])
    one = probe.size()
    probe.evict()
    store = app_server(url, tmp_path / "a", monkeypatch, max_bytes=int(one * 2.5))
    for run in runs:
        store.save(run)
    assert store.keys() == [runs[1].key, runs[2].key]  # the oldest went, from the bucket
    assert runs[0].key not in store and not (tmp_path / "a" / runs[0].key).exists()
    assert store.size() <= store.max_bytes
    other = app_server(url, tmp_path / "b", monkeypatch)
    assert other.open(runs[0].key) is None and other.open(runs[2].key) is not None
    tiny = app_server(url, tmp_path / "c", monkeypatch, max_bytes=one // 2)
    assert tiny.save(runs[0]) is None  # a run larger than the whole quota is not kept


def test_a_bucket_past_its_quota_refuses_the_run_and_keeps_nothing(s3, runs, tmp_path,
                                                                    monkeypatch):
    """SeaweedFS's own quota (``s3.bucket.quota``, enforced): the bucket turns read-only."""
    server, _ = s3
    server.fill_past_quota("stacklab-full")
    store = app_server("s3://stacklab-full/runs", tmp_path / "a", monkeypatch)
    with pytest.raises(StackError) as raised:
        store.save(runs[0])
    assert raised.value.message.startswith("the run store s3://stacklab-full/runs cannot write")
    assert "past its quota" in raised.value.hint
    assert runs[0].key not in store and not (tmp_path / "a" / runs[0].key).exists()
    assert objects("s3://stacklab-full/runs") == []  # not a file of it


def test_the_cache_of_an_app_server_is_bounded(url, runs, tmp_path, monkeypatch):
    writer = app_server(url, tmp_path / "w", monkeypatch)
    for run in runs:
        writer.save(run)
    monkeypatch.setenv("STACKLAB_RUNS_CACHE_BYTES", str(int(writer.size() / 3 * 1.5)))
    reader = app_server(url, tmp_path / "r", monkeypatch)
    for run in runs:
        assert reader.open(run.key) is not None
    cached = sorted(p.name for p in (tmp_path / "r").iterdir() if not p.name.startswith("."))
    assert cached == [runs[2].key]  # the newest stays; the bucket keeps them all
    assert reader.keys() == [run.key for run in runs]


def test_wrong_credentials_are_a_clear_error_that_never_shows_them(
        s3, url, runs, tmp_path, monkeypatch, caplog, cli):
    server, _ = s3
    run = runs[0]
    app_server(url, tmp_path / "a", monkeypatch).save(run)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret-" + server.secret[:6])
    caplog.set_level(logging.INFO)
    store = app_server(url, tmp_path / "b", monkeypatch)
    with pytest.raises(StackError) as raised:
        store.save(runs[1])
    assert "refuses the credentials" in raised.value.message
    assert store.open(run.key) is None and "refuses the credentials" in store.problem.message
    monkeypatch.setenv("STACKLAB_RUNS", url)
    code, out, err = cli("compare", run.key, "--out", str(tmp_path / "compared"))
    assert code != 0 and "refuses the credentials" in err
    shown = [raised.value.message, raised.value.hint, store.problem.message, out, err,
             caplog.text]
    for secret in (server.key, server.secret, "not-the-secret-"):
        assert not any(secret in text for text in shown), secret


def test_a_url_with_credentials_is_refused_without_repeating_them(s3):
    server, _ = s3
    with pytest.raises(StackError) as raised:
        RunStore(f"s3://{server.key}:{server.secret}@{BUCKET}/runs")
    assert "refused" in raised.value.message and "AWS_ACCESS_KEY_ID" in raised.value.hint
    assert server.key not in str(raised.value) and server.secret not in str(raised.value)


def test_a_store_that_cannot_be_reached_is_a_clear_error(url, runs, tmp_path, monkeypatch, cli):
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")  # nobody there
    store = app_server(url, tmp_path / "a", monkeypatch)
    with pytest.raises(StackError) as raised:
        store.save(runs[0])
    assert f"the run store {url} cannot" in raised.value.message
    assert "AWS_ENDPOINT_URL" in raised.value.hint
    assert store.open(runs[0].key) is None and store.keys() == []
    monkeypatch.setenv("STACKLAB_RUNS", url)
    code, _, err = cli("compare", runs[0].key, "--out", str(tmp_path / "compared"))
    assert code != 0 and f"the run store {url} cannot" in err


NOT_KEPT = """
import sys
from stacklab import TrainConfig
from stacklab.lab.runs.store import RunStore
from stacklab.serve.workers.pool import JobPool

pool = JobPool(workers=1, store=RunStore(sys.argv[1]))
try:
    job = pool.submit("a", None, TrainConfig(task="position", steps=20)).wait(120)
    print(job.status)
    print(job.view().error)
finally:
    pool.shutdown()
"""


def test_a_run_trains_but_the_page_says_it_is_not_kept(s3, url, tmp_path):
    """The pool's worker trains the run, the bucket refuses the keys: the run fails with the
    reason a page shows, and the store keeps nothing. In a process of its own, started with
    the wrong secret as an app server is: the workers come from a forkserver, which keeps
    the environment it started with (in this suite, an earlier test's)."""
    env = {**os.environ, "AWS_SECRET_ACCESS_KEY": "a wrong secret",
           "STACKLAB_RUNS_CACHE": str(tmp_path / "a")}
    done = subprocess.run([sys.executable, "-c", NOT_KEPT, url], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    status, error = done.stdout.split("\n", 1)
    assert status == "failed", error
    assert error.startswith("E_VALUE") and "the run trained (finished, step 20) but is not " \
        f"kept: the run store {url} refuses the credentials" in error, error
    assert "a wrong secret" not in done.stdout + done.stderr and s3[0].key not in error
    assert not any((tmp_path / "a").glob("[0-9a-f]*"))


def test_the_manifest_names_each_file_with_its_size_and_hash(url, runs, tmp_path, monkeypatch):
    import hashlib

    run = runs[0]
    app_server(url, tmp_path / "a", monkeypatch).save(run)
    bucket = Bucket(url)
    manifest = json.loads(bucket.fs.cat_file(f"{bucket.prefix}/{run.key}/{MANIFEST}"))
    assert manifest["key"] == run.key and set(manifest["files"]) == {
        "metrics.json", "model.safetensors", "record.safetensors", "run.json"}
    for name, entry in manifest["files"].items():
        data = (tmp_path / "a" / run.key / name).read_bytes()
        assert entry == {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


# -- app servers: two Streamlit servers in Chromium, and two app servers on a Ray head -------


def _streamlit(env: dict, log) -> tuple[subprocess.Popen, str]:
    """A real Streamlit server of the app (app.py) with ``env``; its address once it answers."""
    from test_browser import start_streamlit

    return start_streamlit(env, log, "app.py")


def test_a_student_on_another_app_server_opens_the_teachers_run_link(s3, url, tmp_path):
    """The teacher trains on server A; the student's browser opens the run= link on server
    B, which shares nothing with A but the bucket, and sees the figure."""
    from test_browser import CHROMIUM, FLAGS, SHOTS, _missing_browser

    if _missing_browser():
        pytest.skip(_missing_browser())
    from playwright.sync_api import sync_playwright

    server, _ = s3
    servers = [_streamlit({**os.environ, "STACKLAB_RUNS": url, "STACKLAB_WORKERS": "1",
                           "STACKLAB_RUNS_CACHE": str(tmp_path / f"cache-{name}")},
                          tmp_path / f"{name}.log") for name in ("a", "b")]
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            teacher = browser.new_page(viewport={"width": 1400, "height": 1000})
            teacher.goto(f"{servers[0][1]}/train?task=reverse&seed=88&steps=200")
            teacher.get_by_role("button", name="Train", exact=True).click(timeout=60_000)
            teacher.get_by_text("Status: finished").wait_for(timeout=120_000)
            teacher.wait_for_function("() => window.location.search.includes('run=')")
            key = teacher.evaluate("new URLSearchParams(window.location.search).get('run')")
            student = browser.new_page(viewport={"width": 1400, "height": 1000})
            student.goto(f"{servers[1][1]}/explore?run={key}")
            student.get_by_text("Attention by position alone").first.wait_for(timeout=60_000)
            student.locator(".js-plotly-plot").first.wait_for(timeout=30_000)
            SHOTS.mkdir(parents=True, exist_ok=True)
            student.screenshot(path=str(SHOTS / "bucket_run_link_on_server_b.png"))
            pages = teacher.content() + student.content()
            browser.close()
    finally:
        for process, _ in servers:
            process.terminate()
            process.wait(timeout=20)
    logs = "".join((tmp_path / f"{name}.log").read_text() for name in ("a", "b"))
    assert logs.count(f"training run {key}") == 1  # trained on A alone
    assert (tmp_path / "cache-b" / key / "run.json").is_file()  # B read it from the bucket
    for secret in (server.key, server.secret):
        assert secret not in pages and secret not in logs


def test_two_app_servers_on_ray_train_a_key_once_and_both_read_it_from_the_bucket(
        s3, url, tmp_path, monkeypatch):
    ray = pytest.importorskip("ray")
    from test_ray_share import ENDLESS, LIB, STEPS, AppServer, trainings, wait_until

    from stacklab.serve.workers import ray_runs

    monkeypatch.setenv("STACKLAB_RUNS_CACHE", str(tmp_path / "ray-node"))  # the actors' own
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             namespace=ray_runs.NAMESPACE)
    started = []
    try:
        path = os.pathsep.join(filter(None, [LIB, os.environ.get("PYTHONPATH")]))
        env = {**os.environ, "STACKLAB_RAY_ADDRESS": ray.get_runtime_context().gcs_address,
               "STACKLAB_RUNS": url, "STACKLAB_WORKERS": "1", "PYTHONPATH": path}
        for name in ("a", "b"):
            started.append(AppServer({**env, "STACKLAB_RUNS_CACHE": str(tmp_path / name)},
                                     tmp_path / f"server-{name}.log"))
        a, b = started
        teacher = a.ask(do="submit", owner="teacher", seed=71, steps=STEPS)
        wait_until(lambda: a.ask(do="view", id=teacher["id"])["step"] > 0)
        student = b.ask(do="open", owner="student", key=teacher["key"])
        trained, followed = a.wait(teacher, 300), b.wait(student, 300)
        assert trained["status"] == followed["status"] == "finished", (trained, followed)
        assert trainings(a) + trainings(b) == 1  # one training of the key in all
        for server in (a, b):
            late = server.ask(do="open", owner="late", key=teacher["key"])
            assert late["status"] == "finished" and late["history"] == trained["history"]
        # a stopped run: the actor's private folder reaches A through the bucket (the
        # actor's cache folder is not A's)
        endless = a.ask(do="submit", owner="teacher", seed=72, steps=ENDLESS)
        wait_until(lambda: a.ask(do="view", id=endless["id"])["step"] > 0)
        assert a.ask(do="stop", owner="teacher", id=endless["id"])["stopped"]
        stopped = a.wait(endless, 120)
        assert stopped["status"] == "stopped" and stopped["step"] > 0, stopped
        assert any((tmp_path / "ray-node").glob("*")), "the actors wrote elsewhere"
    finally:
        for server in started:
            server.close()
        ray.shutdown()
    other = RunStore(url)  # nothing in common with either server but the bucket
    assert teacher["key"] in other and other.open(teacher["key"]).damage() is None


def test_make_bench_store_section_measures_the_three_opens():
    """`make bench`'s store section starts its own SeaweedFS and opens one run= link three
    ways, at the store's level and on three real app servers (one run each here); it must
    run to the end (its figures are the bench's, not a test's)."""
    sys.path.insert(0, str(Path(__file__).parent.parent / "bench"))
    import run as bench

    found = bench.bench_store(page_opens=1)
    for level in (found, found["page"]):
        assert set(level["open_ms"]) == {"local", "s3_warm", "s3_cold"}
        assert all(ms > 0 for ms in level["open_ms"].values())
        assert set(level["targets"]) == {"s3_warm_within_1.5x", "s3_cold_within_3x"}
    assert found["run_bytes"] > 100_000 and found["page"]["opens"] == 1
    assert all(len(each) == 1 for each in found["page"]["each_open_ms"].values())


def test_a_stopped_run_reaches_its_app_server_through_the_bucket(url, tmp_path, monkeypatch):
    """A Ray actor on another machine writes a stopped run to its private folder; the app
    server that started it reads it from the bucket, and the bucket lets go of it."""
    from stacklab import TrainConfig, Trainer

    trainer = Trainer(None, TrainConfig(**QUICK))
    trainer.stop()
    stopped = trainer.run()
    worker = app_server(url, tmp_path / "worker", monkeypatch)
    folder = worker.save_private(stopped)
    assert any(name.startswith(".private/") for name in objects(url))
    server = app_server(url, tmp_path / "server", monkeypatch)
    held = server.hold_private(folder)  # the worker's path: another machine's
    assert held is not None and held.status == "stopped" and held.key == stopped.key
    assert held.folder == tmp_path / "server" / folder.name and objects(url) == []
    assert server.hold_private(tmp_path / "elsewhere") is None  # not a private folder
    del held  # the folder goes with the run
    assert not (tmp_path / "server" / folder.name).exists()
