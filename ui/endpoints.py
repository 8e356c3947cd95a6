"""The watch endpoints (`ui.watch`): what a following page asks the server every few
seconds, answered from what the server holds, with no script run.

- ``GET /_stacklab/watch/class/ID``: the class's version (``"ended"`` once it has ended
  or never was), bumped when its teacher moves, opens a vote round or reveals one. The
  follower's vote token (header `ui.watch.VOTER_HEADER`) counts the page as following,
  for the projector's "N voted of M following".
- ``GET /_stacklab/watch/votes/ID``: the class's votes version (`Classes.votes_version`:
  changed by each vote, by the number following and by the teacher's moves), which the
  teacher's projector watches to redraw its count; ``"ended"`` as above. It needs no
  token (it says only that something changed), so the teacher's token stays out of URLs
  and pages; it is asked every `ui.polls.VOTES_SECONDS`, never widened (one page a class).
- ``GET /_stacklab/watch/run/KEY``: the run's version on this server (its status, step and
  evaluations), ``"unknown"`` for a run this server does not hold.

Each answer is ``{"v": VERSION, "every": SECONDS}``: ``every`` is the interval this
page should ask at, which the server widens under load (`ui.polls`); each request is
counted and timed there as one poll. server.py mounts `ROUTES` beside the app's pages.
"""

from __future__ import annotations

import time

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from stacklab import StackError
from ui import polls, session
from ui.watch import PREFIX, VOTER_HEADER

HEADERS = {"Cache-Control": "no-store"}  # an answer is true now only


def _answer(version: str, base: float) -> JSONResponse:
    return JSONResponse({"v": version, "every": polls.interval(base)}, headers=HEADERS)


def _class_version(class_id: str, voter: str | None) -> tuple[str, float]:
    started = time.thread_time()
    try:
        view = session.classes().follow(class_id, voter or None)
    except StackError:  # a forged vote token: the class is read, nobody counted
        view = session.classes().follow(class_id)
    version = "ended" if view is None else str(view.version)
    return version, time.thread_time() - started


def _votes_version(class_id: str) -> tuple[str, float]:
    started = time.thread_time()
    version = session.classes().votes_version(class_id)
    return version or "ended", time.thread_time() - started


async def class_version(request: Request) -> JSONResponse:
    voter = request.headers.get(VOTER_HEADER)
    # in a thread: a class on the Ray cluster is a call to its actor
    version, cpu = await run_in_threadpool(_class_version, request.path_params["class_id"],
                                           voter)
    polls.count(polls.follower_of(voter) if voter else "class", cpu)
    return _answer(version, polls.CLASS_SECONDS)


async def votes_version(request: Request) -> JSONResponse:
    class_id = request.path_params["class_id"]
    version, cpu = await run_in_threadpool(_votes_version, class_id)
    polls.count(f"votes:{class_id}", cpu)
    return JSONResponse({"v": version, "every": polls.VOTES_SECONDS}, headers=HEADERS)


async def run_version(request: Request) -> JSONResponse:
    started = time.thread_time()
    job = session.pool().watched(request.path_params["key"])
    if job is None:
        version, base = "unknown", polls.RUN_SECONDS
    else:
        progress = job.progress
        version = f"{job.status.value}:{progress.step}:{len(progress.history)}"
        base = polls.RUN_SECONDS
    polls.count(f"run:{request.client.host if request.client else ''}",
                time.thread_time() - started)
    return _answer(version, base)


ROUTES = [
    Route(f"{PREFIX}/class/{{class_id}}", class_version, methods=["GET"]),
    Route(f"{PREFIX}/run/{{key}}", run_version, methods=["GET"]),
    Route(f"{PREFIX}/votes/{{class_id}}", votes_version, methods=["GET"]),
]
