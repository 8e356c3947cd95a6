"""Session state shared by the app's pages: the experiment (mirrored in the URL), the
session's identity, and the one training pool of the server.

Widgets do not survive a page switch in Streamlit, so the `Experiment` lives under a
plain session key and each page's widgets (keys prefixed with the page name) read from
it and write back to it in their ``on_change`` callbacks.
"""

from __future__ import annotations

import logging
import os
import re
import uuid
from dataclasses import replace

import streamlit as st
from streamlit.runtime import Runtime
from streamlit.runtime.scriptrunner import get_script_run_ctx

from stacklab.core.build import available_devices
from stacklab.core.errors import shown
from stacklab.lab.figures import column_width, fit_title
from stacklab.lab.keys import is_key
from stacklab.lab.settings import SETTINGS
from stacklab.serve.links.changes import (announcement, changed_since, preset_announcement,
                                    stale_note)
from stacklab.serve.limits import MAX_LINK_STACK_CHARS, SESSION_TTL_SECONDS
from stacklab.serve.links.experiment import Experiment, from_query, to_query
from stacklab.serve.workers.pool import JobPool
from stacklab.serve.links.share import parse_view, pins_everything

# A word of user text that Markdown, GitHub's autolinks and Streamlit's extras (:color[...],
# :icon:, :material/...:, $math$) leave as it is: letters, digits, quotes, brackets and
# sentence punctuation, an underscore only inside a word (seq_len), a colon only at its
# end, and no "www." (an autolink even with its dot escaped). Any other word is shown in
# a code span, where nothing is interpreted.
_INERT_WORD = re.compile(r"""(?:[A-Za-z0-9'"(),;=/?!+.%-]|[^\x00-\x7f]"""
                         r"|(?<=[A-Za-z0-9])_(?=[A-Za-z0-9]))+:?")
_LINE_START = re.compile(r"""[A-Za-z0-9'"(]|[^\x00-\x7f]""")  # not a list, quote or heading
_LIST_NUMBER = re.compile(r"\d+[.)]")


def _inert(word: str, first: bool) -> bool:
    return bool(_INERT_WORD.fullmatch(word)) and "www." not in word.lower() and not (
        first and (not _LINE_START.match(word) or _LIST_NUMBER.fullmatch(word)))


def _code_span(text: str) -> str:
    """``text`` as a Markdown code span: a fence longer than any run of backticks in it.
    Streamlit rewrites every ``:material/`` of a page's Markdown, code spans too, before it
    parses it; that colon is written as ``&#58;`` between two spans, so it stays as typed."""
    fence = "`" * (max(map(len, re.findall("`+", text)), default=0) + 1)
    first, *rest = text.split(":material/")
    return "&#58;".join(f"{fence} {part} {fence}" if part else ""
                        for part in [first, *("material/" + part for part in rest)])


def plain(text: object, limit: int = 400) -> str:
    """``text`` from a user (a stack, a link, an error that quotes them) as Markdown that
    shows exactly those characters: one line, at most ``limit`` characters, no link, image,
    heading, list, formatting, colour, icon, emoji or formula. Plain words stay as they are;
    runs of words Markdown could read go into code spans, which Markdown never interprets.

    >>> plain("task='[L](https://e.com/l)' is not one of reverse, shift")
    "` task='[L](https://e.com/l)' ` is not one of reverse, shift"
    >>> plain("x`` $x$ :smile: www.e.com seq_len\\n# H :material/home:")
    '``` x`` $x$ :smile: www.e.com ``` seq_len ` # ` H &#58;` material/home: `'
    """
    text = " ".join(str(text).split())  # one line: newlines and runs of spaces folded
    if len(text) > limit:
        text = text[:limit] + "…"
    shown, held = [], []  # held: the words of the code span being gathered
    for index, word in enumerate(text.split(" ") if text else []):
        if _inert(word, first=index == 0):
            shown += [_code_span(" ".join(held))] if held else []
            shown.append(word)
            held = []
        else:
            held.append(word)
    return " ".join(shown + ([_code_span(" ".join(held))] if held else []))


def show_error(err, prefix: str = "") -> None:
    """A `StackError` on the page: code, place, message and fix, user text escaped."""
    st.error(f"{prefix}**{err.code}** at {plain(err.place)}: {plain(err.message)}\n\n"
             f"**Fix:** {plain(err.hint)}")


EXPERIMENT = "experiment"
URL_PROBLEMS = "url_problems"
SESSION_ID = "session_id"
JOB = "job"  # the id of the session's current job in the pool
RUN_KEY = "run_key"  # that job's run key, mirrored in the URL as run=KEY
COMPARE = "compare"  # the run keys on the Compare page, mirrored in the URL as compare=K1,K2
VIEW = "view"  # "present" (the projector view), mirrored in the URL as view=present
LINKED_RUN = "linked_run"  # the key of the run this session's link opened (run=KEY): not its own


