"""The lecture-hall load test: what a student waits for, on the real server.

    make loadtest                      # the full classes (under 20 minutes on 2 cores)
    LOADTEST_SCALE=0.1 make loadtest   # a tenth of each class (at least 3 students)
    LOADTEST_ONLY=one_link_30,run_link_100 make loadtest   # some scenarios only
    python bench/loadtest.py --only hall300 --scale 0.2    # the same, from the command line

Each scenario starts a Streamlit server of its own, with an empty run store (its own
``STACKLAB_RUNS``), training in worker processes, and Streamlit's agent API switched on
for this server only (``--server.enableAgentApi true``; ``make run`` never does). The
students are browserless sessions driven through that API (`AgentStudent`): each one is a
real session on the server, running the app's real scripts, widgets and fragments, but
nobody draws its page on the server's two cores, as in a classroom where each student's
browser runs on their own machine. One real Chromium student (`BrowserStudent`, at
normal priority) arrives in the middle of the crowd.

A student's clock runs from opening the link to the trained pattern figure:

- an agent student opens the link (a new session on the page it names, with its query
  parameters), presses Train when the page offers it and shows no finished run, and then
  does what the browser does: while the run is live the page shows its live view
  (`ui.live_run`), whose component data names the run's watch endpoint, and the agent asks
  that endpoint over HTTP at the interval it gives (and its pictures, once a new frame is
  in), with no rerun of the page; when the endpoint says the run has ended, it asks the
  agent API again (a rerun of the whole page: the agent API cannot rerun a fragment
  alone) until a response holds the finished run's pattern figure. Where the page shows
  no live view it polls by reruns at the page's interval. The endpoint's requests and the
  agent reruns are reported apart (``endpoint_requests``, ``agent_requests``);
- the browser opens the link, presses Train when the page shows it (not on a ``run=``
  link), and stops the clock when the pattern heatmap is drawn on screen.

Scenarios (students arrive over ``ARRIVAL_SECONDS``):

- ``one_link_30``, ``one_link_100``: the teacher's link (``reverse``, every control
  pinned by ``hide=``); everyone presses Train, one training serves them all;
- ``seeds_30``: 30 students who each changed the seed (30 runs, the browser's a 31st);
- ``run_link_100``: the teacher trains, then the browser opens the teacher's ``run=KEY``
  link alone on the idle server, then 100 students and the browser open it together;
- ``seeds_30_hostile``: 30 other seeds plus one hostile (agent) student who opens the
  review's worst links (`HOSTILE`): two that must be refused before Train (``E_BUDGET``)
  and a million-row table, trained and then opened on Explore;
- ``hall300``, ``hall500``: a lecture hall on the teacher's link (issue 38), 300 and 500
  students and the browser: one training, and every poll of it served from the run's live
  view prepared once per evaluation; under load the page widens its poll interval and says
  so ("updates every N s"), and the agent students ask as the page says;
- ``run_link_300``: as ``run_link_100``, with 300 students on the finished run's link;
- ``lesson_100``: a teacher presents a lesson and 100 students follow its class link; the
  teacher moves three times, and each move's seconds to each student's page are measured.
  Each student follows as a browser does (`Watch`): it asks the class's watch endpoint
  at the page's interval and reruns its page only when the teacher moved; both kinds of
  request are counted and timed;
- ``ray_hall300``: past one server: a local Ray head and two app servers on it (the Ray
  recipe), the 300 students of one link split between them (a load balancer with sticky
  sessions keeps each on one): one training for the cluster;
- ``uploads_30``: a quiet class on the teacher's link, then a second class (another seed)
  while three Chromium tabs upload a wide table each on Explore at once (`WIDE`, the
  security review's 15.9 MB upload that once took 36 s and 0.8 GB in the server process):
  the students' p95 beside the quiet one, each upload's seconds to its scores on the page,
  and the server process's peak memory (the analyses run in worker processes).

Measured per scenario: p50/p95/max of the students' times, the browser's, the number of
trainings on the scenario's server (the pool's log lines and the run store's folders), the server process's CPU
seconds per session, and the load test's own CPU (parsing the responses). A row is printed
as each scenario ends; everything goes to bench/loadtest.json.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).parent.parent
sys.path.insert(0, str(ROOT / "lib"))

from stacklab.lab.runs.store import RunStore  # noqa: E402
from stacklab.serve.links.experiment import HIDEABLE, from_query, to_query  # noqa: E402

SCALE = float(os.environ.get("LOADTEST_SCALE", "1"))
ONLY = [name for name in os.environ.get("LOADTEST_ONLY", "").split(",") if name]
ARRIVAL_SECONDS = 10.0  # a class opens the link over this long
WORKERS = os.cpu_count() or 1  # the app's pool: one worker per core (STACKLAB_WORKERS)
BROWSER_SETTLE_SECONDS = 2.0  # a just-launched Chromium's own start-up work, let finish
STUDENT_TIMEOUT = 240.0  # a student who waited this long is reported as timed out
CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run"]
PATTERN = "Attention by position alone"  # the caption of `reverse`'s pattern figure
PATTERN_KEY = "train_pattern_"  # the Train page's key of the pattern chart
FINISHED = re.compile(r"Status: \**finished")
ENDED = re.compile(r"Status: \**(stopped|diverged|failed)")
LOAD_NOTE = re.compile(r"updates every ([\d.]+) s")  # the page's backpressure (ui/polls.py)
LIVE_COMPONENT = "stacklab.live_run"  # a live run's view, drawn from its endpoint (ui/live_run.py)
TEACHER = {"task": "reverse", "seq_len": "16", "steps": "400", "device": "cpu"}
BARE = {"task": "reverse", "seed": "0"}  # /train?task=reverse&seed=0: every control shown


def class_size(n: int) -> int:
    return max(3, round(n * SCALE))


def link_query(**changes) -> dict[str, str]:
    """The teacher's link as query parameters: the experiment with every control pinned."""
    experiment, problems = from_query({**TEACHER, **changes, "hide": ",".join(HIDEABLE)})
    assert not problems, problems
    return to_query(experiment)


