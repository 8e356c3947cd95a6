"""Runs side by side: ``compare`` stored runs, and ``sweep``, which trains every stack x seed
on the app's worker pool, then writes results.csv and the comparison page.

A sweep reads its stacks (`_stacks`), plans one run per stack and seed, trains them all on
the pool (`_train_on_pool`), makes one CSV row per run (`_result_row`) and writes the CSV,
the mean ± deviation table over the seeds (`_spread_table`) and the figures of each stack's
first seed (`write_comparison`).
"""

from __future__ import annotations

import csv
import html
import json
import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

from ..core.errors import StackError
from ..lab.settings import TrainConfig
from .flags import config_from
from .paths import out_dir, read_source
from .progress import ProgressBar

MEASURED = ("final_accuracy", "pattern_value", "past_T_at_")  # the spread table's columns


def open_run(text: str, store):
    """A `StoredRun` from a folder or a run key."""
    from ..lab.keys import is_key
    from ..lab.runs.store import StoredRun

    if Path(text).is_dir():
        return StoredRun.of_folder(text)
    key = store.find(text)  # a whole key, or the start of one (8+ characters, as shown)
    if key is not None or is_key(text):
        found = store.open(key or text)
        if found is None and store.problem is not None:
            raise store.problem  # a bucket that cannot be reached, or refuses the keys
        if found is None:
            raise StackError("E_VALUE", f"no run {text} in the run store ({store.location})",
                             hint="train it first, or give the folder of its files")
        return found
    raise StackError("E_VALUE", f"{text[:200]!r} is neither a folder nor a run key of the store "
                     "(or the start of one)", hint="give a folder written by `stacklab train "
                     "--out DIR` (its runs are not put in the store), or a run key")


def write_comparison(out: Path, entries, parser, preface: str = "") -> None:
    """comparison.json and comparison.html of ``entries`` (``(label, run)`` pairs)."""
    from ..lab.reports.compare import comparison, comparison_html

    out_dir(out, parser)
    (out / "comparison.json").write_text(json.dumps(comparison(entries), indent=2) + "\n")
    (out / "comparison.html").write_text(comparison_html(entries, preface=preface),
                                         encoding="utf-8")


def cmd_compare(args, parser) -> int:
    from ..lab.runs.store import RunStore

    args.runs = list(dict.fromkeys(args.runs))
    if len(args.runs) > 8:
        parser.error(f"compare takes at most 8 runs, not {len(args.runs)}")
    store = RunStore()
    entries = [(Path(text).name if Path(text).is_dir() else text[:12], open_run(text, store))
               for text in args.runs]
    out = Path(args.out)
    write_comparison(out, entries, parser)
    print(f"wrote {out / 'comparison.json'}, {out / 'comparison.html'}", file=sys.stderr)
    return 0


@dataclass(frozen=True)
class PlannedRun:
    """One run of a sweep: its stack's label and text, and its settings (its seed)."""

    label: str
    source: str
    config: TrainConfig


def cmd_sweep(args, parser) -> int:
    seeds = _seeds(args.seeds, parser)
    stacks = _stacks(args.stack, parser)
    base = config_from(args)
    plan = [PlannedRun(label, source, replace(base, seed=seed))
            for label, source in stacks for seed in seeds]
    jobs = _train_on_pool(plan, args.workers,
                          f"sweep {len(stacks)} stack{'s' * (len(stacks) != 1)} x "
                          f"{len(seeds)} seed{'s' * (len(seeds) != 1)}")
    rows = [_result_row(planned, job) for planned, job in zip(plan, jobs)]
    by_stack: dict[str, list[dict]] = {}  # the rows of the runs that ended with a run
    for planned, job, row in zip(plan, jobs, rows):
        if job.run is not None:
            by_stack.setdefault(planned.label, []).append(row)
    first_seeds = [(f"{planned.label} (seed {planned.config.seed})", job.run)
                   for planned, job in zip(plan, jobs)
                   if job.run is not None and planned.config.seed == seeds[0]]
    out = out_dir(args.out, parser)
    columns = _write_csv(out / "results.csv", rows)
    measured = [name for name in columns if name.startswith(MEASURED)
                and any(row.get(name) is not None for row in rows)]
    preface = _spread_table(f"Task {base.task}, seeds {args.seeds}", by_stack, measured)
    write_comparison(out, first_seeds, parser, preface=preface
                     + f"<h2>Seed {seeds[0]} of each stack, figure by figure</h2>")
    from ..lab.reports.compare import spread

    for label, found in by_stack.items():
        print(f"{label}: " + ", ".join(f"{name} {spread([row.get(name) for row in found])}"
                                        for name in measured), file=sys.stderr)
    print(f"wrote {out / 'results.csv'}, {out / 'comparison.html'}", file=sys.stderr)
    return 1 if any(row["status"] == "failed" for row in rows) else 0


