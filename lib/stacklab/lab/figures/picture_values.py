"""A heatmap trace's values, colours and ticks as `picture` draws them: plotly's forms of z
(lists with gaps, arrays, base64 typed arrays), colour scales by name or stops, a PNG a
pixel a cell, and round tick values."""

from __future__ import annotations

import base64
import math
import struct
import zlib

import numpy as np
from plotly.colors import get_colorscale

from .style import plain


def z_values(z) -> np.ndarray:
    """A heatmap's z as a float64 array, nan for a gap: lists (None in the gaps), an array,
    or plotly's typed-array form (``{"dtype", "bdata", "shape"}``)."""
    if isinstance(z, dict) and "bdata" in z:
        array = np.frombuffer(base64.b64decode(z["bdata"]), dtype=np.dtype(z["dtype"]))
        shape = [int(s) for s in str(z.get("shape", len(array))).split(",")]
        return array.reshape(shape).astype(np.float64).reshape(shape[0], -1)
    if isinstance(z, np.ndarray):
        return z.astype(np.float64).reshape(z.shape[0], -1)
    rows = [[np.nan if v is None else float(v) for v in row] for row in (z or [[]])]
    width = max((len(row) for row in rows), default=0)
    return np.array([row + [np.nan] * (width - len(row)) for row in rows], dtype=np.float64)


def labels(given, count: int) -> list[str]:
    """An axis's labels as the text they show: the trace's own x or y, else 0, 1, 2..."""
    if given is None:
        return [str(i) for i in range(count)]
    if isinstance(given, dict) and "bdata" in given:
        given = np.frombuffer(base64.b64decode(given["bdata"]), dtype=np.dtype(given["dtype"]))
    return [plain(str(v)) for v in list(given)[:count]] + [str(i) for i in range(len(given), count)]


def colour_scale(scale) -> list[tuple[float, str]]:
    """``[(position, "rgb(r,g,b)"), ...]`` from a named scale or plotly's list of stops."""
    if scale is None:
        scale = "Plasma"
    if isinstance(scale, str):
        scale = get_colorscale(scale)
    return [(float(position), str(colour)) for position, colour in scale]


def rgb(colour: str) -> tuple[float, float, float]:
    if colour.startswith("#"):
        return tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))
    return tuple(float(part) for part in colour[colour.index("(") + 1:colour.index(")")]
                 .split(",")[:3])


def colours(scale, z: np.ndarray, zmin: float, zmax: float) -> np.ndarray:
    """RGBA per cell (uint8), the scale's colours interpolated; alpha 0 where z is not finite."""
    positions = np.array([position for position, _ in scale])
    stops = np.array([rgb(colour) for _, colour in scale])  # (stops, 3)
    span = (zmax - zmin) or 1.0
    finite = np.isfinite(z)
    where = np.clip((np.where(finite, z, zmin) - zmin) / span, 0.0, 1.0)
    mixed = np.stack([np.interp(where, positions, stops[:, c]) for c in range(3)], axis=-1)
    alpha = np.where(finite, 255, 0)[..., None]
    return np.concatenate([np.rint(mixed), alpha], axis=-1).astype(np.uint8)


def png(rgba: np.ndarray) -> str:
    """An RGBA uint8 array ``(rows, columns, 4)`` as a PNG file, base64."""
    rows, columns = rgba.shape[:2]
    raw = b"".join(b"\x00" + rgba[i].tobytes() for i in range(rows))  # filter 0 on every row

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    header = struct.pack(">IIBBBBB", columns, rows, 8, 6, 0, 0, 0)  # 8-bit RGBA
    data = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 6))
            + chunk(b"IEND", b""))
    return base64.b64encode(data).decode("ascii")


def nice_ticks(low: float, high: float, count: int = 5) -> tuple[list[float], list[str]]:
    """Round values from ``low`` to ``high`` (about ``count`` of them) and their labels."""
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
        return [low], [f"{low:.3g}"]
    raw = (high - low) / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(s * power for s in (1, 2, 2.5, 5, 10) if s * power >= raw)
    first = math.ceil(low / step - 1e-9) * step
    values = [first + i * step for i in range(int((high - first) / step + 1e-9) + 1)]
    digits = max(0, -math.floor(math.log10(step) + 1e-9) + (1 if step / power == 2.5 else 0))
    shown = [f"{value:.{digits}f}" for value in values]
    return values, [label.lstrip("-") if float(label) == 0 else label for label in shown]


def tick_steps():
    for power in range(0, 12):
        for s in (1, 2, 5):
            yield s * 10**power


def is_number(label: str) -> bool:
    try:
        float(label)
    except ValueError:
        return False
    return True
