"""Where a student's browser spends its time on the teacher's ``run=KEY`` link.

    .venv/bin/python bench/link_timeline.py                  # 5 fresh visits of this app
    VISITS=6 ROOTS=before=/tmp/old,after=. .venv/bin/python bench/link_timeline.py
        # /tmp/old: e.g. `git archive main | tar -x -C /tmp/old` and a .venv link in it
    SHOTS=/tmp/link .venv/bin/python bench/link_timeline.py  # /tmp/link-<label>.png, last visit
    CPU_PROFILE=/tmp/cpu .venv/bin/python bench/link_timeline.py   # /tmp/cpu-<label>.json

For each app folder in ``ROOTS`` (label=path, default: this checkout) a Streamlit server
starts as in bench/loadtest.py, through a wrapper that logs each script run and each
message it sends (type, size, time); the teacher trains ``reverse`` through the agent API;
then fresh Chromium contexts (1366x768, loadtest's flags) open the run= link, the servers'
visits taking turns so that a busy machine slows them alike. A visit ends when loadtest's
`HEATMAP_DRAWN` holds. Printed per label, the median of each phase in ms from navigation
start (the HTML, DOMContentLoaded, the websocket, the server's script runs, the first
element, the Status line, the charts' containers, the pattern's plot or still picture, the heatmap drawn,
Plotly's lazy chunk fetched) with every visit's value, and the main thread's long tasks and
Chrome's own script and task totals. With ``CPU_PROFILE`` the last visit's JavaScript CPU profile is
saved (open it in Chrome's DevTools); ``cpu_by_file`` sums its samples per script file.
"""

from __future__ import annotations

import collections
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path

# The server side: `python bench/link_timeline.py --serve run app.py ...` is `streamlit`
# with a log line per script run and per message sent (epoch seconds, like timeOrigin).
SERVE = "--serve"
if sys.argv[1:2] != [SERVE]:  # the served app imports its own lib, not this checkout's
    import loadtest

# Inside a page: when each phase is first seen, the long tasks, the websocket's messages.
MARKS = r"""
(() => {
  const P = window.__timeline = {marks: {}, longtasks: [], ws: []};
  const mark = name => { if (!(name in P.marks)) P.marks[name] = performance.now(); };
  new PerformanceObserver(list => list.getEntries().forEach(
    e => P.longtasks.push([Math.round(e.startTime), Math.round(e.duration)])))
    .observe({type: 'longtask', buffered: true});
  const Socket = window.WebSocket;
  window.WebSocket = class extends Socket {
    constructor(...args) {
      super(...args); mark('ws_created');
      this.addEventListener('open', () => mark('ws_open'));
      this.addEventListener('message', ev => P.ws.push(
        [Math.round(performance.now()), ev.data.byteLength || ev.data.size || 0]));
    }
  };
  const SEEN = {
    first_element: () => document.querySelector('[data-testid=stElementContainer]'),
    status_finished: () => [...document.querySelectorAll('[data-testid=stAlert]')]
      .some(a => /Status: finished/.test(a.textContent)),
    curves_container: () => document.querySelector('[class*=st-key-train_curves_]'),
    pattern_container: () => document.querySelector('[class*=st-key-train_pattern_]'),
    pattern_plot: () => document.querySelector('[class*=st-key-train_pattern_] .js-plotly-plot'),
    pattern_picture: () => document.querySelector('[class*=st-key-train_pattern_] img'),
    heatmap_drawn: HEATMAP_DRAWN,
  };
  const check = () => Object.entries(SEEN).forEach(([name, seen]) => seen() && mark(name));
  new MutationObserver(check).observe(document, {subtree: true, childList: true});
  const timer = setInterval(() => {  // an image that loads changes no element
    check();
    if ('heatmap_drawn' in P.marks) clearInterval(timer);
  }, 50);
})();
"""

COLLECT = """() => ({...window.__timeline, origin: performance.timeOrigin,
  nav: performance.getEntriesByType('navigation')[0].toJSON(),
  resources: performance.getEntriesByType('resource').map(e => ({
    name: e.name.split('/').pop().split('?')[0], start: e.startTime, end: e.responseEnd}))})"""

def serve(argv: list[str]) -> None:
    """Run ``streamlit argv`` with each script run and each message it sends logged."""
    from streamlit.runtime import app_session
    from streamlit.runtime.scriptrunner import script_runner
    from streamlit.web.cli import main

    run_script = script_runner.ScriptRunner._run_script

    def timed_run(self, rerun_data):
        print(f"TIMELINE {time.time():.4f} script_start", file=sys.stderr, flush=True)
        try:
            return run_script(self, rerun_data)
        finally:
            print(f"TIMELINE {time.time():.4f} script_end", file=sys.stderr, flush=True)

    enqueue = app_session.AppSession._enqueue_forward_msg

    def logged_enqueue(self, msg):
        kind = msg.WhichOneof("type")
        if kind == "delta" and msg.delta.WhichOneof("type") == "new_element":
            kind = msg.delta.new_element.WhichOneof("type")
        print(f"TIMELINE {time.time():.4f} sent {kind} {msg.ByteSize()}", file=sys.stderr,
              flush=True)
        return enqueue(self, msg)

    script_runner.ScriptRunner._run_script = timed_run
    app_session.AppSession._enqueue_forward_msg = logged_enqueue
    sys.argv = ["streamlit", *argv]
    main()


def start_server(root: Path) -> loadtest.Server:
    """loadtest's server of the app at ``root``, through `serve`."""
    popen = loadtest.subprocess.Popen

    def through_serve(command, **kwargs):
        if command[1:3] == ["-m", "streamlit"]:
            command = [command[0], str(Path(__file__).resolve()), SERVE, *command[3:]]
        return popen(command, **kwargs)

    loadtest.subprocess.Popen, loadtest.ROOT = through_serve, root
    try:
        return loadtest.Server(max_sessions=10)
    finally:
        loadtest.subprocess.Popen = popen


