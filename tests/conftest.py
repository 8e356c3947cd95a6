"""Shared fixtures: golden files compared byte for byte, regenerated with --overwrite."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# The suite's property tests stay quick; `make fuzz` runs the same ones much longer and
# also holds every single input to 200 ms.
settings.register_profile("default", max_examples=200, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("fuzz", max_examples=5_000, deadline=200,
                          suppress_health_check=[HealthCheck.too_slow,
                                                 HealthCheck.data_too_large])
settings.load_profile("default")

GOLDEN = Path(__file__).parent / "golden"
# Runs the suite stores (the app's pool, the CLI) go to a fresh folder, never the user's cache.
os.environ["STACKLAB_RUNS"] = tempfile.mkdtemp(prefix="stacklab-test-runs-")


def pytest_addoption(parser):
    parser.addoption("--overwrite", action="store_true",
                     help="rewrite the golden files in tests/golden from the current output")


@pytest.fixture
def golden(request):
    """``golden("name.out", text)`` compares ``text`` with the golden file (or rewrites it)."""
    overwrite = request.config.getoption("--overwrite")

    def check(name: str, text: str) -> None:
        path = GOLDEN / name
        if overwrite:
            path.write_text(text, encoding="utf-8")
            return
        assert path.exists(), f"no golden file {path}; run pytest --overwrite to create it"
        expected = path.read_text(encoding="utf-8")
        assert text == expected, f"output differs from {path} (pytest --overwrite to accept)"

    return check


@pytest.fixture
def cli(capsys, monkeypatch):
    """``cli(*argv, stdin=b"...")`` runs the command line in-process:
    ``(exit status, stdout, stderr)``."""
    import io
    import sys

    from stacklab.cli import main

    def run(*argv, stdin: bytes | None = None):
        if stdin is not None:
            monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
        try:
            code = main(list(argv))
        except SystemExit as exit_:
            code = exit_.code
        out, err = capsys.readouterr()
        return code, out, err

    return run


class Clock:
    """A clock a test moves by hand (``clock.now += 1``), for what takes one (`Classes`)."""

    def __init__(self, now: float = 0.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock():
    """A `Clock` at 0 s."""
    return Clock()
