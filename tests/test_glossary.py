"""The glossary: every term declared once with a one-line definition, every place it names
exists, the terms a newcomer meets are all there, and pages can find a term by a control,
a figure or a caption's words."""

from __future__ import annotations

import pytest

from stacklab import StackError
from stacklab.core.spec import catalog
from stacklab.lab.figures import FIGURES
from stacklab.lab.glossary import GLOSSARY, PLACE_KINDS, lookup, terms_in, terms_used_in
from stacklab.lab.lessons import LESSONS, METRICS
from stacklab.lab.measure.head_scores import HEAD_SCORES
from stacklab.lab.measure.run_scores import TABLE_SCORES
from stacklab.lab.settings import SETTINGS
from stacklab.lab.tasks import TASKS

# Every name a place of each kind may have.
PLACES = {
    "figure": {spec.key for spec in FIGURES},
    "setting": set(SETTINGS),
    # a score in metrics.json: the table's, the attention's symmetry, the pattern and its
    # kinds, the head scores, the per-row records
    "score": {*TABLE_SCORES, "symmetry", "pattern", *(t.pattern_score for t in TASKS.values()),
              *HEAD_SCORES, "row_grad_norm", "row_drift"},
    "metric": set(METRICS),
    "lesson": set(LESSONS),
    "op": set(catalog()),
}

# The terms the app and the figures use without saying what they mean.
NEWCOMER_TERMS = (
    "position table", "the first T rows", "untrained rows", "partner attention",
    "translation invariance", "monotonicity", "centred cosine", "row gradient norm",
    "pattern score", "held-out accuracy", "induction head", "previous-token head", "RoPE",
    "ALiBi", "sinusoidal", "learned table", "length generalization")


def test_the_places_cover_every_kind():
    assert set(PLACES) == set(PLACE_KINDS)


@pytest.mark.parametrize("term", list(GLOSSARY))
def test_each_term_has_one_line_and_places_that_exist(term):
    entry = GLOSSARY[term]
    assert entry.definition.endswith(".") and "\n" not in entry.definition
    assert 20 <= len(entry.definition) <= 200, "one line, for a tooltip"
    assert "SPEC" not in entry.definition and "§" not in entry.definition
    assert entry.used_in, f"{term} is used nowhere"
    for place in entry.used_in:
        kind, _, name = place.partition(":")
        assert kind in PLACES, f"{term}: {place} is not kind:name of {PLACE_KINDS}"
        assert name in PLACES[kind], f"{term}: there is no {kind} {name!r}"


def test_the_terms_a_newcomer_meets_are_all_defined():
    assert set(NEWCOMER_TERMS) <= set(GLOSSARY)
    assert "Σ over steps of ‖grad of row‖" in lookup("row gradient norm").words


def test_lookup_finds_a_term_by_any_of_its_words_and_names_the_closest_otherwise():
    assert lookup("Rows past T") is GLOSSARY["untrained rows"]
    assert lookup("rotary") is GLOSSARY["RoPE"]
    with pytest.raises(StackError, match="no term 'partner atention'") as caught:
        lookup("partner atention")
    assert caught.value.code == "E_ARG" and "partner attention" in caught.value.hint


def test_a_control_and_a_figure_find_their_terms():
    assert [t.term for t in terms_used_in("setting:weight_decay")] == ["weight decay"]
    drift = {t.term for t in terms_used_in("figure:drift")}
    assert {"untrained rows", "drift", "weight decay"} <= drift
    assert terms_used_in("figure:no_such_figure") == []


def test_a_caption_links_the_terms_it_names_and_no_others():
    caption = ("The gradient norm each row received, summed over all steps: only the first 16 "
               "rows are used, so the untrained rows receive exactly zero. RoPE and ALiBi "
               "need no table.")
    assert [t.term for t in terms_in(caption)] == [
        "RoPE", "ALiBi", "untrained rows", "row gradient norm"]
    # a capitalised word only as written; a word inside another word never
    assert terms_in('attention(4, position="rope") at step 3, t = 2, sinusoidality') == []
    assert [t.term for t in terms_in("Translation invariance: 0.78")] == [
        "translation invariance"]
