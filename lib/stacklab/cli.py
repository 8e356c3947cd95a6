"""The ``stacklab`` command line.

    stacklab resolve FILE|- --input B,12 [--input-dtype int64] [--dtype float32] [--json]
    stacklab ops [--json]
    stacklab docs --out DIR

Exit status: 0 on success, 1 on a `StackError` (its message on stderr, no traceback),
2 on a usage error.
"""

from __future__ import annotations

import argparse
import json
import sys

from .errors import StackError
from .language import MAX_SOURCE_CHARS
from .shapes import COMPUTE_DTYPES, DTYPES


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

    ops = commands.add_parser("ops", help="list the ops of the catalog")
    ops.add_argument("--json", action="store_true", help="print the list as JSON")

    docs = commands.add_parser("docs", help="write the op reference (one Markdown page per op)")
    docs.add_argument("--out", required=True, metavar="DIR", help="folder to write into")
    return parser


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
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise StackError("E_PARSE", f"the stack is not UTF-8 text (byte {err.start} is "
                         f"0x{data[err.start]:02x})", hint="save the stack as UTF-8 text") from None


def _cmd_resolve(args, parser) -> None:
    from .resolve import resolve

    source = read_source(args.file, parser)
    network = resolve(source, args.input, input_dtype=args.input_dtype or args.dtype,
                      dtype=args.dtype)
    if args.json:
        print(json.dumps(network.to_dict(), indent=2))
    else:
        print(network.table())


def _cmd_ops(args, parser) -> None:
    from .spec import catalog

    specs = list(catalog().values())
    if args.json:
        print(json.dumps([{"name": s.name, "identity": s.identity, "category": s.category,
                           "signature": s.signature, "shape": s.shape_text,
                           "summary": s.summary} for s in specs], indent=2))
        return
    rows = [("identity", "category", "signature", "summary")]
    rows += [(s.identity, s.category, s.signature, s.summary) for s in specs]
    widths = [max(len(r[i]) for r in rows) + 2 for i in range(3)]
    for row in rows:
        print("".join(c.ljust(w) for c, w in zip(row, widths)) + row[3])


def _cmd_docs(args, parser) -> None:
    from .docs import write_docs

    try:
        written = write_docs(args.out)
    except OSError as err:
        parser.error(f"cannot write to {args.out!r}: {err.strerror or err}")
    print(f"wrote {len(written)} pages to {args.out}", file=sys.stderr)


COMMANDS = {"resolve": _cmd_resolve, "ops": _cmd_ops, "docs": _cmd_docs}


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        COMMANDS[args.command](args, parser)
    except StackError as err:
        print(err, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("stacklab: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
