"""Resolving: shapes, symbols, dtypes, parameter arithmetic, budgets and every error code."""

from __future__ import annotations

import json
import tracemalloc

import pytest

import stacklab
from stacklab import CODES, StackError, get_op, resolve

STEM = "embedding(500, 16)\npos_embed(32)\nlinear(4)"


def error_of(source, shape=("B", 12, 16), **kw) -> StackError:
    with pytest.raises(StackError) as info:
        resolve(source, shape, **kw)
    return info.value


# One user-facing input per code; each must name the place and carry a fix.
EVERY_CODE = {
    "E_PARSE": ("linear(4,,)", ("B", 16), {}),
    "E_UNKNOWN_OP": ("relu()\npos_embd(32)", ("B", 12, 16), {}),
    "E_ARG": ("linear(out=4, out=5)", ("B", 16), {}),
    "E_SHAPE": ("embedding(10, 8)\nmean_pool()\npos_embed(4)", ("B", 12), {"input_dtype": "int64"}),
    "E_DTYPE": ("linear(4)", ("B", 12), {"input_dtype": "int32"}),
    "E_CONSTRAINT": ("embedding(500, 16)\npos_embed(8)", ("B", 12), {"input_dtype": "int64"}),
    "E_BUDGET": ("pos_embed(2147483647)", ("B", 12, 64), {}),
}


@pytest.mark.parametrize("code", sorted(EVERY_CODE))
def test_every_static_code_is_reachable_with_place_and_fix(code):
    source, shape, kw = EVERY_CODE[code]
    err = error_of(source, shape, **kw)
    assert err.code == code
    assert isinstance(err, ValueError)
    assert err.line is not None and err.col is not None
    text = str(err)
    assert text.startswith(f"{code} at line {err.line}, col {err.col}")
    assert "\nfix: " in text and "^" in text
    assert source.split("\n")[err.line - 1] in text


def test_codes_table_is_complete():
    assert set(CODES) == set(EVERY_CODE) | {"E_VALUE", "E_DAMAGED"}  # the run-time codes


def test_unknown_op_suggests_the_closest():
    err = error_of("relu()\npos_embd(32)")
    assert (err.line, err.col) == (2, 1) and "did you mean pos_embed?" in err.hint


def test_shape_error_explains_the_pattern():
    err = EVERY_CODE["E_SHAPE"]
    e = error_of(err[0], err[1], **err[2])
    assert "pos_embed expects x[B, T, D] (3 dims), but its input is [B, 8] (2 dims)" in e.message
    assert e.node == "n2" and e.op == "pos_embed"


def test_argument_errors():
    assert "given twice" in error_of("linear(4, out=5)", ("B", 16)).message
    assert "no argument 'bais'" in error_of("linear(4, bais=true)", ("B", 16)).message
    assert "did you mean bias" in error_of("linear(4, bais=true)", ("B", 16)).hint
    assert "at most 1 positional" in error_of("linear(4, true)", ("B", 16)).message
    assert "takes no arguments" in error_of("relu(1)", ("B", 16)).message
    assert "must be an int, not 4.0" in error_of("linear(4.0)", ("B", 16)).message
    assert error_of("linear(4.0)", ("B", 16)).hint == "write 4"
    assert "finite" in error_of("dropout(1e999)", ("B", 16)).message
    assert "<= 2147483647" in error_of(f"linear({2**40})", ("B", 16)).message
    assert "quoted string" not in error_of('linear("4")', ("B", 16)).message


def test_attention_heads_must_divide_d():
    err = error_of("attention(3)")
    assert err.code == "E_CONSTRAINT" and "D=16" in err.message and "3 heads" in err.message


def test_symbolic_dims_stay_symbolic_and_constraints_are_kept():
    net = resolve("pos_embed(32)\nlinear(4)", ["B", "T", 16])
    assert net.output_shape == ("B", "T", 4)
    assert [r.text for r in net.requires] == ["T <= 32"]
    assert net.table().endswith("Parameters: 580\nRequires: T <= 32")
    # the tighter of two requirements on one symbol is kept, with the user's symbol name
    net = resolve("pos_embed(64)\nsin_pos(16)", ["N", "L", 8])
    assert [(r.text, r.node) for r in net.requires] == [("L <= 16", "n1")]


def test_parameter_sizes_must_be_known():
    err = error_of("linear(4)", ["B", "T", "D"])
    assert err.code == "E_SHAPE" and "symbol 'D'" in err.message


