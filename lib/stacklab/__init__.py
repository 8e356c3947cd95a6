"""stacklab: a lab for learned position embeddings.

Type a layer stack, see every shape resolved before anything runs, build it into a torch
module and train it:

>>> import stacklab
>>> net = stacklab.resolve("embedding(500, 16)\\npos_embed(32)\\nlinear(4)", ["B", 12],
...                        input_dtype="int64")
>>> net.param_count
8580
"""

from .build import StackModule, pick_device
from .errors import CODES, StackError
from .language import parse
from .network import Network, Node, Requirement
from .resolve import DEFAULT_BUDGET_BYTES, resolve
from .spec import OpSpec, catalog, get_op
from .tasks import TASKS, Task, get_task
from .trainer import Run, TrainConfig, Trainer, train

__all__ = [
    "CODES",
    "DEFAULT_BUDGET_BYTES",
    "Network",
    "Node",
    "OpSpec",
    "Requirement",
    "Run",
    "TASKS",
    "Task",
    "TrainConfig",
    "Trainer",
    "StackError",
    "StackModule",
    "catalog",
    "get_op",
    "get_task",
    "parse",
    "pick_device",
    "resolve",
    "train",
]
__version__ = "0.1.0"
