"""Learn's class: a teacher presents a lesson from the front and the students on
the class link (``/learn?class=ID``) follow the teacher's step. Not a page of its own:
views/learn.py calls these. The class (its lesson, its step, its presenter token) is kept
by the server (`stacklab.serve.classroom`, one `session.classes()` per server, or the Ray
cluster's with ``STACKLAB_RAY_ADDRESS``); the token stays in the teacher's session, never
in a link, so only the teacher moves the class."""

from __future__ import annotations

import streamlit as st

from stacklab import StackError
from ui import polls, session, urls
from ui.watch import VOTER_COOKIE, endpoint, watch
from ui.library import LINK_VALUES, ClassView, qr_png, write_values
from ui.markdown import show_error
from parts.share_panel import UNREACHABLE_QR, reachable_address, unreachable

state = session.PageState("class", "id", "token", "following", "ended", "qr", "problem",
                          "voter", "rounds")

POLL_SECONDS = polls.CLASS_SECONDS  # a student follows the teacher within one of these
HEARTBEAT_SECONDS = 60.0  # an idle teacher's page still says it is there (the TTL is minutes)
NO_IDENTITY = "no voter identity yet"  # a watch version no class has: the page reruns and asks


def teaching() -> bool:
    """Whether this session presents a class (it holds the presenter token). Each run of
    the teacher's page tells the class its teacher is there; a class that has ended (its
    teacher gone for the TTL) is forgotten here too."""
    if not state.get("token"):
        return False
    if session.classes().heartbeat(state["id"], state["token"]):
        return True
    state.pop("token")
    state["problem"] = "The class had ended (no sign of this page for its time to live)."
    return False


def present_to_class(lesson_id: str, number: int) -> bool:
    """Open a class on this step and present it: the token stays in this session. A server
    at its cap of classes (each with its teacher here) refuses: the page says so. Whether
    the class opened."""
    try:
        opened = session.classes().open(lesson_id, number, opener=session.owner())
    except StackError as err:  # the server's cap of classes: said as it is, with its fix
        state["problem"] = err
        return False
    state["id"], state["token"], state["following"] = opened.id, opened.token, False
    state.pop("ended")
    state.pop("problem")
    session.set_view("present")
    return True


def moved(lesson_id: str, number: int) -> None:
    """The teacher went to step ``number``: the class goes there too (only with the token)."""
    if not state.get("token"):
        return
    try:
        session.classes().move(state["id"], state["token"], number, lesson=lesson_id)
    except StackError as err:  # the class has ended: this page presents no class any more
        state.pop("token")
        state["problem"] = err.message


def end_class() -> None:
    """The teacher ends the class: the students' pages say so at their next poll. Its
    votes stay in this session, for the class summary and its CSV."""
    try:
        state["rounds"] = (state["id"], session.classes().rounds(state["id"], state["token"]))
        session.classes().close(state["id"], state["token"])
    except StackError:
        pass  # it had ended already
    state.pop("token")
    state.pop("id")
    session.set_view(None)


def join(class_id: str) -> None:
    """A class link (``class=ID``) opened: follow that class (once per id, so leaving it
    sticks while the address still names it)."""
    if class_id != state.get("id"):
        state["id"], state["following"] = class_id, True
        state.pop("token")
        state.pop("ended")


def following() -> bool:
    return bool(state.get("following"))


def voter() -> str | None:
    """This device's voter identity in the class it follows: the one its browser kept (a
    cookie per class, `ui.watch.VOTER_COOKIE`, so a reload or a second scan of the QR code
    is the same voter), else a new one the server issues (`Classes.issue_voter`: signed, no
    name in it, never shown). None while the server issues none to this device's address
    (many joined from it at once): the page asks again at its next run."""
    class_id = state.get("id")
    kept = state.get("voter")
    if kept and kept[0] == class_id:
        return kept[1]
    classes = session.classes()
    cookie = st.context.cookies.get(VOTER_COOKIE + str(class_id))
    token = (cookie if cookie and classes.is_voter(class_id, cookie)
             else classes.issue_voter(class_id, st.context.ip_address))
    if token:
        state["voter"] = (class_id, token)
    return token


def followed() -> ClassView | None:
    """The class this session follows, now (its lesson and step); None when it follows
    none, or when the class has ended (then the page says so)."""
    if not following():
        return None
    view = session.classes().follow(state["id"], voter())
    if view is None:
        state["following"], state["ended"] = False, True
    return view


def class_address() -> dict[str, str]:
    """The students' address: ``class=ID`` (by its row of the link table)."""
    return write_values({"class": state["id"]}, (LINK_VALUES["class"],))


def _leave() -> None:
    state["following"] = False


def _rejoin() -> None:
    state["following"] = True


