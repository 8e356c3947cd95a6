"""The class as it is lived (issue 42): the contract for Learn's class from now on.

One lesson played on the real server (server.py, as `make run` starts it) by a teacher at
1920x1080 presenting, an iPhone (390x844, touch, three device pixels to a CSS pixel), an
Android phone (360x800), a laptop (1366x768) and a late joiner, each its own browser
context (a device: a reload keeps its storage), with a reload of a phone, a second round,
Reveal, the votes' CSV downloaded and read back, and a hostile script against the watch
endpoints. At each moment it asserts what each screen shows: the projector's count and the
question above its bars, the figure in view at projector size after Reveal, every student
told of the answer with their own choice marked, the step's heading in view after a move,
a phone's chart that a swipe scrolls past, and on no screen an error box or a page wider
than its screen. Screenshots of the screens go to test_browser's SHOTS folder (`make
screenshots` writes them into assets/screenshots for the app guide).
"""

from __future__ import annotations

import concurrent.futures
import csv
import json
import re
import secrets
import time
import urllib.request

import pytest

from test_browser import SHOTS, browser, present_lesson, reason, server  # noqa: F401

pytestmark = pytest.mark.skipif(reason is not None, reason=reason or "")

IPHONE_AGENT = ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 "
                "(KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1")
ANDROID_AGENT = ("Mozilla/5.0 (Linux; Android 14; Pixel 7) AppleWebKit/537.36 (KHTML, like "
                 "Gecko) Chrome/120.0.0.0 Mobile Safari/537.36")
LOW, HIGH = "at most 0.3", "above 0.3"  # positions step 1's two outcomes
POLL = 1.0 + 2.5  # one student poll (ui.polls.CLASS_SECONDS) and the rerun it draws, on 2 cores
ERROR_BOX = "[data-testid=stAlertContentError], [data-testid=stException]"

# Everything the students' pages must never show: an error box, a page wider than its
# screen. Run on every student screen at every moment the test looks at it.
LOOKS = """() => ({errors: document.querySelectorAll('%s').length,
  wide: document.documentElement.scrollWidth - window.innerWidth})""" % ERROR_BOX
# Where an element is on screen, by the page's own DOM call (a held handle goes stale
# when Streamlit redraws).
BOX = """s => { const e = document.querySelector(s); if (!e) return null;
  const r = e.getBoundingClientRect(); return {top: r.top, bottom: r.bottom, left: r.left,
  right: r.right, height: window.innerHeight, width: window.innerWidth}; }"""
# How far the page has scrolled (Streamlit scrolls an element of its own, not the window).
SCROLLED = """s => { let n = document.querySelector(s), y = window.scrollY;
  for (; n; n = n.parentElement) y += n.scrollTop; return y; }"""
AXIS_TEXT = """s => [...document.querySelectorAll(s + ' .xtick text, ' + s + ' .ytick text')]
  .map(e => parseFloat(getComputedStyle(e).fontSize))"""


def device(browser, width, height, agent=None, scale=1):
    """A device: its own browser context (storage survives a reload) and page; a phone
    when it has an ``agent`` (touch, mobile)."""
    phone = agent is not None
    context = browser.new_context(viewport={"width": width, "height": height},
                                  is_mobile=phone, has_touch=phone, device_scale_factor=scale,
                                  **({"user_agent": agent} if phone else {}))
    return context, context.new_page()


def looks_right(page, who: str) -> None:
    """No error box and no sideways scrolling on ``page``."""
    seen = page.evaluate(LOOKS)
    assert seen["errors"] == 0, f"{who}: an error box: {page.inner_text('body')[:1500]}"
    assert seen["wide"] <= 0, f"{who}: the page scrolls sideways by {seen['wide']} px"


def projector_says(teacher, text: str, timeout: float = 15) -> None:
    teacher.locator(".voted").filter(has_text=text).wait_for(timeout=timeout * 1000)


def stays(teacher, text: str, seconds: float) -> None:
    """The projector's count says ``text`` throughout ``seconds`` (nothing sneaks in)."""
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        said = teacher.locator(".voted").first.inner_text()
        assert text in said, f"the projector says {said!r}, not {text!r}"
        teacher.wait_for_timeout(250)


def vote(page, choice: str, round_: int) -> None:
    page.get_by_text(choice, exact=True).click()
    page.get_by_text(f"Your vote is in (round {round_})").wait_for(timeout=20_000)