# -- the server --------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads) so far."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Server:
    """A Streamlit server of the app (or of another ``script``) with an empty run store,
    and the agent API on for ``max_sessions`` sessions when that is not 0."""

    def __init__(self, max_sessions: int = 0, env: dict | None = None, runs: Path | None = None,
                 script: Path = ROOT / "server.py"):
        """``env``: more of the server's environment (``STACKLAB_RAY_ADDRESS``: an app
        server of a Ray cluster); ``runs``: a run store it shares with other app servers."""
        self.folder = Path(tempfile.mkdtemp(prefix="stacklab-loadtest-"))
        self.runs = runs or self.folder / "runs"
        self.log = self.folder / "server.log"
        port = free_port()
        self.base = f"http://127.0.0.1:{port}"
        env = {**os.environ, **(env or {}), "STACKLAB_RUNS": str(self.runs),
               "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "lib"),
                                                           os.environ.get("PYTHONPATH")]))}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", str(script),
             "--server.port", str(port), "--server.headless", "true",
             *(["--server.enableAgentApi", "true", "--server.agentMaxSessions",
                str(max_sessions)] if max_sessions else []),
             "--browser.gatherUsageStats", "false"],
            cwd=ROOT, env=env, stdout=self.log.open("w"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                if urllib.request.urlopen(f"{self.base}/_stcore/health", timeout=2).read() == b"ok":
                    return
            except OSError:
                time.sleep(0.3)
        self.close()
        raise SystemExit(f"the server did not start; see {self.log}")

    def cpu(self) -> float:
        return cpu_seconds(self.process.pid)

    def trainings(self) -> int:
        """Runs the pool trained (its log says "training run KEY" for each)."""
        return self.log.read_text().count("stacklab.pool INFO training run ")

    def trained_keys(self) -> set[str]:
        """The keys of the runs the pool trained (or, on Ray, followed from its start)."""
        return set(re.findall(r"stacklab.pool INFO training run (\w+)", self.log.read_text()))

    def training_seconds(self) -> list[float]:
        """Each finished training's own wall time, from the pool's log ("... in 2.91 s")."""
        return [float(s) for s in re.findall(r"INFO run \w+ finished: \d+ steps in ([\d.]+) s",
                                             self.log.read_text())]

    def stored(self) -> int:
        return len(RunStore(self.runs).keys()) if self.runs.exists() else 0

    def settle(self, key: str, timeout: float = 30.0) -> None:
        """Wait until the run ``key``'s worker has drawn its figures (the run is stored
        first, its figures after), then a second more: the server idle again."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            run = RunStore(self.runs).open(key)
            if run is not None and run.figures() is not None:
                break
            time.sleep(0.1)
        time.sleep(1.0)

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
        shutil.rmtree(self.runs, ignore_errors=True)


# -- the students ------------------------------------------------------------------------

class AgentError(Exception):
    pass


def interact(base: str, body: dict, timeout: float = 120.0, sizes: list | None = None) -> dict:
    """One agent API request; a run that outlasts the server's wait is collected. The
    response's bytes (uncompressed: the load test asks for no gzip) go into ``sizes``."""
    data = json.dumps(body).encode()
    while True:
        request = urllib.request.Request(f"{base}/_stcore/agent/interact", data=data,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                raw = response.read()
                answer, status = json.loads(raw), response.status
            if sizes is not None:
                sizes.append(len(raw))
        except urllib.error.HTTPError as err:
            raise AgentError(f"{err.code}: {err.read()[:300]!r}") from None
        if status == 202 and answer.get("session_id"):  # wait_timed_out: still running
            data = json.dumps({"session_id": answer["session_id"]}).encode()
            continue
        return answer


def nodes(snapshot: dict):
    """Every element of a snapshot's tree (or of one element's, given the element)."""
    stack = [snapshot.get("tree") or {}] if "tree" in snapshot or "type" not in snapshot \
        else [snapshot]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.get("children") or []))


def live_watch(snapshot: dict) -> dict | None:
    """The data of the live run's view (`ui.live_run`: a component the browser draws from
    the run's watch endpoint), or None when the page shows no live run."""
    for node in nodes(snapshot):
        props = node.get("props") or {}
        if props.get("component_name") == LIVE_COMPONENT:
            return props.get("data") or {}
    return None


def texts(snapshot: dict) -> str:
    """All the text a snapshot's elements show, one element a line (a live run's view: its
    words, as the component's data has them)."""
    found = []
    for node in nodes(snapshot):
        props = node.get("props") or {}
        found += [value for name, value in props.items()
                  if name in ("body", "label", "text", "caption") and isinstance(value, str)]
        if props.get("component_name") == LIVE_COMPONENT:
            found.append(str((props.get("data") or {}).get("text", "")))
    return "\n".join(found)


def pattern_shown(snapshot: dict) -> bool:
    """Whether the page shows the finished run and its pattern figure."""
    spots = [node for node in nodes(snapshot) if str(node.get("key", "")).startswith(PATTERN_KEY)]
    # the chart, or the still picture a student on the teacher's link sees first
    drawn = any(inner.get("type") == "plotly_chart" or "data:image/svg+xml" in str(
        (inner.get("props") or {}).get("body", "")) for spot in spots for inner in nodes(spot))
    return drawn and bool(FINISHED.search(texts(snapshot)))


def can_press(snapshot: dict, key: str) -> bool:
    return any(action.get("key") == key and not action.get("disabled")
               for action in snapshot.get("actions") or [])


def poll_seconds(text: str) -> float:
    """The Train page's poll interval for what it shows (see `every` in
    ui/polls.py): seldom while queued, less often for a run many sessions watch, and
    as the page says when the server widened it ("updates every N s": its backpressure)."""
    if widened := LOAD_NOTE.search(text):
        return float(widened[1])
    if queued := re.search(r"Status: \*\*queued\*\* — position (\d+)", text):
        return 2.0 if int(queued[1]) <= WORKERS else 4.0
    shared = re.search(r"shared with (\d+) other session", text)
    return 1.0 if shared and int(shared[1]) >= 4 else 0.5


