"""The researcher's bench (issue 21), in the library: messages that say what happened,
state that never goes stale, Compare that shows the result, figures that read."""

from __future__ import annotations

from dataclasses import replace

import pytest

import stacklab
from stacklab import StackError, resolve
from stacklab.core.errors import closest
from stacklab.lab.reports.compare import (aligned_rows, column_help, compared, comparison_html,
                                  length_rows, table_rows)
from stacklab.lab.figures import (FIGURES, column_width, figures_json, fit_title,
                                  lengths_compared_plot, positional_attention_heatmap,
                                  training_curves, wrap_title)
from stacklab.lab.figures.curves import loss_axis
from stacklab.lab.figures.drawing import NO_TABLE
from stacklab.lab.figures.style import TITLE_FONT, _CHAR_WIDTH, _shown_length
from stacklab.lab.runs.store import RunStore
from stacklab.serve.links.changes import announcement, changed_since, holding, stale_note
from stacklab.serve.links.experiment import DEFAULT, from_query

LEARNED = ("embedding(16, 32)\npos_embed(64)\nattention(2, causal=true)\nlayer_norm()\n"
           "linear(16)")
ROPE = 'embedding(16, 32)\nattention(2, causal=true, position="rope")\nlayer_norm()\nlinear(16)'

# --- messages: a bad choice gets what was meant and the very call corrected ----------

CHOICE_STACKS = [
    'attention(4, position="rotary")',  # the spelled-out name: its shared start
    'attention(4, causal=true, position="ALiBi", buckets=16)',  # another case; others kept
    "attention(2, position=3)",  # a number where a string belongs: the choices, and a call
    'attention(2, position="sinusoidal")',  # nothing close: the list, and a valid call
]
CHOICE_LINKS = {"task": "shfit", "device": "cuda0", "dtype": "float23", "input_dtype": "int46",
                "hide": "layer,tsk"}


def test_choice_errors_say_what_was_meant_with_that_call_corrected(golden):
    """golden/choice_errors.out (new, on purpose): every choice argument and link value."""
    rendered = []
    for source in CHOICE_STACKS:
        with pytest.raises(StackError) as info:
            resolve(source, ["B", 12, 16])
        assert info.value.code == "E_ARG"
        rendered.append(str(info.value))
    _, problems = from_query(CHOICE_LINKS)
    rendered.append("\n".join(problems))
    text = "\n\n".join(rendered) + "\n"
    assert 'did you mean "rope"? e.g. attention(4, position="rope")' in text
    assert 'e.g. attention(4, causal=true, position="alibi", buckets=16)' in text
    assert "did you mean shift? e.g. task=shift" in text and "e.g. hide=layers,task" in text
    golden("choice_errors.out", text)


def test_closest_finds_the_meant_choice_or_none():
    choices = ["none", "rope", "alibi", "relative"]
    assert [closest(word, choices) for word in ("rotary", "Rope", "nome", "rel_bias", "alibi ")] \
        == ["rope", "rope", "none", "relative", "alibi"]
    assert closest("sinusoidal", choices) is None and closest("r", choices) is None


# --- every automatic change announced, before and after -------------------------------

def test_raising_seq_len_on_the_preset_announces_the_stack_and_input_it_changed():
    shift = DEFAULT.with_task_preset("shift")
    after = replace(shift, **shift.changes_for("seq_len", 48))
    note = announcement(shift, after, "seq_len")
    assert note.startswith("seq_len 16 → 48 also changed the stack")
    assert "pos_embed(32) → pos_embed(96)" in note and "input B,16 → B,48" in note
    assert announcement(shift, replace(shift, steps=10), "steps") is None  # nothing else


def test_a_custom_stacks_input_that_follows_t_is_announced_too():
    custom = replace(DEFAULT, stack="embedding(16, 32)\nlinear(16)")
    after = replace(custom, **custom.changes_for("seq_len", 48))
    assert after.stack == custom.stack
    assert announcement(custom, after, "seq_len") == (
        "seq_len 16 → 48 also changed input B,16 → B,48 (an input of B,T follows T).")


def test_a_new_task_announces_its_preset_and_settings():
    after = replace(DEFAULT, **DEFAULT.changes_for("task", "sort"))
    note = announcement(DEFAULT, after, "task")
    # embedding(16, 16): issue 30's cheaper reverse preset (bench/presets.md)
    assert note.startswith("task reverse → sort also changed the stack (it was the preset of "
                           "task reverse, which follows the task): embedding(16, 16) → ")
    assert "seq_len 16 → 8" in note and "input B,16 → B,8" in note


def test_changed_since_lists_each_field_old_and_new():
    shift = DEFAULT.with_task_preset("shift")
    config = shift.train_config(["cpu"]).filled()
    assert changed_since(shift, shift.stack, config, ["cpu"]) == []
    # comments and blank lines are not changes
    assert changed_since(replace(shift, stack="# mine\n" + shift.stack + "\n\n"), shift.stack,
                         config, ["cpu"]) == []
    longer = replace(shift, **shift.changes_for("seq_len", 48))
    changes = changed_since(longer, shift.stack, config, ["cpu"])
    assert [str(c) for c in changes] == ["seq_len 16 → 48", "stack: pos_embed(32) → pos_embed(96)"]
    note = stale_note("4d82" + "0" * 28, changes)
    assert note.startswith("Changed since run 4d820000…: seq_len 16 → 48; stack: ")
    assert "press Train" in note


def test_build_names_the_task_and_preset_it_holds():
    assert holding(DEFAULT).startswith("This is the preset of task reverse for T = 16")
    assert "preset Reference: the transformer input stem" in holding(
        replace(DEFAULT, stack="embedding(500, 16)\npos_embed(32)\nlinear(4)"))
    assert holding(replace(DEFAULT, stack="linear(4)")).startswith("This is a stack of your own")


