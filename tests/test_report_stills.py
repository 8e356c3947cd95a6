"""report.html carries a still image of every figure (issue 44): a reader whose browser runs
no script sees the pictures, a reader whose browser runs plotly sees the charts.

The report is written from a real short run by the command line (``stacklab train --out``)
and read back as a file: each figure's section is parsed, its still decoded (an SVG that
parses, or a PNG's header), and the page is opened in Chromium with JavaScript off."""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest

from stacklab.lab.reports.stills import STILL_BYTES

PNG = b"\x89PNG\r\n\x1a\n"


class Sections(HTMLParser):
    """Each ``<section class='figure'>`` of a report: its title, its stills (``<img
    class='still'>``: id and src) and the ids of its plotly charts."""

    def __init__(self):
        super().__init__()
        self.found: list[dict] = []
        self._in_title = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "section" and attrs.get("class") == "figure":
            self.found.append({"title": "", "stills": [], "charts": [], "none": False})
        elif not self.found:
            return
        elif tag == "h2":
            self._in_title = True
        elif tag == "img" and attrs.get("class") == "still":
            self.found[-1]["stills"].append((attrs["id"], attrs["src"], attrs.get("alt")))
        elif tag == "div" and "plotly-graph-div" in (attrs.get("class") or ""):
            self.found[-1]["charts"].append(attrs["id"])

    def handle_endtag(self, tag):
        self._in_title = self._in_title and tag != "h2"

    def handle_data(self, data):
        if self._in_title:
            self.found[-1]["title"] += data
        elif self.found and "no still image of this chart" in data:
            self.found[-1]["none"] = True


def sections_of(page: str) -> list[dict]:
    parser = Sections()
    parser.feed(page)
    return parser.found


def decoded(src: str) -> tuple[str, bytes]:
    """A still's data address as ``(MIME type, bytes)``, the bytes checked to be that type."""
    found = re.fullmatch(r"data:(image/svg\+xml|image/png);base64,([A-Za-z0-9+/=]+)", src)
    assert found, src[:80]
    mime, data = found[1], base64.b64decode(found[2], validate=True)
    if mime == "image/png":
        assert data.startswith(PNG)
    else:
        root = ET.fromstring(data)  # an SVG that parses
        assert root.tag.endswith("svg") and float(root.get("width", "1").rstrip("px")) > 0
    assert len(data) <= STILL_BYTES
    return mime, data


def write_report(tmp_path: Path, **env) -> str:
    """report.html of a real 60-step ``shift`` run, written by ``stacklab train --out``."""
    out = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "stacklab", "train", "--task", "shift", "--steps", "60",
         "--out", str(out)], capture_output=True, text=True, timeout=300,
        env={**os.environ, "STACKLAB_RUNS": str(tmp_path / "runs"), **env})
    assert done.returncode == 0, done.stderr[-2000:]
    return (out / "report.html").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def kaleido_here():
    pytest.importorskip("kaleido")
    if not Path("/usr/bin/chromium").exists() and not os.environ.get("BROWSER_PATH"):
        pytest.skip("kaleido draws with a Chromium: apt-get install chromium")


