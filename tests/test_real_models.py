"""Real models' positions (SPEC §23, issue 31): checkpoints written by `transformers` itself
(tiny random configs, `save_pretrained`, one of them sharded), so key names and offsets
are exactly what users have; a checkpoint far larger than its table read lazily; the Hub
path through `huggingface_hub.HfFileSystem` against a local server that serves byte
ranges; hostile files; rotary frequencies checked against transformers' own."""

from __future__ import annotations

import json
import math
import struct
import threading
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from stacklab.cli import main
from stacklab.core.errors import StackError
from stacklab.lab.models import offset_curves, read_position_table, rotary_frequencies
from stacklab.lab.models.offsets import rotary_similarity, stack_offset_curves
from stacklab.ops.attention import rope_rotate

transformers = pytest.importorskip("transformers")  # the test extra; imported once
warnings.filterwarnings("ignore", module="transformers")
transformers.logging.set_verbosity_error()
SMALL = dict(vocab_size=64, num_hidden_layers=1, intermediate_size=32)


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> dict[str, tuple[Path, dict]]:
    """Tiny random models of each family, saved by `save_pretrained`: folder and state."""
    root = tmp_path_factory.mktemp("models")
    torch.manual_seed(0)
    t = transformers
    models = {
        "gpt2": t.GPT2LMHeadModel(t.GPT2Config(n_embd=16, n_layer=1, n_head=2, n_positions=48,
                                               vocab_size=64)),
        "bert": t.BertModel(t.BertConfig(hidden_size=16, num_attention_heads=2,
                                         max_position_embeddings=40, **SMALL)),
        "roberta": t.RobertaModel(t.RobertaConfig(hidden_size=16, num_attention_heads=2,
                                                  max_position_embeddings=34, pad_token_id=1,
                                                  **SMALL)),
        "opt": t.OPTForCausalLM(t.OPTConfig(hidden_size=16, num_attention_heads=2, ffn_dim=32,
                                            word_embed_proj_dim=16, max_position_embeddings=30,
                                            vocab_size=64, num_hidden_layers=1)),
        "neox": t.GPTNeoXForCausalLM(t.GPTNeoXConfig(hidden_size=16, num_attention_heads=2,
                                                     rotary_pct=0.5, max_position_embeddings=64,
                                                     **SMALL)),
    }
    found = {}
    for name, model in models.items():
        model.save_pretrained(root / name)
        found[name] = (root / name, {k: v.detach().clone() for k, v in model.state_dict().items()})
    models["gpt2"].save_pretrained(root / "gpt2-sharded", max_shard_size="20KB")
    found["gpt2-sharded"] = (root / "gpt2-sharded", found["gpt2"][1])
    return found


@pytest.mark.parametrize("name, key, layout, first", [
    ("gpt2", "transformer.wpe.weight", "gpt2", 0),
    ("bert", "embeddings.position_embeddings.weight", "bert", 0),
    ("roberta", "embeddings.position_embeddings.weight", "roberta", 2),  # padding_idx 1 + 1
    ("opt", "model.decoder.embed_positions.weight", "opt", 2),  # OPT's offset of 2
    ("gpt2-sharded", "transformer.wpe.weight", "gpt2", 0),
])
def test_a_transformers_folder_gives_its_table_without_a_key(saved, name, key, layout, first):
    folder, state = saved[name]
    found = read_position_table(folder)
    assert (found.key, found.layout, found.first_row) == (key, layout, first)
    assert torch.equal(found.table, state[key][first:].float())
    assert found.tensor_rows == state[key].shape[0]
    assert layout in found.summary and (f"first {first} dropped" in found.summary) == bool(first)


def test_the_sharded_folder_is_read_through_its_index(saved):
    folder, _ = saved["gpt2-sharded"]
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 1 and not (folder / "model.safetensors").exists()


def test_a_rotary_model_has_no_table_and_says_so(saved):
    folder, _ = saved["neox"]
    with pytest.raises(StackError, match="rotary"):
        read_position_table(folder)
    curves = offset_curves(json.loads((folder / "config.json").read_text()))
    assert curves.kind == "rotary" and "rotary dim 4 of head 8" in curves.about


