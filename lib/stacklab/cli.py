"""The ``stacklab`` command line.

    stacklab resolve FILE|- --input B,12 [--input-dtype int64] [--dtype float32] [--json]
    stacklab train [FILE|-] --task NAME [--seq-len T] [--steps N] [--batch-size N] [--lr X]
                   [--weight-decay X] [--seed S] [--device auto|cpu|cuda|mps] --out DIR
    stacklab tasks [--json]
    stacklab ops [--json]
    stacklab docs --out DIR

Exit status: 0 on success, 1 on a `StackError` (its message on stderr, no traceback),
2 on a usage error.
"""

from __future__ import annotations

import argparse
import json
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
    for row in SETTINGS.values():  # one flag per setting of the table, checked by its row
        if row.cli:
            tr.add_argument(row.flag, dest=row.name, default=None, required=row.name == "task",
                            choices=row.choices if row.choices and row.name != "task" else None,
                            type=None if row.choices else _flag_type(row), help=_flag_help(row),
                            metavar=None if row.name == "device" else row.value_name)
    tr.add_argument("--out", required=True, metavar="DIR", help="folder for the run's files")

    tasks = commands.add_parser("tasks", help="list the toy tasks")
    tasks.add_argument("--json", action="store_true", help="print the list as JSON")

    ops = commands.add_parser("ops", help="list the ops of the catalog")
    ops.add_argument("--json", action="store_true", help="print the list as JSON")

    docs = commands.add_parser("docs", help="write the op reference (one Markdown page per op)")
    docs.add_argument("--out", required=True, metavar="DIR", help="folder to write into")
    return parser


def _flag_type(row):
    def parse(text: str):
        try:
            return row.parse_flag(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
    parse.__name__ = row.name  # argparse names the type in some messages
    return parse


def _flag_help(row) -> str:
    default = "" if row.default is None or row.choices else f" (default {row.default})"
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

    def update(self, run) -> None:
        now = time.perf_counter()
        if now - self._last < 0.1 and run.step < self.total:
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
    given = {row.name: getattr(args, row.name) for row in SETTINGS.values() if row.cli}
    config = TrainConfig(**{name: value for name, value in given.items() if value is not None})
    trainer = Trainer(source, config)
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        parser.error(f"cannot create {args.out!r}: {err.strerror or err}")
    bar = ProgressBar(f"{trainer.task.name} T={trainer.config.seq_len}", trainer.config.steps)
    trainer.add_callback("on_batch_end", bar.update)
    previous = signal.signal(signal.SIGINT, lambda *_: trainer.stop())  # Ctrl-C ends the run cleanly
    try:
        run = trainer.run()
    finally:
        signal.signal(signal.SIGINT, previous)
        bar.close()
    if run.status == Status.FAILED:
        print(f"stacklab: the run failed: {run.error}", file=sys.stderr)
        return 1
    save_checkpoint(out / "model.safetensors", run.model, run_metadata(run))
    (out / "metrics.json").write_text(json.dumps(run.metrics(), indent=2) + "\n")
    from .lab.report_html import report_html

    (out / "report.html").write_text(report_html(run), encoding="utf-8")
    final = run.final
    print(f"{run.status}: {run.step} steps in {run.seconds:.1f} s on {run.device}; held-out "
          f"accuracy {final['accuracy']:.2%}, loss {final['loss']:.4f}", file=sys.stderr)
    print(f"wrote {out / 'model.safetensors'}, {out / 'metrics.json'}, {out / 'report.html'}",
          file=sys.stderr)
    if run.status == Status.DIVERGED:
        print(f"stacklab: the run diverged: {run.error}", file=sys.stderr)
        return 1
    return 0


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


COMMANDS = {"resolve": _cmd_resolve, "train": _cmd_train, "tasks": _cmd_tasks,
            "ops": _cmd_ops, "docs": _cmd_docs}


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
