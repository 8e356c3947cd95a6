"""The library as the app sees it: the one module of the app that imports from stacklab's
internals, and exactly what the pages and the rest of `ui` use of them. A file moved in
the library is fixed here, not in every page; what `stacklab` exports itself (``from
stacklab import TASKS, figures``) the pages import from there."""

from stacklab.core import editing
from stacklab.core.build import available_devices
from stacklab.core.docs import op_page
from stacklab.core.errors import annotate
from stacklab.core.language import default_node_name
from stacklab.core.report import is_branching
from stacklab.core.resolve import bind_args
from stacklab.core.shapes import DTYPES
from stacklab.lab.glossary import GLOSSARY, terms_in, terms_used_in
from stacklab.lab.figures import FIGURES
from stacklab.lab.lessons import (FOLDER_PROBLEMS, LESSONS, Lesson, check, fill, step_from_link,
                                  step_in, step_link)
from stacklab.lab.lessons.files import MAX_BYTES as MAX_LESSON_BYTES
from stacklab.lab.lessons.lint import claim_line, margin, quick_check
from stacklab.lab.reports.compare import (MAX_COMPARED, TABLE_NOTE, aligned_rows, column_help,
                                          compared, encoding, length_rows, replaced, table_rows)
from stacklab.lab.models import cached_models, extract_snippet, model_under, models_under
from stacklab.lab.reports.html import report_html, table_report_html
from stacklab.lab.reports.names import file_name, run_name
from stacklab.lab.reports.table_file import MAX_UPLOAD_BYTES, UPLOAD_LIMIT, tensor_names
from stacklab.lab.settings import SETTINGS
from stacklab.serve.limits import (MAX_LINK_STACK_CHARS, MAX_STACK_CHARS, MODELS_DIR_ENV,
                                   PARAM_BUDGET_BYTES, SESSION_TTL_SECONDS)
from stacklab.serve.links.changes import (announcement, changed_since, holding,
                                          preset_announcement, stale_note)
from stacklab.serve.links.experiment import Experiment, Link, presets, read_link, write_link
from stacklab.serve.classroom import server_classes
from stacklab.serve.classroom.classes import Classes, ClassView
from stacklab.serve.classroom.votes import (Round, Tally, by_step, new_voter_token, step_table,
                                            votes_csv)
from stacklab.serve.links.link_table import LINK_VALUES, parse_compare, parse_values, write_values
from stacklab.serve.links.addresses import (lan_address, network_addresses, restart_hint,
                                            share_address)
from stacklab.serve.links.projector import best_head_figure, present_figure
from stacklab.serve.links.qr import qr_png
from stacklab.serve.links.share import (ALL_PINS, experiment_of_run, pins_everything,
                                        resolve_key, share_link)
from stacklab.serve.workers.job_polls import ANSWER_FLOOR_SECONDS, PollLoad, load_note
from stacklab.serve.workers.pool import JobPool
from stacklab.serve.workers.table_jobs import TableView, model_request, upload_request

__all__ = [
    # Build
    "DTYPES", "MAX_STACK_CHARS", "PARAM_BUDGET_BYTES", "annotate", "bind_args",
    "default_node_name", "editing", "holding", "is_branching", "presets",
    # Catalog
    "op_page",
    # Train and Compare
    "MAX_COMPARED", "SETTINGS", "TABLE_NOTE", "aligned_rows", "available_devices", "column_help",
    "compared", "encoding", "length_rows", "parse_compare", "replaced", "table_rows",
    # Home and Learn: the lessons, their links, the glossary
    "GLOSSARY", "LESSONS", "LINK_VALUES", "check", "parse_values", "step_from_link", "step_link",
    "terms_in", "terms_used_in", "fill",
    # Learn's lessons from a teacher: an upload, checked (ui/lessons.py)
    "FIGURES", "FOLDER_PROBLEMS", "Lesson", "step_in", "MAX_LESSON_BYTES", "claim_line", "margin",
    "quick_check",
    # Learn's class: the teacher's step, followed by the students
    "ClassView", "Classes", "server_classes", "write_values",
    # ... and its votes: the projector's count, the class summary, the CSV
    "Round", "Tally", "by_step", "new_voter_token", "step_table", "votes_csv",
    # Explore
    "MAX_UPLOAD_BYTES", "UPLOAD_LIMIT", "report_html", "tensor_names", "file_name", "run_name",
    # Explore's real-model section (parts/explore_table.py, ui/tables.py)
    "MODELS_DIR_ENV", "TableView", "cached_models", "extract_snippet", "model_request",
    "model_under", "models_under", "table_report_html", "upload_request",
    # the classroom: the share panel and the projector
    "ALL_PINS", "best_head_figure", "experiment_of_run", "lan_address", "network_addresses",
    "pins_everything", "present_figure", "qr_png", "resolve_key", "restart_hint",
    "share_address", "share_link",
    # the session and its address (ui.session, ui.urls, ui.scripts)
    "Experiment", "JobPool", "Link", "MAX_LINK_STACK_CHARS", "SESSION_TTL_SECONDS",
    "announcement", "changed_since", "preset_announcement", "read_link", "stale_note",
    "write_link",
    # a page's polls of something live, and the server's backpressure on them (ui.polls)
    "ANSWER_FLOOR_SECONDS", "PollLoad", "load_note",
]
