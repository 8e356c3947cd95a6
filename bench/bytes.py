"""What a student's phone downloads: the bytes of the class link, measured in Chromium.

    make loadtest                  # runs this after the load test; writes bench/bytes.json
    python bench/bytes.py          # alone (BYTES_LIVE_SECONDS=15 by default)

A real Streamlit server of the app (server.py, as ``make run`` starts it, with an empty run
store) and one of Streamlit's own hello app, side by side in one run. The teacher trains a
long run and five more sessions open its link (the agent API's, browserless), so the run
is followed as in a class. Chromium records the network through the DevTools protocol:
every HTTP response's bytes on the wire (``Network.loadingFinished``'s
``encodedDataLength``: headers and body as transferred, compressed or not, 0 when served
from the cache), and every websocket message's payload in both directions
(``Network.webSocketFrameReceived``/``Sent``: Streamlit's page talks to its server over
one websocket). Measured:

- **first opening** of the teacher's run link (``/train?run=KEY``, while the run trains)
  and of a class link (``/learn?class=ID``), each in a fresh browser context (an empty
  cache), from ``goto`` until the page shows its content and no HTTP request has finished
  for `QUIET_SECONDS`; beside it, the first opening of Streamlit's hello app;
- **second opening**: the same link in a new page of the same context (the HTTP cache
  warm), measured the same way;
- **following live**: a student on the run link while the run trains, the bytes each
  second over `LIVE_SECONDS` (the mean, and the largest second): the run's watch endpoint
  every 0.5-1 s and, once per new frame, its pictures (`ui.live_run`), with no rerun.

"bytes for 100 students" multiplies the per-student figures by 100: what one access point
carries for a class. Everything goes to bench/bytes.json.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).parent.parent
_spec = importlib.util.spec_from_file_location("loadtest", ROOT / "bench" / "loadtest.py")
loadtest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(loadtest)

LIVE_SECONDS = float(os.environ.get("BYTES_LIVE_SECONDS", "15"))
QUIET_SECONDS = 1.5  # no HTTP response for this long: the page has what it loads
STUDENTS = 100
# a run that trains for minutes on two cores (20,000 steps: the most a link takes): long enough to follow it live
# and batches of 512 (the task's are 64), so that a quiet machine, which trains the task's own
# batches 20,000 steps in about 40 s, is still training when the student has settled
LIVE_RUN = {"task": "reverse", "steps": "20000", "batch_size": "512", "target_accuracy": "none",
            "seed": "35"}
VIEWPORT = {"width": 390, "height": 844}  # a phone
CLASS_WATCHERS = 5  # more sessions on the run than views/train.py polls fastest for


def hello_script() -> Path:
    """Streamlit's own hello app (``streamlit hello`` runs this script)."""
    import streamlit

    return Path(streamlit.__file__).parent / "hello" / "streamlit_app.py"


