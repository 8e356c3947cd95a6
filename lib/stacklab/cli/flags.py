"""The argument parser of the ``stacklab`` command line; the training flags come from the
settings table, one flag per row marked ``cli``."""

from __future__ import annotations

import argparse
import sys



class _Parser(argparse.ArgumentParser):
    """argparse, with usage errors kept to exit status 2 and one line of explanation."""

    def error(self, message: str):  # noqa: D401 - argparse's signature
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")


def make_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every subcommand (the usage in `stacklab.cli`'s docstring). With
    ``only``, the arguments of that subcommand alone: the others keep their name and help
    (what ``stacklab --help`` lists), so a command imports what its own flags need (the
    settings table, torch's dtypes) and ``--help`` nothing of it."""
    parser = _Parser(prog="stacklab", description="A lab for learned position embeddings.")
    parser.add_argument("--debug", action="store_true", help="on an error, print its traceback")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, (help_text, add_arguments) in COMMAND_FLAGS.items():
        command = commands.add_parser(name, help=help_text)
        if only is None or only == name:
            add_arguments(command)
    return parser


def _resolve_flags(parser: argparse.ArgumentParser) -> None:
    from ..core.shapes import COMPUTE_DTYPES, DTYPES  # torch's dtypes

    parser.add_argument("file", help="the stack file, or - for standard input")
    parser.add_argument("--input", required=True, metavar="SHAPE",
                     help="input shape as comma-separated sizes and symbols, e.g. B,12")
    parser.add_argument("--input-dtype", default=None, choices=list(DTYPES),
                     help="dtype of the input (int64 or int32 for token ids); default: --dtype")
    parser.add_argument("--dtype", default="float32", choices=list(COMPUTE_DTYPES),
                     help="compute dtype (default float32)")
    parser.add_argument("--json", action="store_true", help="print the network as JSON")


def _train_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", nargs="?", default=None,
                    help="the stack file, or - for standard input (default: the task's preset)")
    _setting_flags(parser)
    parser.add_argument("--out", required=True, metavar="DIR", help="folder for the run's files")
    _format_flag(parser)


def _compare_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="+", metavar="RUN",
                     help="a folder written by `stacklab train --out`, or a run key of the store")
    parser.add_argument("--out", required=True, metavar="DIR", help="folder to write into")


def _sweep_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stack", action="append", required=True, metavar="FILE",
                    help="a stack file (repeat for each stack to compare)")
    parser.add_argument("--seeds", default="0", metavar="SEEDS",
                    help="seeds as a range or a list: 0-4, or 0,1,2 (default 0)")
    _setting_flags(parser, skip=("seed",))
    parser.add_argument("--workers", type=int, default=None, metavar="N",
                    help="runs at once (default: one per core; on Ray, the cluster decides)")
    parser.add_argument("--out", required=True, metavar="DIR", help="folder to write into")


def _explore_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="a .safetensors (any size) or .npy file, a model folder, a "
                    "model in the local Hugging Face cache, or hf://org/name")
    parser.add_argument("--key", default=None, metavar="NAME", help="the tensor that holds the "
                    "table (default: by the layout: GPT-2, BERT, RoBERTa, OPT)")
    parser.add_argument("--full", action="store_true", help="also the full-resolution cosine map")
    parser.add_argument("--rows", type=int, default=None, metavar="N",
                    help="score the first N rows (default: all, at most 1024)")
    parser.add_argument("--out", required=True, metavar="DIR", help="folder to write into")
    _format_flag(parser)


def _tasks_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the list as JSON")


def _ops_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the list as JSON")


def _docs_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, metavar="DIR", help="folder to write into")


def _lessons_flags(parser: argparse.ArgumentParser) -> None:
    from .lessons import add_arguments  # the lesson reader and linter

    add_arguments(parser)


