"""Tables from elsewhere (issue 13, SPEC §16): `stacklab explore FILE` and the upload on
Explore, on a synthetic GPT-2-style table (nothing is downloaded)."""

from __future__ import annotations

import time

import json
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file
from streamlit.testing.v1 import AppTest

from stacklab import StackError
from stacklab.lab.reports.table_file import gpt2_like_table, read_table, table_scores

APP = str(Path(__file__).parent.parent / "app.py")


@pytest.fixture(scope="module")
def gpt2_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("tables") / "gpt2-like.safetensors"
    save_file({"wpe": gpt2_like_table(1024, 768).contiguous(), "wte": torch.zeros(50, 768),
               "bias": torch.zeros(768)}, str(path))
    return path


def test_the_synthetic_table_has_gpt2s_character():
    table = gpt2_like_table()
    scores = table_scores(table)
    cosine = scores["cosine_by_distance"]
    assert cosine[0] > 0.9 and cosine[0] > cosine[100] > cosine[400]  # neighbours alike, far less
    assert scores["monotonicity"] > 0.3 and scores["translation_invariance"] > 0.5
    first = torch.nn.functional.cosine_similarity(table[0], table[1], dim=0)
    assert first < torch.nn.functional.cosine_similarity(table[100], table[101], dim=0)


def test_explore_a_file_writes_the_scores_and_a_report(gpt2_file, tmp_path, cli):
    code, _, err = cli("explore", str(gpt2_file), "--key", "wpe", "--out", str(tmp_path / "x"))
    assert code == 0, err
    scores = json.loads((tmp_path / "x" / "scores.json").read_text())
    assert scores["table"] == "wpe" and scores["shape"] == [1024, 768]
    assert scores == {"table": "wpe", **table_scores(read_table(gpt2_file, "wpe"))}
    page = (tmp_path / "x" / "report.html").read_text()
    assert "Cosine by distance" in page and "Learned vs sinusoidal" in page
    assert page.count("* plotly.js v") == 1 and "zoomed on rows 0-383 of 1,024" in page


@pytest.mark.parametrize("case, words", [
    ("no key", "holds 3 tensors"), ("missing key", "has no tensor 'wpe2'"),
    ("rank", r"not \[rows, D\]"), ("nan", "non-finite"), ("pickle", "pickled objects are refused"),
    ("suffix", "neither .safetensors nor .npy"), ("too large", "over the limit"),
    ("corrupt", "header is corrupt")])
def test_a_bad_table_file_is_a_clear_error(gpt2_file, tmp_path, case, words):
    path, key = gpt2_file, None
    if case == "missing key":
        key = "wpe2"
    elif case == "rank":
        key = "bias"
    elif case == "nan":
        path = tmp_path / "nan.npy"
        np.save(path, np.full((8, 4), np.nan, dtype=np.float32))
    elif case == "pickle":
        path = tmp_path / "objects.npy"
        np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    elif case == "suffix":
        path = tmp_path / "table.pt"
        path.write_bytes(pickle.dumps([1, 2]))
    elif case == "too large":
        with pytest.raises(StackError, match=words):
            read_table(gpt2_file, "wpe", max_bytes=1000)
        return
    elif case == "corrupt":
        path = tmp_path / "bad.safetensors"
        path.write_bytes((2 ** 40).to_bytes(8, "little") + b"{}")
    with pytest.raises(StackError, match=words) as caught:
        read_table(path, key)
    assert caught.value.code == "E_VALUE" and caught.value.hint


def test_the_same_file_uploaded_on_explore_shows_the_same_numbers(gpt2_file):
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.switch_page("views/explore.py").run()
    at.file_uploader(key="explore_upload").set_value(
        (gpt2_file.name, gpt2_file.read_bytes(), "application/octet-stream")).run()
    box = at.selectbox(key="explore_upload_key")
    assert sorted(box.options) == ["wpe", "wte"]  # the 2-D tensors only
    box.select("wpe").run()
    deadline = time.monotonic() + 120
    while at.get("progress") and time.monotonic() < deadline:  # a worker analyses it
        time.sleep(0.3)
        at.run()
    assert not at.exception
    scores = table_scores(read_table(gpt2_file, "wpe"))
    summary = " ".join(m.value for m in at.markdown)
    for name in ("translation_invariance", "monotonicity", "position_probe_error"):
        assert f"{name.replace('_', ' ')} **{scores[name]:.2f}**" in summary
    titles = [h.value for h in at.subheader]
    assert titles[:3] == ["Cosine similarity of the rows", "Cosine by distance",
                          "Dot-product similarity of the rows"]
    at.file_uploader(key="explore_upload").set_value(
        ("objects.npy", b"\x93NUMPY garbage", "application/octet-stream")).run()
    deadline = time.monotonic() + 60
    while not at.error and time.monotonic() < deadline:  # read in a worker, as every upload
        time.sleep(0.3)
        at.run()
    assert not at.exception and "E_VALUE" in at.error[0].value


