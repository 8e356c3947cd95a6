"""The CUDA path, checked on a real GPU: `python bench/gpu_check.py` (exits 0 when all holds).

Prints, beside the CPU figures: every task's preset trained on cuda (time to 99% held-out
accuracy), the induction preset (two causal attentions) and a branching stack (pre-LN blocks) each trained a few hundred steps on cuda (finite losses, parameters on the
device, steps per second), pos_embed's exact-zero gradient past T on the device, the
compute dtypes, and how many host syncs a training step makes (torch's sync debug mode
counts them). Without a CUDA device it says so and exits 0: there is nothing to check.
"""

from __future__ import annotations

import json
import math
import sys
import time
import warnings
from pathlib import Path

import torch

import stacklab
from stacklab.lab.tasks import TASKS


# the pre-LN example, sized for the induction task (16 token ids in, 15 classes out)
PRE_LN = """tok = embedding(16, 32)
x0 = pos_embed(64)
layer_norm()
h1 = attention(2, causal=true, residual=false)
x1 = add(x0, h1)
layer_norm()
linear(128)
gelu()
m1 = linear(32)
x2 = add(x1, m1)
linear(15)
"""
STEPS = 300  # each deeper stack trains this many steps on cuda


def deeper_stacks() -> tuple[dict, bool]:
    """The induction preset and the branching pre-LN stack, each trained STEPS steps on cuda
    (every step, no early stop): the run's device, its parameters' device, finite losses,
    steps per second."""
    report, ok = {}, True
    for label, source in (("induction_preset", None), ("branching_pre_ln", PRE_LN)):
        run = stacklab.train(source, task="induction", device="cuda", seed=0, steps=STEPS)
        torch.cuda.synchronize()
        losses = [value for _, value in run.train_loss] + [e["loss"] for e in run.history]
        on_cuda = all(p.device.type == "cuda" for p in run.model.parameters())
        finite = bool(losses) and all(math.isfinite(v) for v in losses)
        report[label] = {"status": str(run.status), "steps": run.step, "on": run.device,
                         "parameters_on_cuda": on_cuda, "finite": finite,
                         "accuracy": round(run.final["accuracy"], 4),
                         "steps_per_second": round(run.step / run.seconds, 1)}
        ok &= run.step == STEPS and run.device == "cuda" and on_cuda and finite
    return report, ok


def length_table_on_cuda() -> tuple[dict, bool]:
    """bench/length_table.py's whole table (every encoding x length task x seeds 0-2) on
    cuda, beside the CPU time recorded in docs/length_generalization/timing.json: the
    target is a tenth of it."""
    sys.path.insert(0, str(Path(__file__).parent))
    import length_table

    recorded = json.loads((length_table.OUT / "timing.json").read_text())
    rows, seconds = length_table.build_table(recorded["steps"], range(3), "cuda")
    report = {"cuda_seconds": round(seconds, 1), "cpu_seconds_recorded": recorded["seconds"],
              "runs": len(rows), "cuda_over_cpu": round(seconds / recorded["seconds"], 3)}
    return report, seconds <= recorded["seconds"] / 10


def main() -> int:
    if not torch.cuda.is_available():
        print("no CUDA device here (torch.cuda.is_available() is False): nothing to check; "
              "run this on a machine with a GPU")
        return 0
    torch.set_num_threads(2)
    report: dict = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__}
    ok = True
    for name in (name for name, task in TASKS.items() if task.target_accuracy is not None):
        row = {}
        for device in ("cpu", "cuda"):
            run = stacklab.train(task=name, device=device, seed=0, target_accuracy=0.99)
            if device == "cuda":
                torch.cuda.synchronize()
            row[device] = {"seconds": round(run.seconds, 2), "steps": run.step,
                           "accuracy": round(run.final["accuracy"], 4), "on": run.device}
            ok &= run.final["accuracy"] >= 0.99 and run.device == device
        report[name] = row
    table, table_ok = length_table_on_cuda()
    report["length_table"] = table
    ok &= table_ok
    deeper, deeper_ok = deeper_stacks()
    report.update(deeper)
    ok &= deeper_ok
    # exact zeros past T on the device, in every compute dtype
    for dtype in ("float32", "bfloat16", "float16"):
        net = stacklab.resolve("embedding(500, 16)\npos_embed(32)\nlinear(4)", ["B", 12],
                               input_dtype="int64", dtype=dtype)
        model = net.build(seed=0, device="cuda")
        model(torch.randint(0, 500, (8, 12), device="cuda")).float().square().sum().backward()
        grad = model.n1.weight.grad
        zero = bool((grad[12:] == 0).all()) and bool((grad[:12].float().norm(dim=1) > 0).all())
        report[f"zero_grad_past_T_{dtype}"] = zero
        ok &= zero
    # host syncs per training step (beyond the progress check every 10 steps)
    trainer = stacklab.Trainer(None, stacklab.TrainConfig(task="reverse", steps=40, device="cuda",
                                                          eval_every=1000))
    torch.cuda.set_sync_debug_mode("warn")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        trainer.run()
        torch.cuda.synchronize()
        elapsed = time.perf_counter() - start
    torch.cuda.set_sync_debug_mode(0)
    report["syncs_in_40_steps"] = len(caught)
    report["ms_per_step"] = round(elapsed / 40 * 1e3, 2)
    print(json.dumps(report, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
