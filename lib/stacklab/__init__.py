"""stacklab: a lab for learned position embeddings.

Type a layer stack, see every shape resolved before anything runs, build it into a torch
module and train it:

>>> import stacklab
>>> net = stacklab.resolve("embedding(500, 16)\\npos_embed(32)\\nlinear(4)", ["B", 12],
...                        input_dtype="int64")
>>> net.param_count
8580

The package is layered (see ARCHITECTURE.md): `stacklab.core` (language, resolver,
network, build, export), `stacklab.ops` (one file per op), `stacklab.lab` (tasks, trainer,
analysis, figures, checkpoints) and `stacklab.serve` (links and the worker pool), with the
command line on top. The names below are the public API; ``from stacklab import analysis,
figures`` (and ``checkpoint``, ``export``, ``tasks``, ``models`` for real models'
checkpoints, ``lessons``, ``glossary``) gives the lab's modules.
"""

import importlib

from .core import __version__
from .core.build import StackModule, pick_device
from .core.errors import CODES, StackError
from .core.language import parse
from .core.network import Network
from .core.nodes import Node, Requirement
from .core.resolve import DEFAULT_BUDGET_BYTES, resolve
from .core.spec import OpSpec, catalog, get_op
from .lab.tasks import TASKS, Task, get_task
from .lab.train.record import Run, Status
from .lab.settings import TrainConfig
from .lab.train.fine_tune import fine_tuned_at
from .lab.train.trainer import Trainer

__all__ = [
    "__version__",
    "CODES",
    "DEFAULT_BUDGET_BYTES",
    "Network",
    "Node",
    "OpSpec",
    "Requirement",
    "Run",
    "Status",
    "TASKS",
    "Task",
    "TrainConfig",
    "Trainer",
    "StackError",
    "StackModule",
    "catalog",
    "fine_tuned_at",
    "get_op",
    "get_task",
    "parse",
    "pick_device",
    "resolve",
    "train",
    "open_run",
]

# Modules reachable as ``stacklab.<name>`` (loaded on first use: figures needs plotly).
_MODULES = {"analysis": "stacklab.lab.measure", "figures": "stacklab.lab.figures",
            "checkpoint": "stacklab.lab.runs.checkpoint", "tasks": "stacklab.lab.tasks",
            "export": "stacklab.core.export", "notebook": "stacklab.notebook",
            "models": "stacklab.lab.models", "lessons": "stacklab.lab.lessons",
            "glossary": "stacklab.lab.glossary"}


def train(source: str | None = None, *, live: bool = False, **settings) -> Run:
    """Train ``source`` (default: the task's preset) with `TrainConfig` ``settings``; return
    the `Run`. In Jupyter it shows a progress bar, and with ``live=True`` the curves and the
    task's pattern figure updating in place (`stacklab.notebook`); elsewhere it is
    `stacklab.lab.train.trainer.train`.

    Raises `StackError` before training when a setting is invalid or the stack does not fit
    the task; a run that fails later ends with ``status`` ``failed`` or ``diverged``.
    """
    from .notebook import train as train_here

    return train_here(source, live=live, **settings)


def open_run(key: str) -> Run:
    """The stored run of ``key`` (trained by the app, a notebook's Lab or a sweep), with its
    model and record; `StackError` when the run store has none."""
    from .notebook import open_run as open_stored

    return open_stored(key)


def __dir__() -> list[str]:
    return sorted([*globals(), *_MODULES])


def __getattr__(name: str):
    if name in _MODULES:
        return importlib.import_module(_MODULES[name])
    raise AttributeError(f"module 'stacklab' has no attribute {name!r}")
