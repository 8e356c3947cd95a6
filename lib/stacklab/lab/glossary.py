"""The glossary, declared once: every term the lab uses, with a one-line definition and the
places that use it. Pages take a control's help and a caption's links from here
(`terms_used_in`, `terms_in`), and show the whole table as a section of their own.

A place is ``kind:name``: ``figure:KEY`` (`stacklab.lab.figures.FIGURES`), ``setting:NAME``
(the settings table), ``score:NAME`` (a score in ``metrics.json``), ``metric:NAME`` (a
number a lesson step checks, `stacklab.lab.lessons.METRICS`), ``lesson:ID`` or ``op:NAME``
(an op of the stack language); the test suite checks that every place exists.

A word with a capital letter ("T", "RoPE") is found in a text only as written; other words
in any case.

>>> lookup("rows past T").term
'untrained rows'
>>> [term.term for term in terms_in("Only the first T rows get a gradient.")]
['T', 'the first T rows']
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..core.errors import StackError, closest

__all__ = ["Term", "GLOSSARY", "PLACE_KINDS", "lookup", "terms_used_in", "terms_in"]

PLACE_KINDS = ("figure", "setting", "score", "metric", "lesson", "op")


@dataclass(frozen=True)
class Term:
    """One term: the words, a one-line definition, the places that use it (``kind:name``)
    and other words for it that captions and help use."""

    term: str
    definition: str
    used_in: tuple[str, ...]
    aliases: tuple[str, ...] = ()

    @property
    def words(self) -> tuple[str, ...]:
        """The term and its aliases: every way a text may name it."""
        return (self.term, *self.aliases)


_TERMS = (
    Term("position table",
         "A table with one row (a vector) per position; row t is added to the token at "
         "position t, so the model can tell positions apart.",
         ("op:pos_embed", "op:sin_pos", "figure:cosine", "figure:dot", "figure:pca_2d",
          "lesson:positions", "lesson:table-patterns"),
         ("position tables", "positional embedding", "pos_embed")),
    Term("learned table",
         "A position table whose rows are parameters, trained with the rest of the model "
         "(pos_embed); they start random.",
         ("op:pos_embed", "figure:learned_vs_sinusoidal", "lesson:train-short-test-long"),
         ("learned position table", "learned tables")),
    Term("sinusoidal",
         "A fixed position table of sines and cosines of different frequencies (sin_pos): "
         "nothing in it is learned, and it is defined at every position.",
         ("op:sin_pos", "figure:learned_vs_sinusoidal", "lesson:train-short-test-long"),
         ("sinusoid", "sinusoids", "sin_pos")),
    Term("RoPE",
         "Rotary position embedding: each query and key is rotated by an angle that grows "
         "with its position, so a score depends on how far apart two positions are.",
         ("op:attention", "figure:offset_scores", "lesson:train-short-test-long"),
         ("rotary",)),
    Term("ALiBi",
         "Attention with linear biases: each attention score loses a fixed penalty "
         "proportional to the distance between the two positions, one slope per head.",
         ("op:attention", "figure:offset_scores", "lesson:train-short-test-long")),
    Term("NoPE",
         "No position encoding at all; with causal attention, only the mask tells earlier "
         "positions from later ones.",
         ("op:attention", "figure:attention_without_table", "lesson:positions"),
         ("no position encoding",)),
    Term("T",
         "The length of the training sequences (the setting seq_len); positions run from "
         "0 to T-1.",
         ("setting:seq_len", "figure:gradient", "figure:length_generalization"),
         ("seq_len",)),
    Term("the first T rows",
         "The rows 0 to T-1 of a position table: the only rows training sequences use, so "
         "the only rows that learn.",
         ("figure:gradient", "figure:drift", "lesson:untrained-rows"),
         ("trained rows", "first T rows")),
    Term("untrained rows",
         "The rows of a position table from T on: no training sequence reaches them, so "
         "their gradient is exactly zero and they keep their random start.",
         ("figure:gradient", "figure:drift", "figure:length_probe", "lesson:untrained-rows",
          "metric:untrained_grad", "metric:untrained_drift"),
         ("untrained row", "rows past T", "spare rows")),
    Term("node",
         "An op of the stack by the name the stack gives it: n1 is the first op, n2 the "
         "second, and so on; \"n2's rows\" are the rows of the table op n2 holds.",
         ("figure:cosine", "figure:gradient", "figure:attention_by_position")),
    Term("row gradient norm",
         "For each row of a position table, the size of its gradient summed over every "
         "training step (Σ over steps of ‖grad of row‖); zero for a row training never used.",
         ("figure:gradient", "score:row_grad_norm", "metric:untrained_grad",
          "lesson:untrained-rows"),
         ("gradient norm", "Σ over steps of ‖grad of row‖", "summed gradient")),
    Term("drift",
         "How far a row of a position table moved from its random start during training.",
         ("figure:drift", "score:row_drift", "metric:untrained_drift",
          "lesson:untrained-rows"),
         ("row drift", "drift from initialisation")),
    Term("weight decay",
         "A pull of every parameter towards zero at every step, with or without a gradient: "
         "it moves the untrained rows too.",
         ("setting:weight_decay", "figure:drift", "lesson:untrained-rows")),
    Term("cosine similarity",
         "How alike two rows point: 1 for the same direction, 0 for unrelated ones, -1 for "
         "opposite ones, whatever their lengths.",
         ("figure:cosine", "figure:cosine_by_distance", "figure:similarity_during_training"),
         ("cosine",)),
    Term("centred cosine",
         "The cosine similarity of the rows after subtracting their mean row, so only what "
         "sets rows apart is compared.",
         ("figure:learned_vs_sinusoidal",),
         ("centred cosines",)),
    Term("translation invariance",
         "How much of the rows' dot products depends only on the distance between the two "
         "positions (1: all of it, as for sinusoids).",
         ("figure:dot", "figure:cosine", "score:translation_invariance")),
    Term("monotonicity",
         "How steadily rows become less alike as their positions get further apart (1: "
         "always; 0: no order).",
         ("figure:cosine_by_distance", "score:monotonicity")),
    Term("attention by position alone",
         "Where each position would look if it knew only its position: the table's rows sent "
         "through the attention without the tokens.",
         ("figure:attention_by_position", "figure:attention_during_training",
          "figure:attention_without_table", "lesson:table-patterns")),
    Term("partner attention",
         "In attention by position alone, the mean weight each position puts on the position "
         "the task needs it to read (its partner): about 1/T at init, 1 when it looks only "
         "there.",
         ("figure:attention_by_position", "score:partner_attention", "lesson:table-patterns"),
         ("partner",)),
    Term("pattern score",
         "One number saying how clearly a run shows its task's pattern (partner attention, "
         "period contrast, distance rank, rows decoded or induction score, by task).",
         ("figure:cosine", "figure:attention_by_position", "figure:rows_alone",
          "score:pattern", "lesson:table-patterns")),
    Term("period contrast",
         "The mean cosine of row pairs a whole number of periods apart minus that of all "
         "other pairs: the stripes of modular, as a number.",
         ("figure:cosine", "score:period_contrast", "lesson:table-patterns")),
    Term("distance rank",
         "How well nearer rows are more alike: the rank correlation between each pair's "
         "cosine and how close the two positions are.",
         ("figure:cosine", "score:distance_rank")),
    Term("held-out accuracy",
         "The share of scored positions predicted right on a fixed set of sequences never "
         "used in training.",
         ("figure:training_curves", "setting:target_accuracy", "metric:accuracy",
          "lesson:positions"),
         ("held out", "held-out")),
    Term("cross-entropy",
         "The loss training lowers: how unsure the model was of the right answer (0 when it "
         "was sure and right); the training curves draw it on a log scale, where each step "
         "down the axis is ten times smaller.",
         ("figure:training_curves",),
         ("cross-entropy (log scale)", "loss")),
    Term("length generalization",
         "How well a model trained on sequences of length T does on longer ones "
         "(eval_lengths), especially on the positions past T.",
         ("setting:eval_lengths", "figure:length_generalization", "figure:length_probe",
          "metric:past_T", "lesson:train-short-test-long"),
         ("past T", "train short, test long")),
    Term("causal attention",
         "Attention in which a position sees only itself and earlier positions "
         "(causal=true), as in a model that predicts the next token.",
         ("op:attention", "lesson:train-short-test-long", "lesson:induction-heads"),
         ("causal",)),
    Term("head",
         "One of the parallel attentions inside an attention op, each with its own queries "
         "and keys, so each can look somewhere else.",
         ("op:attention", "figure:heads_attention", "figure:head_scores"),
         ("heads", "attention head")),
    Term("previous-token head",
         "An attention head that looks at the position just before each position; its "
         "previous-token score is the mean weight it puts there.",
         ("figure:heads_attention", "figure:head_scores", "score:previous_token",
          "lesson:induction-heads"),
         ("previous-token score",)),
    Term("induction head",
         "An attention head that finds the earlier occurrence of the current token and looks "
         "at the token after it; its induction score is the mean weight it puts there.",
         ("figure:heads_attention", "figure:head_scores", "score:induction",
          "lesson:induction-heads"),
         ("induction score",)),
)

GLOSSARY: dict[str, Term] = {term.term: term for term in _TERMS}
assert len(GLOSSARY) == len(_TERMS), "two glossary entries share a term"
_BY_WORD = {word.lower(): term for term in _TERMS for word in term.words}
assert len(_BY_WORD) == sum(len(term.words) for term in _TERMS), "a word names two terms"


def lookup(word: str) -> Term:
    """The term named ``word`` (or one of its aliases, any case); ``E_ARG`` with the
    closest term otherwise."""
    term = _BY_WORD.get(word.strip().lower())
    if term is None:
        near = closest(word, list(_BY_WORD))
        raise StackError("E_ARG", f"the glossary has no term {word[:40]!r}",
                         hint=f"did you mean {near!r}?" if near else "see GLOSSARY")
    return term


def terms_used_in(place: str) -> list[Term]:
    """The terms a place uses (``"figure:drift"``, ``"setting:weight_decay"``), in glossary
    order: what a control's help or a figure's caption links to."""
    return [term for term in _TERMS if place in term.used_in]


def terms_in(text: str) -> list[Term]:
    """The terms ``text`` names (by the term or an alias, any case, as whole words), in
    glossary order: what a caption written elsewhere can link."""
    return [term for term in _TERMS if any(_named(word, text) for word in term.words)]


def _named(word: str, text: str) -> bool:
    """Whether ``text`` names ``word`` as a whole word (any case unless it has a capital)."""
    if word.islower() or not any(c.isalpha() for c in word):
        word, text = word.lower(), text.lower()
    return re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", text) is not None
