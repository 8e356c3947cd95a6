"""One training run in a process of its own, reporting back to the pool over a pipe.

The server's threads share one interpreter lock: a training loop in a server thread waits
for it after every torch op while thirty sessions' page scripts hold it, and a crash or
an out-of-memory kill in torch would take the whole server down. So each run trains in a
child process, forked from a server that has already imported torch and stacklab
(``forkserver`` with those modules preloaded), and tells the pool what happens, in the
messages of `stacklab.serve.workers.messages` (sent encoded, `messages.encode`):

- `Step`: progress, at most every `PROGRESS_SECONDS`;
- `Evaluated`: a held-out evaluation, the batch losses since the last message, and the
  task's pattern figure as plotly JSON (drawn at most every `PATTERN_SECONDS`, else None);
- `Stored`: a finished or diverged run is in the run store under its key, with the pattern
  figure of its final model; its other figures are being drawn, in a local worker at a
  lower priority (`FIGURES_NICE`). Its watchers see it end now, not after the figures (a
  third of a small run's time), and the pool's next run starts;
- `Done`: the run ended; a finished or diverged run is in the run store under its key, any
  other run in a private folder of the store, with every figure drawn here
  (``figures.json``): the pool reads the run without its tensors and draws nothing. A run
  that trained but cannot be stored (a full disk, a folder it may not write) is failed
  with a `StackError`'s text that says so (`storage_failure`).

The pool asks for a stop by setting an event, checked after every step.
"""

from __future__ import annotations

import errno
import os
import re
import time
from contextlib import contextmanager

import torch

from ...core.errors import StackError
from ...lab.train.budgets import Budgets
from ...lab.figures import figure_entry, figures_json, pattern_figure
from ...lab.runs.store import STORED_STATUSES, RunStore
from ...lab.settings import TrainConfig
from ...lab.train.record import Status
from ...lab.train.trainer import Trainer
from .messages import Done, Evaluated, Message, Step, Stored, encode
from .process_limits import lower_priority

PROGRESS_SECONDS = 0.1
PATTERN_SECONDS = 0.5  # pages poll a run every 0.5 s (1 s when many watch it)
PATTERN_SHARE = 4  # wait at least 4x what the last live pattern figure took to draw
FIGURES_NICE = 10  # a stored run's figures are drawn at this much lower priority
# Imported once by the fork server (a table's analysis too); `warmup` also runs two
# training steps there.
PRELOAD = ["torch", "stacklab.serve.workers.worker", "stacklab.serve.workers.table_worker",
           "stacklab.serve.workers.warmup"]
FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)  # the disk (or this process's share) is full


def ready() -> None:
    """Nothing: a first process, so that the fork server is up (and torch imported) early."""


def send(conn, message: Message) -> None:
    """``message`` to the pool, in the one wire form of both transports."""
    conn.send(encode(message))


def train(conn, stop, source: str | None, config: TrainConfig, budgets: Budgets, store_root: str,
          store_max_bytes: int, threads: int | None, nice: int,
          figures_nice: int = FIGURES_NICE) -> None:
    """The child's whole life: train, report, store. Runs in the child process (or a Ray
    actor, whose slot is its own: it passes ``figures_nice=0``)."""
    torch.set_num_threads(threads or os.cpu_count() or 1)  # the fork server left it at one
    lower_priority(nice)  # page scripts win the CPU over training
    store = RunStore(store_root, max_bytes=store_max_bytes)
    try:
        trainer = Trainer(source, config, budgets=budgets)
        _report(trainer, conn, stop)
        run = trainer.run()
        try:
            if _stored_first(run, store, conn, figures_nice):
                return
            figures = _figures(run)
            with _storing(run, store_root):
                folder = str(store.save_private(run, figures))
        except StackError as err:  # the run trained; it cannot be handed over, and says why
            send(conn, Done(str(Status.FAILED), str(err), None))
            return
        send(conn, Done(str(run.status), run.error, folder))
    except Exception as err:  # noqa: BLE001 - whatever happens, the pool hears why
        send(conn, Done(str(Status.FAILED), f"{type(err).__name__}: {err}", None))
    finally:
        conn.close()


def _stored_first(run, store: RunStore, conn, figures_nice: int) -> bool:
    """Store a finished or diverged run without its figures, say so with its final pattern
    figure (`Stored`), then draw the figures into the stored run and say `Done`. False,
    with nothing sent, for a run the store does not keep."""
    if run.status not in STORED_STATUSES:
        return False
    with _storing(run, store.location):
        if store.save(run) is None:
            return False
    send(conn, Stored(str(run.status), run.error, _pattern(run)))
    lower_priority(figures_nice)  # the pool's next run starts now: it trains meanwhile
    figures = _figures(run)
    try:
        if figures is not None:
            store.add_figures(run.key, figures)
    except Exception as err:  # noqa: BLE001 - the run is stored: the server draws its figures
        print(f"stacklab worker: figures of run {run.key} not stored: {err}", flush=True)
    send(conn, Done(str(run.status), run.error, None))
    return True


