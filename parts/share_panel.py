"""A run shared with a class, on the pages: the teacher's share dialog (Train), present mode
on Train and what a student on the teacher's link is told. Not a page of its own:
views/train.py, views/explore.py and views/build.py call these, and the class panel
(`parts.classroom.room`) the address students reach. The link, the address, the QR code
and the projector's figure come from `stacklab.serve.links` (`share`, `addresses`, `qr`,
`projector`)."""

from __future__ import annotations

import streamlit as st

from stacklab import TASKS, StackError, Status
from ui import controls, live_run, polls, present, scripts, session, urls
from ui.library import (ALL_PINS, best_head_figure, lan_address, network_addresses, qr_png,
                    restart_hint, share_address, share_link)
from ui.markdown import plain, show_error
from ui.watch import endpoint, watch

train_state = session.PageState("train", "share", "share_pins", "share_qr", "present",
                                "present_figure", "student_scrolled", "best_head")


def reachable_address():
    """Where students reach this server (`share_address`): what it listens on
    (``server.address``), the Host the teacher's browser used, its scheme, and this
    machine's address on its network; the base URL path when the server has one."""
    headers = st.context.headers
    url = st.context.url or ""
    address = share_address(st.get_option("server.address"), headers.get("Host"),
                            port=server_port(),
                            scheme="https" if url.startswith("https://") else "http",
                            lan=lan_address())
    path = (st.get_option("server.baseUrlPath") or "").strip("/")
    return address if not path else type(address)(f"{address.base}/{path}", address.warning,
                                                  address.fix)


UNREACHABLE_QR = ("Unreachable: no phone can open this QR code until the server listens on "
                  "the room's network")


def unreachable(address) -> None:
    """What a teacher sees where the link cannot reach the room (a server on loopback
    only, or no network): why, and the exact command that fixes it."""
    room = (address.fix or "").startswith("make run")
    said = address.warning.split(" Restart it")[0].rstrip(".")
    st.warning(f"**No phone can open this link.** {said}." + (" Restart it for the room:" if room
               else ""), icon=":material/wifi_off:")
    st.code(restart_hint(server_port()) if room else address.fix, language="bash")
    addresses = network_addresses()
    st.caption("This machine's network addresses: " + (", ".join(
        f"`{a}`" for a in addresses) if addresses else "none found (`hostname -I`)"))


def server_port() -> int:
    return int(st.get_option("server.port") or 8501)


def share_button(container, job) -> None:
    """The share dialog behind a button beside Train: open while ``train_share`` is set,
    closed by its X, Escape or a click outside (never left open over present mode)."""
    container.button("Share with the class", icon=":material/share:",
                     key="train_share_open", on_click=lambda: train_state.__setitem__("share", True))
    if train_state.get("share") and not session.presenting():
        share_dialog(job)


def _closed() -> None:
    train_state["share"] = False


@st.dialog("Share with the class", width="large", on_dismiss=_closed)
def share_dialog(job) -> None:
    """The classroom link, its QR code large, copy (the code box's button), the sessions on
    the run, how to restart the server for the room, and present mode's switch."""
    address = reachable_address()
    qr_col, words_col = st.columns([5, 6], gap="medium")
    with words_col:
        link = _link(job, address)
    if link is None:
        return
    qr = _qr(link)
    if qr is not None:
        qr_col.image(qr, width="stretch", caption=UNREACHABLE_QR if address.warning else
                     "Scan with a phone's camera to open the link",
                     alt=f"QR code of the class link {link}")
    else:  # the link still works; only its picture cannot be made
        qr_col.info(f"This link is {len(link):,} characters long, more than a QR code holds, "
                    "so share it as text: copy it from the box beside. A shorter stack (its "
                    "comments and blank lines count too) fits in a QR code.",
                    icon=":material/qr_code:")
    with words_col:
        if address.warning:
            unreachable(address)
        if job is not None:
            watching(job)
        st.toggle("Present mode", value=session.presenting(), key=train_state.key("present"),
                  on_change=_present_switched,
                  help="One figure at a time, full width, readable from the back of a room "
                       "(view=present in this page's address)")


def _present_switched() -> None:
    _closed()  # the dialog never stays open over present mode
    urls.set_presenting(train_state["present"])