class AgentStudent(threading.Thread):
    """A browserless student: opens ``query`` on ``page`` after ``delay`` seconds and waits
    for the finished pattern figure (see the module docstring)."""

    def __init__(self, base: str, query: dict, delay: float, page: str = "train"):
        super().__init__(daemon=True)
        self.base, self.query, self.delay, self.page = base, query, delay, page
        self.seconds: float | None = None
        self.status = "waiting"
        self.requests = 0
        self.latencies: list[float] = []  # seconds each agent request took
        self.sizes: list[int] = []  # bytes of each agent response
        self.session: str | None = None
        self.snapshot: dict = {}
        self.polls = 0  # requests to the run's watch endpoint (answers and pictures)
        self.poll_latencies: list[float] = []
        self.poll_sizes: list[int] = []  # bytes of each, as sent (pictures gzipped)

    def ask(self, **body) -> dict:
        if self.session:
            body["session_id"] = self.session
        asked = time.monotonic()
        self.snapshot = interact(self.base, body, sizes=self.sizes)
        self.latencies.append(time.monotonic() - asked)
        self.session = self.snapshot.get("session_id", self.session)
        self.requests += 1
        return self.snapshot

    def get(self, path: str, packed: bool = False) -> tuple[int, dict, bytes]:
        """One request to a watch endpoint (``packed``: gzip taken, as a browser takes it)."""
        request = urllib.request.Request(self.base + path, headers={
            "Accept-Encoding": "gzip"} if packed else {})
        asked = time.monotonic()
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                status, headers, body = response.status, response.headers, response.read()
        except urllib.error.HTTPError as err:
            status, headers, body = err.code, err.headers, b""
        self.poll_latencies.append(time.monotonic() - asked)
        self.poll_sizes.append(len(body))
        self.polls += 1
        return status, headers, body

    def watch(self, data: dict, until: float) -> None:
        """What the live view's component does in a browser: ask the run's endpoint every
        ``every`` s (its pictures too, once a new frame is in) while the run is live;
        return when it has ended (or no endpoint answers), for the page to be drawn again."""
        have, every = data.get("frame"), float(data.get("every") or 1.0)
        while time.monotonic() < until:
            time.sleep(every)
            status, _, body = self.get(data["url"])
            answer = json.loads(body) if status == 200 else {}
            if not answer.get("live"):
                return
            every = float(answer.get("every") or every)
            if answer.get("frame") != have:
                status, headers, _ = self.get(data["pictures"], packed=True)
                if status == 200:
                    have = int(headers.get("X-Stacklab-Frame") or 0)

    def run(self) -> None:
        time.sleep(self.delay)
        opened = time.monotonic()
        try:
            self.status = "opening"
            snapshot = self.ask(page=self.page, query_params={k: [v] for k, v in self.query.items()})
            pressed = False
            while time.monotonic() - opened < STUDENT_TIMEOUT:
                if pattern_shown(snapshot):
                    self.seconds, self.status = time.monotonic() - opened, "finished"
                    return
                text = texts(snapshot)
                if ended := ENDED.search(text):
                    self.status = ended[1]
                    return
                if not pressed and can_press(snapshot, "train_train") and "Status:" not in text:
                    pressed, self.status = True, "pressed"
                    snapshot = self.ask(trigger={"key": "train_train"})
                    continue
                if (live := live_watch(snapshot)) is not None:  # the endpoint, no rerun
                    self.watch(live, opened + STUDENT_TIMEOUT)
                else:
                    time.sleep(poll_seconds(text))
                snapshot = self.ask()
            self.status = "timed out"
        except Exception as err:  # noqa: BLE001 - a load test reports, it does not stop
            self.status = f"error: {type(err).__name__}: {err}"[:300]


class BrowserStudent(threading.Thread):
    """The real Chromium student: launched first, then at ``delay`` it opens ``url`` in a
    fresh context, presses Train if the page shows it, and waits for the heatmap."""

    def __init__(self, url: str, delay: float):
        super().__init__(daemon=True)
        self.url, self.delay = url, delay
        self.ready = threading.Event()
        self.go = threading.Event()
        self.seconds: float | None = None
        self.seen: dict = {}  # where Chromium's time went (`visit`)
        self.status = "waiting"

    def run(self) -> None:
        from playwright.sync_api import sync_playwright

        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
                self.ready.set()
                self.go.wait()
                time.sleep(self.delay)
                self.seconds = visit(browser, self.url, self.seen)
                self.status = "finished"
                browser.close()
        except Exception as err:  # noqa: BLE001
            self.status = f"error: {type(err).__name__}: {err}"[:300]
        finally:
            self.ready.set()


# plotly's heatmap drawn, or the still picture of the pattern figure loaded (views/train.py)
HEATMAP_DRAWN = """() => [...document.querySelectorAll('.js-plotly-plot')].some(
    plot => (plot._fullData || []).some(trace => trace.type === 'heatmap')
            && plot.querySelector('.heatmaplayer image, .hm image'))
  || [...document.querySelectorAll('[class*=st-key-train_pattern_] img')].some(
    img => img.complete && img.naturalWidth > 0)"""


# What the page shows, asked every 50 ms with plain DOM queries: "drawn" once the finished
# run's heatmap is on screen, "train" while a Train button offers a run not yet asked for.
# (Playwright's role and text locators, polled on every frame, cost the page's own main
# thread enough to slow what they measure.)
PAGE_STATE = """() => {
  const alerts = [...document.querySelectorAll('[data-testid=stAlert]')].map(a => a.textContent);
  if (alerts.some(text => /Status: finished/.test(text)) && (%s)()) return "drawn";
  const train = [...document.querySelectorAll('button')].find(
    button => button.textContent.trim() === 'Train' && !button.disabled);
  return train && !alerts.some(text => /Status:/.test(text)) ? "train" : null;
}""" % HEATMAP_DRAWN


BROWSER_METRICS = ("TaskDuration", "ScriptDuration", "LayoutDuration", "RecalcStyleDuration")