def _seeds(text: str, parser) -> list[int]:
    """``0-4`` or ``0,1,2``: at most 100 seeds."""
    try:
        if "-" in text.strip().lstrip("-"):
            low, high = (int(part) for part in text.split("-", 1))
            seeds = list(range(low, high + 1))
        else:
            seeds = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        parser.error(f"--seeds {text!r} is not a range (0-4) or a list (0,1,2)")
    if not seeds or len(seeds) > 100 or min(seeds) < 0:
        parser.error(f"--seeds {text!r}: give 1 to 100 seeds, each 0 or more")
    return seeds


def _stacks(paths: list[str], parser) -> list[tuple[str, str]]:
    """``(label, text)`` of each stack file: its stem, or its path when stems clash."""
    if len(set(map(str, map(Path, paths)))) < len(paths):
        parser.error("a --stack file is given twice")
    stems = [Path(path).stem for path in paths]
    return [(stem if stems.count(stem) == 1 else str(path), read_source(path, parser))
            for stem, path in zip(stems, paths)]


def _train_on_pool(plan: list[PlannedRun], workers: int | None, label: str) -> list:
    """Every planned run trained on a pool of ``workers`` processes (default one per core),
    each checked before any trains; their jobs, once all have ended."""
    from ..lab.train.budgets import Budgets
    from ..lab.runs.store import RunStore
    from ..serve.workers.pool import JobPool

    workers = workers or os.cpu_count() or 1
    pool = JobPool(workers=workers, budgets=Budgets(), ttl_seconds=10 ** 9,
                   max_queued=len(plan) + 1, store=RunStore(),
                   threads_per_job=max(1, (os.cpu_count() or 1) // workers))
    try:
        for planned in plan:
            pool.check(planned.source, planned.config)  # every stack and setting, first
        jobs = [pool.submit(f"sweep-{index}", planned.source, planned.config)
                for index, planned in enumerate(plan)]
        bar = ProgressBar(label, len(jobs))
        shown = -1
        while True:
            done = sum(not job.status.active for job in jobs)
            if done != shown:
                bar.update(done)
                shown = done
            if done == len(jobs):
                break
            time.sleep(0.25)
        bar.close()
    finally:
        pool.shutdown()
    return jobs


def _result_row(planned: PlannedRun, job) -> dict:
    """A run's row of results.csv: its stack, seed, key and status, then its numbers
    (final accuracy, pattern score, accuracy at each evaluated length), or its error."""
    from ..lab.reports.compare import summary

    row = {"stack": planned.label, "seed": planned.config.seed, "key": job.key}
    if job.run is None:
        return {**row, "status": str(job.status), "error": job.error}
    found = summary(job.run)
    row.update({"status": found["status"], "final_accuracy": found["final_accuracy"],
                "pattern": found["pattern"]["name"], "pattern_value": found["pattern"]["value"],
                "pattern_init": found["pattern"]["init"]})
    for length, entry in found["length_generalization"].items():
        row[f"accuracy_at_{length}"] = entry.get("accuracy")
        row[f"past_T_at_{length}"] = entry.get("past_T")
    return row


def _write_csv(path: Path, rows: list[dict]) -> list[str]:
    """``rows`` as CSV, with every column any row has; the columns."""
    columns = list(dict.fromkeys(name for row in rows for name in row))
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    return columns


def _spread_table(title: str, by_stack: dict[str, list[dict]], measured: list[str]) -> str:
    """The HTML table of each stack's ``measured`` columns, mean ± deviation over its seeds."""
    from ..lab.reports.compare import spread

    lines = [f"<p>{title}: mean ± standard deviation over the seeds.</p><table class='runs'>"
             "<tr><th>stack</th>" + "".join(f"<th>{name}</th>" for name in measured) + "</tr>"]
    for label, found in by_stack.items():
        lines.append(f"<tr><td>{html.escape(label)}</td>" + "".join(
            f"<td>{spread([row.get(name) for row in found])}</td>" for name in measured) + "</tr>")
    return "".join(lines) + "</table>"
