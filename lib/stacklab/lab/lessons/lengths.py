"""Lesson: train short, test long. Position encodings trained on `shift` at T = 16 and
evaluated at 32: a learned table and the sinusoid fail past T; RoPE, ALiBi and the newer
xPos, Kerple and FIRE carry over.

Past T at 32 over seeds 0-2 (150 steps, one thread, about 4 s each): xPos 0.86, 0.94, 0.96
(bound >= 0.6); Kerple 0.99, 0.99, 0.99 (bound >= 0.8); FIRE 1.00, 1.00, 0.97 (bound >= 0.8;
1-2 s each)."""

from __future__ import annotations

from .model import Expect, Lesson, Step

# shift with causal attention: a position sees only itself and the positions before it, so
# position 0 cannot read the last position and 15/16 = 0.94 is the best accuracy at T = 16.
_HEAD = "layer_norm()\nlinear(128)\nrelu()\nlinear(16)"
LEARNED = f"embedding(16, 64)\npos_embed(64)\nattention(4, causal=true)\n{_HEAD}"
SINUSOIDAL = f"embedding(16, 64)\nsin_pos(64)\nattention(4, causal=true)\n{_HEAD}"
ROPE = f"embedding(16, 64)\nattention(4, causal=true, position=\"rope\")\n{_HEAD}"
ALIBI = f"embedding(16, 64)\nattention(4, causal=true, position=\"alibi\")\n{_HEAD}"
XPOS = f"embedding(16, 64)\nattention(4, causal=true, position=\"xpos\")\n{_HEAD}"
KERPLE = f"embedding(16, 64)\nattention(4, causal=true, position=\"kerple\")\n{_HEAD}"
FIRE = f"embedding(16, 64)\nattention(4, causal=true, position=\"fire\")\n{_HEAD}"
QUICK = {"task": "shift", "seq_len": 16, "steps": 150, "lr": 0.01, "target_accuracy": None,
         "eval_lengths": "32", "seed": 0}
PAST_T = "held-out accuracy on positions 16-31 of sequences of 32"

