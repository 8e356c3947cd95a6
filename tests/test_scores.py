"""Every picture right and with a number (issue 12, SPEC §14-15): the scores, attention by
position through the real path, views that hold at any length, the length probe."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import stacklab
from stacklab import analysis, figures
from stacklab.lab.measure import score_maths as score_maths
from stacklab.lab.train.trainer import train

LINEAR_BETWEEN = ("embedding(16, 64)\npos_embed(32)\nlinear(32)\nattention(4)\nlayer_norm()\n"
                  "linear(128)\nrelu()\nlinear(16)")


# -- the score functions on tables whose answer is known ---------------------------------


def test_table_scores_on_known_tables():
    sinusoid = analysis.sinusoidal_table(32, 64)
    assert score_maths.translation_invariance(sinusoid) == pytest.approx(1.0, abs=1e-6)
    assert score_maths.monotonicity(sinusoid) > 0.9
    assert score_maths.position_probe_error(sinusoid) < 0.5
    random = torch.randn(32, 64, generator=torch.Generator().manual_seed(0))
    assert abs(score_maths.monotonicity(random)) < 0.2
    assert abs(score_maths.distance_rank(random)) < 0.2
    assert score_maths.position_probe_error(random) > 4
    periodic = torch.randn(8, 16).repeat(4, 1)
    assert score_maths.period_contrast(periodic, 8) > 0.8
    assert score_maths.cosine_by_distance(periodic)[7] == pytest.approx(1.0)
    angle = torch.arange(16) * 0.2  # a rotating row: cosine = cos(0.2 * distance)
    circle = torch.stack([angle.cos(), angle.sin()], dim=1)
    assert score_maths.distance_rank(circle) > 0.99
    assert score_maths.symmetry(None) == 1.0
    scores = torch.randn(8, 8)
    assert score_maths.symmetry(scores + scores.T) == pytest.approx(1.0)
    assert score_maths.symmetry(scores - scores.T) == pytest.approx(-1.0)
    weights = torch.eye(4).flip(0)
    assert score_maths.partner_attention(weights, [3, 2, 1, 0]) == 1.0
    assert score_maths.rows_decoded(torch.eye(5) * 3) == 1.0


# -- finding 1: attention by position goes through the ops between ------------------------


def test_attention_by_position_goes_through_a_layer_norm_between():
    """The review: with a layer_norm between the table and the attention, the old analysis
    fed the raw rows to qkv (partner weight 0.72 where the real path gives 0.9999)."""
    run = train("embedding(16, 64)\npos_embed(32)\nlayer_norm()\nattention(4)\nlayer_norm()\n"
                "linear(128)\nrelu()\nlinear(16)", task="reverse", steps=60)
    model = run.model
    with torch.no_grad():
        rows = model.get_submodule("n1").weight[:16][None]
        normed = model.get_submodule("n2")(rows)
        expected = model.get_submodule("n3").weights(normed)[0].mean(0)
        raw = model.get_submodule("n3").weights(rows)[0].mean(0)
    got = analysis.positional_attention(run, "n1")
    np.testing.assert_allclose(got.numpy(), expected.numpy(), atol=1e-6)
    assert not np.allclose(got.numpy(), raw.numpy(), atol=1e-3)
    assert model.training  # the analysis gives the mode back


def test_a_linear_between_trains_from_the_cli_and_its_report_goes_through_it(tmp_path, cli):
    """The review: a linear(32) between raised a RuntimeError in run_figures, so `stacklab
    train` exited 1 with a traceback and wrote no report.html."""
    stack = tmp_path / "stack.txt"
    stack.write_text(LINEAR_BETWEEN)
    code, _, err = cli("train", str(stack), "--task", "reverse", "--steps", "40",
                       "--out", str(tmp_path / "out"))
    assert code == 0, err
    report = (tmp_path / "out" / "report.html").read_text()
    assert "Attention by position alone" in report and "Traceback" not in report
    assert "partner attention " in report and "(at init " in report
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    pattern = metrics["position_tables"]["n1"]["scores"]["pattern"]
    assert pattern["name"] == "partner_attention" and pattern["value"] is not None
    run = train(LINEAR_BETWEEN, task="reverse", steps=5)
    model = run.model
    with torch.no_grad():
        through = model.get_submodule("n2")(model.get_submodule("n1").weight[:16][None])
        expected = model.get_submodule("n3").weights(through)[0].mean(0)
    np.testing.assert_allclose(analysis.positional_attention(run, "n1").numpy(),
                               expected.numpy(), atol=1e-6)


def test_a_path_that_cannot_be_evaluated_is_skipped_with_its_reason():
    """A table whose rows overflow the linear before the attention: the attention figures
    say why they are not drawn; everything else is drawn; no traceback."""
    run = train(LINEAR_BETWEEN, task="reverse", steps=5)
    with torch.no_grad():
        run.model.get_submodule("n1").weight[3] = 3e38
    drawn = {f.title: f for f in figures.run_figures(run)}
    skipped = drawn["Attention by position alone"]
    assert skipped.caption.startswith("Skipped: the rows of n1 alone become infinite or nan "
                                      "at n2 (linear)")
    assert "not drawn" in skipped.figure.layout.title.text
    assert skipped.skipped and skipped.key == "attention_by_position" and not skipped.score
    assert "Cosine similarity of the rows" in drawn and "Gradient per row" in drawn
    assert not drawn["Cosine similarity of the rows"].skipped
    entry = run.position_table_scores()["n1"]
    assert entry["pattern"]["value"] is None and "n2 (linear)" in entry["skipped"]["pattern"]
    assert "not measured" in analysis.score_text(entry, "pattern")


# -- finding 2: position shows what it learns ----------------------------------------------


def test_the_position_task_shows_rows_that_decode_alone():
    run = stacklab.train(task="position", seed=0)
    entry = run.position_table_scores()["n1"]
    assert entry["pattern"] == {"name": "rows_decoded", "value": 1.0,
                                "init": entry["pattern"]["init"]}
    assert entry["pattern"]["init"] <= 2 / 16
    pattern = figures.pattern_figure(run)
    assert pattern.title == "Each row alone through the rest of the stack"
    assert pattern.key == run.task.pattern_figure == "rows_alone" and not pattern.skipped
    z = np.asarray(pattern.figure.data[0].z)
    assert (z.argmax(1) == np.arange(16)).all()  # the diagonal
    assert "mean norm" in pattern.caption and pattern.score.startswith("rows decoded 1.00")


# -- finding 4: the length probe -----------------------------------------------------------


def test_the_length_probe_says_what_it_measures_and_restores_the_mode():
    run = stacklab.train(task="modular", steps=120)
    run.model.train(False)
    probe = analysis.length_probe(run)
    assert not run.model.training  # the mode it was in
    run.model.train(True)
    analysis.length_probe(run)
    assert run.model.training
    assert probe.inside > 0.9 and probe.baseline_inside < 0.3
    for task in ("reverse", "position", "sort"):
        other = stacklab.train(task=task, steps=5)
        with pytest.raises(stacklab.StackError, match="does not apply"):
            analysis.length_probe(other)
        drawn = {f.title: f for f in figures.run_figures(other)}
        assert drawn["Length probe"].caption.startswith("Skipped: the length probe does not "
                                                        f"apply to {task}")
        assert drawn["Length probe"].skipped and drawn["Length probe"].key == "length_probe"


# -- finding 5 and 6 -----------------------------------------------------------------------


def test_learned_vs_sinusoidal_is_centred_and_has_its_number():
    """The review: at T=16, D=64 every off-diagonal cosine of the sinusoid is 0.61-1.0, so
    its panel was solid red; centred, they reach below -0.5."""
    sinusoid = analysis.sinusoidal_table(16, 64)
    raw = analysis.similarity(sinusoid).numpy()
    off = ~np.eye(16, dtype=bool)
    assert raw[off].min() > 0.6
    fig = figures.learned_vs_sinusoidal(torch.randn(32, 64), 16)
    assert np.asarray(fig.data[1].z)[off].min() < -0.5
    assert "resemblance r = " in fig.layout.title.text
    assert figures.sinusoidal_resemblance(sinusoid) == pytest.approx(1.0)


def test_captions_pca_and_the_attention_forming():
    run = stacklab.train(task="reverse", steps=300)  # the partners form at about step 260
    drawn = {f.title: f for f in figures.run_figures(run)}
    # the caption said 256 sequences; one training batch (64) is what is averaged
    assert "averaged over 64 held-out sequences" in drawn["Attention on held-out data"].caption
    # PCA fitted on the trained rows: the untrained rows do not shape the axes
    table = run.table("n1")
    fitted = analysis.pca(table, 2, fit_rows=16)
    alone = analysis.pca(table[:16], 2)
    np.testing.assert_allclose(fitted.coords[:16].abs().numpy(), alone.coords.abs().numpy(),
                               atol=1e-4)
    # the attention map is snapshotted, so Explore can animate it forming
    animation = drawn["Attention by position during training"].figure
    assert len(animation.frames) == min(figures.MAX_FRAMES, len(run.attention_snapshots["n1"]))
    first, last = run.attention_snapshots["n1"][0][1], run.attention_snapshots["n1"][-1][1]
    partners = list(range(15, -1, -1))
    assert (score_maths.partner_attention(last, partners)
            > 2 * score_maths.partner_attention(first, partners))


def test_the_last_frame_is_the_table_a_run_ends_with():
    """A run stopped between snapshots (every 3 steps here) ends on a frame of its own."""
    trainer = stacklab.Trainer(None, stacklab.TrainConfig(task="reverse", steps=100))
    trainer.add_callback("on_batch_end", lambda run: trainer.stop() if run.step == 23 else None)
    run = trainer.run()
    assert run.status == "stopped" and run.step == 23
    assert [step for step, _ in run.snapshots["n1"]][-2:] == [21, 23]
    assert torch.equal(run.snapshots["n1"][-1][1], run.table("n1")[:len(run.snapshots["n1"][-1][1])])
    assert run.attention_snapshots["n1"][-1][0] == 23


# -- the scores block of metrics.json ------------------------------------------------------


def test_metrics_hold_every_score_trained_and_at_init(tmp_path):
    run = stacklab.train(task="modular", steps=100)
    metrics = json.loads(json.dumps(run.metrics()))  # plain JSON, no nan
    scores = metrics["position_tables"]["n1"]["scores"]
    for name in ("translation_invariance", "monotonicity", "symmetry", "position_probe_error"):
        assert set(scores[name]) == {"value", "init"}
    assert len(scores["cosine_by_distance"]["value"]) == 31
    assert scores["pattern"]["name"] == "period_contrast" and scores["pattern"]["value"] > 0.5
    from stacklab.lab.runs.store import RunStore

    store = RunStore(tmp_path)
    store.save(run)
    again = store.load(run.key)
    assert again.position_table_scores() == run.position_table_scores()
    assert again.initial_scores == run.initial_scores


def test_every_preset_shows_its_pattern_for_seeds_0_to_2():
    """The floors of issue 12, for each task's preset and seeds 0, 1 and 2 (the README's
    task table quotes these numbers, from bench/pattern_scores.py)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent.parent / "bench"))
    import pattern_scores

    found = pattern_scores.measure()
    for name, row in found.items():
        assert row["meets_floor"], (name, row)
        if row["score"] == "partner_attention" and name != "lookback":
            assert row["init_max"] <= 2 / row["T"], (name, row)  # about uniform: 1/T
