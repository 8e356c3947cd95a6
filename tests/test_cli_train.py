"""`stacklab train` and `stacklab tasks`, as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import stacklab
from stacklab.lab.runs.checkpoint import load_checkpoint

METRIC_KEYS = {"task", "seq_len", "steps", "seconds", "device", "final", "history",
               "position_tables", "attention"}  # attention: SPEC §19, per layer and head


@pytest.fixture(scope="module")
def reverse_run(tmp_path_factory):
    """The issue's own command, in a real process: progress bar on stderr, three files."""
    out = tmp_path_factory.mktemp("run")
    done = subprocess.run([sys.executable, "-m", "stacklab", "train", "--task", "reverse",
                           "--seq-len", "16", "--weight-decay", "0", "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return out, done.stderr


def test_train_writes_model_metrics_and_report(reverse_run):
    out, stderr = reverse_run
    # SPEC §8's three files, and what makes the folder open like a stored run (compare)
    assert {p.name for p in out.iterdir()} == {"model.safetensors", "metrics.json", "report.html",
                                               "run.json", "figures.json"}
    assert "[########################] " in stderr and "held-out acc" in stderr
    assert "finished:" in stderr


def test_metrics_follow_the_schema_and_rows_beyond_t_are_zero(reverse_run):
    metrics = json.loads((reverse_run[0] / "metrics.json").read_text())
    assert set(metrics) == METRIC_KEYS
    assert metrics["task"] == "reverse" and metrics["seq_len"] == 16
    assert set(metrics["final"]) == {"accuracy", "loss"} and metrics["final"]["accuracy"] >= 0.99
    assert all(set(h) == {"step", "loss", "accuracy"} for h in metrics["history"])
    [(node, table)] = metrics["position_tables"].items()
    assert set(table) == {"max_len", "row_grad_norm", "row_drift", "scores"}
    scores = table["scores"]
    assert set(scores) == {"cosine_by_distance", "translation_invariance", "monotonicity",
                           "symmetry", "position_probe_error", "pattern"}
    assert scores["pattern"]["name"] == "partner_attention" and scores["pattern"]["value"] > 0.5
    assert len(scores["cosine_by_distance"]["value"]) == len(scores["cosine_by_distance"]["init"]) == 15
    assert table["max_len"] == len(table["row_grad_norm"]) == len(table["row_drift"]) == 32
    assert all(g > 0 for g in table["row_grad_norm"][:16])
    assert all(g == 0 for g in table["row_grad_norm"][16:])
    assert all(d == 0 for d in table["row_drift"][16:])
    [(name, attention)] = metrics["attention"].items()  # the preset's one attention
    heads = int(stacklab.get_task("reverse").preset().split("attention(")[1].split(")")[0])
    assert attention["layer"] == 1 and len(attention["heads"]) == heads >= 2
    for head in attention["heads"]:  # reverse has a partner; its sequences never repeat
        assert set(head) == {"previous_token", "partner"}
        assert all(set(score) == {"value", "init"} for score in head.values())
    best = max(head["partner"]["value"] for head in attention["heads"])
    assert best > max(head["partner"]["init"] for head in attention["heads"])


def test_the_checkpoint_loads_back_with_its_metadata(reverse_run):
    loaded = load_checkpoint(reverse_run[0] / "model.safetensors")
    meta = loaded.metadata
    assert meta["task"] == "reverse" and meta["seq_len"] == "16" and meta["seed"] == "0"
    assert meta["device"] == "cpu" and meta["torch"] and meta["input_dtype"] == "int64"
    assert loaded.network.input_shape == ("B", 16)


def test_report_is_self_contained(reverse_run):
    html = (reverse_run[0] / "report.html").read_text()
    assert html.count("<script") >= 2 and "<script src=" not in html


def test_train_from_a_file_with_weight_decay(cli, tmp_path):
    stack = tmp_path / "s.stack"
    stack.write_text("embedding(8, 32)\npos_embed(64)\nlinear(128)\nrelu()\nlinear(8)\n")
    code, _, err = cli("train", str(stack), "--task", "modular", "--steps", "40",
                           "--weight-decay", "0.5", "--out", str(tmp_path / "r"))
    assert code == 0, err
    table = json.loads((tmp_path / "r" / "metrics.json").read_text())["position_tables"]["n1"]
    assert all(g == 0 for g in table["row_grad_norm"][32:])
    assert all(d > 0 for d in table["row_drift"][32:])  # decay moves rows no gradient reached


@pytest.mark.parametrize("argv, code, words", [
    (["train", "--task", "nope", "--out", "x"], 1, "E_ARG"),
    (["train", "--task", "reverse", "--steps", "-3", "--out", "x"], 2, "--steps"),
    (["train", "--task", "reverse", "--lr", "inf", "--out", "x"], 2, "--lr"),
    (["train", "--task", "reverse", "--device", "tpu", "--out", "x"], 2, "invalid choice"),
    (["train", "--task", "reverse"], 2, "--out"),
    (["train", "missing.stack", "--task", "reverse", "--out", "x"], 2, "cannot read"),
])
def test_bad_train_arguments(cli, argv, code, words):
    got, _, err = cli(*argv)
    assert got == code and words in err and "Traceback" not in err


def test_a_stack_that_does_not_fit_exits_1(cli, tmp_path):
    stack = tmp_path / "s.stack"
    stack.write_text("embedding(16, 32)\npos_embed(32)\nlinear(4)\n")
    code, _, err = cli("train", str(stack), "--task", "reverse", "--out",
                           str(tmp_path / "r"))
    assert code == 1 and "use linear(16)" in err


def test_tasks_lists_every_task(cli):
    code, out, _ = cli("tasks", "--json")
    tasks = json.loads(out)
    assert code == 0 and {t["name"] for t in tasks} >= {"reverse", "shift", "modular", "position", "sort"}
    assert all(set(t) == {"name", "vocab", "description", "output", "preset"} for t in tasks)
    code, out, _ = cli("tasks")
    assert code == 0 and out.startswith("name") and "reverse" in out


def test_a_run_is_named_after_itself_and_never_overwrites_another(cli, tmp_path):
    """`train --out DIR` names the run it wrote (task, encoding, key); a second, different
    run into the same folder is refused before it trains, and the first run's files stay."""
    out = tmp_path / "r"
    code, _, err = cli("train", "--task", "position", "--steps", "20", "--out", str(out))
    key = json.loads((out / "run.json").read_text())["key"]
    assert code == 0 and f"wrote run position-learned-{key[:8]} to {out}" in err
    before = (out / "metrics.json").read_bytes()
    code, _, err = cli("train", "--task", "position", "--steps", "21", "--out", str(out))
    assert code == 2 and "holds another run" in err and f"{out}/position-learned-" in err
    assert (out / "metrics.json").read_bytes() == before and "Traceback" not in err
