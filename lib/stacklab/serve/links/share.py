"""A classroom link and the classroom's projector: the link a teacher shares (the
experiment, the controls it pins with ``hide=``, and ``run=KEY`` once trained), the address
students can reach it at, its QR code, and the pattern figure made readable from the back
of a room.

>>> from stacklab.serve.links.experiment import DEFAULT
>>> classroom_link(DEFAULT, "http://10.0.0.5:8501", pinned=("task", "steps"))
'http://10.0.0.5:8501/train?task=reverse&hide=task,steps'
>>> link = classroom_link(DEFAULT.with_task_preset("shift"), "http://10.0.0.5:8501/")
>>> experiment, run_key, problems = experiment_of_link(link)
>>> experiment == replace(DEFAULT.with_task_preset("shift"), hide=ALL_PINS), run_key, problems
(True, None, [])

The link is built from the app's own parser (the link table, `experiment.from_query`): a value is left
out only when the app, reading the link without it, arrives at the same experiment (a
task's preset stack and settings follow from ``task=``), so every link round-trips and
stays short enough for a QR code. Streamlit-free, like the rest of `stacklab.serve`.
"""

from __future__ import annotations

import ipaddress
import io
import socket
from dataclasses import dataclass, replace
from typing import Iterable
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

import plotly.graph_objects as go

from ...core.errors import StackError, shown
from ..limits import MAX_LINK_STACK_CHARS
from .experiment import Experiment, from_query, read_link, to_query
from .experiment import LINK_SETTINGS
from .link_table import HIDEABLE, SESSION_VALUES, parse_run, write_values

ALL_PINS = HIDEABLE  # a classroom link pins every control unless the teacher says otherwise
ALWAYS_IN_LINK = ("task",)  # kept even at its default, so a reader of the link sees the task
PAGES = {"build": "", "train": "train", "explore": "explore"}  # page -> its URL path
RESTART_FOR_THE_ROOM = "make run HOST=0.0.0.0"
SHORT_KEY = 8  # the digits of a run key the app shows, and a class link carries when unique
RESTART_WITH_STREAMLIT = "streamlit run server.py --server.address 0.0.0.0"


def check_pins(names: Iterable[str]) -> tuple[str, ...]:
    """``names`` in the order of `HIDEABLE` (a link's ``hide=``); ``E_ARG`` for one the app
    does not know."""
    names = tuple(dict.fromkeys(str(name).strip() for name in names if str(name).strip()))
    unknown = [name for name in names if name not in HIDEABLE]
    if unknown:
        raise StackError("E_ARG", f"cannot pin {', '.join(shown(n) for n in unknown[:5])}: "
                         "not a control of the app", hint=f"pin some of: {', '.join(HIDEABLE)}")
    return tuple(name for name in HIDEABLE if name in names)


def check_base_url(text: str) -> str:
    """The address the app is served at (``http://10.0.0.5:8501``, perhaps with a path), with
    no trailing slash; ``E_VALUE`` for anything else.

    >>> check_base_url("http://10.0.0.5:8501/")
    'http://10.0.0.5:8501'
    """
    parts = urlsplit(str(text).strip())
    try:
        port_ok = parts.port is None or 0 < parts.port < 65536
    except ValueError:
        port_ok = False
    if parts.scheme not in ("http", "https") or not parts.hostname or not port_ok \
            or parts.query or parts.fragment or parts.username or any(c.isspace() for c in text.strip()):
        raise StackError("E_VALUE", f"{shown(text, 80)} is not the address of a server",
                         hint="give it as http://HOST:PORT, e.g. http://10.0.0.5:8501")
    return f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}"