def visit(browser, url: str, seen: dict | None = None) -> float:
    """Seconds from opening ``url`` in a fresh context to the finished run's heatmap,
    pressing Train first where the page offers it (a link without a run). ``seen`` gets
    where Chromium's time went until then (its performance timeline, `BROWSER_METRICS`, in
    seconds of its main thread) and the websocket messages the page received and sent."""
    context = browser.new_context(viewport={"width": 1366, "height": 768})
    page = context.new_page()
    timeout = STUDENT_TIMEOUT * 1000
    frames = {"ws_received": 0, "ws_received_bytes": 0, "ws_sent": 0}

    def watch(ws) -> None:
        ws.on("framereceived", lambda f: frames.update(
            ws_received=frames["ws_received"] + 1,
            ws_received_bytes=frames["ws_received_bytes"] + len(f if isinstance(f, (bytes, str)) else b"")))
        ws.on("framesent", lambda f: frames.update(ws_sent=frames["ws_sent"] + 1))

    page.on("websocket", watch)
    timeline = context.new_cdp_session(page)
    timeline.send("Performance.enable")
    try:
        opened = time.monotonic()
        page.goto(url, timeout=timeout)
        deadline, pressed = opened + STUDENT_TIMEOUT, None
        while (state := page.wait_for_function(PAGE_STATE, timeout=timeout,
                                               polling=50).json_value()) != "drawn":
            if time.monotonic() > deadline:
                raise TimeoutError(f"no heatmap after {STUDENT_TIMEOUT:.0f} s")
            if state == "train" and (pressed is None or time.monotonic() - pressed > 5):
                page.get_by_role("button", name="Train", exact=True).click(timeout=timeout)
                pressed = time.monotonic()  # pressed again if it still shows after 5 s
            time.sleep(0.05)  # the click's rerun has not reached the page yet
        seconds = time.monotonic() - opened
        if seen is not None:
            metrics = {m["name"]: m["value"] for m in timeline.send("Performance.getMetrics")["metrics"]}
            seen.update({name: round(metrics.get(name, 0.0), 2) for name in BROWSER_METRICS},
                        **frames, wall_s=round(seconds, 2))
        page.get_by_text(PATTERN, exact=True).first.wait_for(timeout=timeout)  # its caption
        return seconds
    finally:
        context.close()


# -- scenarios ---------------------------------------------------------------------------

def endpoint_polls(students: list) -> dict:
    """The students' requests to the run's watch endpoint, beside their agent reruns."""
    return {"endpoint_requests": sum(s.polls for s in students),
            "endpoint_request_s": distribution([t for s in students for t in s.poll_latencies]),
            "endpoint_response_bytes": distribution([b for s in students for b in s.poll_sizes])}


def distribution(values: list[float]) -> dict:
    values = sorted(values)
    if not values:
        return {}
    nearest_rank = max(0, math.ceil(0.95 * len(values)) - 1)  # the 95th of 100 values
    return {"count": len(values), "p50": round(statistics.median(values), 2),
            "p95": round(values[nearest_rank], 2), "max": round(values[-1], 2)}


