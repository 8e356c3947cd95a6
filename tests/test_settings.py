"""The one settings table: the trainer's checks, the CLI flags, the link parser and the app's
controls are all derived from it, and an experiment's rules live beside the link schema."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest
import streamlit as st

from stacklab import StackError, TrainConfig
from stacklab.cli.flags import make_parser
from stacklab.lab.settings import SETTINGS
from stacklab.lab.tasks import TASKS
from stacklab.serve.links.experiment import (DEFAULT, DEFAULT_TASK, FIELDS, HIDEABLE, Experiment,
                                       from_query, preset_changes, task_preset, to_query)

sys.path.insert(0, str(Path(__file__).parent.parent))
from ui import controls  # noqa: E402  (the app layer makes a row's control)


def control(row) -> dict:
    """The keyword arguments of the app's control of ``row``."""
    return controls.setting_widget(st, row)[1]


def test_every_trainconfig_field_has_a_row_and_nothing_else_does():
    assert list(SETTINGS) == [f.name for f in dataclasses.fields(TrainConfig)]
    for row in SETTINGS.values():
        assert row.label and row.help
        if row.link and not row.choices:
            low, high = row.classroom
            assert row.low <= low <= high <= row.high  # a classroom never allows more


def test_the_cli_has_a_flag_for_every_cli_setting_and_no_other():
    train = make_parser()._subparsers._group_actions[0].choices["train"]
    flags = {a.dest for a in train._actions if a.option_strings} - {"help", "out", "format"}
    assert flags == {row.name for row in SETTINGS.values() if row.cli}


def test_links_carry_every_link_setting_and_the_network():
    names = [f.name for f in FIELDS]
    assert names[:3] == ["stack", "input", "input_dtype"]
    assert names[3:] == [row.name for row in SETTINGS.values() if row.link]
    assert [f.name for f in dataclasses.fields(Experiment)] == names + ["hide"]
    assert set(HIDEABLE) == set(names) | {"presets", "layers"}
    assert set(to_query(DEFAULT)) == set(names)


@pytest.mark.parametrize("name", [r.name for r in SETTINGS.values() if r.low is not None])
def test_library_check_cli_flag_and_link_agree_on_the_range(name):
    row = SETTINGS[name]
    too_high = row.high * 2 if row.type is float else row.high + 1
    with pytest.raises(StackError, match=f"{name} must be") as caught:
        row.check(too_high)
    assert caught.value.code == "E_ARG"
    with pytest.raises(ValueError, match="is not"):
        row.parse_flag(str(too_high))
    if row.link:
        value, problem = row.parse_link(str(too_high))
        assert value is None and f"{name}=" in problem
        low, _ = row.classroom
        if row.low_open and low == row.low:  # (0, 1]: the low end itself is refused
            assert row.parse_link(str(low))[0] is None
            low = 0.5
        if row.items:  # a list setting: canonical text, a text control
            assert row.parse_link(f" {low}, {low}") == (str(low), None)
            assert "placeholder" in control(row)
            return
        assert row.parse_link(str(low)) == (low, None)
        assert control(row)["min_value"] <= low


@pytest.mark.parametrize("raw", ["++12", "+_+12", "1 2", "١٢", "12.0", "-3", ""])
def test_a_mangled_whole_number_in_a_link_is_refused_not_raised(raw):
    exp, problems = from_query({"seq_len": raw})
    assert exp.seq_len == DEFAULT.seq_len and problems and "seq_len=" in problems[0]


def test_defaults_come_from_the_default_tasks_preset():
    preset = TrainConfig(task=DEFAULT_TASK).filled()
    chosen = task_preset(DEFAULT_TASK)  # what the preset sets beyond the library defaults
    for row in SETTINGS.values():
        if row.link:
            assert getattr(DEFAULT, row.name) == chosen.get(row.name, getattr(preset, row.name))
    assert DEFAULT.stack == TASKS[DEFAULT_TASK].preset(preset.seq_len)
    assert DEFAULT.input == f"B,{preset.seq_len}"


def test_switching_task_on_a_preset_brings_the_new_preset_and_its_settings():
    changes = DEFAULT.changes_for("task", "modular")
    assert changes == {"task": "modular", **{k: v for k, v in task_preset("modular").items()
                                             if k != "task"}}


def test_changing_t_follows_the_preset_and_the_input_but_keeps_a_hand_written_stack():
    changes = DEFAULT.changes_for("seq_len", 20)
    assert changes["stack"] == TASKS["reverse"].preset(20) and changes["input"] == "B,20"
    own = dataclasses.replace(DEFAULT, stack="embedding(16, 64)\npos_embed(99)\nlinear(16)")
    assert own.changes_for("seq_len", 20) == {"seq_len": 20, "input": "B,20"}
    assert own.changes_for("steps", 50) == {"steps": 50}


def test_a_hand_written_stack_keeps_its_settings_when_the_task_changes():
    own = dataclasses.replace(DEFAULT, stack="embedding(16, 64)\npos_embed(99)\nlinear(16)")
    assert own.changes_for("task", "modular") == {"task": "modular"}
    assert preset_changes(own.stack, own.task, own.seq_len, new_task="modular") == {}
    assert preset_changes(DEFAULT.stack, DEFAULT.task, DEFAULT.seq_len, DEFAULT.input,
                          new_task="modular") == DEFAULT.follow_preset(task="modular")


