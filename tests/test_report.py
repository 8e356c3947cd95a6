"""The network report, byte for byte, and its other forms."""

from __future__ import annotations

import pytest

from stacklab import StackError, resolve

REFERENCE_STEM = """\
Network: [B, 12] -> [B, 12, 4]  dtype=float32  input_dtype=int64
index  name  operation  input shapes   output shapes
0      n0    embedding  ids=[B, 12]    out=[B, 12, 16]
1      n1    pos_embed  x=[B, 12, 16]  out=[B, 12, 16]
2      n2    linear     x=[B, 12, 16]  out=[B, 12, 4]

Parameters: 8,580"""

REFERENCE_296 = """\
Network: [B, 6, 4] -> [B, 6, 8]  dtype=float32
index  name  operation  input shapes  output shapes
0      n0    pos_embed  x=[B, 6, 4]   out=[B, 6, 4]
1      n1    linear     x=[B, 6, 4]   out=[B, 6, 8]

Parameters: 296"""


def test_reference_stem_prints_byte_for_byte(golden):
    net = resolve("embedding(500, 16)\npos_embed(32)\nlinear(4)", ["B", 12], input_dtype="int64")
    assert net.table() == REFERENCE_STEM
    assert str(net) == REFERENCE_STEM
    golden("reference_stem.out", net.table() + "\n")


def test_reference_296_prints_byte_for_byte(golden):
    net = resolve("pos_embed(64)\nlinear(8)", ["B", 6, 4])
    assert net.table() == REFERENCE_296
    golden("reference_296.out", net.table() + "\n")


def test_wide_cells_symbols_and_requirements(golden):
    net = resolve("tokens = embedding(16, 32)\npos_embed(64)\nmixer = attention(4, causal=true)\n"
                  "layer_norm()\nmean_pool()\nlinear(16)", ["batch", "T"], input_dtype="int32",
                  dtype="float64")
    text = net.table()
    assert all(line == line.rstrip() for line in text.splitlines())
    golden("encoder_symbolic.out", text + "\n")


def test_errors_render_with_a_caret(golden):
    cases = [
        ("embedding(500, 16)\npos_embed(8)\nlinear(4)", ["B", 12], "int64"),
        ("linear(4, bias=yes)", ["B", 16], "float32"),
        ("x = relu()\nx = gelu()", ["B", 16], "float32"),
    ]
    rendered = []
    for source, shape, input_dtype in cases:
        with pytest.raises(StackError) as info:
            resolve(source, shape, input_dtype=input_dtype)
        rendered.append(str(info.value))
    golden("errors.out", "\n\n".join(rendered) + "\n")


def test_columns_are_as_wide_as_their_widest_cell_plus_two():
    net = resolve("a_very_long_node_name = linear(123456)", ["B", 7])
    header, row = net.table().splitlines()[1:3]
    assert header.index("operation") == row.index("linear") == len("a_very_long_node_name") + 2 + 7


def test_dataframe_and_html_match_the_rows():
    net = resolve("embedding(500, 16)\npos_embed(32)\nlinear(4)", ["B", 12], input_dtype="int64")
    frame = net.dataframe()
    assert list(frame.columns) == ["index", "name", "operation", "input shapes", "output shapes",
                                   "parameters"]
    assert frame["parameters"].sum() == net.param_count == 8_580
    assert frame.loc[1, "input shapes"] == "x=[B, 12, 16]"
    html = net._repr_html_()
    assert "Parameters: 8,580" in html and "x=[B, 12, 16]" in html and "<table>" in html
