"""Learn's "Your own lesson": a teacher uploads a lesson file (Markdown, as "Write your own
lesson" in the docs describes it), sees the checker's result (read, resolved and linted at
once; each claim trained on seeds 0-2 on the shared pool when they ask), opens it and
presents it. Not a page of its own: views/learn.py calls these. Every problem is shown as
the checker writes it (file, line, caret, fix), as text: nothing from the file is rendered
as HTML."""

from __future__ import annotations

import streamlit as st

from ui import lessons, live_run
from ui.library import FOLDER_PROBLEMS, MAX_LESSON_BYTES
from ui.markdown import plain, show_error

DOCS_PAGE = "Write your own lesson"


def upload_panel(start) -> None:
    """The upload, the quick check's result, and the lesson's Start and check buttons;
    ``start(lesson_id)`` opens a lesson."""
    box = st.container(border=True, key="learn_upload")
    box.markdown(f"**Your own lesson.** Upload a lesson file (Markdown, at most "
                 f"{MAX_LESSON_BYTES // 1024} KB; the docs' page \"{DOCS_PAGE}\" has a "
                 "complete example). It stays in this session; a class sees it only when "
                 "you present it.")
    if FOLDER_PROBLEMS:  # the server's folder of lessons (STACKLAB_LESSONS): what it left out
        box.warning("Lesson files of this server's folder that were not loaded:")
        box.code("\n".join(FOLDER_PROBLEMS[:20]), language=None, wrap_lines=True)
    file = box.file_uploader("Lesson file (.md)", type=["md", "txt"], key="learn_upload_file",
                             max_upload_size=1)
    if file is not None:
        lessons.keep(lessons.read_upload(file.getvalue(), file.name))
    upload = lessons.uploaded()
    if upload is None:
        return
    if upload.problems:
        box.error(f"The checker found {len(upload.problems)} problem"
                  f"{'s' * (len(upload.problems) != 1)} in {plain(upload.name, 80)}: fix "
                  "them in the file and upload it again.", icon=":material/error:")
        for problem in upload.problems[:20]:
            box.code(problem, language=None, wrap_lines=True)
    lesson = upload.lesson
    if lesson is None:
        return
    if not upload.problems:
        box.success(f"**{plain(lesson.title, 200)}**: {len(lesson.steps)} steps, read, every "
                    "stack resolved and the text linted.", icon=":material/check_circle:")
    start_button, check_button = box.columns(2)
    start_button.button("Start this lesson", key="learn_upload_start", on_click=start,
                        args=(lesson.id,), icon=":material/play_arrow:", type="primary")
    check_button.button("Check its claims: train each step on seeds 0-2",
                        key="learn_upload_check", on_click=lessons.start_checks,
                        icon=":material/fact_check:",
                        help="Runs on the shared workers: a few seconds per step and seed")
    with box:
        check_results()


def check_results() -> None:
    """Each claim on every seed, redrawn as its runs train (the fragment follows the first
    run still training: `ui.live_run.follow_run`)."""
    err = lessons.state.pop("error")
    if err is not None:
        show_error(err)
    found = lessons.check_lines()
    training = found is not None and not found[1]

    @st.fragment
    def results() -> None:
        now = lessons.check_lines()
        if now is None:
            return
        lines, ended, held = now
        st.code("\n".join(lines), language=None, wrap_lines=True)
        if not ended:
            st.caption("Training the claims on the shared workers…")
            running = lessons.training_check()
            if running is not None:  # redrawn as the check that trains moves on (or ends)
                live_run.follow_run(running, key="learn_check_follow")
        elif held:
            st.success("Every claim holds on seeds 0-2: this lesson is checked.",
                       icon=":material/verified:")
        else:
            st.warning("A claim fails on a seed: change the step or its bound in the file.")
        if training and ended:
            st.rerun()  # the checks ended: draw the page (the lesson checked), stop polling

    results()


def unchecked_note(lesson) -> None:
    """On every step of a lesson whose claims no check has trained."""
    if not lesson.checked:
        st.warning("This lesson's claims have not been checked: what it says may not be "
                   "what the run shows. (Its teacher can train them: \"Check its claims\" on "
                   "Learn, or `stacklab lessons check` on the file.)", icon=":material/warning:")