def told(page, who: str, round_: int, supported: str, mine: str | None) -> None:
    """``page`` says the answer is out, the run's number and the choice it supports, and
    marks its own choice, with its choices closed: within one poll of the news."""
    box = page.locator(".st-key-votes_told")
    box.filter(has_text=f"The answer is out (round {round_})").wait_for(timeout=POLL * 1000)
    said = box.inner_text()
    assert re.search(rf"the run measured held-out accuracy 0\.\d\d, so {re.escape(supported)}", said), said
    mark = ("You did not vote in this round." if mine is None else
            "✓ Right." if mine == supported else "✗ Not this time.")
    assert mark in said, (who, said)
    radios = page.locator("input[type=radio]")
    radios.nth(1).wait_for(state="attached", timeout=20_000)  # a first visit draws them late
    assert radios.count() == 2 and all(radios.nth(i).is_disabled() for i in range(2)), who
    looks_right(page, who)


def csv_rows(page, button_name: str = "Download the votes (CSV)") -> list[dict]:
    with page.expect_download(timeout=30_000) as download:
        page.get_by_role("button", name=button_name).first.click()
    text = open(download.value.path(), encoding="utf-8").read()
    return list(csv.DictReader(text.splitlines()))


def swipe(cdp, x: float, y: float, down: float) -> None:
    """A finger on the touch screen at (x, y) moved ``down`` px, as a phone's touches."""
    cdp.send("Input.dispatchTouchEvent", {"type": "touchStart", "touchPoints": [{"x": x, "y": y}]})
    for k in range(1, 11):
        cdp.send("Input.dispatchTouchEvent", {"type": "touchMove",
                                              "touchPoints": [{"x": x, "y": y + down * k / 10}]})
    cdp.send("Input.dispatchTouchEvent", {"type": "touchEnd", "touchPoints": []})


def hostile(server: str, class_id: str) -> list[int]:
    """A script on another page of the room's network: made-up voter headers, forged
    class ids and junk against the watch endpoints, 600 requests at once. The status of
    each answer."""
    def ask(n: int) -> int:
        kind, target = n % 3, class_id
        if kind == 1:
            target = secrets.token_hex(4)  # a class id made up
        request = urllib.request.Request(
            f"{server}/_stacklab/watch/{'votes' if n % 5 == 0 else 'class'}/{target}",
            headers={"X-Stacklab-Voter": secrets.token_urlsafe(12) if kind != 2 else
                     "x" * (n % 90) or "forged"})
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                return answer.status
        except urllib.error.HTTPError as refused:
            return refused.code

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        return list(pool.map(ask, range(600)))


def students_interval(server: str, class_id: str) -> float:
    with urllib.request.urlopen(f"{server}/_stacklab/watch/class/{class_id}", timeout=10) as got:
        return json.load(got)["every"]


