"""The still picture of a heatmap figure (`stacklab.lab.figures.picture`), read back as SVG:
its cells, colours, axes, colour bar, text and caching; real figures from real runs."""

from __future__ import annotations

import base64
import json
import struct
import xml.etree.ElementTree as ET
import zlib
from urllib.parse import unquote

import numpy as np
import plotly.graph_objects as go
import pytest
import torch
from plotly.colors import get_colorscale

from stacklab import figures
from stacklab.lab.figures import plotly_private
from stacklab.lab.figures.head_grids import head_scores_heatmaps
from stacklab.lab.figures.picture import RECT_CELLS, figure_svg, svg_img
from stacklab.lab.figures.picture_values import nice_ticks
from stacklab.lab.train.trainer import train

SVG = "{http://www.w3.org/2000/svg}"


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)


def cells(root: ET.Element) -> list[ET.Element]:
    """The map's cells: every rect but the white background and the colour bar."""
    return [r for r in root.iter(SVG + "rect")
            if r.get("width") != "100%" and not r.get("fill", "").startswith("url(")]


def texts(root: ET.Element) -> list[str]:
    return [t.text or "" for t in root.iter(SVG + "text")]


def rgb(colour: str) -> tuple[int, ...]:
    return tuple(round(float(v)) for v in colour[colour.index("(") + 1:-1].split(","))


@pytest.fixture(scope="module")
def reverse():
    run = train(task="reverse", steps=60)
    assert run.status == "finished"
    return run


def test_a_heatmap_is_drawn_cell_by_cell_in_its_scales_colours():
    z = np.arange(12, dtype=np.float32).reshape(3, 4)
    fig = go.Figure(go.Heatmap(z=z, colorscale="Blues", zmin=0, zmax=11,
                               colorbar=dict(title=dict(text="weight"))))
    fig.update_yaxes(autorange="reversed")
    root = parse(figure_svg(fig, width=400))
    drawn = cells(root)
    assert len(drawn) == 12
    scale = get_colorscale("Blues")
    # row 0 at the top (reversed axis): the first cell drawn is z = 0, the last z = 11
    first = min(drawn, key=lambda r: (float(r.get("y")), float(r.get("x"))))
    last = max(drawn, key=lambda r: (float(r.get("y")), float(r.get("x"))))
    assert rgb(first.get("fill")) == rgb(scale[0][1])
    assert rgb(last.get("fill")) == rgb(scale[-1][1])
    assert "weight" in texts(root)  # the colour bar's title
    assert root.find(f"{SVG}defs/{SVG}linearGradient") is not None


def test_without_a_reversed_axis_row_0_is_at_the_bottom():
    fig = go.Figure(go.Heatmap(z=[[0.0, 0.0], [1.0, 1.0]], colorscale="Greys", zmin=0, zmax=1))
    drawn = cells(parse(figure_svg(fig)))
    top = min(drawn, key=lambda r: float(r.get("y")))
    assert rgb(top.get("fill")) == rgb(get_colorscale("Greys")[-1][1])  # z = 1: row 1, on top


def test_square_cells_when_the_figure_asks_for_them():
    fig = go.Figure(go.Heatmap(z=np.zeros((4, 8))))
    fig.update_yaxes(scaleanchor="x")
    widths = {round(float(r.get("width")), 1) for r in cells(parse(figure_svg(fig)))}
    heights = {round(float(r.get("height")), 1) for r in cells(parse(figure_svg(fig)))}
    assert widths == heights and len(widths) == 1


def test_the_pattern_figure_of_a_run_read_back_from_json_draws_the_same_picture(reverse):
    drawn = figures.pattern_figure(reverse)
    read_back = figures.figure_from_entry(figures.figure_entry(drawn))  # the worker's JSON
    svg = figure_svg(read_back.figure, width=534, font=15)
    assert svg == figure_svg(drawn.figure, width=534, font=15)
    root = parse(svg)
    [image] = root.iter(SVG + "image")  # 256 cells: one picture, a pixel a cell
    assert read_png(image.get("href").split("base64,")[1]).shape == (16, 16, 4)  # T = 16
    assert not cells(root) and len(svg) < 8_000
    shown = texts(root)
    assert "key position (attended to)" in shown and "query position (attending)" in shown
    assert any(text.startswith("Attention by position alone") for text in shown)
    assert {"0", "14"} <= set(shown)  # tick labels


@pytest.mark.skipif(not plotly_private.WATCHES_CHANGES,
                    reason="the public fallback keeps nothing that a change could leave stale")
