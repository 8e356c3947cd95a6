"""The main journey in a real browser: the real Streamlit server, Debian's Chromium, Playwright.

Open a link with a stack, see the report, train, open Explore and see the heatmap and
the gradient rows. Hostile links, stacks and an upload's name stay text on the rendered
page. Screenshots of every page go to assets/screenshots/ (the README shows them). Without
a browser these tests skip, except in CI (STACKLAB_CI=1), where they fail.
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
# Screenshots go to an ignored folder; `make screenshots` refreshes the README's pictures in
# assets/screenshots on purpose (STACKLAB_SCREENSHOTS), as --overwrite does for golden files.
SHOTS = Path(os.environ.get("STACKLAB_SCREENSHOTS") or ROOT / "screenshots").resolve()
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


def _models_folder(root: Path) -> Path:
    """The operator's models folder (STACKLAB_MODELS_DIR): a GPT-2-sized position table in
    a GPT-2-layout checkpoint, and a rotary (Llama) model with linear scaling."""
    import json

    import torch
    from safetensors.torch import save_file

    from stacklab.lab.reports.table_file import gpt2_like_table

    (root / "gpt2").mkdir(parents=True, exist_ok=True)
    (root / "gpt2" / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    save_file({"transformer.wpe.weight": gpt2_like_table(1024, 768),
               "transformer.wte.weight": torch.zeros(64, 768)}, root / "gpt2" / "model.safetensors")
    (root / "llama").mkdir(exist_ok=True)
    (root / "llama" / "config.json").write_text(json.dumps({
        "model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
        "max_position_embeddings": 4096, "rope_theta": 10000.0,
        "rope_scaling": {"rope_type": "linear", "factor": 2.0}}))
    save_file({"model.embed_tokens.weight": torch.zeros(4, 8)}, root / "llama" / "model.safetensors")
    return root


def start_streamlit(env: dict, log: Path, script: str = "server.py") -> tuple[subprocess.Popen, str]:
    """A real Streamlit server of the app's ``script`` with ``env``, its output in ``log``:
    the process and its address, once it answers."""
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(ROOT / script), "--server.port",
         str(port), "--server.headless", "true", "--browser.gatherUsageStats", "false"],
        cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                return process, url
        except OSError:
            time.sleep(0.3)
    process.kill()
    raise AssertionError(f"the Streamlit server did not start:\n{log.read_text()[-2000:]}")


@pytest.fixture(scope="module")
def server():
    env = {**os.environ, "STACKLAB_WORKERS": "2",
           "STACKLAB_MODELS_DIR": str(_models_folder(SERVER_LOG.parent / "models")),
           "STACKLAB_RUNS": str(SERVER_LOG.parent / "runs")}  # a fresh run store
    process, url = start_streamlit(env, SERVER_LOG)
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


def open_tab(page, group: str) -> None:
    """Open Explore's tab of the figures of ``group`` (labelled with their count)."""
    import re

    tab = page.get_by_role("tab", name=re.compile(f"^{re.escape(group)}"))
    tab.first.click(timeout=60_000)


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
    shoot(page, "build.png", 1100)

    page.get_by_role("link", name="Train").first.click()
    page.get_by_role("button", name="Train", exact=True).wait_for(timeout=20_000)
    page.get_by_role("button", name="Train", exact=True).click()
    page.get_by_text("Status: finished").wait_for(timeout=120_000)
    shoot(page, "train.png", 1500)

    page.get_by_role("link", name="Explore").first.click()
    open_tab(page, "Gradients")  # Explore groups its figures in tabs (issue 29)
    page.get_by_text("Gradient per row").first.wait_for(timeout=60_000)
    page.locator(".js-plotly-plot").first.wait_for(timeout=30_000)
    assert page.locator(".js-plotly-plot").count() >= 5
    assert page.get_by_text("Attention by position alone").count() >= 1
    open_tab(page, "The pattern")  # the first screen as a student meets it
    shoot(page, "explore.png", 2400)

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


PRE_LN = ("tok = embedding(32, 32)\nx0 = pos_embed(64)\nlayer_norm()\n"
          "h1 = attention(2, causal=true, residual=false)\nx1 = add(x0, h1)\nlayer_norm()\n"
          "linear(128)\ngelu()\nm1 = linear(32)\nx2 = add(x1, m1)\nlinear(32)")


