"""``stacklab lessons check FILE...``: read each lesson file, resolve and lint every step,
then train every step's claim on seeds 0-2 on a pool of worker processes (the sweep's),
with a progress bar on stderr, and report per step whether the claim holds on every seed
and by what margin::

    1-positions.md: lesson positions, 3 steps
      step 1 "Attention without positions": held-out accuracy needs ≤ 0.3; seeds 0.17 0.18 0.19; margin 0.11
    ...
    1-positions.md: ok

``--quick`` reads, resolves and lints without training. Exit status 1 when a file does
not parse, has a problem, or a claim fails on a seed: CI can run it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

from ..core.errors import StackError
from ..lab.lessons.files import MAX_BYTES
from ..lab.lessons.lint import claim_line, margin, quick_check
from .progress import ProgressBar

__all__ = ["add_arguments", "cmd_lessons", "DEFAULT_SEEDS"]

DEFAULT_SEEDS = (0, 1, 2)


def add_arguments(lessons: argparse.ArgumentParser) -> None:
    """The ``lessons`` command's ``check`` subcommand and its flags."""
    actions = lessons.add_subparsers(dest="action", required=True)
    check = actions.add_parser("check", help="parse, resolve and lint each lesson file, then "
                               "train each step on every seed and report its claim")
    check.add_argument("files", nargs="+", metavar="FILE", help="lesson files (Markdown)")
    check.add_argument("--quick", action="store_true",
                       help="parse, resolve and lint only; train nothing")
    check.add_argument("--seeds", default="0-2", metavar="SEEDS",
                       help="the seeds each claim must hold on: 0-2 or 0,1,2 (default 0-2)")
    check.add_argument("--workers", type=int, default=None, metavar="N",
                       help="worker processes (default one per core)")


@dataclass(frozen=True)
class _Planned:
    file: str
    number: int
    step: object
    seed: int


def cmd_lessons(args, parser: argparse.ArgumentParser) -> int:
    """Check every file; the exit status (1: a problem or a failed claim)."""
    seeds = _seeds(args.seeds)
    figures = _figures()
    read, failed = [], False
    for name in args.files:
        path = Path(name)
        try:
            with path.open("rb") as handle:
                data = handle.read(MAX_BYTES + 1)
        except OSError as err:
            print(f"{name}: cannot read it ({err.strerror})")
            failed = True
            continue
        lesson, problems = quick_check(data, path.name, figures)
        for problem in problems:
            print(problem)
        failed |= bool(problems)
        if lesson is not None and not problems:
            read.append((path.name, lesson))
    if args.quick or not read:
        for name, lesson in read:
            print(f"{name}: lesson {lesson.id}, {len(lesson.steps)} steps: read, resolved "
                  "and linted (claims not trained: --quick)")
        return int(failed)
    plan = [_Planned(name, number, step, seed) for name, lesson in read
            for number, step in enumerate(lesson.steps, start=1) for seed in seeds]
    values = _train(plan, args.workers)
    for name, lesson in read:
        failed |= not _report(name, lesson, plan, values)
    return int(failed)


def _seeds(text: str) -> tuple[int, ...]:
    low, dash, high = text.partition("-")
    try:
        seeds = (tuple(range(int(low), int(high) + 1)) if dash
                 else tuple(int(part) for part in text.split(",")))
    except ValueError:
        seeds = ()
    if not seeds or len(seeds) > 10 or min(seeds) < 0:
        raise StackError("E_ARG", f"--seeds {text[:20]!r} is not a list of up to 10 seeds",
                         hint="e.g. --seeds 0-2 or --seeds 0,1,2")
    return seeds


def _figures() -> dict:
    from ..lab.figures import FIGURES

    return {spec.key: spec for spec in FIGURES}


def _train(plan: list[_Planned], workers: int | None) -> dict[int, float | None]:
    """Each planned step and seed trained on a pool of worker processes: its claim's number
    (None when the run failed or has none), by its index in ``plan``."""
    from ..lab.lessons import check
    from ..lab.runs.store import RunStore
    from ..lab.train.budgets import Budgets
    from ..serve.workers.pool import JobPool

    workers = workers or os.cpu_count() or 1
    pool = JobPool(workers=workers, budgets=Budgets(), ttl_seconds=10 ** 9,
                   max_queued=len(plan) + 1, store=RunStore(),
                   threads_per_job=max(1, (os.cpu_count() or 1) // workers))
    try:
        jobs = [pool.submit(f"lesson-{index}", planned.step.source,
                            replace(planned.step.config, seed=planned.seed))
                for index, planned in enumerate(plan)]
        bar = ProgressBar(f"training {len(plan)} runs (steps x seeds)", len(jobs))
        shown = -1
        while shown < len(jobs):
            done = sum(not job.status.active for job in jobs)
            if done != shown:
                bar.update(done, force=True)
                shown = done
            if done < len(jobs):
                time.sleep(0.25)
            else:
                break
        bar.close()
        return {index: (check(planned.step, job.run)[1] if job.run is not None else None)
                for index, (planned, job) in enumerate(zip(plan, jobs))}
    finally:
        pool.shutdown()


def _report(name: str, lesson, plan: list[_Planned], values: dict) -> bool:
    """Print each step's claim on every seed; whether every claim held."""
    print(f"{name}: lesson {lesson.id}, {len(lesson.steps)} steps")
    held = True
    for number, step in enumerate(lesson.steps, start=1):
        found = [values[index] for index, planned in enumerate(plan)
                 if planned.file == name and planned.number == number]
        ok = all(value is not None and margin(step.expect, value) >= 0 for value in found)
        held &= ok
        print(f"  step {number} \"{step.title}\": {step.expect.label} "
              f"{claim_line(step.expect, found)}" + ("" if ok else "  FAILS"))
    print(f"{name}: " + ("every claim holds on every seed" if held
                         else "a claim fails: change the step or its bound"))
    sys.stdout.flush()
    return held
