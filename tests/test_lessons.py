"""The lessons: each step's experiment is trained (its seed fixed) and must meet the condition
the step states, so no lesson says what is not true; a step is opened from a link or in
the notebook `Panel`; a mistyped declaration fails when it is made."""

from __future__ import annotations

import pytest

from stacklab import StackError
from stacklab.lab.figures import FIGURES, absent_reasons
from stacklab.lab.lessons import (LESSONS, METRICS, Expect, Lesson, Step, check, get_lesson,
                                  open_step, step_from_link, step_link)
from stacklab.lab.settings import TrainConfig
from stacklab.lab.tasks import get_task
from stacklab.lab.train.plan import fit_network
from stacklab.lab.train.trainer import train

STEPS = [(lesson.id, number) for lesson in LESSONS.values()
         for number in range(1, len(lesson.steps) + 1)]
_RUNS: dict = {}  # (stack, filled config) -> Run: steps that share an experiment train it once


def run_of(lesson_id: str, number: int):
    """The run of a step's experiment, trained on first use."""
    _, step = step_from_link(lesson_id, number)
    key = (step.source, step.config.filled())
    if key not in _RUNS:
        _RUNS[key] = train(step.source, **step.settings)
    return _RUNS[key]


def test_the_lessons_in_order():
    assert list(LESSONS) == ["positions", "table-patterns", "untrained-rows",
                             "train-short-test-long", "induction-heads", "paper-cope",
                             "paper-abacus"]
    assert all(len(lesson.steps) >= 3 for lesson in LESSONS.values())


@pytest.mark.parametrize("lesson_id, number", STEPS)
def test_each_step_meets_its_condition_when_trained(lesson_id, number):
    _, step = step_from_link(lesson_id, number)
    run = run_of(lesson_id, number)
    assert run.status == "finished", run.error
    ok, value, text = check(step, run)
    assert ok, f"{lesson_id} step {number} ({step.title}): {text}"
    assert value is not None and f"{value:.2f}" in text
    # the figure that matters is drawn for this run, not left out
    assert step.figure not in absent_reasons(run), absent_reasons(run)[step.figure]


# A step's bound must fail where its claim would be false: each step's condition, checked
# on the run of the step that shows the opposite.
CONTRASTS = [
    (("positions", 2), ("positions", 1)),  # no table: far from a table's accuracy
    (("positions", 1), ("positions", 2)),  # a table: far above the no-table bound
    (("table-patterns", 1), ("positions", 1)),  # no table: attention spread evenly (1/T)
    (("untrained-rows", 3), ("untrained-rows", 2)),  # no weight decay: no drift
    (("untrained-rows", 2), ("untrained-rows", 3)),  # weight decay: drift
    (("train-short-test-long", 4), ("train-short-test-long", 2)),  # learned: RoPE's bound fails
    (("train-short-test-long", 2), ("train-short-test-long", 4)),  # RoPE: learned's bound fails
    (("train-short-test-long", 3), ("train-short-test-long", 5)),  # ALiBi: sinusoid's fails
    (("train-short-test-long", 6), ("train-short-test-long", 2)),  # learned: xPos's bound fails
    (("train-short-test-long", 2), ("train-short-test-long", 6)),  # xPos: learned's bound fails
    (("train-short-test-long", 7), ("train-short-test-long", 5)),  # ALiBi: Kerple's bound fails
    (("train-short-test-long", 3), ("train-short-test-long", 7)),  # Kerple: sinusoid's fails
    (("induction-heads", 3), ("induction-heads", 1)),  # two layers: one layer's bound fails
    (("induction-heads", 1), ("induction-heads", 3)),  # one layer: no induction head
    (("induction-heads", 6), ("induction-heads", 5)),  # the shortcut: induction's length fails
    (("induction-heads", 5), ("induction-heads", 6)),  # induction: the shortcut's bound fails
    (("paper-cope", 3), ("paper-cope", 2)),  # RoPE on selective_copy: CoPE's bound fails
    (("paper-cope", 2), ("paper-cope", 3)),  # CoPE past T: RoPE's bound fails
    (("paper-cope", 1), ("paper-cope", 3)),  # CoPE inside T: RoPE's bound fails
    (("train-short-test-long", 8), ("train-short-test-long", 2)),  # learned: FIRE's fails
    (("train-short-test-long", 2), ("train-short-test-long", 8)),  # FIRE: learned's fails
    (("paper-abacus", 3), ("paper-abacus", 2)),  # the learned table: Abacus's bound fails
    (("paper-abacus", 2), ("paper-abacus", 3)),  # Abacus: the learned table's bound fails
]


@pytest.mark.parametrize("claim, other", CONTRASTS)
def test_a_bound_fails_on_the_run_that_shows_the_opposite(claim, other):
    _, step = step_from_link(*claim)
    ok, value, text = check(step, run_of(*other))
    assert not ok and value is not None and text.endswith("(not met)"), text


