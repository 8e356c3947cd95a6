"""The ``stacklab`` command line.

    stacklab [--debug] COMMAND ...     (--debug: an error's traceback too)
    stacklab resolve FILE|- --input B,12 [--input-dtype int64] [--dtype float32] [--json]
    stacklab train [FILE|-] --task NAME [--seq-len T] [--steps N] [--batch-size N] [--lr X]
                   [--weight-decay X] [--seed S] [--device auto|cpu|cuda|mps]
                   [--target-accuracy X] [--eval-lengths LENGTHS] [--random-positions N]
                   [--rope-scaling linear|ntk|yarn] [--rope-factor X] --out DIR
                   [--format png|svg|pdf]
    stacklab compare RUN RUN... --out DIR        (RUN: a folder of `train --out`, or a run key)
    stacklab sweep --task NAME --stack FILE [--stack FILE ...] [--seeds 0-4] [--workers N]
                   [the train flags but --seed] --out DIR
    stacklab explore PATH [--key NAME] [--rows N] [--full] --out DIR [--format png|svg|pdf]
                   (PATH: .safetensors of any size, .npy, a model folder, a cached model, hf://org/name)
    stacklab tasks [--json]
    stacklab ops [--json]
    stacklab docs --out DIR
    stacklab docs-tables [--check] [--root DIR]   (the docs' tables from their result files)
    stacklab length-table --out DIR [--steps N] [--seeds 0-2] [--device cpu] [--tasks NAMES]
                   [--encodings NAMES] [--workers N] [--fine-tune N] [--rewrite]
    stacklab share [FILE|-] --task NAME --host URL [--input SHAPE] [--input-dtype int64]
                   [the train flags] [--run KEY] [--pin NAMES|none] [--qr PNG]
                   [--page train|explore|build]
                   (prints the classroom link; every control pinned unless --pin says which;
                   with --run and every control pinned, the short class link /train?run=KEY)
    stacklab lessons check FILE... [--quick] [--seeds 0-2] [--workers N]
                   (parse, resolve and lint each lesson file; train each step's claim on
                   every seed; exit status 1 on a problem or a failed claim)

Exit status: 0 on success, 1 on a `StackError` (its message on stderr, no traceback;
``stacklab --debug COMMAND ...`` adds it) or another error (one line), 2 on a usage error.

The parser and the train flags (from the settings table) are in `flags`; the commands on
one stack, table or listing in `commands`; ``compare`` and ``sweep`` in `sweep`; the
classroom link, ``share``, in `share`.
"""

from __future__ import annotations

import importlib
import sys
import traceback

from ..core.errors import StackError
from .flags import make_parser

# Each command's function, imported when that command runs (``stacklab --help`` imports no
# torch): "module:function" in this package.
COMMANDS = {"resolve": "commands:cmd_resolve", "train": "commands:cmd_train",
            "compare": "sweep:cmd_compare", "sweep": "sweep:cmd_sweep",
            "explore": "commands:cmd_explore", "tasks": "commands:cmd_tasks",
            "ops": "commands:cmd_ops", "docs": "commands:cmd_docs", "share": "share:cmd_share",
            "length-table": "commands:cmd_length_table",
            "docs-tables": "commands:cmd_docs_tables", "lessons": "lessons:cmd_lessons"}


def _command(name: str):
    module, function = COMMANDS[name].split(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), function)


def main(argv: list[str] | None = None) -> int:
    """Run the command line with ``argv`` (default: the process's); the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = make_parser(only=next((word for word in argv if word in COMMANDS), ""))
    args = parser.parse_args(argv)
    try:
        command_parser = parser._subparsers._group_actions[0].choices[args.command]
        if args.command in ("train", "explore"):  # sweep's workers choose their own
            from ..core.threads import use_training_threads

            use_training_threads()
        return _command(args.command)(args, command_parser) or 0
    except StackError as err:
        if args.debug:
            traceback.print_exc()
        print(err, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("stacklab: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as err:  # noqa: BLE001 - a bug: one line, the traceback on --debug
        if args.debug:
            raise
        print(f"stacklab: {args.command} failed: {type(err).__name__}: "
              f"{str(err).strip().splitlines()[0][:200] if str(err).strip() else ''}\n"
              "(stacklab --debug ... shows the traceback)", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
