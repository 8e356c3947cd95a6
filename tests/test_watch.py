"""The watch endpoints (`ui.endpoints`, `ui.watch`): what a following page asks the server
instead of rerunning its script. The class's answers and the votes' version on the real
server; in real Chromium, a student's page between two of the teacher's moves asks the
endpoint and reruns nothing (the browser's websocket frames are counted), the projector's
count follows a vote the same way, and the app started as ``app.py`` (no endpoint) still
follows the teacher by rerunning at the interval. The server, the browser and the helpers
are tests/test_browser.py's.
"""

from __future__ import annotations

import json
import os
import tempfile
import urllib.request
from pathlib import Path
from urllib.parse import quote

import pytest

from test_browser import (_models_folder, browser, present_lesson, reason,  # noqa: F401
                          server, start_streamlit)
from stacklab.serve.classroom.classes import Classes
from ui.watch import PREFIX, VOTER_HEADER

pytestmark = pytest.mark.skipif(reason is not None, reason=reason or "")

CHOICES = ("at most 0.3", "above 0.3")  # step 1 of `positions`
QUIET_MS = 4000  # a spell between two moves (a student) or two votes (the projector)


def asked(server: str, *parts: str, voter: str | None = None) -> tuple[int, dict]:
    """GET a watch endpoint: its status and its JSON ({} when it answered none: a path
    no endpoint takes is Streamlit's page)."""
    request = urllib.request.Request(f"{server}{PREFIX}/" + "/".join(parts),
                                     headers={VOTER_HEADER: voter} if voter else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            raw = response.read()
            json_type = "json" in response.headers.get("Content-Type", "")
            return response.status, json.loads(raw) if json_type else {}
    except urllib.error.HTTPError as err:
        return err.code, {}


def test_a_vote_changes_the_votes_version_and_not_the_class_version():
    """The projector watches the votes version; the students the class's version: a vote
    must move the first only (or every student would rerun at each vote)."""
    classes = Classes(ttl_seconds=60)
    opened = classes.open("positions", 1)
    classes.open_vote(opened.id, opened.token, CHOICES)
    before, votes = classes.follow(opened.id).version, classes.votes_version(opened.id)
    assert classes.tally(opened.id, opened.token).version == votes
    first, second = (classes.issue_voter(opened.id, f"10.0.0.{n}") for n in (1, 2))
    classes.vote(opened.id, first, 1, CHOICES[0])
    assert classes.follow(opened.id).version == before
    assert classes.votes_version(opened.id) != votes
    assert classes.tally(opened.id, opened.token).version == classes.votes_version(opened.id)
    with pytest.raises(Exception):
        classes.vote(opened.id, first, 1, "neither")
    counted = classes.votes_version(opened.id)
    assert classes.votes_version(opened.id) == counted  # a refused vote changes nothing
    classes.follow(opened.id, "student-0002")  # a made-up identity: nobody more follows
    assert classes.votes_version(opened.id) == counted
    classes.follow(opened.id, second)  # one more following: the projector's "of N"
    assert classes.votes_version(opened.id) != counted
    classes.close(opened.id, opened.token)
    assert classes.votes_version(opened.id) is None


def _quiet_frames(page, wait_ms: int) -> int:
    """The websocket frames ``page`` sends the server in ``wait_ms`` (each rerun is one)."""
    page.evaluate("() => { window.__sent = 0; }")
    page.wait_for_timeout(wait_ms)
    return page.evaluate("() => window.__sent")


COUNT_SENT = """() => {
  window.__sent = 0;
  const send = WebSocket.prototype.send;
  WebSocket.prototype.send = function (data) { window.__sent += 1; return send.call(this, data); };
}"""


def _tab(browser, size=(1366, 768)):
    """A new page that counts the websocket frames it sends (its reruns: `_quiet_frames`)
    and the watch endpoints it asks."""
    page = browser.new_context(viewport={"width": size[0], "height": size[1]}).new_page()
    page.add_init_script(COUNT_SENT.replace("() => {", "(() => {", 1) + ")()")
    page.watched = []
    page.on("request", lambda r: PREFIX in r.url and page.watched.append(r))
    return page


def test_the_class_endpoint_answers_from_the_class_and_counts_a_follower(server, browser):
    teacher = _tab(browser, (1920, 1080))
    try:
        class_id = present_lesson(teacher, server)
        voted = teacher.locator(".voted")
        voted.filter(has_text="0 voted of 0 following").wait_for(timeout=30_000)
        status, first = asked(server, "class", class_id)  # no token: it is a public read
        assert status == 200 and first["v"].isdigit() and first["every"] >= 1
        for forged in ("00000000", "..%2F..%2Fetc", "x" * 2000, quote("<b>é</b>", safe=""), "%00"):
            status, answer = asked(server, "class", forged)
            assert status in (200, 400, 404) and answer.get("v", "ended") == "ended", (forged, answer)
            status, answer = asked(server, "votes", forged)
            assert status in (200, 400, 404) and answer.get("v", "ended") == "ended", (forged, answer)
        assert asked(server, "class", class_id, voter="<not a token>")[1]["v"] == first["v"]
        status, votes = asked(server, "votes", class_id)
        assert status == 200 and votes["v"] not in ("", "ended") and votes["every"] <= 1
        # a made-up identity is answered and counts nothing: the projector's count stays
        assert asked(server, "class", class_id, voter="watch-test-student")[1] == first
        assert asked(server, "votes", class_id)[1]["v"] == votes["v"]
        voted.filter(has_text="0 voted of 0 following").wait_for(timeout=10_000)
        teacher.get_by_role("button", name="Next step").click()
        teacher.get_by_text("Step 2 of 3").wait_for(timeout=30_000)
        assert int(asked(server, "class", class_id)[1]["v"]) > int(first["v"])
        teacher.get_by_role("button", name="End the class").click()
        teacher.wait_for_timeout(1000)
        assert asked(server, "class", class_id)[1]["v"] == "ended"
        assert asked(server, "votes", class_id)[1]["v"] == "ended"
    finally:
        teacher.context.close()


def test_a_student_asks_the_endpoint_between_moves_and_reruns_only_on_one(server, browser):
    """Between two moves a student's page asks the class's endpoint and sends the server
    nothing (no rerun); the teacher's move reaches it; the projector's count follows a
    vote without a rerun on a timer."""
    teacher, student = _tab(browser, (1920, 1080)), _tab(browser)
    try:
        class_id = present_lesson(teacher, server)
        student.goto(f"{server}/learn?class={class_id}")
        student.get_by_text("Following the teacher").wait_for(timeout=30_000)
        teacher.locator(".voted").filter(has_text="0 voted of 1 following").wait_for(
            timeout=30_000)
        student.wait_for_timeout(1500)  # the page's first runs over
        asks = len(student.watched)
        assert _quiet_frames(student, QUIET_MS) == 0  # no rerun between two moves
        class_asks = [r for r in student.watched[asks:] if f"/class/{class_id}" in r.url]
        assert len(class_asks) >= 2, [r.url for r in student.watched]
        assert all(r.headers.get(VOTER_HEADER.lower()) for r in class_asks)  # counted
        # the teacher's projector: quiet too (at most its heartbeat's rerun, once a minute)
        assert _quiet_frames(teacher, QUIET_MS) <= 1
        assert any(f"/votes/{class_id}" in r.url for r in teacher.watched)
        assert not any("token" in r.url for r in teacher.watched)
        student.get_by_text(CHOICES[0], exact=True).click()
        student.get_by_text("Your vote is in (round 1)").wait_for(timeout=30_000)
        teacher.locator(".voted").filter(has_text="1 voted of 1 following").wait_for(
            timeout=5_000)
        teacher.get_by_role("button", name="Next step").click()
        student.get_by_text("Step 2 of 3").wait_for(timeout=10_000)
        student.wait_for_timeout(1500)
        assert _quiet_frames(student, QUIET_MS) == 0
    finally:
        teacher.context.close()
        student.context.close()


def test_without_the_endpoint_the_page_reruns_at_the_interval_and_still_follows(browser):
    """``streamlit run app.py`` mounts no endpoint: the watch reruns its fragment at the
    interval (frames sent: what the test above counts as none), and the student follows."""
    folder = Path(tempfile.mkdtemp(prefix="stacklab-watch-"))
    env = {**os.environ, "STACKLAB_WORKERS": "1", "STACKLAB_RUNS": str(folder / "runs"),
           "STACKLAB_MODELS_DIR": str(_models_folder(folder / "models"))}
    process, url = start_streamlit(env, folder / "server.log", script="app.py")
    teacher, student = _tab(browser, (1920, 1080)), _tab(browser)
    try:
        assert asked(url, "class", "00000000")[1] == {}  # no endpoint here: the page
        class_id = present_lesson(teacher, url)
        student.goto(f"{url}/learn?class={class_id}")
        student.get_by_text("Following the teacher").wait_for(timeout=30_000)
        student.wait_for_timeout(1500)
        assert _quiet_frames(student, QUIET_MS) >= 2  # a rerun at each interval
        student.get_by_text(CHOICES[1], exact=True).click()
        teacher.locator(".voted").filter(has_text="1 voted of 1 following").wait_for(
            timeout=10_000)
        teacher.get_by_role("button", name="Next step").click()
        student.get_by_text("Step 2 of 3").wait_for(timeout=10_000)
    finally:
        teacher.context.close()
        student.context.close()
        process.terminate()
        process.wait(timeout=20)


def test_an_endpoint_poll_weighs_an_http_answer_not_a_rerun_and_a_student_counts_once():
    """The backpressure (`PollLoad`) of 300 students asking the class's endpoint: each poll
    costs the server an HTTP answer, so their interval stays the base where 300 reruns a
    second would widen it; and a student's endpoint polls and page runs are one follower."""
    from stacklab.serve.workers.job_polls import ANSWER_FLOOR_SECONDS, PollLoad
    from ui.polls import follower_of

    now = [0.0]
    watched = PollLoad(clock=lambda: now[0], cpu_clock=lambda: 0.0, floor_seconds=0.004)
    rerun = PollLoad(clock=lambda: now[0], cpu_clock=lambda: 0.0, floor_seconds=0.004)
    for student in range(300):
        watched.polled(follower_of(f"student-{student:04d}"), 0.0001, ANSWER_FLOOR_SECONDS)
        rerun.polled(f"session-{student}", 0.0001)
    assert watched.interval(1.0) == 1.0 < rerun.interval(1.0)
    watched.polled(follower_of("student-0001"), 0.002)  # that student's page ran once
    assert watched.followers() == 300