def test_odd_files_get_errors_that_fit(tmp_path):
    big = tmp_path / "big.npy"
    np.save(big, (np.ones((16, 4)) * 1e38).astype(np.float32))
    with pytest.raises(StackError, match="as large as 1e\\+38"):
        read_table(big)
    text = tmp_path / "text.npy"
    text.write_text("not numpy at all")
    with pytest.raises(StackError, match="does not start with NumPy's header"):
        read_table(text)
    fine = tmp_path / "fine.npy"
    np.save(fine, np.eye(4, dtype=np.float32))
    with pytest.raises(StackError, match="leave out --key"):
        read_table(fine, "wpe")
    corrupt = tmp_path / "bad.safetensors"
    corrupt.write_bytes((2 ** 40).to_bytes(8, "little") + b"{}")
    with pytest.raises(StackError) as caught:
        read_table(corrupt, "wpe")
    assert "written by stacklab" not in caught.value.hint


def test_a_two_row_table_says_no_score_applies(tmp_path, cli):
    two = tmp_path / "two.npy"
    np.save(two, np.random.default_rng(0).normal(size=(2, 16)).astype(np.float32))
    code, _, err = cli("explore", str(two), "--out", str(tmp_path / "x"))
    assert code == 0 and "no score applies to a table this short" in err
    assert "None" not in (tmp_path / "x" / "report.html").read_text().split("<section")[0]


def test_rows_that_are_all_alike_have_no_scores_and_scale_does_not_matter():
    from stacklab.lab.measure import score_maths as S
    from stacklab.lab.reports.table_file import table_figures

    for table in (torch.zeros(16, 8), torch.ones(16, 8)):
        found = table_scores(table)
        assert found["translation_invariance"] is None and found["distance_rank"] is None
        assert len(table_figures(table, "flat")) == 6  # drawn, without numbers
    rows = torch.randn(32, 16, generator=torch.Generator().manual_seed(0))
    assert S.position_probe_error(rows * 1e-30) == pytest.approx(S.position_probe_error(rows * 1e15))


def test_a_table_from_a_file_shows_the_catalogs_figures_that_need_only_the_table():
    from stacklab.lab.figures import FIGURES
    from stacklab.lab.reports.table_file import table_figures

    drawn = table_figures(gpt2_like_table(64, 16), "wpe")
    shown = [spec for spec in FIGURES if spec.on_table is not None]
    assert [(f.key, f.title) for f in drawn] == [(spec.key, spec.title) for spec in shown]
    assert [f.key for f in drawn] == ["cosine", "cosine_by_distance", "dot", "pca_2d", "pca_3d",
                                      "learned_vs_sinusoidal"]
    assert not any(f.skipped for f in drawn) and drawn[0].score.startswith("distance rank ")


# -- sizes bounded up front (issue 28 items 1, 6, 7, 9) ------------------------------------

# The peak is the child's own VmHWM: getrusage's ru_maxrss keeps the parent's peak across
# fork and exec (Linux folds the old address space's high-water mark into it), so in the full
# suite it reported pytest's gigabyte rather than the table's cost.
_PEAK_RSS = """
import torch
from stacklab.lab.reports.table_file import explore_table
def status(field):  # KiB
    return int(next(l for l in open("/proc/self/status") if l.startswith(field)).split()[1])
explore_table(torch.randn(64, 16), "warm")  # what plotly loads on first use is not the table's
table = torch.randn(1024, 3880, generator=torch.Generator().manual_seed(0))  # 15.9 MB
before = status("VmRSS:")
scores, _ = explore_table(table, "wide")
print(status("VmHWM:") - before, scores["position_probe_error"])
"""


