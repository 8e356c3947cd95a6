"""A run's plan (`stacklab.lab.train.plan`): checked before a trainer exists, what the
pool checks and remembers within a bound in bytes, and what a `Trainer` trains; the budget
charges the recorders a trainer attaches."""

from __future__ import annotations

import dataclasses
import gc
import tracemalloc

import pytest
import torch

import stacklab
from stacklab import StackError, TrainConfig, Trainer
from stacklab.lab.runs.store import RunStore
from stacklab.lab.train.budgets import Budgets
from stacklab.lab.train.plan import RunPlan, plan_model, plan_run
from stacklab.lab.train.recorders import PositionTableRecorder, Recorder
from stacklab.serve.workers.plan_cache import PlanCache, stack_calls
from stacklab.serve.workers.pool import JobPool

TABLE = "embedding(16, 32)\npos_embed(16)\nlinear(16)"


def test_a_plan_is_checked_frozen_and_trained_by_a_trainer():
    plan = plan_run(TABLE, TrainConfig(task="position", steps=10))
    assert isinstance(plan, RunPlan) and plan.config.seq_len == 16 and plan.config.lr is not None
    assert plan.network.output_shape == ("B", 16, 16) and plan.task.name == "position"
    assert plan.key == Trainer(TABLE, TrainConfig(task="position", steps=10)).key
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.key = "x"
    run = Trainer(plan).run()
    assert run.status == "finished" and run.key == plan.key and run.network is plan.network
    with pytest.raises(StackError) as info:
        plan_run("embedding(16, 32)\npos_embed(8)\nlinear(16)", TrainConfig(task="position"))
    assert info.value.code == "E_CONSTRAINT"


class BigRecorder:
    """A recorder that says it keeps 3 GiB."""

    def attach(self, trainer) -> None:
        trainer.add_callback("on_end", lambda run: None)

    def kept_bytes(self, network, config) -> int:
        return 3 << 30


def test_the_budget_charges_the_recorders_the_trainer_attaches():
    config = TrainConfig(task="position", steps=10)
    budgets = Budgets(kept_bytes=2 << 30)
    assert isinstance(BigRecorder(), Recorder) and isinstance(PositionTableRecorder(), Recorder)
    Trainer(TABLE, config, budgets=budgets)  # the position table's recorder fits
    with pytest.raises(StackError) as info:
        Trainer(TABLE, config, budgets=budgets, recorders=(BigRecorder(),))
    assert info.value.code == "E_BUDGET" and "3.0 GiB" in info.value.message
    with pytest.raises(StackError, match="E_BUDGET"):  # a plan handed over is charged again
        Trainer(plan_run(TABLE, config, budgets=budgets), recorders=(BigRecorder(),))
    tight = Budgets(kept_bytes=1000)  # less than one snapshot of the table
    with pytest.raises(StackError, match="snapshots"):
        Trainer(TABLE, config, budgets=tight)
    plan = plan_run(TABLE, config, budgets=tight, recorders=())  # nothing kept, nothing charged
    assert plan.kept_bytes == 0
    run = Trainer(TABLE, config, budgets=tight, recorders=()).run()
    assert run.status == "finished" and run.snapshots == {}
    both = plan_run(TABLE, config, recorders=(PositionTableRecorder(), BigRecorder()))
    assert both.kept_bytes == (3 << 30) + PositionTableRecorder.kept_bytes(both.network,
                                                                           both.config)


def test_a_trainer_trains_a_model_built_beforehand_as_it_is():
    network = stacklab.resolve(TABLE, ["B", 16], input_dtype="int64")
    model = network.build(seed=3)
    with torch.no_grad():
        model.n1.weight.zero_()  # a start no seed gives
    start = model.n1.weight.detach().clone()
    trainer = Trainer(model, TrainConfig(task="position", steps=30))
    assert trainer.config.seq_len == 16
    assert trainer.key != Trainer(TABLE, TrainConfig(task="position", steps=30)).key
    run = trainer.run()
    assert run.model is model and run.status == "finished"
    assert torch.equal(run.initial_tables["n1"], start) and run.row_drift("n1")[:16].sum() > 0
    assert run.metrics()["position_tables"]["n1"]["scores"]["pattern"]["init"] is not None
    with pytest.raises(StackError, match="seq_len"):
        plan_model(model, TrainConfig(task="position", seq_len=8))
    with pytest.raises(StackError) as info:
        Trainer(torch.nn.Linear(2, 2), TrainConfig(task="position"))
    assert info.value.code == "E_VALUE" and "build the model from a stack" in info.value.hint


def test_a_comment_changes_nothing_the_cache_remembers(tmp_path):
    pool = JobPool(workers=1, store=RunStore(tmp_path))
    try:
        config = TrainConfig(task="position", steps=10)
        first = pool.check(TABLE, config)
        again = pool.check("# my stack\n" + TABLE.replace("\n", "  # a comment\n", 1) + "\n\n",
                           config)
        assert again is first and len(pool._checked) == 1
        assert pool.check(TABLE.replace("32", "48"), config) is not first
        assert len(pool._checked) == 2
    finally:
        pool.shutdown()
    assert stack_calls("a = op('#x')  # note\n\n  b()   ") == "a = op('#x')\n  b()"


def _long_stack(index: int) -> str:
    """A distinct stack of about 100,000 characters (long lines keep resolving it quick)."""
    line = "layer_norm(" + " " * 986 + ")\n"
    return f"embedding(16, {32 + index})\npos_embed(16)\n" + line * 101 + "linear(16)\n"


def test_forty_long_stacks_stay_within_the_caches_bound_in_bytes():
    """40 visits with distinct stacks of 100,000 characters: the cache holds at most its
    bound (by `RunPlan.held_bytes`, which the next test shows bounds a plan's memory)."""
    bound = 8 << 20
    cache = PlanCache(max_bytes=bound)
    config = TrainConfig(task="position")
    for index in range(40):
        source = _long_stack(index)
        assert len(source) >= 100_000
        cache.put(source, config, plan_run(source, config))
        assert cache.bytes <= bound
    kept = [plan for plan, _ in cache._plans.values()]
    assert 1 < len(kept) < 40 and sum(plan.held_bytes() for plan in kept) == cache.bytes
    assert cache.get(_long_stack(39), config) is kept[-1]  # the newest stay
    assert cache.get(_long_stack(0), config) is None  # the oldest went


@pytest.mark.parametrize("source", [
    "embedding(16, 32)\npos_embed(16)\n" + "layer_norm()\n" * 600 + "linear(16)\n",
    "embedding(16, 32)\npos_embed(16)\n" + "".join(f"x{i} = linear(32, bias=true)\n"
                                                   for i in range(300)) + "linear(16)\n",
    _long_stack(0),
    "embedding(16, 32)\npos_embed(16)\n" + ("# " + "x" * 990 + "\n") * 99 + "linear(16)\n",
])
def test_a_plans_held_bytes_bound_what_it_holds(source):
    """`RunPlan.held_bytes`, the cache's measure, is at least what a plan holds in memory."""
    config = TrainConfig(task="position")
    tracemalloc.start()
    try:
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        own = source.replace("\n", "\n ", 1)  # a copy of the text only the plan holds
        plan = plan_run(own, config)
        del own
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held <= plan.held_bytes() <= 4 * held + (64 << 10)