LESSON = Lesson(
    id="train-short-test-long",
    title="Train short, test long",
    summary=("A model trained on sequences of 16 tokens meets a sequence of 32. Whether it "
             "still works past position 15 depends on how it encodes positions."),
    steps=(
        Step(
            title="A learned table, inside T",
            text=("The task is shift: each position copies the token before it. The stack "
                  "has a learned table of 64 rows and causal attention (a position sees only "
                  "itself and earlier positions), trained on sequences of 16."),
            question="How well will it do on sequences of 16, like those it trained on?",
            answer=("Almost perfectly: about 0.93, close to the best possible 15/16 = 0.94 "
                    "(position 0 would have to read the last position, which causal "
                    "attention cannot see)."),
            settings=QUICK,
            stack=LEARNED,
            figure="training_curves",
            expect=Expect("accuracy", ">=", 0.85),
            try_next="Predict the accuracy on positions 16-31 before the next step.",
        ),
        Step(
            title="The learned table, past T",
            text=("After training, the run was evaluated on sequences of 32 (eval_lengths). "
                  "Positions 16-31 use rows 16-31 of the table, which training never "
                  "reached."),
            question=f"What will the {PAST_T} be?",
            answer=("About 0.06, which is 1/16, chance: rows 16-31 are still random, so "
                    "attention cannot find the neighbour there."),
            settings=QUICK,
            stack=LEARNED,
            figure="length_generalization",
            expect=Expect("past_T", "<=", 0.2, length=32),
            try_next="Open the lesson \"Gradients reach only the first T rows\" to see why.",
        ),
        Step(
            title="Sinusoids, past T",
            text=("sin_pos(64) is a fixed table of sines and cosines, defined at every "
                  "position, 16-31 included."),
            question=f"Will the {PAST_T} be better than the learned table's?",
            answer=("Only a little, about 0.12: the rows past 15 are well defined, but the "
                    "attention was fitted to pairs of positions below 16 and meets pairs it "
                    "never saw."),
            settings=QUICK,
            stack=SINUSOIDAL,
            figure="length_generalization",
            expect=Expect("past_T", "<=", 0.3, length=32),
            try_next="Evaluate at 48 too (eval_lengths 32,48): does it get any better?",
        ),
        Step(
            title="RoPE, past T",
            text=("RoPE (rotary position embedding) has no table: it rotates each query and "
                  "key by an angle that grows with the position, so the attention score of a "
                  "pair depends on how far apart the two positions are."),
            question=f"What will the {PAST_T} be now?",
            answer=("Most of it carries over: about 0.8-0.9. \"One to the left\" is the same "
                    "distance at position 5 and at position 25, so the rule learned on short "
                    "sequences still applies."),
            settings=QUICK,
            stack=ROPE,
            figure="length_generalization",
            expect=Expect("past_T", ">=", 0.6, length=32),
            try_next="Evaluate at 48 (eval_lengths 32,48): does RoPE hold as far?",
        ),
        Step(
            title="ALiBi, past T",
            text=("ALiBi (attention with linear biases) subtracts from each attention score "
                  "a fixed penalty proportional to the distance between the two positions, "
                  "a different slope per head. Nothing about positions is learned."),
            question="Will ALiBi keep its accuracy past T as RoPE does?",
            answer=("Mostly: about 0.73 past T, close to its own accuracy inside T (about "
                    "0.82). Its fixed penalty costs it some accuracy inside T, but it treats "
                    "every position alike, so it changes little past T."),
            settings=QUICK,
            stack=ALIBI,
            figure="length_generalization",
            expect=Expect("past_T", ">=", 0.55, length=32),
            try_next=("Remove causal=true: ALiBi's penalty is the same to the left and to "
                      "the right. Can it still tell which neighbour to copy?"),
        ),
        Step(
            title="xPos, past T",
            text=("xPos (Sun et al. 2022) is RoPE with a decay: each query is scaled up and "
                  "each key down by a factor that grows with the position, a different "
                  "rate per rotation frequency, so a score also shrinks with the distance "
                  "between the two positions."),
            question=f"Will the {PAST_T} be closer to RoPE's or to the learned table's?",
            answer=("To RoPE's: about 0.86-0.96 over seeds 0-2. The rotation still depends "
                    "only on the distance, and the decay is gentle at these lengths (it was "
                    "made for thousands of positions)."),
            settings=QUICK,
            stack=XPOS,
            figure="length_generalization",
            expect=Expect("past_T", ">=", 0.6, length=32),
            try_next="Evaluate at 64 (eval_lengths 32,64): does xPos hold as far as RoPE?",
        ),
        Step(
            title="Kerple, past T",
            text=("Kerple (Chi et al. 2022) is a learned ALiBi: the penalty is "
                  "r1 · log(1 + r2 · distance), with r1 and r2 trained for each head, so "
                  "training decides how fast a head stops looking far away."),
            question=("ALiBi's fixed penalty kept about 0.73 past T. Will a learned penalty "
                      "do better or worse?"),
            answer=("Better: about 0.99 over seeds 0-2, inside T and past it. Training makes "
                    "the penalty steep enough that each head looks only at its neighbour, "
                    "and a penalty by distance is the same at position 5 and at 25."),
            settings=QUICK,
            stack=KERPLE,
            figure="length_generalization",
            expect=Expect("past_T", ">=", 0.8, length=32),
            try_next=("Set r2 aside: position=\"kerple_power\" penalises r1 · distance^r2 "
                      "instead. Does the shape of the penalty matter here?"),
        ),
        Step(
            title="FIRE, past T",
            text=("FIRE (Li et al. 2023) learns the whole penalty: a small network of the "
                  "distance, log-scaled and divided by the query's position, gives each "
                  "head's bias. ALiBi, T5's buckets and Kerple are special cases of it."),
            question=("A learned function of the distance, divided by the position: will it "
                      "still find the neighbour past position 15?"),
            answer=("Yes: about 0.97-1.00 over seeds 0-2. The neighbour is at distance 1 "
                    "everywhere, and the network learns a bias that favours it strongly "
                    "enough that the division by a larger position does not undo it."),
            settings=QUICK,
            stack=FIRE,
            figure="length_generalization",
            expect=Expect("past_T", ">=", 0.8, length=32),
            try_next=("Try position=\"cope\": CoPE counts positions with gates on the "
                      "content. Does counting help on a task where every token counts?"),
        ),
    ),
)
