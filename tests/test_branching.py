"""Branching stacks in the lab (SPEC §18): a pre-LN block trains, every figure of its table
is drawn through the real graph, budgets count its joins, and its checkpoint reads back."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import stacklab
from stacklab import StackError, resolve
from stacklab.lab.train.budgets import Budgets
from stacklab.lab.runs.checkpoint import load_checkpoint, save_checkpoint
from stacklab.lab.figures import run_figures
from stacklab.lab.settings import TrainConfig

PRE_LN = """tok = embedding(16, 32)
x0 = pos_embed(16)
layer_norm()
h1 = attention(2, residual=false)
x1 = add(x0, h1)
layer_norm()
linear(64)
gelu()
m1 = linear(32)
x2 = add(x1, m1)
linear(16)"""


@pytest.fixture(scope="module")
def run():
    return stacklab.train(PRE_LN, task="position", steps=30, seed=0)


def test_a_pre_ln_block_trains_and_every_figure_follows_the_graph(run):
    assert run.status == "finished" and run.final["accuracy"] > 1 / 16
    drawn = {figure.key: figure for figure in run_figures(run)}
    assert not [key for key, figure in drawn.items() if figure.skipped]
    # the rows alone go through layer_norm, the attention *and* the residual join
    assert drawn["rows_alone"].score.startswith("rows decoded")
    assert drawn["attention_by_position"].score.startswith("symmetry")


def test_rows_alone_refuse_a_join_with_what_came_before_the_table():
    stack = ("tok = embedding(16, 32)\nx0 = pos_embed(16)\nh1 = attention(2, residual=false)\n"
             "x1 = add(tok, h1)\nlinear(16)")
    model = resolve(stack, "B,16", input_dtype="int64").build(seed=0)
    with pytest.raises(StackError, match=r"x1 \(add\): it also reads tok, from before x0"):
        stacklab.analysis.rows_alone(model, "x0", 16)


def test_the_budget_counts_the_branches():
    network = resolve(PRE_LN, "B,16", input_dtype="int64")
    assert network.flops(batch=1) > 0
    config = dataclasses.replace(TrainConfig(task="position"), steps=100).filled()
    Budgets().check(network, config)  # fits the library's budgets
    tiny = Budgets(flops=network.flops(batch=config.batch_size))  # less than the whole run
    with pytest.raises(StackError, match="E_BUDGET"):
        tiny.check(network, config)


def test_a_branching_checkpoint_reads_back_with_its_graph(run, tmp_path):
    path = tmp_path / "model.safetensors"
    save_checkpoint(path, run.model)
    loaded = load_checkpoint(path)
    x = torch.randint(0, 16, (4, 16))
    with torch.no_grad():
        assert torch.equal(loaded.model.eval()(x), run.model.eval()(x))
    assert "x0, h1" in loaded.network.table()  # the report keeps its inputs column
