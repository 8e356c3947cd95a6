"""Tasks and the trainer: presets learn, runs reproduce, stop, guard against divergence."""

from __future__ import annotations

import threading

import pytest
import torch

import stacklab
from stacklab import StackError
from stacklab.lab.measure import length_probe
from stacklab.lab.train.recorders import PositionTableRecorder
from stacklab.core.spec import ROLES
from stacklab.lab.tasks import TASKS
from stacklab.lab.settings import TrainConfig
from stacklab.lab.train.trainer import Trainer, train


@pytest.mark.parametrize("name", sorted(TASKS))
def test_task_batches_follow_the_rule_and_are_seeded(name):
    task = TASKS[name]
    x, y = task.batch(4, 9, torch.Generator().manual_seed(3))
    x2, y2 = task.batch(4, 9, torch.Generator().manual_seed(3))
    assert torch.equal(x, x2) and torch.equal(y, y2)
    assert x.shape == y.shape == (4, 9) and x.dtype == torch.long
    assert int(x.max()) < task.vocab and int(y.max()) < task.n_classes(9)
    ex, ey = task.eval_set(9)
    assert torch.equal(ex, task.eval_set(9)[0]) and not torch.equal(ex[:4], x)
    assert task.pattern and task.description and task.preset()


def test_task_rules():
    x = torch.tensor([[3, 1, 2, 0]])
    assert TASKS["reverse"].rule(x).tolist() == [[0, 2, 1, 3]]
    assert TASKS["shift"].rule(x).tolist() == [[0, 3, 1, 2]]
    assert TASKS["sort"].rule(x).tolist() == [[0, 1, 2, 3]]
    assert TASKS["modular"].rule(torch.tensor([[7, 7, 0]])).tolist() == [[7, 0, 2]]
    assert TASKS["position"].rule(x).tolist() == [[0, 1, 2, 3]]


# the length tasks (issue 32) have no target accuracy: bench/length_table.py measures them
@pytest.mark.parametrize("name", sorted(n for n, t in TASKS.items() if t.target_accuracy))
def test_every_preset_reaches_99_percent_held_out(name):
    run = train(task=name, target_accuracy=0.99)
    assert run.status == "finished"
    assert run.final["accuracy"] >= 0.99, run.history[-3:]


def test_same_seed_same_metrics_on_cpu():
    a = train(task="shift", steps=30, eval_every=10, seed=5, device="cpu")
    b = train(task="shift", steps=30, eval_every=10, seed=5, device="cpu")
    assert a.history == b.history and a.train_loss == b.train_loss
    c = train(task="shift", steps=30, eval_every=10, seed=6, device="cpu")
    assert c.history != a.history


def test_a_run_stopped_before_its_first_evaluation_still_reports_one():
    trainer = Trainer(None, TrainConfig(task="reverse", steps=1000))
    trainer.add_callback("on_batch_end", lambda run: trainer.stop() if run.step == 3 else None)
    run = trainer.run()
    assert run.status == "stopped" and run.step == 3
    assert run.history == [run.history[-1]] and run.history[-1]["step"] == 3
    assert isinstance(run.final["accuracy"], float)


def test_dropout_runs_are_reproducible_too():
    source = "embedding(16, 32)\npos_embed(32)\ndropout(0.3)\nlinear(16)"
    a = train(source, task="position", steps=30, eval_every=10, seed=4)
    b = train(source, task="position", steps=30, eval_every=10, seed=4)
    assert a.history == b.history and a.train_loss == b.train_loss


def test_rows_beyond_t_get_no_gradient_and_do_not_move_without_decay():
    run = train(task="modular", steps=60, weight_decay=0.0)
    T = run.config.seq_len
    grad, drift = run.row_grad_norm["n1"], run.row_drift("n1")
    assert grad.shape == (2 * T,)
    assert torch.count_nonzero(grad[T:]) == 0 and bool((grad[:T] > 0).all())
    assert torch.count_nonzero(drift[T:]) == 0 and bool((drift[:T] > 0).all())


