"""Position tables from elsewhere: a ``[rows, D]`` table read from a
``.safetensors`` file (by key) or a ``.npy`` file (pickle refused), with every figure and
score that needs only the table.

Nothing here runs user data through pickle or ``torch.load``: safetensors files have their
header checked first (`stacklab.lab.runs.checkpoint.read_metadata`), and ``.npy`` files are read
with ``allow_pickle=False``.

>>> import tempfile, numpy as np, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "table.npy"
>>> np.save(path, np.random.default_rng(0).normal(size=(64, 16)).astype("float32"))
>>> table = read_table(path)
>>> table.shape, sorted(table_scores(table))[:2]
(torch.Size([64, 16]), ['cosine_by_distance', 'distance_rank'])
"""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
import tokenize
from pathlib import Path

import numpy as np
import numpy.lib.format as np_format
import torch
from safetensors import safe_open

from ...core.errors import StackError
from .. import measure as analysis
from ..measure import score_maths
from ..runs.checkpoint import read_metadata
from ..figures import RunFigure, TableContext, figures_of_table
from ..figures.heatmaps import sinusoidal_resemblance

MAX_FILE_BYTES = 256 << 20  # the largest file the CLI reads
# the largest the Explore page accepts: Streamlit's uploader refuses more than
# server.maxUploadSize = 16 (MB, of 1,000,000 bytes)
MAX_UPLOAD_BYTES = 16_000_000
UPLOAD_LIMIT = "16 MB"  # MAX_UPLOAD_BYTES in words
MAX_VALUE = 1e8  # larger values overflow float32 products of rows
SCORED_ROWS = 1024  # rows the scores look at (the first ones): monotonicity grows as rows²
# Every size the scores depend on, bounded before anything is read (issue 28): the width
# D (the probe's cost grows as rows² · D), the rows, the tensors a file names and the
# bytes of their names, and the 2-D tensors offered to choose from.
MAX_WIDTH = 8192
MAX_ROWS = 1 << 20
MAX_TENSORS = 4096
MAX_HEADER_BYTES = 1 << 20
MAX_LISTED = 64


def _fail(name: str, message: str, hint: str, code: str = "E_VALUE") -> StackError:
    return StackError(code, f"{name}: {message}", hint=hint)


def read_table(path: str | Path, key: str | None = None, *, data: bytes | None = None,
               max_bytes: int = MAX_FILE_BYTES) -> torch.Tensor:
    """The ``[rows, D]`` float32 table in ``path`` (or in ``data``, the bytes of an upload
    named ``path``): ``.safetensors`` needs ``key`` unless it holds one tensor; ``.npy`` is
    read with pickle refused. Raises `StackError` for a file too large, a missing key, a
    shape other than ``[rows, D]`` within `MAX_ROWS` and `MAX_WIDTH` (checked on the shape
    the file declares, before reading it), or values that are not finite."""
    name = Path(path).name
    size = len(data) if data is not None else _size(path, name)
    if size > max_bytes:
        raise _fail(name, f"the file is {size:,} bytes, over the limit of {max_bytes:,}",
                    "export only the position table, or fewer rows")
    suffix = Path(path).suffix.lower()
    if suffix == ".npy":
        if key is not None:
            raise _fail(name, f"a .npy file holds one array, so there is no tensor {key[:80]!r} "
                        "to choose", "leave out --key for a .npy file")
        table = _read_npy(name, io.BytesIO(data) if data is not None else path)
    elif suffix == ".safetensors":
        table = _read_safetensors(path, name, key, data)
    else:
        raise _fail(name, "is neither .safetensors nor .npy",
                    "save the table with safetensors (save_file({'wpe': table}, ...)) or np.save")
    if not bool(torch.isfinite(table).all()):
        raise _fail(name, "the table holds non-finite values (nan or inf)",
                    "give a table of finite numbers")
    largest = table.abs().max().item()
    if largest > MAX_VALUE:
        raise _fail(name, f"the table holds values as large as {largest:.3g}: products of "
                    "its rows overflow", f"scale it down (position tables hold values well "
                    f"below {MAX_VALUE:g})")
    return table.float()


