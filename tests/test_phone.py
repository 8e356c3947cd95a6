"""The class on its phones (issue 35): the pages a student reaches, at 390 x 844 and
360 x 800 on a touch screen (device scale factor 3, a phone's browser), in the real
server and Debian's Chromium; axe-core's WCAG 2.1 AA checks on every page at 1366 and
390 px; and a lesson worked through with the keyboard alone.

On a phone every page must: not scroll sideways; show its key figure whole and at least
90% of the screen wide; show no text under 14 px (the figure's numbers 12 px or more); and
give every control a student uses at least 44 x 44 px. The server, the browser and the
helpers are tests/test_browser.py's (one server for this module). axe-core is the pinned
copy that `make test` installs into tests/js (nothing is fetched here).
"""

from __future__ import annotations

import base64
import os
import re
import time
from urllib.parse import unquote, urlencode

import pytest

from test_browser import (CLASS_LINK, REVERSE, ROOT, SERVER_LOG, SHOTS, TITLES_OUTSIDE,  # noqa: F401
                          browser, present_lesson, reason, server)

AXE = ROOT / "tests" / "js" / "node_modules" / "axe-core" / "axe.min.js"
if reason is None and not AXE.exists():
    reason = "axe-core is not installed (make axe: npm ci in tests/js)"
    if os.environ.get("STACKLAB_CI"):
        pytest.fail(f"browser tests cannot run in CI: {reason}", pytrace=False)
pytestmark = pytest.mark.skipif(reason is not None, reason=reason or "")

# A phone's browser, as Chromium's device list has it: Android's Chrome on a 390-px-wide
# screen (a touch screen, three device pixels to a CSS pixel) and a smaller one.
PHONE_AGENT = ("Mozilla/5.0 (Linux; Android 14; Pixel 7) AppleWebKit/537.36 (KHTML, like "
               "Gecko) Chrome/120.0.0.0 Mobile Safari/537.36")
PHONES = {"390x844": (390, 844), "360x800": (360, 800)}
TOUCH_PX, TEXT_PX, FIGURE_TEXT_PX = 44, 14, 12

# What axe-core checks: WCAG 2.1 A and AA. Its serious and critical findings must be none,
# but for these, which live inside Streamlit and that the app cannot change, each excluded
# by its rule and the element it is found on (docs/guide/app.md lists them, with Streamlit's
# issue). None is needed at present: the app's stylesheet (ui/style.py) and the charts' and
# pictures' alt texts fixed every one axe found.
AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
AXE_EXCLUDED: list[tuple[str, str]] = []  # (rule id, CSS selector of the element)
AXE_RUN = """async ([tags, excluded]) => {
  const result = await axe.run(document, {runOnly: {type: 'tag', values: tags}});
  const skip = (rule, node) => excluded.some(([id, selector]) => id === rule
      && document.querySelector(node.target[0]) && document.querySelector(node.target[0]).matches(selector));
  return result.violations.filter(v => ['serious', 'critical'].includes(v.impact))
    .flatMap(v => v.nodes.filter(node => !skip(v.id, node))
      .map(node => `${v.id} (${v.impact}): ${node.target.join(' ')}: ${node.failureSummary.split('\\n')[1]}`));
}"""

# What a page shows a phone: sideways scrolling, the text under the least size (outside
# figures), the figure's box and its texts' sizes. An <img> figure (the Train page's still
# picture) is an SVG whose font sizes are scaled by its shown width over its drawn width.
LAYOUT = """([figure, least]) => {
  const seen = (el) => el.getClientRects().length > 0 && getComputedStyle(el).visibility !== 'hidden';
  const small = [...document.querySelectorAll('[data-testid=stMain] *')]
    .filter(el => !el.closest('svg, .js-plotly-plot, [data-testid=stTooltipContent]') && seen(el)
      && [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim()))
    .map(el => [parseFloat(getComputedStyle(el).fontSize), el.textContent.trim().slice(0, 60)])
    .filter(([size]) => size < least);
  const fig = document.querySelector(figure);
  const box = fig && fig.getBoundingClientRect();
  const sizes = fig && fig.tagName !== 'IMG' ? [...fig.querySelectorAll(
      '.xtick text, .ytick text, .colorbar text, .legendtext, .gtitle, .annotation-text, '
      + '.g-xtitle text, .g-ytitle text')].filter(seen).map(el => parseFloat(getComputedStyle(el).fontSize)) : [];
  return {scroll: document.documentElement.scrollWidth, width: window.innerWidth,
          height: window.innerHeight, small,
          box: box && {left: box.left, right: box.right, top: box.top, bottom: box.bottom,
                       width: box.width},
          sizes, img: fig && fig.tagName === 'IMG' ? [fig.src, fig.naturalWidth, box.width] : null};
}"""


