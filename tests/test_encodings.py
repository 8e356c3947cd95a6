"""Position encodings inside attention (issue 13, SPEC §16): RoPE, ALiBi, relative bias,
none; length generalization; views for stacks without a position table."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import stacklab
from stacklab import StackError, analysis, figures, resolve
from stacklab.ops.attention import Attention, alibi_slopes, relative_bucket, rope_rotate


def stack(position: str, causal: bool = True, table: str = "") -> str:
    return (f"embedding(16, 64)\n{table}attention(4, causal={'true' if causal else 'false'}, "
            f'position="{position}")\nlayer_norm()\nlinear(128)\nrelu()\nlinear(16)')


def test_parameter_counts_are_exact():
    base = 4 * 64 * 64 + 4 * 64
    for position, extra in (("none", 0), ("rope", 0), ("alibi", 0), ("relative", 4 * 32)):
        network = resolve(f'attention(4, position="{position}")', ["B", 16, 64])
        assert network.param_count == base + extra
    network = resolve('attention(4, position="relative", buckets=8)', ["B", 16, 64])
    assert network.param_count == base + 4 * 8


def test_an_odd_rope_head_width_is_a_constraint_error_with_a_fix():
    with pytest.raises(StackError) as caught:
        resolve('attention(2, position="rope")', ["B", 12, 6])  # 6 / 2 = 3 features per head
    err = caught.value
    assert err.code == "E_CONSTRAINT" and "even width" in err.message and "D=6 / heads=2" in err.message
    assert "is even" in err.hint
    resolve('attention(3, position="alibi")', ["B", 12, 6])  # only rope needs an even width
    with pytest.raises(StackError, match='one of "none", "rope", "alibi", "relative"'):
        resolve('attention(2, position="sinusoid")', ["B", 12, 16])


def test_rope_scores_depend_only_on_the_offset():
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(1, 1, 1, 8, generator=generator).expand(1, 1, 12, 8)
    k = torch.randn(1, 1, 1, 8, generator=generator).expand(1, 1, 12, 8)
    scores = rope_rotate(q) @ rope_rotate(k).transpose(-1, -2)  # (1, 1, 12, 12)
    for offset in range(-5, 6):
        diagonal = scores[0, 0].diagonal(offset)
        assert torch.allclose(diagonal, diagonal[0].expand_as(diagonal), atol=1e-5)
    assert torch.allclose(rope_rotate(q).norm(dim=-1), q.norm(dim=-1))  # a rotation


def test_alibi_slopes_and_relative_buckets():
    assert alibi_slopes(8).tolist() == pytest.approx([2 ** -(i + 1) for i in range(8)])
    assert len(alibi_slopes(6)) == 6 and (alibi_slopes(6) > 0).all()
    offsets = torch.arange(-20, 21)
    both = relative_bucket(offsets, 32, causal=False)
    assert (both < 32).all() and both[20] == 0 and both[21] != both[19]  # left != right
    causal = relative_bucket(offsets, 32, causal=True)
    assert (causal[20:] == 0).all() and len(set(causal[:20].tolist())) > 5


def test_every_encoding_trains_and_is_causal_where_asked():
    for position in ("none", "rope", "alibi", "relative"):
        run = stacklab.train(stack(position), task="shift", steps=30, seed=0)
        assert run.status == "finished" and run.position_nodes == []
        attention = run.model.get_submodule("n1")
        x = torch.randn(2, 16, 64)
        weights = attention.weights(x)
        assert torch.allclose(weights.sum(-1), torch.ones(2, 4, 16), atol=1e-5)
        assert (weights.triu(1) == 0).all()
        out = attention(x)
        manual = x + attention.proj((weights @ attention.heads_qkv(x)[2]).transpose(1, 2)
                                    .reshape(2, 16, 64))
        assert torch.allclose(out, manual, atol=1e-4), position  # fused path == spelled out


def test_a_stack_without_any_position_op_trains():
    run = stacklab.train("embedding(16, 64)\nattention(4)\nlinear(16)", task="reverse", steps=20)
    assert run.status == "finished" and run.position_nodes == []
    titles = [f.title for f in figures.run_figures(run)]
    assert "Attention by position alone (no table)" in titles
    assert "Attention score by offset" in titles


def test_views_without_a_table_show_what_the_encoding_does():
    alibi = stacklab.train(stack("alibi", causal=False), task="shift", steps=5)
    name, weights, by_offset = analysis.attention_without_table(alibi)
    assert name == "n1" and weights.shape == (16, 16) and by_offset.shape == (4, 31)
    # ALiBi without the causal mask: the same penalty left and right (symmetric per head)
    assert (by_offset - by_offset.flip(1)).abs().max() < 0.05 * by_offset.abs().max()
    rope = stacklab.train(stack("rope"), task="shift", steps=5)
    drawn = {f.title: f for f in figures.run_figures(rope)}
    assert 'position="rope"' in drawn["Attention by position alone (no table)"].caption
    assert drawn["Attention by position alone (no table)"].score.startswith("partner attention")
    metrics = json.loads(json.dumps(rope.metrics()))
    assert metrics["attention_by_position"]["position"] == "rope"
    assert set(metrics["attention_by_position"]["pattern"]) == {"name", "value", "init"}
    assert figures.pattern_figure(rope).title == "Attention by position alone (no table)"
    assert figures.pattern_figure(rope).key == "attention_without_table"


def test_length_generalization_reports_each_length_and_capacity(tmp_path, cli):
    file = tmp_path / "learned.txt"
    file.write_text("embedding(16, 64)\npos_embed(32)\nattention(4, causal=true)\nlayer_norm()\n"
                    "linear(128)\nrelu()\nlinear(16)")
    code, _, err = cli("train", str(file), "--task", "shift", "--steps", "60",
                       "--eval-lengths", "16, 32,64,32", "--out", str(tmp_path / "out"))
    assert code == 0, err
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    found = metrics["length_generalization"]
    assert list(found) == ["16", "32", "64"]
    assert len(found["32"]["per_position"]) == 32 and 0 <= found["32"]["accuracy"] <= 1
    assert "pos_embed(32) holds only 32" in found["64"]["error"]  # past the table: said
    assert found["16"]["accuracy"] == pytest.approx(metrics["final"]["accuracy"], abs=0.05)
    report = (tmp_path / "out" / "report.html").read_text()
    assert "Length generalization" in report and "length 64: beyond capacity" in report
    code, _, err = cli("train", "--task", "shift", "--eval-lengths", "0,5", "--out",
                       str(tmp_path / "bad"))
    assert code == 2 and "eval-lengths" in err


def test_rope_reaches_past_the_trained_length_where_a_table_cannot():
    learned = stacklab.train(stack("none", table="pos_embed(64)\n"), task="shift", steps=600,
                             eval_lengths="32")
    rope = stacklab.train(stack("rope"), task="shift", steps=600, eval_lengths="32")
    past = {name: np.mean(run.length_generalization["32"]["per_position"][16:])
            for name, run in (("learned", learned), ("rope", rope))}
    assert past["learned"] < 0.2 and past["rope"] > 0.6, past


def test_eval_lengths_past_the_activation_budget_are_refused_first(tmp_path, cli):
    file = tmp_path / "rope.txt"
    file.write_text('embedding(16, 64)\nattention(4, causal=true, position="rope")\nlinear(16)')
    code, _, err = cli("train", str(file), "--task", "shift", "--steps", "5",
                       "--eval-lengths", "65536", "--out", str(tmp_path / "x"))
    assert code == 1 and "E_BUDGET" in err and "evaluating at length 65536" in err
    assert not (tmp_path / "x" / "metrics.json").exists()


def test_the_progress_bar_ends_on_the_final_accuracy(tmp_path, cli):
    code, _, err = cli("train", "--task", "shift", "--steps", "60", "--out", str(tmp_path / "r"))
    assert code == 0
    final = json.loads((tmp_path / "r" / "metrics.json").read_text())["final"]["accuracy"]
    shown = err.split("held-out acc ")[-1].split()[0]
    assert shown == f"{final:.3f}"
