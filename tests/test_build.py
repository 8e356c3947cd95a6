"""The built module: pos_embed's exact semantics, run-time checks and re-resolving."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from stacklab import StackError, StackModule, resolve
from stacklab.ops.pos_embed import PosEmbed

STEM = "embedding(500, 16)\npos_embed(32)\nlinear(4)"


def stem(T=12, **kw):
    return resolve(STEM, ["B", T], input_dtype="int64", **kw)


class RecordOps(TorchDispatchMode):
    """Records every aten op that runs."""

    def __init__(self):
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


def test_node_names_become_submodule_names():
    model = resolve("tok = embedding(500, 16)\npos_embed(32)\nhead = linear(4)", ["B", 12],
                    input_dtype="int64").build(seed=0)
    assert isinstance(model, StackModule)
    assert [name for name, _ in model.named_children()] == ["tok", "n1", "head"]
    assert set(model.state_dict()) == {"tok.weight", "n1.weight", "head.weight", "head.bias"}


def test_pos_embed_forward_is_a_broadcast_add_of_the_first_rows():
    layer = PosEmbed(32, 16)
    x = torch.randn(4, 12, 16)
    with RecordOps() as record:
        out = layer(x)
    assert torch.equal(out, x + layer.weight[:12])
    # a slice and an add: no index tensor, no arange, no expand, no gather/embedding
    assert not {"arange", "expand", "index", "index_select", "embedding", "gather"} & set(record.ops)
    assert set(record.ops) <= {"slice", "add", "_to_copy"}


def test_pos_embed_init_is_normal_with_std_002():
    torch.manual_seed(0)
    weight = PosEmbed(4096, 64).weight.detach()
    assert abs(weight.mean().item()) < 1e-3
    assert weight.std().item() == pytest.approx(0.02, rel=0.02)


def test_rows_beyond_t_get_an_exactly_zero_gradient():
    model = stem(T=12).build(seed=0)
    ids = torch.randint(0, 500, (8, 12))
    model(ids).square().sum().backward()
    grad = model.n1.weight.grad
    assert torch.count_nonzero(grad[12:]) == 0
    assert bool((grad[:12].norm(dim=1) > 0).all())


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.float16])
def test_pos_embed_computes_in_the_input_dtype(dtype):
    layer = PosEmbed(8, 4)
    out = layer(torch.randn(2, 5, 4, dtype=dtype))
    assert out.dtype == dtype


@pytest.mark.parametrize("dtype", ["float64", "bfloat16"])
def test_built_stack_uses_the_compute_dtype(dtype):
    model = stem(dtype=dtype).build(seed=0)
    out = model(torch.randint(0, 500, (2, 12)))
    assert out.dtype == getattr(torch, dtype)
    assert all(p.dtype == getattr(torch, dtype) for p in model.parameters())


def test_train_and_eval_give_the_same_output():
    model = stem().build(seed=0)
    ids = torch.randint(0, 500, (3, 12))
    train_out = model.train()(ids)
    assert torch.equal(train_out, model.eval()(ids))


def test_seeded_builds_are_reproducible_and_leave_the_global_rng_alone():
    state = torch.random.get_rng_state()
    a, b = stem().build(seed=7), stem().build(seed=7)
    assert torch.equal(torch.random.get_rng_state(), state)
    for (ka, va), (kb, vb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert ka == kb and torch.equal(va, vb)
    c, d = stem().build(), stem().build()
    assert not torch.equal(c.n1.weight, d.n1.weight)


def test_token_ids_outside_the_vocab_are_e_value():
    model = stem().build(seed=0)
    for bad in (500, -1):
        ids = torch.zeros(2, 12, dtype=torch.long)
        ids[1, 3] = bad
        with pytest.raises(StackError) as info:
            model(ids)
        err = info.value
        assert err.code == "E_VALUE" and f"token id {bad}" in err.message
        assert (err.node, err.line) == ("n0", 1) and "embedding(500, 16)" in str(err)


def test_symbolic_length_is_checked_at_run_time():
    net = resolve("embedding(500, 16)\npos_embed(32)\nlinear(4)", ["B", "T"], input_dtype="int64")
    assert [r.text for r in net.requires] == ["T <= 32"]
    model = net.build(seed=0)
    assert model(torch.randint(0, 500, (2, 32))).shape == (2, 32, 4)
    with pytest.raises(StackError) as info:
        model(torch.randint(0, 500, (2, 33)))
    err = info.value
    assert err.code == "E_CONSTRAINT" and "T=33" in err.message and err.line == 2


def test_wrong_inputs_at_run_time():
    model = stem().build(seed=0)
    with pytest.raises(StackError) as info:
        model(torch.randn(2, 12))
    assert info.value.code == "E_DTYPE"
    with pytest.raises(StackError) as info:
        model(torch.randint(0, 500, (2, 12, 3)))
    assert info.value.code == "E_SHAPE"
    floats = resolve("pos_embed(8)\nlinear(2)", ["B", 4, 16]).build(seed=0)
    with pytest.raises(StackError) as info:
        floats(torch.randn(2, 4, 24))  # the model was built for 16 features
    assert info.value.code == "E_SHAPE" and "[B, 4, 16]" in info.value.message
    with pytest.raises(StackError) as info:
        floats(torch.ones(2, 4, 16, dtype=torch.long))
    assert info.value.code == "E_DTYPE"
    assert floats(torch.randn(2, 4, 16, dtype=torch.float64)).dtype == torch.float32


def test_re_resolving_a_longer_input_keeps_the_same_module():
    short, longer = stem(T=12), stem(T=24)
    model = short.build(seed=0)
    with torch.no_grad():
        model.n1.weight[:12] += 1.0  # stands in for training the first 12 rows
    trained = model.n1.weight.detach().clone()
    model.use_network(longer)
    assert model.network is longer
    out = model(torch.randint(0, 500, (2, 24)))
    assert out.shape == (2, 24, 4)
    assert torch.equal(model.n1.weight, trained)  # trained rows carried over, the rest untouched
    with pytest.raises(StackError) as info:  # resolved for 24: another length needs a re-resolve
        model(torch.randint(0, 500, (2, 5)))
    assert info.value.code == "E_SHAPE" and "use_network" in info.value.hint
    model.use_network(resolve(STEM, ["B", "T"], input_dtype="int64"))
    assert model(torch.randint(0, 500, (2, 5))).shape == (2, 5, 4)
    with pytest.raises(StackError) as info:
        model(torch.randint(0, 500, (2, 40)))
    assert info.value.code == "E_CONSTRAINT"
    with pytest.raises(StackError) as info:
        model.use_network(stem(T=12, dtype="float64"))
    assert info.value.code == "E_DTYPE"
    with pytest.raises(StackError):
        model.use_network(resolve("embedding(500, 8)\npos_embed(32)\nlinear(4)", ["B", 12],
                                  input_dtype="int64"))


def test_concrete_and_repeated_dims_are_enforced_at_run_time():
    model = resolve("pos_embed(32)", [4, 12, 16]).build(seed=0)
    with pytest.raises(StackError) as info:
        model(torch.randn(3, 12, 16))
    assert info.value.code == "E_SHAPE" and "[4, 12, 16]" in info.value.message
    square = resolve("relu()", ["N", "N"]).build(seed=0)
    assert square(torch.randn(5, 5)).shape == (5, 5)
    with pytest.raises(StackError):
        square(torch.randn(5, 6))


def test_a_seeded_build_leaves_the_cuda_generator_alone(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "manual_seed_all", lambda seed: calls.append(seed))
    stem().build(seed=3)
    assert calls == []


def test_attention_causal_masks_the_future():
    net = resolve("attention(2, causal=true)", ["B", 6, 8])
    model = net.build(seed=0)
    x = torch.randn(1, 6, 8)
    y = x.clone()
    y[:, 4:] += 10.0  # change only the last two positions
    assert torch.allclose(model(x)[:, :4], model(y)[:, :4], atol=1e-6)


# --- branching stacks (SPEC §18) ----------------------------------------------------------

from stacklab.ops.add import PRE_LN_BLOCK  # noqa: E402


def pre_ln(T=64, **kw):
    return resolve(PRE_LN_BLOCK, ["B", T], input_dtype="int64", **kw)


def test_branching_forward_is_the_graph_spelled_out():
    net = pre_ln()
    model = net.build(seed=0).train(False)
    assert list(model._modules) == [n.name for n in net.nodes]
    assert sum(p.numel() for p in model.parameters()) == net.param_count == 16_832
    x = torch.randint(0, 32, (2, 64))
    m = model._modules
    with torch.no_grad():
        x0 = m["x0"](m["tok"](x))
        h1 = m["h1"](m["n2"](x0))
        x1 = x0 + h1
        m1 = m["m1"](m["n7"](m["n6"](m["n5"](x1))))
        expected = m["n10"](x1 + m1)
        torch.testing.assert_close(model(x), expected)


def test_attention_without_residual_is_the_branch_alone():
    x = torch.randn(2, 6, 8)
    both = resolve("attention(2)\nattention(2, residual=false)", ["B", 6, 8]).build(seed=0)
    with_residual, alone = both._modules["n0"], both._modules["n1"]
    alone.load_state_dict(with_residual.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(with_residual(x), x + alone(x))


def test_branching_outputs_are_let_go_after_their_last_reader():
    from stacklab.core.build import graph_plan

    plan = {name: (reads, done) for name, reads, done in graph_plan(pre_ln())}
    assert plan["x1"] == (("x0", "h1"), ("x0", "h1"))  # x0 is kept until x1 has read it
    assert plan["tok"] == ((None,), (None,)) and plan["n2"][1] == ()
    assert graph_plan(stem()) is None  # a chain runs as before


def test_branching_stack_re_resolves_and_checks_at_run_time():
    model = pre_ln().build(seed=0)
    short = pre_ln(T=16)
    model.use_network(short)
    assert tuple(model(torch.randint(0, 32, (2, 16))).shape) == (2, 16, 32)
    symbolic = resolve(PRE_LN_BLOCK, ["B", "T"], input_dtype="int64")
    model = symbolic.build(seed=0)
    assert [r.text for r in symbolic.requires] == ["T <= 64"]
    with pytest.raises(StackError) as info:
        model(torch.randint(0, 32, (1, 65)))
    assert info.value.code == "E_CONSTRAINT"


def test_branching_state_dict_keys_and_checkpoint_round_trip(tmp_path):
    from stacklab.lab.runs.checkpoint import load_checkpoint, save_checkpoint

    net = pre_ln()
    model = net.build(seed=0)
    assert set(model.state_dict()) == set(net.state_shapes())
    path = tmp_path / "model.safetensors"
    save_checkpoint(path, model)
    x = torch.randint(0, 32, (2, 64))
    for loaded in (load_checkpoint(path, net), load_checkpoint(path)):  # its own metadata too
        assert loaded.network.table() == net.table()
        with torch.no_grad():
            torch.testing.assert_close(loaded.model.train(False)(x), model.train(False)(x))


def test_forward_from_a_node_runs_the_rest_of_a_branching_stack():
    net = pre_ln()
    model = net.build(seed=0).train(False)
    x = torch.randint(0, 32, (2, 64))
    m = model._modules
    with torch.no_grad():
        x0 = m["x0"](m["tok"](x))
        torch.testing.assert_close(model.forward_from("x0", x0), model(x))
        torch.testing.assert_close(model.forward_from("x0", x0, until="x1"),
                                   m["h1"](m["n2"](x0)))
        with pytest.raises(StackError) as info:
            model.forward_from("n2", m["n2"](x0))  # x1 reads x0, from before n2
    assert info.value.code == "E_SHAPE" and "x1 reads x0" in info.value.message
    chain = stem().build(seed=0)
    ids = torch.randint(0, 500, (2, 12))
    with torch.no_grad():
        torch.testing.assert_close(chain.forward_from("n0", chain.n0(ids)), chain(ids))
