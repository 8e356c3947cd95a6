"""The run store on a real S3 server (SeaweedFS, tests/seaweed.py), issue 46: a damaged file
of any kind (``figures.json`` and ``run.json`` included) is E_DAMAGED, the store's refusal
of the credentials is said for the key asked, an unknown short key lists the bucket once
for many, and the store's errors name a meaningful place. The fixtures are
tests/test_store_s3.py's (one SeaweedFS for the module, a prefix per test)."""

from __future__ import annotations

import hashlib
import json
import random

import pytest

from stacklab import StackError
from stacklab.lab.figures import figures_json
from stacklab.lab.runs.bucket import MANIFEST, Bucket
from test_store_s3 import app_server, objects, runs, s3, url  # noqa: F401 - fixtures


def damage(url: str, ending: str, data: bytes | None = None) -> str:
    """Overwrite the one object of ``url`` whose name ends with ``ending`` with ``data``
    (by default its first half); its name."""
    bucket = Bucket(url)
    [name] = [name for name in objects(url) if name.endswith(ending)]
    path = f"{bucket.prefix}/{name}"
    whole = bucket.fs.cat_file(path)
    bucket.fs.pipe_file(path, whole[: len(whole) // 2] if data is None else data)
    return name


def test_figures_drawn_later_are_in_the_manifest_with_size_and_hash(url, runs, tmp_path,
                                                                    monkeypatch):
    run = runs[0]
    store = app_server(url, tmp_path / "a", monkeypatch)
    store.save(run)
    assert store.add_figures(run.key, figures_json(run))
    bucket = Bucket(url)
    manifest = json.loads(bucket.fs.cat_file(f"{bucket.prefix}/{run.key}/{MANIFEST}"))
    data = (tmp_path / "a" / run.key / "figures.json").read_bytes()
    entry = manifest["files"]["figures.json"]
    assert entry["bytes"] == len(data) and entry["sha256"] == hashlib.sha256(data).hexdigest()
    other = app_server(url, tmp_path / "b", monkeypatch).open(run.key)
    assert other.damage() is None and other.figures() == store.open(run.key).figures()


@pytest.mark.parametrize("ending", ["figures.json", "model.safetensors", "metrics.json"])
def test_any_damaged_file_is_e_damaged_with_its_place(url, runs, tmp_path, monkeypatch, ending):
    run = runs[0]
    store = app_server(url, tmp_path / "a", monkeypatch)
    store.save(run, figures_json(run))
    damage(url, ending)
    reader = app_server(url, tmp_path / "b", monkeypatch)
    err = reader.open(run.key).damage()
    assert err is not None and err.code == "E_DAMAGED" and ending in err.message
    assert err.place == f"{ending} of run {run.key[:12]}" and " at input" not in str(err)
    assert reader.trouble(run.key).code == "E_DAMAGED"


def test_a_damaged_run_json_is_e_damaged_not_a_missing_run(url, runs, tmp_path, monkeypatch,
                                                           caplog):
    run = runs[0]
    app_server(url, tmp_path / "a", monkeypatch).save(run)
    damage(url, "/run.json", b'{"format": "damaged')
    reader = app_server(url, tmp_path / "b", monkeypatch)
    assert reader.open(run.key) is None and reader.load(run.key) is None
    err = reader.trouble(run.key)
    assert err.code == "E_DAMAGED" and "run.json" in err.message and "in the bucket" in err.message
    assert "FileNotFoundError" not in caplog.text


def test_refused_credentials_are_said_for_the_key_asked(s3, url, runs, tmp_path, monkeypatch):
    server, _ = s3
    run = runs[0]
    app_server(url, tmp_path / "a", monkeypatch).save(run)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    store = app_server(url, tmp_path / "b", monkeypatch)
    assert store.open(run.key) is None
    err = store.trouble(run.key)
    assert err.code == "E_VALUE" and f"the run store {url} refuses the credentials" in err.message
    assert err.place == url and server.secret not in str(err)
    with pytest.raises(StackError) as raised:
        store.matching(run.key[:8])  # a short key: the listing is refused, and says so
    assert "refuses the credentials" in raised.value.message
    assert store.find(run.key[:8]) is None


def test_a_missing_run_is_no_trouble(url, tmp_path, monkeypatch):
    assert app_server(url, tmp_path / "a", monkeypatch).trouble("ab" * 16) is None


def test_unknown_short_keys_list_the_bucket_once_for_many(s3, url, runs, tmp_path, monkeypatch):
    """100 random 8-digit starts (a hostile student's links): one LIST, no GET; a run saved
    after makes the next start list again (and find it)."""
    _, counter = s3
    store = app_server(url, tmp_path / "a", monkeypatch)
    store.save(runs[0])
    other = app_server(url, tmp_path / "b", monkeypatch)
    starts = [f"{random.Random(seed).getrandbits(32):08x}" for seed in range(100)]
    before = counter.counts.copy()
    assert all(other.find(start) is None for start in starts if not runs[0].key.startswith(start))
    made = counter.counts - before
    lists = sum(n for (method, path), n in made.items() if "list-type" in path)
    gets = sum(n for (method, path), n in made.items() if method == "GET" and "list-type" not in path)
    print(f"100 unknown starts: {lists} LISTs, {gets} GETs")
    assert lists == 1 and gets == 0, made
    assert other.find(runs[0].key[:8]) == runs[0].key  # listed: known
    other.save(runs[1])  # a save here: the next start lists again
    before = counter.counts.copy()
    assert other.find(runs[1].key[:8]) == runs[1].key
    assert other.find("0" * 8) is None


def test_the_store_errors_name_their_place(url, tmp_path):
    with pytest.raises(StackError) as raised:
        Bucket("s3://key:secret@bucket/runs")
    assert raised.value.place == "STACKLAB_RUNS"
    from stacklab.lab.runs.store import RunStore
    with pytest.raises(StackError) as raised:
        RunStore(tmp_path).path("../etc")
    assert " at input" not in str(raised.value)


# -- what a person sees: the run= link of a damaged run, and of a store refusing the keys ---

PAGES = ("train", "explore", "compare")


def page_texts(base: str, links: list[str]) -> dict[str, str]:
    """Each of ``links`` (``page?query``) opened in Chromium on the server at ``base``: the
    page's text once its script has run."""
    from test_browser import CHROMIUM, FLAGS, _missing_browser

    if _missing_browser():
        pytest.skip(_missing_browser())
    from playwright.sync_api import sync_playwright

    texts = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            for link in links:
                page = browser.new_page(viewport={"width": 1300, "height": 900})
                page.goto(f"{base}/{link}")
                page.locator('[data-testid="stAlert"]').first.wait_for(timeout=60_000)
                page.wait_for_timeout(500)
                texts[link] = page.inner_text("body")
                page.close()
        finally:
            browser.close()
    return texts


def served(url: str, tmp_path, name: str, **env) -> tuple:
    """An app server (server.py) on the bucket ``url``, with a cache of its own."""
    import os

    from test_browser import start_streamlit

    return start_streamlit({**os.environ, "STACKLAB_RUNS": url, "STACKLAB_WORKERS": "1",
                            "STACKLAB_RUNS_CACHE": str(tmp_path / f"cache-{name}"), **env},
                           tmp_path / f"{name}.log")


def test_every_page_of_a_damaged_runs_link_says_e_damaged(url, runs, tmp_path, monkeypatch):
    """A bucket's run with a damaged model (the heatmap would still draw from its figures)
    and one with a damaged run.json: Train, Explore and Compare opened on their run= links
    each say E_DAMAGED, never "not on this server"."""
    model_run, record_run = runs[1], runs[2]
    store = app_server(url, tmp_path / "teacher", monkeypatch)
    store.save(model_run, figures_json(model_run))
    store.save(record_run, figures_json(record_run))
    bucket = Bucket(url)
    for run, ending in ((model_run, "model.safetensors"), (record_run, "run.json")):
        [name] = [n for n in objects(url) if n.startswith(run.key) and n.endswith(ending)]
        whole = bucket.fs.cat_file(f"{bucket.prefix}/{name}")
        bucket.fs.pipe_file(f"{bucket.prefix}/{name}", whole[: len(whole) // 2])
    process, base = served(url, tmp_path, "a")
    try:
        texts = page_texts(base, [f"{page}?run={run.key[:8]}" for page in PAGES
                                  for run in (model_run, record_run)])
    finally:
        process.terminate()
        process.wait(timeout=20)
    for link, text in texts.items():
        assert "E_DAMAGED" in text and "not on this server" not in text, (link, text[:600])
    log = (tmp_path / "a.log").read_text()
    assert "FileNotFoundError" not in log


def test_a_store_refusing_the_credentials_is_said_on_the_run_link(s3, url, runs, tmp_path,
                                                                   monkeypatch):
    server, _ = s3
    run = runs[0]
    app_server(url, tmp_path / "teacher", monkeypatch).save(run)
    process, base = served(url, tmp_path, "a", AWS_SECRET_ACCESS_KEY="not-the-secret")
    try:
        texts = page_texts(base, [f"train?run={run.key[:8]}", f"explore?run={run.key}"])
    finally:
        process.terminate()
        process.wait(timeout=20)
    for link, text in texts.items():
        assert f"the run store {url} refuses the credentials" in text, (link, text[:600])
        assert "not on this server" not in text and server.secret not in text
