"""Explore's real-model section (a part of the Explore page, not a page): the position
table of a model this server holds (its Hugging Face cache, or the folder an operator
allows) or of an uploaded file, scored and drawn by a worker of the pool under a run's
budgets, once per file, while the page shows how far it got."""

from __future__ import annotations

import streamlit as st

from stacklab import StackError
from ui import figures, session, tables
from ui.library import MAX_UPLOAD_BYTES, UPLOAD_LIMIT, extract_snippet, tensor_names, upload_request
from ui.markdown import plain, show_error

state = session.PageState("explore", "upload", "upload_key", "upload_names", "source",
                          "server_model", "server_key", "table_shown")
UPLOADED, ON_SERVER = "an uploaded table", "a model on this server"


def section() -> None:
    """The section, in an expander open while it shows a table (or its progress); then,
    when the session has no run, the page ends under it."""
    with st.expander("A real model's positions (GPT-2, BERT, OPT, RoBERTa, rotary, ALiBi): "
                     "a model on this server, or an uploaded table",
                     expanded=bool(state.get("table_shown"))):
        offered = tables.server_models(str(tables.models_dir() or "") or None)
        source = (st.radio("From", [UPLOADED, ON_SERVER], horizontal=True,
                           key=state.key("source")) if offered else UPLOADED)
        job = server_model(offered) if source == ON_SERVER else table_from_a_file()
        state["table_shown"] = job is not None and show(job, source == UPLOADED)
    tables.nothing_below(state["table_shown"])


def server_model(offered: list[tuple[str, str]]):
    """The job of the model picked from ``offered``, or None."""
    labels = {f"{name} ({where})": (where, name) for where, name in offered}
    picked = labels.get(st.selectbox("Model", list(labels), key=state.key("server_model")))
    key = st.text_input("Tensor (leave empty: found by the model's layout)", max_chars=300,
                        key=state.key("server_key")).strip() or None
    if picked is None:
        return None
    try:
        return session.pool().tables.submit(tables.request_of(*picked, key))
    except StackError as err:
        show_error(err)
        return None


def table_from_a_file():
    """The job of an uploaded table, or None (no file yet, or a file refused)."""
    upload = st.file_uploader(
        f"A position table as .safetensors or .npy (at most {UPLOAD_LIMIT}; pickled .npy "
        "files are refused)", key=state.key("upload"))
    st.caption(f"A whole checkpoint is larger than {UPLOAD_LIMIT} (the browser refuses it "
               "before sending it): save the table alone, e.g. GPT-2's (BERT's is "
               "`bert.embeddings.position_embeddings.weight`), then upload `wpe.safetensors`:")
    st.code(extract_snippet(), language="python", wrap_lines=True)
    if upload is None:
        return None
    data = upload.getvalue()
    request = upload_request(upload.name, data)
    try:
        if len(data) > MAX_UPLOAD_BYTES:
            raise StackError("E_BUDGET", f"{upload.name[:120]}: the file is {len(data):,} bytes, "
                             f"over the limit of {MAX_UPLOAD_BYTES:,}", hint="upload the table "
                             "alone (the line above saves it)")
        # parsed once per upload: a file of many tensors costs its parse once, not every rerun
        names = state.cached("upload_names", (request.identity, upload.name),
                             lambda: tensor_names(data, upload.name))
        key = (st.selectbox("Tensor", names, key=state.key("upload_key"),
                            help="the 2-D tensors of the file, largest first")
               if len(names) > 1 else None)
        return session.pool().tables.submit(upload_request(upload.name, data, key))
    except StackError as err:
        refused(err)
        return None


def refused(err: StackError) -> None:
    """Why a file was refused, on the page, and how to extract the table alone (the line
    under the uploader)."""
    show_error(err, "This file cannot be shown: ")
    st.markdown("To upload only the position table of a checkpoint, run the line above where "
                "the checkpoint is, then upload `wpe.safetensors`.")


def show(job, uploaded: bool) -> bool:
    """The job's progress, its refusal, or its result; False for a refusal."""
    view = tables.wait_for(job)
    if view.active:
        return True
    if view.error is not None:
        if uploaded:
            refused(view.error)
        else:
            show_error(StackError(view.error.code, tables.hide_root(view.error.message),
                                  hint=tables.hide_root(view.error.hint)))
        return False
    result = view.result
    if result.read:
        st.caption(plain(tables.hide_root(result.read), 600))
    numbers = {name: value for name, value in result.scores.items() if isinstance(value, float)}
    if result.shape is not None:
        st.markdown(f"Table of shape **{result.shape}**, scored on its first "
                    f"{result.scores.get('rows_scored')} rows: "
                    + (", ".join(f"{name.replace('_', ' ')} **{value:.2f}**"
                                 for name, value in numbers.items())
                       or "no score applies to a table this short"))
    tables.table_downloads(result, f"explore_table_{job.request.identity[:12]}")
    figures.show_figures(result.figures, f"explore_table_{job.request.identity[:12]}")
    return True