def link_query(experiment: Experiment, pinned: Iterable[str] = ALL_PINS,
               run_key: str | None = None) -> dict[str, str]:
    """The query of the classroom link: ``experiment`` with ``pinned`` controls hidden, and
    ``run=KEY`` when a run exists. Raises `StackError` for a value no link can carry (one
    outside the classroom range, a stack too long for a URL) and for a malformed key."""
    target = replace(experiment, hide=check_pins(pinned))
    if len(target.stack) > MAX_LINK_STACK_CHARS:
        raise StackError("E_VALUE", f"the stack is {len(target.stack):,} characters long; a "
                         f"link holds at most {MAX_LINK_STACK_CHARS:,}",
                         hint="shorten the stack (comments and blank lines count too)")
    if run_key is not None and parse_run(run_key)[1]:
        raise StackError("E_VALUE", parse_run(run_key)[1],
                         hint="give the key the app shows as run=KEY in its address")
    query = to_query(target)
    read_back, problems = from_query(query)
    if problems or read_back != target:
        raise StackError("E_ARG", "a link cannot carry this experiment: "
                         + ("; ".join(problems) or "it reads back differently"),
                         hint="use values within the classroom ranges (what the app accepts)")
    for name in list(query):  # leave out what the app arrives at without it
        if name in ALWAYS_IN_LINK or name == "hide":
            continue
        shorter = {k: v for k, v in query.items() if k != name}
        if from_query(shorter) == (target, []):
            query = shorter
    first = {name: query[name] for name in ALWAYS_IN_LINK}  # the task leads, for a reader
    return {**first, **query, **write_values({"run": run_key}, SESSION_VALUES)}


def classroom_link(experiment: Experiment, base_url: str, *, pinned: Iterable[str] = ALL_PINS,
                   run_key: str | None = None, page: str = "train") -> str:
    """The link a teacher gives a class: ``page`` of the app at ``base_url`` showing
    ``experiment`` with the ``pinned`` controls hidden (all by default), attached to the run
    ``run_key`` when given, so a student who opens it sees that run with nothing to click."""
    if page not in PAGES:
        raise StackError("E_VALUE", f"page {shown(page)} is not one of {', '.join(PAGES)}",
                         hint="share the train page (the default)")
    query = urlencode(link_query(experiment, pinned, run_key), quote_via=quote, safe=",()")
    return f"{check_base_url(base_url)}/{PAGES[page]}?{query}"


def experiment_of_link(link: str) -> tuple[Experiment, str | None, list[str]]:
    """What the app makes of ``link``: its experiment, its run key (or None) and the
    problems it reports (`experiment.read_link`, as a page opened with it does)."""
    read = read_link(dict(parse_qsl(urlsplit(link).query, keep_blank_values=True)))
    return read.experiment, read.run, list(read.problems)


def pins_everything(experiment: Experiment) -> bool:
    """Whether ``experiment``'s link hides every control (a student's link: nothing to set)."""
    return set(ALL_PINS) <= set(experiment.hide)


# --- the class link: the run alone -------------------------------------------------------


def short_key(key: str, known: Iterable[str]) -> str:
    """The first `SHORT_KEY` digits of ``key`` when no other of the ``known`` keys starts
    with them (and ``key`` is among them, so the server can resolve it); else the whole key.

    >>> short_key("2f79848c" + "0" * 24, ["2f79848c" + "0" * 24, "78248499" + "0" * 24])
    '2f79848c'
    """
    start = key[:SHORT_KEY]
    matches = {other for other in known if other.startswith(start)}
    return start if matches == {key} else key


def resolve_key(start: str, known: Iterable[str], name: str = "run") -> tuple[str | None, str | None]:
    """The one of the ``known`` keys that ``start`` (a whole key, or its first 8 or more
    digits, as the app shows keys) names, or None and a problem in words: no such run, or
    a start that more than one run shares.

    >>> resolve_key("2f79", ["2f79848c" + "0" * 24])[1]
    "run='2f79' is not a run key (32 hex digits, or its first 8 or more)"
    """
    start = str(start).strip().lower()
    if parse_run(start)[1]:
        return None, f"{name}={shown(start)} is not a run key (32 hex digits, or its first 8 or more)"
    matches = sorted({key for key in known if key.startswith(start)})
    if len(matches) == 1:
        return matches[0], None
    if matches:
        return None, (f"{name}={start} is the start of {len(matches)} runs on this server "
                      f"({', '.join(m[:12] + '…' for m in matches[:3])}); give more of its key")
    return None, (f"{name}={start} is not on this server (never trained here, or evicted from "
                  "its store); press Train to train it")


