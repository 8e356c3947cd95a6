"""A page's polls of something live (a run that trains, a presented lesson) and the
server's backpressure on them (`stacklab.serve.workers.job_polls`): each poll is measured
and counted, every following page polls at the interval the server's load allows, and a
page whose interval was widened says so, calmly, instead of freezing."""

from __future__ import annotations

import time
from contextlib import contextmanager

import streamlit as st

from stacklab import Status
from ui import session
from ui.lab import ANSWER_FLOOR_SECONDS, PollLoad, load_note


CLASS_SECONDS = 1.0  # a followed lesson asks its class this often: on the teacher's step within one
VOTES_SECONDS = 0.5  # the projector asks its class's votes this often: a vote shows within 2 s
RUN_SECONDS = 1.0  # a page asks how a run it watches goes this often, when many watch it
SHARE_SECONDS = 2.0  # the share panel asks how many sessions are on its run this often
TABLE_SECONDS = 1.0  # Explore asks how a table's analysis goes this often (it moves in stages)


@st.cache_resource
def load() -> PollLoad:
    """The server's following sessions and what their polls cost: one per server process."""
    return PollLoad()


def interval(base: float) -> float:
    """The seconds between two polls of a page that would poll every ``base`` s alone."""
    return load().interval(base)


def base_seconds(follows: str, view=None) -> float | None:
    """How often a page that follows ``follows`` asks on its own: a class (``"class"``) or
    its votes (``"votes"``), the share panel's count of sessions on a run (``"share"``)
    and a table's analysis (``"table"``) at their own pace; a run (``"run"``, its
    ``view``) often while it trains, seldom while it waits (further back than the next to
    start, seldom still), and less often when many sessions watch it; None once it has
    ended."""
    if follows == "class":
        return CLASS_SECONDS
    if follows == "votes":
        return VOTES_SECONDS
    if follows == "share":
        return SHARE_SECONDS
    if follows == "table":
        return TABLE_SECONDS
    if view is None or not view.active:
        return None
    if view.status == Status.QUEUED:
        return 2.0 if (view.position or 1) <= session.pool().workers else 4.0
    return 0.5 if view.watchers <= 4 else 1.0


def every(follows: str, view=None) -> float | None:
    """The interval of a page that follows ``follows`` (see `base_seconds`), the one place
    that decides it: its own pace, widened by the server's backpressure (`interval`), but
    a class's votes, one projector a class, never widened. None for a run that ended."""
    base = base_seconds(follows, view)
    if base is None or follows == "votes":
        return base
    return interval(base)


@contextmanager
def measured(follower: str | None = None):
    """Count one poll of this session (as ``follower``, when its watch endpoint's polls
    name it so: one follower, not two) and the CPU its script spent on it."""
    started = time.thread_time()
    try:
        yield
    finally:
        load().polled(follower or session.owner(), time.thread_time() - started)


def follower_of(voter: str) -> str:
    """The name a student who follows a class with the vote token ``voter`` is counted by."""
    return f"voter:{voter}"


def count(follower: str, cpu_seconds: float) -> None:
    """Count one poll that a watch endpoint answered (`ui.endpoints`) for ``follower``: no
    rerun, so the server's own part of it is an HTTP answer's."""
    load().polled(follower, cpu_seconds, ANSWER_FLOOR_SECONDS)


def say_load(base: float, every: float) -> None:
    """Say, once the interval ``every`` is wider than ``base``, why updates come slower."""
    note = load_note(base, every, load().followers())
    if note:
        st.caption(f":material/groups: {note}")
