"""What a made-up static path costs the server (issue 46): Streamlit answers any path under
``/static/`` with its index page, and the compression middleware (`ui.compression`) kept
each such answer as a file until its cache was full; from then on each large file was
gzipped again at every request (plotly's chunk, 4.7 MB, about 0.2 s of CPU each).

On the real server (server.py, `loadtest.Server`): `FAKES` made-up paths first (more than
the cache's `KEPT_FILES`), then the largest of Streamlit's scripts asked `ASKS` times, as
a class's browsers do; the server process's CPU per request of each kind (/proc, all its
threads), and the bytes of the last answer.

    python bench/static_cache.py      # writes bench/static_cache.json
"""

from __future__ import annotations

import json
import sys
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import loadtest  # noqa: E402

FAKES = 1030  # more than ui.compression.KEPT_FILES (1,024)
ASKS = 10


def get(url: str) -> bytes:
    request = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return response.read()


def largest_script() -> str:
    from streamlit import file_util

    scripts = (Path(file_util.get_static_dir()) / "static" / "js").glob("*.js")
    return "/static/js/" + max(scripts, key=lambda p: p.stat().st_size).name


def main() -> dict:
    server = loadtest.Server()
    try:
        script = largest_script()
        before = server.cpu()
        for n in range(FAKES):
            get(f"{server.base}/static/js/made-up-{n}.js")
        fake_ms = (server.cpu() - before) * 1e3 / FAKES
        before = server.cpu()
        for _ in range(ASKS):
            body = get(server.base + script)
        script_ms = (server.cpu() - before) * 1e3 / ASKS
    finally:
        server.close()
    found = {"fakes": FAKES, "fake_cpu_ms": round(fake_ms, 2), "script": script,
             "asks": ASKS, "script_cpu_ms": round(script_ms, 1), "script_bytes": len(body)}
    print(json.dumps(found, indent=2))
    return found


if __name__ == "__main__":
    Path(__file__).with_suffix(".json").write_text(json.dumps(main(), indent=2) + "\n")