@pytest.mark.parametrize("scaling", [
    None, {"rope_type": "linear", "factor": 4.0}, {"rope_type": "dynamic", "factor": 2.0},
    {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 64},
    {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
     "original_max_position_embeddings": 64},
])
def test_rotary_frequencies_match_transformers_own(scaling):
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    parameters = {"rope_theta": 500000.0, **(scaling or {"rope_type": "default"})}
    config = transformers.LlamaConfig(hidden_size=128, num_attention_heads=2, max_position_embeddings=256,
                                      rope_parameters=parameters, **SMALL)
    kind = parameters["rope_type"]
    seq_len = 1024  # dynamic NTK grows its base past the trained length
    if kind == "default":
        expected = 500000.0 ** (-torch.arange(0, 64, 2).double() / 64)
    else:
        expected, _ = ROPE_INIT_FUNCTIONS[kind](config, "cpu", seq_len=seq_len)
    mine = rotary_frequencies(64, 500000.0, None if scaling is None else {**scaling, "type": kind},
                              trained_len=256, seq_len=seq_len)
    np.testing.assert_allclose(mine, expected.double().numpy(), rtol=1e-5)
    curves = offset_curves(config.to_dict())
    assert len(curves.lines) == (1 if scaling is None else 2)
    assert all(abs(values[0] - 1) < 1e-9 for values in curves.lines.values())


def test_linear_scaling_stretches_the_offset_curve_by_its_factor():
    offsets = np.arange(0, 400, dtype=np.float64)
    plain = rotary_similarity(offsets, rotary_frequencies(32))
    stretched = rotary_similarity(offsets * 4, rotary_frequencies(32, scaling={"type": "linear",
                                                                               "factor": 4}))
    np.testing.assert_allclose(plain, stretched, atol=1e-9)


def test_the_stack_rope_curve_is_what_rope_rotate_gives_a_query_and_key():
    curves = stack_offset_curves(heads=2, head_dim=16, position="rope", seq_len=32)
    ones = torch.ones(1, 1, 64, 16)  # same content at every position
    rotated = rope_rotate(ones)[0, 0]  # (T, d)
    cosine = (rotated[0] @ rotated.T) / (rotated[0].norm() * rotated.norm(dim=1))  # (T,)
    np.testing.assert_allclose(curves.lines["no scaling"][:64], cosine.double().numpy(), atol=1e-5)


def test_alibi_configs_give_each_heads_slope():
    bloom = offset_curves({"model_type": "bloom", "n_head": 8, "hidden_size": 64})
    slopes = [-values[1] for values in bloom.lines.values()]
    np.testing.assert_allclose(slopes, [2.0 ** -(i + 1) for i in range(8)])
    mpt = offset_curves({"model_type": "mpt", "n_heads": 4, "d_model": 64, "max_seq_len": 16,
                         "attn_config": {"alibi": True, "alibi_bias_max": 8}})
    assert [round(-v[2] / 2, 4) for v in mpt.lines.values()] == [0.25, 0.0625, 0.0156, 0.0039]
    assert mpt.trained_len == 16 and len(mpt.offsets) == 64