@contextmanager
def _storing(run, root):
    """Writing ``run`` to the run store at ``root``: any failure there (a full disk reads
    as `OSError` from Python's writes, `SafetensorError` from the tensors') becomes a
    `StackError` a student can read (`storage_failure`)."""
    try:
        yield
    except Exception as err:  # noqa: BLE001 - whatever the store's writer raised
        raise storage_failure(err, run, root) from err


def storage_failure(err: BaseException, run, root) -> StackError:
    """Why ``run`` trained but could not be written to the run store at ``root``: full
    (``E_BUDGET``) or not writable (``E_VALUE``), with what the system said."""
    number = _errno(err)
    reason = os.strerror(number) if number else f"{type(err).__name__}: {str(err)[:200]}"
    trained = f"the run trained ({run.status}, step {run.step}) but the run store at {root}"
    if isinstance(err, StackError):  # a bucket that cannot be reached or refuses the keys
        return StackError(err.code, f"the run trained ({run.status}, step {run.step}) but is "
                          f"not kept: {err.message}", hint=err.hint)
    if number in FULL:
        return StackError("E_BUDGET", f"{trained} is full ({reason})",
                          hint="the server's disk is full: free space in the run store's "
                               "folder (STACKLAB_RUNS) or lower STACKLAB_RUNS_MAX_BYTES, "
                               "then press Train again")
    return StackError("E_VALUE", f"{trained} cannot be written ({reason})",
                      hint="give the server a run store folder it can write (STACKLAB_RUNS), "
                           "then press Train again")


def _errno(err: BaseException) -> int | None:
    """The system's error number behind ``err``: an `OSError`'s, or the one safetensors'
    Rust writer puts in its message (``... No space left on device (os error 28)``; older
    versions: ``IoError(Os { code: 28, ... })``)."""
    if isinstance(err, OSError) and err.errno:
        return err.errno
    found = re.search(r"\(os error (\d+)\)|\bOs \{ code: (\d+)", str(err))
    return int(found.group(1) or found.group(2)) if found else None


def _report(trainer: Trainer, conn, stop) -> None:
    """Hook the trainer's events to messages on ``conn`` and ``stop`` to `Trainer.stop`."""
    clock = {"progress": 0.0, "pattern": 0.0, "losses": 0}

    def on_batch_end(run) -> None:
        if stop.is_set():
            trainer.stop()
        now = time.monotonic()
        if now - clock["progress"] >= PROGRESS_SECONDS:
            clock["progress"] = now
            send(conn, Step(run.step, run.train_loss[-1] if run.train_loss else None))

    def on_eval(run) -> None:
        now = time.monotonic()
        pattern = None
        if now >= clock["pattern"]:
            pattern = _pattern(run)
            drawn = time.monotonic()
            # the next one after PATTERN_SECONDS, or later where drawing is slow (many heads
            # on held-out inputs): the live figure takes at most a fifth of the run's time
            clock["pattern"] = drawn + max(PATTERN_SECONDS, PATTERN_SHARE * (drawn - now))
        losses = run.train_loss[clock["losses"]:]
        clock["losses"] = len(run.train_loss)
        send(conn, Evaluated(run.step, run.history[-1], losses, pattern))

    trainer.add_callback("on_batch_end", on_batch_end)
    trainer.add_callback("on_eval", on_eval)


def _figures(run) -> dict | None:
    """Every figure of the run (`figures_json`), or None if they cannot be drawn: the server
    then draws them itself when a page asks."""
    if run.status == Status.FAILED:
        return None
    try:
        return figures_json(run)
    except (RuntimeError, ValueError) as err:  # StackError is a ValueError
        print(f"stacklab worker: no figures: {err}", flush=True)
        return None


def _pattern(run) -> tuple | None:
    """The task's pattern figure as a tuple of its `figure_entry` (title, caption, plotly
    JSON, score, key, skipped); None if it cannot be drawn (a figure never ends a run)."""
    try:
        figure = pattern_figure(run)
    except (RuntimeError, ValueError) as err:  # StackError is a ValueError
        print(f"stacklab worker: no pattern figure: {err}", flush=True)
        return None
    if figure is None:
        return None
    return tuple(figure_entry(figure))
