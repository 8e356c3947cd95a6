"""Notebooks (SPEC §17): every notebook runs top to bottom in a real kernel, and the panel
is driven through its Python API as its buttons drive it."""

from __future__ import annotations

import re
import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

import stacklab
from stacklab.lab.tasks import TASKS

NOTEBOOKS = Path(__file__).parent.parent / "notebooks"
PLOTLY = "application/vnd.plotly.v1+json"
WIDGET = "application/vnd.jupyter.widget-view+json"


def execute(name: str, tmp_path) -> list[dict]:
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    NotebookClient(notebook, timeout=180, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [out for cell in notebook.cells if cell.cell_type == "code" for out in cell.outputs]
    errors = [out for out in outputs if out.output_type == "error"]
    assert not errors, errors[0].get("traceback", errors[0])[-1]
    return outputs


def figures_of(outputs) -> list[dict]:
    """The figure outputs; each one also carries a still image (GitHub and nbviewer show it)."""
    figures = [out for out in outputs if PLOTLY in out.get("data", {})]
    for out in figures:
        assert out["data"].get("image/svg+xml", "").startswith("<svg"), \
            out["data"]["text/plain"]
    return figures


def text_of(outputs) -> str:
    return "".join(out.get("text", "") + out.get("data", {}).get("text/plain", "")
                   for out in outputs)


def test_the_notebooks_written_from_cells_are_the_ones_committed():
    """notebooks/build.py writes the theme notebooks from their cells: what it writes now is
    what is committed, so an edit made to a notebook alone (an import renamed in the
    notebook, not in its cells) is not undone by the next build."""
    import runpy

    build = runpy.run_path(str(NOTEBOOKS / "build.py"))
    names = {name: build[cells] for name, cells in (
        ("encodings.ipynb", "ENCODINGS"), ("table-from-a-file.ipynb", "TABLE"),
        ("lab.ipynb", "LAB"), ("induction.ipynb", "INDUCTION"))}
    for name, cells in names.items():
        committed = nbformat.read(NOTEBOOKS / name, as_version=4).cells
        assert [(c.cell_type, c.source) for c in cells] == \
            [(c.cell_type, c.source) for c in committed], f"{name}: run notebooks/build.py"


def test_tour_notebook_runs_top_to_bottom(tmp_path):
    outputs = execute("tour.ipynb", tmp_path)
    text = text_of(outputs)
    assert "Parameters: 8,580" in text
    assert "rows >= 16 exactly zero: True" in text
    assert len(figures_of(outputs)) >= 5


def test_encodings_notebook_compares_every_encoding(tmp_path):
    outputs = execute("encodings.ipynb", tmp_path)
    text = text_of(outputs)
    for name in ("learned", "sinusoidal", "rope", "alibi", "none"):
        assert f"{name:>10}: at T=16" in text
    assert "partner_attention" in text
    assert len(figures_of(outputs)) >= 3


def test_table_notebook_scores_a_table_from_a_file(tmp_path):
    outputs = execute("table-from-a-file.ipynb", tmp_path)
    text = text_of(outputs)
    assert "torch.Size([1024, 768])" in text and "translation_invariance" in text
    assert "has no tensor 'wte'" in text
    assert len(figures_of(outputs)) == 3


def test_induction_notebook_finds_both_heads_and_the_shortcut(tmp_path):
    outputs = execute("induction.ipynb", tmp_path)
    text = text_of(outputs)
    previous = re.search(r"previous-token head: layer 1, head \d \(previous_token ([\d.]+); "
                         r"the best in layer 2: ([\d.]+)\)", text)
    induction = re.search(r"induction head: layer 2, head \d \(induction ([\d.]+); "
                          r"the best in layer 1: ([\d.]+)\)", text)
    assert previous and float(previous[1]) > float(previous[2])
    assert induction and float(induction[1]) > 0.5 > float(induction[2])
    two, one = (float(re.search(f"{name}: accuracy ([\\d.]+)", text)[1])
                for name in ("two attention layers", "one attention layer"))
    assert two > 0.9 > one  # the control cannot do it with one layer
    shortcut = re.search(r"at T=8: repeat ([\d.]+), induction ([\d.]+)", text)
    assert float(shortcut[1]) < 0.5 < float(shortcut[2])  # the offset fails, induction holds
    for name in ("learned", "sinusoidal", "rope", "alibi", "none"):
        assert re.search(f"{name:>10}  +[\\d.]+  +[\\d.]+ \\([\\d.]+\\)", text), name
    assert len(figures_of(outputs)) == 2


def test_lab_notebook_trains_live_and_opens_by_key(tmp_path, monkeypatch):
    monkeypatch.setenv("STACKLAB_RUNS", str(tmp_path / "runs"))
    outputs = execute("lab.ipynb", tmp_path)
    text = text_of(outputs)
    assert "finished 300" in text and text.rstrip().endswith("True")
    widgets = [out for out in outputs if WIDGET in out.get("data", {})]
    assert len(widgets) >= 2  # the progress bar of train(live=True), and the panel
    plots = [out for out in outputs if PLOTLY in out.get("data", {})]
    assert len(plots) >= 2  # the live curves and pattern figure, left as the final ones


def test_live_figures_are_one_output_each_redrawn_in_place(tmp_path, monkeypatch):
    """A live run leaves exactly one output per figure (updated as it trained, so the cell
    ends with the final figures), the progress bar, and the run's one-line card."""
    monkeypatch.setenv("STACKLAB_RUNS", str(tmp_path / "runs"))
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(
        'import stacklab\nrun = stacklab.train(task="reverse", steps=200, live=True)\nrun')]
    NotebookClient(notebook, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = notebook.cells[0].outputs
    figures = figures_of(outputs)
    titles = [out["data"][PLOTLY]["layout"]["title"]["text"] for out in figures]
    assert len(figures) == 2 and titles[0] == "Training curves", titles
    assert "at step 200" in titles[1]  # the final figure, not the first draw's
    assert len([out for out in outputs if WIDGET in out.get("data", {})]) == 1  # the bar
    card = outputs[-1]["data"]
    assert card["text/plain"].startswith("Run(key=") and "\n" not in card["text/plain"]
    assert "status=finished" in card["text/plain"] and len(card["text/plain"]) < 120
    assert "stacklab-run" in card["text/html"] and len(outputs) == 4


# -- the panel through its Python API (what its buttons call) -------------------------------


@pytest.fixture
def panel(tmp_path):
    from stacklab.lab.runs.store import RunStore
    from stacklab.notebook import Panel

    return Panel(task="reverse", steps=60, store=RunStore(tmp_path))


def test_the_panel_trains_off_the_main_thread_and_shows_its_figures(panel):
    preset = stacklab.resolve(stacklab.get_task("reverse").preset(), ["B", 16],
                              input_dtype="int64")
    assert f"Parameters: {preset.param_count:,}" in panel._report.value and panel.status == "ready"
    panel.set(seed=3, steps=80)
    assert panel.train() is True
    assert panel.status == "running" and panel._train_button.disabled  # returns at once
    run = panel.wait(120)
    assert run.status == "finished" and run.step == 80 and run.config.seed == 3
    assert panel.status == "finished" and f"key <code>{run.key}</code>" in panel._status.value
    titles = [figure.layout.title.text for figure in panel.figures]
    assert titles[0] == "Training curves" and titles[1].startswith("Attention by position alone")
    assert len(panel._figures.outputs) == 2  # the panel shows them
    assert panel.store.load(run.key).final == run.final  # in the store: the app opens it by key


def test_stop_ends_the_panel_run_within_a_step(panel):
    panel.set(steps=100_000, target_accuracy=None)
    panel.train()
    deadline = time.monotonic() + 30
    while panel._trainer.run_state is None or panel._trainer.run_state.step < 3:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    panel.stop()
    run = panel.wait(30)
    assert run.status == "stopped" and run.step < 100_000 and panel.status == "stopped"
    assert not panel._train_button.disabled and panel._stop_button.disabled


def test_the_panel_resolves_as_you_type_and_explains_errors(panel):
    panel.source = "embedding(16, 64)\npos_embed(8)\nattention(4)\nlinear(16)"
    report = panel._report.value
    assert "E_CONSTRAINT" in report and "^" in report and "fix:" in report
    assert panel.train() is False and panel.status == "cannot start"
    assert "E_CONSTRAINT" in panel._status.value
    hand_written = panel.source
    panel.set(task="lookback")  # a hand-written stack stays, and so do the settings (as in the app)
    assert panel.source == hand_written and panel.config().steps == 60
    panel.source = TASKS["lookback"].preset(16)
    panel.set(task="modular")  # the task's preset follows, and resolves
    assert "pos_embed(64)" in panel.source and "Parameters:" in panel._report.value
    panel.set(target_accuracy="2")
    assert panel.train() is False and "E_ARG" in panel._status.value


def test_the_panel_follows_a_new_task_or_t_by_the_apps_rule(panel):
    """One rule (`preset_changes`) for the panel and the app's pages."""
    from stacklab.serve.links.experiment import DEFAULT

    panel.set(seq_len=20)  # the preset stack follows T
    assert panel.source == TASKS["reverse"].preset(20) and "Parameters:" in panel._report.value
    panel.set(task="modular")  # and a new task brings its preset and settings
    app = DEFAULT.changes_for("task", "modular")
    assert panel.source == app["stack"]
    config = panel.config()
    for name in ("seq_len", "steps", "batch_size", "lr", "target_accuracy"):
        assert getattr(config, name) == app[name], name


def test_lab_the_panels_old_name_still_works_and_warns_once(monkeypatch):
    """``stacklab.notebook.Lab`` is `Panel` (renamed: three things were called "lab"); the
    first use warns, with the new name, and later ones are quiet."""
    import warnings

    from stacklab import notebook

    if "Lab" in vars(notebook):
        monkeypatch.delitem(vars(notebook), "Lab")  # as in a fresh process
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # a repeat would be shown: none is
        from stacklab.notebook import Lab

        assert Lab is notebook.Panel and notebook.Lab is notebook.Panel
    assert [(w.category, w.filename) for w in caught] == [(DeprecationWarning, __file__)]
    assert "stacklab.notebook.Panel" in str(caught[0].message)
    assert "Lab" not in notebook.__all__ and "Panel" in notebook.__all__
    with pytest.raises(AttributeError, match="no attribute 'Lob'"):
        notebook.Lob


def test_train_outside_jupyter_is_the_librarys():
    run = stacklab.train(task="position", steps=10, live=True)  # no kernel: nothing shown
    assert run.status == "finished" and run.step == 10
    with pytest.raises(stacklab.StackError, match="no run"):
        stacklab.open_run("0" * 32)


def test_real_models_notebook_reads_each_layout_and_a_rotary_config(tmp_path):
    outputs = execute("real-models.ipynb", tmp_path)
    text = text_of(outputs)
    assert "transformer.wpe.weight [1024, 768], layout gpt2, all 1024 rows" in text
    assert "bert.embeddings.position_embeddings.weight [512, 256], layout bert" in text
    assert "top 3 components explain" in text and "position_probe_error" in text
    plain, scaled = (float(re.search(f"{line}: similarity at offset 8192 = ([-\\d.]+)", text)[1])
                     for line in ("no scaling", "llama3 ×8"))
    assert scaled > plain  # the scaling slows the turning of the slow pairs
    assert len(figures_of(outputs)) == 4


def test_the_panel_opens_a_lesson_step_trains_it_and_checks_its_claim(tmp_path):
    from stacklab import StackError
    from stacklab.lab.lessons import LESSONS
    from stacklab.lab.runs.store import RunStore
    from stacklab.notebook import Panel

    step = LESSONS["positions"].steps[0]  # attention without positions stays near chance
    panel = Panel.lesson("positions", 1, store=RunStore(tmp_path))
    assert panel.step is step and panel.source == step.source and "pos_embed" not in panel.source
    assert panel.config().filled() == step.config.filled()  # every control holds the step's
    assert "step 1 of 3" in panel.widget.children[0].value and step.question in \
        panel.widget.children[0].value
    with pytest.raises(StackError, match="no finished run"):
        panel.check()
    assert panel.train() is True
    panel.wait(180)
    held, value, sentence = panel.check()
    assert held and value <= 0.3 and "expected at most 0.3" in sentence
    with pytest.raises(StackError, match="steps 1 to 3"):
        Panel.lesson("positions", 7)
    with pytest.raises(StackError, match="not opened on a lesson step"):
        Panel(task="reverse").check()