def _sparse_checkpoint(path: Path, table: torch.Tensor, other_bytes: int) -> None:
    """A safetensors file with ``table`` under ``wpe.weight`` after ``other_bytes`` of another
    tensor, written sparse (the zeros are never written): as large as a real checkpoint."""
    others = other_bytes // 4
    header = {"h.0.mlp.c_fc.weight": {"dtype": "F32", "shape": [others // 1024, 1024],
                                      "data_offsets": [0, others * 4]},
              "wpe.weight": {"dtype": "F32", "shape": list(table.shape),
                             "data_offsets": [others * 4, others * 4 + table.numel() * 4]}}
    raw = json.dumps(header).encode()
    with open(path, "wb") as handle:
        handle.write(struct.pack("<Q", len(raw)) + raw)
        handle.seek(8 + len(raw) + others * 4)
        handle.write(table.numpy().tobytes())


def test_a_file_far_over_the_old_limit_is_read_lazily(tmp_path, capsys):
    import tracemalloc

    table = torch.randn(1024, 64)
    path = tmp_path / "model.safetensors"
    _sparse_checkpoint(path, table, 600 << 20)
    assert path.stat().st_size > 600 << 20
    tracemalloc.start()
    found = read_position_table(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert torch.equal(found.table, table) and found.layout == "gpt2"
    assert peak < 4 * table.numel() * 4  # the table's bytes, not the file's
    assert main(["explore", str(path), "--out", str(tmp_path / "out")]) == 0
    scores = json.loads((tmp_path / "out" / "scores.json").read_text())
    assert scores["shape"] == [1024, 64] and scores["table"] == "wpe.weight"
    assert "wpe.weight [1024, 64], layout gpt2, all 1024 rows" in capsys.readouterr().err
    assert "layout gpt2, all 1024 rows" in (tmp_path / "out" / "report.html").read_text()


def test_an_unknown_layout_lists_its_two_dimensional_tensors_largest_first(tmp_path):
    path = tmp_path / "model.safetensors"
    save_file({"a.small": torch.zeros(4, 4), "b.big": torch.zeros(64, 8), "c.vec": torch.zeros(9),
               "d.mid": torch.zeros(16, 8)}, str(path))
    with pytest.raises(StackError) as caught:
        read_position_table(path)
    assert "b.big [64, 8], d.mid [16, 8], a.small [4, 4]" in str(caught.value)
    assert "c.vec" not in str(caught.value)
    assert read_position_table(path, key="d.mid").layout == "key"


def _hostile(path: Path, header: dict, data: bytes = b"", declared: int | None = None) -> Path:
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", declared or len(raw)) + raw + data)
    return path


@pytest.mark.parametrize("case, message", [
    ("bomb", "corrupt or truncated"), ("overlap", "overlap"), ("short", "not the"),
    ("past_end", "truncated"), ("nan", "non-finite"), ("not_json", "not valid JSON"),
])
def test_hostile_files_are_refused_before_use(tmp_path, case, message):
    entry = {"dtype": "F32", "shape": [4, 2], "data_offsets": [0, 32]}
    path = tmp_path / "model.safetensors"
    if case == "bomb":
        _hostile(path, {"wpe.weight": entry}, bytes(32), declared=1 << 62)
    elif case == "overlap":
        _hostile(path, {"wpe.weight": entry, "x": {**entry, "data_offsets": [16, 48]}}, bytes(48))
    elif case == "short":
        _hostile(path, {"wpe.weight": {**entry, "data_offsets": [0, 16]}}, bytes(32))
    elif case == "past_end":
        _hostile(path, {"wpe.weight": entry}, bytes(8))
    elif case == "nan":
        save_file({"wpe.weight": torch.full((4, 2), float("nan"))}, str(path))
    else:
        path.write_bytes(struct.pack("<Q", 5) + b"{nope")
    with pytest.raises(StackError, match=message):
        read_position_table(path)


class _RangeHub(BaseHTTPRequestHandler):
    """The few Hub routes `HfFileSystem` uses to read one file, serving byte ranges; counts
    the file bytes it sent."""

    files: dict[str, bytes] = {}
    sent = 0

    def _send(self, code: int, body: bytes, headers=()) -> None:
        self.send_response(code)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):  # noqa: N802 - http.server's name
        if "/resolve/" in self.path:
            data = self.files[self.path.rsplit("/", 1)[1]]
            start, end = (int(x) for x in self.headers["range"].split("=")[1].split("-"))
            part = data[start:end + 1]
            type(self).sent += len(part)
            return self._send(206, part, [("Content-Range", f"bytes {start}-{end}/{len(data)}")])
        if "/tree/" in self.path:
            listing = [{"type": "file", "path": name, "size": len(data), "oid": "0" * 40}
                       for name, data in self.files.items()]
            return self._send(200, json.dumps(listing).encode())
        return self._send(200, json.dumps({"id": "org/tiny", "sha": "0" * 40}).encode())

    def log_message(self, *args):
        pass


def test_a_hub_model_is_read_by_range_requests_header_and_table_only(tmp_path, monkeypatch):
    from huggingface_hub import HfFileSystem, constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    table = torch.randn(128, 16)
    path = tmp_path / "model.safetensors"
    save_file({"transformer.wpe.weight": table, "lm_head.weight": torch.randn(8000, 16)}, str(path))
    config = json.dumps({"model_type": "gpt2"}).encode()
    _RangeHub.files = {"model.safetensors": path.read_bytes(), "config.json": config}
    server = ThreadingHTTPServer(("127.0.0.1", 0), _RangeHub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        filesystem = HfFileSystem(endpoint=f"http://127.0.0.1:{server.server_port}", token=False)
        found = read_position_table("hf://org/tiny", filesystem=filesystem)
    finally:
        server.shutdown()
    assert torch.equal(found.table, table) and found.where == "hf://org/tiny"
    assert _RangeHub.sent - len(config) < path.stat().st_size / 10


def test_a_model_in_the_local_cache_is_found_by_name(saved, tmp_path, monkeypatch):
    from huggingface_hub import constants

    folder, state = saved["bert"]
    snapshot = tmp_path / "models--org--tiny-bert" / "snapshots" / ("a" * 40)
    snapshot.mkdir(parents=True)
    for file in folder.iterdir():
        (snapshot / file.name).write_bytes(file.read_bytes())
    (tmp_path / "models--org--tiny-bert" / "refs").mkdir()
    (tmp_path / "models--org--tiny-bert" / "refs" / "main").write_text("a" * 40)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    found = read_position_table("org/tiny-bert")
    assert found.layout == "bert"
    assert torch.equal(found.table, state["embeddings.position_embeddings.weight"])
    with pytest.raises(StackError, match="local Hugging Face cache"):
        read_position_table("org/not-there")


def test_explore_draws_a_folder_and_a_rotary_config(saved, tmp_path, capsys):
    assert main(["explore", str(saved["opt"][0]), "--full", "--out", str(tmp_path / "opt")]) == 0
    report = (tmp_path / "opt" / "report.html").read_text()
    assert "top 3 components explain" in report and "Cosine similarity of every row" in report
    assert "first 2 dropped" in capsys.readouterr().err
    llama = tmp_path / "llama"
    transformers.LlamaConfig(hidden_size=64, num_attention_heads=4, max_position_embeddings=2048,
                             rope_parameters={"rope_type": "llama3", "factor": 8.0, "rope_theta": 1e4,
                                              "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                              "original_max_position_embeddings": 256},
                             **SMALL).save_pretrained(llama)
    assert main(["explore", str(llama), "--out", str(tmp_path / "out")]) == 0
    scores = json.loads((tmp_path / "out" / "scores.json").read_text())
    assert scores["encoding"] == "rotary" and scores["trained_length"] == 256
    assert scores["at 256 (llama3 ×8)"] > scores["at 256 (no scaling)"]  # slower turning
    assert "What an offset alone gives" in (tmp_path / "out" / "report.html").read_text()
    assert math.isfinite(scores["at 256 (no scaling)"])


def test_a_stacklab_rope_run_draws_the_same_offset_figure_from_the_catalog():
    import stacklab
    from stacklab.lab.figures import absent_reasons, run_figures

    source = 'embedding(16, 32)\nattention(2, causal=true, position="{}")\nlinear(16)'
    rope = stacklab.train(source.format("rope"), task="shift", steps=2, seed=0, eval_lengths="")
    drawn = {figure.key: figure for figure in run_figures(rope)}
    lines = drawn["offset_encoding"].figure.data
    assert [line.name for line in lines] == ["n1 (rope): no scaling"]
    expected = stack_offset_curves(2, 16, "rope", rope.config.seq_len).lines["no scaling"]
    np.testing.assert_allclose(lines[0].y, expected[:len(lines[0].y)], atol=1e-6)
    plain = stacklab.train(source.format("none"), task="shift", steps=2, seed=0, eval_lengths="")
    assert "rotary or ALiBi" in absent_reasons(plain)["offset_encoding"]


# --- what a server may read (STACKLAB_MODELS_DIR) and the table a user extracts -----------


def test_the_models_folder_lists_only_its_models_and_refuses_any_way_out(saved, tmp_path):
    from stacklab.lab.models import model_under, models_under

    root = tmp_path / "allowed"
    (root / "org").mkdir(parents=True)
    (root / "org" / "gpt2").symlink_to(saved["gpt2"][0], target_is_directory=True)  # leads out
    import shutil

    shutil.copytree(saved["bert"][0], root / "bert")
    save_file({"wpe": torch.randn(8, 4)}, root / "wpe.safetensors")
    (root / "notes.txt").write_text("not a model")
    secret = tmp_path / "secret.safetensors"
    save_file({"wpe": torch.randn(8, 4)}, secret)
    assert models_under(root) == ["bert", "wpe.safetensors"]  # the link out is not offered
    assert model_under(root, "bert") == root / "bert"
    for name in ("../secret.safetensors", str(secret), "/etc/passwd", "bert/../../secret.safetensors",
                 "org/gpt2", "notes.txt", "", "missing"):
        with pytest.raises(StackError) as refused:
            model_under(root, name)
        assert refused.value.code == "E_VALUE" and "pick one of the models" in refused.value.hint
    assert models_under(tmp_path / "no such folder") == []


def test_the_extract_snippet_runs_and_gives_an_uploadable_table(saved, tmp_path, monkeypatch):
    """The one line Explore shows beside a refused upload, run as a user would, next to a
    GPT-2-layout checkpoint (transformers' own ``save_pretrained`` writes ``wpe.weight``
    without the ``transformer.`` prefix only for the bare model: the snippet names the key)."""
    from stacklab.lab.models import extract_snippet
    from stacklab.lab.reports.table_file import MAX_UPLOAD_BYTES, read_table

    monkeypatch.chdir(tmp_path)
    state = saved["gpt2"][1]
    save_file({"wpe.weight": state["transformer.wpe.weight"].contiguous(),
               "wte.weight": torch.randn(5000, 16)}, "model.safetensors")
    exec(compile(extract_snippet(), "<snippet>", "exec"), {})
    data = Path("wpe.safetensors").read_bytes()
    assert len(data) < MAX_UPLOAD_BYTES
    table = read_table("wpe.safetensors", data=data, max_bytes=MAX_UPLOAD_BYTES)
    assert torch.equal(table, state["transformer.wpe.weight"].float())
    line = extract_snippet("bert.embeddings.position_embeddings.weight")
    assert "\n" not in line and "bert.embeddings.position_embeddings.weight" in line


def test_a_check_sees_the_declared_shape_before_the_table_is_read(tmp_path):
    """A server bounds a real table's width and rows before reading its bytes."""
    from stacklab.lab.reports.table_file import check_shape

    path = tmp_path / "model.safetensors"
    save_file({"wpe.weight": torch.zeros(4, 9000)}, path)
    seen = []
    with pytest.raises(StackError) as refused:
        read_position_table(path, check=lambda where, shape: (seen.append(shape),
                                                             check_shape(where, shape)))
    assert seen == [(4, 9000)] and refused.value.code == "E_BUDGET"


def test_a_cached_model_is_analysed_by_name_as_a_worker_does(saved, tmp_path, monkeypatch):
    """Explore's pick from the server's Hugging Face cache: the request names the model
    (its identity the snapshot's files), and the worker's function reads and draws it."""
    from huggingface_hub import constants

    from stacklab.serve.workers.table_jobs import model_request
    from stacklab.serve.workers.table_worker import table_result

    folder, _ = saved["bert"]
    snapshot = tmp_path / "models--org--tiny-bert" / "snapshots" / ("b" * 40)
    snapshot.mkdir(parents=True)
    for file in folder.iterdir():
        (snapshot / file.name).write_bytes(file.read_bytes())
    (tmp_path / "models--org--tiny-bert" / "refs").mkdir()
    (tmp_path / "models--org--tiny-bert" / "refs" / "main").write_text("b" * 40)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    request = model_request("org/tiny-bert", cached=True)
    stages = []
    result = table_result(request, lambda text, done: stages.append(done))
    assert result["name"] == "embeddings.position_embeddings.weight" and "layout bert" in result["read"]
    assert result["shape"] == [40, 16] and "cosine" in [entry[4] for entry in result["figures"]]
    assert stages == sorted(stages) and stages[-1] < 1
    (snapshot / "model.safetensors").write_bytes((folder / "model.safetensors").read_bytes() + b"")
    import os

    os.utime(snapshot / "model.safetensors", ns=(1, 1))  # the checkpoint replaced
    assert model_request("org/tiny-bert", cached=True).identity != request.identity
