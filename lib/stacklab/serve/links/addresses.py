"""The address students can reach a classroom link at: from what the server listens on,
the Host the teacher's browser used and this machine's address on its network, with a
warning and the command that fixes it when no other device could open it; and the note
``make run`` prints as it starts.

>>> share_address("0.0.0.0", "127.0.0.1:8501", lan="10.0.0.5").base
'http://10.0.0.5:8501'
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

RESTART_FOR_THE_ROOM = "make run HOST=0.0.0.0"
RESTART_WITH_STREAMLIT = "streamlit run server.py --server.address 0.0.0.0"


@dataclass(frozen=True)
class ShareAddress:
    """Where students open the app: ``base`` (``http://10.0.0.5:8501``), and when they may
    not reach it, why (``warning``) and the command that fixes it (``fix``)."""

    base: str
    warning: str | None = None
    fix: str | None = None


def is_loopback(host: str | None) -> bool:
    """Whether ``host`` (a name or an address, IPv6 perhaps in brackets) is this machine only.

    >>> is_loopback("127.0.0.1"), is_loopback("[::1]"), is_loopback("localhost"), is_loopback("10.0.0.5")
    (True, True, True, False)
    """
    host = (host or "").strip().strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _host_name(host_header: str) -> str:
    return urlsplit(f"//{host_header}").hostname or ""


def _with_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def share_address(listen: str | None, browser_host: str | None, *, port: int = 8501,
                  scheme: str = "http", lan: str | None = None) -> ShareAddress:
    """The address for a classroom link, from what the server listens on (``listen``, its
    ``server.address``: empty for every interface), the Host the teacher's browser used
    (``browser_host``, e.g. ``127.0.0.1:8501``), the server's ``port`` and this machine's
    address on its network (``lan``, `lan_address`).

    >>> share_address("0.0.0.0", "127.0.0.1:8501", lan="10.0.0.5").base
    'http://10.0.0.5:8501'
    >>> share_address("127.0.0.1", "127.0.0.1:8501").fix
    'make run HOST=0.0.0.0'
    """
    listen = (listen or "").strip()
    here = browser_host or _with_port(listen.strip("[]") or "127.0.0.1", port)
    if is_loopback(listen):
        return ShareAddress(
            f"{scheme}://{here}",
            warning=(f"The server listens on {listen} only, so no other device can open this "
                     f"link. Restart it for the room with `{RESTART_FOR_THE_ROOM}` (or "
                     f"`{RESTART_WITH_STREAMLIT}`), then open this page again."),
            fix=RESTART_FOR_THE_ROOM)
    if browser_host and not is_loopback(_host_name(browser_host)):
        return ShareAddress(f"{scheme}://{browser_host}")  # the teacher reached it over the network
    if listen not in ("", "0.0.0.0", "::"):
        return ShareAddress(f"{scheme}://{_with_port(listen.strip('[]'), port)}")
    if lan:
        return ShareAddress(f"{scheme}://{_with_port(lan, port)}")
    return ShareAddress(
        f"{scheme}://{here}",
        warning=("This machine has no address on a network that other devices could reach, "
                 "so the link names this machine only. Connect it to the classroom's network "
                 "and open this page again, or put its address (`hostname -I`) in the link."),
        fix="hostname -I")


def lan_address() -> str | None:
    """This machine's IPv4 address on its network (where its default route leaves), or None.
    A UDP ``connect`` only picks the route: no packet is sent."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1, never routed anywhere real
            address = probe.getsockname()[0]
    except OSError:
        return None
    return None if is_loopback(address) or address == "0.0.0.0" else address


def network_addresses() -> list[str]:
    """This machine's IPv4 addresses that other devices may reach (loopback left out):
    the route's (`lan_address`) first, then every other address its name resolves to."""
    found = [lan_address()]
    try:
        infos = socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)
    except OSError:
        infos = []
    found += [info[4][0] for info in infos]
    return [a for a in dict.fromkeys(found) if a and not is_loopback(a) and a != "0.0.0.0"]


MAKE_PORT = 8501  # the Makefile's PORT when none is given


def restart_hint(port: int) -> str:
    """The command that restarts the app for the room on the port in use (the Makefile's
    own port needs no PORT=).

    >>> restart_hint(8600), restart_hint(8501)
    ('make run HOST=0.0.0.0 PORT=8600', 'make run HOST=0.0.0.0')
    """
    return RESTART_FOR_THE_ROOM + ("" if int(port) == MAKE_PORT else f" PORT={int(port)}")


def serving_note(listen: str | None, port: int, lan: str | None = None) -> str:
    """What ``make run`` prints as it starts: the link students open when the server listens
    on the room's network, else that no other device can open it, and the command that
    serves the room.

    >>> serving_note("0.0.0.0", 8501, lan="10.0.0.5")
    'stacklab: students open http://10.0.0.5:8501'
    >>> serving_note("127.0.0.1", 8600)  # doctest: +NORMALIZE_WHITESPACE
    'stacklab: http://127.0.0.1:8600 listens on 127.0.0.1 only: no phone can open it. For a
     classroom: make run HOST=0.0.0.0 PORT=8600'
    """
    address = share_address(listen, None, port=port, lan=lan)
    if address.warning is None:
        return f"stacklab: students open {address.base}"
    if is_loopback(listen):
        return (f"stacklab: {address.base} listens on {listen} only: no phone can open it. "
                f"For a classroom: {restart_hint(port)}")
    return f"stacklab: {address.base} (no network address found: `hostname -I`)"
