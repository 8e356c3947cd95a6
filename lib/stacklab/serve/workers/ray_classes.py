"""The classes of a Ray cluster: with ``STACKLAB_RAY_ADDRESS`` set, every app server of the
cluster reads and moves the same classes (`stacklab.serve.classes`), kept by one named actor
(`ACTOR`), as the runs are kept by theirs (`stacklab.serve.workers.ray_runs`). A teacher on
one app server then moves the students on every other.

`ClusterClasses` answers `Classes`'s methods by asking that actor. The actor is detached:
it outlives the app server that made it (a class outlives a restart of one server), and
its classes end as they do on one server, when their teacher has not been seen for the
TTL. The class's votes live in the actor too: the votes of every app server add up in one
count, and a restart of an app server keeps them. The voters' secret is the actor's
(``STACKLAB_SECRET`` in its environment, else its own random one): every app server checks
the same identities. Ray is imported only here and in `ray_runs`.
"""

from __future__ import annotations

import ray

from ...core.errors import StackError
from ..classes import Classes, ClassView, Opened, Round, Tally
from .ray_runs import CALL_SECONDS, NAMESPACE, connect

ACTOR = "stacklab-classes"


class ClusterClasses:
    """`Classes` on a Ray cluster: the same methods, answered by the cluster's one classes
    actor (made by the first app server that asks, found by name by the others). A
    `StackError` the actor raises (a wrong token, a class that has ended) is raised here
    as it is."""

    outlives_restart = True  # the detached actor keeps the classes and their votes

    def __init__(self, address: str, ttl_seconds: float):
        connect(address)
        remote = ray.remote(max_concurrency=32)(Classes)  # every page script polls it
        self._actor = remote.options(name=ACTOR, namespace=NAMESPACE, get_if_exists=True,
                                     lifetime="detached").remote(ttl_seconds)

    def open(self, lesson: str, step: int = 0, opener: str | None = None) -> Opened:
        return self._call("open", lesson, step, opener)

    def issue_voter(self, class_id: str, address: str | None) -> str | None:
        return self._call("issue_voter", class_id, address)

    def is_voter(self, class_id: str, voter: object) -> bool:
        return self._call("is_voter", class_id, voter)

    def move(self, class_id: str, token: str, step: int, lesson: str | None = None) -> ClassView:
        return self._call("move", class_id, token, step, lesson)

    def heartbeat(self, class_id: str, token: str) -> bool:
        return self._call("heartbeat", class_id, token)

    def follow(self, class_id: str, follower: str | None = None) -> ClassView | None:
        return self._call("follow", class_id, follower)

    def open_vote(self, class_id: str, token: str, choices: tuple[str, ...]) -> ClassView:
        return self._call("open_vote", class_id, token, tuple(choices))

    def vote(self, class_id: str, voter: str, step: int, choice: str,
             in_round: int | None = None) -> int:
        return self._call("vote", class_id, voter, step, choice, in_round)

    def reveal(self, class_id: str, token: str) -> Round:
        return self._call("reveal", class_id, token)

    def vote_again(self, class_id: str, token: str) -> Round:
        return self._call("vote_again", class_id, token)

    def outcome(self, class_id: str, token: str, value: float, supported: str) -> None:
        return self._call("outcome", class_id, token, value, supported)

    def tally(self, class_id: str, token: str) -> Tally:
        return self._call("tally", class_id, token)

    def votes_version(self, class_id: str) -> str | None:
        return self._call("votes_version", class_id)

    def rounds(self, class_id: str, token: str) -> tuple[Round, ...]:
        return self._call("rounds", class_id, token)

    def close(self, class_id: str, token: str) -> None:
        return self._call("close", class_id, token)

    def forget_idle(self) -> int:
        return self._call("forget_idle")

    def _call(self, method: str, *args):
        try:
            return ray.get(getattr(self._actor, method).remote(*args), timeout=CALL_SECONDS)
        except ray.exceptions.RayTaskError as err:
            if isinstance(err.cause, StackError):
                raise err.cause from None
            raise
