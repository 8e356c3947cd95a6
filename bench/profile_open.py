"""Where the server's CPU goes when students open the teacher's link and press Train
(issue 38's hall500): py-spy samples the real server (bench/loadtest.py's `Server`) while
``N`` agent students, one after another, open the link (``reverse``, every control pinned)
and press Train, which finds the teacher's finished run. Prints the CPU per student and its
share by part (Streamlit's own work, and the app's: the page script's calls by function).

    python bench/profile_open.py [N [P]]  # N students, then P more profiled (default 100,
                                          # N); needs py-spy. The CPU a student costs
                                          # grows with the sessions already open.
"""

from __future__ import annotations

import collections
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import loadtest  # noqa: E402

ROOT = Path(__file__).parent.parent
PAGE_FILES = {"app.py", "train.py"}  # the page script's files as py-spy names them
APP_FILES = PAGE_FILES | {p.name for p in (ROOT / "views").glob("*.py")} | {
    p.name for p in (ROOT / "parts").rglob("*.py")}  # the pages and their parts
FRAME = re.compile(r"(.*) \((.*):(\d+)\)$")


def student(server, query: dict) -> int:
    """One student opens ``query`` and presses Train: the requests it made."""
    one = loadtest.AgentStudent(server.base, query, 0.0)
    one.run()
    assert one.status == "finished", one.status
    return one.requests


def is_app(path: str) -> bool:
    return path in APP_FILES or path.startswith(("ui/", "stacklab/", "views/", "parts/"))


def source_line(path: str, line: int) -> str:
    file = ROOT / path if (ROOT / path).exists() else ROOT / "views" / path
    try:
        return file.read_text().splitlines()[line - 1].strip()[:70]
    except (OSError, IndexError):
        return "?"


def part(stack: str) -> str:
    """Where a sample's CPU went: the page script's line it was under (its deepest line
    in app.py or views/train.py), or Streamlit's own work outside the script (by the
    outermost Streamlit function that names it)."""
    frames = [FRAME.match(f).groups() for f in stack.split(";") if FRAME.match(f)]
    lines = [(path, int(line)) for _, path, line in frames if path in PAGE_FILES]
    if lines:
        path, line = lines[-1]
        return f"script {path}:{line}  {source_line(path, line)}"
    if any(is_app(path) for _, path, _ in frames):
        inner = [f"{name} ({path})" for name, path, _ in frames if is_app(path)]
        return "app, outside the script: " + inner[0]
    for name, path, _ in frames:
        if path.startswith("streamlit/") and name not in ("<module>", "main_run", "_main_run",
                                                          "run_asgi_app", "run", "<lambda>"):
            return f"streamlit: {name} ({path})"
    return "other: " + (frames[-1][0] + " " + frames[-1][1] if frames else "?")


RATE = 250  # py-spy's samples a second


def main(n: int, profiled: int) -> None:
    server = loadtest.Server(max_sessions=n + profiled + 20)
    out = server.folder / "profile.txt"
    try:
        loadtest.warm(server)
        key = loadtest.teacher_trains(server)
        server.settle(key)
        query = loadtest.link_query()
        for _ in range(5):
            student(server, query)  # warm the caches a first student fills
        cpu, started = server.cpu(), time.monotonic()
        requests = sum(student(server, query) for _ in range(n))
        spent = server.cpu() - cpu
        print(f"{n} students ({requests} requests) in {time.monotonic() - started:.1f} s: "
              f"server CPU {spent * 1e3 / n:.1f} ms per student (unprofiled)")
        spy = subprocess.Popen([str(Path(sys.executable).parent / "py-spy"), "record", "-p",
                                str(server.process.pid), "-r", str(RATE), "-f", "raw", "-o",
                                str(out), "--gil"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)
        for _ in range(profiled):
            student(server, query)
        time.sleep(0.5)
        spy.send_signal(2)
        spy.wait(timeout=60)
    finally:
        server.close()
    report(out, profiled)


def report(out: Path, n: int) -> None:
    """Each part's CPU per student, from the samples (the thread holding the GIL at each tick: Python work is one at a time)."""
    parts: collections.Counter = collections.Counter()
    for line in out.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        parts[part(stack)] += int(count)
    total = sum(parts.values())
    per = 1e3 / RATE / n
    print(f"{total} samples: {total * per:.1f} ms per student under the profiler")
    script = sum(c for name, c in parts.items() if name.startswith("script "))
    print(f"  the page script: {script * per:.1f} ms; the rest: {(total - script) * per:.1f} ms")
    for name, count in parts.most_common(60):
        print(f"  {count * per:5.2f} ms  {name}")
    print(f"raw: {out}")


if __name__ == "__main__":
    first = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    main(first, int(sys.argv[2]) if len(sys.argv) > 2 else first)