# --- figures: titles wrap, log axes read ------------------------------------------------

@pytest.mark.parametrize("columns", [1, 2, 4])
def test_every_title_wraps_within_its_column(columns):
    width = column_width(columns)
    limit = int(0.9 * width / (TITLE_FONT * _CHAR_WIDTH))
    title = ("Attention by position alone in n1 (position=&quot;rope&quot;), tokens averaged "
             "out &amp; a_very_long_node_name&#x27;s rows")
    wrapped = wrap_title(title, width)
    assert wrapped.replace("<br>", " ") == title  # only spaces became breaks: escaping kept
    assert all(_shown_length(line) <= limit for line in wrapped.split("<br>"))
    assert wrap_title(wrapped, width) == wrapped and wrap_title(wrap_title(title, 300), width) \
        == wrapped  # wrapping again, for another width, is wrapping once


def test_fit_title_makes_room_for_its_lines():
    import torch

    fig = positional_attention_heatmap(torch.softmax(torch.randn(8, 8), -1), "n1",
                                       title="Attention by position alone in n1 (position="
                                             "&quot;rope&quot;), tokens averaged out")
    fit_title(fig, column_width(4))
    lines = fig.layout.title.text.count("<br>") + 1
    assert lines >= 3 and fig.layout.margin.t >= 40 + 24 * lines
    fit_title(fig, column_width(1))
    assert fig.layout.title.text.count("<br>") == 0 and fig.layout.margin.t == 64


def test_the_loss_axis_labels_read():
    axis = loss_axis([2.8, 1.2, 0.3, 0.02, 0.004])
    assert axis["type"] == "log" and axis["ticktext"] == ["0.01", "0.1", "1"]
    few = loss_axis([2.8, 1.0, 0.2])  # two decades or less: 1, 2, 5 steps
    assert few["ticktext"] == ["0.1", "0.2", "0.5", "1", "2", "5"]
    assert loss_axis([2.8, 2.3, 1.9])["type"] == "linear"  # under one decade: linear
    history = [{"step": 25 * i, "loss": 2.8 / (i + 1), "accuracy": 0.1} for i in range(4)]
    fig = training_curves(history)
    assert fig.layout.yaxis.type == "linear" and not fig.layout.yaxis.exponentformat


def test_every_run_on_one_length_plot_says_past_t_and_overall():
    found = {"16": {"accuracy": 0.94, "per_position": [0.9] * 16},
             "32": {"accuracy": 0.87, "per_position": [0.94] * 16 + [0.8] * 16},
             "48": {"error": "beyond capacity"}}
    fig = lengths_compared_plot([("rope <b>", 16, found), ("learned", 16, found)])
    names = [trace.name for trace in fig.data]
    assert len(names) == 4 and "rope &lt;b&gt; · length 32: 0.80 past T, 0.87 overall" in names
    assert "learned · length 16: 0.94 overall" in names
    assert len({trace.line.color for trace in fig.data}) == 2  # one colour per run


# --- Compare and Train from stored runs --------------------------------------------------

@pytest.fixture(scope="module")
def stored_pair():
    """A learned table and RoPE on shift, evaluated at 16, 32 and 48, from the run store."""
    store = RunStore()  # the suite's STACKLAB_RUNS
    runs = []
    for label, stack in (("learned", LEARNED), ("rope", ROPE)):
        run = stacklab.train(stack, task="shift", steps=40, eval_lengths="16,32,48")
        store.save(run, figures_json(run))  # as a worker stores it
        runs.append((label, store.open(run.key)))
    return runs


def test_compare_table_leads_with_what_differs(stored_pair):
    rows = table_rows(stored_pair)
    columns = list(rows[0])
    assert columns[:5] == ["run", "encoding", "accuracy inside T", "accuracy past T at 32",
                           "accuracy past T at 48"]
    assert columns[-1] == "key" and "task" in columns[5:]  # the same in both: after
    assert [row["encoding"] for row in rows] == ["pos_embed", "rope"]
    helps = column_help(rows)
    assert "positions T and beyond" in helps["accuracy past T at 32"]
    assert "overall" in helps["accuracy past T at 32"]


def test_compare_says_why_a_figure_is_not_drawn(stored_pair):
    rows = {row.key: row for row in aligned_rows(stored_pair)}
    assert rows["cosine"].versions[1] is None and rows["cosine"].reasons == [None, NO_TABLE]
    assert rows["offset_scores"].reasons[0] == "only for a stack without a learned position table"
    assert all(reason for row in rows.values() for version, reason
               in zip(row.versions, row.reasons) if version is None)
    [together] = compared(stored_pair)
    assert together.key == "lengths_compared" and not together.skipped
    assert len(together.figure.data) == 6  # 2 runs x 3 lengths on one plot
    page = comparison_html(stored_pair)
    assert f"not drawn for this run: {NO_TABLE}" in page
    assert "Length generalization: every run on one plot" in page
    assert "position: sticky" in page and "<th title=" in page


def test_every_figure_left_out_has_a_declared_reason(stored_pair):
    absent = stored_pair[1][1].figures()["absent"][""]  # RoPE: no table
    assert absent["cosine"] == NO_TABLE and set(absent) < {spec.key for spec in FIGURES}
    assert all(reason and reason != "it does not apply to this run" for reason in absent.values())


def test_length_rows_for_the_train_page(stored_pair):
    rows = length_rows(stored_pair[1][1])
    assert [row["length"] for row in rows] == ["16", "32", "48"]
    assert rows[0]["accuracy past T"] == "—" and rows[1]["accuracy past T"].endswith("%")
    assert rows[2]["note"] == "positions 16-47 were never trained"