def class_link(base_url: str, run_key: str, *, known: Iterable[str] = (),
               pinned: Iterable[str] = ALL_PINS, page: str = "train") -> str:
    """The short link of a class: ``page?run=KEY`` alone, the run fixing the
    experiment and every control pinned; ``hide=`` only when the teacher opens some. The
    key is its 8-digit start when that names it alone among the ``known`` keys.

    >>> key = "2f79848c" + "0" * 24
    >>> class_link("http://10.0.0.5:8501", key, known=[key])
    'http://10.0.0.5:8501/train?run=2f79848c'
    """
    if parse_run(run_key)[1] or len(run_key) != len(run_key.strip()) or not run_key:
        raise StackError("E_VALUE", parse_run(run_key)[1] or "no run key",
                         hint="give the key the app shows as run=KEY in its address")
    if page not in PAGES:
        raise StackError("E_VALUE", f"page {shown(page)} is not one of {', '.join(PAGES)}",
                         hint="share the train page (the default)")
    pins = check_pins(pinned)
    query = {"run": short_key(run_key, known), **({} if pins == ALL_PINS else
                                                  {"hide": ",".join(pins)})}
    return f"{check_base_url(base_url)}/{PAGES[page]}?" + urlencode(query, safe=",")


def share_link(experiment: Experiment, base_url: str, *, pinned: Iterable[str] = ALL_PINS,
               run_key: str | None = None, known: Iterable[str] = (), page: str = "train") -> str:
    """The link the share dialog and ``stacklab share`` give: the short `class_link` once a
    run exists and every control is pinned (the run fixes the experiment), else the
    `classroom_link` of ``experiment`` with its ``pinned`` controls.

    >>> key = "2f79848c" + "0" * 24
    >>> from stacklab.serve.links.experiment import DEFAULT
    >>> share_link(DEFAULT, "http://10.0.0.5:8501", run_key=key, known=[key])
    'http://10.0.0.5:8501/train?run=2f79848c'
    """
    pins = check_pins(pinned)
    if run_key and pins == ALL_PINS:
        return class_link(base_url, run_key, known=known, page=page)
    return classroom_link(experiment, base_url, pinned=pins, run_key=run_key, page=page)


def experiment_of_run(source: str, input_shape: Iterable[object], input_dtype: str, config,
                      hide: Iterable[str] = ALL_PINS) -> Experiment:
    """The experiment a run fixes: its stack, input and settings (``config``, filled), with
    ``hide`` pinned; what a class link that names only the run opens."""
    settings = {row.name: getattr(config, row.name) for row in LINK_SETTINGS}
    settings = {name: ",".join(map(str, value)) if isinstance(value, (list, tuple)) else value
                for name, value in settings.items()}
    read, _ = from_query({"stack": source, "input": ",".join(map(str, input_shape)),
                          "input_dtype": input_dtype,
                          **{name: str(value) if value is not None else "none"
                             for name, value in settings.items()}})
    return replace(read, hide=tuple(hide))


# --- the address students can reach ------------------------------------------------------


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


# --- the projector view ------------------------------------------------------------------

