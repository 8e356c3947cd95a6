"""Runs on a Ray cluster: with ``STACKLAB_RAY_ADDRESS`` set (``auto``,
``local`` or ``ray://HOST:PORT``), each run has a Ray actor named
``stacklab-run-<the run key>`` (`actor_name`, `ray_stream.RunActor`), and the run trains
on the cluster instead of in a local process.

The run trains with the same `stacklab.serve.workers.worker.train` as in a local worker
process, in one of the app server's warm **trainers** (`Trainer`, below), which hands
what it sends to the run's actor; the actor keeps it for every reader. The actors live
in one namespace (`NAMESPACE`), so every app server connected to the cluster finds a key's
actor by its name: one app server trains a key, any other **follows** it (`follow`)
instead of training it again (the pool's side of this is
`stacklab.serve.workers.transport.RayActor`). The run comes back through the run store,
which must then be a path every node can reach. Ray is imported only here, so a server without
``STACKLAB_RAY_ADDRESS`` never imports it.

- **Readers.** Each app server's transport is a *reader* of the actor's stream and polls
  it from a cursor of its own (`RunActor.poll`), so several readers each get the whole
  stream: the held-out evaluations in full (the pool keeps them too), the newest step
  and the newest pattern figure (only the newest: the actor's memory grows with the
  evaluations only), and the run's last message. Each poll also says how many sessions
  watch the run on the reader's app server and gets back how many watch it on the others,
  so the share dialog counts a class spread over several app servers.
- **Stop** as in the local pool: a reader *holds* the run while a session of its app
  server watches it; `stop` lets go, and the run stops after its current step once
  nobody holds it, or once no holder has polled for `STALE_SECONDS` (its server went
  away). A stop from one server's students never stops a run others still watch; a
  reader that let go still reads the stream to its end.
- **Ending.** The reader that trains the run waits, when it is over, until the other
  readers have read the end (at most `LINGER_SECONDS`), then ends the actor; the name
  is free again. A non-detached actor also ends with the app server that made it: its
  readers then report the run as failed, or take it from the run store when it was
  stored in time.
- **Races.** Two app servers starting one key at once get one actor
  (``get_if_exists``); the first to join trains it, the other follows. A run that
  stopped, or failed, while its actor still lingers is not followed: a new start waits
  for the name to be free and trains anew, as a new Train press does locally. An actor
  gone between lookup and join, or one that does not answer for `CALL_SECONDS`, is
  reported (`follow` gives None; a poll raises), never waited on forever.
- **Starting fast.** A new actor is a new worker process, and a process that imports
  torch (any stacklab module does) pays seconds for it before the first step: about 3 s
  from the Train press to the first step on a quiet 2-core machine, 18 s on a busy one,
  where a local run forked from the warm fork server takes 0.07 s. So the work is split
  in two. The run's actor is light: its code (`ray_stream`) is shipped by value and needs
  nothing of stacklab, so its process imports Ray only (about 0.5 s on a quiet machine).
  The training runs in a *trainer*: a long-lived actor of this app server, started when
  it connects (`connect`, `warm`: one per run it trains at once, its pool's workers),
  which imports torch and stacklab and trains two steps (`warmup`) before the first
  Train press, and then trains one run at a time (`Trainer.train`), delivering the
  run's messages to its actor at most every `DELIVER_SECONDS` and hearing back whether
  to stop (`_Relay`). The trainer is taken, and starts, *before* the reader joins the
  actor, so the model is built and trains while the actor's process starts; its first
  delivery waits for the first join, and a trainer whose reader did not get to train
  the run (another app server's did) drops it there (`RunActor.deliver` says None).
  With every trainer busy, or none warm yet, the actor trains the run itself, as before
  (`RunActor.train`). Measured side by side (``python bench/ray_start.py``, 2 cores,
  load average 1-4): a Ray run's first step 1.04 s after the press, 3.75 s before (a
  local run's 0.06-0.08 s); `bench/loadtest.py`'s ``ray_hall300`` in
  `docs/guide/hardening.md`. Two of Ray's own ways were measured and not taken: a
  ``worker_process_setup_hook`` (``runtime_env``) that imports torch runs in each new
  worker process as it starts, so a new actor still waits for it (1.7 to 2.1 s, no
  better), and Ray hands an actor to an idle pooled worker only if that worker never ran
  anything (the few prestarted when the node starts): a worker warmed by a task that
  imported torch is not reused for an actor, and a dead actor's process is not kept.
"""

from __future__ import annotations

import os
import threading
import time

import ray

from . import ray_stream, worker
from .messages import Done, Stored
from .process_limits import lower_priority

# The run's actor is shipped by value (`ray_stream`): its process never imports stacklab.
ray.cloudpickle.register_pickle_by_value(ray_stream)
RunActor = ray.remote(max_concurrency=16)(ray_stream.RunActor)  # train while readers poll
_Stream, _Readers = ray_stream._Stream, ray_stream._Readers

