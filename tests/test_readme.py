"""Every code block of the README runs as written (a newcomer copies them first).

- ``python`` blocks run in order in one namespace; a ``text`` block right after one is
  what it prints, compared line by line;
- ``stack`` blocks resolve on a ``[B, 16]`` token input;
- ``bash`` blocks run line by line: ``stacklab`` commands for real in a scratch folder,
  ``make`` targets as a dry run (``make -n``: a test cannot serve the app or rerun itself),
  a ``pip install`` with ``--dry-run``, and ``jupyter lab DIR`` checks that DIR holds
  the notebooks (JupyterLab itself is not a dependency).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import stacklab

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
BLOCKS = [(m.group(1), m.group(2)) for m in BLOCK.finditer((ROOT / "README.md").read_text())]
BIN = Path(sys.executable).parent


def test_the_readme_is_a_short_guide_with_runnable_blocks():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250
    assert {kind for kind, _ in BLOCKS} <= {"python", "text", "stack", "bash"}
    assert all(kind == "text" and previous == "python"
               for (previous, _), (kind, _) in zip(BLOCKS, BLOCKS[1:]) if kind == "text")


def test_every_stack_block_resolves():
    stacks = [code for kind, code in BLOCKS if kind == "stack"]
    assert stacks
    for code in stacks:
        stacklab.resolve(code, ["B", 16], input_dtype="int64")


def test_every_python_block_prints_what_the_readme_says(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("STACKLAB_RUNS", str(tmp_path / "store"))
    namespace: dict = {"__name__": "__readme__"}
    ran = 0
    for index, (kind, code) in enumerate(BLOCKS):
        if kind != "python":
            continue
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(code, f"README.md python block {ran + 1}", "exec"), namespace)  # noqa: S102 - our own README
        ran += 1
        following = BLOCKS[index + 1] if index + 1 < len(BLOCKS) else ("", "")
        if following[0] == "text":
            got = [line.rstrip() for line in printed.getvalue().strip().splitlines()]
            assert got == [line.rstrip() for line in following[1].strip().splitlines()], (
                f"python block {ran} printed:\n{printed.getvalue()}")
    assert ran >= 4


def _run_line(line: str, cwd: Path) -> None:
    words = shlex.split(line.split("#", 1)[0])
    if not words:
        return
    if words[0] == "make":
        done = subprocess.run(["make", "-n", *words[1:]], cwd=ROOT, capture_output=True,
                              text=True, timeout=60)
    elif words[0] == "stacklab":
        done = subprocess.run([str(BIN / "stacklab"), *words[1:]], cwd=cwd, capture_output=True,
                              text=True, timeout=600, env={**os.environ, "OMP_NUM_THREADS": "1"})
    elif words[0] == ".venv/bin/pip" and words[1] == "install":
        done = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--quiet",
                               *words[2:]], capture_output=True, text=True, timeout=300)
        if done.returncode and "Could not find a version" in done.stderr + done.stdout:
            pytest.skip("the package index cannot be reached from here")
    elif words[:2] == [".venv/bin/jupyter", "lab"]:
        assert list((ROOT / words[2]).glob("*.ipynb")), words
        return
    else:
        raise AssertionError(f"the README runs a command this test does not know: {line}")
    assert done.returncode == 0, f"{line}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"


def test_every_shell_line_runs(tmp_path):
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    lines = [line for kind, code in BLOCKS if kind == "bash" for line in code.splitlines()]
    assert any(line.startswith("stacklab train") for line in lines)
    for line in lines:
        _run_line(line, tmp_path)
    assert (tmp_path / "runs" / "compared" / "comparison.html").exists()


def test_the_readmes_comparison_changes_one_thing():
    """The run without a table is the preset with its position table's line removed."""
    from stacklab import get_task

    preset = get_task("reverse").preset().splitlines()
    without = [line for line in (ROOT / "examples/reverse/no-table.txt").read_text().splitlines()
               if line and not line.startswith("#")]
    assert "examples/reverse/no-table.txt --task reverse --steps 300" in (ROOT / "README.md").read_text()
    assert without == [line for line in preset if not line.startswith("pos_embed(")]
    assert len(without) == len(preset) - 1
