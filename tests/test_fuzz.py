"""Property tests: whatever text and shapes come in, only a Network or a StackError comes out."""

from __future__ import annotations

import json
import math

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from stacklab import Network, StackError, resolve
from stacklab.core.errors import CODES
from stacklab.core.spec import REFERENCE, catalog

OPS = sorted(catalog())
ARG_NAMES = sorted({a.name for spec in catalog().values() for a in spec.args}) + ["x", "bais"]
VALID = [ex.stack for spec in catalog().values() for ex in spec.examples]
HOSTILE = ["\x00", "(", ")", ",", "=", "#", '"', "'", "\n", "\r", "\\", "-", "_", "9" * 40,
           "1e999", "é", "𝕏", "\u202e", " ", "\t", "true", "None", "((((((((", ",,,,", "\ufeff"]

values = st.one_of(
    st.integers(min_value=-(10**12), max_value=10**12),
    st.sampled_from([0, 1, 2, 3, 4, 8, 16, 32, 2**31 - 1, 2**31, 10**40]),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.booleans(),
    st.text(max_size=5),
).map(lambda v: ("true" if v else "false") if isinstance(v, bool) else
      (json.dumps(v) if isinstance(v, str) else str(v)))


@st.composite
def grammar_lines(draw):
    op = draw(st.sampled_from(OPS + ["lienar", "pos_embd", "x"]))
    args = draw(st.lists(values, max_size=3))
    kwargs = draw(st.lists(st.tuples(st.sampled_from(ARG_NAMES), values), max_size=2))
    parts = args + [f"{k}={v}" for k, v in kwargs]
    name = draw(st.sampled_from(["", "", "", "a = ", "pos = ", "forward = ", "n0 = "]))
    comment = draw(st.sampled_from(["", "  # note"]))
    return f"{name}{op}({', '.join(parts)}){comment}"


@st.composite
def spec_lines(draw):
    """A call that follows its op's spec, with values usually in range."""
    spec = catalog()[draw(st.sampled_from(OPS))]
    good = {int: st.sampled_from(["1", "2", "4", "16", "64"]), float: st.sampled_from(["0.1", "0.5"]),
            bool: st.sampled_from(["true", "false"]), str: st.just('"s"'),
            REFERENCE: st.sampled_from(REFERENCES)}
    parts = []
    for arg in spec.args:
        if arg.required or draw(st.booleans()):
            value = draw(st.one_of(good[arg.type], values) if draw(st.integers(0, 9)) == 0
                         else good[arg.type])
            parts.append(value if arg.positional and arg.required else f"{arg.name}={value}")
    return f"{spec.name}({', '.join(parts)})"


# Names a reference may take: defined ones (a, pos, n0, n1, ...), later and unknown ones.
REFERENCES = ["a", "pos", "n0", "n1", "n2", "n3", "n5", "h", "x"]


@st.composite
def branching_stacks(draw):
    """A residual stack: a trunk, then blocks of an optional norm, a branch and an add that
    joins it back, with now and then a wrong name, a skipped join or another width."""
    width = draw(st.sampled_from([4, 8]))
    lines = [draw(st.sampled_from([f"x0 = linear({width})", f"x0 = embedding(8, {width})"]))]
    trunk = "x0"
    for block in range(1, draw(st.integers(1, 3)) + 1):
        if draw(st.booleans()):
            lines.append("layer_norm()")
        branch = draw(st.sampled_from([f"attention(2, residual=false)", f"linear({width})",
                                       f"attention(2)", "relu()", "linear(3)"]))
        lines.append(f"h{block} = {branch}")
        join = draw(st.sampled_from([f"add({trunk}, h{block})"] * 4 + [
            f"add(h{block}, {trunk})", f"add({trunk}, h{block + 1})", f"add({trunk}, 2)",
            f"add({trunk})", f"add(h{block}, h{block})", "relu()"]))
        lines.append(f"x{block} = {join}")
        trunk = f"x{block}"
    if draw(st.booleans()):
        lines.append(draw(st.sampled_from(["linear(4)", "mean_pool()", "gelu()", "add(x0, x0)"])))
    return "\n".join(lines)


stacks_from_grammar = st.lists(st.one_of(grammar_lines(), spec_lines(), spec_lines()),
                               min_size=0, max_size=6).map("\n".join)


@st.composite
def mutated_stacks(draw):
    text = draw(st.sampled_from(VALID))
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(text)))
        kind = draw(st.sampled_from(["insert", "delete", "replace"]))
        piece = draw(st.one_of(st.sampled_from(HOSTILE), st.text(max_size=3)))
        if kind == "insert":
            text = text[:at] + piece + text[at:]
        elif kind == "delete":
            text = text[:at] + text[at + draw(st.integers(1, 5)):]
        else:
            text = text[:at] + piece + text[at + len(piece):]
    return text


