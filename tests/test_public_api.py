"""The app's core journeys on a server that uses none of Streamlit's or plotly's private
names: ``STACKLAB_PUBLIC_API_ONLY=1`` makes both doors (`ui/private_api.py`,
`stacklab.lab.figures.plotly_private`) take every public fallback at import, as a release
that dropped the names would. An upgrade then costs speed, not function: a stack typed in a
link trains and its heatmap is drawn, a student's ``run=`` link shows the run (its
prepared charts through ``st.plotly_chart``), and a class follows its teacher's step.

The real Streamlit server and Debian's Chromium, as in tests/test_browser.py (whose helpers
these use); skipped without a browser, except in CI.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from urllib.parse import urlencode

import pytest
from test_browser import (CLASS_LINK, REVERSE, _trained, browser, open_tab,  # noqa: F401
                          present_lesson, reason, start_streamlit)

pytestmark = pytest.mark.skipif(reason is not None, reason=reason or "")

LOG = Path(tempfile.mkdtemp(prefix="stacklab-public-api-")) / "server.log"


@pytest.fixture(scope="module")
def server():
    env = {**os.environ, "STACKLAB_PUBLIC_API_ONLY": "1", "STACKLAB_WORKERS": "2",
           "STACKLAB_RUNS": str(LOG.parent / "runs")}  # a fresh run store
    process, url = start_streamlit(env, LOG)
    yield url
    process.terminate()
    process.wait(timeout=20)


def test_the_server_took_the_public_fallbacks():
    """The doors read the setting at import: every fast way is off in a process that has it."""
    import subprocess
    import sys

    code = ("from ui import private_api; from stacklab.lab.figures import plotly_private as p; "
            "print(private_api.BUILDS_CHARTS, private_api.READS_SESSIONS, p.WATCHES_CHANGES, "
            "p.check_args(False))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).parent.parent,
                         env={**os.environ, "STACKLAB_PUBLIC_API_ONLY": "1"}).stdout
    assert out.split() == ["False", "False", "False", "{}"]


def test_a_stack_in_a_link_trains_and_explore_draws_its_heatmap(server, browser):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    query = urlencode({"stack": REVERSE, "input": "B,16", "input_dtype": "int64",
                       "task": "reverse", "seq_len": 16, "steps": 400})
    page.goto(f"{server}/?{query}")
    page.get_by_text("Parameters: 30,224").first.wait_for(timeout=30_000)
    page.get_by_role("link", name="Train").first.click()
    page.get_by_role("button", name="Train", exact=True).click(timeout=20_000)
    page.get_by_text("Status: finished").wait_for(timeout=120_000)
    # the finished run's curves and pattern: prepared charts, through st.plotly_chart here
    page.locator(".js-plotly-plot").nth(1).wait_for(timeout=30_000)
    page.get_by_role("link", name="Explore").first.click()
    open_tab(page, "The pattern")
    page.get_by_text("Attention by position alone").first.wait_for(timeout=60_000)
    page.locator(".js-plotly-plot .heatmaplayer").first.wait_for(timeout=30_000)
    page.close()


def test_a_run_link_shows_the_shared_run_and_its_interactive_heatmap(server, browser):
    teacher, key = _trained(browser, server, {**CLASS_LINK, "seed": 82})
    student = browser.new_context(viewport={"width": 1366, "height": 768}).new_page()
    student.goto(f"{server}/train?run={key[:8]}")
    student.get_by_text("The shared run").first.wait_for(timeout=30_000)
    picture = student.locator("[class*='st-key-train_pattern_'] img")
    picture.wait_for(timeout=30_000)
    assert "Attention by position alone" in picture.get_attribute("alt")
    student.get_by_text("Values on hover").click()  # the prepared chart, the public way
    student.locator("[class*='st-key-train_pattern_'] .js-plotly-plot .heatmaplayer").first.wait_for(
        timeout=30_000)
    assert LOG.read_text().count(f"training run {key}") == 1
    for page in (teacher, student):
        page.context.close()


def test_a_student_follows_the_teachers_step(server, browser):
    contexts = [browser.new_context(viewport={"width": 1366, "height": 768}) for _ in range(2)]
    teacher, student = (context.new_page() for context in contexts)
    try:
        class_id = present_lesson(teacher, server)
        student.goto(f"{server}/learn?class={class_id}")
        student.get_by_text("Step 1 of 3").wait_for(timeout=30_000)
        student.get_by_text("Following the teacher").wait_for()
        teacher.get_by_role("button", name="Next step").click()
        teacher.get_by_text("Step 2 of 3").wait_for(timeout=30_000)
        student.get_by_text("Step 2 of 3").wait_for(timeout=15_000)
        assert re.search(rf"/learn\?class={class_id}$", student.url)
    finally:
        for context in contexts:
            context.close()
