"""An experiment as a link: every setting of the app, to and from URL query parameters.

>>> exp, problems = from_query({"stack": "pos_embed(8)", "seq_len": "12", "steps": "many"})
>>> exp.seq_len, exp.steps, problems
(12, 400, ["steps='many' is not a whole number from 1 to 20,000; using 400"])
>>> to_query(exp)["seq_len"]
'12'

Bad values never raise: each is reported in words and replaced by its default, so a
mangled classroom link still opens.

Every value is read and written by its row of the link table (`link_table.LINK_TABLE`):
the network's (`NETWORK_FIELDS`: stack, input shape, input dtype), then every setting of
`stacklab.lab.settings` that is marked for links, each parsed within its classroom range,
then the controls it pins, and the session's values (run, compare, view) that `read_link`
and `write_link` add. `Experiment` is made from the experiment's rows, with the default
task's preset as its defaults, so a new setting reaches links, the URL parser and the app
by its one declaration.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, make_dataclass, replace
from typing import Mapping, Sequence

from ...lab.settings import SETTINGS, TrainConfig
from ...lab.tasks import TASKS
from ..limits import MAX_LINK_STACK_CHARS
from .link_table import HIDEABLE  # noqa: F401  (the controls a link may pin, named here too)
from .link_table import (EXPERIMENT_VALUES, SESSION_VALUES, LinkValue, parse_values,
                         write_values)

DEFAULT_TASK = "reverse"  # a first visit trains this task's preset
REFERENCE_STEM = "embedding(500, 16)\npos_embed(32)\nlinear(4)"

# The experiment's fields, in the link table's order: the network's, then every link setting.
FIELDS: tuple[LinkValue, ...] = tuple(value for value in EXPERIMENT_VALUES if value.hideable)
NETWORK_FIELDS = FIELDS[:3]  # stack, input, input_dtype
LINK_SETTINGS = tuple(row for row in SETTINGS.values() if row.link)
PARSERS = {value.name: value.parse for value in EXPERIMENT_VALUES}  # hide= and pin= too


def task_preset(task: str, seq_len: int | None = None) -> dict[str, object]:
    """The fields a task's preset sets: its stack for ``seq_len`` and its training settings."""
    spec = TASKS[task]
    T = seq_len or spec.default_seq_len
    return {"stack": spec.preset(T), "input": f"B,{T}", "input_dtype": "int64", "task": spec.name,
            **spec.defaults(), "seq_len": T, "target_accuracy": spec.target_accuracy}


def preset_changes(stack: str, task: str, seq_len: int, input_text: str | None = None, *,
                   new_task: str | None = None, new_seq_len: int | None = None) -> dict:
    """The fields that change when ``task`` becomes ``new_task`` or T becomes ``new_seq_len``,
    under ``stack`` (and the input shape ``input_text``). The app's pages and the notebook's
    Lab both follow this rule.

    When the stack is still the task's preset, switching task or T switches the preset
    too (and a new task brings its settings); a hand-written stack is kept, and so are the
    settings. An input shape of ``B,T`` follows T.

    >>> preset_changes("linear(4)", "reverse", 16, "B,16", new_seq_len=20)
    {'input': 'B,20'}
    >>> sorted(preset_changes(TASKS["reverse"].preset(16), "reverse", 16, new_task="shift"))
    ['batch_size', 'input', 'input_dtype', 'lr', 'seq_len', 'stack', 'steps', 'target_accuracy']
    """
    switching = new_task is not None and new_task != task
    new_task = new_task or task
    new_seq_len = TASKS[new_task].default_seq_len if switching else (new_seq_len or seq_len)
    changes = {}
    if input_text == f"B,{seq_len}" and not switching:
        changes["input"] = f"B,{new_seq_len}"
    if stack == TASKS[task].preset(seq_len):
        preset = task_preset(new_task, new_seq_len)
        network = {f.name for f in NETWORK_FIELDS}
        changes.update({k: v for k, v in preset.items()
                        if k in network or (switching and k in SETTINGS and k != "task")})
    return changes


class _ExperimentRules:
    """The rules of an experiment, shared by links and the app's pages."""

    def with_task_preset(self, task: str | None = None, seq_len: int | None = None):
        """This experiment switched to ``task``'s preset stack and default settings."""
        return replace(self, **task_preset(task or self.task, seq_len))

    def follow_preset(self, task: str | None = None, seq_len: int | None = None) -> dict:
        """The fields that change with a new ``task`` or ``seq_len`` (`preset_changes`)."""
        return preset_changes(self.stack, self.task, self.seq_len, self.input,
                              new_task=task, new_seq_len=seq_len)

    def changes_for(self, name: str, value: object) -> dict:
        """Everything that changes when the control of field ``name`` is set to ``value``."""
        if name in ("task", "seq_len"):
            return {name: value, **self.follow_preset(**{name: value})}
        return {name: value}

    def train_config(self, devices: Sequence[str]) -> TrainConfig:
        """The run this experiment asks for; a device this server lacks becomes ``auto``."""
        values = {row.name: None if getattr(self, row.name) is None
                  else row.type(getattr(self, row.name)) for row in LINK_SETTINGS}
        if values["device"] not in devices:
            values["device"] = "auto"
        return TrainConfig(**values)


