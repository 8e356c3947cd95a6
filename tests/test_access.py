"""Figures every student can read (issue 35): the lines of one figure stay apart under
simulated deuteranopia and protanopia, the heatmaps' colour scales keep their order of
lightness, every figure has a text alternative with its numbers, and a phone's copy of a
figure fits its column.

Colour-vision deficiency is simulated with the matrices of Machado, Oliveira and Fernandes,
"A Physiologically-based Model for Simulation of Color Vision Deficiency", IEEE TVCG 15(6),
2009, at severity 1.0 (their Table 1, applied to linear sRGB); colours are compared in CIE
L*a*b* (D65) by the CIE76 distance, where about 2.3 is a just noticeable difference.
"""

from __future__ import annotations

import itertools
import re

import numpy as np
import plotly.io as pio
import pytest
from plotly.colors import sample_colorscale, unlabel_rgb

import stacklab
from stacklab import figures

# Machado et al. (2009), Table 1, severity 1.0: linear sRGB -> linear sRGB as seen.
PROTANOPIA = np.array([[0.152286, 1.052583, -0.204868],
                       [0.114503, 0.786281, 0.099216],
                       [-0.003882, -0.048116, 1.051998]])
DEUTERANOPIA = np.array([[0.367322, 0.860646, -0.227968],
                         [0.280085, 0.672501, 0.047413],
                         [-0.011820, 0.042940, 0.968881]])
VISIONS = {"typical": np.eye(3), "deuteranopia": DEUTERANOPIA, "protanopia": PROTANOPIA}
MIN_LINE_DELTA_E = 15.0  # CIE76 between any two line colours of one figure, in every vision
SRGB_TO_XYZ = np.array([[0.4124564, 0.3575761, 0.1804375],
                        [0.2126729, 0.7151522, 0.0721750],
                        [0.0193339, 0.1191920, 0.9503041]])
WHITE_D65 = np.array([0.95047, 1.0, 1.08883])
DEFAULT_LINES = pio.templates["plotly"].layout.colorway  # a line given no colour gets these


def rgb(colour: str) -> np.ndarray:
    """A CSS colour (#rrggbb, rgb(), rgba() over the white page) as sRGB in 0..255."""
    colour = colour.strip()
    if colour.startswith("#"):
        return np.array([int(colour[i:i + 2], 16) for i in (1, 3, 5)], dtype=float)
    numbers = [float(n) for n in re.findall(r"[\d.]+", colour)]
    if colour.startswith("rgba"):
        alpha = numbers[3]
        return np.array(numbers[:3]) * alpha + 255.0 * (1 - alpha)
    return np.array(unlabel_rgb(colour), dtype=float)


def lab(colour: str, vision: np.ndarray) -> np.ndarray:
    """``colour`` as a person with ``vision`` sees it, in CIE L*a*b*."""
    c = rgb(colour) / 255.0
    linear = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    xyz = SRGB_TO_XYZ @ np.clip(vision @ linear, 0.0, 1.0) / WHITE_D65
    f = np.where(xyz > 216 / 24389, np.cbrt(xyz), (24389 / 27 * xyz + 16) / 116)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def delta_e(a: str, b: str, vision: np.ndarray) -> float:
    return float(np.linalg.norm(lab(a, vision) - lab(b, vision)))


def line_colours(fig) -> set[str]:
    """The colours of a figure's lines and bars (a line given none: plotly's default)."""
    found = set()
    for index, trace in enumerate(fig.data):
        if trace.type not in ("scatter", "bar"):
            continue
        colour = (trace.line.color if trace.type == "scatter" else None) or trace.marker.color
        if colour is None:
            colour = DEFAULT_LINES[index % len(DEFAULT_LINES)]
        if isinstance(colour, str):
            found.add(colour)
        elif trace.type == "bar" and colour is not None and all(isinstance(c, str) for c in colour):
            found.update(colour)  # bars coloured one by one (trained rows, untrained rows)
    return found


