"""The session's state, behind one module: the experiment (mirrored in the URL), the
session's identity and runs, the server's one training pool (the hub's, `ui.hub`), and
each page's own keys.

Widgets do not survive a page switch in Streamlit, so the `Experiment` lives under a
plain session key and each page's widgets (keys prefixed with the page name) read from
it and write back to it in their ``on_change`` callbacks (`ui.controls`). A page keeps
its own values in a `PageState` declared at its top: the pages never touch
``st.session_state`` themselves (tests/test_app.py checks it).
"""

from __future__ import annotations

import streamlit as st

from ui import browsers
from ui.hub import Hub
from ui.library import Classes, Experiment, JobPool, pins_everything

EXPERIMENT = "experiment"
URL_PROBLEMS = "url_problems"
SESSION_ID = "session_id"
JOB = "job"  # the id of the session's current job in the pool
RUN_KEY = "run_key"  # that job's run key, mirrored in the URL as run=KEY
COMPARE = "compare"  # the run keys on the Compare page, mirrored in the URL as compare=K1,K2
VIEW = "view"  # "present" (the projector view), mirrored in the URL as view=present
LINKED_RUN = "linked_run"  # the key of the run this session's link opened (run=KEY): not its own
LATEST_RUN = "latest_run"  # the session's newest finished job, kept after the pool forgets it


class PageState:
    """A page's own session values, declared once at its top:
    ``state = PageState("compare", "pick", "keys")``. Each name is kept under the page's
    prefix (``compare_pick``), which is also the key of a widget that shows it
    (``key=state.key("pick")``); a name the page did not declare is a mistake (KeyError)."""

    def __init__(self, page: str, *names: str):
        self.page, self.names = page, frozenset(names)

    def key(self, name: str | tuple) -> str:
        """The session key (and widget key) of ``name``; of ``(name, part)``, one of the
        name's several widgets (``learn_predict_2``: a class's round 2 asks afresh)."""
        name, *part = name if isinstance(name, tuple) else (name,)
        if name not in self.names:
            raise KeyError(f"{self.page} has no session value {name!r}; declare it in its PageState")
        return f"{self.page}_{name}" + "".join(f"_{p}" for p in part)

    def get(self, name: str | tuple, default=None):
        return st.session_state.get(self.key(name), default)

    def __getitem__(self, name: str | tuple):
        return st.session_state[self.key(name)]

    def __setitem__(self, name: str | tuple, value) -> None:
        st.session_state[self.key(name)] = value

    def __contains__(self, name: str | tuple) -> bool:
        return self.key(name) in st.session_state

    def pop(self, name: str | tuple, default=None):
        return st.session_state.pop(self.key(name), default)

    def cached(self, name: str, identity, make, *, same_object: bool = False):
        """The value made by ``make()`` for ``identity``, made again only when the identity
        changes (a new upload, another link, other runs); with ``same_object``, only when
        it is another object (a figure the pool redrew)."""
        kept = self.get(name)
        if kept is None or (kept[0] is not identity if same_object else kept[0] != identity):
            kept = (identity, make())
            self[name] = kept
        return kept[1]


def pool() -> JobPool:
    """The server's training pool (`ui.hub.Hub.pool`: made at its first need)."""
    return Hub.current().pool()


def classes() -> Classes:
    """The server's open classes (`ui.hub.Hub.classes`), or the Ray cluster's."""
    return Hub.current().classes()


def stored_run(key: str):
    """The run ``key`` from the server's run store, or None."""
    return pool().store.open(key)


def find_stored(start: str) -> str | None:
    """The key of the one stored run whose key starts with ``start``, or None."""
    return pool().store.find(start)


# --- the session: its identity, its experiment, its runs ----------------------------------


def begin(owner_id: str) -> bool:
    """Give a new session its identity; False when it has one already."""
    if SESSION_ID in st.session_state:
        return False
    st.session_state[SESSION_ID] = owner_id
    browsers.register(owner_id)
    return True


def begun() -> bool:
    """Whether this session has its identity (its first page has run)."""
    return SESSION_ID in st.session_state


def owner() -> str:
    return st.session_state[SESSION_ID]


def experiment() -> Experiment:
    return st.session_state[EXPERIMENT]


def set_experiment(new: Experiment) -> None:
    """Make ``new`` the session's experiment; a changed one no longer describes the run in
    the URL (``run=KEY`` goes)."""
    if EXPERIMENT in st.session_state and new != experiment():
        st.session_state.pop(RUN_KEY, None)
    st.session_state[EXPERIMENT] = new


def url_problems() -> list[str]:
    return st.session_state.get(URL_PROBLEMS) or []


def set_url_problems(problems) -> None:
    st.session_state[URL_PROBLEMS] = list(problems)


def make_current(job) -> None:
    """Make ``job`` the session's current run (and put its key in the URL)."""
    st.session_state[JOB] = job.id
    st.session_state[RUN_KEY] = job.key


def link_run(job) -> None:
    """Make ``job``, which the session's link opened (``run=KEY``), its current run."""
    make_current(job)
    st.session_state[LINKED_RUN] = job.key


def forget_run_key() -> None:
    """Take ``run=KEY`` out of the URL: a reload must not re-attach (a stopped run)."""
    st.session_state.pop(RUN_KEY, None)


def current_job():
    """The session's current job in the pool, or None."""
    return pool().get(owner(), st.session_state[JOB]) if JOB in st.session_state else None


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


def compared() -> list[str]:
    """The run keys the Compare page shows (``compare=`` in the URL)."""
    return list(st.session_state.get(COMPARE) or [])


def set_compared(keys) -> None:
    st.session_state[COMPARE] = list(keys)


def view() -> str | None:
    """The page's view (``view=present``: the projector view), or None."""
    return st.session_state.get(VIEW)


def set_view(name: str | None) -> None:
    if name:
        st.session_state[VIEW] = name
    else:
        st.session_state.pop(VIEW, None)


def presenting() -> bool:
    """Whether the page shows the projector view (``view=present``)."""
    return view() == "present"