def test_weight_decay_moves_untrained_rows_without_any_gradient():
    run = train(task="modular", steps=60, weight_decay=0.5)
    T = run.config.seq_len
    assert torch.count_nonzero(run.row_grad_norm["n1"][T:]) == 0
    assert bool((run.row_drift("n1")[T:] > 0).all())


def test_snapshots_are_bounded_and_ordered():
    run = train(task="position", steps=200)
    steps = [step for step, _ in run.snapshots["n1"]]
    assert steps[0] == 0 and steps[-1] == 200 and steps == sorted(steps) and len(steps) <= 41
    assert torch.equal(run.snapshots["n1"][0][1], run.initial_tables["n1"])


def _recorder_bytes(run, recorder) -> tuple[int, int]:
    """What ``recorder`` kept for ``run`` (bytes of every tensor it holds or handed over),
    and the bytes of one frame per table (a snapshot and its attention map)."""
    held = [*run.initial_tables.values(), *recorder.grad_sum.values(),
            *recorder.good_grad_sum.values()]
    held += [table for frames in (run.snapshots, run.attention_snapshots)
             for snapshots in frames.values() for _, table in snapshots]
    frame = sum(snapshots[-1][1].nbytes for frames in (run.snapshots, run.attention_snapshots)
                for snapshots in frames.values())
    return sum(t.nbytes for t in held), frame


@pytest.mark.parametrize("steps", [20, 80])
def test_the_kept_bytes_estimate_is_what_the_recorder_keeps(steps):
    """The budget's figure (`PositionTableRecorder.kept_bytes`, from the network alone) is
    an upper bound of the bytes a real run's recorder keeps, within its documented slack:
    one frame per table at these step counts. A change to what the recorder keeps that the
    estimate does not follow fails here."""
    source = ("embedding(16, 16)\npos_embed(24)\nattention(2)\nlinear(16)\n"
              "pos_embed(20)\nlinear(16)")  # one table an attention follows, one without
    recorder = PositionTableRecorder()
    trainer = Trainer(source, TrainConfig(task="reverse", seq_len=10, steps=steps),
                      recorders=(recorder,))
    run = trainer.run()
    assert run.status == "finished" and set(run.attention_snapshots) == {"n1"}
    kept, frame = _recorder_bytes(run, recorder)
    estimate = PositionTableRecorder.kept_bytes(trainer.network, trainer.config)
    assert kept <= estimate <= kept + frame


def test_the_kept_bytes_estimate_bounds_a_run_stopped_or_of_any_length():
    recorder = PositionTableRecorder()
    trainer = Trainer(None, TrainConfig(task="reverse", seq_len=8, steps=41), recorders=(recorder,))
    run = trainer.run()
    assert len(run.snapshots["n1"]) == 22 <= PositionTableRecorder.most_frames(41)
    assert _recorder_bytes(run, recorder)[0] <= PositionTableRecorder.kept_bytes(trainer.network,
                                                                                 trainer.config)


def test_run_lives_in_its_own_module_and_the_package_exports_it():
    """One home for `Run` and `Status` (the trainer does not re-export them)."""
    from stacklab.lab.train import record, trainer

    assert record.Run is stacklab.Run and record.Status is stacklab.Status
    assert not hasattr(trainer, "Status")


def test_stop_from_another_thread_ends_within_one_step():
    trainer = Trainer(None, TrainConfig(task="reverse", steps=100_000))
    asked_at = []

    def on_batch_end(run):
        if run.step == 5 and not asked_at:
            asked_at.append(run.step)
            threading.Thread(target=trainer.stop).start()

    trainer.add_callback("on_batch_end", on_batch_end)
    result = {}
    worker = threading.Thread(target=lambda: result.setdefault("run", trainer.run()))
    worker.start()
    worker.join(timeout=60)
    run = result["run"]
    assert run.status == "stopped" and run.step <= asked_at[0] + 2