def descendants(pid: int) -> list[int]:
    """The processes under ``pid`` (its children, theirs, ...): the pool's fork server and
    worker processes under a server."""
    found, stack = [], [pid]
    while stack:
        for task in Path(f"/proc/{stack.pop()}/task").glob("*"):
            try:
                children = [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
            found += children
            stack += children
    return found


def warm(server: Server, timeout: float = 90.0) -> None:
    """A warm server, as a teacher's is: the pages' imports done, the pool started, and its
    fork server ready (it imports torch and trains two steps once: seconds on a busy
    machine, which a class arriving meanwhile would wait through): until the server and
    everything under it have been idle for a second."""
    interact(server.base, {"page": "train", "query_params": {"task": ["position"]}})
    time.sleep(1.0)
    deadline = time.monotonic() + timeout

    def busy() -> float:
        return server.cpu() + sum(cpu_seconds(pid) for pid in descendants(server.process.pid))

    spent = busy()
    while time.monotonic() < deadline:
        time.sleep(1.0)
        now = busy()
        if now - spent < 0.1:
            return
        spent = now


def url_of(base: str, query: dict) -> str:
    from urllib.parse import urlencode

    return f"{base}/train?{urlencode(query)}"


def crowd(server: Server, queries: list[dict], browser_query: dict | None,
          hostile_student: "HostileStudent | None" = None) -> dict:
    """Students open ``queries`` (one each) over `ARRIVAL_SECONDS`, the browser halfway
    through; what they waited for, and what the server spent."""
    spread = ARRIVAL_SECONDS / max(1, len(queries) - 1)
    students = [AgentStudent(server.base, query, i * spread) for i, query in enumerate(queries)]
    browser = None
    if browser_query is not None:
        browser = BrowserStudent(url_of(server.base, browser_query), ARRIVAL_SECONDS / 2)
        browser.start()
        browser.ready.wait(120)
    trained = server.trainings()
    cpu, own_cpu, started = server.cpu(), time.process_time(), time.monotonic()
    for student in students:
        student.start()
    if browser is not None:
        browser.go.set()
    if hostile_student is not None:
        hostile_student.start()
    everyone = [*students, *filter(None, [browser, hostile_student])]
    while any(t.is_alive() for t in everyone):
        time.sleep(5)
        done = sum(not t.is_alive() for t in students)
        print(f"    {time.monotonic() - started:5.0f} s: {done} of {len(students)} students "
              f"done, {server.trainings() - trained} trainings", flush=True)
    sessions = len(everyone)
    statuses = [s.status for s in students]
    report = {
        "students": len(students),
        "link_to_pattern_s": distribution([s.seconds for s in students if s.seconds]),
        "statuses": {s: statuses.count(s) for s in sorted(set(statuses))},
        "browser_s": round(browser.seconds, 2) if browser and browser.seconds else None,
        "browser_timeline": browser.seen if browser else None,
        "trainings": server.trainings(),  # on this scenario's server: the teacher's included
        "stored_runs": server.stored(),
        "wall_s": round(time.monotonic() - started, 1),
        "server_cpu_s": round(server.cpu() - cpu, 1),
        "server_cpu_per_session_s": round((server.cpu() - cpu) / sessions, 3),
        "load_test_cpu_s": round(time.process_time() - own_cpu, 1),
        "agent_requests": sum(s.requests for s in students),
        "agent_request_s": distribution([t for s in students for t in s.latencies]),
        **endpoint_polls(students),
        "training_s": distribution(server.training_seconds()[trained:]),
        "server_peak_rss_mb": peak_rss_mb(server.process.pid),
        "agent_response_bytes": distribution([b for s in students for b in s.sizes]),
    }
    if browser is not None and browser.status != "finished":
        report["browser_error"] = browser.status
    if hostile_student is not None:
        report["hostile_student"] = hostile_student.met
    return report


HOSTILE = {  # the classroom review's worst links: what each must lead to
    "snapshots": ({"task": "modular", "stack": "embedding(8, 1024)\npos_embed(4096)\nlinear(8)",
                   "input": "B,32", "seq_len": "32", "steps": "40", "batch_size": "1"},
                  "E_BUDGET"),
    "days_of_work": ({"task": "reverse", "input": "B,512", "seq_len": "512", "batch_size": "1",
                      "stack": "embedding(16, 2048)\n" + "linear(2048)\n" * 15 + "linear(16)",
                      "steps": "20000"}, "E_BUDGET"),
    "million_rows": ({"task": "modular", "stack": "embedding(8,1)\npos_embed(1000000)\nlinear(8)",
                      "steps": "2", "batch_size": "1"}, "explored"),
}


class HostileStudent(AgentStudent):
    """One student opening the review's worst links, one after another (`HOSTILE`)."""

    def __init__(self, base: str):
        super().__init__(base, {}, 0.0)
        self.met: dict = {}

    def run(self) -> None:
        for name, (query, expected) in HOSTILE.items():
            started, self.session = time.monotonic(), None
            try:
                snapshot = self.ask(page="train", query_params={k: [v] for k, v in query.items()})
                if expected == "E_BUDGET":
                    outcome = "refused (E_BUDGET)" if "E_BUDGET" in texts(snapshot) else "not refused"
                else:
                    outcome = self.train_and_explore()
            except Exception as err:  # noqa: BLE001
                outcome = f"error: {type(err).__name__}: {err}"[:200]
            self.met[name] = {"outcome": outcome, "as_expected": outcome.startswith(
                "refused" if expected == "E_BUDGET" else expected),
                "seconds": round(time.monotonic() - started, 1)}

    def train_and_explore(self) -> str:
        snapshot = self.ask(trigger={"key": "train_train"})
        deadline = time.monotonic() + STUDENT_TIMEOUT
        while not FINISHED.search(texts(snapshot)):
            if time.monotonic() > deadline or ENDED.search(texts(snapshot)):
                return "not finished"
            time.sleep(1.0)
            snapshot = self.ask()
        snapshot = self.ask(page="explore")
        return "explored" if "Gradient per row" in texts(snapshot) else "Explore showed no rows"


def teacher_trains(server: Server) -> str:
    """The teacher opens the link and trains: the run's key."""
    teacher = AgentStudent(server.base, link_query(), 0.0)
    teacher.run()
    if teacher.status != "finished":
        raise SystemExit(f"the teacher's run did not finish: {teacher.status}")
    return teacher.snapshot["query_params"]["run"][0]


def one_link(server: Server, students: int) -> dict:
    query = link_query()
    return crowd(server, [query] * students, query)


def seeds(server: Server, students: int, first: int, hostile: bool = False) -> dict:
    queries = [link_query(seed=str(first + i)) for i in range(students)]
    return crowd(server, queries, link_query(seed=str(first - 1)),
                 HostileStudent(server.base) if hostile else None)


def run_link(server: Server, students: int) -> dict:
    key = teacher_trains(server)
    server.settle(key)
    query = {**link_query(), "run": key}
    alone = []
    for _ in range(3):  # the browser alone on the idle server, three fresh visits
        browser = BrowserStudent(url_of(server.base, query), 0.0)
        browser.start()
        browser.ready.wait(120)
        time.sleep(BROWSER_SETTLE_SECONDS)  # as the crowd's browser waits for its turn
        browser.go.set()
        browser.join()
        if browser.seconds is None:
            raise SystemExit(f"the browser alone on the run= link: {browser.status}")
        alone.append(browser.seconds)
    report = crowd(server, [query] * students, query)
    return {"browser_alone_s": [round(s, 2) for s in alone],
            "browser_alone_median_s": round(statistics.median(alone), 2), **report}


def split_crowd(servers: list[Server], query: dict, students: int,
                arrival: float = ARRIVAL_SECONDS) -> dict:
    """``students`` on one link, taking turns between ``servers`` (the app servers of a Ray
    cluster behind a load balancer with sticky sessions: each student stays on one)."""
    spread = arrival / max(1, students - 1)
    crowd = [AgentStudent(servers[i % len(servers)].base, query, i * spread)
             for i in range(students)]
    cpu, started = [server.cpu() for server in servers], time.monotonic()
    before = set().union(*(server.trained_keys() for server in servers))  # a warm-up's
    for student in crowd:
        student.start()
    for student in crowd:
        student.join(STUDENT_TIMEOUT + arrival + 60)
    statuses = [s.status for s in crowd]
    return {"students": students, "app_servers": len(servers),
            "link_to_pattern_s": distribution([s.seconds for s in crowd if s.seconds]),
            "statuses": {s: statuses.count(s) for s in sorted(set(statuses))},
            # a key both servers queued at once is trained by one actor (named by the key;
            # the other server follows it), so the cluster's trainings are its trained keys
            "trainings": len(set().union(*(server.trained_keys() for server in servers))
                             - before),
            "stored_runs": servers[0].stored() - len(before),
            "wall_s": round(time.monotonic() - started, 1),
            "server_cpu_s": [round(server.cpu() - before, 1) for server, before in zip(servers, cpu)],
            "server_cpu_per_session_s": round(sum(server.cpu() - before for server, before
                                                  in zip(servers, cpu)) / students, 3),
            "agent_request_s": distribution([t for s in crowd for t in s.latencies]),
            **endpoint_polls(crowd),
            "server_peak_rss_mb": [peak_rss_mb(server.process.pid) for server in servers]}


def ray_hall(students: int) -> dict:
    """A local Ray head (this process) and two app servers on it sharing one run store,
    warm (a first run trained: Ray's worker processes started and torch imported in
    them); ``students`` on the teacher's link split between them: one training for the
    cluster."""
    import ray

    from stacklab.serve.workers import ray_runs

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             namespace=ray_runs.NAMESPACE)
    servers, runs = [], Path(tempfile.mkdtemp(prefix="stacklab-ray-runs-"))
    try:
        env = {"STACKLAB_RAY_ADDRESS": ray.get_runtime_context().gcs_address}
        servers = [Server(SESSIONS, env=env, runs=runs) for _ in range(2)]
        for server in servers:
            warm(server)
        teacher_trains(servers[0])  # a warm cluster: a run's actor once started on Ray
        return split_crowd(servers, link_query(seed="5000"), students)
    finally:
        for server in servers:
            server.close()
        ray.shutdown()


