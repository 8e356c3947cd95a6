"""Learn: the lessons, a step at a time (predict, run with one click on the shared pool, see
the one figure that matters with its number, read why, try the next thing), and the
glossary. ``/learn?lesson=ID&step=N`` opens a step."""

import streamlit as st

from stacklab import StackError, Status
from ui import figures, glossary, scripts, session, urls
from ui.lab import (LESSONS, LINK_VALUES, SETTINGS, available_devices, check, parse_values,
                    read_link, step_from_link)
from ui.markdown import plain, show_error

state = session.PageState("learn", "lesson", "step", "predict", "guess", "predictions", "at",
                          "jobs", "error")
LINK_ROWS = tuple(LINK_VALUES[name] for name in urls.LESSON_VALUES)


def go(lesson_id: str | None, number: int = 1) -> None:
    """Open step ``number`` of lesson ``lesson_id`` (None: the list of lessons), and say so
    in the address."""
    state["lesson"], state["step"] = lesson_id, number
    urls.show_own(address())


def address() -> dict[str, str]:
    """The page's address: ``lesson=ID&step=N`` of the step on show, or nothing."""
    if not state.get("lesson"):
        return {}
    return {"lesson": state["lesson"], "step": str(state.get("step", 1))}


def read_address() -> None:
    """A link's lesson and step (each by its row of the link table) open that step; a
    refused value is reported by `scripts.show_url_problems`."""
    values, _ = parse_values(st.query_params.to_dict(), LINK_ROWS)
    if "lesson" in values:
        state["lesson"], state["step"] = values["lesson"], values.get("step", 1)


read_address()
urls.start(own=address())
pool = session.pool()
owner = session.owner()
st.title("Learn")
scripts.show_url_problems()


def lesson_list() -> None:
    st.markdown("Each lesson is a few steps. A step asks you to **predict** what a run will "
                "show, **runs** it with one click, and shows the **one figure** that answers "
                "it, with its number and why.")
    for number, lesson in enumerate(LESSONS.values(), start=1):
        box = st.container(border=True)
        box.markdown(f"**{number}. {plain(lesson.title, 200)}** · {len(lesson.steps)} steps  \n"
                     f"{plain(lesson.summary, 600)}")
        box.button("Start", key=f"learn_start_{lesson.id}", on_click=go, args=(lesson.id,),
                   icon=":material/play_arrow:")


def options(step) -> tuple[str, str]:
    """The two outcomes a step's condition tells apart: the lower one, the higher one."""
    expect = step.expect
    low, high = ("at most", "above") if expect.op == "<=" else ("below", "at least")
    return f"{low} {expect.bound:g}", f"{high} {expect.bound:g}"


def came_out_high(step, value: float) -> bool:
    """Whether the measured ``value`` is the higher of the two outcomes of `options`."""
    return value >= step.expect.bound if step.expect.op == ">=" else value > step.expect.bound


def prediction(where: tuple, step) -> tuple[str | None, str]:
    """The learner's prediction for the step ``where`` (lesson id, number), asked before
    the run and kept per step: the outcome they expect of the step's number, and their
    answer to its question in their own words (may be empty)."""
    kept = (state.get("predictions") or {}).get(where, {})
    if state.get("at") != where:  # another step: its own prediction, or none yet
        state["at"] = where
        state["predict"], state["guess"] = kept.get("predict"), kept.get("guess", "")

    def keep():
        state["predictions"] = {**(state.get("predictions") or {}),
                                where: {"predict": state["predict"], "guess": state["guess"]}}

    st.markdown(f"**Predict.** {plain(step.question, 400)}")
    guess = st.text_input("Your answer, in your own words", key=state.key("guess"),
                          on_change=keep, placeholder="optional: what do you expect, and why?")
    chosen = st.radio(f"And the number: {plain(step.expect.label, 200)} will be", options(step),
                      index=None, key=state.key("predict"), on_change=keep, horizontal=True)
    return chosen, guess


def run_step(where: tuple, step) -> None:
    """Run the step's experiment on the shared pool: a class on one lesson trains it once
    (the pool keeps one job per run key)."""
    try:
        job = pool.submit(owner, step.source, step.config)
    except StackError as err:
        state["error"] = err
        return
    state["jobs"] = {**(state.get("jobs") or {}), where: job.id}
    state.pop("error")


def step_job(where: tuple):
    job_id = (state.get("jobs") or {}).get(where)
    return pool.get(owner, job_id) if job_id is not None else None


