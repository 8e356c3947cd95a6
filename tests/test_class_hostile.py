"""Issue 42's hostile student on the real server (server.py with the agent API on, as the
load test's: bench/loadtest.py's `Server`, its agent sessions and its `Watch`): a teacher
presents a lesson, a real student follows it and votes, and a script tries to end the
class, fill its voters and widen everyone's poll. The class stays live, its counts stay
what the students did, and the students' interval stays the same."""

from __future__ import annotations

import importlib.util
import re
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
sys.path.insert(0, str(ROOT / "bench"))
_spec = importlib.util.spec_from_file_location("loadtest_votes", ROOT / "bench" / "loadtest_votes.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)
loadtest = sys.modules["loadtest"]

from stacklab.serve.classroom.classes import MAX_CLASSES  # noqa: E402
from stacklab.serve.classroom.voters import ISSUE_BURST  # noqa: E402
from ui.watch import PREFIX, VOTER_HEADER  # noqa: E402

COUNTED = re.compile(r"(\d+) voted of (\d+) following")


@pytest.fixture(scope="module")
def server():
    server = loadtest.Server(max_sessions=MAX_CLASSES + ISSUE_BURST + 40)
    yield server
    server.close()


def get(server, path: str, voter: str | None = None) -> dict:
    request = urllib.request.Request(server.base + PREFIX + path,
                                     headers={VOTER_HEADER: voter} if voter else {})
    with urllib.request.urlopen(request, timeout=60) as response:
        return loadtest.json.loads(response.read())


def counted(projector) -> tuple[int, int]:
    snapshot, _ = projector.ask()
    voted, following = COUNTED.search(loadtest.texts(snapshot)).groups()
    return int(voted), int(following)


def follow(server, class_id: str):
    """A student's agent session on the class link, and the data of its page's watch (its
    voter identity among it, issued as a browser's page gets it)."""
    student = bench.Agent(server.base)
    snapshot, _ = student.ask(page="learn", query_params={"class": [class_id]})
    return student, loadtest.Watch.data(snapshot, "/class/")


def test_a_script_neither_ends_the_class_nor_fills_it_nor_widens_its_polls(server):
    teacher, class_id = bench.open_class(server)
    student, watched = follow(server, class_id)
    assert watched and watched.get("voter"), watched  # an identity the server issued
    every = get(server, f"/class/{class_id}", watched["voter"])["every"]
    snapshot, _ = student.ask(widget_state=bench.choice(student.snapshot, "above 0.3"))
    assert "Your vote is in (round 1)" in loadtest.texts(snapshot)
    assert counted(teacher) == (1, 1)
    votes_version = get(server, f"/votes/{class_id}")["v"]

    # 1,000 made-up identities, and made-up classes: nothing counted, nobody slower
    def made_up(n: int) -> dict:
        return get(server, f"/class/{class_id if n % 5 else f'{n:08x}'}",
                   f"{'x' * 12}{n:022d}")
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(made_up, range(1000)))
    assert {a["every"] for a in answers} == {every}
    assert get(server, f"/votes/{class_id}")["v"] == votes_version
    assert get(server, f"/class/{class_id}", watched["voter"])["every"] == every
    assert counted(teacher) == (1, 1)

    # scripted sessions at one address ask identities: a room's worth, not the class's 500
    issued = [follow(server, class_id)[1] for _ in range(ISSUE_BURST + 20)]
    assert sum(bool(d.get("voter")) for d in issued) <= ISSUE_BURST + 5  # + a refill a second
    assert counted(teacher)[0] == 1  # none of them voted

    # 260 sessions present a lesson: the teacher's class stays live and moves
    refused = 0
    for n in range(260):
        agent = bench.Agent(server.base)
        agent.ask(page="learn", query_params={"lesson": ["positions"], "step": ["1"]})
        snapshot, _ = agent.ask(trigger={"key": "learn_present"})
        words = loadtest.texts(snapshot)
        if f"this server has {MAX_CLASSES} classes open" in words:
            assert "try again in a few minutes" in words
            refused += 1
    assert refused >= 260 - MAX_CLASSES
    snapshot, _ = teacher.ask(trigger={"key": "learn_next"})
    assert "Step 2 of 3" in loadtest.texts(snapshot)
    assert get(server, f"/class/{class_id}", watched["voter"])["v"] != "ended"
    snapshot, _ = student.ask()
    assert "Following the teacher" in loadtest.texts(snapshot)
