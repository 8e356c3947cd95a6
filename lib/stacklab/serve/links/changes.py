"""What changed in an experiment, field by field, in words: what a control changed besides
itself (`announcement`: the preset that follows T, an input shape of ``B,T``), what differs
from the run a page shows (`changed_since`), and what the Build page holds (`holding`).

>>> from dataclasses import replace
>>> from stacklab.serve.links.experiment import DEFAULT
>>> after = replace(DEFAULT, **DEFAULT.changes_for("seq_len", 48))
>>> print(announcement(DEFAULT, after, "seq_len"))
seq_len 16 → 48 also changed the stack (it was the preset of task reverse, which follows T): pos_embed(32) → pos_embed(96); and input B,16 → B,48 (an input of B,T follows T).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Sequence

from ...core.errors import StackError
from ...core.language import parse
from ...lab.settings import TrainConfig
from ...lab.tasks import TASKS
from .experiment import LINK_SETTINGS, Experiment, presets

SHOWN_CHANGES = 6  # a message lists this many changes, then how many more


@dataclass(frozen=True)
class Change:
    """One field that changed, as text: ``seq_len 16 → 48``; a stack changes line by line
    (``old`` empty: a line added; ``new`` empty: a line removed)."""

    field: str
    old: str
    new: str

    def __str__(self) -> str:
        if self.field != "stack":
            return f"{self.field} {self.old} → {self.new}"
        if not self.old:
            return f"stack: added {self.new}"
        if not self.new:
            return f"stack: removed {self.old}"
        return f"stack: {self.old} → {self.new}"


def _text(value: object) -> str:
    if value is None or value == "":
        return "none"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _stack_lines(source: str) -> list[str]:
    """The calls of a stack as written (``name = op(args)``), comments and blank lines left
    out; the lines themselves for a stack that does not parse."""
    try:
        return [f"{call.name} = {call.call_source}" if call.name else call.call_source
                for call in parse(source).calls]
    except StackError:
        return [line.strip() for line in source.split("\n") if line.strip()]


def stack_changes(old: str, new: str) -> list[Change]:
    """The lines that differ between two stacks, in order: replaced, added or removed."""
    if old == new:
        return []
    before, after = _stack_lines(old), _stack_lines(new)
    changes = []
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            olds, news = before[i1:i2], after[j1:j2]
            changes += [Change("stack", olds[k] if k < len(olds) else "",
                               news[k] if k < len(news) else "")
                        for k in range(max(len(olds), len(news)))]
    return changes


def differences(old: Experiment, new: Experiment) -> list[Change]:
    """Every field of two experiments that differs: the settings, the input, the stack."""
    changes = [Change(row.name, _text(getattr(old, row.name)), _text(getattr(new, row.name)))
               for row in LINK_SETTINGS if getattr(old, row.name) != getattr(new, row.name)]
    changes += [Change(name, _text(getattr(old, name)), _text(getattr(new, name)))
                for name in ("input", "input_dtype") if getattr(old, name) != getattr(new, name)]
    return changes + stack_changes(old.stack, new.stack)


def listed(changes: Sequence[Change], limit: int = SHOWN_CHANGES) -> str:
    """``seq_len 16 → 48; stack: pos_embed(32) → pos_embed(96)`` (at most ``limit``)."""
    shown = "; ".join(map(str, changes[:limit]))
    return shown + (f"; and {len(changes) - limit} more" if len(changes) > limit else "")


def announcement(before: Experiment, after: Experiment, edited: str) -> str | None:
    """What editing ``edited`` changed besides itself, with each value before and after
    and why (None when nothing else changed): the page that made the edit shows it."""
    changes = differences(before, after)
    caused = [change for change in changes if change.field != edited]
    if not caused:
        return None
    stack = [change for change in caused if change.field == "stack"]
    others = [change for change in caused if change.field != "stack"]
    parts = []
    if stack:
        parts.append(f"the stack (it was the preset of task {before.task}, which follows "
                     f"{'the task' if edited == 'task' else 'T'}): "
                     + listed(stack).replace("stack: ", ""))
    if others:
        why = (" (an input of B,T follows T)" if [c.field for c in others] == ["input"]
               else "")
        parts.append(listed(others) + why)
    edit = next((str(change) for change in changes if change.field == edited), edited)
    return f"{edit} also changed " + "; and ".join(parts) + "."


def preset_announcement(label: str, before: Experiment, after: Experiment) -> str | None:
    """What choosing the preset ``label`` changed besides the stack and its input (the
    preset's own training settings, e.g. its steps), each before and after; None when it
    changed nothing else."""
    others = [change for change in differences(before, after)
              if change.field not in ("stack", "input", "input_dtype")]
    name = label.split(":", 1)[0]  # "Task shift", not its whole description
    return f"The preset {name} also set: {listed(others)}." if others else None


def changed_since(experiment: Experiment, source: str, config: TrainConfig,
                  devices: Sequence[str]) -> list[Change]:
    """What differs between ``experiment`` and the run trained from ``source`` with
    ``config`` (its filled settings): empty when the page shows that very experiment."""
    wanted = experiment.train_config(devices)
    try:
        wanted = wanted.filled()
    except StackError:
        pass  # a value the run would refuse still differs from the run's
    changes = [Change(row.name, _text(getattr(config, row.name)), _text(getattr(wanted, row.name)))
               for row in LINK_SETTINGS if getattr(config, row.name) != getattr(wanted, row.name)]
    return changes + stack_changes(source, experiment.stack)


def stale_note(key: str, changes: Sequence[Change]) -> str:
    """What a page says above a run that no longer matches the experiment."""
    return (f"Changed since run {key[:8]}…: {listed(changes)}. What is shown below is that "
            "earlier run, not the experiment as it is now; press Train to train this one.")


def holding(experiment: Experiment) -> str:
    """What the Build page holds, in words: a task's preset (which task, which T), a named
    preset, or a stack of one's own, and what Train will do with it."""
    task, T = TASKS[experiment.task], experiment.seq_len
    trains = f"Train trains it on task {task.name} at T = {T}"
    if experiment.stack == task.preset(T):
        return (f"This is the preset of task {task.name} for T = {T} ({task.description}); "
                f"{trains}. Changing the task or T on Train switches the preset with them.")
    named = next((label for label, preset in presets().items()
                  if preset.get("stack") == experiment.stack), None)
    if named is not None:
        return f"This is the preset {named}; {trains}."
    return (f"This is a stack of your own (no preset); {trains}, and keeps it when the task "
            "or T change.")
