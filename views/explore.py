"""Explore: what the position table of the latest run learned, figure by figure."""

import hashlib

import streamlit as st

from stacklab import StackError, Status
from ui import figures, scripts, session, urls
from ui.lab import (MAX_UPLOAD_BYTES, UPLOAD_LIMIT, explore_table, read_table,
                    report_html, tensor_names)
from ui.lab import file_name, run_name
from ui.markdown import plain, show_error
from views import share_panel

state = session.PageState("explore", "upload", "upload_key", "upload_names", "upload_drawn",
                          "node")
urls.start()
st.title("Explore")
scripts.show_url_problems()


def table_from_a_file() -> None:
    """A position table trained elsewhere: every figure and score that needs only it."""
    upload = st.file_uploader(
        f"A position table as .safetensors or .npy (at most {UPLOAD_LIMIT}; "
        "pickled .npy files are refused)", type=["safetensors", "npy"], key=state.key("upload"))
    if upload is None:
        return
    data = upload.getvalue()
    digest = (hashlib.sha256(data).hexdigest(), upload.name)  # the file, not its bytes, kept
    try:
        # parsed once per upload: a file of many tensors costs its parse once, not every rerun
        names = state.cached("upload_names", digest, lambda: tensor_names(data, upload.name))
        key = (st.selectbox("Tensor", names, key=state.key("upload_key"),
                            help="the 2-D tensors of the file") if len(names) > 1 else None)

        def draw():
            with st.spinner("Reading the table and drawing its figures…"):
                table = read_table(upload.name, key, data=data, max_bytes=MAX_UPLOAD_BYTES)
                label = key or upload.name.rsplit(".", 1)[0]
                return (list(table.shape), *explore_table(table, label))

        shape, scores, drawn = state.cached("upload_drawn", (*digest, key), draw)
    except StackError as err:
        show_error(err)
        return
    shown = {name: value for name, value in scores.items() if isinstance(value, float)}
    st.markdown(f"Table of shape **{shape}**, scored on its first {scores['rows_scored']} rows: "
                + (", ".join(f"{name.replace('_', ' ')} **{value:.2f}**"
                             for name, value in shown.items())
                   or "no score applies to a table this short"))
    figures.show_figures(drawn, "explore_upload")


with st.expander("A table trained elsewhere (e.g. GPT-2's wpe): upload it",
                 expanded="upload_drawn" in state):
    table_from_a_file()
owner = session.owner()
jobs = session.pool().jobs_of(owner)
active = next((job for job in jobs if job.view(owner).active), None)
if active is not None:
    now = active.view(owner)
    st.info(f"A run is {now.status} (step {now.step} of {now.steps}); this page shows it as "
            "soon as it ends.")

    @st.fragment(run_every=1.0)
    def wait_for_the_run():
        if not active.view(owner).active:
            st.rerun()

    wait_for_the_run()

job = session.latest_run()
if job is None:
    if active is None:
        st.info("No finished run yet. Train one first.")
        st.page_link("views/train.py", label="Go to Train", icon=":material/model_training:")
    st.stop()

run = job.run
scripts.show_changed_since(job)  # a run of an earlier experiment says so, first
accuracy = run.final["accuracy"]
shown = f"{accuracy:.1%}" if accuracy is not None else "not measured"
whose = share_panel.whose_run(job)  # "Your latest run", or the shared run of the link
st.markdown(f"{whose}: task **{run.task.name}**, T = {run.config.seq_len}, "
            f"{run.step} steps, status **{run.status}**, held-out accuracy **{shown}**  \n"
            f"*What to look for:* {run.task.pattern}")
share_panel.read_only_note(job)
if session.presenting() and job.pattern_now() is not None:
    share_panel.show_presented(job.pattern_now())
if run.status == Status.DIVERGED:
    st.warning(plain(run.error, 1000))

node = None
if len(run.position_nodes) > 1:
    node = st.selectbox("Position table", run.position_nodes, key=state.key("node"))
elif not run.position_nodes:
    st.info("This stack has no learned position table (`pos_embed`), so the figures of a "
            "table do not apply: what marks positions here (a fixed `sin_pos`, or the "
            "attention's own `position=`) is shown through its attention and its heads. Add "
            "`pos_embed(...)` on the Build page to see what a table learns.")

try:
    drawn = job.figures(node)  # drawn by the worker; read once per run, shared by every session
except StackError as err:
    show_error(err)
    st.stop()


# The task's own figure and its number first, the rest in tabs by what they show.
figures.show_arranged(drawn, run.task.pattern_figure, f"explore_{job.id}_{node}")

# Each file is named after the run (task, encoding, key), so the files of several runs
# never overwrite each other in a Downloads folder; each is made only when its button is
# clicked (deferred data).
name = run_name(run)
st.markdown(f"**Download run** `{name}`:")
download = st.columns(3)
download[0].download_button("model.safetensors", run.checkpoint_bytes,
                            file_name=file_name(name, "model.safetensors"),
                            key="explore_model", icon=":material/download:")
download[1].download_button("metrics.json", run.metrics_text,
                            file_name=file_name(name, "metrics.json"), mime="application/json",
                            key="explore_metrics", icon=":material/download:")
download[2].download_button("figures (report.html)", lambda: report_html(run, job.figures()),
                            file_name=file_name(name, "report.html"), mime="text/html",
                            key="explore_report", icon=":material/download:")
