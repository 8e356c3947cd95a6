"""``stacklab share``: the classroom link of an experiment, as the Train page's share panel
makes it (`stacklab.serve.links.share.classroom_link`), for a teacher who scripts the class."""

from __future__ import annotations

import sys
from pathlib import Path

from ..core.errors import StackError
from ..lab.settings import SETTINGS
from ..serve.links.link_table import LINK_VALUES
from .paths import read_source


def link_values(args, parser) -> dict[str, str]:
    """The link values the flags give, each written by its row of the link table (a link's
    text, as a page would be opened with)."""
    values = {}
    if args.file is not None:
        values["stack"] = read_source(args.file, parser)
    if args.input is not None:
        values["input"] = args.input
    if args.input_dtype is not None:
        values["input_dtype"] = args.input_dtype
    for row in SETTINGS.values():
        value = getattr(args, row.name, None) if row.cli and row.link else None
        if value is not None:
            values[row.name] = LINK_VALUES[row.name].write(value)
    return values


def cmd_share(args, parser) -> int:
    from urllib.parse import urlsplit

    from ..lab.runs.store import RunStore
    from ..serve.links.experiment import from_query
    from ..serve.links.addresses import is_loopback
    from ..serve.links.qr import qr_png
    from ..serve.links.share import ALL_PINS, share_link

    experiment, problems = from_query(link_values(args, parser))
    if problems:  # the app would refuse these values from the link: say so here instead
        raise StackError("E_ARG", "; ".join(problem.split("; using")[0] for problem in problems),
                         hint="use values within the classroom ranges (what a link accepts)")
    pins = ALL_PINS if args.pin is None else [] if args.pin.strip() == "none" \
        else args.pin.split(",")
    # the keys of this machine's run store, as the dialog knows its server's: a stored key
    # that no other starts like is shortened to its 8 digits
    known = RunStore().keys() if args.run else ()
    link = share_link(experiment, args.host, pinned=pins, run_key=args.run, known=known,
                      page=args.page)
    if args.qr is not None:
        write_qr(args.qr, qr_png(link), parser)
    print(link)
    if is_loopback(urlsplit(args.host).hostname):
        print("stacklab: note: that address is this machine only; students need its address on "
              "the network (hostname -I), and the app started with `make run HOST=0.0.0.0`",
              file=sys.stderr)
    return 0


def write_qr(path: str, png: bytes, parser) -> None:
    """The link's QR code, as the share dialog draws it, into ``path`` (a usage error when
    it cannot be written)."""
    try:
        Path(path).write_bytes(png)
    except OSError as err:
        parser.error(f"cannot write {path!r}: {err.strerror or err}")