dims = st.one_of(st.integers(min_value=1, max_value=40), st.sampled_from(["B", "T", "D"]))
shapes = st.one_of(st.sampled_from([["B", 12, 16], ["B", 12], ["B", "T", 16], ["B", 6, 4], [2, 8]]),
                   st.lists(dims, min_size=1, max_size=4),
                   st.lists(st.one_of(dims, st.integers(), st.text(max_size=3)), max_size=5))
dtypes = st.sampled_from(["float32", "int64", "float32", "int64", "int32", "float64", "bfloat16",
                          "uint8"])


def check(source, shape, input_dtype):
    try:
        network = resolve(source, shape, input_dtype=input_dtype)
    except StackError as err:
        # every error teaches: a known code, a message and a fix (hint is "" when missing)
        assert err.code in CODES and err.message.strip() and err.hint.strip(), repr(err)
        assert str(err)
        return
    assert isinstance(network, Network)
    json.dumps(network.to_dict())
    assert network.table().startswith("Network: ")
    concrete = [d if isinstance(d, int) else 3 for d in network.input_shape]
    if network.param_count < 50_000 and math.prod(concrete) <= 100_000:
        model = network.build(seed=0)
        if network.input_dtype.startswith("int"):
            x = torch.randint(0, 4, concrete)
        else:
            x = torch.randn(concrete)
        try:
            out = model(x)
        except StackError:
            return
        assert out.ndim == len(network.output_shape)


@given(stacks_from_grammar, shapes, dtypes)
def test_generated_stacks_give_a_network_or_a_stack_error(source, shape, input_dtype):
    check(source, shape, input_dtype)


@given(mutated_stacks(), shapes, dtypes)
def test_mutated_stacks_give_a_network_or_a_stack_error(source, shape, input_dtype):
    check(source, shape, input_dtype)


@given(branching_stacks(), shapes, dtypes)
def test_branching_stacks_give_a_network_or_a_stack_error(source, shape, input_dtype):
    check(source, shape, input_dtype)


@given(branching_stacks(), st.sampled_from([["B", 6, 8], ["B", 6], ["B", "T", 4], [2, 5]]))
def test_branching_networks_build_re_resolve_and_export(source, shape):
    """What resolves builds, runs with the resolved shape, and re-resolves at another length."""
    from stacklab.core.export import to_pytorch

    input_dtype = "int64" if source.startswith("x0 = embedding") else "float32"
    check(source, shape, input_dtype)
    try:
        network = resolve(source, shape, input_dtype=input_dtype)
    except StackError:
        return
    compile(to_pytorch(network), "exported.py", "exec")
    length_axis = len(shape) >= (2 if input_dtype == "int64" else 3)  # [B, T] ids or [B, T, D]
    if length_axis and isinstance(shape[1], int):
        longer = resolve(source, [shape[0], shape[1] + 3, *shape[2:]], input_dtype=input_dtype)
        network.build(seed=0).use_network(longer)


@given(st.text(max_size=300), shapes)
def test_any_text_gives_a_network_or_a_stack_error(source, shape):
    check(source, shape, "float32")


# Big hostile pieces, repeated: deep nesting, huge integers, NUL bytes, non-ASCII, lines
# of megabytes and hundreds of thousands of lines. Each must be refused (or resolved)
# quickly: the input bounds are checked before any scanning.
HUGE = [("(", 100_000), ("9", 100_000), ("relu()\n", 200_000), ("x", 10_000_000),
        ("\x00", 1_000), ("é", 500_000), ("linear(" * 1, 1), ("\n", 200_001),
        ("relu()\n", 20_001), ("# c\n", 60_000), ("𝕏", 100_000), ("((((((((", 5_000)]


