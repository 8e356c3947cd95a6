"""Lesson: induction heads. Two attention layers find the earlier copy of the current token
(a previous-token head, then an induction head); one layer cannot; `repeat`, with a fixed
copy length, lets one layer take a shortcut by position that fails at another length."""

from __future__ import annotations

from ..tasks import TASKS
from .model import Expect, Lesson, Step

TWO_LAYERS = {"task": "induction", "seq_len": 16, "steps": 150, "target_accuracy": None,
              "eval_lengths": "8", "seed": 0}
# induction's preset less its first attention: one layer
ONE_LAYER = TASKS["induction"].preset(16).replace("attention(4, causal=true)\n", "", 1)
SHORTCUT = {"task": "repeat", "seq_len": 16, "steps": 150, "lr": 0.01,
            "target_accuracy": None, "eval_lengths": "8", "seed": 0}

LESSON = Lesson(
    id="induction-heads",
    title="Induction heads",
    summary=("To continue a sequence it has seen before, a transformer can find the earlier "
             "occurrence of the current token and copy the token that followed it. That "
             "takes two attention layers working together."),
    steps=(
        Step(
            title="Two layers find the earlier copy",
            text=("The task is induction: a random run of L distinct tokens, then the same "
                  "L tokens again (L varies from 4 to 8), then padding. In the second copy "
                  "the model must predict the next token. The stack has two causal attention "
                  "layers. The induction score of a head is the attention it puts on the "
                  "token just after the earlier occurrence of the current token."),
            question="Will one of the heads learn to look there?",
            answer=("Yes: a head of the second layer puts most of its attention there (an "
                    "induction score of about 0.87; about 0.1 at init), and the accuracy on "
                    "the second copy is close to 1."),
            settings=TWO_LAYERS,
            figure="head_scores",
            expect=Expect("induction", ">=", 0.6),
            try_next="Look at \"Attention by layer and head\": which head is it?",
        ),
        Step(
            title="The previous-token head",
            text=("To find \"the token after the earlier occurrence\", the second layer "
                  "needs each position to know which token came just before it. A "
                  "previous-token head in the first layer copies that in: its score is the "
                  "attention each position puts on the position just before it."),
            question=("Will a first-layer head look at the previous token more than at "
                      "init (about 0.16)?"),
            answer=("Yes: the best first-layer head reaches about 0.3, about twice its "
                    "value at init."),
            settings=TWO_LAYERS,
            figure="heads_attention",
            expect=Expect("previous_token", ">=", 0.22),
            try_next="Train for 1,000 steps: does the previous-token head get sharper?",
        ),
        Step(
            title="One layer is not enough",
            text="The same task and settings with the first attention layer removed.",
            question="What accuracy on the second copy will it reach in the same 150 steps?",
            answer=("Far lower, about 0.27 against about 1 for two layers: with one layer, "
                    "no head can know which token came before each earlier position, so none "
                    "can find the earlier copy. Trained longer it gets to about 0.6 by "
                    "ruling out the tokens already copied, while its best induction score "
                    "stays near 0.3."),
            settings=TWO_LAYERS,
            stack=ONE_LAYER,
            figure="head_scores",
            expect=Expect("accuracy", "<=", 0.6),
            try_next="Set steps to 300: how high does the best induction score get?",
        ),
        Step(
            title="Repeat: a shortcut by position",
            text=("The task repeat is induction with L fixed at T/2 = 8: the answer is "
                  "always 7 places back. The stack has one attention layer."),
            question="Can one layer solve repeat?",
            answer=("Yes, close to 1: a head learns to look 7 places back using the "
                    "position table alone. No previous-token head is needed when the "
                    "distance never changes."),
            settings=SHORTCUT,
            figure="attention_by_position",
            expect=Expect("accuracy", ">=", 0.9),
            try_next="Predict its accuracy on sequences of 8 before the next step.",
        ),
        Step(
            title="The shortcut at another length",
            text=("The run was also evaluated on sequences of 8, where the copy is 4 long "
                  "and the answer is 3 places back."),
            question="What will its accuracy on sequences of 8 be?",
            answer=("Far lower, about 0.3: the head learned to look 7 places back, and "
                    "at this length the answer is 3 places back, a distance it never "
                    "learned. The shortcut fits one length only."),
            settings=SHORTCUT,
            figure="length_generalization",
            expect=Expect("accuracy_at", "<=", 0.6, length=8),
            try_next="Compare with the next step: the two-layer model on the induction task.",
        ),
        Step(
            title="The induction head at another length",
            text=("The two-layer model of the first step was evaluated on sequences of 8 "
                  "too."),
            question="Will it keep its accuracy?",
            answer=("Yes, close to 1: its heads find the earlier copy by content, not by a "
                    "fixed distance, so they work for any copy length."),
            settings=TWO_LAYERS,
            figure="length_generalization",
            expect=Expect("accuracy_at", ">=", 0.9, length=8),
            try_next="Evaluate at 24 too: positions past 15 use untrained rows; what happens?",
        ),
    ),
)