def check_shape(name: str, shape, itemsize: int = 0, held: int | None = None) -> None:
    """Refuse a declared ``shape`` that is not a table ``[rows, D]`` with 2 to `MAX_ROWS`
    rows and 1 to `MAX_WIDTH` columns, or (given ``held``, the bytes the file holds after
    its header) one that declares more data than the file holds."""
    shape = [int(n) for n in shape]
    if len(shape) != 2 or shape[0] < 2 or shape[1] < 1:
        raise _fail(name, f"the table has shape {shape}, not [rows, D] with 2 or more rows",
                    "give a 2-D position table such as GPT-2's wpe [1024, 768]")
    rows, width = shape
    if width > MAX_WIDTH:
        raise _fail(name, f"the table is {width:,} wide, over the limit of {MAX_WIDTH:,} (its "
                    "scores' cost grows with the width)", "keep its first columns, or project "
                    f"its rows onto their top {MAX_WIDTH:,} principal components or fewer",
                    "E_BUDGET")
    if rows > MAX_ROWS:
        raise _fail(name, f"the table has {rows:,} rows, over the limit of {MAX_ROWS:,}",
                    "keep its first rows (the scores look at the first "
                    f"{SCORED_ROWS:,} only)", "E_BUDGET")
    if held is not None and rows * width * itemsize > held:
        raise _fail(name, f"the file declares shape {shape} ({rows * width * itemsize:,} bytes) "
                    f"but holds {held:,} bytes of data", "save the table with np.save")


def _size(path, name: str) -> int:
    try:
        return Path(path).stat().st_size
    except OSError as err:
        raise _fail(name, f"cannot read the file ({err.strerror or err})",
                    "check the path") from None


def _read_npy(name: str, source) -> torch.Tensor:
    """The array of a ``.npy`` file (a path, or a `io.BytesIO` of an upload), its header
    read and its declared shape and dtype checked before any data is allocated."""
    try:
        with contextlib.nullcontext(source) if isinstance(source, io.BytesIO) else \
                open(source, "rb") as handle:
            if handle.read(6) != b"\x93NUMPY":
                raise _fail(name, "is not a .npy file (it does not start with NumPy's "
                            "header)", "save the table with np.save")
            handle.seek(0)
            shape, dtype = _npy_header(name, handle)
            start = handle.tell()
            held = handle.seek(0, io.SEEK_END) - start
            handle.seek(0)
    except OSError as err:
        raise _fail(name, f"cannot read the file ({err.strerror or err})", "check the path") from None
    check_shape(name, shape, dtype.itemsize, held)
    try:
        array = np.load(source, allow_pickle=False)
    except ValueError as err:
        raise _fail(name, f"not a plain numeric .npy array ({str(err)[:120]})",
                    "save a numeric array with np.save; pickled objects are refused") from None
    except (OSError, EOFError) as err:
        raise _fail(name, f"not a valid .npy file ({str(err)[:120]})",
                    "save the table with np.save") from None
    return torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32))


def _npy_header(name: str, handle) -> tuple[tuple, np.dtype]:
    """``(shape, dtype)`` as the header of the ``.npy`` file open in ``handle`` declares
    them (NumPy's own header reader; nothing past the header is read)."""
    try:
        version = np_format.read_magic(handle)
        reader = {(1, 0): np_format.read_array_header_1_0,
                  (2, 0): np_format.read_array_header_2_0}.get(version)
        if reader is None:
            raise ValueError(f"format version {version} is not read here")
        shape, _, dtype = reader(handle)
    except (ValueError, SyntaxError, TypeError, EOFError, tokenize.TokenError) as err:
        # (NumPy re-reads an old header with `tokenize`, which raises its own error)
        raise _fail(name, f"not a valid .npy file ({str(err)[:120]})",
                    "save the table with np.save") from None
    if dtype.kind not in "fiu":
        raise _fail(name, f"holds {dtype}, not a plain numeric array",
                    "save a numeric array with np.save; pickled objects are refused")
    return shape, dtype


