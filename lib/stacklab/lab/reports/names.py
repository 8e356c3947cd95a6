"""The names of a run's files when they leave their folder: the task, the position
encoding and the start of the run key, so the files of several runs (a browser's
Downloads, a folder of reports) never overwrite each other.

>>> file_name("reverse-learned-2f79848c", "report.html")
'reverse-learned-2f79848c-report.html'
>>> name_of("reverse", "pos_embed + alibi", "2f79848c3e0d11aa")
'reverse-learned-alibi-2f79848c'
"""

from __future__ import annotations

import re

from .compare import encoding

KEY_CHARS = 8  # of the run key in a name: enough to tell a user's runs apart
_WORDS = {"pos_embed": "learned", "sin_pos": "sinusoidal"}  # the rest by their own names
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def name_of(task: str, encodings: str, key: str) -> str:
    """``task-encoding-key``: ``encodings`` as `encoding` writes them ("pos_embed + rope"),
    each in a word ("learned", "sinusoidal", "rope", "alibi", "none")."""
    words = [_WORDS.get(word.strip(), word.strip()) for word in encodings.split("+")]
    return _UNSAFE.sub("-", "-".join([task, *words, key[:KEY_CHARS]])).strip("-.")


def run_name(run) -> str:
    """The name of ``run`` (a `Run` or a stored run): ``reverse-learned-2f79848c``."""
    return name_of(run.task.name, encoding(run.network), run.key)


def file_name(name: str, file: str) -> str:
    """``file`` (``report.html``) of the run called ``name``: ``NAME-report.html``."""
    return f"{name}-{file}"