class Meter:
    """The bytes one page transfers, recorded by Chromium (DevTools protocol): HTTP
    responses as transferred, websocket payloads both ways, each with its time."""

    def __init__(self, page):
        self.http: list[dict] = []  # one per finished response: url, bytes, encoding, cached
        self.frames: list[tuple[float, str, int]] = []  # (time, "in" or "out", bytes)
        self.extensions: list[str] = []  # each websocket's negotiated extensions
        self._responses: dict[str, dict] = {}
        self.page = page
        self.cdp = page.context.new_cdp_session(page)
        self.cdp.on("Network.responseReceived", self._response)
        self.cdp.on("Network.loadingFinished", self._finished)
        self.cdp.on("Network.webSocketFrameReceived", lambda e: self._frame(e, "in"))
        self.cdp.on("Network.webSocketFrameSent", lambda e: self._frame(e, "out"))
        self.cdp.on("Network.webSocketHandshakeResponseReceived", self._handshake)
        self.cdp.send("Network.enable")

    def _response(self, event) -> None:
        response = event["response"]
        headers = {k.lower(): v for k, v in response.get("headers", {}).items()}
        self._responses[event["requestId"]] = {
            "url": response["url"], "encoding": headers.get("content-encoding", ""),
            "cache_control": headers.get("cache-control", ""),
            "cached": bool(response.get("fromDiskCache") or response.get("fromPrefetchCache")
                           or response.get("fromServiceWorker"))}

    def _finished(self, event) -> None:
        found = self._responses.pop(event["requestId"], {"url": "?", "encoding": "",
                                                          "cache_control": "", "cached": False})
        self.http.append({**found, "bytes": int(event["encodedDataLength"]),
                          "time": time.monotonic()})

    def _frame(self, event, direction: str) -> None:
        payload = event["response"]
        data = payload.get("payloadData", "")
        size = len(base64.b64decode(data)) if payload.get("opcode") == 2 else len(data.encode())
        self.frames.append((time.monotonic(), direction, size))

    def _handshake(self, event) -> None:
        headers = {k.lower(): v for k, v in event["response"].get("headers", {}).items()}
        self.extensions.append(headers.get("sec-websocket-extensions", ""))

    def totals(self, since: float = 0.0, until: float = float("inf")) -> dict:
        """The bytes from ``since`` to ``until``: HTTP, websocket in and out, and all."""
        http = sum(r["bytes"] for r in self.http if since <= r["time"] < until)
        got = sum(n for t, d, n in self.frames if d == "in" and since <= t < until)
        sent = sum(n for t, d, n in self.frames if d == "out" and since <= t < until)
        return {"http": http, "ws_in": got, "ws_out": sent, "total": http + got + sent}

    def quiet(self, seconds: float = QUIET_SECONDS, timeout: float = 60.0) -> None:
        """Wait until no HTTP response has finished for ``seconds``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            last = max((r["time"] for r in self.http), default=0.0)
            if time.monotonic() - last >= seconds:
                return
            self.wait(0.1)

    def wait(self, seconds: float) -> None:
        """Wait while Playwright hands over the browser's events (a ``time.sleep`` would
        hold them back and stamp them all late)."""
        self.page.wait_for_timeout(seconds * 1000)


def opening(context, url: str, shown: str, timeout: float = 90.0) -> tuple[dict, object, Meter]:
    """Open ``url`` in a new page of ``context``: the bytes until the page shows ``shown``
    (a CSS selector) and its HTTP is quiet, with the largest responses; the page and its
    meter stay open."""
    page = context.new_page()
    meter = Meter(page)
    start = time.monotonic()
    page.goto(url, timeout=timeout * 1000)
    page.wait_for_selector(shown, timeout=timeout * 1000)
    meter.quiet()
    end = time.monotonic()
    result = {**meter.totals(start, end), "seconds": round(end - start, 1),
              "requests": len(meter.http),
              "largest": sorted(({k: r[k] for k in ("url", "bytes", "encoding", "cache_control")}
                                 for r in meter.http), key=lambda r: -r["bytes"])[:8],
              "websocket_extensions": meter.extensions}
    return result, page, meter


def first_and_second(browser, url: str, shown: str) -> dict:
    """A fresh context opens ``url`` (first), then a new page of it opens it again (second,
    from the cache)."""
    context = browser.new_context(viewport=VIEWPORT, is_mobile=True, has_touch=True,
                                  device_scale_factor=3)
    try:
        first, page, _ = opening(context, url, shown)
        page.close()
        second, page, _ = opening(context, url, shown)
        return {"first": first, "second": second}
    finally:
        context.close()


def class_watches(base: str, key: str, sessions: int = CLASS_WATCHERS) -> None:
    """``sessions`` more students open the run link (browserless sessions of the agent API,
    each one request), so the run is watched as in a class: the page then polls at its
    class interval (`ui.pace.every`), as it does for each of 100 phones."""
    for _ in range(sessions):
        student = loadtest.AgentStudent(base, {"run": key}, 0.0)
        student.ask(page="train", query_params={"run": [key]})


def live(browser, url: str, seconds: float = LIVE_SECONDS) -> dict:
    """A student on ``url`` (a run that trains) after the page has settled: the bytes of
    each second over ``seconds``."""
    context = browser.new_context(viewport=VIEWPORT, is_mobile=True, has_touch=True,
                                  device_scale_factor=3)
    try:
        _, page, meter = opening(context, url, STUDENT_PAGE)
        page.wait_for_selector(LIVE_PICTURES, timeout=90_000)  # the curves, drawn once
        meter.quiet()
        status = page.locator(LIVE_STATUS).first.inner_text()
        start = time.monotonic()
        meter.wait(seconds)
        per_second = [meter.totals(start + i, start + i + 1)["total"] for i in range(int(seconds))]
        whole = meter.totals(start, start + int(seconds))
        after = page.locator(LIVE_STATUS).first.inner_text()
        if "running" not in status or "running" not in after:  # a figure of a run that ended
            raise SystemExit(f"the run was not training all through the live measurement: "
                             f"{status.strip()!r}, then {after.strip()!r}")
        return {**whole, "seconds": int(seconds), "status": status.strip(),
                "bytes_per_second": round(whole["total"] / int(seconds)),
                "largest_second": max(per_second), "per_second": per_second}
    finally:
        context.close()


STUDENT_PAGE = "[data-testid=stAlert]"  # the student's note on the run link
LIVE_PICTURES = ".live-run-curves img"  # a live run's view (ui/live_run.py): its curves
LIVE_STATUS = ".live-run-status"  # and its status line, both from the run's watch endpoint
CLASS_PAGE = "[data-testid=stProgress]"  # the lesson's "Step n of m" on a class link
HELLO_PAGE = "h1"


def teacher_trains(browser, base: str) -> tuple[str, object]:
    """The teacher opens the link of a long run and presses Train: its key (from the
    address), and the teacher's context (kept open while the run trains)."""
    from urllib.parse import parse_qs, urlencode, urlsplit

    context = browser.new_context(viewport={"width": 1366, "height": 768})
    page = context.new_page()
    page.goto(f"{base}/train?{urlencode(LIVE_RUN)}", timeout=90_000)
    page.locator(".st-key-train_train button").click(timeout=90_000)
    page.wait_for_url("**run=*", timeout=90_000)
    return parse_qs(urlsplit(page.url).query)["run"][0], context