def test_non_finite_loss_stops_the_run_and_keeps_the_last_good_state():
    trainer = Trainer(None, TrainConfig(task="modular", steps=200, eval_every=10))

    def poison(run):
        if run.step == 25:
            with torch.no_grad():
                run.model.n1.weight[0, 0] = float("inf")

    trainer.add_callback("on_batch_end", poison)
    run = trainer.run()
    assert run.status == "diverged" and "smaller lr" in run.error
    assert all(bool(torch.isfinite(p).all()) for p in run.model.parameters())
    assert run.history[-1]["step"] == 20 and run.step == 20
    assert all(bool(torch.isfinite(t).all()) for _, t in run.snapshots["n1"])
    assert bool(torch.isfinite(run.row_grad_norm["n1"]).all())
    import json
    json.dumps(run.metrics(), allow_nan=False)  # valid JSON: no NaN anywhere


def test_events_fire_in_order_and_recorders_hook_in_first():
    trainer = Trainer(None, TrainConfig(task="position", steps=4, eval_every=2))
    seen = []
    for event in Trainer.EVENTS:
        trainer.add_callback(event, lambda run, event=event: seen.append((event, run.step)))
    # this step's snapshot is already taken when a callback's on_batch_end runs
    trainer.add_callback("on_batch_end", lambda run: seen.append(
        ("snapshot", run.snapshots["n1"][-1][0])))
    trainer.run()
    assert seen[0] == ("on_start", 0) and seen[-1] == ("on_end", 4)
    assert [e for e, _ in seen].count("on_after_backward") == 4
    assert [s for e, s in seen if e == "on_eval"] == [2, 4]
    assert ("snapshot", 4) in seen and ("on_rollback", 4) not in seen
    with pytest.raises(ValueError, match="unknown event"):
        trainer.add_callback("on_step", print)


def test_a_divergence_rolls_the_recorder_back_with_the_model():
    """Summed gradients and snapshots go back to the last evaluated state, as the model does."""
    sums = {}
    trainer = Trainer(None, TrainConfig(task="modular", steps=200, eval_every=10))
    recorder = trainer.callbacks["on_eval"][0].__self__

    def poison(run):
        if run.step == 25:
            with torch.no_grad():
                run.model.n1.weight[0, 0] = float("inf")

    trainer.add_callback("on_eval", lambda run: sums.setdefault(run.step,
                                                                recorder.grad_sum["n1"].clone()))
    trainer.add_callback("on_batch_end", poison)
    events = []
    trainer.add_callback("on_rollback", lambda run: events.append(run.step))
    run = trainer.run()
    assert events == [20] and run.status == "diverged"
    assert torch.equal(run.row_grad_norm["n1"], sums[20])


def test_no_recorders_means_nothing_recorded():
    run = Trainer(None, TrainConfig(task="position", steps=5), recorders=()).run()
    assert run.status == "finished" and run.position_nodes == [] and run.snapshots == {}


def test_layers_are_found_by_the_role_their_op_declares():
    model = stacklab.resolve(TASKS["reverse"].preset(16), ["B", 16], input_dtype="int64").build()
    assert [name for name, _ in model.layers("position_table")] == ["n1"]
    assert [name for name, _ in model.layers("attention")] == ["n2"]
    assert model.layers("nothing") == []
    assert {spec.role for spec in stacklab.catalog().values()} <= {None, *ROLES}


@pytest.mark.parametrize("source, code, words", [
    ("embedding(16, 32)\npos_embed(32)\nlinear(4)", "E_SHAPE", "use linear(16)"),
    ("embedding(16, 32)\npos_embed(32)\nmean_pool()\nlinear(16)", "E_SHAPE", "remove mean_pool()"),
    ("embedding(8, 32)\npos_embed(32)\nlinear(16)", "E_ARG", "embedding(16, 32)"),
    ("embedding(16, 32)\npos_embed(8)\nlinear(16)", "E_CONSTRAINT", "pos_embed(16)"),
    ("pos_embed(32)\nlinear(16)", "E_DTYPE", "embedding"),
])
def test_stacks_that_do_not_fit_the_task_say_how_to_fix_them(source, code, words):
    with pytest.raises(StackError) as info:
        train(source, task="reverse", seq_len=16)
    assert info.value.code == code and words in str(info.value)


