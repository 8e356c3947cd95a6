"""Learn with lessons from files: a teacher's upload (read and quick-checked on the page,
its problems shown as the checker writes them, as text), opened, marked unchecked on every
step, and presented to a class, which alone reaches it; a step's new words with their
glossary entries; a step's answer filled from its run."""

from __future__ import annotations

import time
from pathlib import Path

from streamlit.testing.v1 import AppTest

from ui.lessons import read_upload

ROOT = Path(__file__).parent.parent
APP = str(ROOT / "app.py")
EXAMPLE = (ROOT / "assets" / "lessons" / "first-lesson.md").read_bytes()


def lesson_page(upload=None, **query) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    for key, value in query.items():
        at.query_params[key] = value
    if upload is not None:  # AppTest has no file uploader: the session as an upload leaves it
        at.session_state["lessons_upload"] = upload
    return at.switch_page("views/learn.py").run()


def texts(at) -> str:
    return " ".join(e.value for e in [*at.markdown, *at.info, *at.success, *at.warning,
                                      *at.error, *at.code, *at.caption])


def test_an_upload_is_checked_on_the_page_and_its_problems_are_shown_as_text():
    hostile = EXAMPLE.replace(b"The task is reverse", b"<script>alert(1)</script> The task")
    hostile = hostile.replace(b"claim: accuracy <= 0.5", b"claim: acuracy <= 0.5")
    upload = read_upload(hostile, "mine<b>.md")
    assert upload.lesson is None and len(upload.problems) == 1
    at = lesson_page(upload)
    assert not at.exception
    assert "The checker found 1 problem in" in at.error[0].value
    [problem] = [c.value for c in at.code if "E_ARG" in c.value]  # file, line, caret, fix
    assert "line 33, col 8" in problem and "(mine<b>.md)" in problem and "^^^^^^^" in problem
    assert "did you mean accuracy" in problem and "fix: one of accuracy" in problem
    assert not [b for b in at.button if b.key == "learn_upload_start"]


def test_an_uploaded_lesson_opens_unchecked_and_only_its_class_reaches_it():
    upload = read_upload(EXAMPLE.replace(b"The task is reverse", b"<b>bold</b> The task is "
                                         b"reverse"), "first-lesson.md")
    assert upload.problems == () and upload.lesson.id == f"upload-{upload.digest}"
    teacher = lesson_page(upload)
    assert "Positions in two steps" in texts(teacher) and "every stack resolved" in texts(teacher)
    teacher.button(key="learn_upload_start").click().run()
    assert not teacher.exception and teacher.header[0].value == "Positions in two steps"
    assert "have not been checked" in teacher.warning[0].value  # on every step
    assert "` <b>bold</b> `" in texts(teacher)  # a code span: shown as typed, never HTML
    assert dict(teacher.query_params) == {}  # no link opens an upload
    assert any(e.label.startswith("New words:") and "held-out accuracy" in e.label
               for e in teacher.expander)
    other = lesson_page()
    assert "Positions in two steps" not in texts(other)  # another session: not on its list
    teacher.button(key="learn_present").click().run()
    class_id = teacher.session_state["class_id"]
    student = lesson_page(**{"class": class_id})
    assert not student.exception and student.header[0].value == "Positions in two steps"
    assert "Step 1 of 2: **No positions**" in student.get("progress")[0].proto.text
    assert "have not been checked" in student.warning[0].value
    teacher.button(key="learn_next").click().run()
    assert "Step 2 of 2" in student.run().get("progress")[0].proto.text
    teacher.button(key="class_end").click().run()


def test_an_upload_s_claims_train_on_the_shared_pool_and_mark_it_checked():
    at = lesson_page(read_upload(EXAMPLE, "first-lesson.md"))
    at.button(key="learn_upload_check").click().run()
    deadline = time.monotonic() + 240
    while "this lesson is checked" not in texts(at) and time.monotonic() < deadline:
        time.sleep(0.5)
        at.run()
    words = texts(at)
    assert "Step 1 (No positions): held-out accuracy needs ≤ 0.5; seeds " in words, words
    assert "Every claim holds on seeds 0-2: this lesson is checked." in words
    at.button(key="learn_upload_start").click().run()
    assert not any("have not been checked" in w.value for w in at.warning)


def test_a_built_in_step_fills_its_answer_from_the_run_and_says_its_new_words():
    at = lesson_page(lesson="positions", step="1")
    assert not any("have not been checked" in w.value for w in at.warning)
    [new] = [e for e in at.expander if e.label.startswith("New words")]
    assert "held-out accuracy" in new.label and "T" in new.label.split(": ")[1].split(", ")
    at.radio[0].set_value(at.radio[0].options[0]).run()
    at.button(key="learn_run").click().run()
    deadline = time.monotonic() + 120
    while not (at.success or [w for w in at.warning if "expected" in w.value]) \
            and time.monotonic() < deadline:
        time.sleep(0.3)
        at.run()
    why = next(m.value for m in at.markdown if m.value.startswith("**Why.**"))
    assert "{accuracy}" not in why and "its held\\-out accuracy is 0." in why.replace("-", "\\-") \
        or "its held-out accuracy is 0." in why, why
    at.button(key="learn_next").click().run()
    assert not [e for e in at.expander if e.label.startswith("New words: held-out")]


def test_an_upload_is_found_only_by_its_session_and_the_class_it_was_presented_to():
    """The server keeps a presented upload under its class's id: another class's students
    (or anyone else) asking for that lesson's id are refused."""
    from stacklab import StackError
    from ui import lessons

    upload = read_upload(EXAMPLE, "first-lesson.md")
    teacher = lesson_page(upload)
    teacher.button(key="learn_upload_start").click().run()
    teacher.button(key="learn_present").click().run()
    class_id = teacher.session_state["class_id"]
    assert lessons.find(upload.lesson.id, class_id) == upload.lesson  # its class finds it
    for other in ("0123abcd", None):
        try:
            lessons.find(upload.lesson.id, other)
        except StackError as err:
            assert "uploaded in another session" in err.message
        else:
            raise AssertionError(f"class {other} reached another class's upload")
    teacher.button(key="class_end").click().run()
