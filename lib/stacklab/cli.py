"""The ``stacklab`` command line.

    stacklab resolve FILE|- --input B,12 [--input-dtype int64] [--dtype float32] [--json]
    stacklab train [FILE|-] --task NAME [--seq-len T] [--steps N] [--batch-size N] [--lr X]
                   [--weight-decay X] [--seed S] [--device auto|cpu|cuda|mps] --out DIR
    stacklab compare RUN RUN... --out DIR        (RUN: a folder of `train --out`, or a run key)
    stacklab sweep --task NAME --stack FILE [--stack FILE ...] --seeds 0-4 [train flags]
                   --out DIR
    stacklab explore FILE [--key NAME] [--rows N] --out DIR   (a table from .safetensors/.npy)
    stacklab tasks [--json]
    stacklab ops [--json]
    stacklab docs --out DIR

Exit status: 0 on success, 1 on a `StackError` (its message on stderr, no traceback),
2 on a usage error.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

from .core.errors import StackError
from .core.language import MAX_SOURCE_CHARS
from .core.shapes import COMPUTE_DTYPES, DTYPES
from .lab.settings import SETTINGS, TrainConfig


class _Parser(argparse.ArgumentParser):
    """argparse, with usage errors kept to exit status 2 and one line of explanation."""

    def error(self, message: str):  # noqa: D401 - argparse's signature
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="stacklab", description="A lab for learned position embeddings.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    res = commands.add_parser("resolve", help="resolve a stack and print its network report")
    res.add_argument("file", help="the stack file, or - for standard input")
    res.add_argument("--input", required=True, metavar="SHAPE",
                     help="input shape as comma-separated sizes and symbols, e.g. B,12")
    res.add_argument("--input-dtype", default=None, choices=list(DTYPES),
                     help="dtype of the input (int64 or int32 for token ids); default: --dtype")
    res.add_argument("--dtype", default="float32", choices=list(COMPUTE_DTYPES),
                     help="compute dtype (default float32)")
    res.add_argument("--json", action="store_true", help="print the network as JSON")

    tr = commands.add_parser("train", help="train a stack on a toy task; write model, metrics "
                             "and an HTML report")
    tr.add_argument("file", nargs="?", default=None,
                    help="the stack file, or - for standard input (default: the task's preset)")
    _setting_flags(tr)
    tr.add_argument("--out", required=True, metavar="DIR", help="folder for the run's files")

    cmp = commands.add_parser("compare", help="put runs side by side: settings and scores in "
                              "comparison.json, the same figures aligned in comparison.html")
    cmp.add_argument("runs", nargs="+", metavar="RUN",
                     help="a folder written by `stacklab train --out`, or a run key of the store")
    cmp.add_argument("--out", required=True, metavar="DIR", help="folder to write into")

    sw = commands.add_parser("sweep", help="train every stack x seed on the pool; write "
                             "results.csv and comparison.html")
    sw.add_argument("--stack", action="append", required=True, metavar="FILE",
                    help="a stack file (repeat for each stack to compare)")
    sw.add_argument("--seeds", default="0", metavar="SEEDS",
                    help="seeds as a range or a list: 0-4, or 0,1,2 (default 0)")
    _setting_flags(sw, skip=("seed",))
    sw.add_argument("--workers", type=int, default=None, metavar="N",
                    help="runs at once (default: one per core; on Ray, the cluster decides)")
    sw.add_argument("--out", required=True, metavar="DIR", help="folder to write into")

    ex = commands.add_parser("explore", help="a position table trained elsewhere (.safetensors "
                             "or .npy): every figure and score that needs only the table")
    ex.add_argument("file", help="a .safetensors file (with --key) or a .npy file")
    ex.add_argument("--key", default=None, metavar="NAME",
                    help="the tensor of a .safetensors file that holds the table (e.g. wpe)")
    ex.add_argument("--rows", type=int, default=None, metavar="N",
                    help="score the first N rows (default: all, at most 1024)")
    ex.add_argument("--out", required=True, metavar="DIR", help="folder to write into")

    tasks = commands.add_parser("tasks", help="list the toy tasks")
    tasks.add_argument("--json", action="store_true", help="print the list as JSON")

    ops = commands.add_parser("ops", help="list the ops of the catalog")
    ops.add_argument("--json", action="store_true", help="print the list as JSON")

    docs = commands.add_parser("docs", help="write the op reference (one Markdown page per op)")
    docs.add_argument("--out", required=True, metavar="DIR", help="folder to write into")
    return parser


def _setting_flags(parser: argparse.ArgumentParser, skip: tuple[str, ...] = ()) -> None:
    """One flag per setting of the table, checked by its row."""
    for row in SETTINGS.values():
        if row.cli and row.name not in skip:
            parser.add_argument(
                row.flag, dest=row.name, default=None, required=row.name == "task",
                choices=row.choices if row.choices and row.name != "task" else None,
                type=None if row.choices else _flag_type(row), help=_flag_help(row),
                metavar=None if row.name == "device" else row.value_name)


def _config(args) -> TrainConfig:
    given = {row.name: getattr(args, row.name, None) for row in SETTINGS.values() if row.cli}
    return TrainConfig(**{name: value for name, value in given.items() if value is not None})


def _flag_type(row):
    def parse(text: str):
        try:
            return row.parse_flag(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
    parse.__name__ = row.name  # argparse names the type in some messages
    return parse


def _flag_help(row) -> str:
    default = ("" if row.default in (None, "") or row.choices else f" (default {row.default})")
    return row.help + default


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


def _cmd_resolve(args, parser) -> None:
    from .core.resolve import resolve

    source = read_source(args.file, parser)
    network = resolve(source, args.input, input_dtype=args.input_dtype or args.dtype,
                      dtype=args.dtype)
    if args.json:
        print(json.dumps(network.to_dict(), indent=2))
    else:
        print(network.table())


class ProgressBar:
    """A one-line progress bar on stderr, redrawn at most ten times a second."""

    def __init__(self, label: str, total: int, stream=None, width: int = 24):
        self.label, self.total, self.width = label, total, width
        self.stream = stream or sys.stderr
        self._last = 0.0

    def update(self, run, force: bool = False) -> None:
        now = time.perf_counter()
        if now - self._last < 0.1 and run.step < self.total and not force:
            return
        self._last = now
        done = int(self.width * run.step / self.total)
        bar = "#" * done + "-" * (self.width - done)
        text = f"\r{self.label} [{bar}] {run.step}/{self.total}"
        if run.train_loss:
            text += f"  loss {run.train_loss[-1][1]:.4f}"
        if run.history:
            text += f"  held-out acc {run.history[-1]['accuracy']:.3f}"
        self.stream.write(text)
        self.stream.flush()

    def close(self) -> None:
        self.stream.write("\n")
        self.stream.flush()


def _cmd_train(args, parser) -> int:
    from .lab.checkpoint import run_metadata, save_checkpoint
    from .lab.trainer import Status, Trainer

    source = read_source(args.file, parser) if args.file is not None else None
    trainer = Trainer(source, _config(args))
    out = _out_dir(args.out, parser)
    bar = ProgressBar(f"{trainer.task.name} T={trainer.config.seq_len}", trainer.config.steps)
    trainer.add_callback("on_batch_end", bar.update)
    trainer.add_callback("on_eval", lambda run: bar.update(run, force=True))  # fresh accuracy
    trainer.add_callback("on_end", lambda run: bar.update(run, force=True))
    previous = signal.signal(signal.SIGINT, lambda *_: trainer.stop())  # Ctrl-C ends the run cleanly
    try:
        run = trainer.run()
    finally:
        signal.signal(signal.SIGINT, previous)
        bar.close()
    if run.status == Status.FAILED:
        print(f"stacklab: the run failed: {run.error}", file=sys.stderr)
        return 1
    from .lab.figures import figures_from_json, figures_json
    from .lab.report_html import report_html
    from .lab.store import write_summary

    figures = figures_json(run)  # drawn once: the report and a later `compare` share them
    save_checkpoint(out / "model.safetensors", run.model, run_metadata(run))
    write_summary(out, run, figures)  # metrics.json, figures.json, run.json
    (out / "report.html").write_text(report_html(run, figures_from_json(figures)),
                                     encoding="utf-8")
    final = run.final
    print(f"{run.status}: {run.step} steps in {run.seconds:.1f} s on {run.device}; held-out "
          f"accuracy {final['accuracy']:.2%}, loss {final['loss']:.4f}", file=sys.stderr)
    print(f"wrote {out / 'model.safetensors'}, {out / 'metrics.json'}, {out / 'report.html'}",
          file=sys.stderr)
    if run.status == Status.DIVERGED:
        print(f"stacklab: the run diverged: {run.error}", file=sys.stderr)
        return 1
    return 0


def _out_dir(path, parser) -> Path:
    """The output folder ``path``, made if needed; a usage error when it cannot be."""
    out = Path(path)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        parser.error(f"cannot create {str(path)!r}: {err.strerror or err}")
    return out


def _open_run(text: str, store):
    """A `StoredRun` from a folder or a run key."""
    from .lab.keys import is_key
    from .lab.store import StoredRun

    if Path(text).is_dir():
        return StoredRun.of_folder(text)
    key = store.find(text)  # a whole key, or the start of one (8+ characters, as shown)
    if key is not None or is_key(text):
        found = store.open(key or text)
        if found is None:
            raise StackError("E_VALUE", f"no run {text} in the run store ({store.root})",
                             hint="train it first, or give the folder of its files")
        return found
    raise StackError("E_VALUE", f"{text[:200]!r} is neither a folder nor a run key of the store "
                     "(or the start of one)", hint="give a folder written by `stacklab train "
                     "--out DIR` (its runs are not put in the store), or a run key")


def _write_comparison(out: Path, entries, parser, preface: str = "") -> None:
    from .lab.compare import comparison, comparison_html

    _out_dir(out, parser)
    (out / "comparison.json").write_text(json.dumps(comparison(entries), indent=2) + "\n")
    (out / "comparison.html").write_text(comparison_html(entries, preface=preface),
                                         encoding="utf-8")


def _cmd_compare(args, parser) -> int:
    from .lab.store import RunStore

    args.runs = list(dict.fromkeys(args.runs))
    if len(args.runs) > 8:
        parser.error(f"compare takes at most 8 runs, not {len(args.runs)}")
    store = RunStore()
    entries = [(Path(text).name if Path(text).is_dir() else text[:12], _open_run(text, store))
               for text in args.runs]
    out = Path(args.out)
    _write_comparison(out, entries, parser)
    print(f"wrote {out / 'comparison.json'}, {out / 'comparison.html'}", file=sys.stderr)
    return 0


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


def _cmd_sweep(args, parser) -> int:
    import csv
    import dataclasses
    import html

    from .lab.budgets import Budgets
    from .lab.compare import spread, summary
    from .lab.store import RunStore
    from .serve.pool import JobPool

    seeds = _seeds(args.seeds, parser)
    if len(set(map(str, map(Path, args.stack)))) < len(args.stack):
        parser.error("a --stack file is given twice")
    stems = [Path(path).stem for path in args.stack]  # the label; the path when stems clash
    stacks = [(stem if stems.count(stem) == 1 else str(path), read_source(path, parser))
              for stem, path in zip(stems, args.stack)]
    base = _config(args)
    plan = [(label, source, dataclasses.replace(base, seed=seed))
            for label, source in stacks for seed in seeds]
    store = RunStore()
    workers = args.workers or os.cpu_count() or 1
    pool = JobPool(workers=workers, budgets=Budgets(), ttl_seconds=10 ** 9,
                   max_queued=len(plan) + 1, store=store,
                   threads_per_job=max(1, (os.cpu_count() or 1) // workers))
    try:
        for _, source, config in plan:
            pool.check(source, config)  # every stack and setting checked before any training
        jobs = [pool.submit(f"sweep-{index}", source, config)
                for index, (_, source, config) in enumerate(plan)]
        bar = ProgressBar(f"sweep {len(stacks)} stack{'s' * (len(stacks) != 1)} x "
                          f"{len(seeds)} seed{'s' * (len(seeds) != 1)}", len(jobs))
        shown = -1
        while shown < len(jobs):
            done = sum(not job.status.active for job in jobs)
            if done != shown:
                bar.update(_Progress(done))
                shown = done
            if done < len(jobs):
                time.sleep(0.25)
            else:
                break
        bar.close()
    finally:
        pool.shutdown()
    out = Path(args.out)
    rows, entries, by_stack = [], [], {}
    for (label, _, config), job in zip(plan, jobs):
        if job.run is None:
            rows.append({"stack": label, "seed": config.seed, "key": job.key,
                         "status": str(job.status), "error": job.error})
            continue
        found = summary(job.run)
        row = {"stack": label, "seed": config.seed, "key": job.key, "status": found["status"],
               "final_accuracy": found["final_accuracy"], "pattern": found["pattern"]["name"],
               "pattern_value": found["pattern"]["value"],
               "pattern_init": found["pattern"]["init"]}
        for length, entry in found["length_generalization"].items():
            row[f"accuracy_at_{length}"] = entry.get("accuracy")
            row[f"past_T_at_{length}"] = entry.get("past_T")
        rows.append(row)
        by_stack.setdefault(label, []).append(row)
        if config.seed == seeds[0]:
            entries.append((f"{label} (seed {config.seed})", job.run))
    columns = list(dict.fromkeys(name for row in rows for name in row))
    _out_dir(out, parser)
    with open(out / "results.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    measured = [name for name in columns if name.startswith(("final_accuracy", "pattern_value",
                                                              "past_T_at_"))
                and any(row.get(name) is not None for row in rows)]
    lines = [f"<p>Task {base.task}, seeds {args.seeds}: mean ± standard deviation over the "
             "seeds.</p><table class='runs'><tr><th>stack</th>"
             + "".join(f"<th>{name}</th>" for name in measured) + "</tr>"]
    for label, found in by_stack.items():
        lines.append(f"<tr><td>{html.escape(label)}</td>" + "".join(
            f"<td>{spread([row.get(name) for row in found])}</td>" for name in measured) + "</tr>")
    lines.append("</table><h2>Seed " + str(seeds[0]) + " of each stack, figure by figure</h2>")
    _write_comparison(out, entries, parser, preface="".join(lines))
    failed = [row for row in rows if row["status"] == "failed"]
    for label, found in by_stack.items():
        print(f"{label}: " + ", ".join(f"{name} {spread([row.get(name) for row in found])}"
                                        for name in measured), file=sys.stderr)
    print(f"wrote {out / 'results.csv'}, {out / 'comparison.html'}", file=sys.stderr)
    return 1 if failed else 0


def _cmd_explore(args, parser) -> int:
    from .lab.report_html import table_report_html
    from .lab.tables import read_table, table_figures, table_scores

    if args.rows is not None and args.rows < 2:
        parser.error("--rows must be 2 or more")
    table = read_table(args.file, args.key)
    name = args.key or Path(args.file).stem
    scores = table_scores(table, args.rows)
    figures = table_figures(table, name, args.rows)
    out = _out_dir(args.out, parser)
    (out / "scores.json").write_text(json.dumps({"table": name, **scores}, indent=2) + "\n")
    (out / "report.html").write_text(table_report_html(name, scores, figures), encoding="utf-8")
    print(f"{name} {list(table.shape)}: " + (", ".join(
        f"{key} {value:.2f}" for key, value in scores.items() if isinstance(value, float))
        or "no score applies to a table this short"), file=sys.stderr)
    print(f"wrote {out / 'scores.json'}, {out / 'report.html'}", file=sys.stderr)
    return 0


class _Progress:
    """What `ProgressBar.update` reads of a run, for counting finished runs instead."""

    def __init__(self, step: int):
        self.step, self.train_loss, self.history = step, [], []


def _print_columns(rows: list[tuple[str, ...]]) -> None:
    """Left-aligned columns, each as wide as its widest cell plus two; the last one free."""
    widths = [max(len(row[i]) for row in rows) + 2 for i in range(len(rows[0]) - 1)]
    for row in rows:
        print("".join(cell.ljust(width) for cell, width in zip(row, widths)) + row[-1])


def _cmd_tasks(args, parser) -> None:
    from .lab.tasks import TASKS

    if args.json:
        print(json.dumps([task.to_dict() for task in TASKS.values()], indent=2))
        return
    rows = [("name", "vocab", "output", "description")]
    rows += [(t.name, str(t.vocab), t.output_text(), t.description) for t in TASKS.values()]
    _print_columns(rows)


def _cmd_ops(args, parser) -> None:
    from .core.spec import catalog

    specs = list(catalog().values())
    if args.json:
        print(json.dumps([{"name": s.name, "identity": s.identity, "category": s.category,
                           "signature": s.signature, "shape": s.shape_text,
                           "summary": s.summary} for s in specs], indent=2))
        return
    rows = [("identity", "category", "signature", "summary")]
    rows += [(s.identity, s.category, s.signature, s.summary) for s in specs]
    _print_columns(rows)


def _cmd_docs(args, parser) -> None:
    from .core.docs import write_docs

    try:
        written = write_docs(args.out)
    except OSError as err:
        parser.error(f"cannot write to {args.out!r}: {err.strerror or err}")
    print(f"wrote {len(written)} pages to {args.out}", file=sys.stderr)


COMMANDS = {"resolve": _cmd_resolve, "train": _cmd_train, "compare": _cmd_compare,
            "sweep": _cmd_sweep, "explore": _cmd_explore, "tasks": _cmd_tasks, "ops": _cmd_ops, "docs": _cmd_docs}


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        command_parser = parser._subparsers._group_actions[0].choices[args.command]
        return COMMANDS[args.command](args, command_parser) or 0
    except StackError as err:
        print(err, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("stacklab: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
