"""The command line starts light and fails in words: ``--help`` imports no torch (each
command imports what it needs when it runs), ``explore hf://…`` without the Hub says so in
a few lines with the command that fixes it, and figures are written as images with
``--format``."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

HEAVY = ("torch", "plotly", "pandas", "numpy", "huggingface_hub", "streamlit")


@pytest.mark.parametrize("argv", [["--help"], ["train", "--help"], []])
def test_help_imports_nothing_heavy(argv):
    probe = ("import sys\nfrom stacklab.cli import main\ntry:\n    main(%r)\nexcept SystemExit:\n"
             "    pass\nprint('LOADED', [m for m in %r if m in sys.modules])" % (argv, HEAVY))
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=120)
    loaded = done.stdout.rsplit("LOADED", 1)[1].strip()
    if argv == ["train", "--help"]:  # its flags come from the settings table (torch's dtypes)
        assert "--steps" in done.stdout and "--format" in done.stdout
    else:
        assert loaded == "[]", loaded
        assert "explore" in done.stdout + done.stderr


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the block ends: connections are refused


@pytest.mark.parametrize("env", [{"HF_ENDPOINT": "http://127.0.0.1:{port}"},
                                 {"HF_HUB_OFFLINE": "1"}], ids=["unreachable", "offline"])
def test_explore_offline_says_so_in_a_few_lines(env, tmp_path):
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"),  # an empty cache
           **{name: value.format(port=_closed_port()) for name, value in env.items()}}
    env.pop("HF_HUB_OFFLINE", None) if "HF_ENDPOINT" in env else None
    done = subprocess.run([sys.executable, "-m", "stacklab", "explore",
                           "hf://openai-community/gpt2", "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=120, env=env)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) <= 5, done.stderr
    assert "Traceback" not in done.stderr
    assert "Hugging Face Hub cannot be reached" in done.stderr
    assert "not in the local Hugging Face cache" in done.stderr
    assert "hf download openai-community/gpt2" in done.stderr
    debug = subprocess.run([sys.executable, "-m", "stacklab", "--debug", "explore",
                            "hf://openai-community/gpt2", "--out", str(tmp_path / "out")],
                           capture_output=True, text=True, timeout=120, env=env)
    assert "Traceback" in debug.stderr and debug.returncode == 1


def test_explore_writes_its_figures_in_each_format_asked(cli, tmp_path):
    from stacklab.lab.figures.export import _kaleido
    from stacklab.lab.reports.table_file import gpt2_like_table

    if _kaleido() is None:
        pytest.skip("kaleido or Chromium is missing")
    np.save(tmp_path / "wpe.npy", gpt2_like_table(64, 16).numpy())
    code, _, err = cli("explore", str(tmp_path / "wpe.npy"), "--out", str(tmp_path / "out"),
                       "--format", "svg", "--format", "pdf")
    assert code == 0, err
    written = sorted(path.name for path in (tmp_path / "out" / "figures").iterdir())
    scores = json.loads((tmp_path / "out" / "scores.json").read_text())
    assert scores["table"] == "wpe" and written
    assert {name.rsplit(".", 1)[1] for name in written} == {"svg", "pdf"}
    assert len(written) % 2 == 0 and "wrote" in err


def test_the_length_table_writes_only_to_out_with_progress(tmp_path):
    """Two seeds on two worker processes; every file in --out, a progress line per run with
    the total and the time left; the tracked docs untouched."""
    from pathlib import Path

    docs = Path(__file__).parent.parent / "docs" / "length_generalization"
    before = {path.name: path.stat().st_mtime_ns for path in docs.iterdir()}
    done = subprocess.run([sys.executable, "-m", "stacklab", "length-table", "--out",
                           str(tmp_path / "table"), "--tasks", "copy", "--encodings", "rope",
                           "--seeds", "0-1", "--steps", "2", "--fine-tune", "0",
                           "--workers", "2"], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "[1/2] copy rope seed" in done.stderr and "[2/2]" in done.stderr
    assert "s left" in done.stderr
    assert sorted(path.name for path in (tmp_path / "table").iterdir()) == \
        ["comparison.html", "results.csv", "table.md", "timing.json"]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["table"]
    assert {path.name: path.stat().st_mtime_ns for path in docs.iterdir()} == before
    missing = subprocess.run([sys.executable, "-m", "stacklab", "length-table"],
                             capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and "--out" in missing.stderr  # no default folder
    bench = subprocess.run([sys.executable, "bench/length_table.py", "--help"],
                           capture_output=True, text=True, timeout=120,
                           cwd=Path(__file__).parent.parent)
    assert bench.returncode == 0 and "--out DIR" in bench.stdout
    assert "issue" not in bench.stdout.lower()