@st.composite
def hostile_stacks(draw):
    parts = []
    for _ in range(draw(st.integers(1, 3))):
        piece, count = draw(st.sampled_from(HUGE))
        parts.append(piece * draw(st.sampled_from([1, count // 2 or 1, count])))
        parts.append(draw(st.sampled_from(VALID + ["", "\n"])))
    return "".join(parts)


@settings(max_examples=40)
@given(hostile_stacks(), shapes)
def test_hostile_inputs_give_a_network_or_a_stack_error(source, shape):
    check(source, shape, "float32")


# --- the app's link parsers (issue 11): any query string opens, problems stay short ---------

from stacklab.serve.links.experiment import PARSERS, from_query, to_query  # noqa: E402

link_values = st.one_of(
    st.text(max_size=60),
    st.sampled_from(HOSTILE + ["++12", "+_+12", "1_0", "١٢", "0x10", "-0", "nan", "none", "",
                               "[L](https://e.com)", "x,%0A# H", "reverse,seq_len", "9" * 5000]),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)


@given(st.dictionaries(st.sampled_from(sorted(PARSERS) + ["run", "other"]), link_values,
                       max_size=8))
def test_any_link_opens_and_every_problem_is_short(params):
    experiment, problems = from_query(params)
    assert all(isinstance(p, str) and len(p) < 500 for p in problems)
    again, second = from_query(to_query(experiment))  # what a page writes back reads back
    assert again == experiment and second == []


# --- uploads (issue 28): hostile headers, wide, long and non-finite tables, many names ------

import io  # noqa: E402
import struct  # noqa: E402

import numpy as np  # noqa: E402

from stacklab.lab.reports.table_file import (MAX_LISTED, MAX_ROWS, MAX_TENSORS,  # noqa: E402
                                             MAX_UPLOAD_BYTES, MAX_WIDTH, read_table,
                                             tensor_names)

huge_dims = st.one_of(st.integers(-3, 70), st.sampled_from([0, 1, 2, 1023, 1024, MAX_WIDTH,
                                                            MAX_WIDTH + 1, MAX_ROWS, MAX_ROWS + 1,
                                                            10**6, 2**31, 2**63 - 1, 10**30]))
npy_dtypes = st.sampled_from(["<f4", "<f8", ">f4", "<f2", "|u1", "<i8", "|b1", "|O", "<c8",
                              "V8", "<U4", "<M8[s]", "f4", "nonsense"])


@st.composite
def npy_files(draw) -> bytes:
    """A ``.npy`` file whose header says anything: any shape and dtype, a header that is
    not a dict or is cut short, a version NumPy does not know, data too short or long."""
    shape = tuple(draw(st.lists(huge_dims, max_size=3)))
    header = draw(st.one_of(
        st.builds(lambda d, f, s: repr({"descr": d, "fortran_order": f, "shape": s}),
                  npy_dtypes, st.booleans(), st.just(shape)),
        st.text(max_size=40), st.sampled_from(["{", "{'descr': '<f4'}", "[]", "()" * 200])))
    version = draw(st.sampled_from([b"\x01\x00", b"\x02\x00", b"\x03\x00", b"\x09\x09"]))
    encoded = header.encode("utf-8", "replace") + b"\n"
    size = struct.pack("<H" if version == b"\x01\x00" else "<I", len(encoded) % 65_536)
    data = draw(st.binary(max_size=64)) * draw(st.sampled_from([1, 16, 4096]))
    return b"\x93NUMPY" + version + size + encoded + data


@st.composite
def safetensors_files(draw) -> bytes:
    """A ``.safetensors`` file with a hostile header: a declared length past the file or
    huge, JSON that is not a dict, offsets that overlap or run out, many tensor names."""
    names = draw(st.sampled_from([1, 1, 2, 2, 3, 70, MAX_TENSORS + 1]))
    entries = {}
    for index in range(names):
        shape = [draw(huge_dims) for _ in range(draw(st.integers(0, 3)))] if index < 3 else [2, 2]
        start = draw(st.sampled_from([0, 4, 16, 2**40])) if index < 3 else 0
        entries[f"t{index}" if index else draw(st.sampled_from(["wpe", "../x", "é" * 50]))] = {
            "dtype": draw(st.sampled_from(["F32", "F16", "BF16", "U8", "I64", "F64", "X"])),
            "shape": shape, "data_offsets": [start, start + draw(st.sampled_from([0, 16, 64]))]}
    header = json.dumps(draw(st.one_of(st.just(entries), st.just([1]), st.just("x"),
                                       st.just({"__metadata__": {"a": 1}, **entries}))))
    body = header.encode()
    declared = draw(st.sampled_from([len(body), len(body), 0, 2**40, len(body) + 7, 2**20 + 1]))
    return struct.pack("<Q", declared) + body + draw(st.binary(max_size=64))


def upload_outcome(name: str, data: bytes, key: str | None = None):
    """What the Explore page and its worker do with an upload: the table, or a StackError
    that teaches (code, message, fix). Nothing else may come out: no MemoryError, no
    OverflowError, no parser's own error."""
    try:
        names = tensor_names(data, name)
        assert len(names) <= MAX_LISTED
        table = read_table(name, key or (names[0] if len(names) > 1 else None), data=data,
                           max_bytes=MAX_UPLOAD_BYTES)
    except StackError as err:
        assert err.code in CODES and err.message.strip() and err.hint.strip(), repr(err)
        return err
    assert table.dim() == 2 and 2 <= table.shape[0] <= MAX_ROWS and table.shape[1] <= MAX_WIDTH
    assert bool(torch.isfinite(table).all())
    return table


UPLOAD_EXAMPLES = max(60, settings.default.max_examples // 10)  # 500 in `make fuzz`


@settings(max_examples=UPLOAD_EXAMPLES)
@given(npy_files())
def test_a_hostile_npy_header_gives_a_table_or_a_stack_error(data):
    upload_outcome("table.npy", data)


@settings(max_examples=UPLOAD_EXAMPLES, deadline=None)  # 4,097 names take a while to list
@given(safetensors_files())
def test_a_hostile_safetensors_header_gives_a_table_or_a_stack_error(data):
    upload_outcome("model.safetensors", data)


@settings(max_examples=UPLOAD_EXAMPLES // 2, deadline=None)  # a 16 MB table takes a while
@given(st.sampled_from([1, 2, 3, 1024, 4096, 40_000]), st.sampled_from([1, 7, 768, MAX_WIDTH,
                                                                       MAX_WIDTH + 1, 12_000]),
       st.sampled_from(["finite", "nan", "inf", "huge"]), st.sampled_from(["<f4", "|u1", "<f2"]))
def test_wide_long_and_non_finite_tables_are_bounded(rows, width, values, dtype):
    if rows * width * 4 > 40 << 20:
        return  # past what an upload can hold: the uploader refuses it before the server
    table = np.ones((rows, width), dtype=dtype)
    if values != "finite" and dtype != "|u1":
        table.flat[rows * width // 2] = {"nan": np.nan, "inf": np.inf, "huge": 6e4}[values]
    buffer = io.BytesIO()
    np.save(buffer, table)
    outcome = upload_outcome("table.npy", buffer.getvalue())
    if width > MAX_WIDTH or rows > MAX_ROWS:
        assert isinstance(outcome, StackError) and outcome.code in ("E_BUDGET", "E_VALUE")
    if values in ("nan", "inf") and dtype != "|u1" and rows >= 2 and width <= MAX_WIDTH and \
            len(buffer.getvalue()) <= MAX_UPLOAD_BYTES:
        assert isinstance(outcome, StackError) and "non-finite" in outcome.message


# --- link lengths (issue 28): around a QR code's limit and MAX_LINK_STACK_CHARS --------------

from stacklab.serve.limits import MAX_LINK_STACK_CHARS  # noqa: E402
from stacklab.serve.links.experiment import Experiment  # noqa: E402
from stacklab.serve.links.qr import qr_png  # noqa: E402
from stacklab.serve.links.share import classroom_link, experiment_of_link  # noqa: E402

STEM_STACK = "embedding(16, 32)\npos_embed(16)\nlinear(16)"
around = st.one_of(st.integers(0, 200), st.integers(1_900, 2_600),
                   st.integers(MAX_LINK_STACK_CHARS - 100, MAX_LINK_STACK_CHARS + 100))


@settings(max_examples=UPLOAD_EXAMPLES, deadline=None)  # a QR code of 2 KB: tens of ms
@given(around, st.sampled_from(["#", "# é", "#𝕏", "# <b>", "# 100%", "#\n", "# &x=1"]))
def test_links_around_the_qr_and_stack_limits_give_a_link_or_a_stack_error(length, filler):
    """A stack padded with comments to ``length`` more characters: the classroom link is
    made and read back as the same experiment, or refused with a fix; its QR code is a
    PNG, or refused with E_VALUE (the link is then shared as text), never a crash."""
    comment = (filler * (length // len(filler) + 1))[:length]
    stack = STEM_STACK + ("\n" + comment if comment else "")
    experiment = Experiment(stack=stack, input="B,16", input_dtype="int64")
    try:
        link = classroom_link(experiment, "http://10.0.0.5:8501")
    except StackError as err:
        assert len(stack) > MAX_LINK_STACK_CHARS or err.code == "E_ARG", err
        assert err.hint.strip()
        return
    assert len(stack) <= MAX_LINK_STACK_CHARS
    read, _, problems = experiment_of_link(link)
    assert read.stack == experiment.stack and not problems
    try:
        png = qr_png(link)
    except StackError as err:
        assert err.code == "E_VALUE" and "QR code" in err.message and len(link) > 1_000
        return
    assert png.startswith(b"\x89PNG")