def test_a_branching_stack_is_drawn_as_a_graph_on_build(server, browser):
    """Graphviz renders in the browser with no network: every node, and the shapes on the
    residual edges (SPEC §18)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{server}/?" + urlencode({"stack": PRE_LN, "input": "B,64",
                                         "input_dtype": "int64"}))
    page.get_by_text("Parameters: 16,832").first.wait_for(timeout=30_000)
    page.get_by_role("tab", name="Graph").click()  # the report's tabs (issue 29)
    graph = page.locator("[data-testid='stGraphVizChart'] svg")
    graph.wait_for(timeout=30_000)
    texts = graph.locator("text").evaluate_all("els => els.map(e => e.textContent)")
    assert {"x0", "h1", "x1", "m1", "x2", "add(x0, h1)", "add(x1, m1)"} <= set(texts)
    assert texts.count(" [B, 64, 32]") >= 10  # the edges carry their shapes
    shoot(page, "build_graph.png", 2300)
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
        # (the first: with st.plotly_chart's own drawing the chart's text alternative says it too)
        page.get_by_text("Attention by position alone", exact=True).first.wait_for(timeout=30_000)
        page.locator(".js-plotly-plot").nth(1).wait_for(timeout=30_000)  # curves and heatmap
        page.wait_for_function("() => window.location.search.includes('run=')", timeout=10_000)
        keys.add(page.evaluate("new URLSearchParams(window.location.search).get('run')"))
    assert len(keys) == 1
    [key] = keys
    assert SERVER_LOG.read_text().count(f"training run {key}") == 1  # one training for both
    fresh = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    fresh.goto(f"{server}/explore?run={key}")
    open_tab(fresh, "Gradients")
    fresh.get_by_text("Gradient per row").first.wait_for(timeout=60_000)
    assert fresh.get_by_text("Attention by position alone").count() >= 1
    for page in [*students, fresh]:
        page.context.close()


# Hostile text (issue 18): user text on a page must stay text in the browser, where
# Streamlit's Markdown (GitHub autolinks, KaTeX, emoji, :color[...], :material/...:) runs.
HOSTILE_LINKS = {  # a link, and the user's characters its page must show as they are
    # (a parameter the app does not know, like [L](...) below, is ignored, never shown)
    "/train?task=[L](https://example.com/l)": "[L](https://example.com/l)",
    "/?input=[L](https://example.com/l)": "[L](https://example.com/l)",
    "/train?hide=[L](https://example.com/l),x": "[L](https://example.com/l)",
    "/train?seq_len=https://example.com/s": "https://example.com/s",
    "/explore?run=www.example.com/r": "www.example.com/r",
    "/train?seed=$x^2$%20:smile:%20:red[r]%20a@example.com": "$x^2$ :smile: :red[r] a@example.com",
    "/train?steps=![I](https://example.com/i.png)": "![I](https://example.com/i.png)",
    "/train?weight_decay=:material/home:%20:blue[b]%20:smile:": ":material/home: :blue[b] :smile:",
    "/train?lr=example.com/b%20_ital_%20*emph*%20~~strk~~": "example.com/b _ital_ *emph* ~~strk~~",
    "/train?batch_size=%23%20HEADING%20**bold**%20<b>bold</b>%20%26amp;":
        "# HEADING **bold** <b>bold</b> &amp;",
    "/train?device=https://example.com/d&dtype=$x$&input_dtype=a@example.com"
    "&eval_lengths=www.example.com/e&[L](https://example.com/k)=[L](https://example.com/u)":
        ("https://example.com/d", "'$x$'", "a@example.com", "www.example.com/e"),
    "/compare?compare=[L](https://example.com/c),www.example.com/k":
        ("[L](https://example.com/c)", "www.example.com/k"),
}
HOSTILE_STACKS = [  # typed on Build; each line's error quotes the user's text
    'linear("[L](https://example.com/l) www.example.com/w")',
    'linear("$x^2$ :smile: :red[r] a@example.com")',
    'linear(":material/home: ![I](https://example.com/i.png)")',
]
HOSTILE_COMMENT = ("# c` **bold** [L](https://example.com/c) $x$ :smile: www.example.com/c "
                   "a@example.com")
HOSTILE_FILE = ("[L](https://example.com/f) www.example.com $x$ :smile: a@example.com "
                "<a href='https://example.com/p'>p</a> <b>bold</b> &amp;")

RENDERED = """() => {
  const main = document.querySelector('[data-testid="stMain"]');
  const here = (url) => URL.canParse(url, location.href)
      && new URL(url, location.href).origin === location.origin;
  const inApp = (url) => !url || url.startsWith('data:') || url.startsWith('blob:') || here(url);
  const href = (a) => a.getAttribute('href') || a.getAttribute('xlink:href') || '';
  return {
    text: main.innerText.replace(/\\s+/g, ' '),
    outside_links: [...document.querySelectorAll('a')].map(href).filter(h => !inApp(h)),
    outside_images: [...document.querySelectorAll('img, image')]
        .map(i => i.getAttribute('src') || i.getAttribute('href') || '').filter(s => !inApp(s)),
    formulas: document.querySelectorAll('.katex, .katex-display, math').length,
    formatted: [...main.querySelectorAll('h1, h2, h3, h4, h5, h6, strong, em, del, s')]
        .map(e => e.innerText),
  };
}"""


MARKS = ("example", "HEADING", "$", "smile", "bold", "ital", "emph", "strk")


def assert_shown_as_text(page, typed: str):
    """The page shows ``typed`` character for character, and nothing of it came to life:
    no link or image leaving the app, no formula, and no heading, bold, italics or
    strike-through made of it."""
    deadline = time.monotonic() + 15
    while True:
        page.wait_for_timeout(300)
        seen = page.evaluate(RENDERED)
        if typed in seen["text"] or time.monotonic() > deadline:
            break
    assert not seen["outside_links"], seen["outside_links"]
    assert not seen["outside_images"], seen["outside_images"]
    assert not seen["formulas"], "a $...$ became a formula"
    assert not [f for f in seen["formatted"] if any(mark in f for mark in MARKS)], seen["formatted"]
    assert typed in seen["text"], (typed, seen["text"][:3000])


@pytest.fixture
def tab(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    yield context.new_page()
    context.close()


@pytest.mark.parametrize("link", HOSTILE_LINKS)
def test_hostile_link_values_show_as_text(server, tab, link):
    tab.goto(server + link)
    tab.locator("[data-testid='stAlert']").first.wait_for(timeout=30_000)
    shown = HOSTILE_LINKS[link]
    for typed in (shown,) if isinstance(shown, str) else shown:
        assert_shown_as_text(tab, typed)


def test_hostile_stacks_and_comments_typed_on_build_show_as_text(server, tab):
    tab.goto(f"{server}/?input=B,4&input_dtype=float32")
    box = tab.locator("textarea").first
    box.wait_for(timeout=30_000)
    for stack in HOSTILE_STACKS:
        box.fill(f"{HOSTILE_COMMENT}\n{stack}")
        box.press("Control+Enter")
        tab.get_by_text("E_ARG").first.wait_for(timeout=20_000)
        assert_shown_as_text(tab, stack[len('linear('):-1])  # quoted in the error
        assert_shown_as_text(tab, HOSTILE_COMMENT)  # in the stack's listing
    box.fill(f"x = linear(4)  {HOSTILE_COMMENT}\nrelu()")
    box.press("Control+Enter")
    tab.get_by_text("Parameters: 20").first.wait_for(timeout=20_000)
    open_tab(tab, "Edit layer by layer")  # Build keeps the layer list a click away
    tab.wait_for_timeout(1000)
    seen = tab.evaluate(RENDERED)  # the list names the layers; nothing of the comment lives
    assert not seen["outside_links"] and not seen["outside_images"] and not seen["formulas"]
    assert not [f for f in seen["formatted"] if any(mark in f for mark in MARKS)]
    assert HOSTILE_COMMENT in box.input_value()  # the stack's one listing: the editor


def test_a_hostile_upload_name_on_explore_shows_as_text(server, tab):
    import io

    import numpy as np

    table = io.BytesIO()
    np.save(table, np.random.default_rng(0).normal(size=(16, 8)).astype("float32"))
    tab.goto(f"{server}/explore")
    tab.get_by_text("A real model's positions").first.click()
    upload = tab.locator("[data-testid='stFileUploaderDropzoneInput']")
    upload.set_input_files({"name": f"{HOSTILE_FILE}.npy", "mimeType": "application/octet-stream",
                            "buffer": table.getvalue()})
    tab.get_by_text("Cosine by distance").first.wait_for(timeout=60_000)
    tab.locator(".js-plotly-plot").first.wait_for(timeout=30_000)
    assert_shown_as_text(tab, f"rows of {HOSTILE_FILE} points")  # a figure's caption
    titles = tab.evaluate("[...document.querySelectorAll('.gtitle')].map(t => t.textContent)")
    wanted = f"Cosine similarity of {HOSTILE_FILE}'s rows".replace(" ", "")
    # plotly's, as text (a wrapped title's lines join without their spaces)
    assert wanted in [title.replace(" ", "") for title in titles], titles
    upload.set_input_files({"name": f"{HOSTILE_FILE}.npy", "mimeType": "application/octet-stream",
                            "buffer": b"not a table"})
    tab.get_by_text("E_VALUE").first.wait_for(timeout=30_000)
    assert_shown_as_text(tab, HOSTILE_FILE.rsplit("/", 1)[-1] + ".npy")  # the error names it


# The classroom (issue 20): the teacher's share panel, a student on its link, the projector.
CLASS_LINK = {"task": "reverse", "seed": 81, "steps": 400}


def _trained(browser, server, query=CLASS_LINK, size=(1400, 1000)):
    """A new browser context on /train with ``query`` whose run has finished: (page, key)."""
    page = browser.new_context(viewport={"width": size[0], "height": size[1]}).new_page()
    page.goto(f"{server}/train?" + urlencode(query))
    page.get_by_role("button", name="Train", exact=True).click(timeout=30_000)
    page.get_by_text("Status: finished").wait_for(timeout=120_000)
    page.wait_for_function("() => window.location.search.includes('run=')", timeout=10_000)
    return page, page.evaluate("new URLSearchParams(window.location.search).get('run')")


def test_a_student_opens_the_teachers_share_link_and_sees_the_run_with_nothing_to_click(
        server, browser):
    SHOTS.mkdir(parents=True, exist_ok=True)
    teacher, key = _trained(browser, server)
    teacher.get_by_role("button", name="Share with the class").click()
    # issue 30: a dialog (not a popover), readable at 1366x768 with nothing to scroll inside;
    # the class link names the run alone, by the 8 digits of its key the app shows
    teacher.set_viewport_size({"width": 1366, "height": 768})
    code = teacher.locator("[data-testid='stDialog'] [data-testid='stCode']").first
    code.wait_for(timeout=20_000)
    link = code.inner_text().strip()
    assert link.endswith(f"/train?run={key[:8]}") and len(link.split("/train", 1)[1]) <= 60, link
    qr = teacher.locator("[data-testid='stDialog'] img").first
    qr.wait_for(timeout=20_000)
    teacher.get_by_text("Sessions on this run now").wait_for(timeout=10_000)
    teacher.wait_for_timeout(800)
    box = qr.bounding_box()
    assert box["width"] >= 350 and box["y"] + box["height"] <= 768, box  # large, all on screen
    assert teacher.locator("[data-testid='stDialog']").evaluate(
        "d => [...d.querySelectorAll('*')].every(e => e.scrollHeight <= e.clientHeight + 2 || "
        "!['auto', 'scroll'].includes(getComputedStyle(e).overflowY))")  # no inner scrolling
    teacher.screenshot(path=str(SHOTS / "share_dialog.png"))
    teacher.keyboard.press("Escape")  # closed, and stays closed
    teacher.set_viewport_size({"width": 1400, "height": 1000})
    student = browser.new_context(viewport={"width": 1366, "height": 768}).new_page()
    student.goto(link)  # the teacher's link, as a student's browser gets it: no click after
    student.get_by_text("The shared run").first.wait_for(timeout=30_000)
    # the pattern figure as a still picture: on screen before plotly has loaded
    picture = student.locator("[class*='st-key-train_pattern_'] img")
    picture.wait_for(timeout=30_000)
    assert student.get_by_role("button", name="Train", exact=True).count() == 0
    student.wait_for_timeout(1500)  # the page brings the finished run's heatmap into view
    box = picture.bounding_box()
    assert 0 <= box["y"] and box["y"] + box["height"] <= 768 + 1, box  # all of it, no click
    assert picture.evaluate("img => img.complete && img.naturalWidth > 500")
    assert "Attention by position alone" in picture.get_attribute("alt")
    assert SERVER_LOG.read_text().count(f"training run {key}") == 1
    # No code element before the stack is asked for: one, even folded away, loads and runs
    # Streamlit's 1.5 MB syntax highlighter before the heatmap is drawn.
    assert student.locator("[data-testid='stCode']").count() == 0
    student.screenshot(path=str(SHOTS / "student_view.png"))
    student.get_by_text("Values on hover").click()  # the interactive chart instead
    student.locator("[class*='st-key-train_pattern_'] .js-plotly-plot .heatmaplayer").first.wait_for(
        timeout=30_000)
    assert picture.count() == 0
    student.get_by_text("Stack (from Build)").click()
    student.locator(".st-key-train_stack [data-testid='stCode']").get_by_text(
        "pos_embed(32)").wait_for(timeout=20_000)
    teacher.get_by_role("button", name="Share with the class").click()  # opened again
    teacher.get_by_text("Sessions on this run now").wait_for(timeout=10_000)
    teacher.wait_for_function(
        "() => [...document.querySelectorAll('[data-testid=stMetricValue]')]"
        ".some(m => m.innerText.trim() === '2')", timeout=15_000)  # the teacher and the student
    for page in (teacher, student):
        page.context.close()


PLOT_TEXT = """(root) => {
  const plot = document.querySelector(root + ' .js-plotly-plot');
  const size = (el) => parseFloat(getComputedStyle(el).fontSize);
  const group = (sel) => [...plot.querySelectorAll(sel)].map(size);
  const box = (el) => { const r = el.getBoundingClientRect(); return [r.left, r.right, r.top, r.bottom]; };
  return {
    ticks: group('.xtick text, .ytick text'),
    axis_titles: group('.g-xtitle text, .g-ytitle text'),
    title: group('.gtitle'),
    colorbar: group('.colorbar text'),
    map: box(plot.querySelector('.nsewdrag')),
    bar: box(plot.querySelector('.colorbar .cbfills')),
    score: size(document.querySelector(root + ' h2')),
  };
}"""


def test_the_projector_view_is_readable_from_the_back_of_the_room(server, browser):
    """view=present at 1920x1080: the pattern figure first and large, every text of the
    plot 18 px or more, the colour bar right beside the map, the score in large type."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    _, key = _trained(browser, server)
    page = browser.new_context(viewport={"width": 1920, "height": 1080}).new_page()
    page.goto(f"{server}/train?" + urlencode({**CLASS_LINK, "run": key, "view": "present"}))
    page.locator(".st-key-present .js-plotly-plot .xtick text").first.wait_for(timeout=60_000)
    page.wait_for_timeout(800)
    seen = page.evaluate(PLOT_TEXT, ".st-key-present")
    print("projector text sizes (px):", {k: sorted(set(v)) for k, v in seen.items()
                                         if isinstance(v, list) and k not in ("map", "bar")},
          "score", seen["score"], "map", seen["map"], "bar", seen["bar"])
    for name in ("ticks", "axis_titles", "title", "colorbar"):
        assert seen[name] and min(seen[name]) >= 18, (name, seen[name])
    gap = seen["bar"][0] - seen["map"][1]
    assert 0 <= gap <= 40, f"colour bar {gap:.0f} px from the map"
    assert seen["map"][1] - seen["map"][0] >= 600 and seen["map"][3] <= 1080  # large, on screen
    assert seen["score"] >= 32
    first = page.locator(".js-plotly-plot").first
    assert first.evaluate("el => !!el.closest('.st-key-present')")  # the first figure on the page
    page.screenshot(path=str(SHOTS / "projector.png"))
    page.context.close()


