"""What a student's browser downloads (issue 35): the app's static files come back
compressed, once, and a second opening comes from the browser's cache. The middleware
(`ui.compression`) in front of a real Starlette static route, and the real server
(server.py, as `make run` starts it) in Chromium, measured with bench/bytes.py's meter at
small scale. The figures themselves (against Streamlit's hello app, while a run trains)
are bench/bytes.py's, in `make loadtest`."""

from __future__ import annotations

import asyncio
import gzip
import importlib.util
import urllib.request
from pathlib import Path

import pytest
from starlette.exceptions import HTTPException
from starlette.staticfiles import StaticFiles

from test_browser import browser, reason, server  # noqa: F401 - the suite's server and Chromium
from ui.compression import CompressedAssets

ROOT = Path(__file__).parent.parent
_spec = importlib.util.spec_from_file_location("bytes_bench", ROOT / "bench" / "bytes.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def ask(app, path: str, **headers) -> tuple[int, dict, bytes]:
    """One GET of ``path`` through ``app`` (ASGI): status, headers, body."""
    scope = {"type": "http", "method": headers.pop("method", "GET"), "path": path,
             "root_path": "", "query_string": b"", "scheme": "http", "http_version": "1.1",
             "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 1),
             "headers": [(name.replace("_", "-").encode(), value.encode())
                         for name, value in headers.items()]}
    messages, asked = [], []

    async def receive():  # the request, then nothing more until the response is done
        if asked:
            await asyncio.Event().wait()
        asked.append(True)
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        messages.append(message)

    asyncio.run(app(scope, receive, send))
    start = messages[0]
    return (start["status"], {k.decode(): v.decode() for k, v in start["headers"]},
            b"".join(m.get("body", b"") for m in messages[1:]))


@pytest.fixture
def static(tmp_path):
    (tmp_path / "static").mkdir()
    (tmp_path / "static" / "index.js").write_text("const x = 1;\n" * 2000)
    (tmp_path / "static" / "font.woff2").write_bytes(bytes(range(256)) * 40)
    (tmp_path / "static" / "tiny.js").write_text("x")
    return CompressedAssets(StaticFiles(directory=tmp_path), root=tmp_path)


def test_a_static_file_is_gzipped_once_and_kept(static):
    status, headers, body = ask(static, "/static/index.js", accept_encoding="gzip, br")
    assert status == 200 and headers["content-encoding"] == "gzip"
    assert gzip.decompress(body) == ("const x = 1;\n" * 2000).encode()
    assert int(headers["content-length"]) == len(body) < 26_000 / 20
    assert headers["etag"].startswith("W/") and "accept-ranges" not in headers
    kept = static.cache["/static/index.js"]
    assert ask(static, "/static/index.js", accept_encoding="gzip")[2] is kept[1]  # not again


@pytest.mark.parametrize("path, headers", [
    ("/static/index.js", {}),  # a client that takes no gzip
    ("/static/index.js", {"accept_encoding": "gzip", "range": "bytes=0-9"}),
    ("/static/font.woff2", {"accept_encoding": "gzip"}),  # compressed already
    ("/static/tiny.js", {"accept_encoding": "gzip"}),  # smaller than its headers would save
])
def test_what_is_not_worth_compressing_passes_as_streamlit_sends_it(static, path, headers):
    status, sent, _ = ask(static, path, **headers)
    assert status in (200, 206) and "content-encoding" not in sent


def test_a_revalidation_or_a_missing_file_is_answered_by_streamlit(static):
    _, headers, _ = ask(static, "/static/index.js", accept_encoding="gzip")
    status, _, body = ask(static, "/static/index.js", accept_encoding="gzip",
                          if_none_match=headers["etag"].removeprefix("W/"))
    assert status == 304 and body == b""
    with pytest.raises(HTTPException):  # Starlette's 404, raised through as it is
        ask(static, "/static/nothing.js", accept_encoding="gzip")
    assert "/static/nothing.js" not in static.cache


def fallback(static_app, index: bytes):
    """``static_app`` answering a path that is no file as Streamlit does: 200 and its index
    page (its own single-page routing)."""
    async def app(scope, receive, send):
        try:
            await static_app(scope, receive, send)
        except HTTPException:
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"text/html"),
                                    (b"content-length", str(len(index)).encode())]})
            await send({"type": "http.response.body", "body": index})
    return app


