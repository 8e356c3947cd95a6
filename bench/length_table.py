"""``python bench/length_table.py ...`` is ``stacklab length-table ...`` (the table's code is
`stacklab.lab.reports.length_table`; its names are here too, for the tests)."""

import sys

from stacklab.cli import main
from stacklab.lab.reports.length_table import *  # noqa: F401,F403
from stacklab.lab.reports.length_table import ABACUS, ENCODINGS, TASK_NAMES  # noqa: F401

if __name__ == "__main__":
    sys.exit(main(["length-table", *sys.argv[1:]]))
