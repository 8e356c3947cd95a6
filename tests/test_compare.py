"""Runs side by side: `stacklab compare`, `stacklab sweep` (issue 13, SPEC §16)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

import stacklab
from stacklab.lab.reports.compare import aligned
from stacklab.lab.figures import figures_from_json
from stacklab.lab.runs.store import RunStore, StoredRun

LEARNED = ("embedding(16, 32)\npos_embed(32)\nattention(2, causal=true)\nlayer_norm()\n"
           "linear(16)")
ROPE = 'embedding(16, 32)\nattention(2, causal=true, position="rope")\nlayer_norm()\nlinear(16)'


def test_compare_run_folders_and_stored_keys(tmp_path, cli):
    for name, stack in (("learned", LEARNED), ("rope", ROPE)):
        (tmp_path / f"{name}.txt").write_text(stack)
        code, _, err = cli("train", str(tmp_path / f"{name}.txt"), "--task", "shift", "--steps",
                           "20", "--eval-lengths", "16,32", "--out", str(tmp_path / name))
        assert code == 0, err
        assert {"run.json", "figures.json"} <= {p.name for p in (tmp_path / name).iterdir()}
    opened = StoredRun.of_folder(tmp_path / "rope")
    assert opened.config.task == "shift" and not hasattr(opened, "model")
    run = stacklab.train(task="position", steps=20)
    RunStore().save(run)  # the suite's store (STACKLAB_RUNS)
    code, _, err = cli("compare", str(tmp_path / "learned"), str(tmp_path / "rope"), run.key,
                       "--out", str(tmp_path / "cmp"))
    assert code == 0, err
    found = json.loads((tmp_path / "cmp" / "comparison.json").read_text())
    assert [r["label"] for r in found["runs"]] == ["learned", "rope", run.key[:12]]
    learned, rope = found["runs"][:2]
    assert learned["pattern"]["name"] == "partner_attention" and learned["scores"]["n1"]
    assert rope["scores"] == {} and rope["pattern"]["value"] is not None  # no table: attention's
    assert set(rope["length_generalization"]["32"]) == {"accuracy", "past_T"}
    page = (tmp_path / "cmp" / "comparison.html").read_text()
    assert page.count("* plotly.js v") == 1 and "<script src=" not in page
    assert "Length generalization" in page and "not drawn for this run" in page
    code, _, err = cli("compare", str(tmp_path / "nothing"), "--out", str(tmp_path / "x"))
    assert code == 1 and "neither a folder nor a run key" in err
    rows = {key: (title, versions) for key, title, versions in aligned(
        [("learned", StoredRun.of_folder(tmp_path / "learned")), ("rope", opened)])}
    title, (learned_map, rope_map) = rows["attention_by_position"]  # matched by key
    assert title == "Attention by position alone" and "attention_without_table" not in rows
    assert learned_map.key == "attention_by_position" and rope_map.key == "attention_without_table"
    assert rows["offset_scores"][1][0] is None and rows["cosine"][1][1] is None


def test_a_run_stored_before_figures_had_keys_still_compares(tmp_path, cli):
    (tmp_path / "learned.txt").write_text(LEARNED)
    code, _, err = cli("train", str(tmp_path / "learned.txt"), "--task", "shift", "--steps", "10",
                       "--out", str(tmp_path / "run"))
    assert code == 0, err
    current = StoredRun.of_folder(tmp_path / "run")
    expected = [(key, title, [v.caption for v in versions])
                for key, title, versions in aligned([("run", current)])]
    drawn = json.loads((tmp_path / "run" / "figures.json").read_text())
    older = {"pattern": drawn["pattern"][:4],  # as an older version wrote it: no key
             "nodes": {node: [entry[:4] for entry in entries]
                       for node, entries in drawn["nodes"].items()}}
    (tmp_path / "run" / "figures.json").write_text(json.dumps(older))
    stored = StoredRun.of_folder(tmp_path / "run")
    assert [f.key for f in figures_from_json(stored.figures())][:2] == ["training_curves",
                                                                        "cosine"]
    assert [(key, title, [v.caption for v in versions])
            for key, title, versions in aligned([("run", stored)])] == expected
    assert expected[0][0] == "training_curves" and len(expected) > 5


def test_sweep_trains_stacks_by_seeds_and_writes_results(tmp_path, cli):
    (tmp_path / "learned.txt").write_text(LEARNED)
    (tmp_path / "rope.txt").write_text(ROPE)
    code, _, err = cli("sweep", "--task", "shift", "--stack", str(tmp_path / "learned.txt"),
                       "--stack", str(tmp_path / "rope.txt"), "--seeds", "0-1", "--steps", "20",
                       "--eval-lengths", "32", "--workers", "2", "--out", str(tmp_path / "sw"))
    assert code == 0, err
    assert "sweep 2 stacks x 2 seeds" in err and "4/4" in err
    with open(tmp_path / "sw" / "results.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["stack"], r["seed"]) for r in rows] == [("learned", "0"), ("learned", "1"),
                                                       ("rope", "0"), ("rope", "1")]
    assert all(r["status"] == "finished" for r in rows)
    for row in rows:  # the accuracy past T is the run's own, from its metrics
        run = stacklab.open_run(row["key"])
        past = run.metrics()["length_generalization"]["32"]["per_position"][run.config.seq_len:]
        assert float(row["past_T_at_32"]) == pytest.approx(sum(past) / len(past), abs=1e-6)
    assert len({r["key"] for r in rows}) == 4
    page = (tmp_path / "sw" / "comparison.html").read_text()
    assert "learned (seed 0)" in page and "rope (seed 0)" in page and " ± " in page


def test_sweep_checks_every_stack_before_training(tmp_path, cli):
    (tmp_path / "good.txt").write_text(LEARNED)
    (tmp_path / "bad.txt").write_text('attention(3, position="rope")')
    code, _, err = cli("sweep", "--task", "shift", "--stack", str(tmp_path / "good.txt"),
                       "--stack", str(tmp_path / "bad.txt"), "--out", str(tmp_path / "sw"))
    assert code == 1 and "E_" in err and not (tmp_path / "sw").exists()
    code, _, err = cli("sweep", "--task", "shift", "--stack", str(tmp_path / "good.txt"),
                       "--seeds", "4-x", "--out", str(tmp_path / "sw"))
    assert code == 2 and "--seeds" in err


def test_sweep_labels_clashing_file_names_by_path_and_refuses_a_repeat(tmp_path, cli):
    (tmp_path / "sub").mkdir()
    (tmp_path / "rope.txt").write_text(ROPE)
    (tmp_path / "sub" / "rope.txt").write_text(LEARNED)
    code, _, err = cli("sweep", "--task", "shift", "--stack", str(tmp_path / "rope.txt"),
                       "--stack", str(tmp_path / "sub" / "rope.txt"), "--steps", "10",
                       "--out", str(tmp_path / "sw"))
    assert code == 0, err
    with open(tmp_path / "sw" / "results.csv", newline="") as handle:
        labels = [row["stack"] for row in csv.DictReader(handle)]
    assert labels == [str(tmp_path / "rope.txt"), str(tmp_path / "sub" / "rope.txt")]
    assert "sweep 2 stacks x 1 seed " in err
    code, _, err = cli("sweep", "--task", "shift", "--stack", str(tmp_path / "rope.txt"),
                       "--stack", str(tmp_path / "rope.txt"), "--out", str(tmp_path / "x"))
    assert code == 2 and "given twice" in err


def test_compare_takes_the_start_of_a_key_as_shown(tmp_path, cli):
    run = stacklab.train(task="position", steps=15, seed=9)
    RunStore().save(run)
    code, _, err = cli("compare", run.key[:8], "--out", str(tmp_path / "c"))
    assert code == 0, err
    found = json.loads((tmp_path / "c" / "comparison.json").read_text())
    assert found["runs"][0]["key"] == run.key
    assert stacklab.open_run(run.key[:12]).final == run.final


def test_the_table_gives_each_layers_best_head_and_a_table_less_stacks_pattern(tmp_path):
    """Induction runs side by side: a column per layer and per-head score (the best head's
    value, its init in brackets), and the pattern score of a stack without a table taken
    from its heads (it has no table to score)."""
    from stacklab.lab.reports.compare import column_help, table_rows

    store = RunStore(tmp_path)
    rope = (Path(__file__).parent.parent / "examples" / "induction" / "rope.txt").read_text()
    entries = []
    for label, source in (("learned", None), ("rope", rope)):
        run = stacklab.train(source, task="induction", steps=20, seed=0)
        store.save(run)
        entries.append((label, store.open(run.key)))
    rows = table_rows(entries)
    for row, (_, stored) in zip(rows, entries):
        attention = stored.metrics()["attention"]
        layer_2 = next(block for block in attention.values() if block["layer"] == 2)
        best = max(head["induction"]["value"] for head in layer_2["heads"])
        assert row["layer 2 induction"].startswith(f"{best:.2f} (init ")
        assert row["layer 1 previous token"] != "—"
        assert row["pattern score"].startswith("induction ")
    assert "attention layer 2" in column_help(rows)["layer 2 induction"]
    names = list(rows[0])  # the head columns differ between the runs: before the task's
    assert names.index("layer 1 previous token") < names.index("layer 2 induction") < names.index("task")


@pytest.fixture(scope="module")
def two_stored(tmp_path_factory):
    """A store of two small runs with their figures: A (seed 0) and B (seed 1)."""
    from stacklab.lab.figures import figures_json

    root = tmp_path_factory.mktemp("two")
    runs = [stacklab.train(task="position", steps=20, seed=seed) for seed in (0, 1)]
    for run in runs:
        RunStore(root).save(run, figures_json(run))
    return root, runs


@pytest.mark.parametrize("case, file", [("truncated figures", "figures.json"),
                                        ("[] figures", "figures.json"),
                                        ("garbage metrics", "metrics.json"),
                                        ("missing model", "model.safetensors")])
def test_a_damaged_run_is_said_once_and_never_costs_the_run_beside_it(two_stored, tmp_path,
                                                                       caplog, case, file):
    """Issue 28: a truncated figures.json gave the generic error on compare=A,KEY (losing
    the intact A), ``[]`` crashed the student's link, a missing model made the download do
    nothing. Now the run is damaged (E_DAMAGED, naming the file), logged once, and A stays."""
    import logging
    import shutil

    from stacklab import StackError
    from stacklab.lab.reports.compare import aligned_rows, comparison_html, compared, table_rows

    root, (run_a, run_b) = two_stored
    shutil.copytree(root, tmp_path / "store")
    store, folder = RunStore(tmp_path / "store"), tmp_path / "store" / run_b.key
    text = (folder / file).read_text() if file.endswith(".json") else ""
    {"truncated figures": lambda: (folder / file).write_text(text[:len(text) // 2]),
     "[] figures": lambda: (folder / file).write_text("[]"),
     "garbage metrics": lambda: (folder / file).write_bytes(b"\xff\x00garbage"),
     "missing model": lambda: (folder / file).unlink()}[case]()
    with caplog.at_level(logging.WARNING, logger="stacklab.store"):
        entries = [("A", store.open(run_a.key)), ("B", store.open(run_b.key))]
        for _ in range(2):  # a page drawn twice logs the damage once
            rows, figures = table_rows(entries), aligned_rows(entries)
            page = comparison_html(entries)
            compared(entries)
            damage = store.open(run_b.key).damage()
        if case == "missing model":
            with pytest.raises(StackError, match="model.safetensors is missing") as caught:
                store.open(run_b.key).checkpoint_bytes()
            assert caught.value.code == "E_DAMAGED"
    assert damage.code == "E_DAMAGED" and f"its {file}" in damage.message and damage.hint
    assert [r.getMessage() for r in caplog.records].count(
        f"run {run_b.key} is damaged: {damage.message.split(': ', 1)[1]}") == 1
    assert rows[0]["status"] == "finished" and rows[0]["accuracy inside T"] != "—"
    drawn_a = figures_from_json(entries[0][1].figures())
    assert sum(row.versions[0] is not None for row in figures) == len(drawn_a) > 5  # A whole
    assert rows[1]["status"] == "damaged" and "damaged" in page
    if file == "figures.json":  # other damage leaves the figures its worker drew
        assert all(row.versions[1] is None and "is damaged" in row.reasons[1] for row in figures)
    assert store.save(run_b) == folder and store.open(run_b.key).damage() is None  # replaced


def test_figures_that_are_not_what_figures_json_writes_are_damaged():
    from stacklab import StackError
    from stacklab.lab.figures import absent_from_json

    for drawn in ([], {"nodes": {"n1": [[1]]}}, {"nodes": []}, {"pattern": 5}):
        with pytest.raises(StackError) as caught:
            figures_from_json(drawn, "pattern" if "pattern" in drawn else None)
        assert caught.value.code == "E_DAMAGED"
    with pytest.raises(StackError, match="stored figures are damaged"):
        absent_from_json({"absent": []})


def test_the_new_encodings_are_each_labelled_by_their_own_name(tmp_path):
    """Issue 32: an xPos run, a CoPE run and a partial-RoPE run compared side by side: the
    table, comparison.json and the Compare page's run labels (`encoding` of the stored run's
    stack) name each by its encoding; partial RoPE is not called plain "rope"."""
    from stacklab.lab.reports.compare import comparison, comparison_html, encoding, table_rows

    store = RunStore(tmp_path)
    entries = []
    for label, position in (("xpos", '"xpos"'), ("cope", '"cope"'),
                            ("partial", '"rope", rotary=0.25'), ("rope", '"rope"')):
        source = (f"embedding(16, 32)\nattention(2, causal=true, position={position})\n"
                  "layer_norm()\nlinear(16)")
        run = stacklab.train(source, task="shift", steps=5, seed=0, eval_lengths="32")
        store.save(run)
        entries.append((label, store.open(run.key)))
    expected = ["xpos", "cope", "rope 25%", "rope"]
    assert [encoding(stored.network) for _, stored in entries] == expected  # the page's labels
    assert [row["encoding"] for row in table_rows(entries)] == expected
    assert [found["encoding"] for found in comparison(entries)["runs"]] == expected
    page = comparison_html(entries)
    assert all(f">{name}<" in page for name in expected), "the saved page's table names each"
