"""The classes of a Ray cluster: with ``STACKLAB_RAY_ADDRESS`` set, every app server of the
cluster reads and moves the same classes (`stacklab.serve.classroom.classes`), kept by one
named actor (`ACTOR`), as the runs are kept by theirs (`stacklab.serve.workers.ray_runs`).
A teacher on one app server then moves the students on every other.

`ClusterClasses` answers `Classes`'s methods by asking that actor, through one generic
proxy (`ActorProxy`): every public method of `Classes` is forwarded by its name, so a
method added there is answered here with nothing else to write. The actor is detached: it
outlives the app server that made it (a class outlives a restart of one server), and its
classes end as they do on one server, when their teacher has not been seen for the TTL.
The class's votes live in the actor too: the votes of every app server add up in one
count, and a restart of an app server keeps them. The voters' secret is the actor's
(``STACKLAB_SECRET`` in its environment, else its own random one): every app server checks
the same identities. Ray is imported only here and in `ray_runs`.

>>> sorted(public_methods(Classes))  # what ClusterClasses forwards  # doctest: +NORMALIZE_WHITESPACE
['close', 'follow', 'forget_idle', 'heartbeat', 'is_voter', 'issue_voter', 'move', 'open',
 'open_vote', 'outcome', 'reveal', 'rounds', 'tally', 'vote', 'vote_again', 'votes_version']
"""

from __future__ import annotations

from typing import Callable

import ray

from ...core.errors import StackError
from ..workers.ray_runs import CALL_SECONDS, NAMESPACE, connect
from .classes import Classes

ACTOR = "stacklab-classes"


def public_methods(cls: type) -> frozenset[str]:
    """The names of ``cls``'s public methods: what a proxy of it forwards (its data, such as
    ``Classes.outlives_restart``, and every ``_`` name stay its own)."""
    return frozenset(name for name in dir(cls)
                     if not name.startswith("_") and callable(getattr(cls, name)))


class ActorProxy:
    """``cls``'s public methods (`public_methods`) answered by ``actor``, a Ray actor made
    from ``cls``: the same call, by name, its answer waited for at most `CALL_SECONDS`. A
    `StackError` the actor raises (a wrong token, a class that has ended) is raised here as
    it is. Any other name is no attribute here: a typo fails at once, not on the cluster."""

    def __init__(self, cls: type, actor):
        self._cls, self._methods, self._actor = cls, public_methods(cls), actor

    def __getattr__(self, name: str) -> Callable:
        # Called only for a name the proxy does not hold itself (``_actor``, ``_call``, ...).
        if name not in self.__dict__.get("_methods", ()):  # none before __init__ ran
            raise AttributeError(f"{type(self).__name__} forwards only public methods, "
                                 f"and {name!r} is none")

        def forward(*args, **kwargs):
            return self._call(name, *args, **kwargs)

        forward.__name__ = forward.__qualname__ = name
        forward.__doc__ = getattr(self._cls, name).__doc__
        return forward

    def __dir__(self) -> list[str]:
        return sorted({*super().__dir__(), *self._methods})

    def _call(self, method: str, *args, **kwargs):
        try:
            return ray.get(getattr(self._actor, method).remote(*args, **kwargs),
                           timeout=CALL_SECONDS)
        except ray.exceptions.RayTaskError as err:
            if isinstance(err.cause, StackError):
                raise err.cause from None
            raise


class ClusterClasses(ActorProxy):
    """`Classes` on a Ray cluster: the same methods, answered by the cluster's one classes
    actor (made by the first app server that asks, found by name by the others)."""

    outlives_restart = True  # the detached actor keeps the classes and their votes

    def __init__(self, address: str, ttl_seconds: float):
        connect(address)
        remote = ray.remote(max_concurrency=32)(Classes)  # every page script polls it
        super().__init__(Classes, remote.options(name=ACTOR, namespace=NAMESPACE,
                                                 get_if_exists=True,
                                                 lifetime="detached").remote(ttl_seconds))
