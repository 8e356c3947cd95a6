"""The library shows itself: `train`'s signature is the settings table, a wrong keyword or
task gets a did-you-mean, a run prints as one line, public modules say what they export,
and figures export to PNG, SVG and PDF."""

from __future__ import annotations

import importlib
import inspect

import pytest

import stacklab
from stacklab.lab.settings import SETTINGS


@pytest.mark.parametrize("train", [stacklab.train, importlib.import_module(
    "stacklab.lab.train.trainer").train], ids=["stacklab.train", "trainer.train"])
def test_trains_signature_is_the_settings_table(train):
    parameters = inspect.signature(train).parameters
    assert list(parameters)[0] == "source"
    for row in SETTINGS.values():  # every row, in the table's order, with type and default
        parameter = parameters[row.name]
        assert parameter.kind is inspect.Parameter.KEYWORD_ONLY
        assert row.type in getattr(parameter.annotation, "__args__", (parameter.annotation,))
        if row.name == "task":
            assert parameter.default is inspect.Parameter.empty  # required
        else:
            assert parameter.default == row.default, row.name
    names = [name for name in parameters if name in SETTINGS]
    assert names == list(SETTINGS)
    assert "steps: int | None = None" in str(inspect.signature(train))


def test_a_wrong_keyword_gets_the_setting_it_meant():
    with pytest.raises(stacklab.StackError, match="no setting 'step'; did you mean steps") as err:
        stacklab.train(task="reverse", step=10)
    assert err.value.code == "E_ARG" and "steps=10" in err.value.hint


def test_train_needs_a_task_and_a_typo_gets_the_task_it_meant():
    with pytest.raises(stacklab.StackError, match=r"train\(\) needs a task") as err:
        stacklab.train(steps=10)
    assert "reverse" in err.value.hint
    with pytest.raises(stacklab.StackError, match="no task called 'revrese'; did you mean reverse"):
        stacklab.train(task="revrese", steps=10)


def test_a_run_prints_as_one_line_and_a_small_card():
    run = stacklab.train(task="position", steps=10)
    text = repr(run)
    assert "\n" not in text and len(text) < 120, text
    assert text.startswith(f"Run(key={run.key[:12]}, task=position, status=finished, steps=10, ")
    assert f"accuracy={run.final['accuracy']:.3f}" in text
    run.error = "<script>alert(1)</script>"  # every value of the card is escaped
    card = run._repr_html_()
    assert "<script>" not in card and "&lt;script&gt;" in card and len(card) < 2000


@pytest.mark.parametrize("name", ["stacklab", *stacklab._MODULES])
def test_public_modules_say_what_they_export(name):
    module = stacklab if name == "stacklab" else getattr(stacklab, name)
    exported = module.__all__
    assert exported and all(hasattr(module, item) for item in exported), name


def test_a_figure_exports_to_png_svg_and_pdf(tmp_path):
    from stacklab.lab.figures.export import _kaleido

    if _kaleido() is None:
        pytest.skip("kaleido or Chromium is missing")
    figure = stacklab.figures.training_curves([{"step": 10, "loss": 2.0, "accuracy": 0.2},
                                               {"step": 20, "loss": 0.5, "accuracy": 0.9}])
    written = {fmt: stacklab.figures.export(figure, tmp_path / f"curves.{fmt}")
               for fmt in ("png", "svg", "pdf")}
    assert written["png"].read_bytes().startswith(b"\x89PNG")
    assert written["svg"].read_text().startswith("<svg") and "Training curves" in \
        written["svg"].read_text()
    assert written["pdf"].read_bytes().startswith(b"%PDF")
    assert stacklab.figures.export(figure, tmp_path / "named", format="svg").name == "named.svg"
    with pytest.raises(stacklab.StackError, match="not 'gif'"):
        stacklab.figures.export(figure, tmp_path / "curves.gif")