_DEFAULTS = {**{name: getattr(TrainConfig(task=DEFAULT_TASK).filled(), name) for name in SETTINGS},
             **task_preset(DEFAULT_TASK)}
Experiment = make_dataclass(
    "Experiment",
    [(f.name, f.type, field(default=_DEFAULTS[f.name])) for f in FIELDS]
    + [("hide", tuple, field(default=()))],  # the controls a classroom link pins
    bases=(_ExperimentRules,), frozen=True)
Experiment.__module__ = __name__
Experiment.__doc__ = ("Everything a link pins: the stack, its input and the training settings "
                      f"(fields: {', '.join(f.name for f in fields(Experiment))}).")
DEFAULT = Experiment()


def presets() -> dict[str, dict[str, object]]:
    """Named starting points for the Build page: the reference page's two examples and
    every task's preset. Each maps experiment fields to their new values."""
    found: dict[str, dict[str, object]] = {
        "Reference: the transformer input stem": {
            "stack": REFERENCE_STEM, "input": "B,12", "input_dtype": "int64"},
        "Reference: pos_embed(64), linear(8) on [B, 6, 4]": {
            "stack": "pos_embed(64)\nlinear(8)", "input": "B,6,4", "input_dtype": "float32"},
    }
    for task in TASKS.values():
        found[f"Task {task.name}: {task.description}"] = task_preset(task.name)
    return found


def from_query(params: Mapping[str, object]) -> tuple[Experiment, list[str]]:
    """The experiment a link describes, and a message for every value that was refused.

    ``params`` maps names to strings (or lists of strings, the last one wins), each read by
    its row of the link table. A link that names a task but no stack gets that task's preset.
    """
    values, refused = parse_values(params, EXPERIMENT_VALUES)
    if "pin" in values:  # pin= is hide='s other name: both pin
        values["hide"] = tuple(dict.fromkeys((*values.get("hide", ()), *values.pop("pin"))))
    experiment = DEFAULT
    if "task" in values and "stack" not in values:
        experiment = experiment.with_task_preset(values["task"], values.get("seq_len"))
    experiment = replace(experiment, **values)
    problems = [problem + (f"; using {getattr(experiment, row.field)!r}" if dropped else "")
                for row, problem, dropped in refused]
    return experiment, problems


def to_query(experiment: Experiment) -> dict[str, str]:
    """The query parameters of a link that reproduces ``experiment``."""
    return write_values({f.name: getattr(experiment, f.name) for f in fields(Experiment)},
                        EXPERIMENT_VALUES)


@dataclass(frozen=True)
class Link:
    """Everything a page's address says: the experiment, the run it opens (``run=KEY``),
    the runs it compares (``compare=``), its view (``view=present``), and a message for
    every value that was refused."""

    experiment: Experiment
    run: str | None = None
    compare: tuple[str, ...] = ()
    view: str | None = None
    problems: tuple[str, ...] = ()
    # whether the link names any of the experiment's values (a class link names only its
    # run: the run then fixes the experiment)
    names_experiment: bool = True


def read_link(params: Mapping[str, object]) -> Link:
    """What a page makes of its address: every value of the link table read by its row.

    >>> link = read_link({"task": "shift", "run": "nope", "view": "present"})
    >>> link.experiment.task, link.run, link.view, link.problems
    ('shift', None, 'present', ("run='nope' is not a run key (32 hex digits); showing the link's settings",))
    """
    experiment, problems = from_query(params)
    values, refused = parse_values(params, SESSION_VALUES)
    problems += [problem + (f"; {row.instead}" if dropped and row.instead else "")
                 for row, problem, dropped in refused]
    named = {row.name for row in EXPERIMENT_VALUES} & set(params)
    if values.get("run") and not named:  # a class link, ?run=KEY alone: everything pinned
        experiment = replace(experiment, hide=HIDEABLE)
    return Link(experiment, values.get("run"), tuple(values.get("compare") or ()),
                values.get("view"), tuple(problems),
                names_experiment=bool(named - {"hide", "pin"}))


def write_link(link: Link) -> dict[str, str]:
    """The page's address for ``link``: its experiment's values and the session's. A stack
    longer than a link holds (`MAX_LINK_STACK_CHARS`) is left out; the page says so."""
    query = to_query(link.experiment)
    if len(query.get("stack", "")) > MAX_LINK_STACK_CHARS:
        del query["stack"]
    return {**query, **write_values({"run": link.run, "compare": link.compare,
                                     "view": link.view}, SESSION_VALUES)}
