"""The stack language: values, names, comments, spans, and bounded input."""

from __future__ import annotations

import dataclasses
import pytest

from stacklab import StackError, parse
from stacklab.core.language import MAX_INT_DIGITS, MAX_LINE_CHARS, MAX_LINES, MAX_OPS, MAX_SOURCE_CHARS


def values(source: str):
    return [[(a.key, a.value.value) for a in call.args] for call in parse(source).calls]


def parse_error(source: str) -> StackError:
    with pytest.raises(StackError) as info:
        parse(source)
    assert info.value.code == "E_PARSE"
    return info.value


def test_reference_stem_with_comments_names_and_blank_lines():
    stack = parse("# the usual transformer input stem\n"
                  "tok = embedding(500, 16)\n"
                  "\n"
                  "pos_embed(32)          # unnamed nodes are called n0, n1, ... by index\n"
                  "linear(4, bias=false)\n")
    assert [(c.name, c.op) for c in stack.calls] == [("tok", "embedding"), (None, "pos_embed"),
                                                     (None, "linear")]
    assert [c.span.line for c in stack.calls] == [2, 4, 5]
    assert values(stack.source)[2] == [(None, 4), ("bias", False)]


@pytest.mark.parametrize("text, value", [
    ("1_000", 1000), ("0", 0), ("-3", -3), ("+7", 7), ("2.5", 2.5), ("1e-5", 1e-5),
    ("1E3", 1000.0), (".5", 0.5), ("3.", 3.0), ("1_0.2_5", 10.25), ("true", True),
    ("false", False), ('"a b"', "a b"), ("'q\\'s'", "q's"), ('"tab\\there"', "tab\there"),
    ('"# not a comment"', "# not a comment"), ('"ünï"', "ünï"),
])
def test_values(text, value):
    [[(key, got)]] = values(f"op({text})")
    assert key is None and got == value and type(got) is type(value)


def test_keywords_trailing_comma_and_crlf():
    assert values("op(1, a=2, b=true,)\r\nop2()\r\n") == [[(None, 1), ("a", 2), ("b", True)], []]


def test_results_are_frozen_and_carry_spans():
    call = parse("x = linear(4, bias=false)").calls[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        call.op = "relu"  # type: ignore[misc]
    assert (call.name_span.col, call.op_span.col, call.span.end_col) == (1, 5, 26)
    bias = call.args[1]
    assert (bias.span.col, bias.value.span.col, bias.value.text) == (15, 20, "false")


@pytest.mark.parametrize("source, message, col", [
    ("linear(4", "expected ',' or ')'", 9),
    ("linear 4)", "expected '(' after 'linear'", 8),
    ("linear(4))", "unexpected ')' after the call", 10),
    ("linear(4) relu()", "unexpected 'relu'", 11),
    ("linear(bias=true, 4)", "positional argument follows a keyword", 19),
    ("linear(4, bias=True)", "True is written in lowercase", 16),
    ("linear(4, bias=yes)", "expected a value, found 'yes'", 16),
    ('op("open)', "unterminated string", 4),
    ('op("\\q")', "unknown escape", 5),
    ("op(-x)", "expected a number after '-'", 5),
    ("op(1 $ 2)", "unexpected character '$'", 6),
    ("= op()", "expected an op name", 1),
    ("true()", "is a value, not an op", 1),
    ("op(((((((1)))))))", "expected a value, found '('", 4),
])
def test_syntax_errors_name_the_token_and_the_place(source, message, col):
    err = parse_error(source)
    assert message in err.message
    assert (err.line, err.col) == (1, col)
    assert err.hint
    assert source[:40] in str(err) and "^" in str(err)


def test_empty_and_comment_only_stacks_are_refused():
    for source in ("", "\n\n", "# nothing here\n   \n"):
        assert "empty" in parse_error(source).message


def test_duplicate_and_clashing_names():
    err = parse_error("a = relu()\na = gelu()")
    assert "'a' is already used" in err.message and err.line == 2
    err = parse_error("n1 = relu()\ngelu()")  # the second node is n1 by default
    assert "'n1' is already used" in err.message


def test_text_that_is_not_a_str():
    assert "text" in parse_error(b"relu()").message  # type: ignore[arg-type]


@pytest.mark.parametrize("source, words", [
    ("x" * (MAX_SOURCE_CHARS + 1), "characters long"),
    ("\n" * MAX_LINES, "lines"),
    ("relu(" + "1," * MAX_LINE_CHARS + ")", "characters long"),
    (f"op({'9' * (MAX_INT_DIGITS + 1)})", "digits"),
    ("relu()\n" * (MAX_OPS + 1), "ops"),
    ("relu()\nlinear(4)\x00", "NUL"),
])
def test_bounds_are_refused_with_e_parse(source, words):
    assert words in parse_error(source).message


def test_ten_thousand_ops_parse():
    assert len(parse("relu()\n" * 10_000).calls) == 10_000


def test_a_bare_name_of_a_node_above_is_a_reference():
    from stacklab.core.language import Reference

    stack = parse("x0 = relu()\ngelu()\nadd(x0, n1)  # by name and by default name")
    [a, b] = stack.calls[2].args
    assert (a.value.value, b.value.value) == (Reference("x0"), Reference("n1"))
    assert (a.value.text, a.value.span.col, b.value.span.col) == ("x0", 5, 9)
    # a name above is a reference in any argument (the resolver says where it does not fit)
    assert values("x = relu()\nlinear(4, bias=x)")[1] == [(None, 4), ("bias", Reference("x"))]


def test_a_bare_name_of_no_node_above_is_not_a_value_unless_the_op_reads_nodes():
    from stacklab.core.language import Reference

    for source in ("add(x0, h1)", "h1 = relu()\nadd(x0, h1)", "add(x0, x0)\nx0 = relu()"):
        assert "expected a value" in parse_error(source).message
    # the resolver tells the parser which arguments read nodes: then any name is a reference
    stack = parse("add(x0, h1)", takes_reference=lambda op, key, position: op == "add")
    assert [a.value.value for a in stack.calls[0].args] == [Reference("x0"), Reference("h1")]
    stack = parse("add(b=x0, a=h)", takes_reference=lambda op, key, position: key in ("a", "b"))
    assert [a.value.value.name for a in stack.calls[0].args] == ["x0", "h"]
    # true, false and the Python spellings keep their meaning and their errors
    assert values("x = relu()\nop(true)") == [[], [(None, True)]]
    assert "lowercase" in parse_error("True = relu()\nop(True)").message


def test_a_stack_error_pickles_with_every_field():
    """A worker process or a Ray actor raises it to the app server as it is."""
    import pickle

    err = StackError("E_SHAPE", "wrong width", line=2, col=1, node="n1", op="linear",
                     hint="use linear(16)", source_line="linear(4)", span=9)
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is StackError and str(back) == str(err)
    assert [getattr(back, name) for name in ("code", "message", "line", "col", "node", "op",
                                              "hint", "source_line", "span")] == [
        "E_SHAPE", "wrong width", 2, 1, "n1", "linear", "use linear(16)", "linear(4)", 9]