def test_a_lesson_rehearsed_as_a_class_lives_it(server, browser, tmp_path):  # noqa: C901
    from stacklab.lab.lessons import LESSONS
    from ui.polls import CLASS_SECONDS

    step = LESSONS["positions"].steps[0]
    devices = {
        "teacher": device(browser, 1920, 1080),
        "iphone": device(browser, 390, 844, IPHONE_AGENT, scale=3),
        "android": device(browser, 360, 800, ANDROID_AGENT, scale=2),
        "laptop": device(browser, 1366, 768),
    }
    teacher, iphone, android, laptop = (devices[name][1] for name in devices)
    students = {"iphone": iphone, "android": android, "laptop": laptop}
    bars = teacher.locator(".votes[data-round]")
    SHOTS.mkdir(parents=True, exist_ok=True)
    try:
        # -- the teacher presents; the projector asks the step's question above its bars
        class_id = present_lesson(teacher, server)
        bars.first.wait_for(timeout=30_000)
        question = teacher.locator(".votes[data-question]")
        assert step.question in question.inner_text()
        assert question.bounding_box()["y"] + question.bounding_box()["height"] <= (
            bars.first.bounding_box()["y"])
        projector_says(teacher, "0 voted of 0 following")

        # -- three students join on their devices and vote; the run waits for the teacher
        for name, page in students.items():
            page.goto(f"{server}/learn?class={class_id}")
            page.get_by_text("Following the teacher").wait_for(timeout=30_000)
            page.get_by_text("Step 1 of 3").wait_for()
        projector_says(teacher, "0 voted of 3 following")
        picks = {"iphone": LOW, "android": LOW, "laptop": HIGH}
        for name, page in students.items():
            vote(page, picks[name], 1)
            assert "voted of" not in page.inner_text("body")  # a student sees their own only
            assert page.get_by_role("button", name="Run the experiment").is_disabled()
            assert page.get_by_text("In class, the run comes once the teacher reveals the "
                                    "answer.").is_visible()  # greyed, and says why
            looks_right(page, name)
        projector_says(teacher, "3 voted of 3 following")
        assert bars.locator(f"[data-choice='{LOW}'] .count").inner_text() == "2 votes"

        # -- the iPhone reloads (or scans the code again): the same voter, the same vote
        iphone.reload()
        iphone.get_by_text("Following the teacher").wait_for(timeout=30_000)
        iphone.get_by_text(f"Your vote is in (round 1): {LOW}").wait_for(timeout=20_000)
        iphone.goto(f"{server}/learn?class={class_id}")  # the QR code scanned again
        iphone.get_by_text(f"Your vote is in (round 1): {LOW}").wait_for(timeout=20_000)
        stays(teacher, "3 voted of 3 following", 3 * CLASS_SECONDS)

        # -- a hostile script: made-up voter headers and class ids change nothing
        every = students_interval(server, class_id)
        answers = hostile(server, class_id)
        assert set(answers) <= {200, 404, 429}, sorted(set(answers))
        stays(teacher, "3 voted of 3 following", 2.5)
        assert students_interval(server, class_id) == every == CLASS_SECONDS
        teacher.screenshot(path=str(SHOTS / "class_projector_votes_1920.png"))

        # -- Reveal: the run trains once; the projector shows the figure beside the votes
        teacher.get_by_role("button", name="Reveal the answer").click()
        supported_bar = bars.locator(".supported")
        supported_bar.first.wait_for(timeout=180_000)
        supported = supported_bar.first.get_attribute("data-choice")
        figure = ".st-key-learn_projected_figure .js-plotly-plot"
        teacher.locator(figure).first.wait_for(timeout=30_000)
        teacher.wait_for_timeout(800)
        box = teacher.evaluate(BOX, figure)
        assert box["top"] >= 0 and box["bottom"] <= box["height"], box  # whole, on screen
        assert box["right"] - box["left"] >= 600, box
        sizes = teacher.evaluate(AXIS_TEXT, ".st-key-learn_projected_figure")
        assert sizes and min(sizes) >= 20, sizes
        for name, page in students.items():
            told(page, name, 1, supported, picks[name])
        teacher.screenshot(path=str(SHOTS / "class_projector_revealed_1920.png"))
        iphone.evaluate("() => document.querySelector('.st-key-votes_told')"
                        ".scrollIntoView({block: 'center'})")
        iphone.wait_for_timeout(300)
        iphone.screenshot(path=str(SHOTS / "class_iphone_told.png"))
        # a closed choice tapped: nothing changes, and no error
        other = HIGH if picks["android"] == LOW else LOW
        android.get_by_text(other, exact=True).click(force=True)
        android.wait_for_timeout(1000)
        told(android, "android", 1, supported, picks["android"])
        stays(teacher, "3 voted of 3 following", 1)

        # -- a late joiner, after the reveal: told too, having not voted
        devices["late"] = device(browser, 1366, 768)
        late = devices["late"][1]
        late.goto(f"{server}/learn?class={class_id}")
        late.get_by_text("Following the teacher").wait_for(timeout=30_000)
        told(late, "late", 1, supported, None)
        students["late"] = late
        projector_says(teacher, "3 voted of 4 following")

        # -- a phone's chart: no toolbar, and a vertical swipe on it scrolls the page
        iphone.get_by_role("button", name="Run the experiment").click()
        chart = "[data-testid=stPlotlyChart] .js-plotly-plot"
        iphone.locator(chart).first.wait_for(timeout=60_000)
        iphone.evaluate("s => document.querySelector(s).scrollIntoView({block: 'center'})", chart)
        iphone.wait_for_timeout(500)
        assert iphone.locator(".modebar-container .modebar").count() == 0
        box = iphone.evaluate(BOX, chart)
        before = iphone.evaluate(SCROLLED, chart)
        swipe(devices["iphone"][0].new_cdp_session(iphone), (box["left"] + box["right"]) / 2,
              (box["top"] + box["bottom"]) / 2, 250)  # a finger down the chart
        iphone.wait_for_timeout(500)
        after = iphone.evaluate(SCROLLED, chart)
        assert after < before - 100, f"a swipe on the chart did not scroll: {before} -> {after}"
        looks_right(iphone, "iphone")

        # -- Vote again: round 2 starts at zero, whatever the pages still hold
        teacher.get_by_role("button", name="Vote again").click()
        projector_says(teacher, "0 voted of 4 following")
        for name, page in students.items():
            page.get_by_text("Round 2: your choice goes to the class").wait_for(
                timeout=POLL * 1000)
        stays(teacher, "0 voted of 4 following", 2.5)  # no round-1 choice sneaks into round 2
        for name, page in students.items():
            vote(page, supported, 2)
        projector_says(teacher, "4 voted of 4 following")
        rounds = teacher.locator(".votes[data-round]")
        assert [rounds.nth(i).get_attribute("data-round") for i in range(rounds.count())] == [
            "1", "2"]
        teacher.get_by_role("button", name="Reveal the answer").click()
        for name, page in students.items():  # the run's number is known: told at once
            told(page, name, 2, supported, supported)
        android.evaluate("() => document.querySelector('.st-key-votes_told')"
                         ".scrollIntoView({block: 'center'})")
        android.wait_for_timeout(300)
        android.screenshot(path=str(SHOTS / "class_android_round2.png"))

        # -- the votes' CSV, downloaded in the browser and read back
        rows = csv_rows(teacher)
        counted = {(r["round"], r["choice"]): int(r["count"]) for r in rows
                   if (r["lesson"], r["step"]) == ("positions", "1")}
        assert counted == {("1", LOW): 2, ("1", HIGH): 1,
                           ("2", supported): 4, ("2", HIGH if supported == LOW else LOW): 0}, rows
        assert {r["run_supports"] for r in rows if r["choice"] == supported} == {"yes"}
        assert all(re.fullmatch(r"0\.\d\d", r["run_number"]) for r in rows), rows

        # -- the teacher moves on: a phone scrolled down the step is brought to its heading
        android.evaluate("() => { const all = document.querySelectorAll("
                         "'[data-testid=stMainBlockContainer] [data-testid=stElementContainer]');"
                         " all[all.length - 1].scrollIntoView({block: 'end'}); }")
        android.wait_for_timeout(400)
        head = ".st-key-learn_step_head"
        assert android.evaluate(BOX, head)["bottom"] < 0, "the phone had not scrolled down"
        teacher.get_by_role("button", name="Next step").click()
        for name, page in students.items():
            page.get_by_text("Step 2 of 3").wait_for(timeout=POLL * 1000)
        android.wait_for_function(
            "s => { const r = document.querySelector(s).getBoundingClientRect();"
            " return r.top >= -1 && r.bottom <= window.innerHeight; }", arg=head, timeout=4000)
        for name, page in students.items():
            looks_right(page, name)
        projector_says(teacher, "0 voted of 4 following")

        # -- the class ends; its summary keeps every round, and its CSV the same rows
        teacher.get_by_role("button", name="End the class").first.click()
        ended = teacher.locator(".st-key-votes_ended_bar")
        ended.wait_for(timeout=30_000)
        ended.get_by_role("link", name="Class summary").click()
        teacher.get_by_role("heading", name="Class summary").wait_for(timeout=30_000)
        teacher.locator("[data-testid=stDataFrame]").first.wait_for(timeout=30_000)
        kept = csv_rows(teacher)
        assert [r for r in kept if r["step"] == "1"] == rows, kept
        assert {(r["step"], r["round"]) for r in kept} == {("1", "1"), ("1", "2"), ("2", "1")}
        teacher.go_back()  # the browser's Back: to the lesson, drawn again
        teacher.wait_for_url("**/learn**", timeout=30_000)
        teacher.get_by_role("heading", name="Learn", exact=True).wait_for(timeout=60_000)
        teacher.screenshot(path=str(tmp_path / "back.png"))
        assert "Class summary" not in teacher.get_by_role("heading").all_inner_texts()
        for name, page in students.items():
            page.get_by_text("has ended").wait_for(timeout=POLL * 1000)
            looks_right(page, name)
    finally:
        for context, _ in devices.values():
            context.close()


def test_a_phone_on_its_side_keeps_the_sidebar_closed(server, browser):
    context, page = device(browser, 844, 390, ANDROID_AGENT, scale=2)
    try:
        page.goto(f"{server}/learn?lesson=positions&step=1")
        page.get_by_text("Step 1 of 3").wait_for(timeout=30_000)
        page.wait_for_timeout(500)
        box = page.locator("[data-testid=stSidebar]").bounding_box()  # closed: off screen
        assert box is None or box["x"] + box["width"] <= 1, box
        assert page.get_by_role("heading", name="Why a transformer needs positions").bounding_box()[
            "x"] < 100  # the step uses the screen's width
        looks_right(page, "landscape phone")
    finally:
        context.close()