# Resolves once the page has not changed for 0.7 s (at most 20 s): a rerun of the
# script is over, its elements drawn (mid-rerun, Streamlit's stale elements are faded).
SETTLED = """() => new Promise(resolve => {
  let timer; const until = Date.now() + 20000;
  const observer = new MutationObserver(() => { clearTimeout(timer); arm(); });
  const arm = () => { timer = setTimeout(() => { observer.disconnect(); resolve(true); },
                                         Date.now() > until ? 0 : 700); };
  observer.observe(document.body, {subtree: true, childList: true, attributes: true,
                                   characterData: true});
  arm();
})"""


def axe_findings(page) -> list[str]:
    """axe-core's serious and critical WCAG 2.1 A/AA findings on ``page`` once it has
    settled, less `AXE_EXCLUDED`: one line each (rule, impact, element, what to fix)."""
    page.evaluate(SETTLED)
    page.add_script_tag(path=str(AXE))
    return page.evaluate(AXE_RUN, [AXE_TAGS, AXE_EXCLUDED])


def phone(browser, size: str, scale: int = 3):
    """A new page on a phone of ``size`` (its own browser context: a student's phone);
    ``scale`` device pixels to a CSS pixel (axe-core's checks read no pixels: 1 is
    quicker to draw)."""
    width, height = PHONES[size]
    return browser.new_context(viewport={"width": width, "height": height}, is_mobile=True,
                               has_touch=True, device_scale_factor=scale,
                               user_agent=PHONE_AGENT).new_page()


def picture_font_sizes(src: str, natural: float, shown: float) -> list[float]:
    """The font sizes of a still picture's texts as shown: its SVG's sizes, scaled."""
    header, data = src.split(",", 1)  # the URI's own header says base64, not the SVG's text
    svg = base64.b64decode(data).decode() if header.endswith(";base64") else unquote(data)
    return [float(size) * shown / natural for size in re.findall(r'font-size="([\d.]+)"', svg)]


def assert_fits_a_phone(page, figure: str, controls=()) -> dict:
    """No sideways scrolling; the figure at ``figure`` (a CSS selector) brought on screen,
    whole and >= 90% of the screen wide; no text under 14 px, the figure's numbers 12 px
    or more; each of ``controls`` (locators) at least 44 x 44 px."""
    page.locator(figure).first.wait_for()
    # by the page's own DOM call: a live picture is replaced at each frame, and a held
    # handle would be detached by the time it scrolls
    page.evaluate("s => document.querySelector(s).scrollIntoViewIfNeeded()", figure)
    page.wait_for_timeout(600)
    seen = page.evaluate(LAYOUT, [figure, TEXT_PX])
    assert seen["scroll"] <= seen["width"], f"scrolls sideways: {seen['scroll']} > {seen['width']}"
    assert not seen["small"], f"text under {TEXT_PX} px: {seen['small'][:8]}"
    box = seen["box"]
    assert box and box["width"] >= 0.9 * seen["width"], (figure, box, seen["width"])
    assert box["left"] >= -1 and box["right"] <= seen["width"] + 1, box
    assert box["top"] >= -1 and box["bottom"] <= seen["height"] + 1, box
    sizes = picture_font_sizes(*seen["img"]) if seen["img"] else seen["sizes"]
    assert sizes and min(sizes) >= FIGURE_TEXT_PX, f"figure text under 12 px: {sorted(sizes)[:6]}"
    for control in controls:
        control_box = control.bounding_box()
        assert control_box["width"] >= TOUCH_PX and control_box["height"] >= TOUCH_PX, (
            control, control_box)
    return seen


def shot(page, name: str) -> None:
    """The phone's screen as a picture beside the desktop ones (390 px only)."""
    if page.viewport_size["width"] == 390:
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / name))


@pytest.fixture(scope="module")
def runs():
    """Runs in the server's store: reverse with a learned table (Explore, the present
    views) and four encodings on shift (Compare): {"reverse": key, "compare": [keys]}."""
    import stacklab
    from stacklab.lab.runs.store import RunStore

    store = RunStore(SERVER_LOG.parent / "runs")
    reverse = stacklab.train(REVERSE, task="reverse", steps=400, seq_len=16, seed=35)
    store.save(reverse)
    compared = []
    for position in ("xpos", "kerple", "fire", "cope"):
        stack = (f'embedding(16, 32)\nattention(2, causal=true, position="{position}")\n'
                 "layer_norm()\nlinear(16)")
        run = stacklab.train(stack, task="shift", steps=150, seed=35, eval_lengths="32")
        store.save(run)
        compared.append(run.key)
    return {"reverse": reverse.key, "compare": compared}