def test_a_finished_run_puts_its_heatmap_on_screen_at_1366x768(server, browser):
    page, _ = _trained(browser, server, {**CLASS_LINK, "seed": 82}, size=(1366, 768))
    heatmap = page.locator("[class*='st-key-train_pattern_'] .js-plotly-plot").first
    heatmap.wait_for(timeout=30_000)
    page.wait_for_timeout(1500)  # the page scrolls it into view once the run has ended
    box = heatmap.bounding_box()
    print("heatmap at 1366x768:", box)
    assert 0 <= box["y"] < 768 and box["y"] + box["height"] <= 768 + 1, box
    page.context.close()


# --- the researcher's bench (issue 21): what only shows rendered ----------------------

TITLES_OUTSIDE = """() => [...document.querySelectorAll('.js-plotly-plot')].flatMap(plot => {
  const box = plot.getBoundingClientRect(), title = plot.querySelector('.gtitle');
  if (!title || box.width === 0) return [];
  const text = title.getBoundingClientRect();
  return text.left < box.left - 1 || text.right > box.right + 1 ? [title.textContent] : [];
})"""
LOSS_TICKS = """() => [...document.querySelectorAll('.js-plotly-plot')]
  .filter(plot => (plot.querySelector('.gtitle') || {}).textContent === 'Training curves')
  .map(plot => [...plot.querySelectorAll('.subplot.xy .yaxislayer-above .ytick text')]
  .map(tick => tick.textContent))"""


