"""The limits of a classroom server, in one place: what one student's run may cost, how
many finished runs a browser session keeps, how long a closed tab's runs live, and how
long a page waits for (and how much it shares of) a finished run's figures.

The library's own limits are generous (`stacklab.core.resolve.DEFAULT_BUDGET_BYTES`, the
library ranges of `stacklab.lab.settings`); a server shared by a class uses these, and the
classroom ranges of the settings table for what a link may ask.
"""

from ..lab.train.budgets import Budgets

PARAM_BUDGET_BYTES = 256 << 20  # parameter bytes a classroom run may allocate
ACTIVATION_BUDGET_BYTES = 1 << 30  # activation bytes of one training step
KEPT_BUDGET_BYTES = 256 << 20  # snapshots, initial tables and statistics of one run
FLOP_BUDGET = 5e13  # one run, evaluations included: about what RUN_SECONDS allows on 2 cores
RUN_SECONDS = 600  # wall-clock limit of one run
BUDGETS = Budgets(param_bytes=PARAM_BUDGET_BYTES, activation_bytes=ACTIVATION_BUDGET_BYTES,
                  kept_bytes=KEPT_BUDGET_BYTES, flops=FLOP_BUDGET, seconds=RUN_SECONDS)
RUNS_KEPT_PER_SESSION = 5  # runs a browser session can go back to, newest first
FINISHED_RUNS_KEPT = 16  # finished runs kept in memory to share (all are in the run store)
SESSION_TTL_SECONDS = 15 * 60  # a session that stops polling (a closed tab) is forgotten
MAX_QUEUED_RUNS = 200  # runs waiting for a worker, over all sessions
MAX_LINK_STACK_CHARS = 8_000  # longer links are refused by web servers (header limits)
MAX_STACK_CHARS = 100_000  # a stack typed, pasted or linked in the app (the library: 2 MB)
FIGURES_WAIT_SECONDS = 60.0  # a page waits this long for figures a worker is drawing
SHARED_FIGURES_BYTES = 2 << 20  # a finished run's parsed figures are kept up to this much JSON
# A table a page analyses (an upload, or a model the server holds) runs in a worker process
# under a run's budgets: the memory a run may hold (its activations and what it keeps) and
# its seconds. Results are shared by file: one analysis per file and tensor, kept up to
# this many bytes of figures.
TABLE_MEMORY_BYTES = ACTIVATION_BUDGET_BYTES + KEPT_BUDGET_BYTES
TABLE_SECONDS = RUN_SECONDS
TABLE_RESULTS_BYTES = 64 << 20  # analysed tables kept to share, by the size of their figures
MAX_QUEUED_TABLES = 20  # tables waiting for a worker, over all sessions
MODELS_DIR_ENV = "STACKLAB_MODELS_DIR"  # the one folder of models a page may read
