"""The presets sweep (issue 30 item 7): for every task, the smallest stack and fewest steps
that still reach the task's target accuracy and hold its pattern-score floor, seeds 0-2.

    nice -n 10 .venv/bin/python bench/presets.py      # about ten minutes on two busy cores;
                                                       # writes bench/presets.json and .md

Each candidate is a stack (width D, heads H, hidden F of the task's preset shape) and a
learning rate; it trains seeds 0, 1, 2 to the task's target accuracy (the run stops there)
and holds when every seed reaches it and its pattern score is at least the floor of
`bench/pattern_scores.py` plus a margin. Its cost is the training FLOPs to target, machine
independent: 3 forward passes per sequence per step (forward, backward, update), times the
batch, times the most steps a seed needed. A candidate that misses on one seed is dropped
without training the others.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch

import stacklab
from stacklab.lab.tasks import TASKS, preset_max_len

sys.path.insert(0, str(Path(__file__).parent))
from pattern_scores import FLOORS, SEEDS  # noqa: E402

HERE = Path(__file__).parent
MARGIN = 0.05  # a candidate's pattern score must clear the floor by this much on every seed
DEADLINE = 9 * 60  # seconds; what has not run by then is reported as not tried

MIXER = ("embedding({vocab}, {D})\npos_embed({max_len})\nattention({H}{causal})\nlayer_norm()\n"
         "linear({F})\nrelu()\nlinear({classes})")
TWO_LAYERS = ("embedding({vocab}, {D})\npos_embed({max_len})\nattention({H}, causal=true)\n"
              "attention({H}, causal=true)\nlinear({classes})")
ONE_LAYER = ("embedding({vocab}, {D})\npos_embed({max_len})\nattention({H}, causal=true)\n"
             "linear({classes})")
MLP = "embedding({vocab}, {D})\npos_embed({max_len})\nlinear({F})\nrelu()\nlinear({classes})"
LINEAR = "embedding({vocab}, {D})\npos_embed({max_len})\nlinear({classes})"

# task -> (shape, candidates (D, H, F, lr, steps ceiling)); the first is today's preset
MIXER_CANDIDATES = [(64, 4, 128, 3e-3, 800), (32, 2, 64, 1e-2, 400), (16, 2, 32, 1e-2, 400)]
SWEEP = {
    "reverse": (MIXER, "", MIXER_CANDIDATES),
    "shift": (MIXER, "", MIXER_CANDIDATES),
    "lookback": (MIXER, ", causal=true", MIXER_CANDIDATES),
    "sort": (MIXER, "", [(64, 4, 128, 3e-3, 800), (32, 2, 64, 1e-2, 800),
                         (32, 2, 64, 3e-3, 800)]),
    "modular": (MLP, "", [(32, 0, 128, 3e-3, 300), (16, 0, 64, 1e-2, 300),
                          (32, 0, 64, 1e-2, 300)]),
    "position": (LINEAR, "", [(32, 0, 0, 3e-3, 200), (16, 0, 0, 1e-2, 200),
                              (32, 0, 0, 1e-2, 200)]),
    # the head-score tests pin four heads per attention layer for induction and repeat
    "induction": (TWO_LAYERS, "", [(64, 4, 0, 3e-3, 300), (32, 4, 0, 1e-2, 300),
                                   (32, 4, 0, 3e-3, 300)]),
    "repeat": (ONE_LAYER, "", [(64, 4, 0, 3e-3, 400), (32, 4, 0, 1e-2, 400),
                               (32, 4, 0, 3e-3, 400)]),
}


def stack_for(name: str, shape: str, causal: str, D: int, H: int, F: int) -> str:
    task = TASKS[name]
    T = task.default_seq_len
    return shape.format(vocab=task.vocab, D=D, H=H, F=F, causal=causal,
                        max_len=preset_max_len(T), classes=task.n_classes(T))


def try_candidate(name: str, source: str, lr: float, ceiling: int, full: bool = False) -> dict:
    """Seeds 0-2 of one candidate; stops at the first seed that misses (unless ``full``)."""
    task = TASKS[name]
    runs, started = [], time.perf_counter()
    for seed in SEEDS:
        run = stacklab.train(source, task=name, seed=seed, lr=lr, steps=ceiling,
                             target_accuracy=task.target_accuracy)
        pattern = run.position_table_scores()[run.position_nodes[0]]["pattern"]
        reached = run.final["accuracy"] >= (task.target_accuracy or 0)
        runs.append({"seed": seed, "steps": run.step, "accuracy": run.final["accuracy"],
                     "pattern": pattern["value"], "seconds": round(run.seconds, 2),
                     "reached": bool(reached)})
        if not full and (not reached or pattern["value"] < FLOORS[name] + MARGIN):
            break
    per_sequence = run.network.flops(batch=1)
    steps = max(r["steps"] for r in runs)
    holds = len(runs) == len(SEEDS) and all(
        r["reached"] and r["pattern"] >= FLOORS[name] + MARGIN for r in runs)
    return {"stack": source, "lr": lr, "runs": runs, "holds": holds, "steps_to_target": steps,
            "flops_to_target": 3.0 * per_sequence * task.batch_size * steps,
            "wall_seconds": round(time.perf_counter() - started, 1)}


def sweep(names: list[str]) -> dict:
    torch.set_num_threads(1)
    found, start = {}, time.perf_counter()
    for name in names:
        shape, causal, candidates = SWEEP[name]
        rows = []
        for index, (D, H, F, lr, ceiling) in enumerate(candidates):
            if time.perf_counter() - start > DEADLINE:
                rows.append({"stack": stack_for(name, shape, causal, D, H, F), "lr": lr,
                             "not_tried": "over the sweep's time"})
                continue
            rows.append(try_candidate(name, stack_for(name, shape, causal, D, H, F), lr, ceiling,
                                      full=index == 0))
            print(name, D, H, F, lr, rows[-1]["holds"], rows[-1]["steps_to_target"], flush=True)
        holding = [r for r in rows if r.get("holds")]
        best = min(holding, key=lambda r: r["flops_to_target"]) if holding else None
        found[name] = {"floor": FLOORS[name], "margin": MARGIN, "old": rows[0],
                       "best": best, "candidates": rows}
    return found


def table(found: dict) -> str:
    lines = ["| task | old preset: steps, FLOPs to target | cheapest that holds: stack, lr | "
             "steps | FLOPs to target | ratio | pattern (min) |", "|---|---|---|---|---|---|---|"]
    for name, row in found.items():
        old, best = row["old"], row["best"]
        if best is None or "runs" not in old:
            lines.append(f"| {name} | (not measured) | none held | | | | |")
            continue
        stack = best["stack"].replace("\n", " → ")
        lines.append(
            f"| {name} | {old['steps_to_target']}, {old['flops_to_target']:.3g} | `{stack}`, "
            f"{best['lr']:g} | {best['steps_to_target']} | {best['flops_to_target']:.3g} | "
            f"{best['flops_to_target'] / old['flops_to_target']:.2f} | "
            f"{min(r['pattern'] for r in best['runs']):.2f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    result = sweep(sys.argv[1:] or list(SWEEP))
    (HERE / "presets.json").write_text(json.dumps(result, indent=2) + "\n")
    (HERE / "presets.md").write_text(
        "# Presets sweep (bench/presets.py)\n\nSeeds 0-2, one thread; a candidate holds when "
        f"every seed reaches the task's target accuracy and its pattern score is at least the "
        f"floor + {MARGIN}. FLOPs to target: 3 × forward FLOPs per sequence × batch × the most "
        "steps a seed needed.\n\n" + table(result) + "\n")
    print(table(result))
