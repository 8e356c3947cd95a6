"""Lesson: gradients reach only the first T rows. A table of 32 rows trained on sequences of
16 positions: rows 16-31 never get a gradient and never move, unless weight decay pulls
them."""

from __future__ import annotations

from .model import Expect, Lesson, Step

# reverse's preset at T = 16 has pos_embed(32): twice the rows the sequences use.
QUICK = {"task": "reverse", "seq_len": 16, "steps": 250, "lr": 0.01, "target_accuracy": None,
         "seed": 0}

LESSON = Lesson(
    id="untrained-rows",
    title="Gradients reach only the first T rows",
    summary=("A position table may have more rows than the training sequences are long. "
             "Only the rows of positions that occur in training are ever used, so only they "
             "learn; the others keep their random start."),
    steps=(
        Step(
            title="Which rows get a gradient?",
            text=("This stack's table, pos_embed(32), has 32 rows, but the sequences are "
                  "T = 16 long, so only rows 0-15 are ever added to a token. The gradient "
                  "figure sums, for each row, the size of its gradient over every step."),
            question="How much gradient will rows 16-31 receive in total?",
            answer=("Exactly zero. A row that no training sequence uses does not affect the "
                    "loss, so its gradient is zero at every step. Rows 0-15 all receive "
                    "some."),
            settings=QUICK,
            figure="gradient",
            expect=Expect("untrained_grad", "<=", 0.0),
            try_next=("Set seq_len to 24: which rows are untrained now? (The preset's table "
                      "grows with T; edit the stack to keep pos_embed(32).)"),
        ),
        Step(
            title="Do the untrained rows move?",
            text=("The drift figure shows how far each row moved from its random start "
                  "during training."),
            question="Will rows 16-31 end where they started?",
            answer=("Yes, exactly: with no gradient and no weight decay, the optimizer never "
                    "changes them. They stay random, which is why a learned table knows "
                    "nothing about positions past T."),
            settings=QUICK,
            figure="drift",
            expect=Expect("untrained_drift", "<=", 0.0),
            try_next=("Open the lesson \"Train short, test long\" to see what random rows "
                      "do to a longer sequence."),
        ),
        Step(
            title="Weight decay moves them anyway",
            text=("Weight decay (0.1 here) shrinks every parameter a little at every step, "
                  "whether or not it has a gradient."),
            question="Will rows 16-31 move now, although they still get no gradient?",
            answer=("Yes: weight decay pulls them towards zero, so they drift although their "
                    "gradient is still exactly zero (about 0.02 on average after 250 steps, "
                    "against 0 without weight decay)."),
            settings={**QUICK, "weight_decay": 0.1},
            figure="drift",
            expect=Expect("untrained_drift", ">=", 0.01),
            try_next="Set weight_decay to 1.0: how far do they drift, and what happens to "
                     "the accuracy?",
        ),
    ),
)