@pytest.fixture(scope="module")
def rope_and_learned_on_shift():
    """RoPE and the learned table on shift (examples/encodings), evaluated at 16/32/48,
    trained here into the server's run store: their keys."""
    import stacklab
    from stacklab.lab.runs.store import RunStore

    store = RunStore(SERVER_LOG.parent / "runs")
    keys = []
    for name in ("rope", "learned"):
        run = stacklab.train((ROOT / "examples" / "encodings" / f"{name}.txt").read_text(),
                             task="shift", steps=600, eval_lengths="16,32,48")
        store.save(run)
        keys.append(run.key)
    return keys


def test_compare_renders_the_result_titles_and_loss_ticks_that_read(
        server, browser, rope_and_learned_on_shift):
    """Compare of RoPE and the learned table: the headline columns are in view, every
    figure's title stays inside its figure at four, two and one column, the loss axis
    labels read, and every run's lengths are on one plot (compare_after.png)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1400, "height": 6000})
    page.goto(f"{server}/compare?compare={','.join(rope_and_learned_on_shift)}")
    page.get_by_text("Length generalization: every run on one plot").first.wait_for(
        timeout=60_000)
    page.locator(".js-plotly-plot").nth(6).wait_for(timeout=60_000)
    page.wait_for_timeout(2500)
    grid = page.locator("[data-testid='stDataFrame']").first
    assert grid.bounding_box()["width"] <= page.locator("[data-testid='stMain']").bounding_box()[
        "width"]
    assert page.evaluate(TITLES_OUTSIDE) == []
    [ticks] = page.evaluate(LOSS_TICKS)[:1]
    assert ticks and len(ticks) <= 8, ticks
    assert sum(tick in {"3", "4", "6", "7", "8", "9"} for tick in ticks) <= 1, ticks
    assert page.get_by_text("no learned position table (pos_embed) in this stack").count() >= 1
    page.set_viewport_size({"width": 1400, "height": 1000})
    shoot(page, "compare_after.png", 2400)
    # RoPE's heatmap, half width (hide= empty: the teacher's own view, not the student's)
    page.goto(f"{server}/train?run={rope_and_learned_on_shift[0]}&hide=")
    page.get_by_text("Status: finished").first.wait_for(timeout=60_000)
    page.locator(".js-plotly-plot").nth(1).wait_for(timeout=30_000)
    page.wait_for_timeout(1500)
    assert page.evaluate(TITLES_OUTSIDE) == []
    assert page.get_by_text("Changed since run").count() == 0  # the run fixes the experiment
    page.close()


def test_xpos_kerple_fire_and_cope_each_train_on_shift_and_compare_side_by_side(
        server, browser):
    """The newer encodings as a user reaches them: a stack with attention's position= on
    shift, trained from Train in a few seconds each, then one Compare link with all four:
    each column is named by its encoding, the lengths share one plot, and every title stays
    inside its figure at 1366x768 and 1920x1080 (compare_encodings.png)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    keys = []
    for position in ("xpos", "kerple", "fire", "cope"):
        stack = (f'embedding(16, 32)\nattention(2, causal=true, position="{position}")\n'
                 "layer_norm()\nlinear(16)")
        page, key = _trained(browser, server, {"task": "shift", "stack": stack, "steps": 150,
                                               "seed": 7, "eval_lengths": "32"})
        keys.append(key)
        page.context.close()
    assert len(set(keys)) == 4
    for width, height in ((1366, 768), (1920, 1080)):
        page = browser.new_page(viewport={"width": width, "height": height})
        page.goto(f"{server}/compare?compare={','.join(keys)}")
        page.get_by_text("Length generalization: every run on one plot").first.wait_for(
            timeout=60_000)
        page.locator(".js-plotly-plot").nth(3).wait_for(timeout=60_000)
        page.wait_for_timeout(2000)
        for position in ("xpos", "kerple", "fire", "cope"):
            assert page.get_by_text(f"shift · {position} · seed 7").count() >= 1, position
        assert page.evaluate(TITLES_OUTSIDE) == []
        if width == 1920:
            page.screenshot(path=str(SHOTS / "compare_encodings.png"))
        page.close()


