"""Runs on a Ray cluster (SPEC §13): with ``STACKLAB_RAY_ADDRESS`` set (``auto``, ``local``
or ``ray://HOST:PORT``), the pool trains each run in a Ray actor named
``stacklab-run-<first 12 characters of the run key>`` instead of a local process.

The actor runs the same `stacklab.serve.worker.train` as a local worker process; its
messages (progress, evaluations with the pattern figure, the end) wait in the actor until
the pool polls them, and Stop reaches it as a method call (the pool's side of this is
`stacklab.serve.transport.RayActor`). The run comes back through the
run store, which must then be a path every node can reach. Ray is imported only here, so
a server without ``STACKLAB_RAY_ADDRESS`` never imports it.
"""

from __future__ import annotations

import threading

import ray

from . import worker


def connect(address: str) -> None:
    """Join the cluster at ``address`` (``local``: start one on this machine) once."""
    if not ray.is_initialized():
        ray.init(address=None if address == "local" else address, include_dashboard=False,
                 log_to_driver=False, ignore_reinit_error=True)


class _Outbox:
    """What `worker.train` sends, kept until the pool polls."""

    def __init__(self):
        self.messages: list[tuple] = []
        self.lock = threading.Lock()

    def send(self, message: tuple) -> None:
        with self.lock:
            self.messages.append(message)

    def close(self) -> None:
        pass


@ray.remote(max_concurrency=4)  # train runs while poll and stop are called
class RunActor:
    """One run on the cluster."""

    def __init__(self):
        self.outbox = _Outbox()
        self.stopping = threading.Event()

    def train(self, *args) -> None:
        worker.train(self.outbox, self.stopping, *args)

    def poll(self) -> list[tuple]:
        with self.outbox.lock:
            messages, self.outbox.messages = self.outbox.messages, []
        return messages

    def stop(self) -> None:
        self.stopping.set()


def actor_name(key: str) -> str:
    return f"stacklab-run-{key[:12]}"


def start(key: str, args: tuple):
    """The run's actor and the reference to its training call."""
    actor = RunActor.options(name=actor_name(key), get_if_exists=False).remote()
    return actor, actor.train.remote(*args)


def poll(actor) -> list[tuple]:
    return ray.get(actor.poll.remote(), timeout=60)


def ended(reference) -> str | None:
    """None while the actor trains; else why it ended without a word ("" when it simply
    returned: its last message says the rest)."""
    ready, _ = ray.wait([reference], timeout=0)
    if not ready:
        return None
    try:
        ray.get(reference)
    except ray.exceptions.RayError as err:  # the actor died, or its process was killed
        return f"the Ray actor ended unexpectedly ({type(err).__name__})"
    return ""


def stop(actor) -> None:
    actor.stop.remote()


def release(actor) -> None:
    ray.kill(actor, no_restart=True)
