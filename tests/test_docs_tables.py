"""Numbers in the docs cannot go stale: every committed table of results is what its result
files give (`stacklab docs-tables --check`), and one cheap row is measured again here, so a
change that moves a number fails until the results and the docs are regenerated."""

from __future__ import annotations

import csv
import json
import re
import shutil
from pathlib import Path

import pytest

from stacklab.lab.reports.docs_tables import DOCS_TABLES, stale_tables

ROOT = Path(__file__).resolve().parents[1]


def test_every_table_in_the_docs_is_what_its_results_give(cli):
    assert stale_tables(ROOT) == []
    code, _, err = cli("docs-tables", "--check", "--root", str(ROOT))
    assert code == 0 and "no stale table" in err


def _copy(tmp_path: Path) -> Path:
    for table in DOCS_TABLES:
        for name in (table.page, *table.results):
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


def _move_csv(results: Path, column: str) -> None:
    rows = list(csv.DictReader(open(results, newline="")))
    row = next(row for row in rows if row[column])
    row[column] = str(float(row[column]) + 0.3)  # what a code change that moves it would give
    with open(results, "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _move_json(results: Path, *keys: str) -> None:
    data = json.loads(results.read_text())
    inner = data
    for key in keys[:-1]:
        inner = inner[key]
    inner[keys[-1]] += 0.3  # a slower (or faster) measurement
    results.write_text(json.dumps(data, indent=2) + "\n")


# per table: a number it shows, moved in its first result file
MOVES = {
    "encodings": lambda path: _move_csv(path, "past_T_at_48"),
    "length": lambda path: _move_csv(path, "past@64"),
    "bench-targets": lambda path: _move_json(path, "resolve", "1000", "median_ms"),
    "bench-pos-embed": lambda path: _move_json(path, "pos_embed", "large", "forward",
                                               "stacklab_ms"),
    "hall-now": lambda path: _move_json(path, "scenarios", "hall300", "link_to_pattern_s", "p95"),
}


def test_every_table_has_a_moved_number_below():
    assert set(MOVES) == {table.name for table in DOCS_TABLES}


@pytest.mark.parametrize("table", DOCS_TABLES, ids=[t.name for t in DOCS_TABLES])
def test_a_moved_number_makes_its_table_stale_until_rewritten(table, tmp_path, cli):
    root = _copy(tmp_path)
    page_before = (root / table.page).read_text(encoding="utf-8")
    MOVES[table.name](root / table.results[0])
    assert [line.split(" ")[0] for line in stale_tables(root)] == [table.page]
    assert f"(table {table.name})" in stale_tables(root)[0]
    code, _, err = cli("docs-tables", "--check", "--root", str(root))
    assert code == 1 and table.page in err and table.command.split()[1] in err
    assert cli("docs-tables", "--root", str(root))[0] == 0  # regenerated: it matches again
    assert stale_tables(root) == []
    page_after = (root / table.page).read_text(encoding="utf-8")
    assert page_after != page_before  # the number moved on the page, and only in its table
    if table.whole_page:
        return
    outside = re.compile(rf"<!-- table {re.escape(table.name)}\b.*?<!-- end table "
                         rf"{re.escape(table.name)} -->", re.S)
    assert outside.sub("", page_after) == outside.sub("", page_before)


def test_one_cheap_row_measures_what_the_committed_table_says():
    """copy with a learned table, seed 0 (its accuracy moves with any change to training): trained again, its numbers are the CSV's."""
    import torch

    from stacklab.lab.reports.length_table import train_one

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the table's workers train
    try:
        again = train_one("copy", "learned", 0, 200, "cpu", fine_tune=0)
    finally:
        torch.set_num_threads(threads)
    committed = [row for row in csv.DictReader(open(
        ROOT / "docs/length_generalization/results.csv", newline=""))
        if row["task"] == "copy" and row["encoding"] == "learned" and row["seed"] == "0"]
    assert len(again) == len(committed) == 1
    for key in ("acc@16", "past@32", "past@64"):
        assert float(committed[0][key]) == pytest.approx(again[0][key], abs=1e-3), key
