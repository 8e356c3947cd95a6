"""Explore: what the position table of the latest run learned, figure by figure."""

import streamlit as st

import app_state
from stacklab import StackError, Status
from stacklab.lab.report_html import report_html

app_state.start()
st.title("Explore")
app_state.show_url_problems()
pool = app_state.pool()
jobs = pool.jobs_of(app_state.owner())
owner = app_state.owner()
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

job = app_state.latest_run()
if job is None:
    if active is None:
        st.info("No finished run yet. Train one first.")
        st.page_link("pages/train.py", label="Go to Train", icon=":material/model_training:")
    st.stop()

run = job.run
accuracy = run.final["accuracy"]
shown = f"{accuracy:.1%}" if accuracy is not None else "not measured"
st.markdown(f"Your latest run: task **{run.task.name}**, T = {run.config.seq_len}, "
            f"{run.step} steps, status **{run.status}**, held-out accuracy **{shown}**  \n"
            f"*What to look for:* {run.task.pattern}")
if run.status == Status.DIVERGED:
    st.warning(app_state.plain(run.error, 1000))

node = None
if len(run.position_nodes) > 1:
    node = st.selectbox("Position table", run.position_nodes, key="explore_node")
elif not run.position_nodes:
    st.info("This stack has no learned position table (`pos_embed`), so only the training "
            "curves apply: a fixed `sin_pos` has nothing to learn. Add `pos_embed(...)` on the "
            "Build page to see what a table learns.")

try:
    drawn = job.figures(node)  # drawn by the worker; read once per run, shared by every session
except StackError as err:
    app_state.show_error(err)
    st.stop()


download = st.columns(3)
# Each file is made only when its button is clicked (deferred data).
download[0].download_button("model.safetensors", run.checkpoint_bytes,
                            file_name="model.safetensors",
                            key="explore_model", icon=":material/download:")
download[1].download_button("metrics.json", run.metrics_text,
                            file_name="metrics.json", mime="application/json",
                            key="explore_metrics", icon=":material/download:")
download[2].download_button("figures (report.html)", lambda: report_html(run, job.figures()),
                            file_name="report.html", mime="text/html", key="explore_report",
                            icon=":material/download:")

for index, drawn_figure in enumerate(drawn):
    st.subheader(drawn_figure.title)
    if drawn_figure.score:
        st.markdown(f"**{app_state.plain(drawn_figure.score, 300)}**")
    st.caption(app_state.plain(drawn_figure.caption, 1000))
    st.plotly_chart(drawn_figure.figure, key=f"explore_{job.id}_{node}_{index}")
