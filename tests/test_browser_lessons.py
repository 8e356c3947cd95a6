"""A teacher's own lesson in a real browser (the real Streamlit server, Debian's Chromium,
Playwright): a lesson written from "Write your own lesson" alone is uploaded on Learn,
checked (read, then every claim trained on seeds 0-2 on the shared workers), presented to
a class of two, who see its step and question, vote, and see the run's number once the
teacher reveals it. Without a browser these tests skip, except in CI (STACKLAB_CI=1)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from test_browser import _missing_browser, browser, start_streamlit  # noqa: F401 - a fixture

ROOT = Path(__file__).parent.parent
LOG = Path(os.environ.get("TMPDIR", "/tmp")) / "stacklab-browser-lessons"

# Written from docs/guide/lessons.md: a title, the id block, a summary; a step with its
# text (the words its question uses said first), its stack, its step block (the settings
# as a link writes them, the figure, the claim), the question naming the claim's number,
# the answer with the run's number as a placeholder, and what to try next.
LESSON = """# Reverse with a table

```lesson
id: reverse-with-a-table
```

One step: what a position table does for a model that must reverse a sequence.

## With a table

The task is reverse on sequences of T = 8 tokens: position t copies the token at 7-t. The
stack has a learned position table. Its held-out accuracy is the share of positions it gets
right on sequences it never saw in training.

```stack
embedding(16, 32)
pos_embed(8)
attention(2)
linear(16)
```

```step
task: reverse
seq_len: 8
steps: 150
lr: 0.01
target_accuracy: none
seed: 0
figure: training_curves
claim: accuracy >= 0.8
```

Question: What held-out accuracy will it reach in 150 steps?

Why: It reaches {accuracy}: each position knows where it is.

Try next: Remove pos_embed(8) and train again.
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    missing = _missing_browser()
    if missing:
        if os.environ.get("STACKLAB_CI"):
            pytest.fail(missing)
        pytest.skip(missing)
    folder = tmp_path_factory.mktemp("lessons-server")
    env = {**os.environ, "STACKLAB_WORKERS": "2", "STACKLAB_RUNS": str(folder / "runs")}
    process, url = start_streamlit(env, folder / "server.log")
    yield url
    process.terminate()
    process.wait(timeout=20)


def test_a_teachers_own_lesson_is_uploaded_checked_and_presented_to_a_class_that_votes(
        server, browser, tmp_path):
    lesson = tmp_path / "reverse-with-a-table.md"
    lesson.write_text(LESSON, encoding="utf-8")
    contexts = [browser.new_context(viewport={"width": 1600, "height": 1000}) for _ in range(3)]
    teacher, *students = (context.new_page() for context in contexts)
    try:
        teacher.goto(f"{server}/learn")
        teacher.locator("input[type=file]").set_input_files(str(lesson))
        teacher.get_by_text("every stack resolved and the text linted").wait_for(timeout=60_000)
        teacher.get_by_role("button", name="Check its claims").click()
        teacher.get_by_text("this lesson is checked").wait_for(timeout=240_000)
        checked = teacher.locator("code").filter(has_text="Step 1 (With a table)").inner_text()
        assert re.search(r"held-out accuracy needs ≥ 0\.8; seeds (\d\.\d\d ){2}\d\.\d\d; "
                         r"margin 0\.\d\d", checked), checked
        teacher.get_by_role("button", name="Start this lesson").click()
        teacher.get_by_text("Step 1 of 1").wait_for(timeout=30_000)
        assert "have not been checked" not in teacher.inner_text("body")
        teacher.get_by_role("button", name="Present this lesson to a class").click()
        link = teacher.locator("code").filter(has_text="class=").first
        link.wait_for(timeout=30_000)
        class_id = re.search(r"class=([0-9a-f]{8})", link.inner_text()).group(1)
        for page, choice in zip(students, ("at least 0.8", "below 0.8")):
            page.goto(f"{server}/learn?class={class_id}")
            page.get_by_text("Following the teacher").wait_for(timeout=30_000)
            page.get_by_text("Step 1 of 1").wait_for(timeout=30_000)
            body = page.inner_text("body")
            assert "Reverse with a table" in body and "With a table" in body
            assert "What held-out accuracy will it reach in 150 steps?" in body
            page.get_by_text(choice, exact=True).click()
            page.get_by_text("Your vote is in").wait_for(timeout=30_000)
        teacher.get_by_text(re.compile(r"2 voted of 2")).wait_for(timeout=30_000)
        teacher.get_by_role("button", name="Reveal the answer").click()
        said = teacher.get_by_text(re.compile(r"held-out accuracy \d\.\d\d: expected at least 0\.8"))
        said.first.wait_for(timeout=120_000)  # the run's number (trained once, by the check)
        number = re.search(r"held-out accuracy (\d\.\d\d)", said.first.inner_text()).group(1)
        assert f"It reaches {number}: each position knows" in teacher.inner_text("body")
        for page in students:  # the reveal opens the run to the class: its number, filled in
            page.get_by_role("button", name="Run the experiment").click(timeout=30_000)
            page.get_by_text(f"It reaches {number}").wait_for(timeout=60_000)
    finally:
        for context in contexts:
            context.close()
