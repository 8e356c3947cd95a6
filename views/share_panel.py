"""The classroom on the pages: the teacher's share panel (Train), the projector view
(Train and Explore) and what a student on the teacher's link is told. Not a page of its
own: views/train.py, views/explore.py and views/build.py call these. The link, the address
and the projector's figure come from `stacklab.serve.links.share`."""

from __future__ import annotations

import streamlit as st

from stacklab import StackError, Status
from ui import controls, scripts, session, urls
from ui.lab import ALL_PINS, classroom_link, lan_address, present_figure, qr_png, share_address
from ui.markdown import plain, show_error

train_state = session.PageState("train", "share", "share_pins", "share_qr", "present",
                                "present_figure", "student_scrolled")

PRESENT_CSS = """<style>
.st-key-present p, .st-key-present li { font-size: 24px; line-height: 1.4; }
.st-key-present h2 { font-size: 44px; }
</style>"""


def reachable_address():
    """Where students reach this server (`share_address`): what it listens on
    (``server.address``), the Host the teacher's browser used, its scheme, and this
    machine's address on its network; the base URL path when the server has one."""
    headers = st.context.headers
    url = st.context.url or ""
    address = share_address(st.get_option("server.address"), headers.get("Host"),
                            port=int(st.get_option("server.port") or 8501),
                            scheme="https" if url.startswith("https://") else "http",
                            lan=lan_address())
    path = (st.get_option("server.baseUrlPath") or "").strip("/")
    return address if not path else type(address)(f"{address.base}/{path}", address.warning,
                                                  address.fix)


def share_button(container, job) -> None:
    """The share panel behind a button beside Train: drawn only while it is open."""
    panel = container.popover("Share with the class", icon=":material/share:",
                              key=train_state.key("share"),
                              on_change="rerun")
    if panel.open:
        with panel:
            share_panel(job)


def share_panel(job) -> None:
    """The classroom link (the experiment, the pins the teacher picks, ``run=KEY`` once a
    run exists), a warning when students cannot reach it, its QR code, how many sessions
    are on the run now, and the projector view's switch."""
    address = reachable_address()
    if address.warning:
        st.warning(address.warning, icon=":material/wifi_off:")
        st.code(address.fix, language="bash")
    pins = st.multiselect(
        "Pinned on the students' page", ALL_PINS, default=ALL_PINS,
        key=train_state.key("share_pins"),
        help="The controls the link hides (hide=): a student sees their values, cannot change "
             "them, and so attaches to the same run.")
    run_key = job.key if job is not None and session.url_run_key() == job.key else None
    try:
        link = classroom_link(session.experiment(), address.base, pinned=pins, run_key=run_key)
    except StackError as err:
        show_error(err, prefix="This experiment cannot be shared as a link: ")
        return
    st.caption("Students who open this link see this run at once, with nothing to press."
               if run_key else "Press Train first: then the link takes students straight to "
               "the run (run=KEY); before that, each student's Train joins one training.")
    st.code(link, language=None, wrap_lines=True)
    qr = _qr(link)
    if qr is not None:
        st.image(qr, width=300, caption="Scan with a phone's camera to open the link")
    else:  # the link still works; only its picture cannot be made
        st.info(f"This link is {len(link):,} characters long, more than a QR code holds, so "
                "share it as text: copy it from the box above. A shorter stack (its comments "
                "and blank lines count too) fits in a QR code.", icon=":material/qr_code:")
    if job is not None:
        watching(job)
    st.toggle("Projector view", value=session.presenting(), key=train_state.key("present"),
              on_change=lambda: urls.set_presenting(train_state["present"]),
              help="The pattern figure large and first, its text readable from the back of a "
                   "room (view=present in this page's address)")


def _qr(link: str) -> bytes | None:
    """The QR code of ``link``, made once per link; None when the link is too long for one."""
    def make():
        try:
            return qr_png(link)
        except StackError:
            return None

    return train_state.cached("share_qr", link, make)