SAVE_HINT = "save the table with safetensors.torch.save_file"


@contextlib.contextmanager
def _safetensors(path, name: str, data: bytes | None, max_bytes: int):
    """``(entries, open file)`` of the safetensors file at ``path`` (or in ``data``, an
    upload, put in a temporary file that goes with the block): its header bounded and
    checked first (`_header_entries`), then opened for reading; any damage is a
    `StackError` naming ``name``."""
    if data is not None:
        with tempfile.NamedTemporaryFile(suffix=".safetensors") as handle:
            handle.write(data)
            handle.flush()
            with _safetensors(handle.name, name, None, max_bytes) as opened:
                yield opened
        return
    entries = _header_entries(path, name, max_bytes)
    try:
        opened = safe_open(str(path), framework="pt")
    except Exception as err:  # safetensors raises its own error types for corrupt files
        raise _fail(name, f"not a valid safetensors file ({type(err).__name__})",
                    SAVE_HINT) from None
    with opened:
        yield entries, opened


def _header_entries(path, name: str, max_bytes: int) -> dict[str, dict]:
    """``{tensor: {"dtype", "shape", ...}}`` of a safetensors file, refused when its header
    is larger than `MAX_HEADER_BYTES` (before parsing it) or names more than `MAX_TENSORS`
    tensors; then size, header and offsets checked (`read_metadata`)."""
    try:
        size = Path(path).stat().st_size
        with open(path, "rb") as handle:
            declared = int.from_bytes(handle.read(8), "little")
    except OSError as err:
        raise _fail(name, f"cannot read the file ({err.strerror or err})", "check the path") from None
    if MAX_HEADER_BYTES < declared <= size - 8:
        raise _fail(name, f"its header is {declared:,} bytes, over the limit of "
                    f"{MAX_HEADER_BYTES:,} for a file of position tables (it names too many "
                    "tensors)", "save only the position table: save_file({'wpe': table}, ...)",
                    "E_BUDGET")
    try:
        read_metadata(path, max_data_bytes=max_bytes)  # size, header, offsets: first
    except StackError as err:
        raise _fail(name, err.message.split(": ", 1)[-1], SAVE_HINT) from None
    with open(path, "rb") as handle:
        handle.seek(8)
        header = json.loads(handle.read(declared))
    entries = {key: entry for key, entry in header.items() if key != "__metadata__"}
    if len(entries) > MAX_TENSORS:
        raise _fail(name, f"names {len(entries):,} tensors, over the limit of {MAX_TENSORS:,}",
                    "save only the position table: save_file({'wpe': table}, ...)", "E_BUDGET")
    return entries


def _read_safetensors(path, name: str, key: str | None, data: bytes | None) -> torch.Tensor:
    with _safetensors(path, name, data, MAX_FILE_BYTES) as (entries, handle):
        keys = list(handle.keys())
        if key is None:
            if len(keys) != 1:
                raise _fail(name, f"holds {len(keys)} tensors ({', '.join(keys[:8])}); "
                            "which one is the table?", "name it with --key, e.g. --key "
                            + (keys[0] if keys else "wpe"))
            key = keys[0]
        if key not in entries:
            raise _fail(name, f"has no tensor {key[:80]!r}",
                        "its tensors: " + (", ".join(keys[:12]) or "none"))
        check_shape(name, entries[key].get("shape") or [])
        try:
            return handle.get_tensor(key)
        except Exception as err:  # noqa: BLE001 - a damaged tensor raises its own types
            raise _fail(name, f"the tensor {key[:80]!r} cannot be read "
                        f"({type(err).__name__})", SAVE_HINT) from None


