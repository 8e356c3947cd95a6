"""Train: pick a task and settings; the run goes to the server's worker pool, this page polls it."""

import streamlit as st

import app_state
from stacklab import StackError, TASKS, TrainConfig, figures
from stacklab.errors import annotate
from stacklab.jobs import APP_BUDGET_BYTES
from stacklab.trainer import LIMITS, fit_network

PAGE = "train"
JOB = "train_job"
experiment = app_state.start()
st.title("Train")
app_state.show_url_problems()
pool = app_state.pool()
owner = app_state.owner()

task_col, len_col, steps_col, batch_col = st.columns(4)
task_name = app_state.bound(task_col.selectbox, "task", "Task", PAGE, options=list(TASKS))
seq_len = app_state.bound(len_col.number_input, "seq_len", "seq_len (T)", PAGE,
                          min_value=LIMITS["seq_len"][0], max_value=LIMITS["seq_len"][1], step=1)
steps = app_state.bound(steps_col.number_input, "steps", "Steps", PAGE,
                        min_value=1, max_value=100_000, step=50)
batch_size = app_state.bound(batch_col.number_input, "batch_size", "Batch size", PAGE,
                             min_value=1, max_value=4096, step=16)
lr_col, decay_col, seed_col, device_col = st.columns(4)
lr = app_state.bound(lr_col.number_input, "lr", "Learning rate", PAGE, min_value=1e-6,
                     max_value=LIMITS["lr"][1], format="%g", step=1e-3)
weight_decay = app_state.bound(decay_col.number_input, "weight_decay", "Weight decay", PAGE,
                               min_value=0.0, max_value=LIMITS["weight_decay"][1], format="%g",
                               step=0.01, help="AdamW decay pulls every row towards zero, the "
                                               "untrained rows too.")
seed = app_state.bound(seed_col.number_input, "seed", "Seed", PAGE, min_value=0,
                       max_value=2**31 - 1, step=1)
devices = ["auto", "cpu"] + (["cuda"] if __import__("torch").cuda.is_available() else [])
device = "auto"
if not app_state.hidden("device"):
    device = device_col.selectbox("Device", devices, key="train_device")

task = TASKS[task_name]


def vars_of_preset(name: str, T: int) -> dict:
    preset = experiment.with_task_preset(name, T)
    return {"stack": preset.stack, "input": preset.input, "input_dtype": preset.input_dtype}


st.markdown(f"**{task.name}** — {task.description}  \n*What the position table should "
            f"learn:* {task.pattern}")

fits = True
try:
    fit_network(experiment.stack, task, int(seq_len), dtype=experiment.dtype,
                budget_bytes=APP_BUDGET_BYTES)
except StackError as err:
    fits = False
    st.error(f"The stack from Build does not fit task **{task.name}** with T={seq_len}: "
             f"**{err.code}** {err.message}\n\n**Fix:** {err.hint}")
    if err.line:
        st.code(annotate(experiment.stack, err), language=None)
    st.button(f"Use the preset stack for {task.name}", key="train_use_preset",
              on_click=lambda: app_state.update(**vars_of_preset(task.name, int(seq_len))))
else:
    with st.expander("Stack"):
        st.code(experiment.stack, language=None, line_numbers=True)


def start_training():
    config = TrainConfig(task=task_name, seq_len=int(seq_len), steps=int(steps),
                         batch_size=int(batch_size), lr=float(lr),
                         weight_decay=float(weight_decay), seed=int(seed), device=device,
                         dtype=experiment.dtype)
    try:
        job = pool.submit(owner, experiment.stack, config)
    except StackError as err:
        st.session_state["train_error"] = err
    else:
        st.session_state[JOB] = job.id
        st.session_state.pop("train_error", None)


def stop_training():
    if JOB in st.session_state:
        pool.stop(owner, st.session_state[JOB])


job = pool.get(owner, st.session_state[JOB]) if JOB in st.session_state else None
view = job.view() if job else None
train_col, stop_col, _ = st.columns([1, 1, 6])
train_col.button("Train", type="primary", disabled=not fits, on_click=start_training,
                 key="train_train")
stop_col.button("Stop", disabled=not (view and view.active), on_click=stop_training,
                key="train_stop")
if "train_error" in st.session_state:
    err = st.session_state["train_error"]
    st.error(f"**{err.code}** {err.message}\n\n**Fix:** {err.hint}")

STATUS_TEXT = {
    "queued": "queued", "running": "running", "finished": "finished", "stopped": "stopped",
    "diverged": "diverged", "failed": "failed",
}


@st.fragment(run_every=0.5 if view and view.active else None)
def status_panel():
    current = pool.get(owner, st.session_state[JOB]) if JOB in st.session_state else None
    if current is None:
        st.info("No run yet: press **Train**.")
        return
    now = current.view()
    words = STATUS_TEXT[now.status]
    if now.status == "queued":
        st.info(f"Status: **queued** — position {now.position} in the queue "
                f"({pool.stats()['running']} runs in progress)")
    elif now.status == "running":
        st.info(f"Status: **running** — step {now.step} of {now.steps}")
    elif now.status == "finished":
        final = now.history[-1] if now.history else None
        accuracy = f"; held-out accuracy {final['accuracy']:.1%}" if final else ""
        st.success(f"Status: **finished** — {now.step} steps in {now.seconds:.1f} s{accuracy}")
    elif now.status == "stopped":
        st.warning(f"Status: **stopped** at step {now.step}")
    else:
        st.error(f"Status: **{words}** — {now.error}")
    st.progress(now.progress, text=f"{now.step} / {now.steps} steps")
    if now.history:
        st.plotly_chart(figures.training_curves(list(now.history), list(now.train_loss)),
                        key=f"train_curves_{now.id}")
    if not now.active and now.status != "failed":
        st.page_link("pages/explore.py", label="Explore what the table learned", icon=":material/insights:")
    if view is not None and view.active and not now.active:
        st.rerun()  # the run ended: redraw the page (buttons, no more polling)


status_panel()
