"""The argument parser of the ``stacklab`` command line; the training flags come from the
settings table, one flag per row marked ``cli``."""

from __future__ import annotations

import argparse
import sys

from ..core.shapes import COMPUTE_DTYPES, DTYPES
from ..lab.settings import SETTINGS, TrainConfig


class _Parser(argparse.ArgumentParser):
    """argparse, with usage errors kept to exit status 2 and one line of explanation."""

    def error(self, message: str):  # noqa: D401 - argparse's signature
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")


def make_parser() -> argparse.ArgumentParser:
    """The parser of every subcommand (the usage in `stacklab.cli`'s docstring)."""
    parser = _Parser(prog="stacklab", description="A lab for learned position embeddings.")
    parser.add_argument("--debug", action="store_true", help="on an error, print its traceback")
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

    ex = commands.add_parser("explore", help="a real model's positions, or a table from a file: "
                             "its figures and scores (the offset figure of a rotary/ALiBi model)")
    ex.add_argument("file", help="a .safetensors (any size) or .npy file, a model folder, a "
                    "model in the local Hugging Face cache, or hf://org/name")
    ex.add_argument("--key", default=None, metavar="NAME", help="the tensor that holds the "
                    "table (default: by the layout: GPT-2, BERT, RoBERTa, OPT)")
    ex.add_argument("--full", action="store_true", help="also the full-resolution cosine map")
    ex.add_argument("--rows", type=int, default=None, metavar="N",
                    help="score the first N rows (default: all, at most 1024)")
    ex.add_argument("--out", required=True, metavar="DIR", help="folder to write into")

    tasks = commands.add_parser("tasks", help="list the toy tasks")
    tasks.add_argument("--json", action="store_true", help="print the list as JSON")

    ops = commands.add_parser("ops", help="list the ops of the catalog")
    ops.add_argument("--json", action="store_true", help="print the list as JSON")

    docs = commands.add_parser("docs", help="write the op reference (one Markdown page per op)")
    docs.add_argument("--out", required=True, metavar="DIR", help="folder to write into")
    _share_parser(commands)
    return parser


def _share_parser(commands) -> None:
    """``stacklab share``: the flags of the experiment, then where and what to share."""
    share = commands.add_parser("share", help="print the classroom link of an experiment (the "
                                "Train page's share panel): its controls pinned, and a run")
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


def _setting_flags(parser: argparse.ArgumentParser, skip: tuple[str, ...] = ()) -> None:
    """One flag per setting of the table, checked by its row."""
    for row in SETTINGS.values():
        if row.cli and row.name not in skip:
            parser.add_argument(
                row.flag, dest=row.name, default=None, required=row.name == "task",
                choices=row.choices if row.choices and row.name != "task" else None,
                type=None if row.choices else _flag_type(row), help=_flag_help(row),
                metavar=None if row.name == "device" else row.value_name)


def config_from(args) -> TrainConfig:
    """The `TrainConfig` of the setting flags given (the others: the task's defaults)."""
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
