"""Accept-Encoding read as HTTP defines it (RFC 9110, section 12.5.3), for the app's two
gzipped answers: Streamlit's static files (`ui.compression`) and a live run's pictures
(`ui.endpoints`).

A coding is taken when its q-value is above 0: named itself (``gzip``, or its old alias
``x-gzip``), or else by ``*``, which stands for every coding the header does not name.
``gzip;q=0`` refuses gzip, and so does ``*;q=0`` when gzip is not named. A q-value that is
not one (more than three decimals, above 1, not a number) makes its entry count as
absent: a malformed header is answered uncompressed, which every client reads.

>>> takes_gzip("gzip, br"), takes_gzip("gzip;q=0"), takes_gzip("br, *;q=0.5")
(True, False, True)
"""

from __future__ import annotations

import re

QVALUE = re.compile(r"0(\.\d{0,3})?|1(\.0{0,3})?")  # RFC 9110 §12.4.2
GZIP_NAMES = ("gzip", "x-gzip")


def codings(header: str) -> dict[str, float]:
    """Each coding the header names, with its q-value (1 when it gives none); an entry
    whose q-value is malformed is left out.

    >>> codings("deflate, GZIP;q=0.5, br;q=2")
    {'deflate': 1.0, 'gzip': 0.5}
    """
    found: dict[str, float] = {}
    for entry in header.split(","):
        name, *parameters = (part.strip() for part in entry.split(";"))
        if not name:
            continue
        weight: float | None = 1.0
        for parameter in parameters:
            key, _, value = parameter.partition("=")
            if key.strip().lower() == "q":
                value = value.strip()
                weight = float(value) if QVALUE.fullmatch(value) else None
        if weight is not None:
            found[name.lower()] = weight
    return found


def takes_gzip(header: str | bytes | None) -> bool:
    """Does a client sending this Accept-Encoding header take a gzipped answer?"""
    if isinstance(header, bytes):
        header = header.decode("latin-1")
    found = codings(header or "")
    named = [found[name] for name in GZIP_NAMES if name in found]
    if named:
        return max(named) > 0
    return found.get("*", 0.0) > 0
