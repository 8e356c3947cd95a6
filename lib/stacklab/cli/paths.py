"""What a command reads (a stack file, or standard input) and the folder it writes into;
a path that cannot be used is a usage error (exit status 2)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..core.errors import StackError
from ..core.language import MAX_SOURCE_CHARS


def read_source(path: str, parser: argparse.ArgumentParser) -> str:
    """The stack text from a file or stdin; bounded, and decoded as UTF-8."""
    limit = MAX_SOURCE_CHARS * 4 + 1  # UTF-8 takes at most 4 bytes a character
    try:
        if path == "-":
            data = sys.stdin.buffer.read(limit)
        else:
            with open(path, "rb") as handle:
                data = handle.read(limit)
    except OSError as err:
        parser.error(f"cannot read {path!r}: {err.strerror or err}")
    if len(data) >= limit:
        raise StackError("E_PARSE", f"the stack is over {MAX_SOURCE_CHARS:,} characters",
                         hint="shorten the stack")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise StackError("E_PARSE", f"the stack is not UTF-8 text (byte {err.start} is "
                         f"0x{data[err.start]:02x})", hint="save the stack as UTF-8 text") from None


def out_dir(path, parser: argparse.ArgumentParser) -> Path:
    """The output folder ``path``, made if needed; a usage error when it cannot be."""
    out = Path(path)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        parser.error(f"cannot create {str(path)!r}: {err.strerror or err}")
    return out


def run_dir(path, key: str, name: str, parser: argparse.ArgumentParser) -> Path:
    """The folder ``path`` for the run ``key`` (called ``name``), made if needed; a usage
    error when it holds another run's files (its ``run.json`` names another key), so one
    run never overwrites another. The same run again (the same key) writes over itself."""
    from ..lab.runs.files import RUN

    out = out_dir(path, parser)
    try:
        held = json.loads((out / RUN).read_text(encoding="utf-8")).get("key")
    except (OSError, ValueError, AttributeError):
        held = None  # no run there, or not one that reads: nothing of a run to lose
    if held is not None and held != key:
        parser.error(f"{str(path)!r} holds another run ({str(held)[:8]}); give another "
                     f"--out (e.g. {str(Path(path) / name)!r}) or remove that folder first")
    return out
