"""The main journey in a real browser: the real Streamlit server, Debian's Chromium, Playwright.

Open a link with a stack, see the report, train, open Explore and see the heatmap and
the gradient rows. Screenshots of every page go to assets/screenshots/ (the README shows
them). Without a browser these tests skip, except in CI (STACKLAB_CI=1), where they fail.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

import pytest

ROOT = Path(__file__).parent.parent
SHOTS = ROOT / "assets" / "screenshots"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run"]
REVERSE = ("embedding(16, 64)\npos_embed(32)\nattention(4)\nlayer_norm()\nlinear(128)\nrelu()\n"
           "linear(16)")


def _missing_browser() -> str | None:
    if not Path(CHROMIUM).exists():
        return "Debian's chromium is not installed (apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed"
    return None


reason = _missing_browser()
if reason and os.environ.get("STACKLAB_CI"):
    pytest.fail(f"browser tests cannot run in CI: {reason}", pytrace=False)
pytestmark = pytest.mark.skipif(reason is not None, reason=reason or "")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


SERVER_LOG = Path(tempfile.mkdtemp(prefix="stacklab-browser-")) / "server.log"


@pytest.fixture(scope="module")
def server():
    port = _free_port()
    env = {**os.environ, "STACKLAB_WORKERS": "2",
           "STACKLAB_RUNS": str(SERVER_LOG.parent / "runs")}  # a fresh run store
    process = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.port",
         str(port), "--server.headless", "true", "--browser.gatherUsageStats", "false"],
        cwd=ROOT, env=env, stdout=SERVER_LOG.open("w"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                break
        except OSError:
            time.sleep(0.3)
    else:
        process.kill()
        raise AssertionError("the Streamlit server did not start")
    yield url
    process.terminate()
    process.wait(timeout=20)


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield chromium
        chromium.close()


def shoot(page, name: str, height: int) -> None:
    """A screenshot of the whole page: Streamlit scrolls inside the page, so grow the window."""
    page.set_viewport_size({"width": 1400, "height": height})
    page.wait_for_timeout(1200)
    page.screenshot(path=str(SHOTS / name))
    page.set_viewport_size({"width": 1400, "height": 1000})


def test_a_first_visit_straight_to_a_page_gets_the_apps_navigation(server, browser):
    """The first session of a fresh server opens a classroom link to /train: the app's own
    navigation (and its page setup) run, not Streamlit's folder navigation."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{server}/train?task=shift")
    page.get_by_role("button", name="Train", exact=True).wait_for(timeout=60_000)
    sidebar = page.locator("[data-testid='stSidebarNav']").inner_text()
    assert "Compare" in sidebar and "Build" in sidebar and "app" not in sidebar.split()
    page.close()


def test_main_journey_link_report_train_explore(server, browser):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    query = urlencode({"stack": REVERSE, "input": "B,16", "input_dtype": "int64",
                       "task": "reverse", "seq_len": 16, "steps": 400})
    page.goto(f"{server}/?{query}")
    page.get_by_text("Parameters: 30,224").first.wait_for(timeout=30_000)
    shoot(page, "build.png", 1900)

    page.get_by_role("link", name="Train").first.click()
    page.get_by_role("button", name="Train", exact=True).wait_for(timeout=20_000)
    page.get_by_role("button", name="Train", exact=True).click()
    page.get_by_text("Status: finished").wait_for(timeout=120_000)
    shoot(page, "train.png", 1500)

    page.get_by_role("link", name="Explore").first.click()
    page.get_by_text("Gradient per row").first.wait_for(timeout=60_000)
    page.locator(".js-plotly-plot").first.wait_for(timeout=30_000)
    assert page.locator(".js-plotly-plot").count() >= 5
    assert page.get_by_text("Attention by position alone").count() >= 1
    shoot(page, "explore.png", 3200)

    page.get_by_role("link", name="Catalog").first.click()
    page.get_by_text("Identity:").first.wait_for(timeout=20_000)
    shoot(page, "catalog.png", 1800)
    page.close()


def test_reference_link_shows_the_parameter_count(server, browser):
    page = browser.new_page()
    page.goto(f"{server}/?stack=embedding(500,%2016)%0Apos_embed(32)%0Alinear(4)"
              "&input=B,12&input_dtype=int64")
    page.get_by_text("Parameters: 8,580").first.wait_for(timeout=30_000)
    page.close()


def test_two_students_on_one_link_share_one_training(server, browser):
    """The teacher's link in two browser sessions: one training serves both, the heatmap
    forms on the Train page, and the run's key in the URL opens it in a third session."""
    link = f"{server}/train?" + urlencode({"task": "reverse", "seed": 77, "steps": 400})
    students = [browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
                for _ in range(2)]
    for page in students:
        page.goto(link)
        page.get_by_role("button", name="Train", exact=True).wait_for(timeout=30_000)
    for page in students:
        page.get_by_role("button", name="Train", exact=True).click()
    keys = set()
    for page in students:
        page.get_by_text("Status: finished").wait_for(timeout=120_000)
        page.get_by_text("Attention by position alone", exact=True).wait_for(timeout=30_000)
        page.locator(".js-plotly-plot").nth(1).wait_for(timeout=30_000)  # curves and heatmap
        page.wait_for_function("() => window.location.search.includes('run=')", timeout=10_000)
        keys.add(page.evaluate("new URLSearchParams(window.location.search).get('run')"))
    assert len(keys) == 1
    [key] = keys
    assert SERVER_LOG.read_text().count(f"training run {key}") == 1  # one training for both
    fresh = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    fresh.goto(f"{server}/explore?run={key}")
    fresh.get_by_text("Gradient per row").first.wait_for(timeout=60_000)
    assert fresh.get_by_text("Attention by position alone").count() >= 1
    for page in [*students, fresh]:
        page.context.close()
