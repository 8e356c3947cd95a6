"""One table's analysis in a process of its own, under a run's budgets.

An uploaded position table, or a real model's (from the server's Hugging Face cache or the
folder an operator allows), is scored and drawn here, never in a page's script thread: the
scores of a wide table take seconds and hundreds of MB, and a crash or an out-of-memory
kill here ends this process only. The process runs at the pool's priority, with the
pool's threads per job, and may allocate at most ``memory_bytes`` beyond what it holds
when it starts (`limit_memory`: past it, allocation fails and the analysis says
``E_BUDGET``); the pool ends it past its seconds (`stacklab.serve.workers.table_jobs`).

It tells the pool how far it got (`Stage`) and ends with `Analysed`: the result as plain
data, or the `StackError` that refused the table, as ``(code, message, hint)``.

Every size the work depends on is checked before the table is read: the file's bytes, its
header, the tensors it names, and the table's rows and width as declared
(`stacklab.lab.reports.table_file.check_shape`).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from ...core.errors import StackError
from ...lab.figures import RunFigure, figure_entry
from ...lab.figures.offsets import OFFSET_CAPTION, OFFSET_TITLE, offset_encoding_plot
from ...lab.models import encoding_of, model_config, offset_curves, read_position_table
from ...lab.reports.table_file import MAX_UPLOAD_BYTES, check_shape, explore_table, read_table
from .messages import Analysed, Stage, encode
from .process_limits import limit_memory, lower_priority

UPLOAD, CACHED, FOLDER = "upload", "cached", "folder"  # where a table comes from


@dataclass(frozen=True)
class TableRequest:
    """A table to analyse: ``source`` is `UPLOAD` (``name`` the file's name, ``data`` its
    bytes), `CACHED` (``name`` a model in the server's Hugging Face cache) or `FOLDER`
    (``name`` the model's path, already checked to lie in the allowed folder); ``key``
    names the tensor (None: the model's layout finds it, or the file's only tensor).
    ``identity`` says what the result depends on: an upload's hash, a model's files'
    sizes and times; equal identities share one analysis."""

    source: str
    name: str
    key: str | None
    identity: str
    data: bytes | None = None

    @property
    def cache_key(self) -> tuple:
        return (self.source, self.identity, self.key)


def analyse(conn, request: TableRequest, memory_bytes: int, threads: int | None,
            nice: int) -> None:
    """The child's whole life: analyse ``request`` and send `Stage`s, then `Analysed`."""
    try:
        torch.set_num_threads(threads or os.cpu_count() or 1)
        torch.ones(1 << 20).add_(1)  # torch's worker threads start now, outside the limit
        lower_priority(nice)
        limit_memory(memory_bytes)
        started = time.process_time()
        result = table_result(request, lambda text, done: conn.send(encode(Stage(text, done))))
        result["cpu_seconds"] = round(time.process_time() - started, 2)  # what it cost
        conn.send(encode(Analysed(result, None)))
    except StackError as err:
        _send(conn, Analysed(None, (err.code, err.message, err.hint)))
    except Exception as err:  # noqa: BLE001 - whatever happens, the pool hears why
        _send(conn, Analysed(None, _why(request, err, memory_bytes)))
    finally:
        conn.close()


def _why(request: TableRequest, err: Exception, memory_bytes: int) -> tuple[str, str, str]:
    """``(code, message, hint)`` of an analysis that failed with ``err``: out of its memory
    (``MemoryError``, or torch's allocator failing under the limit) is ``E_BUDGET``."""
    name = request.name[:120]
    if isinstance(err, MemoryError) or "allocate" in str(err):
        return ("E_BUDGET", f"{name}: analysing the table needed more than "
                f"{memory_bytes / (1 << 30):.1f} GiB of memory, a run's budget on this server",
                "give a narrower table or fewer rows (the scores look at the first 1,024)")
    return ("E_VALUE", f"{name}: the table could not be analysed ({type(err).__name__}: "
            f"{str(err)[:200]})", "check the file; if it is a position table, report it")


def _send(conn, message) -> None:
    try:
        conn.send(encode(message))
    except OSError:
        pass  # the pool is gone: nobody to tell


def table_result(request: TableRequest, stage) -> dict:
    """What a page shows of ``request``'s table, as plain data: ``name`` (the table's),
    ``read`` (which checkpoint, layout and rows, or None), ``shape``, ``scores`` and
    ``figures`` (`figure_entry` lists); ``stage(text, done)`` hears the progress."""
    stage("reading the table", 0.05)
    if request.source == UPLOAD:
        table = read_table(request.name, request.key, data=request.data,
                           max_bytes=MAX_UPLOAD_BYTES)
        name, read = request.key or request.name.rsplit(".", 1)[0], None  # as uploaded
    else:
        config = model_config(request.name)
        label = Path(request.name).name or request.name
        if request.key is None and encoding_of(config) is not None:
            return _offsets_result(config, label, stage)
        found = read_position_table(request.name, request.key,
                                    check=lambda where, shape: check_shape(where, shape))
        table, name, read = found.table, found.key, found.summary
    check_shape(name, list(table.shape))
    stage(f"scoring and drawing a table of {table.shape[0]:,} rows × {table.shape[1]:,}", 0.2)
    scores, drawn = explore_table(table, name)
    stage("sending the figures", 0.95)
    return {"name": name, "read": read, "shape": list(table.shape), "scores": scores,
            "figures": [figure_entry(figure) for figure in drawn]}


def _offsets_result(config: dict, label: str, stage) -> dict:
    """A rotary or ALiBi model: no table, the offset figure from its config."""
    stage("drawing what an offset alone gives", 0.3)
    curves = offset_curves(config, label)
    figure = RunFigure(OFFSET_TITLE, OFFSET_CAPTION, offset_encoding_plot([curves]),
                       key="offset_encoding")
    scores = {"encoding": curves.kind, "parameters": curves.about,
              "trained_length": curves.trained_len}
    return {"name": curves.label, "read": f"{label}: {curves.kind} positions, {curves.about}; "
            "no position table", "shape": None, "scores": scores,
            "figures": [figure_entry(figure)]}
