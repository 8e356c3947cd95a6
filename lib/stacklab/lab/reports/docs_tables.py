"""The tables of results in the docs, each written by a command from its result files, so a
number on a page is always the number its command measured.

    stacklab docs-tables            # rewrite every table below from its result files
    stacklab docs-tables --check    # exit 1, naming each table that no longer matches

Each `DocsTable` names its page, the result files it is written from, the command that
measures them, and how the table is drawn. A table inside a hand-written page sits between
``<!-- table NAME ... -->`` and ``<!-- end table NAME -->``; the text around it is the
page's own. The suite checks every committed table against its result files (and measures
one cheap row again), so a change that moves a number fails until the results and the
docs are regenerated.
"""

from __future__ import annotations

import csv
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .bench_tables import (BENCH_RESULTS, HALL_RESULTS, benchmark_targets, hall_table,
                           pos_embed_table)
from .compare import spread

__all__ = ["DocsTable", "DOCS_TABLES", "stale_tables", "write_tables", "encodings_table"]

ENCODINGS_SWEEP = ("stacklab sweep --task shift --seeds 0-4 --steps 600 --eval-lengths 16,32,48 "
                   + " ".join(f"--stack examples/encodings/{name}.txt" for name in (
                       "learned", "sinusoidal", "rope", "alibi", "relative", "none"))
                   + " --out results/encodings")
# each stack file of the sweep, as the table names it
ENCODING_LABELS = {"learned": "learned (`pos_embed(64)`)", "sinusoidal": "sinusoidal (`sin_pos(64)`)",
                   "rope": "RoPE", "alibi": "ALiBi", "relative": "relative bias",
                   "none": "none (NoPE)"}


@dataclass(frozen=True)
class DocsTable:
    """One table of results in the docs: ``draw(root)`` is its text from its result files."""

    name: str
    page: str  # relative to the checkout
    results: tuple[str, ...]  # the files it is written from
    command: str  # what measures them
    draw: Callable[[Path], str]
    whole_page: bool = False  # the page is the table (else: between its markers)


def encodings_table(root: Path) -> str:
    """The encodings guide's table: each stack's mean ± deviation over the seeds."""
    with open(root / "results/encodings/results.csv", newline="") as file:
        rows = list(csv.DictReader(file))
    columns = {"accuracy at T = 16": "accuracy_at_16",
               "past T at 32 (positions 16-31)": "past_T_at_32",
               "past T at 48 (positions 16-47)": "past_T_at_48",
               "partner attention": "pattern_value"}
    lines = ["| encoding | " + " | ".join(columns) + " |", "|---|" + "---|" * len(columns)]
    for stack, label in ENCODING_LABELS.items():
        found = [row for row in rows if row["stack"] == stack]
        lines.append(f"| {label} | " + " | ".join(
            spread([float(row[column]) for row in found if row[column]])
            for column in columns.values()) + " |")
    return "\n".join(lines)


def length_table(root: Path) -> str:
    """The length-generalization table (`length_table.write_markdown`) from its CSV."""
    from .length_table import rewrite

    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        for name in ("results.csv", "timing.json"):
            (folder / name).write_bytes((root / "docs/length_generalization" / name).read_bytes())
        rewrite(folder)
        return (folder / "table.md").read_text(encoding="utf-8")


DOCS_TABLES = (
    DocsTable("encodings", "docs/guide/encodings.md", ("results/encodings/results.csv",),
              ENCODINGS_SWEEP, encodings_table),
    DocsTable("length", "docs/length_generalization/table.md",
              ("docs/length_generalization/results.csv", "docs/length_generalization/timing.json"),
              "stacklab length-table --workers 3 --out docs/length_generalization",
              length_table, whole_page=True),
    DocsTable("bench-targets", "docs/guide/benchmarks.md", BENCH_RESULTS, "make bench",
              benchmark_targets),
    DocsTable("bench-pos-embed", "docs/guide/benchmarks.md", BENCH_RESULTS,
              "make bench (or python bench/run.py pos_embed)", pos_embed_table),
    DocsTable("hall-now", "docs/guide/hardening.md", HALL_RESULTS,
              "make loadtest (bench/loadtest.py, bench/request_costs.py, "
              "bench/loadtest_votes.py)", hall_table),
)


def _region(name: str) -> re.Pattern:
    return re.compile(rf"(<!-- table {name}\b[^>]*-->\n)(.*?)(\n<!-- end table {name} -->)", re.S)


def _page_with(table: DocsTable, page: str, drawn: str) -> str:
    if table.whole_page:
        return drawn
    region = _region(table.name)
    if not region.search(page):
        raise ValueError(f"{table.page} has no <!-- table {table.name} --> markers")
    return region.sub(lambda m: m[1] + drawn + m[3], page, count=1)


def stale_tables(root: Path | str = ".") -> list[str]:
    """The tables whose committed text differs from what their result files give, each as
    ``page (table NAME): rerun COMMAND``; empty when every table matches."""
    root = Path(root)
    stale = []
    for table in DOCS_TABLES:
        page = (root / table.page).read_text(encoding="utf-8")
        if _page_with(table, page, table.draw(root)) != page:
            stale.append(f"{table.page} (table {table.name}): regenerate with "
                         f"`stacklab docs-tables` after `{table.command}`")
    return stale


def write_tables(root: Path | str = ".") -> list[str]:
    """Rewrite every table from its result files; the pages that changed."""
    root = Path(root)
    changed = []
    for table in DOCS_TABLES:
        path = root / table.page
        page = path.read_text(encoding="utf-8")
        new = _page_with(table, page, table.draw(root))
        if new != page:
            path.write_text(new, encoding="utf-8")
            changed.append(table.page)
    return list(dict.fromkeys(changed))  # a page of two tables once
