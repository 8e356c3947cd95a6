"""The watch endpoints (`ui.watch`): what a following page asks the server every few
seconds, answered from what the server holds, with no script run.

- ``GET /_stacklab/watch/class/ID``: the class's version (``"ended"`` once it has ended
  or never was), bumped when its teacher moves, opens a vote round or reveals one. The
  follower's voter identity (header `ui.watch.VOTER_HEADER`) counts the page as following,
  for the projector's "N voted of M following", and in the backpressure, when the server
  issued it for this class (`stacklab.serve.classroom.voters`); a made-up one counts nothing.
- ``GET /_stacklab/watch/votes/ID``: the class's votes version (`Classes.votes_version`:
  changed by each vote, by the number following and by the teacher's moves), which the
  teacher's projector watches to redraw its count; ``"ended"`` as above. It needs no
  token (it says only that something changed), so the teacher's token stays out of URLs
  and pages; it is asked every `ui.pace.VOTES_SECONDS`, never widened (one page a class).
- ``GET /_stacklab/watch/run/KEY?kind=laptop|phone&have=N``: a run's live view on this
  server (`ui.live_answers`: its status line, and its pictures when the asker's frame ``have``
  is not the newest), ``"live": false`` once it has ended, and ``"unknown"`` for a run
  this server does not hold (a key that is no run key is refused with 404);
  ``GET /_stacklab/watch/run/KEY/pictures?kind=...``: its newest pictures, as markup.
- ``GET /_stacklab/watch/sessions/KEY``: how many sessions are on run ``KEY`` now, as
  its version (`ui.live_answers.sessions_answer`): the share panel's count.
- ``GET /_stacklab/watch/table/ID``: a table's analysis (`TableJob.id`), its version
  (`TableView.version`: its status and the worker's stage; ``"ended"`` for a job this
  server no longer holds), which Explore's progress follows (`ui.tables.wait_for`).

Each answer is ``{"v": VERSION, "every": SECONDS}``: ``every`` is the interval this
page should ask at, which the server widens under load (`ui.pace`); each request is
counted and timed there as one poll. server.py mounts `routes(hub)` beside the app's pages:
the endpoints answer from the server's hub (`ui.hub`), the one its pages read, and import
no page code (nothing here or below imports streamlit: tests/test_architecture.py).
"""

from __future__ import annotations

import re
import time

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ui import live_answers, pace
from ui.encoding import takes_gzip
from ui.hub import Hub
from ui.wire import PREFIX, VOTER_HEADER

HEADERS = {"Cache-Control": "no-store"}  # an answer is true now only
KEY = re.compile(r"[0-9a-f]{32}")  # a run key (`stacklab.lab.keys`)
UNKNOWN = {"v": "unknown", "every": pace.RUN_SECONDS, "live": False}


def _timed(ask, *args):
    started = time.thread_time()
    return ask(*args), time.thread_time() - started


def _run_key(request: Request) -> str | None:
    key = request.path_params["key"]
    return key if KEY.fullmatch(key) else None  # not a run key: nothing to look up


def _asker(request: Request) -> str:
    return f"run:{request.client.host if request.client else ''}"