def test_a_picture_is_kept_with_a_shared_figures_dict_until_the_figure_changes(reverse):
    fig = figures.shared(figures.pattern_figure(reverse).figure)
    first = figure_svg(fig, width=500)
    assert figure_svg(fig, width=500) is first  # kept
    assert figure_svg(fig, width=600) is not first  # another size, another picture
    fig.update_layout(title_text="Renamed")
    again = figure_svg(fig, width=500)
    assert again is not first and "Renamed" in texts(parse(again))
    plain = figures.pattern_figure(reverse).figure  # a plain figure keeps nothing
    assert figure_svg(plain) is not figure_svg(plain) and figure_svg(plain) == figure_svg(plain)


def test_head_scores_draw_every_subplot_with_its_text_and_one_colour_bar():
    layer = {"heads": [{"previous_token": {"value": 0.9, "init": 0.1},
                        "induction": {"value": 0.2, "init": 0.3}} for _ in range(4)], "layer": 1}
    fig = head_scores_heatmaps({"n2": layer, "n3": {**layer, "layer": 2}})
    root = parse(figure_svg(fig, width=700))
    assert len(cells(root)) == 4 * 2 * 4  # 4 maps of 2 layers x 4 heads
    shown = texts(root)
    assert shown.count("0.90") == 8 and shown.count("0.30") == 8  # each cell's value
    assert "previous token, trained" in shown and "induction, at init" in shown
    assert shown.count("layer 1 (n2)") == 2  # the left column's row labels only
    assert len(root.findall(f".//{SVG}linearGradient")) == 1


def test_colour_bar_labels_are_round_and_keep_their_sign():
    values, labels = nice_ticks(-0.1, 0.1)
    assert labels == ["-0.10", "-0.05", "0.00", "0.05", "0.10"] and values[2] == pytest.approx(0)
    assert nice_ticks(0.0, 0.8)[1] == ["0.0", "0.2", "0.4", "0.6", "0.8"]
    assert nice_ticks(-1.0, 1.0)[1] == ["-1.0", "-0.5", "0.0", "0.5", "1.0"]


def test_what_the_picture_cannot_draw_is_left_to_the_chart():
    frames = go.Figure(go.Heatmap(z=[[1.0]]), frames=[go.Frame(data=[go.Heatmap(z=[[2.0]])])])
    assert figure_svg(frames) is None  # an animation
    assert figure_svg(go.Figure(go.Heatmap(z=[[1.0, 2.0]], colorscale=[[0, "red"], [1, "blue"]]))) \
        is None  # a colour by name
    assert figure_svg(go.Figure(go.Heatmap(z=[[1.0]], texttemplate="%{z:.2s}"))) is None  # d3's
    assert figure_svg(go.Figure(go.Heatmap(z=[]))) is None


def test_gaps_are_left_out_and_a_figure_of_other_traces_is_no_picture():
    fig = go.Figure(go.Heatmap(z=[[1.0, None], [None, 2.0]]))
    assert len(cells(parse(figure_svg(fig)))) == 2
    assert figure_svg(go.Figure(go.Scatter(y=[1, 2]))) is None
    assert figure_svg(go.Figure()) is None
    mixed = go.Figure([go.Heatmap(z=[[1.0]]), go.Scatter(y=[0])])
    assert figure_svg(mixed) is None


def test_text_is_escaped_and_never_markup():
    fig = go.Figure(go.Heatmap(z=[[1.0]], colorbar=dict(title=dict(text="a &lt;b&gt;"))))
    fig.update_layout(title_text="<script>alert(1)</script> &amp; n1's rows")
    svg = figure_svg(fig)
    root = parse(svg)  # well-formed
    assert not list(root.iter(SVG + "script")) and "<script" not in svg
    assert "alert(1) & n1's rows" in texts(root)  # plotly's tags dropped, its entities read
    assert "a <b>" in texts(root)
    img = svg_img(svg, 'the "map" <b>')
    assert img.startswith("<img src='data:image/svg+xml,")
    assert 'alt="the &quot;map&quot; &lt;b&gt;"' in img
    uri = img.split("svg+xml,")[1].split("'")[0]  # no quote, < or > left to end the attribute
    assert not set(uri) & set("'<>#") and unquote(uri) == svg
    assert len(img) < len(svg) * 1.25  # base64 was a third more


