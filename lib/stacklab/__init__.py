"""stacklab: a lab for learned position embeddings.

Type a layer stack, see every shape resolved before anything runs, build it into a torch
module and train it:

```python
>>> import stacklab
>>> net = stacklab.resolve("embedding(500, 16)\\npos_embed(32)\\nlinear(4)", ["B", 12],
...                        input_dtype="int64")
>>> net.param_count
8580

```

The package is layered (see ARCHITECTURE.md): `stacklab.core` (language, resolver,
network, build, export), `stacklab.ops` (one file per op), `stacklab.lab` (tasks, trainer,
analysis, figures, checkpoints) and `stacklab.serve` (links and the worker pool), with the
command line on top. The names below are the public API; ``from stacklab import analysis,
figures`` (and ``checkpoint``, ``export``, ``tasks``, ``models`` for real models'
checkpoints, ``lessons``, ``glossary``) gives the lab's modules.
"""

import importlib
from typing import TYPE_CHECKING

from .core import __version__

# Every name is loaded on first use (PEP 562), so ``import stacklab`` and the command line's
# ``--help`` start without torch; the imports below are what each name is (editors and the
# API reference read them).
if TYPE_CHECKING:
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
    from .notebook import open_run, train

_NAMES = {"StackModule": "core.build", "pick_device": "core.build", "CODES": "core.errors",
          "StackError": "core.errors", "parse": "core.language", "Network": "core.network",
          "Node": "core.nodes", "Requirement": "core.nodes",
          "DEFAULT_BUDGET_BYTES": "core.resolve", "resolve": "core.resolve",
          "OpSpec": "core.spec", "catalog": "core.spec", "get_op": "core.spec",
          "TASKS": "lab.tasks", "Task": "lab.tasks", "get_task": "lab.tasks",
          "Run": "lab.train.record", "Status": "lab.train.record",
          "TrainConfig": "lab.settings", "fine_tuned_at": "lab.train.fine_tune",
          "Trainer": "lab.train.trainer", "train": "notebook", "open_run": "notebook"}

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


def __dir__() -> list[str]:
    return sorted([*globals(), *_NAMES, *_MODULES])


def __getattr__(name: str):
    if name in _NAMES:
        value = getattr(importlib.import_module(f"stacklab.{_NAMES[name]}"), name)
        globals()[name] = value  # asked once
        return value
    if name in _MODULES:
        return importlib.import_module(_MODULES[name])
    raise AttributeError(f"module 'stacklab' has no attribute {name!r}")