# Everything a page loads (issue 28): a classroom without internet must not wait on a third
# party, and a school's students are not sent to one by opening the class's server.
PAGE_RESOURCES = """() => [
  ...[...document.querySelectorAll('link[href]')].map(el => el.href),
  ...[...document.querySelectorAll('[src]')].map(el => el.src),
  ...performance.getEntriesByType('resource').map(entry => entry.name),
]"""


def test_a_students_browser_contacts_nothing_but_the_app(server, browser):
    """A student opens the class link, trains and explores: every request Chromium makes,
    and every resource the pages name (the page icon too, which a headless browser may
    not fetch), goes to the app's own address."""
    from urllib.parse import urlsplit

    from stacklab.serve.links.experiment import from_query
    from stacklab.serve.links.share import classroom_link

    experiment, _ = from_query({**CLASS_LINK, "seed": "84"})
    link = classroom_link(experiment, server)  # every control pinned, as the teacher shares it
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    requests: list[str] = []
    context.on("request", lambda request: requests.append(request.url))
    page = context.new_page()
    named: list[str] = []
    page.goto(link)
    page.get_by_role("button", name="Train", exact=True).click(timeout=60_000)
    page.get_by_text("Status: finished").wait_for(timeout=120_000)
    named += page.evaluate(PAGE_RESOURCES)
    page.get_by_role("link", name="Explore").first.click()
    open_tab(page, "Gradients")  # Explore groups its figures in tabs (issue 29)
    page.get_by_text("Gradient per row").first.wait_for(timeout=60_000)
    page.locator(".js-plotly-plot").first.wait_for(timeout=30_000)
    page.wait_for_timeout(1500)  # late requests: fonts, icons
    named += page.evaluate(PAGE_RESOURCES)
    icons = page.evaluate("[...document.querySelectorAll('link[rel~=icon]')].map(l => l.href)")
    context.close()
    app = urlsplit(server).netloc
    outside = sorted({url for url in requests + named
                      if urlsplit(url).scheme not in ("data", "blob", "about")
                      and urlsplit(url).netloc != app})
    assert requests and icons, (requests[:5], icons)
    assert outside == [], outside


