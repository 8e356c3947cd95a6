"""Lesson: a second paper's result. Abacus embeddings (McLeish et al. 2024) give each digit
its place within its number instead of its place in the sequence; trained on short sums,
a model then adds longer numbers, where a learned position table fails.

Measured over seeds 0-2 (addition, T = 16: 4-digit numbers; 2,500 steps at lr 2e-3, one
thread, about 20 s each), held-out accuracy on the answer digits: the learned table 0.64,
0.72, 0.79 inside T (bound >= 0.5) and 0.105, 0.100, 0.100 on 9-digit numbers (T = 32, bound
<= 0.2; chance is 0.10); Abacus 0.38, 0.50, 0.50 on 9-digit numbers (bound >= 0.3), 0.70,
0.67, 0.78 inside T. At 4,000 steps and lr 1e-3 the learned table reaches 0.98-0.99 inside T
and still 0.10-0.11 on 9 digits; Abacus 0.64-0.75 inside and 0.47-0.52 on 9 digits."""

from __future__ import annotations

from .model import Expect, Lesson, Step

# addition's stack for this lesson: two attentions (the carry needs a second look) and a
# wide MLP (the sum of two digits is a lookup); abacus(...) in place of embedding + table.
_BODY = "attention(4)\nattention(4)\nlayer_norm()\nlinear(256)\nrelu()\nlinear(10)"
LEARNED = f"embedding(14, 64)\npos_embed(64)\n{_BODY}"
ABACUS = f"abacus(14, 64, digits=11)\n{_BODY}"  # digits=11: the answer slots count as digits
RUN = {"task": "addition", "seq_len": 16, "steps": 2500, "lr": 0.002,
       "target_accuracy": None, "eval_lengths": "16,32", "seed": 0}
PAST_T = "held-out accuracy on the answer digits of 9-digit sums (sequences of 32)"

LESSON = Lesson(
    id="paper-abacus",
    title="Another paper: adding longer numbers",
    summary=("McLeish et al. (2024) report that Abacus embeddings, which number each digit "
             "by its place in its number, let a transformer trained on short sums add much "
             "longer ones. Train a learned table and Abacus on 4-digit sums and test both "
             "on 9 digits."),
    steps=(
        Step(
            title="A learned table adds 4-digit numbers",
            text=("The task is addition: 'a + b =' with 4-digit numbers written lowest digit "
                  "first, then 5 answer slots, one per digit of the sum. Each slot must find "
                  "its column's two digits and the carry from the column before. The stack "
                  "has a learned position table, two attentions and an MLP; it trains for "
                  "2,500 steps (about 20 seconds)."),
            question="How many answer digits will it get right on 4-digit sums?",
            answer=("Most of them: about 0.64-0.79 over seeds 0-2 (chance is 0.10), the carries "
                    "being the hard part; with 4,000 steps at a lower rate it reaches 0.98."),
            settings=RUN,
            stack=LEARNED,
            figure="training_curves",
            expect=Expect("accuracy", ">=", 0.5),
            try_next="Predict its accuracy on 9-digit sums before the next step.",
        ),
        Step(
            title="The learned table on 9-digit numbers",
            text=("The same run was evaluated on sequences of 32 (eval_lengths): 9-digit "
                  "numbers, whose answer digits stand at positions 20-29, rows of the table "
                  "that training never reached."),
            question=f"What will the {PAST_T} be?",
            answer=("Chance: about 0.10 over seeds 0-2. The table tied each column to fixed "
                    "rows; a longer number puts its digits on rows that mean nothing yet."),
            settings=RUN,
            stack=LEARNED,
            figure="length_generalization",
            expect=Expect("past_T", "<=", 0.2, length=32),
            try_next="Replace embedding and pos_embed by abacus(14, 64, digits=11), as the "
                     "next step does.",
        ),
        Step(
            title="Abacus on 9-digit numbers",
            text=("abacus(14, 64, digits=11) adds to each token a learned row for its place "
                  "within its number (the first digit 1, the second 2, ...), and nothing for "
                  "its place in the sequence; the answer slots count as a number too. While "
                  "training, every place is shifted by one random offset per batch, so the "
                  "rows for places past 5 are trained as well. Same task, steps and lengths."),
            question=f"Will Abacus's {PAST_T} beat the learned table's 0.10?",
            answer=("Yes: about 0.38-0.50 over seeds 0-2, with about the same accuracy inside T "
                    "(0.67-0.78). Answer digit 7 finds the digits whose place is 7, wherever "
                    "the number stands. The paper goes much further (99% on 100-digit sums "
                    "after training on 20 digits) with a deeper looped model and a GPU-day."),
            settings=RUN,
            stack=ABACUS,
            figure="length_generalization",
            expect=Expect("past_T", ">=", 0.3, length=32),
            try_next=("Evaluate at 64 too (eval_lengths 32,64): 20-digit sums, five times "
                      "the trained length. How much is left?"),
        ),
    ),
)
