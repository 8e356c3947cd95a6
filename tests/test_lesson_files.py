"""Lessons as files: the built-in lessons read from their Markdown files are the same steps
and claims as before; the checker (parse, resolve, lint, then train every claim on seeds
0-2) reports each drift of the old text (kept in tests/lessons/drifted), passes the docs'
example, and refuses hostile files at a place, in bounded time and memory."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from stacklab import StackError
from stacklab.cli import main
from stacklab.lab.figures import FIGURES
from stacklab.lab.lessons import BUILTIN, LESSONS, fill, parse_lesson
from stacklab.lab.lessons.files import EXAMPLE, MAX_BYTES, MAX_STACK_CHARS, MAX_STEPS
from stacklab.lab.lessons.lint import quick_check
from stacklab.serve.limits import MAX_LINK_STACK_CHARS

ROOT = Path(__file__).resolve().parents[1]
DRIFTED = ROOT / "tests" / "lessons" / "drifted"
BUILTIN_DIR = ROOT / "lib" / "stacklab" / "lab" / "lessons" / "builtin"
DOCS_EXAMPLE = ROOT / "assets" / "lessons" / "first-lesson.md"
FIGURE_SPECS = {spec.key: spec for spec in FIGURES}


def test_the_built_in_lessons_are_the_same_steps_and_claims_read_from_files():
    before = json.loads((ROOT / "tests" / "lessons" / "builtin_steps.json").read_text())
    now = [{"lesson": lesson.id, "step": number, "title": step.title, "figure": step.figure,
            "claim": [step.expect.metric, step.expect.op, step.expect.bound, step.expect.length],
            "settings": {k: ("none" if v is None else str(v)) for k, v in sorted(step.settings.items())},
            "stack": step.source}
           for lesson in BUILTIN for number, step in enumerate(lesson.steps, start=1)]
    assert now == before  # one figure changed on purpose (positions 3: the drift fixed)
    assert [lesson.origin for lesson in BUILTIN] == sorted(p.name for p in BUILTIN_DIR.glob("*.md"))
    assert all(lesson.checked for lesson in BUILTIN) and list(LESSONS)[:7] == [l.id for l in BUILTIN]


@pytest.mark.parametrize("path", sorted(BUILTIN_DIR.glob("*.md")), ids=lambda p: p.name)
def test_every_built_in_lesson_reads_resolves_and_lints_clean(path):
    lesson, problems = quick_check(path.read_bytes(), path.name, FIGURE_SPECS)
    assert lesson is not None and problems == [], "\n".join(map(str, problems))


def _problems(name: str) -> str:
    path = DRIFTED / name
    _, problems = quick_check(path.read_bytes(), name, FIGURE_SPECS)
    return "\n".join(map(str, problems))


def test_the_checker_reports_each_drift_of_the_old_text():
    first = _problems("1-positions.md")
    # lesson 1, step 1: "stays near 0.19" where the run's number belongs
    assert "E_ARG at line 40, col 36 (1-positions.md): 'near 0.19': a literal number where " \
           "the run's number belongs" in first
    # lesson 1, step 3: the figure captioned "no table" for a stack with sin_pos
    assert "'Attention by position alone (no table)' is captioned for a stack without a " \
           "position table, and this stack has sin_pos" in first
    # lesson 2, step 1: the question does not name the number its choices are about
    assert "line 26, col 1 (2-table-patterns.md): the question does not name \"the task's " \
           "pattern score\"" in _problems("2-table-patterns.md")
    # the length step: "About 0.06" beside the figure's own number
    assert "'About 0.06': a literal number where the run's number belongs" \
        in _problems("4-train-short-test-long.md")
    # and the terms met before anything explains them
    assert "'held-out accuracy' is used before the lesson says what it is" in first


def test_the_length_figure_writes_shares_as_the_lesson_does_and_draws_what_its_caption_says():
    from stacklab.lab.figures.captions import lengths_caption, lengths_score

    class Run:  # a run's length record, as the figure reads it
        length_generalization = {"32": {"accuracy": 0.5, "per_position": [0.5] * 32}}

        class config:
            seq_len = 16
    assert lengths_score(Run) == "length 32: 0.50"
    assert "thick line" not in lengths_caption(Run) and "%" not in lengths_score(Run)


def test_the_quick_check_output_is_golden_and_fails_ci(capsys, golden):
    files = [str(DRIFTED / name) for name in ("1-positions.md", "2-table-patterns.md")]
    assert main(["lessons", "check", "--quick", *files]) == 1
    golden("lessons_check_drifted.out", capsys.readouterr().out)
    assert main(["lessons", "check", "--quick", *map(str, sorted(BUILTIN_DIR.glob("*.md")))]) == 0


def test_the_docs_example_passes_the_check_on_seeds_0_to_2_and_a_false_claim_fails(
        tmp_path, capsys):
    """What ``make test`` runs on the docs' example (and on a copy whose claim is false):
    every step trained on seeds 0-2 in worker processes, each claim reported with its margin."""
    false = tmp_path / "false.md"
    false.write_text(DOCS_EXAMPLE.read_text().replace("accuracy <= 0.5", "accuracy <= 0.05"))
    assert main(["lessons", "check", str(DOCS_EXAMPLE), "--workers", "2"]) == 0
    out = capsys.readouterr()
    assert re.search(r'step 1 "No positions": held-out accuracy needs ≤ 0\.5; seeds '
                     r'(0\.\d\d ){2}0\.\d\d; margin 0\.\d\d\n', out.out), out.out
    assert re.search(r"step 2 .*needs ≥ 0\.8; seeds .*; margin 0\.\d\d\n", out.out)
    assert "first-lesson.md: every claim holds on every seed" in out.out
    assert "training 6 runs" in out.err and "6/6" in out.err  # the progress
    assert main(["lessons", "check", str(false), "--workers", "2"]) == 1
    out = capsys.readouterr().out
    assert re.search(r"needs ≤ 0\.05; seeds .*; margin -0\.\d\d  FAILS", out), out


STEP = """
## Step {n}
Text.
```step
task: reverse
seed: 0
figure: training_curves
claim: accuracy >= 0.5
```
Question: What held-out accuracy will it reach?
Why: {{accuracy}}.
Try next: More.
"""
HEAD = "# Hostile\n```lesson\nid: hostile\n```\nA summary about held-out accuracy.\n"


def _refused(text: str | bytes) -> StackError:
    with pytest.raises(StackError) as caught:
        parse_lesson(text, "hostile.md")
    return caught.value


def test_a_huge_file_is_refused_before_it_is_read():
    err = _refused(b"#" * (MAX_BYTES + 1))
    assert err.code == "E_PARSE" and "over 64 KB" in err.message and "hostile.md" in str(err)
    path = Path(os.devnull)  # a reader reads at most the bound (a file without end)
    assert MAX_BYTES < 1 << 20


def test_thousands_of_steps_are_refused_at_the_first_step_too_many():
    text = HEAD + "".join(STEP.format(n=n) for n in range(3000))
    err = _refused(text[:MAX_BYTES])
    assert f"more than {MAX_STEPS} steps" in err.message and err.line is not None
    assert "## Step 30" in err.source_line


def _with_stack(ops: int) -> str:
    stack = "```stack\nembedding(16, 16)\n" + "relu()\n" * ops + "linear(16)\n```\n"
    return HEAD + STEP.format(n=1).replace("Text.\n", "Text.\n" + stack)


def test_a_stack_of_10_000_ops_is_refused_as_a_link_would_refuse_it():
    assert MAX_STACK_CHARS == MAX_LINK_STACK_CHARS
    assert "over 64 KB" in _refused(_with_stack(10_000)).message  # 10,000 ops: 70 KB
    err = _refused(_with_stack(1_500))  # fits the file, not a link
    assert err.code == "E_PARSE" and "at most 8,000 (what a link carries)" in err.message
    assert err.line == 9 and err.source_line == "```stack" and "^" in str(err)


def test_html_and_script_in_the_text_stay_text():
    text = (HEAD + STEP.format(n=1)).replace("Text.", "<script>alert(1)</script> <b>hi</b>")
    lesson = parse_lesson(text, "hostile.md")
    assert lesson.steps[0].text == "<script>alert(1)</script> <b>hi</b>"  # shown as text


@pytest.mark.parametrize("change, message, line", [
    (("accuracy >= 0.5", "acuracy >= 0.5"), "the claim's number='acuracy' is not one of .*did "
     "you mean accuracy", 13),
    (("accuracy >= 0.5", "accuracy > 0.5"), "is not 'NUMBER >= BOUND'", 13),
    (("accuracy >= 0.5", "past_T >= 0.5"), "past_T needs a length", 13),
    (("seed: 0", "steps: 100000000"), "steps=.100000000. is not a whole number", 11),
    (("seed: 0", "seqlen: 8"), "setting=.seqlen. is not one of .*did you mean seq_len", 11),
    (("seed: 0", "lr: nan"), "lr=", 11),
    (("{accuracy}", "{acuracy}"), r"\{acuracy\} names no number of a run", 16),
    (("Text.", "It gets {accuracy}."), r"\{accuracy\} is in the step's text, shown before", 7),
    (("figure: training_curves\n", ""), "names no figure", 9),
    (("Try next: More.", ""), "has no 'Try next' line", 7),
    (("```step", "```python"), "not ```python", 9),
    (("Text.", "x" * 2001), "2,001 characters long", 8),
])
def test_a_mistyped_or_hostile_step_is_refused_at_its_line_with_a_fix(change, message, line):
    err = _refused((HEAD + STEP.format(n=1)).replace(*change))
    assert re.search(message, err.message), err.message
    assert err.line == line and err.hint and "hostile.md" in str(err)


def test_placeholders_are_filled_from_the_run_one_way():
    lesson = parse_lesson(EXAMPLE, "example.md")
    step = lesson.steps[0]
    record = {"final": {"accuracy": 0.16666}}
    assert fill(step.answer, step.expect, record).startswith("0.17: without positions")
    assert fill(step.answer, step.expect, None) == step.answer  # no run yet: as written


def test_a_teacher_s_folder_of_lessons_loads_unchecked_and_a_broken_file_is_said(tmp_path):
    (tmp_path / "mine.md").write_text(DOCS_EXAMPLE.read_text())
    (tmp_path / "broken.md").write_text("# no id\n")
    (tmp_path / "clash.md").write_text(DOCS_EXAMPLE.read_text().replace(
        "id: positions-in-two-steps", "id: positions"))
    code = ("from stacklab.lab.lessons import LESSONS, FOLDER_PROBLEMS as P; "
            "m = LESSONS['positions-in-two-steps']; "
            "print(len(LESSONS), m.checked, LESSONS['positions'].checked, len(P)); print(*P, sep='\\n')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "STACKLAB_LESSONS": str(tmp_path)}, timeout=120).stdout
    assert out.splitlines()[0] == "8 False True 2", out
    assert "broken.md: E_PARSE" in out and "the id 'positions' is taken" in out