def test_a_newcomer_trains_reverse_from_home_and_takes_a_lesson_step(server, browser):
    """Home's one button trains reverse and the anti-diagonal forms on the page; a lesson's
    link opens its step, which asks for a prediction, runs with one click and shows the
    figure that matters, its number checked, why, and what to try next."""
    page = browser.new_page(viewport={"width": 1366, "height": 768})
    page.goto(server)
    page.get_by_role("button", name="Train reverse now").click()
    page.get_by_text("Finished in").wait_for(timeout=120_000)
    page.get_by_text("Attention by position alone").first.wait_for(timeout=30_000)
    page.locator(".js-plotly-plot").first.wait_for(timeout=30_000)
    assert "?" not in page.url  # Home's address carries no experiment
    page.goto(f"{server}/learn?lesson=table-patterns&step=1")
    page.get_by_text("Step 1 of 3").wait_for(timeout=30_000)
    run = page.get_by_role("button", name="Run the experiment")
    assert run.is_disabled()  # predict first
    page.get_by_text("at least 0.6").click()
    run.click()
    page.get_by_text("the expected outcome held").wait_for(timeout=120_000)
    page.get_by_text("Why.").first.wait_for()
    page.get_by_text("Try this next.").first.wait_for()
    page.locator(".js-plotly-plot").first.wait_for(timeout=30_000)
    assert page.get_by_text("partner attention", exact=False).count() >= 1
    assert "lesson=table-patterns&step=1" in page.url


# --- Explore that leads, figures that read, Build calm (issue 29) ----------------------

# Every pair of title boxes that meet, and every title box that meets a tick label or an
# axis title, in the plots on screen (a hidden tab's plots have no boxes): a figure's
# title, its subplot titles (annotations) and its labels, measured as Chromium drew them.
OVERLAPS = """() => [...document.querySelectorAll('.js-plotly-plot')].flatMap(plot => {
  const boxes = sel => [...plot.querySelectorAll(sel)]
    .map(el => ({text: el.textContent, r: el.getBoundingClientRect()}))
    .filter(box => box.r.width > 0 && box.text.trim());
  const titles = boxes('.gtitle, .annotation-text');
  const labels = boxes('.xtick text, .ytick text, .g-xtitle text, .g-ytitle text');
  const meet = (a, b) => a.r.left < b.r.right - 1 && b.r.left < a.r.right - 1
    && a.r.top < b.r.bottom - 1 && b.r.top < a.r.bottom - 1;
  const found = [];
  titles.forEach((a, i) => titles.slice(i + 1).forEach(b => {
    if (meet(a, b)) found.push([a.text, b.text]); }));
  titles.forEach(a => labels.forEach(b => { if (meet(a, b)) found.push([a.text, b.text]); }));
  return found;
})"""


@pytest.fixture(scope="module")
def induction_run():
    """The induction example (two layers of four heads: every head score in its title),
    trained into the server's run store: the run."""
    import stacklab
    from stacklab.lab.runs.store import RunStore

    run = stacklab.train((ROOT / "examples" / "induction" / "learned.txt").read_text(),
                         task="induction", steps=300)
    RunStore(SERVER_LOG.parent / "runs").save(run)
    return run


@pytest.mark.parametrize("size", [(1366, 768), (1920, 1080)])
def test_explore_leads_with_the_pattern_and_head_titles_never_overlap(
        server, browser, induction_run, size):
    """Explore opens on the task's own figure and its number, the rest in tabs; in the
    head grid and the head scores no title meets another title or a tick label."""
    page = browser.new_page(viewport={"width": size[0], "height": size[1]})
    page.goto(f"{server}/explore?run={induction_run.key}")
    lead = page.locator("[data-testid='stHeading']", has_text="Head scores").first
    lead.wait_for(timeout=60_000)
    tabs = page.get_by_role("tab")
    assert lead.bounding_box()["y"] < tabs.first.bounding_box()["y"]  # the task's figure first
    assert "largest induction score" in page.locator("[data-testid='stMain']").inner_text()
    open_tab(page, "Attention by layer and head")
    page.get_by_text("Attention of every head on one held-out sequence").first.wait_for(
        timeout=30_000)
    page.wait_for_timeout(2000)
    assert page.evaluate(OVERLAPS) == []
    shown = page.locator(".js-plotly-plot .annotation-text").evaluate_all(
        "els => els.map(e => e.textContent)")
    assert any(text.startswith("n3 (layer 2) head 0previous token") for text in shown), shown
    page.close()