PRESENT_FONT_PX = 20  # tick labels, axis titles and the colour bar: readable across a room
PRESENT_TITLE_PX = 26
PRESENT_SIDE_PX = 660  # the map's side: at 1920x1080 the figure fits under the page title
_PRESENT_MARGIN = dict(l=120, r=170, b=100)  # room for the tick labels and the colour bar
PRESENT_LEGEND_PX = 170  # a projector's foot: ticks, the axis title, two rows of legend
_TITLE_LINE_PX = 36
_TITLE_CHARS = 48  # a line of the title at PRESENT_TITLE_PX over the map's width


def _wrapped(title: str, width: int = _TITLE_CHARS) -> list[str]:
    """The title's words in lines of at most `_TITLE_CHARS` (broken at spaces only, so
    the HTML-escaped text plotly shows keeps its entities whole)."""
    lines: list[str] = []
    for word in title.split(" "):
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines or [""]


def present_figure(figure: go.Figure, columns: int = 1) -> go.Figure:
    """A copy of ``figure`` for a projector: every text `PRESENT_FONT_PX` or more, its title
    on at most two lines, and a single square map sized so that its colour bar sits right
    beside it; with ``columns`` > 1 (runs side by side) it fills its column instead."""
    fig = go.Figure(figure)
    text = dict(font=dict(size=PRESENT_FONT_PX))
    fig.update_layout(font=dict(size=PRESENT_FONT_PX), legend=text)
    fig.update_xaxes(tickfont=dict(size=PRESENT_FONT_PX), title=text)
    fig.update_yaxes(tickfont=dict(size=PRESENT_FONT_PX), title=text)
    fig.update_annotations(font=dict(size=PRESENT_FONT_PX))
    for trace in fig.data:
        if "colorbar" in trace:
            trace.update(colorbar=dict(tickfont=dict(size=PRESENT_FONT_PX), title=text,
                                       thickness=26, xpad=14))
    lines = _wrapped(fig.layout.title.text or "",
                     _TITLE_CHARS if columns <= 1 else _TITLE_CHARS // columns + 12)
    if len(lines) > 2:  # at most two lines: a projector's title is read, not studied
        lines = [lines[0], lines[1][:-1] + "…" if len(lines[1]) > 2 else lines[1] + "…"]
    top = 40 + _TITLE_LINE_PX * len(lines)
    fig.update_layout(title=dict(text="<br>".join(lines), font=dict(size=PRESENT_TITLE_PX),
                                 x=0.0, xanchor="left", xref="paper", y=1.0, yanchor="top",
                                 yref="container", pad=dict(t=20)))
    square = (len(list(fig.select_xaxes())) == 1 == len(list(fig.select_yaxes()))
              and fig.layout.yaxis.scaleanchor == "x")
    if square and columns == 1:  # the plot area exactly square: no gap before the colour bar
        margin = {**_PRESENT_MARGIN, "t": top}
        fig.update_layout(autosize=False, margin=margin,
                          width=margin["l"] + PRESENT_SIDE_PX + margin["r"],
                          height=top + PRESENT_SIDE_PX + margin["b"])
    elif columns > 1:
        fig.update_layout(autosize=True, width=None, margin=dict(t=top, l=110, r=40, b=90),
                          height=top + PRESENT_SIDE_PX - 60 + 90)
    else:
        fig.update_layout(height=int((fig.layout.height or 520) * 1.4), margin=dict(t=top))
    for axis in fig.select_yaxes():  # a long title beside a short panel: on two lines
        said = axis.title.text or ""
        if len(said) > 16 and " " in said and "<br>" not in said:
            cut = min((i for i, c in enumerate(said) if c == " "), key=lambda i: abs(i - len(said) / 2))
            axis.title.text = said[:cut] + "<br>" + said[cut + 1:]
    if fig.layout.legend.orientation == "h":  # a legend below: under the axis title, which
        # grew with the text, pinned to the figure's foot rather than the plot's
        fig.update_layout(legend=dict(yref="container", y=0.0, yanchor="bottom", x=0.0,
                                      xanchor="left"), margin=dict(b=PRESENT_LEGEND_PX))
    return fig


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