def teacher_presents(browser, base: str) -> tuple[str, object]:
    """The teacher presents a lesson to a class: the class link, and the teacher's context."""
    context = browser.new_context(viewport={"width": 1366, "height": 768})
    page = context.new_page()
    page.goto(f"{base}/learn?lesson=positions&step=1", timeout=90_000)
    page.locator(".st-key-learn_present button").first.click(timeout=90_000)
    code = page.locator("code", has_text="/learn?class=").first
    code.wait_for(timeout=90_000)
    return "/learn?" + code.inner_text().strip().split("/learn?", 1)[1], context


def measure(live_seconds: float = LIVE_SECONDS) -> dict:
    """Both servers, the teacher's run and class, and every figure of the module docstring."""
    from playwright.sync_api import sync_playwright

    app, hello = loadtest.Server(max_sessions=20), loadtest.Server(script=hello_script())
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=loadtest.CHROMIUM, args=loadtest.FLAGS)
            key, teacher = teacher_trains(browser, app.base)
            run_link = f"{app.base}/train?run={key}"
            class_watches(app.base, key)
            following = live(browser, run_link, live_seconds)
            run = first_and_second(browser, run_link, STUDENT_PAGE)
            class_path, presenter = teacher_presents(browser, app.base)
            lesson = first_and_second(browser, app.base + class_path, CLASS_PAGE)
            streamlit_hello = first_and_second(browser, hello.base, HELLO_PAGE)
            teacher.close(), presenter.close()
            browser.close()
    finally:
        app.close(), hello.close()
    return {"run_link": run, "class_link": lesson, "hello": streamlit_hello,
            "live": following, "for_100_students": for_a_class(run, following)}


def for_a_class(run: dict, following: dict, students: int = STUDENTS) -> dict:
    """The per-student figures times ``students``: what one access point carries."""
    return {"students": students,
            "first_opening_mb": round(students * run["first"]["total"] / 1e6, 1),
            "second_opening_mb": round(students * run["second"]["total"] / 1e6, 2),
            "live_kb_per_second": round(students * following["bytes_per_second"] / 1e3)}


def kb(n: int) -> str:
    return f"{n / 1000:,.1f} KB"


def main() -> None:
    result = measure()
    result["measured"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    (ROOT / "bench" / "bytes.json").write_text(json.dumps(result, indent=1) + "\n")
    for name in ("run_link", "class_link", "hello"):
        first, second = result[name]["first"], result[name]["second"]
        print(f"{name:10s} first opening {kb(first['total']):>10s}  (HTTP {kb(first['http'])}, "
              f"websocket {kb(first['ws_in'] + first['ws_out'])})   second {kb(second['total'])}")
    following = result["live"]
    print(f"following live: {kb(following['bytes_per_second'])}/s (largest second "
          f"{kb(following['largest_second'])})")
    print("for 100 students:", result["for_100_students"])


if __name__ == "__main__":
    main()
