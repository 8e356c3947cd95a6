"""A run followed live through its watch endpoint (`ui.live_run`, `ui.endpoints`), on the
real server (server.py) in Debian's Chromium: the endpoint's answers (a live run, its
pictures for a laptop and a phone, an ended run, an unknown key, a hostile key); a page
that watches a run asks the endpoint and runs no script between two evaluations, its live
pictures change as the run trains, and it shows the interactive figures once the run has
ended; axe-core finds nothing on the live view at 1366 and 390 px, and a phone's live view
fits the phone; and app.py alone (no endpoint) still follows the run, by reruns.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import quote, urlencode

import pytest

from ui.live_run import INTERACTIVE  # the toggle's label
from test_browser import SERVER_LOG, SHOTS, reason, start_streamlit  # noqa: F401
from test_browser import browser, server  # noqa: F401 - fixtures
from test_phone import AXE, AXE_EXCLUDED, AXE_RUN, AXE_TAGS, assert_fits_a_phone, phone

pytestmark = pytest.mark.skipif(reason is not None, reason=reason or "")
needs_axe = pytest.mark.skipif(not AXE.exists(), reason="axe-core is not installed (make axe)")

# a run that trains for minutes (batches of 512: a quiet machine too is still training)
LONG = {"task": "reverse", "steps": 20000, "batch_size": 512, "target_accuracy": "none"}
SHORT = {"task": "reverse", "steps": 300, "target_accuracy": "none"}
WATCH = "/_stacklab/watch/run/"


def get(url: str, gzipped: bool | str = False) -> tuple[int, object, bytes]:
    """``url``'s status, headers and body; ``gzipped``: take gzip, or this Accept-Encoding."""
    encoding = "gzip" if gzipped is True else gzipped
    request = urllib.request.Request(url, headers={"Accept-Encoding": encoding} if encoding else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as err:
        return err.code, err.headers, err.read()


def training(browser, server, seed: int, size=(1366, 900), query=LONG):
    """A page on /train that pressed Train on ``query`` and shows the live view: (page,
    key); what it asks of the server is in ``page.seen`` (`watched`)."""
    page = browser.new_context(viewport={"width": size[0], "height": size[1]}).new_page()
    page.seen = watched(page)
    page.goto(f"{server}/train?" + urlencode({**query, "seed": seed}))
    page.get_by_role("button", name="Train", exact=True).click(timeout=60_000)
    page.wait_for_function("() => window.location.search.includes('run=')", timeout=60_000)
    page.locator(".live-run-curves img").wait_for(timeout=120_000)  # the first evaluation's
    return page, page.evaluate("new URLSearchParams(window.location.search).get('run')")


def watched(page) -> dict:
    """What ``page`` asks of the server once it has opened: the watch endpoint's requests
    and the websocket messages it sends (each rerun of its script is asked for with one)."""
    seen = {"endpoint": [], "sent": [], "errors": []}
    page.on("console", lambda m: seen["errors"].append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda error: seen["errors"].append(str(error)))
    page.on("request", lambda r: seen["endpoint"].append(r.url) if WATCH in r.url else None)
    page.on("websocket", lambda ws: ws.on("framesent", lambda f: seen["sent"].append(f)))
    return seen


def stop(page) -> None:
    page.get_by_role("button", name="Stop").click(timeout=30_000)
    page.get_by_text("Status: stopped").wait_for(timeout=60_000)


def test_the_endpoint_answers_a_live_run_its_pictures_and_refuses_what_is_no_run(server, browser):
    page, key = training(browser, server, seed=4101)
    try:
        status, headers, body = get(f"{server}{WATCH}{key}?kind=laptop")
        answer = json.loads(body)
        assert status == 200 and answer["live"] is True and headers["Cache-Control"] == "no-store"
        assert re.fullmatch(r"running:\d+:\d+", answer["v"]) and answer["frame"] > 0
        assert answer["text"].startswith("Status: **running** — step ")
        assert "<strong>running</strong>" in answer["head"] and "progressbar" in answer["head"]
        assert 0 < answer["every"] <= 4 and len(body) < 1500  # a small answer, no pictures
        pictures = {}
        for kind in ("laptop", "phone"):
            status, headers, packed = get(f"{server}{WATCH}{key}/pictures?kind={kind}", True)
            assert status == 200 and headers["Content-Encoding"] == "gzip"
            markup = gzip.decompress(packed).decode()
            _, plain_headers, plain = get(f"{server}{WATCH}{key}/pictures?kind={kind}")
            assert plain_headers.get("Content-Encoding") is None and plain.decode().count("<img") == 2
            _, refused_headers, refused = get(f"{server}{WATCH}{key}/pictures?kind={kind}",
                                              "gzip;q=0, br")  # refuses gzip (RFC 9110)
            assert refused_headers.get("Content-Encoding") is None and b"<img" in refused
            assert markup.count("<img") == 2 and "Training curves" in markup
            alts = re.findall(r'alt="([^"]*)"', markup)
            assert all(re.search(r"\d", alt) for alt in alts), alts  # numbers in each
            assert any("held-out accuracy ending at" in alt for alt in alts), alts
            pictures[kind] = re.findall(r'viewBox="0 0 (\d+) ', markup)  # each picture's width
            assert len(packed) < 12_000, len(packed)  # a frame's pictures, compressed
        assert pictures["phone"] and pictures["laptop"] and pictures["phone"] != pictures["laptop"]
        assert max(map(int, pictures["phone"])) <= 400  # a phone's own pictures
    finally:
        stop(page)
    answer = json.loads(get(f"{server}{WATCH}{key}")[2])
    assert answer["live"] is False and re.fullmatch(r"unknown|stopped:\d+:\d+", answer["v"])
    assert get(f"{server}{WATCH}{key}/pictures")[0] == 404  # nothing live to draw
    unknown = json.loads(get(f"{server}{WATCH}{'0' * 32}")[2])
    assert unknown == {"v": "unknown", "every": unknown["every"], "live": False}
    for hostile in ("<script>alert(1)</script>", "../../etc/passwd", "' OR 1=1 --", "a" * 5000,
                    key.upper(), key + "0"):
        status, _, body = get(f"{server}{WATCH}{quote(hostile, safe='')}")
        if status == 200:  # a path that is no route of the endpoint: the app's own page
            assert body.lstrip().startswith(b"<!") and b"root:" not in body, body[:200]
        else:  # refused (by the endpoint, or before it), saying nothing of what it was asked
            assert status in (400, 404) and b"script" not in body and b"OR" not in body, body[:200]
    page.context.close()


def test_a_watching_page_asks_the_endpoint_runs_no_script_and_switches_at_the_end(server, browser):
    page, key = training(browser, server, seed=4102, query={**LONG, "steps": 4000})
    seen = page.seen
    assert seen["sent"], "the page's websocket is not watched"  # its first script runs
    page.wait_for_timeout(1000)  # the Train click's rerun answered
    first = page.locator(".live-run-curves img").get_attribute("src")
    step = int(re.search(r"step (\d+)", page.locator(".live-run-status").inner_text())[1])
    asked, sent = len(seen["endpoint"]), len(seen["sent"])
    page.wait_for_timeout(5000)
    assert len(seen["endpoint"]) - asked >= 4, seen["endpoint"]  # it asks every 0.5-1 s
    assert len(seen["sent"]) == sent, seen["sent"][sent:sent + 3]  # and runs no script
    assert page.locator(".live-run-curves img").get_attribute("src") != first  # it trains
    later = int(re.search(r"step (\d+)", page.locator(".live-run-status").inner_text())[1])
    assert later > step
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.locator(".live-run").screenshot(path=str(SHOTS / "train_live.png"))
    page.get_by_text("Status: finished").wait_for(timeout=400_000)
    try:  # the end's rerun draws the charts (plotly's chunk loaded for the first time)
        page.locator("[class*='st-key-train_pattern_'] .js-plotly-plot").first.wait_for(
            timeout=120_000)
    except Exception:
        page.screenshot(path=str(SHOTS / "train_live_end_failed.png"), full_page=True)
        raise AssertionError("no pattern chart after the end: " + page.inner_text("body")[:1500]
                             + "\nthe console's errors: " + "\n".join(seen["errors"][-20:]))
    assert page.locator(".live-run").count() == 0
    assert page.locator("[class*='st-key-train_curves_']").count() >= 1 or \
        page.locator(".js-plotly-plot").count() >= 2  # the curves as a chart again
    assert len(seen["sent"]) > sent  # the end reran the page
    ended = json.loads(get(f"{server}{WATCH}{key}")[2])  # a finished run: nothing live
    assert ended["live"] is False and re.fullmatch(r"finished:4000:\d+", ended["v"]), ended
    # the share panel's count follows the sessions on the run: this page's, once it ended
    status, _, body = get(f"{server}/_stacklab/watch/sessions/{key}")
    assert status == 200 and json.loads(body)["v"] == "1", body
    assert get(f"{server}/_stacklab/watch/sessions/not-a-key")[0] == 404
    page.context.close()


def test_the_interactive_charts_are_redrawn_as_the_run_moves_on(server, browser):
    """With the interactive charts asked for, the status panel is Streamlit's own again and
    follows the run's endpoint (`live_run.follow_run`): it reruns when the run moves on,
    with no timer of its own, so its step counts up while the run trains."""
    page, key = training(browser, server, seed=4104)
    try:
        page.get_by_text(INTERACTIVE).click(timeout=30_000)
        page.locator("[class*='st-key-train_curves_'] .js-plotly-plot").first.wait_for(timeout=60_000)
        page.locator(".live-run").wait_for(state="detached", timeout=30_000)  # the charts now
        progress = page.locator("[data-testid='stProgress']").first

        def step() -> int:
            return int(re.search(r"(\d+) / 20000 steps", progress.inner_text())[1])

        first, asked = step(), len(page.seen["endpoint"])
        deadline = time.monotonic() + 60  # (a rerun the last ask asked for may come first)
        while (step() <= first or len(page.seen["endpoint"]) <= asked) and \
                time.monotonic() < deadline:
            page.wait_for_timeout(500)
        assert step() > first  # redrawn as the run moves on
        assert len(page.seen["endpoint"]) > asked  # and still asking the run's endpoint
    finally:
        stop(page)
        page.context.close()


@needs_axe
def test_the_live_view_passes_axe_core_and_fits_a_phone(server, browser):
    teacher, key = training(browser, server, seed=4103)
    try:
        found = {}
        for name, page in (("1366", browser.new_context(viewport={"width": 1366, "height": 768})
                            .new_page()), ("390", phone(browser, "390x844"))):
            asked = []  # not the page's resource timings: their buffer fills with assets
            page.on("request", lambda request, asked=asked: asked.append(request.url))
            page.goto(f"{server}/train?run={key[:8]}")
            page.locator(".live-run-pattern img").wait_for(timeout=120_000)
            page.get_by_text("Status: running").wait_for(timeout=30_000)
            page.add_script_tag(path=str(AXE))
            found[name] = page.evaluate(AXE_RUN, [AXE_TAGS, AXE_EXCLUDED])
            if name == "390":
                page.wait_for_timeout(2500)  # the watch asks within its interval
                assert any("/_stacklab/watch/run/" in url and "kind=phone" in url
                           for url in asked), [u for u in asked if "_stacklab" in u]
                assert_fits_a_phone(page, ".live-run-pattern img")
                assert_fits_a_phone(page, ".live-run-curves img")
                page.screenshot(path=str(SHOTS / "phone_train_live.png"))
            page.context.close()
        assert not any(found.values()), found
    finally:
        stop(teacher)
        teacher.context.close()


@pytest.fixture(scope="module")
def bare_app():
    """app.py alone, as ``streamlit run app.py`` serves it: no watch endpoint."""
    log = Path(SERVER_LOG.parent / "bare_app.log")
    env = {**os.environ, "STACKLAB_WORKERS": "1", "STACKLAB_RUNS": str(SERVER_LOG.parent / "bare")}
    process, url = start_streamlit(env, log, script="app.py")
    yield url
    process.terminate()
    process.wait(timeout=20)


def test_app_py_alone_follows_the_run_by_rerunning_at_the_interval(bare_app, browser):
    page, key = training(browser, bare_app, seed=4104)
    assert get(f"{bare_app}{WATCH}{key}")[0] != 200 or \
        not get(f"{bare_app}{WATCH}{key}")[2].startswith(b"{")  # no endpoint here
    sent = len(page.seen["sent"])
    step = int(re.search(r"step (\d+)", page.locator(".live-run-status").inner_text())[1])
    page.wait_for_timeout(5000)
    later = int(re.search(r"step (\d+)", page.locator(".live-run-status").inner_text())[1])
    assert later > step and len(page.seen["sent"]) - sent >= 2  # reruns drew it anew
    stop(page)
    page.context.close()