PLOT = ".js-plotly-plot"


@pytest.mark.parametrize("size", PHONES)
def test_home_and_a_lesson_step_fit_a_phone(server, browser, size):
    """Home's button trains reverse and its heatmap fits the phone; a lesson step's
    prediction choices, Run and Next are thumb-sized and its figure fits."""
    page = phone(browser, size)
    page.goto(server)
    train = page.get_by_role("button", name="Train reverse now")
    train.wait_for(timeout=30_000)
    train.click()
    page.get_by_text("Finished in").wait_for(timeout=120_000)
    page.locator(PLOT).first.wait_for(timeout=30_000)
    assert_fits_a_phone(page, PLOT, [train])
    shot(page, "phone_home.png")

    page.goto(f"{server}/learn?lesson=positions&step=1")
    page.get_by_text("Step 1 of 3").wait_for(timeout=30_000)
    choices = page.locator("[data-testid=stRadioOption]")
    run = page.get_by_role("button", name="Run the experiment")
    choices.first.wait_for()
    for control in (choices.nth(0), choices.nth(1), run, page.get_by_role("button", name="Next step")):
        box = control.bounding_box()
        assert box["width"] >= TOUCH_PX and box["height"] >= TOUCH_PX, (control, box)
    choices.nth(1).click()
    run.click()
    page.get_by_text("the expected outcome").first.wait_for(timeout=120_000)
    page.locator(PLOT).first.wait_for(timeout=30_000)
    assert_fits_a_phone(page, PLOT, [page.get_by_role("button", name="Next step")])
    shot(page, "phone_lesson.png")

    page.goto(f"{server}/train?task=reverse")  # "Change it yourself on Train", on a phone
    train = page.get_by_role("button", name="Train", exact=True)
    train.wait_for(timeout=30_000)
    seen = page.evaluate(LAYOUT, ["body", TEXT_PX])
    assert seen["scroll"] <= seen["width"] and not seen["small"], seen
    box = train.bounding_box()
    assert box["width"] >= TOUCH_PX and box["height"] >= TOUCH_PX, box
    page.context.close()


def test_students_follow_the_class_on_phones(server, browser):
    """A teacher (a laptop) presents a lesson; a student on each phone follows it: the new
    step within one poll as on a laptop, and Explore on my own and Follow the teacher
    again are thumb-sized."""
    from parts.classroom.room import POLL_SECONDS

    margin = 1.5  # the rerun that draws the new step, on two shared cores (as test_browser)
    teacher = browser.new_context(viewport={"width": 1366, "height": 768}).new_page()
    students = [phone(browser, size) for size in PHONES]
    try:
        class_id = present_lesson(teacher, server)
        teacher.locator("img").first.wait_for(timeout=30_000)  # the class's QR code
        assert axe_findings(teacher) == []  # the teacher's page, from the front
        for student in students:
            student.goto(f"{server}/learn?class={class_id}")
            student.get_by_text("Following the teacher").wait_for(timeout=30_000)
        teacher.get_by_role("button", name="Next step").click()
        teacher.get_by_text("Step 2 of 3").wait_for(timeout=30_000)
        moved = time.monotonic()
        for student in students:
            left = POLL_SECONDS + margin - (time.monotonic() - moved)
            student.get_by_text("Step 2 of 3").wait_for(timeout=max(left, 0.05) * 1000)
        assert time.monotonic() - moved <= POLL_SECONDS + margin
        for student in students:
            student.wait_for_timeout(500)
            seen = student.evaluate(LAYOUT, ["body", TEXT_PX])
            assert seen["scroll"] <= seen["width"] and not seen["small"], seen
            leave = student.get_by_role("button", name="Explore on my own")
            box = leave.bounding_box()
            assert box["width"] >= TOUCH_PX and box["height"] >= TOUCH_PX, box
            shot(student, "phone_class.png")
            leave.click()
            again = student.get_by_role("button", name="Follow the teacher again")
            again.wait_for(timeout=20_000)
            box = again.bounding_box()
            assert box["width"] >= TOUCH_PX and box["height"] >= TOUCH_PX, box
            again.click()
            student.get_by_text("Following the teacher").wait_for(timeout=20_000)
    finally:
        for page in (teacher, *students):
            page.context.close()