def student_bar(view: ClassView | None) -> None:
    """What a student on a class link is told, at the top of the page: following the
    teacher (and the button to explore on their own), or not (and the button back)."""
    if view is not None:
        box = st.container(border=True, key="class_follow_bar")
        words, button = box.columns([3, 1], vertical_alignment="center")
        words.markdown(f"**Following the teacher** (class `{state['id']}`): this page shows "
                       "the teacher's step and moves when the teacher does.")
        button.button("Explore on my own", key="class_leave", on_click=_leave,
                      icon=":material/explore:", width="stretch")
        every = polls.every("class")  # wider when the server is loaded (ui.polls)
        polls.say_load(POLL_SECONDS, every)
        st.fragment(poll)(view.version, every)
    elif state.get("ended"):
        lost = ("" if session.classes().outlives_restart else " A restart of this app "
                "server also ends its classes, and their votes are lost.")
        st.warning(f"The class `{state['id']}` has ended (its teacher ended it or left), or "
                   f"there was no such class.{lost} The lessons stay open to explore on your "
                   "own.", icon=":material/event_busy:")
    elif state.get("id") and not state.get("token"):
        box = st.container(border=True, key="class_away_bar")
        words, button = box.columns([3, 1], vertical_alignment="center")
        words.markdown(f"Exploring on your own; the class `{state['id']}` goes on.")
        button.button("Follow the teacher again", key="class_rejoin", on_click=_rejoin,
                      icon=":material/group:", type="primary", width="stretch")


def poll(version: int, every: float) -> None:
    """Follow the class: a fragment that the page's watch (`ui.watch`) reruns only when
    the class's version is no longer ``version`` (the teacher moved, opened or revealed a
    vote, or the class ended); then the page is drawn again.

    This is the followed lesson's poll path. Between two moves the page asks the class's
    watch endpoint (`ui.endpoints`) every ``every`` s, which runs no script at all, so a
    hall of students following one teacher costs the server a few hundred tiny answers a
    second, and one rerun each per move. Where no endpoint answers, the watch reruns this
    fragment at the interval, as ``run_every`` would."""
    with polls.measured(polls.follower_of(voter())):  # as its endpoint polls count it
        now = session.classes().follow(state["id"], voter())
    if now is None or now.version != version or polls.every("class") != every:
        st.rerun()
    identity = voter()  # none yet (its address had its share): asked again at the interval
    watch(endpoint("class", state["id"]), str(version) if identity else NO_IDENTITY, every,
          key="class_watch", voter=identity, cookie=VOTER_COOKIE + state["id"])


def class_link() -> str:
    """The students' link: this server's address as students reach it, ``/learn?class=ID``."""
    return urls.page_link(reachable_address().base, "learn", class_address())


def class_panel(container) -> None:
    """Beside the teacher's slide: the class link, its QR code, and ending the class."""
    link = class_link()
    address = reachable_address()
    with container:
        st.markdown("**The class follows this page**")
        if address.warning:  # before the QR code: a room cannot open it
            unreachable(address)
        qr = state.cached("qr", link, lambda: qr_png(link, scale=8))
        st.image(qr, width="stretch", caption=UNREACHABLE_QR if address.warning else
                 "Scan to follow: Previous and Next move everyone",
                 alt=f"QR code of the class link {link}")
        st.code(link, language=None, wrap_lines=True)
        st.button("End the class", key="class_end", on_click=end_class,
                  icon=":material/stop_circle:", width="stretch")
        heartbeat()


def teacher_bar() -> None:
    """A teacher out of present mode: the class goes on; back to presenting, or end it."""
    box = st.container(border=True, key="class_teacher_bar")
    words, back, end = box.columns([3, 1, 1], vertical_alignment="center")
    words.markdown(f"You present class `{state['id']}`: `{class_link()}`")
    back.button("Present again", key="class_present", icon=":material/co_present:",
                on_click=session.set_view, args=("present",), width="stretch")
    end.button("End the class", key="class_end", on_click=end_class,
               icon=":material/stop_circle:", width="stretch")
    heartbeat()


def show_problem() -> None:
    problem = state.pop("problem", None)
    if isinstance(problem, StackError):
        show_error(problem)
    elif problem:
        show_error(StackError("E_VALUE", problem,
                              hint="present the lesson again to open a new class"))


@st.fragment(run_every=HEARTBEAT_SECONDS)
def heartbeat() -> None:
    """An idle teacher's page is still there: the class stays open while it is. A timer, the
    one ``run_every`` of the app (the architecture test allows it): it follows nothing on
    the server, it acts there with the class's token, which stays in the session."""
    if state.get("token") and not session.classes().heartbeat(state["id"], state["token"]):
        st.rerun()