def _link(job, address) -> str | None:
    """The link, and what it does: ``?run=KEY`` alone once a run exists and everything is
    pinned (the short class link), else the experiment with its pins."""
    with st.expander("Pinned on the students' page (all by default)"):
        pins = st.multiselect(
            "Pinned controls", ALL_PINS, default=ALL_PINS, key=train_state.key("share_pins"),
            help="The controls the link hides (hide=): a student sees their values, cannot "
                 "change them, and so attaches to the same run.")
    run_key = job.key if job is not None and session.url_run_key() == job.key else None
    try:
        link = share_link(session.experiment(), address.base, pinned=pins, run_key=run_key,
                          known=urls.known_keys())
    except StackError as err:
        show_error(err, prefix="This experiment cannot be shared as a link: ")
        return None
    st.code(link, language=None, wrap_lines=True)
    st.caption("Students who open this link see this run at once, with nothing to press."
               if run_key else "Press Train first: then the link takes students straight to "
               "the run (run=KEY); before that, each student's Train joins one training.")
    return link


def _qr(link: str) -> bytes | None:
    """The QR code of ``link``, made once per link; None when the link is too long for one."""
    def make():
        try:
            return qr_png(link)  # QR_SCALE, as `stacklab share --qr` draws it
        except StackError:
            return None

    return train_state.cached("share_qr", link, make)


@st.fragment
def watching(job) -> None:
    """How many sessions are on the run now: those watching it train (on every app server
    of a Ray cluster: each tells the run's actor its own), or, once it has ended, those of
    this app server whose current run it is (this one included). The fragment follows the
    count through its watch endpoint (`ui.live_run.sessions_answer`)."""
    count = live_run.sessions_on(job.key, job.view(session.owner()))
    st.metric("Sessions on this run now", count,
              help="this session included. While the run trains, every app server of a Ray "
                   "cluster counts; once it has ended, this app server's sessions")
    watch(endpoint("sessions", job.key), str(count), polls.every("share"), key="share_watch")


# --- present mode on Train -----------------------------------------------------------------


def show_presented(pattern, note: str = "") -> None:
    """A run's pattern figure for a projector (Explore's present mode)."""
    show_slide(pattern.figure, pattern.title, pattern.score, pattern.caption, note)


def show_slide(figure, title: str, score: str | None, caption: str, note: str = "",
               key: str = "present_chart") -> None:
    """One figure for a projector: large, its text 20 px or more, the colour bar beside the
    map, and the score in large type beside it."""
    present.hide_chrome()
    with st.container(key="present"):
        figure_col, words_col = st.columns([11, 7], gap="medium")
        present.figure_at_full_width(figure_col, figure, key, score=score)
        if score:
            words_col.markdown(f"## {plain(score, 300)}")
        words_col.markdown(f"**{plain(title, 200)}**{note}")
        words_col.markdown(plain(caption, 1000))


def projector(owner: str) -> None:
    """Present mode on Train: the current run's figures one at a time (the pattern figure
    first; for a head-score task the best head's attention, then the head grid), redrawn at
    each evaluation while it trains."""
    present.begin("train")
    job = session.current_job()
    live = job is not None and job.view(owner).active

    @st.fragment
    def presented():
        current = session.current_job()
        now = current.view(owner) if current is not None else None
        if now is None or now.pattern is None:
            present.slide_bar([])
            st.info("The pattern figure appears here, large, once a run's first evaluation "
                    "is in: leave present mode and press **Train**.")
            return
        step = f" at step {live_run.last_step(now)}" if now.history else ""
        status = "" if now.status == Status.FINISHED else f" ({now.status})"
        slides = _slides(current, now)
        index = present.slide_bar([name for name, *_ in slides])
        _, figure, score, caption = slides[index]
        show_slide(figure, slides[index][0], score, caption, f"{step}{status}")
        if live:
            live_run.follow_run(current, key="present_follow")  # redrawn as the run moves on

    presented()


def _slides(job, now) -> list[tuple]:
    """(title, figure, score, caption) of each figure present mode steps through."""
    pattern = (now.pattern.title, now.pattern.figure, now.pattern.score, now.pattern.caption)
    best = None
    heads_task = TASKS[job.config.task].pattern_figure == "head_scores"  # induction, repeat
    if job.run is not None and not now.active and heads_task:
        best = train_state.cached("best_head", job.key, lambda: best_head_figure(job.run))
    if best is None:
        return [pattern]
    figure, score = best
    return [("The best head's attention", figure, score,
             "The attention of the head with the task's largest head score, on one held-out "
             "sequence (weights 0-1). Next: every head's scores."), pattern]


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