@pytest.fixture(scope="module")
def drawn():
    """Every figure a page draws, by title: a run's (evaluated at a longer length), four
    runs' lengths on one plot, four heads' offset scores, the training curves."""
    stack = "embedding(16, 32)\npos_embed(32)\nattention(2)\nlayer_norm()\nlinear(16)"
    run = stacklab.train(stack, task="reverse", steps=40, seq_len=16, eval_lengths="24")
    found = {f.title: f.figure for f in figures.run_figures(run) if f.figure is not None}
    series = [(f"run {n}", 16, run.length_generalization) for n in range(4)]
    found["lengths compared"] = figures.lengths_compared_plot(series)
    found["offsets"] = figures.offset_scores_plot(np.random.default_rng(0).normal(size=(4, 31)),
                                                  "n1", "rope")
    found["curves"] = figures.training_curves(run.history)
    return found


def test_every_figures_lines_stay_apart_for_colour_blind_readers(drawn):
    """Any two line colours of one figure are at least 15 CIE76 units apart as a reader
    with deuteranopia or protanopia sees them (and with typical vision)."""
    checked = 0
    for title, fig in drawn.items():
        for a, b in itertools.combinations(sorted(line_colours(fig)), 2):
            for vision, matrix in VISIONS.items():
                distance = delta_e(a, b, matrix)
                assert distance >= MIN_LINE_DELTA_E, (title, a, b, vision, round(distance, 1))
            checked += 1
    assert checked >= 10  # the figures with several lines were all reached


def test_the_check_fails_the_colours_the_figures_had_before():
    """The line test can fail: plotly's "category10" colours, which the figures used
    before, put red and green together under deuteranopia (7.3) and green and orange
    under protanopia (4.6), though they are far apart with typical vision."""
    red, green, orange = "#d62728", "#2ca02c", "#ff7f0e"
    assert delta_e(red, green, VISIONS["typical"]) > 100
    assert delta_e(red, green, DEUTERANOPIA) < MIN_LINE_DELTA_E
    assert delta_e(green, orange, PROTANOPIA) < MIN_LINE_DELTA_E


def _scales(drawn) -> set[str]:
    names = set()
    for fig in drawn.values():
        for trace in fig.data:
            scale = getattr(trace, "colorscale", None)
            if trace.type == "heatmap" and scale is not None:
                names.add(tuple(tuple(stop) for stop in scale))
    return names


def test_heatmap_scales_keep_their_order_of_lightness_in_every_vision(drawn):
    """A sequential scale's lightness (L*) rises or falls steadily from end to end, a
    diverging one's steadily from each end to its middle, as every reader sees it: the
    order of the values reads from lightness alone. Its two ends stay apart."""
    scales = _scales(drawn)
    assert len(scales) >= 2  # the attention scale and the similarity scale at least
    for scale in scales:
        colours = sample_colorscale([list(stop) for stop in scale], 21)
        for vision, matrix in VISIONS.items():
            lightness = np.array([lab(c, matrix)[0] for c in colours])
            steps = np.diff(lightness)
            turn = int(np.argmax(lightness)) if not (np.all(steps > 0) or np.all(steps < 0)) else None
            if turn is None:
                continue  # monotone: sequential
            assert np.all(steps[:turn] > 0) and np.all(steps[turn:] < 0), (scale[0], vision)
            assert delta_e(colours[0], colours[-1], matrix) >= MIN_LINE_DELTA_E, (scale[0], vision)


def test_every_figure_has_a_text_alternative_with_its_numbers(drawn):
    """`describe` names each figure by its title and what it shows, with numbers."""
    for title, fig in drawn.items():
        text = figures.describe(fig, "a score 0.93")
        assert "a score 0.93" in text and re.search(r"\d\.\d", text), (title, text)
        assert len(text) < 1200


def test_a_phones_copy_fits_its_column(drawn):
    """A phone's copy: the title wrapped to the phone's width, the legend in a row below,
    thin colour bars; the figure shown on laptops is left as it was."""
    for title, fig in drawn.items():
        before = fig.to_json()
        phone = figures.phone_figure(fig)
        assert fig.to_json() == before, title  # a copy: the shared figure is untouched
        shown = figures.wrap_title(fig.layout.title.text or "", figures.PHONE_WIDTH)
        assert (phone.layout.title.text or "") == shown, title
        assert phone.layout.legend.orientation == "h", title
        for trace in phone.data:
            if "colorbar" in trace and trace.showscale is not False:
                assert trace.colorbar.thickness <= 12, title
