"""Run keys and the run store: determinism, atomic folders, restarts, eviction, damage."""

from __future__ import annotations

import json
import logging
import os
import time

import pytest
import torch

from stacklab import StackError, TrainConfig, Trainer, train
from stacklab.lab.figures import run_figures
from stacklab.lab.keys import canonical_stack, is_key
from stacklab.lab.runs.store import RunStore

QUICK = dict(task="position", steps=30, eval_every=10)


def key_of(source=None, **settings):
    return Trainer(source, TrainConfig(**{**QUICK, **settings})).key


def test_same_key_trains_to_bitwise_identical_parameters_on_cpu():
    a, b = train(**QUICK, device="cpu"), train(**QUICK, device="cpu")
    assert a.key == b.key and is_key(a.key)
    for (name, p), (_, q) in zip(a.model.state_dict().items(), b.model.state_dict().items()):
        assert torch.equal(p, q), name
    assert torch.equal(a.row_grad_norm["n1"], b.row_grad_norm["n1"]) and a.history == b.history


def test_the_key_ignores_comments_and_layout_but_not_what_decides_the_result():
    source = "embedding(16, 32)\npos_embed(32)\nlinear(16)"
    base = key_of(source)
    assert key_of("# a comment\nembedding(16,32)   # tokens\n\n pos_embed( 32 )\nlinear(16)") == base
    assert key_of("n0 = embedding(16, 32)\npos_embed(32)\nlinear(16, bias=true)") == base
    others = [key_of(source.replace("32)", "40)")), key_of("tok = " + source), key_of(source, seed=1),
              key_of(source, steps=31), key_of(source, lr=0.02), key_of(source, target_accuracy=0.9),
              key_of(source, weight_decay=0.1), key_of(source, dtype="float64")]
    assert len({base, *others}) == len(others) + 1
    network = Trainer(source, TrainConfig(**QUICK)).network
    assert canonical_stack(network) == ("n0 = embedding(16, 32)\nn1 = pos_embed(32)\n"
                                        "n2 = linear(16, bias=true)")


def test_a_stored_run_reads_back_whole_after_a_restart(tmp_path):
    run = train(**QUICK)
    assert RunStore(tmp_path).save(run) == tmp_path / run.key
    loaded = RunStore(tmp_path).load(run.key)  # a new store object: as after a restart
    assert loaded.key == run.key and loaded.status == "finished" and loaded.step == run.step
    assert loaded.history == run.history and loaded.train_loss == run.train_loss
    assert loaded.config == run.config and loaded.network.source == run.network.source
    for name, tensor in run.model.state_dict().items():
        assert torch.equal(loaded.model.state_dict()[name], tensor)
    assert torch.equal(loaded.row_grad_norm["n1"], run.row_grad_norm["n1"])
    assert [s for s, _ in loaded.snapshots["n1"]] == [s for s, _ in run.snapshots["n1"]]
    assert torch.equal(loaded.snapshots["n1"][-1][1], run.snapshots["n1"][-1][1])
    assert [f.title for f in run_figures(loaded)] == [f.title for f in run_figures(run)]
    metrics = json.loads((tmp_path / run.key / "metrics.json").read_text())
    assert metrics == json.loads(json.dumps(run.metrics()))


def test_only_complete_runs_are_kept(tmp_path):
    trainer = Trainer(None, TrainConfig(**QUICK))
    trainer.stop()
    stopped = trainer.run()
    assert stopped.status == "stopped" and RunStore(tmp_path).save(stopped) is None
    assert RunStore(tmp_path).keys() == []


def test_partial_and_damaged_folders_are_skipped_with_a_log_line(tmp_path, caplog):
    store = RunStore(tmp_path)
    run = train(**QUICK)
    store.save(run)
    (tmp_path / f".tmp-{'0' * 32}-dead").mkdir()  # a write that crashed before its rename
    assert store.keys() == [run.key]
    half = tmp_path / ("1" * 32)
    half.mkdir()
    (half / "model.safetensors").write_bytes(b"\0" * 10)  # no run.json: never finished
    assert store.load("1" * 32) is None and "1" * 32 not in store
    model = tmp_path / run.key / "model.safetensors"
    data = bytearray(model.read_bytes())
    data[-8:] = b"\xff" * 8  # NaN bytes in a parameter
    model.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="stacklab.store"):
        assert store.load(run.key) is None
    assert run.key in caplog.text and "ignoring" in caplog.text
    (tmp_path / run.key / "run.json").write_text("{not json")
    assert store.load(run.key) is None


def test_a_run_json_for_another_key_is_refused(tmp_path):
    store = RunStore(tmp_path)
    run = train(**QUICK)
    store.save(run)
    os.rename(tmp_path / run.key, tmp_path / ("a" * 32))
    assert store.load("a" * 32) is None


def test_least_recently_used_runs_go_first(tmp_path):
    runs = [train(**QUICK, seed=seed) for seed in range(3)]
    store = RunStore(tmp_path)
    store.save(runs[0])
    one = store.size()
    store.max_bytes = int(one * 2.5)  # room for two runs
    store.save(runs[1])
    time.sleep(0.02)
    assert store.load(runs[0].key) is not None  # used again: now the most recent
    time.sleep(0.02)
    store.save(runs[2])
    assert set(store.keys()) == {runs[0].key, runs[2].key} and store.size() <= store.max_bytes


def test_keys_are_checked_before_any_path_is_made(tmp_path):
    store = RunStore(tmp_path)
    for bad in ("../etc", "A" * 32, "0" * 31, "", None, "0" * 32 + "/x"):
        assert store.load(bad) is None and bad not in store
    with pytest.raises(StackError, match="not a run key"):
        store.path("../../x")


def test_the_store_root_and_size_come_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("STACKLAB_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("STACKLAB_RUNS_MAX_BYTES", "12345")
    store = RunStore()
    assert store.root == tmp_path / "runs" and store.max_bytes == 12345


def test_equal_numbers_give_equal_keys():
    assert key_of(weight_decay=0) == key_of(weight_decay=0.0) == key_of(weight_decay=-0.0)
    assert key_of(lr=1) == key_of(lr=1.0) and key_of(target_accuracy=1) == key_of(target_accuracy=1.0)


def test_a_damaged_folder_does_not_block_its_key(tmp_path):
    store = RunStore(tmp_path)
    run = train(**QUICK)
    store.save(run)
    (tmp_path / run.key / "run.json").write_text("{damaged")
    assert store.load(run.key) is None
    assert store.save(run) == tmp_path / run.key  # written anew over the damaged folder
    assert store.load(run.key).history == run.history