class Endpoints:
    """The watch endpoints of one server, answering from its ``hub``."""

    def __init__(self, hub: Hub):
        self.hub = hub

    def _answer(self, version: str, follows: str) -> JSONResponse:
        return JSONResponse({"v": version, "every": pace.every(self.hub, follows)},
                            headers=HEADERS)

    def _class_version(self, class_id: str, voter: str | None) -> tuple[str, float, bool]:
        """The class's version, the CPU it took, and whether ``voter`` was counted: an
        identity the server issued for this class (`Classes.follow`); any other counts nothing."""
        started = time.thread_time()
        view = self.hub.classes().follow(class_id, voter or None)
        version = "ended" if view is None else str(view.version)
        return version, time.thread_time() - started, bool(view and view.counted)

    def _votes_version(self, class_id: str) -> tuple[str, float]:
        started = time.thread_time()
        version = self.hub.classes().votes_version(class_id)
        return version or "ended", time.thread_time() - started

    async def class_version(self, request: Request) -> JSONResponse:
        voter = request.headers.get(VOTER_HEADER)
        # in a thread: a class on the Ray cluster is a call to its actor
        version, cpu, counted = await run_in_threadpool(
            self._class_version, request.path_params["class_id"], voter)
        if counted:  # the backpressure counts only issued identities that follow: made-up
            pace.count(self.hub, pace.follower_of(voter), cpu)  # headers widen nobody's interval
        return self._answer(version, "class")

    async def votes_version(self, request: Request) -> JSONResponse:
        class_id = request.path_params["class_id"]
        version, cpu = await run_in_threadpool(self._votes_version, class_id)
        pace.count(self.hub, f"votes:{class_id}", cpu)
        return self._answer(version, "votes")

    def _table_version(self, job_id: str) -> str:
        job = self.hub.pool().tables.find(job_id)
        return "ended" if job is None else job.view().version

    async def table_version(self, request: Request) -> JSONResponse:
        """A table's analysis on Explore (`TableView.version`): its status and stage."""
        version, cpu = _timed(self._table_version, request.path_params["job_id"])
        pace.count(self.hub, _asker(request), cpu)
        return self._answer(version, "table")

    async def run_version(self, request: Request) -> Response:
        key = _run_key(request)
        if key is None:
            return JSONResponse(UNKNOWN, status_code=404, headers=HEADERS)
        body, cpu = await run_in_threadpool(_timed, live_answers.answer, self.hub, key,
                                            request.query_params.get("kind") == "phone")
        pace.count(self.hub, _asker(request), cpu)
        return Response(body, media_type="application/json", headers=HEADERS)

    async def run_sessions(self, request: Request) -> Response:
        key = _run_key(request)
        if key is None:
            return JSONResponse(UNKNOWN, status_code=404, headers=HEADERS)
        body, cpu = await run_in_threadpool(_timed, live_answers.sessions_answer, self.hub, key)
        pace.count(self.hub, _asker(request), cpu)
        return Response(body, media_type="application/json", headers=HEADERS)

    async def run_pictures(self, request: Request) -> Response:
        """The newest pictures of a live run (`ui.live_answers.pictures_of`): the same
        compressed bytes for every asker that takes gzip."""
        key = _run_key(request)
        # in a thread: a new frame's pictures take milliseconds to write, once per frame
        found, cpu = (None, 0.0) if key is None else await run_in_threadpool(
            _timed, live_answers.pictures_of, self.hub, key,
            request.query_params.get("kind") == "phone")
        pace.count(self.hub, _asker(request), cpu)
        if not found:
            return Response(status_code=404, headers=HEADERS)
        number, markup, packed = found
        headers = {**HEADERS, "X-Stacklab-Frame": str(number), "Vary": "Accept-Encoding"}
        if takes_gzip(request.headers.get("accept-encoding")):
            return Response(packed, media_type="text/html; charset=utf-8",
                            headers={**headers, "Content-Encoding": "gzip"})
        return Response(markup, media_type="text/html; charset=utf-8", headers=headers)


def routes(hub: Hub) -> list[Route]:
    """The watch endpoints' routes, answering from ``hub`` (server.py's, `Hub.start`)."""
    answers = Endpoints(hub)
    return [
        Route(f"{PREFIX}/class/{{class_id}}", answers.class_version, methods=["GET"]),
        Route(f"{PREFIX}/run/{{key}}", answers.run_version, methods=["GET"]),
        Route(f"{PREFIX}/run/{{key}}/pictures", answers.run_pictures, methods=["GET"]),
        Route(f"{PREFIX}/votes/{{class_id}}", answers.votes_version, methods=["GET"]),
        Route(f"{PREFIX}/sessions/{{key}}", answers.run_sessions, methods=["GET"]),
        Route(f"{PREFIX}/table/{{job_id}}", answers.table_version, methods=["GET"]),
    ]
