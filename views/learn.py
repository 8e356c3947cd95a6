"""Learn: the lessons, a step at a time (predict, run with one click on the shared pool, see
the one figure that matters with its number, read why, try the next thing), and the
glossary. ``/learn?lesson=ID&step=N`` opens a step; ``view=present`` shows it from the
front, and a teacher presenting it to a class (parts/classroom/) is followed by the
students on ``/learn?class=ID``."""

import streamlit as st

from stacklab import StackError, Status
from ui import figures, glossary, lessons, live_run, present, scripts, session, urls
from ui.library import LINK_VALUES, SETTINGS, check, fill, parse_values, read_link
from ui.markdown import plain, show_error
from parts.classroom import room, upload, votes

state = session.PageState("learn", "lesson", "step", "predict", "guess", "predictions", "at",
                          "jobs", "error", "shown")
LINK_ROWS = tuple(LINK_VALUES[name] for name in urls.LESSON_VALUES)
PROJECTED_HEIGHT = 500  # the figure beside the votes: whole on a 1920x1080 projector under a step text of 4 lines


def go(lesson_id: str | None, number: int = 1) -> None:
    """Open step ``number`` of lesson ``lesson_id`` (None: the list of lessons), and say so
    in the address."""
    state["lesson"], state["step"] = lesson_id, number
    if lesson_id is not None:
        room.moved(lesson_id, number)  # the teacher's class follows (only with its token)
        if room.state.get("token"):
            lessons.presented(room.state["id"], lesson_id)  # an upload reaches it
    urls.show_own(address())


def present_class(lesson_id: str, number: int) -> None:
    """Present the lesson to a class from this step: a teacher's upload reaches that class
    (and no other)."""
    if room.present_to_class(lesson_id, number):  # at the cap: refused, and said
        lessons.presented(room.state["id"], lesson_id)


def address() -> dict[str, str]:
    """The page's address: ``class=ID`` while following a class, else ``lesson=ID&step=N``
    of the step on show (``view=present`` from the front), or nothing."""
    if room.following():
        return room.class_address()
    if not state.get("lesson") or lessons.is_upload(state["lesson"]):  # no link opens an upload
        return {}
    return {"lesson": state["lesson"], "step": str(state.get("step", 1)),
            **({"view": "present"} if session.presenting() else {})}


def read_address() -> None:
    """A link's lesson and step (each by its row of the link table) open that step, its
    ``class=ID`` follows that class; a refused value is reported by
    `scripts.show_url_problems`."""
    values, _ = parse_values(st.query_params.to_dict(), LINK_ROWS)
    if "lesson" in values:
        state["lesson"], state["step"] = values["lesson"], values.get("step", 1)
    if "class" in values:
        room.join(values["class"])


read_address()
teacher = room.teaching()  # this session presents a class (and says it is there)
followed = room.followed()  # the class this session follows: the teacher's step
if followed is not None:
    state["lesson"], state["step"] = followed.lesson, followed.step
urls.start(own=address())
pool = session.pool()
owner = session.owner()
presenting = session.presenting() and bool(state.get("lesson")) and followed is None
if presenting:
    present.begin("learn")
else:
    st.title("Learn")
scripts.show_url_problems()
room.show_problem()
if not teacher:
    room.student_bar(followed)
    votes.ended_class_line()
elif not presenting:
    room.teacher_bar()
    votes.after_class(st)


