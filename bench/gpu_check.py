"""The CUDA path, checked on a real GPU: `python bench/gpu_check.py` (exits 0 when all holds).

Prints, beside the CPU figures: every task's preset trained on cuda (time to 99% held-out
accuracy), pos_embed's exact-zero gradient past T on the device, the compute dtypes, and
how many host syncs a training step makes (torch's sync debug mode counts them).
"""

from __future__ import annotations

import json
import sys
import time
import warnings

import torch

import stacklab
from stacklab.lab.tasks import TASKS


def main() -> int:
    if not torch.cuda.is_available():
        print("no CUDA device here; nothing to check")
        return 2
    torch.set_num_threads(2)
    report: dict = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__}
    ok = True
    for name in TASKS:
        row = {}
        for device in ("cpu", "cuda"):
            run = stacklab.train(task=name, device=device, seed=0, target_accuracy=0.99)
            if device == "cuda":
                torch.cuda.synchronize()
            row[device] = {"seconds": round(run.seconds, 2), "steps": run.step,
                           "accuracy": round(run.final["accuracy"], 4), "on": run.device}
            ok &= run.final["accuracy"] >= 0.99 and run.device == device
        report[name] = row
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
