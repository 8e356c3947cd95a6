"""Lesson: what the position table learns. Each task leaves its own pattern in the table:
`reverse` an anti-diagonal, `shift` a line below the diagonal, `modular` stripes."""

from __future__ import annotations

from .model import Expect, Lesson, Step


def _quick(task: str) -> dict:
    """The task's preset, trained in a few seconds: a larger learning rate, 250 steps (issue 30's smaller presets need 200-250 steps for their patterns)."""
    return {"task": task, "steps": 250, "lr": 0.01, "target_accuracy": None, "seed": 0}


LESSON = Lesson(
    id="table-patterns",
    title="What the position table learns",
    summary=("A position table starts as random rows. Training shapes it to what the task "
             "needs, and each task leaves a pattern you can see and measure."),
    steps=(
        Step(
            title="Reverse: an anti-diagonal",
            text=("In reverse, position t must read position T-1-t. \"Attention by position "
                  "alone\" sends only the table's rows through the attention and shows, for "
                  "each position (a row of the map), where it looks."),
            question=("Where will each position look: at itself, at its neighbours, or "
                      "somewhere else?"),
            answer=("At its partner T-1-t: the map shows a bright anti-diagonal, from top "
                    "right to bottom left. The partner attention score, the mean weight on "
                    "the partner, rises from 1/16 = 0.06 at init to about 0.9."),
            settings=_quick("reverse"),
            figure="attention_by_position",
            expect=Expect("pattern", ">=", 0.6),
            try_next=("Set seq_len to 8 (the preset follows): is the anti-diagonal still "
                      "there?"),
        ),
        Step(
            title="Shift: a line below the diagonal",
            text="In shift, each position copies the token just before it: y[t] = x[t-1].",
            question="What shape will the attention by position alone take now?",
            answer=("A bright line just below the diagonal: each position looks one place to "
                    "its left (and position 0 wraps around to the last). The partner "
                    "attention score rises from 0.06 to about 0.9."),
            settings=_quick("shift"),
            figure="attention_by_position",
            expect=Expect("pattern", ">=", 0.6),
            try_next="Try the task lookback, which reads two places back.",
        ),
        Step(
            title="Modular: stripes",
            text=("In modular, y[t] = (x[t] + t) mod 8: each position adds its own index to "
                  "its token. No attention is needed, but rows 8 apart must do the same job. "
                  "The cosine map shows how alike each pair of rows is."),
            question="Which rows will end up alike?",
            answer=("Rows whose positions differ by a multiple of 8: the cosine map shows "
                    "stripes parallel to the diagonal, every 8 rows. The period contrast (the "
                    "mean cosine of those pairs minus that of all other pairs) rises from "
                    "about 0 to above 1."),
            settings=_quick("modular"),
            figure="cosine",
            expect=Expect("pattern", ">=", 0.5),
            try_next="Try the task sort: which rows end up alike there?",
        ),
    ),
)
