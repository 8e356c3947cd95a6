"""Learn's votes (peer instruction): a student following a class sends their prediction to
it; the teacher's projector shows how the room voted, reveals the run's answer, and may
ask the room to vote again. Not a page of its own: views/learn.py calls these, and the
class summary page (views/class_summary.py) its rounds and CSV; `projected` draws the count.
The votes are kept by the class (`stacklab.serve.classroom.votes` through
`session.classes()`): counts only, each student's session known by a random voter
identity, never by a name."""

from __future__ import annotations

import streamlit as st

from stacklab import StackError
from ui import polls, session
from ui.library import ClassView, Round, votes_csv
from ui.markdown import plain, show_error
from ui.watch import endpoint, watch
from parts.classroom import projected, room

state = session.PageState("votes", "sent", "problem")

WAITING = "waiting for the run"  # no votes version: the count redraws at each interval
ROUNDS_SHOWN = 2  # the rounds side by side: before and after the discussion


# -- a student's vote ---------------------------------------------------------------------

def send(number: int, choice: str | None, in_round: int | None = None) -> bool:
    """The student picked ``choice`` on step ``number`` in round ``in_round`` (the round
    the page showed): it goes to the class (the last vote counts; one cast in a round that
    is over counts nothing). Whether it counted: a refusal is kept for `student_line`,
    which says what happened."""
    voter = room.voter()
    if choice is None:
        return False
    if voter is None:
        state["problem"] = StackError(
            "E_VALUE", "this device has no voter identity yet: many devices joined from its "
            "network at once", node="the vote", hint="pick your choice again in a few seconds")
        return False
    try:
        counted_in = session.classes().vote(room.state["id"], voter, number, choice,
                                            in_round)
    except StackError as err:
        state["problem"] = err
        return False
    if counted_in:
        state["sent"] = (number, counted_in, choice)
    state.pop("problem")
    return bool(counted_in)


def closed(view: ClassView | None) -> bool:
    """Whether the class's round on the step on show takes no more votes (revealed)."""
    return view is not None and view.round > 0 and not view.voting


def student_line(view: ClassView, number: int, label: str) -> None:
    """Under a following student's choices: whether their vote is in, in which round; once
    the teacher revealed, that the answer is out, the run's number (``label``: what it
    measures) and the choice it supports, and whether the student's own choice was right.
    A vote the class refused (the teacher revealed or moved on first) is said as what
    happened, never as an error."""
    if view.round == 0:
        return
    refused = state.pop("problem") if state.get("problem") is not None else None
    if refused is not None:
        (st.warning if "votes a second" in refused.message else st.info)(
            f"Your choice was not counted: {plain(refused.message, 200)}.",
            icon=":material/info:")
    sent = state.get("sent")
    mine = view.mine or (sent[2] if sent is not None and sent[:2] == (number, view.round)
                         else None)
    if view.answered:
        told(view, label, mine)
    elif not view.voting:
        st.info(f"The teacher revealed the answer: round {view.round}'s votes are closed. "
                "The run's number shows here as soon as it is in.",
                icon=":material/hourglass_top:")
    elif mine is not None:
        st.success(f"Your vote is in (round {view.round}): *{plain(mine, 100)}*. Only you "
                   "see your choice; the projector shows how many chose each.",
                   icon=":material/how_to_vote:")
    else:
        again = " again, after talking it over with your neighbour" if view.round > 1 else ""
        st.info(f"Round {view.round}: your choice goes to the class as you pick it{again}.",
                icon=":material/how_to_vote:")


def told(view: ClassView, label: str, mine: str | None) -> None:
    """The answer is out: the run's number, the choice it supports, the student's mark."""
    with st.container(border=True, key="votes_told"):
        st.markdown(f"**The answer is out** (round {view.round}): the run measured "
                    f"{plain(label, 200)} **{view.value:.2f}**, so *{plain(view.supported, 100)}*.")
        if mine is None:
            st.markdown("You did not vote in this round.")
        elif mine == view.supported:
            st.markdown(f"**✓ Right.** You chose *{plain(mine, 100)}*.")
        else:
            st.markdown(f"**✗ Not this time.** You chose *{plain(mine, 100)}*.")
        st.caption("Your choices are closed until the teacher asks the room to vote again.")


# -- the projector ---------------------------------------------------------------------------

def _class() -> tuple[str, str]:
    return room.state["id"], room.state["token"]


def projector(question: str, label: str, choices: tuple[str, ...], reveal, measured):
    """The teacher's view of the room's votes on the step on show: the step's question
    above them, round 1 opened on it, the live count (`count`), Reveal (``reveal()`` runs
    the step) and Vote again. Returns whether the latest round is revealed (then the page
    shows the run's outcome) and the column beside the votes to show it in, so that the
    figure is on screen with the votes. ``measured()`` is the run's number and the choice
    it supports once the run is in, else None."""
    try:
        session.classes().open_vote(*_class(), choices)
        latest = session.classes().tally(*_class()).latest
    except StackError as err:  # the class has ended: the page says so at its next run
        show_error(err)
        return True, None
    projected.question_line(st, question, f"{label} will be")
    votes, beside = (st.columns(2, gap="large") if latest.revealed else (st.container(), None))
    with votes:
        count(measured)
        buttons(latest.revealed, reveal)
    return latest.revealed, beside


