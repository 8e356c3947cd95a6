"""A class's voters: identities the server issues, signed, so that a device keeps one vote
through a reload or a second scan of the QR code, and a made-up identity counts nothing.

A voter identity is a random nonce and its HMAC-SHA256 under the server's secret, bound to
one class: ``NONCE`` (12 url-safe characters) then ``SIGNATURE`` (22), 34 characters in
all. The student's browser keeps it (a cookie per class, `ui.watch`) and the page sends it
back at each read of the class; only an identity whose signature checks for that class is
counted as following, voting or polling (`classes.Classes`). The secret is the server's
own (made at start, or ``STACKLAB_SECRET``, the same on every app server of a deployment);
on a Ray cluster the classes actor holds it, so every app server checks the same
identities.

New identities are rate-bounded per client address by a token bucket (`ISSUE_BURST`
at once, then `ISSUE_PER_SECOND`): a room of phones behind one address gets in at once,
and a script at one address makes a few identities a second, not hundreds.

>>> voters = Voters(b"a test secret")
>>> token = voters.issue("1a2b3c4d", "10.0.0.7", now=0.0)
>>> len(token), voters.check(token, "1a2b3c4d"), voters.check(token, "00000000")
(34, True, False)
>>> voters.check(token[:-1] + ("A" if token[-1] != "A" else "B"), "1a2b3c4d")
False
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
from dataclasses import dataclass

SECRET_ENV = "STACKLAB_SECRET"  # the secret every app server of one deployment shares
NONCE_CHARS = 12  # the identity's random part (72 bits)
SIGNATURE_CHARS = 22  # its HMAC-SHA256, cut to 132 bits (url-safe base64)
ISSUE_BURST = 120  # new identities one address gets at once: a room behind one router
ISSUE_PER_SECOND = 1.0  # then this many a second (a script: 60 a minute, not hundreds)
MAX_ADDRESSES = 4096  # addresses whose buckets are kept; full buckets are forgotten first


def server_secret() -> bytes:
    """``STACKLAB_SECRET`` when set (shared by a deployment's app servers), else a random
    secret of this process: a restart then issues new identities, as it loses its classes."""
    shared = os.environ.get(SECRET_ENV, "")
    return shared.encode() if shared else secrets.token_bytes(32)


@dataclass
class _Bucket:
    tokens: float
    at: float


class Voters:
    """Issues and checks the voter identities of the server's classes (see the module
    docstring). Not thread-safe: `Classes` calls it under its lock."""

    def __init__(self, secret: bytes | None = None, burst: int = ISSUE_BURST,
                 per_second: float = ISSUE_PER_SECOND):
        self._secret = secret or server_secret()
        self.burst, self.per_second = burst, per_second
        self._buckets: dict[str, _Bucket] = {}

    def issue(self, class_id: str, address: str | None, now: float) -> str | None:
        """A new identity for a device at ``address`` following ``class_id``, or None while
        that address has had its share of new identities (it gets one again within
        1 / `ISSUE_PER_SECOND` s)."""
        if not self._take(str(address or ""), now):
            return None
        nonce = secrets.token_urlsafe(NONCE_CHARS)[:NONCE_CHARS]
        return nonce + self._sign(class_id, nonce)

    def check(self, token: object, class_id: str) -> bool:
        """Whether ``token`` is an identity this server issued for ``class_id``."""
        if not isinstance(token, str) or len(token) != NONCE_CHARS + SIGNATURE_CHARS:
            return False
        nonce, signature = token[:NONCE_CHARS], token[NONCE_CHARS:]
        return hmac.compare_digest(signature, self._sign(class_id, nonce))

    def _sign(self, class_id: str, nonce: str) -> str:
        digest = hmac.new(self._secret, f"{class_id}:{nonce}".encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode()[:SIGNATURE_CHARS]

    def _take(self, address: str, now: float) -> bool:
        bucket = self._buckets.get(address)
        if bucket is None:
            if len(self._buckets) >= MAX_ADDRESSES:
                self._forget_full(now)
            bucket = self._buckets[address] = _Bucket(float(self.burst), now)
        bucket.tokens = min(self.burst, bucket.tokens + (now - bucket.at) * self.per_second)
        bucket.at = now
        if bucket.tokens < 1.0:
            return False
        bucket.tokens -= 1.0
        return True

    def _forget_full(self, now: float) -> None:
        """Drop the buckets that have refilled (they would start full anyway); if none has,
        the one refilled most."""
        refill = self.burst / self.per_second
        self._buckets = {a: b for a, b in self._buckets.items() if now - b.at < refill}
        if len(self._buckets) >= MAX_ADDRESSES:
            del self._buckets[min(self._buckets, key=lambda a: self._buckets[a].at)]


__all__ = ["ISSUE_BURST", "ISSUE_PER_SECOND", "SECRET_ENV", "Voters", "server_secret"]
