"""Explore: what the position table of the latest run learned, figure by figure."""

import json

import streamlit as st
from safetensors.torch import save as safetensors_bytes

import app_state
from stacklab import figures
from stacklab.report_html import report_html

app_state.start()
st.title("Explore")
app_state.show_url_problems()
pool = app_state.pool()
jobs = [job for job in pool.jobs_of(app_state.owner()) if job.run is not None]
if not jobs:
    st.info("No finished run yet. Train one first.")
    st.page_link("pages/train.py", label="Go to Train", icon=":material/model_training:")
    st.stop()

job = jobs[0]
run = job.run
st.markdown(f"Run **{job.id}**: task **{run.task.name}**, T = {run.config.seq_len}, "
            f"{run.step} steps, status **{run.status}**, held-out accuracy "
            f"**{run.final['accuracy']:.1%}**  \n*What to look for:* {run.task.pattern}")


FIGURES = "explore_figures"
if st.session_state.get(FIGURES, (None,))[0] != job.id:
    with st.spinner("Drawing the figures…"):
        st.session_state[FIGURES] = (job.id, figures.run_figures(run))
drawn = st.session_state[FIGURES][1]


def model_bytes() -> bytes:
    tensors = {k: v.detach().contiguous().cpu() for k, v in run.model.state_dict().items()}
    metadata = {"source": run.network.source, "task": run.task.name,
                "input_shape": json.dumps(list(run.network.input_shape)),
                "input_dtype": run.network.input_dtype, "dtype": run.network.dtype,
                "seq_len": str(run.config.seq_len), "seed": str(run.config.seed)}
    return safetensors_bytes(tensors, metadata=metadata)


download = st.columns(3)
# Each file is made only when its button is clicked (deferred data).
download[0].download_button("model.safetensors", model_bytes, file_name="model.safetensors",
                            key="explore_model")
download[1].download_button("metrics.json", lambda: json.dumps(run.metrics(), indent=2),
                            file_name="metrics.json", mime="application/json",
                            key="explore_metrics")
download[2].download_button("figures (report.html)", lambda: report_html(run),
                            file_name="report.html", mime="text/html", key="explore_report")

for index, (title, caption, figure) in enumerate(drawn):
    st.subheader(title)
    st.caption(caption)
    st.plotly_chart(figure, key=f"explore_{job.id}_{index}")