def _log_to_stderr() -> None:
    """The library's log lines (a run trained, a run from the store, a damaged store entry)
    in the server's output, once."""
    logger = logging.getLogger("stacklab")
    if not logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)


@st.cache_resource
def pool() -> JobPool:
    """The server's training pool: one worker per CPU core, each torch op on one thread
    (classroom budgets are the pool's default). Training runs at the page scripts' priority
    unless ``STACKLAB_WORKER_NICE`` says otherwise: a class waits for its runs, and in the
    load test a nice of 10 cost one link's 100 students about 1.7 s at p95 (README)."""
    _log_to_stderr()
    return JobPool(workers=int(os.environ.get("STACKLAB_WORKERS", os.cpu_count() or 1)),
                   ttl_seconds=float(os.environ.get("STACKLAB_SESSION_TTL", SESSION_TTL_SECONDS)),
                   threads_per_job=1, worker_nice=int(os.environ.get("STACKLAB_WORKER_NICE", 0)),
                   owner_alive=_connected)


_BROWSER_SESSIONS: dict[str, str] = {}  # owner -> its Streamlit session (served pages only)


def _connected(owner: str) -> bool:
    """Whether the browser session of ``owner`` is still connected (a closed or reloaded tab
    is not): its runs are then detached soon, not after the session TTL."""
    session = _BROWSER_SESSIONS.get(owner)
    if session is None or not Runtime.exists():
        return True
    alive = Runtime.instance().is_active_session(session)
    if not alive and len(_BROWSER_SESSIONS) > 10_000:
        _BROWSER_SESSIONS.pop(owner, None)  # bounded: a gone session's entry can go
    return alive


def start() -> Experiment:
    """Run at the top of every page: set up the session once, keep the URL in sync."""
    if SESSION_ID not in st.session_state:
        st.session_state[SESSION_ID] = uuid.uuid4().hex
        ctx = get_script_run_ctx()  # a real browser session: the pool may ask if it is still there
        if ctx is not None and Runtime.exists() and Runtime.instance().is_active_session(
                ctx.session_id):
            _BROWSER_SESSIONS[owner()] = ctx.session_id
        params = st.query_params.to_dict()
        linked, problems = from_query(params)
        st.session_state[EXPERIMENT] = linked
        if "run" in params:
            problem = open_run(params["run"])
            if problem:
                problems.append(problem)
        if "compare" in params:
            keys, problem = compare_keys(params["compare"])
            st.session_state[COMPARE] = keys
            if problem:
                problems.append(problem)
        if "view" in params:
            st.session_state[VIEW], problem = parse_view(params["view"])
            if problem:
                problems.append(problem)
        st.session_state[URL_PROBLEMS] = problems
    sync_url()
    return experiment()


def open_run(raw: str) -> str | None:
    """Attach this session to the run of a link's ``run=KEY`` (live or stored); a problem
    in words when there is no such run."""
    if not is_key(raw):
        return f"run={shown(raw)} is not a run key (32 hex digits); showing the link's settings"
    job = pool().open(owner(), raw)
    if job is None:
        return (f"run={shown(raw)} is not on this server (never trained here, or evicted from "
                "its store); press Train to train it")
    watch(job)
    st.session_state[LINKED_RUN] = job.key
    return None


def compare_keys(raw: str) -> tuple[list[str], str | None]:
    """The run keys of a ``compare=K1,K2`` link value (at most `MAX_COMPARED`), and a
    problem in words for what was dropped."""
    from stacklab.lab.reports.compare import MAX_COMPARED

    parts = [part.strip() for part in str(raw).split(",") if part.strip()]
    keys = list(dict.fromkeys(part for part in parts if is_key(part)))[:MAX_COMPARED]
    dropped = [part for part in parts if not is_key(part)]
    if dropped:
        return keys, (f"compare: {', '.join(shown(d) for d in dropped[:4])} "
                      f"{'is not a run key' if len(dropped) == 1 else 'are not run keys'}")
    if len(parts) > len(keys):
        return keys, f"compare: at most {MAX_COMPARED} runs; the first {len(keys)} are shown"
    return keys, None


def watch(job) -> None:
    """Make ``job`` the session's current run (and put its key in the URL)."""
    st.session_state[JOB] = job.id
    st.session_state[RUN_KEY] = job.key


def current_job():
    """The session's current job in the pool, or None."""
    return pool().get(owner(), st.session_state[JOB]) if JOB in st.session_state else None


def experiment() -> Experiment:
    return st.session_state[EXPERIMENT]


def owner() -> str:
    return st.session_state[SESSION_ID]


