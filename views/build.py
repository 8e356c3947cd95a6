"""Build: type or click together a stack and see every shape resolved, live."""

import zlib

import streamlit as st

from stacklab import StackError, catalog, export, resolve
from ui import controls, scripts, session, urls
from ui.library import (DTYPES, MAX_STACK_CHARS, PARAM_BUDGET_BYTES, annotate, bind_args,
                    default_node_name, editing, holding, is_branching, presets)
from ui.markdown import plain, show_error
from parts import share_panel

PAGE = "build"
state = session.PageState(PAGE, "preset", "add_position", "add_name", "added", "export")
experiment = urls.start()
st.title("Build")
st.caption("One op per line, `name = op(arg, key=value)`, `#` for comments. Every shape is "
           "resolved before anything runs.")
st.caption(plain(holding(experiment), 600))  # which task and preset it holds
scripts.show_url_problems()
share_panel.build_note()  # a classroom link that pins the stack: why it is read-only
controls.show_pinned(("input", "input_dtype", "dtype"))

PRESETS = presets()


def apply_preset():
    label = state.get("preset")
    if label in PRESETS:
        before = session.experiment()
        urls.update(**PRESETS[label])
        scripts.note_preset_changes(before, label)  # its steps, lr, …: said, not silent
    state["preset"] = None  # so the same preset can be chosen again


def edit_stack(new_source: str) -> None:
    urls.update(stack=new_source)


def edit_layer(operation, *args) -> None:
    """Apply a layer edit to the stack as it is when the button is clicked."""
    try:
        urls.update(stack=operation(session.experiment().stack, *args))
    except (StackError, IndexError):
        pass  # the text changed under the button; the page redraws with the new layers


if not controls.hidden("presets"):
    st.selectbox("Start from a preset", list(PRESETS), index=None, key=state.key("preset"),
                 placeholder="Choose a preset…", on_change=apply_preset)

# The report's rows need ~570 px at 1366 wide; the three boxes share two rows of the left.
left, right = st.columns([4, 7], gap="medium")
with left:
    source = controls.bound(st.text_area, "stack", "Stack", PAGE, height=230,
                             max_chars=MAX_STACK_CHARS)
    if not controls.hidden("stack"):
        st.caption("Press Ctrl+Enter, or click outside the box, to apply an edit.")
    shape_col, input_dtype_col = st.columns(2)
    dtype_col, _ = st.columns(2)
    input_text = controls.bound(shape_col.text_input, "input", "Input shape", PAGE,
                                 help="Sizes and symbols, e.g. B,12 or B,T,16")
    input_dtype = controls.bound(input_dtype_col.selectbox, "input_dtype", "Input dtype", PAGE,
                                  options=list(DTYPES))
    dtype = controls.setting_control(dtype_col, "dtype", PAGE)
    if urls.link_too_long():
        st.caption("This stack is too long to share as a link; the link keeps the other "
                   "settings.")

MAX_GRAPH_NODES = 60  # a longer stack's graph is drawn in the browser too slowly to help
MAX_LAYER_ROWS = 40  # past this, the layer list would cost the browser more than it helps
network = error = None
try:
    network = resolve(source, input_text, input_dtype=input_dtype, dtype=dtype,
                      budget_bytes=PARAM_BUDGET_BYTES)
except StackError as err:
    error = err


def arg_widgets(spec, values: dict, prefix: str, names_above: list[str]) -> dict:
    """A widget per argument of op ``spec``, showing ``values``; the values chosen."""
    chosen = {}
    for number, arg in enumerate(spec.args):
        value = values.get(arg.name, arg.default)
        help_text = arg.description + (f" ({arg.constraints})" if arg.constraints else "")
        if arg.is_reference:  # a node above, by name: the latest ones by default
            fallback = names_above[max(0, len(names_above) - len(spec.args) + number)] \
                if names_above else None
            index = names_above.index(value) if value in names_above else (
                names_above.index(fallback) if fallback is not None else None)
            chosen[arg.name] = st.selectbox(
                arg.name, names_above, index=index, key=f"{prefix}_{arg.name}",
                help=help_text, placeholder="no node above to read")
            continue
        # Only whole numbers get their range: a float's bound may be open (dropout's
        # p < 1), which a number box cannot hold; the resolver explains such a value.
        bounded = arg.type is int
        widget, kwargs = controls.value_widget(
            st, arg.type, help_text, options=arg.choices or None,
            low=arg.minimum if bounded else None, high=arg.maximum if bounded else None)
        if arg.choices:
            kwargs["index"] = arg.choices.index(value) if value in arg.choices else 0
        else:
            kwargs["value"] = arg.type(value)
        chosen[arg.name] = arg.type(widget(arg.name, key=f"{prefix}_{arg.name}", **kwargs))
    return chosen


