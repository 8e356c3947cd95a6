"""safetensors checkpoints: round trip, and every bad file refused with nothing loaded."""

from __future__ import annotations

import json
import struct

import pytest
import torch
from safetensors.torch import save_file

from stacklab import StackError, resolve
from stacklab.lab.runs.checkpoint import load_checkpoint, load_state, save_checkpoint

STEM = "embedding(500, 16)\npos_embed(32)\nlinear(4)"


@pytest.fixture
def saved(tmp_path):
    net = resolve(STEM, ["B", 12], input_dtype="int64")
    model = net.build(seed=0)
    path = tmp_path / "model.safetensors"
    save_checkpoint(path, model, {"task": "reverse", "seq_len": 12, "seed": 0})
    return path, net, model


def test_round_trip_restores_every_parameter_and_the_stack(saved):
    path, net, model = saved
    loaded = load_checkpoint(path)
    assert loaded.network.table() == net.table()
    for key, value in model.state_dict().items():
        assert torch.equal(loaded.model.state_dict()[key], value)
    meta = loaded.metadata
    assert meta["source"] == STEM and json.loads(meta["input_shape"]) == ["B", 12]
    assert meta["task"] == "reverse" and meta["torch"] == torch.__version__


def refused(path, network=None, code="E_VALUE") -> StackError:
    with pytest.raises(StackError) as info:
        if network is None:
            load_checkpoint(path)
        else:
            load_state(path, network)
    assert info.value.code == code, str(info.value)
    return info.value


def test_corrupt_files(tmp_path):
    for name, data in {"empty": b"", "short": b"\x01\x02", "noise": bytes(range(256)) * 4,
                       "huge-header": struct.pack("<Q", 2**62) + b"{}",
                       "not-json": struct.pack("<Q", 4) + b"{{{{",
                       "list": struct.pack("<Q", 2) + b"[]"}.items():
        path = tmp_path / name
        path.write_bytes(data)
        assert refused(path).hint


def test_malformed_header_entries(tmp_path):
    for offsets in ("5", [1], ["a", "b"], [0, -4], None):
        header = json.dumps({"w": {"dtype": "F32", "shape": [1], "data_offsets": offsets}}).encode()
        path = tmp_path / "bad.safetensors"
        path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 4)
        assert "malformed" in refused(path).message


def test_truncated_file(saved):
    path, net, _ = saved
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 100])
    assert "truncated" in refused(path, net).message


def test_oversized_file(saved, tmp_path):
    path, net, _ = saved
    small = resolve("embedding(5, 16)\npos_embed(32)\nlinear(4)", ["B", 12], input_dtype="int64")
    assert "over the limit" in refused(path, small).message


def test_mismatched_keys_shapes_and_dtypes(saved):
    path, _, _ = saved
    renamed = resolve("tok = embedding(500, 16)\npos_embed(32)\nlinear(4)", ["B", 12],
                      input_dtype="int64")
    assert "missing tok.weight" in refused(path, renamed, "E_SHAPE").message
    wider = resolve("embedding(500, 16)\npos_embed(64)\nlinear(4)", ["B", 12], input_dtype="int64")
    # a bigger network: the size check passes, the shape check refuses
    assert "n1.weight" in refused(path, wider, "E_SHAPE").message
    doubled = resolve(STEM, ["B", 12], input_dtype="int64", dtype="float64")
    assert "float32" in refused(path, doubled, "E_DTYPE").message


def test_non_finite_values(saved):
    path, net, model = saved
    state = {k: v.clone() for k, v in model.state_dict().items()}
    state["n1.weight"][3, 3] = float("nan")
    save_file(state, str(path), metadata={"source": STEM, "input_shape": '["B", 12]',
                                          "input_dtype": "int64", "dtype": "float32"})
    assert "non-finite" in refused(path, net).message


def test_missing_metadata_needs_a_network(saved):
    path, net, model = saved
    save_file(model.state_dict(), str(path))
    assert "metadata" in refused(path).message
    assert set(load_state(path, net)) == set(net.state_shapes())