def _at_init(value):
    """A ``metrics.json`` record with every score that has a value at init set to it: what
    the run's model showed before training."""
    if isinstance(value, dict):
        if {"value", "init"} <= set(value):
            return {**value, "value": value["init"]}
        return {key: _at_init(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_at_init(item) for item in value]
    return value


SCORED_AT_INIT = [(lesson_id, number) for lesson_id, number in STEPS
                  if step_from_link(lesson_id, number)[1].expect.metric
                  in ("pattern", "induction", "previous_token")]


@pytest.mark.parametrize("lesson_id, number", SCORED_AT_INIT)
def test_a_score_s_bound_fails_on_the_model_before_training(lesson_id, number):
    _, step = step_from_link(lesson_id, number)
    ok, value, text = check(step, _at_init(run_of(lesson_id, number).metrics()))
    assert not ok and value is not None, text


def test_every_trained_row_gets_a_gradient_and_no_other():
    run = run_of("untrained-rows", 1)  # its answer says so
    grad = next(iter(run.row_grad_norm.values()))
    assert grad.shape[0] == 32 and bool((grad[:16] > 0).all()) and bool((grad[16:] == 0).all())


def test_check_reads_the_metrics_record_as_well_as_the_run():
    _, step = step_from_link("train-short-test-long", 2)
    run = run_of("train-short-test-long", 2)
    assert check(step, run.metrics()) == check(step, run)
    record = {**run.metrics(), "length_generalization": {}}  # not evaluated at 32
    ok, value, text = check(step, record)
    assert (ok, value) == (False, None) and "not measured" in text


@pytest.mark.parametrize("lesson_id, number", STEPS)
def test_each_step_is_complete_plain_and_fits_its_task(lesson_id, number):
    lesson, step = step_from_link(lesson_id, number)
    assert step.figure in {spec.key for spec in FIGURES}
    for words in (lesson.title, lesson.summary, step.title, step.text, step.question,
                  step.answer, step.try_next):
        assert words.strip() and "SPEC" not in words and "§" not in words
    assert step.question.endswith("?")
    config = step.config.filled()
    fit_network(step.source, get_task(config.task), config.seq_len)  # raises if it does not fit
    assert "seed" in step.settings, "a step's run is the same for every learner"
    assert step_from_link(*step_link(lesson, step).replace("lesson=", "").split("&step=")) \
        == (lesson, step)


def test_a_link_names_a_lesson_and_step():
    lesson, step = step_from_link("untrained-rows", "2")
    assert lesson is LESSONS["untrained-rows"] and step is lesson.steps[1]
    assert step_from_link("untrained-rows", None)[1] is lesson.steps[0]  # no step: the first
    assert step_from_link("untrained-rows", " 3 ")[1] is lesson.steps[2]
    assert step_link(lesson, step) == "lesson=untrained-rows&step=2"


@pytest.mark.parametrize("lesson_id, step, message", [
    ("untrained-row", "1", "lesson='untrained-row' is not one of .*did you mean untrained-rows"),
    ("", "1", "lesson='' is not one of"),
    ("positions", "0", "lesson 'positions' has steps 1 to 3, not '0'"),
    ("positions", "4", "has steps 1 to 3, not '4'"),
    ("positions", "-1", "not '-1'"),
    ("positions", "two", "not 'two'"),
    ("positions", "1.0", "not '1.0'"),
])
def test_an_unknown_lesson_or_a_step_out_of_range_says_which(lesson_id, step, message):
    with pytest.raises(StackError, match=message) as caught:
        step_from_link(lesson_id, step)
    assert caught.value.code == "E_ARG" and caught.value.hint


def test_the_notebook_lab_opens_a_step():
    config, source = open_step("train-short-test-long", 4)
    assert isinstance(config, TrainConfig) and 'position="rope"' in source
    assert (config.task, config.seq_len, config.eval_lengths) == ("shift", 16, "32")
    assert "pos_embed" not in open_step("positions")[1]  # no step: the first
    assert open_step("positions", "2")[1] == get_task("reverse").preset(16)  # the preset
    pytest.importorskip("ipywidgets")
    from stacklab.notebook import Panel

    _, step = step_from_link("train-short-test-long", 4)
    panel = Panel(source=step.source, **step.settings)  # the call the notebook makes
    assert panel.source == source
    assert panel.config().filled() == config.filled()


STEP = dict(title="t", text="x", question="q?", answer="a", figure="cosine", try_next="n",
            expect=Expect("accuracy", ">=", 0.5))


@pytest.mark.parametrize("settings, expect, message", [
    ({"task": "reverse", "seqlen": 8}, None, "'seqlen' is not a setting a link carries"),
    ({"task": "reverse", "eval_every": 5}, None, "'eval_every' is not a setting a link"),
    ({"task": "reverse", "steps": 0}, None, "steps='0' is not a whole number from 1"),
    ({"task": "revrese"}, None, "task='revrese' is not one of .*did you mean reverse"),
    ({"task": "shift", "eval_lengths": "32"}, Expect("past_T", "<=", 0.2, length=48),
     "reads length 48, which its eval_lengths '32' leave out"),
])
def test_a_mistyped_step_fails_when_it_is_declared(settings, expect, message):
    with pytest.raises(StackError, match=message) as caught:
        Step(**{**STEP, "settings": settings, **({"expect": expect} if expect else {})})
    assert caught.value.code == "E_ARG"


@pytest.mark.parametrize("args, message", [
    (("acuracy", ">=", 0.5), "no lesson metric 'acuracy'"),
    (("accuracy", ">", 0.5), "with >= or <=, not '>'"),
    (("past_T", "<=", 0.2), "past_T needs a length"),
    (("accuracy", ">=", 0.5, 32), "accuracy is not read at a length"),
])
def test_a_mistyped_condition_fails_when_it_is_declared(args, message):
    with pytest.raises(StackError, match=message):
        Expect(*args)
    assert set(METRICS) >= {"accuracy", "pattern", "past_T", "induction"}


def test_a_lesson_needs_an_id_for_links_and_steps():
    step = Step(**{**STEP, "settings": {"task": "reverse", "seed": 0}})
    with pytest.raises(StackError, match="lower-case letters"):
        Lesson(id="Bad Id", title="t", summary="s", steps=(step,))
    with pytest.raises(StackError, match="has no steps"):
        Lesson(id="empty", title="t", summary="s")
    with pytest.raises(StackError, match="no lesson called|is not one of"):
        get_lesson("nope")
