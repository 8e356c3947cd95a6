"""A page's polls of something live (a run that trains, a presented lesson) and the
server's backpressure on them (`stacklab.serve.workers.job_polls`): each poll is measured
and counted, every following page polls at the interval the server's load allows, and a
page whose interval was widened says so, calmly, instead of freezing."""

from __future__ import annotations

import time
from contextlib import contextmanager

import streamlit as st

from ui import session
from ui.lab import PollLoad, load_note


CLASS_SECONDS = 1.0  # a followed lesson asks its class this often: on the teacher's step within one
VOTES_SECONDS = 0.5  # the projector asks its class's votes this often: a vote shows within 2 s
RUN_SECONDS = 1.0  # a page asks how a run it watches goes this often, when many watch it


@st.cache_resource
def load() -> PollLoad:
    """The server's following sessions and what their polls cost: one per server process."""
    return PollLoad()


def interval(base: float) -> float:
    """The seconds between two polls of a page that would poll every ``base`` s alone."""
    return load().interval(base)


@contextmanager
def measured():
    """Count one poll of this session and the CPU its script spent on it."""
    started = time.thread_time()
    try:
        yield
    finally:
        load().polled(session.owner(), time.thread_time() - started)


def count(follower: str, cpu_seconds: float) -> None:
    """Count one poll that a watch endpoint answered (`ui.endpoints`) for ``follower``."""
    load().polled(follower, cpu_seconds)


def say_load(base: float, every: float) -> None:
    """Say, once the interval ``every`` is wider than ``base``, why updates come slower."""
    note = load_note(base, every, load().followers())
    if note:
        st.caption(f":material/groups: {note}")