def test_a_wide_tables_scores_take_bounded_memory_and_a_wider_one_is_refused(tmp_path):
    """A 1024 x 3880 float32 upload grew the server by about 760 MB (a (D+1)² float64 Gram
    matrix, solved twice); its scores and figures, measured once, now take a bounded part of
    that. The peak is measured in a fresh process, whose peak is not an earlier test's."""
    import os
    import subprocess
    import sys

    from stacklab.lab.reports.table_file import MAX_UPLOAD_BYTES, MAX_WIDTH

    # a clean environment: what earlier tests left in os.environ is not the table's cost
    clean = {name: os.environ[name] for name in ("PATH", "HOME", "PYTHONPATH", "TMPDIR")
             if name in os.environ}
    done = subprocess.run([sys.executable, "-c", _PEAK_RSS], capture_output=True, text=True,
                          env={**clean, "OMP_NUM_THREADS": "1"}, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    grown_kib, probe = done.stdout.split()
    assert int(grown_kib) < 400 * 1024 and float(probe) >= 0  # about 200 MiB; it was 760 MB
    wide = tmp_path / "wide.npy"
    np.save(wide, np.zeros((4, MAX_WIDTH + 1), dtype=np.uint8))
    with pytest.raises(StackError, match=f"over the limit of {MAX_WIDTH:,}") as caught:
        read_table(wide, data=wide.read_bytes(), max_bytes=MAX_UPLOAD_BYTES)
    assert caught.value.code == "E_BUDGET" and "principal components" in caught.value.hint


def test_the_dual_probe_is_the_primal_one():
    """A table wider than its rows is probed in the dual form: the same ridge solution."""
    from stacklab.lab.measure import score_maths as S

    rows = torch.randn(40, 64, generator=torch.Generator().manual_seed(1)).double()
    wide = S.position_probe_error(rows)  # D + 1 = 65 > 20 even rows: dual
    features = torch.cat([rows / rows.std(), torch.ones(40, 1, dtype=torch.double)], dim=1)
    train, test, index = features[0::2], features[1::2], torch.arange(40, dtype=torch.double)
    gram = train.T @ train
    weights = torch.linalg.solve(gram + 1e-3 * gram.diagonal().mean() * torch.eye(65,
                                 dtype=torch.double), train.T @ index[0::2])
    expected = ((test @ weights).clamp(0, 39) - index[1::2]).abs().mean().item()
    assert wide == pytest.approx(expected, rel=1e-6)


def test_a_npy_header_declaring_a_huge_shape_is_refused_before_allocating(tmp_path):
    """A 192-byte .npy declaring (10⁶, 10⁶) raised an uncaught MemoryError; its declared
    shape is now checked against the bounds and the bytes it holds, from the header."""
    huge = tmp_path / "huge.npy"
    with open(huge, "wb") as handle:
        np.lib.format.write_array_header_1_0(
            handle, {"descr": "<f4", "fortran_order": False, "shape": (10**6, 10**6)})
        handle.write(b"\0" * 64)
    assert huge.stat().st_size <= 192
    for data in (None, huge.read_bytes()):
        with pytest.raises(StackError, match="1,000,000 wide") as caught:
            read_table(huge, data=data)
        assert caught.value.code == "E_BUDGET"
    lying = tmp_path / "lying.npy"
    with open(lying, "wb") as handle:
        np.lib.format.write_array_header_1_0(
            handle, {"descr": "<f4", "fortran_order": False, "shape": (1000, 1000)})
        handle.write(b"\0" * 64)
    with pytest.raises(StackError, match="declares shape") as caught:
        read_table(lying, data=lying.read_bytes())
    assert caught.value.code == "E_VALUE"


def test_a_safetensors_file_naming_200001_tensors_is_refused_cheaply(tmp_path):
    """200,001 tiny tensors made a 200k-option select box; the header is refused by its
    size before it is parsed, and a file under that bound lists at most `MAX_LISTED`
    2-D tensors, largest first."""
    import json

    from stacklab.lab.reports.table_file import MAX_LISTED, MAX_UPLOAD_BYTES, tensor_names

    header = {f"t{i}": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}
              for i in range(200_001)}
    text = json.dumps(header).encode()
    data = len(text).to_bytes(8, "little") + text + b"\0" * 4
    assert len(data) < MAX_UPLOAD_BYTES
    for read in (lambda: tensor_names(data, "many.safetensors"),
                 lambda: read_table("many.safetensors", "t0", data=data)):
        with pytest.raises(StackError, match="save only the position table") as caught:
            read()
        assert caught.value.code == "E_BUDGET"
    tables = {f"w{i}": torch.zeros(2 + i, 3) for i in range(MAX_LISTED + 6)}
    path = tmp_path / "tables.safetensors"
    save_file({**tables, "bias": torch.zeros(4)}, str(path))
    listed = tensor_names(path.read_bytes(), path.name)
    assert listed == [f"w{i}" for i in reversed(range(6, MAX_LISTED + 6))]


def test_the_upload_limit_is_streamlits_16_mb():
    import tomllib

    from stacklab.lab.reports.table_file import MAX_UPLOAD_BYTES, UPLOAD_LIMIT

    config = tomllib.loads((Path(APP).parent / ".streamlit" / "config.toml").read_text())
    assert MAX_UPLOAD_BYTES == config["server"]["maxUploadSize"] * 1_000_000 == 16_000_000
    assert UPLOAD_LIMIT == "16 MB"