def test_the_head_titles_never_overlap_in_report_html(browser, induction_run, tmp_path):
    """report.html, at the widths of a laptop and a desktop (its column is at most 980 px)."""
    from stacklab.lab.reports.html import report_html

    report = tmp_path / "report.html"
    report.write_text(report_html(induction_run), encoding="utf-8")
    for width in (1366, 1920, 800):
        page = browser.new_page(viewport={"width": width, "height": 900})
        page.goto(report.as_uri())
        page.get_by_text("Head scores").first.wait_for(timeout=30_000)
        page.wait_for_timeout(1500)
        assert page.evaluate(OVERLAPS) == [], width
        page.close()


FOCUSED_BORDER = """() => {
  const box = document.querySelector("[data-testid='stTextArea'] textarea");
  box.focus();
  return getComputedStyle(box.closest("[data-testid='stTextAreaRootElement']")).borderTopColor;
}"""


def test_build_at_1366_shows_the_whole_report_and_a_calm_focus(server, browser):
    """Build at 1366 x 768: the report's every line inside its box (wrapped, never cut),
    the compute dtype reads "float32" whole, and the focused editor's border is the app's
    blue, not Streamlit's red."""
    page = browser.new_page(viewport={"width": 1366, "height": 768})
    page.goto(f"{server}/?" + urlencode({"stack": REVERSE, "input": "B,16",
                                         "input_dtype": "int64"}))
    page.get_by_text("Parameters: 30,224").first.wait_for(timeout=30_000)
    page.wait_for_timeout(1000)
    code = page.locator("[data-testid='stCode'] pre", has_text="Network:").first
    assert code.evaluate("el => el.scrollWidth <= el.clientWidth + 1")  # nothing cut
    assert "input_dtype=int64" in code.inner_text()
    dtype = page.locator("input[aria-label='Compute dtype']")
    assert dtype.input_value() == "float32"
    assert dtype.evaluate("el => el.scrollWidth <= el.clientWidth + 1")  # shown whole
    assert page.get_by_text("Press Ctrl+Enter, or click outside the box").count() == 1
    page.evaluate(FOCUSED_BORDER)
    page.wait_for_timeout(400)  # the border's colour eases in
    border = page.evaluate(FOCUSED_BORDER)
    assert border == "rgb(37, 99, 235)", border  # primaryColor, #2563eb
    page.close()


# Explore's real-model section (issues 28 and 31): screenshots to look at, not committed
UPLOAD_SHOTS = Path(tempfile.gettempdir()) / "uploads-shots"


def test_explore_draws_a_servers_model_and_says_why_an_upload_is_refused(server, browser):
    """A 1024x768 GPT-2-layout table from the operator's folder is drawn by a worker (with
    its downloads, and no stale run text under it), a rotary model gives the offset figure,
    and a checkpoint that is not a table is refused on the page with the line that
    extracts the table."""
    UPLOAD_SHOTS.mkdir(parents=True, exist_ok=True)
    context = browser.new_context(viewport={"width": 1366, "height": 768})
    page = context.new_page()
    page.goto(f"{server}/explore")
    page.get_by_text("A real model's positions").first.click()
    page.get_by_text("a model on this server", exact=True).first.click()
    page.get_by_text("Table of shape [1024, 768]").first.wait_for(timeout=180_000)
    page.locator(".js-plotly-plot").first.wait_for(timeout=60_000)
    body = page.inner_text("body")
    assert "transformer.wpe.weight-scores.json" in body and "transformer.wpe.weight-report.html" in body
    assert "layout gpt2" in body and "Train one first" not in body
    assert str(SERVER_LOG.parent) not in body  # the server's path is not shown
    page.wait_for_timeout(1500)
    page.screenshot(path=str(UPLOAD_SHOTS / "explore-real-model.png"))
    page.screenshot(path=str(UPLOAD_SHOTS / "explore-real-model-full.png"), full_page=True)
    page.locator("[data-testid=stSelectbox]").first.click()
    page.get_by_role("option", name="llama (models folder)").click()
    page.get_by_text("What an offset alone gives (rotary and ALiBi)").first.wait_for(timeout=120_000)
    page.wait_for_timeout(1500)
    page.screenshot(path=str(UPLOAD_SHOTS / "explore-rotary.png"))
    page.get_by_text("an uploaded table", exact=True).first.click()
    page.locator("[data-testid='stFileUploaderDropzoneInput']").set_input_files(
        {"name": "pytorch_model.bin", "mimeType": "application/octet-stream",
         "buffer": b"\x80\x04 a pickled checkpoint"})
    alert = page.locator("[data-testid=stAlert]").filter(has_text="neither .safetensors nor .npy")
    alert.first.wait_for(timeout=60_000)
    assert "load_file('model.safetensors')['wpe.weight']" in page.inner_text("body")
    page.wait_for_timeout(800)
    page.screenshot(path=str(UPLOAD_SHOTS / "explore-refused.png"))
    context.close()


# --- following the teacher (issue 30, item 4) ----------------------------------------------


def present_lesson(teacher, server: str, lesson: str = "positions") -> str:
    """The teacher's page presents step 1 of ``lesson`` to a class: the class's id, read
    from the class link the page shows."""
    import re

    teacher.goto(f"{server}/learn?lesson={lesson}&step=1")
    teacher.get_by_role("button", name="Present this lesson to a class").click()
    link = teacher.locator("code").filter(has_text="class=").first
    link.wait_for(timeout=30_000)
    return re.search(r"/learn\?class=([0-9a-f]{8})$", link.inner_text().strip()).group(1)