@pytest.mark.parametrize("settings", [
    {"steps": 0}, {"lr": -1.0}, {"lr": float("nan")}, {"batch_size": 0}, {"seq_len": 10**6},
    {"weight_decay": -0.1}, {"task": "unknown"}, {"seed": -1}, {"device": "tpu"},
])
def test_bad_settings_are_e_arg(settings):
    with pytest.raises(StackError) as info:
        train(**{"task": "reverse", **settings})
    assert info.value.code == "E_ARG"


def test_length_probe_shows_the_cliff_past_the_trained_length():
    run = train(task="modular", target_accuracy=0.999)
    probe = length_probe(run)
    assert probe.probe_len == 2 * run.config.seq_len and probe.accuracy.shape == (probe.probe_len,)
    assert probe.inside >= 0.99 and probe.beyond < 0.5
    assert run.model.network is run.network  # the probe hands the model back as it was


def test_training_without_positions_cannot_solve_reverse():
    """Attention alone ignores order: a stack without a position table stays near chance."""
    run = train("embedding(16, 64)\nattention(4)\nlayer_norm()\nlinear(128)\nrelu()\nlinear(16)",
                task="reverse", steps=150)
    assert run.position_nodes == [] and run.final["accuracy"] < 0.3
    assert run.metrics()["position_tables"] == {}


def test_a_table_named_like_a_measure_keeps_its_scores_apart_from_the_heads(tmp_path):
    """A position table may be called ``attention_heads`` (the name under which the head
    scores at init are kept): the table's scores and the heads' stay apart, in the run, in
    ``metrics.json`` and in the stored run."""
    from stacklab.lab.measure import head_scores as heads, run_scores
    from stacklab.lab.runs.store import RunStore

    source = "embedding(16, 32)\nattention_heads = pos_embed(16)\nattention(2)\nlinear(16)"
    run = train(source, task="position", steps=20, eval_every=10)
    assert run.status == "finished" and run.position_nodes == ["attention_heads"]
    as_built = run.network.build(seed=run.config.seed)
    table_init = run_scores.model_scores(as_built, "attention_heads", 16, run.task)
    heads_init = heads.model_head_scores(as_built, run.task, 16, heads.head_sequences(run.config),
                                         run.config.eval_chunk(16))
    metrics = run.metrics()
    table = metrics["position_tables"]["attention_heads"]["scores"]
    assert table["pattern"]["init"] == table_init["pattern"] is not None
    assert table["monotonicity"]["init"] == table_init["monotonicity"]
    for h, head in enumerate(metrics["attention"]["n2"]["heads"]):
        for score, entry in head.items():
            assert entry["init"] == heads_init["n2"]["heads"][h][score]
    store = RunStore(tmp_path)
    store.save(run)
    again = store.load(run.key)
    assert again.initial_scores == run.initial_scores
    assert again.initial_measures == run.initial_measures
    assert again.metrics()["position_tables"]["attention_heads"]["scores"] == table
    assert again.head_scores() == run.head_scores()


def test_the_run_record_its_analysis_metrics_and_rebuilding_are_apart():
    """The record is data; its scores (measured once per step), metrics.json and the model
    as built are each a thing of their own that the record hands questions to."""
    from stacklab.lab.train import analysis, metrics, rebuild

    run = train(task="position", steps=10)
    assert isinstance(run.analysis, analysis.RunAnalysis)
    assert run.position_table_scores() is run.analysis.position_table_scores()  # kept per step
    assert run.metrics() == metrics.metrics_record(run)
    as_built = rebuild.model_as_built(run)
    assert torch.equal(as_built.n1.weight.float(), run.initial_tables["n1"])