def tensor_names(data: bytes, name: str) -> list[str]:
    """The tensors of an uploaded ``.safetensors`` file with two dims (the candidates for a
    position table), largest first, at most `MAX_LISTED`, after checking its header
    (`_header_entries`: a file naming more than `MAX_TENSORS` is refused); [] for a
    ``.npy`` file."""
    if not name.lower().endswith(".safetensors"):
        return []
    with _safetensors(name, name, data, MAX_UPLOAD_BYTES) as (entries, _):
        tables = [(key, entry["shape"]) for key, entry in entries.items()
                  if len(entry.get("shape") or ()) == 2]
    tables.sort(key=lambda found: -found[1][0] * found[1][1])  # stable: file order in a tie
    return [key for key, _ in tables[:MAX_LISTED]]


def table_scores(table: torch.Tensor, rows: int | None = None) -> dict:
    """Every score that needs only the table, over its first ``rows`` rows (all,
    up to `SCORED_ROWS`): the rows' own scores, ``distance_rank`` and the resemblance to
    the sinusoid of the same size."""
    rows = min(rows or table.shape[0], SCORED_ROWS, table.shape[0])
    part = table[:rows]
    found = analysis.rows_scores(part)
    alike = found["monotonicity"] is None and rows >= 2  # the rows are all the same
    found["distance_rank"] = None if alike else analysis.finite_score(score_maths.distance_rank(part))
    found["sinusoid_resemblance"] = (None if alike else
                                     analysis.finite_score(sinusoidal_resemblance(part)))
    found["rows_scored"] = rows
    found["shape"] = list(table.shape)
    return found


def table_figures(table: torch.Tensor, name: str, rows: int | None = None,
                  scores: dict | None = None) -> list[RunFigure]:
    """Every figure that needs only the table, each with its score: the figures of
    `FIGURES` that say how a table from a file shows them (`FigureSpec.on_table`).
    ``scores``: its `table_scores` when measured already (they are not measured twice)."""
    return figures_of_table(TableContext(name, table, scores or table_scores(table, rows)))


def explore_table(table: torch.Tensor, name: str, rows: int | None = None
                  ) -> tuple[dict, list[RunFigure]]:
    """``(table_scores, table_figures)`` of ``table``, its scores measured once: what the
    Explore page and ``stacklab explore`` show of a table from a file."""
    scores = table_scores(table, rows)
    return scores, table_figures(table, name, rows, scores)


def gpt2_like_table(rows: int = 1024, dim: int = 768, seed: int = 0) -> torch.Tensor:
    """A synthetic table with the character of GPT-2's learned ``wpe`` (nothing is
    downloaded): most of its variance in a few slow waves along the positions (the helix
    its PCA shows), a little noise on every row, and a few early rows that stand apart."""
    generator = torch.Generator().manual_seed(seed)
    position = torch.arange(rows, dtype=torch.float32)[:, None]  # (rows, 1)
    waves = 8
    period = rows * torch.logspace(0, -1.2, waves)[None, :]  # slow to faster, (1, waves)
    phase = torch.rand(1, waves, generator=generator) * 2 * torch.pi
    basis = torch.cat([torch.cos(2 * torch.pi * position / period + phase),
                       torch.sin(2 * torch.pi * position / period + phase)], dim=1)  # (rows, 16)
    amplitude = torch.linspace(1.0, 0.2, 2 * waves)[None, :]
    mixing = torch.randn(2 * waves, dim, generator=generator) / (2 * waves) ** 0.5
    table = (basis * amplitude) @ mixing * 0.15  # (rows, dim)
    table += 0.01 * torch.randn(rows, dim, generator=generator)
    table[:4] += 0.3 * torch.randn(4, dim, generator=generator)  # the first positions stand apart
    return table