def test_the_teachers_run_link_fits_phones_while_training_and_after(server, browser):
    """The teacher trains on a laptop; students open the run= link on their phones while
    it trains (the pattern figure forms there) and keep it once it has ended."""
    teacher = browser.new_context(viewport={"width": 1366, "height": 768}).new_page()
    teacher.goto(f"{server}/train?" + urlencode({**CLASS_LINK, "seed": 3501, "steps": 10000,
                                                 "target_accuracy": "none"}))  # every step
    # (10,000 steps: still training while both phones open the link, on a quiet machine too)
    teacher.get_by_role("button", name="Train", exact=True).click(timeout=30_000)
    teacher.wait_for_function("() => window.location.search.includes('run=')", timeout=30_000)
    key = teacher.evaluate("new URLSearchParams(window.location.search).get('run')")
    pattern = "[class*='st-key-train_pattern_'] img"
    live = ".live-run-pattern img"  # while it trains: the live view (ui.live_run)
    students = [phone(browser, size) for size in PHONES]
    for student in students:
        student.goto(f"{server}/train?run={key[:8]}")
    for student in students:
        student.locator(live).wait_for(timeout=60_000)
        assert_fits_a_phone(student, live)
        assert student.get_by_text("Status: running").count() == 1  # checked while it trains
        shot(student, "phone_run_training.png")
    for student in students:
        student.get_by_text("Status: finished").wait_for(timeout=400_000)
        student.wait_for_timeout(1500)  # the page brings the finished run's figure into view
        assert_fits_a_phone(student, pattern)
        shot(student, "phone_run_finished.png")
    for page in (teacher, *students):
        page.context.close()


def assert_fits_both_phones(page, figure: str) -> None:
    """`assert_fits_a_phone` at 390 x 844, then on the same page turned into the smaller
    phone (360 x 800: the page lays itself out again, with no new visit to the server)."""
    assert_fits_a_phone(page, figure)
    assert page.evaluate(TITLES_OUTSIDE) == []
    page.set_viewport_size({"width": PHONES["360x800"][0], "height": PHONES["360x800"][1]})
    page.wait_for_timeout(1200)  # plotly redraws for the new width
    assert_fits_a_phone(page, figure)
    assert page.evaluate(TITLES_OUTSIDE) == []
    page.set_viewport_size({"width": PHONES["390x844"][0], "height": PHONES["390x844"][1]})


def test_explore_and_compare_fit_phones(server, browser, runs):
    """Explore's first screen (the task's figure and its number, every chart named with
    its numbers) and Compare of four runs (every run's lengths on one plot): each figure
    fits both phones, its title inside it, its legend below the data."""
    page = phone(browser, "390x844")
    page.goto(f"{server}/explore?run={runs['reverse']}")
    page.locator(PLOT).first.wait_for(timeout=60_000)
    names = page.locator("[data-testid=stPlotlyChart]").evaluate_all(
        "charts => charts.map(c => c.getAttribute('aria-label') || '')")
    assert names and all(re.search(r"\d", name) for name in names), names  # numbers, each
    assert "partner attention 0." in names[0] and "16 by 16 heatmap" in names[0], names[0]
    assert_fits_both_phones(page, PLOT)
    page.wait_for_timeout(800)
    shot(page, "phone_explore.png")
    page.goto(f"{server}/compare?compare={','.join(runs['compare'])}")
    page.get_by_text("Length generalization: every run on one plot").first.wait_for(
        timeout=60_000)
    page.locator(PLOT).first.wait_for(timeout=60_000)
    legend_below = page.locator(PLOT).first.evaluate(
        "p => p.querySelector('.legend').getBoundingClientRect().top >= "
        "['.nsewdrag', '.bglayer rect', '.gridlayer', '.cartesianlayer'].map(q => p.querySelector(q))"
            ".find(e => e && e.getBoundingClientRect().height > 0).getBoundingClientRect().bottom")
    assert legend_below, "the legend covers the data"
    assert_fits_both_phones(page, PLOT)
    page.locator(PLOT).first.scroll_into_view_if_needed()
    page.wait_for_timeout(800)
    shot(page, "phone_compare.png")
    page.context.close()