def test_ellipsis_patterns_take_any_leading_dims():
    assert resolve("linear(3)", [5]).output_shape == (3,)
    assert resolve("linear(3)", ["A", "B", "C", 7]).output_shape == ("A", "B", "C", 3)
    assert resolve("embedding(9, 2)", ["B"], input_dtype="int64").output_shape == ("B", 2)


def test_mean_pool_then_linear():
    net = resolve("mean_pool()\nlinear(2)", ["B", 12, 16])
    assert net.output_shape == ("B", 2) and net.param_count == 34


@pytest.mark.parametrize("shape", ["B,12", ("B", 12), ["B", 12]])
def test_input_shape_forms(shape):
    assert resolve(STEM, shape, input_dtype="int64").param_count == 8_580


@pytest.mark.parametrize("shape, words", [
    ("", "empty"), ("B,0", "sizes run from 1"), ("B,-3", "sizes run from 1"),
    ("B,1x", "not a size or a symbol"), ([True, 3], "not a size or symbol"),
    ([1.5], "not a size or symbol"), (42, "list of dims"), ("1," * 20, "dims"),
])
def test_bad_input_shapes(shape, words):
    err = error_of("relu()", shape)
    assert err.code == "E_SHAPE" and words in err.message and err.line is None


def test_dtypes():
    net = resolve(STEM, ["B", 12], input_dtype="int32", dtype="bfloat16")
    assert net.table().splitlines()[0].endswith("dtype=bfloat16  input_dtype=int32")
    assert net.param_bytes == 8_580 * 2
    assert error_of("relu()", dtype="int64").code == "E_DTYPE"
    assert error_of("relu()", input_dtype="complex64").code == "E_DTYPE"
    e = error_of("embedding(5, 2)", ("B", 3))
    assert e.code == "E_DTYPE" and "input_dtype" in e.hint


def test_reserved_names_are_refused():
    for name in ("forward", "training", "network", "_x"):
        err = error_of(f"{name} = relu()")
        assert err.code == "E_PARSE" and "reserved" in err.message


@pytest.mark.parametrize("name", ["class", "def", "None", "lambda", "import"])
def test_python_keywords_are_refused_as_node_names(name):
    err = error_of(f"{name} = linear(4)")
    assert err.code == "E_ARG" and "keyword" in err.message
    assert (err.line, err.col, err.span) == (1, 1, len(name))  # the caret is under the name
    assert f"{name}_" in err.hint
    assert resolve(f"{name}_ = linear(4)", ["B", 16]).nodes[0].name == f"{name}_"


def test_a_symbolic_constraint_keeps_its_operator():
    """A constraint other than ``<=`` on a symbolic dim is kept as what it says, checked at
    run time, and never printed as ``T <= ...``."""
    from types import MappingProxyType

    from stacklab.core.language import parse
    from stacklab.core.propagate import propagate
    from stacklab.core.spec import Constraint, OpSpec, input_port, output_port

    chunked = OpSpec(
        name="chunked", version=1, category="test", summary="", description="",
        inputs=(input_port("x[B, T, D]"),), outputs=(output_port("out[B, T, D]"),),
        relation="T % 4 == 0", args=(), module=lambda env, dtype: None,
        constraints=(Constraint("T", "divides", "size", message="T={T} is not a multiple of "
                                "{size}", hint="use a multiple of {size}"),))
    call = parse("chunked()").calls[0]
    bound = [(0, "n0", chunked, MappingProxyType({"size": 4}), call),
             (1, "n1", get_op("pos_embed"), MappingProxyType({"max_len": 32}),
              parse("pos_embed(32)").calls[0])]
    _, _, requires = propagate(bound, ("B", "T", 8), "float32", "float32")
    assert [(r.text, r.node) for r in requires] == [("T <= 32", "n1"), ("T % 4 == 0", "n0")]
    with pytest.raises(StackError, match="T=6 is not a multiple of 4") as caught:
        propagate(bound, ("B", 6, 8), "float32", "float32")
    assert caught.value.code == "E_CONSTRAINT"
    propagate(bound, ("B", 8, 8), "float32", "float32")


