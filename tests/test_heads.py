"""Every attention, every head (SPEC §19), and the tasks induction and repeat: their data,
the masked loss and accuracy, per-head scores on constructed patterns, metrics.json, the
two figures for one and two layers, and the live pattern figure."""

from __future__ import annotations

import json

import pytest
import torch

from stacklab import figures
from stacklab.lab.measure import head_scores as heads
from stacklab.lab.figures import drawing
from stacklab.lab.tasks import IGNORE, PAD, TASKS
from stacklab.lab.settings import TrainConfig
from stacklab.lab.train.trainer import Trainer, train

ONE_LAYER = "embedding(16, 32)\npos_embed(32)\nattention(2, causal=true)\nlinear(15)"


@pytest.fixture(scope="module")
def induction():
    run = train(task="induction", steps=40, eval_every=20)  # the two-layer preset
    assert run.status == "finished"
    return run


@pytest.fixture(scope="module")
def one_layer():
    run = train(ONE_LAYER, task="repeat", steps=20, eval_every=10)
    assert run.status == "finished"
    return run


# -- the tasks -------------------------------------------------------------------------


def test_induction_sequences_repeat_a_prefix_then_pad():
    task = TASKS["induction"]
    x, y = task.batch(512, 16, torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (512, 16) and x.dtype == torch.long
    L = task.copy_lengths(x)
    assert int(L.min()) == 4 and int(L.max()) == 8  # drawn from 4..T/2, both ends seen
    for row, length in zip(x, L.tolist()):
        prefix = row[:length]
        assert torch.equal(row[length:2 * length], prefix)  # the same tokens again
        assert len(set(prefix.tolist())) == length and int(prefix.max()) < PAD  # distinct
        assert (row[2 * length:] == PAD).all()  # the rest is padding
    for row, labels, length in zip(x, y, L.tolist()):
        known = torch.zeros(16, dtype=torch.bool)
        known[length:2 * length - 1] = True  # the second copy, but its last position
        assert (labels[~known] == IGNORE).all()
        assert torch.equal(labels[known], row[1:][known[:-1]])  # the next token


def test_repeat_fixes_the_copy_length_at_half():
    task = TASKS["repeat"]
    x, y = task.batch(8, 12, torch.Generator().manual_seed(1))
    assert (task.copy_lengths(x) == 6).all() and (x != PAD).all()
    assert torch.equal(x[:, 6:], x[:, :6])
    assert (y[:, :6] == IGNORE).all() and (y[:, 11] == IGNORE).all()
    assert torch.equal(y[:, 6:11], x[:, 1:6])
    assert task.partner(12)[6:] == [1, 2, 3, 4, 5, 6] and task.partner(12)[:6] == [None] * 6


def test_loss_and_accuracy_count_only_labelled_positions():
    run = train(task="induction", steps=2, eval_every=1)
    x, y = run.task.eval_set(16)
    logits = run.model(x).detach()
    labelled = y != IGNORE
    expected_loss = torch.nn.functional.cross_entropy(logits[labelled], y[labelled]).item()
    expected_accuracy = (logits.argmax(-1)[labelled] == y[labelled]).float().mean().item()
    assert run.final["loss"] == pytest.approx(expected_loss, rel=1e-4)
    assert run.final["accuracy"] == pytest.approx(expected_accuracy, abs=1e-6)


def test_tasks_are_listed_with_their_presets():
    assert TASKS["induction"].preset().count("attention(4, causal=true)") == 2
    assert TASKS["repeat"].preset().count("attention(") == 1
    assert TASKS["induction"].pattern_score == "induction"
    assert TASKS["repeat"].pattern_score == "partner_attention"


# -- head scores on constructed patterns ------------------------------------------------


def test_head_scores_of_a_constructed_pattern_are_exact():
    T = 8
    previous = torch.zeros(T, T)
    previous[0, 0] = 1.0
    previous[torch.arange(1, T), torch.arange(T - 1)] = 1.0  # every t looks at t-1
    uniform = torch.ones(T, T) / T
    weights = torch.stack([previous, uniform])[None].repeat(2, 1, 1, 1)  # (N=2, H=2, T, T)
    assert heads.head_score(weights, heads.previous_token_pairs(T)).tolist() == [1.0, 1 / T]
    L = torch.tensor([3, 4])
    induction = torch.zeros(2, 1, T, T)
    for n, length in enumerate(L.tolist()):
        for t in range(length, 2 * length):
            induction[n, 0, t, t - length + 1] = 0.5
    pairs = heads.induction_pairs(L, T)
    assert int(pairs.sum()) == 3 + 4  # t = L..2L-1 of each sequence
    assert heads.head_score(induction, pairs).tolist() == [0.5]
    assert heads.head_score(weights, pairs).tolist() == [0.0, 1 / T]
    partner = heads.partner_pairs([None, 0, 0, 1, None, None, None, None])
    assert heads.head_score(weights, partner).tolist() == [1 / 3, 1 / T]  # only 1 -> 0


def test_scores_that_do_not_apply_are_left_out():
    pairs = heads.score_pairs(TASKS["modular"], torch.zeros(2, 8, dtype=torch.long))
    assert list(pairs) == ["previous_token"]
    assert list(heads.score_pairs(TASKS["induction"], TASKS["induction"].eval_set(8)[0])) == [
        "previous_token", "induction"]
    assert list(heads.score_pairs(TASKS["reverse"], torch.zeros(2, 8, dtype=torch.long))) == [
        "previous_token", "partner"]


# -- metrics.json ------------------------------------------------------------------------


def test_metrics_hold_every_head_trained_and_at_init(induction):
    metrics = json.loads(json.dumps(induction.metrics()))
    attention = metrics["attention"]
    assert list(attention) == ["n2", "n3"]
    assert [entry["layer"] for entry in attention.values()] == [1, 2]
    for entry in attention.values():
        assert len(entry["heads"]) == 4
        for head in entry["heads"]:
            assert list(head) == ["previous_token", "induction"]
            for score in head.values():
                assert set(score) == {"value", "init"} and 0 <= score["value"] <= 1
    init = induction.initial_head_scores()
    as_built = induction.network.build(seed=induction.config.seed)
    again = heads.model_head_scores(as_built, induction.task, 16, 64)
    assert init["n2"]["heads"][0]["induction"] == again["n2"]["heads"][0]["induction"]
    pattern = metrics["position_tables"]["n1"]["scores"]["pattern"]
    assert pattern["name"] == "induction"
    assert pattern["init"] < 0.2  # about uniform over what a causal head sees


def test_a_stack_without_attention_has_no_attention_block():
    run = train("embedding(8, 16)\npos_embed(32)\nlinear(8)", task="modular", steps=3)
    assert "attention" not in run.metrics()


# -- figures -----------------------------------------------------------------------------


@pytest.mark.parametrize("fixture, layers", [("one_layer", 1), ("induction", 2)])
def test_both_head_figures_are_drawn(request, fixture, layers):
    run = request.getfixturevalue(fixture)
    drawn = {f.key: f for f in figures.run_figures(run)}
    grid, scores = drawn["heads_attention"], drawn["head_scores"]
    assert not grid.skipped and not scores.skipped
    heads_per_layer = run.model.layers("attention")[0][1].heads
    assert len(grid.figure.data) == layers * heads_per_layer
    assert "layer 1" in grid.figure.layout.annotations[0].text
    assert "previous token" in grid.figure.layout.annotations[0].text
    assert len(scores.figure.data) == 2 * (3 if fixture == "one_layer" else 2)  # trained, init
    assert scores.figure.data[0].z.shape == (layers, heads_per_layer)
    assert scores.score.startswith("largest induction score")
    for figure in (grid, scores):
        assert len(figure.figure.to_json()) < 200_000
    assert [f.key for f in figures.run_figures(run)][:2] == ["training_curves", "cosine"]


def test_the_live_pattern_figure_of_induction_is_the_head_scores(induction):
    pattern = figures.pattern_figure(induction)
    assert pattern.key == induction.task.pattern_figure == "head_scores"
    assert not pattern.skipped and pattern.score.startswith("largest induction score")
    no_table = train("embedding(16, 32)\nattention(2, causal=true, position=\"rope\")\n"
                     "attention(2, causal=true, position=\"rope\")\nlinear(15)",
                     task="induction", steps=3)
    assert figures.pattern_figure(no_table).key == "head_scores"
    assert drawing.PATTERN_WITHOUT_TABLE == "attention_without_table"


def test_the_live_figure_is_drawn_at_each_evaluation():
    trainer = Trainer(None, TrainConfig(task="induction", steps=20, eval_every=10))
    drawn = []
    trainer.add_callback("on_eval", lambda run: drawn.append(figures.pattern_figure(run)))
    trainer.run()
    assert [figure.key for figure in drawn] == ["head_scores", "head_scores"]
    assert drawn[0].figure.data[0].z.tolist() != drawn[1].figure.data[0].z.tolist()


def test_compare_reads_past_t_accuracy_of_a_task_with_unlabelled_positions():
    """At a longer length, induction's last position is never labelled: its accuracy is
    null, and the past-T figure averages the positions that are (a sweep crashed here)."""
    from stacklab.lab.reports.compare import summary

    run = train(task="induction", steps=20, eval_every=20, eval_lengths="16,24", seed=0)
    per_position = run.metrics()["length_generalization"]["24"]["per_position"]
    assert per_position[-1] is None and any(v is not None for v in per_position[16:])
    past = summary(run)["length_generalization"]["24"]["past_T"]
    labelled = [v for v in per_position[16:] if v is not None]
    assert past == pytest.approx(sum(labelled) / len(labelled), abs=1e-6)


# -- the head-score registry -------------------------------------------------------------


def test_a_head_score_declared_once_reaches_the_scores_the_figures_and_their_captions(
        monkeypatch):
    """Adding a head score is one `HEAD_SCORES` entry (a new one raised KeyError in the
    figures): declared here for this test alone (monkeypatch restores the table), it reaches
    the scores, metrics.json, both head figures, their captions and Compare's columns."""
    from stacklab.lab.figures.context import FigureContext
    from stacklab.lab.reports.compare import best_heads, column_help, table_rows

    def first_token_pairs(task, x):
        pairs = torch.zeros(1, x.shape[1], x.shape[1], dtype=torch.bool)
        pairs[0, 1:, 0] = True  # (t, 0) for t = 1..T-1
        return pairs

    monkeypatch.setitem(heads.HEAD_SCORES, "first_token", heads.HeadScore(
        "first_token", "first token", "the weight from t to position 0", "every task",
        first_token_pairs, of_every_task=True))
    run = train(ONE_LAYER, task="repeat", steps=4, eval_every=2)
    scores = run.head_scores()
    (node,) = scores  # the one attention
    head = scores[node]["heads"][0]
    assert list(head) == ["previous_token", "induction", "partner", "first_token"]
    assert 0.0 <= head["first_token"]["value"] <= 1.0 and head["first_token"]["init"] is not None
    assert "first_token" in json.loads(json.dumps(run.metrics()))["attention"][node]["heads"][0]
    drawn = {f.key: f for f in figures.run_figures(run)}
    grid, grids = drawn["heads_attention"], drawn["head_scores"]
    assert "first token" in grid.figure.layout.annotations[0].text
    assert "first token" in grid.caption
    titles = [a.text for a in grids.figure.layout.annotations]
    assert "first token, trained" in titles and "first token, at init" in titles
    assert len(grids.figure.data) == 2 * 4  # four scores, trained and at init
    assert "first token, the weight from t to position 0." in grids.caption
    ctx = FigureContext(run, run.position_nodes[0])
    assert "first token" in figures.catalog.heads_caption(ctx)
    assert "layer 1 first token" in best_heads(run.metrics())
    assert "layer 1 first token" in column_help(table_rows([("run", run)]))
