"""A page's polls of something live (a run that trains, a presented lesson) and the
server's backpressure on them (`stacklab.serve.workers.job_polls`): each poll is measured
and counted, every following page polls at the interval the server's load allows, and a
page whose interval was widened says so, calmly, instead of freezing. The page's side:
the interval policy itself, and the endpoints' count of their polls, are `ui.pace` (no
Streamlit there), the meter the hub's `load`."""

from __future__ import annotations

import time
from contextlib import contextmanager

import streamlit as st

from ui import pace, session
from ui.hub import Hub
from ui.library import PollLoad, load_note
from ui.pace import (CLASS_SECONDS, RUN_SECONDS, SHARE_SECONDS, TABLE_SECONDS, VOTES_SECONDS,
                     follower_of)

__all__ = ["CLASS_SECONDS", "RUN_SECONDS", "SHARE_SECONDS", "TABLE_SECONDS", "VOTES_SECONDS", "base_seconds",
           "every", "follower_of", "interval", "load", "measured", "say_load"]


def load() -> PollLoad:
    """The server's following sessions and what their polls cost: the hub's (`ui.hub`)."""
    return Hub.current().load


def interval(base: float) -> float:
    """The seconds between two polls of a page that would poll every ``base`` s alone."""
    return load().interval(base)


def base_seconds(follows: str, view=None) -> float | None:
    """How often a page that follows ``follows`` asks on its own (`ui.pace.base_seconds`)."""
    return pace.base_seconds(Hub.current(), follows, view)


def every(follows: str, view=None) -> float | None:
    """The interval of a page that follows ``follows``: `ui.pace.every`, the one place that
    decides it (its own pace, widened by the server's backpressure)."""
    return pace.every(Hub.current(), follows, view)


@contextmanager
def measured(follower: str | None = None):
    """Count one poll of this session (as ``follower``, when its watch endpoint's polls
    name it so: one follower, not two) and the CPU its script spent on it."""
    started = time.thread_time()
    try:
        yield
    finally:
        load().polled(follower or session.owner(), time.thread_time() - started)


def say_load(base: float, every: float) -> None:
    """Say, once the interval ``every`` is wider than ``base``, why updates come slower."""
    note = load_note(base, every, load().followers())
    if note:
        st.caption(f":material/groups: {note}")