@st.fragment(run_every=2.0)
def watching(job) -> None:
    """How many sessions are on the run now: those watching it train, or, once it has
    ended, those whose current run it is (this one included)."""
    now = job.view(session.owner())
    count = now.watchers if now.active else session.pool().viewers(job.key)
    st.metric("Sessions on this run now", count, help="this session included")


# --- the projector view -------------------------------------------------------------------


def show_presented(pattern, note: str = "") -> None:
    """The pattern figure for a projector: large, its text 20 px or more, the colour bar
    beside the map, and the score in large type beside it."""
    figure = train_state.cached("present_figure", pattern, lambda: present_figure(pattern.figure),
                                same_object=True)
    with st.container(key="present"):
        st.html(PRESENT_CSS)
        figure_col, words_col = st.columns([7, 3], gap="medium")
        figure_col.plotly_chart(figure, width="content", key="present_chart")
        if pattern.score:
            words_col.markdown(f"## {plain(pattern.score, 300)}")
        words_col.markdown(f"**{plain(pattern.title, 200)}**{note}")
        words_col.markdown(plain(pattern.caption, 1000))


def projector(owner: str) -> None:
    """The projector view at the top of Train: the current run's pattern figure, redrawn
    at each evaluation while it trains."""
    job = session.current_job()
    live = job is not None and job.view(owner).active

    @st.fragment(run_every=1.0 if live else None)
    def presented():
        current = session.current_job()
        now = current.view(owner) if current is not None else None
        if now is None or now.pattern is None:
            st.info("The pattern figure appears here, large, once a run's first evaluation "
                    "is in: press **Train** below.")
            return
        step = f" at step {now.history[-1]['step']}" if now.history else ""
        status = "" if now.status == Status.FINISHED else f" ({now.status})"
        show_presented(now.pattern, f"{step}{status}")

    presented()


# --- what a student on the teacher's link is told ------------------------------------------


def student_note(view) -> None:
    """On Train, for a session whose link opened the run it shows (``run=KEY``)."""
    finished = view is not None and not view.active
    if finished and not train_state.get("student_scrolled"):  # its heatmap, in view
        train_state["student_scrolled"] = True
        scripts.scroll_later(f".st-key-train_pattern_{view.id}")
    if session.student_view(session.current_job()):
        st.info("**The shared run**, trained by the teacher's link. The link sets everything, "
                "so there is nothing to choose or press: "
                + ("the run has finished; its pattern figure is below, and Explore shows all "
                   "its figures." if finished else
                   "its progress and its pattern figure follow below as it trains."),
                icon=":material/groups:")
    else:
        st.caption(":material/groups: This is the run of the link you opened, trained by "
                   "whoever shared it. Change a setting and press Train to train your own.")


def whose_run(job) -> str:
    """How Explore names the run it shows: the session's own, or the one its link opened."""
    if not session.from_link(job):
        return "Your latest run"
    if session.student_view(job):
        return "The shared run, trained by the teacher's link"
    return "The run of the link you opened (trained by whoever shared it)"


def read_only_note(job) -> None:
    """On Explore, for a run the session did not train: why nothing here changes it."""
    if session.from_link(job):
        st.caption(":material/lock: You are looking at this run, not training it: the link "
                   "decides its stack and settings, so everyone who opens the link sees the "
                   "same run.")


BUILD_PINS = ("stack", "input", "input_dtype", "dtype", "presets", "layers")


def build_note() -> None:
    """On Build, when the link pins the stack: why it cannot be edited, and whose run it is."""
    pinned = [name for name in BUILD_PINS if controls.hidden(name)]
    if "stack" not in pinned:
        return
    shared = session.shared_run(session.current_job())
    st.info(":material/lock: **Read-only**: the teacher's link pins the stack"
            + (f" ({', '.join(n for n in pinned if n != 'stack')} too)" if len(pinned) > 1 else "")
            + ", so everyone who opens it builds and trains the same network."
            + (" It is the stack of the shared run on Train, trained by the teacher's link."
               if shared else ""))