LESSON = "positions"  # the first lesson: three steps, the teacher moves through them
STEP = re.compile(r"Step (\d+) of \d+")
MOVES = ("learn_next", "learn_next", "learn_previous")  # the teacher's moves: to 2, 3, then 2
MOVE_SECONDS = 8.0  # between two of the teacher's moves


WATCH = "stacklab.watch"  # the component a following page watches the server with (ui/watch.py)
WATCH_HEADER = "X-Stacklab-Voter"  # the follower's vote token, as the component sends it


class Watch:
    """What the browser's watch component does (ui/watch.py), for an agent session: read the
    component's ``data`` from the page's snapshot (the agent API shows it, and cannot run
    it), ask its endpoint over HTTP with the follower's header, and say when the version
    changed, for the agent to rerun its page then. Each endpoint poll's seconds are kept."""

    def __init__(self, base: str):
        self.base = base
        self.polls: list[tuple[float, float]] = []  # (when answered, seconds) of each poll
        self.intervals: list[float] = []  # the interval each answer said (the backpressure)

    @staticmethod
    def data(snapshot: dict, path: str) -> dict | None:
        """The data of the snapshot's watch whose endpoint's path holds ``path``."""
        for node in nodes(snapshot):
            props = node.get("props") or {}
            data = props.get("data")
            data = json.loads(data) if isinstance(data, str) else data or {}
            if props.get("component_name") == WATCH and path in str(data.get("url", "")):
                return data
        return None

    def changed(self, data: dict) -> tuple[bool, float]:
        """One poll of ``data``'s endpoint: whether the version moved on from the page's
        (or no endpoint answered: the component then reruns too), and the next interval."""
        headers = {WATCH_HEADER: data["voter"]} if data.get("voter") else {}
        asked = time.monotonic()
        try:
            request = urllib.request.Request(self.base + data["url"], headers=headers)
            with urllib.request.urlopen(request, timeout=60) as response:
                answer = json.loads(response.read())
        except (OSError, ValueError):
            answer = {}
        self.polls.append((time.monotonic(), time.monotonic() - asked))
        every = answer.get("every") or data.get("every") or 1.0
        self.intervals.append(float(every))
        return answer.get("v") != data.get("version"), float(every)


class LessonStudent(AgentStudent):
    """A student on a presented lesson's class link (``/learn?class=ID``), as a browser
    follows it: the page's watch asks the class's endpoint at its interval (1 s, wider as
    the server says under load) and the page reruns (one agent request) only when the
    teacher moved, until ``done``; notes when the page first showed each new step."""

    def __init__(self, base: str, class_id: str, delay: float, done: threading.Event):
        super().__init__(base, {"class": class_id}, delay, page="learn")
        self.done = done
        self.watch = Watch(base)
        self.seen: list[tuple[float, int]] = []  # (monotonic time, step) at each change

    def run(self) -> None:
        time.sleep(self.delay)
        try:
            snapshot = self.ask(page="learn", query_params={"class": [self.query["class"]]})
            self.status = "following"
            while not self.done.is_set():
                text = texts(snapshot)
                if (step := STEP.search(text)) and (not self.seen or self.seen[-1][1] != int(step[1])):
                    self.seen.append((time.monotonic(), int(step[1])))
                if "Following the teacher" not in text:
                    self.status = "not following"
                    return
                data, changed = Watch.data(snapshot, "/class/"), True
                every = data["every"] if data else 1.0
                while not self.done.wait(every) and data is not None:
                    changed, every = self.watch.changed(data)
                    if changed:
                        break
                if changed and not self.done.is_set():
                    snapshot = self.ask()
            self.status = "finished"
        except Exception as err:  # noqa: BLE001 - a load test reports, it does not stop
            self.status = f"error: {type(err).__name__}: {err}"[:300]

    def reached(self, moved: float, step: int) -> float | None:
        """Seconds from the teacher's move at ``moved`` to this page on ``step``."""
        return next((t - moved for t, shown in self.seen if t >= moved and shown == step), None)


def lesson_class(server: Server, students: int, arrival: float = ARRIVAL_SECONDS,
                 move_seconds: float = MOVE_SECONDS) -> dict:
    """A teacher presents the first lesson; ``students`` open its class link over
    `ARRIVAL_SECONDS`; the teacher moves (`MOVES`); for each move, each student's seconds
    from the teacher's click to their page on the teacher's new step."""
    teacher = AgentStudent(server.base, {}, 0.0, page="learn")
    teacher.ask(page="learn", query_params={"lesson": [LESSON], "step": ["1"]})
    snapshot = teacher.ask(trigger={"key": "learn_present"})
    found = re.search(r"class=(\w+)", texts(snapshot))
    if not found:
        raise SystemExit("the teacher's page shows no class link")
    done = threading.Event()
    spread = arrival / max(1, students - 1)
    crowd = [LessonStudent(server.base, found[1], i * spread, done) for i in range(students)]
    cpu, started = server.cpu(), time.monotonic()
    for student in crowd:
        student.start()
    time.sleep(arrival + 3.0)
    step, delays = 1, []
    for move in MOVES:
        moved = time.monotonic()
        teacher.ask(trigger={"key": move})
        step += 1 if move == "learn_next" else -1
        time.sleep(move_seconds)
        delays += [student.reached(moved, step) for student in crowd]
    done.set()
    for student in crowd:
        student.join(30)
    statuses = [s.status for s in crowd]
    return {"students": students, "moves": len(MOVES),
            "step_change_s": distribution([d for d in delays if d is not None]),
            "missed_moves": sum(d is None for d in delays),
            "statuses": {s: statuses.count(s) for s in sorted(set(statuses))},
            "link_to_pattern_s": {}, "trainings": server.trainings(),
            "wall_s": round(time.monotonic() - started, 1),
            "server_cpu_s": round(server.cpu() - cpu, 1),
            "server_cpu_per_session_s": round((server.cpu() - cpu) / students, 3),
            "agent_requests": sum(s.requests for s in crowd),  # opening, then a rerun a move
            "agent_request_s": distribution([t for s in crowd for t in s.latencies]),
            "agent_response_bytes": distribution([b for s in crowd for b in s.sizes]),
            "endpoint_polls": sum(len(s.watch.polls) for s in crowd),  # the class's version
            "endpoint_poll_ms": distribution([1000 * t for s in crowd for _, t in s.watch.polls]),
            "endpoint_interval_s": distribution([e for s in crowd for e in s.watch.intervals]),
            "server_peak_rss_mb": peak_rss_mb(server.process.pid)}


