"""AppTest for every page: links, live resolve, errors, layer edits, training, isolation."""

from __future__ import annotations

import ast
import json
import os
import time
import zlib
from pathlib import Path

from streamlit.testing.v1 import AppTest

from stacklab.lab.tasks import TASKS

ROOT = Path(__file__).parent.parent
APP = str(ROOT / "app.py")
STEM = "embedding(500, 16)\npos_embed(32)\nlinear(4)"


def app(**query) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    for key, value in query.items():
        at.query_params[key] = value
    return at.run()


def codes(at) -> list[str]:
    return [c.value for c in at.code]


def wait_for_run(at, timeout=90.0) -> str:
    """Rerun the Train page (as its poller does) until the job has ended; its status word."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        at.run()
        text = " ".join(m.value for m in [*at.info, *at.success, *at.warning, *at.error])
        for word in ("finished", "stopped", "diverged", "failed"):
            if f"Status: **{word}**" in text:
                return word
        time.sleep(0.2)
    raise AssertionError("the run did not end")


def _imports(path: Path) -> list[tuple[str, str | None]]:
    """``(module, name)`` for every import in ``path`` (name None for ``import module``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found += [(node.module or "", alias.name) for alias in node.names]
    return found


def _library_reaches(path: Path) -> list[str]:
    """What ``path`` imports of stacklab that is not its public API (`stacklab.__all__` and
    the modules ``stacklab.figures`` and the like)."""
    import stacklab

    public = set(stacklab.__all__) | set(stacklab._MODULES)
    return [f"{module}.{name}" if name else module for module, name in _imports(path)
            if module.split(".")[0] == "stacklab"
            and (module != "stacklab" or (name is not None and name not in public))]


PAGES = sorted((ROOT / "views").glob("*.py"))
PARTS = sorted((ROOT / "parts").rglob("*.py"))  # the pages' parts (parts/, parts/classroom/)
PAGE_IMPORTS = ("streamlit", "stacklab", "ui", "parts", "hashlib", "html", "json", "zlib",
                "__future__")


def _page_problems(page: Path) -> list[str]:
    """How ``page`` (a page or a page's part) goes around `ui`: an import of the library's
    internals (they are `ui.library`'s), of anything but streamlit, `stacklab`, `ui` and the
    pages' parts, or a use of ``st.session_state`` (a page's own values live in a
    `ui.session.PageState`)."""
    problems = _library_reaches(page)
    problems += [m for m, _ in _imports(page) if m.split(".")[0] not in PAGE_IMPORTS]
    return problems + (["session_state"] if "session_state" in page.read_text("utf-8") else [])


def test_pages_use_the_library_and_session_state_only_through_ui():
    """A page and a page's part import `stacklab`'s public names, `ui` and the pages' parts,
    and never touch ``st.session_state``; of `ui`, only `ui.library` reaches into the library."""
    checked = {str(path.relative_to(ROOT)): _page_problems(path) for path in PAGES + PARTS}
    assert checked == {name: [] for name in checked}
    for module in sorted((ROOT / "ui").glob("*.py")):
        if module.name != "library.py":
            assert not _library_reaches(module), (module.name, _library_reaches(module))


def test_the_page_check_sees_a_page_that_goes_around_ui(tmp_path):
    page = tmp_path / "bad.py"
    page.write_text("import os\nimport streamlit as st\nfrom stacklab.core.resolve import bind_args\n"
                    "from stacklab import resolve, figures, _MODULES\n"
                    "st.session_state['x'] = 1\n")
    assert _page_problems(page) == ["stacklab.core.resolve.bind_args", "stacklab._MODULES", "os",
                                    "session_state"]


def test_no_pages_folder_next_to_the_app():
    """With a pages/ folder beside app.py, Streamlit (`PagesManager.uses_pages_directory`)
    runs a page file instead of app.py for a direct link (app.py's docstring)."""
    assert not (Path(APP).parent / "pages").exists()


# --- Build ---------------------------------------------------------------------------


def test_build_link_shows_the_reference_report():
    at = app(stack=STEM, input="B,12", input_dtype="int64")
    assert not at.exception
    assert at.title[0].value == "Build"
    assert any(c.endswith("Parameters: 8,580") for c in codes(at))
    assert at.metric[0].value == "8,580"
    assert at.text_area(key="build_stack").value == STEM


def test_build_live_resolve_and_error_at_its_line():
    at = app(stack=STEM, input="B,12", input_dtype="int64")
    at.text_area(key="build_stack").set_value(STEM.replace("pos_embed(32)", "pos_embed(8)")).run()
    [error] = at.error
    assert "E_CONSTRAINT" in error.value and "Fix:" in error.value
    assert any("> 2 | pos_embed(8)" in c and "^" in c for c in codes(at))
    assert at.query_params["stack"] == STEM.replace("pos_embed(32)", "pos_embed(8)")
    at.text_input(key="build_input").set_value("B,T").run()
    assert not at.error and any("Requires: T <= 8" in c for c in codes(at))


def test_build_presets_layers_and_export():
    at = app().switch_page("views/build.py").run()  # Home is the first page
    labels = at.selectbox(key="build_preset").options
    assert any("Reference" in label for label in labels) and any("reverse" in label for label in labels)
    at.selectbox(key="build_preset").select(labels[1]).run()
    assert at.text_area(key="build_stack").value == "pos_embed(64)\nlinear(8)"
    assert any(c.endswith("Parameters: 296") for c in codes(at))
    at.button(key="build_down_0").click().run()  # move pos_embed below linear
    assert at.text_area(key="build_stack").value == "linear(8)\npos_embed(64)"
    at.button(key="build_remove_1").click().run()
    assert at.text_area(key="build_stack").value == "linear(8)"
    at.selectbox(key="build_add_op").select("relu").run()
    at.button(key="FormSubmitter:build_add-Add").click().run()
    assert at.text_area(key="build_stack").value == "linear(8)\nrelu()"
    assert not any("class Net(nn.Module)" in c for c in codes(at))  # made once opened
    at.session_state["build_export"] = True  # the "Plain PyTorch code" panel, opened
    at.run()
    assert any("class Net(nn.Module)" in c for c in codes(at))


def test_build_edit_form_changes_the_arguments():
    at = app(stack="pos_embed(64)\nlinear(8)", input="B,6,4", input_dtype="float32")
    form = f"build_edit_1_{zlib.crc32(b'linear(8)'):x}"
    at.number_input(key=f"{form}_out").set_value(3)
    at.checkbox(key=f"{form}_bias").uncheck()
    at.button(key=f"FormSubmitter:{form}-Apply").click().run()
    assert at.text_area(key="build_stack").value == "pos_embed(64)\nlinear(3, bias=false)"


BRANCH = ("tok = embedding(32, 16)\nx0 = pos_embed(16)\nlayer_norm()\n"
          "h1 = attention(2, causal=true, residual=false)\nx1 = add(x0, h1)\nlinear(8)")


def test_build_draws_a_branching_stack_as_a_graph_with_its_inputs_column():
    at = app(stack=BRANCH, input="B,16", input_dtype="int64")
    assert not at.exception and not at.error
    report = next(c for c in codes(at) if c.startswith("Network: "))
    assert report.splitlines()[1].endswith("inputs") and "x0, h1" in report
    [graph] = at.get("graphviz_chart")
    assert '"x0" -> "x1"' in graph.proto.spec and '"h1" -> "x1"' in graph.proto.spec
    chain = app(stack=STEM, input="B,12", input_dtype="int64")
    assert chain.get("graphviz_chart") and "inputs" not in codes(chain)[-1]


def test_build_adds_an_add_row_that_reads_names_from_above():
    stack = "tok = embedding(32, 16)\nx0 = pos_embed(16)\nh1 = attention(2, residual=false)"
    at = app(stack=stack, input="B,16", input_dtype="int64")
    assert not at.error  # h1 is the last line: the network's output
    at.selectbox(key="build_add_op").select("add").run()
    a, b = (at.selectbox(key=f"build_add_add_{name}") for name in "ab")
    assert a.options == ["tok", "x0", "h1"] and (a.value, b.value) == ("x0", "h1")
    a.select("x0")
    at.text_input(key="build_add_name").set_value("x1")
    at.button(key="FormSubmitter:build_add-Add").click().run()
    assert at.text_area(key="build_stack").value == stack + "\nx1 = add(x0, h1)"
    assert not at.error, at.error
    form = f"build_edit_3_{zlib.crc32(b'x1 = add(x0, h1)'):x}"
    assert at.selectbox(key=f"{form}_a").options == ["tok", "x0", "h1"]
    at.selectbox(key=f"{form}_a").select("tok")
    at.button(key=f"FormSubmitter:{form}-Apply").click().run()
    assert at.text_area(key="build_stack").value == stack + "\nx1 = add(tok, h1)"


def test_bad_link_values_are_reported_not_crashed():
    at = app(stack="relu(", input="B,,12", seq_len="zero", input_dtype="int8", hide="stack,bogus")
    assert not at.exception
    warning = at.warning[0].value
    assert "seq_len='zero'" in warning and "input_dtype='int8'" in warning and "bogus" in warning
    assert at.error  # the stack itself is reported as an E_PARSE, on the page
    assert not [t for t in at.text_area if t.key == "build_stack"]  # hidden by the link


def test_hide_pins_the_teachers_choices():
    at = app(stack=STEM, input="B,12", input_dtype="int64", hide="stack,input,presets,layers")
    keys = {w.key for w in [*at.text_area, *at.text_input, *at.selectbox]}
    assert "build_stack" not in keys and "build_input" not in keys and "build_preset" not in keys
    assert any(c.endswith("Parameters: 8,580") for c in codes(at))


# --- Train, Explore, Catalog -----------------------------------------------------------


def test_train_page_fit_error_preset_and_a_full_run():
    at = app(task="modular", steps="60")  # a task link with no stack gets the task's preset
    at.switch_page("views/train.py").run()
    assert not at.exception and at.title[0].value == "Train"
    assert not at.error
    at.button(key="train_train").click().run()
    assert wait_for_run(at) == "finished"
    assert at.get("plotly_chart")  # the curves
    at.switch_page("views/explore.py").run()
    assert not at.exception
    titles = [s.value for s in at.subheader]
    assert "Cosine similarity of the rows" in titles and "Gradient per row" in titles
    assert "Length probe" in titles


def test_train_page_explains_a_stack_that_does_not_fit():
    at = app(stack=STEM, input="B,12", input_dtype="int64", task="reverse", seq_len="16")
    at.switch_page("views/train.py").run()
    [error] = at.error
    assert "use linear(16)" in error.value
    assert at.button(key="train_train").disabled
    at.button(key="train_use_preset").click().run()
    assert not at.error and not at.button(key="train_train").disabled
    assert "pos_embed" in at.query_params["stack"]


def test_stop_ends_a_run():
    # no target accuracy: the preset reaches its target in a fraction of a second
    at = app(task="reverse", steps="100000", target_accuracy="none")
    at.switch_page("views/train.py").run()
    at.button(key="train_train").click().run()
    time.sleep(0.5)
    at.button(key="train_stop").click().run()
    assert wait_for_run(at) == "stopped"


def test_two_sessions_do_not_see_each_others_runs():
    first = app(task="position", steps="40")
    first.switch_page("views/train.py").run()
    first.button(key="train_train").click().run()
    assert wait_for_run(first) == "finished"
    second = app(task="position", steps="40")
    second.switch_page("views/explore.py").run()
    assert "No finished run yet" in second.info[0].value
    second.switch_page("views/train.py").run()
    assert "No run yet" in second.info[0].value


def test_explore_without_a_run_points_to_train():
    at = app()
    at.switch_page("views/explore.py").run()
    assert not at.exception and "Train one first" in at.info[0].value


def test_catalog_shows_every_op_page_resolved_live():
    at = app()
    at.switch_page("views/catalog.py").run()
    assert not at.exception and at.title[0].value == "Catalog"
    box = at.selectbox(key="catalog_op")
    box.select("pos_embed").run()
    page = at.markdown[-1].value
    assert "Identity: pos_embed@1" in page and "Parameters: 8,580" in page
    tasks = at.dataframe[0].value  # every task, the induction pair included, with its preset
    assert list(tasks["task"]) == list(TASKS)
    induction = tasks[tasks["task"] == "induction"].iloc[0]
    assert induction["pattern score"] == "induction" and induction["T"] == 16
    assert induction["preset"].count("attention(4, causal=true)") == 2


# --- things a first review of the app found ------------------------------------------


def test_first_visit_to_train_can_train_at_once():
    at = app()
    at.switch_page("views/train.py").run()
    assert not at.error and not at.button(key="train_train").disabled


def test_link_values_outside_the_controls_are_reported_not_clamped():
    at = app(task="position", steps="200000", batch_size="5000", seed="3000000000")
    warning = at.warning[0].value
    assert "steps='200000'" in warning and "batch_size='5000'" in warning
    assert "seed='3000000000'" in warning
    at.switch_page("views/train.py").run()
    assert at.number_input(key="train_steps").value == 200  # the task's default, not 1


def test_a_run_too_big_for_the_classroom_is_refused_before_it_starts():
    at = app(task="reverse", seq_len="512", batch_size="1024")
    at.switch_page("views/train.py").run()
    [error] = at.error
    assert "E_BUDGET" in error.value and "batch_size" in error.value
    assert at.button(key="train_train").disabled


def test_switching_task_or_length_follows_the_preset():
    at = app()
    at.switch_page("views/train.py").run()
    at.selectbox(key="train_task").select("modular").run()
    assert not at.error and at.number_input(key="train_seq_len").value == 32
    assert "linear(8)" in at.query_params["stack"] and at.query_params["input"] == "B,32"
    at.number_input(key="train_seq_len").set_value(20).run()
    assert "pos_embed(40)" in at.query_params["stack"] and at.query_params["input"] == "B,20"


def test_hidden_controls_show_their_pinned_values():
    at = app(task="reverse", hide="task,steps")
    at.switch_page("views/train.py").run()
    assert "Set by the link: task = reverse, steps = 400" in at.caption[0].value


def test_choosing_a_preset_again_restores_it_and_added_ops_follow_each_other():
    at = app().switch_page("views/build.py").run()  # Home is the first page
    labels = at.selectbox(key="build_preset").options
    shift = next(label for label in labels if label.startswith("Task shift"))
    at.selectbox(key="build_preset").select(shift).run()
    preset = at.text_area(key="build_stack").value
    at.text_area(key="build_stack").set_value("pos_embed(3)").run()
    at.selectbox(key="build_preset").select(shift).run()
    assert at.text_area(key="build_stack").value == preset
    at.text_area(key="build_stack").set_value("linear(4)").run()
    for op in ("relu", "gelu"):
        at.selectbox(key="build_add_op").select(op).run()
        at.button(key="FormSubmitter:build_add-Add").click().run()
    assert at.text_area(key="build_stack").value == "linear(4)\nrelu()\ngelu()"


def test_a_diverged_run_is_explained_on_explore():
    at = app(task="position", lr="10", steps="200",
             stack="embedding(16, 32)\npos_embed(32)\nlinear(16)", dtype="float16")
    at.switch_page("views/train.py").run()
    at.button(key="train_train").click().run()
    assert wait_for_run(at) == "diverged"
    at.switch_page("views/explore.py").run()
    assert not at.exception
    assert "smaller lr" in at.warning[0].value


def test_train_submits_the_values_on_screen():
    at = app(task="position", steps="300")
    at.switch_page("views/train.py").run()
    at.number_input(key="train_steps").set_value(40)
    at.button(key="train_train").click().run()  # no rerun between the edit and the click
    assert wait_for_run(at) == "finished"
    assert "40 steps" in at.success[0].value


def test_pinned_values_survive_other_controls():
    at = app(task="reverse", seq_len="24", hide="seq_len")
    at.switch_page("views/train.py").run()
    at.selectbox(key="train_task").select("modular").run()
    assert at.query_params["seq_len"] == "24"


def test_layer_buttons_apply_to_the_text_as_it_is():
    at = app(stack="linear(8)\nlinear(4)", input="B,6", input_dtype="float32")
    at.text_area(key="build_stack").set_value("linear(8)\nlinear(4)\nrelu()")
    at.button(key="build_down_0").click().run()
    assert at.text_area(key="build_stack").value == "linear(4)\nlinear(8)\nrelu()"


# --- Shared runs (one link, one run) ----------------------------------------------------

LONG_LINK = dict(task="reverse", steps="20000", target_accuracy="none", seed="41")


def live_text(at) -> str:
    """What a live run's view says (`ui.live_run`: a component the browser draws, whose data
    holds its words)."""
    return " ".join(json.loads(c.proto.json).get("text", "") for c in at.get("bidi_component")
                    if c.proto.component_name == "stacklab.live_run")


def status_text(at) -> str:
    return " ".join([*(m.value for m in [*at.info, *at.success, *at.warning, *at.error]),
                     live_text(at)])


def test_two_sessions_on_one_link_share_one_training_and_stop_detaches():
    first = app(**LONG_LINK)
    first.switch_page("views/train.py").run()
    first.button(key="train_train").click().run()
    key = first.query_params["run"]
    assert len(key) == 32
    second = app(**LONG_LINK)
    second.switch_page("views/train.py").run()
    second.button(key="train_train").click().run()
    assert second.query_params["run"] == key  # the same run, not a second training
    second.run()
    assert "shared with 1 other session" in status_text(second)
    first.button(key="train_stop").click().run()  # one of two watchers stops: it detaches
    assert "stopped" in status_text(first) and "goes on for the others" in status_text(first)
    second.run()
    assert "Status: **running**" in status_text(second)
    second.button(key="train_stop").click().run()  # the last watcher: the run stops
    assert wait_for_run(second) == "stopped"


def test_a_reload_reattaches_and_a_fresh_session_opens_the_stored_run():
    first = app(task="position", steps="60", seed="5")
    first.switch_page("views/train.py").run()
    first.button(key="train_train").click().run()
    key = first.query_params["run"]
    reloaded = app(task="position", steps="60", seed="5", run=key)  # a reload: a new session
    reloaded.switch_page("views/train.py").run()
    assert not reloaded.warning or "run=" not in reloaded.warning[0].value
    assert wait_for_run(reloaded) == "finished" and reloaded.query_params["run"] == key
    # /explore?run=KEY&hide=, in a browser session that never trained (issue 30: run=KEY
    # alone is a class link that pins everything, the student view; hide= opens them)
    fresh = app(run=key, hide="")
    fresh.switch_page("views/explore.py").run()
    assert not fresh.exception
    titles = [s.value for s in fresh.subheader]
    assert "Cosine similarity of the rows" in titles and "Training curves" in titles
    # a run this session did not train is named as the link's, never "Your latest run"
    assert "The run of the link you opened (trained by whoever shared it): task **position**" \
        in fresh.markdown[0].value


def test_unknown_malformed_evicted_and_damaged_runs_are_reported_not_crashed():
    import os
    from pathlib import Path

    from stacklab.lab.runs.store import RunStore

    for raw, words in (("0" * 32, "not on this server"), ("../../etc/passwd", "not a run key"),
                       ("<b>x</b>" * 20, "not a run key")):
        at = app(run=raw)  # the first page says what was wrong with the link
        assert not at.exception and words in at.warning[0].value, raw
        at.switch_page("views/explore.py").run()
        assert not at.exception and "Train one first" in at.info[0].value
    store = RunStore(os.environ["STACKLAB_RUNS"])
    first = app(task="modular", steps="30", seed="9")
    first.switch_page("views/train.py").run()
    first.button(key="train_train").click().run()
    assert wait_for_run(first) == "finished"
    key = first.query_params["run"]
    assert key in store
    (Path(store.root) / key / "run.json").write_text('{"format": "damaged')  # a damaged entry
    damaged = app(run=key)
    damaged.switch_page("views/explore.py").run()
    assert not damaged.exception  # served from the server's memory, or reported
    evicted = RunStore(store.root, max_bytes=0)
    evicted.evict()
    assert key not in evicted


# --- Compare -------------------------------------------------------------------------


def test_compare_without_runs_says_how_to_start():
    at = app()
    at.switch_page("views/compare.py").run()
    assert not at.exception and "Pick runs above" in at.info[0].value


def test_a_compare_link_preloads_stored_runs_side_by_side():
    import stacklab
    from stacklab.lab.runs.store import RunStore

    store = RunStore()  # the suite's STACKLAB_RUNS, which the app's pool uses too
    learned = stacklab.train(task="shift", steps=30)
    rope = stacklab.train('embedding(16, 64)\nattention(4, causal=true, position="rope")\n'
                          "layer_norm()\nlinear(16)", task="shift", steps=30)
    for run in (learned, rope):
        store.save(run)
    at = app(compare=f"{learned.key},{rope.key},nonsense")
    assert "nonsense" in at.warning[0].value and "not a run key" in at.warning[0].value
    at.switch_page("views/compare.py").run()
    assert not at.exception
    table = at.dataframe[0].value
    assert list(table["encoding"]) == ["pos_embed", "rope"]
    assert list(table["key"]) == [learned.key[:12], rope.key[:12]]
    titles = [h.value for h in at.subheader]
    assert "Training curves" in titles and "Attention by position alone" in titles  # aligned
    assert at.query_params["compare"] in (f"{learned.key},{rope.key}", [f"{learned.key},{rope.key}"])
    at.multiselect(key="compare_pick").unselect(learned.key).run()
    assert list(at.dataframe[0].value["encoding"]) == ["rope"]
    assert at.query_params["compare"] in (rope.key, [rope.key])
    # a key added by its first 8 characters joins the list, and picking keeps the others
    at.text_input(key="compare_keys").input(learned.key[:8]).run()
    assert at.multiselect(key="compare_pick").value == [rope.key, learned.key]
    at.multiselect(key="compare_pick").unselect(rope.key).run()
    assert list(at.dataframe[0].value["encoding"]) == ["pos_embed"]


def test_compare_in_present_mode_shows_runs_side_by_side_from_their_key_starts():
    """view=present on Compare (issue 30): the 8-character keys the app shows are taken by a
    compare= link, and the runs' figures come one at a time, side by side, large."""
    import json

    import stacklab
    from stacklab.lab.runs.store import RunStore

    store = RunStore()
    learned = stacklab.train(task="shift", steps=30, seed=11)
    rope = stacklab.train('embedding(16, 32)\nattention(2, causal=true, position="rope")\n'
                          "layer_norm()\nlinear(16)", task="shift", steps=30, seed=11)
    for run in (learned, rope):
        store.save(run)
    at = app(compare=f"{learned.key[:8]},{rope.key[:8]}", view="present")
    assert not at.warning, [w.value for w in at.warning]
    at.switch_page("views/compare.py").run()
    assert not at.exception and not at.dataframe and not at.multiselect  # no settings
    assert at.query_params["compare"] in (f"{learned.key},{rope.key}",
                                          [f"{learned.key},{rope.key}"])
    at.button(key="present_next").click().run()  # past the one plot of both runs' curves
    for _ in range(12):
        if "Attention by position alone" in " ".join(m.value for m in at.markdown):
            break
        at.button(key="present_next").click().run()
    charts = at.get("plotly_chart")
    assert len(charts) == 2  # the two runs, side by side
    for chart in charts:
        layout = json.loads(chart.proto.spec)["layout"]
        assert layout["xaxis"]["tickfont"]["size"] >= 18
        assert layout["title"]["text"].count("<br>") <= 1  # at most two lines
    bad = app(compare="2f79848c", view="present")
    assert "compare=2f79848c is not on this server" in bad.warning[0].value


def test_a_rope_stack_with_eval_lengths_trains_from_the_train_page():
    rope = ('embedding(16, 64)\nattention(4, causal=true, position="rope")\nlayer_norm()\n'
            "linear(16)")
    at = app(stack=rope, input="B,16", input_dtype="int64", task="shift", seq_len="16",
             steps="60")
    at.switch_page("views/train.py").run()
    at.text_input(key="train_eval_lengths").input("32, 16").run()
    assert "32" in str(at.query_params["eval_lengths"])  # in the link
    at.button(key="train_train").click().run()
    assert wait_for_run(at) == "finished"
    at.switch_page("views/explore.py").run()
    assert not at.exception
    titles = [s.value for s in at.subheader]
    assert "Length generalization" in titles and "Attention score by offset" in titles
    scores = " ".join(m.value for m in at.markdown)
    assert "length 32" in scores and "partner attention" in scores


def wait_for_table(at, timeout=120.0):
    """Rerun Explore (as its poller does) while a worker analyses the table."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        at.run()
        if not at.get("progress"):  # the progress bar goes when the analysis ends
            return at
        time.sleep(0.3)
    raise AssertionError("the table's analysis did not end")


def test_an_uploaded_file_is_parsed_once_not_on_every_rerun():
    """Issue 28: a safetensors upload of many tensors was parsed again on every rerun. The
    list of its tensors is kept in the session by the file's hash and reused while the file
    stays; another file is parsed anew. (At most `MAX_LISTED` of its tensors are offered:
    the bound issue 28 asked for; this test once expected all 300.)"""
    import hashlib

    import numpy as np
    from safetensors.numpy import save

    from stacklab.lab.reports.table_file import MAX_LISTED

    rng = np.random.default_rng(0)
    data = save({f"layer{i}.wpe": rng.normal(size=(16, 8)).astype("float32") for i in range(300)})
    at = app()
    at.switch_page("views/explore.py").run()
    at.file_uploader(key="explore_upload").upload("tables.safetensors", data).run()
    assert not at.exception and not at.error
    kept = at.session_state["explore_upload_names"]
    assert kept[0][0] == hashlib.sha256(data).hexdigest() and len(kept[1]) == MAX_LISTED
    at.selectbox(key="explore_upload_key").select("layer10.wpe").run()
    wait_for_table(at)
    assert at.session_state["explore_upload_names"] is kept  # not parsed again
    assert "Table of shape **[16, 8]**" in " ".join(m.value for m in at.markdown)
    other = save({"wpe": rng.normal(size=(16, 8)).astype("float32"),
                  "wte": rng.normal(size=(16, 8)).astype("float32")})
    at.file_uploader(key="explore_upload").set_value(("gpt.safetensors", other, "")).run()
    assert at.session_state["explore_upload_names"][1] == ["wpe", "wte"]


# --- Home, Learn and the glossary (SPEC §21) ---------------------------------------------


def texts(at) -> str:
    return " ".join(e.value for e in [*at.markdown, *at.info, *at.success, *at.warning,
                                      *at.error])


def test_home_is_the_first_page_and_its_button_trains_reverse_live():
    at = app()
    assert not at.exception and at.title[0].value == "stacklab"
    assert dict(at.query_params) == {}  # Home's address holds no experiment
    words = texts(at)
    assert "Learn" in words and "Share with the class" in words and "jupyter lab" in words
    # The preset trains in under a second, faster than a rerun: to see the button while the
    # run is active, every worker is first kept busy by a session training without end, so
    # the run waits in the queue; then those sessions stop.
    blockers = []
    for seed in range(int(os.environ.get("STACKLAB_WORKERS", os.cpu_count() or 1))):
        blocker = app(task="reverse", steps="100000", target_accuracy="none", seed=str(100 + seed))
        blocker.switch_page("views/train.py").run()
        blockers.append(blocker.button(key="train_train").click().run())
    at.button(key="home_train").click().run()
    assert at.button(key="home_train").disabled  # one run at a time
    for blocker in blockers:
        blocker.button(key="train_stop").click().run()
    deadline = time.monotonic() + 120
    while "Finished in" not in texts(at) and time.monotonic() < deadline:
        time.sleep(0.3)
        at.run()
    assert "Finished in" in texts(at) and "held-out accuracy" in texts(at)
    assert "Attention by position alone" in texts(at) and at.get("plotly_chart")
    at.switch_page("views/train.py").run()  # the run is the session's: Train shows it
    assert "Status: **finished**" in texts(at) and at.query_params["task"] == "reverse"


def test_an_old_link_to_the_first_page_opens_build_and_home_stays_reachable():
    at = app(stack=STEM, input="B,12", input_dtype="int64")
    assert at.title[0].value == "Build" and at.query_params["stack"] == STEM
    at.switch_page("views/home.py").run()  # the session's own visit to Home stays there
    assert at.title[0].value == "stacklab"
    lesson = app(lesson="positions", step="3")  # a lesson's link at / opens Learn
    assert lesson.title[0].value == "Learn" and lesson.header[0].value.startswith("Why")


def lesson_page(**query) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    for key, value in query.items():
        at.query_params[key] = value
    return at.switch_page("views/learn.py").run()


def test_a_lesson_step_asks_first_then_runs_and_explains():
    at = lesson_page(lesson="positions", step="2")
    assert not at.exception and at.header[0].value == "Why a transformer needs positions"
    assert "Add a position table" in at.get("progress")[0].proto.text
    assert at.button(key="learn_run").disabled  # predict first
    [predict] = at.radio
    assert predict.options == ["below 0.9", "at least 0.9"]
    assert "held-out accuracy" in predict.label
    at.text_input(key="learn_guess").set_value("it learns now").run()
    predict.set_value("below 0.9").run()
    at.button(key="learn_run").click().run()
    deadline = time.monotonic() + 120
    while not (at.success or at.warning) and time.monotonic() < deadline:
        time.sleep(0.3)
        at.run()
    [outcome] = at.success  # the step's condition, checked on the run: it holds
    assert "held-out accuracy" in outcome.value and "expected at least 0.9" in outcome.value
    words = texts(at)
    assert "**not this time**" in words and "**Why.**" in words and "Try this next" in words
    assert "You wrote: *it learns now*" in words
    assert "**Training curves**" in texts(at) and at.get("plotly_chart")
    assert any(e.label.startswith("Terms: held-out accuracy") for e in at.expander)
    at.button(key="learn_next").click().run()
    assert dict(at.query_params) == {"lesson": "positions", "step": "3"}
    assert at.radio[0].value is None and not at.success  # a new step asks again
    at.button(key="learn_previous").click().run()
    assert at.radio[0].value == "below 0.9" and at.success  # kept per step
    assert at.text_input(key="learn_guess").value == "it learns now"


def test_a_class_on_one_step_trains_its_experiment_once():
    """Two sessions on one lesson step share its run: the pool keeps one job per run key."""
    first, second = (lesson_page(lesson="table-patterns", step="2") for _ in range(2))
    for at in (first, second):
        at.radio[0].set_value(at.radio[0].options[1]).run()
        at.button(key="learn_run").click().run()
    jobs = [at.session_state["learn_jobs"][("table-patterns", 2)] for at in (first, second)]
    assert jobs[0] == jobs[1]
    second.run()
    assert "shared with 1 other session" in texts(second)


def test_bad_lesson_links_are_reported_and_open_what_they_can():
    at = lesson_page(lesson="positions", step="9")
    assert "steps 1 to 3" in at.error[0].value and dict(at.query_params)["step"] == "1"
    at = lesson_page(lesson="posittions")
    assert "did you mean positions" in at.warning[0].value
    assert [b.key for b in at.button if b.key.startswith("learn_start_")][:1] == [
        "learn_start_positions"]  # the list of lessons


def test_the_glossary_is_the_help_of_controls_and_a_section_of_learn():
    from stacklab.lab.glossary import GLOSSARY

    at = app().switch_page("views/train.py").run()
    weight_decay = at.number_input(key="train_weight_decay").help
    assert GLOSSARY["weight decay"].definition in weight_decay
    assert GLOSSARY["T"].definition in at.number_input(key="train_seq_len").help
    assert GLOSSARY["T"].definition not in at.number_input(key="train_lr").help
    learn = lesson_page()
    section = texts(learn)
    assert all(term.definition.split(":")[0][:40] in section for term in GLOSSARY.values())


# --- Explore's real-model section (issues 28 and 31) ---------------------------------------


def _models_folder(root: Path) -> Path:
    """An operator's models folder: a GPT-2-layout checkpoint and a rotary (Llama) one."""
    import json

    import torch
    from safetensors.torch import save_file

    from stacklab.lab.reports.table_file import gpt2_like_table

    (root / "gpt2").mkdir(parents=True)
    (root / "gpt2" / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    save_file({"transformer.wpe.weight": gpt2_like_table(64, 16),
               "transformer.wte.weight": torch.randn(100, 16)}, root / "gpt2" / "model.safetensors")
    (root / "llama").mkdir()
    (root / "llama" / "config.json").write_text(json.dumps({
        "model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
        "max_position_embeddings": 128, "rope_theta": 10000.0,
        "rope_scaling": {"rope_type": "linear", "factor": 2.0}}))
    save_file({"model.embed_tokens.weight": torch.randn(10, 64)}, root / "llama" / "model.safetensors")
    return root


def test_explore_reads_a_model_of_the_allowed_folder(tmp_path, monkeypatch):
    """Issue 31: a model the operator allows is picked on the page, read and drawn by a
    worker, its files offered named after its table; no stale run text under it; the
    server's path is not shown; a rotary model gives the offset figure."""
    monkeypatch.setenv("STACKLAB_MODELS_DIR", str(_models_folder(tmp_path / "models")))
    at = app()
    at.switch_page("views/explore.py").run()
    at.radio(key="explore_source").set_value("a model on this server").run()
    assert [option for option in at.selectbox(key="explore_server_model").options] == [
        "gpt2 (models folder)", "llama (models folder)"]
    wait_for_table(at)
    assert not at.exception and not at.error
    shown = " ".join(m.value for m in at.markdown)
    assert "Table of shape **[64, 16]**" in shown and "monotonicity" in shown
    assert "layout gpt2" in " ".join(c.value for c in at.caption)
    assert str(tmp_path) not in " ".join(c.value for c in [*at.caption, *at.markdown])
    labels = [button.proto.label for button in at.get("download_button")]
    assert labels == ["transformer.wpe.weight-scores.json", "transformer.wpe.weight-report.html"]
    assert "Cosine similarity of the rows" in [s.value for s in at.subheader]
    assert not any("Train one first" in info.value for info in at.info)  # nothing stale below
    at.selectbox(key="explore_server_model").select_index(1).run()
    wait_for_table(at)
    assert not at.error
    titles = [s.value for s in at.subheader]
    assert "What an offset alone gives (rotary and ALiBi)" in titles
    assert "rotary positions" in " ".join(c.value for c in at.caption)


def test_a_refused_upload_says_why_on_the_page_with_the_line_that_extracts_the_table():
    """Issue 31: a refused upload is an error on the page (not the uploader's tooltip),
    with the one line of Python that saves the table alone."""
    at = app()
    at.switch_page("views/explore.py").run()
    at.file_uploader(key="explore_upload").upload("pytorch_model.bin", b"\x80\x04not a table").run()
    wait_for_table(at)
    assert not at.exception
    assert "neither .safetensors nor .npy" in at.error[0].value
    assert any("save_file({'wpe': load_file('model.safetensors')['wpe.weight']}" in c
               for c in codes(at))


def test_a_too_wide_upload_is_refused_by_the_worker_with_e_budget():
    import io

    import numpy as np

    buffer = io.BytesIO()
    np.save(buffer, np.zeros((4, 9000), dtype="float32"))
    at = app()
    at.switch_page("views/explore.py").run()
    at.file_uploader(key="explore_upload").upload("wide.npy", buffer.getvalue()).run()
    wait_for_table(at)
    assert not at.exception and "E_BUDGET" in at.error[0].value
    assert "9,000 wide" in at.error[0].value and "principal components" in at.error[0].value


def test_a_run_whose_checkpoint_is_gone_says_so_instead_of_offering_its_files():
    """Issue 28: a missing model.safetensors made Explore's download button do nothing."""
    import os

    from stacklab.lab.runs.store import RunStore

    first = app(task="position", steps="30", seed="17")
    first.switch_page("views/train.py").run()
    first.button(key="train_train").click().run()
    assert wait_for_run(first) == "finished"
    key = first.query_params["run"]
    store = RunStore(os.environ["STACKLAB_RUNS"])
    deadline = time.monotonic() + 60
    while store.open(key) is None or store.open(key).figures() is None:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    (Path(store.root) / key / "model.safetensors").unlink()
    damaged = app(run=key)
    damaged.switch_page("views/explore.py").run()
    assert not damaged.exception
    assert "E_DAMAGED" in damaged.error[0].value and "model.safetensors" in damaged.error[0].value
    assert not damaged.get("download_button")


def test_a_teacher_presents_a_lesson_and_the_class_follows_the_teachers_step():
    """Presenting a lesson opens a class: its short link (no token in it) beside the slide;
    the teacher's Next moves every student's page; only the teacher's session moves it."""
    from stacklab.serve.classroom.classes import CLASS_ID_CHARS
    from stacklab.serve.links.link_table import CLASS_ID_CHARS as LINK_ID_CHARS

    assert LINK_ID_CHARS == CLASS_ID_CHARS  # the link table reads the ids the classes make
    teacher = lesson_page(lesson="positions", step="1")
    teacher.button(key="learn_present").click().run()
    assert not teacher.exception and teacher.session_state["view"] == "present"
    assert dict(teacher.query_params) == {"lesson": "positions", "step": "1", "view": "present"}
    class_id, token = teacher.session_state["class_id"], teacher.session_state["class_token"]
    [link] = [c.value for c in teacher.code if "class=" in c.value]
    assert link.endswith(f"/learn?class={class_id}") and token not in link
    assert len(link.split("/learn")[1]) <= 60 and teacher.get("image")  # the QR code beside it
    for number in (2, 3):
        teacher.button(key="learn_next").click().run()
        assert teacher.query_params["step"] in (str(number), [str(number)])
    student = lesson_page(**{"class": class_id})
    assert not student.exception and dict(student.query_params) == {"class": class_id}
    assert "Step 3 of 3" in student.get("progress")[0].proto.text
    assert {"learn_next", "learn_previous", "learn_present"}.isdisjoint(b.key for b in student.button)
    third = lesson_page(**{"class": class_id})  # a student who tries to move the class
    assert "class_token" not in third.session_state  # no token: no way to move it
    third.button(key="class_leave").click().run()  # explores on their own: their page only
    third.button(key="learn_previous").click().run()
    assert dict(third.query_params) == {"lesson": "positions", "step": "2"}
    assert "Step 3 of 3" in student.run().get("progress")[0].proto.text  # the class did not move
    third.button(key="class_rejoin").click().run()
    assert "Step 3 of 3" in third.get("progress")[0].proto.text
    teacher.button(key="learn_previous").click().run()
    assert "Step 2 of 3" in student.run().get("progress")[0].proto.text
    teacher.button(key="class_end").click().run()
    assert "has ended" in student.run().warning[0].value and "view" not in teacher.query_params
    bad = lesson_page(**{"class": "../etc"})
    assert any("is not a class id" in w.value for w in bad.warning)
