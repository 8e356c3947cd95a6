"""stacklab.serve.classroom: the classes a teacher presents, in one place. A class
(`classes`: its lesson, its step, the presenter token), its students' votes (`votes`) and
the voter identities the server issues (`voters`), kept in this server's memory or, on a
Ray cluster, by the cluster's one classes actor (`cluster`); `server_classes` picks which.
It builds on `serve.limits` and, for the cluster's connection only, `serve.workers`."""

from __future__ import annotations

import os

from .classes import Classes


def server_classes(ttl_seconds: float, ray_address: str | None = None):
    """The open classes this app server reads and moves: its own (`Classes`), or, with a
    Ray address (``ray_address`` or ``STACKLAB_RAY_ADDRESS``), the cluster's, which every
    app server shares (`cluster.ClusterClasses`; Ray is imported only then)."""
    address = ray_address or os.environ.get("STACKLAB_RAY_ADDRESS") or None
    if address is None:
        return Classes(ttl_seconds=ttl_seconds)
    from .cluster import ClusterClasses

    return ClusterClasses(address, ttl_seconds)
