"""Toy sequence tasks, each a seeded generator of (ids, targets) batches.

Every task maps a sequence of token ids ``x`` of shape ``[B, T]`` to one class per
position, ``y`` of shape ``[B, T]``; a stack for it takes ``["B", T]`` int64 ids and must
output ``[B, T, n_classes]`` scores. Some tasks can be solved at each position on its own
(``modular``, ``position``): the position table must say *where* a token is. Others need
positions to look at each other (``reverse``, ``shift``, ``sort``): attention must find
the right partner, and the position table is how it tells positions apart. ``induction``
and ``repeat`` label only the positions whose next token can be known; the
others carry `IGNORE`, which the loss and the accuracy leave out.

>>> task = TASKS["reverse"]
>>> x, y = task.batch(2, 5, torch.Generator().manual_seed(0))
>>> bool((y == x.flip(1)).all())
True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from ..core.errors import StackError, closest, shown
from . import length_tasks as lengths

__all__ = ['Task', 'TASKS', 'get_task', 'IGNORE', 'EVAL_SEED', 'EVAL_SIZE', 'preset_max_len', 'copy_lengths']

IGNORE = -100  # the label of a position left out of the loss and the accuracy (torch's default)
EVAL_SEED = 1234  # the held-out set is drawn from its own generator, never from training's
EVAL_SIZE = 1024


@dataclass(frozen=True)
class Task:
    """A toy task: its rule, sizes, what the position table should learn, and a preset stack."""

    name: str
    vocab: int  # input token ids are 0 .. vocab-1
    description: str  # the rule, in one or two sentences
    pattern: str  # what the position table is expected to learn, for a student
    rule: Callable[[torch.Tensor], torch.Tensor]  # x (B, T) -> y (B, T)
    preset_template: str  # formatted with T, max_len, classes, vocab
    default_seq_len: int
    classes_for: Callable[[int, int], int]  # (vocab, seq_len) -> number of output classes
    steps: int  # default training steps for the preset
    lr: float = 3e-3
    batch_size: int = 64
    mixing: bool = False  # does a position need to see other positions?
    # The preset's target_accuracy: every preset reaches 100% held out well before `steps`
    # (seeds 0-2), so a preset run stops there and `steps` is only its ceiling.
    target_accuracy: float | None = 1.0
    # The key of the run figure (`stacklab.lab.figures.FIGURES`) where the pattern shows:
    # the Train page draws it as it forms.
    pattern_figure: str = "cosine"
    # The task's own pattern score : partner_attention,
    # period_contrast, distance_rank or rows_decoded.
    pattern_score: str = "distance_rank"
    # For partner_attention: the position each position t must find, for length T (None:
    # a position with no partner, left out of the score).
    partner: Callable[[int], list[int | None]] | None = None
    # Why a label at position t means something else in a longer sequence (the length
    # probe then does not apply); None when the labels do not depend on the length.
    length_note: str | None = None
    # The inputs, when they are not uniform random tokens: (batch, T, generator) -> x (B, T).
    inputs: Callable[[int, int, torch.Generator], torch.Tensor] | None = None
    # For a task whose sequences repeat: each sequence's copy length L, from its
    # ids x (B, T) -> (B,); the second copy is at positions L..2L-1.
    copy_lengths: Callable[[torch.Tensor], torch.Tensor] | None = None

    def n_classes(self, seq_len: int) -> int:
        return self.classes_for(self.vocab, seq_len)

    def defaults(self) -> dict[str, object]:
        """The training settings of the task's preset (what a `TrainConfig` left at None gets)."""
        return {"seq_len": self.default_seq_len, "steps": self.steps,
                "batch_size": self.batch_size, "lr": self.lr}

    def preset(self, seq_len: int | None = None) -> str:
        """The recommended stack for sequences of ``seq_len`` (default: the task's own)."""
        T = seq_len or self.default_seq_len
        return self.preset_template.format(T=T, max_len=preset_max_len(T),
                                           classes=self.n_classes(T), vocab=self.vocab)

    def output_text(self, seq_len: int | None = None) -> str:
        """``[B, 16] int64 ids -> [B, 16, 16] class scores``."""
        T = seq_len or self.default_seq_len
        return f"[B, {T}] int64 ids -> [B, {T}, {self.n_classes(T)}] class scores"

    def batch(self, batch_size: int, seq_len: int, generator: torch.Generator,
              device: torch.device | str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """A batch ``(x, y)`` of shape ``[batch_size, seq_len]`` each, drawn from ``generator``."""
        if self.inputs is None:
            x = torch.randint(0, self.vocab, (batch_size, seq_len), generator=generator)  # (B, T)
        else:
            x = self.inputs(batch_size, seq_len, generator)  # (B, T)
        y = self.rule(x)  # (B, T), IGNORE where the label cannot be known
        if device is not None:
            x, y = x.to(device), y.to(device)
        return x, y

    def eval_set(self, seq_len: int, size: int = EVAL_SIZE,
                 device: torch.device | str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """The fixed held-out set for ``seq_len``: the same every time, apart from training data."""
        generator = torch.Generator().manual_seed(EVAL_SEED + seq_len)
        return self.batch(size, seq_len, generator, device)

    def to_dict(self, seq_len: int | None = None) -> dict:
        T = seq_len or self.default_seq_len
        return {"name": self.name, "vocab": self.vocab, "description": self.description,
                "output": self.output_text(T), "preset": self.preset(T)}


def preset_max_len(seq_len: int) -> int:
    """Presets give the table spare rows (twice the length) so the untrained rows show."""
    return max(2 * seq_len, 8)


def _reverse(x: torch.Tensor) -> torch.Tensor:
    return x.flip(1)


def _shift(x: torch.Tensor) -> torch.Tensor:
    return x.roll(1, dims=1)  # y[t] = x[t-1], and y[0] = x[T-1]


def _sort(x: torch.Tensor) -> torch.Tensor:
    return x.sort(dim=1).values


LOOKBACK = 2  # how far back `lookback` reads


def _lookback(vocab: int) -> Callable[[torch.Tensor], torch.Tensor]:
    def rule(x: torch.Tensor) -> torch.Tensor:
        y = torch.full_like(x, vocab)  # class `vocab`: "nothing there yet"
        y[:, LOOKBACK:] = x[:, :-LOOKBACK]  # y[t] = x[t-2]
        return y
    return rule


def _modular(vocab: int) -> Callable[[torch.Tensor], torch.Tensor]:
    def rule(x: torch.Tensor) -> torch.Tensor:
        t = torch.arange(x.shape[1], device=x.device)
        return (x + t) % vocab  # y[t] = (x[t] + t) mod vocab
    return rule


def _position(x: torch.Tensor) -> torch.Tensor:
    return torch.arange(x.shape[1], device=x.device).expand_as(x).clone()  # y[t] = t


PAD = 15  # the padding token of `induction` and `repeat`: their vocab's last id
COPY_MIN = 4  # the shortest copy `induction` draws


def _copies(fixed: bool) -> Callable[[int, int, torch.Generator], torch.Tensor]:
    """Inputs of `induction` (``fixed=False``: L drawn per sequence from 4..T/2) or `repeat`
    (L = T/2): L tokens, the same L again, padding after. The L tokens are distinct while
    the vocabulary allows (a longer prefix cycles through one shuffle), so each token has
    one successor and the next token of the second copy is always known."""
    def inputs(batch: int, T: int, generator: torch.Generator) -> torch.Tensor:
        longest = max(T // 2, 1)
        if fixed:
            lengths = torch.full((batch, 1), longest)
        else:
            lengths = torch.randint(min(COPY_MIN, longest), longest + 1, (batch, 1),
                                    generator=generator)  # (B, 1)
        shuffled = torch.rand(batch, PAD, generator=generator).argsort(1)  # (B, PAD) distinct
        t = torch.arange(T)[None]  # (1, T)
        tokens = shuffled.gather(1, (t % lengths) % PAD)  # (B, T): the prefix, then again
        return torch.where(t < 2 * lengths, tokens, torch.full_like(tokens, PAD))
    return inputs


def copy_lengths(x: torch.Tensor) -> torch.Tensor:
    """The copy length L of each sequence of `induction` or `repeat` (B, T) -> (B,)."""
    return (x != PAD).sum(1) // 2


def _next_in_copy(x: torch.Tensor) -> torch.Tensor:
    """y[t] = x[t+1] at the positions t = L..2L-2 of the second copy (their next token is
    the prefix's); IGNORE elsewhere: the prefix is random, and after the copy comes padding."""
    L = copy_lengths(x)[:, None]  # (B, 1)
    t = torch.arange(x.shape[1], device=x.device)[None]  # (1, T)
    following = torch.cat([x[:, 1:], x[:, :1]], dim=1)  # (B, T): x[t+1]
    known = (t >= L) & (t <= 2 * L - 2)
    return torch.where(known, following, torch.full_like(x, IGNORE))


def _copy_partner(T: int) -> list[int | None]:
    """`repeat`'s partner: position t of the second copy finds t-L+1 (L = T/2), the token
    after its first occurrence."""
    L = T // 2
    return [t - L + 1 if L <= t <= 2 * L - 1 else None for t in range(T)]


# The presets are the cheapest stacks found by bench/presets.py (issue 30; seeds 0-2) that
# reach the target accuracy and hold the pattern-score floors: bench/presets.md has the
# table, the training FLOPs to target beside the earlier presets' (4-33% of them).
MIXER = ("embedding({vocab}, 16)\npos_embed({max_len})\nattention(2)\nlayer_norm()\n"
         "linear(32)\nrelu()\nlinear({classes})")
CAUSAL_MIXER = MIXER.replace("attention(2)", "attention(2, causal=true)")
MIXER_LR = 1e-2  # the small mixer learns fastest at this rate (the sweep's 3e-3 took longer)
# sort needs the wider mixer: the smaller ones missed 100% within 800 steps
WIDE_MIXER = ("embedding({vocab}, 64)\npos_embed({max_len})\nattention(4)\nlayer_norm()\n"
              "linear(128)\nrelu()\nlinear({classes})")
# Two attention layers on the residual stream and nothing else (each attention adds its
# own residual): room for a previous-token head and an induction head.
# (The sweep found embedding width 32 at lr 1e-2 a third of the FLOPs for induction and
# repeat, but the induction-heads lesson's contrasts, one layer against two, are measured
# on this preset at lr 3e-3: kept until that lesson is re-measured.)
TWO_LAYERS = ("embedding({vocab}, 64)\npos_embed({max_len})\nattention(4, causal=true)\n"
              "attention(4, causal=true)\nlinear({classes})")
# One attention: it can find the token to copy only by its offset, from the positions.
ONE_LAYER = TWO_LAYERS.replace("attention(4, causal=true)\n", "", 1)
# What `induction` and `repeat` share: the labels, the sizes, the head-score figure. Their
# presets reach 99% on the labelled positions (seeds 0-2): induction by step 150, repeat by
# step 325.
# Two attention layers (no mask) and a wide MLP: addition's carries need a second look, and
# the sum of two digits is a lookup. The smaller mixers stayed near 0.40 within 1,500 steps
# (seeds 0-2); this one reaches 0.80-0.97 in 4,000 steps at lr 1e-3 (about 30 s, one thread).
ADDER = ("embedding({vocab}, 64)\npos_embed({max_len})\nattention(4)\nattention(4)\n"
         "layer_norm()\nlinear(256)\nrelu()\nlinear({classes})")
COPIES = dict(vocab=PAD + 1, rule=_next_in_copy, default_seq_len=16,
              classes_for=lambda vocab, T: vocab - 1, mixing=True,
              target_accuracy=0.99, pattern_figure="head_scores", copy_lengths=copy_lengths)
# What the three partner tasks (reverse, shift, lookback) share: the small mixer at its rate,
# 16 tokens at length 16, and a partner each position must find by position alone.
PARTNER_MIXER = dict(vocab=16, preset_template=MIXER, default_seq_len=16,
                     classes_for=lambda vocab, T: vocab, steps=400, lr=MIXER_LR, mixing=True,
                     pattern_figure="attention_by_position", pattern_score="partner_attention")


# What the three length tasks (addition, copy, selective_copy) share: 16 positions to train
# on, a position that reads others, and no target to stop at (their longer evaluations are
# the point).
LENGTH_TASK = dict(default_seq_len=16, mixing=True, target_accuracy=None)


def _partner_task(**fields) -> Task:
    """A partner task: `PARTNER_MIXER` with ``fields`` over it."""
    return Task(**{**PARTNER_MIXER, **fields})


def _length_task(**fields) -> Task:
    """A length task: `LENGTH_TASK` with ``fields`` over it."""
    return Task(**{**LENGTH_TASK, **fields})


TASKS: dict[str, Task] = {task.name: task for task in (
    _partner_task(
        name="reverse",
        description="Output the sequence backwards: y[t] = x[T-1-t].",
        pattern=("Position t must find position T-1-t, so the table learns which positions "
                 "pair up: attention by position alone shows a bright anti-diagonal."),
        rule=_reverse,
        partner=lambda T: [T - 1 - t for t in range(T)],
        length_note=("position t's partner is T-1-t, so in a longer sequence every position "
                     "must find another partner"),
    ),
    _partner_task(
        name="shift",
        description="Copy the previous token: y[t] = x[t-1] (and y[0] = x[T-1], wrapping around).",
        pattern=("Each position must find its left neighbour: attention by position alone "
                 "shows a bright line just below the diagonal (and position 0 looks at the "
                 "last position; with causal attention it cannot, so 15/16 is the best "
                 "accuracy at T = 16)."),
        rule=_shift,
        partner=lambda T: [(t - 1) % T for t in range(T)],  # position 0 reads position T-1
    ),
    _partner_task(
        name="lookback",
        description=(f"Read the token {LOOKBACK} places back: y[t] = x[t-{LOOKBACK}] (a blank "
                     f"class for the first {LOOKBACK} positions). The rule is the same at any "
                     "length, so it asks how far an encoding reaches: train at T = 16, evaluate "
                     "at 32 with eval_lengths."),
        pattern=(f"Each position must find the one {LOOKBACK} to its left, with causal "
                 "attention: attention by position alone shows a bright line two below the "
                 "diagonal. A learned table knows only its trained rows, so past T the line "
                 "(and the accuracy) is gone; distance encodings such as RoPE or ALiBi keep it."),
        rule=_lookback(16),
        preset_template=CAUSAL_MIXER,
        classes_for=lambda vocab, T: vocab + 1,
        partner=lambda T: [t - LOOKBACK if t >= LOOKBACK else None for t in range(T)],
    ),
    Task(
        name="sort",
        vocab=8,
        description="Output the tokens in ascending order: y = sorted(x).",
        pattern=("Attention gathers the counts of every token; the table then tells each "
                 "position which rank it must output, so rows change gradually from first "
                 "to last: similar rows sit near each other along the diagonal."),
        rule=_sort,
        preset_template=WIDE_MIXER,
        default_seq_len=8,
        classes_for=lambda vocab, T: vocab,
        steps=800,
        mixing=True,
        length_note=("position t outputs the t-th smallest token, which in a longer sequence "
                     "is a smaller one"),
    ),
    Task(
        name="modular",
        vocab=8,
        description="Add the position to each token, modulo the vocabulary: y[t] = (x[t] + t) mod 8.",
        pattern=("Only t mod 8 matters, so rows 8 apart learn the same job: the similarity "
                 "heatmap shows stripes parallel to the diagonal, every 8 rows."),
        rule=_modular(8),
        preset_template="embedding({vocab}, 16)\npos_embed({max_len})\nlinear(64)\nrelu()\n"
                        "linear({classes})",
        default_seq_len=32,
        classes_for=lambda vocab, T: vocab,
        steps=300,
        lr=1e-2,
        mixing=False,
        pattern_score="period_contrast",
    ),
    Task(
        name="position",
        vocab=16,
        description="Ignore the token and output its position: y[t] = t.",
        pattern=("Each row alone must tell the head its position: the rows grow and line up "
                 "with the head's class directions, so row t fed alone through the rest of the "
                 "stack gives class t (a bright diagonal in the rows-alone map). The cosine "
                 "heatmap hardly changes: random rows are already nearly orthogonal."),
        rule=_position,
        preset_template="embedding({vocab}, 16)\npos_embed({max_len})\nlinear({classes})",
        default_seq_len=16,
        classes_for=lambda vocab, T: T,
        steps=200,
        lr=1e-2,
        mixing=False,
        pattern_figure="rows_alone",
        pattern_score="rows_decoded",
        length_note="the head has one class per trained position and none past T",
    ),
    Task(
        name="induction",
        description=(f"A random prefix of L distinct tokens, then the same L tokens again, "
                     f"then padding (token {PAD}); L is drawn per sequence from {COPY_MIN} to "
                     "T/2. In the second copy, predict the next token; the other positions "
                     "are not scored."),
        pattern=("No fixed offset works, because L varies: one head in the first layer looks "
                 "at the previous token, and a head in the second layer (an induction head) "
                 "finds the earlier occurrence of the current token and reads the token after "
                 "it, so it looks L-1 places back. The head scores show both."),
        preset_template=TWO_LAYERS,
        steps=300,
        pattern_score="induction",
        inputs=_copies(fixed=False),
        **COPIES,
    ),
    Task(
        name="repeat",
        description=("The induction task with L fixed at T/2: a random prefix of T/2 distinct "
                     "tokens, then the same again; in the second copy, predict the next token."),
        pattern=("With L fixed, one head can find the token to copy by its offset alone "
                 "(T/2 - 1 places back), from the position table: a shortcut that no longer "
                 "fits at another length (eval_lengths), where induction still does."),
        preset_template=ONE_LAYER,
        steps=400,
        pattern_score="partner_attention",
        partner=_copy_partner,
        inputs=_copies(fixed=True),
        **COPIES,
    ),
    _length_task(
        name="addition",
        vocab=14,
        description=("Add two n-digit numbers written lowest digit first, n = (T-3)/3: "
                     "'a + b =' then n+1 answer slots ('?'); each slot's label is that digit "
                     "of the sum, the other positions are not scored. Trained on 4 digits "
                     "(T = 16), evaluated on 9 and 20 (T = 32, 64)."),
        pattern=("Answer digit i adds column i: attention by position alone from the i-th "
                 "answer slot to a's i-th digit (and b's), a line parallel to the diagonal "
                 "2n+2 places back. A learned table ties the column to absolute rows, so "
                 "longer numbers fail; Abacus (an abacus op instead of embedding and "
                 "pos_embed) gives each digit its place in its number instead."),
        preset_template=ADDER,
        rule=lengths.addition_rule,
        inputs=lengths.addition_inputs,
        classes_for=lambda vocab, T: 10,
        steps=4000,
        lr=1e-3,
        pattern_figure="attention_by_position",
        pattern_score="partner_attention",
        partner=lengths.addition_partner,
    ),
    _length_task(
        name="copy",
        vocab=lengths.COPY_SYMBOLS + 1,
        description=("A string of T/2 random symbols, then T/2 blanks: each blank outputs the "
                     "symbol T/2 places back, so the string comes out again (Ruoss et al.'s "
                     "duplication); the string's own positions are not scored."),
        pattern=("Each blank finds the symbol T/2 to its left: attention by position alone "
                 "shows a line T/2 below the diagonal in the lower half. The offset grows "
                 "with the length, so no encoding that only knows offsets seen in training "
                 "copies a longer string."),
        preset_template=MIXER,
        rule=lengths.copy_rule,
        inputs=lengths.copy_inputs,
        classes_for=lambda vocab, T: vocab,
        steps=600,
        pattern_figure="attention_by_position",
        pattern_score="partner_attention",
        partner=lengths.copy_partner,
    ),
    _length_task(
        name="selective_copy",
        vocab=lengths.QUERY + 1,
        description=(f"{lengths.SELECT_COUNT} tokens (1-8) at random places among noise (0), "
                     f"then {lengths.SELECT_COUNT} query slots: query slot i outputs the i-th "
                     "token in order. Which tokens count depends on the content, not on where "
                     "they are: the task of contextual positions (CoPE)."),
        pattern=("No fixed offset finds the tokens, so attention must count them: the i-th "
                 "query looks for the token with i tokens before it. The position table "
                 "only orders positions: nearer rows alike (distance_rank)."),
        preset_template=MIXER,
        rule=lengths.selective_copy_rule,
        inputs=lengths.selective_copy_inputs,
        classes_for=lambda vocab, T: vocab - 1,
        steps=600,
        pattern_score="distance_rank",
    ),
)}


def get_task(name: str) -> Task:
    """The task called ``name``; an unknown name is ``E_ARG`` listing the tasks."""
    task = TASKS.get(name)
    if task is None:
        close = closest(name, TASKS)
        raise StackError("E_ARG", f"there is no task called {shown(name)}" + (
            f"; did you mean {close}?" if close else ""), hint=(f"e.g. task={close!r}; " if
                                                                close else "") + "choose one of " + ", ".join(TASKS))
    return task