def test_budget_is_checked_before_anything_is_allocated():
    tracemalloc.start()
    err = error_of("pos_embed(2147483647)", ("B", 12, 64))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert err.code == "E_BUDGET" and "137,438,953,408" in err.message
    assert peak < 10 * 2**20
    assert resolve("linear(1000)", ["B", 1000]).param_count == 1_001_000
    with pytest.raises(StackError) as info:
        resolve("linear(1000)", ["B", 1000], budget_bytes=1_000_000)
    assert info.value.code == "E_BUDGET" and "linear(1000, bias=true)" in info.value.message


def test_network_is_frozen_and_json_able():
    net = resolve(STEM, ["B", 12], input_dtype="int64")
    with pytest.raises(AttributeError):
        net.param_count = 1  # type: ignore[misc]
    data = json.loads(json.dumps(net.to_dict()))
    assert data["param_count"] == 8_580
    assert data["nodes"][1]["identity"] == "pos_embed@1"
    assert data["nodes"][1]["params"] == {"weight": [32, 16]}
    assert data["output_shape"] == ["B", 12, 4]


def test_unnamed_nodes_take_their_index():
    net = resolve("tok = embedding(500, 16)\npos_embed(32)\nhead = linear(4)", ["B", 12],
                  input_dtype="int64")
    assert [n.name for n in net.nodes] == ["tok", "n1", "head"]


def test_ten_thousand_ops_resolve():
    net = resolve("relu()\n" * 10_000, ["B", 4])
    assert len(net.nodes) == 10_000 and net.param_count == 0


def test_hints_can_be_followed():
    e = error_of("mean_pool()\nmean_pool()")
    assert "the op before it, mean_pool(), outputs [B, 16]" in e.hint
    e = error_of("pos_embed(-32)")
    assert "use a value >= 1; <= 2147483647, e.g. pos_embed(64)" in e.hint
    e = error_of("linear(4)", ["B", "T"])
    assert "[B, 16]" in e.hint
    e = error_of("linear(4, bias=flase)", ["B", 3])
    assert e.hint == "did you mean false?"


def test_numpy_and_torch_integers_in_shapes():
    import numpy as np
    import torch

    assert resolve("relu()", ["B", np.int64(12), torch.tensor(3)]).input_shape == ("B", 12, 3)
    assert "sizes run from 1" in error_of("relu()", "B,99999999999999").message


def test_non_ascii_digits_and_a_bad_budget():
    assert error_of("pos_embed(\uff13\uff12)").code == "E_PARSE"
    assert error_of("relu()", "B,\uff11\uff12").code == "E_SHAPE"
    assert error_of("relu()", budget_bytes="x").code == "E_BUDGET"


def test_a_byte_order_mark_is_ignored():
    assert resolve("\ufeffpos_embed(32)", ["B", 12, 16]).param_count == 512


def test_catalog_is_importable_from_the_package():
    assert stacklab.get_op("pos_embed").identity == "pos_embed@1"


# --- branching stacks (SPEC §18): references, add, residual=false --------------------------

from stacklab.ops.add import PRE_LN_BLOCK  # noqa: E402


def test_pre_ln_block_report_gains_an_inputs_column(golden):
    net = resolve(PRE_LN_BLOCK, ["B", 64], input_dtype="int64")
    text = net.table()
    assert all(line == line.rstrip() for line in text.splitlines())
    golden("pre_ln_block.out", text + "\n")
    assert net.node("x1").reads == ("x0", "h1") and net.node("n2").reads == ("x0",)
    assert net.node("tok").reads == (None,)
    assert net.param_count == sum(node.param_count for node in net.nodes) == 16_832


def test_a_chain_report_has_no_inputs_column():
    net = resolve(STEM, ["B", 12], input_dtype="int64")
    assert "inputs" not in net.table().splitlines()[1]
    # a node that reads anything but the line above (here: x twice) makes it branch
    net = resolve("x = linear(8)\nadd(x, x)", ["B", 4])
    assert net.table().splitlines()[1].endswith("inputs")


