"""The deploy guide's load balancer (docs/guide/app.md, "One machine, several app
servers"), run as written: Debian's nginx with the guide's own configuration, in front of
two app servers (server.py, as the guide starts them) that share a run store. Each browser
gets a cookie of its own and keeps its server (sticky sessions), the websocket passes, and
a class spreads over both servers: the teacher trains on one, and students on both open
the teacher's run link and see its figure.

nginx comes from `make test` (the ``nginx`` target, Debian's package); without it the test
is skipped with the reason, except under ``STACKLAB_CI=1``, where it fails.

A lesson's class (Learn's "Present this lesson") lives in its server's memory without Ray
(`ui.hub.Hub.classes`, `server_classes`); across servers it needs ``STACKLAB_RAY_ADDRESS``, which
tests/test_ray_share.py covers. This class is the one every server shares through the run
store: the teacher's ``run=`` link."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from test_browser import CHROMIUM, FLAGS, _free_port, _missing_browser, start_streamlit

ROOT = Path(__file__).parent.parent
GUIDE = ROOT / "docs" / "guide" / "app.md"
NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)

if NGINX is None and os.environ.get("STACKLAB_CI") == "1":
    raise RuntimeError("nginx is missing under STACKLAB_CI=1: `make test` installs Debian's nginx")
pytestmark = [pytest.mark.skipif(NGINX is None, reason="nginx is not installed (make nginx)"),
              pytest.mark.skipif(_missing_browser() is not None, reason=_missing_browser() or "")]


def guide_recipe() -> tuple[str, str]:
    """The guide's shell recipe and its nginx configuration, as written there."""
    text = GUIDE.read_text(encoding="utf-8")
    section = text.split("### One machine, several app servers", 1)[1].split("\n### ", 1)[0]
    shell = re.search(r"```\n(.*?)```", section, re.S).group(1)
    conf = re.search(r"```nginx\n(.*?)```", section, re.S).group(1)
    return shell, conf


def nginx_conf(conf: str, ports: list[int], listen: int, folder: Path) -> str:
    """The guide's configuration with this test's ports, inside a main file that keeps
    nginx's own files in ``folder`` (it runs unprivileged, in the foreground)."""
    servers = "".join(f"    server 127.0.0.1:{port};\n" for port in ports)
    conf = re.sub(r"(    server 127\.0\.0\.1:\d+;\n)+", servers, conf)
    conf = conf.replace("listen 80;", f"listen 127.0.0.1:{listen};")
    temp = "".join(f"    {kind}_temp_path {folder / kind};\n"
                   for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    return (f"daemon off;\npid {folder / 'nginx.pid'};\nerror_log {folder / 'error.log'};\n"
            f"events {{ worker_connections 256; }}\nhttp {{\n    access_log {folder / 'access.log'};\n"
            f"{temp}{conf}}}\n")


def test_the_guides_recipe_starts_server_py_and_balances_by_cookie():
    shell, conf = guide_recipe()
    assert "streamlit run server.py" in shell and "app.py" not in shell
    assert "hash $stacklab_server consistent;" in conf and "ip_hash" not in conf
    assert "proxy_set_header Upgrade $http_upgrade;" in conf
    assert "proxy_set_header Connection $connection_upgrade;" in conf


def landing(base: str, cookie: str) -> str:
    """The app server that answers a browser with ``cookie`` (the balancer's header)."""
    request = urllib.request.Request(f"{base}/_stcore/health",
                                     headers={"Cookie": f"stacklab_server={cookie}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.headers["X-Stacklab-Server"]


def test_two_app_servers_behind_the_guides_nginx(tmp_path):
    from playwright.sync_api import sync_playwright

    _, conf = guide_recipe()
    env = {**os.environ, "STACKLAB_RUNS": str(tmp_path / "runs"), "STACKLAB_WORKERS": "1"}
    servers = [start_streamlit(env, tmp_path / f"app-{n}.log") for n in range(2)]
    ports = [int(url.rsplit(":", 1)[1]) for _, url in servers]
    listen = _free_port()
    (tmp_path / "nginx.conf").write_text(nginx_conf(conf, ports, listen, tmp_path))
    balancer = subprocess.Popen([NGINX, "-c", str(tmp_path / "nginx.conf"), "-e",
                                 str(tmp_path / "error.log")],
                                stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{listen}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{base}/_stcore/health", timeout=2).read()
                break
            except OSError:
                assert time.monotonic() < deadline, (tmp_path / "error.log").read_text()
                time.sleep(0.2)
        # a browser's cookie keeps its server; cookies that the test chose land on both
        cookies = {}
        for n in range(40):
            cookies.setdefault(landing(base, f"student-{n}"), f"student-{n}")
        assert len(cookies) == 2, cookies
        for server, cookie in cookies.items():
            assert {landing(base, cookie) for _ in range(5)} == {server}
        with urllib.request.urlopen(f"{base}/_stcore/health", timeout=10) as response:
            set_cookies = response.headers.get_all("Set-Cookie")
            assert any(c.startswith("stacklab_server=") for c in set_cookies)  # a new browser's
        (teacher_cookie, student_cookie) = list(cookies.values())
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            pages = {}
            for name, cookie in (("teacher", teacher_cookie), ("student", student_cookie),
                                 ("neighbour", teacher_cookie)):
                context = browser.new_context(viewport={"width": 1300, "height": 900})
                context.add_cookies([{"name": "stacklab_server", "value": cookie,
                                      "url": base}])
                pages[name] = context.new_page()
            teacher = pages["teacher"]
            teacher.goto(f"{base}/train?task=reverse&seed=46&steps=200")
            teacher.get_by_role("button", name="Train", exact=True).click(timeout=60_000)
            teacher.get_by_text("Status: finished").wait_for(timeout=180_000)  # over the websocket
            teacher.wait_for_function("() => window.location.search.includes('run=')")
            key = teacher.evaluate("new URLSearchParams(window.location.search).get('run')")
            for name in ("student", "neighbour"):
                page = pages[name]
                page.goto(f"{base}/train?run={key[:8]}")
                page.get_by_text("Status: finished").wait_for(timeout=60_000)
                page.locator(".js-plotly-plot").first.wait_for(timeout=60_000)
            browser.close()
    finally:
        balancer.terminate()
        balancer.wait(timeout=20)
        for process, _ in servers:
            process.terminate()
            process.wait(timeout=20)
    logs = [(tmp_path / f"app-{n}.log").read_text() for n in range(2)]
    assert sum(log.count(f"training run {key}") for log in logs) == 1  # trained once
    access = (tmp_path / "access.log").read_text()
    assert " 101 " in access  # the websockets were upgraded through nginx
