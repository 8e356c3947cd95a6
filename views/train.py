"""Train: pick a task and settings; the run goes to the server's worker pool, this page polls it."""

import streamlit as st

from stacklab import TASKS, StackError, Status, figures
from ui import browsers, controls, live_run, polls, scripts, session, urls
from ui.figures import prepared_chart, still_html
from ui.library import SETTINGS, annotate, available_devices, length_rows
from ui.markdown import plain, show_error
from parts import share_panel

PAGE = "train"
state = session.PageState(PAGE, "error", "pattern_hover", "interactive")
experiment = urls.start()
if not session.presenting():
    st.title("Train")
scripts.show_url_problems()
pool = session.pool()
owner = session.owner()
if session.shared_run(session.current_job()) and not session.presenting():
    share_panel.student_note(session.current_job().view(owner))
job = session.current_job()
view = job.view(owner) if job else None


def pattern_figure(container, current, now, frame) -> None:
    """The run's pattern figure, as ``frame`` (the run's live view, prepared once for every
    watcher) holds it. A student on the teacher's link sees it as a still picture first: an
    image is on screen as the page arrives, where a fresh browser takes seconds to load and
    start the chart library; the interactive chart is one switch away."""
    spot = container.container(key=f"train_pattern_{now.id}")
    prepared = frame.pattern_figure
    still = prepared.still if session.student_view(current) else None
    if still is not None and not state.get("pattern_hover"):  # markdown, whose code the page has loaded already (st.image's not)
        score = f" — {now.pattern.score}" if now.pattern.score else ""
        spot.markdown(still_html(still, f"{now.pattern.title}{score} (heatmap)"),
                      unsafe_allow_html=True)
    else:
        prepared_chart(spot, prepared, key=f"train_pattern_chart_{now.id}")
    if still is not None:
        container.toggle("Values on hover", key=state.key("pattern_hover"),
                         help="The interactive chart: each cell's value under the pointer")


EVERY = polls.every("run", view)  # the status panel's interval, as this run of the page set it
# While the run is live, the browser draws its view from the run's watch endpoint and the
# panel reruns only once it has ended (`ui.live_run`); with the interactive charts asked
# for (values under the pointer), or on the projector, it reruns each time the endpoint
# says the run moved on (`live_run.follow_run`).
INTERACTIVE = bool(state.get("interactive")) or session.presenting()
WATCHED = EVERY is not None and not INTERACTIVE


@st.fragment
def status_panel():
    if EVERY is None:
        show_status()
        return
    with polls.measured():  # counted and timed: the server's backpressure (ui.polls)
        if not (WATCHED and show_live()):
            show_status()


def show_live() -> bool:
    """The live run's view, drawn in the browser from its watch endpoint (`ui.live_run`);
    False when the run is no longer live (the panel then shows it in full)."""
    current = session.current_job()
    now = current.view(owner) if current is not None else None
    if now is None or not now.active:
        return False
    scripts.show_changed_since(current)
    live_run.show(current, now, browsers.on_phone(), EVERY)
    live_toggle()
    return True


def live_toggle() -> None:
    """The switch to the interactive charts while the run trains (the page is drawn again)."""
    if st.toggle(live_run.INTERACTIVE, key=state.key("interactive")) != INTERACTIVE:
        st.rerun()