BRANCH_ERRORS = [
    # a name nowhere defined, and one defined later (with the names above it)
    ("x0 = linear(16)\nh1 = relu()\nadd(x0, h2)", ["B", 8], "E_ARG", "h2"),
    ("x0 = linear(16)\nadd(x0, h1)\nh1 = relu()", ["B", 8], "E_ARG", "h1"),
    ("add(x0, h1)", ["B", 8], "E_ARG", "x0"),
    # a number where a reference belongs, and a reference where a number belongs
    ("x0 = linear(16)\nh1 = relu()\nadd(x0, 3)", ["B", 8], "E_ARG", "3"),
    ("x0 = linear(16)\nlinear(x0)", ["B", 8], "E_ARG", "x0"),
    ("x0 = linear(16)\nlinear(4, bias=x0)", ["B", 8], "E_ARG", "x0"),
    # unequal shapes, and an output nobody reads
    ("x0 = linear(16)\nh1 = linear(8)\nadd(x0, h1)", ["B", 8], "E_SHAPE", "add(x0, h1)"),
    ("tok = embedding(32, 32)\nx0 = pos_embed(64)\nlayer_norm()\n"
     "h1 = attention(2, causal=true, residual=false)\nx1 = add(x0, x0)\nlinear(32)",
     ["B", 64], "E_ARG", "h1 ="),
]


def test_branch_errors_render_with_a_caret_and_a_fix(golden):
    rendered = []
    for source, shape, code, marked in BRANCH_ERRORS:
        dtype = "int64" if source.startswith("tok") else "float32"
        err = error_of(source, shape, input_dtype=dtype)
        assert err.code == code and err.hint and err.line is not None, str(err)
        line = source.split("\n")[err.line - 1]
        assert line[err.col - 1:].startswith(marked), str(err)  # the caret is at the name
        rendered.append(str(err))
    golden("branch_errors.out", "\n\n".join(rendered) + "\n")


def test_unknown_reference_lists_the_names_above_and_suggests_the_closest():
    err = error_of("x0 = linear(16)\nh1 = relu()\nadd(x0, h2)", ["B", 8])
    assert "no node is called h2" in err.message
    assert "did you mean h1?" in err.hint and "x0, h1" in err.hint
    err = error_of("x0 = linear(16)\nadd(x0, h1)\nh1 = relu()", ["B", 8])
    assert "later line" in err.message and "defined above: x0" in err.hint


def test_unequal_shapes_name_both_nodes_and_shapes():
    err = error_of("x0 = linear(16)\nh1 = linear(8)\nadd(x0, h1)", ["B", 8])
    assert "x0 is [B, 16]" in err.message and "h1 is [B, 8]" in err.message
    assert "linear(16)" in err.hint


def test_an_unread_output_is_an_error_not_dropped():
    err = error_of("x = linear(8)\nh = relu()\ng = gelu()\nadd(x, h)", ["B", 4])
    assert err.code == "E_ARG" and err.message == "the output of g is never used"
    assert err.node == "g" and err.line == 3
    # the last line is the network's output, and a line read by the one below is used
    assert resolve("x = linear(8)\nh = relu()\nadd(x, h)\nrelu()", ["B", 4]).output_shape == ("B", 8)


def test_a_bare_name_that_names_no_node_is_still_not_a_value():
    err = error_of("linear(4, bias=yes)", ["B", 16])
    assert err.code == "E_PARSE" and "expected a value, found 'yes'" in err.message


def test_references_by_default_name():
    net = resolve("linear(8)\nrelu()\nadd(n0, n1)", ["B", 4])
    assert net.node("n2").reads == ("n0", "n1")
    assert net.node("n2").call_text == "add(n0, n1)"
    assert net.output_shape == ("B", 8) and net.param_count == 40


def test_residual_argument_keeps_old_stacks_call_text_and_run_keys():
    """`residual` is quiet: the canonical text (what run keys hash) of a stack written
    before it is unchanged, and only residual=false shows."""
    from stacklab.lab.keys import canonical_stack

    net = resolve("attention(2)\nattention(2, residual=true)\nattention(2, residual=false)",
                  ["B", 4, 8])
    old = 'attention(2, causal=false, position="none", buckets=32)'
    assert [n.call_text for n in net.nodes[:2]] == [old, old]
    assert net.nodes[2].call_text == old[:-1] + ", residual=false)"
    assert canonical_stack(net).splitlines()[0] == f"n0 = {old}"
    assert net.param_count == 3 * (4 * 8 * 8 + 4 * 8)


def test_branching_network_to_dict_names_what_each_node_reads():
    data = json.loads(json.dumps(resolve(PRE_LN_BLOCK, ["B", 64], input_dtype="int64").to_dict()))
    x1 = data["nodes"][4]
    assert x1["args"] == {"a": "x0", "b": "h1"} and x1["reads"] == {"a": "x0", "b": "h1"}
    assert x1["inputs"] == {"a": ["B", 64, 32], "b": ["B", 64, 32]}
    assert data["nodes"][0]["reads"] == {"ids": None}
