"""A classroom link's QR code, for the projector and ``stacklab share --qr``."""

from __future__ import annotations

import io

from ...core.errors import StackError

QR_SCALE = 10  # the share dialog's QR code: pixels a module (the CLI's --qr draws the same)


def qr_png(link: str, scale: int = QR_SCALE) -> bytes:
    """A QR code of ``link`` as PNG bytes, made in memory (``segno``), for the projector.
    ``E_VALUE`` for a link longer than a QR code holds (about 2,300 characters at this
    error correction): the link is then shared as text."""
    import segno

    try:
        code = segno.make(link, error="m", micro=False)
    except segno.DataOverflowError:
        raise StackError("E_VALUE", f"the link is {len(link):,} characters long, more than a QR "
                         "code holds", hint="share the link as text (copy it), or shorten the "
                         "stack: its comments and blank lines count too") from None
    out = io.BytesIO()
    code.save(out, kind="png", scale=scale, border=4)
    return out.getvalue()