def server_lines(log: Path, since: float, origin_ms: float) -> list[tuple[int, str]]:
    """The server's TIMELINE lines after ``since`` (epoch s): (ms after ``origin_ms``, what)."""
    found = []
    for line in log.read_text().splitlines():
        match = re.match(r"TIMELINE ([\d.]+) (.*)", line)
        if match and float(match[1]) >= since:
            found.append((round(float(match[1]) * 1000 - origin_ms), match[2]))
    return found


def visit(browser, url: str, log: Path, shot: str | None, profile: str | None) -> dict:
    """One fresh visit of ``url``: its phases in ms from navigation start."""
    context = browser.new_context(viewport={"width": 1366, "height": 768})
    context.add_init_script(MARKS.replace("HEATMAP_DRAWN", loadtest.HEATMAP_DRAWN))
    page = context.new_page()
    cdp = context.new_cdp_session(page)
    cdp.send("Performance.enable")
    if profile:
        cdp.send("Profiler.enable")
        cdp.send("Profiler.start")
    try:
        since, opened = time.time(), time.monotonic()
        page.goto(url)
        page.wait_for_function(loadtest.HEATMAP_DRAWN, timeout=60_000, polling=50)
        seconds = time.monotonic() - opened
        if profile:
            Path(profile).write_text(json.dumps(cdp.send("Profiler.stop")["profile"]))
        totals = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
        page.wait_for_timeout(1000)  # what follows the heatmap: a scroll, a redraw
        if shot:
            page.screenshot(path=shot)
        seen = page.evaluate(COLLECT)
    finally:
        context.close()
    phases = {"seconds": seconds, "html": seen["nav"]["responseEnd"],
              "dom_content_loaded": seen["nav"]["domContentLoadedEventEnd"], **seen["marks"],
              "long_tasks_ms": sum(duration for _, duration in seen["longtasks"]),
              "script_ms": 1000 * totals["ScriptDuration"],
              "task_ms": 1000 * totals["TaskDuration"],
              "ws_kb": sum(size for _, size in seen["ws"]) / 1024}
    for name in ("PlotlyChart", "StreamlitSyntaxHighlighter"):
        phases.update({f"{name}_fetched": r["end"] for r in seen["resources"]
                       if r["name"].startswith(name + ".")})
    runs = [ms for ms, what in server_lines(log, since - 0.05, seen["origin"])
            if what.startswith("script_")]
    for index in range(0, len(runs) - 1, 2):
        phases[f"script_run_{index // 2}"] = runs[index]
        phases[f"script_run_{index // 2}_ms"] = runs[index + 1] - runs[index]
    return phases


def cpu_by_file(profile: dict) -> list[tuple[str, float]]:
    """A CPU profile's sampled ms per script file (or V8's own category), most first."""
    nodes = {node["id"]: node for node in profile["nodes"]}
    parent = {child: node["id"] for node in profile["nodes"] for child in node.get("children", [])}
    spent: collections.Counter = collections.Counter()
    for sample, delta in zip(profile["samples"], profile["timeDeltas"]):
        node = nodes[sample]
        name = node["callFrame"]["functionName"]
        while not node["callFrame"]["url"] and node["id"] in parent:
            node = nodes[parent[node["id"]]]
        where = node["callFrame"]["url"].split("/")[-1] or name
        spent[name if name in ("(idle)", "(program)", "(garbage collector)") else where] += (
            delta / 1000)
    return spent.most_common(12)


def summarize(label: str, visits: list[dict]) -> None:
    print(f"== {label}: {len(visits)} visits")
    names = list(dict.fromkeys(name for phases in visits for name in phases))
    for name in names:
        values = [phases.get(name) for phases in visits]
        known = [value for value in values if value is not None]
        digits = 2 if name == "seconds" else 0
        shown = [None if v is None else round(v, digits) for v in values]
        print(f"  {name:34s} {round(statistics.median(known), digits):>8}   {shown}")


def main() -> None:
    from playwright.sync_api import sync_playwright

    roots = dict(item.split("=", 1) for item in
                 os.environ.get("ROOTS", f"now={loadtest.ROOT}").split(","))
    count, shots, profile = (int(os.environ.get("VISITS", "5")), os.environ.get("SHOTS"),
                             os.environ.get("CPU_PROFILE"))
    servers, urls = {}, {}
    try:
        for label, root in roots.items():
            servers[label] = start_server(Path(root).resolve())
            query = {**loadtest.link_query(), "run": loadtest.teacher_trains(servers[label])}
            urls[label] = loadtest.url_of(servers[label].base, query)
        visits: dict[str, list[dict]] = {label: [] for label in roots}
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=loadtest.CHROMIUM, args=loadtest.FLAGS)
            for index in range(count):
                last = index == count - 1
                for label in roots:  # the servers take turns
                    visits[label].append(visit(
                        browser, urls[label], servers[label].log,
                        f"{shots}-{label}.png" if shots and last else None,
                        f"{profile}-{label}.json" if profile and last else None))
            browser.close()
    finally:
        for server in servers.values():
            server.close()
    for label, phases in visits.items():
        summarize(label, phases)
        if profile:
            spent = cpu_by_file(json.loads(Path(f"{profile}-{label}.json").read_text()))
            print("  CPU of the last visit, ms:", [(name, round(ms)) for name, ms in spent])


if __name__ == "__main__":
    if sys.argv[1:2] == [SERVE]:
        serve(sys.argv[2:])
    else:
        main()