def buttons(revealed: bool, reveal) -> None:
    """Reveal (before it), Vote again, and where the votes live."""
    reveal_column, again_column = st.columns(2, vertical_alignment="center")
    if not revealed:
        reveal_column.button("Reveal the answer", key="votes_reveal", type="primary",
                             icon=":material/visibility:", on_click=_reveal, args=(reveal,),
                             width="stretch", help="Closes this round's votes and runs the step")
    again_column.button("Vote again", key="votes_again", icon=":material/replay:",
                        on_click=_again, width="stretch",
                        help="A new round on this step, after a discussion: both rounds show "
                             "side by side")
    st.caption("The votes outlive a restart of this app server (the Ray cluster keeps them)."
               if session.classes().outlives_restart else
               "The votes live in this app server's memory: a restart loses them. Download "
               "them (CSV) before restarting it.")


def _reveal(reveal) -> None:
    session.classes().reveal(*_class())
    reveal()


def _again() -> None:
    session.classes().vote_again(*_class())


@st.fragment
def count(measured) -> None:
    """The live count: the step's last rounds side by side, and how many voted out of how
    many follow; after Reveal, the run's number beside the vote once the run is in.

    The page watches the class's votes version (`ui.watch`, asked every
    `ui.polls.every("votes")` without a script run) and this fragment reruns only when a
    vote came in or the number following changed; between Reveal and the run's number,
    at each interval (the run is this page's, not the class's)."""
    if not room.state.get("token"):  # ended while this ran alone (End's own run was
        st.rerun(scope="app")  # cut short by this fragment's): the whole page says so
    try:
        tally = session.classes().tally(*_class())
        latest = tally.latest
        if latest.revealed and latest.value is None and (outcome := measured()) is not None:
            session.classes().outcome(*_class(), *outcome)
            tally = session.classes().tally(*_class())
    except StackError as err:
        show_error(err)
        return
    waiting = tally.latest.revealed and tally.latest.value is None
    watch(endpoint("votes", room.state["id"]), WAITING if waiting else tally.version,
          polls.every("votes"), key="votes_watch")
    with st.container(key="votes_count"):
        projected.voted_line(st, tally.latest.voted, tally.following)
        shown = tally.rounds[-ROUNDS_SHOWN:]
        for column, counted in zip(st.columns(len(shown), gap="large"), shown):
            title = f"Round {counted.round}" + (" · revealed" if counted.revealed else "")
            projected.vote_bars(column, counted, title)


# -- after class ------------------------------------------------------------------------------

def class_rounds() -> tuple[str | None, tuple[Round, ...]]:
    """This session's class and every round of it: read from the class while it is open,
    else the ones kept when the teacher ended it (none when it presented no class)."""
    if room.state.get("token"):
        try:
            return room.state["id"], session.classes().rounds(*_class())
        except StackError:
            pass
    return room.state.get("rounds") or (None, ())


def ended_class_line() -> None:
    """On Learn, once the teacher ended the class: its votes are still here to read."""
    class_id, rounds = class_rounds()
    if rounds and not room.state.get("token"):
        box = st.container(border=True, key="votes_ended_bar")
        box.markdown(f"Your class `{class_id}` has ended; its votes are kept in this session.")
        after_class(box)


def download(container, key: str) -> None:
    """The class's votes as CSV (counts only, no student), made when pressed."""
    kept = room.state.get("rounds")
    class_id = room.state.get("id") or (kept[0] if kept else None)
    container.download_button("Download the votes (CSV)", key=key, data=csv_maker(),
                              file_name=f"class-{class_id or 'votes'}.csv",
                              mime="text/csv", icon=":material/download:", on_click="ignore")


def csv_maker():
    """What makes the CSV when the button is pressed. Streamlit calls it outside this
    session's script (no session state there), so it is made here holding what it needs:
    the classes, this class's id and token (its votes up to the click), and the rounds kept
    when the teacher ended it."""
    classes = session.classes()
    class_id, token = room.state.get("id"), room.state.get("token")
    kept = (room.state.get("rounds") or (None, ()))[1]

    def make() -> str:
        if token:
            try:
                return votes_csv(classes.rounds(class_id, token))
            except StackError:
                pass  # the class ended since the page ran: its kept rounds
        return votes_csv(kept)

    return make


def after_class(container) -> None:
    """Beside the teacher's slide or bar: the class summary page and the votes' CSV."""
    container.page_link("views/class_summary.py", label="Class summary: every step's votes",
                        icon=":material/summarize:")
    download(container, "votes_csv")
