"""The server's state in one object (`ui.hub.Hub`): made once per process however it is
first asked for (server.py's start, a page under AppTest or ``streamlit run app.py``, many
threads at once), its pool made only at first need, read alike by the pages and the watch
endpoints, and put back as new for a test with `Hub.reset`."""

from __future__ import annotations

import subprocess
import sys
from collections import OrderedDict
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

from ui.endpoints import routes
from ui.hub import BrowserSessions, Hub
from ui.wire import PREFIX

ROOT = Path(__file__).resolve().parents[1]

FIRST_USE = """
import sys, threading
from ui.hub import Hub

assert "streamlit" not in sys.modules, "the hub imported streamlit"
found, ready = [], threading.Barrier(16)

def ask():
    ready.wait()
    hub = Hub.current()
    found.append((hub, hub.pool()))

threads = [threading.Thread(target=ask) for _ in range(16)]
started = Hub.start() if sys.argv[1] == "start" else None
assert threading.enumerate() == [threading.main_thread()], "a pool made before it was needed"
[thread.start() for thread in threads]
[thread.join() for thread in threads]
assert len({id(hub) for hub, _ in found}) == 1 and len({id(pool) for _, pool in found}) == 1
assert started is None or found[0][0] is started
found[0][1].shutdown()
for thread in threading.enumerate():  # the fork server's warm-up ends before the process
    if thread is not threading.main_thread():
        thread.join(120)
print("one hub, one pool")
"""


@pytest.mark.parametrize("how", ["start", "first use"])
def test_one_hub_and_one_pool_however_many_threads_ask_first(how):
    """server.py's `Hub.start`, or no start at all (a page's first use): 16 threads asking
    at once find one hub and one pool, made only when asked for; no streamlit imported."""
    done = subprocess.run([sys.executable, "-c", FIRST_USE, how], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env={"STACKLAB_WORKERS": "1", "PATH": "/usr/bin"})
    assert done.returncode == 0 and "one hub, one pool" in done.stdout, done.stderr[-2000:]


def test_the_pages_and_the_endpoints_read_the_same_hub():
    """A teacher's page (AppTest, no server.py: the hub of first use) opens a class; the
    watch endpoints given that hub answer its version and count a student's poll."""
    from test_app import lesson_page

    from ui import polls, session

    teacher = lesson_page(lesson="positions", step="1")
    teacher.button(key="learn_present").click().run()
    class_id = teacher.session_state["class_id"]
    hub = Hub.current()
    assert session.classes() is hub.classes() and session.pool() is hub.pool()
    assert polls.load() is hub.load
    client = TestClient(Starlette(routes=routes(hub)))
    answer = client.get(f"{PREFIX}/class/{class_id}").json()
    assert answer["v"] == str(hub.classes().follow(class_id, None).version) != "ended"
    assert client.get(f"{PREFIX}/class/nosuchclass").json()["v"] == "ended"
    assert client.get(f"{PREFIX}/run/{'0' * 32}").json() == {
        "v": "unknown", "every": 1.0, "live": False}
    assert client.get(f"{PREFIX}/run/not-a-key").status_code == 404


def test_a_reset_puts_back_what_it_names_and_refuses_a_part_it_has_not():
    hub = Hub()
    load, assets, pictures = hub.load, hub.assets, hub.pictures
    load.polled("someone", 0.01)
    assets["/static/x.js"] = None
    hub.reset("load", "assets")
    assert hub.load is not load and hub.load.followers() == 0
    assert hub.assets is assets and not assets  # emptied where the middleware holds it
    assert hub.pictures is pictures  # not named: kept
    with pytest.raises(ValueError, match="no \\['pool s'\\]"):
        hub.reset("pool s")
    assert isinstance(hub.assets, OrderedDict)


def test_a_browser_session_is_connected_until_streamlit_says_it_is_gone():
    sessions = BrowserSessions()
    gone = {"s2"}
    assert sessions.connected("nobody")  # no session known: not detached
    sessions.register("a", "s1", lambda session: session not in gone)
    sessions.register("b", "s2", lambda session: session not in gone)
    assert sessions.connected("a") and not sessions.connected("b")
