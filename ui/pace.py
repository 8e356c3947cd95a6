"""How often a following page asks the server, decided in one place: each thing followed
at its own pace, widened by the server's backpressure (the hub's `PollLoad`,
`stacklab.serve.workers.job_polls`). The watch endpoints (`ui.endpoints`) answer with it
and count each poll here; the pages ask it through `ui.polls`. No Streamlit here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stacklab import Status
from ui.library import ANSWER_FLOOR_SECONDS

if TYPE_CHECKING:
    from ui.hub import Hub

CLASS_SECONDS = 1.0  # a followed lesson asks its class this often: on the teacher's step within one
VOTES_SECONDS = 0.5  # the projector asks its class's votes this often: a vote shows within 2 s
RUN_SECONDS = 1.0  # a page asks how a run it watches goes this often, when many watch it
SHARE_SECONDS = 2.0  # the share panel asks how many sessions are on its run this often
TABLE_SECONDS = 1.0  # Explore asks how a table's analysis goes this often (it moves in stages)


def base_seconds(hub: Hub, follows: str, view=None) -> float | None:
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
        return 2.0 if (view.position or 1) <= hub.pool().workers else 4.0
    return 0.5 if view.watchers <= 4 else 1.0


def every(hub: Hub, follows: str, view=None) -> float | None:
    """The interval of a page that follows ``follows`` (see `base_seconds`), the one place
    that decides it: its own pace, widened by the server's backpressure, but a class's
    votes, one projector a class, never widened. None for a run that ended."""
    base = base_seconds(hub, follows, view)
    if base is None or follows == "votes":
        return base
    return hub.load.interval(base)


def follower_of(voter: str) -> str:
    """The name a student who follows a class with the vote token ``voter`` is counted by."""
    return f"voter:{voter}"


def count(hub: Hub, follower: str, cpu_seconds: float) -> None:
    """Count one poll that a watch endpoint answered (`ui.endpoints`) for ``follower``: no
    rerun, so the server's own part of it is an HTTP answer's."""
    hub.load.polled(follower, cpu_seconds, ANSWER_FLOOR_SECONDS)