def show_outcome(step, job, predicted: str | None, guess: str) -> None:
    """The run's number (the step's condition, checked), the prediction against it, why
    and what to try next, beside the figure that matters."""
    try:
        held, value, sentence = check(step, job.run)
    except StackError as err:
        show_error(err)
        return
    words, picture = st.columns([2, 3], gap="medium")
    verdict = "the expected outcome held" if held else "the expected outcome did NOT hold"
    (words.success if held else words.warning)(
        f"**{plain(sentence, 300)}**: {verdict}.",
        icon=":material/check_circle:" if held else None)
    if guess.strip():
        words.markdown(f"You wrote: *{plain(guess, 400)}*")
    if predicted is not None and value is not None:
        right = (predicted == options(step)[1]) == came_out_high(step, value)
        words.markdown(f"You predicted {plain(step.expect.label, 200)} "
                       f"*{plain(predicted, 100)}*: "
                       + ("**right**." if right else "**not this time**."))
    words.markdown(f"**Why.** {plain(step.answer, 1500)}")
    words.info(f"**Try this next.** {plain(step.try_next, 800)}", icon=":material/lightbulb:")
    try:
        drawn = next((f for f in job.figures() if f.key == step.figure), None)
    except StackError as err:
        show_error(err)
        drawn = None
    if drawn is not None:  # the chart first, beside the outcome; its caption under it
        picture.markdown(f"**{plain(drawn.title, 200)}**"
                         + (f" — {plain(drawn.score, 300)}" if drawn.score else ""))
        figures.chart(picture, drawn.figure, f"learn_figure_{job.id}_{step.figure}", columns=2)
        picture.markdown(plain(drawn.caption, 1000))
        glossary.show_terms(picture, drawn.key, drawn.caption)


def show_progress(now) -> None:
    others = now.watchers - 1
    shared = (f" — shared with {others} other session{'s' * (others != 1)}: a class on one "
              "step trains it once" if others > 0 and now.active else "")
    if now.status == Status.QUEUED:
        st.info(f"Queued: position {now.position} in the queue of the shared workers{shared}.")
    elif now.status == Status.RUNNING:
        st.info(f"Running: step {now.step} of {now.steps}{shared}.")
    elif now.status != Status.FINISHED:
        st.error(f"The run {now.status}: {plain(now.error or '', 600)}")
    st.progress(now.progress, text=f"{now.step} / {now.steps} steps")


def open_on_train(step) -> None:
    """Make the step's experiment the session's (its stack and every setting), for the
    learner to change it on Build and Train."""
    config = step.config.filled()
    values = {row.name: LINK_VALUES[row.name].write(getattr(config, row.name))
              for row in SETTINGS.values() if row.link}
    link = read_link({**values, "stack": step.source, "input": f"B,{config.seq_len}",
                      "input_dtype": "int64"})
    session.set_experiment(link.experiment)


def step_navigation(lesson, number: int) -> None:
    back, forward, own = st.columns([1, 1, 2])
    if number > 1:
        back.button("Previous step", icon=":material/arrow_back:", key="learn_previous",
                    on_click=go, args=(lesson.id, number - 1))
    if number < len(lesson.steps):
        forward.button("Next step", icon=":material/arrow_forward:", key="learn_next",
                       type="primary", on_click=go, args=(lesson.id, number + 1))
    else:
        forward.button("All lessons", icon=":material/list:", key="learn_done",
                       on_click=go, args=(None,))
    if own.button("Change it yourself on Train", icon=":material/tune:", key="learn_own",
                  help="Opens this step's stack and settings on Build and Train"):
        open_on_train(lesson.steps[number - 1])
        st.switch_page("views/train.py")


def step_view(lesson, step, number: int) -> None:
    where = (lesson.id, number)
    st.button("All lessons", icon=":material/arrow_back:", key="learn_back", on_click=go,
              args=(None,), type="tertiary")
    st.header(plain(lesson.title, 200))
    st.progress(number / len(lesson.steps),
                text=f"Step {number} of {len(lesson.steps)}: **{plain(step.title, 200)}**")
    st.markdown(plain(step.text, 1500))
    with st.expander("The stack this step trains"):
        st.code(step.source, language=None)
    predicted, guess = prediction(where, step)
    st.button("Run the experiment", type="primary", icon=":material/play_arrow:",
              key="learn_run", disabled=predicted is None, on_click=run_step,
              args=(where, step), help="Predict first: then the run answers your prediction")
    if "error" in state:
        show_error(state["error"])
    job = step_job(where)
    started = job.view(owner) if job is not None else None

    @st.fragment(run_every=0.5 if started is not None and started.active else None)
    def result() -> None:
        current = step_job(where)
        if current is None:
            return
        now = current.view(owner)
        if now.active or now.status != Status.FINISHED:
            show_progress(now)
        elif current.run is not None:
            show_outcome(step, current, predicted, guess)
        if started is not None and started.active and not now.active:
            st.rerun()  # the run ended: draw the outcome, stop polling

    result()
    st.divider()
    step_navigation(lesson, number)


if state.get("lesson"):
    try:
        lesson, step = step_from_link(state["lesson"], state.get("step", 1))
    except StackError as err:
        show_error(err)
        lesson, step = step_from_link(state["lesson"], 1)
        state["step"] = 1
        urls.show_own(address())
    step_view(lesson, step, lesson.steps.index(step) + 1)
else:
    lesson_list()
st.divider()
st.header("Glossary")
st.markdown("The terms the lab uses, each in a line. The same definitions are the help (?) "
            "of the controls and the \"Terms\" under each figure.")
glossary.show_glossary()
