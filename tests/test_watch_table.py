"""A table's analysis followed through its watch endpoint (`ui.tables.wait_for`): while a
worker scores an uploaded table, Explore's progress asks ``GET /_stacklab/watch/table/ID``
and sends the server nothing (a fragment with ``run_every=0.5`` reran twice a second), its
seconds counted up in the browser; the result shows once the analysis ends. The server,
the browser and the helpers are tests/test_browser.py's and tests/test_watch.py's.
"""

from __future__ import annotations

import io
import re
import time

import pytest

from test_browser import browser, reason, server  # noqa: F401
from test_watch import _tab, asked

pytestmark = pytest.mark.skipif(reason is not None, reason=reason or "")

ROWS, WIDTH = 2000, 1950  # 15.6 MB as float32, under the upload limit: seconds of scoring
UPLOAD = "[data-testid='stFileUploaderDropzoneInput']"


def big_table(seed: int = 7) -> bytes:
    import numpy as np

    table = io.BytesIO()
    np.save(table, np.random.default_rng(seed).normal(size=(ROWS, WIDTH)).astype("float32"))
    return table.getvalue()


def scoring_span(page, scoring) -> tuple[float, int]:
    """How long ``scoring`` (a stage's progress) stays on ``page`` from now, in seconds, and
    the websocket frames the page sent meanwhile (each rerun of its script is one)."""
    page.evaluate("() => { window.__sent = 0; }")
    started = time.monotonic()
    while scoring.count() and time.monotonic() - started < 240:
        page.wait_for_timeout(100)
    return time.monotonic() - started, page.evaluate("() => window.__sent")


def test_a_table_being_analysed_asks_its_endpoint_and_reruns_nothing(server, browser):
    page = _tab(browser)
    try:
        page.goto(f"{server}/explore")
        page.get_by_text("A real model's positions").first.click()
        page.locator(UPLOAD).set_input_files({"name": "wide.npy", "buffer": big_table(),
                                               "mimeType": "application/octet-stream"})
        scoring = page.get_by_text(f"scoring and drawing a table of {ROWS:,} rows")
        scoring.first.wait_for(timeout=60_000)
        page.wait_for_timeout(300)  # the rerun that drew this stage is over
        shown = page.locator(".table-seconds")
        asks, counted = len(page.watched), shown.inner_text() if shown.count() else None
        seconds, sent = scoring_span(page, scoring)
        assert seconds >= 1.5, f"the stage lasted {seconds:.1f} s: too short to tell, give a larger table"
        assert sent <= 1, (sent, seconds)  # the rerun that left the stage, none on a timer
        table_asks = [r.url for r in page.watched[asks:] if "/table/" in r.url]
        assert table_asks, [r.url for r in page.watched]  # asked the endpoint instead
        assert counted and re.fullmatch(r"\d+ s so far", counted), counted
        status, answer = asked(server, "table", table_asks[-1].rsplit("/", 1)[-1])
        assert status == 200 and answer["v"].startswith(("running:", "finished:"))
        assert answer["every"] >= 1
        assert asked(server, "table", "0" * 32)[1]["v"] == "ended"  # no such job here
        page.get_by_text("Cosine by distance").first.wait_for(timeout=240_000)
        assert not shown.count()  # the progress is gone
    finally:
        page.context.close()


def test_the_seconds_of_an_analysis_count_up_in_the_browser(server, browser):
    """The seconds beside the progress count up with no rerun (a fresh table: one
    analysed already is shown at once)."""
    page = _tab(browser)
    try:
        page.goto(f"{server}/explore")
        page.get_by_text("A real model's positions").first.click()
        page.locator(UPLOAD).set_input_files({"name": "wider.npy", "buffer": big_table(seed=8),
                                               "mimeType": "application/octet-stream"})
        shown = page.locator(".table-seconds")
        shown.wait_for(timeout=60_000)
        first = shown.inner_text()
        page.wait_for_timeout(1500)
        later = shown.inner_text() if shown.count() else None
        assert later is None or later != first, first  # counting, unless it ended meanwhile
        assert re.fullmatch(r"\d+ s so far", first)
    finally:
        page.context.close()