WIDE = (1024, 3880)  # rows x width of float32: 15.9 MB, under the 16 MB upload limit
UPLOAD_SECTION = "A real model's positions"  # Explore's expander with the uploader


def wide_npy(seed: int) -> bytes:
    import io

    import numpy as np

    buffer = io.BytesIO()
    np.save(buffer, np.random.default_rng(seed).normal(size=WIDE).astype("float32"))
    return buffer.getvalue()


def peak_rss_mb(pid: int) -> float | None:
    """The largest resident memory process ``pid`` has had (VmHWM), in MB."""
    try:
        line = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                    if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return None
    return round(int(line.split()[1]) / 1024, 1)


class Uploaders(threading.Thread):
    """Three tabs of one Chromium on Explore, each uploading a wide table of its own at the
    same moment (`go`); ``seconds`` from each upload to its scores (or refusal) on the page."""

    def __init__(self, base: str, count: int = 3):
        super().__init__(daemon=True)
        self.base, self.count = base, count
        self.ready, self.go = threading.Event(), threading.Event()
        self.seconds: list[float] = []
        self.status = "waiting"

    def run(self) -> None:
        from playwright.sync_api import sync_playwright

        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
                pages = [self.open(browser) for _ in range(self.count)]
                files = [wide_npy(seed) for seed in range(self.count)]  # three analyses
                self.ready.set()
                self.go.wait()
                self.seconds, self.status = self.upload(pages, files), "finished"
                browser.close()
        except Exception as err:  # noqa: BLE001 - a load test reports, it does not stop
            self.status = f"error: {type(err).__name__}: {err}"[:300]
        finally:
            self.ready.set()

    def open(self, browser):
        page = browser.new_context(viewport={"width": 1366, "height": 768}).new_page()
        page.goto(f"{self.base}/explore", timeout=STUDENT_TIMEOUT * 1000)
        page.get_by_text(UPLOAD_SECTION).first.click(timeout=STUDENT_TIMEOUT * 1000)
        page.locator("input[type=file]").wait_for(state="attached", timeout=60_000)
        return page

    def upload(self, pages, files) -> list[float]:
        started = []
        for seed, (page, data) in enumerate(zip(pages, files)):
            page.locator("input[type=file]").set_input_files(
                {"name": f"wide-{seed}.npy", "mimeType": "application/octet-stream",
                 "buffer": data})
            started.append(time.monotonic())
        seconds: dict[int, float] = {}
        deadline = time.monotonic() + 2 * STUDENT_TIMEOUT
        while len(seconds) < len(pages) and time.monotonic() < deadline:
            for index, page in enumerate(pages):
                if index not in seconds and page.evaluate(
                        "() => /Table of shape|E_BUDGET|E_VALUE/.test(document.body.innerText)"):
                    seconds[index] = time.monotonic() - started[index]
            time.sleep(0.5)
        if len(seconds) < len(pages):
            raise TimeoutError(f"{len(pages) - len(seconds)} uploads not shown in time")
        for page in pages:
            if "Table of shape" not in page.inner_text("body"):
                raise RuntimeError("an upload was refused: " + page.inner_text("body")[-300:])
        return [round(seconds[index], 1) for index in range(len(pages))]


def uploads_during_a_class(server: Server, students: int) -> dict:
    """A quiet class, then the same class (another seed: a training of its own) while three
    tabs upload wide tables; the students' times side by side."""
    quiet = crowd(server, [link_query(seed="4000")] * students, None)
    uploaders = Uploaders(server.base)
    uploaders.start()
    uploaders.ready.wait(300)
    uploaders.go.set()
    report = crowd(server, [link_query(seed="4001")] * students, None)
    uploaders.join(4 * STUDENT_TIMEOUT)
    return {**report, "quiet_link_to_pattern_s": quiet["link_to_pattern_s"],
            "quiet_statuses": quiet["statuses"], "uploads_s": uploaders.seconds,
            "uploads_status": uploaders.status, "upload_shape": list(WIDE),
            "server_peak_rss_mb": peak_rss_mb(server.process.pid)}


SCENARIOS = {
    "one_link_30": lambda server: one_link(server, class_size(30)),
    "one_link_100": lambda server: one_link(server, class_size(100)),
    "seeds_30": lambda server: seeds(server, class_size(30), 2000),
    "run_link_100": lambda server: run_link(server, class_size(100)),
    "seeds_30_hostile": lambda server: seeds(server, class_size(30), 3000, hostile=True),
    "uploads_30": lambda server: uploads_during_a_class(server, class_size(30)),
    # a lecture hall (issue 38): one link, a finished run's link, a presented lesson
    "hall300": lambda server: one_link(server, class_size(300)),
    # the same hall on the bare Train link (every control shown, nothing pinned: issue 46)
    "hall300_bare": lambda server: crowd(server, [BARE] * class_size(300), BARE),
    "hall500": lambda server: one_link(server, class_size(500)),
    "run_link_300": lambda server: run_link(server, class_size(300)),
    "lesson_100": lambda server: lesson_class(server, class_size(100)),
    # past one server: two app servers on a local Ray head, the hall split between them
    "ray_hall300": lambda server: ray_hall(class_size(300)),
}
SESSIONS = 520  # the agent sessions a scenario's server allows (the largest class and more)
TARGETS = {  # scenario -> (measure, at most): the lecture hall's targets, raised once a run
    # cost a fraction of what it did (the cheaper presets); before: 3, 2.5, 25, 2.5 and 4 s
    "one_link_100": [("p95", 2.0)],
    "one_link_30": [("p95", 1.5)],
    "seeds_30": [("p95", 15.0)],
    "run_link_100": [("browser_alone_median_s", 2.5), ("browser_s", 3.5)],
    "hall300": [("p95", 2.0), ("browser_s", 4.0)],
    "hall500": [("p95", 4.0), ("server_peak_rss_mb", 1500)],
    "run_link_300": [("p95", 0.5)],
    "lesson_100": [("step_change_p95", 1.5)],
    "ray_hall300": [("p95", 2.0)],
}
UNITS = {"server_peak_rss_mb": "MB"}  # of a target's measure; seconds otherwise


