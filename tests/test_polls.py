"""A lecture hall's polls (issue 38): a shared run's live view prepared once per evaluation
and handed to every watcher, its charts exactly what ``st.plotly_chart`` makes, and the
server's backpressure (the interval widens under load, and the page says so)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from stacklab.lab.figures.curves import training_curves
from ui import private_api
from test_app import live_text
from stacklab.serve.workers.job_polls import (POLL_SHARE, STEPS, PollLoad, load_note,
                                              poll_interval)

ROOT = Path(__file__).parent.parent
APP = str(ROOT / "app.py")
HISTORY = [{"step": s, "loss": 2.0 / (s + 1), "accuracy": min(1.0, s / 500)}
           for s in range(0, 1000, 50)]
LOSSES = [(s, 2.1 / (s + 1)) for s in range(0, 1000, 10)]


# -- the policy -----------------------------------------------------------------------------

@pytest.mark.parametrize("followers", [1, 10, 50, 99])
def test_a_server_with_room_keeps_each_pages_own_interval(followers):
    assert poll_interval(1.0, followers, 0.005) == 1.0
    assert poll_interval(0.5, followers, 0.002) == 0.5


def test_a_few_pages_on_a_busy_server_are_no_hall():
    assert poll_interval(0.5, 19, 0.2) == 0.5  # however dear: no "many students" for 19
    assert poll_interval(0.5, 20, 0.2) > 0.5


def test_the_interval_widens_with_the_load_and_keeps_the_polls_within_their_share():
    widened = [poll_interval(1.0, n, 0.005) for n in (100, 200, 300, 500, 1000, 5000)]
    assert widened == sorted(widened) and widened[0] == 1.0 and widened[-1] == STEPS[-1]
    for n, every in zip((200, 300, 500, 1000), widened[1:5]):
        assert every in STEPS and n * 0.005 / every <= POLL_SHARE  # the polls fit their share
    assert poll_interval(1.0, 300, 0.005) > poll_interval(1.0, 300, 0.001)  # dearer polls: wider


def test_the_load_counts_sessions_that_polled_lately_and_what_a_poll_cost():
    now = [0.0]
    load = PollLoad(clock=lambda: now[0], cpu_clock=lambda: 0.0, floor_seconds=0.004)
    for session in range(400):
        load.polled(f"s{session}", 0.006)
    assert load.followers() == 400 and load.poll_seconds() == pytest.approx(0.010)
    assert load.interval(1.0) == 8  # 400 polls of 10 ms in 0.7 of a core: every 5.7 s, so 8
    now[0] = 30.0  # they left: nobody polled for the window
    load.polled("last", 0.006)
    assert load.followers() == 1 and load.interval(1.0) == 1.0


def test_a_widened_interval_holds_before_it_narrows_so_pages_do_not_flicker():
    """A changed interval reruns every following page once: wider at once, narrower only
    after the wider one has held for `HOLD_SECONDS`."""
    now = [0.0]
    load = PollLoad(clock=lambda: now[0], cpu_clock=lambda: 0.0, floor_seconds=0.004)

    def hall(cost: float) -> None:
        for session in range(400):
            load.polled(f"s{session}", cost)

    hall(0.006)
    assert load.interval(1.0) == 8  # 400 x 10 ms
    now[0] = 2.0
    for _ in range(60):
        hall(0.0)  # polls grow cheap: 400 x 4 ms would fit every 3 s
    assert load.poll_seconds() == pytest.approx(0.004, abs=1e-4)
    assert load.interval(1.0) == 8  # held
    now[0] = 10.5
    hall(0.0)
    assert load.interval(1.0) == 3  # held long enough: narrower now
    now[0] = 11.0
    hall(0.05)
    assert load.interval(1.0) > 3  # dearer polls: wider at once


def test_a_server_whose_cpu_goes_to_polls_widens_them_however_cheap_each_script_is():
    """Polls that rerun whole pages (the agent API's), or a server busy with more than
    polls: the process's CPU per poll counts, not only the script's."""
    now, cpu = [0.0], [0.0]
    load = PollLoad(clock=lambda: now[0], cpu_clock=lambda: cpu[0], floor_seconds=0.004)
    for second in range(4):  # 100 sessions polling every second, 12 ms of server CPU each
        now[0], cpu[0] = float(second), second * 100 * 0.012
        for session in range(100):
            load.polled(f"s{session}", 0.0005)
    assert load.poll_seconds() == pytest.approx(0.012, rel=0.05)
    assert load.interval(1.0) == 2  # 100 x 12 ms in 0.7 of a core: every 1.7 s, so 2


def test_the_cpu_before_a_crowd_polls_is_no_polls():
    """A server's load is made at start-up (its hub): the seconds it spends starting and
    opening a teacher's pages among a few polls, or in a quiet hour between two classes,
    are not what a poll costs. (They were: half a second of start-up shared by one poll
    widened a lesson's 100 students to every 20 s at once, and each missed a move.)"""
    now, cpu = [0.0], [0.0]
    load = PollLoad(clock=lambda: now[0], cpu_clock=lambda: cpu[0], floor_seconds=0.004)
    now[0], cpu[0] = 4.0, 0.5  # starting: one page's poll after half a second of CPU
    load.polled("teacher", 0.01)
    now[0], cpu[0] = 60.0, 5.0  # a minute of opening pages, no poll
    for second in range(3):  # then 100 students ask every second, 2 ms of server CPU each
        now[0], cpu[0] = 60.0 + second, 5.0 + second * 100 * 0.002
        for session in range(100):
            load.polled(f"s{session}", 0.0001, 0.0015)
            assert load.interval(1.0) == 1.0, (second, session, load.poll_seconds())
    now[0], cpu[0] = 64.0, 5.0 + 3 * 100 * 0.002
    load.polled("s0", 0.0001, 0.0015)  # a window the crowd's polls filled: measured
    assert load.poll_seconds() == pytest.approx(0.002, rel=0.3)
    now[0], cpu[0] = 4000.0, 60.0  # an hour later, the next class
    load.polled("s0", 0.0001, 0.0015)
    assert load.poll_seconds() < 0.01


def test_a_widened_interval_is_said_calmly_and_a_normal_one_not_at_all():
    assert load_note(1.0, 1.0, 40) is None
    note = load_note(1.0, 3, 300)
    assert "Many students are connected" in note and "updates every 3 s" in note


# -- the prepared charts ----------------------------------------------------------------------

def _charts_app():
    import streamlit as st

    from stacklab.lab.figures import describe, fit_title
    from stacklab.lab.figures.curves import training_curves
    from stacklab.serve.workers.job_frame import prepare
    from ui.figures import prepared_chart
    from tests.test_polls import HISTORY, LOSSES

    figure = fit_title(training_curves(HISTORY, LOSSES), 700)  # as `prepare` fits it
    st.plotly_chart(figure, key="chart", alt=describe(figure))
    prepared_chart(st, prepare(figure, 700), key="chart_prepared")


@pytest.mark.skipif(not private_api.BUILDS_CHARTS,
                    reason="the public fallback: st.plotly_chart itself draws a prepared chart")
def test_a_prepared_chart_is_the_element_st_plotly_chart_makes():
    at = AppTest.from_function(_charts_app, default_timeout=60).run()
    assert not at.exception
    made, prepared = (chart.proto for chart in at.get("plotly_chart"))
    assert prepared.spec == made.spec and prepared.config == made.config
    assert prepared.alt == made.alt and "held-out accuracy" in made.alt  # its text alternative
    assert prepared.theme == made.theme and prepared.form_id == made.form_id
    assert made.id != prepared.id  # keyed apart, as two charts on a page are


def test_the_curves_are_the_figure_plotlys_own_calls_and_check_make():
    import plotly.graph_objects as go

    figure = training_curves(HISTORY, LOSSES)
    checked = go.Figure(figure.to_dict())  # plotly's check of every property passes
    assert [trace.name for trace in checked.data] == [
        "training loss (one batch)", "held-out loss", "held-out accuracy"]
    assert checked.layout.yaxis.type == "log" and checked.layout.yaxis2.tickformat == ".1f"


def test_a_frame_is_prepared_once_per_evaluation_and_shared():
    import json

    from stacklab.serve.workers.job_figures import JobFigures

    shared = JobFigures("k")
    first = shared.frame(tuple(HISTORY), tuple(LOSSES), None, 700, 15)
    assert shared.frame(tuple(HISTORY), tuple(LOSSES), None, 700, 15) is first
    longer = (*HISTORY, {"step": 1000, "loss": 0.001, "accuracy": 1.0})
    assert shared.frame(longer, tuple(LOSSES), None, 700, 15) is not first  # a new evaluation
    live = shared.frame(longer[:5], tuple(LOSSES), None, 700, 15, live=True)
    assert live.evaluations == len(longer)  # a live run's frame is at most FRAME_SECONDS old
    spec = json.loads(first.curves.spec)  # the curves of every evaluation so far, as JSON
    assert [trace["name"] for trace in spec["data"]][-1] == "held-out accuracy"
    assert first.curves.height == 520 and first.pattern is None


def test_a_phones_frame_is_its_own_and_kept_beside_the_laptops():
    """A hall of laptops and phones shares two frames per evaluation: the phones' one holds
    the figures laid out for a phone (`stacklab.figures.phone_figure`), both carry the
    figures' text alternatives, and neither pushes the other out."""
    import json

    from stacklab.lab.figures import PHONE_WIDTH
    from stacklab.serve.workers.job_figures import JobFigures

    shared = JobFigures("k")
    laptop = shared.frame(tuple(HISTORY), tuple(LOSSES), None, 700, 15)
    phone = shared.frame(tuple(HISTORY), tuple(LOSSES), None, PHONE_WIDTH, 15, phone=True)
    assert phone is not laptop and phone.phone and not laptop.phone
    assert shared.frame(tuple(HISTORY), tuple(LOSSES), None, 700, 15) is laptop
    assert shared.frame(tuple(HISTORY), tuple(LOSSES), None, PHONE_WIDTH, 15, phone=True) is phone
    legend = json.loads(phone.curves.spec)["layout"]["legend"]
    assert legend["orientation"] == "h" and legend["font"]["size"] >= 12  # a row below the plot
    assert laptop.curves.alt == phone.curves.alt and "held-out accuracy" in laptop.curves.alt


# -- the page under load -----------------------------------------------------------------------

@pytest.fixture
def hall():
    """Load the server's poll meter as a hall of ``followers`` sessions leaves it; a fresh
    meter afterwards, so that no other test's pages poll as if under load."""
    from ui.hub import Hub

    def loaded(followers: int) -> None:
        for session in range(followers):
            Hub.current().load.polled(f"hall-{session}", 0.01)

    yield loaded
    Hub.current().reset("load")


def test_a_loaded_server_widens_a_shared_runs_poll_and_the_page_says_so(hall):
    at = AppTest.from_file(APP, default_timeout=60)
    for key, value in dict(task="reverse", steps="20000", target_accuracy="none",
                           seed="83").items():
        at.query_params[key] = value
    at.run()
    at.switch_page("views/train.py").run()
    at.button(key="train_train").click().run()
    hall(600)
    at.run()
    said = live_text(at)  # the live view's words (ui.live_run), as its component has them
    assert "Many students are connected" in said and "updates every" in said
    at.button(key="train_stop").click().run()


def test_a_loaded_server_widens_a_followed_lessons_poll_and_the_page_says_so(hall):
    teacher = AppTest.from_file(APP, default_timeout=60)
    teacher.query_params["lesson"], teacher.query_params["step"] = "positions", "1"
    teacher.run()
    teacher.button(key="learn_present").click().run()
    student = AppTest.from_file(APP, default_timeout=60)
    student.query_params["class"] = teacher.session_state["class_id"]
    hall(600)
    student.run()
    assert not student.exception
    assert "updates every" in " ".join(c.value for c in student.caption)
    teacher.button(key="learn_next").click().run()
    assert "Step 2 of" in student.run().get("progress")[0].proto.text  # it still follows
    teacher.button(key="class_end").click().run()
