"""A live run's view as the server answers it (the design: `ui.live_run`): its status line
and progress as markup, and the JSON answers of its watch endpoints (`answer`, `pictures_of`,
`sessions_answer`, mounted by `ui.endpoints`). No Streamlit here: the page's side of it,
the component that draws it, is `ui.live_run`."""

from __future__ import annotations

import json
from html import escape
from typing import TYPE_CHECKING

from stacklab import Status
from ui import pace
from ui.library import load_note

if TYPE_CHECKING:
    from ui.hub import Hub


def status_text(view, running: int) -> str:
    """The live run's status line as the page writes it (Markdown; an agent reads it)."""
    others = view.watchers - 1
    shared = f" — shared with {others} other session{'s' * (others != 1)}" if others > 0 else ""
    if view.status == Status.QUEUED:
        return (f"Status: **queued** — position {view.position} in the queue "
                f"({running} runs in progress){shared}")
    return f"Status: **running** — step {view.step} of {view.steps}{shared}"


def words(view, running: int, note: str | None) -> str:
    """What the live view says, as Markdown (what an agent or AppTest reads of it): the
    status line, and the load note when the server widened the interval."""
    return status_text(view, running) + (f"\n\n{note}" if note else "")


def head_html(view, running: int, note: str | None) -> str:
    """The status line, the progress bar and the load note, as markup (texts escaped)."""
    line = escape(status_text(view, running)).replace("**", "<strong>", 1).replace(
        "**", "</strong>", 1)
    percent = round(100 * view.progress)
    return (f"<p class='live-run-status'>{line}</p><div class='live-run-bar' role='progressbar' "
            f"aria-label='Training progress' aria-valuemin='0' aria-valuemax='100' "
            f"aria-valuenow='{percent}'><div style='width: {percent}%'></div></div>"
            f"<p class='live-run-steps'>{view.step} / {view.steps} steps</p>"
            + (f"<p class='live-run-note'>{escape(note)}</p>" if note else ""))


def run_version(view) -> str:
    """What changes when a run moves on (its status, a step reported, an evaluation, its
    place in the queue): the version its watch endpoint answers with."""
    version = f"{view.status.value}:{view.step}:{len(view.history)}"
    return f"{version}:{view.position}" if view.status == Status.QUEUED else version


def running_now(hub: Hub, view) -> int:
    """The runs in progress, which a queued run's status line names (0 for one that runs)."""
    return hub.pool().stats()["running"] if view.status == Status.QUEUED else 0


def note_of(hub: Hub, base: float, every: float) -> str | None:
    """The load note of a page whose interval ``every`` is wider than ``base``, or None."""
    return load_note(base, every, hub.load.followers())


def sessions_on(hub: Hub, key: str, view=None) -> int:
    """How many sessions are on the run ``key`` now (``view``: the run as seen, or None when
    this server does not hold it): those watching it train, or once it has ended, those of
    this app server whose current run it is."""
    return view.watchers if view is not None and view.active else hub.pool().viewers(key)


def sessions_answer(hub: Hub, key: str) -> bytes:
    """The share panel's endpoint's answer: the number of sessions on run ``key`` as its
    version, asked at the share panel's pace (`ui.pace.every`)."""
    job = hub.pool().watched(key)
    count = sessions_on(hub, key, job.view() if job is not None else None)
    return json.dumps({"v": str(count), "every": pace.every(hub, "share")}).encode()


def answer(hub: Hub, key: str, phone: bool) -> bytes:
    """The run endpoint's answer about run ``key`` (see `ui.live_run`'s docstring), JSON."""
    job = hub.pool().watched(key)
    if job is None:
        return json.dumps({"v": "unknown", "every": pace.RUN_SECONDS, "live": False}).encode()
    view = job.view()
    version = run_version(view)
    base = pace.base_seconds(hub, "run", view)
    if base is None:
        hub.pictures.drop(key)  # its pictures are no longer asked for
        return json.dumps({"v": version, "every": pace.RUN_SECONDS, "live": False}).encode()
    every = pace.every(hub, "run", view)
    running = running_now(hub, view)
    note = note_of(hub, base, every)
    number = hub.pictures.of(job, view, phone)[0]
    return json.dumps({"v": version, "every": every, "live": True,
                       "text": words(view, running, note),
                       "head": head_html(view, running, note), "frame": number}).encode()


def pictures_of(hub: Hub, key: str, phone: bool) -> tuple[int, str, bytes] | None:
    """The newest pictures of the live run ``key`` (`Pictures.of`), or None."""
    job = hub.pool().watched(key)
    if job is None:
        return None
    view = job.view()
    return hub.pictures.of(job, view, phone) if view.active else None