def layer_rows(calls, names: list[str]) -> None:
    """Each layer: move it, remove it, or change its arguments in a form."""
    ops = catalog()
    for index, call in enumerate(calls):
        row = st.columns([4, 1, 1, 1])
        row[0].markdown(f"`{index}` **{plain(names[index])}** · {plain(call.op)}")
        row[1].button("Up", icon=":material/arrow_upward:", key=f"build_up_{index}",
                      disabled=index == 0, on_click=edit_layer,
                      args=(editing.move_call, index, -1))
        row[2].button("Down", icon=":material/arrow_downward:", key=f"build_down_{index}",
                      disabled=index == len(calls) - 1, on_click=edit_layer,
                      args=(editing.move_call, index, 1))
        row[3].button("Remove", icon=":material/delete:", key=f"build_remove_{index}",
                      on_click=edit_layer, args=(editing.remove_call, index))
        spec = ops.get(call.op)
        if spec is not None and spec.args:
            with st.expander(f"Edit {plain(names[index])}"):
                try:
                    current = dict(bind_args(spec, call))
                except StackError:
                    current = editing.example_values(spec)
                # keyed by content too, so a form never shows another layer's old values
                form_key = f"build_edit_{index}_{zlib.crc32(call.line_text.encode()):x}"
                with st.form(form_key):
                    values = arg_widgets(spec, current, form_key, names[:index])
                    if st.form_submit_button("Apply"):
                        edit_stack(editing.replace_call(
                            source, index, editing.format_call(spec, values, call.name)))
                        st.rerun()


def add_op(calls, names: list[str]) -> None:
    """The form that adds an op at a position (default: after the last layer)."""
    ops = catalog()
    with st.expander("Add an op", expanded=not calls or state.get("added", False)):
        op_name = st.selectbox("Op", list(ops), key="build_add_op",
                               format_func=lambda n: f"{n} — {ops[n].summary}")
        spec = ops[op_name]
        with st.form("build_add"):
            st.caption(f"`{spec.shape_text}` · {spec.relation}")
            values = arg_widgets(spec, editing.example_values(spec), f"build_add_{op_name}",
                                 names)
            node_name = st.text_input("Name (optional)", key=state.key("add_name"))
            position = st.number_input("Position", min_value=0, max_value=len(calls),
                                       value=len(calls), step=1, key=state.key("add_position"))
            if st.form_submit_button("Add"):
                text = editing.format_call(spec, values, node_name.strip() or None)
                edit_stack(editing.insert_call(source, int(position), text))
                # the next op goes after this one, unless a position is chosen again
                for name in ("add_position", "add_name"):
                    state.pop(name)
                state["added"] = True
                st.rerun()


def edit_layers() -> None:
    """The stack layer by layer (a tab of the report): move, remove, edit, add."""
    try:
        calls = editing.calls(source)
    except StackError:
        calls = []
        st.caption("Fix the stack's syntax to edit it layer by layer.")
    if len(calls) > MAX_LAYER_ROWS:
        st.caption(f"The layer list shows stacks of up to {MAX_LAYER_ROWS} ops; this one has "
                   f"{len(calls):,}, so edit it as text.")
        calls = []
    names = [call.name or default_node_name(index) for index, call in enumerate(calls)]
    layer_rows(calls, names)
    add_op(calls, names)


with right:
    # The stack once as the report; its table, its graph and the layer editor a click away.
    # (a branching stack's graph tells the most after the report: next to it)
    branching = network is not None and is_branching(network)
    labels = ["Report", *(("Graph", "Table") if branching else ("Table", "Graph")),
              "Edit layer by layer"]
    shown = [label for label in labels if not (
        (label == "Graph" and (network is None or len(network.nodes) > MAX_GRAPH_NODES))
        or (label == "Table" and network is None)
        or (label == "Edit layer by layer" and controls.hidden("layers")))]
    tabs = dict(zip(shown, st.tabs(shown)))
    with tabs["Report"]:
        if error is not None:
            show_error(error)
            if error.line:
                st.code(annotate(source, error), language=None)
        else:
            st.metric("Parameters", f"{network.param_count:,}")
            st.code(network.table(), language=None, wrap_lines=True)
    if "Table" in tabs:
        tabs["Table"].dataframe(network.dataframe(), hide_index=True)
    if "Graph" in tabs:
        tabs["Graph"].graphviz_chart(
            network.dot(), alt="The stack as a graph: each node, and the shape on each edge")
    if "Edit layer by layer" in tabs:
        with tabs["Edit layer by layer"]:
            edit_layers()

if network is not None:
    # Made only once opened, as Train's stack: the export reads the ops' source files, work
    # that every rerun of every session would otherwise repeat for a folded panel.
    export_panel = st.expander("Plain PyTorch code", key=state.key("export"), on_change="rerun")
    if export_panel.open:
        code = export.to_pytorch(network)
        export_panel.code(code, language="python")
        export_panel.download_button("Download stack.py", code, file_name="stack.py",
                                     mime="text/x-python")