@pytest.fixture(scope="module")
def report(kaleido_here, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("report")
    path = folder / "report.html"
    path.write_text(write_report(folder), encoding="utf-8")
    return path


def test_every_figure_of_a_real_report_carries_its_still(report):
    page = report.read_text(encoding="utf-8")
    sections = sections_of(page)
    assert len(sections) >= 10 and sections[0]["title"]  # the lead figure, then the groups
    for section in sections:
        assert len(section["charts"]) == 1 and len(section["stills"]) == 1, section["title"]
        still_id, src, alt = section["stills"][0]
        assert still_id == f"still-{section['charts'][0]}"  # the chart hides its own still
        assert alt == section["title"]
        mime, data = decoded(src)
        assert mime == "image/svg+xml" and b"class=\"main-svg\"" in data  # plotly's own
    # the stills are under a fifth of the page (plotly.js is most of it) and bounded
    stills = sum(len(src) for section in sections for _, src, _ in section["stills"])
    assert stills < len(page) / 5 and stills <= len(sections) * STILL_BYTES * 4 / 3


def test_without_kaleido_the_projects_own_pictures_are_the_stills(tmp_path):
    """No Chromium for kaleido (``BROWSER_PATH`` names none): the heatmaps and the training
    curves get the project's SVG drawings, and the other charts say they have none."""
    page = write_report(tmp_path, BROWSER_PATH=str(tmp_path / "no-chromium"))
    sections = {section["title"]: section for section in sections_of(page)}
    curves = sections["Training curves"]
    assert len(curves["stills"]) == 1
    mime, data = decoded(curves["stills"][0][1])
    assert mime == "image/svg+xml" and data.count(b"<polyline") == 3  # curves_svg's lines
    assert sum(bool(s["stills"]) for s in sections.values()) >= 5  # and every heatmap
    for section in sections.values():
        assert bool(section["stills"]) != section["none"], section["title"]  # one or the other
        for _, src, _ in section["stills"]:
            decoded(src)


def test_with_javascript_off_chromium_shows_the_stills_and_with_it_the_charts(report):
    from test_browser import CHROMIUM, FLAGS, _missing_browser

    if _missing_browser():
        pytest.skip(_missing_browser())
    from playwright.sync_api import sync_playwright

    count = len(sections_of(report.read_text(encoding="utf-8")))
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            still = browser.new_context(java_script_enabled=False, viewport={
                "width": 1366, "height": 900}).new_page()
            still.goto(report.as_uri())
            shown = still.locator("img.still").evaluate_all("""els => els.map(e => {
                e.scrollIntoView(); const box = e.getBoundingClientRect();
                return [e.complete && e.naturalWidth > 0, box.width > 300 && box.height > 100,
                        getComputedStyle(e).display !== 'none'];
            })""")
            assert len(shown) == count and all(all(row) for row in shown), shown
            assert still.locator(".plotly-graph-div").evaluate_all(
                "els => els.every(e => getComputedStyle(e).display === 'none')")
            live = browser.new_page(viewport={"width": 1366, "height": 900})
            live.goto(report.as_uri())
            live.wait_for_function(
                f"document.querySelectorAll('.plotly-graph-div .main-svg').length >= {count}",
                timeout=60_000)
            assert live.locator("img.still").evaluate_all(  # each chart hid its still
                "els => els.every(e => getComputedStyle(e).display === 'none')")
        finally:
            browser.close()


def test_a_figure_too_large_as_svg_is_a_png_still(kaleido_here):
    """Thousands of markers are megabytes of SVG: the still is a PNG, within the bound."""
    import numpy as np
    import plotly.graph_objects as go

    from stacklab.lab.figures.export import image
    from stacklab.lab.reports.stills import still

    points = np.random.default_rng(0).random((2, 20_000))
    figure = go.Figure(go.Scatter(x=points[0], y=points[1], mode="markers"))
    assert len(image(figure, "svg")) > STILL_BYTES
    mime, data = still(figure)
    assert mime == "image/png" and data.startswith(PNG) and len(data) <= STILL_BYTES


def test_the_apps_download_draws_its_stills_without_kaleido(kaleido_here, monkeypatch):
    """The app's report download (``plotly_stills=False``) starts no Chromium in the
    server, even where kaleido is installed: its stills are the project's own pictures."""
    import stacklab
    from stacklab.lab.reports import stills
    from stacklab.lab.reports.html import report_html

    run = stacklab.train(task="shift", steps=30, seed=0)
    monkeypatch.setattr(stills, "image", lambda *a, **k: pytest.fail("kaleido was asked"))
    sections = {s["title"]: s for s in sections_of(report_html(run, plotly_stills=False))}
    mime, data = decoded(sections["Training curves"]["stills"][0][1])
    assert mime == "image/svg+xml" and data.count(b"<polyline") == 3
    assert sum(bool(s["stills"]) for s in sections.values()) >= 5
