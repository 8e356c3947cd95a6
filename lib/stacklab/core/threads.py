"""How many threads torch trains with in the command line, `stacklab.train` and the
notebook (the app's workers choose their own: one each).

OpenMP threads that wait for work spin by default. On a machine whose cores are busy with
other work, two spinning threads fight that work and each other: the same `reverse` run
took 3.6 times as long with two threads as with one (`bench/threads.py`). With passive
waiting (``OMP_WAIT_POLICY=PASSIVE``) a waiting thread sleeps instead, and two threads
were as fast as one on a busy machine and faster on a quiet one. OpenMP reads that
variable once, when torch loads its library, so `prefer_passive_waits` runs first thing in
``import stacklab``; where torch was loaded before (or the user chose a policy), one
thread is the safe default. ``STACKLAB_THREADS=N`` chooses for yourself.
"""

from __future__ import annotations

import os
import sys

ENV = "STACKLAB_THREADS"
_passive = False  # whether this process's OpenMP waits passively (decided before torch loads)


def prefer_passive_waits() -> None:
    """Ask OpenMP to let waiting threads sleep, if torch is not loaded yet and the user has
    not chosen a policy. Called by ``stacklab/__init__`` before anything imports torch."""
    global _passive
    if "torch" not in sys.modules and "OMP_WAIT_POLICY" not in os.environ:
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    _passive = os.environ.get("OMP_WAIT_POLICY", "").upper() == "PASSIVE" and (
        "torch" not in sys.modules)


def training_threads() -> int:
    """``STACKLAB_THREADS`` when set (a whole number from 1), else two threads where waits
    are passive (one on a single core), else one.

    >>> import os; os.environ[ENV] = "3"; training_threads()
    3
    >>> del os.environ[ENV]
    """
    chosen = os.environ.get(ENV, "").strip()
    if chosen:
        if not chosen.isdigit() or int(chosen) < 1:
            from .errors import StackError

            raise StackError("E_VALUE", f"{ENV}={chosen!r} is not a whole number from 1",
                             hint=f"e.g. {ENV}=1, or leave it unset for the default")
        return int(chosen)
    return min(2, os.cpu_count() or 1) if _passive else 1


def use_training_threads() -> int:
    """Set torch's thread count for training here (`training_threads`); returns it."""
    import torch

    threads = training_threads()
    torch.set_num_threads(threads)
    return threads