NAMESPACE = "stacklab"
STALE_SECONDS = ray_stream.STALE_SECONDS
LINGER_SECONDS = 10.0  # how long a finished run's actor waits for its other readers
CALL_SECONDS = 60.0  # an actor that does not answer a call in this long is lost
RETRY_SECONDS = 0.25
DELIVER_SECONDS = 0.1  # a trainer hands its messages to the run's actor this often
ENDS = (Stored.kind, Done.kind)  # ... and at once when the run ends


def connect(address: str, trainers: int = 0) -> None:
    """Join the cluster at ``address`` (``local``: start one on this machine) once, and
    start warming ``trainers`` trainers for this app server's runs (`warm`): in the
    background, never waited for here."""
    if not ray.is_initialized():
        ray.init(address=None if address == "local" else address, namespace=NAMESPACE,
                 include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    if trainers:
        warm(trainers)


class _Gone(BaseException):
    """The run's actor cannot be reached, or another reader trains the run (``ours``
    False): its training ends at once (a `BaseException`, so that `worker.train` does not
    take it for the run's own failure)."""

    def __init__(self, ours: bool = True):
        super().__init__()
        self.ours = ours


class _Relay:
    """`worker.train`'s pipe and stop event in a trainer: the messages go to the run's
    actor (`RunActor.deliver`), in order, at most `DELIVER_SECONDS` apart (the end at
    once), and each delivery brings back whether the run is to stop."""

    def __init__(self, run, reader: str):
        self.run, self.reader = run, reader
        self.pending, self.stopped, self.last = [], False, 0.0  # the first at once

    def send(self, raw: tuple) -> None:
        self.pending.append(raw)
        if raw[0] in ENDS or time.monotonic() - self.last >= DELIVER_SECONDS:
            self.deliver()

    def is_set(self) -> bool:
        if time.monotonic() - self.last >= DELIVER_SECONDS:
            self.deliver()
        return self.stopped

    def close(self) -> None:
        if self.pending:
            self.deliver()

    def deliver(self) -> None:
        sent, self.pending, self.last = self.pending, [], time.monotonic()
        try:
            stopped = ray.get(self.run.deliver.remote(self.reader, sent), timeout=CALL_SECONDS)
        except ray.exceptions.RayError as err:  # the actor died, or does not answer
            raise _Gone() from err
        if stopped is None:
            raise _Gone(ours=False)
        self.stopped = stopped


@ray.remote(max_concurrency=2)  # `ready` answers while a run trains
class Trainer:
    """A warm process of one app server that trains its runs, one at a time: torch,
    stacklab's trainer and plotly are imported, and two steps trained (`warmup`), before
    the first run is asked for."""

    def __init__(self):
        from . import warmup  # noqa: F401 - imported for what importing it does

        self.warmed = time.time()  # when the process was ready to train
        self.trained: list[str] = []  # the keys it trained, oldest first
        self.let_go: list[str] = []  # the keys it started and let go: another reader trained them
        self.niced = 0  # how much lower this process's priority is now

    def ready(self) -> tuple[int, float, list[str], list[str]]:
        """This process's id, when it was warm, the keys it trained and those it let go."""
        return os.getpid(), self.warmed, list(self.trained), list(self.let_go)

    def train(self, run, key: str, args: tuple, reader: str) -> None:
        """Train the run of ``key`` (``args``: `worker.train`'s after its pipe and stop
        event) for its actor ``run``, as ``reader``; then say it is over there. Started
        before ``reader`` joined the actor, it stops at its first delivery if another
        reader trains the run."""
        self.trained.append(key)
        *args, nice = args
        if nice > self.niced:  # os.nice adds up: lower it once, to the most asked for
            lower_priority(nice - self.niced)
            self.niced = nice
        relay = _Relay(run, reader)
        try:
            worker.train(relay, relay, *args, 0, figures_nice=0)
            ray.get(run.finish.remote(), timeout=CALL_SECONDS)
        except _Gone as gone:
            if not gone.ours:
                self.trained.remove(key)
                self.let_go.append(key)
        except ray.exceptions.RayError:
            pass  # the run's actor is gone: nobody is left to hear the end


class _Trainers:
    """This app server's trainers: each one warm (its `Trainer.ready` answered) and free
    (its last run returned) or busy; a dead one is replaced."""

    def __init__(self):
        self.lock = threading.Lock()
        self.job: str | None = None  # the Ray job (this app server's connection) they are of
        self.calls: dict[object, object] = {}  # trainer -> its last call (ready, or train)

    def warm(self, count: int) -> None:
        with self.lock:
            self._same_job_locked()
            for _ in range(count - len(self.calls)):
                trainer = Trainer.remote()
                self.calls[trainer] = trainer.ready.remote()

    def train(self, run, key: str, args: tuple, reader: str):
        """The reference to a free trainer's `Trainer.train` of the run, or None when none
        is free (or warm yet)."""
        with self.lock:
            self._same_job_locked()
            if not self.calls:
                return None
            done, _ = ray.wait(list(self.calls.values()), num_returns=len(self.calls),
                               timeout=0)
            for trainer, call in list(self.calls.items()):
                if call in done and self._alive_locked(trainer, call):
                    self.calls[trainer] = trainer.train.remote(run, key, args, reader)
                    return self.calls[trainer]
            return None

    def _alive_locked(self, trainer, call) -> bool:
        try:
            ray.get(call, timeout=0)
        except ray.exceptions.RayActorError:  # its process died: a new one warms instead
            del self.calls[trainer]
            replacement = Trainer.remote()
            self.calls[replacement] = replacement.ready.remote()
            return False
        except ray.exceptions.RayError:
            pass  # the call failed, the trainer lives on
        return True

    def _same_job_locked(self) -> None:
        job = ray.get_runtime_context().get_job_id()
        if job != self.job:  # a new connection: the old trainers went with the old one
            self.job, self.calls = job, {}


_TRAINERS = _Trainers()


def warm(count: int) -> None:
    """Start ``count`` trainers for this app server's runs, if it has fewer: each imports
    torch and stacklab and trains two steps now, not when a student presses Train."""
    _TRAINERS.warm(count)


def trainers() -> list:
    """This app server's trainers (their `Trainer.ready` says what each did)."""
    with _TRAINERS.lock:
        return list(_TRAINERS.calls)


def actor_name(key: str) -> str:
    """The name of the actor of the run ``key``: the whole key, so that two keys that
    begin alike never meet at one name."""
    return f"stacklab-run-{key}"


def _join(actor, reader: str, key: str, train: bool) -> tuple:
    """`RunActor.join`, with ``"gone"`` for an actor that ended meanwhile."""
    try:
        joined = ray.get(actor.join.remote(reader, train), timeout=CALL_SECONDS)
    except ray.exceptions.RayActorError:  # killed between lookup and join
        return ("gone",)
    if joined[1] != key:
        raise RuntimeError(f"the Ray actor {actor_name(key)} trains another run ({joined[1]})")
    return joined


def start(key: str, args: tuple, reader: str):
    """The run's actor and the reference to its training call; the reference is None when
    another app server trains it already (``reader`` then follows it). An earlier run of
    the key still ending holds the name: waited for, up to `CALL_SECONDS`."""
    deadline, setup = time.monotonic() + CALL_SECONDS, [ray.put(args)]
    while True:
        try:
            actor = RunActor.options(name=actor_name(key), namespace=NAMESPACE,
                                     get_if_exists=True).remote(key, setup)
        except ValueError:  # made by another app server, and gone again, meanwhile
            actor, role = None, "gone"
        else:  # a free trainer starts now, while the actor's process starts (`deliver`)
            training = _TRAINERS.train(actor, key, args, reader)
            role = _join(actor, reader, key, train=True)[0]
        if role == "train":  # on a warm trainer of this app server; else in the actor
            return actor, actor.train.remote() if training is None else training
        if role == "watch":
            return actor, None
        if time.monotonic() > deadline:
            raise RuntimeError(f"an earlier run of key {key[:12]} is still ending on the Ray "
                               "cluster")
        time.sleep(RETRY_SECONDS)


def follow(key: str, reader: str) -> tuple | None:
    """``(actor, source, config, seconds)`` of the run of ``key`` that an app server trains
    (or trained, and stored) on the cluster, with ``reader`` following it; None when
    there is none to follow."""
    try:
        actor = ray.get_actor(actor_name(key), namespace=NAMESPACE)
    except ValueError:
        return None
    joined = _join(actor, reader, key, train=False)
    if joined[0] != "watch":
        return None
    source, config = ray.get(joined[2][0], timeout=CALL_SECONDS)[:2]
    return actor, source, config, joined[3]


def poll(actor, reader: str, since: int, watching: int = 0
         ) -> tuple[int, list[tuple], bool, int]:
    return ray.get(actor.poll.remote(reader, since, watching), timeout=CALL_SECONDS)


def ended(reference) -> str | None:
    """None while the run trains (``reference``: its training call, on a trainer or the
    actor); else why it ended without a word ("" when it simply returned: its last
    message says the rest)."""
    ready, _ = ray.wait([reference], timeout=0)
    if not ready:
        return None
    try:
        ray.get(reference)
    except ray.exceptions.RayError as err:  # the actor died, or its process was killed
        return f"the Ray actor ended unexpectedly ({type(err).__name__})"
    return ""


def stop(actor, reader: str) -> None:
    actor.leave.remote(reader)


def release(actor, reader: str, trained: bool) -> None:
    """``reader`` has read the run; the one that ``trained`` it waits for the others (up
    to `LINGER_SECONDS`), then ends the actor."""
    try:
        reading = ray.get(actor.release.remote(reader), timeout=CALL_SECONDS)
        deadline = time.monotonic() + LINGER_SECONDS
        while trained and reading and time.monotonic() < deadline:
            time.sleep(RETRY_SECONDS)
            reading = ray.get(actor.reading.remote(), timeout=CALL_SECONDS)
    except ray.exceptions.RayError:
        pass  # gone, or not answering: nobody reads it any more
    if trained:
        ray.kill(actor, no_restart=True)
