"""How many threads torch trains with in the command line, `stacklab.train` and the
notebook (the app's workers choose their own: one each).

One, unless ``STACKLAB_THREADS=N`` says otherwise. `bench/threads.py` measures every preset
in a fresh process with one thread, two threads (OpenMP's spinning waits) and two threads
with passive waits, on a quiet machine and with every core busy: one thread was never more
than 1.11 times the best of them, while two spinning threads took 2.41 times as long on a
busy machine (they fight the other work and each other) and two passive ones 1.85 times on
a quiet one (the presets' steps are too small to share).
"""

from __future__ import annotations

import os

ENV = "STACKLAB_THREADS"


def training_threads() -> int:
    """``STACKLAB_THREADS`` when set (a whole number from 1), else one.

    >>> import os; os.environ[ENV] = "3"; training_threads()
    3
    >>> del os.environ[ENV]; training_threads()
    1
    """
    chosen = os.environ.get(ENV, "").strip()
    if not chosen:
        return 1
    if not chosen.isdigit() or int(chosen) < 1:
        from .errors import StackError

        raise StackError("E_VALUE", f"{ENV}={chosen!r} is not a whole number from 1",
                         hint=f"e.g. {ENV}=1, or leave it unset for the default")
    return int(chosen)


def use_training_threads() -> int:
    """Set torch's thread count for training here (`training_threads`); returns it."""
    import torch

    threads = training_threads()
    torch.set_num_threads(threads)
    return threads