def lesson_list() -> None:
    st.markdown("Each lesson is a few steps. A step asks you to **predict** what a run will "
                "show, **runs** it with one click, and shows the **one figure** that answers "
                "it, with its number and why.")
    for number, lesson in enumerate(lessons.all_lessons(), start=1):
        box = st.container(border=True)
        box.markdown(f"**{number}. {plain(lesson.title, 200)}** · {len(lesson.steps)} steps  \n"
                     f"{plain(lesson.summary, 600)}")
        box.button("Start", key=f"learn_start_{lesson.id}", on_click=go, args=(lesson.id,),
                   icon=":material/play_arrow:")
    upload.upload_panel(go)


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
    answer to its question in their own words (may be empty). A student following a class
    sends the outcome they pick to it as their vote (one per round: a new round asks again)."""
    radio = "predict"
    if followed is not None:
        where = (*where, followed.round)
        # each round its own choices: a change the browser still sends for an earlier
        # round's choices finds no widget of this round, and counts in none
        radio = ("predict", followed.round)
    kept = (state.get("predictions") or {}).get(where, {})
    if state.get("at") != where:  # another step: its own prediction, or none yet
        state["at"] = where
        state[radio], state["guess"] = kept.get("predict"), kept.get("guess", "")

    def keep():
        state["predictions"] = {**(state.get("predictions") or {}),
                                where: {"predict": state.get(radio), "guess": state["guess"]}}

    def keep_and_vote():
        if followed is not None and followed.round and not votes.send(
                where[1], state[radio], where[2]):
            state[radio] = None  # not counted: the choices show none picked
        keep()

    st.markdown(f"**Predict.** {plain(step.question, 400)}")
    guess = st.text_input("Your answer, in your own words", key=state.key("guess"),
                          on_change=keep, placeholder="optional: what do you expect, and why?")
    closed = votes.closed(followed)  # revealed: the round's choices take no votes
    chosen = st.radio(f"And the number: {plain(step.expect.label, 200)} will be", options(step),
                      index=None, key=state.key(radio), on_change=keep_and_vote,
                      horizontal=True, disabled=closed,
                      help="Closed: the teacher revealed the answer" if closed else None)
    if followed is not None:
        votes.student_line(followed, where[1], step.expect.label)
    return chosen, guess


def measured(where: tuple, step) -> tuple[float, str] | None:
    """The step's run's number and the outcome (of `options`) it supports, once the run
    this session started for the step has finished; None before."""
    job = step_job(where)
    if job is None or job.run is None or job.view(owner).status != Status.FINISHED:
        return None
    _, value, _ = check(step, job.run)
    if value is None:
        return None
    low, high = options(step)
    return value, high if came_out_high(step, value) else low


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


def show_outcome(step, job, predicted: str | None, guess: str, on_projector: bool = False) -> None:
    """The run's number (the step's condition, checked), the prediction against it, why
    and what to try next, beside the figure that matters; on the class's projector, the
    figure first, at projector size, and the words under it."""
    try:
        held, value, sentence = check(step, job.run)
    except StackError as err:
        show_error(err)
        return
    try:
        drawn = next((f for f in job.figures() if f.key == step.figure), None)
    except StackError as err:
        show_error(err)
        drawn = None
    key = f"learn_figure_{job.id}_{step.figure}"
    if on_projector:
        picture, words = st.container(key="learn_projected_figure"), st.container()
        if drawn is not None:
            present.figure_at_full_width(picture, drawn.figure, key, columns=2,
                                         score=drawn.score, height=PROJECTED_HEIGHT)
    else:
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
    record = job.run.metrics()  # the placeholders' numbers: this run's
    words.markdown(f"**Why.** {plain(fill(step.answer, step.expect, record), 1500)}")
    words.info(f"**Try this next.** {plain(fill(step.try_next, step.expect, record), 800)}",
               icon=":material/lightbulb:")
    if drawn is not None and not on_projector:  # the chart beside the outcome, caption under
        picture.markdown(f"**{plain(drawn.title, 200)}**"
                         + (f" — {plain(drawn.score, 300)}" if drawn.score else ""))
        figures.chart(picture, drawn.figure, key, columns=2, score=drawn.score)
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
    """Previous and Next (a teacher's move the class), and leaving: to Train, to present
    the lesson to a class, or out of present mode."""
    back, forward, own, front = st.columns([1, 1, 1.6, 1.6])
    if number > 1:
        back.button("Previous step", icon=":material/arrow_back:", key="learn_previous",
                    on_click=go, args=(lesson.id, number - 1), width="stretch")
    if number < len(lesson.steps):
        forward.button("Next step", icon=":material/arrow_forward:", key="learn_next",
                       type="primary", on_click=go, args=(lesson.id, number + 1),
                       width="stretch")
    elif not presenting:
        forward.button("All lessons", icon=":material/list:", key="learn_done",
                       on_click=go, args=(None,))
    if presenting:
        own.button("Leave present mode", key="learn_leave_present", on_click=session.set_view,
                   args=(None,), icon=":material/close_fullscreen:")
    elif own.button("Change it yourself on Train", icon=":material/tune:", key="learn_own",
                    help="Opens this step's stack and settings on Build and Train"):
        open_on_train(lesson.steps[number - 1])
        st.switch_page("views/train.py")
    if not teacher:
        front.button("Present this lesson to a class", key="learn_present",
                     icon=":material/co_present:", on_click=present_class,
                     args=(lesson.id, number),
                     help="Present mode from this step, and a short link (with its QR code) "
                          "whose students follow your Previous and Next")


def run_button(where: tuple, step, predicted: str | None) -> None:
    """Run the experiment; greyed, with the reason beside it, before the learner predicts
    or, in class, before the teacher reveals the answer."""
    voting = followed is not None and followed.voting  # the teacher reveals it first
    why = ("In class, the run comes once the teacher reveals the answer." if voting else
           "Predict first: the run then answers your prediction."
           if predicted is None and not votes.closed(followed) else None)
    button, reason = st.columns([1, 2], vertical_alignment="center")
    button.button("Run the experiment", type="primary", icon=":material/play_arrow:",
                  key="learn_run", disabled=why is not None, on_click=run_step,
                  args=(where, step), help=why or "Runs this step on the shared workers")
    if why is not None:
        reason.caption(why)


def step_view(lesson, step, number: int) -> None:
    """The step: its text, the prediction, the run and its outcome; then the navigation
    (none for a student following the teacher: the teacher moves)."""
    where = (lesson.id, number)
    if not presenting and followed is None:
        st.button("All lessons", icon=":material/arrow_back:", key="learn_back", on_click=go,
                  args=(None,), type="tertiary")
    with st.container(key="learn_step_head"):
        st.header(plain(lesson.title, 200))
        upload.unchecked_note(lesson)
        st.progress(number / len(lesson.steps),
                    text=f"Step {number} of {len(lesson.steps)}: **{plain(step.title, 200)}**")
    if followed is not None and state.get("shown") not in (None, where):
        scripts.heading_into_view(".st-key-learn_step_head")  # moved with the teacher
    state["shown"] = where
    st.markdown(plain(step.text, 1500))
    # on the projector side by side, one line: the votes and the figure stay in view
    words, stack = st.columns(2) if presenting else (st.container(), st.container())
    glossary.show_new_terms(words, lesson, number)
    with stack.expander("The stack this step trains"):
        st.code(step.source, language=None)
    revealed, beside = True, None
    if teacher and presenting:  # the room votes first; Reveal runs the step
        predicted, guess = None, ""
        revealed, beside = votes.projector(
            step.question, step.expect.label, options(step), lambda: run_step(where, step),
            lambda: measured(where, step))
    else:
        predicted, guess = prediction(where, step)
        run_button(where, step, predicted)
    if "error" in state:
        show_error(state["error"])
    job = step_job(where)
    started = job.view(owner) if job is not None else None

    @st.fragment
    def result() -> None:
        current = step_job(where)
        if current is None:
            return
        now = current.view(owner)
        if now.active or now.status != Status.FINISHED:
            show_progress(now)
        elif current.run is not None:
            show_outcome(step, current, predicted, guess, on_projector=teacher and presenting)
        if started is not None and started.active and not now.active:
            st.rerun()  # the run ended: draw the outcome, stop polling
        if now.active:
            live_run.follow_run(current, key="learn_follow")  # rerun as the run moves on

    if revealed:  # a class's projector shows no answer before its teacher reveals it
        with beside if beside is not None else st.container():  # the projector: by the votes
            result()
    if followed is None:
        st.divider()
        step_navigation(lesson, number)


def shown_step(lesson_id: str, number: int):
    """The lesson and step to show; a step the lesson lacks is said, and its first shown
    (a lesson this session cannot open, e.g. another session's upload: the list)."""
    class_id = room.state.get("id") if followed is not None else None
    try:
        return lessons.step_of(lesson_id, number, class_id)
    except StackError as err:
        show_error(err)
        state["step"] = 1
        urls.show_own(address())
        try:
            return lessons.step_of(lesson_id, 1, class_id)
        except StackError:
            state["lesson"] = None
            return None, None


lesson, step = shown_step(state["lesson"], state.get("step", 1)) if state.get("lesson") \
    else (None, None)
if lesson is not None:
    if presenting and teacher:  # from the front: the step wide, the class link beside it
        slide, side = st.columns([3, 1], gap="large")
        with slide, st.container(key="present"):
            step_view(lesson, step, lesson.steps.index(step) + 1)
        room.class_panel(side)
        votes.after_class(side)
    elif presenting:
        with st.container(key="present"):
            step_view(lesson, step, lesson.steps.index(step) + 1)
    else:
        step_view(lesson, step, lesson.steps.index(step) + 1)
else:
    lesson_list()
if presenting:
    st.stop()  # from the front: the step alone, no glossary under it
st.divider()
st.header("Glossary")
st.markdown("The terms the lab uses, each in a line. The same definitions are the help (?) "
            "of the controls and the \"Terms\" under each figure.")
glossary.show_glossary()