def test_made_up_paths_are_not_kept_and_the_least_recently_used_file_goes_first(
        static, tmp_path, monkeypatch):
    """Issue 46: after more made-up paths than the cache holds, a real file is still
    compressed once and kept; past the bound, the least recently used file goes."""
    index = b"<html>" + b"<div>Streamlit</div>" * 200 + b"</html>"
    app = CompressedAssets(fallback(static.app, index), root=tmp_path)
    monkeypatch.setattr("ui.compression.KEPT_FILES", 3)
    for n in range(10):
        status, headers, body = ask(app, f"/static/made-up-{n}.js", accept_encoding="gzip")
        assert status == 200 and body == index and "content-encoding" not in headers
    assert app.cache == {}
    for name in ("more.js", "other.js"):
        (tmp_path / "static" / name).write_text(f"const {name[0]} = 2;\n" * 2000)
    ask(app, "/static/index.js", accept_encoding="gzip")
    kept = app.cache["/static/index.js"]
    ask(app, "/static/more.js", accept_encoding="gzip")
    ask(app, "/static/index.js", accept_encoding="gzip")  # used again: now the most recent
    ask(app, "/static/other.js", accept_encoding="gzip")
    ask(app, "/static/tiny.js", accept_encoding="gzip")  # kept as None: sent as it is
    assert list(app.cache) == ["/static/index.js", "/static/other.js", "/static/tiny.js"]
    assert ask(app, "/static/index.js", accept_encoding="gzip")[2] is kept[1]  # not again
    assert ask(app, "/static/../../etc/passwd", accept_encoding="gzip")[0] == 200  # index
    assert "/static/../../etc/passwd" not in app.cache


@pytest.mark.skipif(reason is not None, reason=reason or "")
def test_the_served_page_is_compressed_and_opens_again_from_the_cache(server, browser):  # noqa: F811
    """Home on a phone: Streamlit's JavaScript comes back gzipped, and the same page opened
    again in the same browser transfers a small part of the first opening."""
    context = browser.new_context(viewport=bench.VIEWPORT, is_mobile=True, has_touch=True)
    try:
        first, page, _ = bench.opening(context, server + "/", "h1")
        page.close()
        second, page, _ = bench.opening(context, server + "/", "h1")
    finally:
        context.close()
    scripts = [r for r in first["largest"] if r["url"].endswith(".js")]
    assert scripts and all(r["encoding"] == "gzip" for r in scripts)
    assert all("immutable" in r["cache_control"] for r in scripts)
    assert first["http"] > 100_000 and second["total"] < first["total"] / 10


@pytest.mark.skipif(reason is not None, reason=reason or "")
def test_the_real_server_compresses_its_files_and_no_made_up_path(server):  # noqa: F811
    """Streamlit answers a made-up path under /static/ with its index page: the server
    sends it as it is (issue 46: it was compressed and kept, filling the cache)."""
    from streamlit import file_util

    real = min((p for p in (Path(file_util.get_static_dir()) / "static" / "js").glob("*.js")
                if p.stat().st_size > 50_000), key=lambda p: p.stat().st_size)
    answers = {}
    for path in (f"/static/js/{real.name}", "/static/js/made-up-46.js", "/static/made/up"):
        request = urllib.request.Request(server + path, headers={"Accept-Encoding": "gzip"})
        with urllib.request.urlopen(request, timeout=30) as response:
            answers[path] = response.headers.get("Content-Encoding"), response.read()
    assert answers[f"/static/js/{real.name}"][0] == "gzip"
    for path in ("/static/js/made-up-46.js", "/static/made/up"):
        encoding, body = answers[path]
        assert encoding is None and b"<html" in body.lower()  # Streamlit's index page
