"""Issue 42 in real Chromium on the real server: a phone's reload and a second scan of the
QR code are the same voter (its identity kept in the browser), and the votes' CSV downloads
with its rows from every place it is offered: the present view, after the class ended and
the class summary (from which the browser's Back returns). The server, the browser and
the helpers are tests/test_browser.py's."""

from __future__ import annotations

import csv
import io

import pytest

from test_browser import browser, present_lesson, reason, server  # noqa: F401
from ui.watch import VOTER_COOKIE

pytestmark = pytest.mark.skipif(reason is not None, reason=reason or "")

CHOICES = ("at most 0.3", "above 0.3")  # step 1 of `positions`


def downloaded(page, place) -> list[dict]:
    """Press the CSV's button in ``place`` and read the file Chromium saved."""
    with page.expect_download(timeout=30_000) as download:
        place.get_by_role("button", name="Download the votes (CSV)").click()
    return list(csv.DictReader(io.StringIO(open(download.value.path()).read())))


def counts(rows: list[dict]) -> list[tuple[str, str, str]]:
    return [(row["round"], row["choice"], row["count"]) for row in rows]


def test_a_reload_is_the_same_voter_and_the_csv_downloads_its_rows_everywhere(server, browser):
    teacher_context = browser.new_context(viewport={"width": 1920, "height": 1080},
                                          accept_downloads=True)
    phone_context = browser.new_context(viewport={"width": 390, "height": 844})
    teacher, phone = teacher_context.new_page(), phone_context.new_page()
    try:
        class_id = present_lesson(teacher, server)
        voted = teacher.locator(".voted")
        link = f"{server}/learn?class={class_id}"
        phone.goto(link)
        phone.get_by_text("Following the teacher").wait_for(timeout=30_000)
        phone.get_by_text(CHOICES[0], exact=True).click()
        phone.get_by_text("Your vote is in (round 1)").wait_for(timeout=30_000)
        voted.filter(has_text="1 voted of 1 following").wait_for(timeout=30_000)
        cookie = {c["name"]: c["value"] for c in phone_context.cookies()}
        assert cookie.get(VOTER_COOKIE + class_id)  # the browser keeps its identity

        phone.reload()  # the same phone: the same voter, its vote replaced
        phone.get_by_text("Following the teacher").wait_for(timeout=30_000)
        phone.get_by_text(CHOICES[1], exact=True).click()
        phone.get_by_text("Your vote is in (round 1)").wait_for(timeout=30_000)
        rescan = phone_context.new_page()  # a second scan of the QR code, a new tab
        rescan.goto(link)
        rescan.get_by_text("Following the teacher").wait_for(timeout=30_000)
        teacher.wait_for_timeout(2500)  # the projector's count after both
        voted.filter(has_text="1 voted of 1 following").wait_for(timeout=10_000)
        assert "2 voted" not in teacher.locator(".voted").first.inner_text()

        rows = downloaded(teacher, teacher)  # the present view
        assert counts(rows) == [("1", CHOICES[0], "0"), ("1", CHOICES[1], "1")]
        assert {row["lesson"] for row in rows} == {"positions"} and rows[0]["step"] == "1"

        teacher.get_by_role("button", name="Vote again").click()
        phone.get_by_text("Round 2: your choice goes to the class").wait_for(timeout=30_000)
        phone.get_by_text(CHOICES[0], exact=True).click()
        phone.get_by_text("Your vote is in (round 2)").wait_for(timeout=30_000)
        voted.filter(has_text="1 voted of 1 following").wait_for(timeout=30_000)
        both = [("1", CHOICES[0], "0"), ("1", CHOICES[1], "1"),
                ("2", CHOICES[0], "1"), ("2", CHOICES[1], "0")]
        assert counts(downloaded(teacher, teacher)) == both

        teacher.get_by_role("button", name="End the class").click()
        ended = teacher.locator(".st-key-votes_ended_bar")
        ended.wait_for(timeout=30_000)
        assert counts(downloaded(teacher, ended)) == both  # after the class ended

        ended.get_by_role("link", name="Class summary").click()
        teacher.get_by_role("heading", name="Class summary").wait_for(timeout=30_000)
        assert counts(downloaded(teacher, teacher)) == both  # the class summary
        teacher.go_back()  # the browser's Back: to the lesson, drawn again
        teacher.wait_for_url("**/learn**", timeout=30_000)
        teacher.get_by_role("heading", name="Learn", exact=True).wait_for(timeout=60_000)
        assert "Class summary" not in teacher.get_by_role("heading").all_inner_texts()
    finally:
        teacher_context.close()
        phone_context.close()


def test_homes_teach_card_leads_to_presenting_a_lesson(server, browser):
    page = browser.new_context(viewport={"width": 1366, "height": 768}).new_page()
    try:
        page.goto(server)
        page.get_by_role("link", name="Present a lesson to a class").click()
        page.get_by_text("Step 1 of 3").wait_for(timeout=30_000)
        assert "/learn" in page.url and "lesson=positions" in page.url
        page.get_by_role("button", name="Present this lesson to a class").wait_for()
        page.go_back()  # and Back returns Home
        page.get_by_role("link", name="Present a lesson to a class").wait_for(timeout=30_000)
    finally:
        page.context.close()
