"""Lesson: why a transformer needs positions. Attention alone sees a bag of tokens; `reverse`
cannot be learned without a position table, and is learned with one (learned or fixed)."""

from __future__ import annotations

from ..tasks import TASKS
from .model import Expect, Lesson, Step

PRESET = TASKS["reverse"].preset(16)  # its learned table: pos_embed(32)
# The preset less its position table: attention alone, nothing tells positions apart.
NO_TABLE = PRESET.replace("pos_embed(32)\n", "")
# The preset with the fixed sinusoidal table of 32 rows in place of the learned one.
SINUSOIDAL = PRESET.replace("pos_embed(32)", "sin_pos(32)")
# Small enough to train in a few seconds: a larger learning rate than the preset's.
QUICK = {"task": "reverse", "steps": 250, "lr": 0.01, "target_accuracy": None, "seed": 0}

LESSON = Lesson(
    id="positions",
    title="Why a transformer needs positions",
    summary=("Attention compares tokens by what they are, not by where they are. Without "
             "something that marks the positions, a transformer cannot even reverse a "
             "sequence; a position table fixes that."),
    steps=(
        Step(
            title="Attention without positions",
            text=("The task is reverse: output the sequence backwards, so position t must "
                  "copy the token at position T-1-t. This stack has an embedding, an "
                  "attention and a small feed-forward head, but no position table."),
            question="Will it learn to reverse sequences of 16 tokens in 250 steps?",
            answer=("No. Without positions, attention sees the sequence as a bag of tokens: "
                    "every position looks at the same bag in the same way, so the model can "
                    "only guess a token that appears often. Its held-out accuracy stays near "
                    "0.19; a blind guess would score 1/16 = 0.06."),
            settings=QUICK,
            stack=NO_TABLE,
            figure="training_curves",
            expect=Expect("accuracy", "<=", 0.3),
            try_next=("Train it for 600 steps. Does the accuracy curve ever leave its "
                      "plateau?"),
        ),
        Step(
            title="Add a position table",
            text=("The same stack with pos_embed(32) after the embedding: a learned table "
                  "with one row per position, added to each token's vector. Position t now "
                  "carries row t."),
            question="What held-out accuracy will it reach in the same 250 steps?",
            answer=("Close to 1. With a row per position, each position can tell where it is, "
                    "and attention can learn to look at position T-1-t."),
            settings=QUICK,
            figure="training_curves",
            expect=Expect("accuracy", ">=", 0.9),
            try_next=("Open the figure \"Attention by position alone\" of this run: where "
                      "does each position look?"),
        ),
        Step(
            title="A fixed table works too",
            text=("sin_pos(32) adds a fixed table of sines and cosines of different "
                  "frequencies: nothing in it is learned, but every position still gets its "
                  "own pattern."),
            question="Can the model reverse sequences with positions it cannot change?",
            answer=("Yes: its accuracy also comes close to 1. The attention's query and key "
                    "projections learn to read the fixed patterns, so position t still finds "
                    "position T-1-t."),
            settings=QUICK,
            stack=SINUSOIDAL,
            figure="attention_without_table",
            expect=Expect("accuracy", ">=", 0.9),
            try_next=("Compare this run's attention by position alone with the learned "
                      "table's: which anti-diagonal is sharper?"),
        ),
    ),
)