def update(**changes) -> None:
    """Change the experiment (and the URL); values a link pins with ``hide=`` stay as pinned."""
    kept = {k: v for k, v in changes.items() if k not in experiment().hide}
    new = replace(experiment(), **kept)
    if new != experiment():
        st.session_state.pop(RUN_KEY, None)  # the link no longer describes that run
    st.session_state[EXPERIMENT] = new
    sync_url()


def sync_url() -> None:
    wanted = to_query(experiment())
    if len(wanted["stack"]) > MAX_LINK_STACK_CHARS:
        del wanted["stack"]  # too long to share as a link; the page says so
    if RUN_KEY in st.session_state:
        wanted["run"] = st.session_state[RUN_KEY]
    if st.session_state.get(COMPARE):
        wanted["compare"] = ",".join(st.session_state[COMPARE])
    if st.session_state.get(VIEW):
        wanted["view"] = st.session_state[VIEW]
    if st.query_params.to_dict() != wanted:
        st.query_params.from_dict(wanted)


def link_too_long() -> bool:
    return len(experiment().stack) > MAX_LINK_STACK_CHARS


def show_url_problems() -> None:
    """Say which values of the link were refused (once per session)."""
    problems = st.session_state.get(URL_PROBLEMS) or []
    if problems:
        st.warning("Some values in the link could not be used:\n\n"
                   + "\n".join(f"- {plain(p)}" for p in problems[:20]), icon="⚠️")
        st.session_state[URL_PROBLEMS] = []
    show_automatic_changes()


def hidden(field: str) -> bool:
    """Whether the link hides the control for ``field`` (``hide=`` in the URL)."""
    return field in experiment().hide


def bound(widget, field: str, label: str, page: str, **kwargs):
    """A widget showing experiment ``field``; editing it updates the experiment and URL
    (and whatever follows it, `Experiment.changes_for`). Returns the field's value (also
    when the link hides the control).
    """
    if hidden(field):
        return getattr(experiment(), field)
    key = f"{page}_{field}"
    value = getattr(experiment(), field)
    if st.session_state.get(key) != value:
        st.session_state[key] = value

    def changed():
        before = experiment()
        update(**before.changes_for(field, st.session_state[key]))
        note_automatic_changes(before, field)

    widget(label, key=key, on_change=changed, **kwargs)
    return getattr(experiment(), field)


def value_widget(container, type_: type, help: str, *, options=None, low=None, high=None,
                 step=None, placeholder: str = ""):
    """The widget for a value of ``type_`` and its keyword arguments (all but label, key and
    value): a select box of ``options``, a checkbox, a number box from ``low`` to ``high``
    (None: open) or a text box. A setting's row (`setting_control`) and an op's argument
    (the Build page's layer forms) both become widgets here.
    """
    if options is not None:
        return container.selectbox, {"options": list(options), "help": help}
    if type_ is bool:
        return container.checkbox, {"help": help}
    extra = {"placeholder": placeholder} if placeholder else {}
    if type_ not in (int, float):
        return container.text_input, {"help": help, **extra}
    number = {"min_value": None if low is None else type_(low),
              "max_value": None if high is None else type_(high),
              "step": None if step is None else type_(step), "help": help, **extra}
    if type_ is float:
        number["format"] = "%g"  # 0.001, not 0.00
    return container.number_input, number


def setting_widget(container, row):
    """The widget of a setting's control and its keyword arguments, from its row of the
    settings table: its options, its list hint, or its classroom range and step."""
    if row.choices:
        return value_widget(container, str, row.help, options=row.options())
    if row.items:
        return value_widget(container, str, row.help, placeholder=row.empty_hint)
    low, high = row.classroom
    return value_widget(container, row.type, row.help, low=low, high=high, step=row.step,
                        placeholder=row.empty_hint)


def setting_control(container, name: str, page: str):
    """The control of training setting ``name``, made from its row of the settings table."""
    row = SETTINGS[name]
    widget, kwargs = setting_widget(container, row)
    return bound(widget, name, row.label, page, **kwargs)


def show_pinned(fields) -> None:
    """Show the values a classroom link pins (hides), so students still see them; a value
    that is empty (no lengths to evaluate) says nothing and is left out, and an optional
    setting that is off reads "none", as in the link."""
    pinned = [(f, getattr(experiment(), f)) for f in fields if hidden(f)]
    values = ", ".join(f"{f} = {'none' if value is None else value}"
                       for f, value in pinned if value != "")
    if values:
        st.caption(f":material/lock: Set by the link: {plain(values)}")


def presenting() -> bool:
    """Whether the page shows the projector view (``view=present``)."""
    return st.session_state.get(VIEW) == "present"


def set_presenting(on: bool) -> None:
    """Switch the projector view on or off (and the link's ``view=``)."""
    if on:
        st.session_state[VIEW] = "present"
    else:
        st.session_state.pop(VIEW, None)
    sync_url()


