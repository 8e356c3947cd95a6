"""Train: pick a task and settings; the run goes to the server's worker pool, this page polls it."""

import streamlit as st
import torch

import app_state
from stacklab import StackError, TASKS, TrainConfig, figures
from stacklab.core.errors import annotate
from stacklab.serve.experiment import APP_LIMITS, DEVICES

PAGE = "train"
JOB = "train_job"
experiment = app_state.start()
st.title("Train")
app_state.show_url_problems()
pool = app_state.pool()
owner = app_state.owner()


def follow_preset(old, task_name: str | None = None, seq_len: int | None = None) -> dict:
    """When the stack is still a task's preset, switching task or T switches the preset too;
    the Build page's input shape follows T."""
    switching = task_name is not None and task_name != old.task
    task_name = task_name or old.task
    seq_len = TASKS[task_name].default_seq_len if switching else (seq_len or old.seq_len)
    changes = {"input": f"B,{seq_len}"} if old.input == f"B,{old.seq_len}" and not switching else {}
    if old.stack == TASKS[old.task].preset(old.seq_len):
        preset = old.with_task_preset(task_name, seq_len)
        changes.update(stack=preset.stack, input=preset.input, input_dtype=preset.input_dtype)
        if switching:
            changes.update(steps=preset.steps, lr=preset.lr, batch_size=preset.batch_size,
                           seq_len=preset.seq_len)
    return changes


def limits(name: str) -> dict:
    low, high = APP_LIMITS[name]
    return {"min_value": low, "max_value": high}


task_col, len_col, steps_col, batch_col = st.columns(4)
task_name = app_state.bound(task_col.selectbox, "task", "Task", PAGE, options=list(TASKS),
                            also=lambda old, new: follow_preset(old, task_name=new))
seq_len = app_state.bound(len_col.number_input, "seq_len", "seq_len (T)", PAGE, step=1,
                          also=lambda old, new: follow_preset(old, seq_len=new), **limits("seq_len"))
steps = app_state.bound(steps_col.number_input, "steps", "Steps", PAGE, step=50, **limits("steps"))
batch_size = app_state.bound(batch_col.number_input, "batch_size", "Batch size", PAGE, step=16,
                             **limits("batch_size"))
lr_col, decay_col, seed_col, device_col = st.columns(4)
lr = app_state.bound(lr_col.number_input, "lr", "Learning rate", PAGE, format="%g", step=1e-3,
                     **limits("lr"))
weight_decay = app_state.bound(decay_col.number_input, "weight_decay", "Weight decay", PAGE,
                               format="%g", step=0.01, **limits("weight_decay"),
                               help="AdamW decay pulls every row towards zero, the untrained "
                                    "rows too.")
seed = app_state.bound(seed_col.number_input, "seed", "Seed", PAGE, step=1, **limits("seed"))
available = [d for d in DEVICES if d in ("auto", "cpu") or (d == "cuda" and torch.cuda.is_available())
             or (d == "mps" and torch.backends.mps.is_available())]
device = app_state.bound(device_col.selectbox, "device", "Device", PAGE, options=available)
app_state.show_pinned(("task", "seq_len", "steps", "batch_size", "lr", "weight_decay", "seed",
                       "device"))
experiment = app_state.experiment()

task = TASKS[task_name]
st.markdown(f"**{task.name}** — {task.description}  \n*What the position table should "
            f"learn:* {task.pattern}")

def config_of(exp) -> TrainConfig:
    """The run the page shows: built from the experiment as it is right now."""
    return TrainConfig(task=exp.task, seq_len=int(exp.seq_len), steps=int(exp.steps),
                       batch_size=int(exp.batch_size), lr=float(exp.lr),
                       weight_decay=float(exp.weight_decay), seed=int(exp.seed),
                       device=exp.device if exp.device in available else "auto",
                       dtype=exp.dtype)


if experiment.device not in available:
    st.warning(f"Device {experiment.device!r} is not available on this server; runs use "
               "auto (the best available).")
config = config_of(experiment)
fits = True
try:
    pool.check(experiment.stack, config)
except StackError as err:
    fits = False
    st.error(f"This run cannot start: **{err.code}** {err.message}\n\n**Fix:** {err.hint}")
    if err.line:
        st.code(annotate(experiment.stack, err), language=None)
    if err.code not in ("E_BUDGET", "E_ARG"):
        preset = experiment.with_task_preset(task.name, int(seq_len))
        st.button(f"Use the preset stack for {task.name}", key="train_use_preset",
                  on_click=lambda: app_state.update(stack=preset.stack, input=preset.input,
                                                    input_dtype=preset.input_dtype))
else:
    with st.expander("Stack (from Build)"):
        st.code(experiment.stack, language=None, line_numbers=True)


def start_training():
    current = app_state.experiment()  # a control edited just before the click is included
    try:
        job = pool.submit(owner, current.stack, config_of(current))
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


def curves(now):
    """The training curves, drawn again only when a new evaluation came in."""
    cache_key = (now.id, len(now.history))
    cached = st.session_state.get("train_curves")
    if cached is None or cached[0] != cache_key:
        last_eval = now.history[-1]["step"]
        losses = [(step, loss) for step, loss in now.train_loss if step <= last_eval]
        cached = (cache_key, figures.training_curves(list(now.history), losses))
        st.session_state["train_curves"] = cached
    return cached[1]


# Poll often while running, seldom while queued (a classroom has many queued runs).
POLL_SECONDS = {"running": 1.0, "queued": 2.0}


@st.fragment(run_every=POLL_SECONDS.get(view.status) if view else None)
def status_panel():
    current = pool.get(owner, st.session_state[JOB]) if JOB in st.session_state else None
    if current is None:
        st.info("No run yet: press **Train**.")
        return
    now = current.view()
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
        st.error(f"Status: **{now.status}** — {now.error}")
    st.progress(now.progress, text=f"{now.step} / {now.steps} steps")
    if now.history:
        st.plotly_chart(curves(now), key=f"train_curves_{now.id}")
    if not now.active and current.run is not None:
        app_state.keep_run(current)
    if not now.active and now.status != "failed":
        st.page_link("pages/explore.py", label="Explore what the table learned",
                     icon=":material/insights:")
    if view is not None and view.active and not now.active:
        st.rerun()  # the run ended: redraw the page (buttons, no more polling)


status_panel()