def _share_flags(share: argparse.ArgumentParser) -> None:
    """``stacklab share``: the flags of the experiment, then where and what to share."""
    from ..core.shapes import DTYPES

    share.add_argument("file", nargs="?", default=None,
                       help="the stack file, or - for standard input (default: the task's preset)")
    share.add_argument("--input", default=None, metavar="SHAPE",
                       help="input shape of the stack, e.g. B,16 (default: the preset's)")
    share.add_argument("--input-dtype", default=None, choices=list(DTYPES),
                       help="dtype of the input (default: the preset's)")
    _setting_flags(share)
    share.add_argument("--host", required=True, metavar="URL",
                       help="the address students reach the app at, e.g. http://10.0.0.5:8501")
    share.add_argument("--run", default=None, metavar="KEY",
                       help="a run key: students who open the link attach to that run at once; "
                            "with every control pinned the link is the run alone "
                            "(/train?run=KEY), as the share dialog gives it")
    share.add_argument("--pin", default=None, metavar="NAMES",
                       help="comma list of the controls the link pins (hide=); default: all of "
                            "them; none: pin nothing")
    share.add_argument("--qr", default=None, metavar="PNG",
                       help="also write the link's QR code to this PNG file, drawn as the share "
                            "dialog draws it")
    share.add_argument("--page", default="train", choices=["train", "explore", "build"],
                       help="the page the link opens (default train)")


def _length_table_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, metavar="DIR", help="folder to write into "
                        "(docs/length_generalization rewrites the table the docs show)")
    parser.add_argument("--steps", type=int, default=200, metavar="N", help="steps per run")
    parser.add_argument("--seeds", default="0-2", metavar="SEEDS", help="seeds, e.g. 0-2")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda", "mps"])
    parser.add_argument("--tasks", default="copy,addition,selective_copy", metavar="NAMES",
                        help="comma list of the length tasks")
    parser.add_argument("--encodings", default=None, metavar="NAMES",
                        help="comma list of the table's encodings (default: all of them)")
    parser.add_argument("--workers", type=int, default=1, metavar="N",
                        help="runs at once, one process and one torch thread each")
    parser.add_argument("--fine-tune", type=int, default=50, metavar="N",
                        help="steps of the RoPE runs' fine-tune at each new length (0: none)")
    parser.add_argument("--rewrite", action="store_true",
                        help="only redraw table.md and comparison.html from --out's results.csv")


def _docs_tables_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 naming each table its results no longer give")
    parser.add_argument("--root", default=".", metavar="DIR", help="the checkout (default .)")


def _format_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", action="append", choices=["png", "svg", "pdf"], default=[],
                        help="also write every figure as an image of this format into "
                             "OUT/figures/ (repeat for several; needs kaleido and Chromium)")


def _setting_flags(parser: argparse.ArgumentParser, skip: tuple[str, ...] = ()) -> None:
    """One flag per setting of the table, checked by its row."""
    from ..lab.settings import SETTINGS

    for row in SETTINGS.values():
        if row.cli and row.name not in skip:
            parser.add_argument(
                row.flag, dest=row.name, default=None, required=row.name == "task",
                choices=row.choices if row.choices and row.name != "task" else None,
                type=None if row.choices else _flag_type(row), help=_flag_help(row),
                metavar=None if row.name == "device" else row.value_name)


def config_from(args):
    """The `TrainConfig` of the setting flags given (the others: the task's defaults)."""
    from ..lab.settings import SETTINGS, TrainConfig

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


# Each subcommand: its help in ``stacklab --help``, and the function that adds its flags.
COMMAND_FLAGS = {
    "resolve": ("resolve a stack and print its network report", _resolve_flags),
    "train": ("train a stack on a toy task; write model, metrics and an HTML report",
              _train_flags),
    "compare": ("put runs side by side: settings and scores in comparison.json, the same "
                "figures aligned in comparison.html", _compare_flags),
    "sweep": ("train every stack x seed on the pool; write results.csv and comparison.html",
              _sweep_flags),
    "explore": ("a real model's positions, or a table from a file: its figures and scores "
                "(the offset figure of a rotary/ALiBi model)", _explore_flags),
    "tasks": ("list the toy tasks", _tasks_flags),
    "ops": ("list the ops of the catalog", _ops_flags),
    "docs": ("write the op reference (one Markdown page per op)", _docs_flags),
    "length-table": ("the length-generalization table: every encoding on the length tasks, "
                     "trained at 16 and tested at 32 and 64 (table.md, comparison.html)",
                     _length_table_flags),
    "docs-tables": ("write every table of results in the docs from its result files "
                    "(--check: only say which no longer match)", _docs_tables_flags),
    "lessons": ("check lesson files: parse, lint, and train every step's claim on seeds 0-2",
                _lessons_flags),
    "share": ("print the classroom link of an experiment (the Train page's share panel): its "
              "controls pinned, and a run", _share_flags),
}
