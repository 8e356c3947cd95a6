"""`stacklab.train(live=True)` in a real JupyterLab, driven by Chromium as a person uses it:
the server (from the `notebook` extra) on loopback with a token, a notebook opened, its
cell run; the cell ends with one output per figure (redrawn in place while it trained, and
never more than one each meanwhile), the progress bar and the run's one-line card."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from test_browser import CHROMIUM, FLAGS, _free_port, _missing_browser

reason = _missing_browser()
try:
    import jupyterlab  # noqa: F401
except ImportError:
    reason = reason or "jupyterlab is not installed (pip install 'stacklab[notebook]')"
if reason and os.environ.get("STACKLAB_CI"):
    pytest.fail(f"the JupyterLab test cannot run in CI: {reason}", pytrace=False)
pytestmark = pytest.mark.skipif(reason is not None, reason=reason or "")

CELL = 'import stacklab\nrun = stacklab.train(task="reverse", steps=200, live=True)\nrun'
FIGURE = ".jp-OutputArea-output:has(.js-plotly-plot), .jp-OutputArea-output:has(img)"


@pytest.fixture
def jupyterlab_server(tmp_path):
    """JupyterLab on 127.0.0.1, a free port and a fresh token; stopped by its PID."""
    port, token = _free_port(), secrets.token_hex(16)
    notebook = {"cells": [{"cell_type": "code", "execution_count": None, "id": "live",
                           "metadata": {}, "outputs": [], "source": CELL}],
                "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                            "language": "python"}},
                "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "live.ipynb").write_text(json.dumps(notebook))
    env = {**os.environ, "STACKLAB_RUNS": str(tmp_path / "runs"),
           "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
           "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")}
    log = open(tmp_path / "jupyterlab.log", "wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
         f"--ServerApp.port={port}", f"--IdentityProvider.token={token}",
         f"--ServerApp.root_dir={tmp_path}", "--ServerApp.port_retries=0",
         "--LabApp.news_url=", "--LabServerApp.announcements_url=",
         *(["--allow-root"] if os.geteuid() == 0 else [])],
        cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError((tmp_path / "jupyterlab.log").read_text()[-2000:])
                time.sleep(0.5)
        yield base, token
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)  # the server and the kernels it started
            try:
                server.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait(5)
        log.close()


def test_live_figures_redraw_in_place_in_jupyterlab(jupyterlab_server):
    from playwright.sync_api import sync_playwright

    base, token = jupyterlab_server
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1400})
            page.goto(f"{base}/lab/tree/live.ipynb?token={token}", timeout=90_000)
            cell = page.locator(".jp-Notebook .jp-CodeCell").first
            cell.wait_for(timeout=90_000)
            page.get_by_text("Python 3 (ipykernel) | Idle").wait_for(timeout=90_000)
            page.locator(".lm-MenuBar-itemLabel").get_by_text("Run", exact=True).click()  # the Run menu
            page.locator(".lm-Menu-itemLabel").get_by_text("Run All Cells", exact=True).click()
            most = 0
            deadline = time.monotonic() + 60
            while not cell.locator(".stacklab-run").count():
                most = max(most, cell.locator(FIGURE).count())  # while it trains
                if time.monotonic() > deadline:
                    page.screenshot(path=os.environ.get("STACKLAB_JL_SHOT", "/dev/null"))
                    raise AssertionError("the cell did not finish: " + cell.inner_text()[-500:])
                page.wait_for_timeout(250)
            page.wait_for_timeout(1000)
            figures = cell.locator(FIGURE)
            assert figures.count() == 2, [figures.nth(i).inner_text()[:80]
                                           for i in range(figures.count())]
            assert most <= 2  # redrawn in place: never a pile of figures
            titles = cell.locator(".js-plotly-plot .gtitle").all_text_contents()
            assert titles[0] == "Training curves"
            assert "at step 200" in titles[1]  # the final figure, not the first draw's
            assert cell.locator(".stacklab-run").inner_text().count("finished") == 1
        finally:
            browser.close()