def show_status():
    """The current run's status, progress, curves and pattern figure."""
    current = session.current_job()
    if current is None:
        st.info("No run yet: press **Train**.")
        return
    now = current.view(owner)
    scripts.show_changed_since(current)  # a run of an earlier experiment says so, first
    if now.active:
        st.info(live_run.status_text(now, pool.stats()["running"]))
    elif now.status == Status.FINISHED:
        final = now.history[-1] if now.history else None
        accuracy = f"; held-out accuracy {final['accuracy']:.1%}" if final else ""
        target = current.config.target_accuracy
        early = (f", before the {now.steps} asked for: it reached the target accuracy "
                 f"({target:.0%})" if now.step < now.steps and target is not None else "")
        st.success(f"Status: **finished** — {now.step} steps in {now.seconds:.1f} s{early}"
                   f"{accuracy}")
    elif now.status == Status.STOPPED:
        goes_on = (" (it goes on for the others watching it)"
                   if current.status.active and now.watchers > 0 else "")
        st.warning(f"Status: **stopped** at step {now.step}{goes_on}")
    else:
        st.error(f"Status: **{now.status}** — {plain(now.error, 1000)}")
    st.progress(now.progress, text=f"{now.step} / {now.steps} steps")
    if now.active:
        polls.say_load(polls.base_seconds("run", now), EVERY or 0.0)
        if not session.presenting():
            live_toggle()
        live_run.follow_run(current, key="train_follow")  # redrawn as the run moves on
    if now.history:
        phone = browsers.on_phone()  # a phone's copies, laid out for its one column
        frame = current.frame(now, figures.PHONE_WIDTH if phone else figures.column_width(2),
                              phone=phone)  # made once for every watcher (of each kind)
        left, right = st.columns(2)
        prepared_chart(left, frame.curves, key=f"train_curves_{now.id}")
        if frame.pattern is not None and not session.presenting():  # else it is at the top
            pattern_figure(right, current, now, frame)
            right.caption(live_run.step_caption(now.pattern, live_run.last_step(now),
                                                caption=True))
    if not now.active and current.run is not None:
        session.keep_run(current)
        if current.config.lengths:  # length generalization, as Explore and Compare show it
            st.markdown(f"**Length generalization** (trained on T = {current.config.seq_len})")
            st.dataframe(length_rows(current.run), hide_index=True)
    if not now.active and now.status != Status.FAILED:
        st.page_link("views/explore.py", label="Explore what the table learned",
                     icon=":material/insights:")
    if view is not None and view.active and not now.active:
        scripts.scroll_later(f".st-key-train_pattern_{now.id}")  # its heatmap, in view
        st.rerun()  # the run ended: redraw the page (buttons, no more polling)
    if now.active and view is not None and polls.every("run", now) != EVERY:
        st.rerun()  # the fragment polls at the page's last interval: a queued run started,
        # or the server's load widened (or narrowed) every page's interval


if session.presenting():  # present mode: the figures one at a time, no settings
    share_panel.projector(owner)
    status_panel()
    st.stop()

# The controls of every training setting this page shows, in the table's order, four a row.
SHOWN = [row.name for row in SETTINGS.values() if row.link and row.page == PAGE]
UNPINNED = controls.unpinned(SHOWN)  # no empty rows on a link
for start in range(0, len(UNPINNED), 4):
    for column, name in zip(st.columns(4), UNPINNED[start:start + 4]):
        controls.setting_control(column, name, PAGE)
controls.show_pinned(SHOWN)
experiment = session.experiment()
available = available_devices()

task = TASKS[experiment.task]
st.markdown(f"**{task.name}** — {task.description}  \n*What the position table should "
            f"learn:* {task.pattern}")

if experiment.device not in available:
    st.warning(f"Device {plain(experiment.device)} is not available on this server; "
               "runs use auto (the best available).")
config = experiment.train_config(available)
fits = True
try:
    pool.check(experiment.stack, config)
except StackError as err:
    fits = False
    show_error(err, prefix="This run cannot start: ")
    if err.line:
        st.code(annotate(experiment.stack, err), language=None)
    if err.code not in ("E_BUDGET", "E_ARG"):
        preset = experiment.with_task_preset(task.name, experiment.seq_len)
        st.button(f"Use the preset stack for {task.name}", key="train_use_preset",
                  on_click=lambda: urls.update(stack=preset.stack, input=preset.input,
                                                    input_dtype=preset.input_dtype))
else:
    # Drawn only once opened: a code element, even folded away, makes the browser load and
    # run Streamlit's 1.5 MB syntax highlighter, which delayed the run's charts by ~0.7 s.
    stack_panel = st.expander("Stack (from Build)", key="train_stack", on_change="rerun")
    if stack_panel.open:
        stack_panel.code(experiment.stack, language=None, line_numbers=True)


def start_training():
    current = session.experiment()  # a control edited just before the click is included
    try:
        job = pool.submit(owner, current.stack, current.train_config(available))
    except StackError as err:
        state["error"] = err
    else:
        session.make_current(job)  # the key goes into the URL: a reload or a shared link reattaches
        state.pop("error")


def stop_training():
    job = session.current_job()
    if job is not None:
        pool.stop(owner, job.id)
        session.forget_run_key()  # a reload must not re-attach


train_col, stop_col, share_col = st.columns([1, 1, 6])
# A student on the teacher's link has nothing to train: Train would only join the same run.
student = session.student_view(job) and view.status not in (Status.STOPPED, Status.FAILED)
if not student:
    train_col.button("Train", type="secondary" if session.shared_run(job) else "primary",
                     disabled=not fits, on_click=start_training, key="train_train")
    share_panel.share_button(share_col, job)
if not student or view.active:
    stop_col.button("Stop", disabled=not (view and view.active), on_click=stop_training,
                    key="train_stop", help="Stop watching; a run shared with others goes on for them")
if "error" in state:
    show_error(state["error"])


status_panel()
scripts.scroll_if_asked()
