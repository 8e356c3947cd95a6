"""Home: what stacklab is, three ways in (Learn, Teach, Build and research), and one button
that trains `reverse` on the shared pool and shows its anti-diagonal forming."""

import streamlit as st

from stacklab import Status, StackError
from ui import figures, live_run, scripts, session, urls
from ui.library import LESSONS, Experiment, available_devices
from ui.markdown import plain, show_error

PICTURE = figures.asset("reverse_learned.png")  # a finished run of reverse, as Train shows it
state = session.PageState("home", "job", "error")

old_link = urls.page_of_old_link()  # /?stack=... from before Home was the first page
if old_link is not None:
    st.switch_page(old_link, query_params=st.query_params.to_dict())
urls.start(own={})  # Home's address is "/": the experiment stays out of it
pool = session.pool()
owner = session.owner()


def train_reverse() -> None:
    """Train `reverse`'s preset as the Train page would (it becomes the session's
    experiment and run, so Build, Train and Explore show it too)."""
    preset = Experiment().with_task_preset("reverse")
    try:
        job = pool.submit(owner, preset.stack, preset.train_config(available_devices()))
    except StackError as err:
        state["error"] = err
        return
    session.set_experiment(preset)
    session.make_current(job)
    state["job"] = job.id
    state.pop("error")


def the_run():
    """The run the button started, while the pool still has it."""
    return pool.get(owner, state["job"]) if "job" in state else None


def run_status(now) -> str:
    if now.status == Status.QUEUED:
        return f"Queued: position {now.position} in the queue of the shared workers."
    if now.status == Status.RUNNING:
        return f"Training: step {now.step} of {now.steps}."
    if now.status == Status.FINISHED:
        accuracy = now.history[-1]["accuracy"] if now.history else None
        shown = f", held-out accuracy {accuracy:.0%}" if accuracy is not None else ""
        return f"Finished in {now.seconds:.1f} s ({now.step} steps{shown})."
    return f"{now.status}: {plain(now.error or '', 300)}"


job = the_run()
started = job.view(owner) if job is not None else None


@st.fragment
def live_pattern() -> None:
    """The anti-diagonal forming: the run's pattern figure at each evaluation (the fragment
    follows the run, `ui.live_run.follow_run`)."""
    current = the_run()
    if current is None:
        st.image(PICTURE, caption="What a run shows: the training curves of `reverse` and "
                 "its position table's attention by position alone, where each position looks "
                 "at its partner T-1-t (the anti-diagonal).",
                 alt="A finished run of reverse: its loss falls to near 0 and its held-out "
                     "accuracy rises to 100%; its attention by position alone is a bright "
                     "anti-diagonal, each position t looking at position T-1-t.")
        return
    now = current.view(owner)
    st.markdown(f"**{run_status(now)}**")
    if now.active:
        st.progress(now.progress)
    if now.pattern is not None:
        st.markdown(live_run.step_caption(now.pattern, live_run.last_step(now)))
        figures.chart(st, now.pattern.figure, f"home_pattern_{now.id}", columns=2,
                      score=now.pattern.score)
        st.markdown("Position t must find position T-1-t: the bright anti-diagonal is the "
                    "position table learning which positions pair up.")
    if not now.active:
        st.page_link("views/explore.py", label="Explore everything this run learned",
                     icon=":material/insights:")
    if started is not None and started.active and not now.active:
        st.rerun()  # the run ended: stop polling
    if now.active:
        live_run.follow_run(current, key="home_follow")


st.title("stacklab")
scripts.show_url_problems()
words, picture = st.columns([5, 6], gap="large")
words.markdown(
    "A lab for **how a transformer knows where each token is**. You write a small model as a "
    "stack of layers, train it on a toy task (reverse a sequence, shift it, find a repeat) "
    "and see what its **position table** learned: which positions it tells apart, where "
    "each position looks, and what happens on sequences longer than it was trained on.\n\n"
    "Every experiment is a link: a class opens one link and watches one shared run.")
words.button("Train reverse now", type="primary", icon=":material/play_arrow:",
             on_click=train_reverse, key="home_train",
             disabled=started is not None and started.active,
             help="Trains the reverse task's preset stack on the server's shared workers "
                  "(a few seconds) and draws its attention by position as it learns")
words.markdown("For the impatient: one click, and the anti-diagonal forms on the right.")
if "error" in state:
    show_error(state["error"])
with picture:
    live_pattern()

st.divider()
learn, teach, research = st.columns(3, gap="large")
learn.subheader(":material/school: Learn")
NUMBERS = ("No", "One", "Two", "Three", "Four", "Five", "Six", "Seven", "Eight", "Nine")
learn.markdown(f"{NUMBERS[len(LESSONS)] if len(LESSONS) < 10 else len(LESSONS)} short lessons, "
               "a few steps each: predict what a run will show, run it with one click, and "
               "see the one figure that answers it, with its number. The last two reproduce "
               "papers' results.")
learn.page_link("views/learn.py", label="Start the lessons", icon=":material/arrow_forward:")
teach.subheader(":material/groups: Teach")
FIRST_LESSON = next(iter(LESSONS))  # the lesson a teacher presents first
teach.markdown("Open a lesson on **Learn** and press **Present this lesson to a class**: the "
               "projector shows its step and a QR code; students who scan it follow your "
               "Previous and Next on their phones, vote on the step's prediction, and see "
               "the answer when you reveal it. Or set up an experiment on **Train** and press "
               "**Share with the class**: every student on its link watches the same run, "
               "trained once.")
teach.page_link("views/learn.py", label="Present a lesson to a class",
                icon=":material/co_present:", query_params={"lesson": FIRST_LESSON, "step": 1})
teach.page_link("views/train.py", label="Share a run from Train",
                icon=":material/arrow_forward:")
research.subheader(":material/science: Build and research")
research.markdown("Write any stack in the stack language on **Build** (shapes checked as you "
                  "type), compare runs side by side on **Compare**, read every op on "
                  "**Catalog**, or work in Jupyter: `pip install jupyterlab`, then "
                  "`jupyter lab notebooks/`.")
for page, label in (("views/build.py", "Build a stack"), ("views/compare.py", "Compare runs"),
                    ("views/catalog.py", "The op catalog")):
    research.page_link(page, label=label, icon=":material/arrow_forward:")