def url_run_key() -> str | None:
    """The run key in this page's address (``run=KEY``): the run the experiment describes."""
    return st.session_state.get(RUN_KEY)


def from_link(job) -> bool:
    """Whether ``job`` is the run this session's link opened (``run=KEY``), not one it trained."""
    return job is not None and st.session_state.get(LINKED_RUN) == job.key


def shared_run(job) -> bool:
    """Whether ``job`` came with the link (`from_link`) and the experiment still describes
    it (no control was changed since)."""
    return from_link(job) and url_run_key() == job.key


def student_view(job) -> bool:
    """A student on the teacher's link: everything pinned and the shared run attached, so
    there is nothing to set and nothing to train."""
    return shared_run(job) and pins_everything(experiment())


def show_figures(drawn, key: str) -> None:
    """Figures of a run (`RunFigure`s) one under another: title, score, caption, chart."""
    for index, drawn_figure in enumerate(drawn):
        st.subheader(plain(drawn_figure.title, 200))
        if drawn_figure.score:
            st.markdown(f"**{plain(drawn_figure.score, 300)}**")
        st.caption(plain(drawn_figure.caption, 1000))
        st.plotly_chart(fit_title(drawn_figure.figure, column_width(1)), key=f"{key}_{index}")


LATEST_RUN = "latest_run"


def keep_run(job) -> None:
    """Keep a finished job in the session, so Explore has it after the pool forgets it."""
    kept = st.session_state.get(LATEST_RUN)
    if kept is None or kept.id != job.id:
        st.session_state[LATEST_RUN] = job


def latest_run():
    """The session's newest finished job: from the pool, else the one kept in the session."""
    done = [job for job in pool().jobs_of(owner()) if job.run is not None]
    if done:
        keep_run(done[0])
        return done[0]
    return st.session_state.get(LATEST_RUN)


SCROLL_TO = "scroll_to"  # a CSS selector the next full run of the page scrolls into view

_SCROLL_SCRIPT = """<script>
(() => {
  // once the figure is drawn (a busy browser draws it late), and only if below the fold
  const until = Date.now() + 10000;
  const scroll = () => {
    const target = document.querySelector(%s);
    const drawn = target && target.querySelector(".js-plotly-plot .main-svg, img");
    if (!(drawn && (drawn.tagName !== "IMG" || drawn.complete))) {
      if (Date.now() < until) setTimeout(scroll, 150);
      return;
    }
    const shown = drawn.tagName === "IMG" ? drawn : target;  // a picture in markdown overhangs
    if (shown.getBoundingClientRect().bottom > window.innerHeight) {
      shown.scrollIntoView({behavior: "smooth", block: "end"});
    }
  };
  setTimeout(scroll, 150);
})();
</script>"""


def scroll_later(selector: str) -> None:
    """Ask the page's next full run to scroll the element at ``selector`` into view (a run
    that just finished: its heatmap, when it lies below the fold)."""
    st.session_state[SCROLL_TO] = selector


def scroll_if_asked() -> None:
    """Scroll as `scroll_later` asked, once; the selector is the page's own, never user text."""
    selector = st.session_state.pop(SCROLL_TO, None)
    if selector and not presenting():  # the projector view has its figure at the top
        import json

        st.html(_SCROLL_SCRIPT % json.dumps(selector), unsafe_allow_javascript=True)


AUTOMATIC_CHANGES = "automatic_changes"  # what the last edit changed besides itself


def note_automatic_changes(before, edited: str) -> None:
    """Keep what editing ``edited`` changed besides itself (the preset following T, an
    input of ``B,T``), for the page to announce on its next run."""
    note = announcement(before, experiment(), edited)
    if note:
        st.session_state[AUTOMATIC_CHANGES] = note
    else:
        st.session_state.pop(AUTOMATIC_CHANGES, None)


def note_preset_changes(before, label: str) -> None:
    """Keep what choosing the preset ``label`` set besides the stack (its steps, lr, …),
    for the page to announce on its next run."""
    note = preset_announcement(label, before, experiment())
    if note:
        st.session_state[AUTOMATIC_CHANGES] = note


def show_automatic_changes() -> None:
    """Announce, once, what the last edit changed on its own, before and after."""
    note = st.session_state.pop(AUTOMATIC_CHANGES, None)
    if note:
        st.info(plain(note, 1200), icon=":material/sync_alt:")


def show_changed_since(job) -> bool:
    """Say above a run when it no longer matches the experiment (what changed, old → new);
    True when it does not."""
    source = job.run.network.source if job.run is not None else job.trainer.source
    changes = changed_since(experiment(), source, job.config, available_devices())
    if changes:
        st.warning(plain(stale_note(job.key, changes), 1200), icon=":material/history:")
    return bool(changes)
