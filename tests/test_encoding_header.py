"""Accept-Encoding read as HTTP defines it (RFC 9110 §12.5.3, issue 46): q-values, ``*``
and ``identity``, by the one parser that the static files' compression (`ui.compression`)
and the live pictures' endpoint (`ui.endpoints`) share; the endpoint refusing gzip to
a real server's client is in tests/test_watch_run.py."""

from __future__ import annotations

import pytest

from test_bytes import ask, static  # noqa: F401 - the middleware over a real static route
from ui.encoding import takes_gzip


@pytest.mark.parametrize("header, gzip", [
    ("gzip", True), ("gzip, br", True), ("GZIP;Q=1.0", True), ("deflate, gzip;q=0.5", True),
    ("x-gzip", True),  # gzip's old alias (RFC 9110 §8.4.1.3)
    ("*", True), ("br, *;q=0.1", True),
    ("", False), ("identity", False), ("br", False), ("gzipped", False), ("gzip-x", False),
    ("gzip;q=0", False), ("gzip; q=0.000", False), ("gzip;q=0, *", False),
    ("*;q=0", False), ("br, *;q=0", False), ("gzip;q=nonsense", False), ("gzip;q=1.5", False),
    ("gzip;q=0.0001", False),  # more than three decimals: not a q-value, not gzip
])
def test_the_header_is_read_as_http_defines_it(header, gzip):
    assert takes_gzip(header) is gzip


def test_a_client_that_refuses_gzip_gets_the_static_file_as_it_is(static):  # noqa: F811
    status, headers, body = ask(static, "/static/index.js", accept_encoding="gzip;q=0")
    assert status == 200 and "content-encoding" not in headers
    assert body == ("const x = 1;\n" * 2000).encode()
    status, headers, _ = ask(static, "/static/index.js", accept_encoding="br, *;q=0.5")
    assert headers["content-encoding"] == "gzip"