def read_png(data: str) -> np.ndarray:
    """An RGBA PNG as our writer makes it (filter 0 on every row) back into pixels."""
    raw = base64.b64decode(data)
    assert raw[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", raw[16:24])
    start = raw.index(b"IDAT") + 4
    length = struct.unpack(">I", raw[start - 8:start - 4])[0]
    rows = zlib.decompress(raw[start:start + length])
    pixels = np.frombuffer(rows, dtype=np.uint8).reshape(height, 1 + 4 * width)
    assert (pixels[:, 0] == 0).all()
    return pixels[:, 1:].reshape(height, width, 4)


def test_a_large_map_is_one_image_a_pixel_a_cell():
    fig = figures.similarity_heatmap(torch.eye(64), trained_len=16)  # 4096 cells
    assert 64 * 64 > RECT_CELLS
    root = parse(figure_svg(fig))
    [image] = root.iter(SVG + "image")
    assert not cells(root)
    pixels = read_png(image.get("href").split("base64,")[1])
    assert pixels.shape == (64, 64, 4) and (pixels[..., 3] == 255).all()
    top = rgb(get_colorscale("RdBu_r")[-1][1])  # cosine 1 on the diagonal
    assert tuple(pixels[5, 5, :3]) == top and tuple(pixels[5, 6, :3]) != top
    lines = list(root.iter(SVG + "line"))
    assert any(line.get("stroke-dasharray") for line in lines)  # T marked
    assert "T = 16" in texts(root)


def test_a_figure_dict_draws_as_its_figure_does(reverse):
    fig = figures.pattern_figure(reverse).figure
    assert figure_svg(json.loads(fig.to_json())) == figure_svg(fig)


# -- the live curves picture: no text over another, none outside the picture (issue 46) ----

CHAR_EM = 0.6  # a sans-serif character's mean width in ems (a generous estimate: digits 0.56)


def text_boxes(svg: str) -> list[tuple[str, float, float, float, float]]:
    """Each <text> of ``svg`` with the box it takes, estimated from its x, y, font size,
    anchor and length: (text, left, top, right, bottom)."""
    boxes = []
    for node in parse(svg).iter(f"{SVG}text"):
        text, size = node.text or "", float(node.get("font-size"))
        x, y, width = float(node.get("x")), float(node.get("y")), len(node.text or "") * CHAR_EM * size
        left = {"start": x, "middle": x - width / 2, "end": x - width}[node.get("text-anchor", "start")]
        boxes.append((text, left, y - 0.8 * size, left + width, y + 0.25 * size))  # ascent, descent
    return boxes


def text_problems(svg: str) -> list[str]:
    """Texts of ``svg`` that overlap another, or lie outside its viewBox."""
    _, _, view_width, view_height = map(float, parse(svg).get("viewBox").split())
    boxes, found = text_boxes(svg), []
    for text, left, top, right, bottom in boxes:
        if left < 0 or top < 0 or right > view_width or bottom > view_height:
            found.append(f"{text!r} outside the picture ({left:.0f}..{right:.0f} of "
                         f"{view_width:.0f}, {top:.0f}..{bottom:.0f} of {view_height:.0f})")
    for i, (a, a0, a1, a2, a3) in enumerate(boxes):
        for b, b0, b1, b2, b3 in boxes[i + 1:]:
            if min(a2, b2) - max(a0, b0) > 0.5 and min(a3, b3) - max(a1, b1) > 0.5:
                found.append(f"{a!r} overlaps {b!r}")
    return found


def test_the_overlap_check_sees_text_over_text_and_outside():
    svg = ('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 200 100">'
           '<text x="10" y="20" font-size="14" text-anchor="start">training step</text>'
           '<text x="50" y="24" font-size="14" text-anchor="middle">legend</text>'
           '<text x="198" y="90" font-size="14" text-anchor="middle">1000</text></svg>')
    assert text_problems(svg) == ["'1000' outside the picture (181..215 of 200, 79..94 of 100)",
                                  "'training step' overlaps 'legend'"]


@pytest.mark.parametrize("width, font", [(534, 14), (340, 14), (700, 15), (300, 14)],
                         ids=["laptop", "phone", "wide", "narrow"])
@pytest.mark.parametrize("batches", [True, False], ids=["with-batches", "held-out-only"])
def test_the_live_curves_picture_has_no_text_over_text(width, font, batches):
    from stacklab.lab.figures.curves_picture import curves_svg

    history = [{"step": s, "loss": 2.5 / (1 + s / 100), "accuracy": min(1.0, s / 800)}
               for s in range(100, 1001, 100)]
    batch_losses = [(s, 2.6 / (1 + s / 90)) for s in range(10, 1001, 10)] if batches else None
    svg = curves_svg(history, batch_losses, width=width, font=font)
    assert "1000" in [text for text, *_ in text_boxes(svg)]  # the last step's tick is drawn
    assert text_problems(svg) == []
