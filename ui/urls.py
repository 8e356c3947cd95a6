"""The page's address and the session, kept in step: a new session reads its link once
(every value by its row of the link table, `stacklab.serve.links.link_table`), and every
change of the experiment, the run, the compared runs or the view is written back."""

from __future__ import annotations

import functools
import uuid
from urllib.parse import urlencode
from dataclasses import replace

import streamlit as st

from stacklab import StackError
from ui import session
from ui.library import (LINK_VALUES, MAX_LINK_STACK_CHARS, Experiment, Link, experiment_of_run,
                    read_link, resolve_key, write_link)

LESSON_VALUES = ("lesson", "step", "class")  # the Learn page's own values of the link table


def start(own: dict[str, str] | None = None) -> Experiment:
    """Run at the top of every page: set up the session once, keep the URL in sync. A page
    whose address holds only values of its own (Home: none; Learn: its lesson and step)
    gives them as ``own``: its address is those, never the experiment's."""
    if session.begin(uuid.uuid4().hex):
        link = link_of(tuple(st.query_params.to_dict().items()))
        session.set_experiment(link.experiment)
        problems = list(link.problems)
        if link.run is not None:
            problem = open_run(link.run, follow_run=not link.names_experiment)
            if problem:
                problems.append(problem)
        session.set_compared(compared_keys(link.compare, problems))
        session.set_view(link.view)
        session.set_url_problems(problems)
    if own is None:
        sync_url()
    else:
        show_own(own)
    return session.experiment()


@functools.lru_cache(maxsize=256)
def link_of(query: tuple[tuple[str, str], ...]) -> Link:
    """What the address ``query`` says (`read_link`), read once for every session that
    opens it: a lecture hall opens one link hundreds of times."""
    return read_link(dict(query))


@functools.lru_cache(maxsize=256)
def address_of(link: Link) -> dict[str, str]:
    """The address of ``link`` (`write_link`), written once for every session that shows
    it; the caller does not change it."""
    return write_link(link)


def show_own(own: dict[str, str]) -> None:
    """Make the address exactly ``own``: a page's own values (Learn's lesson and step)."""
    if st.query_params.to_dict() != own:
        st.query_params.from_dict(own)


def page_link(base: str, page: str, own: dict[str, str]) -> str:
    """The full link to ``page`` (its url path) of the server at ``base`` with ``own`` as
    its address: Learn's class link, ``base/learn?class=ID``."""
    return f"{base}/{page}?{urlencode(own, safe=',')}"


def page_of_old_link() -> str | None:
    """The page a session's first address at ``/`` means when it carries link values: a
    link made when Build was the first page (``/?stack=...&task=...``, ``run=``,
    ``compare=``) opens Build, a lesson's or a class's (``/?lesson=...``, ``/?class=ID``)
    Learn; None otherwise."""
    if session.begun():
        return None  # only a link opened afresh: the session's own pages come back to Home
    names = set(st.query_params.to_dict())
    if names & (set(LINK_VALUES) - set(LESSON_VALUES)):
        return "views/build.py"
    return "views/learn.py" if names & {"lesson", "class"} else None


def known_keys() -> list[str]:
    """The keys of the runs this server has: stored, and live in the pool."""
    return [*session.pool().store.keys(), *session.pool().live_keys()]


def keys_starting(start: str, name: str = "run") -> tuple[str | None, str | None]:
    """The one run whose key starts with ``start`` (live in the pool, or stored: in a
    bucket, one listing serves many starts), or None and a problem in words, the store's
    own when it cannot be listed (`resolve_key`)."""
    try:
        stored = session.pool().store.matching(start)
    except StackError as err:
        return None, f"{name}={start} cannot be looked up: {err}"
    return resolve_key(start, [*session.pool().live_keys(), *stored], name)


def compared_keys(keys, problems: list) -> list[str]:
    """A ``compare=`` link's keys, each start of a key resolved to its run (a problem for
    one that names no run, or more than one)."""
    found = []
    for start in keys:
        key, problem = keys_starting(start, "compare") if len(start) < 32 else (start, None)
        if problem:
            problems.append(problem)
        elif key:
            found.append(key)
    return found


def open_run(key: str, follow_run: bool = False) -> str | None:
    """Attach this session to the run of a link's ``run=KEY`` (live or stored; the key or
    its first 8 or more digits); a problem in words when there is no such run. With
    ``follow_run`` (a class link naming the run alone) the run fixes the experiment."""
    if len(key) < 32:
        key, problem = keys_starting(key)
        if problem:
            return problem
    job = session.pool().open(session.owner(), key)
    if job is None:
        trouble = session.pool().store.trouble(key)
        if trouble is not None:  # damaged, or a store that refuses the credentials
            return f"run={key[:12]} cannot be opened: {trouble}"
        return (f"run={key!r} is not on this server (never trained here, or evicted from "
                "its store); press Train to train it")
    damage = job.run.damage() if hasattr(job.run, "damage") else None  # a stored run's
    if follow_run:
        network = job.run.network if job.run is not None else job.plan.network
        session.set_experiment(experiment_of_run(network.source, network.input_shape,
                                                 network.input_dtype, job.config,
                                                 hide=session.experiment().hide))
    session.link_run(job)
    return None if damage is None else f"run={key[:12]} is damaged: {damage}"


def update(**changes) -> None:
    """Change the experiment (and the URL); values a link pins with ``hide=`` stay as pinned."""
    current = session.experiment()
    kept = {k: v for k, v in changes.items() if k not in current.hide}
    session.set_experiment(replace(current, **kept))
    sync_url()


def sync_url() -> None:
    """Write the session's experiment, run, compared runs and view into the address."""
    wanted = address_of(Link(session.experiment(), session.url_run_key(),
                              tuple(session.compared()), session.view()))
    if st.query_params.to_dict() != wanted:
        st.query_params.from_dict(wanted)


def set_presenting(on: bool) -> None:
    """Switch the projector view on or off (and the link's ``view=``)."""
    session.set_view("present" if on else None)
    sync_url()


def link_too_long() -> bool:
    return len(session.experiment().stack) > MAX_LINK_STACK_CHARS
