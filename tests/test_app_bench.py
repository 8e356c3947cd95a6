"""The researcher's bench (issue 21) as a new user meets it, page by page (AppTest): RoPE
against the learned table on shift at 16/32/48, then a seq_len change."""

from __future__ import annotations

import pytest

import stacklab
from stacklab.lab.runs.store import RunStore
from test_app import app, wait_for_run

ROPE = ('embedding(16, 64)\nattention(4, causal=true, position="rope")\nlayer_norm()\n'
        "linear(16)")
LEARNED = "embedding(16, 64)\npos_embed(64)\nattention(4, causal=true)\nlayer_norm()\nlinear(16)"


def texts(at, *kinds) -> str:
    return " ".join(element.value for kind in kinds for element in getattr(at, kind))


def test_build_names_the_task_and_preset_it_holds_on_first_open():
    at = app().switch_page("views/build.py").run()  # Home is the first page
    assert "This is the preset of task reverse for T = 16" in texts(at, "caption")
    at = app(stack="linear(4)", input="B,16")
    assert "This is a stack of your own" in texts(at, "caption")


def test_a_mistyped_choice_on_build_gets_what_was_meant_and_the_call_fixed():
    at = app(stack='embedding(16, 64)\nattention(4, causal=true, position="rotary")',
             input="B,16", input_dtype="int64")
    [error] = at.error
    assert 'did you mean "rope"?' in error.value
    assert 'attention(4, causal=true, position="rope")' in error.value


def test_a_mistyped_task_in_a_link_gets_what_was_meant():
    at = app(task="shfit")
    assert "did you mean shift? e.g. task=shift" in at.warning[0].value


def test_a_custom_stacks_input_change_is_announced_on_train():
    at = app(stack="embedding(16, 64)\nlinear(16)", input="B,16", input_dtype="int64",
             task="shift", seq_len="16")
    at.switch_page("views/train.py").run()
    at.number_input(key="train_seq_len").set_value(48).run()
    assert "seq_len 16 → 48 also changed input B,16 → B,48" in texts(at, "info")
    assert at.query_params["input"] in ("B,48", ["B,48"])
    at.number_input(key="train_steps").set_value(100).run()  # said once, not again
    assert "also changed" not in texts(at, "info")


def test_train_shows_lengths_then_says_when_its_run_is_stale():
    """Train a RoPE stack at 16 evaluated at 16/32/48: Train shows the lengths; raising
    seq_len announces what it changed, and Train and Explore both say their run is old."""
    at = app(task="shift", seq_len="16", steps="60", eval_lengths="16,32,48")
    at.switch_page("views/train.py").run()
    at.button(key="train_train").click().run()
    assert wait_for_run(at) == "finished"
    assert "Changed since run" not in texts(at, "warning")
    [lengths] = [frame.value for frame in at.dataframe]
    assert list(lengths["length"]) == ["16", "32", "48"]
    assert list(lengths.columns) == ["length", "accuracy overall", "accuracy past T", "note"]
    at.number_input(key="train_seq_len").set_value(48).run()
    note = texts(at, "info")
    assert "seq_len 16 → 48 also changed the stack" in note
    assert "pos_embed(32) → pos_embed(96)" in note and "input B,16 → B,48" in note
    stale = texts(at, "warning")
    assert "Changed since run" in stale and "seq_len 16 → 48" in stale
    assert "pos_embed(32) → pos_embed(96)" in stale and "press Train" in stale
    at.switch_page("views/explore.py").run()
    assert "Changed since run" in texts(at, "warning")
    at.switch_page("views/train.py").run()
    at.number_input(key="train_seq_len").set_value(16).run()  # back to the run's experiment
    assert "Changed since run" not in texts(at, "warning")


@pytest.fixture(scope="module")
def rope_and_learned():
    store = RunStore()  # the suite's STACKLAB_RUNS, which the app's pool uses too
    runs = [stacklab.train(stack, task="shift", steps=40, eval_lengths="16,32,48")
            for stack in (ROPE, LEARNED)]
    for run in runs:
        store.save(run)
    return runs


def test_compare_leads_with_the_result_and_says_why_a_figure_is_missing(rope_and_learned):
    rope, learned = rope_and_learned
    at = app(compare=f"{rope.key},{learned.key}")
    at.switch_page("views/compare.py").run()
    assert not at.exception
    table = at.dataframe[0].value
    assert list(table.columns)[:5] == ["run", "encoding", "accuracy inside T",
                                       "accuracy past T at 32", "accuracy past T at 48"]
    assert list(table["encoding"]) == ["rope", "pos_embed"]
    titles = [h.value for h in at.subheader]
    assert titles[0] == "Length generalization: every run on one plot"
    assert "Length generalization" not in titles  # not again, run by run
    captions = texts(at, "caption")
    assert "Not drawn for this run: no learned position table (pos_embed) in this stack" in captions
    assert "Not drawn for this run." not in captions  # every skip says why
    assert "overall" in captions and "past T" in captions


def test_choosing_a_preset_on_build_says_which_training_settings_it_set():
    """A preset brings its own steps: choosing one after raising Steps on Train says so,
    with before and after, instead of resetting Steps silently."""
    from stacklab.serve.links.experiment import presets

    [label] = [name for name in presets() if name.startswith("Task shift")]
    at = app(task="shift")
    at.switch_page("views/train.py").run()
    at.number_input(key="train_steps").set_value(600).run()
    at.switch_page("views/build.py").run()
    at.selectbox(key="build_preset").set_value(label).run()
    steps = presets()[label]["steps"]
    assert f"The preset Task shift also set: steps 600 → {steps}." in texts(at, "info")


def test_make_bench_app_section_drives_the_build_page():
    """`make bench`'s app section edits the Build page 30 times (it once looked for the stack
    box on Home, the first page, and stopped the whole bench)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent.parent / "bench"))
    import run as bench

    found = bench.bench_app()
    assert found["build_edit_ms"]["median"] > 0 and set(found["targets"]) == {
        "build_edit_under_150ms", "heatmap_under_2MB"}