def test_three_students_follow_the_teachers_step_within_one_poll(server, browser):
    """A teacher presents a lesson; three students open its class link (the QR code's
    content) in their own browsers; the teacher moves through three steps and every
    student's page shows step 3 within the poll interval, plus a small margin."""
    from parts.classroom.room import POLL_SECONDS

    margin = 1.5  # the rerun that draws the new step, on two shared cores
    contexts = [browser.new_context(viewport={"width": 1366, "height": 768}) for _ in range(4)]
    teacher, *students = (context.new_page() for context in contexts)
    try:
        class_id = present_lesson(teacher, server)
        teacher.locator("img").first.wait_for(timeout=30_000)  # the QR code, drawn after the link
        assert "view=present" in teacher.url
        for page in students:
            page.goto(f"{server}/learn?class={class_id}")
            page.get_by_text("Step 1 of 3").wait_for(timeout=30_000)
            page.get_by_text("Following the teacher").wait_for()
        for number in (2, 3):
            teacher.get_by_role("button", name="Next step").click()
            teacher.get_by_text(f"Step {number} of 3").wait_for(timeout=30_000)
        moved = time.monotonic()
        for page in students:
            left = POLL_SECONDS + margin - (time.monotonic() - moved)
            page.get_by_text("Step 3 of 3").wait_for(timeout=max(left, 0.05) * 1000)
        waited = time.monotonic() - moved
        assert waited <= POLL_SECONDS + margin, waited
        assert all(page.url.endswith(f"/learn?class={class_id}") for page in students)
        students[0].wait_for_timeout(800)
        SHOTS.mkdir(parents=True, exist_ok=True)
        students[0].screenshot(path=str(SHOTS / "class_follow.png"))
        teacher.set_viewport_size({"width": 1920, "height": 1080})
        teacher.wait_for_timeout(800)
        teacher.screenshot(path=str(SHOTS / "class_teacher_1920.png"))
    finally:
        for context in contexts:
            context.close()


# --- the class's votes (issue 36): peer instruction on the projector ----------------------


def test_three_students_vote_the_projector_counts_reveals_and_shows_two_rounds(server, browser):
    """A teacher presents a lesson at 1920x1080; three students (one on a phone, 390x844)
    pick their predictions on the class link; the projector counts them (no answer yet);
    Reveal runs the step, marks the choice its run supports and says the run's number
    beside the vote; after Vote again the two rounds stand side by side."""
    import re

    sizes = [(1920, 1080), (1366, 768), (1366, 768), (390, 844)]
    contexts = [browser.new_context(viewport={"width": w, "height": h}) for w, h in sizes]
    teacher, *students = (context.new_page() for context in contexts)
    bars = teacher.locator(".votes[data-round]")
    try:
        class_id = present_lesson(teacher, server)
        bars.first.wait_for(timeout=30_000)
        for page, choice in zip(students, ("at most 0.3", "at most 0.3", "above 0.3")):
            page.goto(f"{server}/learn?class={class_id}")
            page.get_by_text("Following the teacher").wait_for(timeout=30_000)
            page.get_by_text(choice, exact=True).click()
            page.get_by_text("Your vote is in (round 1)").wait_for(timeout=30_000)
            assert "voted of" not in page.inner_text("body")  # a student sees their own only
        teacher.locator(".voted").filter(has_text="3 voted of 3 following").wait_for(timeout=30_000)
        assert bars.locator("[data-choice='at most 0.3'] .count").inner_text() == "2 votes"
        assert "the run" not in bars.inner_text() and "expected outcome" not in teacher.inner_text("body")
        SHOTS.mkdir(parents=True, exist_ok=True)
        teacher.screenshot(path=str(SHOTS / "class_votes_1920.png"))
        students[2].screenshot(path=str(SHOTS / "class_vote_phone.png"))
        teacher.get_by_role("button", name="Reveal the answer").click()
        supported = bars.locator(".supported")
        supported.first.wait_for(timeout=180_000)  # the step's run trains, then it is marked
        assert "at most 0.3 ✓ the run" in supported.inner_text()
        said = bars.locator(".run").inner_text()
        assert re.fullmatch(r"2 of 3 predicted at most 0\.3; the run: 0\.\d\d", said), said
        teacher.get_by_text("the expected outcome held").wait_for(timeout=30_000)
        teacher.get_by_role("button", name="Vote again").click()
        for page, choice in zip(students, ("at most 0.3", "at most 0.3", "at most 0.3")):
            page.get_by_text("Round 2: your choice goes to the class").wait_for(timeout=30_000)
            page.get_by_text(choice, exact=True).click()
            page.get_by_text("Your vote is in (round 2)").wait_for(timeout=30_000)
        teacher.locator(".voted").filter(has_text="3 voted of 3 following").wait_for(timeout=30_000)
        rounds = teacher.locator(".votes[data-round]")
        assert [rounds.nth(i).get_attribute("data-round") for i in range(rounds.count())] == ["1", "2"]
        first, second = (rounds.nth(i).bounding_box() for i in range(2))
        assert abs(first["y"] - second["y"]) < 5 and second["x"] > first["x"] + 300  # side by side
        # the count redraws at each vote (a changed vote too): the last one within its watch
        rounds.nth(1).locator("[data-choice='at most 0.3'] .count").filter(
            has_text="3 votes").wait_for(timeout=10_000)
        teacher.wait_for_timeout(500)
        teacher.screenshot(path=str(SHOTS / "class_votes_two_rounds_1920.png"))
    finally:
        for context in contexts:
            context.close()