def axe_pages(runs) -> dict[str, str]:
    """Every page, by name: its address, with runs to show."""
    compare = ",".join(runs["compare"])
    return {
        "Home": "/", "Learn": "/learn", "a lesson step": "/learn?lesson=positions&step=1",
        "Build": "/build", "Train": f"/train?run={runs['reverse']}&hide=",
        "Explore": f"/explore?run={runs['reverse']}", "Compare": f"/compare?compare={compare}",
        "Catalog": "/catalog", "Train present mode": f"/train?run={runs['reverse']}&view=present",
        "a lesson step presented": "/learn?lesson=positions&step=1&view=present",
        "Compare present mode": f"/compare?compare={compare}&view=present",
    }


@pytest.mark.parametrize("width", [1366, 390])
def test_every_page_passes_axe_core_wcag_2_1_aa(server, browser, runs, width):
    """axe-core on every page: no serious or critical WCAG 2.1 A/AA finding."""
    if width == 390:
        page = phone(browser, "390x844", scale=1)
    else:
        page = browser.new_context(viewport={"width": width, "height": 768}).new_page()
    found = {}
    for name, path in axe_pages(runs).items():
        page.goto(server + path)
        page.locator("[data-testid=stMain]").wait_for(timeout=30_000)
        found[name] = axe_findings(page)
    print(f"axe-core at {width} px, serious and critical:",
          {name: len(items) for name, items in found.items()})
    assert not any(found.values()), {name: items for name, items in found.items() if items}
    page.context.close()


FOCUS = """() => {
  const el = document.activeElement;
  const ring = (node) => { const s = getComputedStyle(node);
    return (s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) >= 2) || s.boxShadow !== 'none'; };
  const label = el.closest('label');
  return {tag: el.tagName, type: el.type || '', text: (el.innerText || el.getAttribute('aria-label') || '').trim(),
          checked: !!el.checked, ring: ring(el) || (!!label && ring(label))};
}"""


def tab_to(page, wanted, limit: int = 80) -> dict:
    """Press Tab until the focused element is ``wanted`` (a test of the FOCUS dict)."""
    for _ in range(limit):
        page.keyboard.press("Tab")
        focused = page.evaluate(FOCUS)
        if wanted(focused):
            return focused
    raise AssertionError("Tab never reached the control")


def test_a_keyboard_only_student_works_through_a_lesson_step(server, browser):
    """Tab to the prediction, choose it with the arrow keys, Tab to Run and press Enter,
    then Tab to Next step and press Enter: step 2, and the focus visible at every stop."""
    page = browser.new_context(viewport={"width": 1366, "height": 768}).new_page()
    page.goto(f"{server}/learn?lesson=positions&step=1")
    page.get_by_text("Step 1 of 3").wait_for(timeout=30_000)
    page.wait_for_timeout(800)
    radio = tab_to(page, lambda f: f["type"] == "radio")
    assert radio["ring"], radio
    page.keyboard.press("ArrowRight")  # the second outcome
    page.wait_for_timeout(800)
    assert page.evaluate(FOCUS)["checked"]
    run = tab_to(page, lambda f: f["tag"] == "BUTTON" and "Run the experiment" in f["text"])
    assert run["ring"], run
    page.keyboard.press("Enter")
    page.get_by_text("the expected outcome").first.wait_for(timeout=120_000)
    page.wait_for_timeout(800)
    forward = tab_to(page, lambda f: f["tag"] == "BUTTON" and "Next step" in f["text"])
    assert forward["ring"], forward
    page.keyboard.press("Enter")
    page.get_by_text("Step 2 of 3").wait_for(timeout=30_000)
    page.context.close()


def test_the_sidebars_buttons_are_thumb_sized_on_a_phone(server, browser):
    """Issue 46: the sidebar's open button was 28 px on a phone. Opened and closed by touch
    at 390 x 844, each of its buttons at least 44 x 44 px."""
    page = phone(browser, "390x844")
    try:
        page.goto(f"{server}/train?task=reverse")
        page.get_by_role("button", name="Train", exact=True).wait_for(timeout=30_000)
        opener = page.locator('[data-testid="stExpandSidebarButton"]')
        opener.wait_for(timeout=30_000)
        box = opener.bounding_box()
        assert box["width"] >= TOUCH_PX and box["height"] >= TOUCH_PX, box
        opener.tap()
        closer = page.locator('[data-testid="stSidebarCollapseButton"] button')
        closer.wait_for(timeout=30_000)
        page.wait_for_timeout(500)  # the sidebar slides in
        box = closer.bounding_box()
        assert box["width"] >= TOUCH_PX and box["height"] >= TOUCH_PX, box
        shot(page, "phone_sidebar.png")
        closer.tap()
        opener.wait_for(timeout=30_000)
    finally:
        page.context.close()
