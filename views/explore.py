"""Explore: what the position table of the latest run learned, figure by figure."""

import streamlit as st

from stacklab import StackError, Status
from ui import figures, live_run, scripts, session, tables, urls
from ui.library import report_html, run_name
from ui.markdown import plain, show_error
from parts import explore_table, share_panel

state = session.PageState("explore", "node")
urls.start()
st.title("Explore")
scripts.show_url_problems()


explore_table.section()
owner = session.owner()
jobs = session.pool().jobs_of(owner)
active = next((job for job in jobs if job.view(owner).active), None)
if active is not None:
    now = active.view(owner)
    st.info(f"A run is {now.status} (step {now.step} of {now.steps}); this page shows it as "
            "soon as it ends.")

    @st.fragment
    def wait_for_the_run():
        if not active.view(owner).active:
            st.rerun()
        live_run.follow_run(active, key="explore_follow")  # rerun as the run moves on

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
# Each file is named after the run (task, encoding, key): the files of several runs never
# overwrite each other in a Downloads folder; a damaged run says why instead.
# the report's stills are the project's own pictures: a download starts no Chromium here
tables.run_downloads(run, lambda: report_html(run, job.figures(), plotly_stills=False),
                     run_name(run))
