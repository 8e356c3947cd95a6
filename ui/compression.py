"""Streamlit's static files compressed: an ASGI middleware in front of its server.

Streamlit serves its JavaScript and fonts (about 7 MB on the Train page, where plotly's
chunk alone is 4.7 MB) uncompressed, on purpose: compressing them again on every request
would cost its server's CPU, and a production site is expected to sit behind a proxy that
compresses. A classroom's laptop has no such proxy, and thirty phones on one access point
each download the page. So each static file is compressed once, the first time a browser
asks for it (gzip at its best level, in a thread), kept in memory, and every later
request is answered from there, least recently used dropped first past `KEPT_FILES`. Only
a path that is a file of Streamlit's static folder is compressed and kept: Streamlit
answers any other path under ``/static/`` with its index page, and a client making paths up
would otherwise fill the memory with copies of that page and push the real files out. The
files are content-hashed and served ``immutable`` for a
year, so a phone asks for each one once; the second opening of a page comes from its
cache. Requests for less than a whole file (a revalidation, a range, a HEAD) and files
already compressed (fonts, pictures) pass through to Streamlit. Accept-Encoding is read as
HTTP defines it (`ui.encoding`); a client that names gzip only to refuse it
(``gzip;q=0``) reaches the servers inside as ``identity``, since Streamlit's own gzip
middleware (Starlette's) looks for the word alone.
"""

from __future__ import annotations

import asyncio
import gzip
from collections import OrderedDict
from pathlib import Path

from ui.encoding import takes_gzip

STATIC_PREFIX = "/static/"  # Streamlit's own hashed assets (its frontend build)
MIN_BYTES = 1024  # smaller files gain less than their headers
KEPT_FILES = 1024  # files kept compressed, the least recently used dropped first: Streamlit's
# build has a few hundred, so all of them stay
# content types already compressed, or not worth it
SKIPPED_TYPES = ("font/", "image/png", "image/jpeg", "image/gif", "image/webp", "audio/",
                 "video/", "application/zip", "application/gzip", "application/wasm")


class CompressedAssets:
    """ASGI middleware: each of Streamlit's static files under `STATIC_PREFIX`, gzipped
    once and kept (``cache``: path -> headers and body, or None for one sent as it is: the
    server's hub's ``assets``, which server.py hands in, or one of its own).
    ``root``: the folder that a request's path names a file of (Streamlit's static folder,
    unless a test gives its own)."""

    def __init__(self, app, level: int = 9, root: str | Path | None = None,
                 cache: OrderedDict | None = None):
        self.app = app
        self.level = level
        self.root = Path(root or _streamlit_static()).resolve()
        self.cache: OrderedDict[str, tuple[list, bytes] | None] = (
            OrderedDict() if cache is None else cache)
        self._locks: dict[str, asyncio.Lock] = {}

    async def __call__(self, scope, receive, send) -> None:
        scope = _refusal_said_plainly(scope)
        if not self._wanted(scope):
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        lock = self._locks.setdefault(path, asyncio.Lock())
        async with lock:  # compressed once, not by each browser that asks at the same time
            if path in self.cache:
                kept = self.cache[path]
                self.cache.move_to_end(path)  # the most recently used
            else:
                status, headers, body = await _response(self.app, scope, receive)
                if status != 200:  # not a whole file (a 304 to a revalidation, a 404)
                    self._locks.pop(path, None)
                    await _send(send, status, headers, body)
                    return
                kept = await self._compressed(headers, body)
                self.cache[path] = kept
                if len(self.cache) > KEPT_FILES:
                    self.cache.popitem(last=False)  # the least recently used
                self._locks.pop(path, None)  # the next asker finds it kept (or asks again)
                if kept is None:  # sent as it came
                    await _send(send, status, headers, body)
                    return
        if kept is None:
            await self.app(scope, receive, send)
            return
        await _send(send, 200, *kept)

    def _wanted(self, scope) -> bool:
        """A whole static file asked for by a browser that takes gzip (a revalidation is
        Streamlit's to answer: a 304, or the file)."""
        if scope["type"] != "http" or scope.get("method") != "GET":
            return False
        path = scope.get("path", "")
        root = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root):]
        headers = dict(scope.get("headers", ()))
        conditional = b"if-none-match" in headers or b"if-modified-since" in headers
        return (path.startswith(STATIC_PREFIX) and b"range" not in headers and not conditional
                and takes_gzip(headers.get(b"accept-encoding")) and self._is_file(path))

    def _is_file(self, path: str) -> bool:
        """Is ``path`` a file of the static folder (not a path a client made up, which
        Streamlit answers with its index page)?"""
        if path in self.cache:
            return True
        try:
            found = (self.root / path.lstrip("/")).resolve()
            return found.is_relative_to(self.root) and found.is_file()
        except (OSError, ValueError):  # a name the file system refuses (a NUL, too long)
            return False

    async def _compressed(self, headers: list, body: bytes) -> tuple[list, bytes] | None:
        """The file's headers and body gzipped, or None when it is sent as it is."""
        names = {name.lower(): value for name, value in headers}
        kind = names.get(b"content-type", b"").decode("latin-1").lower()
        if (b"content-encoding" in names or len(body) < MIN_BYTES
                or kind.startswith(SKIPPED_TYPES)):
            return None
        packed = await asyncio.to_thread(gzip.compress, body, self.level, mtime=0)
        kept = [(name, value) for name, value in headers if name.lower() not in
                (b"content-length", b"content-encoding", b"vary", b"etag", b"accept-ranges")]
        kept += [(b"content-encoding", b"gzip"), (b"vary", b"Accept-Encoding"),
                 (b"content-length", str(len(packed)).encode())]
        if names.get(b"etag"):  # the same file's tag, weak: these bytes are another encoding
            kept.append((b"etag", b"W/" + names[b"etag"].removeprefix(b"W/")))
        return kept, packed


def _refusal_said_plainly(scope):
    """``scope`` with an Accept-Encoding that names gzip only to refuse it (``gzip;q=0``)
    made ``identity``: the servers inside (Streamlit's own gzip middleware, Starlette's)
    look for the word alone and would compress what this client refuses."""
    if scope["type"] != "http":
        return scope
    headers = scope.get("headers", ())
    said = next((value for name, value in headers if name == b"accept-encoding"), b"")
    if b"gzip" not in said.lower() or takes_gzip(said):
        return scope
    kept = [(name, value) for name, value in headers if name != b"accept-encoding"]
    return {**scope, "headers": [*kept, (b"accept-encoding", b"identity")]}


def _streamlit_static() -> Path:
    """Streamlit's static folder: its frontend build, which it serves at ``/``."""
    from streamlit import file_util  # noqa: PLC0415 - only the real server needs it

    return Path(file_util.get_static_dir())


async def _response(app, scope, receive) -> tuple[int, list, bytes]:
    """The inner app's whole response to ``scope``: status, headers, body."""
    start: dict = {}
    chunks: list[bytes] = []

    async def collect(message) -> None:
        if message["type"] == "http.response.start":
            start.update(message)
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(scope, receive, collect)
    return start.get("status", 500), list(start.get("headers", [])), b"".join(chunks)


async def _send(send, status: int, headers: list, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
