"""The load test's students (bench/loadtest.py) against a real server: the agent-API
driver itself is tested here, with a class of three, so `make loadtest` measures students
who really train and really see the finished pattern figure."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
_spec = importlib.util.spec_from_file_location("loadtest", ROOT / "bench" / "loadtest.py")
loadtest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(loadtest)


@pytest.fixture(scope="module")
def server():
    server = loadtest.Server(max_sessions=20)
    yield server
    server.close()


def test_three_agent_students_on_one_link_cause_one_training_and_see_the_figure(server):
    query = loadtest.link_query(seed="4242")
    students = [loadtest.AgentStudent(server.base, query, delay=0.0) for _ in range(3)]
    for student in students:
        student.start()
    for student in students:
        student.join(timeout=240)
    assert [s.status for s in students] == ["finished"] * 3
    assert all(loadtest.pattern_shown(s.snapshot) for s in students)
    assert server.trainings() == 1 and server.stored() == 1
    keys = {s.snapshot["query_params"]["run"][0] for s in students}
    assert len(keys) == 1  # everyone's URL names the one run
    # the link pins every control: no student saw a setting's widget
    shown = {action["key"] for s in students for action in s.snapshot["actions"]}
    assert not {key for key in shown if re.fullmatch(r"train_(task|seq_len|steps|seed)", key)}


def test_a_student_on_the_run_link_sees_the_finished_figure_with_no_click(server):
    [key] = {s for s in loadtest.RunStore(server.runs).keys()} or [None]
    assert key is not None, "runs after the one-link test"
    student = loadtest.AgentStudent(server.base, {**loadtest.link_query(seed="4242"), "run": key},
                                    delay=0.0)
    student.run()
    assert student.status == "finished" and student.requests == 1  # the first answer has it
    assert server.trainings() == 1


def test_students_following_a_presented_lesson_see_each_of_the_teachers_moves(server):
    """The `lesson_100` scenario's driver with three students: every move of the teacher
    reaches every student's page, and the report says how long each took."""
    report = loadtest.lesson_class(server, 3, arrival=1.0, move_seconds=4.0)
    assert report["statuses"] == {"finished": 3} and report["missed_moves"] == 0
    assert report["step_change_s"]["count"] == 3 * len(loadtest.MOVES)
    assert report["agent_response_bytes"]["p50"] > 0 and report["server_peak_rss_mb"] > 0
    # as a browser: the class's endpoint between moves, a rerun only when the class changed
    # (a move, and the round the teacher's page opens on a step that asks a prediction)
    assert report["agent_requests"] <= 3 * (1 + 2 * len(loadtest.MOVES))
    assert report["endpoint_polls"] > report["agent_requests"]


def test_scenarios_are_chosen_on_the_command_line():
    import subprocess
    import sys

    wrong = subprocess.run([sys.executable, str(ROOT / "bench" / "loadtest.py"), "--only",
                            "hall300,nope"], capture_output=True, text=True, timeout=60)
    assert wrong.returncode == 2 and "no scenario nope" in wrong.stderr
    assert {"hall300", "hall500", "run_link_300", "lesson_100"} <= set(loadtest.SCENARIOS)
    assert set(loadtest.TARGETS) <= set(loadtest.SCENARIOS)


def test_the_agent_api_is_the_load_tests_alone():
    """`make run` and the app's config never switch the agent API on."""
    run_target = re.search(r"^run:.*?(?=^\S)", (ROOT / "Makefile").read_text(), re.S | re.M)[0]
    assert "streamlit run" in run_target and "enableAgentApi" not in run_target
    assert "enableAgentApi" not in (ROOT / ".streamlit" / "config.toml").read_text()