def measure(name: str, report: dict) -> float | None:
    if name == "p95":
        return report["link_to_pattern_s"].get("p95")
    if name == "step_change_p95":
        return report["step_change_s"].get("p95")
    return report.get(name)


def targets(result: dict) -> dict[str, bool]:
    met = {}
    for scenario, checks in TARGETS.items():
        if scenario in result["scenarios"]:
            for name, limit in checks:
                value = measure(name, result["scenarios"][scenario])
                unit = UNITS.get(name, "s")
                met[f"{scenario} {name} <= {limit:g} {unit}"] = value is not None and value <= limit
    one = {k: v for k, v in result["scenarios"].items()
           if k.startswith(("one_link", "run_link", "hall", "ray_hall"))}
    for scenario, report in one.items():
        met[f"{scenario}: one training"] = report["trainings"] == 1
    for scenario, report in result["scenarios"].items():
        met[f"{scenario}: every student finished"] = report["statuses"] == {
            "finished": report["students"]}
        if "missed_moves" in report:
            met[f"{scenario}: every move reached every student"] = report["missed_moves"] == 0
    uploads = result["scenarios"].get("uploads_30")
    if uploads is not None:
        met["uploads_30: every upload drawn"] = uploads["uploads_status"] == "finished"
        met["uploads_30: the quiet class finished"] = uploads["quiet_statuses"] == {
            "finished": uploads["students"]}
    hostile = result["scenarios"].get("seeds_30_hostile", {}).get("hostile_student")
    if hostile is not None:
        met["hostile student handled"] = all(v["as_expected"] for v in hostile.values())
    return met


def row(name: str, report: dict) -> str:
    d = report["link_to_pattern_s"]
    browser = report.get("browser_s")
    alone = report.get("browser_alone_median_s")
    quiet = report.get("quiet_link_to_pattern_s", {}).get("p95")
    beside = f" (quiet p95 {quiet} s; uploads {report.get('uploads_s')} s)" if quiet else ""
    if "step_change_s" in report:  # a presented lesson: the teacher's move to each student
        d, beside = report["step_change_s"], " (the teacher's step change reaching each student)"
    return (f"| {name} | {report['students']} | {d.get('p50', '-')} / {d.get('p95', '-')} / "
            f"{d.get('max', '-')} s{beside} | {browser if browser is not None else '-'} s"
            f"{f' (alone {alone} s)' if alone is not None else ''} | {report['trainings']} | "
            f"{report['server_cpu_per_session_s']:.3f} s |")


HEADER = ("| scenario | students | link → pattern figure p50 / p95 / max | real browser | "
          "trainings | server CPU per session |\n|---|---|---|---|---|---|")


def main() -> dict:
    result: dict = {"cores": os.cpu_count(), "scale": SCALE, "arrival_s": ARRIVAL_SECONDS,
                    "link": link_query(), "scenarios": {}}
    chosen = [name for name in SCENARIOS if not ONLY or name in ONLY]
    started = time.monotonic()
    for name in chosen:
        print(f"{name}: starting its server", flush=True)
        server = Server(max_sessions=SESSIONS)
        try:
            warm(server)
            result["scenarios"][name] = report = SCENARIOS[name](server)
            report["server_alive"] = server.process.poll() is None
        finally:
            server.close()
        print(HEADER if name == chosen[0] else "", row(name, report), sep="\n" * (name == chosen[0]),
              flush=True)
    result["wall_s"] = round(time.monotonic() - started, 1)
    result["targets"] = targets(result)
    return result


def arguments() -> None:
    """``--only NAME,NAME`` and ``--scale X`` (as ``LOADTEST_ONLY`` and ``LOADTEST_SCALE``)."""
    import argparse

    global ONLY, SCALE
    parser = argparse.ArgumentParser(description="The lecture-hall load test (bench/loadtest.py).")
    parser.add_argument("--only", default=",".join(ONLY),
                        help=f"scenarios, comma-separated, of: {', '.join(SCENARIOS)}")
    parser.add_argument("--scale", type=float, default=SCALE, help="a fraction of each class")
    args = parser.parse_args()
    ONLY = [name for name in args.only.split(",") if name]
    unknown = sorted(set(ONLY) - set(SCENARIOS))
    if unknown:
        parser.error(f"no scenario {', '.join(unknown)}; there are {', '.join(SCENARIOS)}")
    SCALE = args.scale


if __name__ == "__main__":
    arguments()
    result = main()
    (ROOT / "bench" / "loadtest.json").write_text(json.dumps(result, indent=2) + "\n")
    print("\n" + HEADER)
    for name, report in result["scenarios"].items():
        print(row(name, report))
    for target, met in result["targets"].items():
        print(f"  {'met   ' if met else 'MISSED'} {target}")
    print(f"whole load test: {result['wall_s']:.0f} s; details in bench/loadtest.json")
    # Times are reported, met or missed, as `make bench` does; what fails the run is
    # behaviour: a second training of one link, a student left waiting, a dead server.
    behaviour = [met for target, met in result["targets"].items() if "<=" not in target]
    sys.exit(0 if all(behaviour) and all(r.get("server_alive", True)
                                         for r in result["scenarios"].values()) else 1)
