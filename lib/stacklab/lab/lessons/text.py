"""A lesson's words and the run's numbers: a number a run produces appears in a lesson only
as a placeholder (``{accuracy}``, ``{pattern}``, any name of `METRICS`), filled from the
step's run when the answer is shown, and written one way: a share as a decimal (0.17),
never as a percentage beside it.

>>> from .model import Expect
>>> fill("It reaches {accuracy}.", Expect("accuracy", ">=", 0.9), {"final": {"accuracy": 0.974}})
'It reaches 0.97.'
>>> [found.group(0) for found in literal_numbers("It stays near 0.19, 16.7% of the time.")]
['near 0.19', '16.7%']
"""

from __future__ import annotations

import re
from typing import Callable

from .model import METRICS, Expect

__all__ = ["PLACEHOLDER", "AFTER_RUN", "fill", "share", "check_placeholders",
           "literal_numbers", "placeholders"]

PLACEHOLDER = re.compile(r"\{([^{}\n]{0,40})\}")
AFTER_RUN = ("answer", "try_next")  # the fields shown once the run has its numbers
# A number where a run's number belongs: a share after words that report a measurement
# ("near 0.19", "about 0.9", "reaches 0.95"), or any percentage (a share is a decimal).
_LITERAL = re.compile(
    r"(?i)\b(?:about|near|around|roughly|approximately|close to|reaches|stays at|of about)"
    r"\s+(?:0?\.\d+|1\.0+|0)(?:\s*[-–]\s*(?:0?\.\d+|1\.0+))?(?![\d/])"
    r"|\d+(?:\.\d+)?\s?%")


def share(value: float | None) -> str:
    """A run's number as the app writes every share: two decimals (``0.17``)."""
    return "not measured" if value is None else f"{value:.2f}"


def placeholders(text: str) -> list[str]:
    """The names of the placeholders in ``text``, in order."""
    return [found.group(1) for found in PLACEHOLDER.finditer(text)]


def fill(text: str, expect: Expect, record: dict | None) -> str:
    """``text`` with each ``{name}`` replaced by that number of the run (``record``, its
    ``metrics.json`` record; a length-read number at the claim's length), written as
    `share` writes it; None (no run yet): ``text`` as it is."""
    if record is None:
        return text

    def number(found: re.Match) -> str:
        name = found.group(1)
        if name not in METRICS:
            return found.group(0)
        at = Expect(name, ">=", 0.0, expect.length if METRICS[name].needs_length else None)
        return share(at.measure(record))
    return PLACEHOLDER.sub(number, text)


def check_placeholders(error: Callable, text: str, line: int, field: str,
                       expect: Expect) -> None:
    """Raise (by ``error(line, message, hint, ...)``) for a placeholder that names no
    number of a run, one shown before the run has it, or a length-read one whose claim
    gives no length."""
    for found in PLACEHOLDER.finditer(text):
        name = found.group(1)
        if name not in METRICS:
            raise error(line, f"{{{name[:40]}}} names no number of a run",
                        "use one of " + ", ".join("{" + key + "}" for key in METRICS),
                        code="E_ARG")
        if field not in AFTER_RUN:
            raise error(line, f"{{{name}}} is in the step's {field.replace('_', ' ')}, shown "
                        "before the run has its numbers", "use placeholders in 'Why:' and "
                        "'Try next:' only", code="E_ARG")
        if METRICS[name].needs_length and expect.length is None:
            raise error(line, f"{{{name}}} is read at a length, and the claim gives none",
                        "claim it at a length, e.g. 'claim: past_T at 32 >= 0.6'", code="E_ARG")


def literal_numbers(text: str) -> list[re.Match]:
    """The places in ``text`` where a literal number stands for a run's number, or a share
    is written as a percentage."""
    return list(_LITERAL.finditer(text))
