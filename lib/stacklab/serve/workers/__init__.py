"""stacklab.serve.workers: the training pool, its jobs and their transports (a local process
or a Ray actor), and the classes of a Ray cluster (`server_classes`)."""

from __future__ import annotations

import os

from ..classes import Classes


def server_classes(ttl_seconds: float, ray_address: str | None = None):
    """The open classes this app server reads and moves: its own (`Classes`), or, with a
    Ray address (``ray_address`` or ``STACKLAB_RAY_ADDRESS``), the cluster's, which every
    app server shares (`ray_classes.ClusterClasses`; Ray is imported only then)."""
    address = ray_address or os.environ.get("STACKLAB_RAY_ADDRESS") or None
    if address is None:
        return Classes(ttl_seconds=ttl_seconds)
    from .ray_classes import ClusterClasses

    return ClusterClasses(address, ttl_seconds)
