"""A classroom link: the link a teacher shares (the experiment, the controls it pins with
``hide=``, and ``run=KEY`` once trained), and the class link that names the run alone.
Where students reach it is `addresses`, its QR code `qr`, the projector's figure
`projector`.

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

from dataclasses import replace
from typing import Iterable
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

from ...core.errors import StackError, shown
from ..limits import MAX_LINK_STACK_CHARS
from .experiment import Experiment, from_query, read_link, to_query
from .experiment import LINK_SETTINGS
from .link_table import HIDEABLE, SESSION_VALUES, parse_run, write_values

ALL_PINS = HIDEABLE  # a classroom link pins every control unless the teacher says otherwise
ALWAYS_IN_LINK = ("task",)  # kept even at its default, so a reader of the link sees the task
PAGES = {"build": "", "train": "train", "explore": "explore"}  # page -> its URL path
SHORT_KEY = 8  # the digits of a run key the app shows, and a class link carries when unique


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