def test_a_row_is_plain_data_and_each_front_end_makes_its_control():
    """The library's rows name no widget argument; the app makes them from the row."""
    rows = Path(__file__).parent.parent / "lib" / "stacklab" / "lab" / "settings.py"
    for word in ("min_value", "max_value", "placeholder", "%g"):
        assert word not in rows.read_text(encoding="utf-8"), word
    lengths, lr = control(SETTINGS["eval_lengths"]), control(SETTINGS["lr"])
    assert lengths["placeholder"] == "e.g. 16,32,64" and set(lengths) == {"help", "placeholder"}
    # the row's help, then the glossary's definitions of the terms the setting uses
    assert lengths["help"].startswith(SETTINGS["eval_lengths"].help)
    assert "length generalization" in lengths["help"][len(SETTINGS["eval_lengths"].help):]
    assert (lr["min_value"], lr["max_value"], lr["step"], lr["format"]) == (1e-6, 10.0, 1e-3, "%g")
    assert control(SETTINGS["target_accuracy"])["placeholder"] == "none"
    assert control(SETTINGS["device"])["options"] == SETTINGS["device"].options()
    assert control(SETTINGS["steps"])["step"] == 50 and "format" not in control(SETTINGS["steps"])


def test_train_config_uses_the_experiment_and_falls_back_to_auto():
    exp = dataclasses.replace(DEFAULT, device="cuda", seed=7, lr=0.01)
    config = exp.train_config(["auto", "cpu"])
    assert (config.device, config.seed, config.lr, config.task) == ("auto", 7, 0.01, "reverse")
    assert exp.train_config(["auto", "cpu", "cuda"]).device == "cuda"


def test_target_accuracy_is_optional_in_links_and_presets_use_it():
    assert DEFAULT.target_accuracy == 1.0  # every task's preset stops at 100% held out
    off, problems = from_query({"target_accuracy": "none"})
    assert off.target_accuracy is None and problems == []
    assert to_query(off)["target_accuracy"] == "none"
    assert from_query(to_query(off))[0] == off
    half, _ = from_query({"target_accuracy": "0.5"})
    assert half.train_config(["auto"]).target_accuracy == 0.5
    bad, problems = from_query({"target_accuracy": "0"})
    assert bad.target_accuracy == 1.0 and "number above 0.0 to 1.0" in problems[0]
    with pytest.raises(StackError, match="target_accuracy"):
        TrainConfig(target_accuracy=0.0).filled()


def test_cli_target_accuracy_stops_at_the_first_evaluation_that_reaches_it(cli, tmp_path):
    import json

    code, _, err = cli("train", "--task", "modular", "--target-accuracy", "0.5",
                       "--out", str(tmp_path))
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert code == 0 and metrics["steps"] < 300 and metrics["final"]["accuracy"] >= 0.5
    code, _, err = cli("train", "--task", "modular", "--target-accuracy", "0", "--out", "x")
    assert code == 2 and "--target-accuracy" in err


@pytest.mark.parametrize("given", [[16, 32], (16, 32), "16,32", " 32, 16,16 ", ["16", 32]])
def test_a_list_setting_takes_python_values_and_the_links_text(given):
    config = TrainConfig(task="repeat", seq_len=32, eval_lengths=given).filled()
    assert set(config.lengths) == {16, 32} and config.eval_lengths in ("16,32", "32,16")
    assert hash(TrainConfig(task="repeat", eval_lengths=given))  # a config stays hashable


@pytest.mark.parametrize("given", [[16, 0], [True], [16.0], [16, "x"], list(range(1, 10)),
                                   "16;32", {16: 1}])
def test_a_list_setting_refuses_what_is_not_a_short_list_of_whole_numbers(given):
    with pytest.raises(StackError) as info:
        TrainConfig(task="repeat", eval_lengths=given).filled()
    assert info.value.code == "E_ARG" and "eval_lengths must be a list" in info.value.message
    assert "eval_lengths=[16, 32, 64]" in info.value.hint


def test_train_takes_eval_lengths_as_a_list_and_the_cli_as_text(cli, tmp_path):
    import json

    import stacklab

    run = stacklab.train(task="repeat", seq_len=32, eval_lengths=[16, 32], steps=20)
    again = stacklab.train(task="repeat", seq_len=32, eval_lengths=(16, 32), steps=20)
    text = stacklab.train(task="repeat", seq_len=32, eval_lengths="16,32", steps=20)
    assert set(run.length_generalization) == {"16", "32"}
    assert run.key == again.key == text.key and run.config.eval_lengths == "16,32"
    code, _, err = cli("train", "--task", "repeat", "--seq-len", "32", "--steps", "20",
                       "--eval-lengths", "16,32", "--out", str(tmp_path / "r"))
    assert code == 0, err
    metrics = json.loads((tmp_path / "r" / "metrics.json").read_text())
    assert set(metrics["length_generalization"]) == {"16", "32"}
    code, _, err = cli("train", "--task", "repeat", "--eval-lengths", "[16, 0]", "--out",
                       str(tmp_path / "x"))
    assert code == 2 and "--eval-lengths" in err and "Traceback" not in err
