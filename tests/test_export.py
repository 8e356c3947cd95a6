"""Exported PyTorch code runs standalone and computes what the built stack computes."""

from __future__ import annotations

import json
import subprocess
import sys

import torch
from safetensors.torch import load_file, save_file

from stacklab import resolve
from stacklab.core.export import to_pytorch
from stacklab.core.spec import catalog

RUNNER = '''
import importlib.util, json, sys
import torch
from safetensors.torch import load_file, save_file
results = {}
for case in json.loads(sys.argv[1]):
    spec = importlib.util.spec_from_file_location("exported", case["file"])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    net = module.Net().to(getattr(torch, case["dtype"]))
    results[case["file"]] = {"params": sum(p.numel() for p in net.parameters()),
                             "keys": sorted(net.state_dict())}
    net.load_state_dict(load_file(case["state"]))
    net.train(False)
    with torch.no_grad():
        save_file({"out": net(load_file(case["input"])["x"])}, case["output"])
print(json.dumps(results))
'''


def test_every_example_exports_to_equivalent_standalone_code(tmp_path):
    cases, expected = [], {}
    examples = [ex for spec in catalog().values() for ex in spec.examples]
    examples.append(type(examples[0])("a comment with quotes", 'x = linear(3)  # """ C:\\x', ("B", 4)))
    for number, example in enumerate(examples):
        network = resolve(example.stack, example.input_shape, input_dtype=example.input_dtype)
        model = network.build(seed=number).train(False)
        shape = [d if isinstance(d, int) else 3 for d in network.input_shape]
        x = (torch.randint(0, 5, shape) if network.input_dtype.startswith("int")
             else torch.randn(shape))
        paths = {name: str(tmp_path / f"{number}_{name}") for name in
                 ("net.py", "state.safetensors", "input.safetensors", "output.safetensors")}
        (tmp_path / f"{number}_net.py").write_text(to_pytorch(network))
        save_file({k: v.contiguous() for k, v in model.state_dict().items()}, paths["state.safetensors"])
        save_file({"x": x}, paths["input.safetensors"])
        with torch.no_grad():
            expected[paths["net.py"]] = (network, model(x), paths["output.safetensors"])
        cases.append({"file": paths["net.py"], "state": paths["state.safetensors"],
                      "input": paths["input.safetensors"], "output": paths["output.safetensors"],
                      "dtype": network.dtype})
    done = subprocess.run([sys.executable, "-c", RUNNER, json.dumps(cases)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)
    for file, (network, out, output_path) in expected.items():
        assert results[file]["params"] == network.param_count
        assert results[file]["keys"] == sorted(network.state_shapes())
        torch.testing.assert_close(load_file(output_path)["out"], out)


def test_branching_export_names_variables_after_nodes_and_runs(tmp_path):
    """A branching stack's forward keeps each output in a variable named after its node;
    names that Python's forward already uses (self, x) are renamed, never shadowed."""
    source = "x = linear(8)\nself = relu()\nx_ = linear(8)\nadd(x, x_)\nadd(self, n3)"
    network = resolve(source, ["B", 4])
    code = to_pytorch(network)
    assert "        x__ = self.x(x)  # [B, 8]" in code
    assert "        n4 = self.n4(self_, n3)  # [B, 8]" in code and "return n4" in code
    namespace: dict = {}
    exec(compile(code, "exported.py", "exec"), namespace)  # our own generated code
    exported = namespace["Net"]()
    model = network.build(seed=0).train(False)
    exported.load_state_dict(model.state_dict())
    x = torch.randn(3, 4)
    with torch.no_grad():
        torch.testing.assert_close(exported(x), model(x))


def test_many_threads_export_at_once_and_agree():
    """The app exports in every session's thread (Build). ``inspect.getsource`` parses op
    files with ``ast.parse``, which CPython 3.11 does not survive in many threads at once
    (issue 28: "SystemError: AST constructor recursion depth mismatch" under load); the
    export reads each op's source once, under a lock, so 24 threads started together on a
    cold cache all give the one export."""
    import threading

    from stacklab.core import export

    network = resolve("embedding(16, 32)\npos_embed(16)\nlayer_norm()\n"
                      "attention(4, causal=true)\nlinear(64)\nrelu()\ngelu()\ndropout(0.1)\n"
                      "linear(16)", ["B", 16], input_dtype="int64")
    expected = to_pytorch(network)
    export._SOURCES.clear()  # cold, as in a fresh server process
    start = threading.Barrier(24)
    results, errors = [], []

    def one():
        start.wait()
        try:
            results.append(to_pytorch(network))
        except Exception as err:  # noqa: BLE001  (any error of any thread fails the test)
            errors.append(repr(err))

    threads = [threading.Thread(target=one) for _ in range(24)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and results == [expected] * 24
    things = {thing for node in network.nodes for thing in node.spec.torch_source}
    assert set(export._SOURCES) == things  # each read once, and kept
